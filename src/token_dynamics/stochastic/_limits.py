"""Convergence in depth against a coupled reference, and propagation of chaos (private module).

Both studies drive every system of a path with the *same* noise, so the distances measured are
pathwise (strong), not distances between laws.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import as_rng, check_int, check_positive
from ..diagnostics import fit_power_law
from ._model import StochasticTransformer, _as_initial, _layer, _Noise, _progress
from ._observables import _estimate, _uniform_sphere

__all__ = ["ConvergenceStudy", "propagation_of_chaos", "strong_error"]


@dataclass(frozen=True)
class ConvergenceStudy:
    """Monte-Carlo errors against a resolution parameter, with the fitted log-log slope.

    Attributes
    ----------
    values : (k,) ndarray
        The resolutions (depths ``L`` or token numbers ``N``).
    mean, stderr : (k,) ndarray
        Mean error at each resolution and its standard error over the paths.
    slope : float
        Least-squares slope of ``log mean`` against ``log values``
        (:func:`token_dynamics.diagnostics.fit_power_law`).
    """

    values: np.ndarray
    mean: np.ndarray
    stderr: np.ndarray
    slope: float


def _study(values, errors: np.ndarray) -> ConvergenceStudy:
    values = np.asarray(values, dtype=np.float64)
    est = _estimate(errors)  # errors has paths >= 2 rows: the standard error is defined
    return ConvergenceStudy(values, est.mean, est.stderr, fit_power_law(values, est.mean).slope)


def strong_error(
    model: StochasticTransformer,
    X0: Any,
    T: float,
    depths: Any,
    *,
    L_ref: int,
    paths: int = 40,
    rng: Any = None,
    progress: bool = False,
) -> ConvergenceStudy:
    r"""Strong error of the depth-``L`` transformer against a fine reference on the same noise.

    The noise is the random-feature field
    :math:`W(t, y) = m^{-1/2}\sum_{k=1}^m \varphi(\langle w_k, y\rangle) B_k(t)` with features
    ``w_k`` fixed per path (reading ``"fixed_first"``, width ``m = model.width``) and Brownian
    motions ``B_k`` in :math:`\mathbb R^d` of variance ``sigma2^2`` per unit time. The depth-``L``
    transformer uses the increments of ``B`` over its own steps (sums of the fine increments), and
    the reference is the same scheme with ``L_ref`` layers, a proxy for the Itô SDE

    .. math:: dX_i = \big[P_{X_i} b_i(X) - \tfrac{d-1}{2} K_m(X_i, X_i) X_i\big]dt
              + P_{X_i}\,W(dt, X_i).

    The error is :math:`\mathbb E \max_{k} \sum_i |x_i^L(t_k) - x_i^{\rm ref}(t_k)|^2` over the
    coarse times ``t_k``.

    Parameters
    ----------
    model : StochasticTransformer
        A finite width; the reading is taken as ``"fixed_first"``.
    X0 : (n, d) or (paths, n, d) array_like
        Initial tokens on the sphere.
    T : float
    depths : sequence of int
        Depths ``L``, each dividing ``L_ref``.
    L_ref : int
        Depth of the reference.
    paths : int
    rng : Generator, int or None
    progress : bool

    Returns
    -------
    ConvergenceStudy

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Theorem 1.1 (rate reported as O(log L / L + 1/m)).

    Examples
    --------
    >>> from token_dynamics.stochastic import StochasticTransformer
    >>> study = strong_error(StochasticTransformer(width=8), np.eye(3), 1.0, [2, 4], L_ref=16,
    ...                      paths=4, rng=0)
    >>> study.mean.shape
    (2,)
    """
    if model.width is None:
        raise ValueError("`model.width` must be finite: the reference field has `width` features.")
    T = check_positive(T, "T")
    L_ref = check_int(L_ref, "L_ref", minimum=1)
    paths = check_int(paths, "paths", minimum=2)
    depths = [check_int(L, "depths", minimum=1) for L in np.atleast_1d(depths).tolist()]
    for L in depths:
        if L_ref % L:
            raise ValueError(f"every entry of `depths` must divide `L_ref` = {L_ref}; got {L}.")
    rng = as_rng(rng)
    X_ref = _as_initial(X0, paths)
    d = X_ref.shape[-1]
    A, V = model.matrices(d)
    m = model.width
    h_ref = T / L_ref
    noise = _Noise(model, paths, d, rng)
    W1 = model.sigma1 * rng.standard_normal((paths, m, d))
    X = [X_ref.copy() for _ in depths]
    acc = [np.zeros((paths, d, m)) for _ in depths]
    err = np.zeros((paths, len(depths)))
    for j in _progress(range(1, L_ref + 1), progress, "fine steps"):
        dB = model.sigma2 * np.sqrt(h_ref) * rng.standard_normal((paths, d, m))
        X_ref = _layer(model, X_ref, h_ref, noise, A, V, j, weights=(W1, dB / np.sqrt(h_ref)))
        for k, L in enumerate(depths):
            acc[k] += dB
            r = L_ref // L
            if j % r == 0:
                h = T / L
                X[k] = _layer(
                    model, X[k], h, noise, A, V, j // r, weights=(W1, acc[k] / np.sqrt(h))
                )
                acc[k][:] = 0.0
                e = np.sum((X[k] - X_ref) ** 2, axis=(-2, -1))
                err[:, k] = np.maximum(err[:, k], e)
    return _study(depths, err)


def _w2_squared(X: np.ndarray, Y: np.ndarray) -> float:
    """Squared W2 between the uniform empirical measures of ``X`` and ``Y`` (chordal cost).

    Delegates to ``token_dynamics.wasserstein`` (the project's one door to POT).
    """
    from .. import wasserstein

    return float(wasserstein.wasserstein2(X, Y)) ** 2


def propagation_of_chaos(
    model: StochasticTransformer,
    d: int,
    sizes: Any,
    n_ref: int,
    *,
    T: float,
    L: int,
    paths: int = 20,
    rng: Any = None,
    progress: bool = False,
) -> ConvergenceStudy:
    r"""Distance between an ``N``-token system and an ``n_ref``-token one driven by the same noise.

    For each path, systems of ``N`` tokens (each ``N`` in `sizes`) and one of ``n_ref`` tokens,
    all i.i.d. uniform on :math:`\mathbb S^{d-1}` at time 0, run the same ``L`` layers with the
    *same* MLP weights (the common noise); attention acts inside each system only. Returned:
    :math:`\mathbb E\,W_2^2(\mu^N_T, \mu^{n_{\rm ref}}_T)` with the chordal cost.

    Parameters
    ----------
    model : StochasticTransformer
        Finite width.
    d : int
    sizes : sequence of int
        Token numbers ``N``, each smaller than `n_ref`.
    n_ref : int
    T : float
    L : int
    paths : int
    rng : Generator, int or None
    progress : bool

    Returns
    -------
    ConvergenceStudy

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Proposition 1.2.

    Examples
    --------
    >>> from token_dynamics.stochastic import StochasticTransformer
    >>> study = propagation_of_chaos(StochasticTransformer(width=8), 3, [4, 8], 32, T=0.5, L=5,
    ...                              paths=3, rng=0)
    >>> study.values.tolist()
    [4.0, 8.0]
    """
    if model.width is None:
        raise ValueError(
            "`model.width` must be finite for many tokens (the infinite-width noise "
            "factorises an n x n kernel matrix per layer)."
        )
    d = check_int(d, "d", minimum=2)
    n_ref = check_int(n_ref, "n_ref", minimum=2)
    sizes = [check_int(n, "sizes", minimum=1) for n in np.atleast_1d(sizes).tolist()]
    if max(sizes) >= n_ref:
        raise ValueError(f"every entry of `sizes` must be below `n_ref` = {n_ref}.")
    T = check_positive(T, "T")
    L = check_int(L, "L", minimum=1)
    paths = check_int(paths, "paths", minimum=2)
    rng = as_rng(rng)
    counts = [*sizes, n_ref]
    edges = np.concatenate([[0], np.cumsum(counts)])
    groups = [slice(a, b) for a, b in itertools.pairwise(edges)]
    X = _uniform_sphere((paths, int(edges[-1])), d, rng)
    A, V = model.matrices(d)
    noise = _Noise(model, paths, d, rng)
    for layer in _progress(range(1, L + 1), progress, "layers"):
        X = _layer(model, X, T / L, noise, A, V, layer, groups=groups)
    ref = X[:, groups[-1]]
    err = np.array([[_w2_squared(X[p, g], ref[p]) for g in groups[:-1]] for p in range(paths)])
    return _study(sizes, err)
