"""The attention velocities on arrays of any array-API library (torch, JAX, CuPy; private).

One generic formula per kind of weight, written against the caller's namespace ``xp`` and
blocked over the queries so that at most :data:`BLOCK_ENTRIES` scores exist at once: the stable
(max-shifted) softmax of each row over the full key set (softmax, l2, Sinkhorn's extension),
its masked form (causal), the tie indicator of hardmax, the sigmoid, the unnormalised
exponential, and the row log-sum-exp of Sinkhorn's iterations. Under JAX each formula runs
``jax.jit``-compiled (:func:`run`). The softmax has two named fast paths, torch's
``scaled_dot_product_attention`` and ``jax.nn.dot_product_attention``, taken for uniform token
weights (the fused kernels have no per-key weight); JAX's only below float64, since it takes
the softmax in float32 (2e-7 from the float64 result, measured), and only off the CPU, where
the jitted generic formula was faster. JAX arrays always run jitted. The numpy path (``_kernels``)
is not used here: numpy arrays never reach this module.
"""

from __future__ import annotations

import functools
import math
from types import ModuleType
from typing import Any

from .._backend import library
from ._scale import SCORE_HEADROOM

__all__ = [
    "BLOCK_ENTRIES",
    "TORCH_CPU_BLOCK_ENTRIES",
    "exp_velocity",
    "hardmax_velocity",
    "log_sum_exp_rows",
    "masked_softmax_velocity",
    "max_rows",
    "queries_values",
    "query_blocks",
    "run",
    "scores_in_range",
    "sigmoid_velocity",
    "softmax_field",
    "softmax_velocity",
    "velocity_stats",
]

#: Most scores formed at once by the generic path: 2**22 entries (32 MiB in float64), bounded
#: whatever the number of tokens, and large enough that a GPU runs each block at its rate.
BLOCK_ENTRIES = 2**22

#: The same bound for torch on the CPU, whose operations each make a pass over the block (JAX's
#: jit fuses them): 2**20 scores (8 MiB in float64) stay nearer the cache between passes. At
#: n = 4096, d = 16, float64, one thread, the sigmoid, causal and l2 velocities took 266 / 342 /
#: 283 ms against 629 / 741 / 575 ms with 2**22 (benchmarks/README.md); JAX was slower with
#: smaller blocks.
TORCH_CPU_BLOCK_ENTRIES = 2**20


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
        return _jax_jitted(fast and _jax_fused(xp, F, log_w))(F, K, R, log_w)
    # torch's fused CPU kernel is exact in float64 too (1.6e-15 from numpy, measured); on a GPU
    # its float64 fallback forms the whole score matrix (68 GiB at n = 65,536): blocks instead
    if fast and log_w is None and lib == "torch" and (F.dtype != xp.float64 or _on_cpu(F)):
        return _torch_sdpa(F, K, R)
    return generic_softmax_velocity(xp, F, K, R, log_w)


def softmax_field(
    xp: ModuleType, Y: Any, X: Any, AT: Any, VT: Any, beta: float, log_w: Any | None
) -> tuple[Any, Any]:
    r"""The softmax attention velocity at the queries ``Y`` of the keys ``X``, with queries
    :math:`\beta Y A^\top` and values :math:`X V^\top` (``softmax_velocity``; ``AT`` and ``VT``
    the transposes of ``A`` and ``V``), and its
    ``velocity_stats``. Under JAX the products, the attention and the statistics are compiled
    as one function, read on the host in one transfer (eager, the products and the checks cost
    more than the attention itself at n = 1024, float32)."""
    if library(xp) == "jax":
        return _jax_field(_jax_fused(xp, Y, log_w), Y is X)(Y, X, AT, VT, beta, log_w)
    F, R = queries_values(xp, Y, X, AT, VT, beta)
    out = softmax_velocity(xp, F, X, R, log_w)
    return out, velocity_stats(xp, Y, X, out, Y is X)


def velocity_stats(xp: ModuleType, Y: Any, X: Any, out: Any, same: bool) -> Any:
    r"""What the checks of a velocity read on the host (``_base.checked_velocity``): the
    largest token norms :math:`\max_i |y_i|` and :math:`\max_j |x_j|` (``same``: ``Y`` is
    ``X``, one pass), NaN when a token is not, and the sum of the velocity's entries. A tuple
    of 0-d arrays (one ``float`` each is cheaper than a stacked array on torch's CPU); under
    JAX, inside a compiled function, one array of three (one transfer)."""
    x = xp.max(xp.linalg.vector_norm(X, axis=1))
    y = x if same else xp.max(xp.linalg.vector_norm(Y, axis=1))
    stats = (y, x, xp.sum(out))
    return xp.stack(stats) if library(xp) == "jax" else stats


def queries_values(
    xp: ModuleType, Y: Any, X: Any, AT: Any, VT: Any, beta: float
) -> tuple[Any, Any]:
    r"""The queries :math:`\beta Y A^\top` and the values :math:`X V^\top`, given the transposes
    ``AT`` and ``VT`` (``_base.xp_parameter(..., transpose=True)``; the operator ``@``: the
    namespaces' ``matmul`` checks type promotion, which costs more than a small product)."""
    F = Y @ AT
    if not (isinstance(beta, float) and beta == 1.0):  # under jax.jit beta is traced
        F = F * beta
    return F, X @ VT


def generic_softmax_velocity(xp: ModuleType, F: Any, K: Any, R: Any, log_w: Any | None) -> Any:
    r"""The array-API formula, in blocks of query rows:

    .. math::

        S = F_b K^\top + \log w, \quad m = \max_j S_{\cdot j},\quad
        E = e^{S - m}, \quad \mathrm{out}_b = \frac{E R}{E \mathbf 1}.
    """
    KT = xp.matrix_transpose(K)
    blocks = []
    for rows in query_blocks(xp, F, K):
        S = xp.matmul(F[rows, ...], KT)
        if log_w is not None:
            S = S + log_w
        E = xp.exp(S - xp.max(S, axis=1, keepdims=True))
        blocks.append(xp.matmul(E, R) / xp.sum(E, axis=1, keepdims=True))
    return _rows(xp, blocks)


def query_blocks(xp: ModuleType, F: Any, K: Any) -> list[slice]:
    """Slices of the query rows ``F`` against the keys ``K``, at least one row each, whose
    ``rows x n`` scores hold at most :data:`BLOCK_ENTRIES` entries, or
    :data:`TORCH_CPU_BLOCK_ENTRIES` for torch tensors in the host's memory."""
    entries = BLOCK_ENTRIES
    if library(xp) == "torch" and _on_cpu(F):
        entries = min(entries, TORCH_CPU_BLOCK_ENTRIES)
    m, n = F.shape[0], K.shape[0]
    step = max(1, entries // max(n, 1))
    return [slice(start, min(start + step, m)) for start in range(0, m, step)]


def _rows(xp: ModuleType, blocks: list[Any]) -> Any:
    """The blocks of rows as one array."""
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


def run(xp: ModuleType, formula: Any, *args: Any) -> Any:
    """``formula(xp, *args)``; under JAX compiled once per formula and shapes (``jax.jit``:
    eager JAX dispatches each operation alone, 2-6x the time at n = 1024-4096)."""
    if library(xp) == "jax":
        return _jax_compiled(formula)(*args)
    return formula(xp, *args)


@functools.cache
def _jax_compiled(formula: Any) -> Any:
    """``jax.jit`` of ``formula`` with ``jax.numpy`` as its namespace."""
    import jax
    import jax.numpy as jnp

    return jax.jit(functools.partial(formula, jnp))


def masked_softmax_velocity(
    xp: ModuleType, F: Any, K: Any, R: Any, log_w: Any | None, pq: Any, pk: Any
) -> Any:
    r"""The softmax velocity over the keys each query sees, :math:`p^k_j \le p^q_i`
    (causal attention); every query must see a key (the caller checks it):

    .. math::

        S_{ij} = \begin{cases} \langle F_i, K_j\rangle + \log w_j & p^k_j \le p^q_i \\
        -\infty & \text{otherwise,} \end{cases}\qquad
        \mathrm{out}_i = \frac{\sum_j e^{S_{ij} - m_i} R_j}{\sum_j e^{S_{ij} - m_i}}.

    ``pq`` (shape ``(m,)``) and ``pk`` (shape ``(n,)``) are the positions of queries and keys.
    """
    KT = xp.matrix_transpose(K)
    blocks = []
    for rows in query_blocks(xp, F, K):
        S = xp.matmul(F[rows, ...], KT)
        if log_w is not None:
            S = S + log_w
        seen = pk[None, :] <= pq[rows, None]
        S = xp.where(seen, S, xp.full_like(S, -math.inf))
        E = xp.exp(S - xp.max(S, axis=1, keepdims=True))
        blocks.append(xp.matmul(E, R) / xp.sum(E, axis=1, keepdims=True))
    return _rows(xp, blocks)


def hardmax_velocity(xp: ModuleType, F: Any, K: Any, R: Any, tol: Any) -> Any:
    r"""The average of the values over each query's tie set (hardmax attention):

    .. math::

        T_{ij} = \mathbf 1\{S_{ij} \ge m_i - \mathrm{tol}\max(1, |m_i|)\},\quad
        m_i = \max_j S_{ij},\quad S = F K^\top,\qquad
        \mathrm{out}_i = \frac{(T R)_{i, :-1}}{(T R)_{i, -1}},

    the last column of ``R`` holding the key weights and the others the weighted values.
    """
    KT = xp.matrix_transpose(K)
    blocks = []
    for rows in query_blocks(xp, F, K):
        S = xp.matmul(F[rows, ...], KT)
        m = xp.max(S, axis=1, keepdims=True)
        T = xp.astype(S >= m - tol * xp.clip(xp.abs(m), min=1.0), S.dtype)
        sums = xp.matmul(T, R)
        blocks.append(sums[:, :-1] / sums[:, -1:])
    return _rows(xp, blocks)


def sigmoid_velocity(xp: ModuleType, F: Any, K: Any, R: Any, b: Any) -> Any:
    r"""Rows :math:`\sum_j \sigma(\langle F_i, K_j\rangle + b) R_j`, with
    :math:`\sigma(u) = 1/(1 + e^{-u})` (``R`` carries the key weights); :math:`e^{-u}`
    overflows to ``inf`` for :math:`u < -709`, of sigmoid 0, as it should. The sign and the bias
    ride in the product, :math:`[-F, -b] [K, 1]^\top = -(S + b)`, which goes straight to the
    exponential (as on the numpy path): three passes over each block of scores, not five."""
    Fn = xp.concat([-F, xp.full_like(F[:, :1], -b)], axis=1)
    KT = xp.matrix_transpose(xp.concat([K, xp.ones_like(K[:, :1])], axis=1))
    blocks = [
        xp.matmul(1.0 / (1.0 + xp.exp(xp.matmul(Fn[rows, ...], KT))), R)
        for rows in query_blocks(xp, F, K)
    ]
    return _rows(xp, blocks)


def exp_velocity(xp: ModuleType, F: Any, K: Any, R: Any) -> Any:
    r"""Rows :math:`\sum_j e^{\langle F_i, K_j\rangle} R_j` (unnormalised attention; ``R``
    carries the key weights). An exponential beyond the float range gives ``inf``: the caller
    reports it."""
    KT = xp.matrix_transpose(K)
    blocks = [xp.matmul(xp.exp(xp.matmul(F[rows, ...], KT)), R) for rows in query_blocks(xp, F, K)]
    return _rows(xp, blocks)


def log_sum_exp_rows(xp: ModuleType, F: Any, K: Any, bias: Any) -> Any:
    r"""Row log-sum-exp :math:`\log \sum_j e^{\langle F_i, K_j\rangle + c_j}` of the scores
    with the key biases ``c`` (shape ``(n,)``), shifted by each row's maximum (Sinkhorn's
    updates)."""
    KT = xp.matrix_transpose(K)
    blocks = []
    for rows in query_blocks(xp, F, K):
        S = xp.matmul(F[rows, ...], KT) + bias
        m = xp.max(S, axis=1, keepdims=True)
        blocks.append(m[:, 0] + xp.log(xp.sum(xp.exp(S - m), axis=1)))
    return _rows(xp, blocks)


def plan_sums(xp: ModuleType, F: Any, K: Any, row_bias: Any, col_bias: Any) -> tuple[Any, Any]:
    r"""Row and column sums of :math:`e^{\langle F_i, K_j\rangle + r_i + c_j}` with the biases
    ``r`` (shape ``(m,)``) and ``c`` (shape ``(n,)``), in query blocks (a Sinkhorn plan's
    marginals)."""
    KT = xp.matrix_transpose(K)
    rows, cols = [], xp.zeros_like(col_bias)
    for b in query_blocks(xp, F, K):
        P = xp.exp(xp.matmul(F[b, ...], KT) + row_bias[b, None] + col_bias)
        rows.append(xp.sum(P, axis=1))
        cols = cols + xp.sum(P, axis=0)
    return _rows(xp, rows), cols


def scores_in_range(xp: ModuleType, F: Any, K: Any, bias: Any | None = None) -> Any:
    r"""Whether no score :math:`\langle F_i, K_j\rangle + c_j` nor any partial sum of it can
    overflow (a 0-d boolean array): by Cauchy-Schwarz each lies within
    :math:`\max_i |F_i| \max_j |K_j| + \max_j |c_j|`, which must stay below the largest float
    divided by ``2**SCORE_HEADROOM`` (``_scale``). The array path does not rescale such scores
    as the numpy path does, and a score that overflows may come out as ``inf`` of either sign,
    which a sigmoid or a hardmax would turn into a finite, wrong weight."""
    f = xp.max(xp.linalg.vector_norm(F, axis=1))
    k = xp.max(xp.linalg.vector_norm(K, axis=1))
    reach = f * k if bias is None else f * k + xp.max(xp.abs(bias))
    return reach <= xp.finfo(F.dtype).max / 2.0**SCORE_HEADROOM


def max_rows(xp: ModuleType, F: Any, K: Any) -> Any:
    r"""Row maxima :math:`\max_j \langle F_i, K_j\rangle` of the scores, in query blocks."""
    KT = xp.matrix_transpose(K)
    blocks = [xp.max(xp.matmul(F[rows, ...], KT), axis=1) for rows in query_blocks(xp, F, K)]
    return _rows(xp, blocks)


def _torch_sdpa(F: Any, K: Any, R: Any) -> Any:
    """torch's fused attention on 4-D inputs, with the scale 1 (``F`` carries ``A`` and beta)."""
    import torch.nn.functional as tnf

    (m, d), (n, e) = F.shape, R.shape  # expand and reshape: views, cheaper than indexing
    out = tnf.scaled_dot_product_attention(
        F.expand(1, 1, m, d), K.expand(1, 1, n, d), R.expand(1, 1, n, e), scale=1.0
    )
    return out.reshape(m, e)


def _on_cpu(a: Any) -> bool:
    """Whether a torch tensor lives in the host's memory."""
    return str(a.device.type) == "cpu"


def _platform(a: Any) -> str:
    """``"cpu"``, ``"gpu"``, ``"tpu"``: the platform of a JAX array's device."""
    return str(next(iter(a.devices())).platform)


def _jax_fused(xp: ModuleType, F: Any, log_w: Any | None) -> bool:
    """Whether JAX's fused attention computes the softmax velocity of the queries ``F``:
    uniform weights, below float64, off the CPU. ``jax.nn.dot_product_attention`` takes the
    softmax in float32, and on the CPU it ran 2.7-6x the time of the jitted formula
    (benchmarks/README.md)."""
    return log_w is None and F.dtype != xp.float64 and _platform(F) != "cpu"


def _jax_velocity(fused: bool, F: Any, K: Any, R: Any, log_w: Any | None) -> Any:
    """The softmax velocity in ``jax.numpy``: the fused kernel (``fused``) or the formula."""
    import jax.numpy as jnp

    if fused:
        return _jax_attention(F, K, R)
    return generic_softmax_velocity(jnp, F, K, R, log_w)


@functools.cache
def _jax_jitted(fused: bool) -> Any:
    """``jax.jit`` of ``_jax_velocity`` (measured: eager, 2-6x the time of ``jax.jit`` of the
    same expression at n = 1024-4096)."""
    import jax

    return jax.jit(functools.partial(_jax_velocity, fused))


@functools.cache
def _jax_field(fused: bool, same: bool) -> Any:
    """``jax.jit`` of ``softmax_field``'s computation in ``jax.numpy`` (``same``: the queries
    are the keys)."""
    import jax
    import jax.numpy as jnp

    def field(Y: Any, X: Any, AT: Any, VT: Any, beta: Any, log_w: Any | None) -> Any:
        F, R = queries_values(jnp, Y, X, AT, VT, beta)
        out = _jax_velocity(fused, F, X, R, log_w)
        return out, velocity_stats(jnp, Y, X, out, same)

    return jax.jit(field)


def _jax_attention(F: Any, K: Any, R: Any) -> Any:
    """``jax.nn.dot_product_attention`` on (batch, length, heads, dim) inputs, scale 1."""
    import jax

    out = jax.nn.dot_product_attention(
        F[None, :, None], K[None, :, None], R[None, :, None], scale=1.0
    )
    return out[0, :, 0]
