r"""Synchronization by a common noise: the energy, the exponents and the rates of Agazzi et al.
(private module).

Everything here is a function of the noise kernel :math:`\kappa` of the paper's MLP
(:func:`token_dynamics.stochastic.kappa`), of the inverse temperature :math:`\beta` of the
energy, and of the tokens:

- :func:`synchronization_energy` -- :math:`\mathcal E_\beta(\mu) = \frac12\iint(e^\beta -
  e^{\beta\langle x, y\rangle})\,d\mu\,d\mu`, zero exactly at a Dirac mass;
- :func:`noise_exponents`, :func:`relu_noise_exponents`, :func:`noise_exponent_table` --
  :math:`\kappa(1)`, :math:`\kappa'(1)`, the top Lyapunov exponent :math:`\lambda_1` and the
  coercivity :math:`\bar\lambda` (Remark 1.5, Assumption 1, Proposition 1.5, Table 1);
- :func:`lemma_4_1_terms`, :func:`dissipation_function`, :func:`dissipation_rate` -- the
  functions :math:`G_0, G_1, G, F` of Lemma 4.1 and the rate :math:`\bar\lambda'`;
- :func:`noise_energy_drift`, :func:`energy_derivative` -- the Itô drift of
  :math:`\mathcal E_\beta` under the noise (terms (II)+(III)+(IV) of §4) and its derivative along
  a deterministic velocity (term (I));
- :func:`energy_decay_rate`, :func:`separation_exponent` -- Monte-Carlo estimators of the decay
  rate of Theorem 1.4 and of the top Lyapunov exponent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize

from .. import geometry
from .._validation import (
    as_real_array,
    as_rng,
    as_sphere_tokens,
    as_square,
    as_weights,
    check_int,
    check_positive,
)
from ._kernels import _interpolant, kappa, kappa_prime
from ._limits import MCEstimate, mc_estimate
from ._model import MLPNoise, StochasticTransformer, simulate
from ._sde import simulate_sde

__all__ = [
    "ODD_ACTIVATIONS",
    "TABLE_1_ACTIVATIONS",
    "TABLE_1_DIMENSIONS",
    "TABLE_1_SIGMAS",
    "AssumptionError",
    "Lemma41Terms",
    "NoiseExponents",
    "SynchronizationRun",
    "attention_forcing",
    "check_assumption_1",
    "dissipation_function",
    "dissipation_rate",
    "energy_decay_rate",
    "energy_derivative",
    "lemma_4_1_terms",
    "noise_energy_drift",
    "noise_exponent_table",
    "noise_exponents",
    "relu_noise_exponents",
    "separation_exponent",
    "synchronization_energy",
    "synchronization_experiment",
    "two_point_lyapunov_exponent",
]

#: Activations for which the MLP field is odd, ``G(-y) = -G(y)``, when both biases vanish.
ODD_ACTIVATIONS = ("tanh", "erf")
#: The grid of the paper's Table 1 and Figures 2-6 (Appendix B).
TABLE_1_ACTIVATIONS = ("relu", "silu", "sigmoid", "tanh")
TABLE_1_DIMENSIONS = (5, 64, 128)
TABLE_1_SIGMAS = (0.0, 0.1)
#: Grid points on [-1, 1] for the infimum of Lemma 4.1's F; the grid minimum is refined by a
#: bounded scalar search, so the grid only has to land in the right basin.
DISSIPATION_GRID = 801
#: Below this distance to u = 1, F is replaced by the secant between F(1 - TAYLOR_GAP) and its
#: limit F(1) = -lambda_bar: G(u) vanishes at 1 and a kernel accurate to 1e-10 leaves an error
#: 1e-10 d / (1 - u) in G(u) / (1 - u). Over the gap F moves by O(TAYLOR_GAP) for smooth
#: activations and O(TAYLOR_GAP^(1/2)) for ReLU (kappa'' is unbounded at 1).
TAYLOR_GAP = 1e-3
#: log of the largest float64: e^beta overflows beyond it.
LOG_FLOAT_MAX = float(np.log(np.finfo(np.float64).max))


class AssumptionError(ValueError):
    """A hypothesis of Agazzi et al. (2026), Theorem 1.4 (Assumption 1) does not hold."""


# -- the energy ---------------------------------------------------------------------------------


def _sphere_stack(X: Any, name: str = "X") -> np.ndarray:
    """Tokens of shape ``(..., n, d)`` on the unit sphere, as a fresh float64 array."""
    arr = np.asarray(X, dtype=np.float64) if not isinstance(X, np.ndarray) else X
    if arr.ndim < 2:
        raise ValueError(
            f"`{name}` must have shape (..., n, d) with one token per row; got shape {arr.shape}."
        )
    flat = as_sphere_tokens(arr.reshape(-1, arr.shape[-1]), name)
    return flat.reshape(arr.shape)


def _half_gaps(X: np.ndarray) -> np.ndarray:
    r"""``1 - <x_i, x_j>`` as ``|x_i - x_j|^2 / 2``, exact near the diagonal; shape (..., n, n)."""
    diff = X[..., :, None, :] - X[..., None, :, :]
    return 0.5 * np.einsum("...ijk,...ijk->...ij", diff, diff)


def _beta(beta: Any) -> float:
    return check_positive(beta, "beta")


def synchronization_energy(
    X: Any, beta: float, weights: Any = None, *, scaled: bool = False
) -> np.ndarray:
    r"""The energy of Agazzi et al. (2026) that a common noise dissipates,

    .. math::

        \mathcal E_\beta(\mu) = \frac12 \iint \big(e^\beta - e^{\beta\langle x, y\rangle}\big)
        \, d\mu(x)\, d\mu(y)
        = \frac{e^\beta}2 \sum_{i,j} w_i w_j \big(1 - e^{-\beta(1 - \langle x_i, x_j\rangle)}\big).

    It is nonnegative on the sphere and vanishes exactly at a Dirac mass. It is *not* the
    interaction energy :func:`token_dynamics.diagnostics.interaction_energy`
    (:math:`\frac1{2\beta}\iint e^{\beta\langle x,y\rangle}`, which attention increases): the
    two are related by :math:`\mathcal E_\beta = e^\beta/2 - \beta\,E_\beta`. Computed with
    ``expm1`` of ``beta |x_i - x_j|^2 / 2``, without cancellation for nearby tokens.

    Parameters
    ----------
    X : array_like, shape (..., n, d)
        Tokens on the unit sphere; leading axes (paths, times) are kept.
    beta : float
        Positive inverse temperature.
    weights : array_like, shape (n,), optional
        Weights of the tokens (uniform by default).
    scaled : bool
        Return :math:`e^{-\beta}\mathcal E_\beta`, finite for every ``beta``.

    Returns
    -------
    ndarray, shape (...)
        A 0-d array for one cloud.

    Raises
    ------
    FloatingPointError
        If :math:`e^\beta` overflows (``beta`` above about 709) and ``scaled`` is false.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, *Stochastic scaling limits and
    synchronization by noise in deep transformer models*, arXiv:2604.26898, 2026, eq. (1.5).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> round(float(synchronization_energy(X, 1.0)), 12)       # (e - 1) / 4
    0.429570457115
    >>> float(synchronization_energy(X[:1], 1.0))   # a Dirac mass
    0.0
    """
    X = _sphere_stack(X)
    beta = _beta(beta)
    w = as_weights(weights, X.shape[-2])
    pairs = -np.expm1(-beta * _half_gaps(X))
    value = 0.5 * np.einsum("...ij,i,j->...", pairs, w, w)
    if scaled:
        return value
    if beta > LOG_FLOAT_MAX:
        raise FloatingPointError(
            f"e^beta overflows float64 at `beta` = {beta:g}; pass `scaled=True` for "
            "e^-beta times the energy."
        )
    return np.exp(beta) * value


def energy_derivative(X: Any, velocity: Any, beta: float, weights: Any = None) -> float:
    r"""Time derivative of :math:`\mathcal E_\beta(\mu)` when the tokens move with ``velocity``,

    .. math::

        \frac{d}{dt}\mathcal E_\beta = -\beta \sum_{i,j} w_i w_j\, e^{\beta\langle x_i, x_j\rangle}
        \langle v_i, x_j\rangle .

    With ``velocity = P_x Attn(mu, x)`` this is the term (I) of the proof of Agazzi et al.
    (2026), Theorem 1.4, and its sign for :math:`Q^\top K = \beta I`, :math:`V = I` is their
    Remark 1.6 (:math:`\varepsilon = 0` in Assumption 2).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere.
    velocity : array_like, shape (n, d)
        Velocity of each token, tangent to the sphere (a radial part would change the norms,
        and the formula would then differentiate the first expression of the energy off the
        sphere).
    beta : float
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    References
    ----------
    Agazzi et al., arXiv:2604.26898, §4 (term (I)) and Remark 1.6.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> V = np.array([[0.0, 1.0], [1.0, 0.0]])   # both tokens turn towards each other
    >>> energy_derivative(X, V, 1.0) < 0
    True
    """
    X = as_sphere_tokens(X)
    v = as_real_array(velocity, "velocity")
    if v.shape != X.shape or not np.all(np.isfinite(v)):
        raise ValueError(
            f"`velocity` must be finite with the shape {X.shape} of `X`; got shape {v.shape}."
        )
    beta = _beta(beta)
    w = as_weights(weights, X.shape[0])
    if beta > LOG_FLOAT_MAX:
        raise FloatingPointError(f"e^beta overflows float64 at `beta` = {beta:g}; lower `beta`.")
    kernel = np.exp(-beta * _half_gaps(X))  # e^{beta (u - 1)}
    return float(-beta * np.exp(beta) * np.einsum("ij,ij,i,j->", kernel, v @ X.T, w, w))


def attention_forcing(
    X: Any, beta: float, *, Q: Any = None, K: Any = None, V: Any = None, weights: Any = None
) -> float:
    r"""The ratio :math:`\frac{d}{dt}\mathcal S_\beta / \mathcal S_\beta` along the noiseless
    attention flow of the model (1.1), at the tokens ``X``.

    The flow is :math:`\dot x_i = P_{x_i}\mathrm{Attn}(\mu, x_i)` with weights
    :math:`\mathrm{softmax}_j\langle Qx_i, Kx_j\rangle` and values :math:`Vx_j` (no
    temperature). Assumption 2 of Agazzi et al. (2026) asks for an :math:`\varepsilon` above
    this ratio at every cloud; by their Remark 1.6 it is :math:`\le 0` for
    :math:`Q^\top K = \beta I`, :math:`V = I`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere, not all equal (else the energy vanishes).
    beta : float
        Inverse temperature of the energy.
    Q, K, V : array_like, shape (d, d), optional
        ``None`` is the identity.
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Assumption 2 and Remark 1.6.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(3)
    >>> attention_forcing(X, 1.0) <= 0                  # Q = K = V = I, beta = 1
    True
    >>> attention_forcing(X, 1.0, V=-np.eye(3)) > 0     # repulsive values
    True
    """
    from ..attention import Softmax

    X = as_sphere_tokens(X)
    d = X.shape[1]
    Q, K, V = (
        np.eye(d) if M is None else as_square(M, name, d=d)
        for M, name in ((Q, "Q"), (K, "K"), (V, "V"))
    )
    field = Softmax(K.T @ Q, V)
    v = geometry.project_tangent(X, field.velocity(X, weights=weights))
    energy = float(synchronization_energy(X, beta, weights))
    if energy == 0:
        raise ValueError("`X` is a single point (zero energy); the ratio is undefined there.")
    return energy_derivative(X, v, beta, weights) / energy


# -- the exponents of the noise -----------------------------------------------------------------


@dataclass(frozen=True)
class NoiseExponents:
    r"""The kernel values and exponents of one MLP noise (one row of the paper's Table 1).

    Attributes
    ----------
    activation : str
    d : int
        Dimension of the tokens.
    sigma_U, sigma_W : float
        Standard deviations of the two biases.
    kappa_1, kappa_prime_1 : float
        :math:`\kappa(1)` and :math:`\kappa'(1)`.
    lambda_1 : float
        Top Lyapunov exponent of the noise flow, :math:`\frac{d-3}2\kappa'(1) -
        \frac{d-1}2\kappa(1)` (Remark 1.5).
    lambda_bar : float
        :math:`\bar\lambda = (d-1)\kappa'(1) - (d-3)\kappa(1)` (Assumption 1).
    """

    activation: str
    d: int
    sigma_U: float
    sigma_W: float
    kappa_1: float
    kappa_prime_1: float
    lambda_1: float
    lambda_bar: float

    @property
    def odd(self) -> bool:
        """Whether the MLP field is almost surely odd (odd activation, both biases zero)."""
        return self.activation in ODD_ACTIVATIONS and self.sigma_U == 0 and self.sigma_W == 0

    @property
    def assumption_1(self) -> bool:
        r"""True when Assumption 1 holds (the field is not odd and :math:`\bar\lambda < 0`)."""
        return (not self.odd) and self.lambda_bar < 0


def _exponents(activation, d, sigma_U, sigma_W, k1, k1p) -> NoiseExponents:
    lam_1 = 0.5 * (d - 3) * k1p - 0.5 * (d - 1) * k1
    lam_bar = (d - 1) * k1p - (d - 3) * k1
    return NoiseExponents(
        activation, d, sigma_U, sigma_W, float(k1), float(k1p), float(lam_1), float(lam_bar)
    )


def _noise_args(d: Any, sigma_U: Any, sigma_W: Any) -> tuple[int, float, float]:
    return (
        check_int(d, "d", minimum=2),
        check_positive(sigma_U, "sigma_U", allow_zero=True),
        check_positive(sigma_W, "sigma_W", allow_zero=True),
    )


def noise_exponents(
    activation: str, *, d: int, sigma_U: float = 0.0, sigma_W: float = 0.0
) -> NoiseExponents:
    r"""The kernel values and the exponents :math:`\lambda_1`, :math:`\bar\lambda` of one MLP noise.

    .. math::

        \lambda_1 = \frac{d-3}2\kappa'(1) - \frac{d-1}2\kappa(1), \qquad
        \bar\lambda = (d-1)\kappa'(1) - (d-3)\kappa(1), \qquad
        \lambda_1 = \frac{\bar\lambda}2 - \kappa(1) - \kappa'(1),

    with :math:`\kappa(1)` and :math:`\kappa'(1)` (Lemma 4.2) from
    :func:`token_dynamics.stochastic.kappa` and :func:`token_dynamics.stochastic.kappa_prime`.

    Parameters
    ----------
    activation : str
        One of :data:`token_dynamics.stochastic.ACTIVATIONS`.
    d : int
        Dimension of the tokens, at least 2.
    sigma_U, sigma_W : float
        Standard deviations of the inner and outer biases.

    Returns
    -------
    NoiseExponents

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Remark 1.5, Assumption 1, Lemma 4.2 and Table 1.

    Examples
    --------
    >>> row = noise_exponents("relu", d=5)
    >>> round(row.lambda_1, 12), round(row.lambda_bar, 12)
    (-0.1, 0.2)
    """
    d, sigma_U, sigma_W = _noise_args(d, sigma_U, sigma_W)
    k1 = float(kappa(1.0, activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W))
    k1p = float(kappa_prime(1.0, activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W))
    return _exponents(activation, d, sigma_U, sigma_W, k1, k1p)


def relu_noise_exponents(d: int, *, sigma_U: float = 0.0, sigma_W: float = 0.0) -> NoiseExponents:
    r"""The closed forms of Agazzi et al. (2026), Proposition 1.5, for the ReLU activation,

    .. math::

        \kappa(1) = \tfrac12\big(\tfrac1d + \sigma_U^2\big) + \sigma_W^2, \quad
        \kappa'(1) = \tfrac1{2d},

        \lambda_1 = -\frac1{2d} - \frac{(\sigma_U^2 + 2\sigma_W^2)(d-1)}4, \quad
        \bar\lambda = \frac1d - \frac{(\sigma_U^2 + 2\sigma_W^2)(d-3)}2 .

    Parameters
    ----------
    d : int
    sigma_U, sigma_W : float

    Returns
    -------
    NoiseExponents

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Proposition 1.5 (proved as Proposition 4.3).

    Examples
    --------
    >>> relu_noise_exponents(64, sigma_U=0.1, sigma_W=0.1).lambda_bar
    -0.899375
    """
    d, sigma_U, sigma_W = _noise_args(d, sigma_U, sigma_W)
    s = sigma_U**2 + 2 * sigma_W**2
    k1 = 0.5 * (1 / d + sigma_U**2) + sigma_W**2
    k1p = 1 / (2 * d)
    lam_1 = -1 / (2 * d) - s * (d - 1) / 4
    lam_bar = 1 / d - s * (d - 3) / 2
    return NoiseExponents("relu", d, sigma_U, sigma_W, k1, k1p, lam_1, lam_bar)


def noise_exponent_table(
    activations: Any = TABLE_1_ACTIVATIONS,
    dimensions: Any = TABLE_1_DIMENSIONS,
    sigmas: Any = TABLE_1_SIGMAS,
) -> list[NoiseExponents]:
    r"""The paper's Table 1: :func:`noise_exponents` over a grid, with :math:`\sigma_U = \sigma_W`.

    Parameters
    ----------
    activations : sequence of str
    dimensions : sequence of int
    sigmas : sequence of float
        Bias standard deviations, ``sigma_U = sigma_W = sigma``.

    Returns
    -------
    list of NoiseExponents
        Activation-major, then dimension, then sigma (the paper's order).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Appendix B, Table 1.

    Examples
    --------
    >>> rows = noise_exponent_table(["relu"], [5], [0.0])
    >>> rows[0].kappa_1
    0.1
    """
    return [
        noise_exponents(a, d=d, sigma_U=s, sigma_W=s)
        for a in activations
        for d in dimensions
        for s in sigmas
    ]


def check_assumption_1(
    activation: str, *, d: int, sigma_U: float = 0.0, sigma_W: float = 0.0
) -> NoiseExponents:
    r"""Return the exponents if Assumption 1 of Agazzi et al. (2026) holds; raise otherwise.

    Assumption 1: the MLP field is almost surely not odd and
    :math:`\bar\lambda = (d-1)\kappa'(1) - (d-3)\kappa(1) < 0` (which forces :math:`d > 3`).

    Raises
    ------
    AssumptionError
        Naming the failing condition and what would fix it.

    Examples
    --------
    >>> check_assumption_1("relu", d=64, sigma_U=0.1, sigma_W=0.1).lambda_bar < 0
    True
    >>> check_assumption_1("relu", d=64)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    token_dynamics.stochastic._synchronization.AssumptionError: Assumption 1 fails: ...
    """
    row = noise_exponents(activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W)
    if row.odd:
        raise AssumptionError(
            f"Assumption 1 fails: with `activation` = {activation!r} and zero biases the MLP "
            "field is odd (antipodal tokens stay antipodal); give `sigma_U` or `sigma_W` a "
            "positive value."
        )
    if row.lambda_bar >= 0:
        hint = "it cannot be negative for `d` <= 3" if row.d <= 3 else "raise `sigma_U`/`sigma_W`"
        raise AssumptionError(
            f"Assumption 1 fails: lambda_bar = (d-1) kappa'(1) - (d-3) kappa(1) = "
            f"{row.lambda_bar:.4g} >= 0 for {activation!r}, d = {row.d}, sigma_U = {sigma_U:g}, "
            f"sigma_W = {sigma_W:g}; {hint}."
        )
    return row


# -- Lemma 4.1 ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lemma41Terms:
    r"""The functions of Agazzi et al. (2026), Lemma 4.1, on a grid of inner products.

    Attributes
    ----------
    u : ndarray, shape (k,)
    G0 : ndarray, shape (k,)
        :math:`\kappa(u)(d-2+u^2) - \kappa(1)(d-1)u`: the drift of :math:`u = \langle X, Y\rangle`
        for two tokens moved by the noise.
    G1 : ndarray, shape (k,)
        :math:`(1-u^2)(\kappa(1) - u\kappa(u))`: half the variance rate of :math:`u`.
    G : ndarray, shape (k,)
        :math:`G_0 + \beta G_1`.
    """

    u: np.ndarray
    G0: np.ndarray
    G1: np.ndarray
    G: np.ndarray


def _inner_products(u: Any) -> np.ndarray:
    arr = np.atleast_1d(as_real_array(u, "u"))
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > 1):
        raise ValueError("`u` must be a finite 1-D array of inner products in [-1, 1].")
    return arr


def _noise(activation: str, d: Any, sigma_U: Any, sigma_W: Any):
    """The exponents of one noise and a fast callable ``u -> kappa(u)`` (accurate to ~1e-12)."""
    row = noise_exponents(activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W)
    return row, _interpolant(activation, row.d, row.sigma_U, row.sigma_W)


def _terms(u: np.ndarray, row: NoiseExponents, k, beta: float) -> Lemma41Terms:
    ku = np.asarray(k(u), dtype=np.float64)
    G0 = ku * (row.d - 2 + u**2) - row.kappa_1 * (row.d - 1) * u
    G1 = (1 - u**2) * (row.kappa_1 - u * ku)
    return Lemma41Terms(u, G0, G1, G0 + beta * G1)


def _F(u: np.ndarray, row: NoiseExponents, k, beta: float) -> np.ndarray:
    """Lemma 4.1's F, with its secant to the limit at 1 within TAYLOR_GAP of the diagonal."""
    far = u < 1 - TAYLOR_GAP
    out = np.empty_like(u)
    out[far] = beta * _terms(u[far], row, k, beta).G / np.expm1(beta * (1 - u[far]))
    if not np.all(far):
        u0 = np.array([1 - TAYLOR_GAP])
        F0 = float(beta * _terms(u0, row, k, beta).G[0] / np.expm1(beta * TAYLOR_GAP))
        slope = (-row.lambda_bar - F0) / TAYLOR_GAP
        out[~far] = -row.lambda_bar + slope * (u[~far] - 1)
    return out


def lemma_4_1_terms(
    u: Any,
    activation: str,
    *,
    d: int,
    beta: float,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
) -> Lemma41Terms:
    r"""The functions :math:`G_0`, :math:`G_1` and :math:`G = G_0 + \beta G_1` of Lemma 4.1,

    .. math::

        G_0(u) = \kappa(u)(d-2+u^2) - \kappa(1)(d-1)u, \qquad
        G_1(u) = (1-u^2)\big(\kappa(1) - u\kappa(u)\big).

    Parameters
    ----------
    u : array_like, shape (k,)
        Inner products in ``[-1, 1]``.
    activation : str
    d : int
    beta : float
    sigma_U, sigma_W : float

    Returns
    -------
    Lemma41Terms

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Lemma 4.1.

    Examples
    --------
    >>> t = lemma_4_1_terms([1.0], "relu", d=5, beta=1.0)
    >>> abs(float(t.G[0])) < 1e-12          # G vanishes on the diagonal
    True
    """
    u = _inner_products(u)
    beta = _beta(beta)
    row, k = _noise(activation, d, sigma_U, sigma_W)
    return _terms(u, row, k, beta)


def dissipation_function(
    u: Any,
    activation: str,
    *,
    d: int,
    beta: float,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
) -> np.ndarray:
    r"""The function :math:`F` of Agazzi et al. (2026), Lemma 4.1, continuous on :math:`[-1, 1]`,

    .. math::

        F(u) = \frac{\beta e^{\beta u} G(u)}{e^\beta - e^{\beta u}}
             = \frac{\beta\, G(u)}{\operatorname{expm1}(\beta(1-u))}, \qquad
        F(1) = \lim_{u\to1} F(u) = -\bar\lambda .

    The limit follows from :math:`G(1) = 0` and :math:`G'(1) = G_0'(1) = \bar\lambda`
    (:math:`G_1` vanishes to second order at 1). Within ``TAYLOR_GAP`` of 1, where the quotient
    loses digits, :math:`F` is replaced by its secant between :math:`1 - \text{TAYLOR\_GAP}`
    and :math:`1`.

    Parameters
    ----------
    u : array_like, shape (k,)
    activation : str
    d : int
    beta : float
    sigma_U, sigma_W : float

    Returns
    -------
    ndarray, shape (k,)

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Lemma 4.1.

    Examples
    --------
    >>> F = dissipation_function([1.0], "relu", d=64, beta=1.0, sigma_U=0.1, sigma_W=0.1)
    >>> float(F[0])                            # -lambda_bar
    0.899375
    """
    u = _inner_products(u)
    beta = _beta(beta)
    row, k = _noise(activation, d, sigma_U, sigma_W)
    return _F(u, row, k, beta)


def dissipation_rate(
    activation: str,
    *,
    d: int,
    beta: float,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
    strict: bool = True,
) -> float:
    r"""The rate :math:`\bar\lambda' = -\inf_{[-1,1]} F` of Agazzi et al. (2026), Lemma 4.1.

    Under Assumption 1 it is negative and, since :math:`F(1) = -\bar\lambda`, it satisfies
    :math:`\bar\lambda \le \bar\lambda' < 0`; it bounds the noise terms of the Itô formula,
    :math:`-\frac12\beta e^{\beta u}G(u) \le \bar\lambda'\,\frac12(e^\beta - e^{\beta u})`.
    The infimum is taken on a grid of ``DISSIPATION_GRID`` points, refined by a bounded search.

    Parameters
    ----------
    activation : str
    d : int
    beta : float
    sigma_U, sigma_W : float
    strict : bool
        Raise :class:`AssumptionError` when Assumption 1 fails (the lemma's hypothesis). With
        ``False`` the number :math:`-\inf F` is returned anyway (it is then not negative).

    Returns
    -------
    float

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Lemma 4.1 and Theorem 1.4.

    Examples
    --------
    >>> rate = dissipation_rate("relu", d=64, beta=1.0, sigma_U=0.1, sigma_W=0.1)
    >>> bool(-0.899375 <= rate < 0)
    True
    """
    if strict:
        check_assumption_1(activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W)
    beta = _beta(beta)
    row, k = _noise(activation, d, sigma_U, sigma_W)
    grid = np.linspace(-1.0, 1.0, DISSIPATION_GRID)
    F = _F(grid, row, k, beta)
    i = int(np.argmin(F))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(
        lambda s: float(_F(np.array([s]), row, k, beta)[0]),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return -float(min(F[i], res.fun))


def noise_energy_drift(
    X: Any,
    activation: str,
    *,
    beta: float,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
    weights: Any = None,
) -> float:
    r"""Itô drift of :math:`\mathcal E_\beta(\mu^N_t)` due to the common noise, at the tokens ``X``,

    .. math::

        \text{(II)} + \text{(III)} + \text{(IV)}
        = -\frac12 \sum_{i,j} w_i w_j\, \beta e^{\beta u_{ij}} G(u_{ij}),
        \qquad u_{ij} = \langle x_i, x_j\rangle,

    so that, with the noise alone, :math:`\frac{d}{dt}\mathbb E\,\mathcal E_\beta(\mu^N_t)` is the
    mean of this quantity. Lemma 4.1 bounds it by :math:`\bar\lambda'\,\mathcal E_\beta`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere.
    activation : str
    beta : float
    sigma_U, sigma_W : float
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    References
    ----------
    Agazzi et al., arXiv:2604.26898, §4 (proof of Theorem 1.4).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0]])
    >>> noise_energy_drift(X, "relu", beta=1.0) < 0      # ReLU noise brings them closer
    True
    """
    X = as_sphere_tokens(X)
    w = as_weights(weights, X.shape[0])
    beta = _beta(beta)
    u = np.clip(1 - _half_gaps(X), -1.0, 1.0)
    row, k = _noise(activation, X.shape[1], sigma_U, sigma_W)
    G = _terms(u.ravel(), row, k, beta).G.reshape(u.shape)
    return float(-0.5 * beta * np.einsum("ij,ij,i,j->", np.exp(beta * u), G, w, w))


# -- Monte-Carlo estimators ---------------------------------------------------------------------


def energy_decay_rate(times: Any, energies: Any) -> MCEstimate:
    r"""Exponential rate of the mean energy :math:`\mathbb E\,\mathcal E_\beta(\mu_t)` over paths.

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
