r"""Synchronization by a common noise, measured: Monte-Carlo rates and the paper's experiments
(private module).

- :func:`energy_decay_rate`, :func:`separation_exponent`,
  :func:`two_point_lyapunov_exponent` -- Monte-Carlo estimators of the decay rate of
  Theorem 1.4 and of the top Lyapunov exponent of Agazzi et al. (2026);
- :func:`synchronization_experiment` -- one panel of their Figures 1-6.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import geometry
from .._validation import (
    as_real_array,
    as_rng,
    check_int,
    check_positive,
)
from ._energy import synchronization_energy
from ._limits import MCEstimate, mc_estimate
from ._model import MLPNoise, StochasticTransformer, simulate
from ._sde import simulate_sde

__all__ = [
    "SynchronizationRun",
    "energy_decay_rate",
    "separation_exponent",
    "synchronization_experiment",
    "two_point_lyapunov_exponent",
]


def energy_decay_rate(times: Any, energies: Any) -> MCEstimate:
    r"""Exponential rate of the mean energy :math:`\mathbb E\,\mathcal S_\beta(\mu_t)` over paths.

    The slope of the least-squares line through :math:`(t_k, \log \bar E_k)`, where
    :math:`\bar E_k` is the mean over paths at time :math:`t_k`. Its standard error is the delta
    method with the full covariance across times: the slope is :math:`\sum_k c_k\log\bar E_k`, so
    its variance is :math:`\sum_{k,l} c_k c_l\,\mathrm{Cov}(E_k, E_l)/(P\,\bar E_k\bar E_l)`.

    Parameters
    ----------
    times : array_like, shape (T,)
        At least two distinct times.
    energies : array_like, shape (paths, T)
        Energy of each path at each time, positive means.

    Returns
    -------
    MCEstimate
        ``mean`` is the rate, ``stderr`` its standard error over the paths, ``samples`` the
        number of paths.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Theorem 1.4 (the bound this rate is compared with).

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0, 1, 5)
    >>> E = np.exp(-2 * t) * np.array([[1.0], [1.2], [0.8]])
    >>> round(energy_decay_rate(t, E).mean, 12)
    -2.0
    """
    t = as_real_array(times, "times")
    E = as_real_array(energies, "energies")
    if t.ndim != 1 or t.size < 2 or np.ptp(t) == 0:
        raise ValueError("`times` must be a 1-D array of at least two distinct times.")
    if E.ndim != 2 or E.shape[1] != t.size or E.shape[0] < 2:
        raise ValueError(
            f"`energies` must have shape (paths, {t.size}) with at least two paths; "
            f"got shape {E.shape}."
        )
    mean = E.mean(axis=0)
    if not np.all(np.isfinite(E)) or np.any(mean <= 0):
        raise ValueError("`energies` must be finite with positive means over the paths.")
    c = (t - t.mean()) / np.sum((t - t.mean()) ** 2)
    rate = float(c @ np.log(mean))
    cov = np.cov(E, rowvar=False) / E.shape[0]
    g = c / mean
    return MCEstimate(rate, float(np.sqrt(max(g @ cov @ g, 0.0))), E.shape[0])


def separation_exponent(times: Any, states: Any) -> MCEstimate:
    r"""Top Lyapunov exponent from two nearby tokens, :math:`\mathbb E\log(|X_T-Y_T|/|X_0-Y_0|)/T`.

    Parameters
    ----------
    times : array_like, shape (T,)
        Times of the saved states; the rate is measured between the first and the last.
    states : array_like, shape (paths, T, 2, d)
        Two tokens per path, started close (their separation must stay small for the exponent
        of the linearised flow to be measured).

    Returns
    -------
    MCEstimate
        ``mean`` is the rate, ``stderr`` its standard error over the paths, ``samples`` the
        number of paths.
        Mean over paths of the log-growth per unit time, with its standard error.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Remark 1.5 and Proposition 1.5.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([1.0, 0.0]); y = np.array([np.cos(1e-6), np.sin(1e-6)])
    >>> z = np.array([np.cos(1e-7), np.sin(1e-7)])
    >>> S = np.array([[[x, y], [x, z]], [[x, y], [x, z]]])        # 2 paths, 2 times
    >>> round(float(separation_exponent([0.0, 1.0], S).mean), 6)
    -2.302585
    """
    t = as_real_array(times, "times")
    S = as_real_array(states, "states")
    if S.ndim != 4 or S.shape[2] != 2 or S.shape[1] != t.size or S.shape[0] < 2:
        raise ValueError(
            "`states` must have shape (paths, T, 2, d) with two tokens and at least two paths; "
            f"got shape {S.shape}."
        )
    if t.size < 2 or t[-1] <= t[0]:
        raise ValueError("`times` must increase from its first to its last entry.")
    gap = np.linalg.norm(S[:, :, 0] - S[:, :, 1], axis=-1)
    if np.any(gap[:, [0, -1]] <= 0):
        raise FloatingPointError(
            "the two tokens coincide at the first or last time; start them apart (e.g. 1e-6)."
        )
    g = np.log(gap[:, -1] / gap[:, 0]) / (t[-1] - t[0])
    return mc_estimate(g)


def two_point_lyapunov_exponent(
    model: StochasticTransformer,
    d: int,
    *,
    T: float,
    L: int,
    n_paths: int = 100,
    separation: float = 1e-3,
    rng: Any = None,
) -> MCEstimate:
    r"""Top Lyapunov exponent of the limit SDE, from two nearby tokens sharing the noise.

    Each path starts from a uniform token :math:`x` and
    :math:`y = \mathrm{LN}(x + \text{separation}\cdot v)`, :math:`v` a uniform unit tangent
    vector at :math:`x`; the
    two tokens follow :func:`token_dynamics.stochastic.simulate_sde` and the exponent is
    :func:`separation_exponent` over ``[0, T]``. For the noise alone it estimates
    :math:`\lambda_1 = \frac{d-3}2\kappa'(1) - \frac{d-1}2\kappa(1)`.

    Parameters
    ----------
    model : StochasticTransformer
        Its noise (activation, biases) and attention; ``V = 0`` for the noise alone.
    d : int
    T : float
        Time horizon.
    L : int
        Euler-Maruyama steps.
    n_paths : int
    separation : float
        Initial distance; small enough for the pair to stay in the linear regime (the
        exponent has a relative bias of the order of the separation squared), large enough for
        the 2 x 2 kernel matrix of the pair, whose small eigenvalue is about
        :math:`\kappa'(1)\,\text{separation}^2`, to stay far above its rounding and the jitter
        of its factorisation (``1e-3`` by default).
    rng : Generator, int or None

    Returns
    -------
    MCEstimate
        ``mean`` is the rate, ``stderr`` its standard error over the paths, ``samples`` the
        number of paths.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Remark 1.5 and Proposition 1.5.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise
    >>> model = StochasticTransformer(MLPNoise("relu", width=None), V=np.zeros((5, 5)))
    >>> est = two_point_lyapunov_exponent(model, 5, T=1.0, L=50, n_paths=8, rng=0)
    >>> est.samples
    8
    """
    from ..sampling import uniform_sphere

    d = check_int(d, "d", minimum=2)
    separation = check_positive(separation, "separation")
    n_paths = check_int(n_paths, "n_paths", minimum=2)
    rng = as_rng(rng)
    x = uniform_sphere(n_paths, d, rng=rng)
    v = geometry.project_tangent(x, rng.standard_normal((n_paths, d)))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    y = geometry.normalize(x + separation * v)
    res = simulate_sde(
        model, np.stack([x, y], axis=1), T=T, L=L, n_paths=n_paths, rng=rng, save_every=L
    )
    return separation_exponent(res.times, res.X)


@dataclass(frozen=True)
class SynchronizationRun:
    r"""One panel of the paper's Figures 1-6: a token cloud through the layers of one model.

    Attributes
    ----------
    activation : str or None
        ``None`` for the model without MLP (attention only).
    d : int
    sigma : float
        Bias standard deviation, ``sigma_U = sigma_W = sigma``.
    scale : float
        Attention scale, ``V = scale * I`` (``Q = K = I``).
    times : ndarray, shape (K,)
        Depths ``t = l T / L`` of the saved layers.
    X : ndarray, shape (K, N, d)
        Tokens at the saved layers (one path).
    energy : ndarray, shape (K,)
        :math:`\mathcal S_\beta` of the tokens at the saved layers.

    Examples
    --------
    >>> run = synchronization_experiment(None, 3, n_tokens=4, L=5, rng=0)
    >>> run.cosines().shape, run.energy.shape
    ((6, 6), (6,))
    """

    activation: str | None
    d: int
    sigma: float
    scale: float
    times: np.ndarray
    X: np.ndarray
    energy: np.ndarray

    def cosines(self) -> np.ndarray:
        """Pairwise cosine similarities ``<x_i, x_j>``, ``i < j``, shape (K, N (N - 1) / 2)."""
        i, j = np.triu_indices(self.X.shape[1], 1)
        return np.einsum("knd,knd->kn", self.X[:, i], self.X[:, j])


def synchronization_experiment(
    activation: str | None,
    d: int,
    *,
    sigma: float = 0.0,
    scale: float = 1.0,
    n_tokens: int = 64,
    L: int = 150,
    T: float = 5.0,
    width: int = 256,
    beta: float = 1.0,
    save_every: int = 1,
    rng: Any = None,
) -> SynchronizationRun:
    r"""Run one panel of the paper's experiments (Figure 1 and Appendix B, Figures 2-6).

    ``n_tokens`` tokens uniform on :math:`\mathbb S^{d-1}` go through ``L`` layers of the model
    (1.1) with depth ``T``: softmax attention with :math:`Q = K = I` and :math:`V =
    \text{scale}\cdot I` (``scale = 0``: noise only), then the random MLP of width ``width``
    with biases of standard deviation ``sigma`` (:func:`token_dynamics.stochastic.simulate`).
    With ``activation=None`` there is no MLP: each layer is
    :math:`\mathrm{LN}(X + \frac TL\,\mathrm{Attn}(X))`, an Euler step on the sphere
    (:func:`token_dynamics.integrators.integrate`).

    Parameters
    ----------
    activation : str or None
    d : int
    sigma : float
    scale : float
    n_tokens, L : int
    T : float
    width : int
    beta : float
        Inverse temperature of the energy :math:`\mathcal S_\beta` recorded along the run.
    save_every : int
    rng : Generator, int or None

    Returns
    -------
    SynchronizationRun

    References
    ----------
    Agazzi et al., arXiv:2604.26898, §1.3 (Figure 1) and Appendix B (Figures 2-6).

    Examples
    --------
    >>> run = synchronization_experiment("relu", 5, n_tokens=8, L=10, width=16, rng=0)
    >>> run.X.shape, run.energy.shape
    ((11, 8, 5), (11,))
    """
    from .. import attention, integrators, sampling

    d = check_int(d, "d", minimum=2)
    sigma = check_positive(sigma, "sigma", allow_zero=True)
    if isinstance(scale, bool) or not np.isfinite(scale):
        raise ValueError(f"`scale` must be a finite real number; got {scale!r}.")
    rng = as_rng(rng)
    X0 = sampling.uniform_sphere(check_int(n_tokens, "n_tokens", minimum=2), d, rng=rng)
    V = float(scale) * np.eye(d)
    if activation is None:
        field = attention.Softmax(np.eye(d), V)
        L, save_every = check_int(L, "L"), check_int(save_every, "save_every")
        times = np.linspace(0.0, T, L + 1)[::save_every]
        traj = integrators.integrate(
            lambda t, X: field.velocity(X),
            X0,
            times,
            method="euler",
            dt=T / L,
            geometry="sphere",
        )
        times, X = traj.times, traj.states
    else:
        noise = MLPNoise(activation, width=width, sigma_U=sigma, sigma_W=sigma)
        res = simulate(
            StochasticTransformer(noise, V=V), X0, T=T, L=L, rng=rng, save_every=save_every
        )
        times, X = res.times, res.X[0]
    return SynchronizationRun(
        activation, d, sigma, float(scale), times, X, synchronization_energy(X, beta)
    )
