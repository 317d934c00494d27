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
from typing import Any, cast

import numpy as np
from scipy import special

from .. import attention as _attention
from .._validation import (
    as_dtype,
    as_matrix,
    as_real_array,
    as_rng,
    as_sphere_tokens,
    check_int,
    check_positive,
)
from ._kernels import _check_activation, _interpolant, kappa, kappa_prime

__all__ = ["MLPNoise", "StochasticResult", "StochasticTransformer", "simulate"]

#: Smallest admissible norm before normalising: far below any realistic value (|v| >= 1 - O(h)
#: after a step), so hitting it means the step was too large for the noise and is reported.
MIN_NORM = 1e-8
#: Largest array (entries) a batched step allocates at once: an ``n x n`` score matrix over a
#: group of paths, or an ``n x m`` hidden layer. Larger problems are cut into row slabs
#: (attention) and (rows x hidden units) tiles (MLP) of about this size, which stay in a core's
#: L2 cache, so the memory of a layer is O(n d + m d) (the weights), whatever ``n`` and ``m``.
TILE_ELEMENTS = 2**14
#: Rows of one MLP tile (fewer when ``n`` is smaller); its hidden units fill TILE_ELEMENTS.
#: Measured at N = 4096, d = 16, m = 4096 and 16384 on the 2-core machine: 128 x 128 tiles ran
#: within 10 % of 256 x 64 and 64 x 256 and 25 % faster than 1024 x 16; tiles large enough for
#: OpenBLAS to thread their products (up to 4096 x 256) were at most 20 % faster, for 16x the
#: memory. The MLP is bound by its skinny products: one whole-array MLP takes longer.
TILE_ROWS = 128
#: Relative jitter added to a kernel matrix before its Cholesky factor: above the 1e-16 n
#: rounding of its entries (n <= 10^4) and at the 1e-10 accuracy of the kernel itself.
JITTER = 1e-10


@dataclass(frozen=True, eq=False)
class MLPNoise:
    r"""The random MLP of one layer, drawn afresh at every layer (Agazzi et al. 2026, §1.1).

    .. math:: G(y) = \tfrac1{\sqrt m}\,W\sigma\big(\tfrac1{\sqrt d}Uy + b_U\big) + b_W,

    ``U`` (m, d) and ``W`` (d, m) with i.i.d. standard normal entries,
    :math:`b_U\sim\mathcal N(0,\sigma_U^2 I_m)`, :math:`b_W\sim\mathcal N(0,\sigma_W^2 I_d)`.
    Its covariance is :math:`\kappa(\langle x,y\rangle) I_d` at every width (:func:`kappa`).

    Parameters
    ----------
    activation : {"relu", "silu", "sigmoid", "tanh", "erf"}
    width : int or None
        Width ``m``; ``None`` is the infinite-width limit, the centred Gaussian field with
        covariance :math:`\kappa(\langle x, y\rangle) I_d`, sampled exactly at the tokens.
    sigma_U, sigma_W : float
        Standard deviations of the hidden and output biases.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, §1.1 and Remark 1.1.

    Examples
    --------
    >>> noise = MLPNoise("relu", width=16)
    >>> float(noise.kappa(1.0, d=4))
    0.125
    >>> noise.sample(np.eye(4), rng=0).shape
    (4, 4)
    """

    activation: str = "relu"
    width: int | None = 64
    sigma_U: float = 0.0
    sigma_W: float = 0.0

    def __post_init__(self) -> None:
        _check_activation(self.activation)
        if self.width is not None:
            check_int(self.width, "width", minimum=1)
        check_positive(self.sigma_U, "sigma_U", allow_zero=True)
        check_positive(self.sigma_W, "sigma_W", allow_zero=True)

    def kappa(self, t: Any, *, d: int) -> np.ndarray:
        """:func:`kappa` with this noise's activation and biases."""
        return kappa(t, self.activation, d=d, sigma_U=self.sigma_U, sigma_W=self.sigma_W)

    def kappa_prime(self, t: Any, *, d: int) -> np.ndarray:
        """:func:`kappa_prime` with this noise's activation and bias."""
        return kappa_prime(t, self.activation, d=d, sigma_U=self.sigma_U, sigma_W=self.sigma_W)

    def sample(self, Y: Any, *, rng: Any = None) -> np.ndarray:
        """One draw of ``G`` evaluated at the rows of ``Y``.

        Parameters
        ----------
        Y : (n, d) or (paths, n, d) array_like
            Points on the unit sphere; with a paths axis, one independent draw per path.
        rng : Generator, int or None

        Returns
        -------
        ndarray
            ``G(y_i)``, same shape as `Y`.
        """
        arr = np.asarray(Y, dtype=np.float64)
        pts = _as_initial(arr, arr.shape[0] if arr.ndim == 3 else 1)
        G = _draw_field(self, pts, as_rng(rng))
        return G if arr.ndim == 3 else G[0]


def _kernel_matrix(noise: MLPNoise, Y: np.ndarray) -> np.ndarray:
    """``kappa(<y_i, y_j>)`` for unit rows ``Y`` (paths, n, d): shape (paths, n, n)."""
    d = Y.shape[-1]
    k = _interpolant(noise.activation, d, float(noise.sigma_U), float(noise.sigma_W))
    return k(np.clip(Y @ np.swapaxes(Y, -1, -2), -1.0, 1.0))


def _psd_root(K: np.ndarray) -> np.ndarray:
    """A factor ``R`` with ``R R^T = K + eps I`` for a batch of symmetric PSD kernel matrices.

    Cholesky of ``K`` plus :data:`JITTER` times its largest diagonal entry (degenerate kernels,
    e.g. coincident tokens, have a factor, and the sampled covariance is exact to 1e-10
    relative); where even that fails, the eigenvalue root with negative rounding clipped.
    Cholesky is 50 to 250 times faster than ``eigh`` on the small batched matrices of the
    simulations (measured at 60 x 40 x 40).
    """
    n = K.shape[-1]
    scale = np.max(np.diagonal(K, axis1=-2, axis2=-1), axis=-1)
    try:
        return np.linalg.cholesky(K + (JITTER * scale)[..., None, None] * np.eye(n))
    except np.linalg.LinAlgError:
        lam, U = np.linalg.eigh(0.5 * (K + np.swapaxes(K, -1, -2)))
        return U * np.sqrt(np.clip(lam, 0.0, None))[..., None, :]


def _gaussian_field(noise: MLPNoise, Y: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """The infinite-width field at ``Y`` (paths, n, d) from standard normals ``Z`` (same shape):
    Gaussian with covariance kappa(<y_i, y_j>) I_d, the same root for each of the d columns."""
    return _psd_root(_kernel_matrix(noise, Y)) @ Z


def _sigma_inplace(activation: str):
    """The activation applied in place to a float64 array."""
    if activation == "relu":
        return lambda u: np.maximum(u, 0.0, out=u)
    if activation == "erf":
        return lambda u: special.erf(u, out=u)
    if activation == "tanh":
        return lambda u: np.tanh(u, out=u)
    if activation == "sigmoid":
        return lambda u: special.expit(u, out=u)
    return lambda u: np.multiply(u, special.expit(u), out=u)  # silu


def _mlp(activation: str, Y, U, bU, W, bW) -> np.ndarray:
    """``W sigma(U y_i + b_U) / sqrt(m) + b_W`` for ``Y`` (paths, n, d), ``U`` (paths, m, d)
    (already divided by sqrt(d)), ``bU`` (paths, m), ``W`` (paths, d, m), ``bW`` (paths, d),
    without an ``n x m`` array when ``n m`` exceeds :data:`TILE_ELEMENTS`.

    Small layers are computed over groups of paths at once; larger ones per path in tiles of
    (rows x hidden units), the activation in place and each tile's product with ``W``
    accumulated into its rows (in a fixed order: results do not depend on the threads), on the
    attention module's worker threads when ``d`` is small enough for its pool.
    """
    sigma = _sigma_inplace(activation)
    paths, n, _ = Y.shape
    m = U.shape[1]
    if n * m <= TILE_ELEMENTS:
        step = max(1, TILE_ELEMENTS // (n * m))
        g = np.empty_like(Y)
        for p in range(0, paths, step):
            H = Y[p : p + step] @ np.swapaxes(U[p : p + step], -1, -2)
            H += bU[p : p + step, None, :]
            g[p : p + step] = sigma(H) @ np.swapaxes(W[p : p + step], -1, -2)
    else:
        kernels = _attention._kernels
        g = np.zeros_like(Y)
        rows = min(n, TILE_ROWS)
        units = max(1, TILE_ELEMENTS // rows)
        tiles = [(p, slice(r, min(r + rows, n))) for p in range(paths) for r in range(0, n, rows)]

        def task(group) -> None:
            with np.errstate(over="ignore", invalid="ignore"):  # per thread; see _normalise
                for p, r in group:
                    Yr, gr = Y[p, r], g[p, r]
                    for c in range(0, m, units):
                        H = Yr @ U[p, c : c + units].T
                        H += bU[p, c : c + units]
                        gr += sigma(H) @ W[p, :, c : c + units].T

        kernels._run(task, tiles, paths * n * m, Y.shape[2])
    g /= np.sqrt(m)
    g += bW[:, None, :]
    return g


def _draw_weights(noise: MLPNoise, paths: int, d: int, rng: np.random.Generator):
    """``(U / sqrt(d), b_U, W, b_W)`` of one layer for every path."""
    m = cast(int, noise.width)  # finite: the infinite width draws no weights
    U = rng.standard_normal((paths, m, d)) / np.sqrt(d)
    bU = noise.sigma_U * rng.standard_normal((paths, m))
    W = rng.standard_normal((paths, d, m))
    bW = noise.sigma_W * rng.standard_normal((paths, d))
    return U, bU, W, bW


def _draw_field(noise: MLPNoise, Y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``G(y_i)`` (paths, n, d) in the dtype of ``Y``: a fresh MLP per path, or the exact
    Gaussian field (whose kernel root is computed in float64). The draws do not depend on the
    dtype: a float32 run sees the float64 run's weights, rounded."""
    paths, _, d = Y.shape
    if noise.width is None:
        G = _gaussian_field(noise, Y.astype(np.float64), rng.standard_normal(Y.shape))
        return G.astype(Y.dtype, copy=False)
    weights = _draw_weights(noise, paths, d, rng)
    return _mlp(noise.activation, Y, *(w.astype(Y.dtype, copy=False) for w in weights))


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

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, §1.1, eq. (1.1).

    Examples
    --------
    >>> model = StochasticTransformer(MLPNoise("tanh", width=32), V=np.zeros((3, 3)))
    >>> A, V = model.matrices(3)
    >>> A.shape, bool(model.attention_off(3))
    ((3, 3), True)
    """

    noise: MLPNoise = MLPNoise()
    Q: Any = None
    K: Any = None
    V: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.noise, MLPNoise):
            raise TypeError(f"`noise` must be an MLPNoise; got {type(self.noise).__name__}.")

    def matrices(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(A, V)`` with ``A = K^T Q`` (scores ``<A x_i, x_j> = <Q x_i, K x_j>``)."""
        Q = np.eye(d) if self.Q is None else as_matrix(self.Q, "Q", shape=(d, d))
        K = np.eye(d) if self.K is None else as_matrix(self.K, "K", shape=(d, d))
        V = np.eye(d) if self.V is None else as_matrix(self.V, "V", shape=(d, d))
        return K.T @ Q, V

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
        raise FloatingPointError(
            f"the tokens became non-finite or zero at {what}; increase the number of layers "
            "`L` (a smaller step) or lower the noise (the biases)."
        )
    return Z / norms


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


def _as_initial(X0: Any, paths: int, name: str = "X0") -> np.ndarray:
    """Initial tokens ``(n, d)`` (same for every path) or ``(paths, n, d)``, on the sphere."""
    arr = np.array(as_real_array(X0, name), dtype=np.float64)
    X: np.ndarray
    if arr.ndim == 3:
        if arr.shape[0] != paths:
            raise ValueError(
                f"`{name}` of shape (n_paths, N, d) must have n_paths = {paths}; got {arr.shape}."
            )
        X = as_sphere_tokens(arr.reshape(-1, arr.shape[-1]), name).reshape(arr.shape)
    else:
        X = np.broadcast_to(as_sphere_tokens(arr, name), (paths, *arr.shape)).copy()
    if X.shape[-1] < 2:
        raise ValueError(f"the dimension `d` must be at least 2; `{name}` has d = {X.shape[-1]}.")
    return X


def _progress(iterable, progress: bool, desc: str):
    if not progress:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:  # pragma: no cover - tqdm is in the dev environment
        raise ImportError("`progress=True` needs tqdm: pip install tqdm.") from exc
    return tqdm(iterable, desc=desc, leave=False)


def _common_args(X0, T, L, n_paths, save_every, rng):
    """Validate the arguments shared by the two simulators."""
    T = check_positive(T, "T")
    L = check_int(L, "L", minimum=1)
    n_paths = check_int(n_paths, "n_paths", minimum=1)
    save_every = check_int(save_every, "save_every", minimum=1)
    X = _as_initial(X0, n_paths)
    keep = sorted(set(range(0, L + 1, save_every)) | {L})
    return T, L, X, keep, as_rng(rng)


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
    X0: Any,
    *,
    T: float,
    L: int,
    n_paths: int = 1,
    rng: Any = None,
    save_every: int = 1,
    progress: bool = False,
    dtype: Any = np.float64,
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
        Initial tokens on the unit sphere, ``d >= 2``.
    T : float
        Final depth (time).
    L : int
        Number of layers.
    n_paths : int
        Independent paths, simulated together.
    rng : Generator, int or None
    save_every : int
        Keep every ``save_every``-th layer (the last one always).
    progress : bool
        A tqdm bar over the layers.
    dtype : {"float64", "float32"}
        Precision of the tokens and of every layer's arithmetic (the random weights are drawn
        as in float64 and rounded, the Gaussian field's kernel root is computed in float64).
        Over ``L`` layers the float32 tokens stay within about ``L`` float32 round-offs per
        layer of the float64 ones while the dynamics does not amplify perturbations (tested in
        ``tests/test_float32.py``).

    Returns
    -------
    StochasticResult
        ``X`` of shape ``(n_paths, K, N, d)``, in ``dtype``.

    Raises
    ------
    ValueError
        Bad shapes, tokens off the sphere, ``d < 2``, ``L < 1``.
    FloatingPointError
        If a token becomes non-finite or zero (never a silent NaN).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, eq. (1.1).

    Examples
    --------
    >>> model = StochasticTransformer(MLPNoise("relu", width=8, sigma_U=0.1, sigma_W=0.1))
    >>> res = simulate(model, np.eye(3), T=1.0, L=10, n_paths=4, rng=0)
    >>> res.X.shape, float(res.times[-1])
    ((4, 11, 3, 3), 1.0)
    >>> bool(np.allclose(np.linalg.norm(res.X, axis=-1), 1.0))
    True
    """
    if not isinstance(model, StochasticTransformer):
        raise TypeError(f"`model` must be a StochasticTransformer; got {type(model).__name__}.")
    dtype = as_dtype(dtype)
    T, L, X, keep, rng = _common_args(X0, T, L, n_paths, save_every, rng)
    X = X.astype(dtype, copy=False)
    d = X.shape[-1]
    A, V = (M.astype(dtype, copy=False) for M in model.matrices(d))
    off = model.attention_off(d)
    h = T / L

    def layer(X, k):
        Y = _attention_step(X, h, A, V, off, f"layer {k} (attention)")
        return _noise_step(Y, h, _draw_field(model.noise, Y, rng), f"layer {k} (MLP)")

    return _run(layer, X, T, L, keep, progress, "layers")
