"""Row-blocked, threaded attention kernels: the tiling, the thread pool and the drivers (private).

Every attention variant whose weights are a function of a score matrix goes through
:func:`apply_rows` (velocities) or :func:`matrix_rows` (attention matrices): the ``(n, n)`` score
matrix is never formed at once, only slabs of at most :data:`BLOCK_ELEMENTS` entries, so memory
stays bounded whatever the number of tokens.

Speed. A velocity costs ``n^2`` exponentials and two products of ``n^2 d`` multiply-adds. The
softmax and sigmoid kernels cut the score matrix into tiles (:func:`tiles`): for ``d <= 3``,
slabs of whole rows, whose time is in ``np.exp``; for wider ``d``, cache-sized tiles of rows and
keys, whose two products BLAS runs at close to its rate (16-row slabs of whole rows ran them at
a third of it), with the sums of a row block accumulated over its key tiles in a fixed order.
Each tile is one small matrix product into a reused buffer, ``np.exp`` in place and one product with
the value columns, all in cache, and the tiles are shared out among :data:`THREADS` threads, the
calling one and a pool's (numpy's ufuncs and products release the GIL), while BLAS is held to one
thread (:func:`serial_blas`). Which rows and keys form a tile depends on neither, so threaded and
serial evaluations give the same numbers. Score products go through ``np.matmul`` on contiguous
key tiles, which costs less per call than ``np.dot`` at these shapes: the softmax velocity on
one / two threads, float64, n = 1024, took 0.90 / 0.88x the time at d = 2, 0.80 / 0.81x at
d = 8, 0.93 / 0.92x at d = 16 and the same at d = 64 (n = 4096: 0.88 / 0.79x, 0.74 / 0.79x,
0.99 / 0.93x, 1.00 / 0.97x; float32 alike). The kernels work in the dtype of their arrays,
float64 or float32 (the exponent limits of ``_softmax.exp_limits`` follow it).

The plain softmax (``transform is softmax_transform``) has a dedicated path: each row's shift
comes from O(n d) bounds (``_softmax.softmax_shift``) and is folded into the score product, which
saves the max and subtract passes over the slab (no shift at all when every score is within
``_softmax.SHIFT_SLACK`` of 0); rows whose bounds are loose get their exact maximum, from the
vertices of the keys' convex hull when the keys have at most three coordinates (counting a score
bias), else from the scores themselves. Shifted scores are clamped at ``_softmax.EXP_FLOOR``
when they can reach it: ``np.exp`` of arguments whose result is subnormal or zero runs 5 to 150
times slower than of ordinary ones, and such terms are below ``e^-700`` of the row's largest
term, far under round-off. Key weights smaller than that floor allows against the others
(``_softmax.folds_weights``) enter as log-weights in the score bias, before the shift and the
clamp, so a tiny weight on a row's best key keeps its exact share. Rows longer than a slab
(n > 65536) are cut into key tiles too.

Scale. Scores that could leave the floating range (tokens of norm ~1e155 in float64) are
computed on factors rescaled by powers of two (``_scale.rescale_scores``, exact) and handed to
the transforms with the exponent of their scale, which each transform restores after its
shift: the softmax and hardmax weights stay exact where a finite answer exists.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
from threadpoolctl import ThreadpoolController

from .._linalg import BLOCK_ELEMENTS, power_of_two_scale, row_blocks
from ._scale import rescale_scores
from ._softmax import (
    Transform,
    exp_limits,
    exp_transform,
    folds_weights,
    softmax_shift,
    softmax_transform,
)

__all__ = [
    "PARALLEL_MIN_ELEMENTS",
    "SKINNY_INNER",
    "TALL_INNER",
    "TASKS_PER_THREAD",
    "THREADS",
    "TILE_KEYS",
    "WIDE_INNER",
    "WIDE_ROWS",
    "accumulate",
    "apply_rows",
    "matrix_rows",
    "scores",
    "scratch",
    "serial_blas",
    "tiles",
    "weighted_columns",
]


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS and Windows
        return os.cpu_count() or 1


def _threads_from_env(default: int) -> int:
    """``TOKEN_DYNAMICS_THREADS`` from the environment (a positive integer), else ``default``."""
    value = os.environ.get("TOKEN_DYNAMICS_THREADS", "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise ValueError(
            f"TOKEN_DYNAMICS_THREADS must be a positive integer (1 turns the thread pool off); "
            f"got {value!r}."
        )
    return int(value)


#: Threads sharing the slabs (the calling thread and ``THREADS - 1`` of a pool): one per usable core
#: (the affinity mask, which containers and CI runners restrict), at most 2. Two is what the book's
#: machines have (CI, Binder); each worker holds a slab, so more workers mean more memory (the
#: memory test of the attention module allows four slabs) and they were not measured here. The
#: environment variable ``TOKEN_DYNAMICS_THREADS`` sets it at import (higher on a larger machine, 1
#: to run every kernel on the calling thread); the module attribute can also be changed at run time.
THREADS = _threads_from_env(min(_usable_cores(), 2))

#: Widest products (inner columns: ``d`` plus one or two) done on slabs of whole rows: up to
#: this width a slab's two products are light next to its exponentials (the time is in
#: ``np.exp``); wider products are cut into tiles of rows and keys (:func:`tiles`) that BLAS
#: runs from cache at close to its rate (16-row slabs of whole rows ran them at a third of it).
SKINNY_INNER = 4

#: Keys of a tile of wide products (``d >= 4``), whose rows fill :data:`BLOCK_ELEMENTS`
#: entries (256 x 256), or twice as many (512 x 256) for products of more than
#: :data:`TALL_INNER` inner columns: in a core's L2 cache with their operands. Measured against
#: seven shapes from 64 x 512 to 512 x 512 (bare tile loops, float64 and float32, n = 1024 and
#: 4096, d = 4 to 128, one thread): within 7 % of the best at d = 4, 8 and d >= 32; at d = 16 on
#: one thread 128 x 256 was 10-18 % faster, but on two threads 15-25 % slower (twice as many
#: turns at the GIL). The tiles cannot follow the threads (threaded and serial results are the
#: same numbers), so they follow the default of two.
TILE_KEYS = 256

#: Products of more inner columns than this (``d >= 16``) take tiles of twice the rows, 512 x 256
#: (1 MiB of float64 scores, in L2 with their operands up to d = 128): half the tiles, so half
#: the turns at the GIL on two threads. Softmax velocity, 256 x 256 -> 512 x 256, two threads,
#: float64 / float32: d = 16, n = 1024 2.75 -> 2.55 / 1.8 -> 1.6 ms, n = 2048 9.2 -> 8.5 /
#: 5.8 -> 5.1 ms; d = 32, n = 4096 48 -> 46 / 27 -> 23 ms; d = 64, n = 16384 1.13 -> 1.10 /
#: 0.59 -> 0.51 s; on one thread the same or up to 8 % faster (d = 128, two threads, float64:
#: 4 % slower). At d = 8 and 12 one thread ran 13-15 % slower with them: those keep 256 x 256.
TALL_INNER = 16

#: Products of more inner columns than this share their tiles out to the pool from
#: :data:`PARALLEL_MIN_ELEMENTS` score entries, narrower ones from four times as many.
WIDE_INNER = 24

#: Rows per tile when a row of scores is longer than a slab (more than BLOCK_ELEMENTS keys,
#: n > 65536): the keys are then cut into tiles too, each tile's products stay small, and the
#: per-row sums are accumulated over the tiles (the softmax shift is known beforehand).
WIDE_ROWS = 4

#: Below this many score entries a kernel whose products have more than :data:`WIDE_INNER`
#: inner columns runs on the calling thread; narrower products need 4 times as many (n = 1024):
#: handing work out costs some tens of microseconds and the workers' turns at the GIL more,
#: next to less work per entry. Measured on two cores (softmax velocity, two threads against
#: one on the same tiles, median of 7 interleaved rounds, float64 / float32): d = 64 at
#: n = 768 0.78 / 0.86, n = 1024 0.63 / 0.68; d = 16 at n = 768 0.86 / 0.92, n = 1024 0.67 /
#: 0.72; d = 8 at n = 768 0.97 / 1.13, n = 1024 0.72 / 0.91; d = 4 at n = 1024 0.74 / 0.97;
#: d = 2 at n = 768 0.96 / 1.19, n = 1024 0.80 / 0.98, n = 2048 0.65 / 0.76; d = 3 at
#: n = 1024 0.95 / 0.94. (The skinny products of d <= 3 used to wait for 32 times as many,
#: as measured before the calling thread took tiles too; the MLP's tiles,
#: ``stochastic._mlp.MLP_TILE_ELEMENTS``, follow the same rule.)
PARALLEL_MIN_ELEMENTS = 2**18

#: Slabs per task handed to a thread is chosen so that each thread gets about this many tasks:
#: enough to even out a noisy machine, few enough that dispatch stays negligible.
TASKS_PER_THREAD = 4

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _reset_pool_after_fork() -> None:  # pragma: no cover - exercised by multiprocessing only
    # a forked child inherits the executor object but not its threads
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pool_after_fork)


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size != workers:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="token-dynamics")
            _pool_size = workers
        return _pool


_blas: ThreadpoolController | None = None
_blas_restore: Callable[[], None] | None = None
_blas_users = 0
_blas_lock = threading.Lock()


@contextmanager
def serial_blas() -> Iterator[None]:
    """Hold the BLAS libraries loaded in the process to one thread while the kernels run.

    The kernels' parallelism is their own :data:`THREADS` threads, each on its own
    cache-sized tiles; BLAS's threads get in its way. A threaded OpenBLAS called from two
    workers at once serialises their products, and after any product it threads, its threads
    spin for about 0.1 s on the cores the workers need. Measured on the project's 2-core VM
    with OpenBLAS on two threads (softmax velocity, n = 4096, d = 64, float64): 141 ms with BLAS
    threaded, 63 ms held to one thread, 113 ms on one thread alone. The limit is set through
    ``threadpoolctl`` (a few microseconds) and restored when the last of nested or concurrent
    uses leaves; meanwhile other threads of the process see BLAS on one thread too.
    """
    global _blas, _blas_restore, _blas_users
    with _blas_lock:
        if _blas_users == 0:
            if _blas is None:
                _blas = ThreadpoolController()
            _blas_restore = _blas.limit(limits=1, user_api="blas").restore_original_limits
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0 and _blas_restore is not None:
                _blas_restore()
                _blas_restore = None


_scratch = threading.local()


@contextmanager
def scratch(entries: int, dtype: np.dtype) -> Iterator[np.ndarray]:
    """A buffer of at least ``entries`` values of ``dtype``, kept by the calling thread for its
    next use: a fresh array of a tile's size is mapped anew by the allocator and costs a page
    fault per 4 KiB (a softmax velocity at n = 1024, d = 64, one thread: 8.5 ms with fresh
    arrays, 6.9 ms with glibc told to keep its freed memory). A nested use on the same thread
    gets a buffer of its own."""
    key = np.dtype(dtype).char
    cache = _scratch.__dict__
    buf = cache.pop(key, None)
    if buf is None or buf.size < entries:
        buf = np.empty(entries, dtype=dtype)
    try:
        yield buf
    finally:
        cache[key] = buf


def _run(task: Callable[[list], None], blocks: list, n_elements: int, inner: int) -> None:
    """Run ``task`` over groups of blocks: on the calling thread and ``THREADS - 1`` workers of
    the pool (BLAS held to one thread, :func:`serial_blas`) when the problem is large enough
    for products of ``inner`` columns (:data:`PARALLEL_MIN_ELEMENTS`), else on the calling
    thread alone.

    The threads take the groups in order from a shared counter, the calling thread among them:
    one wake-up instead of one per group (on the project's VM a pool thread takes some 50 us to
    wake, and one task handed out and awaited cost 0.1 ms, against 2.5 ms for a whole softmax
    velocity at n = 1024, d = 16 on two threads). Exceptions propagate from the earliest group
    that raised (the serial order): groups are taken in order and none is taken after a failure,
    so every group before a failed one has run. A helper still waiting to start when the calling
    thread has taken the last group is cancelled, not awaited: a task may itself call a kernel
    on the pool without waiting on the worker it occupies.
    """
    workers = min(int(THREADS), len(blocks))
    scale = 4 if inner <= WIDE_INNER else 1
    if workers <= 1 or n_elements < scale * PARALLEL_MIN_ELEMENTS:
        task(blocks)
        return
    n_tasks = min(len(blocks), workers * TASKS_PER_THREAD)
    bounds = np.linspace(0, len(blocks), n_tasks + 1).astype(int)
    groups = [blocks[lo:hi] for lo, hi in itertools.pairwise(bounds)]
    order = iter(range(n_tasks))
    lock = threading.Lock()
    errors: dict[int, BaseException] = {}

    def work() -> None:
        while not errors:
            with lock:
                i = next(order, None)
            if i is None:
                return
            try:
                task(groups[i])
            except BaseException as exc:  # re-raised by the caller below
                errors[i] = exc

    with serial_blas():
        helpers = [_executor(workers - 1).submit(work) for _ in range(workers - 1)]
        work()
        for helper in helpers:  # a helper that has not started has nothing left: not awaited
            if not helper.cancel():
                helper.result()
    if errors:
        raise errors[min(errors)]


def scores(F: np.ndarray, G: np.ndarray, rows: slice, bias: np.ndarray | None) -> np.ndarray:
    """Slab ``F[rows] @ G.T (+ bias)`` of the score matrix."""
    S = np.dot(F[rows], G.T)
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
    weights: np.ndarray | None = None,
    normalise: bool,
    log2_scale: int = 0,
) -> np.ndarray:
    """Return ``kernel @ R`` row block by row block, with ``kernel = transform(F @ G.T + bias)``
    times the key weights.

    ``log2_scale`` is the exponent of a scale the caller already took out of the scores (true
    scores ``(F G^T + bias) * 2**log2_scale``). The positive key ``weights`` ``w_j`` multiply the
    kernel's columns; ``R`` then holds the unweighted values (``None``: the weights are already
    in ``R``). With ``normalise=True`` the last column of ``R`` holds ones (or the key weights)
    and the result is the first columns divided by the last one (a row-stochastic average). The
    arrays share one floating dtype (float64 or float32), which the result has too.

    On the tiled exponential path, weights spanning more than the exp floor allows
    (``_softmax.folds_weights``) enter as their logarithms, added to the bias before the shift
    and the clamp: a tiny weight on the row's best key then still outweighs the clamped terms of
    the others, as it does in the exact sum. Elsewhere they multiply the rows of ``R``.

    Scores that could overflow are rescaled first (``_scale.rescale_scores``) and every transform
    gets the exponent of their scale. With ``transform=softmax_transform`` (or
    ``exp_transform``, whose rows then get their shift back) the slabs are tiles of rows and keys
    whose sums are
    accumulated over the key tiles (:func:`tiles`), and the row shift is folded into the score
    product: rows are shifted by ``L_i``, the best score over a few probe keys, when the
    Cauchy-Schwarz bound says that no score of the row exceeds ``L_i + SHIFT_SLACK`` (the
    exponentials then neither overflow nor lose the row's largest term, and the shift cancels
    in the normalisation); the other rows are shifted by their exact maximum: the best score
    over the vertices of the keys' convex hull (``_softmax.HULL_MAX_DIM``), else the maximum of
    their slab, or of a first pass over their key tiles. When no shift is needed at all (every
    score within ``SHIFT_SLACK`` of 0) none is applied. (Without ``normalise`` each row carries
    a positive factor of its shift, as with any shift.)
    """
    F, G, bias, e = rescale_scores(F, G, bias)
    e += log2_scale  # factors the caller already rescaled (true scores: S * 2**e)
    n_rows, n_cols = F.shape[0], G.shape[0]
    out = np.empty((n_rows, R.shape[1]), dtype=F.dtype)
    tiled = e == 0 and (transform is softmax_transform or transform is exp_transform)
    col_scale = None
    if weights is not None:
        bias, folded = _fold_weights(weights, bias, tiled)
        R, col_scale = weighted_columns(R, None if folded else weights)
    if not tiled:
        GT, RT = np.ascontiguousarray(G.T), np.ascontiguousarray(R.T)

        def task(blocks: list[slice]) -> None:
            for rows in blocks:
                S = np.dot(F[rows], GT)
                if bias is not None:
                    S += bias
                E, log_scale = transform(S, rows, e)
                block = np.dot(RT, E.T).T  # see the note in accumulate
                if log_scale is not None:
                    with np.errstate(over="ignore", invalid="ignore"):
                        block = block * np.exp(log_scale)[:, None]
                out[rows] = block

        inner = max(F.shape[1], R.shape[1])
        _run(task, list(row_blocks(n_rows, n_cols)), n_rows * n_cols, inner)
    else:
        shift = _softmax_rows(F, G, np.ascontiguousarray(R), bias, out)
        if transform is exp_transform:  # the unnormalised kernel: put each row's shift back
            with np.errstate(over="ignore", invalid="ignore"):  # inf: the caller reports it
                out *= np.exp(shift)[:, None]
    if normalise:
        out = out[:, :-1] / out[:, -1:]
        if col_scale is not None:  # the sums of the values over the sums of the weights
            out *= col_scale[:-1] / col_scale[-1]
    elif col_scale is not None:
        with np.errstate(over="ignore", invalid="ignore"):  # inf: the caller reports it
            out *= col_scale
    return out


#: Columns whose largest value is at least this are weighted as they are: a weight that is
#: multiplied in (not folded, so at least ``e^-655`` ~ ``2^-945`` of the sum) times their largest
#: entry stays above the smallest normal double, ``2^-1022``. Smaller columns are brought to
#: unit size first (a pass that is skipped otherwise: O(n d), but some 5 % of a softmax
#: velocity at n = 1024, d = 2).
SMALL_VALUES = 2.0**-60


def weighted_columns(R: np.ndarray, w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(R / c) * w`` (rows times the key weights ``w`` unless ``None``) and ``c``, each column
    divided by the power of two ``c`` at or below its largest entry (exact): a small weight
    times a small value then stays a normal double, where ``w_j R_j`` could turn subnormal
    and lose its digits (weights of 1e-20 times values of 1e-300), and the result's columns
    are multiplied back by ``c``."""
    c = power_of_two_scale(R, axis=0).astype(R.dtype)  # exact; float64 would promote R
    if np.all(c >= SMALL_VALUES):  # a multiplied weight (>= e^-655 of the sum) stays normal
        return (R if w is None else R * w[:, None]), np.ones(R.shape[1], dtype=R.dtype)
    Rc = R / c
    if w is not None:
        Rc *= w[:, None]
    return Rc, c[0]


def _fold_weights(
    w: np.ndarray, bias: np.ndarray | None, fold: bool
) -> tuple[np.ndarray | None, bool]:
    """``(bias + log w, True)`` when ``fold`` allows it (an exponential kernel on unscaled scores)
    and the positive key weights ``w`` need it (``_softmax.folds_weights``), else ``(bias,
    False)``: the caller then multiplies the weights in. The caller's bias is not touched."""
    if fold and folds_weights(w):
        log_w = np.log(w)
        return (log_w if bias is None else bias + log_w), True
    return bias, False


def tiles(n_rows: int, n_cols: int, inner: int) -> tuple[list[slice], list[slice]]:
    """Row blocks and key tiles of the score matrix for products of ``inner`` columns.

    Skinny products (at most :data:`SKINNY_INNER` inner columns, ``d <= 3`` but for a score
    bias with a shift): slabs of whole rows of at most :data:`BLOCK_ELEMENTS` entries, or
    :data:`WIDE_ROWS` rows cut into key tiles when a row is longer than that. Wider products:
    tiles of :data:`TILE_KEYS` keys and :data:`BLOCK_ELEMENTS` entries (twice as many beyond
    :data:`TALL_INNER` inner columns), each in cache with its operands. The tiles depend on the
    shapes only, never on the kernels' threads.
    """
    if inner <= SKINNY_INNER:
        if n_cols <= BLOCK_ELEMENTS:
            step, keys = max(1, BLOCK_ELEMENTS // max(n_cols, 1)), max(n_cols, 1)
        else:
            step, keys = WIDE_ROWS, max(1, BLOCK_ELEMENTS // WIDE_ROWS)
    else:
        keys = min(max(n_cols, 1), TILE_KEYS)
        step = max(1, (2 if inner > TALL_INNER else 1) * BLOCK_ELEMENTS // keys)
    rows = [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]
    cols = [slice(j, min(j + keys, n_cols)) for j in range(0, max(n_cols, 1), keys)]
    return rows, cols


def accumulate(
    F: np.ndarray,
    G: np.ndarray,
    R: np.ndarray,
    out: np.ndarray,
    elementwise: Callable[[np.ndarray, slice], None],
) -> None:
    """``out = T(F @ G.T) @ R`` tile by tile (``G``, ``R`` and ``out`` C-contiguous, one key per
    row of ``G`` and ``R``, all of ``F``'s dtype), ``T`` an elementwise map applied in place by
    ``elementwise(S, rows)``; each row block's sums run over the key tiles in order."""
    n_rows, n_cols = F.shape[0], G.shape[0]
    inner = max(F.shape[1], R.shape[1])
    blocks, col_tiles = tiles(n_rows, n_cols, inner)
    # Key tiles that BLAS reads without copying: each tile's keys as contiguous columns, G[cols].T
    # copied once. The score product goes through np.matmul, which costs less per call than
    # np.dot at these shapes (64 x 4 x 1024: 22 against 31 us; 256 x 9 x 256: 21 against 32 us
    # contiguous, 43 us for np.dot on the transposed view the tiles used to be); the second
    # product stays with np.dot, whose orientation follows the tile: for a slab of a few whole
    # rows BLAS runs R^T E^T faster than E R (measured at n = 16384, d = 2: 15 against 31 us per
    # slab; np.matmul on the strided E^T made two threads 1.3-1.5x slower at n = 4096), for a
    # square-ish tile E R (d = 16: 9 against 17 us; d = 64: 9 against 12 us).
    square = inner > SKINNY_INNER
    G_tiles = [np.ascontiguousarray(G[cols].T) for cols in col_tiles]
    if square:
        R_tiles = [R[cols] for cols in col_tiles]
    else:
        R_tiles = [np.ascontiguousarray(R[cols].T) for cols in col_tiles]
    entries = (blocks[0].stop - blocks[0].start) * G_tiles[0].shape[1] if blocks else 0

    width = R.shape[1]
    rows_max = blocks[0].stop - blocks[0].start if blocks else 0

    def task(group: list[slice]) -> None:
        with scratch(entries + rows_max * width, F.dtype) as buf:
            for rows in group:
                b, Fr, block = rows.stop - rows.start, F[rows], out[rows]
                part = buf[entries : entries + b * width]  # this tile's sums, (b, width)
                part = part.reshape(b, width) if square else part.reshape(width, b).T
                for k, (Gt, Rt) in enumerate(zip(G_tiles, R_tiles, strict=True)):
                    S = buf[: b * Gt.shape[1]].reshape(b, -1)
                    np.matmul(Fr, Gt, out=S)
                    elementwise(S, rows)
                    if square:
                        np.dot(S, Rt, out=part)
                    else:
                        np.dot(Rt, S.T, out=part.T)
                    if k == 0:
                        block[...] = part
                    else:
                        block += part

    _run(task, blocks, n_rows * n_cols, inner)


def _softmax_rows(
    F: np.ndarray, G: np.ndarray, R: np.ndarray, bias: np.ndarray | None, out: np.ndarray
) -> np.ndarray:
    """``out = exp(F G^T + bias - shift) R`` in tiles; returns the ``shift`` of each row."""
    n_rows, n_cols = F.shape[0], G.shape[0]
    floor, _ = exp_limits(F.dtype)
    L, exact, clamp, unshifted = softmax_shift(F, G, bias)
    one = np.ones(n_cols, dtype=F.dtype)
    f_cols, g_cols = [F], [G]
    if not unshifted:  # scores minus shift in one product: [F, -L] @ [G, 1]^T
        f_cols.append(-L.astype(F.dtype))
        g_cols.append(one)
    if bias is not None:  # ... plus the bias: [F, 1] @ [G, bias]^T
        f_cols.append(np.ones(n_rows, dtype=F.dtype))
        g_cols.append(bias.astype(F.dtype, copy=False))
    Fs = np.column_stack(f_cols) if len(f_cols) > 1 else F
    Gs = np.column_stack(g_cols) if len(g_cols) > 1 else np.ascontiguousarray(G)
    shift = L.astype(F.dtype)  # a copy (0 where unshifted or exact): filled in below
    whole_rows = len(tiles(n_rows, n_cols, max(Fs.shape[1], R.shape[1]))[1]) == 1
    any_exact = bool(exact.any())
    in_slab = exact if any_exact and whole_rows else None
    if any_exact:  # the exact maximum of these rows (their shift column is at 0) ...
        clamp = clamp | exact  # ... against which their lowest scores are not bounded
    if any_exact and not whole_rows:  # ... in a first pass over their key tiles
        rows_e = np.flatnonzero(exact)
        Fe = Fs[rows_e]
        m = np.full(rows_e.size, -np.inf, dtype=F.dtype)
        blocks, col_tiles = tiles(rows_e.size, n_cols, Fs.shape[1])
        for rows in blocks:
            for cols in col_tiles:
                np.maximum(m[rows], np.dot(Fe[rows], Gs[cols].T).max(axis=1), out=m[rows])
        Fs[rows_e, F.shape[1]] = -m
        shift[rows_e] = m
    any_clamp = bool(clamp.any())

    def elementwise(S: np.ndarray, rows: slice) -> None:
        if in_slab is not None and in_slab[rows].any():  # ... or in the slab, which has them
            m = np.where(in_slab[rows], S.max(axis=1), 0.0).astype(S.dtype, copy=False)
            S -= m[:, None]
            shift[rows] += m
        if any_clamp and clamp[rows].any():
            np.maximum(S, floor, out=S)
        np.exp(S, out=S)

    accumulate(Fs, Gs, R, out, elementwise)
    return shift


def matrix_rows(
    F: np.ndarray,
    G: np.ndarray,
    w: np.ndarray,
    transform: Transform,
    *,
    bias: np.ndarray | None = None,
    normalise: bool,
    log2_scale: int = 0,
) -> np.ndarray:
    """Dense matrix ``w_j kernel_ij`` (rows normalised when asked), row block by row block;
    scores that could overflow are rescaled first (``_scale.rescale_scores``). Exponential
    kernels take weights spanning more than the exp floor allows as log-weights in the bias, as
    :func:`apply_rows` does (the weights of its tiled path)."""
    F, G, bias, e = rescale_scores(F, G, bias)
    e += log2_scale  # factors the caller already rescaled (true scores: S * 2**e)
    out = np.empty((F.shape[0], G.shape[0]), dtype=F.dtype)
    exponential = transform is softmax_transform or transform is exp_transform
    bias, folded = _fold_weights(w, bias, e == 0 and exponential)
    w_col = None if folded else w

    def task(blocks: list[slice]) -> None:
        for rows in blocks:
            E, log_scale = transform(scores(F, G, rows, bias), rows, e)
            if w_col is not None:
                E = E * w_col
            if normalise:
                E /= E.sum(axis=1, keepdims=True)
            elif log_scale is not None:
                with np.errstate(over="ignore", invalid="ignore"):
                    E *= np.exp(log_scale)[:, None]
            out[rows] = E

    n_rows, n_cols = F.shape[0], G.shape[0]
    _run(task, list(row_blocks(n_rows, n_cols)), n_rows * n_cols, F.shape[1])
    return out
