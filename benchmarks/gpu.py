"""The library on a GPU: correctness against the numpy path first, then speed and memory as
ratios to torch's fused attention measured in the same run (issue 30).

One prepared script for a lent GPU machine (it must finish inside ``--budget`` seconds, 540 by
default: every step checks the clock and what is left is reported as not run, never dropped)::

    python benchmarks/gpu.py --out gpu.json           # on the GPU machine
    python benchmarks/gpu.py --smoke                  # anywhere: CPU devices, tiny sizes

Steps, in order:

1. **Correctness** on every device found (torch CUDA, JAX GPU, CuPy; with ``--smoke`` the CPU
   devices of torch and JAX): the softmax and linear velocities and an RK4 run against numpy in
   float64 (relative 1e-12: the same sums in another order) and float32 (relative
   ``RTOL32`` = 1e-4: unit round-off 6e-8 over the ~1e3 operations behind one output).
2. **Velocity** at n = 16,384 to 1,048,576, d = 16 and 64, float32 and float64: the library on
   torch tensors against ``scaled_dot_product_attention`` on 4-D inputs (the same maths: queries
   ``beta X A^T``, keys ``X``, values ``X V^T``, scale 1), and the peak memory of each
   (``torch.cuda.max_memory_allocated``). torch has no memory-bounded float64 kernel: its
   fallback forms the n x n matrix, so it is not run where that matrix would not fit in half the
   free memory (reported with the memory it would need).
3. **RK4**, 200 steps at n = 16,384, d = 64, float32: ``integrate`` against a hand-written loop of
   the same four stages over the fused kernel.
4. **The stochastic model** (``simulate``, finite width): on each torch device, first one run
   with the weights of every layer given (the same for numpy and torch, so the paths must agree:
   relative 1e-12 in float64), then the time of ``simulate`` on the device (weights drawn
   there) against numpy's at a small size (``STOCH``: 64 paths of N = 64 tokens, d = 16,
   m = 256, 50 layers, float64 and float32; with ``--smoke`` 4 paths of 16 tokens, 5 layers).

Results go to stdout as Markdown tables and, with ``--out``, to a JSON file; copy the tables and
the machine line into ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import token_dynamics as td

#: Relative agreement with numpy demanded in float64 (a reordering of the same sums) and float32.
RTOL64, RTOL32 = 1e-12, 1e-4
SIZES = (16_384, 65_536, 262_144, 1_048_576)
SMOKE_SIZES = (256, 1024)
DIMS = (16, 64)
RK4_STEPS = 200
#: The stochastic model's case: paths, tokens N, dimension d, width m, layers L.
STOCH = dict(paths=64, N=64, d=16, m=256, L=50)
SMOKE_STOCH = dict(paths=4, N=16, d=4, m=32, L=5)


class Clock:
    """The time left of the run's budget."""

    def __init__(self, budget: float) -> None:
        self.end = time.perf_counter() + budget

    def left(self) -> float:
        return self.end - time.perf_counter()


def _devices(smoke: bool) -> dict[str, tuple[Any, Any]]:
    """``name -> (to_device(numpy array), synchronise())`` for every array library found."""
    found: dict[str, tuple[Any, Any]] = {}
    try:
        import torch

        if torch.cuda.is_available() or smoke:
            dev = "cuda" if torch.cuda.is_available() else "cpu"
            sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
            found[f"torch-{dev}"] = (lambda a, dev=dev: torch.asarray(a, device=dev), sync)
    except ImportError:
        pass
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        if gpus or smoke:
            dev = gpus[0] if gpus else jax.devices("cpu")[0]
            found[f"jax-{dev.platform}"] = (
                lambda a, dev=dev: jax.device_put(a, dev),
                lambda: None,  # block_until_ready on the result instead
            )
    except ImportError:
        pass
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            found["cupy-cuda"] = (cupy.asarray, cupy.cuda.Device().synchronize)
    except Exception:  # no CuPy, or CuPy without a driver
        pass
    return found


def _to_numpy(a: Any) -> np.ndarray:
    if hasattr(a, "get"):  # CuPy
        return np.asarray(a.get())
    if hasattr(a, "detach"):  # torch
        return a.detach().cpu().numpy()
    return np.asarray(a)


def _ready(a: Any) -> Any:
    if hasattr(a, "block_until_ready"):
        a.block_until_ready()
    return a


def _problem(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    V = rng.standard_normal((d, d)) / np.sqrt(d)
    return X, A, V


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def correctness(devices: dict[str, tuple[Any, Any]]) -> list[dict[str, Any]]:
    """Softmax and linear velocities and an RK4 run on each device against numpy."""
    rows = []
    X, A, V = _problem(512, 16)
    times = np.linspace(0.0, 1.0, 3)
    for name, (put, _) in devices.items():
        for dtype, rtol in (("float64", RTOL64), ("float32", RTOL32)):
            Xd = put(X.astype(dtype))
            for label, field in (
                ("softmax velocity", td.Softmax(A, V, beta=2.0)),
                ("linear velocity", td.Linear(A, V)),
            ):
                ref = field.velocity(X.astype(dtype))
                err = _rel(_to_numpy(_ready(field.velocity(Xd))), ref.astype(float))
                rows.append(
                    dict(device=name, dtype=dtype, what=label, rel_error=err, ok=err <= rtol)
                )
            field = td.Softmax(A, V, beta=2.0)
            run = dict(method="rk4", dt=0.05, dtype=dtype)  # numpy tokens: float64 unless asked
            ref = td.integrate(field, X.astype(dtype), times, **run).final
            got = td.integrate(field, Xd, times, **run).final
            err = _rel(_to_numpy(_ready(got)), ref.astype(float))
            rows.append(
                dict(device=name, dtype=dtype, what="rk4, 20 steps", rel_error=err, ok=err <= rtol)
            )
    return rows


def _median_time(
    fn: Callable[[], Any], sync: Callable[[], None], clock: Clock, repeats: int = 5
) -> float:
    _ready(fn())  # warm-up: compilation, autotuning, allocator
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        _ready(fn())
        sync()
        samples.append(time.perf_counter() - start)
        if clock.left() < 0:
            break
    return statistics.median(samples)


def velocity(clock: Clock, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    """The library's softmax velocity on torch tensors against torch's fused attention."""
    import torch
    import torch.nn.functional as F

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    rows = []
    for n in sizes:
        for d in DIMS:
            for dtype in ("float32", "float64"):
                row: dict[str, Any] = dict(n=n, d=d, dtype=dtype)
                rows.append(row)
                if clock.left() < 30:
                    row["note"] = "not run: out of time"
                    continue
                X, A, V = _problem(n, d)
                tdtype = getattr(torch, dtype)
                Xt = torch.asarray(X, device=dev, dtype=tdtype)
                At = torch.asarray(A, device=dev, dtype=tdtype)
                Vt = torch.asarray(V, device=dev, dtype=tdtype)
                field = td.Softmax(A, V, beta=1.0)

                def library(field=field, Xt=Xt) -> Any:
                    return field.velocity(Xt)

                def fused(Xt=Xt, At=At, Vt=Vt) -> Any:
                    q, v = (Xt @ At.T)[None, None], (Xt @ Vt.T)[None, None]
                    return F.scaled_dot_product_attention(q, Xt[None, None], v, scale=1.0)[0, 0]

                if dev == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                row["library_s"] = _median_time(library, sync, clock)
                if dev == "cuda":
                    row["library_GiB"] = torch.cuda.max_memory_allocated() / 2**30
                dense_GiB = n * n * Xt.element_size() / 2**30
                free = torch.cuda.mem_get_info()[0] / 2**30 if dev == "cuda" else float("inf")
                if dtype == "float64" and dense_GiB > free / 2:
                    row["note"] = (
                        f"torch float64: no fused kernel; its fallback needs {dense_GiB:.0f} GiB"
                    )
                    continue
                if dev == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                row["torch_s"] = _median_time(fused, sync, clock)
                if dev == "cuda":
                    row["torch_GiB"] = torch.cuda.max_memory_allocated() / 2**30
                row["ratio"] = row["library_s"] / row["torch_s"]
                if n <= 65_536:  # the library's result against the fused one, where both exist
                    row["rel_diff"] = _rel(_to_numpy(library()), _to_numpy(fused()))
    return rows


def rk4(clock: Clock, n: int) -> list[dict[str, Any]]:
    """``integrate`` (RK4, fixed step) against a hand-written torch loop over the fused kernel."""
    import torch
    import torch.nn.functional as F

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if clock.left() < 60:
        return [dict(n=n, d=64, note="not run: out of time")]
    X, A, V = _problem(n, 64)
    Xt = torch.asarray(X, device=dev, dtype=torch.float32)
    At = torch.asarray(A, device=dev, dtype=torch.float32)
    Vt = torch.asarray(V, device=dev, dtype=torch.float32)
    field = td.Softmax(A, V, beta=1.0)
    dt, T = 0.01, 0.01 * RK4_STEPS

    def f(Y: Any) -> Any:
        q, v = (Y @ At.T)[None, None], (Y @ Vt.T)[None, None]
        return F.scaled_dot_product_attention(q, Y[None, None], v, scale=1.0)[0, 0]

    def loop() -> Any:
        Y = Xt
        for _ in range(RK4_STEPS):
            k1 = f(Y)
            k2 = f(Y + dt / 2 * k1)
            k3 = f(Y + dt / 2 * k2)
            k4 = f(Y + dt * k3)
            Y = Y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return Y

    def library() -> Any:
        return td.integrate(field, Xt, [0.0, T], method="rk4", dt=dt, dtype="float32").final

    row: dict[str, Any] = dict(n=n, d=64, dtype="float32", steps=RK4_STEPS)
    row["library_s"] = _median_time(library, sync, clock, repeats=3)
    row["loop_s"] = _median_time(loop, sync, clock, repeats=3)
    row["ratio"] = row["library_s"] / row["loop_s"]
    row["rel_diff"] = _rel(_to_numpy(library()), _to_numpy(loop()))
    return [row]


def stochastic(clock: Clock, case: dict[str, int]) -> list[dict[str, Any]]:
    """``simulate`` on torch: the numpy paths with given weights first, then the timings."""
    import torch

    from token_dynamics.stochastic import _array_api as stochastic_xp
    from token_dynamics.stochastic import _mlp

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    paths, N, d, m, L = (case[k] for k in ("paths", "N", "d", "m", "L"))
    noise = td.stochastic.MLPNoise("relu", width=m, sigma_U=0.1, sigma_W=0.1)
    model = td.stochastic.StochasticTransformer(noise, V=0.5 * np.eye(d))
    X = np.random.default_rng(0).standard_normal((N, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    run = dict(T=1.0, L=L, n_paths=paths, rng=0)
    # correctness: both paths on the same weights (numpy's draws, moved to the device)
    rng = np.random.default_rng(1)
    layers = [_mlp._draw_weights(noise, paths, d, rng) for _ in range(L)]
    draw_np, draw_xp = _mlp._draw_weights, stochastic_xp.draw_weights_xp
    it_np, it_xp = iter(layers), iter(layers)
    try:
        _mlp._draw_weights = lambda *a: next(it_np)
        stochastic_xp.draw_weights_xp = lambda xp, noise, p, d, normal, dt: tuple(
            torch.asarray(w, device=dev, dtype=dt) for w in next(it_xp)
        )
        ref = td.stochastic.simulate(model, X, **run).X
        got = td.stochastic.simulate(model, torch.asarray(X, device=dev), **run).X
    finally:
        _mlp._draw_weights, stochastic_xp.draw_weights_xp = draw_np, draw_xp
    err = _rel(_to_numpy(got), ref)
    rows: list[dict[str, Any]] = [
        dict(what="given weights", dtype="float64", rel_error=err, ok=err <= RTOL64, **case)
    ]
    if err > RTOL64:
        return rows
    for dtype in ("float64", "float32"):
        row: dict[str, Any] = dict(what="simulate", dtype=dtype, **case)
        rows.append(row)
        if clock.left() < 30:
            row["note"] = "not run: out of time"
            continue
        Xt = torch.asarray(X, device=dev, dtype=getattr(torch, dtype))
        row["numpy_s"] = _median_time(
            lambda dtype=dtype: td.stochastic.simulate(model, X, dtype=dtype, **run),
            lambda: None,
            clock,
            repeats=3,
        )
        row["torch_s"] = _median_time(
            lambda Xt=Xt, dtype=dtype: td.stochastic.simulate(model, Xt, dtype=dtype, **run).X,
            sync,
            clock,
            repeats=3,
        )
        row["speed-up"] = row["numpy_s"] / row["torch_s"]
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="CPU devices, tiny sizes")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for the whole run")
    parser.add_argument("--out", help="JSON file for the results")
    cfg = parser.parse_args(argv)
    clock = Clock(cfg.budget)
    devices = _devices(cfg.smoke)
    report: dict[str, Any] = dict(
        machine=f"{platform.node()}, {platform.processor() or platform.machine()}",
        python=sys.version.split()[0],
        devices=sorted(devices),
    )
    if not devices:
        print("no GPU found (torch CUDA, JAX GPU, CuPy); use --smoke to run on the CPU")
        return 2
    report["correctness"] = correctness(devices)
    print("## Correctness against numpy\n\n" + _table(report["correctness"]) + "\n")
    if not all(r["ok"] for r in report["correctness"]):
        print("a device disagrees with numpy: no timings (they would time a wrong answer)")
        status = 1
    elif any(name.startswith("torch") for name in devices):
        sizes = SMOKE_SIZES if cfg.smoke else SIZES
        report["velocity"] = velocity(clock, sizes)
        print("## Softmax velocity: library / torch fused\n\n" + _table(report["velocity"]) + "\n")
        report["rk4"] = rk4(clock, 128 if cfg.smoke else 16_384)
        print("## RK4: integrate / hand-written loop\n\n" + _table(report["rk4"]) + "\n")
        report["stochastic"] = stochastic(clock, SMOKE_STOCH if cfg.smoke else STOCH)
        print("## simulate: numpy / torch\n\n" + _table(report["stochastic"]) + "\n")
        status = 0 if all(r.get("ok", True) for r in report["stochastic"]) else 1
    else:
        print("torch not found: the timings compare against torch's fused attention; not run")
        report["stochastic"] = "not run: the stochastic case runs on torch"
        status = 0
    if cfg.out:
        with open(cfg.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
