"""Moments of a token cloud: mean, covariance and excess kurtosis."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from .._backend import all_finite, is_numpy, to_namespace
from .._linalg import divide_by_power_of_two, power_of_two_scale, power_of_two_scale_xp
from .._typing import ArrayLike
from .._validation import (
    as_tokens,
    as_tokens_xp,
    as_weights,
)
from ..attention._base import positive_keys
from ._scaling import scale_result_xp, support_xp, unflushed_xp

__all__ = ["empirical_covariance", "empirical_mean", "excess_kurtosis"]


def empirical_mean(X: ArrayLike, *, weights: ArrayLike | None = None) -> np.ndarray:
    r"""Mean :math:`\int x\, d\mu = \sum_i w_i x_i` of the tokens' measure.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Or an array of another library (torch, JAX, CuPy): computed in its namespace, on its
        device and in its floating dtype, and returned as an array of it.
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray (or the array type of ``X``), shape (d,)

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals or `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> from token_dynamics.diagnostics import empirical_mean
    >>> empirical_mean([[0.0, 0.0], [2.0, 4.0]])
    array([1., 2.])
    >>> empirical_mean([[0.0, 0.0], [2.0, 4.0]], weights=[0.75, 0.25])
    array([0.5, 1. ])
    """
    if type(X) is not np.ndarray and not is_numpy(X):
        xp, Xc, w, c0 = _tokens_weights_xp(X, weights)
        c = power_of_two_scale_xp(xp, Xc)
        return scale_result_xp(xp, w @ divide_by_power_of_two(Xc, c), c0 * c)
    X = as_tokens(X)
    X, w = positive_keys(X, as_weights(weights, X.shape[0]))
    # the average of X / c, c the power of two at max |x_ij| over the support (exact), then
    # scaled by c: no product w_i x_ij of tiny tokens loses digits to underflow
    c = float(power_of_two_scale(X))
    return c * (w @ (X / c))


def empirical_covariance(X: ArrayLike, *, weights: ArrayLike | None = None) -> np.ndarray:
    r"""Covariance of the tokens' measure (the measure's, not the unbiased estimator).

    .. math::

        \Sigma = \sum_i w_i (x_i - m)(x_i - m)^\top,\qquad m = \sum_i w_i x_i .

    Parameters
    ----------
    X : array_like, shape (n, d)
        Or an array of another library (torch, JAX, CuPy): computed in its namespace, on its
        device and in its floating dtype, and returned as an array of it.
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray (or the array type of ``X``), shape (d, d)
        Symmetric positive semidefinite.

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals or `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).
    FloatingPointError
        If an entry of the covariance overflows the floating dtype.

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> from token_dynamics.diagnostics import empirical_covariance
    >>> empirical_covariance([[-1.0, 0.0], [1.0, 0.0]])
    array([[1., 0.],
           [0., 0.]])
    """
    # computed on X / c, c the power of two at max |x_ij| over the rows of positive weight
    # (exact, no overflow in the products; a row of zero weight plays no role and is dropped
    # first, so that a huge one cannot push the others into underflow), then scaled by c^2
    if type(X) is not np.ndarray and not is_numpy(X):
        xp, X, w, c0 = _tokens_weights_xp(X, weights)
        c = power_of_two_scale_xp(xp, X)
    else:
        xp, X = np, as_tokens(X)
        X, w = positive_keys(X, as_weights(weights, X.shape[0]))
        c, c0 = float(power_of_two_scale(X)), 1.0
    Xs = divide_by_power_of_two(X, c)
    Xc = Xs - w @ Xs
    C = xp.matrix_transpose(Xc) @ (w[:, None] * Xc)
    C = (C + xp.matrix_transpose(C)) / 2
    c *= c0
    with np.errstate(over="ignore"):
        C = C * c if xp is np else scale_result_xp(xp, C, c)
        C = C * c if xp is np else scale_result_xp(xp, C, c)
    if not all_finite(xp, C):
        raise FloatingPointError(
            f"the covariance of `X` overflows {str(C.dtype).split('.')[-1]} (entries up to "
            f"{c:.3g}, squared); "
            "rescale `X`."
        )
    return C


def excess_kurtosis(X: ArrayLike) -> np.ndarray:
    r"""Excess kurtosis of each coordinate of a token cloud: zero for a Gaussian.

    .. math::

        \kappa_k = \frac{\frac1n\sum_i (x_{ik} - \hat\alpha_k)^4}{\hat\Sigma_{kk}^2} - 3,

    with :math:`\hat\alpha`, :math:`\hat\Sigma` the empirical mean and covariance. For an
    i.i.d. Gaussian sample its standard error is about :math:`\sqrt{24/n}`; a value many
    standard errors away says the cloud is not Gaussian.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens, one per row, with no constant coordinate. Or an array of another library
        (torch, JAX, CuPy): computed in its namespace, on its device and in its floating
        dtype, and returned as an array of it.

    Returns
    -------
    ndarray (or the array type of ``X``), shape (d,)

    Raises
    ------
    ValueError
        If a coordinate of `X` is constant (its kurtosis is undefined).

    Examples
    --------
    Two symmetric values per coordinate have the smallest possible kurtosis, :math:`1 - 3`:

    >>> import numpy as np
    >>> from token_dynamics.diagnostics import excess_kurtosis
    >>> X = np.array([[1.0, 5.0], [-1.0, 3.0]])
    >>> excess_kurtosis(X)
    array([-2., -2.])
    """
    if type(X) is not np.ndarray and not is_numpy(X):
        xp, Z = as_tokens_xp(X)
        Z, _ = unflushed_xp(xp, Z)  # scale-free: the power of two is dropped
    else:
        xp, Z = np, as_tokens(X, "X")
    if bool(xp.any(xp.max(Z, axis=0) == xp.min(Z, axis=0))):
        raise ValueError(
            "`X` has a constant coordinate, whose kurtosis is undefined; drop that coordinate."
        )
    # the kurtosis is scale-free: divide each coordinate by its largest value first, so that
    # neither the mean nor the fourth powers overflow
    Z = Z / xp.max(xp.abs(Z), axis=0)
    Y = Z - xp.mean(Z, axis=0)
    Y = Y / xp.max(xp.abs(Y), axis=0)
    var = xp.mean(Y**2, axis=0)
    return xp.mean(Y**4, axis=0) / var**2 - 3.0


def _tokens_weights_xp(X: Any, weights: object) -> tuple[ModuleType, Any, Any, float]:
    """Tokens of another library (``as_tokens_xp``) and their probability weights, checked on
    the host (``as_weights``), restricted to the rows of positive weight (:func:`support_xp`),
    the tokens divided by the power of two ``c0`` of :func:`unflushed_xp` (1 unless the device
    flushes subnormal entries of them), the weights placed beside them; and ``c0``."""
    xp, Xc = as_tokens_xp(X)
    Xc, w = support_xp(xp, Xc, as_weights(weights, Xc.shape[0]))
    Xc, c0 = unflushed_xp(xp, Xc)
    return xp, Xc, to_namespace(xp, w, Xc, Xc.dtype), c0
