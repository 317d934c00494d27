r"""token_dynamics: deep transformers as interacting particle systems.

The library behind the book *Token dynamics*. Tokens are particles; self-attention is the
velocity field they create together; depth is time.

Array conventions
-----------------
- Tokens ``X`` have shape ``(n, d)``, one token per row; a trajectory has shape ``(T, n, d)``,
  time first, with ``times`` of shape ``(T,)``; probability weights have shape ``(n,)`` and sum
  to one (``None`` means the uniform weights ``1/n`` of the empirical measure). Arrays are
  float64; nothing passed in is modified.
- Attention: :math:`A = K^\top Q/\sqrt{k}`, the score of query :math:`x_i` on key :math:`x_j`
  is :math:`s_{ij} = \langle A x_i, x_j\rangle` (``S = X @ A.T @ X.T``), the softmax normalises
  over the key index ``j`` (rows of the attention matrix sum to one) and a head outputs
  :math:`V\sum_j P_{ij} x_j`.
- Randomness: every random function takes a keyword-only ``rng`` (a Generator, a seed or None).
- Solvers (``integrate``, ``gaussian.solve_moments``) share one vocabulary -- ``times``, ``dt``,
  ``method``, ``rtol``/``atol``, ``progress`` -- and return results with ``.times``,
  ``.status`` and ``.message``.
- Failures: a bad argument raises ``ValueError``/``TypeError`` naming it; a numerical failure
  (blow-up, non-finite state or field, non-convergence) raises ``FloatingPointError`` naming the
  time, method and quantity, or returns a result whose ``status`` says so where the API has one
  (the moment solvers). Nothing returns NaN silently.

Modules
-------
``attention`` (every variant as a velocity field), ``geometry`` (the sphere), ``integrators``
(``integrate`` and ``Trajectory``), ``discretisation`` (their error against the step),
``sampling``, ``diagnostics``, ``wasserstein`` (the only
module that calls POT), ``meanfield``, ``gaussian``, ``gradient_flow``, ``stochastic``,
``interpolation``, ``clustering`` (long-time clustering); ``plotting`` and ``widgets`` are
leaves, not imported here, and so is
``exercises`` (the check-your-answer cells of the book's computational exercises).

Examples
--------
>>> import numpy as np
>>> import token_dynamics as td
>>> X0 = td.uniform_sphere(8, 3, rng=0)
>>> field = td.Softmax(np.eye(3), np.eye(3), beta=2.0)
>>> traj = td.integrate(field, X0, np.linspace(0, 1, 5), geometry="sphere")
>>> traj.states.shape
(5, 8, 3)
"""

from importlib import metadata as _metadata

from . import (
    attention,
    clustering,
    diagnostics,
    discretisation,
    gaussian,
    geometry,
    gradient_flow,
    integrators,
    meanfield,
    sampling,
    wasserstein,
)
from .attention import (
    L2,
    AttentionField,
    Causal,
    Hardmax,
    Linear,
    MultiHead,
    Sigmoid,
    Sinkhorn,
    SinkhornPlan,
    Softmax,
    Unnormalised,
    make_field,
    sinkhorn_plan,
    with_positions,
)
from .diagnostics import (
    cluster_count,
    diameter,
    empirical_covariance,
    empirical_mean,
    interaction_energy,
    min_inner_product,
    numerical_rank,
)
from .geometry import normalize, project_tangent
from .integrators import Trajectory, integrate
from .sampling import gaussian_cloud, gaussian_mixture, uniform_sphere

try:
    __version__ = _metadata.version("token-dynamics")
except _metadata.PackageNotFoundError:  # pragma: no cover - a source tree without install
    __version__ = "0+unknown"

__all__ = [
    "L2",
    "AttentionField",
    "Causal",
    "Hardmax",
    "Linear",
    "MultiHead",
    "Sigmoid",
    "Sinkhorn",
    "SinkhornPlan",
    "Softmax",
    "Trajectory",
    "Unnormalised",
    "__version__",
    "attention",
    "cluster_count",
    "clustering",
    "diagnostics",
    "diameter",
    "discretisation",
    "empirical_covariance",
    "empirical_mean",
    "gaussian",
    "gaussian_cloud",
    "gaussian_mixture",
    "geometry",
    "gradient_flow",
    "integrate",
    "integrators",
    "interaction_energy",
    "make_field",
    "meanfield",
    "min_inner_product",
    "normalize",
    "numerical_rank",
    "project_tangent",
    "sampling",
    "sinkhorn_plan",
    "uniform_sphere",
    "wasserstein",
    "with_positions",
]
