r"""Measured stability of two token flows against the Gronwall bound of their variant (private)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike
from .._validation import as_tokens, as_weights
from ..attention import AttentionField, Causal
from ..attention._composite import is_masked
from ._estimates import support_radius
from ._experiments import StabilityRun, stability_ratios
from ._gronwall import StabilityBound, gronwall_bound
from ._lipschitz import _check_field, _check_sink_mass

__all__ = ["StabilityCheck", "stability_check"]

#: Slack on the comparison of log-ratios, for rounding: the bounds the book checks are loose by
#: decades (``looseness``), far above the RK4 error of the measured distances
#: (``run.step_error``), and a violation of a bound is not a matter of rounding.
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

    Examples
    --------
    Returned by :func:`stability_check`; ``holds`` compares the measured ratio with the
    bound at every time, ``looseness`` counts the decades between them at the last:

    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.meanfield import stability_check
    >>> X = np.linspace(-1, 1, 5)[:, None]
    >>> check = stability_check(Softmax([[-0.5]], [[0.5]]), X, X + 0.01, [0.0, 0.5], dt=0.05)
    >>> check.R0, check.p, check.holds, bool(check.looseness > 0)
    (1.01, 2, True, True)
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


@float_guard("the stability check", "rescale `X0` and `Y0` or shorten `times`")
def stability_check(
    field: AttentionField,
    X0: ArrayLike,
    Y0: ArrayLike,
    times: ArrayLike,
    *,
    p: int = 2,
    weights: ArrayLike | None = None,
    sink_mass: float | None = None,
    hardy: bool = False,
    dt: float | None = None,
) -> StabilityCheck:
    r"""Flow two nearby clouds and compare :math:`W_p(\mu_t,\nu_t)/W_p(\mu_0,\nu_0)` with the bound.

    The Gronwall bound :math:`e^{\int_0^t (L_x + L_\mu)(R(s))\,ds}` is computed from the
    variant's own estimates (:func:`field_constants`) with :math:`R_0` the larger of the two
    initial support radii. For masked attention (``Causal``, or a ``MultiHead`` of ``Causal``
    heads: positions in column 0) the distance is the conditional :math:`W_{p,\lambda}`,
    :math:`R_0` the radius of the contents, and the bound is either the sink bound
    (:math:`L_\mu/w_0` with :math:`w_0` the mass of the tokens at position 0, computed from
    the data) or, for one ``Causal`` head with `hardy`, the Hardy bound
    :math:`L_x + \frac{p}{p-1}L_\mu`, which needs no sink but one token per position, all of
    the same weight.

    Parameters
    ----------
    field : Softmax, L2, Sigmoid, Sinkhorn, MultiHead or Causal
    X0, Y0 : array_like, shape (n, d)
        The two initial clouds (same weights; for masked attention, same positions).
    times : array_like, shape (T,)
        Output times, from 0.
    p : {1, 2}
        Order of the Wasserstein distance (with `hardy`, 2: Hardy's inequality fails for
        ``p = 1``).
    weights : array_like, shape (n,), optional
    sink_mass : float, optional
        For masked attention: the sink mass :math:`w_0` used in the bound. Default: the mass of the
        tokens at position 0; a larger value would give a bound below the proved one and is
        refused.
    hardy : bool
        For one ``Causal`` head: use the Hardy bound instead of the sink bound.
    dt : float, optional
        RK4 step; by default chosen to meet RK4's default tolerance, the error reached in
        ``run.step_error`` (:func:`stability_ratios`).

    Returns
    -------
    StabilityCheck
        Its ``bound`` is that of :func:`gronwall_bound`: ``inf`` (void, and then ``holds``) from
        the time the constant leaves float64.

    Raises
    ------
    ValueError
        If `sink_mass` exceeds the mass at position 0 or is given for a field without a masked
        head, if there is no token at position 0 (for the sink bound), or if `hardy` is asked
        for without one token of equal weight per position or with ``p = 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Sigmoid
    >>> from token_dynamics.meanfield import stability_check
    >>> X = np.linspace(-1, 1, 6)[:, None]
    >>> check = stability_check(Sigmoid([[0.5]], [[0.5]]), X, X + 0.01, [0.0, 0.5, 1.0])
    >>> check.holds
    True

    A masked pair without a sink, with the Hardy bound:

    >>> from token_dynamics import meanfield as mf
    >>> from token_dynamics.attention import Causal
    >>> Z = mf.causal_cloud(np.linspace(-0.5, 0.5, 8)[:, None]).tokens
    >>> mf.stability_check(
    ...     Causal([[0.5]], [[0.5]]), Z, Z + [0.0, 0.01], [0.0, 1.0], hardy=True
    ... ).holds
    True
    """
    _check_field(field)
    _check_sink_mass(field, sink_mass)  # before the run, which gronwall_bound would follow
    X0 = as_tokens(X0, "X0")
    Y0 = as_tokens(Y0, "Y0", d=X0.shape[1])
    w = as_weights(weights, X0.shape[0])
    masked = is_masked(field)
    contents = slice(1, None) if masked else slice(None)
    R0 = max(support_radius(X0[:, contents], weights=w), support_radius(Y0[:, contents], weights=w))
    hardy_p = None
    if hardy and not isinstance(field, Causal):
        raise ValueError(
            "`hardy` applies to one masked head (`Causal`) only; omit it"
            + (" and use the sink bound." if masked else ".")
        )
    if hardy:
        if sink_mass is not None:
            raise ValueError("Pass either `sink_mass` or `hardy=True`, not both.")
        if p == 1:
            raise ValueError(
                "`hardy=True` needs `p` = 2: Hardy's inequality fails for p = 1; use the sink "
                "bound (omit `hardy`)."
            )
        if np.unique(X0[:, 0]).size < X0.shape[0] or not np.allclose(w, w[0], rtol=1e-12):
            raise ValueError(
                "`hardy=True` needs one token per position, all of the same weight (Hardy's "
                "inequality for the uniform measure on the positions); use the sink bound."
            )
        hardy_p = p
    elif masked:
        # the proved constant uses the true sink mass: a larger w0 would lower the bound
        w0 = float(w[X0[:, 0] == 0].sum())
        if w0 == 0:
            raise ValueError(
                "No token of `X0` sits at position 0, so there is no sink: the sink bound does "
                "not apply. "
                + (
                    "Use `hardy=True` (one token per position, equal weights)."
                    if isinstance(field, Causal)
                    else "Give the tokens a sink (`causal_cloud(..., sink=...)`)."
                )
            )
        if sink_mass is None:
            sink_mass = w0
        elif sink_mass > w0 * (1 + 1e-12):
            raise ValueError(
                f"`sink_mass` = {sink_mass!r} exceeds the mass {w0!r} of the tokens at position "
                "0: the bound would be smaller than the proved one. Omit `sink_mass` to use "
                "the data's sink mass."
            )
    run = stability_ratios(field, X0, Y0, times, weights=weights, conditional=masked, p=p, dt=dt)
    bound = gronwall_bound(field, R0, run.times, sink_mass=sink_mass, hardy_p=hardy_p)
    return StabilityCheck(run=run, bound=bound, R0=R0, p=p)
