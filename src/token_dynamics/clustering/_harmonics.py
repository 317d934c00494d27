r"""The interaction energy in spherical harmonics: why the uniform measure minimises it.

By the Funk--Hecke formula the kernel :math:`e^{\beta\langle x, y\rangle}` acts on the spherical
harmonics of degree :math:`\ell` of :math:`\mathbb S^{d-1}` as multiplication by one number
:math:`\lambda_\ell(\beta)`, and by the addition theorem

.. math::

    e^{\beta\langle x, y\rangle} = \sum_{\ell\ge0}\lambda_\ell(\beta)\,N_{d,\ell}\,
    P_{d,\ell}(\langle x, y\rangle),

with :math:`N_{d,\ell}` the dimension of the degree-:math:`\ell` harmonics and :math:`P_{d,\ell}`
the Legendre polynomial of dimension :math:`d` (:math:`P_{d,\ell}(1) = 1`; Chebyshev for
:math:`d = 2`, Legendre for :math:`d = 3`). Each :math:`\iint P_{d,\ell}\,d\mu\,d\mu` is a sum of
squares, so the energy of a measure is the uniform measure's (:math:`\ell = 0`) plus
non-negative terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, ive

from .._typing import ArrayLike, FloatArray
from .._validation import (
    as_real_array,
    as_weights,
    check_int,
)
from ._critical import _check_beta, _tokens

__all__ = [
    "EnergySpectrum",
    "energy_spectrum",
    "funk_hecke_eigenvalues",
    "uniform_growth_rates",
    "zonal_polynomials",
]

#: The accuracies that the tests check and :func:`energy_spectrum`'s rounding allowance rests
#: on: the eigenvalues of :func:`funk_hecke_eigenvalues` relative to themselves (against
#: quadrature of Rodrigues' positive integrand and the series of 0F1), the zonal polynomials
#: absolutely (:math:`|P_{d,\ell}| \le 1`, against their closed forms).
EIGENVALUE_RTOL = 1e-12
ZONAL_ATOL = 1e-13


def _multiplicities(d: int, max_degree: int) -> FloatArray:
    """:math:`N_{d,\\ell}`, the dimension of the spherical harmonics of degree ell on S^{d-1}."""
    ell = np.arange(max_degree + 1, dtype=float)
    if d == 2:
        return np.where(ell == 0, 1.0, 2.0)
    # (2l + d - 2)/(l + d - 2) * binom(l + d - 2, l), in logs (no overflow for large d)
    log_binom = gammaln(ell + d - 1) - gammaln(ell + 1) - gammaln(d - 1)
    return np.asarray((2 * ell + d - 2) / (ell + d - 2) * np.exp(log_binom))


def _hyp0f1(b: np.ndarray, z: float) -> np.ndarray:
    r""":math:`{}_0F_1(; b; z) = \sum_k z^k / (k! (b)_k)` for ``z >= 0`` by its series, whose terms
    are positive: a few ulps per term (scipy's ``hyp0f1`` goes through Bessel functions and
    loses 1e-12 relative at b = 100, z = 1.6e-4)."""
    term, total, k = np.ones_like(b), np.ones_like(b), 0
    while np.any(term > np.finfo(np.float64).eps * total):  # terms fall once k^2 > z
        k += 1
        term = term * z / (k * (b + k - 1))
        total = total + term
    return total


def funk_hecke_eigenvalues(beta: float, d: int, max_degree: int) -> FloatArray:
    r"""Eigenvalues of the kernel :math:`e^{\beta\langle x, y\rangle}` on the spherical harmonics.

    For a spherical harmonic :math:`Y` of degree :math:`\ell` on :math:`\mathbb S^{d-1}` and
    :math:`\sigma` the uniform probability measure,
    :math:`\int e^{\beta\langle x, y\rangle}Y(y)\,d\sigma(y) = \lambda_\ell(\beta)Y(x)` with

    .. math::

        \lambda_\ell(\beta) = \frac{\Gamma(d/2)}{\sqrt\pi\,\Gamma((d-1)/2)}\int_{-1}^1
        e^{\beta t}P_{d,\ell}(t)(1-t^2)^{(d-3)/2}\,dt
        = \Gamma\big(\tfrac d2\big)\Big(\frac2\beta\Big)^{d/2-1}I_{\ell+d/2-1}(\beta) > 0,

    :math:`I` the modified Bessel function of the first kind (:math:`\lambda_\ell = I_\ell(\beta)`
    on the circle, :math:`\sinh\beta/\beta` at :math:`\ell = 0` on :math:`\mathbb S^2`).
    Computed from the exponentially scaled Bessel function, or where that underflows (orders
    far above :math:`\beta`) from :math:`I_\mu(\beta) = (\beta/2)^\mu\,{}_0F_1(;\mu + 1;
    \beta^2/4)/\Gamma(\mu + 1)` and the series of :math:`{}_0F_1`; values below the smallest
    float64 (high degrees at small :math:`\beta`) are returned as 0.

    Parameters
    ----------
    beta : float
        Inverse temperature, :math:`0 < \beta \le 700`.
    d : int
        Ambient dimension, :math:`d \ge 2`.
    max_degree : int
        The eigenvalues of degrees :math:`0, \dots,` `max_degree` are returned.

    Returns
    -------
    ndarray, shape (max_degree + 1,)

    Raises
    ------
    ValueError
        If `beta` is not in ``(0, 700]``, `d` < 2 or `max_degree` < 0.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A mathematical perspective on
    Transformers*, arXiv:2312.10794, §3.2 (the uniform measure minimises the energy).
    K. Atkinson, W. Han, *Spherical Harmonics and Approximations on the Unit Sphere*, Springer,
    2012, §2.5 (the Funk--Hecke formula).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.clustering import funk_hecke_eigenvalues
    >>> lam = funk_hecke_eigenvalues(2.0, 3, 2)
    >>> bool(np.isclose(lam[0], np.sinh(2.0) / 2.0))
    True
    >>> bool(np.all(lam > 0))
    True
    """
    beta = _check_beta(beta)
    d = check_int(d, "d", minimum=2)
    max_degree = check_int(max_degree, "max_degree", minimum=0)
    nu = d / 2 - 1
    ell = np.arange(max_degree + 1)
    scaled = ive(ell + nu, beta)  # e^{-beta} I_{ell + nu}(beta)
    small = scaled < np.finfo(np.float64).tiny  # underflows where beta << ell + nu
    with np.errstate(divide="ignore"):  # an eigenvalue below the float64 range: log 0 = -inf
        log_lam = gammaln(d / 2) + nu * np.log(2 / beta) + np.log(scaled) + beta
        # there, I_mu(beta) = (beta / 2)^mu 0F1(; mu + 1; beta^2 / 4) / Gamma(mu + 1), in logs
        log_lam[small] = (
            gammaln(d / 2)
            - gammaln(ell[small] + d / 2)
            + ell[small] * np.log(beta / 2)
            + np.log(_hyp0f1(ell[small] + d / 2, beta**2 / 4))
        )
    return np.asarray(np.exp(log_lam))


def uniform_growth_rates(beta: float, d: int, max_degree: int) -> FloatArray:
    r"""Growth rates of the degree-:math:`\ell` perturbations of the uniform measure under SA.

    The uniform measure :math:`\sigma` on :math:`\mathbb S^{d-1}` is stationary for the
    mean-field softmax dynamics with :math:`Q = K = V = I`; linearised there, a density
    perturbation :math:`\varepsilon Y` by a spherical harmonic of degree :math:`\ell` grows as
    :math:`e^{\gamma_\ell t}` with (derived in this book, page "Running at scale")

    .. math:: \gamma_\ell(\beta) = \frac{\ell(\ell + d - 2)\,\lambda_\ell(\beta)}
              {\beta\,\lambda_0(\beta)},

    :math:`\lambda_\ell` the Funk--Hecke eigenvalues (:func:`funk_hecke_eigenvalues`) and
    :math:`\ell(\ell + d - 2)` the eigenvalue of :math:`-\Delta` on the degree-:math:`\ell`
    harmonics. Every :math:`\gamma_\ell` with :math:`\ell \ge 1` is positive: the uniform
    measure is unstable.

    Parameters
    ----------
    beta : float
        Inverse temperature, :math:`0 < \beta \le 700`.
    d : int
        Ambient dimension, :math:`d \ge 2`.
    max_degree : int
        The rates of degrees :math:`0, \dots,` `max_degree` (:math:`\gamma_0 = 0`).

    Returns
    -------
    ndarray, shape (max_degree + 1,)
        0 at degrees whose :math:`\lambda_\ell` is below the float64 range (as in
        :func:`funk_hecke_eigenvalues`), although the exact rate is positive.

    Raises
    ------
    ValueError
        If `beta` is not in ``(0, 700]``, `d` < 2 or `max_degree` < 0.

    References
    ----------
    K. Atkinson, W. Han, *Spherical Harmonics and Approximations on the Unit Sphere*, Springer,
    2012, §2.5 (the Funk--Hecke formula) and §3.3 (the Laplace--Beltrami eigenvalues).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.clustering import uniform_growth_rates
    >>> g = uniform_growth_rates(1.0, 2, 1)  # the circle: I_1(1) / I_0(1)
    >>> bool(np.isclose(g[1], 0.44639)), float(g[0])
    (True, 0.0)
    """
    lam = funk_hecke_eigenvalues(beta, d, max_degree)
    ell = np.arange(max_degree + 1, dtype=float)
    return np.asarray(ell * (ell + d - 2) * lam / (float(beta) * lam[0]))


def zonal_polynomials(t: ArrayLike, d: int, max_degree: int) -> FloatArray:
    r"""The Legendre polynomials of dimension :math:`d`, :math:`P_{d,\ell}(t)`, :math:`\ell \le L`.

    Normalised by :math:`P_{d,\ell}(1) = 1` and computed by the three-term recurrence

    .. math::

        (\ell + d - 2)P_{d,\ell+1}(t) = (2\ell + d - 2)\,t\,P_{d,\ell}(t) - \ell P_{d,\ell-1}(t),
        \qquad P_{d,0} = 1,\ P_{d,1}(t) = t,

    which is stable on :math:`[-1, 1]`, where :math:`|P_{d,\ell}| \le 1`. By the addition theorem
    :math:`N_{d,\ell}P_{d,\ell}(\langle x, y\rangle) = \sum_mY_{\ell m}(x)Y_{\ell m}(y)` for an
    orthonormal basis of the degree-:math:`\ell` harmonics in :math:`L^2(\sigma)`.

    Parameters
    ----------
    t : array_like
        Points of :math:`[-1, 1]` (inner products of unit vectors).
    d : int
        Ambient dimension, :math:`d \ge 2`.
    max_degree : int
        Highest degree :math:`L \ge 0`.

    Returns
    -------
    ndarray, shape (max_degree + 1, \*t.shape)

    Raises
    ------
    ValueError
        If `t` is not finite or leaves ``[-1, 1]`` by more than rounding, `d` < 2 or
        `max_degree` < 0.

    References
    ----------
    K. Atkinson, W. Han, *Spherical Harmonics and Approximations on the Unit Sphere*, Springer,
    2012, §2.1--2.2.

    Examples
    --------
    >>> from token_dynamics.clustering import zonal_polynomials
    >>> zonal_polynomials([0.5], 3, 2)[:, 0].tolist()  # Legendre: 1, t, (3t^2 - 1)/2
    [1.0, 0.5, -0.125]
    """
    t = as_real_array(t, "t")
    if np.any(np.abs(t) > 1.0 + 1e-12):
        raise ValueError(
            f"`t` must lie in [-1, 1] (inner products of unit vectors); its largest absolute "
            f"value is {np.max(np.abs(t)):.6g}."
        )
    d = check_int(d, "d", minimum=2)
    max_degree = check_int(max_degree, "max_degree", minimum=0)
    t = np.clip(t, -1.0, 1.0)
    P = np.empty((max_degree + 1, *t.shape))
    P[0] = 1.0
    if max_degree >= 1:
        P[1] = t
    for ell in range(1, max_degree):
        P[ell + 1] = ((2 * ell + d - 2) * t * P[ell] - ell * P[ell - 1]) / (ell + d - 2)
    return P


@dataclass(frozen=True)
class EnergySpectrum:
    r"""The interaction energy of an empirical measure, degree by degree.

    Attributes
    ----------
    degrees : ndarray of int, shape (L + 1,)
    terms : ndarray, shape (L + 1,)
        :math:`\frac{1}{2\beta}\lambda_\ell N_{d,\ell}\sum_{i,j}w_iw_jP_{d,\ell}(\langle x_i,
        x_j\rangle)`: the degree-0 term is the uniform measure's energy, every other term is
        non-negative (a sum of squares, up to rounding).
    energy : float
        The energy itself, :math:`E_\beta(\mu)`, summed directly.
    remainder : float
        ``energy - terms.sum()``: the degrees above `L`, non-negative up to rounding.
    tail_bound : float
        :math:`\frac{1}{2\beta}\big(e^\beta - \sum_{\ell\le L}\lambda_\ell N_{d,\ell}\big)`, a bound
        on `remainder` for every measure (:math:`|P_{d,\ell}| \le 1`), plus what rounding can
        move the remainder and the bound by, :math:`(2\delta_\lambda + \delta_P + (L + n + 1)
        \varepsilon)\,e^\beta/(2\beta)`: the eigenvalues' relative error
        :math:`\delta_\lambda` (``EIGENVALUE_RTOL``) enters the terms and the bound, each
        weighted by :math:`\sum_\ell\lambda_\ell N_{d,\ell} \le e^\beta`, the polynomials'
        absolute error :math:`\delta_P` (``ZONAL_ATOL``) the terms, and the sums their
        :math:`L + 1` and :math:`n` roundings.

    Examples
    --------
    Returned by :func:`energy_spectrum`:

    >>> import numpy as np
    >>> from token_dynamics.clustering import energy_spectrum
    >>> X = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> energy_spectrum(X, beta=1.0, max_degree=20).remainder < 1e-12
    True
    """

    degrees: np.ndarray
    terms: FloatArray
    energy: float
    remainder: float
    tail_bound: float


def energy_spectrum(
    X: ArrayLike, *, beta: float, max_degree: int, weights: ArrayLike | None = None
) -> EnergySpectrum:
    r"""Split the interaction energy of tokens on the sphere into its spherical-harmonic degrees.

    For :math:`\mu = \sum_iw_i\delta_{x_i}` on :math:`\mathbb S^{d-1}`,

    .. math::

        E_\beta(\mu) = \frac{1}{2\beta}\sum_{i,j}w_iw_je^{\beta\langle x_i, x_j\rangle}
        = \frac{1}{2\beta}\sum_{\ell\ge0}\lambda_\ell(\beta)N_{d,\ell}
        \sum_{i,j}w_iw_jP_{d,\ell}(\langle x_i, x_j\rangle),

    where :math:`\sum_{i,j}w_iw_jP_{d,\ell}(\langle x_i, x_j\rangle) =
    N_{d,\ell}^{-1}\sum_m|\sum_iw_iY_{\ell m}(x_i)|^2 \ge 0` and the degree-0 term
    :math:`\lambda_0/(2\beta)` is the energy of the uniform measure. The sum is cut at `max_degree`;
    the result reports what is left (`remainder`) and a bound on it valid for every measure
    (`tail_bound`). Cost :math:`O(n^2L)`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere, :math:`d \ge 2`.
    beta : float
        Inverse temperature, :math:`0 < \beta \le 700`.
    max_degree : int
        Highest degree :math:`L \ge 0` kept.
    weights : array_like, shape (n,), optional
        Probability weights; uniform by default.

    Returns
    -------
    EnergySpectrum

    Raises
    ------
    ValueError
        If `X` is not on the sphere or has ``d < 2``, `beta` is not in ``(0, 700]``,
        `max_degree` < 0 or `weights` are not probability weights.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A mathematical perspective on
    Transformers*, arXiv:2312.10794, §3.2.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.clustering import energy_spectrum
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((8, 3))
    >>> X /= np.linalg.norm(X, axis=1, keepdims=True)
    >>> s = energy_spectrum(X, beta=1.0, max_degree=20)
    >>> bool(np.isclose(s.terms[0], np.sinh(1.0) / 2.0))  # the uniform measure's energy
    True
    >>> bool(np.all(s.terms[1:] > -1e-15)), abs(s.remainder) < 1e-12
    (True, True)
    """
    from ..diagnostics import interaction_energy

    X = _tokens(X)
    n, d = X.shape
    beta = _check_beta(beta)
    max_degree = check_int(max_degree, "max_degree", minimum=0)
    w = np.full(n, 1.0 / n) if weights is None else as_weights(weights, n)
    P = zonal_polynomials(np.clip(X @ X.T, -1.0, 1.0), d, max_degree)
    quadratic = np.einsum("i,lij,j->l", w, P, w)  # sum_ij w_i w_j P_l(<x_i, x_j>)
    lam_N = funk_hecke_eigenvalues(beta, d, max_degree) * _multiplicities(d, max_degree)
    terms = lam_N * quadratic / (2 * beta)
    energy = interaction_energy(X, beta=beta, weights=w)
    # e^beta - sum lam N, plus what rounding moves the remainder and the bound by (EnergySpectrum):
    # a bound that stays one when the tail is below rounding
    eps = np.finfo(float).eps
    rounding = (2 * EIGENVALUE_RTOL + ZONAL_ATOL + (max_degree + n + 1) * eps) * np.exp(beta)
    tail = (max(np.exp(beta) - float(np.sum(lam_N)), 0.0) + rounding) / (2 * beta)
    return EnergySpectrum(
        degrees=np.arange(max_degree + 1),
        terms=terms,
        energy=energy,
        remainder=energy - float(terms.sum()),
        tail_bound=tail,
    )
