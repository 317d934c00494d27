r"""The paper's experiments: one panel of Figures 1-6 of Agazzi et al. (2026) (private module)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._typing import SeedLike
from .._validation import as_rng, check_int, check_positive, check_real
from ._energy import synchronization_energy
from ._mlp import MLPNoise
from ._model import StochasticTransformer, _kept_layers, simulate

__all__ = ["SynchronizationRun", "synchronization_experiment"]


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
    >>> from token_dynamics.stochastic import synchronization_experiment
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
    rng: SeedLike = None,
) -> SynchronizationRun:
    r"""Run one panel of the paper's experiments (Figure 1 and Appendix B, Figures 2-6).

    ``n_tokens`` tokens uniform on :math:`\mathbb S^{d-1}` go through ``L`` layers of the model
    (1.1) with depth ``T``: softmax attention with :math:`Q = K = I` and :math:`V =
    \text{scale}\cdot I` (``scale = 0``: noise only), then the random MLP of width ``width``
    with biases of standard deviation ``sigma`` (:func:`token_dynamics.stochastic.simulate`).
    With ``activation=None`` there is no MLP: each layer is an Euler step on the sphere
    (:func:`token_dynamics.integrators.integrate`),

    .. math:: X_{\ell+1} = \mathrm{LN}\big(X_\ell + \tfrac TL\,\mathrm{Attn}(X_\ell)\big).

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
        Keep every ``save_every``-th layer (the last one always).
    rng : Generator, int or None

    Returns
    -------
    SynchronizationRun

    Raises
    ------

    ValueError
        If `activation` is unknown, `scale` is not a finite real number, `sigma` is negative,
        `T` is not positive, or an integer argument is out of range.
    FloatingPointError
        If a token becomes non-finite or zero (raise `L`).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, §1.3 (Figure 1) and Appendix B (Figures 2-6).

    Examples
    --------
    >>> from token_dynamics.stochastic import synchronization_experiment
    >>> run = synchronization_experiment("relu", 5, n_tokens=8, L=10, width=16, rng=0)
    >>> run.X.shape, run.energy.shape
    ((11, 8, 5), (11,))
    """
    from .. import attention, integrators, sampling

    d = check_int(d, "d", minimum=2)
    sigma = check_positive(sigma, "sigma", allow_zero=True)
    scale = check_real(scale, "scale")
    T = check_positive(T, "T")
    rng = as_rng(rng)
    X0 = sampling.uniform_sphere(check_int(n_tokens, "n_tokens", minimum=2), d, rng=rng)
    V = float(scale) * np.eye(d)
    if activation is None:
        field = attention.Softmax(np.eye(d), V)
        L, save_every = check_int(L, "L"), check_int(save_every, "save_every")
        times = np.linspace(0.0, T, L + 1)[_kept_layers(L, save_every)]  # the last one always
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
        activation, d, sigma, float(scale), times, X, synchronization_energy(X, beta=beta)
    )
