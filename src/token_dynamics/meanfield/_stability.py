r"""Measured stability of two token flows against the Gronwall bound of their variant (private)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import as_tokens, as_weights
from ..attention import Causal
from ._estimates import StabilityBound, support_radius
from ._experiments import DEFAULT_DT, StabilityRun, stability_ratios
from ._lipschitz import gronwall_bound

__all__ = ["StabilityCheck", "stability_check"]

#: Slack on the comparison of log-ratios: the RK4 error of the measured distances (relative
#: ~dt^4 ~ 1e-5 at the default step) is far below it, and a violation of the bound is not.
LOG_SLACK = 1e-6


@dataclass(frozen=True)
class StabilityCheck:
    r"""A measured stability run and the Gronwall bound it must obey.

    Attributes
    ----------
    run : StabilityRun
        :math:`W_p(\mu_t, \nu_t)` and its ratio to the initial distance.
    bound : StabilityBound
        :math:`\log C(t, R_0)` from :func:`gronwall_bound`.
    R0 : float
        Radius of the smallest centred ball holding both initial supports (contents only for
        masked attention).
    p : int
        Order of the distance.
    """

    run: StabilityRun
    bound: StabilityBound
    R0: float
    p: int

    @property
    def holds(self) -> bool:
        """Whether :math:`\\log(W_p(t)/W_p(0)) \\le \\log C(t, R_0)` at every output time."""
        return bool(np.all(np.log(self.run.ratio) <= self.bound.log_constant + LOG_SLACK))

    @property
    def looseness(self) -> float:
        r"""Decades between the bound and the measured ratio at the last time.

        :math:`\log_{10} C(T, R_0) - \log_{10}(W_p(T)/W_p(0))`: 0 means sharp, 1 a factor 10.
        """
        return float((self.bound.log_constant[-1] - np.log(self.run.ratio[-1])) / np.log(10))


def stability_check(
    field: Any,
    X0: Any,
    Y0: Any,
    times: Any,
    *,
    p: int = 2,
    weights: Any = None,
    sink_mass: float | None = None,
    dt: float = DEFAULT_DT,
) -> StabilityCheck:
    r"""Flow two nearby clouds and compare :math:`W_p(\mu_t,\nu_t)/W_p(\mu_0,\nu_0)` with the bound.

    The Gronwall bound :math:`e^{\int_0^t (L_x + L_\mu)(R(s))\,ds}` is computed from the
    variant's own estimates (:func:`field_constants`) with :math:`R_0` the larger of the two
    initial support radii. For masked attention (``Causal``: positions in column 0) the
    distance is the conditional :math:`W_{2,\lambda}` and `sink_mass` is the atom of the
    position marginal at 0.

    Parameters
    ----------
    field : Softmax, L2, Sigmoid, Sinkhorn, MultiHead or Causal
    X0, Y0 : array_like, shape (n, d)
        The two initial clouds (same weights; for ``Causal``, same positions).
    times : array_like, shape (T,)
        Output times, from 0.
    p : {1, 2}
        Order of the Wasserstein distance (2 for ``Causal``).
    weights : array_like, shape (n,), optional
    sink_mass : float, optional
        For ``Causal``: the mass :math:`w_0` of the tokens at position 0.
    dt : float
        RK4 step.

    Returns
    -------
    StabilityCheck

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Sigmoid
    >>> X = np.linspace(-1, 1, 6)[:, None]
    >>> check = stability_check(Sigmoid([[0.5]], [[0.5]]), X, X + 0.01, [0.0, 0.5, 1.0])
    >>> check.holds
    True
    """
    X0 = as_tokens(X0, "X0")
    Y0 = as_tokens(Y0, "Y0", d=X0.shape[1])
    w = as_weights(weights, X0.shape[0])
    masked = isinstance(field, Causal)
    contents = slice(1, None) if masked else slice(None)
    R0 = max(support_radius(X0[:, contents], weights=w), support_radius(Y0[:, contents], weights=w))
    run = stability_ratios(field, X0, Y0, times, weights=weights, conditional=masked, p=p, dt=dt)
    bound = gronwall_bound(field, run.times, R0, sink_mass=sink_mass)
    return StabilityCheck(run=run, bound=bound, R0=R0, p=p)
