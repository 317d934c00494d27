r"""The Gronwall stability bound of the Transformer PDE, for every attention variant (private).

With the support-radius bound :math:`R(t) = R_0\exp\int_0^t b` and the two Lipschitz constants
of :func:`field_constants`, Gronwall's lemma bounds
:math:`W_p(\mu_t,\nu_t) \le C(t, R_0)\,W_p(\mu_0,\nu_0)` with
:math:`\log C = \int_0^t (L_x + L_\mu)(R(s), s)\,ds`. :func:`gronwall_bound` integrates it for
every variant; :func:`stability_constant` is its softmax case, in the parameters ``A, V, beta``.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.integrate import IntegrationWarning, quad

from .._guards import float_guard
from .._typing import ArrayLike
from .._validation import as_square, as_times, check_positive
from ..attention import AttentionField, Causal, Softmax
from ._lipschitz import FieldConstants, _check_field, _check_sink_mass, _constants, _exp, _times

__all__ = ["StabilityBound", "gronwall_bound", "stability_constant"]

#: Relative accuracy asked of the quadratures of the Gronwall exponent: far below the
#: looseness of the bound itself, so the computed bound is the bound up to rounding.
QUAD_RTOL = 1e-10


@dataclass(frozen=True)
class StabilityBound:
    """Gronwall stability bound along the support-radius bound.

    Attributes
    ----------
    times : ndarray, shape (T,)
    radius : ndarray, shape (T,)
        :math:`R(t) = R_0\\exp\\int_0^t b(s)\\,ds` (:math:`R_0 e^{\\lVert V\\rVert t}` for
        softmax).
    lipschitz_x, lipschitz_measure : ndarray, shape (T,)
        The two Lipschitz constants evaluated at :math:`R(t)` (for the Hardy bound of masked
        attention, ``lipschitz_measure`` holds :math:`\\frac{p}{p-1}L_\\mu`).
    log_constant : ndarray, shape (T,)
        :math:`\\log C(t, R_0) = \\int_0^t (L_x + L_\\mu)(R(s))\\,ds`; the constant itself
        overflows quickly, its logarithm does not.

    Examples
    --------
    Returned by :func:`stability_constant`; the radius follows :math:`R_0 e^{\\lVert V\\rVert
    t}` and the constant grows from :math:`C(0, R_0) = 1`:

    >>> import numpy as np
    >>> from token_dynamics.meanfield import stability_constant
    >>> b = stability_constant(-np.eye(2), np.eye(2), 0.5, [0.0, 0.5, 1.0])
    >>> bool(np.allclose(b.radius, 0.5 * np.exp(b.times)))
    True
    >>> float(b.log_constant[0]), bool(np.all(np.diff(b.log_constant) > 0))
    (0.0, True)
    """

    times: np.ndarray
    radius: np.ndarray
    lipschitz_x: np.ndarray
    lipschitz_measure: np.ndarray
    log_constant: np.ndarray


@float_guard(
    "the stability constant", "shorten `times` or lower `R0`, `beta` and the norms of `A` and `V`"
)
def stability_constant(
    A: ArrayLike, V: ArrayLike, R0: float, times: ArrayLike, *, beta: float = 1.0
) -> StabilityBound:
    r"""Stability constant :math:`C(t,R_0)` with :math:`W_p(\mu_t,\nu_t) \le C\,W_p(\mu_0,\nu_0)`.

    .. math:: \log C(t, R_0) = \int_0^t \big(L_x(R(s)) + L_\mu(R(s))\big)\,ds ,

    for every :math:`p \ge 1` and both initial supports in :math:`B(0, R_0)`: couple the two
    Lagrangian flows optimally at time 0; the coupled distance grows at rate at most
    :math:`L_x + L_\mu` because :math:`W_1 \le W_p`. It is :func:`gronwall_bound` for
    ``attention.Softmax(A, V, beta=beta)``.

    Parameters
    ----------
    A, V : array_like, shape (d, d)
    R0 : float
        Radius of a ball holding both initial supports.
    times : array_like, shape (T,)
    beta : float

    Returns
    -------
    StabilityBound
        ``log_constant`` is ``inf`` from the time the integrand overflows float64 (the bound is
        then void, not wrong).

    Raises
    ------
    ValueError
        If `times` are negative or decreasing, `R0` is negative, `A`, `V` are not square
        matrices of one size or `beta` is not positive.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.meanfield import stability_constant
    >>> b = stability_constant(np.eye(2), np.eye(2), 0.0, [0.0, 1.0])
    >>> b.log_constant.round(6)  # R0 = 0: only the measure term ||V|| survives
    array([0., 1.])
    """
    # the softmax case of the Gronwall bound of every variant: one integration, one home
    beta = check_positive(beta, "beta")
    A, V = as_square(A, "A"), as_square(V, "V")
    return gronwall_bound(Softmax(A, V, beta=beta), R0, times)


@float_guard("the Gronwall bound", "shorten `times` or lower `R0`")
def gronwall_bound(
    field: AttentionField,
    R0: float,
    times: ArrayLike,
    *,
    sink_mass: float | None = None,
    hardy_p: float | None = None,
) -> StabilityBound:
    r"""Stability bound :math:`W_p(\mu_t,\nu_t) \le C(t,R_0)\,W_p(\mu_0,\nu_0)` of any variant.

    .. math::

        R(t) = R_0 \exp\Big(\int_0^t b(s)\,ds\Big), \qquad
        \log C(t, R_0) = \int_0^t \big(L_x(R(s), s) + L_\mu(R(s), s)\big)\,ds,

    with the constants of :func:`field_constants` at time :math:`s`, valid for every
    :math:`p \ge 1` when both initial measures are supported in :math:`B(0, R_0)` (for masked
    attention: :math:`W_{p,\lambda}` and a sink of mass `sink_mass`). For masked attention
    without a sink, `hardy_p` :math:`= p \in (1, \infty)` gives instead the bound through
    Hardy's inequality, valid in :math:`W_{p,\lambda}` when the position marginal is uniform on
    distinct positions (or Lebesgue):

    .. math::

        \log C(t, R_0) = \int_0^t \Big(L_x(R(s), s) + \frac{p}{p - 1}\,L_\mu(R(s), s)\Big)\,ds,

    with the unmasked softmax constants. The integrals are computed by adaptive quadrature
    (relative accuracy ``QUAD_RTOL`` = 1e-10).

    Parameters
    ----------
    field : Softmax, L2, Sigmoid, Sinkhorn, MultiHead or Causal
    R0 : float
        Radius of a ball holding both initial supports.
    times : array_like, shape (T,)
        Nonnegative, nondecreasing times.
    sink_mass : float, optional
        For masked heads only (``Causal``, alone or in a ``MultiHead``; see
        :func:`field_constants`).
    hardy_p : float, optional
        For ``Causal`` only, instead of `sink_mass`: the order :math:`p \in (1, \infty)` of
        the Hardy bound.

    Returns
    -------
    StabilityBound
        A bound that leaves float64 is ``inf``, a value and not a failure: ``radius`` from the
        time :math:`R_0 e^{\int b}` exceeds the largest float, the constants there (their limits
        as :math:`R \to \infty`: ``inf``, or their exact value when they do not depend on
        :math:`R`), and ``log_constant`` from the time its integrand overflows (the bound is
        then void, not wrong). As in SciPy's special functions, an overflow is reported by the
        value ``inf``, so the finite bounds at earlier `times` are kept; NaN never occurs.

    Raises
    ------
    ValueError
        If `times` are negative or decreasing, `R0` is negative, `sink_mass` is missing for
        ``Causal``, or `sink_mass` or `hardy_p` is given where it does not apply (see
        :func:`field_constants`).
    TypeError
        If `field` is not a variant for which the book states the estimates.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.meanfield import gronwall_bound
    >>> b = gronwall_bound(Softmax(np.zeros((1, 1)), np.eye(1)), 1.0, [0.0, 1.0])
    >>> b.radius.round(4), b.log_constant.round(6)  # A = 0: only L_mu = ||V|| = 1
    (array([1.    , 2.7183]), array([0., 1.]))
    """
    _check_field(field)
    _check_sink_mass(field, sink_mass)
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    R0 = check_positive(R0, "R0", allow_zero=True)
    hardy = _hardy_factor(field, hardy_p, sink_mass)

    def consts(s: float, r: float) -> FieldConstants:
        if hardy is None:
            return _constants(field, r, s, sink_mass)
        # Hardy's constant p/(p-1) times the unmasked softmax constant (the sink mass 1)
        c = _constants(field, r, s, 1.0)
        return FieldConstants(c.growth, c.lipschitz_x, _times(hardy, c.lipschitz_measure))

    def radius(s: float) -> float:
        # inf once R0 e^{int b} leaves float64: the constants are then their limits (void)
        growth = _integral(
            lambda u: consts(u, R0).growth, 0.0, s, "the growth exponent of the radius bound", 50
        )
        return _times(R0, _exp(growth))

    def rate(s: float) -> float:
        c = consts(s, radius(s))
        return c.lipschitz_x + c.lipschitz_measure

    def piece(a: float, b: float) -> float:
        # the rate is finite and continuous until the exponentials overflow float64
        with np.errstate(over="ignore"):
            if not all(np.isfinite(rate(s)) for s in (a, 0.5 * (a + b), b)):
                return np.inf
            return _integral(rate, a, b, "the Gronwall exponent log C", 200)

    edges = np.concatenate([[0.0], t])
    pieces = [piece(a, b) for a, b in itertools.pairwise(edges)]
    radii = np.array([radius(s) for s in t])
    at_t = [consts(s, r) for s, r in zip(t, radii, strict=True)]
    return StabilityBound(
        times=t,
        radius=radii,
        lipschitz_x=np.array([c.lipschitz_x for c in at_t]),
        lipschitz_measure=np.array([c.lipschitz_measure for c in at_t]),
        log_constant=np.cumsum(pieces),
    )


def _integral(f: Callable[[float], float], a: float, b: float, quantity: str, limit: int) -> float:
    """Adaptive quadrature of a nonnegative integrand; an integral that quadrature cannot
    resolve (NaN, or SciPy's ``IntegrationWarning``) is a ``FloatingPointError`` naming it."""
    if not b > a:
        return 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", IntegrationWarning)
        try:
            value = float(quad(f, a, b, epsrel=QUAD_RTOL, limit=limit)[0])
        except IntegrationWarning:
            value = np.nan
    if np.isnan(value):
        raise FloatingPointError(
            f"{quantity} on [{a:g}, {b:g}] is not resolved by adaptive quadrature (it overflows "
            "float64 or the parameters vary too fast over so long a span); shorten `times`."
        )
    return value


def _hardy_factor(
    field: AttentionField, hardy_p: float | None, sink_mass: float | None
) -> float | None:
    """Hardy's constant p/(p-1) for `hardy_p`, after checking that it applies."""
    if hardy_p is None:
        return None
    if not isinstance(field, Causal):
        raise ValueError("`hardy_p` applies to masked attention (`Causal`) only; omit it.")
    if sink_mass is not None:
        raise ValueError("Pass either `sink_mass` or `hardy_p`, not both.")
    p = float(hardy_p)
    if not 1 < p < np.inf:
        raise ValueError(
            f"`hardy_p` must lie in (1, inf): Hardy's inequality fails for p = 1; got {hardy_p!r}."
        )
    return p / (p - 1)
