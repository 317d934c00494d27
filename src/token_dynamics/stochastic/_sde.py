r"""The limit SDE of the deep-and-wide transformer (private module).

.. math:: d\bar X^i_t = \Big(P_{\bar X^i_t}\mathrm{Attn}(\mu^N_t, \bar X^i_t)
          - \kappa(1)\tfrac{d-1}{2}\bar X^i_t\Big)dt
          + \sum_k \sigma_k(\bar X^i_t) P_{\bar X^i_t} dB^k_t

(Itô, the Brownian motions common to all tokens). Over one step the noise term at the tokens
is :math:`P_{x_i}\,\xi_i`, with :math:`(\xi_1,\dots,\xi_N)` centred Gaussian of covariance
:math:`h\,\kappa(\langle x_i, x_j\rangle) I_d`: the field is sampled exactly at the tokens,
without truncating its Karhunen-Loève expansion.
"""

from __future__ import annotations

import numpy as np

from .._backend import is_numpy
from .._typing import ArrayLike, SeedLike
from ._array_api import gaussian_field_refusal
from ._kernels import _interpolant
from ._mlp import _gaussian_field
from ._model import (
    StochasticResult,
    StochasticTransformer,
    _attention_drift,
    _common_args,
    _normalise,
    _run,
)

__all__ = ["SDE_METHODS", "simulate_sde"]

#: ``"projected"``: an Euler-Maruyama step, then the rows renormalised (the tokens stay on the
#: sphere exactly, as the SDE's do, Lemma 2.8); ``"euler"``: the plain Euler-Maruyama scheme
#: of the paper's proof (§2.1, the auxiliary scheme), whose norms drift by O(sqrt(h)).
SDE_METHODS = ("projected", "euler")


def _project(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``P_x w = w - <w, x> x`` row by row (``x`` taken as given)."""
    return W - np.einsum("...d,...d->...", W, X)[..., None] * X


def _sde_drift(X, A, V, off: bool, kappa1: float) -> np.ndarray:
    """``P_X Attn(mu^N, X) - kappa(1) (d - 1) / 2 X``."""
    d = X.shape[-1]
    radial = -0.5 * (d - 1) * kappa1 * X
    if off:
        return radial
    return _project(X, _attention_drift(X, A, V)) + radial


def _sde_step(model, X, h, A, V, off, kappa1, Z, method, what):
    """One Euler-Maruyama step from standard normals ``Z`` (same shape as ``X``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        U = X if method == "projected" else _normalise(X, what)  # the field lives on the sphere
        xi = _gaussian_field(model.noise, U, Z)
        X = X + h * _sde_drift(X, A, V, off, kappa1) + np.sqrt(h) * _project(X, xi)
        if method == "projected":
            return _normalise(X, what)
        if not np.all(np.isfinite(X)):
            raise FloatingPointError(f"the SDE left the finite numbers at {what}; raise `L`.")
        return X


def simulate_sde(
    model: StochasticTransformer,
    X0: ArrayLike,
    *,
    T: float,
    L: int,
    n_paths: int = 1,
    rng: SeedLike = None,
    save_every: int = 1,
    method: str = "projected",
    progress: bool = False,
) -> StochasticResult:
    r"""Simulate the limit SDE (Itô, common noise) with ``L`` Euler-Maruyama steps.

    .. math:: \bar X^i_{k+1} = \bar X^i_k + h\Big(P_{\bar X^i_k}\mathrm{Attn}
              - \kappa(1)\tfrac{d-1}2\bar X^i_k\Big) + \sqrt h\,P_{\bar X^i_k}\,\xi^i_k,
              \qquad \operatorname{Cov}(\xi^i_k, \xi^j_k) = \kappa(\langle\bar X^i_k,
              \bar X^j_k\rangle)\,I_d,

    then (``method="projected"``) each row renormalised. The model's attention (``Q``, ``K``,
    ``V``) and kernel (activation, ``sigma_U``, ``sigma_W``) are used; its width is not: the
    limit has infinite width.

    Parameters
    ----------
    model : StochasticTransformer
    X0 : (N, d) or (n_paths, N, d) array_like
        Initial tokens on the unit sphere.
    T : float
        Final time.
    L : int
        Number of steps (``h = T / L``).
    n_paths : int
    rng : Generator, int or None
    save_every : int
    method : {"projected", "euler"}
        See :data:`SDE_METHODS`.
    progress : bool

    Returns
    -------
    StochasticResult
        ``X`` of shape ``(n_paths, K, N, d)``.

    Raises
    ------

    TypeError
        If `model` is not a :class:`StochasticTransformer`, or `X0` is not a numpy array (the
        exact sampler of the Gaussian field runs on numpy; pass ``np.asarray(X0)``).
    ValueError
        If `method` is unknown, `T` is not positive, `L`, `n_paths` or `save_every` is not a
        positive integer, or `X0` is not a cloud of unit vectors of dimension ``d >= 2``.
    FloatingPointError
        If a token becomes non-finite or zero (a step too large for the noise): raise `L`.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, §1.1 (the limit SDE) and §2.1 (its Euler scheme).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer, simulate_sde
    >>> model = StochasticTransformer(MLPNoise("erf", width=None))
    >>> res = simulate_sde(model, np.eye(3), T=1.0, L=20, n_paths=2, rng=0)
    >>> res.X.shape
    (2, 21, 3, 3)
    """
    if not isinstance(model, StochasticTransformer):
        raise TypeError(f"`model` must be a StochasticTransformer; got {type(model).__name__}.")
    if method not in SDE_METHODS:
        raise ValueError(f"`method` must be one of {SDE_METHODS}; got {method!r}.")
    if not is_numpy(X0):
        raise gaussian_field_refusal(X0, "X0", "simulate_sde samples", finite_width=False)
    T, L, X, keep, rng = _common_args(X0, T, L, n_paths, save_every, rng)
    d = X.shape[-1]
    A, V = model.matrices(d)
    off = model.attention_off(d)
    noise = model.noise
    kernel = _interpolant(noise.activation, d, float(noise.sigma_U), float(noise.sigma_W))
    kappa1 = float(kernel(np.array(1.0)))
    h = T / L

    def step(X, k):
        Z = rng.standard_normal(X.shape)
        return _sde_step(model, X, h, A, V, off, kappa1, Z, method, f"step {k}")

    return _run(step, X, T, L, keep, progress, "steps")
