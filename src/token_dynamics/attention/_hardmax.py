"""The tie sets of hardmax attention and the hardmax kernel (private)."""

from __future__ import annotations

import numpy as np

from ._kernels import tiles
from ._scale import rescale_scores

__all__ = [
    "hardmax_rows",
    "tie_threshold",
]


def tie_threshold(m: np.ndarray, tol: float, e: int = 0) -> np.ndarray:
    """Lowest score tied with the maximum ``m`` at relative tolerance ``tol`` (hardmax):
    ``m - tol max(1, |m|)`` for true scores ``S * 2**e``, computed on the scaled ones."""
    one = 1.0 if e == 0 else np.ldexp(1.0, -e)  # the 1 of max(1, |m|), on the scale of S
    return m - tol * np.maximum(one, np.abs(m))


def hardmax_rows(F: np.ndarray, G: np.ndarray, R: np.ndarray, tol: float) -> np.ndarray:
    """``sum_{j in C_i} R_j`` over the tie sets ``C_i = {j : s_ij >= tie_threshold(m_i)}`` of
    the scores ``s = F G^T`` (``m_i`` the row maximum), in slabs of at most
    ``BLOCK_ELEMENTS`` scores (``_kernels.tiles``): extra memory O(n d) plus one slab.

    Rows of at most ``BLOCK_ELEMENTS`` keys: an argmax finds the best key of each row and a
    second maximum, with that key masked, confirms it is alone above the threshold; its row of
    ``R`` is gathered, with no product over the slab, and rows with a tie (or a non-finite
    maximum) sum ``R`` over their indicator. Longer rows (n > 65536) are cut into key tiles:
    a first pass finds each row's maximum, a second sums ``R`` over the keys above the
    threshold. Scores that would overflow are rescaled by a power of two first
    (``_scale.rescale_scores``); the tie rule is the same on either scale.

    Runs on the calling thread: its passes are light, and on two threads the hand-offs cost more
    than they share (measured at n = 16384, d = 2: 0.23 s on one thread, 0.37 s on two).
    """
    F, G, _, e = rescale_scores(F, G, None)
    n_rows, n_cols = F.shape[0], G.shape[0]
    GT = np.ascontiguousarray(G.T)
    RT = np.ascontiguousarray(R.T)
    out = np.empty((n_rows, R.shape[1]), dtype=F.dtype)
    blocks, col_tiles = tiles(n_rows, n_cols, 0)
    if len(col_tiles) > 1:  # rows longer than a slab: maximum first, then the tie sums
        for rows in blocks:
            m = np.full(rows.stop - rows.start, -np.inf, dtype=F.dtype)
            for cols in col_tiles:
                np.maximum(m, np.dot(F[rows], GT[:, cols]).max(axis=1), out=m)
            threshold = tie_threshold(m, tol, e)[:, None]
            block = out[rows]
            for k, cols in enumerate(col_tiles):
                T = np.dot(F[rows], GT[:, cols])
                np.greater_equal(T, threshold, out=T)
                part = np.dot(RT[:, cols], T.T).T
                if k == 0:
                    block[...] = part
                else:
                    block += part
        return out
    for rows in blocks:
        S = np.matmul(F[rows], GT)  # less per call than np.dot here (n = 4096, d = 2: 0.82x)
        r = np.arange(S.shape[0])
        best = S.argmax(axis=1)
        m = S[r, best]
        threshold = tie_threshold(m, tol, e)
        S[r, best] = -np.inf
        tied = ~(S.max(axis=1) < threshold)  # a second key at the threshold, or nan
        block = out[rows]
        block[:] = R[best]
        if tied.any():
            S[r, best] = m
            T = S[tied]
            np.greater_equal(T, threshold[tied, None], out=T)
            block[tied] = np.dot(RT, T.T).T
    return out
