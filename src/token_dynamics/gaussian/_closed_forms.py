"""Closed-form solutions of the Gaussian moment ODEs (references shared by tests and notebooks)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import brentq

from .._linalg import psd_sqrt
from .._validation import (
    as_covariance,
    as_matrix,
    as_times,
    as_vector,
    check_positive,
    check_real,
    float_guard,
)
from ._path import GaussianPath

__all__ = [
    "isotropic_blowup_time",
    "isotropic_covariance",
    "low_rank_limit",
    "ray_blowup_time",
    "ray_covariance",
    "scalar_blowup_time",
    "sinkhorn_scalar_variance",
    "softmax_gaussian_1d",
    "softmax_gaussian_centred",
]

#: Eigenvalues of A + A^T below this fraction of its norm count as zero when the kernel is
#: computed: well above rounding (1e-16) and well below any eigenvalue set on purpose.
KERNEL_RTOL = 1e-10
#: Tolerance on |V u - lambda u| for an eigenvector given by the user (rounding of V @ u).
EIGVEC_TOL = 1e-10


def _check_before(times: np.ndarray, t_star: float, what: str = "the solution") -> None:
    if times[-1] >= t_star:
        raise ValueError(
            f"`times` reach {times[-1]:g}, past the finite-time blow-up of {what} at "
            f"t* = {t_star:.6g}: they must stay before the blow-up time."
        )


@float_guard("the scalar blow-up time", "rescale `v`, `a` or `var0`")
def scalar_blowup_time(v: float, a: float, var0: float) -> float:
    r"""Blow-up time :math:`t^\star = 1/(2 v a s_0)` of the scalar softmax ODE.

    Parameters
    ----------
    v, a : float
        Value and attention scalars (the score is :math:`a x y`).
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
    >>> round(scalar_blowup_time(0.7, 0.9, 0.4), 5)  # 1 / (2 * 0.7 * 0.9 * 0.4)
    1.98413
    >>> scalar_blowup_time(0.7, -0.9, 0.4)  # v a < 0: the variance decays
    inf
    """
    v, a = check_real(v, "v"), check_real(a, "a")
    s0 = check_positive(var0, "var0", allow_zero=True)
    rate = 2.0 * v * a * s0
    return 1.0 / rate if rate > 0 else np.inf


@float_guard("the 1-D softmax Gaussian", "rescale `times`, `mean0`, `var0`, `v`, `a` or `beta`")
def softmax_gaussian_1d(
    times: Any, mean0: float, var0: float, v: float, a: float, *, beta: float = 1.0
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
    times : array_like, shape (T,)
        Nonnegative, nondecreasing, before the blow-up time.
    mean0 : float
    var0 : float
        Initial variance :math:`s_0 > 0`.
    v, a : float
        Value and attention scalars.
    beta : float

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
    >>> sol = softmax_gaussian_1d([0.0, 1.0], 0.0, 0.4, 0.8, -0.6)
    >>> round(float(sol.covariances[1, 0, 0]), 6)  # 0.4 / (1 + 2 * 0.8 * 0.6 * 0.4)
    0.289017
    """
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    m0 = check_real(mean0, "mean0")
    s0 = check_positive(var0, "var0")
    v = check_real(v, "v")
    a = check_real(a, "a") * check_positive(beta, "beta")
    _check_before(t, scalar_blowup_time(v, a, s0), "the variance")
    den = 1.0 - 2.0 * v * a * s0 * t
    return GaussianPath(
        times=t,
        means=(m0 * np.exp(v * t) / np.sqrt(den))[:, None],
        covariances=(s0 / den)[:, None, None],
    )


@float_guard("the centred softmax Gaussian", "rescale `times`, `cov0`, `A`, `v` or `beta`")
def softmax_gaussian_centred(
    times: Any, cov0: Any, A: Any, v: float, *, beta: float = 1.0
) -> GaussianPath:
    r"""Exact centred Gaussian solution for :math:`V = vI` in any dimension.

    From :math:`\mathcal N(0, \Sigma_0)` the mean stays :math:`0` and the covariance is
    :func:`isotropic_covariance`,

    .. math:: \Sigma(t) = \Sigma_0\big(I - v\beta t (A + A^\top)\Sigma_0\big)^{-1},

    until the first time the bracket becomes singular (finite-time blow-up).

    Parameters
    ----------
    times : array_like, shape (T,)
        Nonnegative, nondecreasing, before the blow-up time.
    cov0 : array_like, shape (d, d)
        Symmetric positive semi-definite.
    A : array_like, shape (d, d)
    v : float
    beta : float

    Returns
    -------
    GaussianPath

    Raises
    ------
    ValueError
        If `times` reach the blow-up time, `cov0` is not a covariance, `A` has another shape or
        `beta` is not positive.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gaussian import softmax_gaussian_centred
    >>> sol = softmax_gaussian_centred([1.0], np.eye(2), -0.5 * np.eye(2), 1.0)
    >>> sol.covariances[0].round(6)
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    S0 = as_covariance(cov0, "cov0")
    v = check_real(v, "v") * check_positive(beta, "beta")
    cov = _isotropic_covariance(t, v, as_matrix(A, "A", shape=S0.shape), S0)
    return GaussianPath(times=t, means=np.zeros((t.shape[0], S0.shape[0])), covariances=cov)


def _isotropic_rate(v: float, A: np.ndarray, cov0: np.ndarray) -> float:
    R = psd_sqrt(cov0)
    lam = np.linalg.eigvalsh(R @ (A + A.T) @ R)
    return float(np.max(v * lam))


@float_guard("the isotropic blow-up time", "rescale `v`, `A` or `cov0`")
def isotropic_blowup_time(v: float, A: Any, cov0: Any) -> float:
    r"""Blow-up time for ``V = v I``, the inverse of the largest :math:`v\lambda_i`.

    :math:`t^\star = 1/\max_i v\lambda_i` over the eigenvalues :math:`\lambda_i` of
    :math:`\Sigma_0^{1/2}(A+A^\top)\Sigma_0^{1/2}` (``inf`` if none is positive after
    multiplication by ``v``).

    Parameters
    ----------
    v : float
        The value matrix is :math:`V = vI`.
    A : array_like, shape (d, d)
        Attention matrix.
    cov0 : array_like, shape (d, d)
        Initial covariance :math:`\Sigma_0`, symmetric positive semi-definite.

    Returns
    -------
    float
        :math:`t^\star`, or ``inf`` when the covariance never blows up.

    Raises
    ------
    ValueError
        If `cov0` is not a covariance or `A` has another shape.

    Examples
    --------
    >>> from token_dynamics.gaussian import isotropic_blowup_time
    >>> isotropic_blowup_time(1.0, [[1.0, 0.0], [0.0, -1.0]], [[0.25, 0.0], [0.0, 1.0]])
    2.0
    """
    v = check_real(v, "v")
    S0 = as_covariance(cov0, "cov0")
    A = as_matrix(A, "A", shape=S0.shape)
    rate = _isotropic_rate(v, A, S0)
    return 1.0 / rate if rate > 0 else np.inf


@float_guard("the isotropic covariance", "rescale `times`, `v`, `A` or `cov0`")
def isotropic_covariance(times: Any, v: float, A: Any, cov0: Any) -> np.ndarray:
    r"""Covariance for softmax attention with ``V = v I`` (any mean):

    .. math:: \Sigma(t) = \Sigma_0\big(I - v t (A + A^\top)\Sigma_0\big)^{-1}
              = \big(\Sigma_0^{-1} - vt(A+A^\top)\big)^{-1},

    the first form valid for singular :math:`\Sigma_0`.

    Parameters
    ----------
    times : array_like, shape (T,)
        Strictly increasing times, all before the blow-up time
        (:func:`isotropic_blowup_time`).
    v : float
        The value matrix is :math:`V = vI`.
    A : array_like, shape (d, d)
        Attention matrix.
    cov0 : array_like, shape (d, d)
        Initial covariance :math:`\Sigma_0`, symmetric positive semi-definite.

    Returns
    -------
    ndarray, shape (T, d, d)
        :math:`\Sigma(t)` at each time.

    Raises
    ------
    ValueError
        If `times` reach the blow-up time, or an argument has the wrong shape.

    Examples
    --------
    >>> from token_dynamics.gaussian import isotropic_covariance
    >>> isotropic_covariance([1.0], 1.0, [[-1.0]], [[1.0]])  # 1 / (1 + 2 t)
    array([[[0.33333333]]])
    >>> isotropic_covariance([1.0], 1.0, [[-1.0]], [[1.0]])
    array([[[0.33333333]]])
    """
    t = as_times(times)
    S0 = as_covariance(cov0, "cov0")
    return _isotropic_covariance(t, check_real(v, "v"), as_matrix(A, "A", shape=S0.shape), S0)


def _isotropic_covariance(t: np.ndarray, v: float, A: np.ndarray, S0: np.ndarray) -> np.ndarray:
    rate = _isotropic_rate(v, A, S0)
    _check_before(t, 1.0 / rate if rate > 0 else np.inf, "the covariance")
    d = S0.shape[0]
    out = np.empty((t.size, d, d))
    for k, tk in enumerate(t):
        # Sigma0 (I - t v S Sigma0)^-1 = ((I - t v Sigma0 S)^-1 Sigma0), solved not inverted.
        M = np.linalg.solve(np.eye(d) - tk * v * S0 @ (A + A.T), S0)
        out[k] = 0.5 * (M + M.T)
    return out


@float_guard("the low-rank limit", "rescale `A`, `cov0` or `v`")
def low_rank_limit(A: Any, cov0: Any, v: float = 1.0) -> np.ndarray:
    r"""Limit of the ``V = v I`` covariance when :math:`v(A + A^\top) \preceq 0`:

    .. math::
        \Sigma_\infty = \mathcal K(\mathcal K^\top \Sigma_0^{-1}\mathcal K)^{-1}
        \mathcal K^\top,

    with :math:`\mathcal K` an orthonormal basis of :math:`\ker(A+A^\top)`; its rank is the
    dimension of that kernel (zero matrix if the kernel is trivial). The approach is
    :math:`O(1/t)`.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Attention matrix with :math:`v(A + A^\top)` negative semi-definite.
    cov0 : array_like, shape (d, d)
        Initial covariance :math:`\Sigma_0`, positive definite.
    v : float, default 1.0
        The value matrix is :math:`V = vI`.

    Returns
    -------
    ndarray, shape (d, d)
        :math:`\Sigma_\infty`, of rank :math:`\dim\ker(A + A^\top)`.

    Raises
    ------
    ValueError
        If `cov0` is singular or :math:`v(A + A^\top)` has a positive eigenvalue.

    Examples
    --------
    The kernel of :math:`A + A^\top` is the first axis, where the limit keeps the
    conditional variance :math:`1/(\Sigma_0^{-1})_{11} = 2 - 1/2`:

    >>> from token_dynamics.gaussian import low_rank_limit
    >>> low_rank_limit([[0.0, 0.0], [0.0, -1.0]], [[2.0, 1.0], [1.0, 2.0]])
    array([[1.5, 0. ],
           [0. , 0. ]])
    """
    v = check_real(v, "v")
    S0 = as_covariance(cov0, "cov0")
    A = as_matrix(A, "A", shape=S0.shape)
    lam0 = np.linalg.eigvalsh(S0)
    if lam0[0] <= KERNEL_RTOL * max(lam0[-1], 1e-300):
        raise ValueError("`cov0` must be positive definite for the low-rank limit formula.")
    lam, U = np.linalg.eigh(v * (A + A.T))
    scale = max(1.0, float(np.max(np.abs(lam))))
    if lam[-1] > KERNEL_RTOL * scale:
        raise ValueError(
            f"`v (A + A^T)` must be negative semidefinite; its largest eigenvalue is {lam[-1]:.3g}."
        )
    K = U[:, np.abs(lam) <= KERNEL_RTOL * scale]
    d = S0.shape[0]
    if K.shape[1] == 0:
        return np.zeros((d, d))
    inner = K.T @ np.linalg.solve(S0, K)
    out = K @ np.linalg.solve(inner, K.T)
    return 0.5 * (out + out.T)


def _ray_rate(V: Any, A: Any, u: Any, eps: float) -> tuple[np.ndarray, float]:
    V = as_matrix(V, "V")
    u = as_vector(u, "u", size=V.shape[0])
    A = as_matrix(A, "A", shape=V.shape)
    norm = np.linalg.norm(u)
    if norm == 0:
        raise ValueError("`u` must be a nonzero eigenvector of V.")
    u = u / norm
    lam = float(u @ V @ u)
    if np.linalg.norm(V @ u - lam * u) > EIGVEC_TOL * max(1.0, float(np.linalg.norm(V))):
        raise ValueError(
            "`u` must be an eigenvector of `V` (V u = lambda u) with a real eigenvalue."
        )
    q = float(u @ A @ u)
    e = check_positive(eps, "eps")
    return u, 2.0 * lam * q * e


@float_guard("the blow-up time on the ray", "rescale `V`, `A`, `u` or `eps`")
def ray_blowup_time(V: Any, A: Any, u: Any, eps: float) -> float:
    r"""Blow-up time :math:`1/(2\lambda q \varepsilon)` of the ray started at
    :math:`\varepsilon uu^\top` (``inf`` if :math:`\lambda q \le 0`).

    Here :math:`Vu = \lambda u`, :math:`|u| = 1` and :math:`q = u^\top A u`
    (see :func:`ray_covariance`).

    Parameters
    ----------
    V : array_like, shape (d, d)
        Value matrix.
    A : array_like, shape (d, d)
        Attention matrix.
    u : array_like, shape (d,)
        An eigenvector of `V` with a real eigenvalue (normalised here).
    eps : float
        Initial variance along the ray, positive.

    Returns
    -------
    float
        The blow-up time, or ``inf``.

    Raises
    ------
    ValueError
        If `u` is zero or not an eigenvector of `V`, or `eps` is not positive.

    Examples
    --------
    >>> from token_dynamics.gaussian import ray_blowup_time
    >>> ray_blowup_time([[2.0, 0.0], [0.0, 1.0]], [[1.0, 5.0], [0.0, 1.0]], [1.0, 0.0], 0.5)
    0.5
    """
    _, rate = _ray_rate(V, A, u, eps)
    return 1.0 / rate if rate > 0 else np.inf


@float_guard("the covariance on the ray", "rescale `times`, `V`, `A`, `u` or `eps`")
def ray_covariance(times: Any, V: Any, A: Any, u: Any, eps: float) -> np.ndarray:
    r"""Softmax covariance started on a ray: if :math:`Vu = \lambda u`, :math:`|u| = 1` and
    :math:`q = u^\top A u`, then :math:`\Sigma_0 = \varepsilon uu^\top` stays on the ray,

    .. math:: \Sigma(t) = \frac{\varepsilon}{1 - 2\lambda q\varepsilon t}\,uu^\top .

    Parameters
    ----------
    times : array_like, shape (T,)
        Strictly increasing times, before :func:`ray_blowup_time`.
    V : array_like, shape (d, d)
        Value matrix.
    A : array_like, shape (d, d)
        Attention matrix.
    u : array_like, shape (d,)
        An eigenvector of `V` with a real eigenvalue (normalised here).
    eps : float
        Initial variance along the ray, positive.

    Returns
    -------
    ndarray, shape (T, d, d)
        :math:`\Sigma(t)`, a multiple of :math:`uu^\top`.

    Raises
    ------
    ValueError
        If `u` is not an eigenvector of `V` or `times` reach the blow-up time.

    Examples
    --------
    Here :math:`\lambda = 2`, :math:`q = 1`, :math:`\varepsilon = 1/2`: the variance doubles
    at :math:`t = 1/4`, half the blow-up time.

    >>> from token_dynamics.gaussian import ray_covariance
    >>> ray_covariance([0.25], [[2.0, 0.0], [0.0, 1.0]], [[1.0, 5.0], [0.0, 1.0]], [1.0, 0.0], 0.5)
    array([[[1., 0.],
            [0., 0.]]])
    """
    t = as_times(times)
    u, rate = _ray_rate(V, A, u, eps)
    _check_before(t, 1.0 / rate if rate > 0 else np.inf)
    return (float(eps) / (1.0 - rate * t))[:, None, None] * np.outer(u, u)


def _sinkhorn_F(s: float, a_abs: float) -> float:
    u = 2.0 * a_abs * s
    return (np.arcsinh(u) - (np.sqrt(1.0 + u * u) + 1.0) / u) / (2.0 * a_abs)


@float_guard("the Sinkhorn variance", "rescale `times`, `v`, `a`, `var0` or `eps`")
def sinkhorn_scalar_variance(times: Any, v: float, a: float, var0: float, eps: float = 1.0):
    r"""Variance of the one-dimensional Sinkhorn dynamics, from its implicit solution.

    With :math:`\varepsilon = 1` the variance solves
    :math:`s' = \tfrac va(\sqrt{1 + 4a^2s^2} - 1)`, and
    :math:`F(s(t)) - F(s_0) = \tfrac va t` with
    :math:`F(s) = \tfrac1{2|a|}\big[\operatorname{asinh} u - (\sqrt{1+u^2}+1)/u\big]`,
    :math:`u = 2|a|s`. A general :math:`\varepsilon` rescales :math:`s = \varepsilon\sigma`.
    Each time is solved by Brent's method to machine precision.

    Parameters
    ----------
    times : array_like, shape (T,)
        Strictly increasing times.
    v, a : float
        Value and attention scalars.
    var0 : float
        Initial variance, positive.
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
    >>> round(float(sinkhorn_scalar_variance([1.0], v=0.7, a=-1.3, var0=0.8)[0]), 8)
    0.38804326
    """
    t = as_times(times)
    v, a = check_real(v, "v"), check_real(a, "a")
    s0 = check_positive(var0, "var0")
    e = check_positive(eps, "eps")
    if a == 0.0:  # s' = 0 in the limit a -> 0 (the plan is the independent coupling)
        return np.full(t.size, s0)
    sig0, a_abs = s0 / e, abs(a)
    F0 = _sinkhorn_F(sig0, a_abs)
    out = np.empty(t.size)
    for k, tk in enumerate(t):
        target = F0 + v / a * tk
        lo, hi = sig0, sig0
        while _sinkhorn_F(lo, a_abs) > target and lo > 0:
            lo /= 2.0
        while _sinkhorn_F(hi, a_abs) < target and np.isfinite(hi):
            hi *= 2.0
        if lo == hi:
            out[k] = sig0
            continue
        try:
            if lo == 0 or not np.isfinite(hi):
                raise RuntimeError("the variance leaves the float64 range")
            out[k] = brentq(
                lambda x, c=target: _sinkhorn_F(x, a_abs) - c, lo, hi, xtol=1e-300, rtol=1e-15
            )
        except RuntimeError as exc:
            raise FloatingPointError(
                f"the Sinkhorn variance at t = {tk:g} is not a float64 ({exc}); shorten `times` "
                "or lower |`v`|."
            ) from None
    return e * out
