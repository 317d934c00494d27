r"""The random MLP of one layer and its infinite-width Gaussian field (private module).

``G(y) = W sigma(U y / sqrt(d) + b_U) / sqrt(m) + b_W``, drawn afresh at every layer of the
model (1.1) of Agazzi et al. (2026), evaluated in tiles whatever the width; at infinite width
the centred Gaussian field of covariance ``kappa(<x, y>) I_d``, sampled exactly at the tokens.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np
from scipy import special

from .. import attention as _attention
from .._backend import is_numpy
from .._typing import ArrayLike, SeedLike
from .._validation import (
    as_real_array,
    as_rng,
    as_sphere_tokens,
    check_int,
    check_positive,
    sphere_tol,
)
from ._kernels import (
    GAP_SWITCH,
    _check_activation,
    _gap_derivatives,
    _gap_function,
    _interpolant,
    kappa,
    kappa_prime,
)

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
#: Smallest separation of two tokens (and, for an odd field, of a token and another's antipode)
#: at which the infinite-width field is drawn by the plain Cholesky factor of its kernel matrix:
#: a Schur complement of at least about kappa'(1) 1e-3^2 = 1e-6 kappa'(1) carries the factor's
#: rounding, a few eps kappa(1) per entry (n eps kappa(1) at worst), as a relative 1e-10 (1e-10 n
#: at worst) of the increment's variance; an error of the kernel itself (the Chebyshev
#: interpolant's, 1e-13) is smooth in t and moves that variance by a relative 1e-10 at any
#: separation. Closer tokens go to the tree sampler. Measured: at 1e-2 instead, the deep-limit
#: coupling of the book (4 tokens, 4 depths, 1024 steps, 100 paths) took 6x longer.
FAST_SEPARATION = 1e-3
#: Covariances of the tree's increments summed from gaps (four values of ``phi``, each with an
#: absolute rounding error of a few ulps of itself, and of ``kappa(1)`` where ``phi`` is formed
#: as a difference of kernel values) are recomputed without cancellation where the largest of
#: those terms exceeds this many times the geometric mean of the two variances: what is kept
#: carries a correlation error below about ``4 * 2^15 * 2 eps = 6e-11``, within the accuracy of
#: the fast path (a relative 1e-10 of an increment's variance at FAST_SEPARATION); what is
#: recomputed is exact to a few eps in correlation (``_far_covariances``,
#: ``_increment_covariances``). Measured on the book's deep-limit coupling (660 tree draws of
#: about 2 paths x 20 tokens, increments of 1e-4 to 1e-2 in four clusters): 0.74 s with 2^15,
#: 0.95 s with 2^13 (1.5e-11).
REFINE_RATIO = 2.0**15
#: Largest ratio of the spread of the gaps a first or second difference spans to their distance
#: from the kernel's singular points (``s = 0``, and ``s = 2`` for ReLU without bias) at which
#: the difference is integrated from ``phi'`` and ``phi''`` by Gauss-Legendre: the singularity
#: then lies at least ``2 / QUAD_RATIO = 16`` half-lengths from the interval, where the rules of
#: :data:`QUAD_RULES` converge geometrically (Bernstein ellipse). Beyond, the gaps themselves
#: are at most ``1 + 1 / QUAD_RATIO = 9`` times the difference, and their plain difference
#: loses at most that factor.
QUAD_RATIO = 0.125
#: Gauss-Legendre rules (nodes per axis) of those differences, by the ratio ``r`` of the spread to
#: the distance: the singularity lies near ``1 + 2 / r`` on the rule's interval ``[-1, 1]``, the
#: ellipse parameter is about ``4 / r`` and the error about ``(4 / r)^(-2 nodes)``: below 4e-19
#: at ``r = QUAD_RATIO`` with 6 nodes, 2.4e-16 at 1e-2 with 3, 4e-19 at 1e-4 with 2 and 6e-18
#: at 1e-8 with 1 (the midpoint: tight clusters far apart, the common case).
QUAD_RULES = ((1e-8, 1), (1e-4, 2), (1e-2, 3), (QUAD_RATIO, 6))
#: Entries of the d-vectors of the pairs of increments whose covariance is recomputed at once
#: (six d-vectors per pair: 2^18 entries are 2 MiB).
PAIR_CHUNK = 2**18


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
            Points on the unit sphere; with a paths axis, one independent draw per path. With a
            finite width, also an array of torch, JAX, CuPy or another array-API library: the
            weights are then drawn by that library on its device and ``G`` is computed there,
            in the dtype of `Y` (seeds as in :func:`simulate`).
        rng : Generator, int or None
            (or a ``torch.Generator`` for torch tensors)

        Returns
        -------
        ndarray (or the array type of `Y`)
            ``G(y_i)``, same shape as `Y`.

        Raises
        ------
        TypeError
            If `Y` is not a numpy array and the width is infinite (the exact sampler of the
            Gaussian field runs on numpy).
        """
        if not is_numpy(Y):  # torch, JAX, ...: drawn and evaluated on the array's device
            from ._array_api import sample_xp

            return sample_xp(self, Y, rng)
        arr = as_real_array(Y, "Y")  # complex or boolean points refused, not cast
        pts = _as_initial(arr, arr.shape[0] if arr.ndim == 3 else 1)
        G = _draw_field(self, pts, as_rng(rng))
        return G if arr.ndim == 3 else G[0]


def _kernel_matrix(noise: MLPNoise, Y: np.ndarray) -> np.ndarray:
    """``kappa(<y_i, y_j>)`` for unit rows ``Y`` (paths, n, d): shape (paths, n, n)."""
    d = Y.shape[-1]
    k = _interpolant(noise.activation, d, float(noise.sigma_U), float(noise.sigma_W))
    return k(np.clip(Y @ np.swapaxes(Y, -1, -2), -1.0, 1.0))


def _psd_root(K: np.ndarray) -> np.ndarray:
    """A factor ``R`` with ``R R^T = K`` for a batch of symmetric PSD kernel matrices.

    Cholesky, and where it fails (a kernel singular to rounding, e.g. coincident tokens), the
    eigenvalue root with the negative rounding clipped. Cholesky is 50 to 250 times faster than
    ``eigh`` on the small batched matrices of the simulations (measured at 60 x 40 x 40). Both
    run with BLAS held to one thread (``attention._kernels.serial_blas``): OpenBLAS's threads
    wait on each other by spinning, and with the other core busy (a second process, the tests'
    other worker) 8 Cholesky factors of 256 x 256 took 1.3 s instead of 4 ms; on two free cores
    one thread is as fast up to n = 256 and 1.1x / 1.2x / 1.3x slower at n = 1024 / 2048 / 4096
    (measured). The sampler itself uses :func:`_gaussian_field`.
    """
    with _attention._kernels.serial_blas():
        try:
            return np.linalg.cholesky(K)
        except np.linalg.LinAlgError:
            lam, U = np.linalg.eigh(0.5 * (K + np.swapaxes(K, -1, -2)))
            return U * np.sqrt(np.clip(lam, 0.0, None))[..., None, :]


def _half_sq_dist(Y: np.ndarray, sign: float) -> np.ndarray:
    """``|y_i - sign y_j|^2 / 2`` (paths, n, n) for unit rows ``Y`` (paths, n, d), from the
    differences where it is small (``1 - <y_i, y_j>`` would cancel there)."""
    S = 1.0 - sign * (Y @ np.swapaxes(Y, -1, -2))
    p, i, j = np.nonzero(S < GAP_SWITCH)
    if p.size:
        diff = Y[p, i] - sign * Y[p, j]
        S[p, i, j] = 0.5 * np.einsum("kd,kd->k", diff, diff)
    return np.clip(S, 0.0, 2.0)


def _is_odd(noise: MLPNoise) -> bool:
    """``G(-x) = -G(x)`` exactly: an odd activation and no biases."""
    return noise.activation in ("erf", "tanh") and noise.sigma_U == 0.0 and noise.sigma_W == 0.0


def _nearest_neighbour_tree(S: np.ndarray, Sm: np.ndarray | None):
    """Prim's order of the tokens (paths, n): each token after the first with a parent among
    the earlier ones at the smallest gap ``S`` (or ``Sm``, gap to the antipode, sign -1, for an
    odd field). Returns ``order``, ``parent`` (position of the parent in ``order``) and
    ``sign``, each (paths, n); the first token's parent is itself."""
    paths, n, _ = S.shape
    rows = np.arange(paths)
    order = np.zeros((paths, n), dtype=np.intp)
    parent = np.zeros((paths, n), dtype=np.intp)
    sign = np.ones((paths, n))
    done = np.zeros((paths, n), dtype=bool)
    done[:, 0] = True
    best = S[:, 0].copy()
    best_sign = np.ones((paths, n))
    if Sm is not None:
        anti = Sm[:, 0] < best
        best = np.where(anti, Sm[:, 0], best)
        best_sign[anti] = -1.0
    best_pos = np.zeros((paths, n), dtype=np.intp)
    for pos in range(1, n):
        k = np.argmin(np.where(done, np.inf, best), axis=1)
        order[:, pos] = k
        parent[:, pos] = best_pos[rows, k]
        sign[:, pos] = best_sign[rows, k]
        done[rows, k] = True
        gap = S[rows, k]
        closer = gap < best
        best = np.where(closer, gap, best)
        best_sign = np.where(closer, 1.0, best_sign)
        best_pos = np.where(closer, pos, best_pos)
        if Sm is not None:
            gap = Sm[rows, k]
            closer = gap < best
            best = np.where(closer, gap, best)
            best_sign = np.where(closer, -1.0, best_sign)
            best_pos = np.where(closer, pos, best_pos)
    return order, parent, sign


def _symmetric(f, S: np.ndarray) -> np.ndarray:
    """``f`` applied to the upper triangle of the symmetric ``S`` (paths, n, n), mirrored."""
    n = S.shape[-1]
    iu = np.triu_indices(n)
    out = np.empty_like(S)
    vals = f(S[:, iu[0], iu[1]])
    out[:, iu[0], iu[1]] = vals
    out[:, iu[1], iu[0]] = vals
    return out


class _Gaps(NamedTuple):
    """The gap ``phi`` and its derivatives as functions of ``s`` (see ``_kernels``)."""

    phi: object
    dphi: object
    d2phi: object
    singular_at_two: bool


@functools.lru_cache(maxsize=8)
def _legendre(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on ``[0, 1]`` (weights summing to one)."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    return 0.5 * (x + 1.0), 0.5 * w


def _node_classes(ratio: np.ndarray):
    """``(mask, nodes, weights)`` of the rule of :data:`QUAD_RULES` for each ``ratio`` (``mask``
    a slice when one rule serves all)."""
    bounds = [b for b, _ in QUAD_RULES[:-1]]
    lo, hi = np.searchsorted(bounds, [np.min(ratio), np.max(ratio)])
    if lo == hi:
        yield (slice(None), *_legendre(QUAD_RULES[lo][1]))
        return
    cls = np.searchsorted(bounds, ratio)
    for c in range(lo, hi + 1):
        mask = cls == c
        if np.any(mask):
            yield (mask, *_legendre(QUAD_RULES[c][1]))


def _mean_on_segment(f, s0: np.ndarray, h: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    r""":math:`\int_0^1 f(s_0 + \theta h)\,d\theta` by Gauss-Legendre (1-D arrays)."""
    out = np.empty(s0.shape)
    for mask, x, w in _node_classes(ratio):
        out[mask] = f(s0[mask, None] + x * h[mask, None]) @ w
    return out


def _mean_on_square(f, s0, a, b, ratio) -> np.ndarray:
    r""":math:`\int_0^1\int_0^1 f(s_0 + \theta a + \eta b)\,d\theta\,d\eta` (tensor rule)."""
    out = np.empty(s0.shape)
    for mask, x, w in _node_classes(ratio):
        arg = s0[mask, None, None] + x[:, None] * a[mask, None, None]
        arg = arg + x * b[mask, None, None]
        out[mask] = (f(arg) @ w) @ w
    return out


def _room(lo: np.ndarray, hi: np.ndarray, singular_at_two: bool) -> np.ndarray:
    """Distance of gaps in ``[lo, hi]`` from the singular points of ``phi''``."""
    return np.minimum(lo, 2.0 - hi) if singular_at_two else lo


def _first_difference(gaps, s0: np.ndarray, s1: np.ndarray, h: np.ndarray) -> np.ndarray:
    r""":math:`\phi(s_1) - \phi(s_0)` from gaps ``s0``, ``s1`` and their difference ``h``, each
    accurate to relative rounding: ``h`` times the mean of :math:`\phi'` on the segment where
    the segment is short against its distance from the singular points (relative error a few
    eps), the plain difference elsewhere (where it is at least ``QUAD_RATIO`` of the gaps)."""
    phi, dphi, _, sing2 = gaps
    room = _room(np.minimum(s0, s1), np.maximum(s0, s1), sing2)
    quad = np.abs(h) <= QUAD_RATIO * room
    out = np.empty(s0.shape)
    if np.any(quad):
        ratio = np.abs(h[quad]) / np.maximum(room[quad], np.finfo(float).tiny)
        out[quad] = h[quad] * _mean_on_segment(dphi, s0[quad], h[quad], ratio)
    if not np.all(quad):
        out[~quad] = phi(s1[~quad]) - phi(s0[~quad])
    return out


def _half_sq(v: np.ndarray) -> np.ndarray:
    return 0.5 * np.einsum("kd,kd->k", v, v)


def _half_dot(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return 0.5 * np.einsum("kd,kd->k", u, v)


def _increment_covariances(gaps, Y, A, p, i, j) -> np.ndarray:
    r"""``Cov(V_i, V_j)`` for the increments :math:`V_i = G(y_i) - G(a_i)` of pairs ``(p, i, j)``
    (1-D index arrays; ``i = 0`` is the root, :math:`V_0 = G(y_0)`) that
    :func:`_far_covariances` leaves: one increment at least as long as a fixed fraction of its
    distance from the other (a jump between clusters and an increment near one of its ends,
    for instance), without cancellation.

    With the gaps :math:`s_{00} = s(a_i, a_j)`, :math:`s_{10} = s(y_i, a_j)`,
    :math:`s_{01} = s(a_i, y_j)`, :math:`s_{11} = s(y_i, y_j)`, each from its own difference
    vector, the covariance :math:`\phi(s_{10}) + \phi(s_{01}) - \phi(s_{11}) - \phi(s_{00})`
    is a difference of two first differences along the shorter increment, e.g. for
    :math:`|\delta_j| \le |\delta_i|` (:math:`\delta = y - a`)

    .. math:: [\phi(s_{01}) - \phi(s_{00})] - [\phi(s_{11}) - \phi(s_{10})],

    each from :func:`_first_difference` with the differences of the gaps from the difference
    vectors, :math:`s_{01} - s_{00} = -\tfrac12\langle\delta_j, (a_i - y_j) + (a_i -
    a_j)\rangle` and :math:`s_{11} - s_{10} = -\tfrac12\langle\delta_j, (y_i - y_j) + (y_i
    - a_j)\rangle`: exact to a few eps of :math:`|\delta_j|` times the longer increment or
    the distance, which the longer increment here is at least :data:`QUAD_RATIO` / 4 of. The
    root's covariance is the one first difference :math:`\phi(s_{00}) - \phi(s_{01})`.
    """
    out = np.empty(p.shape)
    step = max(1, PAIR_CHUNK // (6 * Y.shape[-1]))
    for c in range(0, p.size, step):
        pp, ii, jj = p[c : c + step], i[c : c + step], j[c : c + step]
        yi, ai, yj, aj = Y[pp, ii], A[pp, ii], Y[pp, jj], A[pp, jj]
        di, dj = yi - ai, yj - aj
        e, f, g, h = ai - aj, yi - aj, yi - yj, ai - yj
        s00, s10, s11, s01 = _half_sq(e), _half_sq(f), _half_sq(g), _half_sq(h)
        al, be = _half_dot(di, f + e), -_half_dot(dj, h + e)  # s10 - s00, s01 - s00
        h1 = -_half_dot(dj, g + f)  # s11 - s10
        h2 = _half_dot(di, g + h)  # s11 - s01
        along_j = _half_sq(dj) <= _half_sq(di)
        root = ii == 0
        # along j: [phi(s01) - phi(s00)] - [phi(s11) - phi(s10)]
        # along i: [phi(s10) - phi(s00)] - [phi(s11) - phi(s01)]
        # the root: [phi(s00) - phi(s01)] - 0
        s0a = np.where(root, s01, s00)
        s1a = np.where(root, s00, np.where(along_j, s01, s10))
        ha = np.where(root, -be, np.where(along_j, be, al))
        s0b = np.where(root, s00, np.where(along_j, s10, s01))
        s1b = np.where(root, s00, s11)
        hb = np.where(root, 0.0, np.where(along_j, h1, h2))
        diffs = _first_difference(
            gaps, np.concatenate([s0a, s0b]), np.concatenate([s1a, s1b]), np.concatenate([ha, hb])
        )
        out[c : c + step] = diffs[: pp.size] - diffs[pp.size :]
    return out


def _far_covariances(gaps, Y, A, corners, p, i, j):
    r"""The covariances of the pairs ``(p, i, j)`` of increments that are short against their
    distance (far-apart clusters): returns ``(done, values)``, the pairs it covers and their
    covariances.

    With the gaps :math:`s_{00} = s(a_i, a_j)`, :math:`s_{10} = s(y_i, a_j)`,
    :math:`s_{01} = s(a_i, y_j)`, :math:`s_{11} = s(y_i, y_j)` (``corners``) and their
    differences :math:`\alpha = s_{10} - s_{00}`, :math:`\beta = s_{01} - s_{00}`,
    :math:`\gamma = s_{11} - s_{10} - s_{01} + s_{00} = -\langle\delta_i, \delta_j\rangle`
    (:math:`\delta = y - a`), the covariance is minus the mixed second difference of
    :math:`\psi(x) = \phi(s_{00} + x)`:

    .. math:: \operatorname{Cov}(V_i, V_j) = -\Big(\gamma\int_0^1\phi'(s_{00} + \alpha
              + \beta + \theta\gamma)\,d\theta + \alpha\beta\int_0^1\!\!\int_0^1
              \phi''(s_{00} + \theta\alpha + \eta\beta)\,d\theta\,d\eta\Big),

    by Gauss-Legendre (:data:`QUAD_RULES`) where :math:`|\alpha| + |\beta| + |\gamma|` is at
    most :data:`QUAD_RATIO` times the distance of the gaps from the singular points.
    The differences come from inner products instead of difference vectors:
    :math:`\alpha = \tfrac12(|y_i|^2 - |a_i|^2) - \langle\delta_i, a_j\rangle`,
    :math:`\beta = \tfrac12(|y_j|^2 - |a_j|^2) - \langle\delta_j, a_i\rangle`
    (the first terms from :math:`\tfrac12\langle\delta, y + a\rangle`), each with an absolute
    error of a few eps of :math:`|\delta_i|` (of :math:`|\delta_i||\delta_j|` for
    :math:`\gamma`). Against the terms they enter, :math:`\alpha\beta\phi''(s_{00})` with
    :math:`|\alpha| \approx |\delta_i||a_i - a_j|` and :math:`|\phi''(s_{00})| \lesssim
    \kappa'(1) / |a_i - a_j|` (ReLU, the most singular), that is a few eps of
    :math:`\kappa'(1)|\delta_i||\delta_j|`, the scale of the covariance. The root's row
    (:math:`a_0 = y_0`, :math:`\delta_0 = 0`) is the first difference
    :math:`\phi(s(y_0, a_j)) - \phi(s(y_0, y_j)) = -\beta\int_0^1\phi'(s_{00}
    + \theta\beta)\,d\theta`.
    """
    s00, s10, s01, s11 = corners
    _, dphi, d2phi, sing2 = gaps
    yi, ai, yj, aj = Y[p, i], A[p, i], Y[p, j], A[p, j]
    di, dj = yi - ai, yj - aj
    al = _half_dot(di, yi + ai) - 2.0 * _half_dot(di, aj)
    be = _half_dot(dj, yj + aj) - 2.0 * _half_dot(dj, ai)
    ga = -2.0 * _half_dot(di, dj)
    lo = np.minimum(np.minimum(s00, s10), np.minimum(s01, s11))
    hi = np.maximum(np.maximum(s00, s10), np.maximum(s01, s11))
    room = _room(lo, hi, sing2)
    spread = np.abs(al) + np.abs(be) + np.abs(ga)
    done = spread <= QUAD_RATIO * room
    a, b, g, s0, i = al[done], be[done], ga[done], s00[done], i[done]
    ratio = spread[done] / np.maximum(room[done], np.finfo(float).tiny)
    vals = np.empty(a.shape)
    inc = i > 0  # the root's row has alpha = gamma = 0: its second term vanishes
    if np.any(inc):
        a, b, g, s0, r = a[inc], b[inc], g[inc], s0[inc], ratio[inc]
        first = g * _mean_on_segment(dphi, s0 + a + b, g, r)
        vals[inc] = -(first + a * b * _mean_on_square(d2phi, s0, a, b, r))
    root = ~inc
    if np.any(root):
        b, s0, r = be[done][root], s00[done][root], ratio[root]
        vals[root] = -b * _mean_on_segment(dphi, s0, b, r)
    return done, vals


def _pair_gaps(S, Sm, par, sgn, p, i, j):
    """The gaps ``(s00, s10, s01, s11)`` of pairs ``(p, i, j)`` of tree edges: ``s(a_i, a_j)``,
    ``s(y_i, a_j)``, ``s(a_i, y_j)``, ``s(y_i, y_j)`` from the gaps ``S`` (and ``Sm``, to the
    antipodes, for anchors of sign -1)."""
    pi, pj = par[p, i], par[p, j]
    s11, s10, s01, s00 = S[p, i, j], S[p, i, pj], S[p, pi, j], S[p, pi, pj]
    if Sm is not None:
        si, sj = sgn[p, i] > 0, sgn[p, j] > 0
        s10 = np.where(sj, s10, Sm[p, i, pj])
        s01 = np.where(si, s01, Sm[p, pi, j])
        s00 = np.where(si == sj, s00, Sm[p, pi, pj])
    return s00, s10, s01, s11


def _correlation_root(R: np.ndarray) -> np.ndarray:
    """A root of the increments' correlation matrices ``R`` (paths, n, n): Cholesky; where it
    fails, Cholesky of ``R + tau I`` for ``tau = n^2 eps, 256 n^2 eps, ...`` up to
    ``n * 8 REFINE_RATIO eps``, the most the errors of ``R``'s entries (each at most
    ``8 REFINE_RATIO eps``, :data:`REFINE_RATIO`) can move its eigenvalues; then the clipped
    eigen-root. BLAS on one thread (see :func:`_psd_root`). Measured on the book's
    coupled-width table (40 tokens in four clusters, 256 draws of 100 paths): the eigen-root
    ran at 228 of the 256 draws, its smallest eigenvalues about -1.6e-11 (the errors of the
    entries kept from the summed gaps); shifted, none, and the table took 10.8 s of CPU
    instead of 13.6 s."""
    n = R.shape[-1]
    eps = np.finfo(float).eps
    tau, bound = n * n * eps, n * 8.0 * REFINE_RATIO * eps
    with _attention._kernels.serial_blas():
        try:
            return np.linalg.cholesky(R)
        except np.linalg.LinAlgError:
            pass
        while tau <= 256.0 * bound:
            try:
                return np.linalg.cholesky(R + min(tau, bound) * np.eye(n))
            except np.linalg.LinAlgError:
                tau *= 256.0
        lam, U = np.linalg.eigh(R)
        return U * np.sqrt(np.clip(lam, 0.0, None))[..., None, :]


def _tree_field(noise: MLPNoise, Y: np.ndarray, Z: np.ndarray) -> np.ndarray:
    r"""The field at ``Y`` (paths, n, d) as parent plus increment along a nearest-neighbour tree.

    With tokens in Prim's order, the variables are :math:`V_0 = G(y_0)` and the increments
    :math:`V_i = G(y_i) - \epsilon_i G(y_{p(i)})` (:math:`\epsilon_i = -1` only for an odd
    field whose token is nearer the antipode of its parent, :math:`G(-y) = -G(y)`). Their
    covariance is a signed sum of four gaps, e.g.

    .. math:: \operatorname{Cov}(V_i, V_j) = \phi(s(y_i, a_j)) + \phi(s(a_i, y_j))
              - \phi(s(y_i, y_j)) - \phi(s(a_i, a_j)),

    :math:`a_i = \epsilon_i y_{p(i)}`, :math:`s(x, y) = |x - y|^2/2` from the difference and
    :math:`\phi(s) = \kappa(1) - \kappa(1 - s)` without cancellation (the constants
    :math:`\kappa(1)` cancel exactly): every entry carries an absolute error of a few ulps of
    the gaps it sums, so the variance of an increment, :math:`2\phi(s(y_i, a_i))`, is exact to
    relative rounding at any separation, and so is its correlation with the increments of its
    own cluster. Where the gaps dwarf the covariance (more than :data:`REFINE_RATIO` times the
    geometric mean of the two variances: increments in different clusters, an increment and a
    jump between clusters, the root and an increment), the entry is recomputed without
    cancellation, as the mixed second difference of :math:`\phi` integrated from
    :math:`\phi'` and :math:`\phi''` or a difference of two first differences
    (:func:`_far_covariances`, :func:`_increment_covariances`), to a few eps in correlation.
    This covariance is factored as a correlation matrix (:func:`_correlation_root`: Cholesky,
    shifted by at most the errors of its entries where rounding makes it indefinite, e.g. more
    tokens in a tight cluster than the sphere has directions, whose increments are dependent
    up to the cluster's curvature; the common noise stays), then ``G`` is rebuilt along the
    tree. Coincident tokens have zero increments, and antipodal tokens of an odd field exactly
    opposite values.

    Measured (d = 6, three clusters of four tokens, relu, erf and tanh): the covariance of two
    increments in different clusters 1e-3 to 1e-9 across agrees with the exact one (rational
    arithmetic on the kernel's interpolant, tanh) to 1e-13 of the geometric mean of their
    variances at 1e-3; at smaller diameters the values of ``G`` themselves, of order one, carry
    an increment of size ``|delta|`` to ``eps / |delta|`` (1e-7 at 1e-9), and so do the
    measured covariances. Before, with the gaps summed, they were off by 10 to 2000 times their
    scale below 1e-8. Left as it was: for ReLU without bias two clusters near each other's
    antipodes (where :math:`\kappa''` blows up) fall back to plain differences of ``phi``, with
    an error of a few eps of ``kappa(1)``.
    """
    paths, n, d = Y.shape
    phi, kappa1 = _gap_function(noise.activation, d, float(noise.sigma_U), float(noise.sigma_W))
    odd = _is_odd(noise)
    S = _half_sq_dist(Y, 1.0)
    Sm = _half_sq_dist(Y, -1.0) if odd else None
    order, parent, sign = _nearest_neighbour_tree(S, Sm)
    # the tree in the tokens' own indices: token k's parent and sign (token 0 is the root)
    prow = np.arange(paths)[:, None]
    par = np.zeros((paths, n), dtype=np.intp)
    sgn = np.ones((paths, n))
    par[prow, order] = np.take_along_axis(order, parent, axis=1)
    sgn[prow, order] = sign
    # flat indices of (i, p(j)), (p(i), j), (p(i), p(j)) in a (paths, n, n) array
    base = (np.arange(paths) * n * n)[:, None, None]
    cols = np.arange(n)
    at_ij = base + cols[None, :, None] * n + par[:, None, :]
    at_ij_t = base + par[:, :, None] * n + cols[None, None, :]
    at_pp = base + par[:, :, None] * n + par[:, None, :]

    def corners(X: np.ndarray, Xm: np.ndarray | None):
        """``X`` (a symmetric function of the gaps) at (y_i, a_j), (a_i, y_j), (a_i, a_j);
        ``Xm`` the same of the gaps to the antipodes, for anchors of sign -1."""
        x = X.reshape(-1)
        if Xm is None:
            return x[at_ij], x[at_ij_t], x[at_pp]
        xm = Xm.reshape(-1)
        si, sj = sgn[:, :, None] > 0, sgn[:, None, :] > 0
        t2 = np.where(sj, x[at_ij], xm[at_ij])
        t3 = np.where(si, x[at_ij_t], xm[at_ij_t])
        return t2, t3, np.where(si == sj, x[at_pp], xm[at_pp])

    anti = Sm is not None and bool(np.any(sgn < 0))
    P = _symmetric(phi, S)
    t2, t3, t4 = corners(P, _symmetric(phi, Sm) if anti and Sm is not None else None)
    C = t2 + t3
    C -= P
    C -= t4
    C[:, 0, :] = t2[:, 0, :] - P[:, 0, :]  # Cov(G(y_0), V_j)
    C[:, :, 0] = C[:, 0, :]
    C[:, 0, 0] = kappa1
    # where the four terms dwarf the covariance's own scale, recompute it without cancellation:
    # the terms are phi >= 0 (|kappa| <= kappa(1)), each with an error of a few ulps of itself
    # or, where its gap is at least GAP_SWITCH (phi formed as kappa(1) - kappa), of kappa(1)
    big = np.maximum(np.maximum(t2, t3), np.maximum(P, t4))
    var = np.clip(np.diagonal(C, axis1=1, axis2=2), 0.0, None)
    scale2 = REFINE_RATIO * np.sqrt(var[:, :, None] * var[:, None, :])
    valid = (var[:, :, None] > 0) & (var[:, None, :] > 0)
    valid &= np.triu(np.ones((n, n), dtype=bool), 1)
    refine = valid & (big > scale2)
    maybe = valid & ~refine & (abs(kappa1) > scale2)
    Sg = Sm if anti else None
    if np.any(maybe):
        p, i, j = np.nonzero(maybe)
        far = np.max(_pair_gaps(S, Sg, par, sgn, p, i, j), axis=0) >= GAP_SWITCH
        refine[p[far], i[far], j[far]] = True
    if np.any(refine):
        dphi, d2phi, sing2 = _gap_derivatives(
            noise.activation, d, float(noise.sigma_U), float(noise.sigma_W)
        )
        gaps = _Gaps(phi, dphi, d2phi, sing2)
        A = sgn[:, :, None] * Y[prow, par]  # the anchors a_i (a_0 = y_0)
        p, i, j = np.nonzero(refine)
        corners_s = _pair_gaps(S, Sg, par, sgn, p, i, j)
        done, vals = _far_covariances(gaps, Y, A, corners_s, p, i, j)
        C[p[done], i[done], j[done]] = vals
        C[p[done], j[done], i[done]] = vals
        rest = ~done
        if np.any(rest):
            p, i, j = p[rest], i[rest], j[rest]
            vals = _increment_covariances(gaps, Y, A, p, i, j)
            C[p, i, j] = vals
            C[p, j, i] = vals
    scale = np.sqrt(np.clip(np.diagonal(C, axis1=1, axis2=2), 0.0, None))
    safe = np.where(scale > 0, scale, 1.0)
    R = C / safe[:, :, None] / safe[:, None, :]  # its lower triangle is read
    zero = scale == 0  # coincident tokens: no increment
    R[zero[:, :, None] | zero[:, None, :]] = 0.0
    R[:, np.arange(n), np.arange(n)] = 1.0
    L = _correlation_root(R)
    V = (scale[:, :, None] * L) @ Z
    G = np.empty_like(V)
    rows = np.arange(paths)
    G[:, 0] = V[:, 0]
    for pos in range(1, n):
        k = order[:, pos]
        G[rows, k] = sgn[rows, k, None] * G[rows, par[rows, k]] + V[rows, k]
    return G


def _pair_field(noise: MLPNoise, Y: np.ndarray, Z: np.ndarray) -> np.ndarray:
    r"""The field at two tokens per path (paths, 2, d): :func:`_tree_field`'s law in closed form.

    With :math:`a = \epsilon y_0` the anchor of :math:`y_1` (:math:`\epsilon = -1` only for an
    odd field and :math:`y_1` nearer :math:`-y_0`), :math:`\phi = \phi(s(y_1, a))`:
    :math:`G(y_0) = \sqrt{\kappa(1)}Z_0` and :math:`G(y_1) = \epsilon G(y_0) + V` with
    :math:`\operatorname{Cov}(G(y_0), V) = -\epsilon\phi`, :math:`\operatorname{Var}V = 2\phi`,
    so :math:`V = -\epsilon\phi\,\kappa(1)^{-1/2}Z_0 + \sqrt{\phi(2 - \phi/\kappa(1))}\,Z_1`
    (no cancellation: :math:`\phi \le \kappa(1)` at the anchor's gap, at most 1 for an odd
    field). Coincident tokens get the same value and antipodal ones of an odd field opposite
    values, exactly.
    """
    d = Y.shape[-1]
    phi, kappa1 = _gap_function(noise.activation, d, float(noise.sigma_U), float(noise.sigma_W))
    diff = Y[:, 1] - Y[:, 0]
    s = 0.5 * np.einsum("pd,pd->p", diff, diff)
    sign = np.ones(s.shape)
    if _is_odd(noise):
        anti = Y[:, 1] + Y[:, 0]
        sm = 0.5 * np.einsum("pd,pd->p", anti, anti)
        sign[sm < s] = -1.0
        s = np.minimum(s, sm)
    g = phi(s)
    root = np.sqrt(kappa1)
    out = np.empty_like(Z)
    out[:, 0] = root * Z[:, 0]
    inc = (-sign * g / root)[:, None] * Z[:, 0]
    inc += np.sqrt(np.clip(g * (2.0 - g / kappa1), 0.0, None))[:, None] * Z[:, 1]
    out[:, 1] = sign[:, None] * out[:, 0] + inc
    return out


def _gaussian_field(noise: MLPNoise, Y: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """The infinite-width field at ``Y`` (paths, n, d) from standard normals ``Z`` (same shape):
    Gaussian with covariance kappa(<y_i, y_j>) I_d, the same root for each of the d columns.

    Fast path: on the paths where every pair of tokens (and, for an odd field, every token and
    the others' antipodes) is more than :data:`FAST_SEPARATION` apart, the Cholesky factor of
    the kernel matrix itself, without jitter (its Schur complements, at least about
    ``kappa'(1) FAST_SEPARATION^2``, are far above its rounding). On the other paths, or where
    that factor fails, :func:`_tree_field`, exact at every separation. Two tokens (the
    two-point motion) have the tree's law in closed form (:func:`_pair_field`).
    """
    n = Y.shape[1]
    if n == 2:
        return _pair_field(noise, Y, Z)
    G = Y @ np.swapaxes(Y, -1, -2)
    off = ~np.eye(n, dtype=bool)
    near = 1.0 - 0.5 * FAST_SEPARATION**2
    far = np.all(G[:, off] < near, axis=-1)
    if _is_odd(noise):
        far &= np.all(G[:, off] > -near, axis=-1)
    out = np.empty_like(Z)
    if np.any(far):  # paths whose tokens are all apart
        K = _kernel_matrix(noise, Y[far])
        with _attention._kernels.serial_blas():
            try:
                out[far] = np.linalg.cholesky(K) @ Z[far]
            except np.linalg.LinAlgError:  # singular to rounding: the tree decides
                far[:] = False
    if not np.all(far):
        out[~far] = _tree_field(noise, Y[~far], Z[~far])
    return out


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
    tol = sphere_tol(arr.shape[-1], getattr(X0, "dtype", None) == np.float32)
    X: np.ndarray
    if arr.ndim == 3:
        if arr.shape[0] != paths:
            raise ValueError(
                f"`{name}` of shape (n_paths, N, d) must have n_paths = {paths}; got {arr.shape}."
            )
        X = as_sphere_tokens(arr.reshape(-1, arr.shape[-1]), name, tol=tol).reshape(arr.shape)
    else:
        X = np.broadcast_to(as_sphere_tokens(arr, name, tol=tol), (paths, *arr.shape)).copy()
    if X.shape[-1] < 2:
        raise ValueError(f"the dimension `d` must be at least 2; `{name}` has d = {X.shape[-1]}.")
    return X
