"""Speed and memory benchmarks of token-dynamics, as ratios to references measured in the same run.

Usage::

    python benchmarks/run.py                  # every case at full size (several minutes)
    python benchmarks/run.py --quick          # smaller sizes, fewer repeats (under ~2 minutes)
    python benchmarks/run.py softmax sinkhorn # only these cases (see --list)

Each case prints the median wall time over repeats, the median CPU time of the process (robust
to a busy machine: other processes steal wall time, not CPU time), the peak memory that
``tracemalloc`` traced (numpy reports its allocations there) and ratios to references timed in
the same run: the floor of the issue (``np.exp`` over n^2 values, in cache-sized slabs on one
thread, plus two n x n x d products at the dgemm rate measured now), the dense numpy computation
and a naive Python loop. No absolute time is asserted anywhere.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import expit

from token_dynamics import attention as att

ROOT = Path(__file__).resolve().parents[1]
#: Seconds to wait before each measurement (see :func:`measure`).
SETTLE_S = 0.25


# ----------------------------------------------------------------------------- harness


@dataclass
class Timing:
    wall: float  # median wall seconds
    cpu: float  # median process CPU seconds
    peak: int  # peak traced bytes of one extra call


def measure(fn: Callable[[], object], repeats: int, *, memory: bool = True) -> Timing:
    """Median wall and CPU time of ``fn()`` over ``repeats`` calls (after one warm-up call),
    and the peak ``tracemalloc`` memory of one more call.

    OpenBLAS's threads spin for about 0.1 s after a threaded product (measured: a 2048^3
    product, then 0.1 s of CPU time charged to the process while it slept), so the harness
    waits that out first: a reference timed just before does not bill the CPU column here.
    """
    time.sleep(SETTLE_S)
    fn()
    walls, cpus = [], []
    for _ in range(repeats):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    peak = 0
    if memory:
        gc.collect()
        tracemalloc.start()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return Timing(float(np.median(walls)), float(np.median(cpus)), peak)


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.1f} MiB"


def row(*cells: object) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def header(title: str, *cols: str) -> None:
    print(f"\n### {title}\n", flush=True)
    row(*cols)
    row(*["---"] * len(cols))


def dgemm_rate(repeats: int) -> float:
    """Measured dgemm rate in flop/s (2048^3 product, BLAS threads as configured)."""
    M = np.random.default_rng(0).standard_normal((2048, 2048))
    t = measure(lambda: M @ M, repeats, memory=False)
    return 2 * 2048**3 / t.wall


def exp_floor(n_values: int, repeats: int, passes: Callable | None = None) -> Timing:
    """``np.exp`` over ``n_values`` float64 values in [-10, 0] on one thread, in slabs of
    ``BLOCK_ELEMENTS`` (in cache: the fastest numpy computes them); ``passes(src, dst)``
    replaces the exp by other elementwise work."""
    block = att.BLOCK_ELEMENTS
    src = -10 * np.random.default_rng(0).random(block)
    dst = np.empty_like(src)
    full, rest = divmod(n_values, block)
    passes = passes or (lambda x, out: np.exp(x, out=out))

    def run() -> None:
        for _ in range(full):
            passes(src, dst)
        passes(src[:rest], dst[:rest])

    return measure(run, repeats, memory=False)


def tile_loop(X: np.ndarray, repeats: int) -> Timing:
    """The least a tiled softmax kernel does, on one thread: over the tiles the library cuts
    (``_kernels.tiles``), the score product ``X_b X^T`` (``d`` inner columns: no shift, no
    bias), ``np.exp`` in place (no maximum: these scores stay far from overflow) and the product
    with the value columns and the ones, into buffers allocated once; the first key tile of a
    row block stored, the others added. What numpy and BLAS take for the kernel's own
    operations at the shapes it calls them, without the library's shifts, checks, threads and
    Python around them."""
    n, d = X.shape
    F = G = X
    R = np.column_stack([X, np.ones(n)])  # values and the ones of the row sums
    K = att._kernels
    blocks, cols = K.tiles(n, n, d + 1)
    square = d + 1 > K.SKINNY_INNER  # as the library's tiles, for its d + 1 value columns
    G_tiles = [np.ascontiguousarray(G[c].T) for c in cols]
    R_tiles = [R[c] if square else np.ascontiguousarray(R[c].T) for c in cols]
    b = blocks[0].stop - blocks[0].start
    S_buf = np.empty(b * G_tiles[0].shape[1])
    out = np.empty((n, d + 1))
    part_buf = np.empty(b * (d + 1))

    def run() -> None:
        for rows in blocks:
            m, Fr = rows.stop - rows.start, F[rows]
            part = part_buf[: m * (d + 1)]
            part = part.reshape(m, d + 1) if square else part.reshape(d + 1, m).T
            for k, (Gt, Rt) in enumerate(zip(G_tiles, R_tiles, strict=True)):
                S = S_buf[: m * Gt.shape[1]].reshape(m, -1)
                np.matmul(Fr, Gt, out=S)
                np.exp(S, out=S)
                if square:
                    np.dot(S, Rt, out=part)
                else:
                    np.dot(Rt, S.T, out=part.T)
                if k == 0:
                    out[rows] = part
                else:
                    out[rows] += part

    with K.serial_blas():
        return measure(run, repeats, memory=False)


def sigmoid_passes(x: np.ndarray, out: np.ndarray) -> None:
    """The elementwise work of a sigmoid weight: exp, add one, reciprocal."""
    np.exp(x, out=out)
    out += 1.0
    np.reciprocal(out, out=out)


def with_threads(fn: Callable[[], object], threads: int = 1) -> Callable[[], object]:
    """``fn`` with the kernels' pool set to ``threads`` workers for the call (1: no pool)."""

    def run() -> object:
        K, saved = att._kernels, att._kernels.THREADS
        K.THREADS = threads
        try:
            return fn()
        finally:
            K.THREADS = saved

    return run


def rel_error(x: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(x - ref)) / np.max(np.abs(ref)))


# ----------------------------------------------------------------------------- dense references


def dense_velocity(name: str, X: np.ndarray, params: dict) -> np.ndarray:
    """The dense numpy computation: the full n x n weight matrix, then one product."""
    n = X.shape[0]
    V = params["V"]
    if name == "l2":
        Q, K = params["Qbar"], params["Kbar"]
        G = X @ K.T
        S = (2.0 / params["s"]) * (X @ Q.T) @ G.T
        S -= np.einsum("ij,ij->i", G, G)[None, :] / params["s"]
    else:
        S = (X @ params["A"].T) @ X.T
    if name in ("softmax", "l2"):
        S *= params.get("beta", 1.0)
        S -= S.max(axis=1, keepdims=True)
        np.exp(S, out=S)
        S /= S.sum(axis=1, keepdims=True)
        return S @ X @ V.T
    if name == "sigmoid":
        S += params["b"]
        expit(S, out=S)
        return (S @ X) @ V.T / n
    if name == "linear":
        return (S @ X) @ V.T / n
    if name == "hardmax":
        m = S.max(axis=1, keepdims=True)
        P = (S >= m - 1e-9 * np.maximum(1.0, np.abs(m))).astype(np.float64)
        P /= P.sum(axis=1, keepdims=True)
        return P @ X @ V.T
    raise ValueError(name)


def make_field(name: str, d: int, rng: np.random.Generator):
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    V = rng.standard_normal((d, d)) / np.sqrt(d)
    if name == "softmax":
        return att.Softmax(A, V, beta=1.0), {"A": A, "V": V, "beta": 1.0}
    if name == "l2":
        Q, K = rng.standard_normal((2, d, d)) / np.sqrt(d)
        return att.L2(Q, K, V, s=2.0), {"Qbar": Q, "Kbar": K, "V": V, "s": 2.0}
    if name == "sigmoid":
        return att.Sigmoid(A, V, b=-1.0), {"A": A, "V": V, "b": -1.0}
    if name == "linear":
        return att.Linear(A, V), {"A": A, "V": V}
    if name == "hardmax":
        return att.Hardmax(A, V), {"A": A, "V": V}
    raise ValueError(name)


def naive_softmax(X: np.ndarray, A: np.ndarray, V: np.ndarray) -> np.ndarray:
    """The field's public code of today: a Python double loop over the tokens."""
    n = X.shape[0]
    out = np.zeros_like(X)
    for i in range(n):
        q = A @ X[i]
        s = [float(q @ X[j]) for j in range(n)]
        m = max(s)
        num = np.zeros(X.shape[1])
        den = 0.0
        for j in range(n):
            e = np.exp(s[j] - m)
            num += e * X[j]
            den += e
        out[i] = V @ (num / den)
    return out


# ----------------------------------------------------------------------------- cases


def case_velocity(name: str, cfg: argparse.Namespace) -> None:
    n, d = cfg.n, 2
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    field, params = make_field(name, d, rng)
    rate = dgemm_rate(cfg.repeats)
    ex = exp_floor(n * n, cfg.repeats)
    floor = ex.wall + 4 * n * n * d / rate
    floor_cpu = ex.cpu + 4 * n * n * d / rate
    fast = measure(lambda: field.velocity(X), cfg.repeats)
    serial = measure(with_threads(lambda: field.velocity(X)), cfg.repeats)
    dense = measure(lambda: dense_velocity(name, X, params), cfg.dense_repeats, memory=False)
    err = rel_error(field.velocity(X), dense_velocity(name, X, params))
    header(
        f"{name} velocity, n = {n}, d = {d}, float64 ({att._kernels.THREADS} threads)",
        "path",
        "kernel wall",
        "kernel CPU",
        "peak memory",
        "floor (exp + 2 products)",
        "ratio to floor (wall / CPU)",
        "dense numpy (wall / CPU)",
        "speed-up over dense (wall / CPU)",
        "max rel. diff. to dense",
    )
    for label, t in [("library", fast), ("library, one thread", serial)]:
        row(
            label,
            f"{t.wall:.3f} s",
            f"{t.cpu:.3f} s",
            mib(t.peak),
            f"{floor:.3f} s (exp {ex.wall:.3f} s, dgemm {rate / 1e9:.0f} GFLOP/s)",
            f"{t.wall / floor:.2f} / {t.cpu / floor_cpu:.2f}",
            f"{dense.wall:.3f} s / {dense.cpu:.3f} s",
            f"{dense.wall / t.wall:.1f}x / {dense.cpu / t.cpu:.1f}x",
            f"{err:.1e}",
        )
    if name == "softmax":
        own = tile_loop(X, cfg.repeats)
        print(
            f"\nThe kernel's own operations (its tiles' score products, exponentials and value "
            f"products in a bare loop, one thread) take {own.wall:.3f} s, "
            f"{own.wall / floor:.2f}x the floor above: the library runs at "
            f"{fast.wall / own.wall:.2f}x them (one thread: {serial.wall / own.wall:.2f}x).",
            flush=True,
        )
    if name == "sigmoid":
        own = exp_floor(n * n, cfg.repeats, sigmoid_passes)
        print(
            f"\nThe sigmoid's own elementwise work (exp, add one, reciprocal over n^2 values in "
            f"slabs, one thread) takes {own.wall:.3f} s, {own.wall / ex.wall:.2f}x the exp alone: "
            f"with the two products its floor is {(own.wall + floor - ex.wall) / floor:.2f}x "
            f"the floor above, and the library runs at "
            f"{fast.wall / (own.wall + floor - ex.wall):.2f}x it (one thread: "
            f"{serial.wall / (own.wall + floor - ex.wall):.2f}x).",
            flush=True,
        )


def case_wide(cfg: argparse.Namespace) -> None:
    """Softmax velocity at larger d, where the kernel cuts tiles of rows and keys: on the
    kernels' threads and on one, against the issue's floor and against the kernel's own
    operations in a bare loop (:func:`tile_loop`)."""
    header(
        "softmax velocity at larger d",
        "n, d",
        "kernel wall / CPU",
        "one thread",
        "floor (exp + 2 products)",
        "ratio to floor (wall / CPU; one thread)",
        "own operations (one thread)",
        "ratio to them (wall; one thread)",
        "dense numpy (wall)",
        "speed-up over dense (wall)",
        "max rel. diff. to dense",
    )
    rate = dgemm_rate(cfg.repeats)
    for n, d in cfg.wide:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, d)) / np.sqrt(d)
        field, params = make_field("softmax", d, rng)
        ex = exp_floor(n * n, cfg.repeats)
        floor, floor_cpu = ex.wall + 4 * n * n * d / rate, ex.cpu + 4 * n * n * d / rate
        fast = measure(lambda field=field, X=X: field.velocity(X), cfg.repeats, memory=False)
        serial = measure(
            with_threads(lambda field=field, X=X: field.velocity(X)), cfg.repeats, memory=False
        )
        own = tile_loop(X, cfg.repeats)
        dense = measure(lambda X=X, p=params: dense_velocity("softmax", X, p), cfg.dense_repeats)
        row(
            f"{n}, {d}",
            f"{fast.wall:.4f} s / {fast.cpu:.4f} s",
            f"{serial.wall:.4f} s",
            f"{floor:.4f} s",
            f"{fast.wall / floor:.2f} / {fast.cpu / floor_cpu:.2f}; {serial.wall / floor:.2f}",
            f"{own.wall:.4f} s",
            f"{fast.wall / own.wall:.2f}; {serial.wall / own.wall:.2f}",
            f"{dense.wall:.4f} s",
            f"{dense.wall / fast.wall:.1f}x",
            f"{rel_error(field.velocity(X), dense_velocity('softmax', X, params)):.1e}",
        )


def case_naive(cfg: argparse.Namespace) -> None:
    n = cfg.n_naive
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2))
    A, V = np.eye(2), rng.standard_normal((2, 2))
    field = att.Softmax(A, V)
    loop = measure(lambda: naive_softmax(X, A, V), 1, memory=False)
    fast = measure(lambda: field.velocity(X), cfg.repeats, memory=False)
    err = rel_error(field.velocity(X), naive_softmax(X, A, V))
    header(
        f"softmax velocity against a Python double loop, n = {n}",
        "loop",
        "kernel",
        "speed-up",
        "max rel. diff.",
    )
    row(
        f"{loop.wall:.3f} s",
        f"{fast.wall * 1e3:.2f} ms",
        f"{loop.wall / fast.wall:.0f}x",
        f"{err:.1e}",
    )


def case_large(cfg: argparse.Namespace) -> None:
    n = cfg.n_large
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2))
    field = att.Softmax(np.eye(2), np.eye(2))
    # one call (n^2 = 10^10 exponentials), timed and traced at once
    gc.collect()
    tracemalloc.start()
    w0, c0 = time.perf_counter(), time.process_time()
    v = field.velocity(X)
    t = Timing(time.perf_counter() - w0, time.process_time() - c0, 0)
    t.peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    idx = rng.choice(n, 4, replace=False)
    S = X[idx] @ X.T
    P = np.exp(S - S.max(axis=1, keepdims=True))
    ref = (P / P.sum(axis=1, keepdims=True)) @ X
    err = rel_error(v[idx], ref)
    header(
        f"softmax velocity, n = {n}, d = 2: bounded memory",
        "wall",
        "CPU",
        "peak traced memory",
        "a dense score matrix would take",
        "rel. diff. of 4 rows to dense",
    )
    row(f"{t.wall:.2f} s", f"{t.cpu:.2f} s", mib(t.peak), mib(8 * n * n), f"{err:.1e}")


def _plain_scaling_step(K, a, b, u, v):
    u = a / (K @ v)
    v = b / (K.T @ u)
    return u, v


def case_sinkhorn(cfg: argparse.Namespace) -> None:
    from token_dynamics.attention import _sinkhorn as sk
    from token_dynamics.attention import _sinkhorn_scaling as ski

    n = cfg.n_sinkhorn
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    A = rng.standard_normal((2, 2))  # not symmetric: the alternating (general) updates
    a = np.full(n, 1 / n)
    S = (X @ A.T) @ X.T
    k = cfg.sinkhorn_iters
    # per iteration, at eps = 1 where plain scaling works. Each solver is timed for k + 1 and
    # for 1 iteration; the difference over k is the cost of one iteration without the setup. Wall
    # time, not CPU time: OpenBLAS threads the matrix-vector products and its waiting threads
    # spin, which process CPU time counts.
    eps = 1.0
    K = np.exp(S / eps)
    Ke = S / eps
    log_a = np.log(a)

    def plain(iters):
        u, v = np.ones(n), np.ones(n)
        for _ in range(iters):
            u, v = _plain_scaling_step(K, a, a, u, v)

    solvers = {
        "plain scaling (2 matrix-vector products)": plain,
        "library (log-stabilised scaling)": lambda it: sk.sinkhorn_plan(
            S, eps, tol=1e-300, max_iter=it
        ),
        "log-sum-exp updates (the previous solver)": lambda it: ski.alternating_iterations(
            Ke, log_a, log_a, 1e-300, it
        ),
    }
    # interleaved repeats (plain, library, previous, ...) so that a busy spell of the machine
    # hits every solver alike; medians of the per-iteration times
    kp = max(2, k // 20)  # the previous solver costs ~100x more per iteration
    samples: dict[str, list[float]] = {name: [] for name in solvers}

    def clock(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    for run in solvers.values():  # warm-up
        run(2)
    for rep in range(cfg.repeats):
        for name, run in solvers.items():
            kk = kp if "previous" in name else k
            if "previous" in name and rep > 0:
                continue  # one sample is enough at ~100x the cost
            t_k = clock(lambda run=run, kk=kk: run(kk + 1))
            if name.startswith("plain"):  # no setup to subtract
                samples[name].append(t_k / (kk + 1))
            else:  # minus the setup (first potentials, kernel, final plan) and one iteration
                samples[name].append(max(t_k - clock(lambda run=run: run(1)), 0.0) / kk)
    per = {name: float(np.median(v)) for name, v in samples.items()}
    header(
        f"Sinkhorn, n = {n}, wall time per iteration (alternating updates, eps = 1)",
        "solver",
        "per iteration",
        "ratio to plain scaling",
    )
    base = per["plain scaling (2 matrix-vector products)"]
    for name, t in per.items():
        row(name, f"{t * 1e3:.2f} ms", f"{t / base:.2f}")
    # robustness: eps = 0.1 with a score spread of 100 to 200 eps, on 512 of the tokens
    # (convergence, not speed, is the point; thousands of iterations at n = 2048 take minutes)
    n = min(n, 512)
    S, a = S[:n, :n], np.full(n, 1 / n)
    header(
        f"Sinkhorn, n = {n}, eps = 0.1, score spread 100-1000 eps",
        "spread / eps",
        "library converged",
        "iterations",
        "marginal error",
        "wall",
        "plain scaling, same iterations",
    )
    # 1000 eps: beyond the range, where e^(S/eps) spans more than float64 holds
    for spread in (100, 200, 1000):
        Sx = S * (spread * 0.1 / np.ptp(S))
        start = time.perf_counter()
        res = sk.sinkhorn_plan(Sx, 0.1, tol=1e-9, max_iter=20_000)
        wall = time.perf_counter() - start
        with np.errstate(all="ignore"):
            Kx = np.exp(Sx / 0.1)
            u, v = np.ones(n), np.ones(n)
            for _ in range(max(res.n_iter, 1)):
                u, v = _plain_scaling_step(Kx, a, a, u, v)
            plan = u[:, None] * Kx * v[None, :]
            err = np.abs(plan.sum(axis=0) - a).sum() + np.abs(plan.sum(axis=1) - a).sum()
        plain = f"marginal error {err:.1e}" if np.isfinite(err) else "not finite (under/overflow)"
        row(spread, res.converged, res.n_iter, f"{res.marginal_error:.1e}", f"{wall:.2f} s", plain)


#: Largest n at which POT's sinkhorn_log is timed: at n = 1024 it took 25-40x the time of
#: ot.sinkhorn on every instance (measured; log-sum-exp over the whole kernel at every
#: iteration), about 90 s per solve at n = 4096 on the loaded machine.
LOG_SOLVER_MAX_N = 1024


def case_sinkhorn_pot(cfg: argparse.Namespace) -> None:
    """Sinkhorn attention's plan against POT's three solvers on the same instances.

    Each solver runs to a marginal error of 1e-9 in l1 (the library's ``tol``; POT's
    ``stopThr`` is an l2 error of the column marginal, so it gets 1e-9 / sqrt(n), which implies
    the l1 target); a POT solver counts only where its plan is finite and within 1e-9 on both
    marginals. Interleaved rounds (solvers 10x slower than the fastest are timed once); both
    run their matrix-vector products through numpy's BLAS with the threads of the environment
    (``OPENBLAS_NUM_THREADS=1`` for one thread). The ratio is the library's time over the
    fastest POT solver that converged (> 1: the library is slower).
    """
    import warnings

    import ot

    from token_dynamics.attention import _sinkhorn as sk

    header(
        f"Sinkhorn plan to 1e-9 against POT (BLAS threads: "
        f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; median wall, interleaved)",
        "n, eps, A",
        "library",
        "iterations",
        "ot.sinkhorn",
        "sinkhorn_stabilized",
        "sinkhorn_log",
        "ratio to the fastest converged POT solver (median, range)",
    )
    pot = {
        "ot.sinkhorn": ot.sinkhorn,
        "sinkhorn_stabilized": ot.bregman.sinkhorn_stabilized,
        "sinkhorn_log": ot.bregman.sinkhorn_log,
    }
    sizes = (1024,) if cfg.quick else (1024, 4096)
    for n in sizes:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, 2))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        A = rng.standard_normal((2, 2))
        for kind, Am in (("non-symmetric", A), ("symmetric", (A + A.T) / 2)):
            S = (X @ Am.T) @ X.T
            a = np.full(n, 1 / n)
            thr = 1e-9 / np.sqrt(n)
            for eps in (1.0, 0.1):
                res = sk.sinkhorn_plan(S, eps, tol=1e-9, max_iter=100_000)

                def library(S=S, eps=eps):
                    return sk.sinkhorn_plan(S, eps, tol=1e-9, max_iter=100_000).plan

                def solver(fn, S=S, eps=eps, a=a, thr=thr):
                    def run():
                        with warnings.catch_warnings(), np.errstate(all="ignore"):
                            warnings.simplefilter("ignore")
                            return fn(a, a, -S, eps, numItermax=100_000, stopThr=thr)

                    return run

                fns = {"library": library, **{k: solver(fn) for k, fn in pot.items()}}
                if n > LOG_SOLVER_MAX_N:
                    del fns["sinkhorn_log"]
                first = {}
                for k, fn in fns.items():  # one call each: check, and find the slow ones
                    start = time.perf_counter()
                    P = fn()
                    first[k] = time.perf_counter() - start
                    err = max(np.abs(P.sum(0) - a).sum(), np.abs(P.sum(1) - a).sum())
                    first[k] = first[k] if np.all(np.isfinite(P)) and err <= 1e-9 else None
                fastest = min(v for v in first.values() if v is not None)
                # solvers 10x slower than the fastest keep their one call
                timed = {k: [v] for k, v in first.items() if v is not None}
                rounds = [k for k, v in first.items() if v is not None and v < 10 * fastest]
                for _ in range(cfg.repeats - 1):
                    for k in rounds:
                        start = time.perf_counter()
                        fns[k]()
                        timed[k].append(time.perf_counter() - start)
                med = {k: float(np.median(v)) for k, v in timed.items()}
                best = min((k for k in med if k != "library"), key=med.get)
                pairs = zip(timed["library"], timed[best], strict=False)
                ratios = [lib / peer for lib, peer in pairs]
                row(
                    f"{n}, {eps:g}, {kind}",
                    f"{med['library'] * 1e3:.0f} ms",
                    res.n_iter,
                    *(
                        f"{med[k] * 1e3:.0f} ms"
                        if k in med
                        else ("not timed" if k not in fns else "not converged")
                        for k in pot
                    ),
                    f"{np.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) vs {best}",
                )


def dense_layer(X, h, W1, W2):
    """One relu layer of the paper's model (Q = K = V = I, no biases; ``W1`` already divided by
    sqrt(d)) with dense arrays: the N x N softmax and the N x m hidden layer in memory at once,
    as `simulate` computed it before it was tiled."""
    P = X @ X.T
    P -= P.max(axis=1, keepdims=True)
    np.exp(P, out=P)
    P /= P.sum(axis=1, keepdims=True)
    Y = X + h * (P @ X)
    del P
    Y /= np.linalg.norm(Y, axis=1, keepdims=True)
    Z = Y + np.sqrt(h) * (np.maximum(Y @ W1.T, 0.0) @ W2.T) / np.sqrt(W1.shape[0])
    return Z / np.linalg.norm(Z, axis=1, keepdims=True)


def layer_weights(m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The MLP weights ``W1 = U / sqrt(d) (m, d)``, ``W (d, m)`` as ``simulate`` draws them
    (b_U = b_W = 0, one path, ``rng=1``)."""
    g = np.random.default_rng(1)
    W1 = g.standard_normal((1, m, d))[0] / np.sqrt(d)
    g.standard_normal((1, m))  # b_U, zero at sigma_U = 0
    return W1, g.standard_normal((1, d, m))[0]


def case_stochastic(cfg: argparse.Namespace) -> None:
    from token_dynamics.stochastic import MLPNoise, StochasticTransformer, simulate

    N, d, h = cfg.n_stochastic, 16, 0.01
    rate = dgemm_rate(cfg.repeats)
    rng = np.random.default_rng(0)
    X0 = rng.standard_normal((N, d))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    header(
        f"stochastic transformer, one relu layer, N = {N}, d = {d} "
        f"(dgemm {rate / 1e9:.0f} GFLOP/s)",
        "code",
        "width m",
        "wall",
        "CPU",
        "peak memory",
        "of which W1, W2",
        "dgemm floor",
        "ratio to floor (wall / CPU)",
        "the 4 products at these shapes",
        "ratio to them (wall)",
        "max diff. to dense",
    )
    for m in cfg.widths:
        model = StochasticTransformer(MLPNoise("relu", width=m))
        flops = 4 * N * m * d + 4 * N * N * d  # MLP: two N x m x d products; attention: two
        floor = flops / rate
        # the layer's four products as whole-array BLAS calls into preallocated outputs: the
        # rate BLAS reaches at these skinny shapes (inner dimension d, or d columns out), with
        # no exp, no activation and no allocation
        W1T, W2T, H, P = np.ones((d, m)), np.ones((m, d)), np.empty((N, m)), np.empty((N, N))
        X0T, G = np.ascontiguousarray(X0.T), np.empty((N, d))

        def products(W1T=W1T, W2T=W2T, H=H, P=P, X0T=X0T, G=G):
            np.dot(X0, W1T, out=H)
            np.dot(H, W2T, out=G)
            np.dot(X0, X0T, out=P)
            np.dot(P, X0, out=G)

        shapes = measure(products, cfg.repeats, memory=False)
        del W1T, W2T, H, P
        t = measure(lambda m=model: simulate(m, X0, T=h, L=1, rng=1), cfg.repeats)
        ours = simulate(model, X0, T=h, L=1, rng=1).X[0, -1]
        W1, W2 = layer_weights(m, d)
        dense = measure(lambda W1=W1, W2=W2: dense_layer(X0, h, W1, W2), cfg.dense_repeats)
        diff = float(np.abs(dense_layer(X0, h, W1, W2) - ours).max())
        for code, tm, dd in (("simulate (tiled)", t, f"{diff:.1e}"), ("dense numpy", dense, "-")):
            row(
                code,
                m,
                f"{tm.wall:.3f} s",
                f"{tm.cpu:.3f} s",
                mib(tm.peak),
                mib(W1.nbytes + W2.nbytes),
                f"{floor:.3f} s",
                f"{tm.wall / floor:.1f} / {tm.cpu / floor:.1f}",
                f"{shapes.wall:.3f} s",
                f"{tm.wall / shapes.wall:.1f}",
                dd,
            )


def case_gaussian(cfg: argparse.Namespace) -> None:
    from token_dynamics.diagnostics import empirical_covariance
    from token_dynamics.gaussian import (
        SoftmaxMoments,
        isotropic_covariance,
        moment_matched_cloud,
        solve_moments,
    )
    from token_dynamics.integrators import integrate

    A = np.array([[-0.5, 0.3], [0.1, -0.8]])
    V = np.eye(2)
    mean0, cov0 = np.zeros(2), np.array([[1.0, 0.3], [0.3, 0.5]])
    times = np.array([0.0, 1.0])
    exact = isotropic_covariance(A, 1.0, cov0, times)[-1]
    field = att.Softmax(A, V)

    def particles():  # one run (particle_moments adds the runs of its jackknife errors)
        X0 = moment_matched_cloud(cfg.n_gauss, mean0, cov0, rng=0)
        return empirical_covariance(integrate(field, X0, times, dt=0.05).final)

    def ode():
        return solve_moments(SoftmaxMoments(A, V), mean0, cov0, times, rtol=1e-6, atol=1e-9)

    t_p = measure(particles, 1, memory=False)
    t_o = measure(ode, cfg.repeats, memory=False)
    err_p = rel_error(particles(), exact)
    err_o = rel_error(ode().covariances[-1], exact)
    header(
        "Gaussian moment ODE against particles (softmax, d = 2, V = I, t = 1)",
        "particles (n, RK4 dt = 0.05)",
        "particle cov. error",
        "ODE (DOP853, rtol 1e-6)",
        "ODE cov. error",
        "speed-up at equal or better accuracy",
    )
    row(
        f"{t_p.wall:.3f} s (n = {cfg.n_gauss})",
        f"{err_p:.1e}",
        f"{t_o.wall * 1e3:.2f} ms",
        f"{err_o:.1e}",
        f"{t_p.wall / t_o.wall:.0f}x",
    )


def case_wasserstein(cfg: argparse.Namespace) -> None:
    """Entropic W2 (epsilon scaling, over-relaxed Sinkhorn) against the exact network simplex
    on the same clouds, interleaved; the target: never more than 2x the exact method."""
    from token_dynamics.wasserstein import wasserstein2

    rng = np.random.default_rng(0)
    n, m = (600, 800) if cfg.quick else (1500, 2000)
    X, Y = rng.normal(size=(n, 2)), rng.normal(size=(m, 2)) + np.array([1.0, 0.0])
    regs = (1.0, 0.2, 0.05, 0.01)
    fns = {"exact": lambda: wasserstein2(X, Y)}
    fns.update(
        {f"reg = {r}": (lambda r=r: wasserstein2(X, Y, method="entropic", reg=r)) for r in regs}
    )
    values = {k: fn() for k, fn in fns.items()}
    walls: dict[str, list[float]] = {k: [] for k in fns}
    cpus: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(cfg.dense_repeats):  # interleaved: exact, each reg, exact, ...
        for k, fn in fns.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            walls[k].append(time.perf_counter() - w0)
            cpus[k].append(time.process_time() - c0)
    header(
        f"W2 between {n} and {m} points in 2-D (mean squared distance 5): entropic vs exact",
        "method",
        "W2",
        "wall",
        "CPU",
        "ratio to exact (wall / CPU)",
    )
    ew, ec = np.median(walls["exact"]), np.median(cpus["exact"])
    for k in fns:
        w, c = np.median(walls[k]), np.median(cpus[k])
        row(k, f"{values[k]:.6f}", f"{w:.2f} s", f"{c:.2f} s", f"{w / ew:.2f} / {c / ec:.2f}")


def case_interpolation(cfg: argparse.Namespace) -> None:
    """Softmax interpolator build time against the number of sequences (n = 16, m = 4, d = 4):
    linear in the number of blocks for the critical temperature (its norms computed once)."""
    from token_dynamics.interpolation import build_softmax_interpolator

    header(
        "softmax interpolator, n = 16 tokens, m = 4 targets, d = 4",
        "sequences N",
        "blocks",
        "wall",
        "CPU",
        "CPU per block",
    )
    for N in (10, 20) if cfg.quick else (10, 20, 40):
        rng = np.random.default_rng(0)
        X = [rng.normal(size=(16, 4)) for _ in range(N)]
        Y = [rng.normal(size=(4, 4)) for _ in range(N)]
        w0, c0 = time.perf_counter(), time.process_time()
        res = build_softmax_interpolator(X, Y, rng=0)
        w, c = time.perf_counter() - w0, time.process_time() - c0
        row(N, res.n_blocks, f"{w:.2f} s", f"{c:.2f} s", f"{c / res.n_blocks * 1e3:.1f} ms")


def case_notebooks(cfg: argparse.Namespace) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import notebooks

    print("\n### notebook execution (fresh kernel each, sequential)\n", flush=True)
    notebooks.run()


def case_backends(cfg: argparse.Namespace) -> None:
    """The torch and JAX backends of the softmax velocity against torch's fused attention and
    ``jax.jit``, and of the other variants against their numpy path (``peers.py --workloads
    backends,variants``, one thread unless ``--peer-threads``)."""
    case_peers(cfg, workloads="backends,variants")


def case_peers(cfg: argparse.Namespace, workloads: str | None = None) -> None:
    """PyTorch and JAX on the same workloads (``peers.py``), in a subprocess whose thread
    counts are pinned before numpy, torch and JAX load."""
    import importlib.util
    import subprocess

    if not any(importlib.util.find_spec(p) for p in ("torch", "jax")):
        print(
            "\n### peers\n\nneither torch nor JAX is installed: skipped "
            "(pip install -e '.[bench]')",
            flush=True,
        )
        return
    k = str(cfg.peer_threads)
    env = dict(os.environ, TOKEN_DYNAMICS_THREADS=k, OMP_NUM_THREADS=k)
    env.update(OPENBLAS_NUM_THREADS=k, MKL_NUM_THREADS=k)
    # XLA's CPU backend: one thread needs both flags; otherwise it uses every core
    one = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    env["XLA_FLAGS"] = one if cfg.peer_threads == 1 else env.get("XLA_FLAGS", "")
    args = [sys.executable, str(Path(__file__).parent / "peers.py")]
    args += ["--workloads", workloads or cfg.peer_workloads] + (["--quick"] if cfg.quick else [])
    subprocess.run(args, env=env, check=True)


VELOCITY = ("softmax", "l2", "sigmoid", "linear", "hardmax")
CASES: dict[str, Callable[[argparse.Namespace], None]] = {
    **{name: (lambda cfg, name=name: case_velocity(name, cfg)) for name in VELOCITY},
    "wide": case_wide,
    "naive": case_naive,
    "large": case_large,
    "sinkhorn": case_sinkhorn,
    "sinkhorn_pot": case_sinkhorn_pot,
    "stochastic": case_stochastic,
    "gaussian": case_gaussian,
    "wasserstein": case_wasserstein,
    "interpolation": case_interpolation,
    "peers": case_peers,
    "backends": case_backends,
    "notebooks": case_notebooks,
}
#: Run only when named (several minutes of kernels in subprocesses).
OPT_IN = ("notebooks", "backends")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"cases to run (default: all but {OPT_IN})")
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--repeats", type=int, default=None, help="repeats per timing")
    parser.add_argument(
        "--peer-threads", type=int, default=1, help="threads of every library in `peers` (1)"
    )
    parser.add_argument(
        "--peer-workloads",
        default="softmax,ode,mlp,gemm",
        help="workloads of `peers`, comma-separated (softmax, ode, mlp, gemm)",
    )
    cfg = parser.parse_args(argv)
    if cfg.list:
        print("\n".join(CASES))
        return
    unknown = [c for c in cfg.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    quick = cfg.quick
    cfg.repeats = cfg.repeats or (3 if quick else 5)
    cfg.dense_repeats = 1 if quick else 3
    cfg.n = 4096 if quick else 16384
    cfg.n_naive = 128 if quick else 512
    cfg.n_large = 30_000 if quick else 100_000
    cfg.n_sinkhorn = 1024 if quick else 2048
    cfg.sinkhorn_iters = 50 if quick else 200
    cfg.n_stochastic = 1024 if quick else 4096
    cfg.widths = (1024, 4096) if quick else (4096, 16384)
    cfg.n_gauss = 1024 if quick else 4096
    cfg.wide = ((1024, 16), (512, 64)) if quick else ((4096, 16), (2048, 64))
    selected = cfg.cases or [c for c in CASES if c not in OPT_IN]
    print(
        f"token-dynamics benchmarks ({'quick' if quick else 'full'}): numpy {np.__version__}, "
        f"{att._kernels.THREADS} kernel threads, BLOCK_ELEMENTS = {att.BLOCK_ELEMENTS}, "
        f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    start = time.perf_counter()
    for name in selected:
        CASES[name](cfg)
    print(f"\n(benchmarks took {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
