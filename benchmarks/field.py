"""The infinite-width noise field at the tokens: the jittered Cholesky factor of before against
the exact sampler (plain Cholesky when tokens are apart, the nearest-neighbour tree otherwise).

    PYTHONPATH=src nice -n 10 python benchmarks/field.py

One draw of the field for ``paths`` paths of ``n`` tokens in dimension ``d``: spread tokens
(uniform on the sphere, the fast path) and clustered ones (every token within 1e-3 of one of
four centres, the tree), median of ``REPEATS`` draws, BLAS on one thread.
"""

from __future__ import annotations

import time

import numpy as np

from token_dynamics.attention import _kernels
from token_dynamics.stochastic import MLPNoise, _mlp

REPEATS = 30


def old_field(noise, Y, Z):
    """The sampler before: Cholesky of K + 1e-10 max(diag K) I."""
    K = _mlp._kernel_matrix(noise, Y)
    n = K.shape[-1]
    scale = np.max(np.diagonal(K, axis1=-2, axis2=-1), axis=-1)
    with _kernels.serial_blas():
        return np.linalg.cholesky(K + (1e-10 * scale)[..., None, None] * np.eye(n)) @ Z


def tokens(paths, n, d, clustered, rng):
    Y = rng.standard_normal((paths, n, d))
    if clustered:
        Y = Y[:, :4][:, np.arange(n) % 4] + 1e-3 * rng.standard_normal((paths, n, d))
    return Y / np.linalg.norm(Y, axis=-1, keepdims=True)


def clock(fn):
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def main() -> None:
    rng = np.random.default_rng(0)
    cols = ("activation", "paths", "n", "d", "tokens", "old ms", "new ms")
    print(" ".join(f"{c:>{w}}" for c, w in zip(cols, (10, 5, 3, 3, 9, 8, 8), strict=True)))
    for activation in ("relu", "tanh"):
        noise = MLPNoise(activation, width=None)
        for paths, n, d in ((30, 16, 5), (30, 16, 64), (30, 64, 5)):
            for clustered in (False, True):
                Y = tokens(paths, n, d, clustered, rng)
                Z = rng.standard_normal(Y.shape)
                _mlp._gaussian_field(noise, Y, Z)  # warm the kernel caches
                old = clock(lambda noise=noise, Y=Y, Z=Z: old_field(noise, Y, Z))
                new = clock(lambda noise=noise, Y=Y, Z=Z: _mlp._gaussian_field(noise, Y, Z))
                kind = "clustered" if clustered else "spread"
                print(f"{activation:>10} {paths:>5} {n:>3} {d:>3} {kind:>9} {old:8.2f} {new:8.2f}")


if __name__ == "__main__":
    main()
