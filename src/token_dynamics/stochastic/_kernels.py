r"""The covariance kernel of the random MLP and its derivative (private module).

The MLP of one layer, :math:`G(y) = m^{-1/2} W\sigma(U y/\sqrt d + b_U) + b_W` with standard
Gaussian ``U``, ``W`` and biases :math:`b_U\sim\mathcal N(0,\sigma_U^2 I_m)`,
:math:`b_W\sim\mathcal N(0,\sigma_W^2 I_d)`, has covariance
:math:`\mathbb E[G(x)G(y)^\top] = \kappa(\langle x, y\rangle) I_d` on the sphere, at every width.
With :math:`t = \langle x, y\rangle` the two pre-activations are centred Gaussian with

.. math:: \operatorname{Var} = s^2 = \tfrac1d + \sigma_U^2,\qquad
          \operatorname{Cov} = c(t) = \tfrac td + \sigma_U^2,

so :math:`\kappa(t) = \mathbb E[\sigma(V_1)\sigma(V_2)] + \sigma_W^2` and, by Price's formula
(:math:`dc/dt = 1/d`), :math:`\kappa'(t) = \frac1d\mathbb E[\sigma'(V_1)\sigma'(V_2)]`.

ReLU and erf have closed forms; SiLU, sigmoid and tanh are integrated by tensor Gauss-Hermite
quadrature in the paper's variables :math:`V_{1,2} = A \pm vY` (Agazzi et al. 2026, §4.2),
with the number of nodes doubled until two successive rules agree to :data:`QUADRATURE_TOL`,
and by adaptive 2-D quadrature (:func:`scipy.integrate.dblquad`) where Gauss-Hermite would need
more than :data:`MAX_NODES` nodes (very wide pre-activations).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import integrate, special

from .._validation import as_real_array, check_int, check_positive

if TYPE_CHECKING:  # the options' TypedDict of scipy-stubs (no runtime module)
    from scipy.integrate._typing import QuadOpts

__all__ = ["ACTIVATIONS", "kappa", "kappa_prime"]

#: The activations of the paper's experiments (ReLU, SiLU, sigmoid, tanh) and erf, whose kernel
#: is in closed form.
ACTIVATIONS = ("relu", "silu", "sigmoid", "tanh", "erf")
#: Agreement asked of two successive Gauss-Hermite rules, relative to E[sigma(V)^2] (the
#: largest value of the expectation): 1e-13 leaves three digits of margin under the 1e-10
#: accuracy the book promises, and is above the 1e-15 rounding of the sums.
QUADRATURE_TOL = 1e-13
#: First Gauss-Hermite rule (nodes per axis); doubled up to MAX_NODES. For the paper's grid
#: (s^2 <= 1/5 + 0.01) 32 nodes already agree with 64 to 1e-16; tanh at s = 1 needs 128.
FIRST_NODES = 32
#: Largest Gauss-Hermite rule tried before falling back to adaptive quadrature (numpy's rule
#: overflows in its weights from about 400 nodes); one rule costs MAX_NODES^2 evaluations per t.
MAX_NODES = 256
#: Chebyshev degree cap of the cached interpolant that simulations evaluate the kernel with
#: (the kernel is analytic in t for smooth activations; the coefficients decay geometrically).
MAX_DEGREE = 512


def _check_activation(activation: Any) -> str:
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"`activation` must be one of {ACTIVATIONS}; got {activation!r}. "
            "Add its kernel to token_dynamics.stochastic to use another one."
        )
    return activation


def _activation(name: str):
    """The activation ``sigma`` and its derivative, as vectorised callables."""
    if name == "relu":
        return (lambda x: np.maximum(x, 0.0)), (lambda x: (x > 0).astype(np.float64))
    if name == "erf":
        return special.erf, (lambda x: 2.0 / np.sqrt(np.pi) * np.exp(-(x**2)))
    if name == "tanh":
        return np.tanh, (lambda x: 1.0 / np.cosh(x) ** 2)
    if name == "sigmoid":
        return special.expit, (lambda x: special.expit(x) * special.expit(-x))
    # silu(x) = x expit(x), silu'(x) = expit(x) (1 + x expit(-x))
    return (lambda x: x * special.expit(x)), (
        lambda x: special.expit(x) * (1.0 + x * special.expit(-x))
    )


def _hermite_rule(n: int):
    z, w = np.polynomial.hermite_e.hermegauss(n)
    return z, w / np.sqrt(2.0 * np.pi)


def _gauss_hermite(f, sa: np.ndarray, sv: np.ndarray, n: int) -> np.ndarray:
    """``E[f(A + vY) f(A - vY)]`` for ``A ~ N(0, sa^2)``, ``Y ~ N(0, sv^2)`` (1-D arrays)."""
    z, w = _hermite_rule(n)
    out = np.empty(sa.shape)
    step = max(1, 2**20 // (n * n))  # at most ~8 MiB of nodes at once
    for i in range(0, sa.size, step):
        a = sa[i : i + step, None, None] * z[None, :, None]
        v = sv[i : i + step, None, None] * z[None, None, :]
        out[i : i + step] = np.einsum("kij,i,j->k", f(a + v) * f(a - v), w, w)
    return out


def _dblquad(f, sa: float, sv: float) -> float:
    """Adaptive 2-D quadrature of the same expectation (the independent reference), in standard
    variables on [-12, 12]^2 (the Gaussian mass outside is below 1e-31), the inner integral
    split where ``sa a +- sv y`` changes sign (the kink of ReLU, harmless elsewhere)."""

    def integrand(y, a):
        dens = np.exp(-0.5 * (a * a + y * y)) / (2.0 * np.pi)
        return float(f(np.float64(sa * a + sv * y)) * f(np.float64(sa * a - sv * y))) * dens

    def inner_opts(a):
        kink = abs(sa * a / sv) if sv > 0 else 0.0
        pts = [p for p in (-kink, kink) if -12.0 < p < 12.0]
        opts = {"limit": 200, "epsabs": 1e-14, "epsrel": 1e-13}
        return {**opts, "points": pts} if pts else opts

    outer: QuadOpts = {"limit": 200, "epsabs": 1e-14, "epsrel": 1e-13, "points": [0.0]}
    val, _ = integrate.nquad(integrand, [[-12.0, 12.0], [-12.0, 12.0]], opts=[inner_opts, outer])
    return float(val)


def _pair_expectation(f, s2: float, c: np.ndarray) -> np.ndarray:
    r"""``E[f(V_1) f(V_2)]`` for centred Gaussians of variance ``s2`` and covariance ``c``.

    Written as :math:`V_{1,2} = A \pm vY` with :math:`\operatorname{Var}A = (s^2 + c)/2` and
    :math:`v^2 = (s^2 - c)/2`.
    """
    sa = np.sqrt(np.clip(0.5 * (s2 + c), 0.0, None))
    sv = np.sqrt(np.clip(0.5 * (s2 - c), 0.0, None))
    z, w = _hermite_rule(128)
    scale = max(float(w @ f(np.sqrt(s2) * z) ** 2), 1e-300)  # E[f(V)^2] >= |E[f(V1) f(V2)]|
    n = FIRST_NODES
    prev = _gauss_hermite(f, sa, sv, n)
    while n < MAX_NODES:
        n *= 2
        cur = _gauss_hermite(f, sa, sv, n)
        if np.max(np.abs(cur - prev)) <= QUADRATURE_TOL * scale:
            return cur
        prev = cur
    bad = np.abs(cur - prev) > QUADRATURE_TOL * scale
    out = cur.copy()
    out[bad] = [_dblquad(f, a, v) for a, v in zip(sa[bad], sv[bad], strict=True)]
    return out


def _check_t(t: Any) -> np.ndarray:
    arr = as_real_array(t, "t")
    if not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > 1.0 + 1e-12):
        raise ValueError(
            "`t` must hold inner products of unit vectors, finite and in [-1, 1]; "
            f"got values in [{np.nanmin(arr)}, {np.nanmax(arr)}]."
        )
    return np.clip(arr, -1.0, 1.0)


def _check_params(activation, d, sigma_U, sigma_W):
    activation = _check_activation(activation)
    d = check_int(d, "d", minimum=2)
    sigma_U = check_positive(sigma_U, "sigma_U", allow_zero=True)
    sigma_W = check_positive(sigma_W, "sigma_W", allow_zero=True)
    return activation, d, sigma_U, sigma_W


def _kappa(activation: str, d: int, sigma_U: float, sigma_W: float, t: np.ndarray) -> np.ndarray:
    """``kappa(t)`` for validated arguments (any shape)."""
    s2 = 1.0 / d + sigma_U**2
    c = t / d + sigma_U**2
    if activation == "relu":
        # arc-cosine kernel of degree one: E[V1+ V2+] = s^2 (sin th + (pi - th) cos th) / (2 pi)
        rho = np.clip(c / s2, -1.0, 1.0)
        val = s2 / (2.0 * np.pi) * (np.sqrt(1.0 - rho**2) + (np.pi - np.arccos(rho)) * rho)
    elif activation == "erf":
        val = 2.0 / np.pi * np.arcsin(np.clip(2.0 * c / (1.0 + 2.0 * s2), -1.0, 1.0))
    else:
        f, _ = _activation(activation)
        val = _pair_expectation(f, s2, c.ravel()).reshape(c.shape)
    return val + sigma_W**2


def _kappa_prime(activation: str, d: int, sigma_U: float, t: np.ndarray) -> np.ndarray:
    """``kappa'(t)`` (Price's formula) for validated arguments; at ``t = 1`` Lemma 4.2's value."""
    s2 = 1.0 / d + sigma_U**2
    c = t / d + sigma_U**2
    if activation == "relu":
        # P(V1 > 0, V2 > 0) = 1/4 + arcsin(rho) / (2 pi)
        rho = np.clip(c / s2, -1.0, 1.0)
        return (0.25 + np.arcsin(rho) / (2.0 * np.pi)) / d
    if activation == "erf":
        # E[erf'(V1) erf'(V2)] = (4/pi) / sqrt((1 + 2 s^2)^2 - 4 c^2)
        return 4.0 / np.pi / np.sqrt((1.0 + 2.0 * s2) ** 2 - 4.0 * c**2) / d
    _, df = _activation(activation)
    return _pair_expectation(df, s2, c.ravel()).reshape(c.shape) / d


def kappa(
    t: Any, activation: str, *, d: int, sigma_U: float = 0.0, sigma_W: float = 0.0
) -> np.ndarray:
    r"""The covariance kernel :math:`\kappa(t)` of the random MLP on the sphere.

    .. math:: \kappa(t) = \mathbb E\big[\sigma(uX + vY + \sigma_U b)\,
              \sigma(uX - vY + \sigma_U b)\big] + \sigma_W^2,\qquad
              u = \sqrt{\tfrac{1+t}{2d}},\ v = \sqrt{\tfrac{1-t}{2d}},

    with :math:`X, Y, b` independent standard normal: :math:`\mathbb E[G(x)G(y)^\top]
    = \kappa(\langle x, y\rangle) I_d` for the MLP of any width.

    Parameters
    ----------
    t : array_like
        Inner products :math:`\langle x, y\rangle` in ``[-1, 1]``, any shape.
    activation : {"relu", "silu", "sigmoid", "tanh", "erf"}
    d : int
        Ambient dimension, at least 2 (the first layer is scaled by :math:`1/\sqrt d`).
    sigma_U, sigma_W : float
        Standard deviations of the hidden and output biases (non-negative).

    Returns
    -------
    ndarray
        Same shape as `t`, accurate to 1e-10 (closed forms for ReLU and erf; Gauss-Hermite
        quadrature checked by doubling, or adaptive quadrature, otherwise).

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, *Stochastic scaling limits
    and synchronization by noise in deep transformer models*, arXiv:2604.26898, 2026,
    Remark 1.1 and §4.2.

    Examples
    --------
    >>> float(kappa(1.0, "relu", d=5))          # (1/d) / 2
    0.1
    >>> round(float(kappa(1.0, "relu", d=64, sigma_U=0.1, sigma_W=0.1)), 6)  # Table 1
    0.022813
    >>> kappa([-1.0, 0.0, 1.0], "tanh", d=4).shape
    (3,)
    """
    activation, d, sigma_U, sigma_W = _check_params(activation, d, sigma_U, sigma_W)
    return np.asarray(_kappa(activation, d, sigma_U, sigma_W, _check_t(t)), dtype=np.float64)


def kappa_prime(
    t: Any, activation: str, *, d: int, sigma_U: float = 0.0, sigma_W: float = 0.0
) -> np.ndarray:
    r"""The derivative :math:`\kappa'(t)` of :func:`kappa` (Price's formula).

    .. math:: \kappa'(t) = \tfrac1d\,\mathbb E\big[\sigma'(uX + vY + \sigma_U b)\,
              \sigma'(uX - vY + \sigma_U b)\big],\qquad
              \kappa'(1) = \tfrac1d\,\mathbb E\big[\sigma'(X/\sqrt d + \sigma_U b)^2\big].

    At ``t = 1`` the value is Lemma 4.2's limit :math:`\lim_{t\to1^-}\kappa'(t)` (for ReLU the
    one-sided derivative). :math:`\sigma_W` does not enter; it is accepted so that the two
    functions take the same arguments.

    Parameters
    ----------
    t, activation, d, sigma_U, sigma_W
        As in :func:`kappa`.

    Returns
    -------
    ndarray
        Same shape as `t`.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Lemma 4.2 and §1.3.2.

    Examples
    --------
    >>> float(kappa_prime(1.0, "relu", d=5, sigma_U=0.3))  # 1/(2d), whatever the bias
    0.1
    >>> round(float(kappa_prime(1.0, "tanh", d=128)), 5)   # Table 1: 7.69e-3
    0.00769
    """
    activation, d, sigma_U, _ = _check_params(activation, d, sigma_U, sigma_W)
    return np.asarray(_kappa_prime(activation, d, sigma_U, _check_t(t)), dtype=np.float64)


@functools.lru_cache(maxsize=64)
def _interpolant(activation: str, d: int, sigma_U: float, sigma_W: float):
    """A callable ``t -> kappa(t)`` for simulations: the closed form for ReLU and erf, else a
    Chebyshev interpolant of the quadrature, its degree doubled until the last coefficients are
    below QUADRATURE_TOL times the first (the kernel is analytic in t for smooth activations).
    """
    if activation in ("relu", "erf"):
        return functools.partial(_kappa, activation, d, sigma_U, sigma_W)
    cheb = np.polynomial.chebyshev.Chebyshev
    deg = 16
    while True:
        fit = cheb.interpolate(lambda t: _kappa(activation, d, sigma_U, sigma_W, t), deg)
        tail = np.max(np.abs(fit.coef[-4:]))
        if tail <= QUADRATURE_TOL * np.abs(fit.coef).sum() or deg >= MAX_DEGREE:
            break
        deg *= 2
    if tail > 1e-10 * np.abs(fit.coef).sum():
        raise FloatingPointError(
            f"the Chebyshev interpolant of kappa ({activation}, d = {d}, sigma_U = {sigma_U}) "
            f"did not converge (tail {tail:.1e} at degree {deg}); lower `sigma_U`."
        )
    return lambda t: fit(np.clip(t, -1.0, 1.0))
