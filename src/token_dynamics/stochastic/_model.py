r"""The paper's deep transformer with random MLPs, eq. (1.1), and its simulation (private module).

One layer, for tokens ``x_i`` on the unit sphere and step ``h = T / L``::

    y_i  = LN(x_i + h Attn_X(x_i))            softmax attention, no temperature, then LN
    x_i' = LN(y_i + sqrt(h) G(y_i))           random MLP, the same for every token, then LN

with ``LN(v) = v / |v|``, ``Attn_X(x_i) = sum_j softmax_j <Q x_i, K x_j> V x_j`` and
``G(y) = W sigma(U y / sqrt(d) + b_U) / sqrt(m) + b_W`` drawn afresh at every layer.

Arrays carry the Monte-Carlo paths first: states ``(paths, n, d)``, trajectories
``(paths, times, n, d)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from .. import attention as _attention
from .._backend import is_numpy
from .._typing import ArrayLike, SeedLike
from .._validation import (
    as_dtype,
    as_matrix,
    as_rng,
    as_square,
    check_int,
    check_positive,
)
from ._mlp import TILE_ELEMENTS, MLPNoise, _as_initial, _draw_field

__all__ = ["StochasticResult", "StochasticTransformer", "simulate"]

#: Smallest admissible norm before normalising: far below any realistic value (|v| >= 1 - O(h)
#: after a step), so hitting it means the step was too large for the noise and is reported.
MIN_NORM = 1e-8


@dataclass(frozen=True, eq=False)
class StochasticTransformer:
    r"""The deep transformer of Agazzi et al. (2026), eq. (1.1): post-LN after each sub-layer.

    .. math:: Y^i = \mathrm{LN}\big(X^i + \tfrac TL\,\mathrm{Attn}_{\mathbf X}(X^i)\big),\qquad
              X^i_{\rm new} = \mathrm{LN}\big(Y^i + \sqrt{T/L}\;G(Y^i)\big),

    with :math:`\mathrm{Attn}_{\mathbf X}(x_i) = \sum_j \mathrm{softmax}_j
    \langle Qx_i, Kx_j\rangle\,Vx_j` (no temperature: :math:`\beta` enters only through
    :math:`Q^\top K = \beta I`) and ``G`` the random MLP :class:`MLPNoise`, fresh at every
    layer and common to all tokens. The attention scale ``s`` of the paper's figures
    (+1 attractive, 0 off, -1 repulsive) is ``V = s I``; ``V = 0`` switches attention off.

    Parameters
    ----------
    noise : MLPNoise
    Q, K, V : (d, d) array_like or None
        Fixed across layers; ``None`` is the identity.

    Raises
    ------

    TypeError
        If `noise` is not an :class:`MLPNoise`.
    ValueError
        If `Q`, `K` or `V` is not a finite real square matrix, or their sizes differ.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, §1.1, eq. (1.1).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer
    >>> model = StochasticTransformer(MLPNoise("tanh", width=32), V=np.zeros((3, 3)))
    >>> A, V = model.matrices(3)
    >>> A.shape, bool(model.attention_off(3))
    ((3, 3), True)
    """

    noise: MLPNoise = MLPNoise()  # noqa: RUF009 (frozen: one shared default is safe)
    Q: ArrayLike | None = None
    K: ArrayLike | None = None
    V: ArrayLike | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.noise, MLPNoise):
            raise TypeError(f"`noise` must be an MLPNoise; got {type(self.noise).__name__}.")
        sizes = set()
        for name in ("Q", "K", "V"):
            M = getattr(self, name)
            if M is not None:
                M = as_square(M, name)  # a finite real (d, d) copy: the caller's array is kept
                M.setflags(write=False)
                object.__setattr__(self, name, M)
                sizes.add(M.shape[0])
        if len(sizes) > 1:
            raise ValueError(
                f"`Q`, `K` and `V` must have the same size (d, d); got sizes {sorted(sizes)}."
            )

    def matrices(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(A, V)`` with ``A = K^T Q`` (scores ``<A x_i, x_j> = <Q x_i, K x_j>``)."""
        Q = np.eye(d) if self.Q is None else as_matrix(self.Q, "Q", shape=(d, d))
        K = np.eye(d) if self.K is None else as_matrix(self.K, "K", shape=(d, d))
        V = np.eye(d) if self.V is None else as_matrix(self.V, "V", shape=(d, d))
        return K.T @ Q, V

    def _matrices_within(self, d: int, top: float, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`matrices`, after checking that their entries stay below ``top``, the largest
        float of the computation's ``dtype`` (else a ``FloatingPointError`` naming them: cast,
        they would be infinite, and the first layer's tokens non-finite)."""
        A, V = self.matrices(d)
        for name, M in (("A = K^T Q", A), ("V", V)):
            big = float(np.abs(M).max())
            if big > top:
                raise FloatingPointError(
                    f"the model's {name} has entries up to {big:.3g}, beyond the largest {dtype} "
                    f'({top:.3g}); compute in float64 (`dtype="float64"`) or scale it down.'
                )
        return A, V

    def attention_off(self, d: int) -> bool:
        """Whether ``V = 0`` (the attention sub-layer is then the identity)."""
        return not np.any(self.matrices(d)[1])


@dataclass(frozen=True, eq=False)
class StochasticResult:
    """Simulated paths of the discrete model or of the limit SDE.

    Attributes
    ----------
    times : (K,) ndarray
        Depths ``t = l T / L`` of the saved layers (or steps).
    X : (n_paths, K, N, d) ndarray
        Tokens at those depths.
    status : str
        ``"completed"``.
    message : str

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer, simulate
    >>> model = StochasticTransformer(MLPNoise("relu", width=4))
    >>> res = simulate(model, np.eye(2), T=1.0, L=4, n_paths=3, rng=0, save_every=2)
    >>> res.times.tolist(), res.X.shape, res.status
    ([0.0, 0.5, 1.0], (3, 3, 2, 2), 'completed')
    """

    times: np.ndarray
    X: np.ndarray
    status: str = "completed"
    message: str = "reached the final depth."


def _attention_drift(X: np.ndarray, A: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Batched ``Attn_X(x_i) = V sum_j softmax_j <A x_i, x_j> x_j`` for ``X`` (paths, n, d).

    Small systems densely over groups of paths; when one ``n x n`` score matrix exceeds
    :data:`TILE_ELEMENTS` each path goes through the row-blocked kernel of
    :class:`token_dynamics.attention.Softmax` (memory O(n d), both cores).
    """
    paths, n, _ = X.shape
    if n * n > TILE_ELEMENTS:
        field = _attention.Softmax(A, V, beta=1.0)
        return np.stack([field.velocity(Xp) for Xp in X])
    F = X @ A.T
    step = max(1, TILE_ELEMENTS // (n * n))
    out = np.empty_like(X)
    for p in range(0, paths, step):
        Xp = X[p : p + step]
        # a contiguous transpose keeps the batched product on BLAS (10x faster for small d)
        S = F[p : p + step] @ np.ascontiguousarray(np.swapaxes(Xp, -1, -2))
        S -= S.max(axis=-1, keepdims=True)
        np.exp(S, out=S)
        S /= S.sum(axis=-1, keepdims=True)
        out[p : p + step] = S @ Xp
    return out @ V.T


def _normalise(Z: np.ndarray, what: str) -> np.ndarray:
    """Rows of ``Z`` scaled to unit norm, or a FloatingPointError naming where."""
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.linalg.norm(Z, axis=-1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms < MIN_NORM):
        raise _collapse(what)
    return Z / norms


def _collapse(what: str) -> FloatingPointError:
    """The error of a token become non-finite or zero at ``what`` (both array paths)."""
    return FloatingPointError(
        f"the tokens became non-finite or zero at {what}; increase the number of layers "
        "`L` (a smaller step) or lower the noise (the biases)."
    )


def _attention_step(X, h, A, V, off: bool, what: str) -> np.ndarray:
    """``Y = LN(X + h Attn_X(X))`` (``Y = X`` when attention is off)."""
    if off:
        return X
    with np.errstate(over="ignore", invalid="ignore"):
        return _normalise(X + h * _attention_drift(X, A, V), what)


def _noise_step(Y, h, G, what: str) -> np.ndarray:
    """``X' = LN(Y + sqrt(h) G(Y))``."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _normalise(Y + float(np.sqrt(h)) * G, what)  # a Python float keeps the dtype


def _progress(iterable, progress: bool, desc: str):
    if not progress:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:  # pragma: no cover - tqdm is in the dev environment
        raise ImportError("`progress=True` needs tqdm: pip install tqdm.") from exc
    return tqdm(iterable, desc=desc, leave=False)


def _common_args(
    X0: ArrayLike, T: float, L: int, n_paths: int, save_every: int, rng: SeedLike
) -> tuple[float, int, np.ndarray, list[int], np.random.Generator]:
    """Validate the arguments shared by the two simulators."""
    T = check_positive(T, "T")
    L = check_int(L, "L", minimum=1)
    n_paths = check_int(n_paths, "n_paths", minimum=1)
    save_every = check_int(save_every, "save_every", minimum=1)
    X = _as_initial(X0, n_paths)
    return T, L, X, _kept_layers(L, save_every), as_rng(rng)


def _kept_layers(L: int, save_every: int) -> list[int]:
    """The saved layers: every ``save_every``-th of ``0..L``, and ``L`` always."""
    return sorted(set(range(0, L + 1, save_every)) | {L})


def _run(step, X: np.ndarray, T: float, L: int, keep: list, progress: bool, desc: str):
    """Apply ``X <- step(X, k)`` for ``k = 1..L`` and save the states at the ``keep`` indices."""
    out = np.empty((X.shape[0], len(keep), *X.shape[1:]), dtype=X.dtype)
    out[:, 0] = X
    j = 1
    for k in _progress(range(1, L + 1), progress, desc):
        X = step(X, k)
        if j < len(keep) and keep[j] == k:
            out[:, j] = X
            j += 1
    return StochasticResult(np.asarray(keep, dtype=np.float64) * (T / L), out)


def simulate(
    model: StochasticTransformer,
    X0: ArrayLike,
    *,
    T: float,
    L: int,
    n_paths: int = 1,
    rng: SeedLike = None,
    save_every: int = 1,
    progress: bool = False,
    dtype: DTypeLike | None = None,
) -> StochasticResult:
    r"""Run ``L`` layers of the paper's model (1.1), step ``T / L``, on independent paths.

    .. math:: Y^i_\ell = \mathrm{LN}\big(X^i_\ell + \tfrac TL\mathrm{Attn}_{\mathbf X_\ell}
              (X^i_\ell)\big),\qquad X^i_{\ell+1} = \mathrm{LN}\big(Y^i_\ell +
              \sqrt{T/L}\,G_{\ell+1}(Y^i_\ell)\big)

    The MLP ``G`` of a layer is common to the tokens of a path, fresh at every layer and
    independent across paths. Memory is O(N d + m d) per path whatever the width ``m`` (the
    hidden layer is computed in tiles).

    Parameters
    ----------
    model : StochasticTransformer
    X0 : (N, d) or (n_paths, N, d) array_like
        Initial tokens on the unit sphere, ``d >= 2``. With a finite width, also an array of
        torch, JAX, CuPy or another array-API library: every layer then runs in that library
        and on the array's device, and ``X`` comes back as such an array (see Notes).
    T : float
        Final depth (time).
    L : int
        Number of layers.
    n_paths : int
        Independent paths, simulated together.
    rng : Generator, int or None
        On other libraries' arrays, also a ``torch.Generator`` on the tokens' device for torch
        tensors (see Notes).
    save_every : int
        Keep every ``save_every``-th layer (the last one always).
    progress : bool
        A tqdm bar over the layers.
    dtype : {None, "float64", "float32"}
        Precision of the tokens and of every layer's arithmetic (the random weights are drawn
        as in float64 and rounded, the Gaussian field's kernel root is computed in float64).
        ``None`` (the default) is float64 for numpy tokens, and for the tokens of another
        library their own precision, float32 staying float32.
        Over ``L`` layers the float32 tokens stay within about ``L`` float32 round-offs per
        layer of the float64 ones while the dynamics does not amplify perturbations (checked by the
        library's test suite).

    Returns
    -------
    StochasticResult
        ``X`` of shape ``(n_paths, K, N, d)``, in ``dtype`` (the array type and device of
        `X0`; ``times`` stays a numpy array).

    Raises
    ------
    TypeError
        If `model` is not a :class:`StochasticTransformer`, or `X0` is not a numpy array and
        the width is infinite (``MLPNoise(width=None)``: its exact sampler needs numpy).
    ValueError
        Bad shapes, tokens off the sphere, ``d < 2``, ``L < 1``, a `dtype` other than float64
        or float32.
    FloatingPointError
        If a token becomes non-finite or zero (never a silent NaN).

    Notes
    -----
    On arrays of torch, JAX, CuPy or array-api-strict (finite width), the weights ``U``,
    ``b_U``, ``W``, ``b_W`` of every layer are drawn by that library on the tokens' device, in
    ``dtype``: one generator seeded once from `rng` (an integer seed, a numpy Generator or
    ``None`` gives one seed, ``np.random.default_rng(rng).integers(2**63)``; a
    ``torch.Generator`` is used as it is) draws for the whole batch of paths. The same `rng`
    repeats a run for the same ``n_paths``, library, device and dtype; the draws differ from
    numpy's for the same seed (the law is the same). array-api-strict, which has no generator,
    draws with numpy on the host. One value per layer (the check of the norms) is read back to
    the host.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, eq. (1.1).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer, simulate
    >>> model = StochasticTransformer(MLPNoise("relu", width=8, sigma_U=0.1, sigma_W=0.1))
    >>> res = simulate(model, np.eye(3), T=1.0, L=10, n_paths=4, rng=0)
    >>> res.X.shape, float(res.times[-1])
    ((4, 11, 3, 3), 1.0)
    >>> bool(np.allclose(np.linalg.norm(res.X, axis=-1), 1.0))
    True
    """
    if not isinstance(model, StochasticTransformer):
        raise TypeError(f"`model` must be a StochasticTransformer; got {type(model).__name__}.")
    dtype = None if dtype is None and not is_numpy(X0) else as_dtype(dtype)
    if not is_numpy(X0):  # torch, JAX, ... (``_backend``): the layers in the caller's library
        from ._array_api import simulate_xp

        return simulate_xp(model, X0, T, L, n_paths, rng, save_every, progress, dtype)
    T, L, X, keep, rng = _common_args(X0, T, L, n_paths, save_every, rng)
    X = X.astype(dtype, copy=False)
    d = X.shape[-1]
    top = float(np.finfo(X.dtype).max)
    A, V = (M.astype(X.dtype, copy=False) for M in model._matrices_within(d, top, X.dtype.name))
    off = model.attention_off(d)
    h = T / L

    def layer(X, k):
        Y = _attention_step(X, h, A, V, off, f"layer {k} (attention)")
        return _noise_step(Y, h, _draw_field(model.noise, Y, rng), f"layer {k} (MLP)")

    return _run(layer, X, T, L, keep, progress, "layers")
