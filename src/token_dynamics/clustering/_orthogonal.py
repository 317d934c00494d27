r"""Orthogonal initial tokens: every pairwise inner product follows one scalar ODE."""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.integrate import IntegrationWarning, quad, solve_ivp

from .._typing import ArrayLike, FloatArray
from .._validation import (
    as_real_array,
    as_sphere_tokens,
    as_times,
    check_int,
    check_positive,
    check_rtol,
)

__all__ = ["DYNAMICS", "OverlapCurve", "clustering_time", "orthogonal_overlap", "overlap_deviation"]

#: The two dynamics of the survey: softmax self-attention ("SA") and its unnormalised version
#: ("USA"), both with Q = K = V = I on the sphere.
DYNAMICS = ("SA", "USA")
#: The largest inverse temperature with e^beta finite in double precision (e^709.8 overflows).
MAX_BETA = 700.0
#: Smallest absolute tolerance of `orthogonal_overlap`: below, ``solve_ivp``'s scaled error norm
#: (the error divided by ``atol`` at gamma = 0) overflows.
MIN_ATOL = 1e-100


@dataclass(frozen=True)
class OverlapCurve:
    r"""The common inner product :math:`\gamma_\beta(t)` of tokens that start pairwise orthogonal.

    Attributes
    ----------
    times : ndarray, shape (T,)
    gamma : ndarray, shape (T,)
        :math:`\gamma_\beta` at `times`; :math:`\gamma_\beta(0) = 0` and it increases to 1.
    n : int
    beta : float
    dynamics : str
        ``"SA"`` or ``"USA"``.
    status : str
        ``"completed"``, or ``"failed"`` with the solver's reason in `message`.
    message : str

    Examples
    --------
    Returned by :func:`orthogonal_overlap`:

    >>> from token_dynamics.clustering import orthogonal_overlap
    >>> orthogonal_overlap(3, [0.0, 1.0], beta=1.0).status
    'completed'
    """

    times: FloatArray
    gamma: FloatArray
    n: int
    beta: float
    dynamics: str
    status: str
    message: str


def _rate_per_gap(
    gamma: FloatArray, one_minus: FloatArray | float, n: int, beta: float, dynamics: str
) -> FloatArray:
    """``d gamma / dt`` divided by ``1 - gamma`` (given as `one_minus`, exact near 1)."""
    spread = (n - 1) * gamma + 1.0
    if dynamics == "SA":
        # 2 e^{b g}((n-1)g+1) / (e^b + (n-1)e^{b g}), divided through by e^{b g}: no overflow
        return 2.0 * spread / (np.exp(beta * one_minus) + (n - 1))
    return (2.0 / n) * np.exp(beta * gamma) * spread


def _rate(gamma: FloatArray, n: int, beta: float, dynamics: str) -> FloatArray:
    one_minus = 1.0 - gamma
    return one_minus * _rate_per_gap(gamma, one_minus, n, beta, dynamics)


def _check(n: object, beta: object, dynamics: object) -> tuple[int, float, str]:
    n = check_int(n, "n", minimum=2)
    beta = check_positive(beta, "beta", allow_zero=True)
    if dynamics not in DYNAMICS:
        raise ValueError(f"`dynamics` must be one of {DYNAMICS}; got {dynamics!r}.")
    if beta > MAX_BETA:
        raise ValueError(
            f"`beta` = {beta:g} makes e^beta overflow in double precision (the USA velocity and "
            f"the SA clustering time, of order e^beta, are not representable); use beta <= "
            f"{MAX_BETA:g}."
        )
    return n, beta, str(dynamics)


def orthogonal_overlap(
    n: int,
    times: ArrayLike,
    *,
    beta: float,
    dynamics: str = "SA",
    rtol: float = 1e-12,
    atol: float = 1e-14,
) -> OverlapCurve:
    r"""The inner product :math:`\gamma_\beta(t)` of every pair of initially orthogonal tokens.

    If :math:`x_1(0), \dots, x_n(0)` are pairwise orthogonal (:math:`d \ge n`), the symmetry of
    the configuration is kept by the dynamics with :math:`Q = K = V = I`, and every
    :math:`\langle x_i(t), x_j(t)\rangle`, :math:`i \ne j`, equals :math:`\gamma_\beta(t)`, the
    solution from :math:`\gamma(0) = 0` of

    .. math::

        \text{SA:}\quad \dot\gamma = \frac{2e^{\beta\gamma}(1-\gamma)((n-1)\gamma+1)}
        {e^\beta + (n-1)e^{\beta\gamma}}, \qquad
        \text{USA:}\quad \dot\gamma = \frac2n e^{\beta\gamma}(1-\gamma)((n-1)\gamma+1).

    At :math:`\beta = 0` both read :math:`\dot\gamma = \frac2n(1-\gamma)(1+(n-1)\gamma)`, solved by
    :math:`\gamma_0(t) = (e^{2t} - 1)/(e^{2t} + n - 1)`. Integrated by ``solve_ivp`` (DOP853) at
    the given tolerances (the right-hand side is smooth and bounded on :math:`[0, 1]`, an
    invariant interval). They bound each step's error; the global error gathers the steps' and
    can exceed `rtol` on long runs (``n = 2``, ``beta = 20``: 6e-9 at ``t = 1.2e7``, where
    ``gamma = 0.99`` rises by 2e-2 per unit time, against the solution in 40 digits).

    Parameters
    ----------
    n : int
        Number of tokens, >= 2.
    times : array_like, shape (T,)
        Output times, increasing, from 0.
    beta : float
        Inverse temperature, >= 0.
    dynamics : {"SA", "USA"}
    rtol, atol : float
        Tolerances of the integrator.

    Returns
    -------
    OverlapCurve

    Raises
    ------
    ValueError
        If an argument is out of range (`times` must start at 0).

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, §6.2 (orthogonal initial data).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.clustering import orthogonal_overlap
    >>> t = np.array([0.0, 0.5, 2.0])
    >>> curve = orthogonal_overlap(2, t, beta=0.0)
    >>> bool(np.allclose(curve.gamma, np.tanh(t), rtol=1e-10))  # n = 2, beta = 0: tanh
    True
    """
    n, beta, dynamics = _check(n, beta, dynamics)
    times = as_times(times, nonnegative=True)
    if times[0] != 0.0:
        raise ValueError(f"`times` must start at 0 (gamma(0) = 0); got times[0] = {times[0]:g}.")
    rtol = check_rtol(rtol)
    atol = check_positive(atol, "atol")
    if atol < MIN_ATOL:
        raise ValueError(
            f"`atol` = {atol:g} is below {MIN_ATOL:g}, where the solver's error norm overflows; "
            f"pass atol >= {MIN_ATOL:g}."
        )
    gamma = np.ones(times.size)
    # past the time at which 1 - gamma falls below half an ulp of 1, gamma rounds to 1: an
    # explicit solver would need a number of steps proportional to the horizon to get there
    t_one = clustering_time(n, beta=beta, delta=0.5 * np.finfo(np.float64).eps, dynamics=dynamics)
    early = times < t_one
    if np.count_nonzero(early) > 1:
        sol = solve_ivp(
            lambda _t, g: _rate(g, n, beta, dynamics), (0.0, float(times[early][-1])), [0.0],
            method="DOP853", t_eval=times[early], rtol=rtol, atol=atol,
        )  # fmt: skip
        if sol.status != 0:
            return OverlapCurve(
                times, np.full(times.size, np.nan), n, beta, dynamics, "failed", str(sol.message)
            )
        gamma[early] = np.clip(sol.y[0], 0.0, 1.0)  # the exact solution stays in [0, 1)
    gamma[times == 0.0] = 0.0
    return OverlapCurve(times, gamma, n, beta, dynamics, "completed", "reached the final time.")


def clustering_time(
    n: int, *, beta: float, delta: float, dynamics: str = "SA", rtol: float = 1e-12
) -> float:
    r"""The time at which :math:`\gamma_\beta` reaches :math:`1 - \delta`.

    The points :math:`(t, \beta)` with :math:`\gamma_\beta(t) = 1 - \delta` form the curve
    :math:`\Gamma_{\infty,\delta}` drawn over the survey's phase diagrams. The time is found
    without integrating: :math:`\gamma` increases, so
    :math:`t = \int_0^{1-\delta} d\gamma / \dot\gamma`, computed by adaptive quadrature (at
    :math:`\beta = 0` it is :math:`\frac12\log(1 + n(1-\delta)/\delta)`).

    Parameters
    ----------
    n : int
        Number of tokens, >= 2.
    beta : float
        Inverse temperature, >= 0.
    delta : float
        In (0, 1).
    dynamics : {"SA", "USA"}
    rtol : float
        Relative tolerance of the quadrature.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If an argument is out of range.
    FloatingPointError
        If the quadrature does not reach `rtol`.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, §6.3 (the phase-transition curve).

    Examples
    --------
    >>> import math
    >>> from token_dynamics.clustering import clustering_time
    >>> t = clustering_time(4, beta=0.0, delta=1e-3)
    >>> math.isclose(t, 0.5 * math.log(1 + 4 * 0.999 / 1e-3), rel_tol=1e-10)
    True
    """
    n, beta, dynamics = _check(n, beta, dynamics)
    delta = check_positive(delta, "delta")
    if delta >= 1.0:
        raise ValueError(f"`delta` must be in (0, 1); got {delta:g}.")
    rtol = check_rtol(rtol)
    # 1 / rate has a logarithmic singularity only at gamma = 1, which is outside [0, 1 - delta];
    # the substitution gamma = 1 - e^{-s} spreads the steep end evenly
    s_top = -math.log(delta)

    def integrand(s: float) -> float:  # d gamma / rate, with d gamma = (1 - gamma) ds
        # gamma = 1 - e^{-s} by expm1: 1.0 - e^{-s} keeps only s / eps digits of gamma ~ s, and
        # (n - 1) gamma + 1 with them for large n (3e-11 wrong at n = 1e8, beta = 0)
        gamma = -math.expm1(-s)
        return 1.0 / float(_rate_per_gap(np.array(gamma), math.exp(-s), n, beta, dynamics))

    # the SA integrand falls from e^beta / 2 to order one by s ~ log(1 + beta): integrated in two
    # pieces, so that the steep one's extrapolation (at n = 1e6, beta = 700, values 1e298 down
    # to 1) does not spoil the other's; quad's warnings give way to the test on its error
    edges = [0.0, min(s_top, math.log1p(beta)), s_top]
    value = err = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntegrationWarning)
        for lo, hi in itertools.pairwise(edges):
            if hi > lo:
                piece, piece_err = quad(integrand, lo, hi, epsabs=0.0, epsrel=rtol, limit=200)
                value, err = value + piece, err + piece_err
    if not math.isfinite(value) or err > 10 * rtol * abs(value):
        raise FloatingPointError(
            f"the clustering time did not converge (estimate {value:g}, error {err:.2g}); "
            "loosen `rtol` or check `beta`."
        )
    return float(value)


def overlap_deviation(states: ArrayLike, gamma: ArrayLike) -> FloatArray:
    r"""How far the pairwise inner products of a trajectory are from one curve, at each time.

    .. math::

        \epsilon(t) = \max_{i \ne j}\, \big|\langle x_i(t), x_j(t)\rangle - \gamma(t)\big| ,

    the quantity bounded by the high-dimensional theorem of the survey, with
    :math:`\gamma = \gamma_\beta` from :func:`orthogonal_overlap`.

    Parameters
    ----------
    states : array_like, shape (T, n, d)
        Tokens at `T` times (e.g. ``Trajectory.states``), ``n >= 2``.
    gamma : array_like, shape (T,)
        The curve at the same times.

    Returns
    -------
    ndarray, shape (T,)

    Raises
    ------
    ValueError
        If the shapes do not match or an entry is not finite.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, Theorem 6.9 (as numbered in v4).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.clustering import overlap_deviation
    >>> X = np.eye(3)[None]  # one time, three orthogonal tokens
    >>> overlap_deviation(X, [0.25]).tolist()
    [0.25]
    """
    X = as_real_array(states, "states")
    g = as_real_array(gamma, "gamma")
    if X.ndim != 3 or X.shape[1] < 2:
        raise ValueError(
            f"`states` must have shape (T, n, d) with n >= 2 (e.g. Trajectory.states); got "
            f"shape {X.shape}."
        )
    if g.shape != (X.shape[0],):
        raise ValueError(
            f"`gamma` must have shape ({X.shape[0]},), one value per time of `states`; got "
            f"shape {g.shape}."
        )
    X = as_sphere_tokens(X, "states", batched=True)  # inner products of unit vectors
    gram = np.einsum("tid,tjd->tij", X, X)
    off = ~np.eye(X.shape[1], dtype=bool)
    return np.asarray(np.abs(gram[:, off] - g[:, None]).max(axis=1), dtype=np.float64)
