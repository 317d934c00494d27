"""Closed forms for an isotropic value matrix ``V = v I``: the covariance and its blow-up time,
the centred Gaussian solution and the low-rank limit of the decaying case."""

from __future__ import annotations

import numpy as np

from .._guards import float_guard
from .._linalg import psd_sqrt
from .._typing import ArrayLike, FloatArray
from .._validation import (
    as_covariance,
    as_matrix,
    as_times,
    check_positive,
    check_real,
    time_text,
)
from ._path import GaussianPath, _check_before

__all__ = [
    "isotropic_blowup_time",
    "isotropic_covariance",
    "low_rank_limit",
    "softmax_gaussian_centred",
]

#: Eigenvalues of A + A^T below this fraction of its norm count as zero when the kernel is
#: computed: well above rounding (1e-16) and well below any eigenvalue set on purpose.
KERNEL_RTOL = 1e-10
#: A largest eigenvalue of sign(v) R (A + A^T) R, R = Sigma0^(1/2), at most this many times
#: d eps || |R| |A + A^T| |R| || (entrywise absolute values, spectral norm; the bound on the
#: rounding of the product) is rounding, not growth: for A + A^T <= 0 with a kernel
#: (A = -Q^T Q of rank below d, the clustering regime) the computed one was positive in 95 % of
#: 4000 random draws (d from 2 to 60, Sigma0 singular or of condition up to 1e8), at most 0.45
#: of that scale, and read as a finite blow-up time near 1e14 where there is none. 10 leaves a
#: margin of 20.
ROUNDING_EIGS = 10.0
EPS = float(np.finfo(np.float64).eps)
#: Largest relative error isotropic_covariance returns: the rounding of the matrix it solves
#: with, M = I - t v Sigma0 (A + A^T), eps (1 + t |v Sigma0 (A + A^T)|), over M's smallest
#: singular value; it grows like 1 / (1 - t / t*) near a blow-up and like t |v Sigma0 (A + A^T)|
#: where A + A^T has a kernel (1e-6 there at t of order 1e9).
ISOTROPIC_RTOL = 1e-6


@float_guard("the centred softmax Gaussian", "rescale `A`, `v`, `cov0`, `times` or `beta`")
def softmax_gaussian_centred(
    A: ArrayLike, v: float, cov0: ArrayLike, times: ArrayLike, *, beta: float = 1.0
) -> GaussianPath:
    r"""Exact centred Gaussian solution for :math:`V = vI` in any dimension.

    From :math:`\mathcal N(0, \Sigma_0)` the mean stays :math:`0` and the covariance is
    :func:`isotropic_covariance`,

    .. math:: \Sigma(t) = \Sigma_0\big(I - v\beta t (A + A^\top)\Sigma_0\big)^{-1},

    until the first time the bracket becomes singular (finite-time blow-up).

    Parameters
    ----------
    A : array_like, shape (d, d)
        Attention matrix.
    v : float
        The value matrix is :math:`V = vI`.
    cov0 : array_like, shape (d, d)
        Initial covariance, symmetric positive semi-definite.
    times : array_like, shape (T,)
        Nonnegative, nondecreasing, before the blow-up time.
    beta : float, default 1.0
        Inverse temperature, positive.

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
    >>> sol = softmax_gaussian_centred(-0.5 * np.eye(2), 1.0, np.eye(2), [1.0])
    >>> sol.covariances[0].round(6)
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    S0 = as_covariance(cov0, "cov0")
    v = check_real(v, "v") * check_positive(beta, "beta")
    cov = _isotropic_covariance(t, v, as_matrix(A, "A", shape=S0.shape), S0)
    return GaussianPath(times=t, means=np.zeros((t.shape[0], S0.shape[0])), covariances=cov)


def _isotropic_rate(v: float, A: FloatArray, cov0: FloatArray) -> float:
    """The largest ``v lambda`` (see :func:`isotropic_blowup_time`), 0 where it is rounding."""
    R, S = psd_sqrt(cov0), A + A.T
    top = float(np.max(np.sign(v) * np.linalg.eigvalsh(R @ S @ R)))
    # the rounding of the product R S R is bounded entrywise by d eps |R| |S| |R|
    noise = ROUNDING_EIGS * cov0.shape[0] * EPS
    if top <= noise * np.linalg.norm(np.abs(R) @ np.abs(S) @ np.abs(R), 2):
        return 0.0
    return abs(v) * top


@float_guard("the isotropic blow-up time", "rescale `A`, `v` or `cov0`")
def isotropic_blowup_time(A: ArrayLike, v: float, cov0: ArrayLike) -> float:
    r"""Blow-up time for ``V = v I``, the inverse of the largest :math:`v\lambda_i`.

    :math:`t^\star = 1/\max_i v\lambda_i` over the eigenvalues :math:`\lambda_i` of
    :math:`\Sigma_0^{1/2}(A+A^\top)\Sigma_0^{1/2}` (``inf`` if none is positive after
    multiplication by ``v``). An eigenvalue within the rounding of that product (a few ``d``
    machine epsilons of its entries' scale) counts as zero: the kernel of a dissipative
    :math:`A + A^\top \preceq 0` gives no blow-up, however rounding signs its eigenvalues.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Attention matrix.
    v : float
        The value matrix is :math:`V = vI`.
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
    >>> isotropic_blowup_time([[1.0, 0.0], [0.0, -1.0]], 1.0, [[0.25, 0.0], [0.0, 1.0]])
    2.0
    """
    v = check_real(v, "v")
    S0 = as_covariance(cov0, "cov0")
    A = as_matrix(A, "A", shape=S0.shape)
    rate = _isotropic_rate(v, A, S0)
    return 1.0 / rate if rate > 0 else np.inf


@float_guard("the isotropic covariance", "rescale `A`, `v`, `cov0` or `times`")
def isotropic_covariance(A: ArrayLike, v: float, cov0: ArrayLike, times: ArrayLike) -> FloatArray:
    r"""Covariance for softmax attention with ``V = v I`` (any mean):

    .. math:: \Sigma(t) = \Sigma_0\big(I - v t (A + A^\top)\Sigma_0\big)^{-1}
              = \big(\Sigma_0^{-1} - vt(A+A^\top)\big)^{-1},

    the first form valid for singular :math:`\Sigma_0`.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Attention matrix.
    v : float
        The value matrix is :math:`V = vI`.
    cov0 : array_like, shape (d, d)
        Initial covariance :math:`\Sigma_0`, symmetric positive semi-definite.
    times : array_like, shape (T,)
        Strictly increasing times, all before the blow-up time
        (:func:`isotropic_blowup_time`).

    Returns
    -------
    ndarray, shape (T, d, d)
        :math:`\Sigma(t)` at each time.

    Raises
    ------
    ValueError
        If `times` reach the blow-up time, or an argument has the wrong shape.
    FloatingPointError
        If the result at some time would carry a relative error above ``ISOTROPIC_RTOL``
        (``1e-6``), estimated as the rounding of :math:`M = I - vt\Sigma_0(A + A^\top)`,
        :math:`\varepsilon(1 + t\lVert v\Sigma_0(A + A^\top)\rVert)`, over the smallest
        singular value of :math:`M`: within about ``1e-10`` of the blow-up time
        (relative), or, where :math:`A + A^\top` has a kernel, at times
        :math:`t \gtrsim 10^{-6}/(\varepsilon\lVert v\Sigma_0(A + A^\top)\rVert)`, where the
        rounding of its zero eigenvalues, times :math:`t`, matters.

    Examples
    --------
    >>> from token_dynamics.gaussian import isotropic_covariance
    >>> isotropic_covariance([[-1.0]], 1.0, [[1.0]], [1.0])  # 1 / (1 + 2 t)
    array([[[0.33333333]]])
    """
    t = as_times(times)
    S0 = as_covariance(cov0, "cov0")
    return _isotropic_covariance(t, check_real(v, "v"), as_matrix(A, "A", shape=S0.shape), S0)


def _isotropic_covariance(t: FloatArray, v: float, A: FloatArray, S0: FloatArray) -> FloatArray:
    rate = _isotropic_rate(v, A, S0)
    _check_before(t, 1.0 / rate if rate > 0 else np.inf, "the covariance")
    d = S0.shape[0]
    P = v * S0 @ (A + A.T)
    scale = float(np.linalg.norm(P, 2))
    out = np.empty((t.size, d, d))
    for k, tk in enumerate(t):
        # Sigma0 (I - t v S Sigma0)^-1 = ((I - t v Sigma0 S)^-1 Sigma0), solved not inverted;
        # M's rounding, eps (1 + t |v Sigma0 S|), against its smallest singular value
        M = np.eye(d) - tk * P
        smallest = float(np.linalg.svd(M, compute_uv=False)[-1])
        error = EPS * (1.0 + tk * scale) / smallest if smallest > 0 else np.inf
        if not error <= ISOTROPIC_RTOL:
            raise FloatingPointError(
                f"the isotropic covariance at t = {time_text(tk)} would carry a relative error of "
                "about "
                f"{error:.2g} (the rounding of I - t v Sigma0 (A + A^T) over its smallest "
                f"singular value), above {ISOTROPIC_RTOL:g}: t is within rounding of the blow-up "
                "time, or, where A + A^T has a kernel, so large that the rounding of its zero "
                "eigenvalues, times t, matters; ask for earlier times."
            )
        cov = np.linalg.solve(M, S0)
        out[k] = 0.5 * (cov + cov.T)
    return out


@float_guard("the low-rank limit", "rescale `A`, `cov0` or `v`")
def low_rank_limit(A: ArrayLike, cov0: ArrayLike, *, v: float = 1.0) -> FloatArray:
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
        The value matrix is :math:`V = vI`; only its sign matters (keyword-only).

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
    # only the sign of v enters, and the kernel is read relative to the norm of A + A^T
    lam, U = np.linalg.eigh(np.sign(v) * (A + A.T))
    scale = float(np.max(np.abs(lam)))
    if lam[-1] > KERNEL_RTOL * scale:
        raise ValueError(
            "`v (A + A^T)` must be negative semidefinite; its largest eigenvalue is "
            f"{abs(v) * lam[-1]:.3g}."
        )
    K = U[:, np.abs(lam) <= KERNEL_RTOL * scale]
    d = S0.shape[0]
    if K.shape[1] == 0:
        return np.zeros((d, d))
    inner = K.T @ np.linalg.solve(S0, K)
    out = K @ np.linalg.solve(inner, K.T)
    return 0.5 * (out + out.T)
