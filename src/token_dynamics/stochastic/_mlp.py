r"""The random MLP of one layer and its infinite-width Gaussian field (private module).

``G(y) = W sigma(U y / sqrt(d) + b_U) / sqrt(m) + b_W``, drawn afresh at every layer of the
model (1.1) of Agazzi et al. (2026), evaluated in tiles whatever the width; at infinite width
the centred Gaussian field of covariance ``kappa(<x, y>) I_d``, sampled exactly at the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from scipy import special

from .. import attention as _attention
from .._typing import ArrayLike, SeedLike
from .._validation import (
    as_real_array,
    as_rng,
    as_sphere_tokens,
    check_int,
    check_positive,
)
from ._kernels import _check_activation, _interpolant, kappa, kappa_prime

__all__ = ["MLPNoise"]

#: Largest array (entries) a batched step allocates at once: an ``n x n`` score matrix over a
#: group of paths, or an ``n x m`` hidden layer. Larger problems are cut into row slabs
#: (attention) and (rows x hidden units) tiles (MLP, :data:`MLP_TILE_ELEMENTS`), which stay in
#: a core's L2 cache, so the memory of a layer is O(n d + m d) (the weights), whatever ``n``
#: and ``m``.
TILE_ELEMENTS = 2**14
#: Rows of one MLP tile (fewer when ``n`` is smaller); its hidden units fill
#: :data:`MLP_TILE_ELEMENTS`. Measured at N = 4096, d = 16, m = 4096 and 16384 on the 2-core
#: machine: 128 x 128 tiles ran within 10 % of 256 x 64 and 64 x 256 and 25 % faster than
#: 1024 x 16; tiles large enough for OpenBLAS to thread their products (up to 4096 x 256) were
#: at most 20 % faster, for 16x the memory. The MLP is bound by its skinny products: one
#: whole-array MLP takes longer.
TILE_ROWS = 128
#: Entries of one MLP tile (128 x 1024: 1 MiB of float64, in a core's L2 cache). On one thread
#: tiles of 2^14 to 2^17 entries ran within 7 % of each other, but the small ones made two
#: threads slower than one at d <= 8 (each tile is a few short numpy calls, each a turn at the
#: GIL): one layer, relu, one path, serial / two threads, 128 x 128 against 128 x 1024 tiles:
#: d = 3, N = m = 4096: 24 / 30 against 23 / 16 ms; d = 8, N = 2048, m = 4096: 16 / 19 against
#: 17 / 9.6 ms; d = 16, N = m = 4096: 44 / 40 against 42 / 23 ms; d = 64, N = m = 2048: 27 /
#: 17 against 25 / 13 ms.
MLP_TILE_ELEMENTS = 2**17
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

    Raises
    ------

    ValueError
        If `activation` is unknown, `width` is not a positive integer or ``None``, or a bias is
        negative or not finite.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, §1.1 and Remark 1.1.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise
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

    def kappa(self, t: ArrayLike, *, d: int) -> np.ndarray:
        """:func:`kappa` with this noise's activation and biases."""
        return kappa(t, self.activation, d=d, sigma_U=self.sigma_U, sigma_W=self.sigma_W)

    def kappa_prime(self, t: ArrayLike, *, d: int) -> np.ndarray:
        """:func:`kappa_prime` with this noise's activation and bias."""
        return kappa_prime(t, self.activation, d=d, sigma_U=self.sigma_U, sigma_W=self.sigma_W)

    def sample(self, Y: ArrayLike, *, rng: SeedLike = None) -> np.ndarray:
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
    simulations (measured at 60 x 40 x 40). Both run with BLAS held to one thread
    (``attention._kernels.serial_blas``): OpenBLAS's threads wait on each other by spinning, and
    with the other core busy (a second process, the tests' other worker) 8 Cholesky factors of
    256 x 256 took 1.3 s instead of 4 ms; on two free cores one thread is as fast up to n = 256
    and 1.1x / 1.2x / 1.3x slower at n = 1024 / 2048 / 4096 (measured).
    """
    n = K.shape[-1]
    scale = np.max(np.diagonal(K, axis1=-2, axis2=-1), axis=-1)
    with _attention._kernels.serial_blas():
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
    attention module's worker threads (BLAS held to one thread meanwhile).
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
        units = max(1, MLP_TILE_ELEMENTS // rows)
        tiles = [(p, slice(r, min(r + rows, n))) for p in range(paths) for r in range(0, n, rows)]

        def task(group) -> None:
            # per thread; see _normalise. The hidden tile lives in the thread's scratch buffer
            with (
                np.errstate(over="ignore", invalid="ignore"),
                kernels.scratch(rows * units, Y.dtype) as buf,
            ):
                for p, r in group:
                    Yr, gr = Y[p, r], g[p, r]
                    for c in range(0, m, units):
                        Uc = U[p, c : c + units]
                        H = buf[: Yr.shape[0] * Uc.shape[0]].reshape(Yr.shape[0], -1)
                        np.matmul(Yr, Uc.T, out=H)
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


def _as_initial(X0: ArrayLike, paths: int, name: str = "X0") -> np.ndarray:
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
