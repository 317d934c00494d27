"""The causal (masked) softmax kernel: keys in order of position, prefix slabs (private).

Query ``i`` sees key ``j`` iff ``p_j <= p_i`` (positions). With the keys sorted by position
the keys a query sees are a prefix, of length ``c_i`` (a binary search), and with the queries
sorted too a block of queries needs the keys up to its last query's prefix only: each slab
``F[block] @ G[:c]^T`` has at most ``BLOCK_ELEMENTS`` scores, only the columns between the
block's shortest and longest prefix are masked (``-inf``), and the keys no query of the block
sees are never touched. About half the score matrix is computed (its causal triangle) and the
extra memory is a slab per worker plus O(n d), whatever n. Orders of equal positions follow a
stable sort, so the result depends on the positions only, not on the threads.
"""

from __future__ import annotations

import numpy as np

from . import _kernels
from ._scale import rescale_scores
from ._softmax import folds_weights, softmax_transform

__all__: list[str] = []


def _prefixes(pq: np.ndarray, pk: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Key order, query order and each sorted query's prefix length; a query that sees no
    key raises ``ValueError`` naming the first one (in the caller's order)."""
    order_k = np.argsort(pk, kind="stable")
    counts = np.searchsorted(pk[order_k], pq, side="right")
    if np.any(counts == 0):
        i = int(np.argmax(counts == 0))
        raise ValueError(
            f"query {i} (position {pq[i]:.3g}) sees no token of positive weight; "
            "give a positive weight to a token at or before it."
        )
    order_q = np.argsort(pq, kind="stable")
    return order_k, order_q, counts[order_q]


def _blocks(counts: np.ndarray) -> list[slice]:
    """Consecutive sorted queries whose slab (rows x the last row's prefix, the longest) has at
    most ``BLOCK_ELEMENTS`` scores; at least one row each. O(n) in all."""
    limit = max(int(_kernels.BLOCK_ELEMENTS), 1)
    blocks, start, n = [], 0, counts.shape[0]
    while start < n:
        k_max = min(n - start, max(1, limit // int(counts[start])))
        k = np.arange(1, k_max + 1)
        # k * counts[start + k - 1] grows with k: the rows that fit are a prefix
        fits = int(np.count_nonzero(k * counts[start : start + k_max] <= limit))
        stop = start + max(1, fits)
        blocks.append(slice(start, stop))
        start = stop
    return blocks


def _slab(
    F: np.ndarray,
    G: np.ndarray,
    counts: np.ndarray,
    rows: slice,
    e: int,
    log_w: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Softmax numerators of a block of sorted queries over its longest prefix of keys (with
    the keys' log-weights ``log_w`` added to the scores, when given)."""
    c0, c1 = int(counts[rows.start]), int(counts[rows.stop - 1])
    S = np.dot(F[rows], G[:c1].T)  # a contiguous row block: BLAS reads its transpose, no copy
    if log_w is not None:
        S += log_w[:c1]
    if c1 > c0:
        hidden = np.arange(c0, c1)[None, :] >= counts[rows, None]
        S[:, c0:c1][hidden] = -np.inf
    return softmax_transform(S, rows, e)[0], c1


def _log_weights(w: np.ndarray, e: int) -> np.ndarray | None:
    """The keys' log-weights when they must enter the scores (unscaled scores, weights spanning
    more than the exp floor allows: ``_softmax.folds_weights``), else ``None``."""
    return np.log(w) if e == 0 and folds_weights(w) else None


def causal_rows(
    F: np.ndarray,
    G: np.ndarray,
    R: np.ndarray,
    w: np.ndarray,
    pq: np.ndarray,
    pk: np.ndarray,
) -> np.ndarray:
    """Masked softmax average ``sum_{j: pk_j <= pq_i} P_ij R_j[:-1]`` with key weights ``w``,
    the last column of ``R`` holding ones (``_kernels.apply_rows`` with ``weights`` and
    ``normalise=True``, masked): tiny weights enter as log-weights, the others multiply the
    values brought to unit size (``_kernels.weighted_columns``)."""
    order_k, order_q, counts = _prefixes(pq, pk)
    F, G, _, e = rescale_scores(F[order_q], G[order_k], None)
    ws = w[order_k]
    log_w = _log_weights(ws, e)
    Rs, scale = _kernels.weighted_columns(R[order_k], None if log_w is not None else ws)
    ratio = scale[:-1] / scale[-1]
    out = np.empty((F.shape[0], R.shape[1] - 1), dtype=F.dtype)

    def task(group: list[slice]) -> None:
        for rows in group:
            E, c1 = _slab(F, G, counts, rows, e, log_w)
            sums = np.dot(E, Rs[:c1])
            out[order_q[rows]] = sums[:, :-1] / sums[:, -1:] * ratio

    _kernels._run(task, _blocks(counts), int(counts.sum()), max(F.shape[1], R.shape[1]))
    return out


def causal_matrix(
    F: np.ndarray, G: np.ndarray, w: np.ndarray, pq: np.ndarray, pk: np.ndarray
) -> np.ndarray:
    """Dense masked softmax matrix ``P_ij`` (rows sum to one over the keys each query sees)."""
    order_k, order_q, counts = _prefixes(pq, pk)
    F, G, _, e = rescale_scores(F[order_q], G[order_k], None)
    ws = w[order_k]
    log_w = _log_weights(ws, e)
    out = np.zeros((F.shape[0], G.shape[0]), dtype=F.dtype)
    for rows in _blocks(counts):
        E, c1 = _slab(F, G, counts, rows, e, log_w)
        if log_w is None:
            E *= ws[:c1]
        E /= E.sum(axis=1, keepdims=True)
        out[np.ix_(order_q[rows], order_k[:c1])] = E
    return out
