"""Monte-Carlo estimates and convergence studies of the scaling limits (private module)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .. import wasserstein
from .._validation import as_real_array, as_rng, check_instance, check_int, check_positive
from ..diagnostics import fit_power_law
from ..sampling import uniform_sphere
from ._model import (
    StochasticTransformer,
    _as_initial,
    _attention_drift,
    _attention_step,
    _common_args,
    _draw_weights,
    _gaussian_field,
    _kernel_matrix,
    _mlp,
    _noise_step,
    _normalise,
    _progress,
    _sigma_inplace,
)
from ._sde import _project, _sde_drift

__all__ = [
    "ConvergenceStudy",
    "DeepLimitError",
    "MCEstimate",
    "chaos_rate",
    "deep_limit_error",
    "layer_norm_remainder",
    "layer_remainder",
    "mc_estimate",
    "propagation_of_chaos",
]


@dataclass(frozen=True)
class MCEstimate:
    """A Monte-Carlo mean with its standard error (``std / sqrt(samples)``).

    Attributes
    ----------
    mean, stderr : float or ndarray
    samples : int
        Number of independent samples averaged.

    Examples
    --------
    >>> MCEstimate(1.0, 0.1, 100).stderr
    0.1
    """

    mean: Any
    stderr: Any
    samples: int


def mc_estimate(values: Any) -> MCEstimate:
    """Mean over axis 0 of i.i.d. samples (e.g. one per path), with its standard error.

    Parameters
    ----------
    values : (n, ...) array_like
        ``n >= 2`` independent samples.

    Returns
    -------
    MCEstimate
        ``mean`` and ``stderr`` of shape ``(...)``.

    Examples
    --------
    >>> est = mc_estimate([1.0, 2.0, 3.0])
    >>> float(est.mean), round(float(est.stderr), 4)
    (2.0, 0.5774)
    """
    values = as_real_array(values, "values")
    if values.ndim == 0 or values.shape[0] < 2:
        raise ValueError("`values` needs at least two samples along its first axis.")
    return _estimate(values)


def _estimate(values: np.ndarray) -> MCEstimate:
    """Mean over axis 0 of i.i.d. samples, with the standard error of that mean."""
    n = values.shape[0]
    std = values.std(axis=0, ddof=1) if n > 1 else np.zeros_like(values[0])
    return MCEstimate(values.mean(axis=0), std / np.sqrt(n), n)


@dataclass(frozen=True)
class ConvergenceStudy:
    """Monte-Carlo errors against a resolution, with the fitted log-log slope.

    Attributes
    ----------
    values : (k,) ndarray
        The resolutions (depths ``L``, widths ``m`` or token numbers ``N``).
    mean, stderr : (k,) ndarray
        Mean error at each resolution and its standard error over the paths.
    slope : float
        Least-squares slope of ``log mean`` against ``log values``.

    Examples
    --------
    >>> s = ConvergenceStudy(np.array([1.0, 2.0]), np.array([1.0, 0.5]), np.zeros(2), -1.0)
    >>> s.slope
    -1.0
    """

    values: np.ndarray
    mean: np.ndarray
    stderr: np.ndarray
    slope: float


def _study(values, errors: np.ndarray) -> ConvergenceStudy:
    values = np.asarray(values, dtype=np.float64)
    est = _estimate(errors)
    return ConvergenceStudy(values, est.mean, est.stderr, fit_power_law(values, est.mean).slope)


# --------------------------------------------------------------------------------------------
# the coupling of the width-m MLP, the infinite-width field and the Brownian motions

#: Eigenvalues of a kernel matrix below this fraction of the largest are treated as zero when
#: the Gaussian field is whitened: rounding of the entries (1e-16) is amplified by 1/sqrt(lambda),
#: so 1e-12 keeps the whitened noise accurate to about 1e-10; the discarded directions get an
#: independent standard normal, which keeps the law of the width-m field exact.
RANK_TOL = 1e-12


def _sym_sqrt(lam: np.ndarray, U: np.ndarray, power: float) -> np.ndarray:
    """``U diag(lam^power) U^T`` for a batch of eigen-decompositions (lam >= 0 where used)."""
    return (U * lam[..., None, :] ** power) @ np.swapaxes(U, -1, -2)


def _width_m_field(noise, Y: np.ndarray, G: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    r"""The width-m MLP at ``Y`` (paths, n, d), coupled to the Gaussian field values ``G`` there.

    Given its hidden features, ``G^m`` at the tokens is Gaussian with covariance
    :math:`K_m = \frac1m H H^\top + \sigma_W^2` (``H`` the features at the tokens, ``W`` and
    ``b_W`` integrated out). With :math:`Z = K^{-1/2} G` (standard normal) the coupling is
    :math:`G^m = K_m^{1/2} Z`: exact in law for ``G^m``, and
    :math:`\mathbb E|G^m - G|^2 = d\,\mathbb E\|K_m^{1/2} - K^{1/2}\|_F^2 = O(1/m)`.
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
    Km = H @ np.swapaxes(H, -1, -2) / noise.width + noise.sigma_W**2
    lam_m, U_m = np.linalg.eigh(Km)
    return _sym_sqrt(np.clip(lam_m, 0.0, None), U_m, 0.5) @ Z


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
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer
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

    def depth_study(self, width: Any = None, *, grid_times: bool = False) -> ConvergenceStudy:
        """Errors at one width against the depth rate: ``log L / L`` (the sup over all times,
        Theorem 1.1) or ``1 / L`` (layer times, Remark 2.4); slope 1 means the rate is attained.
        """
        j = self.widths.index(width)
        L = self.depths
        x = 1.0 / L if grid_times else np.log(L) / L
        return _study(x, (self.grid if grid_times else self.sup)[:, :, j])

    def width_study(self, depth: int) -> ConvergenceStudy:
        """The width part of the error (``width_gap``) at one depth against ``1 / m``; slope 1
        means the ``1/m`` of Theorem 1.1 is attained."""
        if None not in self.widths:
            raise ValueError("`widths` must include None (the infinite-width reference).")
        i = int(np.flatnonzero(self.depths == depth)[0])
        js = [j for j, m in enumerate(self.widths) if m is not None]
        x = 1.0 / np.array([self.widths[j] for j in js], dtype=np.float64)
        return _study(x, self.width_gap[:, i, js])


def _check_model(model: Any) -> None:
    fix = "Build one with StochasticTransformer(MLPNoise(...), Q, K, V)."
    check_instance(model, StochasticTransformer, "model", fix)


def deep_limit_error(
    model,
    X0: Any,
    *,
    T: float,
    depths: Any,
    L_ref: int,
    widths: Any = None,
    n_paths: int = 20,
    rng: Any = None,
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
    :math:`G^m = K_m^{1/2}K^{-1/2}G` (exact in law given the hidden features).

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

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Theorem 1.1, Remark 2.3, Remark 2.4.

    Examples
    --------
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer
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
                if widths[s[1]] is not None:
                    G = _width_m_field(_with_width(noise, widths[s[1]]), Y[s], G, rng)
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


def chaos_rate(N: Any, d: int) -> np.ndarray:
    r"""The rate :math:`r_d(N)` of Proposition 1.2 (``d`` the ambient dimension).

    .. math:: r_d(N) = N^{-1/2}\ (d < 4),\qquad N^{-1/2}\log(1 + N)\ (d = 4),\qquad
              N^{-2/d}\ (d > 4).

    Parameters
    ----------
    N : array_like
        Token numbers, at least 1.
    d : int
        Ambient dimension, at least 2.

    Returns
    -------
    ndarray
        Same shape as `N`.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Proposition 1.2 and Proposition 3.1.

    Examples
    --------
    >>> float(chaos_rate(100, 3)), float(chaos_rate(256, 8))
    (0.1, 0.25)
    """
    d = check_int(d, "d", minimum=2)
    N = as_real_array(N, "N")
    if np.any(N < 1):
        raise ValueError("`N` must hold token numbers, at least 1.")
    if d < 4:
        return N**-0.5
    if d == 4:
        return N**-0.5 * np.log1p(N)
    return N ** (-2.0 / d)


def propagation_of_chaos(
    model,
    *,
    d: int,
    sizes: Any,
    N_ref: int,
    T: float,
    L: int,
    n_paths: int = 10,
    n_times: int = 4,
    rng: Any = None,
    progress: bool = False,
) -> ConvergenceStudy:
    r"""Proposition 1.2's distance between ``N`` tokens and the SPDE, on the same noise.

    For each path, systems of ``N`` tokens (each ``N`` in `sizes`) and one of `N_ref` tokens
    (the proxy for the SPDE solution :math:`\mu`), all i.i.d. uniform on
    :math:`\mathbb S^{d-1}` at time 0, follow the limit SDE (``L`` projected Euler steps)
    driven by the **same** Brownian field: each step samples one Gaussian vector at the tokens
    of every system jointly. Attention acts inside each system. Returned:
    :math:`\mathbb E\max_{t}W_2^2(\mu^N_t,\mu^{N_{\rm ref}}_t)` over `n_times` equally spaced
    times in ``(0, T]`` and ``t = 0``.

    Parameters
    ----------
    model : StochasticTransformer
    d : int
        Ambient dimension.
    sizes : sequence of int
        Token numbers ``N``, each below `N_ref`.
    N_ref : int
    T : float
    L : int
        Steps; a multiple of `n_times`.
    n_paths : int
    n_times : int
    rng : Generator, int or None
    progress : bool

    Returns
    -------
    ConvergenceStudy
        ``values`` are the sizes ``N``.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Proposition 1.2 and Proposition 3.1.

    Examples
    --------
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer
    >>> study = propagation_of_chaos(StochasticTransformer(MLPNoise("relu", None)), d=3,
    ...                              sizes=[4, 8], N_ref=32, T=0.5, L=4, n_paths=3, rng=0)
    >>> study.values.tolist()
    [4.0, 8.0]
    """
    _check_model(model)
    d = check_int(d, "d", minimum=2)
    N_ref = check_int(N_ref, "N_ref", minimum=2)
    sizes = [check_int(n, "sizes", minimum=1) for n in np.atleast_1d(sizes).tolist()]
    if max(sizes) >= N_ref:
        raise ValueError(f"every entry of `sizes` must be below `N_ref` = {N_ref}.")
    L = check_int(L, "L", minimum=1)
    n_times = check_int(n_times, "n_times", minimum=1)
    if L % n_times:
        raise ValueError(f"`L` must be a multiple of `n_times` = {n_times}; got {L}.")
    n_paths = check_int(n_paths, "n_paths", minimum=2)
    T = check_positive(T, "T")
    rng = as_rng(rng)
    counts = [*sizes, N_ref]
    X = [uniform_sphere(n_paths * n, d, rng=rng).reshape(n_paths, n, d) for n in counts]
    A, V = model.matrices(d)
    off = model.attention_off(d)
    kappa1 = float(model.noise.kappa(1.0, d=d))
    h = T / L

    def distances():
        return np.array(
            [
                [wasserstein.wasserstein2(x[p], X[-1][p]) ** 2 for x in X[:-1]]
                for p in range(n_paths)
            ]
        )

    err = distances()
    for k in _progress(range(1, L + 1), progress, "steps"):
        dW = _joint_field(model.noise, X, rng)
        X = [
            _normalise(
                x + h * _sde_drift(x, A, V, off, kappa1) + np.sqrt(h) * _project(x, w), f"step {k}"
            )
            for x, w in zip(X, dW, strict=True)
        ]
        if k % (L // n_times) == 0:
            err = np.maximum(err, distances())
    return _study(sizes, err)


def layer_norm_remainder(v: Any, w: Any, scales: Any, *, order: int = 2) -> ConvergenceStudy:
    r"""Remainder of the Taylor expansion of :math:`\mathrm{LN}(v + \varepsilon w)` at ``v``.

    .. math:: \mathrm{LN}(v+w) = v + P_vw + R_1
              = v + P_vw - \langle v,w\rangle P_vw - \tfrac12|P_vw|^2v + R_2,

    with :math:`|R_1|\le 3|w|^2/\min_t|v+tw|^2` and :math:`|R_2|\le 6|w|^3/\min_t|v+tw|^3`
    (Agazzi et al. 2026, Lemma A.1). Returns :math:`|R_{\rm order}|` at ``eps * w`` for each
    ``eps`` in `scales` (``stderr`` zero: deterministic), whose log-log slope is
    ``order + 1``.

    Parameters
    ----------
    v : (d,) array_like
        A unit vector.
    w : (d,) array_like
        A direction (any norm).
    scales : sequence of float
        Positive factors ``eps``.
    order : {1, 2}

    Returns
    -------
    ConvergenceStudy

    Examples
    --------
    >>> study = layer_norm_remainder([1.0, 0.0], [0.3, 0.4], [1e-2, 1e-3])
    >>> round(study.slope, 2)
    3.0
    """
    if order not in (1, 2):
        raise ValueError(f"`order` must be 1 or 2; got {order!r}.")
    v = _normalise(as_real_array(v, "v")[None], "v")[0]
    w = as_real_array(w, "w")
    scales = as_real_array(scales, "scales")
    if w.shape != v.shape or np.any(scales <= 0):
        raise ValueError("`w` must have the shape of `v`, and `scales` must be positive.")
    remainders = []
    for eps in scales:
        x = eps * w
        exact = (v + x) / np.linalg.norm(v + x)
        Pw = x - (x @ v) * v
        approx = v + Pw
        if order == 2:
            approx = approx - (v @ x) * Pw - 0.5 * (Pw @ Pw) * v
        remainders.append(np.linalg.norm(exact - approx))
    rem = np.array(remainders)
    return ConvergenceStudy(scales, rem, np.zeros_like(rem), fit_power_law(scales, rem).slope)


def layer_remainder(model, X: Any, steps: Any, *, n_draws: int = 100, rng: Any = None):
    r"""Remainder of one layer of the model (1.1) after its Euler-Maruyama part.

    With :math:`\Delta t` a step, :math:`Y = \mathrm{LN}(x + \Delta t\,\mathrm{Attn})`, one
    draw :math:`G` of the layer's MLP and :math:`g = G(x)`,

    .. math:: \mathrm{LN}\big(Y + \sqrt{\Delta t}\,G(Y)\big) = x + \Delta t\,P_x\mathrm{Attn}
              + \sqrt{\Delta t}\,P_xg - \tfrac{\Delta t}2|P_xg|^2x
              - \Delta t\,\langle x, g\rangle P_xg + \mathcal R

    (Agazzi et al. 2026, Lemma 2.6), and :math:`\mathbb E|\mathcal R|^2 = O(\Delta t^3)`
    (Lemma 2.7). Returns the mean over the tokens of :math:`|\mathcal R|^2` for each step,
    averaged over `n_draws` draws of the MLP (each draw kept for every step), whose log-log
    slope against the step is 3.

    Parameters
    ----------
    model : StochasticTransformer
        Attention and MLP, of finite width.
    X : (n, d) array_like
        Tokens on the unit sphere.
    steps : sequence of float
        Positive steps :math:`\Delta t = T / L`, at least two.
    n_draws : int
        Independent draws of the MLP, at least 2 (standard errors).
    rng : Generator, int or None

    Returns
    -------
    ConvergenceStudy
        ``values`` are the steps.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Lemma 2.6 and Lemma 2.7.

    Examples
    --------
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer
    >>> model = StochasticTransformer(MLPNoise("tanh", width=16, sigma_U=0.1, sigma_W=0.1))
    >>> study = layer_remainder(model, np.eye(3), [1e-3, 1e-4], n_draws=4, rng=0)
    >>> round(study.slope)
    3
    """
    steps = np.atleast_1d(as_real_array(steps, "steps"))
    if steps.ndim != 1 or steps.size < 2 or not np.all(np.isfinite(steps) & (steps > 0)):
        raise ValueError(f"`steps` must hold at least two positive steps; got {steps!r}.")
    if not isinstance(model, StochasticTransformer):
        raise TypeError(f"`model` must be a StochasticTransformer; got {type(model).__name__}.")
    n_draws = check_int(n_draws, "n_draws", minimum=2)
    if model.noise.width is None:
        raise ValueError(
            "`model.noise.width` must be a finite width: the remainder is that of one drawn MLP, "
            "evaluated at x and at Y with the same weights."
        )
    rng = as_rng(rng)
    X = _as_initial(X, n_draws, "X")
    d = X.shape[-1]
    A, V = model.matrices(d)
    off = model.attention_off(d)
    Ys = [_attention_step(X, h, A, V, off, f"step {h:g} (attention)") for h in steps]
    noise = model.noise
    weights = _draw_weights(noise, n_draws, d, rng)
    GX = _mlp(noise.activation, X, *weights)
    GY = [_mlp(noise.activation, Y, *weights) for Y in Ys]
    drift = np.zeros_like(X) if off else _project(X, _attention_drift(X, A, V))
    Pg = _project(X, GX)
    along = np.einsum("...d,...d->...", X, GX)[..., None]
    tangent2 = np.einsum("...d,...d->...", Pg, Pg)[..., None]
    errors = []
    for h, Y, gY in zip(steps, Ys, GY, strict=True):
        exact = _noise_step(Y, h, gY, f"step {h:g} (MLP)")
        euler = X + h * drift + np.sqrt(h) * Pg - 0.5 * h * tangent2 * X - h * along * Pg
        errors.append(np.mean(np.sum((exact - euler) ** 2, axis=-1), axis=-1))
    return _study(steps, np.stack(errors, axis=1))
