"""How spread or clustered a token cloud is: diameter, smallest inner product, clusters."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np
from scipy.spatial.distance import cdist

from .._backend import device, is_numpy, library
from .._guards import float_guard
from .._linalg import (
    divide_by_power_of_two,
    power_of_two_scale,
    power_of_two_scale_xp,
    row_blocks,
)
from .._typing import ArrayLike
from .._validation import as_tokens, as_tokens_xp, check_positive
from ._scaling import flushes_subnormals, unflushed_xp, within_tol, within_tol_xp

__all__ = ["cluster_count", "diameter", "min_inner_product"]


def diameter(X: ArrayLike) -> float:
    r"""Diameter :math:`\max_{i,j} |x_i - x_j|` of the cloud (0 for a single token).

    Distances are computed from coordinate differences (no cancellation for tight clusters),
    in row blocks.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Or an array of another library (torch, JAX, CuPy): computed in its namespace, on its
        device and in its floating dtype, from the tokens' offsets to the first token (see
        Notes).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals.
    TypeError
        If an array argument is not real (complex, boolean, string or object).
    FloatingPointError
        If the diameter overflows float64.

    Notes
    -----
    On arrays of another library the squared distances come from inner products, which a
    device multiplies fast, taken of the offsets :math:`z_i = x_i - x_1`: since
    :math:`|z_i| \le D` for every ``i``, the rounding of
    :math:`|z_i|^2 + |z_j|^2 - 2\langle z_i, z_j\rangle` is of order :math:`(d + 2)\,
    \varepsilon D^2`, a relative error of order :math:`(d + 2)\, \varepsilon` on :math:`D`
    however tight the cloud and however far from the origin (derived in this book).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.diagnostics import diameter
    >>> diameter([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    5.0
    """
    if type(X) is not np.ndarray and not is_numpy(X):
        return _diameter_xp(X)
    X = as_tokens(X)
    # distances of X / c, c the power of two at max |x_ij| (exact, no overflow in cdist)
    c = float(power_of_two_scale(X))
    best = 0.0
    for rows in row_blocks(X.shape[0], X.shape[0]):
        best = max(best, float(cdist(X[rows] / c, X / c).max()))
    with np.errstate(over="ignore"):
        best *= c
    if not np.isfinite(best):
        raise FloatingPointError("the diameter of `X` overflows float64; rescale `X`.")
    return best


@float_guard("the smallest inner product", "rescale `X`")
def min_inner_product(X: ArrayLike) -> float:
    r"""Smallest pairwise inner product :math:`\min_{i,j}\langle x_i, x_j\rangle`.

    On the sphere, a value above :math:`1 - \delta` means every pair is within angle
    :math:`\arccos(1 - \delta)`: the cloud has clustered.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Or an array of another library (torch, JAX, CuPy): computed in its namespace, on its
        device and in its floating dtype.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals.
    TypeError
        If an array argument is not real (complex, boolean, string or object).
    FloatingPointError
        If an inner product overflows float64.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.diagnostics import min_inner_product
    >>> min_inner_product([[1.0, 0.0], [0.0, 1.0]])
    0.0
    """
    if type(X) is not np.ndarray and not is_numpy(X):
        return _min_inner_product_xp(X)
    X = as_tokens(X)
    return min(float((X[rows] @ X.T).min()) for rows in row_blocks(X.shape[0], X.shape[0]))


def cluster_count(X: ArrayLike, tol: float) -> int:
    r"""Number of clusters at scale ``tol``: connected components of the graph that links
    tokens at distance :math:`\le` ``tol`` (single-linkage clusters).

    Computed by min-label propagation with pointer jumping over row blocks of the distance
    matrix (memory bounded). Each pair is linked as its exact distance says, unless that
    distance lies within a relative ``(d + 4) eps`` of ``tol`` (a few units in its last place:
    there the rounding of the coordinate differences themselves may decide either way).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Or an array of another library (torch, JAX, CuPy): the labels propagate in its
        namespace and on its device, the distances taken as in :func:`diameter` (from inner
        products of the offsets to the first token), and every pair whose computed distance
        lies within its rounding bound of ``tol`` recomputed from coordinate differences, so
        that the count is the same as for numpy arrays.
    tol : float
        Linking distance, nonnegative (``0`` counts distinct tokens).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals or `tol` is negative; on a device
        that flushes subnormal numbers to zero (JAX on the CPU), if `tol` is positive but
        below ``smallest_normal / eps`` times the power of two that brings `X` into the
        normal range (such distances are invisible there).
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Notes
    -----
    Computed distances that lie within their rounding bound of ``tol``, or whose squares may
    have underflowed, are decided from the coordinate differences :math:`\delta` of the pair
    as :math:`|\delta / m| \le \mathrm{tol} / m`, :math:`m = \max_k |\delta_k|`: no square
    underflows or overflows, so the count holds at every scale (a gap of ``1e-3`` beside a
    token at ``1e200``, distinct tokens at ``1e-310`` with ``tol = 0``).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.diagnostics import cluster_count
    >>> cluster_count([[0.0, 0.0], [0.0, 1e-3], [1.0, 0.0]], tol=1e-2)
    2
    """
    if type(X) is not np.ndarray and not is_numpy(X):
        return _cluster_count_xp(X, check_positive(tol, "tol", allow_zero=True))
    X = as_tokens(X)
    tol = check_positive(tol, "tol", allow_zero=True)
    n, d = X.shape
    # distances of X / c, c the power of two at max |x_ij| (exact, no overflow in cdist), each
    # within (d + 4) eps / 2 of the true one relative, plus the absolute error of squares that
    # underflow; the pairs within 4 (d + 2) eps of t, or below 2**-480 (whose squares may have
    # underflowed) when t is too, are decided again from the coordinate differences of X
    c = float(power_of_two_scale(X))
    Xs = X / c
    t = tol / c
    slack = 4 * (d + 2) * float(np.finfo(np.float64).eps)
    floor = 2.0**-480
    labels = np.arange(n)
    while True:
        new = labels.copy()
        for rows in row_blocks(n, n):
            D = cdist(Xs[rows], Xs)
            near = D <= t
            unsure = np.abs(D - t) <= slack * np.maximum(D, t)
            if t < 2 * floor:
                unsure |= D <= floor
            i, j = np.nonzero(unsure)
            i += rows.start
            for pairs in row_blocks(i.size, d):  # slices of the pairs: memory bounded
                near[i[pairs] - rows.start, j[pairs]] = within_tol(X[i[pairs]] - X[j[pairs]], tol)
            new[rows] = np.where(near, labels[None, :], n).min(axis=1)
        while True:  # pointer jumping: a label is a token of the same component
            jumped = new[new]
            if np.array_equal(jumped, new):
                break
            new = jumped
        if np.array_equal(new, labels):
            return int(np.unique(labels).size)
        labels = new


def _offsets_xp(X: Any) -> tuple[ModuleType, Any, Any, Any, float, float]:
    """Tokens of another library as offsets to the first token, exactly rescaled by powers of
    two so that their largest entry lies in [1, 2) (no overflow nor underflow in the squares):
    the namespace, the tokens ``U`` (``X / c0``, ``c0 = 1`` unless the device flushes subnormal
    entries of ``X``: :func:`unflushed_xp`), the offsets ``Z``, their squared norms, the scale
    ``s`` (``x_i - x_1 = s z_i``) and ``c0``."""
    xp, X = as_tokens_xp(X)
    U, c0 = unflushed_xp(xp, X)
    c = power_of_two_scale_xp(xp, U)
    Us = divide_by_power_of_two(U, c)
    Z = Us - Us[:1, :]
    c2 = power_of_two_scale_xp(xp, Z)
    Z = divide_by_power_of_two(Z, c2)
    return xp, U, Z, xp.sum(Z * Z, axis=1), c0 * c * c2, c0


def _diameter_xp(X: Any) -> float:
    r"""``diameter`` on arrays of another library: the largest of
    :math:`|z_i|^2 + |z_j|^2 - 2 \langle z_i, z_j \rangle` over blocks of rows."""
    from ..attention._array_api import query_blocks

    xp, _, Z, sq, scale, _ = _offsets_xp(X)
    ZT = xp.matrix_transpose(Z)
    best = 0.0
    for rows in query_blocks(xp, Z, Z):
        D2 = sq[rows][:, None] + sq[None, :] - 2.0 * (Z[rows, :] @ ZT)
        best = max(best, float(xp.max(D2)))
    diam = math.sqrt(best) * scale  # best >= 1 unless the tokens coincide: no underflow
    if not math.isfinite(diam):
        raise FloatingPointError("the diameter of `X` overflows float64; rescale `X`.")
    return diam


def _min_inner_product_xp(X: Any) -> float:
    """``min_inner_product`` on arrays of another library, over blocks of rows of ``X / c``."""
    from ..attention._array_api import query_blocks

    xp, X = as_tokens_xp(X)
    X, c0 = unflushed_xp(xp, X)
    c = power_of_two_scale_xp(xp, X)
    Xs = divide_by_power_of_two(X, c)
    XT = xp.matrix_transpose(Xs)
    low = min(float(xp.min(Xs[rows, :] @ XT)) for rows in query_blocks(xp, Xs, Xs))
    value = low * c * c * c0 * c0
    if not math.isfinite(value):
        raise FloatingPointError(
            "the smallest inner product of `X` overflows float64; rescale `X`."
        )
    return value


def _cluster_count_xp(X: Any, tol: float) -> int:
    r"""``cluster_count`` on arrays of another library: min-label propagation with pointer
    jumping, on the device. A block's links come from the squared distances of
    :func:`_offsets_xp`; the pairs whose squared distance lies within its rounding bound,
    :math:`8 (d + 2) \varepsilon \max_i |z_i|^2`, of ``tol**2`` (those whose squares
    underflowed included: the bound is at least :math:`8 (d + 2) \varepsilon`) are decided
    again from the coordinate differences of the tokens, scaled by their largest entry
    (:func:`within_tol_xp`: no square underflows)."""
    from ..attention._array_api import BLOCK_ENTRIES, query_blocks

    xp, U, Z, sq, scale, c0 = _offsets_xp(X)
    n, d = Z.shape
    t = tol / scale
    t2 = t * t
    tu = tol / c0  # the tolerance for the tokens U = X / c0
    finfo = xp.finfo(Z.dtype)
    flushes = flushes_subnormals(xp, U)
    resolved = float(finfo.smallest_normal) / float(finfo.eps)
    if flushes and 0 < tu < resolved:
        raise ValueError(
            f"`tol` = {tol!r} lies below {resolved * c0:.3g}, the smallest distance that "
            f"{library(xp)} on {device(U)} resolves for these tokens (it flushes subnormal "
            "numbers to zero); pass a larger `tol`, `tol=0` (distinct tokens), or "
            "`np.asarray(X)` (numpy keeps them)."
        )
    err = 8 * (d + 2) * float(finfo.eps) * float(xp.max(sq))
    dev = device(Z)
    index = xp.arange(n, device=dev)
    ZT = xp.matrix_transpose(Z)
    blocks = query_blocks(xp, Z, Z)

    def links(rows: slice) -> Any:
        D2 = sq[rows][:, None] + sq[None, :] - 2.0 * (Z[rows, :] @ ZT)
        same = index[rows][:, None] == index[None, :]
        unsure = (xp.abs(D2 - t2) <= err) & ~same
        near = (D2 <= t2) | same
        if bool(xp.any(unsure)):  # decided by coordinate differences, in slices of rows
            step = max(1, BLOCK_ENTRIES // (n * d))
            exact = [
                within_tol_xp(xp, U[r:min(r + step, rows.stop), None, :], U[None, :, :], tu,
                              flushes)
                for r in range(rows.start, rows.stop, step)
            ]  # fmt: skip
            near = xp.where(unsure, exact[0] if len(exact) == 1 else xp.concat(exact), near)
        return near

    labels = index
    while True:
        parts = [xp.min(xp.where(links(rows), labels[None, :], n), axis=1) for rows in blocks]
        new = parts[0] if len(parts) == 1 else xp.concat(parts)
        while True:  # pointer jumping: a label is a token of the same component
            jumped = xp.take(new, new)
            if bool(xp.all(jumped == new)):
                break
            new = jumped
        if bool(xp.all(new == labels)):  # each component keeps its least index as label
            return int(xp.sum(xp.astype(labels == index, xp.int32)))
        labels = new
