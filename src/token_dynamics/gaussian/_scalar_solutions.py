"""Closed forms in one dimension: the scalar softmax Gaussian (variance and mean, its blow-up
time) and the variance of the scalar Sinkhorn dynamics."""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from .._guards import float_guard
from .._typing import ArrayLike, FloatArray
from .._validation import as_times, check_positive, check_real, time_text
from ._path import GaussianPath, _check_before

__all__ = ["scalar_blowup_time", "sinkhorn_scalar_variance", "softmax_gaussian_1d"]


@float_guard("the scalar blow-up time", "rescale `a`, `v` or `var0`")
def scalar_blowup_time(a: float, v: float, var0: float) -> float:
    r"""Blow-up time :math:`t^\star = 1/(2 v a s_0)` of the scalar softmax ODE.

    Parameters
    ----------
    a, v : float
        Attention and value scalars (the score is :math:`a x y`, the value :math:`v`).
    var0 : float
        Initial variance :math:`s_0 \ge 0`.

    Returns
    -------
    float
        :math:`t^\star`, or ``inf`` if ``v a s0 <= 0`` (no blow-up).

    Raises
    ------
    ValueError
        If `var0` is negative.

    Examples
    --------
    >>> from token_dynamics.gaussian import scalar_blowup_time
    >>> round(scalar_blowup_time(0.9, 0.7, 0.4), 5)  # 1 / (2 * 0.7 * 0.9 * 0.4)
    1.98413
    >>> scalar_blowup_time(-0.9, 0.7, 0.4)  # v a < 0: the variance decays
    inf
    """
    v, a = check_real(v, "v"), check_real(a, "a")
    s0 = check_positive(var0, "var0", allow_zero=True)
    if np.sign(v) * np.sign(a) <= 0 or s0 == 0:  # signs, not the product, which may underflow
        return np.inf
    # 1 / (2 v a s0) from mantissas and exponents: the product itself may leave the float range
    # where the time does not (v = a = 1e-200, s0 = 1e300 gave inf for 5e99)
    (mv, ev), (ma, ea), (ms, es) = (np.frexp(abs(x)) for x in (v, a, s0))
    t = float(np.ldexp(0.5 / (mv * ma * ms), -(int(ev) + int(ea) + int(es))))
    if not np.isfinite(t) or t == 0:
        raise FloatingPointError(
            f"the scalar blow-up time 1 / (2 v a s0) leaves the float range (v = {v:g}, "
            f"a = {a:g}, var0 = {s0:g}); rescale `a`, `v` or `var0`."
        )
    return t


@float_guard("the 1-D softmax Gaussian", "rescale `a`, `v`, `mean0`, `var0`, `times` or `beta`")
def softmax_gaussian_1d(
    a: float, v: float, mean0: float, var0: float, times: ArrayLike, *, beta: float = 1.0
) -> GaussianPath:
    r"""Exact 1-D Gaussian solution of the softmax dynamics (the scalar moment ODE).

    With :math:`\mu_0 = \mathcal N(m_0, s_0)`, scalar value :math:`v` and attention :math:`a`
    (score :math:`\beta a x y`), the solution stays Gaussian with

    .. math::

        s(t) = \frac{s_0}{1 - 2 v\beta a s_0 t}, \qquad
        m(t) = m_0 e^{vt}\,(1 - 2 v \beta a s_0 t)^{-1/2},

    which blows up at :math:`t^* = 1/(2v\beta a s_0)` when :math:`va > 0`.

    Parameters
    ----------
    a, v : float
        Attention and value scalars.
    mean0 : float
        Initial mean :math:`m_0`.
    var0 : float
        Initial variance :math:`s_0 > 0`.
    times : array_like, shape (T,)
        Nonnegative, nondecreasing, before the blow-up time.
    beta : float, default 1.0
        Inverse temperature, positive.

    Returns
    -------
    GaussianPath
        With ``means`` of shape ``(T, 1)`` and ``covariances`` of shape ``(T, 1, 1)``.

    Raises
    ------
    ValueError
        If `times` reach the blow-up time.

    References
    ----------
    Castin et al. (2025), Gaussian preservation; the scalar closed form is derived here.

    Examples
    --------
    >>> from token_dynamics.gaussian import softmax_gaussian_1d
    >>> sol = softmax_gaussian_1d(-0.6, 0.8, 0.0, 0.4, [0.0, 1.0])
    >>> round(float(sol.covariances[1, 0, 0]), 6)  # 0.4 / (1 + 2 * 0.8 * 0.6 * 0.4)
    0.289017
    """
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    m0 = check_real(mean0, "mean0")
    s0 = check_positive(var0, "var0")
    v = check_real(v, "v")
    a = check_real(a, "a") * check_positive(beta, "beta")
    _check_before(t, scalar_blowup_time(a, v, s0), "the variance")
    den = 1.0 - 2.0 * v * a * s0 * t
    return GaussianPath(
        times=t,
        means=(m0 * np.exp(v * t) / np.sqrt(den))[:, None],
        covariances=(s0 / den)[:, None, None],
    )


def _sinkhorn_G(u: float) -> float:
    """:math:`2|a|F` as a function of :math:`u = 2|a|s`; hypot keeps it finite for any float u
    (``1 + u * u`` overflowed from u = 1.3e154 on)."""
    return float(np.arcsinh(u) - (np.hypot(1.0, u) + 1.0) / u)


@float_guard("the Sinkhorn variance", "rescale `a`, `v`, `var0`, `times` or `eps`")
def sinkhorn_scalar_variance(
    a: float, v: float, var0: float, times: ArrayLike, *, eps: float = 1.0
) -> FloatArray:
    r"""Variance of the one-dimensional Sinkhorn dynamics, from its implicit solution.

    With :math:`\varepsilon = 1` the variance solves
    :math:`s' = \tfrac va(\sqrt{1 + 4a^2s^2} - 1)`, and
    :math:`F(s(t)) - F(s_0) = \tfrac va t` with
    :math:`F(s) = \tfrac1{2|a|}\big[\operatorname{asinh} u - (\sqrt{1+u^2}+1)/u\big]`,
    :math:`u = 2|a|s`. A general :math:`\varepsilon` rescales :math:`s = \varepsilon\sigma`.
    Each time is solved by Brent's method to machine precision.

    Parameters
    ----------
    a, v : float
        Attention and value scalars.
    var0 : float
        Initial variance, positive.
    times : array_like, shape (T,)
        Strictly increasing times.
    eps : float, default 1.0
        Entropic regularisation :math:`\varepsilon` of the Sinkhorn plan.

    Returns
    -------
    ndarray, shape (T,)
        The variance at each time.

    Raises
    ------
    ValueError
        If `var0` or `eps` is not positive.

    Examples
    --------
    >>> from token_dynamics.gaussian import sinkhorn_scalar_variance
    >>> round(float(sinkhorn_scalar_variance(a=-1.3, v=0.7, var0=0.8, times=[1.0])[0]), 8)
    0.38804326
    """
    t = as_times(times)
    v, a = check_real(v, "v"), check_real(a, "a")
    s0 = check_positive(var0, "var0")
    e = check_positive(eps, "eps")
    if a == 0.0:  # s' = 0 in the limit a -> 0 (the plan is the independent coupling)
        return np.full(t.size, s0)
    # solved for u = 2 |a| s / eps, free of the scale of a: G(u(t)) - G(u0) = 2 sign(a) v t
    a2 = 2.0 * np.abs(a)  # (numpy scalars: an overflow raises)
    u0 = a2 * np.float64(s0) / e
    G0 = _sinkhorn_G(u0)
    out = np.empty(t.size)
    for k, tk in enumerate(t):
        target = G0 + 2.0 * np.sign(a) * v * tk
        lo, hi = u0, u0
        while _sinkhorn_G(lo) > target and lo > 0:
            lo /= 2.0
        while _sinkhorn_G(hi) < target and np.isfinite(hi):
            hi *= 2.0
        if lo == hi:
            out[k] = u0 / a2
            continue
        try:
            if lo == 0 or not np.isfinite(hi):
                raise RuntimeError("the variance leaves the float64 range")
            out[k] = (
                brentq(lambda x, c=target: _sinkhorn_G(x) - c, lo, hi, xtol=1e-300, rtol=1e-15) / a2
            )
        except RuntimeError as exc:
            raise FloatingPointError(
                f"the Sinkhorn variance at t = {time_text(tk)} is not a float64 ({exc}); shorten "
                "`times` or lower |`v`|."
            ) from None
    return e * out
