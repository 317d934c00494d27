"""Linear algebra shared by every chapter (private module, the ground floor).

One positive semidefinite square root and factor, one row tiling of a large product, one
exact rescaling (by a power of two) for overflow-safe formulas and the float64 limits of
``exp``: a chapter package uses these and never re-makes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = [
    "BLOCK_ELEMENTS",
    "EXP_FLOOR",
    "LOG_FLOAT_MAX",
    "divide_by_power_of_two",
    "power_of_two_scale",
    "power_of_two_scale_xp",
    "psd_factor",
    "psd_sqrt",
    "row_blocks",
]

#: Largest argument of ``exp`` that stays finite in float64 (log of the largest double).
LOG_FLOAT_MAX = float(np.log(np.finfo(np.float64).max))

#: Lowest exponent passed to ``np.exp`` where terms far below the largest do not matter (the
#: softmax velocity, the Sinkhorn kernels): ``exp(-700)`` is a normal double (1e-304); below about
#: -708 results turn subnormal and numpy's exp falls back to a slow path (measured: 150x slower
#: at -745, 5x for -inf).
EXP_FLOOR = -700.0

#: Number of float64 entries in one slab of the score matrix (rows x keys): 2**16 entries are
#: 512 KiB, so a slab and its product stay in a core's L2 cache. Measured on the 2-core machine
#: (CPU time of a softmax velocity at n = 16384, d = 2, `benchmarks/run.py`): 2**16 beat 2**15,
#: 2**17 and 2**18 by 10-20 %, and 16 MiB slabs (which spill to memory) ran 3-5x slower. The
#: extra memory is a slab per thread plus O(n d) for any n (n = 10^5 included).
BLOCK_ELEMENTS = 2**16


def power_of_two_scale(X: np.ndarray, axis: int | None = None) -> np.ndarray:
    """The power of two at or just below ``max |X|`` (along `axis`, kept as a length-1 axis).

    Dividing by it is exact (no rounding) and brings the entries into ``(-2, 2)``, so that
    squares and inner products of the rescaled array neither overflow nor underflow; a
    homogeneous formula then restores the scale at the end. All-zero slices get 1.

    Examples
    --------
    >>> power_of_two_scale(np.array([3.0, -5.0]))
    array(4.)
    """
    peak = np.max(np.abs(X), axis=axis, keepdims=axis is not None)
    # peak = mantissa * 2^e with mantissa in [1/2, 1): 2^(e-1) <= peak, always representable
    return np.where(peak > 0, np.ldexp(1.0, np.frexp(peak)[1] - 1), 1.0)


def power_of_two_scale_xp(xp: Any, X: Any) -> float:
    """:func:`power_of_two_scale` of a whole array of another library (``xp``, its array-API
    namespace), as a Python float: one maximum read on the host. Divide by it with
    :func:`divide_by_power_of_two`."""
    return float(power_of_two_scale(np.asarray(float(xp.max(xp.abs(X))))))


def divide_by_power_of_two(X: Any, c: float) -> Any:
    """``X / c`` for a power of two ``c``, exact: in two steps when ``1 / c`` is below the
    normal range (XLA, JAX's compiler, divides by multiplying with the reciprocal and flushes
    subnormal numbers to zero on the CPU, so ``X / 2**1023`` came out as zeros)."""
    if c > 2.0**511:
        return (X / 2.0**511) / (c / 2.0**511)
    return X / c


def _eig_psd(S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Square roots of the eigenvalues (rounding below zero clipped to zero) and eigenvectors of
    ``(S + S^T) / 2``, from ``S`` divided by a power of two near its largest entry: an
    eigenvalue of ``S`` may pass the largest float (1.9e308 for ``1e308 [[1, 0.9], [0.9, 1]]``,
    whose factor then held inf) while its square root is of order 1e154."""
    S = np.asarray(S, dtype=np.float64)
    c = power_of_two_scale(S)
    A = S / c  # exact, entries in (-2, 2)
    lam, U = np.linalg.eigh(0.5 * (A + A.T))
    return np.sqrt(np.clip(lam, 0.0, None)) * np.sqrt(c), U


def psd_factor(S: np.ndarray) -> np.ndarray:
    r"""Factor ``L = U diag(sqrt(lam))`` with :math:`L L^\top = S` for a symmetric PSD ``S``.

    ``S`` is assumed validated (e.g. by ``as_covariance``); eigenvalues that rounding made
    slightly negative are clipped to zero, so degenerate covariances have a factor.

    Parameters
    ----------
    S : (d, d) array, symmetric positive semidefinite

    Returns
    -------
    (d, d) array

    Examples
    --------
    >>> L = psd_factor(np.array([[4.0, 0.0], [0.0, 0.0]]))
    >>> L @ L.T
    array([[4., 0.],
           [0., 0.]])
    """
    root, U = _eig_psd(S)
    return U * root


def psd_sqrt(S: np.ndarray) -> np.ndarray:
    r"""Symmetric PSD square root :math:`S^{1/2}` of a symmetric PSD ``S`` of shape ``(d, d)``.

    Examples
    --------
    >>> psd_sqrt(np.array([[4.0, 0.0], [0.0, 9.0]]))
    array([[2., 0.],
           [0., 3.]])
    """
    root, U = _eig_psd(S)
    return (U * root) @ U.T


def row_blocks(n_rows: int, n_cols: int) -> Iterator[slice]:
    """Yield slices of at most ``BLOCK_ELEMENTS // n_cols`` (at least one) consecutive rows.

    Examples
    --------
    >>> [(b.start, b.stop) for b in row_blocks(5, BLOCK_ELEMENTS // 2)]
    [(0, 2), (2, 4), (4, 5)]
    """
    step = max(1, BLOCK_ELEMENTS // max(n_cols, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))
