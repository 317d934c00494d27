"""The softmax velocity on arrays of any array-API library (torch, JAX, CuPy; private).

One generic formula written against the caller's namespace ``xp``, blocked over the queries so
that at most :data:`BLOCK_ENTRIES` scores exist at once, with the stable (max-shifted) softmax of
each row over the full key set; and two named fast paths, torch's
``scaled_dot_product_attention`` and ``jax.nn.dot_product_attention``, taken for uniform token
weights (the fused kernels have no per-key weight); JAX's only below float64, since it takes
the softmax in float32 (2e-7 from the float64 result, measured), and only off the CPU, where
the jitted generic formula was faster. JAX arrays always run jitted. The numpy path (``_kernels``)
is not used here: numpy arrays never reach this module.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from .._backend import library

__all__ = ["BLOCK_ENTRIES", "softmax_velocity"]

#: Most scores formed at once by the generic path: 2**22 entries (32 MiB in float64), bounded
#: whatever the number of tokens, and large enough that a GPU runs each block at its rate.
BLOCK_ENTRIES = 2**22


def softmax_velocity(
    xp: ModuleType,
    F: Any,
    K: Any,
    R: Any,
    log_w: Any | None,
    *,
    fast: bool = True,
) -> Any:
    r"""Rows :math:`\sum_j P_{ij} R_j` with :math:`P_{ij} \propto w_j e^{\langle F_i, K_j\rangle}`.

    Parameters
    ----------
    xp : namespace
        The array-API namespace of the arrays.
    F : array, shape (m, d)
        Queries (already multiplied by ``A`` and ``beta``).
    K : array, shape (n, d)
        Keys.
    R : array, shape (n, d)
        Values.
    log_w : array, shape (n,), or None
        Logarithms of the key weights; ``None`` for uniform weights (then a fused kernel is used
        where the library has one and ``fast`` is true).
    fast : bool
        Whether to take a library's fused attention kernel when there is one.

    Returns
    -------
    array, shape (m, d), of the namespace and dtype of ``F``.

    Examples
    --------
    >>> import numpy as np
    >>> import array_api_strict as xp  # doctest: +SKIP
    >>> F = K = R = xp.asarray(np.eye(2))  # doctest: +SKIP
    >>> softmax_velocity(xp, F, K, R, None)  # doctest: +SKIP
    """
    lib = library(xp)
    if lib == "jax":  # compiled once per shape: eager JAX dispatches each operation alone
        # jax.nn.dot_product_attention takes the softmax in float32, and on the CPU it ran
        # 2.7-6x the time of the jitted formula (benchmarks/README.md): on accelerators only
        fused = fast and log_w is None and F.dtype != xp.float64 and _platform(F) != "cpu"
        return _jax_jitted(fused)(F, K, R, log_w)
    # torch's fused CPU kernel is exact in float64 too (1.6e-15 from numpy, measured); on a GPU
    # its float64 fallback forms the whole score matrix (68 GiB at n = 65,536): blocks instead
    if fast and log_w is None and lib == "torch" and (F.dtype != xp.float64 or _on_cpu(F)):
        return _torch_sdpa(F, K, R)
    return generic_softmax_velocity(xp, F, K, R, log_w)


def generic_softmax_velocity(xp: ModuleType, F: Any, K: Any, R: Any, log_w: Any | None) -> Any:
    r"""The array-API formula, in blocks of query rows:

    .. math::

        S = F_b K^\top + \log w, \quad m = \max_j S_{\cdot j},\quad
        E = e^{S - m}, \quad \mathrm{out}_b = \frac{E R}{E \mathbf 1}.
    """
    m, n = F.shape[0], K.shape[0]
    step = max(1, BLOCK_ENTRIES // max(n, 1))
    KT = xp.matrix_transpose(K)
    blocks = []
    for start in range(0, m, step):
        S = xp.matmul(F[start : min(start + step, m), ...], KT)
        if log_w is not None:
            S = S + log_w
        E = xp.exp(S - xp.max(S, axis=1, keepdims=True))
        blocks.append(xp.matmul(E, R) / xp.sum(E, axis=1, keepdims=True))
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


def _torch_sdpa(F: Any, K: Any, R: Any) -> Any:
    """torch's fused attention on 4-D inputs, with the scale 1 (``F`` carries ``A`` and beta)."""
    import torch.nn.functional as tnf

    out = tnf.scaled_dot_product_attention(F[None, None], K[None, None], R[None, None], scale=1.0)
    return out[0, 0]


def _on_cpu(a: Any) -> bool:
    """Whether a torch tensor lives in the host's memory."""
    return str(a.device.type) == "cpu"


def _platform(a: Any) -> str:
    """``"cpu"``, ``"gpu"``, ``"tpu"``: the platform of a JAX array's device."""
    return str(next(iter(a.devices())).platform)


@functools.cache
def _jax_jitted(fused: bool) -> Any:
    """``jax.jit`` of the fused kernel (``fused``) or of the generic formula in ``jax.numpy``
    (measured: eager, 2-6x the time of ``jax.jit`` of the same expression at n = 1024-4096)."""
    import jax
    import jax.numpy as jnp

    def velocity(F: Any, K: Any, R: Any, log_w: Any | None) -> Any:
        if fused:
            return _jax_attention(F, K, R)
        return generic_softmax_velocity(jnp, F, K, R, log_w)

    return jax.jit(velocity)


def _jax_attention(F: Any, K: Any, R: Any) -> Any:
    """``jax.nn.dot_product_attention`` on (batch, length, heads, dim) inputs, scale 1."""
    import jax

    out = jax.nn.dot_product_attention(
        F[None, :, None], K[None, :, None], R[None, :, None], scale=1.0
    )
    return out[0, :, 0]
