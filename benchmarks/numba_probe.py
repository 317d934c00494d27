"""Would a compiled kernel earn its weight? A fused numba kernel against the library's softmax.

Not part of ``make bench`` and numba is not a dependency: run it in a scratch environment::

    python -m venv /tmp/nb
    /tmp/nb/bin/pip install numba==0.68.1 numpy==2.4.6 scipy pot
    /tmp/nb/bin/pip install --no-deps -e .
    /tmp/nb/bin/python benchmarks/numba_probe.py

The kernel is the whole velocity in one pass per query row (score, exponential, weighted sums:
no slab in memory), parallel over rows with ``prange`` (no GIL), with only the reassociation
and contraction of floating point allowed (so the sums vectorise), once with libm's ``exp`` and
once with an exponential written out (range reduction, polynomial, table of powers of two) that
the compiler may vectorise. It prints wall times on one and two threads next to the library's,
and the agreement with the library.
"""

from __future__ import annotations

import math
import time

import numba
import numpy as np
from numba import njit, prange

from token_dynamics.attention import Softmax, _softmax

FASTMATH = {"reassoc", "contract"}
LOG2E, LN2_HI, LN2_LO = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
#: 2^k for k = -1022 .. 1023, so the hand-written exponential needs no bit manipulation
POW2 = np.ldexp(1.0, np.arange(-1022, 1024))
#: Taylor coefficients 1/12!, ..., 1/0! of e^r on |r| <= ln 2 / 2 (truncation below 2e-16)
TAYLOR = tuple(1.0 / math.factorial(i) for i in range(12, -1, -1))


@njit(inline="always", fastmath=FASTMATH)
def poly_exp(x, pow2):  # pragma: no cover - compiled
    """e^x for -708 < x < 709: x = k ln 2 + r (Cody-Waite), e^r by Horner, 2^k from a table."""
    k = math.floor(x * LOG2E + 0.5)
    r = (x - k * LN2_HI) - k * LN2_LO
    p = TAYLOR[0]
    for c in TAYLOR[1:]:
        p = p * r + c
    return p * pow2[int(k) + 1022]


@njit(parallel=True, fastmath=FASTMATH, cache=False)
def fused_rows_poly(F, GT, RT, out, pow2):  # pragma: no cover - compiled
    """As :func:`fused_rows`, with the exponential written out so that the loop can vectorise."""
    for i in prange(F.shape[0]):
        f0, f1, f2 = F[i, 0], F[i, 1], F[i, 2]
        a0 = a1 = a2 = 0.0
        for j in range(GT.shape[1]):
            e = poly_exp(max(f0 * GT[0, j] + f1 * GT[1, j] + f2 * GT[2, j], -700.0), pow2)
            a0 += e * RT[0, j]
            a1 += e * RT[1, j]
            a2 += e * RT[2, j]
        out[i, 0], out[i, 1], out[i, 2] = a0, a1, a2


@njit(parallel=True, fastmath=FASTMATH, cache=False)
def fused_rows(F, GT, RT, out):  # pragma: no cover - compiled
    """``out[i] = sum_j exp(F[i] . GT[:, j]) RT[:, j]`` for three inner and three value columns."""
    for i in prange(F.shape[0]):
        f0, f1, f2 = F[i, 0], F[i, 1], F[i, 2]
        a0 = a1 = a2 = 0.0
        for j in range(GT.shape[1]):
            e = math.exp(f0 * GT[0, j] + f1 * GT[1, j] + f2 * GT[2, j])
            a0 += e * RT[0, j]
            a1 += e * RT[1, j]
            a2 += e * RT[2, j]
        out[i, 0], out[i, 1], out[i, 2] = a0, a1, a2


def median_wall(fn, repeats: int = 5) -> float:
    fn()
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return float(np.median(walls))


def main(n: int = 16384) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2))
    field = Softmax(np.eye(2), np.eye(2))
    L, *_ = _softmax.softmax_shift(X, X, None)  # the library's folded shift, reused as is
    F = np.column_stack([X, -L])
    GT = np.ascontiguousarray(np.column_stack([X, np.ones(n)]).T)
    RT = np.ascontiguousarray(np.column_stack([X, np.ones(n)]).T)
    out = np.empty((n, 3))
    print(f"numba {numba.__version__}, SVML in use: {numba.config.USING_SVML}, n = {n}, d = 2")
    ref = field.velocity(X)
    print(f"library (numpy, row slabs): {median_wall(lambda: field.velocity(X)):.3f} s")
    kernels = {
        "libm exp": lambda: fused_rows(F, GT, RT, out),
        "polynomial exp": lambda: fused_rows_poly(F, GT, RT, out, POW2),
    }
    for name, kernel in kernels.items():
        for threads in (1, 2):
            numba.set_num_threads(threads)
            print(f"fused kernel, {name}, {threads} thread(s): {median_wall(kernel):.3f} s")
        v = out[:, :2] / out[:, 2:]
        print(f"  max rel. diff. to the library: {np.abs(v - ref).max() / np.abs(ref).max():.1e}")
    x = np.linspace(-700.0, 300.0, 1_000_001)
    y = np.array([poly_exp(v, POW2) for v in x[::1000]])
    err = np.abs(y / np.exp(x[::1000]) - 1).max()
    print(f"polynomial exp alone (compiled without the sums): max rel. error {err:.1e}")


if __name__ == "__main__":
    main()
