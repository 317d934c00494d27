"""Observables of the random-MLP transformer: one- and two-point motions, Lyapunov and moment
exponents, interaction energies (private module)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._validation import as_rng, check_int, check_positive
from ._model import (
    StochasticTrajectory,
    StochasticTransformer,
    _layer,
    _Noise,
    _progress,
    _renormalise,
)

__all__ = [
    "MCEstimate",
    "TangentGrowth",
    "TwoPointStep",
    "attention_energy",
    "distance_energy",
    "mlp_covariance",
    "one_point_correlation",
    "pair_correlation",
    "tangent_growth",
    "two_point_step",
]

#: Half-separation of the two tokens whose difference carries the tangent vector: the central
#: difference has a relative error O(EPS^2) from curvature and O(1e-16 / EPS) from rounding,
#: both below 1e-10 per layer.
EPS = 1e-6


@dataclass(frozen=True)
class MCEstimate:
    """A Monte-Carlo mean with its standard error (``std / sqrt(samples)``).

    Attributes
    ----------
    mean, stderr : float or ndarray
    samples : int
        Number of independent samples averaged.
    """

    mean: Any
    stderr: Any
    samples: int


def _estimate(values: np.ndarray) -> MCEstimate:
    """Mean over axis 0 of i.i.d. samples, with the standard error of that mean."""
    n = values.shape[0]
    std = values.std(axis=0, ddof=1) if n > 1 else np.zeros_like(values[0])
    return MCEstimate(values.mean(axis=0), std / np.sqrt(n), n)


def _check_rho(rho: float) -> None:
    """Check the inner product ``rho`` of a pair of unit vectors, a scalar in ``[-1, 1]``."""
    if not -1.0 <= rho <= 1.0:
        raise ValueError(f"`rho` must lie in [-1, 1]; got {rho!r}.")


def _uniform_sphere(shape: tuple[int, ...], d: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform points on the sphere, shape ``(*shape, d)``, through ``sampling.uniform_sphere``."""
    from ..sampling import uniform_sphere

    return uniform_sphere(int(np.prod(shape)), d, rng=rng).reshape(*shape, d)


def mlp_covariance(
    model: StochasticTransformer, rho: float, d: int, *, samples: int = 100_000, rng: Any = None
) -> MCEstimate:
    r"""Estimate :math:`\frac1d\mathbb E\langle g(x), g(y)\rangle` for the MLP of `model`.

    ``g(y) = W_2 phi(W_1 y) / sqrt(m)`` with fresh weights per sample, ``|x| = |y| = 1`` and
    ``<x, y> = rho``; the kernel identity says the mean is ``k(rho)`` at every width.

    Parameters
    ----------
    model : StochasticTransformer
    rho : float
        In ``[-1, 1]``.
    d : int
    samples : int
    rng : Generator, int or None

    Returns
    -------
    MCEstimate

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Stochastic scaling limits").

    Examples
    --------
    >>> from token_dynamics.stochastic import StochasticTransformer
    >>> est = mlp_covariance(StochasticTransformer(width=1), 1.0, 3, samples=1000, rng=0)
    >>> bool(abs(est.mean - 0.5) < 4 * est.stderr)
    True
    """
    _check_rho(rho)
    d = check_int(d, "d", minimum=2)
    samples = check_int(samples, "samples", minimum=2)
    rng = as_rng(rng)
    noise = _Noise(replace(model, reading="fresh"), samples, d, rng)
    X = _pair(float(rho), d, samples, rng)
    g = noise.field(X, noise.draw())
    return _estimate(np.einsum("pd,pd->p", g[:, 0], g[:, 1]) / d)


def one_point_correlation(traj: StochasticTrajectory) -> MCEstimate:
    r"""Estimate :math:`\mathbb E\langle X_t, X_0\rangle` over the paths of a trajectory.

    Each path contributes the average over its tokens (the tokens of one path share their noise
    and are not independent); the standard error is taken over the paths.

    Returns
    -------
    MCEstimate
        ``mean`` and ``stderr`` of shape ``(T,)``.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Stochastic scaling limits").

    Examples
    --------
    >>> from token_dynamics.stochastic import StochasticTransformer, simulate
    >>> m = StochasticTransformer(width=None, attention=False)
    >>> traj = simulate(m, np.eye(3), T=0.5, L=20, paths=10, rng=1)
    >>> one_point_correlation(traj).mean.shape
    (21,)
    """
    S = traj.states
    corr = np.einsum("ptnd,pnd->ptn", S, S[:, 0]).mean(axis=-1)
    return _estimate(corr)


def pair_correlation(traj: StochasticTrajectory, i: int = 0, j: int = 1) -> MCEstimate:
    r"""Estimate :math:`\mathbb E\langle X^i_t, X^j_t\rangle` for two tokens (the two-point motion).

    Returns
    -------
    MCEstimate
        ``mean`` and ``stderr`` of shape ``(T,)``, over the paths.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Synchronization by noise").

    Examples
    --------
    >>> from token_dynamics.stochastic import StochasticTransformer, simulate
    >>> m = StochasticTransformer("erf", width=None, attention=False)
    >>> traj = simulate(m, [[1.0, 0.0], [-1.0, 0.0]], T=1.0, L=10, paths=5, rng=0)
    >>> bool(np.allclose(pair_correlation(traj).mean, -1.0))
    True
    """
    n = traj.states.shape[2]
    i = check_int(i, "i", minimum=0)
    j = check_int(j, "j", minimum=0)
    if max(i, j) >= n:
        raise ValueError(f"`i` and `j` must be token indices below n = {n}; got {i}, {j}.")
    S = traj.states
    return _estimate(np.einsum("ptd,ptd->pt", S[:, :, i], S[:, :, j]))


@dataclass(frozen=True)
class TwoPointStep:
    """One-layer increments of ``rho = <x, y>`` for a pair of tokens, divided by ``h``.

    Attributes
    ----------
    rho : float
        Initial inner product.
    h : float
        Step.
    drift : MCEstimate
        ``E[Delta rho] / h`` (compare with :func:`two_point_drift`).
    diffusion : MCEstimate
        ``E[(Delta rho)^2] / h`` (compare with :func:`two_point_diffusion`).
    """

    rho: float
    h: float
    drift: MCEstimate
    diffusion: MCEstimate


def _pair(rho: float, d: int, paths: int, rng: np.random.Generator) -> np.ndarray:
    """Random pairs ``(paths, 2, d)`` of unit vectors with ``<x, y> = rho`` exactly."""
    x = _uniform_sphere((paths,), d, rng)
    u = rng.standard_normal((paths, d))
    u -= np.einsum("pd,pd->p", u, x)[:, None] * x
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    y = rho * x + np.sqrt(max(1.0 - rho**2, 0.0)) * u
    return np.stack([x, y], axis=1)


def two_point_step(
    model: StochasticTransformer,
    rho: float,
    d: int,
    *,
    h: float = 1e-3,
    samples: int = 20_000,
    rng: Any = None,
) -> TwoPointStep:
    """Measure the generator of the two-point motion from one noise layer (attention off).

    Antithetic sampling (each noise draw is used with both signs) removes the ``sqrt(h)`` part
    of ``Delta rho``, so the standard error of ``E[Delta rho] / h`` is ``O(1 / sqrt(samples))``.

    Parameters
    ----------
    model : StochasticTransformer
    rho : float
        Inner product of the pair, in ``[-1, 1]``.
    d : int
        Dimension, at least 2.
    h : float
        Step of the layer.
    samples : int
        Number of antithetic pairs of draws.
    rng : Generator, int or None

    Returns
    -------
    TwoPointStep

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Synchronization by noise").

    Examples
    --------
    >>> from token_dynamics.stochastic import StochasticTransformer
    >>> step = two_point_step(StochasticTransformer(width=None), 1.0, 3, samples=10, rng=0)
    >>> float(step.drift.mean)
    0.0
    """
    _check_rho(rho)
    d = check_int(d, "d", minimum=2)
    h = check_positive(h, "h")
    samples = check_int(samples, "samples", minimum=2)
    rng = as_rng(rng)
    noise_only = replace(model, attention=False)
    X = _pair(float(rho), d, samples, rng)
    noise = _Noise(noise_only, samples, d, rng)
    A = V = np.eye(d)
    weights = noise.draw()
    if weights is None:  # infinite width: draw the Gaussian field once, use it with both signs
        g = noise.field(X, None)
        plus = _renormalise(X + np.sqrt(h) * g, 1)
        minus = _renormalise(X - np.sqrt(h) * g, 1)
    else:
        plus = _layer(noise_only, X, h, noise, A, V, 1, weights=weights)
        minus = _layer(noise_only, X, h, noise, A, V, 1, sign=-1.0, weights=weights)
    rho0 = np.einsum("pd,pd->p", X[:, 0], X[:, 1])
    dp = np.einsum("pd,pd->p", plus[:, 0], plus[:, 1]) - rho0
    dm = np.einsum("pd,pd->p", minus[:, 0], minus[:, 1]) - rho0
    drift = _estimate(0.5 * (dp + dm) / h)
    diffusion = _estimate(0.5 * (dp**2 + dm**2) / h)
    return TwoPointStep(float(rho), h, drift, diffusion)


@dataclass(frozen=True)
class TangentGrowth:
    """Logarithmic growth of a tangent vector along the flow, one value per path.

    Attributes
    ----------
    T : float
        Time over which the growth was measured.
    log_growth : (paths,) ndarray
        ``log |v_T| / |v_0|`` per path.
    """

    T: float
    log_growth: np.ndarray

    def lyapunov(self) -> MCEstimate:
        """Top Lyapunov exponent ``E[log |v_T|] / T``, with its standard error over paths."""
        return _estimate(self.log_growth / self.T)

    def moment_exponent(self, q: float) -> MCEstimate:
        """Moment exponent ``log E|v_T|^q / T`` (delta-method standard error)."""
        q = check_positive(q, "q")
        w = np.exp(q * (self.log_growth - self.log_growth.max()))
        est = _estimate(w)
        mean = (np.log(est.mean) + q * self.log_growth.max()) / self.T
        return MCEstimate(float(mean), float(est.stderr / est.mean / self.T), est.samples)


def tangent_growth(
    model: StochasticTransformer,
    d: int,
    *,
    T: float,
    L: int,
    paths: int = 100,
    rng: Any = None,
    progress: bool = False,
) -> TangentGrowth:
    r"""Grow a tangent vector transverse to a synchronised pair of tokens, on many paths.

    Two tokens start at ``x +- EPS v`` (``v`` tangent at ``x``); each layer moves both with the
    same weights, the difference ``(x_1 - x_2) / 2`` is the pushed tangent vector (a central
    difference of the layer map), its norm is logged and it is renormalised to ``EPS``. With the
    noise alone this is the tangent flow of one token; with attention it also feels the pull of
    the other token, the transverse direction of a cluster.

    Parameters
    ----------
    model : StochasticTransformer
        Must have a finite width (the central difference needs the field at two nearby points).
    d : int
        Dimension, at least 2.
    T : float
        Time horizon (the exponent is ``log |v_T| / T``).
    L : int
        Number of layers, step ``h = T / L``.
    paths : int
    rng : Generator, int or None
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    TangentGrowth

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Proposition 1.5 (ReLU rates, text not seen).

    Examples
    --------
    >>> from token_dynamics.stochastic import StochasticTransformer
    >>> g = tangent_growth(StochasticTransformer(width=4, attention=False), 3, T=1.0, L=50,
    ...                    paths=8, rng=0)
    >>> g.log_growth.shape
    (8,)
    """
    if model.width is None:
        raise ValueError(
            "`model.width` must be finite for the tangent-vector method; under fresh weights the "
            "limit does not depend on the width, so any width (e.g. 16) measures the same exponent."
        )
    d = check_int(d, "d", minimum=2)
    T = check_positive(T, "T")
    L = check_int(L, "L", minimum=1)
    paths = check_int(paths, "paths", minimum=2)
    rng = as_rng(rng)
    A, V = model.matrices(d)
    h = T / L
    noise = _Noise(model, paths, d, rng)
    c = _uniform_sphere((paths,), d, rng)
    v = rng.standard_normal((paths, d))
    v -= np.einsum("pd,pd->p", v, c)[:, None] * c
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    total = np.zeros(paths)
    for layer in _progress(range(1, L + 1), progress, "layers"):
        X = _renormalise(np.stack([c + EPS * v, c - EPS * v], axis=1), layer)
        X = _layer(model, X, h, noise, A, V, layer)
        c = _renormalise(X[:, 0] + X[:, 1], layer)
        s = 0.5 * (X[:, 0] - X[:, 1])
        s -= np.einsum("pd,pd->p", s, c)[:, None] * c
        size = np.linalg.norm(s, axis=-1)
        if np.any(size <= 0) or not np.all(np.isfinite(size)):
            raise FloatingPointError(
                f"the tangent vector vanished at layer {layer}; use more layers `L`."
            )
        total += np.log(size / EPS)
        v = s / size[:, None]
    return TangentGrowth(T, total)


def distance_energy(X: Any, q: float) -> np.ndarray:
    r"""Interaction energy :math:`\mathcal E_q(\mu) = \frac1{n^2}\sum_{i,j}|x_i - x_j|^q`.

    Parameters
    ----------
    X : (..., n, d) array_like
        Tokens, with any leading axes (paths, times).
    q : float
        Exponent, positive.

    Returns
    -------
    ndarray
        Shape ``(...)``; zero exactly when all tokens coincide.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Synchronization by noise").

    Examples
    --------
    >>> float(distance_energy([[1.0, 0.0], [-1.0, 0.0]], 1.0))
    1.0
    """
    q = check_positive(q, "q")
    X = np.asarray(X, dtype=np.float64)
    # differences, not the Gram identity |x|^2 + |y|^2 - 2<x, y>: its rounding (1e-16) would
    # become (1e-16)^(q/2), e.g. 1e-4 for q = 1/2, at coincident tokens -- exactly the
    # synchronised states this energy is meant to measure
    diff = X[..., :, None, :] - X[..., None, :, :]
    return (np.linalg.norm(diff, axis=-1) ** q).mean(axis=(-2, -1))


def attention_energy(X: Any, beta: float) -> np.ndarray:
    r"""Attention energy :math:`E_\beta = (2\beta n^2)^{-1}\sum_{ij} e^{\beta x_i\cdot x_j}`.

    The energy that attention with ``Q = K = V = I`` increases (maximal at one cluster); batched
    twin of ``token_dynamics.diagnostics.interaction_energy``.

    Parameters
    ----------
    X : (..., n, d) array_like
    beta : float
        Positive inverse temperature.

    Returns
    -------
    ndarray
        Shape ``(...)``.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Synchronization by noise").

    Examples
    --------
    >>> round(float(attention_energy([[1.0, 0.0], [1.0, 0.0]], 1.0)), 4)
    1.3591
    """
    beta = check_positive(beta, "beta")
    X = np.asarray(X, dtype=np.float64)
    G = X @ np.swapaxes(X, -1, -2)
    return np.exp(beta * G).mean(axis=(-2, -1)) / (2.0 * beta)
