r"""Gradient-flow structure of attention dynamics: energies, twisted metrics, convexity.

For a measure :math:`\mu` and an attention matrix :math:`A` the *interaction energy* is

.. math::

    \mathcal E_A(\mu) = \frac12 \iint e^{\langle A x, y\rangle}\, d\mu(x)\, d\mu(y).

When :math:`A = A^\top` is invertible and :math:`P = V A^{-1}` is symmetric definite,
unnormalised attention :math:`\Gamma(x) = V\int e^{\langle Ax, y\rangle} y\, d\mu(y)` equals
:math:`P\nabla\frac{\delta\mathcal E}{\delta\mu}`: a gradient flow of :math:`\mathcal E` for the
*twisted* Wasserstein distance with ground cost :math:`(x-y)^\top (\pm P)^{-1}(x-y)`. Softmax
attention divides by :math:`Z_\mu(x) = \int e^{\langle Ax,y\rangle}d\mu(y)` and is a gradient
flow for the metric weighted by :math:`Z_\mu`. This module implements the construction derived
in the book (chapter "Gradient flows"), checked numerically in its tests; whether it coincides
with the twisted distance of Castin et al. (2025) is left open there.

Conventions (``book/notation.md``): tokens ``X`` of shape ``(n, d)``, scores
``S = X @ A.T @ X.T`` so that ``S[i, j] = <A x_i, x_j>``, weights ``(n,)`` summing to one.

References
----------
Castin, Ablin, Carrillo, Peyré, *A Unified Perspective on the Dynamics of Deep Transformers*,
arXiv:2501.18322. Sander, Ablin, Blondel, Peyré, *Sinkformers*, AISTATS 2022. Geshkovski,
Letrouit, Polyanskiy, Rigollet, *A Mathematical Perspective on Transformers*, arXiv:2312.10794.
"""

from ._circle import CircleMetastability, circle_metastability
from ._energy import (
    energy_along,
    energy_gradient,
    energy_rate,
    first_variation,
    monotonicity_sign,
    particle_energy,
    translation_second_variation,
)
from ._gaussian_energy import (
    GaussianEnergy,
    gaussian_energy,
    gaussian_energy_along,
    gaussian_translation_second_variation,
)
from ._metric import (
    GradientFlowCheck,
    TwistedMetric,
    TwistedMetricError,
    gradient_flow_check,
    softmax_metric_density,
    twisted_metric,
    twisted_wasserstein,
)
from ._monotonicity import energy_rate_formula, observed_monotonicity
from ._sampled_energy import sampled_gaussian_energy
from ._sinkhorn import (
    BuresWassersteinCheck,
    bures_wasserstein_velocity,
    sinkhorn_bures_wasserstein_check,
    sinkhorn_gaussian_cost,
)
from ._sinkhorn import _sinkhorn_cross_covariance as _sinkhorn_cross_covariance

__all__ = [
    "BuresWassersteinCheck",
    "CircleMetastability",
    "GaussianEnergy",
    "GradientFlowCheck",
    "TwistedMetric",
    "TwistedMetricError",
    "bures_wasserstein_velocity",
    "circle_metastability",
    "energy_along",
    "energy_gradient",
    "energy_rate",
    "energy_rate_formula",
    "first_variation",
    "gaussian_energy",
    "gaussian_energy_along",
    "gaussian_translation_second_variation",
    "gradient_flow_check",
    "monotonicity_sign",
    "observed_monotonicity",
    "particle_energy",
    "sampled_gaussian_energy",
    "sinkhorn_bures_wasserstein_check",
    "sinkhorn_gaussian_cost",
    "softmax_metric_density",
    "translation_second_variation",
    "twisted_metric",
    "twisted_wasserstein",
]
