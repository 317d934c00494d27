r"""Well-posedness and the mean-field limit of the Transformer PDE.

The particle system :math:`\dot x_i = \Gamma_{\mu^n(t)}(x_i)` is the Transformer PDE
:math:`\partial_t\mu + \operatorname{div}(\mu\Gamma_\mu) = 0` started from the empirical measure
:math:`\mu^n_0`. Its well-posedness and its mean-field limit rest on three estimates for
softmax attention on measures supported in the ball :math:`B(0, R)`:

- the support radius grows at most like :math:`R_0 e^{\lVert V\rVert t}`
  (:func:`support_radius_bound`);
- :math:`x \mapsto \Gamma_\mu(x)` is Lipschitz with constant
  :math:`\beta\lVert V\rVert\lVert A\rVert R^2` (:func:`lipschitz_x`,
  :func:`softmax_jacobian`);
- :math:`\mu \mapsto \Gamma_\mu(x)` is Lipschitz in :math:`W_1` with constant
  :math:`\lVert V\rVert(1 + 2\beta\lVert A\rVert R^2)e^{2\beta\lVert A\rVert R^2}`
  (:func:`lipschitz_measure`),

and Gronwall's lemma turns them into the stability constant :func:`stability_constant`.
The same three constants for every variant (l2, sigmoid, Sinkhorn, multi-head, masked, with
constant or time-dependent parameters) come from :func:`field_constants`; their Gronwall bound
from :func:`gronwall_bound`, compared with two measured flows by :func:`stability_check`.
The exact Gaussian solutions used as references
(:func:`~token_dynamics.gaussian.softmax_gaussian_1d`,
:func:`~token_dynamics.gaussian.softmax_gaussian_centred`, returning a
:class:`~token_dynamics.gaussian.GaussianPath`) live in :mod:`token_dynamics.gaussian`, and the
power-law fit of the rates (:func:`~token_dynamics.diagnostics.fit_power_law`) in
:mod:`token_dynamics.diagnostics`: each object has one home, and this package does not
re-export them. The module also gives the mean-field
experiments (:func:`mean_field_errors`, :func:`stability_ratios`) and the helpers of masked (causal)
attention with positions in column 0 (:func:`causal_cloud`, :func:`first_token_solution`,
:func:`conditional_sensitivity`, :func:`first_token_sensitivity`).

References
----------
.. [1] V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, "A Unified Perspective on the Dynamics of
   Deep Transformers", arXiv:2501.18322, 2025.
.. [2] N. Fournier and A. Guillin, "On the rate of convergence in Wasserstein distance of the
   empirical measure", Probab. Theory Relat. Fields 162, 2015.
"""

from ._estimates import (
    lipschitz_measure,
    lipschitz_x,
    softmax_jacobian,
    support_radius,
    support_radius_bound,
)
from ._experiments import (
    MeanFieldErrors,
    StabilityRun,
    mean_field_errors,
    stability_ratios,
)
from ._gronwall import StabilityBound, gronwall_bound, stability_constant
from ._lipschitz import FieldConstants, field_constants, measured_constants
from ._masked import (
    MaskedCloud,
    Sensitivity,
    causal_cloud,
    conditional_sensitivity,
    first_token_sensitivity,
    first_token_solution,
)
from ._stability import StabilityCheck, stability_check

__all__ = [
    "FieldConstants",
    "MaskedCloud",
    "MeanFieldErrors",
    "Sensitivity",
    "StabilityBound",
    "StabilityCheck",
    "StabilityRun",
    "causal_cloud",
    "conditional_sensitivity",
    "field_constants",
    "first_token_sensitivity",
    "first_token_solution",
    "gronwall_bound",
    "lipschitz_measure",
    "lipschitz_x",
    "mean_field_errors",
    "measured_constants",
    "softmax_jacobian",
    "stability_check",
    "stability_constant",
    "stability_ratios",
    "support_radius",
    "support_radius_bound",
]
