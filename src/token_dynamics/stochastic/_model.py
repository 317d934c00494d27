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

from .._validation import as_matrix, as_rng, as_sphere_tokens, check_int, check_positive
from ._kernels import _check_activation, _general_kernel, _phi

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


def _softmax_drift(X: np.ndarray, A: np.ndarray, V: np.ndarray, beta: float, groups=None):
    """Batched softmax self-attention ``b_i = V sum_j softmax_j(beta <A x_i, x_j>) x_j``.

    ``X`` is ``(paths, n, d)``. ``groups`` (a list of slices of the token axis) restricts
    attention to each slice, so independent systems can share one array (and one draw of the
    weights). Kept private and batched; ``tests/test_stochastic.py`` checks it against
    ``token_dynamics.attention.Softmax``.
    """
    if groups is not None:
        return np.concatenate([_softmax_drift(X[:, g], A, V, beta) for g in groups], axis=1)
    # a contiguous transpose keeps the batched product on BLAS (10x faster for small d)
    P = (X @ (beta * A.T)) @ np.ascontiguousarray(np.swapaxes(X, -1, -2))
    P -= P.max(axis=-1, keepdims=True)
    np.exp(P, out=P)
    P /= P.sum(axis=-1, keepdims=True)
    return (P @ X) @ V.T


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


class _Noise:
    """Draws the MLP of each layer for a batch of paths, in one of the two readings."""

    def __init__(self, model: StochasticTransformer, paths: int, d: int, rng: np.random.Generator):
        self.model, self.paths, self.d, self.rng = model, paths, d, rng
        self.phi = _phi(model.activation)[0]
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
        W1, W2 = weights
        return (self.phi(Y @ np.swapaxes(W1, -1, -2)) @ np.swapaxes(W2, -1, -2)) / np.sqrt(
            W1.shape[1]
        )


def _layer(model, X, h, noise: _Noise, A, V, layer, groups=None, sign=1.0, weights=None):
    """One layer: attention step, MLP noise (common to every token), renormalisation.

    Overflow is not warned about here: :func:`_renormalise` turns it into a FloatingPointError
    that names the layer and a remedy.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        Y = X + h * _softmax_drift(X, A, V, model.beta, groups) if model.attention else X
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
