"""The random-MLP transformer on the sphere and its simulation over many paths (private module).

One layer, for tokens ``x_i`` on the unit sphere and step ``h = T / L``::

    y_i = x_i + h b_i(X)                          softmax self-attention, step h
    z_i = y_i + sqrt(h) W_2 phi(W_1 y_i) / sqrt(m)  random MLP, shared by all tokens
    x_i <- z_i / |z_i|                            renormalisation (layer norm)

Arrays carry the Monte-Carlo paths first: states ``(paths, n, d)``, trajectories
``(paths, times, n, d)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from .. import attention as _attention
from .._validation import as_matrix, as_rng, as_sphere_tokens, check_int, check_positive
from ._kernels import _check_activation, _general_kernel

__all__ = [
    "READINGS",
    "StochasticTrajectory",
    "StochasticTransformer",
    "simulate",
]

#: The two readings of the MLP weights: "fresh" draws W_1 and W_2 anew at every layer (R1);
#: "fixed_first" draws W_1 once per path and only W_2 anew at every layer (R2).
READINGS = ("fresh", "fixed_first")
#: Smallest admissible |z| before renormalising: far below any realistic value (|z| >= 1 - O(h)),
#: so hitting it means the step was too large for the noise and is reported, not divided by.
MIN_NORM = 1e-8
#: Largest array (entries) a batched step of a layer allocates at once: an ``n x n`` score
#: matrix over a group of paths, or an ``n x m`` hidden layer. Larger problems are cut into row
#: slabs (attention) and (rows x hidden units) tiles (MLP) of about this size, which stay in a
#: core's L2 cache, so the memory of a layer is O(n d + m d), whatever ``n`` and ``m``.
TILE_ELEMENTS = 2**14
#: Rows of one MLP tile (fewer when ``n`` is smaller); its hidden units fill TILE_ELEMENTS.
#: Measured at N = 4096, d = 16, m = 4096 and 16384 on the 2-core machine: 128 x 128 tiles ran
#: within 10 % of 256 x 64 and 64 x 256 and 25 % faster than 1024 x 16; on the calling thread
#: (d = 16, see ``attention._kernels.POOL_MAX_INNER``) tiles large enough for OpenBLAS to thread
#: their products (up to 4096 x 256) were at most 20 % faster, for 16x the memory. The MLP is
#: bound by its skinny products: one whole-array numpy MLP takes longer than the tiles.
TILE_ROWS = 128


@dataclass(frozen=True, eq=False)
class StochasticTransformer:
    """Parameters of the random-MLP transformer on the sphere.

    Parameters
    ----------
    activation : {"relu", "erf", "tanh", "identity"}
        Activation ``phi`` of the MLP.
    width : int or None
        Width ``m`` of the MLP; ``None`` is the infinite-width layer, whose noise at the tokens
        is the centred Gaussian vector with covariance ``K(y_i, y_j) I_d`` (exact, by a Cholesky
        root of the ``n x n`` kernel matrix).
    reading : {"fresh", "fixed_first"}
        Fresh weights at every layer (R1), or a first layer fixed per path with fresh second
        layers (R2). Ignored when ``width is None``.
    sigma1, sigma2 : float
        Standard deviations of the entries of ``W_1`` and ``W_2``.
    beta : float
        Inverse temperature of the attention scores ``beta <A x_i, x_j>``.
    A, V : (d, d) array_like or None
        Attention and value matrices (``None`` is the identity).
    attention : bool
        ``False`` turns the attention step off (the noise alone).

    Examples
    --------
    >>> StochasticTransformer(activation="erf", width=16).reading
    'fresh'
    """

    activation: str = "relu"
    width: int | None = 64
    reading: str = "fresh"
    sigma1: float = 1.0
    sigma2: float = 1.0
    beta: float = 1.0
    A: Any = None
    V: Any = None
    attention: bool = True

    def __post_init__(self) -> None:
        _check_activation(self.activation)
        if self.width is not None:
            check_int(self.width, "width", minimum=1)
        if self.reading not in READINGS:
            raise ValueError(f"`reading` must be one of {READINGS}; got {self.reading!r}.")
        check_positive(self.sigma1, "sigma1")
        check_positive(self.sigma2, "sigma2")
        if isinstance(self.beta, bool) or not np.isfinite(self.beta):
            raise ValueError(f"`beta` must be a finite real number; got {self.beta!r}.")

    def matrices(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(A, V)`` as ``(d, d)`` arrays (identity where ``None``)."""
        A = np.eye(d) if self.A is None else as_matrix(self.A, "A", shape=(d, d))
        V = np.eye(d) if self.V is None else as_matrix(self.V, "V", shape=(d, d))
        return A, V


@dataclass(frozen=True)
class StochasticTrajectory:
    """Simulated paths of the random-MLP transformer.

    Attributes
    ----------
    times : (T,) ndarray
        Depths ``t = l h`` of the saved layers.
    states : (paths, T, n, d) ndarray
        Tokens at those depths; every row has unit norm.
    model : StochasticTransformer
    layers : int
        Number of layers ``L``.
    """

    times: np.ndarray
    states: np.ndarray
    model: StochasticTransformer
    layers: int


def _softmax_drift(
    X: np.ndarray, A: np.ndarray, V: np.ndarray, beta: float, groups=None, dense: bool = False
):
    """Batched softmax self-attention ``b_i = V sum_j softmax_j(beta <A x_i, x_j>) x_j``.

    ``X`` is ``(paths, n, d)``. ``groups`` (a list of slices of the token axis) restricts
    attention to each slice, so independent systems can share one array (and one draw of the
    weights). Kept private and batched; ``tests/test_stochastic.py`` checks it against
    ``token_dynamics.attention.Softmax``.

    Small systems are computed densely over groups of paths; when one ``n x n`` score matrix
    exceeds :data:`TILE_ELEMENTS` each path goes through the row-blocked kernel of
    :class:`token_dynamics.attention.Softmax` (memory O(n d), no ``n x n`` array, both cores).
    ``dense=True`` computes every path at once, as one batched ``n x n`` softmax.
    """
    if groups is not None:
        return np.concatenate(
            [_softmax_drift(X[:, g], A, V, beta, dense=dense) for g in groups], axis=1
        )
    paths, n, _ = X.shape
    if dense or n * n <= TILE_ELEMENTS:
        F = X @ (beta * A.T)
        step = paths if dense else max(1, TILE_ELEMENTS // (n * n))
        out = np.empty_like(X)
        for p in range(0, paths, step):
            Xp = X[p : p + step]
            # a contiguous transpose keeps the batched product on BLAS (10x faster for small d)
            P = F[p : p + step] @ np.ascontiguousarray(np.swapaxes(Xp, -1, -2))
            P -= P.max(axis=-1, keepdims=True)
            np.exp(P, out=P)
            P /= P.sum(axis=-1, keepdims=True)
            out[p : p + step] = P @ Xp
        return out @ V.T
    field = _attention.Softmax(A, V, beta=beta)
    return np.stack([field.velocity(Xp) for Xp in X])


def _renormalise(Z: np.ndarray, layer: int) -> np.ndarray:
    """Rows of ``Z`` scaled to unit norm, or a FloatingPointError naming the layer."""
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.linalg.norm(Z, axis=-1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms < MIN_NORM):
        raise FloatingPointError(
            f"the tokens became non-finite or zero at layer {layer}; "
            "increase the number of layers `L` (smaller step) or lower `sigma2`."
        )
    return Z / norms


def _gaussian_field(model: StochasticTransformer, Y: np.ndarray, rng: np.random.Generator):
    """Infinite-width noise at ``Y`` (paths, n, d): Gaussian with covariance K(y_i, y_j) I."""
    s1sq = model.sigma1**2
    sq = s1sq * np.einsum("pnd,pnd->pn", Y, Y)
    gram = s1sq * (Y @ np.swapaxes(Y, -1, -2))
    K = _general_kernel(model.activation, sq[:, :, None], sq[:, None, :], gram, model.sigma2)
    lam, U = np.linalg.eigh(K)
    root = U * np.sqrt(np.clip(lam, 0.0, None))[:, None, :]
    return root @ rng.standard_normal(Y.shape)


def _phi_inplace(activation: str):
    """The activation applied in place to a float64 array."""
    if activation == "relu":
        return lambda u: np.maximum(u, 0.0, out=u)
    if activation == "erf":
        return lambda u: special.erf(u, out=u)
    if activation == "tanh":
        return lambda u: np.tanh(u, out=u)
    return lambda u: u


def _mlp(activation: str, Y: np.ndarray, W1: np.ndarray, W2: np.ndarray) -> np.ndarray:
    """``W_2 phi(W_1 y_i) / sqrt(m)`` for ``Y`` (paths, n, d), ``W1`` (paths, m, d) and ``W2``
    (paths, d, m), without an ``n x m`` array when ``n m`` exceeds :data:`TILE_ELEMENTS`.

    Small layers are computed over groups of paths at once; larger ones per path in tiles of
    (rows x hidden units), the activation in place and each tile's product with ``W2``
    accumulated into its rows (in a fixed order: results do not depend on the threads), on the
    attention module's worker threads when ``d`` is small enough for its pool. Memory O(tile) on
    top of the weights.
    """
    phi = _phi_inplace(activation)
    paths, n, _ = Y.shape
    m = W1.shape[1]
    if n * m <= TILE_ELEMENTS:
        step = max(1, TILE_ELEMENTS // (n * m))
        g = np.empty_like(Y)
        for p in range(0, paths, step):
            H = phi(Y[p : p + step] @ np.swapaxes(W1[p : p + step], -1, -2))
            g[p : p + step] = H @ np.swapaxes(W2[p : p + step], -1, -2)
    else:
        kernels = _attention._kernels
        g = np.zeros_like(Y)
        rows = min(n, TILE_ROWS)
        units = max(1, TILE_ELEMENTS // rows)
        tiles = [(p, slice(r, min(r + rows, n))) for p in range(paths) for r in range(0, n, rows)]

        def task(group) -> None:
            with np.errstate(over="ignore", invalid="ignore"):  # per thread; see _layer
                for p, r in group:
                    Yr, gr = Y[p, r], g[p, r]
                    for c in range(0, m, units):
                        H = phi(Yr @ W1[p, c : c + units].T)
                        gr += H @ W2[p, :, c : c + units].T

        kernels._run(task, tiles, paths * n * m, Y.shape[2])
    g /= np.sqrt(m)
    return g


class _Noise:
    """Draws the MLP of each layer for a batch of paths, in one of the two readings."""

    def __init__(self, model: StochasticTransformer, paths: int, d: int, rng: np.random.Generator):
        self.model, self.paths, self.d, self.rng = model, paths, d, rng
        self.W1 = None
        if model.width is not None and model.reading == "fixed_first":
            self.W1 = model.sigma1 * rng.standard_normal((paths, model.width, d))

    def draw(self):
        """Weights ``(W1, W2)`` of one layer, or ``None`` at infinite width."""
        m, p, d = self.model.width, self.paths, self.d
        if m is None:
            return None
        W1 = (
            self.W1
            if self.W1 is not None
            else self.model.sigma1 * self.rng.standard_normal((p, m, d))
        )
        W2 = self.model.sigma2 * self.rng.standard_normal((p, d, m))
        return W1, W2

    def field(self, Y: np.ndarray, weights) -> np.ndarray:
        """The MLP output ``g(y_i)`` (paths, n, d) for the drawn weights."""
        if weights is None:
            return _gaussian_field(self.model, Y, self.rng)
        return _mlp(self.model.activation, Y, *weights)


def _layer(model, X, h, noise: _Noise, A, V, layer, groups=None, sign=1.0, weights=None):
    """One layer: attention step, MLP noise (common to every token), renormalisation.

    Overflow is not warned about here: :func:`_renormalise` turns it into a FloatingPointError
    that names the layer and a remedy.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        Y = X
        if model.attention:
            # at infinite width the noise takes O(n^2) memory and O(n^3) time per path anyway,
            # and its eigenvector root moves by ~1e-11 when Y moves by an ulp: there the drift
            # stays the batched dense one, so those results do not move with the slabs' round-off
            Y = X + h * _softmax_drift(X, A, V, model.beta, groups, dense=model.width is None)
        if weights is None:
            weights = noise.draw()
        g = noise.field(Y, weights)
        Z = Y + sign * np.sqrt(h) * g
    return _renormalise(Z, layer)


def _as_initial(X0: Any, paths: int) -> np.ndarray:
    """Initial tokens ``(n, d)`` (same for every path) or ``(paths, n, d)``, on the sphere."""
    arr = np.array(X0, dtype=np.float64)
    if arr.ndim == 3:
        if arr.shape[0] != paths:
            raise ValueError(
                f"`X0` of shape (paths, n, d) must have paths = {paths}; got {arr.shape}."
            )
        flat = as_sphere_tokens(arr.reshape(-1, arr.shape[-1]), "X0")
        X = flat.reshape(arr.shape)
    else:
        X = np.broadcast_to(as_sphere_tokens(arr, "X0"), (paths, *arr.shape)).copy()
    if X.shape[-1] < 2:
        raise ValueError(f"the dimension `d` must be at least 2; `X0` has d = {X.shape[-1]}.")
    return X


def _progress(iterable, progress: bool, desc: str):
    if not progress:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:  # pragma: no cover - tqdm is in the dev environment
        raise ImportError("`progress=True` needs tqdm: pip install tqdm.") from exc
    return tqdm(iterable, desc=desc, leave=False)


def simulate(
    model: StochasticTransformer,
    X0: Any,
    T: float,
    L: int,
    *,
    paths: int = 1,
    save_every: int = 1,
    rng: Any = None,
    progress: bool = False,
) -> StochasticTrajectory:
    r"""Run ``L`` layers of the random-MLP transformer with step ``h = T / L`` on many paths.

    .. math:: x_i \leftarrow \frac{y_i + \sqrt h\, W_2\varphi(W_1 y_i)/\sqrt m}
              {|y_i + \sqrt h\, W_2\varphi(W_1 y_i)/\sqrt m|},\qquad y_i = x_i + h\,b_i(X)

    The weights are common to the tokens of a path and independent across paths.

    Parameters
    ----------
    model : StochasticTransformer
    X0 : (n, d) or (paths, n, d) array_like
        Initial tokens on the unit sphere, ``d >= 2``.
    T : float
        Final depth (time).
    L : int
        Number of layers, at least 1.
    paths : int
        Independent Monte-Carlo paths, simulated together.
    save_every : int
        Keep every ``save_every``-th layer (the last layer is always kept).
    rng : Generator, int or None
    progress : bool
        Show a tqdm progress bar over the layers.

    Returns
    -------
    StochasticTrajectory
        ``states`` has shape ``(paths, len(times), n, d)``.

    Raises
    ------
    ValueError
        For ``d < 2``, ``L < 1``, tokens off the sphere or bad model parameters.
    FloatingPointError
        If a token becomes non-finite or zero (never a silent NaN).

    References
    ----------
    Agazzi et al., arXiv:2604.26898 (model reconstructed from the summary; see the book).

    Examples
    --------
    >>> model = StochasticTransformer(activation="relu", width=8)
    >>> X0 = np.eye(3)
    >>> traj = simulate(model, X0, T=1.0, L=10, paths=4, rng=0)
    >>> traj.states.shape
    (4, 11, 3, 3)
    >>> bool(np.allclose(np.linalg.norm(traj.states, axis=-1), 1.0))
    True
    """
    if not isinstance(model, StochasticTransformer):
        raise TypeError("`model` must be a StochasticTransformer.")
    T = check_positive(T, "T")
    L = check_int(L, "L", minimum=1)
    paths = check_int(paths, "paths", minimum=1)
    save_every = check_int(save_every, "save_every", minimum=1)
    rng = as_rng(rng)
    X = _as_initial(X0, paths)
    d = X.shape[-1]
    A, V = model.matrices(d)
    h = T / L
    noise = _Noise(model, paths, d, rng)
    keep = sorted(set(range(0, L + 1, save_every)) | {L})
    states = np.empty((paths, len(keep), *X.shape[1:]))
    states[:, 0] = X
    k = 1
    for layer in _progress(range(1, L + 1), progress, "layers"):
        X = _layer(model, X, h, noise, A, V, layer)
        if k < len(keep) and keep[k] == layer:
            states[:, k] = X
            k += 1
    return StochasticTrajectory(np.asarray(keep, dtype=np.float64) * h, states, model, L)
