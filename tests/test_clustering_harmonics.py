"""The interaction energy in spherical harmonics (token_dynamics.clustering._harmonics), against
quadrature, closed forms and the energy summed directly."""

import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import eval_chebyt, eval_gegenbauer, gamma, roots_jacobi

import token_dynamics as td
from token_dynamics import clustering as cl
from token_dynamics.clustering._harmonics import EIGENVALUE_RTOL, ZONAL_ATOL


def _zonal_reference(t, ell, d):
    """P_{d,l}(t) from scipy's Chebyshev (d = 2) or Gegenbauer polynomials, divided by C(1)."""
    if d == 2:
        return eval_chebyt(ell, t)
    nu = d / 2 - 1
    return eval_gegenbauer(ell, nu, t) / eval_gegenbauer(ell, nu, 1.0)


@pytest.mark.parametrize("d", [2, 3, 4, 7])
def test_zonal_polynomials_match_scipys_gegenbauer(d):
    t = np.linspace(-1.0, 1.0, 41)
    P = cl.zonal_polynomials(t, d, 25)
    assert P.shape == (26, 41)
    for ell in range(26):
        # the recurrence is stable on [-1, 1] (|P| <= 1): a few rounding errors per degree
        np.testing.assert_allclose(P[ell], _zonal_reference(t, ell, d), rtol=0, atol=ZONAL_ATOL)
    np.testing.assert_array_equal(P[:, -1], 1.0)  # P(1) = 1
    assert np.max(np.abs(P)) <= 1.0 + 1e-14


@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("beta", [0.3, 2.0, 9.0])
@pytest.mark.statement("clu-prop-extremisers")
def test_funk_hecke_eigenvalues_against_quadrature(d, beta):
    # the Funk-Hecke integral, computed by adaptive quadrature with the weight (1-t^2)^((d-3)/2)
    # handled exactly (QUADPACK's algebraic weight): an independent route to lambda_l
    lam = cl.funk_hecke_eigenvalues(beta, d, 12)
    c = gamma(d / 2) / (math.sqrt(math.pi) * gamma((d - 1) / 2))
    a = (d - 3) / 2
    for ell in range(13):
        value, err = quad(
            lambda t, ell=ell: math.exp(beta * t) * _zonal_reference(t, ell, d),
            -1.0,
            1.0,
            weight="alg",
            wvar=(a, a),
            epsabs=1e-13 * math.exp(beta),
            epsrel=1e-12,
        )
        # the integrand is of size e^beta and the high degrees cancel it down to lambda_l:
        # quadrature to 1e-13 e^beta absolute, or 1e-12 relative; the Bessel values to ~eps
        assert err <= 1e-12 * math.exp(beta)
        assert lam[ell] == pytest.approx(c * value, rel=1e-10, abs=2e-13 * math.exp(beta))
        assert lam[ell] > 0  # the positivity the minimiser's proof rests on


@pytest.mark.parametrize("d", [2, 3, 5, 8])
@pytest.mark.parametrize("beta", [0.3, 2.0, 30.0])
@pytest.mark.statement("clu-prop-extremisers")
def test_funk_hecke_eigenvalues_by_rodrigues(d, beta):
    # the positivity step of the proof: Rodrigues' formula and l integrations by parts give
    # lambda_l = c R_l beta^l int e^{beta t}(1 - t^2)^{l + (d-3)/2} dt, a positive integrand, so
    # quadrature is accurate relative to lambda_l itself at every degree (no cancellation)
    lam = cl.funk_hecke_eigenvalues(beta, d, 30)
    c = gamma(d / 2) / (math.sqrt(math.pi) * gamma((d - 1) / 2))
    for ell in range(31):
        R = gamma((d - 1) / 2) / (2**ell * gamma(ell + (d - 1) / 2))
        a = ell + (d - 3) / 2
        # Gauss-Jacobi with 200 nodes: exact for degree 399, and e^{beta t}'s Chebyshev
        # coefficients fall below 1e-16 of the largest well before degree 200 at beta <= 30;
        # positive weights and integrand (e^{beta(t-1)} <= 1): no cancellation
        nodes, weights = roots_jacobi(200, a, a)
        value = float(np.sum(weights * np.exp(beta * (nodes - 1))))
        reference = c * R * math.exp(ell * math.log(beta) + beta) * value
        assert lam[ell] == pytest.approx(reference, rel=EIGENVALUE_RTOL)


@pytest.mark.parametrize("d", [2, 3, 6])
def test_funk_hecke_expansion_sums_to_the_kernel(d):
    # addition theorem at t: sum_l lambda_l N_l P_l(t) = e^{beta t}, the terms decaying like
    # beta^l / l!: 60 degrees leave less than 1e-40 at beta = 3
    beta, L = 3.0, 60
    t = np.linspace(-1.0, 1.0, 9)
    lam = cl.funk_hecke_eigenvalues(beta, d, L)
    N = cl.energy_spectrum(np.eye(d)[:1], beta=beta, max_degree=L).terms * 2 * beta / lam
    expansion = np.einsum("l,lt->t", lam * N, cl.zonal_polynomials(t, d, L))
    # terms up to e^beta that cancel down to e^{-beta} at t = -1: rounding of order eps e^beta
    np.testing.assert_allclose(expansion, np.exp(beta * t), rtol=1e-13, atol=1e-14 * np.exp(beta))


def test_funk_hecke_closed_forms():
    # S^2: lambda_0 = sinh(beta)/beta, lambda_1 = (beta cosh beta - sinh beta)/beta^2 (the
    # modified spherical Bessel functions i_0, i_1); the circle: I_l(beta)
    beta = 1.7
    lam = cl.funk_hecke_eigenvalues(beta, 3, 1)
    np.testing.assert_allclose(lam[0], np.sinh(beta) / beta, rtol=1e-14)
    np.testing.assert_allclose(lam[1], (beta * np.cosh(beta) - np.sinh(beta)) / beta**2, rtol=1e-14)
    from scipy.special import iv

    np.testing.assert_allclose(cl.funk_hecke_eigenvalues(beta, 2, 5), iv(np.arange(6), beta))
    # at the largest beta accepted, e^beta is finite and so is every eigenvalue
    assert np.all(np.isfinite(cl.funk_hecke_eigenvalues(700.0, 3, 5)))


@pytest.mark.parametrize(("beta", "d"), [(1e-3, 200), (0.0253, 200), (1e-8, 40), (1e-300, 10)])
def test_funk_hecke_eigenvalues_at_small_beta_in_high_dimension(beta, d):
    """lambda_l = Gamma(d/2) / Gamma(l + d/2) (beta/2)^l 0F1(; b; z), b = l + d/2, z = beta^2 / 4,
    with 0F1 = 1 + z / b + z^2 / (2 b (b + 1)) + ..., the series of I_{l + d/2 - 1}: lambda_0
    -> 1 as beta -> 0 (the kernel tends to 1). The next term is below 1e-18 relative for these
    beta; the rest is the rounding of gammaln (1e-13). There e^{-beta} I_{l + d/2 - 1}(beta)
    underflows, and the eigenvalues used to come out as 0 (and the growth rates as 0 / 0);
    scipy's hyp0f1 in their place erred by 2.4e-12 at beta = 0.0253."""
    from scipy.special import gammaln

    ell = np.arange(4)
    b = ell + d / 2
    z = beta**2 / 4
    log_series = gammaln(d / 2) - gammaln(b) + ell * np.log(beta / 2)
    expected = np.exp(log_series) * (1 + z / b + z * z / (2 * b * (b + 1)))
    np.testing.assert_allclose(cl.funk_hecke_eigenvalues(beta, d, 3), expected, rtol=1e-13)
    # gamma_1 = (d - 1) lambda_1 / (beta lambda_0), from the same series
    rate = (d - 1) * expected[1] / (beta * expected[0])
    np.testing.assert_allclose(cl.uniform_growth_rates(beta, d, 1)[1], rate, rtol=1e-13)


def _rounding_allowance(L, n, beta):
    """The rounding that energy_spectrum's tail_bound allows for, cut at degree L, n tokens:
    (2 EIGENVALUE_RTOL + ZONAL_ATOL + (L + n + 1) eps) e^beta / (2 beta) (EnergySpectrum)."""
    eps = np.finfo(float).eps
    return (2 * EIGENVALUE_RTOL + ZONAL_ATOL + (L + n + 1) * eps) * np.exp(beta) / (2 * beta)


@pytest.mark.statement("clu-prop-extremisers")
@pytest.mark.parametrize(("n", "d", "beta"), [(12, 2, 1.0), (20, 3, 2.0), (15, 5, 4.0)])
def test_energy_spectrum_is_the_uniform_energy_plus_squares(n, d, beta):
    rng = np.random.default_rng(n + d)
    X = td.uniform_sphere(n, d, rng=rng)
    s = cl.energy_spectrum(X, beta=beta, max_degree=60)
    # degree 0: lambda_0 / (2 beta), the energy of the uniform measure
    assert s.terms[0] == pytest.approx(cl.funk_hecke_eigenvalues(beta, d, 0)[0] / (2 * beta))
    # every other degree a sum of squares: non-negative up to the rounding of n^2 terms
    assert np.all(s.terms[1:] >= -1e-14 * np.exp(beta))
    # 60 degrees: the tail below beta^61/61! e^beta, far below rounding, so the bound is its
    # rounding allowance (EnergySpectrum); the remainder is the rounding of both sums
    assert s.tail_bound == pytest.approx(_rounding_allowance(60, n, beta))
    assert abs(s.remainder) <= 1e-13 * s.energy
    assert s.energy == pytest.approx(td.interaction_energy(X, beta=beta), rel=1e-15)


def test_energy_spectrum_of_a_dirac_and_a_truncation():
    # all tokens at one point: every quadratic sum is P_l(1) = 1, the terms are lambda_l N_l/(2b)
    beta, d = 2.0, 3
    X = np.tile(np.array([0.0, 0.0, 1.0]), (5, 1))
    s = cl.energy_spectrum(X, beta=beta, max_degree=40)
    lam = cl.funk_hecke_eigenvalues(beta, d, 40)
    # P_l(1) by the recurrence: l rounding errors
    np.testing.assert_allclose(s.terms, lam * (2 * np.arange(41) + 1) / (2 * beta), rtol=1e-13)
    assert s.energy == pytest.approx(np.exp(beta) / (2 * beta), rel=1e-15)
    # cut at degree 2: the remainder is what the bound says it is at a Dirac (the extreme case)
    short = cl.energy_spectrum(X, beta=beta, max_degree=2)
    # (the bound less its rounding allowance)
    tail = short.tail_bound - _rounding_allowance(2, 5, beta)
    assert short.remainder == pytest.approx(tail, rel=1e-12)
    assert s.remainder <= s.tail_bound  # a bound that stays one below rounding
    assert short.remainder > 0.01 * short.energy  # a truncation that loses accuracy says so


def test_energy_spectrum_tail_bound_covers_the_rounding_of_a_converged_expansion():
    """Past degree 60 the truncation tail (below beta^61/61! e^beta) is far below rounding, so
    the remainder is the rounding of the two sums, a few eps e^beta / (2 beta): nonzero in
    general, and bounded only through the bound's rounding allowance. The bound is compared with
    no absolute slack (pytest.approx's default abs=1e-12 would hide an allowance of 1e-14)."""
    eps = np.finfo(float).eps
    for seed in range(2):
        for n, d, beta in [(12, 2, 1.0), (20, 3, 2.0), (15, 5, 4.0)]:
            X = td.uniform_sphere(n, d, rng=np.random.default_rng(seed))
            s = cl.energy_spectrum(X, beta=beta, max_degree=60)
            assert abs(s.remainder) <= s.tail_bound
            assert s.tail_bound >= 61 * eps * np.exp(beta) / (2 * beta)


def test_energy_spectrum_tail_bound_holds_across_dimensions_and_temperatures():
    """The bound holds with its rounding for every measure: random clouds of 1 to 7 tokens in
    d = 2 to 200, beta from 1e-4 to 300, cut at 0 to 29 degrees. A one-token cloud (a Dirac)
    meets the bound's tail exactly, so rounding alone decides there. An allowance of (L + 1)
    eps e^beta / (2 beta), the rounding of the sums alone, was exceeded in 33 of these 400
    draws, by up to 370 eps e^beta / (2 beta): the eigenvalues' own error
    (EIGENVALUE_RTOL) weighs on every term and on the bound."""
    rng = np.random.default_rng(0)
    for _ in range(400):
        d = int(rng.choice([2, 3, 5, 50, 200]))
        n, beta, L = (
            int(rng.integers(1, 8)),
            float(10 ** rng.uniform(-4, 2.5)),
            int(rng.integers(0, 30)),
        )
        X = td.uniform_sphere(n, d, rng=rng)
        s = cl.energy_spectrum(X, beta=beta, max_degree=L)
        assert -s.tail_bound <= s.remainder <= s.tail_bound, (d, n, beta, L)


def test_weights_and_bad_input():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    s = cl.energy_spectrum(X, beta=1.0, max_degree=30, weights=[0.5, 0.25, 0.25])
    assert s.energy == pytest.approx(td.interaction_energy(X, beta=1.0, weights=[0.5, 0.25, 0.25]))
    assert abs(s.remainder) < 1e-14
    X_before = X.copy()
    cl.energy_spectrum(X, beta=1.0, max_degree=3)
    np.testing.assert_array_equal(X, X_before)
    with pytest.raises(ValueError, match="`beta`"):
        cl.funk_hecke_eigenvalues(0.0, 3, 2)
    with pytest.raises(ValueError, match=r"`beta`.*700"):
        cl.energy_spectrum(X, beta=800.0, max_degree=2)
    with pytest.raises(ValueError, match="`d`"):
        cl.funk_hecke_eigenvalues(1.0, 1, 2)
    with pytest.raises(ValueError, match="`max_degree`"):
        cl.zonal_polynomials([0.0], 3, -1)
    with pytest.raises(ValueError, match=r"`t`.*\[-1, 1\]"):
        cl.zonal_polynomials([1.5], 3, 2)
    with pytest.raises(ValueError, match=r"`X`.*sphere"):
        cl.energy_spectrum(2 * X, beta=1.0, max_degree=2)
    with pytest.raises(ValueError, match=r"`X`.*d >= 2"):
        cl.energy_spectrum(np.ones((3, 1)), beta=1.0, max_degree=2)


def _sphere_rule(nodes: int = 40, angles: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """A product rule for the uniform measure on S^2: Gauss-Legendre in the height (exact for
    polynomials of degree < 2 nodes in it) times equal angles (exact for trigonometric
    polynomials of degree < angles); spectrally accurate for the smooth kernels below."""
    z, wz = np.polynomial.legendre.leggauss(nodes)
    phi = 2 * np.pi * np.arange(angles) / angles
    Z, P = np.meshgrid(z, phi, indexing="ij")
    R = np.sqrt(1 - Z**2)
    X = np.stack([R * np.cos(P), R * np.sin(P), Z], axis=-1).reshape(-1, 3)
    return X, np.repeat(wz, angles) / (2 * angles)


@pytest.mark.statement("scale-prop-uniform")
@pytest.mark.parametrize("beta", [0.5, 2.0])
def test_uniform_measure_is_stationary_and_grows_at_the_predicted_rates(beta):
    X, w = _sphere_rule()
    Y = td.uniform_sphere(40, 3, rng=3)
    field = td.Softmax(np.eye(3), np.eye(3), beta=beta)

    def tangential(v):
        return v - np.sum(v * Y, axis=1, keepdims=True) * Y

    # 1: the field of the uniform measure vanishes (to the rule's accuracy, round-off here)
    assert np.abs(tangential(field.velocity_at(Y, X, weights=w))).max() < 1e-13
    rates = cl.uniform_growth_rates(beta, 3, 2)
    eps = 1e-4
    # 2, degree 1 (Y = x_3, grad = e_3 - x_3 x) and degree 2 (Y = x_1 x_2, grad = P_x(x_2, x_1, 0)):
    # the field of (1 + eps Y) sigma is eps gamma_l / (l(l + 1)) grad Y up to O(eps^2), that is
    # a relative error of order eps (measured 2e-5 at eps = 1e-4, first order in eps)
    for ell, density, grad in (
        (1, X[:, 2], np.array([0.0, 0.0, 1.0]) - Y[:, 2:] * Y),
        (2, X[:, 0] * X[:, 1], tangential(np.stack([Y[:, 1], Y[:, 0], 0 * Y[:, 0]], axis=1))),
    ):
        v = tangential(field.velocity_at(Y, X, weights=w * (1 + eps * density)))
        expected = eps * rates[ell] / (ell * (ell + 1)) * grad
        np.testing.assert_allclose(v, expected, rtol=0, atol=10 * eps * np.abs(expected).max())


def test_uniform_growth_rates_closed_forms():
    from scipy.special import iv

    # the circle: gamma_l = l^2 I_l(beta) / (beta I_0(beta)); gamma_0 = 0
    g = cl.uniform_growth_rates(1.5, 2, 4)
    ell = np.arange(5)
    np.testing.assert_allclose(g, ell**2 * iv(ell, 1.5) / (1.5 * iv(0, 1.5)), rtol=1e-13)
    # S^2, degree 1: 2 (coth(beta) - 1/beta) / beta (the Langevin function), positive rates
    g = cl.uniform_growth_rates(3.0, 3, 6)
    np.testing.assert_allclose(g[1], 2 * (1 / math.tanh(3.0) - 1 / 3.0) / 3.0, rtol=1e-13)
    assert g[0] == 0 and np.all(g[1:] > 0)
    with pytest.raises(ValueError, match="`d`"):
        cl.uniform_growth_rates(1.0, 1, 2)
