"""Tests of token_dynamics.gradient_flow against closed forms, finite differences and POT."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from token_dynamics import gradient_flow as gf
from token_dynamics.attention import Softmax, Unnormalised
from token_dynamics.gaussian import SoftmaxMoments, solve_moments
from token_dynamics.integrators import ToleranceWarning

from .helpers import random_spd

EPS = np.finfo(float).eps
# Central differences: truncation O(h^2 f''') ~ 1e-10 and rounding O(eps |f| / h) ~ 1e-11 at
# h = 1e-5 for O(1) data, so 1e-7 relative leaves a margin of 10^3.
H = 1e-5
FD_RTOL = 1e-7


def _instance(seed, n=6, d=3, scale=0.5):
    rng = np.random.default_rng(seed)
    X = scale * rng.standard_normal((n, d))
    w = rng.dirichlet(np.ones(n))
    return rng, X, w


def _sym(rng, d, scale=0.5):
    M = scale * rng.standard_normal((d, d))
    return 0.5 * (M + M.T)


def _trajectory(field, X0, times):
    """Reference trajectory by DOP853 at tight tolerance (independent of our integrators)."""
    n, d = X0.shape
    sol = solve_ivp(
        lambda t, y: field(t, y.reshape(n, d)).ravel(),
        (times[0], times[-1]),
        X0.ravel(),
        t_eval=times,
        method="DOP853",
        rtol=1e-11,
        atol=1e-13,
    )
    assert sol.status == 0
    return sol.y.T.reshape(len(times), n, d)


# ----------------------------------------------------------------------------- the energy


def test_particle_energy_direct_sum():
    _, X, w = _instance(0)
    A = np.arange(9.0).reshape(3, 3) / 10
    direct = 0.5 * sum(w[i] * w[j] * np.exp(A @ X[i] @ X[j]) for i in range(6) for j in range(6))
    # a sum of 36 positive terms: rounding below 36 eps relative
    np.testing.assert_allclose(gf.particle_energy(A, X, weights=w), direct, rtol=50 * EPS)


def test_particle_energy_overflow_is_reported():
    with pytest.raises(FloatingPointError, match="float64 range"):
        gf.particle_energy(np.eye(2), [[30.0, 0.0]])


def test_energy_along_and_validation():
    _, X, w = _instance(1)
    A = -np.eye(3)
    states = np.stack([X, 2 * X])
    np.testing.assert_allclose(
        gf.energy_along(A, states, weights=w),
        [gf.particle_energy(A, X, weights=w), gf.particle_energy(A, 2 * X, weights=w)],
    )
    with pytest.raises(ValueError, match="`states`"):
        gf.energy_along(A, X)
    with pytest.raises(ValueError, match="`A`"):
        gf.particle_energy(np.eye(2), X)
    with pytest.raises(ValueError, match="`velocity`"):
        gf.energy_rate(A, X, X[:2])


def test_an_energy_rate_beyond_the_float_range_is_reported():
    """Tokens of norm 20 and A close to I: the gradient and the velocity reach ~1e175 (e^400
    times the norm), their product 1e350. numpy's einsum overflows to inf without a floating-point
    error, and the rate and the check's metric speed came back as inf, silently."""
    A = np.array([[1.0, 0.2], [0.2, 0.8]])
    X = 20.0 * np.array([[1.0, 0.0], [0.6, 0.8], [-1.0, 0.0]])
    velocity = Unnormalised(A, np.eye(2)).velocity(X)
    assert np.all(np.isfinite(velocity))  # the velocity itself is representable
    with pytest.raises(FloatingPointError, match="energy rate leaves the float64 range"):
        gf.energy_rate(A, X, velocity)
    with pytest.raises(FloatingPointError, match=r"metric speed .* leaves the float64 range"):
        gf.gradient_flow_check(A, np.eye(2), X)
    for normalised in (False, True):  # the closed form: the same overflow, the same report
        with pytest.raises(FloatingPointError, match="energy rate leaves the float64 range"):
            gf.energy_rate_formula(
                A, (1.0 if not normalised else 1e160) * np.eye(2), X, normalised=normalised
            )


@pytest.mark.statement("gf-prop-first-variation")
@pytest.mark.parametrize("seed", range(3))
def test_gradient_is_the_particle_derivative(seed):
    rng, X, w = _instance(seed)
    A = 0.5 * rng.standard_normal((3, 3))  # not symmetric: the general formula
    exact = w[:, None] * gf.energy_gradient(A, X, weights=w)
    fd = np.zeros_like(X)
    for i in range(X.shape[0]):
        for k in range(X.shape[1]):
            e = np.zeros_like(X)
            e[i, k] = H
            fd[i, k] = (
                gf.particle_energy(A, X + e, weights=w) - gf.particle_energy(A, X - e, weights=w)
            ) / (2 * H)
    np.testing.assert_allclose(fd, exact, rtol=FD_RTOL, atol=FD_RTOL * np.abs(exact).max())


@pytest.mark.statement("gf-prop-first-variation")
@pytest.mark.parametrize("seed", range(3))
def test_first_variation_is_the_mixture_derivative(seed):
    # d/ds E((1 - s) mu + s delta_y) at s = 0 equals dE/dmu(y) - int dE/dmu dmu = dE/dmu(y) - 2 E
    rng, X, w = _instance(seed)
    A = 0.5 * rng.standard_normal((3, 3))
    y = 0.5 * rng.standard_normal(3)
    Xy = np.vstack([X, y])

    def E(s):
        return gf.particle_energy(A, Xy, weights=np.append((1 - s) * w, s))

    # s -> E is a quadratic polynomial, so the one-sided three-point formula is exact up to
    # rounding eps |E| / h ~ 1e-13 at h = 1e-3
    h = 1e-3
    fd = (-3 * E(0.0) + 4 * E(h) - E(2 * h)) / (2 * h)
    exact = gf.first_variation(A, X, y[None, :], weights=w)[0] - 2 * gf.particle_energy(
        A, X, weights=w
    )
    np.testing.assert_allclose(fd, exact, rtol=FD_RTOL)


@pytest.mark.statement("gf-prop-first-variation")
def test_first_variation_is_the_partition_function_for_symmetric_A():
    rng, X, w = _instance(4)
    A = _sym(rng, 3)
    Y = rng.standard_normal((4, 3))
    np.testing.assert_allclose(
        gf.first_variation(A, X, Y, weights=w),
        gf.softmax_metric_density(A, X, Y, weights=w),
        rtol=10 * EPS,
    )
    # gradient of Z: A int e^{<Ay, x>} x dmu (spec 4.1)
    K = np.exp(Y @ A @ X.T) * w
    np.testing.assert_allclose(
        gf.energy_gradient(A, X, Y, weights=w), K @ X @ A, rtol=1e-13, atol=1e-15
    )


def test_softmax_metric_density_beyond_the_exponential_range():
    """Z(x_1) = 1e-20 e^729 + (1 - 1e-20) e^0 = e^(729 - 20 log 10) + 1 is a float (about 1e297)
    though e^729 is not: it is taken as e^(729 + log(1e-20 + ...)), exact up to the rounding of
    that exponent (ulp(729) = 1.1e-13, so 3e-13 relative); Z(x_2) = 1e-20 + (1 - 1e-20) e. It
    used to overflow and raise; so did the first variation, which is Z for a symmetric A."""
    X, w = np.array([[27.0, 0.0], [0.0, 1.0]]), np.array([1e-20, 1.0 - 1e-20])
    expected = [np.exp(729.0 + np.log(1e-20)) + 1.0, 1e-20 + (1.0 - 1e-20) * np.e]
    for Z in (gf.softmax_metric_density, gf.first_variation):
        np.testing.assert_allclose(Z(np.eye(2), X, weights=w), expected, rtol=3e-13)
    with pytest.raises(FloatingPointError, match="softmax metric density"):
        gf.softmax_metric_density(np.eye(2), 2 * X, weights=w)  # e^(2916 - 46): no float


# ---------------------------------------------------------------------- twisted metric


def _twisted_instance(seed, d=3, sign=1):
    rng = np.random.default_rng(seed)
    A = _sym(rng, d) + 1.5 * np.eye(d) * rng.choice([-1, 1])  # symmetric, far from singular
    P = sign * random_spd(rng, d, shift=0.5)
    return rng, A, P @ A, P


@pytest.mark.statement("gf-prop-usa-twisted")
@pytest.mark.parametrize(("seed", "sign"), [(0, 1), (1, -1), (2, 1), (3, -1)])
def test_unnormalised_attention_is_the_twisted_gradient(seed, sign):
    rng, A, V, P = _twisted_instance(seed, sign=sign)
    X = 0.4 * rng.standard_normal((7, 3))
    w = rng.dirichlet(np.ones(7))
    chk = gf.gradient_flow_check(A, V, X, weights=w)
    np.testing.assert_allclose(chk.velocity, Unnormalised(A, V).velocity(X, weights=w), rtol=1e-14)
    # two evaluations of the same n-term sums in different orders: a few ulps times n
    assert chk.identity_error < 100 * EPS
    assert chk.sign == sign
    np.testing.assert_allclose(gf.twisted_metric(A, V).P, P, rtol=1e-12, atol=1e-12)
    # energy-dissipation equality: dE/dt = sign * |v|^2 in the twisted metric
    np.testing.assert_allclose(chk.energy_rate, sign * chk.metric_speed_squared, rtol=1e-12)
    assert sign * chk.energy_rate > 0


@pytest.mark.statement("gf-prop-usa-twisted")
def test_metric_speed_is_the_twisted_wasserstein_speed():
    # For distinct tokens and small h, x -> x + h v is the optimal map, so
    # d_P(mu, (id + h v)_# mu) = h |v|_{P^-1} exactly (up to the LP's rounding).
    rng, A, V, _ = _twisted_instance(5)
    X = rng.standard_normal((8, 3))
    w = rng.dirichlet(np.ones(8))
    chk = gf.gradient_flow_check(A, V, X, weights=w)
    h = 1e-3 / np.abs(chk.velocity).max()
    dist = gf.twisted_wasserstein(A, V, X, X + h * chk.velocity, weights_x=w, weights_y=w)
    np.testing.assert_allclose(dist / h, np.sqrt(chk.metric_speed_squared), rtol=1e-9)


@pytest.mark.statement("gf-lem-translations")
@pytest.mark.parametrize("s", [0.3, 1.0, 4.0])
def test_translations_are_twisted_geodesics(s):
    rng, A, V, _ = _twisted_instance(6)
    X = rng.standard_normal((6, 3))
    b = rng.standard_normal(3)
    M = gf.twisted_metric(A, V).metric
    # cost (sb)^T M (sb) for every coupling mean, attained by the translation (Jensen)
    np.testing.assert_allclose(
        gf.twisted_wasserstein(A, V, X, X + s * b), s * np.sqrt(b @ M @ b), rtol=1e-9
    )
    # the twisted distance is W2 of the pushforwards by M^{1/2}
    lam, U = np.linalg.eigh(M)
    R = (U * np.sqrt(lam)) @ U.T
    Y = rng.standard_normal((6, 3))
    from token_dynamics.wasserstein import wasserstein2

    np.testing.assert_allclose(
        gf.twisted_wasserstein(A, V, X, Y), wasserstein2(X @ R, Y @ R), rtol=1e-9
    )


def test_twisted_metric_errors():
    A = np.diag([1.0, 2.0])
    with pytest.raises(gf.TwistedMetricError, match="not symmetric"):
        gf.twisted_metric(A, np.array([[1.0, 1.0], [0.0, 1.0]]))
    for scale in (1e-9, 1e-200):  # as asymmetric at any size (a floor of 1 used to pass these)
        with pytest.raises(gf.TwistedMetricError, match="not symmetric"):
            gf.twisted_metric(A, scale * np.array([[1.0, 1.0], [0.0, 1.0]]))
        with pytest.raises(gf.TwistedMetricError, match="not symmetric"):
            gf.twisted_metric(A / scale, np.array([[1.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(gf.TwistedMetricError, match="indefinite"):
        gf.twisted_metric(A, np.diag([1.0, -1.0]))
    with pytest.raises(gf.TwistedMetricError, match="singular"):
        gf.twisted_metric(np.diag([1.0, 0.0]), np.eye(2))
    with pytest.raises(ValueError, match="`A` must be a symmetric"):
        gf.twisted_metric(np.array([[1.0, 1.0], [0.0, 1.0]]), np.eye(2))
    with pytest.raises(gf.TwistedMetricError):
        gf.twisted_wasserstein(A, np.diag([1.0, -1.0]), np.zeros((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="`kind`"):
        gf.gradient_flow_check(A, A, np.zeros((2, 2)), kind="hardmax")


@pytest.mark.statement("gf-prop-softmax-weighted")
@pytest.mark.parametrize(("seed", "sign"), [(7, 1), (8, -1)])
def test_softmax_is_the_weighted_gradient_flow(seed, sign):
    rng, A, V, _ = _twisted_instance(seed, sign=sign)
    X = 0.4 * rng.standard_normal((7, 3))
    w = rng.dirichlet(np.ones(7))
    chk = gf.gradient_flow_check(A, V, X, kind="softmax", weights=w)
    np.testing.assert_allclose(chk.velocity, Softmax(A, V).velocity(X, weights=w), rtol=1e-13)
    assert chk.identity_error < 100 * EPS
    np.testing.assert_allclose(chk.energy_rate, sign * chk.metric_speed_squared, rtol=1e-12)


# ----------------------------------------------------------------------- monotonicity


def _softmax_rate_formula(X, A, V, w, power):
    Z = gf.softmax_metric_density(A, X, weights=w)
    m = Softmax(A, np.eye(X.shape[1])).velocity(X, weights=w)
    return float(np.einsum("i,i,ik,kl,il->", w, Z**power, m, A @ V, m))


@pytest.mark.statement("gf-thm-monotonicity")
@given(seed=st.integers(0, 10_000))
def test_dissipation_formula_and_sign(seed):
    rng, X, w = _instance(seed, n=5, d=2)
    A = _sym(rng, 2)
    V = rng.standard_normal((2, 2))
    for field, power in ((Softmax(A, V), 1), (Unnormalised(A, V), 2)):
        rate = gf.energy_rate(A, X, field.velocity(X, weights=w), weights=w)
        expected = _softmax_rate_formula(X, A, V, w, power)
        np.testing.assert_allclose(rate, expected, rtol=1e-10, atol=1e-14)
        sign = gf.monotonicity_sign(A, V)
        if sign != 0:
            assert sign * rate >= -1e-14


@pytest.mark.statement("gf-thm-monotonicity")
@pytest.mark.parametrize("seed", range(4))
def test_energy_is_monotone_along_trajectories(seed):
    rng = np.random.default_rng(seed)
    d = 2
    A = _sym(rng, d)
    for target in (1, -1):
        # V = S A with S symmetric definite: AV = A S A is semidefinite, with the sign of S
        V = target * random_spd(rng, d, shift=0.5) @ A
        assert gf.monotonicity_sign(A, V) == target
        X0 = 0.7 * rng.standard_normal((6, d))
        times = np.linspace(0.0, 0.5, 101)
        states = _trajectory(Softmax(A, V), X0, times)
        E = gf.energy_along(A, states)
        # tolerance: the reference integrator's rtol 1e-11 on the energy
        assert np.all(target * np.diff(E) >= -1e-9 * E[:-1])
        # and dE/dt matches the formula: central differences in time err by dt^2 |E'''| / 6,
        # below 1e-3 of the largest rate here (dt = 5e-3, |E'''| / |E'| at most ~ 20)
        dt = times[1] - times[0]
        rate_fd = (E[2:] - E[:-2]) / (2 * dt)
        rates = [gf.energy_rate(A, X, Softmax(A, V).velocity(X)) for X in states[1:-1]]
        scale = np.abs(rates).max()
        np.testing.assert_allclose(rate_fd, rates, atol=1e-3 * scale)


def test_monotonicity_sign_indefinite():
    assert gf.monotonicity_sign(np.eye(2), np.diag([1.0, -1.0])) == 0
    assert gf.monotonicity_sign(np.eye(2), np.eye(2)) == 1


@pytest.mark.parametrize("scale", [1e-11, 1e-100, 1e100])
def test_monotonicity_sign_does_not_depend_on_the_size_of_a_and_v(scale):
    """A V + V^T A = 2 scale diag(1, -1) is indefinite at every scale: the energy rises for
    tokens along e_1 and falls along e_2 (the rate is sum_i w_i Z_i m_i^T A V m_i), so no sign is
    predicted. A tolerance with an absolute floor of 1e-10 used to read 2e-11 diag(1, -1) as
    semidefinite and predict +1."""
    A, V = np.eye(2), np.diag([1.0, -1.0])
    assert gf.monotonicity_sign(scale * A, V) == 0
    assert gf.monotonicity_sign(A, scale * V) == 0
    assert gf.monotonicity_sign(scale * A, scale * np.eye(2)) == 1
    assert gf.monotonicity_sign(scale * A, -np.eye(2)) == -1


def test_monotonicity_sign_reads_the_symmetric_part_of_a_v():
    """The sign is that of the quadratic form x^T A V x, i.e. of the symmetric matrix
    A V + V^T A. With A = diag(1, 2) and V = [[1, 2], [-1, 1]], A V + V^T A = diag(2, 4): the
    form is x1^2 + 2 x2^2 > 0 although V is not symmetric and A V + V A is indefinite."""
    A, V = np.diag([1.0, 2.0]), np.array([[1.0, 2.0], [-1.0, 1.0]])
    theta = np.linspace(0.0, 2 * np.pi, 721)
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    assert np.einsum("ik,kl,il->i", x, A @ V, x).min() >= 1.0 - 1e-12  # the form on the circle
    assert gf.monotonicity_sign(A, V) == 1
    assert gf.monotonicity_sign(A, -V) == -1


def test_bures_wasserstein_velocity_refuses_a_step_beyond_half_the_smallest_eigenvalue():
    """The central differences evaluate the functional at S +- h E with |E| <= 1, which is a
    covariance only when h stays below half of every eigenvalue of S: 1.5 h must be refused."""
    h = 1e-3
    with pytest.raises(ValueError, match="eigenvalues above 2 h"):
        gf.bures_wasserstein_velocity(
            lambda m, S: float(np.trace(S)), [0.0, 0.0], np.diag([1.0, 1.5 * h]), h=h
        )


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_bures_wasserstein_velocity_reports_a_functional_that_is_not_finite(bad):
    """A functional that is NaN (log of a negative determinant, say) or infinite near the
    Gaussian has no velocity there; NaN used to pass silently through the differences (no
    floating-point flag is raised by NaN - NaN) and came back as the velocity."""
    with pytest.raises(FloatingPointError, match="`functional` returned"):
        gf.bures_wasserstein_velocity(lambda m, S: bad, [0.0, 0.0], np.eye(2))


# --------------------------------------------------------------------- Gaussian energy


@pytest.mark.statement("gf-prop-gaussian-energy")
@pytest.mark.parametrize("symmetric", [True, False])
def test_gaussian_energy_against_monte_carlo(symmetric):
    rng = np.random.default_rng(11)
    d = 2
    A = 0.6 * rng.standard_normal((d, d))
    A = 0.5 * (A + A.T) if symmetric else A
    mean = np.array([0.4, -0.3])
    cov = np.array([[0.35, 0.1], [0.1, 0.25]])
    N = 2_000_000
    x = rng.multivariate_normal(mean, cov, N)
    y = rng.multivariate_normal(mean, cov, N)
    samples = 0.5 * np.exp(np.einsum("ij,jk,ik->i", y, A, x))
    est = gf.gaussian_energy(A, mean, cov)
    assert est.finite and est.reason == ""
    # CLT: 5 standard errors of the mean of N iid samples (a 6e-7 false-alarm rate)
    assert abs(samples.mean() - est.value) < 5 * samples.std() / np.sqrt(N)


@pytest.mark.statement("gf-prop-gaussian-energy")
@pytest.mark.parametrize("seed", range(3))
def test_gaussian_energy_matches_the_spec_formula(seed):
    rng = np.random.default_rng(seed)
    d = 3
    A = _sym(rng, d, 0.4)
    cov = random_spd(rng, d, shift=0.5) * 0.3
    mean = rng.standard_normal(d)
    Pm = np.linalg.inv(cov) - A @ cov @ A
    c = np.linalg.solve(cov, mean) + A @ mean
    spec = (
        0.5
        * np.linalg.det(np.eye(d) - cov @ A @ cov @ A) ** -0.5
        * np.exp(0.5 * c @ np.linalg.solve(Pm, c) - 0.5 * mean @ np.linalg.solve(cov, mean))
    )
    # two algebraically equal formulas, each with O(cond * eps) rounding
    np.testing.assert_allclose(gf.gaussian_energy(A, mean, cov).value, spec, rtol=1e-11)


@pytest.mark.statement("gf-prop-gaussian-energy")
@pytest.mark.parametrize(("s", "d"), [(0.0, 2), (0.3, 1), (0.7, 3)])
def test_gaussian_energy_isotropic_and_dirac(s, d):
    mean = np.linspace(-0.5, 0.8, d)
    value = gf.gaussian_energy(-np.eye(d), mean, s * np.eye(d)).value
    expected = 0.5 * (1 - s**2) ** (-d / 2) * np.exp(-(mean @ mean) / (1 + s))
    np.testing.assert_allclose(value, expected, rtol=1e-13)


@pytest.mark.statement("gf-prop-gaussian-energy")
def test_gaussian_energy_of_a_nilpotent_a_is_finite_exactly_below_norm_one():
    """A = [[0, a], [0, 0]], Sigma = I: <A y, x> = a y_2 x_1 with x, y independent, so
    integrating y_2 ~ N(alpha_2, 1), then x_1 ~ N(alpha_1, 1), gives
    E = (1/2) (1 - a^2)^(-1/2) exp((b^2 / 2 + b alpha_1 + a^2 alpha_1^2 / 2) / (1 - a^2)),
    b = a alpha_2, finite exactly when |B|_2 = a < 1. The criterion reads A itself, not its
    symmetric part (of norm a / 2, which would call a = 1.5 finite); the other tests of the
    criterion use symmetric A. A few roundings, amplified near a = 1 by 1 / (1 - a^2): 1e-10."""
    alpha = np.array([0.3, 0.2])
    for a in (0.5, 0.9, 0.99):
        b = a * alpha[1]
        expected = (
            0.5
            / np.sqrt(1 - a**2)
            * np.exp((b**2 / 2 + b * alpha[0] + a**2 * alpha[0] ** 2 / 2) / (1 - a**2))
        )
        res = gf.gaussian_energy(np.array([[0.0, a], [0.0, 0.0]]), alpha, np.eye(2))
        assert res.finite
        np.testing.assert_allclose(res.value, expected, rtol=1e-10)
    for a in (1.0, 1.5):
        res = gf.gaussian_energy(np.array([[0.0, a], [0.0, 0.0]]), alpha, np.eye(2))
        assert not res.finite and res.value == np.inf and "spectral norm" in res.reason


@pytest.mark.statement("gf-prop-gaussian-energy")
def test_gaussian_energy_infinite_is_reported_with_reason():
    # Sigma^-1 - A Sigma A = (1/s - s) I fails for s >= 1 when A = -I
    for s in (1.0, 1.5, 1e6):
        res = gf.gaussian_energy(-np.eye(2), np.zeros(2), s * np.eye(2))
        assert not res.finite and res.value == np.inf
        assert "infinite" in res.reason and "spectral norm" in res.reason
    # singular covariance: only the range matters
    ok = gf.gaussian_energy(np.diag([-1.0, 100.0]), [0.0, 0.0], np.diag([0.5, 0.0]))
    assert ok.finite
    np.testing.assert_allclose(ok.value, 0.5 / np.sqrt(1 - 0.25), rtol=1e-13)
    # finite but not representable: reported, not overflowed
    big = gf.gaussian_energy([[1.0]], [40.0], [[0.0]])
    assert big.finite and big.value == np.inf and "log_value" in big.reason
    np.testing.assert_allclose(big.log_value, 1600 + np.log(0.5), rtol=1e-14)
    with pytest.raises(ValueError, match="`cov`"):
        gf.gaussian_energy([[1.0]], [0.0], [[-1.0]])


# ------------------------------------------------------------------------ convexity


@pytest.mark.statement("gf-prop-nonconvex")
@pytest.mark.parametrize("seed", range(3))
def test_second_variations_against_finite_differences(seed):
    rng, X, w = _instance(seed)
    A = 0.5 * rng.standard_normal((3, 3))
    b = rng.standard_normal(3)
    h = 1e-4  # second differences: O(h^2) truncation, O(eps / h^2) ~ 2e-8 rounding

    def f(s):
        return gf.particle_energy(A, X + s * b, weights=w)

    fd = (f(h) - 2 * f(0) + f(-h)) / h**2
    np.testing.assert_allclose(gf.translation_second_variation(A, X, b, weights=w), fd, rtol=1e-6)
    mean, cov = rng.standard_normal(3) * 0.3, random_spd(rng, 3, shift=0.5) * 0.2

    def g(s):
        return gf.gaussian_energy(A, mean + s * b, cov).value

    fd = (g(h) - 2 * g(0) + g(-h)) / h**2
    np.testing.assert_allclose(
        gf.gaussian_translation_second_variation(A, mean, cov, b), fd, rtol=1e-6
    )


@pytest.mark.statement("gf-prop-nonconvex")
@pytest.mark.parametrize("d", [1, 2, 3])
def test_not_geodesically_convex_for_minus_identity(d):
    u = np.eye(d)[0]
    values = []
    for s in (0.0, 0.5, 0.9, 0.99, 0.999):
        E = gf.gaussian_energy(-np.eye(d), np.zeros(d), s * np.eye(d)).value
        sv = gf.gaussian_translation_second_variation(-np.eye(d), np.zeros(d), s * np.eye(d), u)
        np.testing.assert_allclose(sv, -2 * E / (1 + s), rtol=1e-12)
        values.append(sv)
    # strictly negative, and unbounded below as s -> 1: no lambda-convexity on Gaussians
    assert max(values) < 0
    assert values[-1] < -(10 ** (d / 2))
    # particles: the second variation at a Dirac mass is -2 E < 0 too
    np.testing.assert_allclose(
        gf.translation_second_variation(-np.eye(d), np.zeros((1, d)), u), -1.0, rtol=1e-14
    )


@pytest.mark.statement("gf-prop-escape")
def test_mean_escapes_while_the_cloud_collapses():
    s0, alpha0 = 0.6, np.array([0.5, -0.2])
    times = np.linspace(0.0, 3.0, 31)
    sol = solve_moments(SoftmaxMoments(-np.eye(2), np.eye(2)), alpha0, s0 * np.eye(2), times)
    assert sol.status == "completed"
    s = s0 / (1 + 2 * s0 * times)
    alpha = alpha0[None, :] * (np.exp(times) / np.sqrt(1 + 2 * s0 * times))[:, None]
    # solver tolerance rtol 1e-10, amplified by e^T over the run
    np.testing.assert_allclose(sol.covariances, s[:, None, None] * np.eye(2), rtol=1e-8)
    np.testing.assert_allclose(sol.means, alpha, rtol=1e-8)
    E = gf.gaussian_energy_along(-np.eye(2), sol.means, sol.covariances)
    assert np.all(np.diff(E) < 0)
    assert E[-1] < 1e-3 * E[0]


@pytest.mark.statement("gf-prop-escape")
def test_centred_cloud_collapses_onto_its_mean_and_the_energy_tends_to_one_half():
    # alpha_0 = 0: the mean equation alpha' = (1 - s) alpha keeps alpha = 0 exactly, and the
    # energy is 1/2 (1 - s^2)^(-d/2), decreasing to E(delta_0) = 1/2, not to 0.
    d, s0 = 3, 0.7
    times = np.linspace(0.0, 40.0, 41)
    sol = solve_moments(SoftmaxMoments(-np.eye(d), np.eye(d)), np.zeros(d), s0 * np.eye(d), times)
    assert sol.status == "completed"
    np.testing.assert_array_equal(sol.means, 0.0)
    s = s0 / (1 + 2 * s0 * times)
    E = gf.gaussian_energy_along(-np.eye(d), sol.means, sol.covariances)
    # solver rtol 1e-10 on s, amplified by the factor d s^2 / (1 - s^2) < 2 of the log-derivative
    np.testing.assert_allclose(E, 0.5 * (1 - s**2) ** (-d / 2), rtol=1e-8)
    assert np.all(np.diff(E) < 0)
    # E - 1/2 ~ (d/4) s^2 with s(40) ~ 1/80: within 1e-3 of 1/2, far from 0
    assert 0.5 < E[-1] < 0.5 + d * s[-1] ** 2 / 2


@pytest.mark.statement("gf-prop-escape")
@pytest.mark.parametrize("s0", [1.0, 1.5, 3.0])
def test_wide_start_has_infinite_energy_until_s_drops_below_one(s0):
    t_finite = (s0 - 1) / (2 * s0)
    times = np.unique(np.append(np.linspace(0.0, 2.0, 81), t_finite))
    sol = solve_moments(SoftmaxMoments(-np.eye(2), np.eye(2)), [0.4, 0.1], s0 * np.eye(2), times)
    E = gf.gaussian_energy_along(-np.eye(2), sol.means, sol.covariances)
    # s(t) < 1 iff t > t_finite exactly; the solver's rtol 1e-10 blurs only a 1e-8 neighbourhood
    before, after = times < t_finite - 1e-8, times > t_finite + 1e-8
    assert np.all(np.isinf(E[before])) and np.all(np.isfinite(E[after]))
    assert np.all(np.diff(E[after]) < 0)


@pytest.mark.statement("gf-cor-infinite-energy")
@pytest.mark.parametrize("s0", [0.3, 0.6, 0.9])
def test_energy_is_infinite_before_the_blow_up(s0):
    t_star = 1 / (2 * s0)
    t_inf = t_star - 0.5
    times = np.unique(np.append(np.linspace(0.0, 0.98 * t_star, 50), t_inf))
    sol = solve_moments(SoftmaxMoments(np.eye(2), np.eye(2)), [0.3, -0.1], s0 * np.eye(2), times)
    assert sol.status == "completed"
    E = gf.gaussian_energy_along(np.eye(2), sol.means, sol.covariances)
    # s(t) < 1 exactly before t_inf; the solver's rtol 1e-10 decides only a 1e-10 neighbourhood
    before, after = times < t_inf - 1e-8, times > t_inf + 1e-8
    assert np.all(np.isfinite(E[before])) and np.all(np.isinf(E[after]))
    assert np.all(np.diff(E[before]) > 0)
    res = gf.gaussian_energy(np.eye(2), sol.means[-1], sol.covariances[-1])
    assert not res.finite and "spectral norm" in res.reason
    with pytest.raises(ValueError, match="`means`"):
        gf.gaussian_energy_along(np.eye(2), sol.means[0], sol.covariances)


# ----------------------------------------------------------------------- Sinkhorn / BW


@pytest.mark.statement("gf-prop-sinkhorn-bw")
@pytest.mark.parametrize(("seed", "eps"), [(0, 1.0), (1, 1.0), (2, 0.3), (3, 2.5)])
def test_sinkhorn_is_a_bures_wasserstein_gradient_flow(seed, eps):
    rng = np.random.default_rng(seed)
    A = _sym(rng, 3, 1.0)
    chk = gf.sinkhorn_bures_wasserstein_check(
        A, rng.standard_normal(3), random_spd(rng, 3, shift=0.5), eps=eps
    )
    # central differences at h = 1e-5: O(h^2) + O(eps_mach / h) ~ 1e-10 relative
    assert chk.error < 1e-7


def test_bures_wasserstein_velocity_reports_a_step_that_misses_its_accuracy():
    # F = |m|^2 / 2 - log det(S) / 2: G = -S^-1 / 2, so the exact velocity is (-m, 2 I)
    def F(m, S):
        return 0.5 * m @ m - 0.5 * np.linalg.slogdet(S)[1]

    exact = 2 * np.eye(2)
    # unit scale: the default step errs by O(h^2) ~ 1e-10, far below FD_RTOL, and is silent
    _, dS = gf.bures_wasserstein_velocity(F, [1.0, 2.0], np.eye(2))
    np.testing.assert_allclose(dS, exact, rtol=1e-8)
    # an eigenvalue 5e-5 = 5 h: the O((h/s)^2) error is about 1e-2, and a warning names it
    with pytest.warns(ToleranceWarning, match=r"estimated error .* is 0\.01"):
        _, dS = gf.bures_wasserstein_velocity(F, [1.0, 2.0], 5e-5 * np.eye(2))
    assert 5e-3 < np.abs(dS - exact).max() / 2 < 3e-2


@pytest.mark.statement("gf-prop-sinkhorn-bw")
def test_sinkhorn_cost_minimises_over_gaussian_couplings():
    rng = np.random.default_rng(3)
    d, eps = 2, 0.7
    A = _sym(rng, d, 1.0)
    mean, cov = rng.standard_normal(d), random_spd(rng, d, shift=0.5)
    R = np.linalg.cholesky(cov)

    def objective(Ct):
        C = R @ Ct @ R.T
        _, logdet = np.linalg.slogdet(np.eye(d) - Ct @ Ct.T)
        return -np.trace(A @ C) - mean @ A @ mean - 0.5 * eps * logdet

    best = gf.sinkhorn_gaussian_cost(A, mean, cov, eps=eps)
    # whitened optimum for the Cholesky factor: the optimal C mapped back
    C_opt = gf._sinkhorn_cross_covariance(cov, A, eps)[0]
    Ct_opt = np.linalg.solve(R, np.linalg.solve(R, C_opt.T).T)
    np.testing.assert_allclose(objective(Ct_opt), best, rtol=1e-12)
    for _ in range(20):
        Ct = Ct_opt + 0.05 * rng.standard_normal((d, d))
        if np.linalg.norm(Ct, 2) < 1:
            assert objective(Ct) > best
    np.testing.assert_allclose(gf.sinkhorn_gaussian_cost(np.zeros((d, d)), mean, cov), 0.0)


@pytest.mark.parametrize("eps", [1e-17, 1e-200, 1e-3, 1e30])
def test_sinkhorn_cost_in_closed_form_from_small_to_large_eps(eps):
    """Per eigenvalue a of A (diagonal, cov = I, mean 0), b = a / eps, the plan's correlation is
    rho = 2b / (1 + s), s = sqrt(1 + 4 b^2), and 1 - rho^2 = 2 / (1 + s), so the cost is
    sum -a rho + (eps / 2) log((1 + s) / 2), with (1 + s) / 2 = 1 + 2 b^2 / (1 + s): a few
    roundings (1e-15); -sum a^2 / (2 eps) as eps -> inf. As eps -> 0 the correlation rounds to
    1 and log(1 - rho^2) had no float value: the cost raised FloatingPointError (eps = 1e-17)
    though it is -sum |a| + O(eps log(1 / eps))."""
    a = np.array([1.0, -2.0])
    b = a / eps
    s = np.hypot(1.0, 2.0 * b)
    expected = np.sum(-a * 2.0 * b / (1.0 + s) + 0.5 * eps * np.log1p(2.0 * b * (b / (1.0 + s))))
    if eps > 1e10:
        np.testing.assert_allclose(expected, -5.0 / (2.0 * eps), rtol=1e-15)
    cost = gf.sinkhorn_gaussian_cost(np.diag(a), np.zeros(2), np.eye(2), eps=eps)
    np.testing.assert_allclose(cost, expected, rtol=1e-15)


# ------------------------------------------------------------------- the circle


@pytest.mark.statement("gf-prop-sphere-ascent")
def test_circle_energy_staircase():
    res = gf.circle_metastability(9.0, 24, 2e3, n_times=80, rng=2)
    # ascent up to the integrator's rtol 1e-8
    assert np.all(np.diff(res.energies) >= -1e-7 * res.energies[:-1])
    assert res.cluster_counts[0] > 10 and res.cluster_counts[-1] < 6
    np.testing.assert_allclose(np.linalg.norm(res.states, axis=-1), 1.0, rtol=1e-14)
    # the energy is E_beta of the tokens
    X = res.states[-1]
    np.testing.assert_allclose(
        res.energies[-1], gf.particle_energy(9.0 * np.eye(2), X) / 9.0, rtol=1e-12
    )


@pytest.mark.statement("gf-prop-sphere-ascent")
def test_circle_reduction_matches_projected_softmax():
    res = gf.circle_metastability(3.0, 6, 1.0, t_min=0.1, n_times=4, rng=5)
    field = Softmax(np.eye(2), np.eye(2), beta=3.0)

    def projected(t, X):
        v = field.velocity(X)
        return v - np.sum(v * X, axis=1, keepdims=True) * X

    ref = _trajectory(projected, res.states[0], res.times)
    # both integrators at rtol <= 1e-8 over unit time
    np.testing.assert_allclose(res.states, ref, atol=1e-6)


@pytest.mark.statement("gf-prop-sphere-ascent")
def test_sphere_energy_rate_is_the_weighted_tangential_dissipation():
    """dE_beta/dt = sum_i w_i Z_i |P_{x_i} m_i|^2 along projected softmax with A = beta I,
    V = I, weighted tokens on S^2 (E_beta = E_{beta I} / beta, Z_i the softmax density, m_i the
    softmax average, P_x = I - x x^T). The rate is read off DOP853 states (rtol 1e-11) by a
    central difference at k = 1e-3: truncation k^2 |E'''| / 6 ~ 1e-7 relative, the states'
    error over k ~ 1e-8, hence rtol 1e-5. The tests above check only the sign of the rate; the
    unprojected |m_i|^2, Z_i^2 (the unnormalised rate) or a rate without w_i miss by O(1)."""
    rng = np.random.default_rng(12)
    beta, n, d = 2.0, 7, 3
    X0 = rng.standard_normal((n, d))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    w = rng.dirichlet(np.ones(n))
    field = Softmax(np.eye(d), np.eye(d), beta=beta)

    def projected(t, X):
        m = field.velocity(X, weights=w)
        return m - np.sum(m * X, axis=1, keepdims=True) * X

    t, k = 0.4, 1e-3
    states = _trajectory(projected, X0, np.array([0.0, t - k, t, t + k]))
    E = [gf.particle_energy(beta * np.eye(d), X, weights=w) / beta for X in states]
    rate_fd = (E[3] - E[1]) / (2 * k)
    X = states[2]
    Z = gf.softmax_metric_density(beta * np.eye(d), X, weights=w)
    tangential = projected(t, X)
    rate = np.sum(w * Z * np.sum(tangential**2, axis=1))
    assert rate > 1e-2 * E[2]  # far from stationary: the rate is not a vanishing quantity
    np.testing.assert_allclose(rate_fd, rate, rtol=1e-5)


def test_validation_errors():
    with pytest.raises(ValueError, match="`t_min`"):
        gf.circle_metastability(1.0, 4, 1.0, t_min=2.0)
    with pytest.raises(ValueError, match="`beta`"):
        gf.circle_metastability(-1.0, 4, 1.0)
    with pytest.raises(ValueError, match="`cov` must be positive definite"):
        gf.bures_wasserstein_velocity(lambda m, S: 0.0, [0.0], [[0.0]])
    with pytest.raises(ValueError, match="`A` must be a symmetric"):
        gf.sinkhorn_gaussian_cost([[0.0, 1.0], [0.0, 0.0]], [0.0, 0.0], np.eye(2))


def test_first_variation_and_gradient_are_log_domain():
    """Issue 15, defect 5: exponents beyond 709 (token norm 30) are summed in log domain.

    With every exponent shifted by the same c (the tokens on a line, A = I, points at the
    origin shifted along it), a finite answer is returned where e^{<Ay, x>} alone overflows;
    where the answer itself exceeds float64 a FloatingPointError says so.
    """
    X = np.array([[1.0, 0.0], [-1.0, 0.0]])
    y = np.array([[700.0, 0.0]])  # exponents 700 and -700: the sum e^700 / 2 is finite
    np.testing.assert_allclose(
        gf.first_variation(np.eye(2), X, y), [0.5 * (np.exp(700.0) + np.exp(-700.0))], rtol=1e-14
    )
    X30 = 30.0 * np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])  # e^900 has no float value
    for f in (gf.first_variation, gf.energy_gradient):
        with pytest.raises(FloatingPointError, match="float64 range"):
            f(np.eye(2), X30)
    with pytest.raises(FloatingPointError, match="float64 range"):
        gf.translation_second_variation(np.eye(2), X30, [1.0, 0.0])


@pytest.mark.statement("gf-prop-gaussian-energy")
def test_sampled_gaussian_energy_agrees_with_the_closed_form():
    # ||R A R|| < 1/2 for these (R = Sigma^(1/2)): the samples have a finite variance, so
    # the estimate is within 4 standard errors of the closed form (a 6e-5 false alarm each)
    rng = np.random.default_rng(11)
    for _ in range(3):
        A = 0.5 * rng.standard_normal((2, 2))
        cov = random_spd(rng, 2, shift=0.1)
        cov *= 0.3 / np.linalg.norm(cov, 2) / max(np.linalg.norm(A, 2), 1e-3)
        mean = 0.5 * rng.standard_normal(2)
        est = gf.sampled_gaussian_energy(A, mean, cov, 50_000, rng=rng)
        closed = gf.gaussian_energy(A=A, mean=mean, cov=cov).value
        assert abs(est.mean - closed) < 4 * est.stderr, (est, closed)
        assert est.samples == 50_000


def test_sampled_gaussian_energy_is_reproducible_and_reports_overflow():
    args = ([[0.3, -0.4], [0.1, 0.5]], [0.4, -0.3], 0.3 * np.eye(2), 100)
    a = gf.sampled_gaussian_energy(*args, rng=3)
    b = gf.sampled_gaussian_energy(*args, rng=np.random.default_rng(3))
    assert a.mean == b.mean and a.stderr == b.stderr
    # a Dirac at a point where <A x, x> = 1e4: e^(1e4) overflows, a FloatingPointError
    with pytest.raises(FloatingPointError, match="sampled interaction energy"):
        gf.sampled_gaussian_energy(np.eye(2), [100.0, 0.0], np.zeros((2, 2)), 4, rng=0)
    with pytest.raises(ValueError, match="`n`"):
        gf.sampled_gaussian_energy(*args[:3], 1, rng=0)


@pytest.mark.statement("gf-thm-monotonicity")
@pytest.mark.parametrize("normalised", [True, False])
def test_energy_rate_formula_is_the_derivative_along_the_field(normalised):
    # two evaluations of the same O(1) sum in different orders: agreement to ~1e-13
    rng = np.random.default_rng(8)
    X = rng.standard_normal((9, 3))
    B = 0.4 * rng.standard_normal((3, 3))
    A = B + B.T
    V = rng.standard_normal((3, 3))
    w = rng.dirichlet(np.ones(9))
    field = (Softmax if normalised else Unnormalised)(A, V)
    along = gf.energy_rate(A=A, X=X, velocity=field.velocity(X, weights=w), weights=w)
    formula = gf.energy_rate_formula(A, V, X, normalised=normalised, weights=w)
    np.testing.assert_allclose(formula, along, rtol=1e-12)
    # its sign is the predicted one when sym(AV) is semidefinite: V = A gives AV = A^2 >= 0
    assert gf.energy_rate_formula(A, A, X, normalised=normalised) > 0
    with pytest.raises(ValueError, match="`A`"):
        gf.energy_rate_formula(B, V, X)
    # exercise gf-ex-usa-rate needs A symmetric: for a non-symmetric A the expression
    # sum_i w_i Z_i^2 m_i^T A V m_i is not the rate along unnormalised attention
    S = B + np.diag([1.0, 0.0, 0.0])  # B is not symmetric
    v = Unnormalised(S, V).velocity(X, weights=w)
    E = np.exp(X @ S.T @ X.T) * w
    Z = E.sum(axis=1)
    m = (E @ X) / Z[:, None]
    expression = np.einsum("i,i,ik,kl,il->", w, Z**2, m, S @ V, m)
    rate = gf.energy_rate(A=S, X=X, velocity=v, weights=w)
    assert abs(expression - rate) > 1e-3 * abs(rate)


def test_observed_monotonicity():
    assert gf.observed_monotonicity([1.0, 2.0, 3.5]) == 1
    assert gf.observed_monotonicity(np.exp(-np.linspace(0, 1, 5))) == -1
    assert gf.observed_monotonicity([1.0, 2.0, 2.0]) == 0  # a flat step is not monotone
    assert gf.observed_monotonicity([1.0, 0.5, 0.7]) == 0
    with pytest.raises(ValueError, match="`values`"):
        gf.observed_monotonicity([1.0])


def test_particle_energy_overflow_names_its_own_arguments():
    """The energy is computed by diagnostics.interaction_energy at beta = 1, whose overflow
    message told the user to lower `beta`, an argument particle_energy does not take."""
    X = np.array([[0.0, 0.0], [90.0, 0.0]])  # e^{8100}
    with pytest.raises(FloatingPointError, match=r"rescale `X` or `A`") as err:
        gf.particle_energy(np.eye(2), X)
    assert "beta" not in str(err.value)
