"""The library against PyTorch and JAX on the same inputs: ratios measured in one run.

Run through the harness, which starts this file in a subprocess with every thread count
pinned before numpy, torch and JAX load (thread pools cannot be resized reliably afterwards)::

    python benchmarks/run.py peers            # n = 1024 / 4096 / 16384 (several minutes)
    python benchmarks/run.py peers --quick    # n = 1024 / 4096, fewer repeats
    python benchmarks/run.py peers --peer-threads 2

Peers are optional (``pip install -e '.[bench]'``); a missing one is reported and skipped.
Every workload first checks that each peer's output equals the library's (float64 to 1e-10
relative: the same sums in another order; float32 to 1e-4: its rounding, 6e-8, over the
softmax's sums and products), then times the implementations in alternating bursts (untimed
calls for 0.05 s, then a few timed ones, or as many as fill 0.25 s, of the library, then of
torch, then of JAX, ...; three rounds) so that a busy spell of the machine hits all alike, and
prints the ratio
library time / peer time (> 1: the library is slower), float64 against float64 and the
library's float32 path (``velocity`` of float32 tokens) against the peers' float32.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import run  # the harness: row, header, rel_error, dense_layer

from token_dynamics import attention as att
from token_dynamics import integrate

#: Relative agreement demanded of a float64 peer (a reordering of the same sums: ~1e-15 per
#: operation, far below) and of a float32 peer (unit round-off 6e-8 times the ~1e2-1e3
#: operations that feed one output).
RTOL64, RTOL32 = 1e-10, 1e-4


def _load_peers() -> dict[str, object]:
    peers: dict[str, object] = {}
    try:
        import torch

        torch.set_num_threads(int(os.environ["TOKEN_DYNAMICS_THREADS"]))
        peers["torch"] = torch
    except ImportError:
        print("torch is not installed: skipped (pip install -e '.[bench]')")
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        peers["jax"] = jax
    except ImportError:
        print("JAX is not installed: skipped (pip install -e '.[bench]')")
    return peers


#: Seconds of the slowest implementation's calls per round, beyond which fewer repeats are made
#: (at n = 16384 a float64 peer call takes seconds: one call per round is then enough).
ROUND_BUDGET_S = 3.0

#: Shortest burst, and shortest untimed warm-up before it: calls of a few milliseconds are
#: repeated until their burst lasts this long. On the project's VM the cores slow down while
#: idle: after a pause of half a second the library's first 5 calls at n = 1024 on two threads
#: took 1.3-1.6x their steady time (d = 64: 6.8-9.0 ms against 5.5 ms), and torch's, whose
#: OpenMP threads spin between calls, much less; a burst of 5 such calls (15-35 ms) measured
#: that transient rather than the steady state of a user's loop.
BURST_S, WARM_S = 0.25, 0.05


def interleaved(
    fns: dict[str, Callable[[], object]], repeats: int, first: int = 0
) -> dict[str, float]:
    """Median wall time of each function, the functions taking turns in bursts: untimed calls
    for :data:`WARM_S` (one at least), then ``repeats`` timed calls back to back, or as many as
    fill :data:`BURST_S`, as a user's loop would make them; the turns start at the function of
    index ``first`` (the rounds rotate it: on this VM the burst after the pause ran slower, its
    cores idle a moment before).

    Call by call alternation was biased: torch's OpenMP threads and XLA's keep spinning for a
    while after their call and slowed whichever call came next (measured on two cores: the
    library's float32 velocity at n = 1024, d = 64 took 2.8 ms after itself, 5.2 ms right after
    a torch call); the untimed call absorbs that, and the bursts still alternate, so a change
    in the machine's load reaches every function alike.
    """
    slowest = 0.0
    for fn in fns.values():
        start = time.perf_counter()
        fn()
        slowest = max(slowest, time.perf_counter() - start)
    repeats = max(1, min(repeats, int(ROUND_BUDGET_S / slowest)))
    samples: dict[str, list[float]] = {k: [] for k in fns}
    time.sleep(run.SETTLE_S)
    names = list(fns)
    for name in names[first:] + names[:first]:
        fn = fns[name]
        start = time.perf_counter()
        fn()
        while time.perf_counter() - start < WARM_S:
            fn()
        burst = time.perf_counter()
        while len(samples[name]) < repeats or time.perf_counter() - burst < BURST_S:
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {k: float(np.median(v)) for k, v in samples.items()}


def _spread(fns: dict[str, Callable[[], object]], repeats: int, rounds: int):
    """Per implementation: the median over ``rounds`` interleaved rounds, and the range of the
    ratios to the library across rounds (the spread a reader should expect). A name ending in
    ``32`` is a float32 implementation, compared with the library's float32 path
    (``library32``) when it is timed."""
    per_round = [interleaved(fns, repeats, r * len(fns) // rounds) for r in range(rounds)]
    med = {k: float(np.median([r[k] for r in per_round])) for k in fns}

    def base(k: str) -> str:
        return "library32" if k.endswith("32") and "library32" in fns else "library"

    ratios = {k: [r[base(k)] / r[k] for r in per_round] for k in fns}
    return med, ratios


def _ratio_cell(ratios: list[float]) -> str:
    lo, hi = min(ratios), max(ratios)
    return f"{np.median(ratios):.2f} ({lo:.2f}-{hi:.2f})"


def check(name: str, out: object, ref: np.ndarray, rtol: float) -> None:
    err = run.rel_error(np.asarray(out, dtype=np.float64), ref)
    if not err <= rtol:
        raise SystemExit(f"{name}: output differs from the library's by {err:.1e} > {rtol:.0e}")


# ----------------------------------------------------------------------------- workloads


#: Largest n for the JAX softmax: XLA materialises the n x n scores (2 GiB at n = 16384 in
#: float64, several such buffers at once), too much for a shared machine.
JAX_MAX_N = 4096


def softmax_peers(peers, X, A, V, dtype):
    """The softmax velocity V sum_j softmax_j(<A x_i, x_j>) x_j as each peer writes it."""
    out = {}
    if "torch" in peers:
        torch = peers["torch"]
        tX = torch.from_numpy(X.astype(dtype))[None]
        tA, tV = (torch.from_numpy(M.astype(dtype)) for M in (A, V))
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def torch_velocity(tX=tX, tA=tA, tV=tV):
            with torch.no_grad():
                return sdpa(tX @ tA.T, tX, tX @ tV.T, scale=1.0)[0].numpy()

        out["torch"] = torch_velocity
    if "jax" in peers and X.shape[0] <= JAX_MAX_N:
        jax = peers["jax"]
        jnp = jax.numpy

        @jax.jit
        def velocity(X, A, V):
            return jax.nn.softmax((X @ A.T) @ X.T, axis=-1) @ (X @ V.T)

        jX, jA, jV = (jnp.asarray(M.astype(dtype)) for M in (X, A, V))
        out["jax"] = lambda: np.asarray(velocity(jX, jA, jV).block_until_ready())
    return out


def case_softmax(peers, cfg) -> None:
    run.header(
        f"softmax velocity against fused attention ({cfg.peer_threads} thread(s) each)",
        "n, d",
        "library (float64)",
        *(f"{p} float64" for p in peers),
        *(f"ratio to {p} float64 (median, range)" for p in peers),
        "library (float32)",
        *(f"ratio to {p} float32 (median, range)" for p in peers),
    )
    for d in (2, 16, 64):
        for n in cfg.peer_sizes:
            rng = np.random.default_rng(0)
            X = rng.standard_normal((n, d)) / np.sqrt(np.sqrt(d))
            A = rng.standard_normal((d, d)) / np.sqrt(d)
            V = rng.standard_normal((d, d)) / np.sqrt(d)
            field = att.Softmax(A, V)
            ref = field.velocity(X)
            X32 = X.astype(np.float32)
            check("library float32", field.velocity(X32), ref, RTOL32)
            f64 = softmax_peers(peers, X, A, V, np.float64)
            f32 = softmax_peers(peers, X, A, V, np.float32)
            for k in f64:
                check(f"{k} float64", f64[k](), ref, RTOL64)
                check(f"{k} float32", f32[k](), ref, RTOL32)
            fns = {"library": lambda f=field, X=X: f.velocity(X), **f64}
            fns["library32"] = lambda f=field, X=X32: f.velocity(X)
            fns.update({f"{k}32": fn for k, fn in f32.items()})
            med, ratios = _spread(fns, cfg.peer_repeats, cfg.peer_rounds)
            run.row(
                f"{n}, {d}",
                f"{med['library'] * 1e3:.1f} ms",
                *(f"{med[k] * 1e3:.1f} ms" if k in f64 else "-" for k in peers),
                *(_ratio_cell(ratios[k]) if k in f64 else "-" for k in peers),
                f"{med['library32'] * 1e3:.1f} ms",
                *(_ratio_cell(ratios[f"{k}32"]) if k in f32 else "-" for k in peers),
            )


def case_ode(peers, cfg) -> None:
    n, d, dt, steps = 1024, 2, 0.01, cfg.peer_steps
    rng = np.random.default_rng(1)
    X0 = rng.standard_normal((n, d))
    A = rng.standard_normal((d, d)) / np.sqrt(d) - np.eye(d)
    V = np.eye(d)
    field = att.Softmax(A, V)
    times = np.array([0.0, steps * dt])

    def library():
        return integrate(field, X0, times, method="rk4", dt=dt).states[-1]

    ref = library()
    fns: dict[str, Callable[[], object]] = {"library": library}
    if "torch" in peers:
        torch = peers["torch"]
        sdpa = torch.nn.functional.scaled_dot_product_attention
        tA, tV = torch.from_numpy(A), torch.from_numpy(V)

        def torch_rk4():
            def f(Z):
                return sdpa(Z @ tA.T, Z, Z @ tV.T, scale=1.0)

            with torch.no_grad():
                Z = torch.from_numpy(X0)[None]
                for _ in range(steps):
                    k1 = f(Z)
                    k2 = f(Z + 0.5 * dt * k1)
                    k3 = f(Z + 0.5 * dt * k2)
                    k4 = f(Z + dt * k3)
                    Z = Z + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
                return Z[0].numpy()

        fns["torch"] = torch_rk4
    if "jax" in peers:
        jax = peers["jax"]
        jnp = jax.numpy

        @jax.jit
        def jax_rk4(Z):
            def f(Z):
                return jax.nn.softmax((Z @ A.T) @ Z.T, axis=-1) @ (Z @ V.T)

            def step(_, Z):
                k1 = f(Z)
                k2 = f(Z + 0.5 * dt * k1)
                k3 = f(Z + 0.5 * dt * k2)
                k4 = f(Z + dt * k3)
                return Z + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)

            return jax.lax.fori_loop(0, steps, step, Z)

        jX0 = jnp.asarray(X0)
        fns["jax"] = lambda: np.asarray(jax_rk4(jX0).block_until_ready())
    for k, fn in fns.items():
        # with V = I each velocity is a point of the tokens' convex hull, which grows like e^t
        # (|x| ~ 6e4 at t = 10) while the attention turns into a hardmax (every row then needs
        # its exact maximum); JAX and the library still agree to 1.2e-15 of max|x| (measured)
        check(k, fn(), ref, RTOL64)
    med, ratios = _spread(fns, max(1, cfg.peer_repeats // 2), cfg.peer_rounds)
    peer_names = [k for k in fns if k != "library"]
    run.header(
        f"particle ODE, RK4, n = {n}, d = {d}, {4 * steps} field evaluations, float64",
        "library",
        *peer_names,
        *(f"ratio to {k} (median, range)" for k in peer_names),
    )
    run.row(
        f"{med['library']:.2f} s",
        *(f"{med[k]:.2f} s" for k in peer_names),
        *(_ratio_cell(ratios[k]) for k in peer_names),
    )


def case_mlp(peers, cfg) -> None:
    """One layer of the paper's model (relu, Q = K = V = I, no biases, width m) against torch
    matmuls."""
    from token_dynamics.stochastic import MLPNoise, StochasticTransformer, simulate

    N, d, h = cfg.peer_mlp, 16, 0.01
    rng = np.random.default_rng(0)
    X0 = rng.standard_normal((N, d))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    model = StochasticTransformer(MLPNoise("relu", width=N))
    W1, W2 = run.layer_weights(N, d)  # as simulate draws them for rng=1, one path

    def library():
        return simulate(model, X0, T=h, L=1, rng=1).X[0, -1]

    ref = run.dense_layer(X0, h, W1, W2)
    check("library", library(), ref, RTOL64)
    fns: dict[str, Callable[[], object]] = {"library": library}
    if "torch" in peers:
        torch = peers["torch"]
        tX, tW1, tW2 = (torch.from_numpy(M) for M in (X0, W1, W2))

        def torch_layer():
            with torch.no_grad():
                P = torch.softmax(tX @ tX.T, dim=1)
                Y = tX + h * (P @ tX)
                Y = Y / torch.linalg.norm(Y, dim=1, keepdim=True)
                Z = Y + np.sqrt(h) * (torch.relu(Y @ tW1.T) @ tW2.T) / np.sqrt(N)
                return (Z / torch.linalg.norm(Z, dim=1, keepdim=True)).numpy()

        fns["torch"] = torch_layer
        check("torch", torch_layer(), ref, RTOL64)
    med, ratios = _spread(fns, cfg.peer_repeats, cfg.peer_rounds)
    peer_names = [k for k in fns if k != "library"]
    run.header(
        f"random-MLP layer, N = m = {N}, d = {d}, float64",
        "library",
        *peer_names,
        *(f"ratio to {k} (median, range)" for k in peer_names),
    )
    run.row(
        f"{med['library'] * 1e3:.1f} ms",
        *(f"{med[k] * 1e3:.1f} ms" for k in peer_names),
        *(_ratio_cell(ratios[k]) for k in peer_names),
    )


def case_gemm(peers, cfg) -> None:
    """The matrix products under the velocity, at its tile and whole-matrix shapes: numpy's
    BLAS (what the library calls) against torch's and XLA's, in GFLOP/s, same operands."""
    shapes = [(256, 64, 256), (256, 256, 65), (1024, 64, 1024), (1024, 1024, 65)]
    if not cfg.quick:
        shapes += [(4096, 64, 4096), (4096, 4096, 65)]
    names = ["library", *peers]
    run.header(
        f"matrix products, GFLOP/s ({cfg.peer_threads} thread(s) each; library: numpy's BLAS)",
        "m x k x n",
        *(f"{k} {p}" for p in ("float64", "float32") for k in names),
    )
    rng = np.random.default_rng(0)
    for m, k, n in shapes:
        cells = []
        for dtype in (np.float64, np.float32):
            a = rng.standard_normal((m, k)).astype(dtype)
            b = rng.standard_normal((k, n)).astype(dtype)
            fns: dict[str, Callable[[], object]] = {"library": lambda a=a, b=b: np.dot(a, b)}
            if "torch" in peers:
                ta, tb = peers["torch"].from_numpy(a), peers["torch"].from_numpy(b)
                fns["torch"] = lambda ta=ta, tb=tb: ta @ tb
            if "jax" in peers:
                jax = peers["jax"]
                ja, jb, dot = jax.numpy.asarray(a), jax.numpy.asarray(b), jax.jit(jax.numpy.dot)
                fns["jax"] = lambda ja=ja, jb=jb, dot=dot: dot(ja, jb).block_until_ready()
            med, _ = _spread(fns, max(5, int(2e9 / (m * k * n))), cfg.peer_rounds)
            cells += [f"{2 * m * k * n / med[name] / 1e9:.0f}" for name in names]
        run.row(f"{m} x {k} x {n}", *cells)


def case_backends(peers, cfg) -> None:
    """The library's own torch and JAX backends (``Softmax.velocity`` on a tensor / a JAX array)
    against the same library's kernel called directly: torch's ``scaled_dot_product_attention``
    on 4-D inputs (tensors in and out) and ``jax.jit`` of the softmax expression. Ratio =
    backend time / peer time (> 1: the backend costs more than calling the library by hand)."""
    run.header(
        f"softmax velocity through the backends ({cfg.peer_threads} thread(s))",
        "n, d, dtype",
        *(f"{p} backend" for p in peers),
        *(f"{p} by hand" for p in peers),
        *(f"ratio {p} (median, range)" for p in peers),
    )
    for dtype in (np.float64, np.float32):
        for d in (16, 64):
            for n in (1024, 4096):
                rng = np.random.default_rng(0)
                X = rng.standard_normal((n, d)) / np.sqrt(np.sqrt(d))
                A = rng.standard_normal((d, d)) / np.sqrt(d)
                V = rng.standard_normal((d, d)) / np.sqrt(d)
                field = att.Softmax(A, V)
                ref = field.velocity(X)
                rtol = RTOL64 if dtype == np.float64 else RTOL32
                hand = softmax_peers(peers, X, A, V, dtype)
                fns: dict[str, Callable[[], object]] = {}
                if "torch" in peers:
                    torch = peers["torch"]
                    no_grad, sdpa = torch.no_grad, torch.nn.functional.scaled_dot_product_attention
                    tX = torch.from_numpy(X.astype(dtype))
                    tA, tV = (torch.from_numpy(M.astype(dtype)) for M in (A, V))

                    def torch_backend(f=field, tX=tX, no_grad=no_grad):
                        with no_grad():
                            return f.velocity(tX)

                    def torch_hand(tX=tX, tA=tA, tV=tV, no_grad=no_grad, sdpa=sdpa):
                        with no_grad():  # 4-D inputs, tensors out: no conversion to numpy
                            q, k, v = (M[None, None] for M in (tX @ tA.T, tX, tX @ tV.T))
                            return sdpa(q, k, v, scale=1.0)[0, 0]

                    check("torch backend", torch_backend().numpy(), ref, rtol)
                    check("torch by hand", torch_hand().numpy(), ref, rtol)
                    fns["torch backend"] = torch_backend
                    fns["torch by hand"] = torch_hand
                if "jax" in hand:
                    jX = peers["jax"].numpy.asarray(X.astype(dtype))

                    def jax_backend(f=field, jX=jX):
                        return f.velocity(jX).block_until_ready()

                    check("jax backend", np.asarray(jax_backend()), ref, rtol)
                    fns["jax backend"] = jax_backend
                    fns["jax by hand"] = hand["jax"]
                rounds = [
                    interleaved(fns, cfg.peer_repeats, r * len(fns) // cfg.peer_rounds)
                    for r in range(cfg.peer_rounds)
                ]
                med = {k: float(np.median([r[k] for r in rounds])) for k in fns}
                cells = {
                    p: [r[f"{p} backend"] / r[f"{p} by hand"] for r in rounds]
                    for p in peers
                    if f"{p} backend" in fns
                }
                run.row(
                    f"{n}, {d}, {np.dtype(dtype).name}",
                    *(f"{med[f'{p} backend'] * 1e3:.2f} ms" if p in cells else "-" for p in peers),
                    *(f"{med[f'{p} by hand'] * 1e3:.2f} ms" if p in cells else "-" for p in peers),
                    *(_ratio_cell(cells[p]) if p in cells else "-" for p in peers),
                )


def case_call(peers, cfg) -> None:
    """What a call of the torch backend costs beside torch's fused attention: the time of
    ``Softmax.velocity`` on a tensor with the kernel replaced by its stored result
    (``_array_api._torch_sdpa``), against the two products a hand-written call makes before the
    kernel. The difference is the cost of the checks and of the Python around them, measured
    without the millisecond kernel whose own spread hides it in ``backends``."""
    if "torch" not in peers:
        print("\n### call\n\ntorch is not installed: skipped", flush=True)
        return
    torch = peers["torch"]
    from token_dynamics.attention import _array_api

    run.header(
        f"torch backend: the cost of a call beside the kernel ({cfg.peer_threads} thread(s))",
        "n, d, dtype",
        "backend without the kernel",
        "products by hand",
        "cost of the call",
        "fraction of the fused call",
    )
    kernel = _array_api._torch_sdpa
    try:
        for dtype in (np.float64, np.float32):
            for d in (16, 64):
                for n in (1024, 4096):
                    rng = np.random.default_rng(0)
                    X = rng.standard_normal((n, d)) / np.sqrt(np.sqrt(d))
                    A = rng.standard_normal((d, d)) / np.sqrt(d)
                    V = rng.standard_normal((d, d)) / np.sqrt(d)
                    field = att.Softmax(A, V)
                    tX = torch.from_numpy(X.astype(dtype))
                    tA, tV = (torch.from_numpy(M.astype(dtype)) for M in (A, V))
                    _array_api._torch_sdpa = kernel
                    fused = {"fused": lambda f=field, tX=tX: f.velocity(tX)}
                    whole = interleaved(fused, cfg.peer_repeats)["fused"]
                    stored = field.velocity(tX)
                    _array_api._torch_sdpa = lambda F, K, R, out=stored: out
                    fns = {
                        "backend": lambda f=field, tX=tX: f.velocity(tX),
                        "products": lambda tX=tX, tA=tA, tV=tV: (tX @ tA.T, tX @ tV.T),
                    }
                    times = [interleaved(fns, 20 * cfg.peer_repeats) for _ in range(3)]
                    med = {k: float(np.median([t[k] for t in times])) for k in fns}
                    cost = med["backend"] - med["products"]
                    run.row(
                        f"{n}, {d}, {np.dtype(dtype).name}",
                        f"{med['backend'] * 1e6:.0f} us",
                        f"{med['products'] * 1e6:.0f} us",
                        f"{cost * 1e6:.0f} us",
                        f"{cost / whole:.3f}",
                    )
    finally:
        _array_api._torch_sdpa = kernel


def _variant_fields(d: int, rng: np.random.Generator) -> dict[str, att.AttentionField]:
    """The variants other than softmax and linear, on ``d``-dimensional tokens."""
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    V = rng.standard_normal((d, d)) / np.sqrt(d)
    S = (A + A.T) / 2
    return {
        "hardmax": att.Hardmax(A, V),
        "l2": att.L2(A, np.eye(d), V),
        "sigmoid": att.Sigmoid(A, V, b=-1.0),
        "unnormalised": att.Unnormalised(A, V),
        "multi-head (2)": att.MultiHead((att.Softmax(A, V), att.Softmax(S, V))),
        "causal": att.Causal(A, V),
        "sinkhorn (symmetric A)": att.Sinkhorn(S, V),
    }


def case_variants(peers, cfg) -> None:
    """The other variants through the backends: each field's ``velocity`` on a torch tensor and
    on a JAX array against its numpy path, float64. Ratio = backend time / numpy time (> 1: the
    generic array-API formula, or the library's elementwise kernels, cost more on this CPU than
    the numpy kernels; no fused kernel exists for these formulas)."""
    run.header(
        f"other variants through the backends, d = 16, float64 ({cfg.peer_threads} thread(s))",
        "variant, n",
        "numpy",
        *(f"{p} backend" for p in peers),
        *(f"ratio {p} / numpy (median, range)" for p in peers),
    )
    d = 16
    for n in cfg.peer_sizes[:2]:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, d)) / np.sqrt(np.sqrt(d))
        for name, field in _variant_fields(d, rng).items():
            Z = att.with_positions(X) if name == "causal" else X
            ref = field.velocity(Z)
            fns: dict[str, Callable[[], object]] = {"numpy": lambda f=field, Z=Z: f.velocity(Z)}
            if "torch" in peers:
                tZ = peers["torch"].from_numpy(Z)
                check(f"torch {name}", field.velocity(tZ).numpy(), ref, RTOL64)
                fns["torch"] = lambda f=field, tZ=tZ: f.velocity(tZ)
            if "jax" in peers:
                jZ = peers["jax"].numpy.asarray(Z)
                check(f"jax {name}", np.asarray(field.velocity(jZ)), ref, RTOL64)
                fns["jax"] = lambda f=field, jZ=jZ: f.velocity(jZ).block_until_ready()
            rounds = [
                interleaved(fns, cfg.peer_repeats, r * len(fns) // cfg.peer_rounds)
                for r in range(cfg.peer_rounds)
            ]
            med = {k: float(np.median([r[k] for r in rounds])) for k in fns}
            ratios = {p: [r[p] / r["numpy"] for r in rounds] for p in peers if p in fns}
            run.row(
                f"{name}, {n}",
                f"{med['numpy'] * 1e3:.1f} ms",
                *(f"{med[p] * 1e3:.1f} ms" if p in fns else "-" for p in peers),
                *(_ratio_cell(ratios[p]) if p in ratios else "-" for p in peers),
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--workloads",
        default="softmax,ode,mlp,gemm",
        help="comma-separated: softmax, ode, mlp, gemm, backends, variants, call",
    )
    cfg = parser.parse_args(argv)
    cfg.peer_threads = int(os.environ["TOKEN_DYNAMICS_THREADS"])
    cfg.peer_sizes = (1024, 4096) if cfg.quick else (1024, 4096, 16384)
    cfg.peer_repeats = 3 if cfg.quick else 5
    cfg.peer_rounds = 3
    cfg.peer_steps = 100 if cfg.quick else 1000
    cfg.peer_mlp = 2048 if cfg.quick else 4096
    peers = _load_peers()
    versions = [f"numpy {np.__version__}"]
    versions += [f"{k} {m.__version__}" for k, m in peers.items()]
    threads = [f"library {att._kernels.THREADS}"]
    threads += [f"OPENBLAS/OMP/MKL_NUM_THREADS {os.environ['OPENBLAS_NUM_THREADS']}"]
    if "torch" in peers:
        threads.append(f"torch {peers['torch'].get_num_threads()}")
    if "jax" in peers:
        threads.append(f"XLA_FLAGS '{os.environ['XLA_FLAGS']}'")
    print(f"peers: {', '.join(versions)}; threads: {', '.join(threads)}", flush=True)
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    workloads = {
        "softmax": case_softmax,
        "ode": case_ode,
        "mlp": case_mlp,
        "gemm": case_gemm,
        "backends": case_backends,
        "variants": case_variants,
        "call": case_call,
    }
    for name in cfg.workloads.split(","):
        workloads[name](peers, cfg)
    print(f"\nload average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    main()
