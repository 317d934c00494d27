"""Numbers read off data: the numerical rank of a matrix and the log-log fit of a rate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._backend import all_finite, float_dtype, is_numpy, namespace
from .._typing import ArrayLike
from .._validation import (
    as_matrix,
    as_real_array,
    as_vector,
    check_positive,
)
from ._scaling import unflushed_xp

__all__ = ["PowerLawFit", "fit_power_law", "numerical_rank"]


def numerical_rank(M: ArrayLike, *, rtol: float | None = None) -> int:
    r"""Number of singular values of ``M`` above ``rtol`` times the largest one.

    .. math:: \operatorname{rank}_{\mathrm{rtol}}(M) = \#\{i : \sigma_i(M) >
              \mathrm{rtol}\cdot\sigma_1(M)\}.

    Parameters
    ----------
    M : array_like, shape (p, q)
        E.g. tokens ``X`` (the dimension of the span of a collapsed cloud) or a covariance.
        Or an array of another library (torch, JAX, CuPy): its singular values are computed
        in its namespace, on its device and in its floating dtype.
    rtol : float, optional
        Relative threshold; default ``max(p, q) * eps`` (as :func:`numpy.linalg.matrix_rank`),
        ``eps`` of the dtype computed in.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If `M` is not a 2-D array of finite reals or `rtol` is negative.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    G. H. Golub, C. F. Van Loan, *Matrix Computations*, 4th ed., 2013, §5.4.1.

    Examples
    --------
    >>> from token_dynamics.diagnostics import numerical_rank
    >>> numerical_rank([[1.0, 2.0], [2.0, 4.0 + 1e-12]], rtol=1e-9)
    1
    """
    if type(M) is not np.ndarray and not is_numpy(M):
        return _numerical_rank_xp(M, rtol)
    M = as_matrix(M, "M")
    if rtol is None:
        rtol = max(M.shape) * np.finfo(np.float64).eps
    rtol = check_positive(rtol, "rtol", allow_zero=True)
    if M.size == 0:
        return 0
    s = np.linalg.svd(M, compute_uv=False)
    if s[0] == 0:
        return 0
    return int(np.sum(s > rtol * s[0]))


def _numerical_rank_xp(M: Any, rtol: float | None) -> int:
    """``numerical_rank`` of a matrix of another library, by its ``linalg.svdvals``."""
    xp = namespace(M)
    if M.ndim != 2:
        raise ValueError(f"`M` must be a 2-D array; got shape {tuple(M.shape)}.")
    if not xp.isdtype(M.dtype, ("real floating", "integral")):
        raise TypeError(f"`M` must hold real numbers; got dtype {M.dtype}.")
    Mc = xp.astype(M, float_dtype(xp, M), copy=False)
    if rtol is None:
        rtol = max(Mc.shape) * float(xp.finfo(Mc.dtype).eps)
    rtol = check_positive(rtol, "rtol", allow_zero=True)
    if Mc.shape[0] == 0 or Mc.shape[1] == 0:
        return 0
    if not all_finite(xp, Mc):
        raise ValueError("`M` must be finite; remove the NaN or inf entries.")
    Mc, _ = unflushed_xp(xp, Mc, "M")  # the rank is scale-free: the power of two is dropped
    s = xp.linalg.svdvals(Mc)
    top = xp.max(s)
    return int(xp.sum(xp.astype(s > rtol * top, xp.int32))) if float(top) > 0 else 0


@dataclass(frozen=True)
class PowerLawFit:
    r"""Least-squares line :math:`\log y = \text{intercept} + \text{slope}\,\log x`.

    Calling it evaluates the power law :math:`y = e^{\text{intercept}}\,x^{\text{slope}}`.

    Attributes
    ----------
    slope : float
        The exponent :math:`p` of :math:`y \approx C x^p` (an observed convergence order).
    intercept : float
        :math:`\log C`.

    Examples
    --------
    Returned by :func:`fit_power_law`; on exact data :math:`y = 3x^{-1/2}` the fit recovers
    the exponent and the constant:

    >>> import numpy as np
    >>> from token_dynamics.diagnostics import fit_power_law
    >>> x = np.array([1.0, 4.0, 100.0])
    >>> fit = fit_power_law(x, 3.0 * x**-0.5)
    >>> round(fit.slope, 12), round(float(np.exp(fit.intercept)), 12)
    (-0.5, 3.0)
    >>> fit([16.0])
    array([0.75])
    """

    slope: float
    intercept: float

    def __call__(self, x: ArrayLike) -> np.ndarray:
        return np.exp(self.intercept) * as_real_array(x, "x") ** self.slope


def fit_power_law(x: ArrayLike, y: ArrayLike) -> PowerLawFit:
    """Fit :math:`y \\approx C x^{p}` by least squares on a log-log scale.

    Parameters
    ----------
    x, y : array_like, shape (k,)
        Positive values, at least two distinct ``x``.

    Returns
    -------
    PowerLawFit

    Raises
    ------
    ValueError
        If a value is not positive or all ``x`` are equal.

    Examples
    --------
    >>> from token_dynamics.diagnostics import fit_power_law
    >>> fit = fit_power_law([1, 4, 16], [1.0, 0.5, 0.25])
    >>> round(fit.slope, 12)
    -0.5
    """
    x = as_vector(x, "x")
    y = as_vector(y, "y", size=x.shape[0])
    if np.any(x <= 0) or np.any(y <= 0) or np.unique(x).shape[0] < 2:
        raise ValueError("`x` and `y` must be positive, with at least two distinct `x`.")
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return PowerLawFit(float(slope), float(intercept))
