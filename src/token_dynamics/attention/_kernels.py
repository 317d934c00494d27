"""Row-blocked attention kernels (private).

Every attention variant whose weights are a function of a score matrix goes through
:func:`apply_rows`: the ``(n, n)`` score matrix is never formed at once, only ``(b, n_keys)``
slabs of it, so the memory stays bounded whatever the number of tokens. A faster kernel (threads,
a compiled loop) can replace :func:`apply_rows` without touching the variants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

#: Number of float64 entries in one slab of the score matrix (rows x keys): 2**17 entries are
#: 1 MiB, so a slab and its temporaries stay in cache. Measured on the 2-core machine, softmax
#: velocities at n = 16384 (d = 2) ran 3-5x faster than with 16 MiB slabs (which spill to
#: memory), and the extra memory is a few MiB plus O(n d) for any n (n = 10^5 included).
BLOCK_ELEMENTS = 2**17

#: A transform maps a slab of scores ``S`` (rows x keys, may be overwritten) and the slice of
#: query rows it covers to the kernel slab ``E`` and an optional per-row log-scale ``c`` such
#: that the true kernel is ``exp(c)[:, None] * E``.
Transform = Callable[[np.ndarray, slice], tuple[np.ndarray, np.ndarray | None]]


def row_blocks(n_rows: int, n_cols: int) -> Iterator[slice]:
    """Yield slices of at most ``BLOCK_ELEMENTS // n_cols`` consecutive rows."""
    step = max(1, BLOCK_ELEMENTS // max(n_cols, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def scores(F: np.ndarray, G: np.ndarray, rows: slice, bias: np.ndarray | None) -> np.ndarray:
    """Slab ``F[rows] @ G.T (+ bias)`` of the score matrix."""
    S = F[rows] @ G.T
    if bias is not None:
        S += bias
    return S


def apply_rows(
    F: np.ndarray,
    G: np.ndarray,
    R: np.ndarray,
    transform: Transform,
    *,
    bias: np.ndarray | None = None,
    normalise: bool,
) -> np.ndarray:
    """Return ``kernel @ R`` row block by row block, with ``kernel = transform(F @ G.T + bias)``.

    With ``normalise=True`` the last column of ``R`` holds the key weights and the result is
    the first columns divided by the last one (a row-stochastic average).
    """
    out = np.empty((F.shape[0], R.shape[1]))
    for rows in row_blocks(F.shape[0], G.shape[0]):
        E, log_scale = transform(scores(F, G, rows, bias), rows)
        block = E @ R
        if log_scale is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                block *= np.exp(log_scale)[:, None]
        out[rows] = block
    if normalise:
        return out[:, :-1] / out[:, -1:]
    return out


def matrix_rows(
    F: np.ndarray,
    G: np.ndarray,
    w: np.ndarray,
    transform: Transform,
    *,
    bias: np.ndarray | None = None,
    normalise: bool,
) -> np.ndarray:
    """Dense matrix ``w_j kernel_ij`` (rows normalised when asked), row block by row block."""
    out = np.empty((F.shape[0], G.shape[0]))
    for rows in row_blocks(F.shape[0], G.shape[0]):
        E, log_scale = transform(scores(F, G, rows, bias), rows)
        E = E * w
        if normalise:
            E /= E.sum(axis=1, keepdims=True)
        elif log_scale is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                E *= np.exp(log_scale)[:, None]
        out[rows] = E
    return out


def softmax_transform(S: np.ndarray, rows: slice) -> tuple[np.ndarray, None]:
    """Stable exponential of a slab: ``exp(S - max_j S)`` in place (log-sum-exp trick)."""
    S -= S.max(axis=1, keepdims=True)
    np.exp(S, out=S)
    return S, None


def exp_transform(S: np.ndarray, rows: slice) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised exponential, returned as ``exp(S - m)`` and the log-scale ``m``."""
    m = S.max(axis=1)
    S -= m[:, None]
    np.exp(S, out=S)
    return S, m
