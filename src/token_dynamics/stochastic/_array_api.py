r"""The model (1.1) with finite-width random MLPs on arrays of any array-API library (private).

The array path of :func:`~token_dynamics.stochastic.simulate` and :meth:`MLPNoise.sample`
for torch, JAX, CuPy or array-api-strict arrays: every layer (attention sub-layer,
normalisation, random MLP) runs in the caller's namespace and on its device, and the weights
:math:`U, b_U, W, b_W` are drawn there by the library's own generator
(``_backend.device_normal``). The formulas are those of the numpy path (``_model``, ``_mlp``),
in groups of paths and blocks of hidden units so that at most
:data:`~token_dynamics.attention._array_api.BLOCK_ENTRIES` scores or hidden activations exist
at once. The infinite-width field (the exact tree sampler) stays on numpy: it is refused here
by name (:func:`gaussian_field_refusal`).
"""

from __future__ import annotations

import functools
import itertools
import math
from types import ModuleType
from typing import Any

import numpy as np

from .._backend import all_finite, device_normal, erf, float_dtype, namespace, to_namespace
from .._validation import check_bool, check_int, check_positive, sphere_tol
from ..attention._array_api import BLOCK_ENTRIES, run, softmax_velocity

__all__ = [
    "as_initial_xp",
    "attention_drift_xp",
    "draw_weights_xp",
    "gaussian_field_refusal",
    "mlp_xp",
    "sample_xp",
    "simulate_xp",
]


def gaussian_field_refusal(a: Any, name: str, what: str, *, finite_width: bool = True) -> TypeError:
    """The refusal of the infinite-width field on a foreign array ``a`` (argument ``name``);
    ``finite_width``: whether a finite width would run on the array's device instead."""
    kind = f"{type(a).__module__}.{type(a).__name__}"
    other = ", or a finite width, MLPNoise(width=m), to stay on the array's device"
    return TypeError(
        f"`{name}` is a {kind}: {what} the infinite-width Gaussian field, whose exact sampler "
        f"runs on numpy arrays only; pass `np.asarray({name})` (`{name}.cpu().numpy()` for a "
        f"torch tensor){other if finite_width else ''}."
    )


def as_initial_xp(xp: ModuleType, X0: Any, paths: int, dtype: Any, name: str = "X0") -> Any:
    """Tokens ``(n, d)`` (the same for every path) or ``(paths, n, d)`` on the unit sphere, as a
    ``(paths, n, d)`` array of ``xp`` in ``dtype`` (a new array: ``X0`` is not modified).

    The sphere is checked to ``_validation.sphere_tol``: 1e-8 in float64, and ``d eps_32`` in
    float32 or for float32 tokens (a row normalised in float32 has a norm within about ``d / 2``
    round-offs of one)."""
    if X0.ndim not in (2, 3) or any(s == 0 for s in X0.shape):
        raise ValueError(
            f"`{name}` must have shape (N, d) or (n_paths, N, d), non-empty; got {tuple(X0.shape)}."
        )
    if not xp.isdtype(X0.dtype, ("real floating", "integral")):
        raise TypeError(f"`{name}` must hold real numbers; got dtype {X0.dtype}.")
    if X0.ndim == 3 and X0.shape[0] != paths:
        raise ValueError(
            f"`{name}` of shape (n_paths, N, d) must have n_paths = {paths}; got {tuple(X0.shape)}."
        )
    d = X0.shape[-1]
    if d < 2:
        raise ValueError(f"the dimension `d` must be at least 2; `{name}` has d = {d}.")
    X = xp.astype(X0, dtype, copy=True)
    tol = sphere_tol(d, dtype != xp.float64 or X0.dtype == xp.float32)
    dev = xp.abs(xp.linalg.vector_norm(X, axis=-1) - 1.0)
    finite = all_finite(xp, X)
    if not finite or not bool(xp.all(dev <= tol)):  # one or two transfers to the host
        if not finite:
            raise ValueError(f"`{name}` must be finite; remove the NaN or inf entries.")
        raise ValueError(
            f"`{name}` must lie on the unit sphere (every row of norm 1); the largest deviation "
            f"is {float(xp.max(dev)):.3g}. Normalise with X / norm(X, axis=-1, keepdims=True)."
        )
    if X.ndim == 2:
        X = xp.broadcast_to(X[None, ...], (paths, *X.shape))
    return X


def _dense_drift(xp: ModuleType, X: Any, A: Any, V: Any) -> Any:
    """``V sum_j softmax_j <A x_i, x_j> x_j`` for a group of paths ``X`` (g, n, d), densely."""
    S = xp.matmul(xp.matmul(X, xp.matrix_transpose(A)), xp.matrix_transpose(X))
    E = xp.exp(S - xp.max(S, axis=-1, keepdims=True))
    P = E / xp.sum(E, axis=-1, keepdims=True)
    return xp.matmul(xp.matmul(P, X), xp.matrix_transpose(V))


def attention_drift_xp(xp: ModuleType, X: Any, A: Any, V: Any) -> Any:
    """``Attn_X(x_i)`` for ``X`` (paths, n, d): the numpy path's ``_attention_drift`` in ``xp``,
    densely over groups of paths while their scores fit :data:`BLOCK_ENTRIES`, else path by
    path through the attention's blocked softmax (and its fused kernels)."""
    paths, n, _ = X.shape
    if n * n > BLOCK_ENTRIES:
        AT, VT = xp.matrix_transpose(A), xp.matrix_transpose(V)
        return xp.stack(
            [
                softmax_velocity(
                    xp, xp.matmul(X[p, ...], AT), X[p, ...], xp.matmul(X[p, ...], VT), None
                )
                for p in range(paths)
            ]
        )
    step = max(1, BLOCK_ENTRIES // (n * n))
    groups = [
        run(xp, _dense_drift, X[p : min(p + step, paths), ...], A, V) for p in range(0, paths, step)
    ]
    return groups[0] if len(groups) == 1 else xp.concat(groups, axis=0)


def _sigma(activation: str, xp: ModuleType, H: Any) -> Any:
    """The activation in ``xp`` (``_mlp._sigma_inplace`` without the in-place writes)."""
    if activation == "relu":
        return xp.clip(H, min=0.0)
    if activation == "tanh":
        return xp.tanh(H)
    if activation == "erf":
        return erf(xp, H)
    s = 1.0 / (1.0 + xp.exp(-H))  # expit: e^{-H} = inf gives 0, as it should
    return s if activation == "sigmoid" else H * s  # silu


def _mlp_block(activation: str, xp: ModuleType, Y: Any, U: Any, bU: Any, W: Any) -> Any:
    """``sigma(U y_i + b_U) W^T`` over one block of hidden units, for every path."""
    H = xp.matmul(Y, xp.matrix_transpose(U)) + bU[:, None, :]
    return xp.matmul(_sigma(activation, xp, H), xp.matrix_transpose(W))


#: One formula object per activation, so that ``run`` compiles each once under JAX.
_MLP_BLOCKS = {
    name: functools.partial(_mlp_block, name) for name in ("relu", "silu", "sigmoid", "tanh", "erf")
}


def mlp_xp(xp: ModuleType, activation: str, Y: Any, U: Any, bU: Any, W: Any, bW: Any) -> Any:
    """``W sigma(U y_i + b_U) / sqrt(m) + b_W`` for ``Y`` (paths, n, d) with the shapes of
    ``_mlp._mlp`` (``U`` already divided by sqrt(d)), in blocks of hidden units whose
    ``paths x n x units`` activations fit :data:`BLOCK_ENTRIES`, summed in order."""
    paths, n, _ = Y.shape
    m = U.shape[1]
    units = max(1, BLOCK_ENTRIES // (paths * n))
    formula = _MLP_BLOCKS[activation]
    first, *rest = (slice(c, min(c + units, m)) for c in range(0, m, units))
    g = run(xp, formula, Y, U[:, first, :], bU[:, first], W[:, :, first])
    for b in rest:
        g = g + run(xp, formula, Y, U[:, b, :], bU[:, b], W[:, :, b])
    return g / math.sqrt(m) + bW[:, None, :]


def draw_weights_xp(xp: ModuleType, noise: Any, paths: int, d: int, normal: Any, dtype: Any):
    """``(U / sqrt(d), b_U, W, b_W)`` of one layer for every path, drawn by ``normal`` (the
    caller's library, on its device) in ``dtype``: ``_mlp._draw_weights`` on the device, its
    four arrays cut from one draw (one random kernel per layer)."""
    m = noise.width
    shapes = ((paths, m, d), (paths, m), (paths, d, m), (paths, d))
    sizes = [math.prod(s) for s in shapes]
    flat = normal((sum(sizes),), dtype)
    ends = list(itertools.accumulate(sizes))
    U, bU, W, bW = (
        xp.reshape(flat[e - n : e], s) for e, n, s in zip(ends, sizes, shapes, strict=True)
    )
    return U / math.sqrt(d), noise.sigma_U * bU, W, noise.sigma_W * bW


def _normalised(xp: ModuleType, Z: Any, min_norm: float) -> tuple[Any, Any]:
    """Rows of ``Z`` scaled to unit norm, and a 0-d boolean array: every norm finite and at
    least ``min_norm`` (read by the caller, once per layer)."""
    norms = xp.linalg.vector_norm(Z, axis=-1, keepdims=True)
    ok = xp.all(xp.isfinite(norms)) & xp.all(norms >= min_norm)
    return Z / norms, ok


def simulate_xp(model, X0, T, L, n_paths, rng, save_every, progress, dtype):
    """``simulate`` on an array of another library (finite width): the same layers in its
    namespace and on its device, one transfer to the host per layer (the check of the norms)."""
    from ._model import MIN_NORM, StochasticResult, _collapse, _progress

    noise = model.noise
    if noise.width is None:
        raise gaussian_field_refusal(X0, "X0", "simulate with MLPNoise(width=None) samples")
    T = check_positive(T, "T")
    L = check_int(L, "L", minimum=1)
    n_paths = check_int(n_paths, "n_paths", minimum=1)
    save_every = check_int(save_every, "save_every", minimum=1)
    check_bool(progress, "progress")
    xp = namespace(X0)
    dt = float_dtype(xp, X0, dtype)
    X = as_initial_xp(xp, X0, n_paths, dt)
    d = X.shape[-1]
    info = xp.finfo(dt)
    A_np, V_np = model._matrices_within(d, float(info.max), f"float{info.bits}")
    A, V = (to_namespace(xp, M, X, dt) for M in (A_np, V_np))
    off = model.attention_off(d)
    normal = device_normal(xp, X, rng)
    h = T / L
    root_h = math.sqrt(h)
    keep = sorted(set(range(0, L + 1, save_every)) | {L})
    saving = set(keep)
    saved = [X]
    # numpy-backed namespaces warn on the overflow the norm check reports by name
    with np.errstate(over="ignore", invalid="ignore"):
        for k in _progress(range(1, L + 1), progress, "layers"):
            Y, ok_attention = X, None
            if not off:
                Y, ok_attention = _normalised(xp, X + h * attention_drift_xp(xp, X, A, V), MIN_NORM)
            G = mlp_xp(xp, noise.activation, Y, *draw_weights_xp(xp, noise, n_paths, d, normal, dt))
            X, ok = _normalised(xp, Y + root_h * G, MIN_NORM)
            if ok_attention is not None:
                ok = ok & ok_attention
            if not bool(ok):
                where = "MLP" if ok_attention is None or bool(ok_attention) else "attention"
                raise _collapse(f"layer {k} ({where})")
            if k in saving:
                saved.append(X)
    return StochasticResult(np.asarray(keep, dtype=np.float64) * (T / L), xp.stack(saved, axis=1))


def sample_xp(noise, Y, rng):
    """``MLPNoise.sample`` on an array of another library (finite width), in the dtype of ``Y``
    (float32 stays float32), drawn on its device."""
    if noise.width is None:
        raise gaussian_field_refusal(Y, "Y", "MLPNoise(width=None).sample draws")
    xp = namespace(Y)
    dt = float_dtype(xp, Y)
    paths = Y.shape[0] if Y.ndim == 3 else 1
    pts = as_initial_xp(xp, Y, paths, dt, "Y")
    weights = draw_weights_xp(xp, noise, paths, pts.shape[-1], device_normal(xp, pts, rng), dt)
    G = mlp_xp(xp, noise.activation, pts, *weights)
    return G if Y.ndim == 3 else G[0, ...]
