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
while the mean part ``A`` is narrow (:data:`GH_MAX_SCALE`); wider pre-activations, and any
case where the rules do not agree within :data:`MAX_NODES` nodes, go to adaptive quadrature
over ``A`` with an error estimate (:func:`scipy.integrate.quad_vec`, breakpoints at the bend
of the activation). Nothing squares ``sigma_U``: the kernel of a bounded activation is finite
for every finite bias, and a kernel beyond the float64 range (ReLU and SiLU grow like
:math:`\sigma_U^2`) raises ``FloatingPointError``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import integrate, special

from .._guards import float_guard
from .._typing import ArrayLike
from .._validation import as_real_array, check_int, check_positive

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
#: Largest standard deviation of the pre-activations' mean part ``A`` for which the tensor
#: Gauss-Hermite rules are used: their nodes near 0 are about ``s_a / sqrt(n)`` apart in the
#: variable of ``f``, so beyond ~1.5 they step over the bend of a steep activation and two
#: successive rules can agree on a wrong value (tanh' at s_a = 100: both near 0).
GH_MAX_SCALE = 1.5
#: Nodes of the inner Gauss-Hermite rule of the adaptive quadrature (see ``_adaptive``).
INNER_NODES = 128
#: Relative tolerance asked of the adaptive quadrature (``quad_vec``, maximum norm over t).
ADAPTIVE_RTOL = 1e-12
#: Breakpoints of the adaptive quadrature, in units of ``f``'s own scale: the bend of every
#: activation lies within |x| < 40 (tanh(40) = 1 - 4e-35).
FEATURE_SCALES = (0.5, 2.0, 8.0, 40.0)
#: What to do when the kernel leaves the float64 range.
KERNEL_FIX = "lower `sigma_U` or `sigma_W` (the kernel grows like their squares)"
#: Chebyshev degree cap of the cached interpolant that simulations evaluate the kernel with
#: (the kernel is analytic in t for smooth activations; the coefficients decay geometrically).
MAX_DEGREE = 512


def _check_activation(activation: object) -> str:
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
        # sech^2 x = 4 e^(-2|x|) / (1 + e^(-2|x|))^2: no overflow of cosh at large |x|
        return np.tanh, (
            lambda x: 4.0 * np.exp(-2.0 * np.abs(x)) / (1.0 + np.exp(-2.0 * np.abs(x))) ** 2
        )
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


def _adaptive(f, sa: np.ndarray, sv: np.ndarray) -> np.ndarray:
    r"""The same expectation by adaptive quadrature over ``A``, for wide pre-activations.

    In the standard variable :math:`z = A/s_a` the integrand :math:`\varphi(z)\,g(s_a z)`,
    :math:`g(a) = \mathbb E_Y[f(a + vY) f(a - vY)]`, varies on the scale :math:`1/s_a` near
    :math:`z = 0` (where ``f`` bends) and on the scale 1 elsewhere: :func:`scipy.integrate.quad_vec`
    with breakpoints at :math:`\pm c/s_a` resolves both, with an error estimate, for every ``t``
    at once. The inner expectation over ``Y`` is a Gauss-Hermite rule of :data:`INNER_NODES`
    nodes: :math:`v \le 1/\sqrt d \le 2^{-1/2}` and ``f`` is analytic in the strip
    :math:`|\operatorname{Im} x| < \pi/2`, so the integrand is analytic in ``y`` in a strip of
    half-width at least 2.2, where the rule converges geometrically (at d = 2, the worst case,
    128 nodes agree with 256 to rounding for every smooth activation and its derivative).
    The Gaussian mass outside :math:`|z| \le 12` is below 1e-32.
    """
    z, w = _hermite_rule(INNER_NODES)
    y = sv[:, None] * z[None, :]

    def integrand(x: float) -> np.ndarray:
        a = (sa * x)[:, None]
        return (f(a + y) * f(a - y)) @ w * (np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi))

    wide = sa[sa > 0]
    widths = [float(wide.min()), float(wide.max())] if wide.size else []
    cuts = {c / s for c in FEATURE_SCALES for s in widths if c / s < 12.0}
    points = sorted({0.0} | cuts | {-p for p in cuts})
    val, err, info = integrate.quad_vec(
        integrand,
        -12.0,
        12.0,
        epsabs=1e-300,
        epsrel=ADAPTIVE_RTOL,
        norm="max",
        points=points,
        limit=20_000,
        full_output=True,
    )
    if not info.success or not err <= 1e3 * ADAPTIVE_RTOL * np.max(np.abs(val)) + 1e-300:
        raise FloatingPointError(
            f"the adaptive quadrature of the kernel did not converge (error estimate {err:.1e}); "
            "lower `sigma_U`."
        )
    return np.asarray(val, dtype=np.float64)


def _pair_expectation(f, sa: np.ndarray, sv: np.ndarray) -> np.ndarray:
    r"""``E[f(A + vY) f(A - vY)]`` for :math:`A\sim\mathcal N(0, s_a^2)`, ``v = sv``, ``Y``
    standard normal (1-D arrays ``sa``, ``sv``).

    Tensor Gauss-Hermite rules, doubled until two agree, where :math:`s_a \le`
    :data:`GH_MAX_SCALE` (the rules then resolve the bend of ``f``); :func:`_adaptive`
    elsewhere, and wherever the rules did not agree.
    """
    out = np.empty(sa.shape)
    narrow = sa <= GH_MAX_SCALE
    if np.any(narrow):
        a, v = sa[narrow], sv[narrow]
        z, w = _hermite_rule(128)
        s = float(np.max(np.hypot(a, v)))
        scale = max(float(w @ f(s * z) ** 2), 1e-300)  # E[f(V)^2] >= |E[f(V1) f(V2)]|
        n = FIRST_NODES
        prev = _gauss_hermite(f, a, v, n)
        while n < MAX_NODES:
            n *= 2
            cur = _gauss_hermite(f, a, v, n)
            if np.max(np.abs(cur - prev)) <= QUADRATURE_TOL * scale:
                break
            prev = cur
        bad = np.abs(cur - prev) > QUADRATURE_TOL * scale
        if np.any(bad):
            cur[bad] = _adaptive(f, a[bad], v[bad])
        out[narrow] = cur
    if not np.all(narrow):
        out[~narrow] = _adaptive(f, sa[~narrow], sv[~narrow])
    return out


def _scales(d: int, sigma_U: float, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Standard deviations :math:`s_a = (\sigma_U^2 + \frac{1+t}{2d})^{1/2}` and
    :math:`v = (\frac{1-t}{2d})^{1/2}` of ``A`` and ``vY``, without squaring ``sigma_U``
    (finite for every finite bias)."""
    return np.hypot(sigma_U, np.sqrt((1.0 + t) / (2 * d))), np.sqrt((1.0 - t) / (2 * d))


def _check_t(t: ArrayLike) -> np.ndarray:
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
    """``kappa(t)`` for validated arguments (any shape), or a FloatingPointError where it
    exceeds the float64 range (ReLU and SiLU grow like ``sigma_U^2``; ``sigma_W^2`` is added)."""
    with float_guard("the kernel kappa", KERNEL_FIX):
        if activation == "relu":
            # arc-cosine kernel of degree one: E[V1+ V2+] = s^2 (sin th + (pi - th) cos th) / 2pi
            # with 1 - cos th = q^2, q = sqrt(1 - t) / (1 + d sigma_U^2)^(1/2) (no cancellation)
            root = np.hypot(1.0, np.sqrt(d) * sigma_U)
            q = np.minimum(np.sqrt(1.0 - t) / root, np.sqrt(2.0))  # q^2 <= 2: rho >= -1
            rho = 1.0 - q * q
            theta = 2.0 * np.arcsin(np.minimum(q / np.sqrt(2.0), 1.0))
            val = (
                (root * root / d)
                / (2.0 * np.pi)
                * (q * np.sqrt(np.maximum(2.0 - q * q, 0.0)) + (np.pi - theta) * rho)
            )
        elif activation == "erf":
            # 2/pi arcsin(2c / (1 + 2 s^2)), 1 - 2c / (1 + 2 s^2) = p^2
            p = np.sqrt(1.0 + 2.0 * (1.0 - t) / d) / np.hypot(
                np.sqrt(1.0 + 2.0 / d), np.sqrt(2.0) * sigma_U
            )
            val = 2.0 / np.pi * np.arcsin(np.clip(1.0 - p * p, -1.0, 1.0))
        else:
            f, _ = _activation(activation)
            sa, sv = _scales(d, sigma_U, t)
            val = _pair_expectation(f, sa.ravel(), sv.ravel()).reshape(t.shape)
        return val + np.float64(sigma_W) ** 2


def _kappa_prime(activation: str, d: int, sigma_U: float, t: np.ndarray) -> np.ndarray:
    """``kappa'(t)`` (Price's formula) for validated arguments; at ``t = 1`` Lemma 4.2's value."""
    with float_guard("the kernel derivative kappa'", KERNEL_FIX):
        if activation == "relu":
            # P(V1 > 0, V2 > 0) = 1/4 + arcsin(rho) / (2 pi)
            q = np.minimum(np.sqrt(1.0 - t) / np.hypot(1.0, np.sqrt(d) * sigma_U), np.sqrt(2.0))
            return (0.25 + np.arcsin(np.maximum(1.0 - q * q, -1.0)) / (2.0 * np.pi)) / d
        if activation == "erf":
            # E[erf'(V1) erf'(V2)] = (4/pi) / sqrt((1 + 2 s^2 - 2c)(1 + 2 s^2 + 2c))
            lo = np.sqrt(1.0 + 2.0 * (1.0 - t) / d)
            hi = np.hypot(np.sqrt(1.0 + 2.0 * (1.0 + t) / d), 2.0 * sigma_U)
            return 4.0 / np.pi / lo / hi / d
        _, df = _activation(activation)
        sa, sv = _scales(d, sigma_U, t)
        return _pair_expectation(df, sa.ravel(), sv.ravel()).reshape(t.shape) / d


def kappa(
    t: ArrayLike, activation: str, *, d: int, sigma_U: float = 0.0, sigma_W: float = 0.0
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

    Raises
    ------

    ValueError
        If `activation` is not one of :data:`ACTIVATIONS`, `d` < 2, a bias is negative or not
        finite, or `t` leaves ``[-1, 1]``.
    FloatingPointError
        If the value exceeds the float64 range (ReLU and SiLU grow like :math:`\sigma_U^2`, and
        :math:`\sigma_W^2` is added), or the adaptive quadrature does not converge.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, *Stochastic scaling limits
    and synchronization by noise in deep transformer models*, arXiv:2604.26898, 2026,
    Remark 1.1 and §4.2.

    Examples
    --------
    >>> from token_dynamics.stochastic import kappa
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
    t: ArrayLike, activation: str, *, d: int, sigma_U: float = 0.0, sigma_W: float = 0.0
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

    Raises
    ------

    ValueError
        If `activation` is not one of :data:`ACTIVATIONS`, `d` < 2, a bias is negative or not
        finite, or `t` leaves ``[-1, 1]``.
    FloatingPointError
        If the value exceeds the float64 range (ReLU and SiLU grow like :math:`\sigma_U^2`, and
        :math:`\sigma_W^2` is added), or the adaptive quadrature does not converge.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Lemma 4.2 and §1.3.2.

    Examples
    --------
    >>> from token_dynamics.stochastic import kappa_prime
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
    fit = _chebyshev_fit(activation, d, sigma_U, sigma_W)
    return lambda t: fit(np.clip(t, -1.0, 1.0))


@functools.lru_cache(maxsize=64)
def _chebyshev_fit(activation: str, d: int, sigma_U: float, sigma_W: float):
    """The Chebyshev interpolant of the quadrature kernel (smooth activations), see
    :func:`_interpolant`."""
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
    return fit


#: Gap below which :func:`_gap_function` does not subtract two kernel values: at ``s = 1e-3``
#: the difference ``kappa(1) - kappa(1 - s)`` loses ``log10(kappa(1) / phi(s))``, about 3 of
#: the 16 digits.
GAP_SWITCH = 1e-3
#: Gauss-Legendre nodes of ReLU's and erf's gap integral over ``u`` in ``[0, sqrt(s)]``
#: (``t = 1 - u^2``): the integrand ``2 u kappa'(1 - u^2)`` is analytic in ``u`` on a disc of
#: radius about 1 around 0 (ReLU's ``kappa'`` is ``1/4 + arcsin(1 - c u^2) / 2pi``, singular at
#: ``u^2 = 2 / c``), and the interval has length at most ``sqrt(GAP_SWITCH) = 0.032``: the rule's
#: error, about ``(0.016)^(2 GAP_NODES)``, is below rounding.
GAP_NODES = 6
#: Degree of the Taylor polynomial of the gap at ``s = 0`` for the kernels interpolated by
#: Chebyshev series (analytic at ``t = 1``): the remainder, about
#: ``|kappa^(7)(1)| GAP_SWITCH^7 / 7!``, is below rounding.
GAP_DEGREE = 6


@functools.lru_cache(maxsize=64)
def _gap_function(activation: str, d: int, sigma_U: float, sigma_W: float):
    r"""The gap :math:`\phi(s) = \kappa(1) - \kappa(1 - s)`, ``s`` in ``[0, 2]``, to relative
    accuracy at every ``s`` (no cancellation as ``s -> 0``).

    Below :data:`GAP_SWITCH`: for ReLU and erf, the integral of the closed-form
    :math:`\kappa'` written in :math:`t = 1 - u^2`,
    :math:`\phi(s) = \int_0^{\sqrt s} 2u\,\kappa'(1 - u^2)\,du`, by a Gauss-Legendre rule
    (the substitution makes ReLU's integrand analytic, although its :math:`\kappa` is not
    :math:`C^2` at 1); for the other activations the Taylor polynomial of degree
    :data:`GAP_DEGREE` from the derivatives at 1 of the kernel's Chebyshev interpolant.
    Above, the plain difference. Returns ``(phi, kappa(1))``.
    """
    k = _interpolant(activation, d, sigma_U, sigma_W)
    kappa1 = float(k(np.float64(1.0)))
    x, w = np.polynomial.legendre.leggauss(GAP_NODES)
    x, w = 0.5 * (x + 1.0), 0.5 * w  # on [0, 1]
    if activation in ("relu", "erf"):
        # kappa'(1 - u^2) from u^2 itself: forming 1 - u^2 would round it to eps, and ReLU's
        # kappa' (arcsin(1 - q)) turns that into a relative 1e-9 of the gap at s = 1e-16
        dphi = _gap_derivatives(activation, d, sigma_U, sigma_W)[0]

        def small(s: np.ndarray) -> np.ndarray:
            r = np.sqrt(s)[:, None]
            u = r * x
            return (2.0 * u * dphi(u * u)) @ w * r[:, 0]

    else:
        fit = _chebyshev_fit(activation, d, sigma_U, sigma_W)
        coef = [
            (-1.0) ** (j + 1) * float(fit.deriv(j)(1.0)) / math.factorial(j)
            for j in range(1, GAP_DEGREE + 1)
        ]

        def small(s: np.ndarray) -> np.ndarray:
            acc = np.full(s.shape, coef[-1])
            for c in coef[-2::-1]:
                acc = acc * s + c
            return acc * s

    def phi(s: np.ndarray) -> np.ndarray:
        s = np.clip(s, 0.0, 2.0)
        out = np.empty(s.shape)
        near = s < GAP_SWITCH
        if np.any(~near):
            out[~near] = kappa1 - k(1.0 - s[~near])
        if np.any(near):
            out[near] = small(s[near])
        return out

    return phi, kappa1


@functools.lru_cache(maxsize=64)
def _gap_derivatives(activation: str, d: int, sigma_U: float, sigma_W: float):
    r"""The derivatives :math:`\phi'(s) = \kappa'(1 - s)` and :math:`\phi''(s) = -\kappa''(1 - s)`
    of the gap (:func:`_gap_function`) as functions of ``s`` in ``[0, 2]``, accurate to
    relative rounding for every ``s`` given to relative accuracy (no ``1 - t`` is formed).

    ReLU: :math:`\kappa'(t) = (\tfrac14 + \arcsin\rho/2\pi)/d` with
    :math:`\rho = 1 - s/R^2`, :math:`R^2 = 1 + d\sigma_U^2`, so
    :math:`\kappa''(t) = 1/(2\pi d R^2\sqrt{(1-\rho)(1+\rho)})`, singular at ``s = 0`` (the
    kernel is not :math:`C^2` at 1) and, without bias, at ``s = 2``. erf:
    :math:`\kappa' = \tfrac{4}{\pi d}(\ell h)^{-1}` with :math:`\ell^2 = 1 + 2s/d`,
    :math:`h^2 = 1 + 2(2 - s)/d + 4\sigma_U^2`, and :math:`\kappa'' = \kappa'(\ell^{-2} -
    h^{-2})/d`. The other activations: the derivatives of the kernel's Chebyshev interpolant (a
    polynomial of degree at most :data:`MAX_DEGREE`, 16 to 32 in practice). Returns
    ``(dphi, d2phi, singular_at_two)``: the last says whether :math:`\phi''` blows up at
    ``s = 2`` (ReLU without bias), where a Taylor or quadrature form must stay away from.
    """
    if activation == "relu":
        R2 = 1.0 + d * sigma_U * sigma_U

        def dphi(s: np.ndarray) -> np.ndarray:
            # arcsin(1 - q) as pi/2 - 2 arcsin(sqrt(q / 2)) for q <= 1: forming 1 - q would round
            # a small q to eps, which arcsin turns into sqrt(eps); 1 - q is exact for q > 1/2
            q2 = np.minimum(s / R2, 2.0)
            near = 0.5 - np.arcsin(np.sqrt(0.5 * q2)) / np.pi
            return np.where(q2 <= 1.0, near, 0.25 + np.arcsin(1.0 - q2) / (2.0 * np.pi)) / d

        def d2phi(s: np.ndarray) -> np.ndarray:
            q2 = np.minimum(s / R2, 2.0)
            with np.errstate(divide="ignore"):
                return -1.0 / (2.0 * np.pi * d * R2 * np.sqrt(q2 * (2.0 - q2)))

        return dphi, d2phi, sigma_U == 0.0
    if activation == "erf":
        c = 1.0 + 4.0 * sigma_U * sigma_U

        def dphi(s: np.ndarray) -> np.ndarray:
            lo2, hi2 = 1.0 + 2.0 * s / d, c + 2.0 * (2.0 - s) / d
            return 4.0 / np.pi / np.sqrt(lo2 * hi2) / d

        def d2phi(s: np.ndarray) -> np.ndarray:
            lo2, hi2 = 1.0 + 2.0 * s / d, c + 2.0 * (2.0 - s) / d
            return -4.0 / np.pi / np.sqrt(lo2 * hi2) / d / d * (1.0 / lo2 - 1.0 / hi2)

        return dphi, d2phi, False
    fit = _chebyshev_fit(activation, d, sigma_U, sigma_W)
    d1, d2 = fit.deriv(1), fit.deriv(2)
    return (lambda s: d1(1.0 - s)), (lambda s: -d2(1.0 - s)), False
