"""Noise covariance kernels of the random MLP and the rates they determine (private module).

A random MLP block ``g(y) = W_2 phi(W_1 y) / sqrt(m)`` with i.i.d. Gaussian weights
``N(0, sigma_1^2)`` and ``N(0, sigma_2^2)`` has covariance ``E[g(x) g(y)^T] = K(x, y) I_d`` with
``K(x, y) = sigma_2^2 E_w[phi(<w, x>) phi(<w, y>)]``, for every width ``m``. On the unit sphere
``K`` depends only on ``rho = <x, y>``: ``K = k(rho)``. Everything in this file is a function of
``k``: the two-point generator, the Lyapunov exponent, the moment exponents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, special

from .._validation import check_int, check_positive

__all__ = [
    "ACTIVATIONS",
    "KernelConstants",
    "kernel_constants",
    "lyapunov_exponent",
    "moment_exponent",
    "noise_kernel",
    "noise_kernel_derivative",
    "sign_threshold",
    "two_point_diffusion",
    "two_point_drift",
    "two_point_rate",
]

#: The activations with a noise kernel in this module.
ACTIVATIONS = ("relu", "erf", "tanh", "identity")
#: Gauss-Hermite nodes per axis for the tanh kernel. tanh has poles at +-i pi/2, which slows the
#: convergence: 64 nodes err by 1e-7 on k'(1), 160 nodes by 2e-13 (checked in the tests against
#: adaptive 1-D quadrature). The infinite-width tanh layer is slow for this reason.
HERMITE_NODES = 160
#: Grid points on (-1, 1) for the supremum in the two-point rate; refined by a bounded search.
RATE_GRID = 4001


def _check_activation(activation: Any) -> str:
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"`activation` must be one of {ACTIVATIONS}; got {activation!r}. "
            "Add its kernel to token_dynamics.stochastic to use another one."
        )
    return activation


def _phi(activation: str):
    """The activation and its derivative, as numpy ufunc-like callables."""
    if activation == "relu":
        return (lambda u: np.maximum(u, 0.0)), (lambda u: (u > 0).astype(np.float64))
    if activation == "erf":
        return special.erf, (lambda u: 2.0 / np.sqrt(np.pi) * np.exp(-(u**2)))
    if activation == "tanh":
        return np.tanh, (lambda u: 1.0 - np.tanh(u) ** 2)
    return (lambda u: np.asarray(u, dtype=np.float64)), (
        lambda u: np.ones_like(u, dtype=np.float64)
    )


def _hermite_expectation(f, g, a, b, c):
    """``E[f(u) g(v)]`` for ``(u, v)`` centred Gaussian with variances a, b and covariance c."""
    z, w = np.polynomial.hermite_e.hermegauss(HERMITE_NODES)
    w = w / np.sqrt(2.0 * np.pi)
    a, b, c = np.broadcast_arrays(*(np.asarray(t, dtype=np.float64) for t in (a, b, c)))
    sa = np.sqrt(a)[..., None, None]
    safe = np.where(a > 0, a, 1.0)
    slope = (c / safe)[..., None, None] * np.sqrt(a)[..., None, None]
    rest = np.sqrt(np.clip(b - c**2 / safe, 0.0, None))[..., None, None]
    u = sa * z[:, None]
    v = slope * z[:, None] + rest * z[None, :]
    return np.einsum("...ij,i,j->...", f(u) * g(v), w, w)


def _general_kernel(activation: str, a, b, c, sigma2: float):
    """``sigma_2^2 E[phi(u) phi(v)]``, ``(u, v) ~ N(0, [[a, c], [c, b]])`` (a, b, c arrays).

    With ``a = sigma_1^2 |x|^2``, ``b = sigma_1^2 |y|^2`` and ``c = sigma_1^2 <x, y>`` this is
    ``K(x, y)`` for tokens off the sphere as well, which the layer needs after the attention step.
    """
    s2 = sigma2**2
    if activation == "identity":
        return s2 * c
    if activation == "relu":
        norm = np.sqrt(a * b)
        cos = np.clip(c / np.where(norm > 0, norm, 1.0), -1.0, 1.0)
        theta = np.arccos(cos)
        return s2 * norm / (2.0 * np.pi) * (np.sqrt(1.0 - cos**2) + (np.pi - theta) * cos)
    if activation == "erf":
        arg = 2.0 * c / np.sqrt((1.0 + 2.0 * a) * (1.0 + 2.0 * b))
        return s2 * 2.0 / np.pi * np.arcsin(np.clip(arg, -1.0, 1.0))
    phi, _ = _phi(activation)
    return s2 * _hermite_expectation(phi, phi, a, b, c)


def noise_kernel(
    rho: Any, activation: str = "relu", *, sigma1: float = 1.0, sigma2: float = 1.0
) -> np.ndarray:
    r"""Covariance kernel ``k(rho)`` of the random MLP on the unit sphere.

    .. math:: k(\rho) = \sigma_2^2\,\mathbb E[\varphi(u)\varphi(v)],\quad
              (u, v) \sim \mathcal N\Big(0, \sigma_1^2
              \begin{pmatrix}1&\rho\\ \rho&1\end{pmatrix}\Big)

    Closed forms for ReLU (arc-cosine kernel), erf (arcsine kernel) and identity; Gauss-Hermite
    quadrature for tanh.

    Parameters
    ----------
    rho : array_like
        Inner products ``<x, y>`` in ``[-1, 1]``, any shape.
    activation : {"relu", "erf", "tanh", "identity"}
    sigma1, sigma2 : float
        Standard deviations of the first- and second-layer weights.

    Returns
    -------
    ndarray
        ``k(rho)``, same shape as `rho`.

    References
    ----------
    Agazzi et al., *Stochastic scaling limits and synchronization by noise in deep transformer
    models* (arXiv:2604.26898); the closed forms are the arc-cosine and arcsine kernels.

    Examples
    --------
    >>> float(noise_kernel(1.0, "relu"))
    0.5
    >>> round(float(noise_kernel(1.0, "erf")), 4)
    0.4646
    """
    activation, s1, s2, rho = _kernel_args(activation, sigma1, sigma2, rho)
    v = s1**2
    return np.asarray(_general_kernel(activation, v, v, v * rho, s2), dtype=np.float64)


def _kernel_args(activation: Any, sigma1: Any, sigma2: Any, rho: Any):
    """Validate the arguments shared by :func:`noise_kernel` and its derivative."""
    activation = _check_activation(activation)
    s1 = check_positive(sigma1, "sigma1")
    s2 = check_positive(sigma2, "sigma2")
    return activation, s1, s2, _as_rho(rho)


def _as_rho(rho: Any) -> np.ndarray:
    arr = np.array(rho, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > 1.0 + 1e-12):
        raise ValueError("`rho` must hold inner products of unit vectors, in [-1, 1].")
    return np.clip(arr, -1.0, 1.0)


def noise_kernel_derivative(
    rho: Any, activation: str = "relu", *, sigma1: float = 1.0, sigma2: float = 1.0
) -> np.ndarray:
    r"""Derivative ``k'(rho)`` of :func:`noise_kernel`.

    By Price's theorem :math:`k'(\rho) = \sigma_1^2\sigma_2^2\,\mathbb E[\varphi'(u)\varphi'(v)]`;
    closed forms for ReLU, erf and identity, quadrature for tanh.

    Parameters
    ----------
    rho : array_like
        Inner products in ``[-1, 1]``; for erf, ``rho = 1`` is allowed.
    activation, sigma1, sigma2
        As in :func:`noise_kernel`.

    Returns
    -------
    ndarray
        ``k'(rho)``, same shape as `rho`.

    References
    ----------
    Agazzi et al., arXiv:2604.26898.

    Examples
    --------
    >>> float(noise_kernel_derivative(1.0, "relu"))
    0.5
    >>> round(float(noise_kernel_derivative(1.0, "erf")), 4)
    0.5694
    """
    activation, s1, s2, rho = _kernel_args(activation, sigma1, sigma2, rho)
    scale = s1**2 * s2**2
    if activation == "identity":
        return np.full_like(rho, scale)
    if activation == "relu":
        return scale / (2.0 * np.pi) * (np.pi - np.arccos(rho))
    if activation == "erf":
        s = 2.0 * s1**2 / (1.0 + 2.0 * s1**2)
        return s2**2 * 2.0 / np.pi * s / np.sqrt(1.0 - (s * rho) ** 2)
    _, dphi = _phi(activation)
    v = s1**2
    return np.asarray(scale * _hermite_expectation(dphi, dphi, v, v, v * rho), dtype=np.float64)


@dataclass(frozen=True)
class KernelConstants:
    """The two numbers of the kernel that the limit dynamics depend on near the diagonal.

    Attributes
    ----------
    activation : str
    sigma1, sigma2 : float
    kappa0 : float
        ``k(1)``, the variance of the noise at one token.
    k1 : float
        ``k'(1)``, the variance of its derivative (Price's theorem).
    """

    activation: str
    sigma1: float
    sigma2: float
    kappa0: float
    k1: float


def kernel_constants(
    activation: str = "relu", *, sigma1: float = 1.0, sigma2: float = 1.0
) -> KernelConstants:
    """Return ``k(1)`` and ``k'(1)`` of an activation.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Stochastic scaling limits").

    Examples
    --------
    >>> c = kernel_constants("tanh")
    >>> round(c.kappa0, 4), round(c.k1, 4)
    (0.3943, 0.4644)
    """
    kappa0 = float(noise_kernel(1.0, activation, sigma1=sigma1, sigma2=sigma2))
    k1 = float(noise_kernel_derivative(1.0, activation, sigma1=sigma1, sigma2=sigma2))
    return KernelConstants(activation, float(sigma1), float(sigma2), kappa0, k1)


def lyapunov_exponent(
    d: int,
    activation: str = "relu",
    *,
    sigma1: float = 1.0,
    sigma2: float = 1.0,
    attention_rate: float = 0.0,
) -> float:
    r"""Top Lyapunov exponent of the noise flow on :math:`\mathbb S^{d-1}` (derived here).

    .. math:: \lambda = \tfrac12\big[(d-3)\,k'(1) - (d-1)\,k(1)\big] - a

    where ``a = attention_rate`` is the rate at which attention contracts the angle between two
    nearby tokens (``a = 1`` for ``Q = K = V = I`` and two tokens, ``a = 0`` without attention).

    Parameters
    ----------
    d : int
        Ambient dimension, at least 2.
    activation, sigma1, sigma2
        As in :func:`noise_kernel`.
    attention_rate : float
        Extra contraction added by the attention drift near the diagonal.

    Returns
    -------
    float

    References
    ----------
    Agazzi et al., arXiv:2604.26898 (their explicit ReLU rate, Proposition 1.5, unseen here).

    Examples
    --------
    >>> lyapunov_exponent(8, "relu")
    -0.5
    """
    d = check_int(d, "d", minimum=2)
    c = kernel_constants(activation, sigma1=sigma1, sigma2=sigma2)
    rate = check_positive(attention_rate, "attention_rate", allow_zero=True)
    return 0.5 * ((d - 3) * c.k1 - (d - 1) * c.kappa0) - rate


def sign_threshold(activation: str = "erf", *, sigma1: float = 1.0, sigma2: float = 1.0) -> float:
    """Dimension above which the Lyapunov exponent is positive (``inf`` if never).

    ``lambda > 0`` iff ``(d - 3) k'(1) > (d - 1) k(1)``, that is
    ``d > (3 k'(1) - k(1)) / (k'(1) - k(1))`` when ``k'(1) > k(1)``; for ReLU and the identity
    ``k'(1) = k(1)`` and the exponent stays negative.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Synchronization by noise").

    Examples
    --------
    >>> round(sign_threshold("erf"), 2)
    11.87
    >>> sign_threshold("relu")
    inf
    """
    c = kernel_constants(activation, sigma1=sigma1, sigma2=sigma2)
    # relative tolerance: k1 == kappa0 exactly for relu and identity, up to rounding
    if c.k1 - c.kappa0 <= 1e-12 * c.kappa0:
        return float("inf")
    return (3.0 * c.k1 - c.kappa0) / (c.k1 - c.kappa0)


def moment_exponent(
    q: float, d: int, activation: str = "relu", *, sigma1: float = 1.0, sigma2: float = 1.0
) -> float:
    r"""Growth rate ``g(q)`` of ``E|X_t - Y_t|^q`` for two nearby tokens under the noise alone.

    .. math:: g(q) = q\lambda + \tfrac{q^2}{2}\,\big(k(1) + k'(1)\big)

    ``log|X_t - Y_t|`` is, near the diagonal, a Brownian motion with drift ``lambda`` and variance
    rate ``k(1) + k'(1)``; for ReLU ``g(q) = k(1) q (q - 1)``.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Synchronization by noise").

    Examples
    --------
    >>> moment_exponent(0.5, 5, "relu")
    -0.125
    """
    q = check_positive(q, "q")
    c = kernel_constants(activation, sigma1=sigma1, sigma2=sigma2)
    lam = lyapunov_exponent(d, activation, sigma1=sigma1, sigma2=sigma2)
    return q * lam + 0.5 * q**2 * (c.kappa0 + c.k1)


def two_point_drift(
    rho: Any, d: int, activation: str = "relu", *, sigma1: float = 1.0, sigma2: float = 1.0
) -> np.ndarray:
    r"""Drift of ``rho_t = <X_t, Y_t>`` for two tokens moved by the common noise alone.

    .. math:: \mathrm{drift}(\rho) = -(d-1)\,k(1)\,\rho + k(\rho)\,(d - 2 + \rho^2)

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Synchronization by noise").

    Examples
    --------
    >>> float(two_point_drift(1.0, 5, "relu"))
    0.0
    """
    d = check_int(d, "d", minimum=2)
    rho = _as_rho(rho)
    k = noise_kernel(rho, activation, sigma1=sigma1, sigma2=sigma2)
    kappa0 = float(noise_kernel(1.0, activation, sigma1=sigma1, sigma2=sigma2))
    return -(d - 1) * kappa0 * rho + k * (d - 2 + rho**2)


def two_point_diffusion(
    rho: Any, activation: str = "relu", *, sigma1: float = 1.0, sigma2: float = 1.0
) -> np.ndarray:
    r"""Quadratic-variation rate of ``rho_t = <X_t, Y_t>`` (noise alone).

    .. math:: \frac{d\langle \rho\rangle_t}{dt} = 2(1-\rho^2)\big(k(1) - \rho\,k(\rho)\big)

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Synchronization by noise").

    Examples
    --------
    >>> float(two_point_diffusion(1.0, "relu"))
    0.0
    """
    rho = _as_rho(rho)
    k = noise_kernel(rho, activation, sigma1=sigma1, sigma2=sigma2)
    kappa0 = float(noise_kernel(1.0, activation, sigma1=sigma1, sigma2=sigma2))
    return 2.0 * (1.0 - rho**2) * (kappa0 - rho * k)


def two_point_rate(
    q: float, d: int, activation: str = "relu", *, sigma1: float = 1.0, sigma2: float = 1.0
) -> float:
    r"""Global decay rate ``gamma_q`` of ``E|X_t - Y_t|^q`` under the noise alone.

    .. math:: \gamma_q = -\sup_{\rho\in(-1,1)} \frac{\mathcal L h_q(\rho)}{h_q(\rho)},\qquad
              h_q(\rho) = (2 - 2\rho)^{q/2} = |x - y|^q

    with :math:`\mathcal L` the generator of ``rho`` (:func:`two_point_drift`,
    :func:`two_point_diffusion`). Then ``E|X_t - Y_t|^q <= exp(-gamma_q t) |x - y|^q`` from every
    start, and the same bound holds for the average over pairs of tokens.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, arXiv:2604.26898, 2026
    (the setting; derived and checked in the book, chapter "Synchronization by noise").

    Examples
    --------
    >>> round(two_point_rate(0.5, 8, "relu"), 4)
    0.125
    """
    q = check_positive(q, "q")
    d = check_int(d, "d", minimum=2)
    kw = {"sigma1": sigma1, "sigma2": sigma2}

    def ratio(rho):
        u = 2.0 - 2.0 * rho
        drift = two_point_drift(rho, d, activation, **kw)
        qv = two_point_diffusion(rho, activation, **kw)
        return -q * drift / u + 0.5 * qv * q * (q - 2.0) / u**2

    # the endpoints are excluded: rho = 1 is the diagonal, rho = -1 may be a fixed point
    grid = np.linspace(-1.0, 1.0, RATE_GRID)[1:-1]
    values = ratio(grid)
    i = int(np.argmax(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(lambda r: -float(ratio(r)), bounds=(lo, hi), method="bounded")
    # the supremum may be the limit at the diagonal, where L h_q / h_q -> g(q)
    near_diagonal = moment_exponent(q, d, activation, **kw)
    best = max(float(values[i]), -float(res.fun), near_diagonal)
    return -best
