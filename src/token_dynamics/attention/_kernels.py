"""Row-blocked, threaded attention kernels (private).

Every attention variant whose weights are a function of a score matrix goes through
:func:`apply_rows` (velocities) or :func:`matrix_rows` (attention matrices): the ``(n, n)`` score
matrix is never formed at once, only slabs of at most :data:`BLOCK_ELEMENTS` entries, so memory
stays bounded whatever the number of tokens.

Speed. A velocity costs ``n^2`` exponentials and two products of ``n^2 d`` multiply-adds. The
softmax and sigmoid kernels cut the score matrix into tiles (:func:`tiles`): for ``d <= 3``,
slabs of whole rows, whose time is in ``np.exp``; for wider ``d``, square-ish tiles of rows and
keys whose two products stay under :data:`SERIAL_BLAS_MACS` multiply-adds, so that BLAS runs
them on the calling thread at close to its rate (16-row slabs of whole rows ran those products
at a third of it), with the sums of a row block accumulated over its key tiles in a fixed order.
Each tile is one small matrix product into a reused buffer, ``np.exp`` in place and one product
with the value columns, all in cache, and the tiles are shared out to a pool of
:data:`THREADS` threads (numpy's ufuncs and ``np.dot`` release the GIL). Which rows and keys
form a tile depends on neither, so threaded and serial evaluations give the same numbers. Slab
products go through ``np.dot``, which releases the GIL around its BLAS call: with ``np.matmul``
two workers doing only these small products ran at 0.7x the speed of one (measured), and the
softmax velocity at n = 16384 took 0.37-0.41 s on two threads against 0.30-0.33 s with
``np.dot``. The kernels work in the dtype of their arrays, float64 or float32 (the exponent
limits of :func:`exp_limits` follow it).

The plain softmax (``transform is softmax_transform``) has a dedicated path: each row's shift
comes from O(n d) bounds (:func:`_softmax_shift`) and is folded into the score product, which
saves the max and subtract passes over the slab (no shift at all when every score is within
:data:`SHIFT_SLACK` of 0); rows whose bounds are loose get the exact maximum. Shifted scores
are clamped at :data:`EXP_FLOOR` when they can reach it: ``np.exp`` of arguments whose result
is subnormal or zero runs 5 to 150 times slower than of ordinary ones, and such terms are
below ``e^-700`` of the row's largest term, far under round-off. Rows longer
than a slab (n > 65536) are cut into key tiles too.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.special import expit

from .._linalg import BLOCK_ELEMENTS, row_blocks


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


#: Worker threads sharing the slabs: one per usable core (the affinity mask, which containers
#: and CI runners restrict), at most 2. Two is what the book's machines have (CI, Binder); each
#: worker holds a slab, so more workers mean more memory (the memory test of the attention
#: module allows four slabs) and they were not measured here. The environment variable
#: ``TOKEN_DYNAMICS_THREADS`` sets it at import (higher on a larger machine, 1 to run every
#: kernel on the calling thread); the module attribute can also be changed at run time.
THREADS = _threads_from_env(min(_usable_cores(), 2))

#: Largest product (multiply-adds) that OpenBLAS runs on the calling thread: above it OpenBLAS
#: threads the product itself (its threshold, 4 * 65536). Kernels cut the score matrix into
#: tiles whose products stay under it (:func:`tiles`) and share the tiles out to their own pool
#: of threads, which also runs ``np.exp``: OpenBLAS's threads, called from two of our workers
#: at once, collide (a d = 16 velocity at n = 1024 took 50x longer on two workers than on one),
#: and on a loaded machine even one caller's threaded products ran 10-50x slower than serial
#: ones (measured: 128 x 512 tiles at d = 16, n = 4096, load average 12 on two cores).
SERIAL_BLAS_MACS = 2**18

#: Widest products (inner columns: ``d`` plus one or two) of a whole slab of BLOCK_ELEMENTS
#: entries that stay under SERIAL_BLAS_MACS. Kernels that need whole rows per slab (hardmax,
#: the generic transforms, the dense matrices) share their slabs out to the pool only up to
#: this width; wider slabs run one after the other on the calling thread.
POOL_MAX_INNER = SERIAL_BLAS_MACS // BLOCK_ELEMENTS

#: Rows per tile when a row of scores is longer than a slab (more than BLOCK_ELEMENTS keys,
#: n > 65536): the keys are then cut into tiles too, each tile's products stay small, and the
#: per-row sums are accumulated over the tiles (the softmax shift is known beforehand).
WIDE_ROWS = 4

#: Below this many score entries a kernel runs on the calling thread: handing work to the pool
#: costs some tens of microseconds, the work of 2**18 entries is about a millisecond.
PARALLEL_MIN_ELEMENTS = 2**18

#: Slabs per task handed to a thread is chosen so that each thread gets about this many tasks:
#: enough to even out a noisy machine, few enough that dispatch stays negligible.
TASKS_PER_THREAD = 4

#: Lowest shifted score passed to ``np.exp`` on the softmax velocity path in float64.
#: ``exp(-700)`` is a normal double (1e-304); below about -708 results turn subnormal and numpy's
#: exp falls back to a slow path (measured: 150x slower at -745, 5x for -inf). A term clamped here
#: was already below ``e^-700`` times the row's largest term, so the result moves by less than
#: ``n e^-700``, relative: far below round-off for any n.
EXP_FLOOR = -700.0

#: Largest gap allowed between the Cauchy-Schwarz bound on a row's scores and its shift ``L_i``
#: (the best score over the probe keys) on the softmax velocity path in float64: the
#: exponentials are then at most ``e^300`` (1e130), so a sum of ``n`` of them times the value
#: columns stays finite for any realistic ``n`` and values, and the largest term is at least 1
#: (no underflow). Rows with looser bounds (very large scores) get their exact maximum instead.
SHIFT_SLACK = 300.0

#: The same two limits in float32, whose exp overflows above 88.7 and turns subnormal below
#: -87.3: a clamped term is below ``e^-80`` (2e-35) of the row's largest, far under float32's
#: round-off (6e-8); exponentials up to ``e^40`` (2e17) leave a factor of 1e21 for the sums of
#: ``n`` terms times the values before overflow.
EXP_FLOOR_32, SHIFT_SLACK_32 = -80.0, 40.0


def exp_limits(dtype: np.dtype) -> tuple[float, float]:
    """``(floor, slack)`` of the softmax path for ``dtype`` (float64 or float32)."""
    if np.dtype(dtype) == np.float32:
        return EXP_FLOOR_32, SHIFT_SLACK_32
    return EXP_FLOOR, SHIFT_SLACK


#: Number of evenly spaced probe keys (besides the extreme ones) that give each row's shift;
#: their products cost ``n * PROBE_KEYS * d`` flops, negligible next to the ``n^2`` exponentials.
PROBE_KEYS = 32

#: A transform maps a slab of scores ``S`` (rows x keys, may be overwritten) and the slice of
#: query rows it covers to the kernel slab ``E`` and an optional per-row log-scale ``c`` such
#: that the true kernel is ``exp(c)[:, None] * E``.
Transform = Callable[[np.ndarray, slice], tuple[np.ndarray, np.ndarray | None]]

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


def _run(
    task: Callable[[list], None],
    blocks: list,
    n_elements: int,
    inner: int,
    *,
    tile_entries: int | None = None,
) -> None:
    """Run ``task`` over groups of blocks: on the pool when the problem is large enough and
    the products of a block (``tile_entries`` score entries, :data:`BLOCK_ELEMENTS` by
    default, times ``inner`` columns) stay under :data:`SERIAL_BLAS_MACS`, else on the calling
    thread.

    Exceptions propagate from the earliest group that raised (the serial order).
    """
    workers = min(int(THREADS), len(blocks))
    entries = BLOCK_ELEMENTS if tile_entries is None else tile_entries
    if workers <= 1 or n_elements < PARALLEL_MIN_ELEMENTS or inner * entries > SERIAL_BLAS_MACS:
        task(blocks)
        return
    n_tasks = min(len(blocks), workers * TASKS_PER_THREAD)
    bounds = np.linspace(0, len(blocks), n_tasks + 1).astype(int)
    groups = [blocks[lo:hi] for lo, hi in itertools.pairwise(bounds)]
    futures = [_executor(workers).submit(task, group) for group in groups]
    for future in futures:
        future.result()


def scores(F: np.ndarray, G: np.ndarray, rows: slice, bias: np.ndarray | None) -> np.ndarray:
    """Slab ``F[rows] @ G.T (+ bias)`` of the score matrix."""
    S = np.dot(F[rows], G.T)
    if bias is not None:
        S += bias
    return S


def _softmax_shift(
    F: np.ndarray, G: np.ndarray, bias: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Per-row shifts for the softmax path, from O(n d) bounds on each row's scores.

    Returns ``L`` (the best score over a few probe keys, a lower bound on the row's maximum),
    ``exact`` (rows whose bounds are too loose to use ``L``: they get the exact maximum),
    ``clamp`` (rows where a shifted score may fall below the exp floor of the dtype,
    :func:`exp_limits`) and ``unshifted`` (every score lies within the slack of 0 and above the
    floor: no shift is needed at all).
    """
    floor, slack = exp_limits(F.dtype)
    b_hi = b_lo = 0.0
    if bias is not None:
        b_hi, b_lo = float(bias.max()), float(bias.min())
    g_sq = np.einsum("ij,ij->i", G, G)
    g_norm = float(np.sqrt(g_sq.max()))
    f_norm = np.sqrt(np.einsum("ij,ij->i", F, F).astype(np.float64))
    # probe keys: the extreme keys along each coordinate, the longest key, the key of largest
    # bias and an even sample; the best of them is within a few |f| |g| of the true maximum
    probes = [G.argmax(axis=0), G.argmin(axis=0), [g_sq.argmax()]]
    if bias is not None:
        probes.append([bias.argmax()])
    probes.append(np.linspace(0, G.shape[0] - 1, min(G.shape[0], PROBE_KEYS)).astype(int))
    J = np.unique(np.concatenate(probes))
    with np.errstate(over="ignore", invalid="ignore"):
        L = np.full(F.shape[0], -np.inf)
        for j in J:  # one key at a time: O(n) memory
            np.maximum(L, F @ G[j] + (0.0 if bias is None else bias[j]), out=L)
        upper = f_norm * g_norm + b_hi  # Cauchy-Schwarz: no score of the row is above it
        lower = -f_norm * g_norm + b_lo  # ... nor below this one
        exact = ~(upper - L <= slack)  # also catches inf and nan
        clamp = ~(lower - L >= floor)
        unshifted = bool(np.all((upper <= slack) & (L >= -slack) & (lower >= floor)))
    return np.where(exact, 0.0, L), exact, clamp, unshifted


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
    the first columns divided by the last one (a row-stochastic average). The arrays share one
    floating dtype (float64 or float32), which the result has too.

    With ``transform=softmax_transform`` the slabs are tiles of rows and keys whose sums are
    accumulated over the key tiles (:func:`tiles`), and the row shift is folded into the score
    product: rows are shifted by ``L_i``, the best score over a few probe keys, when the
    Cauchy-Schwarz bound says that no score of the row exceeds ``L_i + SHIFT_SLACK`` (the
    exponentials then neither overflow nor lose the row's largest term, and the shift cancels
    in the normalisation); the other rows are shifted by their exact maximum, found in a first
    pass over their tiles. When no shift is needed at all (every score within
    ``SHIFT_SLACK`` of 0) none is applied. (Without ``normalise`` each row carries a positive
    factor of its shift, as with any shift.)
    """
    n_rows, n_cols = F.shape[0], G.shape[0]
    out = np.empty((n_rows, R.shape[1]), dtype=F.dtype)
    RT = np.ascontiguousarray(R.T)
    if transform is not softmax_transform:
        GT = np.ascontiguousarray(G.T)

        def task(blocks: list[slice]) -> None:
            for rows in blocks:
                S = np.dot(F[rows], GT)
                if bias is not None:
                    S += bias
                E, log_scale = transform(S, rows)
                block = np.dot(RT, E.T).T  # see the note in _accumulate
                if log_scale is not None:
                    with np.errstate(over="ignore", invalid="ignore"):
                        block = block * np.exp(log_scale)[:, None]
                out[rows] = block

        _run(task, list(row_blocks(n_rows, n_cols)), n_rows * n_cols, max(F.shape[1], R.shape[1]))
    else:
        _softmax_rows(F, G, RT, bias, out)
    if normalise:
        return out[:, :-1] / out[:, -1:]
    return out


def tiles(n_rows: int, n_cols: int, inner: int) -> tuple[list[slice], list[slice]]:
    """Row blocks and key tiles of the score matrix for products of ``inner`` columns.

    Skinny products (``inner * BLOCK_ELEMENTS`` at most :data:`SERIAL_BLAS_MACS`, ``d <= 3``):
    slabs of whole rows of at most :data:`BLOCK_ELEMENTS` entries, or :data:`WIDE_ROWS` rows
    cut into key tiles when a row is longer than that. Wider products: square-ish tiles of
    ``SERIAL_BLAS_MACS // inner`` entries, so that both products of a tile (scores, then the
    weighted sum of the values) have at most :data:`SERIAL_BLAS_MACS` multiply-adds: BLAS runs
    them on the calling thread, and the tiles can be shared out to the pool. The tiles depend
    on the shapes only, never on the threads.
    """
    if inner * BLOCK_ELEMENTS <= SERIAL_BLAS_MACS:
        if n_cols <= BLOCK_ELEMENTS:
            step, keys = max(1, BLOCK_ELEMENTS // max(n_cols, 1)), max(n_cols, 1)
        else:
            step, keys = WIDE_ROWS, max(1, BLOCK_ELEMENTS // WIDE_ROWS)
    else:
        entries = max(1, SERIAL_BLAS_MACS // inner)
        keys = min(max(n_cols, 1), max(1, math.isqrt(entries)))
        step = max(1, entries // keys)
    rows = [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]
    cols = [slice(j, min(j + keys, n_cols)) for j in range(0, max(n_cols, 1), keys)]
    return rows, cols


def _accumulate(
    F: np.ndarray,
    GT: np.ndarray,
    RT: np.ndarray,
    out: np.ndarray,
    elementwise: Callable[[np.ndarray, slice], None],
) -> None:
    """``out = T(F @ GT) @ RT.T`` tile by tile, ``T`` an elementwise map applied in place by
    ``elementwise(S, rows)``; each row block's sums run over the key tiles in order."""
    n_rows, n_cols = F.shape[0], GT.shape[1]
    inner = max(F.shape[1], RT.shape[0])
    blocks, col_tiles = tiles(n_rows, n_cols, inner)
    # contiguous key tiles (np.dot copies a strided operand at every call). The orientation of
    # the second product follows the tile: for a slab of a few whole rows BLAS runs R^T E^T
    # faster than E R (measured at n = 16384, d = 2: 15 against 31 us per slab), for a
    # square-ish tile E R (d = 16: 9 against 17 us; d = 64: 9 against 12 us).
    square = inner * BLOCK_ELEMENTS > SERIAL_BLAS_MACS
    G_tiles = [np.ascontiguousarray(GT[:, cols]) for cols in col_tiles]
    R_tiles = [np.ascontiguousarray(RT[:, cols].T if square else RT[:, cols]) for cols in col_tiles]
    entries = (blocks[0].stop - blocks[0].start) * G_tiles[0].shape[1] if blocks else 0

    def task(group: list[slice]) -> None:
        buf = np.empty(entries, dtype=F.dtype)
        for rows in group:
            b, Fr, block = rows.stop - rows.start, F[rows], out[rows]
            for k, (Gt, Rt) in enumerate(zip(G_tiles, R_tiles, strict=True)):
                S = buf[: b * Gt.shape[1]].reshape(b, -1)
                np.dot(Fr, Gt, out=S)
                elementwise(S, rows)
                part = np.dot(S, Rt) if square else np.dot(Rt, S.T).T
                if k == 0:
                    block[...] = part
                else:
                    block += part

    _run(task, blocks, n_rows * n_cols, inner, tile_entries=entries)


def _softmax_rows(F, G, RT, bias, out) -> None:
    """``out = exp(F G^T + bias - shift) R`` (rows scaled by any positive factor), in tiles."""
    n_rows, n_cols = F.shape[0], G.shape[0]
    floor, _ = exp_limits(F.dtype)
    L, exact, clamp, unshifted = _softmax_shift(F, G, bias)
    one = np.ones(n_cols, dtype=F.dtype)
    f_cols, g_cols = [F], [G]
    if not unshifted:  # scores minus shift in one product: [F, -L] @ [G, 1]^T
        f_cols.append(-L.astype(F.dtype))
        g_cols.append(one)
    if bias is not None:  # ... plus the bias: [F, 1] @ [G, bias]^T
        f_cols.append(np.ones(n_rows, dtype=F.dtype))
        g_cols.append(bias.astype(F.dtype, copy=False))
    Fs = np.column_stack(f_cols) if len(f_cols) > 1 else F
    GT = np.ascontiguousarray(np.column_stack(g_cols).T)
    if exact.any():  # the exact maximum of these rows, with their shift column at 0
        rows_e = np.flatnonzero(exact)
        Fe = Fs[rows_e]
        m = np.full(rows_e.size, -np.inf, dtype=F.dtype)
        blocks, col_tiles = tiles(rows_e.size, n_cols, Fs.shape[1])
        for rows in blocks:
            for cols in col_tiles:
                np.maximum(m[rows], np.dot(Fe[rows], GT[:, cols]).max(axis=1), out=m[rows])
        Fs[rows_e, F.shape[1]] = -m
        clamp = clamp.copy()
        clamp[rows_e] = True  # their lowest scores are not bounded against the maximum
    any_clamp = bool(clamp.any())

    def elementwise(S: np.ndarray, rows: slice) -> None:
        if any_clamp and clamp[rows].any():
            np.maximum(S, floor, out=S)
        np.exp(S, out=S)

    _accumulate(Fs, GT, RT, out, elementwise)


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
    out = np.empty((F.shape[0], G.shape[0]), dtype=F.dtype)

    def task(blocks: list[slice]) -> None:
        for rows in blocks:
            E, log_scale = transform(scores(F, G, rows, bias), rows)
            E = E * w
            if normalise:
                E /= E.sum(axis=1, keepdims=True)
            elif log_scale is not None:
                with np.errstate(over="ignore", invalid="ignore"):
                    E *= np.exp(log_scale)[:, None]
            out[rows] = E

    n_rows, n_cols = F.shape[0], G.shape[0]
    _run(task, list(row_blocks(n_rows, n_cols)), n_rows * n_cols, F.shape[1])
    return out


def softmax_weights(
    scores: np.ndarray,
    *,
    log_weights: np.ndarray | None = None,
    axis: int = -1,
    normalise: bool = True,
    out: np.ndarray | None = None,
) -> np.ndarray:
    r"""Softmax weights :math:`P_{ij} = w_j e^{s_{ij}} / \sum_l w_l e^{s_{il}}` along `axis`.

    The one softmax of the library: every kernel that normalises exponentiated scores calls
    it. The largest logit of each row is subtracted before the exponential (the log-sum-exp
    shift), so no weight overflows whatever the scale of the scores.

    Parameters
    ----------
    scores : array, any shape
        Scores :math:`s_{ij}`, normalised along `axis` (the key index).
    log_weights : array broadcasting against `scores`, optional
        Logarithms of key weights :math:`\log w_j`, added to the scores.
    axis : int
        The key axis.
    normalise : bool
        ``False`` returns the shifted exponentials :math:`e^{s_{ij} - \max_l s_{il}}` (a kernel
        that normalises later, with its own key weights).
    out : array, optional
        Where to write the result; ``out=scores`` works in place.

    Returns
    -------
    array of the shape of `scores`

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import softmax_weights
    >>> softmax_weights(np.array([[0.0, np.log(3.0)], [1000.0, 1000.0]])).round(12)
    array([[0.25, 0.75],
           [0.5 , 0.5 ]])
    """
    logits = scores if log_weights is None else scores + log_weights
    shifted = np.subtract(logits, logits.max(axis=axis, keepdims=True), out=out)
    np.exp(shifted, out=shifted)
    if normalise:
        shifted /= shifted.sum(axis=axis, keepdims=True)
    return shifted


def softmax_transform(S: np.ndarray, rows: slice) -> tuple[np.ndarray, None]:
    """Stable exponential of a slab: ``exp(S - max_j S)`` in place (log-sum-exp trick)."""
    return softmax_weights(S, axis=1, normalise=False, out=S), None


def exp_transform(S: np.ndarray, rows: slice) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised exponential, returned as ``exp(S - m)`` and the log-scale ``m``."""
    m = S.max(axis=1)
    S -= m[:, None]
    np.exp(S, out=S)
    return S, m


#: Exponent above which :func:`sigmoid_transform` hands a slab to ``scipy.special.expit``:
#: ``exp(-x)`` of a score ``x < -700`` would overflow to inf (a sigmoid below 1e-304, which
#: expit still resolves into subnormals). In float32, 80 (exp overflows above 88.7).
SIGMOID_EXP_MAX, SIGMOID_EXP_MAX_32 = 700.0, 80.0

#: Lowest ``-x`` passed to ``exp`` by :func:`sigmoid_transform`: for ``x >= 37`` the sigmoid is
#: exactly 1.0 in float64 (``e^-37 < 2^-53``), so clamping at -40 changes nothing and keeps exp
#: off its slow subnormal path. In float32 the same holds from ``x >= 17.3`` (``e^-x < 2^-25``):
#: -20.
SIGMOID_EXP_MIN, SIGMOID_EXP_MIN_32 = -40.0, -20.0


def _sigmoid_limits(dtype: np.dtype) -> tuple[float, float]:
    if np.dtype(dtype) == np.float32:
        return SIGMOID_EXP_MAX_32, SIGMOID_EXP_MIN_32
    return SIGMOID_EXP_MAX, SIGMOID_EXP_MIN


def sigmoid_transform(S: np.ndarray, b: float = 0.0) -> np.ndarray:
    """Logistic sigmoid of ``S + b`` in place, as ``1 / (1 + exp(-(S + b)))``.

    numpy's vectorised exp makes this 3-4x faster than ``scipy.special.expit`` (measured, CPU
    time at n = 16384) with the same values to a few ulps; a slab with a score below ``-700``
    (``-80`` in float32) goes to expit, which keeps the subnormal tail.
    """
    np.subtract(S.dtype.type(-b), S, out=S)  # -x
    return _logistic_of_negated(S, checked=True)


def _logistic_of_negated(N: np.ndarray, *, checked: bool) -> np.ndarray:
    """``sigmoid(-N) = 1 / (1 + exp(N))`` in place. With ``checked`` (the bounds of the caller
    do not exclude it) a slab reaching above :data:`SIGMOID_EXP_MAX` goes to expit and the rest
    is clamped at :data:`SIGMOID_EXP_MIN`, off exp's slow subnormal path."""
    if checked:
        hi, lo = _sigmoid_limits(N.dtype)
        if float(N.max()) > hi:
            return expit(np.negative(N, out=N), out=N)
        np.maximum(N, lo, out=N)
    np.exp(N, out=N)
    N += 1.0
    return np.reciprocal(N, out=N)


def sigmoid_rows(F: np.ndarray, G: np.ndarray, R: np.ndarray, b: float) -> np.ndarray:
    """``sigmoid(F G^T + b) @ R``, tile by tile (:func:`tiles`).

    The sign and the bias ride in the score product, ``[-F, -b] @ [G, 1]^T = -(s + b)``, which
    goes straight to ``exp``; the overflow check and the clamp of :func:`sigmoid_transform` run
    only on slabs whose Cauchy-Schwarz bounds ``|s_ij| <= |f_i| max_j |g_j|`` do not exclude them
    (measured at n = 16384, d = 2: 2.9 -> 2.3 ns of CPU time per score).
    """
    n_rows, n_cols = F.shape[0], G.shape[0]
    dt = F.dtype
    Fn = np.column_stack([-F, np.full(n_rows, -b, dtype=dt)])
    GT = np.ascontiguousarray(np.column_stack([G, np.ones(n_cols, dtype=dt)]).T)
    RT = np.ascontiguousarray(R.T)
    hi, _ = _sigmoid_limits(dt)
    floor, _ = exp_limits(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        reach = np.sqrt(np.einsum("ij,ij->i", F, F)) * np.sqrt(np.einsum("ij,ij->i", G, G).max())
        loose = ~((reach - b <= hi) & (-reach - b >= floor))  # nan is loose
    any_loose = bool(loose.any())
    out = np.empty((n_rows, R.shape[1]), dtype=dt)

    def elementwise(N: np.ndarray, rows: slice) -> None:
        _logistic_of_negated(N, checked=any_loose and bool(loose[rows].any()))

    _accumulate(Fn, GT, RT, out, elementwise)
    return out


def tie_threshold(m: np.ndarray, tol: float) -> np.ndarray:
    """Lowest score tied with the maximum ``m`` at relative tolerance ``tol`` (hardmax)."""
    return m - tol * np.maximum(1.0, np.abs(m))


def hardmax_rows(F: np.ndarray, G: np.ndarray, R: np.ndarray, tol: float) -> np.ndarray:
    """``sum_{j in C_i} R_j`` over the tie sets ``C_i = {j : s_ij >= tie_threshold(m_i)}`` of
    the scores ``s = F G^T`` (``m_i`` the row maximum), row block by row block.

    Most rows have one best key: an argmax finds it and a second maximum, with that key masked,
    confirms it is alone above the threshold; its row of ``R`` is gathered, with no product over
    the slab. Rows with a tie (or a non-finite maximum) sum ``R`` over their indicator.

    Runs on the calling thread: its passes are light, and on two threads the hand-offs cost more
    than they share (measured at n = 16384, d = 2: 0.23 s on one thread, 0.37 s on two).
    """
    n_rows, n_cols = F.shape[0], G.shape[0]
    GT = np.ascontiguousarray(G.T)
    RT = np.ascontiguousarray(R.T)
    out = np.empty((n_rows, R.shape[1]), dtype=F.dtype)

    def task(blocks: list[slice]) -> None:
        for rows in blocks:
            S = np.dot(F[rows], GT)
            r = np.arange(S.shape[0])
            best = S.argmax(axis=1)
            m = S[r, best]
            threshold = tie_threshold(m, tol)
            S[r, best] = -np.inf
            tied = ~(S.max(axis=1) < threshold)  # a second key at the threshold, or nan
            block = out[rows]
            block[:] = R[best]
            if tied.any():
                S[r, best] = m
                T = S[tied]
                np.greater_equal(T, threshold[tied, None], out=T)
                block[tied] = np.dot(RT, T.T).T

    task(list(row_blocks(n_rows, n_cols)))
    return out
