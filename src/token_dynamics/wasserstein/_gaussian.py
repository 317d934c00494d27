"""Wasserstein distances that involve Gaussians: from a 1-D discrete measure to a Gaussian
(quantile functions) and between two Gaussians (the Bures-Wasserstein formula)."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from .._guards import float_guard
from .._linalg import power_of_two_scale, psd_sqrt
from .._typing import ArrayLike, FloatArray
from .._validation import (
    as_covariance,
    as_real_array,
    as_tokens,
    as_vector,
    as_weights,
    check_positive,
    check_real,
)

__all__ = ["bures_wasserstein", "w2_gaussian_1d"]


def _as_samples_1d(x: ArrayLike, name: str) -> FloatArray:
    arr = as_real_array(x, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        return as_tokens(arr, name)[:, 0]
    return as_vector(arr, name)


def _cumulative_sums(w: FloatArray) -> FloatArray:
    """``[0, w_0, w_0 + w_1, ...]`` (length n + 1), each to about one rounding: ``np.cumsum``
    plus the running sum of its rounding errors, each exact by Knuth's two-sum."""
    s = np.cumsum(w)
    a, b, total = s[:-1], w[1:], s[1:]
    b_virtual = total - a
    err = (a - (total - b_virtual)) + (b - b_virtual)  # a + b - total, exactly
    return np.concatenate(([0.0], s + np.concatenate(([0.0], np.cumsum(err)))))


@float_guard("the Wasserstein distance to the Gaussian", "rescale `x`, `mean` or `var`")
def w2_gaussian_1d(
    x: ArrayLike, mean: float, var: float, *, weights: ArrayLike | None = None
) -> float:
    r"""Exact :math:`W_2` from a 1-D discrete measure to the Gaussian :math:`\mathcal N(m, s)`.

    In 1-D the optimal coupling matches quantiles. With the points sorted,
    :math:`c_i = \sum_{k \le i} w_k` and :math:`q_i = \Phi^{-1}(c_i)`,

    .. math::

        W_2^2 = \sum_i w_i (x_{(i)} - m)^2
        - 2\sqrt{s} \sum_i (x_{(i)} - m)\big(\varphi(q_{i-1}) - \varphi(q_i)\big) + s ,

    because :math:`\int_{c_{i-1}}^{c_i} \Phi^{-1}(u)\,du = \varphi(q_{i-1}) - \varphi(q_i)`.
    No sampling of the Gaussian is involved: the value is exact up to rounding.

    Parameters
    ----------
    x : array_like, shape (n,) or (n, 1)
        Support points.
    mean : float
        Mean :math:`m` of the Gaussian.
    var : float
        Variance :math:`s \ge 0` (``0`` is the Dirac mass at `mean`).
    weights : array_like, shape (n,), optional
        Probability weights; uniform when ``None``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `x` is not a 1-D sample, `weights` are not probability weights, or `var` is negative.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    Peyré & Cuturi (2019), remark 2.30 (1-D optimal transport by quantile functions).

    Examples
    --------
    >>> from token_dynamics.wasserstein import w2_gaussian_1d
    >>> round(w2_gaussian_1d([3.0], 1.0, 0.0), 12)
    2.0
    """
    x = _as_samples_1d(x, "x")
    w = as_weights(weights, x.shape[0])
    m = check_real(mean, "mean")
    s = check_positive(var, "var", allow_zero=True)
    order = np.argsort(x, kind="stable")
    xs, ws = x[order] - m, w[order]
    # the points and the standard deviation over a power of two near the largest (exact): the
    # squares of points of 1e-200 underflowed to a distance of 0, of 1e160 overflowed
    sd = np.sqrt(s)
    scale = float(power_of_two_scale(np.append(xs, sd)))
    xs, sd = xs / scale, sd / scale
    # q_i from the smaller of c_i and 1 - c_i, each a compensated sum of the weights below or
    # above: a plain cumulative sum rounds by up to n eps, which moves q_i by dc / phi(q_i)
    # and W2^2, a small difference of O(s) terms, with it (quantile points: W2 1e-3 off at
    # n = 1e6, 2e-5 at 1e5)
    below = _cumulative_sums(ws)
    above = _cumulative_sums(ws[::-1])[::-1]
    q = np.where(below <= above, ndtri(below), -ndtri(above))  # -inf at 0, +inf at 1
    phi = np.exp(-0.5 * q**2) / np.sqrt(2.0 * np.pi)  # 0 at +-inf
    cross = np.sum(xs * (phi[:-1] - phi[1:]))
    w2sq = np.sum(ws * xs**2) - 2.0 * sd * cross + sd**2
    return scale * float(np.sqrt(max(w2sq, 0.0)))


@float_guard("the Bures-Wasserstein distance", "rescale `m1`, `S1`, `m2` or `S2`")
def bures_wasserstein(m1: ArrayLike, S1: ArrayLike, m2: ArrayLike, S2: ArrayLike) -> float:
    r"""Closed-form :math:`W_2` between two Gaussians (the Bures-Wasserstein distance).

    .. math::

        W_2^2 = |m_1 - m_2|^2 + \operatorname{tr}\Sigma_1 + \operatorname{tr}\Sigma_2
        - 2 \operatorname{tr}\big(\Sigma_1^{1/2}\Sigma_2\Sigma_1^{1/2}\big)^{1/2} .

    Parameters
    ----------
    m1, m2 : array_like, shape (d,)
        Means.
    S1, S2 : array_like, shape (d, d)
        Symmetric positive semi-definite covariances (degenerate Gaussians allowed).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `m2` does not match `m1` or `S1`, `S2` are not ``(d, d)`` covariances.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Notes
    -----
    The covariances are divided by the power of two at or below their largest entry, and the
    distance scaled back (exact): covariances of 1e-200 gave a cross term that underflowed to 0.
    The covariance part is a difference of traces, rounded to about
    :math:`\epsilon \operatorname{tr}(\Sigma_1 + \Sigma_2)`, so the distance carries an
    absolute error of order :math:`\sqrt{\epsilon \operatorname{tr}(\Sigma_1 + \Sigma_2)}`
    (about 1e-8 for unit covariances): two equal Gaussians come out at that size, not at 0.

    References
    ----------
    Peyré & Cuturi (2019), remark 2.31.

    Examples
    --------
    >>> from token_dynamics.wasserstein import bures_wasserstein
    >>> round(bures_wasserstein([0.0], [[1.0]], [0.0], [[4.0]]), 12)
    1.0
    """
    m1 = as_vector(m1, "m1")
    d = m1.shape[0]
    m2 = as_vector(m2, "m2", size=d)
    S1 = as_covariance(S1, "S1", d=d)
    S2 = as_covariance(S2, "S2", d=d)
    c = float(max(power_of_two_scale(S1), power_of_two_scale(S2)))  # 1 for zero covariances
    S1, S2 = S1 / c, S2 / c
    r1 = psd_sqrt(S1)
    cross = np.sum(np.sqrt(np.clip(np.linalg.eigvalsh(r1 @ S2 @ r1), 0.0, None)))
    spread = np.sqrt(c) * np.sqrt(max(float(np.trace(S1) + np.trace(S2) - 2.0 * cross), 0.0))
    dm = m1 - m2
    shift = float(power_of_two_scale(dm))
    return float(np.hypot(shift * np.linalg.norm(dm / shift), spread))
