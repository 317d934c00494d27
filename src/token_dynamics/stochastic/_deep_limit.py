r"""Theorem 1.1 of Agazzi et al. (2026): the discrete model coupled with its limit SDE, and the
error on a grid of depths and widths (private module)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from .._typing import ArrayLike, SeedLike
from .._validation import (
    check_instance,
    check_int,
)
from ._estimates import ConvergenceStudy, _study
from ._mlp import _draw_weights, _gaussian_field, _kernel_matrix, _sigma_inplace
from ._model import StochasticTransformer, _attention_step, _common_args, _noise_step, _progress
from ._sde import _project, _sde_drift

__all__ = ["DeepLimitError", "deep_limit_error"]

# --------------------------------------------------------------------------------------------
# the coupling of the width-m MLP, the infinite-width field and the Brownian motions

#: Eigenvalues of a kernel matrix below this fraction of the largest are treated as zero when
#: the Gaussian field is whitened: ``eigh`` gives an eigenvalue ``lam`` to about eps times the
#: largest, so a direction kept is whitened with a relative error of about eps / RANK_TOL; the
#: discarded directions get an independent standard normal. Measured (relu and erf, d = 3,
#: four pairs of tokens 1e-1 to 1e-8 apart, the exact sampler's map): the whitened noise has
#: covariance I to 8e-9 with 1e-8, against 1e-4 with 1e-12 (pairs 1e-3 to 1e-5 apart). What a
#: discarded direction costs the coupling is its variance, below 1e-8 kappa(1), far under the
#: 1/m of the width error.
RANK_TOL = 1e-8


def _sym_sqrt(lam: np.ndarray, U: np.ndarray, power: float) -> np.ndarray:
    """``U diag(lam^power) U^T`` for a batch of eigen-decompositions (lam >= 0 where used)."""
    return (U * lam[..., None, :] ** power) @ np.swapaxes(U, -1, -2)


def _width_m_field(noise, Y: np.ndarray, G: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    r"""The width-m MLP at ``Y`` (paths, n, d), coupled to the Gaussian field values ``G`` there.

    Given its hidden features, ``G^m`` at the tokens is Gaussian with covariance
    :math:`K_m = F F^\top`, :math:`F = [H/\sqrt m,\ \sigma_W\mathbf 1]` (``H`` the features
    at the tokens, ``W`` and ``b_W`` integrated out). With :math:`Z = K^{-1/2} G` (standard
    normal, :data:`RANK_TOL`) the coupling is :math:`G^m = K_m^{1/2} Z`: exact in law for
    ``G^m``, and :math:`\mathbb E|G^m - G|^2 = d\,\mathbb E\|K_m^{1/2} - K^{1/2}\|_F^2 =
    O(1/m)`. It is computed without a root of :math:`K_m` (singular to rounding for
    near-coincident tokens): with the thin SVD :math:`F = USV^\top`,
    :math:`G^m = F W'`, :math:`W' = VU^\top Z + (I - VV^\top)W''` (``W''`` fresh standard
    normals): ``W'`` is standard normal and :math:`FW' = USU^\top Z = K_m^{1/2}Z`, and the
    increments of ``G^m`` between tokens are the differences of their features applied to
    ``W'``, exact at any separation, as for the MLP itself.
    """
    paths, _, d = Y.shape
    lam, U = np.linalg.eigh(_kernel_matrix(noise, Y))
    keep = lam > RANK_TOL * lam[..., -1:]
    inv = np.where(keep, 1.0 / np.sqrt(np.where(keep, lam, 1.0)), 0.0)
    Z = _sym_sqrt(inv, U, 1.0) @ G
    null = U * (~keep)[..., None, :]
    Z += null @ (np.swapaxes(null, -1, -2) @ rng.standard_normal(Y.shape))
    Uw, bU, _, _ = _draw_weights(noise, paths, d, rng)
    H = Y @ np.swapaxes(Uw, -1, -2)
    H += bU[:, None, :]
    H = _sigma_inplace(noise.activation)(H)
    F = np.concatenate([H / np.sqrt(noise.width), np.full((*H.shape[:2], 1), noise.sigma_W)], -1)
    Uf, _, Vt = np.linalg.svd(F, full_matrices=False)
    V = np.swapaxes(Vt, -1, -2)
    fresh = rng.standard_normal((paths, F.shape[-1], d))
    W = V @ (np.swapaxes(Uf, -1, -2) @ Z) + fresh - V @ (Vt @ fresh)
    return F @ W


def _joint_field(noise, blocks: list, rng: np.random.Generator) -> list:
    """One draw of the Gaussian field at every block of points (each (paths, n_b, d))."""
    P = np.concatenate(blocks, axis=1)
    G = _gaussian_field(noise, P, rng.standard_normal(P.shape))
    edges = np.cumsum([0, *[b.shape[1] for b in blocks]])
    return [G[:, a:b] for a, b in itertools.pairwise(edges)]


@dataclass(frozen=True)
class DeepLimitError:
    r"""Errors of the discrete model against the limit SDE on a grid of depths and widths.

    Attributes
    ----------
    depths : (a,) ndarray
    widths : tuple
        Widths ``m`` (``None`` for infinite width).
    sup : (paths, a, b) ndarray
        :math:`\sup_{t\le T}\frac1N\sum_i|X^i_{\lfloor Lt/T\rfloor} - \bar X^i_t|^2` per path,
        the sup over the reference's time grid (Theorem 1.1's quantity).
    grid : (paths, a, b) ndarray
        The same maximum over the layer times :math:`t = \ell T/L` only (Remark 2.4).
    width_gap : (paths, a, b) ndarray
        :math:`\max_\ell\frac1N\sum_i|X^{i,m}_\ell - X^{i,\infty}_\ell|^2`, the width part
        of the error alone (against the infinite-width system of the same depth on the same
        noise); zero where ``m`` is ``None``, NaN-free, and all zeros if ``None`` is not a width.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer, deep_limit_error
    >>> model = StochasticTransformer(MLPNoise("relu", width=None))
    >>> err = deep_limit_error(model, np.eye(3), T=1.0, depths=[2, 4], L_ref=8, widths=[8, None],
    ...                        n_paths=3, rng=0)
    >>> err.grid.shape, bool(np.all(err.sup >= err.grid))
    ((3, 2, 2), True)
    """

    depths: np.ndarray
    widths: tuple
    sup: np.ndarray
    grid: np.ndarray
    width_gap: np.ndarray

    def depth_study(
        self, width: int | None = None, *, grid_times: bool = False
    ) -> ConvergenceStudy:
        """Errors at one width against the depth rate: ``log L / L`` (the sup over all times,
        Theorem 1.1) or ``1 / L`` (layer times, Remark 2.4); slope 1 means the rate is attained.
        """
        if width not in self.widths:
            raise ValueError(f"`width` must be one of the widths {self.widths}; got {width!r}.")
        j = self.widths.index(width)
        L = self.depths
        if not grid_times and np.any(L == 1):
            raise ValueError(
                "the rate log L / L vanishes at depth 1, which `depths` holds: fit it without "
                "(deep_limit_error with depths >= 2) or pass grid_times=True (rate 1 / L)."
            )
        x = 1.0 / L if grid_times else np.log(L) / L
        return _study(x, (self.grid if grid_times else self.sup)[:, :, j])

    def width_study(self, depth: int) -> ConvergenceStudy:
        """The width part of the error (``width_gap``) at one depth against ``1 / m``; slope 1
        means the ``1/m`` of Theorem 1.1 is attained."""
        if None not in self.widths:
            raise ValueError("`widths` must include None (the infinite-width reference).")
        if depth not in self.depths:
            raise ValueError(f"`depth` must be one of the depths {self.depths}; got {depth!r}.")
        i = int(np.flatnonzero(self.depths == depth)[0])
        js = [j for j, m in enumerate(self.widths) if m is not None]
        x = 1.0 / np.array([self.widths[j] for j in js], dtype=np.float64)
        return _study(x, self.width_gap[:, i, js])


def _check_model(model: object) -> None:
    fix = "Build one with StochasticTransformer(MLPNoise(...), Q, K, V)."
    check_instance(model, StochasticTransformer, "model", fix)


def deep_limit_error(
    model: StochasticTransformer,
    X0: ArrayLike,
    *,
    T: float,
    depths: ArrayLike,
    L_ref: int,
    widths: Sequence[int | None] | None = None,
    n_paths: int = 20,
    rng: SeedLike = None,
    progress: bool = False,
) -> DeepLimitError:
    r"""Couple the discrete model (1.1) with the limit SDE and measure Theorem 1.1's error.

    The coupling is the paper's (Remark 2.3, Proposition 2.3). The SDE is run with ``L_ref``
    projected Euler-Maruyama steps; over fine step ``j`` the Brownian field increment
    :math:`\delta W_j` is sampled jointly at the SDE's tokens and at the current post-attention
    tokens :math:`Y_\ell` of every discrete system (one Gaussian vector, covariance
    :math:`h\kappa(\langle\cdot,\cdot\rangle) I_d`). Layer ``l + 1`` of a depth-``L`` system
    uses :math:`G_{\ell+1}(Y_\ell) = \sum_{j\in\text{layer}}\delta W_j(Y_\ell)/\sqrt{T/L}`
    (infinite width), or the width-``m`` MLP coupled to it through
    :math:`G^m = K_m^{1/2}K^{-1/2}G` (exact in law given the hidden features). Returned per
    path, the error whose mean Theorem 1.1 bounds by :math:`c_{N,T}(\log L/L + 1/m)` (a constant
    that depends on ``N`` and ``T``),

    .. math:: \sup_{t\le T}\frac1N\sum_{i=1}^N\big|X^{i}_{\lfloor Lt/T\rfloor}
              - \bar X^i_t\big|^2 .

    Parameters
    ----------
    model : StochasticTransformer
        Attention and noise (activation, biases); ``model.noise.width`` is used when `widths`
        is ``None``.
    X0 : (N, d) or (n_paths, N, d) array_like
        Initial tokens, shared by the SDE and every discrete system.
    T : float
    depths : sequence of int
        Depths ``L``, each dividing `L_ref`.
    L_ref : int
        Steps of the SDE reference.
    widths : sequence of (int or None), optional
    n_paths : int
        At least 2 (standard errors).
    rng : Generator, int or None
    progress : bool

    Returns
    -------
    DeepLimitError

    Raises
    ------

    TypeError
        If `model` is not a :class:`StochasticTransformer`.
    ValueError
        If a depth does not divide `L_ref`, a width is not a positive integer or ``None``,
        `n_paths` < 2, or `X0` is not a cloud of unit vectors.
    FloatingPointError
        If a token of the discrete model or of the SDE becomes non-finite or zero.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Theorem 1.1, Remark 2.3, Remark 2.4.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer, deep_limit_error
    >>> model = StochasticTransformer(MLPNoise("relu", width=None))
    >>> err = deep_limit_error(model, np.eye(3), T=1.0, depths=[2, 4], L_ref=8, n_paths=3,
    ...                        rng=0)
    >>> err.sup.shape
    (3, 2, 1)
    """
    _check_model(model)
    widths = (model.noise.width,) if widths is None else tuple(widths)
    for m in widths:
        if m is not None:
            check_int(m, "widths", minimum=1)
    depths = np.array([check_int(L, "depths", minimum=1) for L in np.atleast_1d(depths)])
    L_ref = check_int(L_ref, "L_ref", minimum=1)
    if np.any(L_ref % depths):
        raise ValueError(f"every entry of `depths` must divide `L_ref` = {L_ref}; got {depths}.")
    check_int(n_paths, "n_paths", minimum=2)
    T, _, Xbar, _, rng = _common_args(X0, T, L_ref, n_paths, L_ref, rng)
    d = Xbar.shape[-1]
    A, V = model.matrices(d)
    off = model.attention_off(d)
    noise = model.noise
    kappa1 = float(noise.kappa(1.0, d=d))
    h = T / L_ref
    systems = [(i, j) for i in range(len(depths)) for j in range(len(widths))]
    X = {s: Xbar.copy() for s in systems}
    Y = {s: _attention_step(Xbar, T / depths[s[0]], A, V, off, "layer 1") for s in systems}
    S = {s: np.zeros_like(Xbar) for s in systems}
    sup = np.zeros((n_paths, len(depths), len(widths)))
    grid = np.zeros_like(sup)
    gap = np.zeros_like(sup)
    for k in _progress(range(1, L_ref + 1), progress, "fine steps"):
        dW = _joint_field(noise, [Xbar] + [Y[s] for s in systems], rng)
        dW = [np.sqrt(h) * w for w in dW]
        step = h * _sde_drift(Xbar, A, V, off, kappa1) + _project(Xbar, dW[0])
        Xbar = _noise_step(Xbar + step, 1.0, 0.0, f"SDE step {k}")
        for s, w in zip(systems, dW[1:], strict=True):
            S[s] += w
            r = L_ref // depths[s[0]]
            if k % r == 0:
                dt = T / depths[s[0]]
                G = S[s] / np.sqrt(dt)
                m = widths[s[1]]
                if m is not None:
                    G = _width_m_field(_with_width(noise, m), Y[s], G, rng)
                X[s] = _noise_step(Y[s], dt, G, f"layer {k // r}")
                Y[s] = _attention_step(X[s], dt, A, V, off, f"layer {k // r + 1}")
                S[s][:] = 0.0
            e = np.mean(np.sum((X[s] - Xbar) ** 2, axis=-1), axis=-1)
            sup[:, s[0], s[1]] = np.maximum(sup[:, s[0], s[1]], e)
            if k % r == 0:
                grid[:, s[0], s[1]] = np.maximum(grid[:, s[0], s[1]], e)
        if None in widths:
            j0 = widths.index(None)
            for i, j in systems:
                if k % (L_ref // depths[i]) == 0 and j != j0:
                    e = np.mean(np.sum((X[i, j] - X[i, j0]) ** 2, axis=-1), axis=-1)
                    gap[:, i, j] = np.maximum(gap[:, i, j], e)
    return DeepLimitError(depths.astype(np.float64), widths, sup, grid, gap)


def _with_width(noise, m: int):
    return replace(noise, width=m)
