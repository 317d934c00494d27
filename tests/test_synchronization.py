"""Tests of the synchronization energy, the noise exponents and the rates of Agazzi et al. (2026).

Checked against the paper's printed Table 1, the closed forms of its Proposition 1.5, the
identities of Remark 1.5 and Lemma 4.1 (exact up to rounding), and simulations of the limit SDE
and of the discrete model, compared with Monte-Carlo error bars.
"""

import numpy as np
import pytest

from token_dynamics import attention, diagnostics, geometry, integrators, sampling
from token_dynamics import stochastic as sto

# The paper's Table 1, rows quoted with the digits the paper prints:
# (activation, d, sigma, kappa(1), kappa'(1), lambda_1, lambda_bar)
TABLE_1_ROWS = [
    ("relu", 5, 0.0, "0.1", "0.1", "-0.1", "0.2"),
    ("relu", 64, 0.1, "2.28e-2", "7.81e-3", "-0.480", "-0.899"),
    ("sigmoid", 64, 0.0, "0.251", "9.69e-4", "-7.88", "-15.2"),
    ("tanh", 128, 0.0, "7.69e-3", "7.69e-3", "-7.66e-3", "1.55e-2"),
    ("silu", 128, 0.0, "1.96e-3", "1.97e-3", "-1.73e-3", "4.41e-3"),
]
# Configurations of the paper's grid that satisfy Assumption 1, with beta = 1.
ASSUMPTION_1 = [("relu", 64, 0.1), ("sigmoid", 5, 0.0), ("tanh", 64, 0.1), ("silu", 128, 0.1)]


def _digits(printed: str) -> int:
    """Significant digits of a printed number ("2.28e-2" -> 3, "0.1" -> 1, "-0.480" -> 3)."""
    mantissa = printed.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return max(len(mantissa), 1)


def _noise(activation, d, s):
    return {"d": d, "sigma_U": s, "sigma_W": s}


# -- the energy ---------------------------------------------------------------------------------


def test_energy_of_two_orthogonal_tokens_and_of_a_dirac():
    X = np.eye(2)
    # (1/2) * (1/4) * [2 (e - e) + 2 (e - 1)] = (e - 1) / 4, to rounding
    np.testing.assert_allclose(sto.synchronization_energy(X, beta=1.0), (np.e - 1) / 4, rtol=1e-15)
    assert sto.synchronization_energy(np.ones((3, 1)), beta=5.0) == 0.0


def test_energy_is_the_opposite_of_the_interaction_energy():
    # S_beta = e^beta / 2 - beta E_beta (E_beta = diagnostics.interaction_energy); both sums are
    # of O(e^beta) terms, so the identity holds to a few ulps of e^beta.
    X = sampling.uniform_sphere(20, 4, rng=1)
    w = np.random.default_rng(2).dirichlet(np.ones(20))
    for beta in (0.3, 1.0, 7.0):
        S = sto.synchronization_energy(X, beta=beta, weights=w)
        E = diagnostics.interaction_energy(X, beta=beta, weights=w)
        np.testing.assert_allclose(S, np.exp(beta) / 2 - beta * E, atol=1e-13 * np.exp(beta))


def test_energy_keeps_its_digits_for_nearby_tokens_and_large_beta():
    # two tokens at angle theta: S = (e^beta / 2) * (1/2) * (1 - e^{-beta (1 - cos theta)})
    theta, beta = 1e-7, 2.0
    X = np.array([[1.0, 0.0], [np.cos(theta), np.sin(theta)]])
    gap = 2 * np.sin(theta / 2) ** 2  # 1 - cos(theta) without cancellation
    exact = np.exp(beta) / 4 * -np.expm1(-beta * gap)
    np.testing.assert_allclose(sto.synchronization_energy(X, beta=beta), exact, rtol=1e-9)
    # beta = 800: e^beta overflows, e^-beta S_beta does not
    scaled = sto.synchronization_energy(np.eye(3), beta=800.0, scaled=True)
    np.testing.assert_allclose(scaled, 0.5 * (6 / 9), rtol=1e-15)
    with pytest.raises(FloatingPointError, match="scaled=True"):
        sto.synchronization_energy(np.eye(3), beta=800.0)


def test_energy_on_stacks_and_bad_input():
    X = sampling.uniform_sphere(12, 3, rng=0).reshape(2, 2, 3, 3)
    S = sto.synchronization_energy(X, beta=1.0)
    assert S.shape == (2, 2)
    np.testing.assert_allclose(S[1, 0], sto.synchronization_energy(X[1, 0], beta=1.0), rtol=1e-15)
    with pytest.raises(ValueError, match="unit sphere"):
        sto.synchronization_energy(2 * np.eye(2), beta=1.0)
    with pytest.raises(ValueError, match="`beta`"):
        sto.synchronization_energy(np.eye(2), beta=0.0)


@pytest.mark.statement("sync-prop-distance")
def test_distance_bound():
    rng = np.random.default_rng(3)
    x = sampling.uniform_sphere(2000, 5, rng=rng)
    y = sampling.uniform_sphere(2000, 5, rng=rng)
    y[:5], y[5:10] = x[:5], -x[5:10]  # the equality cases y = x and y = -x
    for beta in (0.1, 1.0, 5.0):
        u = np.einsum("id,id->i", x, y)
        lhs = np.sum((x - y) ** 2, axis=1)
        rhs = 2 / np.sinh(beta) * (np.exp(beta) - np.exp(beta * u))
        # rounding: a few ulps of the right side (its terms are O(e^beta / sinh beta))
        tol = 1e-13 * np.exp(beta) / np.sinh(beta)
        assert np.all(lhs <= rhs + tol)
        np.testing.assert_allclose(lhs[:10], rhs[:10], atol=tol)
    # integrated form on a cloud
    X = sampling.uniform_sphere(30, 4, rng=rng)
    pair = np.mean(np.sum((X[:, None] - X[None]) ** 2, axis=-1))
    assert pair <= 4 / np.sinh(1.0) * float(sto.synchronization_energy(X, beta=1.0)) + 1e-13


# -- exponents, Table 1, Proposition 1.5 ---------------------------------------------------------


@pytest.mark.statement("sync-prop-exponents")
@pytest.mark.parametrize("row", TABLE_1_ROWS, ids=lambda r: f"{r[0]}-{r[1]}-{r[2]}")
def test_table_1_printed_rows(row):
    activation, d, s, *printed = row
    got = sto.noise_exponents(activation, d=d, sigma_U=s, sigma_W=s)
    values = [got.kappa_1, got.kappa_prime_1, got.lambda_1, got.lambda_bar]
    for value, text in zip(values, printed, strict=True):
        # the kernel is accurate to 1e-10, far below the last printed digit: rounding to the
        # printed number of significant digits must reproduce the printed number exactly
        assert float(f"{value:.{_digits(text)}g}") == float(text), (text, value)


@pytest.mark.statement("sync-prop-exponents")
def test_exponent_relations():
    for activation in sto.ACTIVATIONS:
        for d in (2, 3, 5, 64):
            for sU, sW in ((0.0, 0.0), (0.1, 0.1), (0.5, 0.2)):
                r = sto.noise_exponents(activation, d=d, sigma_U=sU, sigma_W=sW)
                # lambda_1 = lambda_bar / 2 - kappa(1) - kappa'(1): an identity, to rounding
                np.testing.assert_allclose(
                    r.lambda_1, r.lambda_bar / 2 - r.kappa_1 - r.kappa_prime_1, atol=1e-14
                )
                assert r.kappa_1 > 0 and r.kappa_prime_1 >= 0
                if r.lambda_bar < 0:
                    assert r.lambda_1 < 0
                if d <= 3:  # lambda_bar < 0 is possible only for d > 3
                    assert r.lambda_bar >= 0
                    assert not r.assumption_1


@pytest.mark.statement("sync-prop-relu")
def test_relu_closed_forms_against_the_kernel():
    for d in (4, 5, 17, 64, 128):
        for sU, sW in ((0.0, 0.0), (0.1, 0.1), (0.3, 0.05), (0.0, 0.2)):
            closed = sto.relu_noise_exponents(d, sigma_U=sU, sigma_W=sW)
            kernel = sto.noise_exponents("relu", d=d, sigma_U=sU, sigma_W=sW)
            for name in ("kappa_1", "kappa_prime_1", "lambda_1", "lambda_bar"):
                # the kernel is computed to 1e-10; the exponents are sums of O(d) such terms
                np.testing.assert_allclose(
                    getattr(closed, name), getattr(kernel, name), atol=1e-10 * d
                )
            assert closed.lambda_1 < 0


@pytest.mark.statement("sync-prop-relu")
def test_relu_needs_biases_and_d_above_3():
    for d in (2, 3, 4, 5, 64):
        assert sto.relu_noise_exponents(d).lambda_bar == pytest.approx(1 / d, rel=1e-14)
        for s in (0.0, 0.05, 0.1, 0.3):
            r = sto.relu_noise_exponents(d, sigma_U=s, sigma_W=s)
            assert (r.lambda_bar < 0) == (3 * s**2 * (d - 3) > 2 / d)
    with pytest.raises(sto.AssumptionError, match="lambda_bar"):
        sto.check_assumption_1("relu", d=64)


@pytest.mark.statement("sync-prop-relu")
@pytest.mark.parametrize(("d", "s"), [(5, 0.0), (5, 0.3), (64, 0.1)])
def test_relu_lyapunov_exponent_of_two_nearby_tokens(d, s):
    # Two tokens 1e-3 apart, moved by the noise alone (limit SDE, common noise). Their log
    # separation grows like lambda_1 t + sqrt(kappa(1) + kappa'(1)) B_t: over T = 5 on 400 paths
    # the standard error is about sqrt(0.2 / 2000) = 0.01 for d = 5. The step h = 0.01 adds an
    # O(h) bias, below a standard error here; 4 SE leaves a 6e-5 chance of a false alarm.
    model = sto.StochasticTransformer(
        sto.MLPNoise("relu", width=None, sigma_U=s, sigma_W=s), V=np.zeros((d, d))
    )
    est = sto.two_point_lyapunov_exponent(model, d, T=5.0, L=500, n_paths=400, rng=10 + d)
    lam = sto.relu_noise_exponents(d, sigma_U=s, sigma_W=s).lambda_1
    assert abs(est.mean - lam) < 4 * est.stderr, (est, lam)


# -- Lemma 4.1 ----------------------------------------------------------------------------------


@pytest.mark.statement("sync-lem-rate")
@pytest.mark.parametrize(("activation", "d", "s"), ASSUMPTION_1)
def test_lemma_4_1_inequality_and_limit(activation, d, s):
    kw = _noise(activation, d, s)
    row = sto.noise_exponents(activation, **kw)
    u = np.concatenate([np.linspace(-1, 1, 4001), 1 - np.logspace(-8, -1, 30)])
    for beta in (0.5, 1.0, 3.0):
        rate = sto.dissipation_rate(activation, beta=beta, **kw)
        assert row.lambda_bar <= rate < 0
        t = sto.lemma_4_1_terms(u, activation, beta=beta, **kw)
        lhs = -0.5 * beta * np.exp(beta * u) * t.G
        rhs = rate * 0.5 * (np.exp(beta) - np.exp(beta * u))
        # lambda_bar' is the minimum of F up to the 1e-10 search tolerance (F is smooth, so
        # the value is accurate to rounding); the kernel's 1e-10 error enters G times e^beta
        assert np.all(lhs <= rhs + 1e-9 * np.exp(beta) * d)
        F = sto.dissipation_function(u, activation, beta=beta, **kw)
        assert np.all(F > 0)
        assert F[np.argmax(u)] == pytest.approx(-row.lambda_bar, abs=1e-14)
        # continuity at 1, from the quotient side (delta = 1e-3): the gap to the limit
        # -lambda_bar is O(delta) for smooth activations and O(delta^(1/2)) for ReLU (kappa'' is
        # unbounded at 1), with constants of order one here: at 1e-3 it is below 2 % of the limit
        near = sto.dissipation_function([1 - 1e-3 * (1 + 1e-9)], activation, beta=beta, **kw)
        assert abs(near[0] + row.lambda_bar) < 0.02 * abs(row.lambda_bar)


@pytest.mark.statement("sync-lem-rate")
def test_dissipation_function_near_the_diagonal_is_the_relu_closed_form():
    # ReLU without bias: kappa(cos theta) = (sin theta + (pi - theta) cos theta) / (2 pi d), so
    # delta = kappa(1) - kappa(u) = (pi r - (sin theta - theta u)) / (2 pi d), r = 1 - u, and
    # G0 = kappa(1) r (d - 2 - u) - delta (d - 2 + u^2), G1 = r (2 - r) (kappa(1) r + u delta),
    # F = beta G / expm1(beta r). sin theta - theta u = theta^3 / 3 + ... loses eps theta / theta^3
    # <= 1e-9 of itself for r >= 1e-9, a far smaller part of delta ~ r / 2d: rtol 1e-12.
    # F = -lambda_bar + O(sqrt(r)) here (kappa'' is unbounded at 1): a secant to the limit over
    # 1 - u < 1e-3 was 0.5 % off.
    d = 5
    r = np.array([5e-4, 2.5e-4, 1e-4, 1e-6, 1e-9])
    u = 1 - r
    r = 1 - u  # exact
    theta = np.arccos(u)
    k1 = 1 / (2 * d)
    delta = (np.pi * r - (np.sqrt(r * (2 - r)) - theta * u)) / (2 * np.pi * d)
    G0 = k1 * r * (d - 2 - u) - delta * (d - 2 + u**2)
    G1 = r * (2 - r) * (k1 * r + u * delta)
    for beta in (1.0, 30.0):
        F = sto.dissipation_function(u, "relu", d=d, beta=beta)
        np.testing.assert_allclose(F, beta * (G0 + beta * G1) / np.expm1(beta * r), rtol=1e-12)


@pytest.mark.statement("sync-lem-rate")
@pytest.mark.parametrize(("activation", "d", "s"), ASSUMPTION_1)
def test_lemma_4_1_proof_bounds(activation, d, s):
    kw = _noise(activation, d, s)
    row = sto.noise_exponents(activation, **kw)
    u = np.linspace(-1, 1, 2001)
    k = sto.kappa(u, activation, **kw)
    t = sto.lemma_4_1_terms(u, activation, beta=1.0, **kw)
    tol = 1e-10 * d  # the kernel's accuracy times the O(d) coefficients
    assert np.all(np.abs(k) <= row.kappa_1 + 1e-10)  # Gegenbauer bound
    assert np.all(k >= row.kappa_1 - row.kappa_prime_1 * (1 - u) - 1e-10)  # tangent at 1
    assert np.all(t.G1 >= -tol)
    assert np.all(t.G0 >= -row.lambda_bar * (1 - u) - tol)


@pytest.mark.statement("sync-lem-rate")
def test_dissipation_rate_is_the_grid_minimum_and_the_assumption_is_enforced():
    kw = _noise("relu", 64, 0.1)
    u = np.linspace(-1, 1, 200_001)
    F = sto.dissipation_function(u, "relu", beta=1.0, **kw)
    # a 1e-5 grid finds the minimum of a smooth F to O(1e-10); refinement cannot be worse
    rate = sto.dissipation_rate("relu", beta=1.0, **kw)
    assert -F.min() - 1e-9 <= rate <= -F.min() + 1e-12
    with pytest.raises(sto.AssumptionError, match="odd"):
        sto.dissipation_rate("tanh", d=64, beta=1.0)
    with pytest.raises(sto.AssumptionError, match="d` <= 3"):
        sto.dissipation_rate("sigmoid", d=3, beta=1.0)
    assert sto.dissipation_rate("relu", d=64, beta=1.0, strict=False) > 0


@pytest.mark.statement("sync-cor-bracket")
@pytest.mark.parametrize(("activation", "d", "s"), ASSUMPTION_1)
def test_rate_bracket(activation, d, s):
    kw = _noise(activation, d, s)
    lam = sto.noise_exponents(activation, **kw).lambda_bar
    for beta in (0.1, 0.5, 1.0, 2.0, 5.0):
        rate = sto.dissipation_rate(activation, beta=beta, **kw)
        assert lam - 1e-12 <= rate <= lam * 2 * beta / np.expm1(2 * beta) + 1e-9


@pytest.mark.statement("sync-prop-sharp-rate")
@pytest.mark.parametrize(("activation", "d", "s"), ASSUMPTION_1)
def test_rate_is_lambda_bar_below_the_sharp_beta(activation, d, s):
    kw = _noise(activation, d, s)
    row = sto.noise_exponents(activation, **kw)
    beta = sto.sharp_rate_beta(activation, **kw)
    # beta_* solves beta e^(2 beta) = 2 kappa(1) / |lambda_bar| (to the rounding of lambertw)
    np.testing.assert_allclose(
        beta * np.exp(2 * beta), 2 * row.kappa_1 / abs(row.lambda_bar), rtol=1e-12
    )
    # at and below beta_* the infimum of F is F(1) = -lambda_bar: equal up to the 1e-9
    # accuracy of the grid-and-search infimum (a larger infimum elsewhere cannot lower it)
    for b in (beta, beta / 2, beta / 10):
        rate = sto.dissipation_rate(activation, beta=b, **kw)
        assert abs(rate - row.lambda_bar) < 1e-9
        F = sto.dissipation_function(np.linspace(-1, 1, 2001), activation, beta=b, **kw)
        assert F.min() >= -row.lambda_bar - 1e-9
    # well above beta_* the antipodal pairs set a strictly slower rate
    assert sto.dissipation_rate(activation, beta=5.0, **kw) > row.lambda_bar + 1e-3


@pytest.mark.statement("sync-prop-odd-exponent")
@pytest.mark.parametrize("activation", ["tanh", "erf"])
@pytest.mark.parametrize("d", [2, 4, 16, 64, 128])
def test_odd_fields_have_lambda_bar_at_least_twice_kappa_1(activation, d):
    row = sto.noise_exponents(activation, d=d)
    assert row.odd
    # kappa(-1) = -kappa(1) and kappa(u) >= kappa(1) - kappa'(1)(1 - u) at u = -1 give
    # kappa'(1) >= kappa(1), hence lambda_bar >= 2 kappa(1) > 0 (margins: quadrature 1e-10)
    assert row.kappa_prime_1 >= row.kappa_1 - 1e-10
    assert row.lambda_bar >= 2 * row.kappa_1 - 1e-9
    # the antipodal point is a zero of G for odd fields: F(-1) = 0, so no negative rate
    F = sto.dissipation_function([-1.0], activation, d=d, beta=1.0)
    assert abs(F[0]) < 1e-9


@pytest.mark.statement("sync-lem-rate")
def test_noise_energy_drift_is_bounded_by_the_rate_on_clouds():
    rng = np.random.default_rng(4)
    for activation, d, s in ASSUMPTION_1:
        kw = _noise(activation, d, s)
        rate = sto.dissipation_rate(activation, beta=1.0, **kw)
        for n in (2, 7, 30):
            X = sampling.uniform_sphere(n, d, rng=rng)
            drift = sto.noise_energy_drift(X, activation, beta=1.0, sigma_U=s, sigma_W=s)
            assert drift <= rate * float(sto.synchronization_energy(X, beta=1.0)) + 1e-9


def test_noise_energy_drift_of_nearly_merged_tokens():
    # Two tokens at angle theta, weights 1/2: drift / S_beta = -F(u), and for ReLU without bias
    # (kappa'(1 - s) = (1/4 + arcsin(1 - s) / 2 pi) / d) Lemma 4.1's F is, with r = 1 - u,
    # F = -lambda_bar + c sqrt(r) + O(r), c = sqrt(2) (d - 1) / (3 pi d): the ratio is
    # lambda_bar - c sqrt(r) up to O(r) terms (expm1's beta r / 2, G1's 2 beta (kappa(1) +
    # kappa'(1)) r, G0's next order), a few r relative to lambda_bar = 0.2 (4 r measured at
    # r = 5e-9): rtol 20 r + 1e-13 (rounding). G(u) is O(r): taken as kappa(u) (...) -
    # kappa(1) (...) it lost its digits as r -> 0 (the ratio was 2e-4 off at theta = 1.4e-6,
    # 18 % at 4.5e-8), and ReLU's kappa'(1 - s) formed 1 - s (5e-11 off at theta = 1e-7).
    d, beta = 5, 1.0
    row = sto.relu_noise_exponents(d)
    c = np.sqrt(2.0) * (d - 1) / (3 * np.pi * d)
    for theta in (1e-4, 1.4e-6, 1e-7, 4.5e-8):
        X = np.zeros((2, d))
        X[0, 0], X[1, 0], X[1, 1] = 1.0, np.cos(theta), np.sin(theta)
        r = 0.5 * np.sum((X[0] - X[1]) ** 2)  # the gap of the tokens as given
        ratio = sto.noise_energy_drift(X, "relu", beta=beta) / sto.synchronization_energy(
            X, beta=beta
        )
        assert ratio == pytest.approx(row.lambda_bar - c * np.sqrt(r), rel=20 * r + 1e-13)


# -- the two-point motion and the Itô drift ------------------------------------------------------


def _one_step_pairs(activation, d, s, u0, h, paths, rng):
    """One Euler-Maruyama step of the limit SDE for pairs at inner product u0, antithetic noise.

    An independent implementation (the field at two points sampled from its 2 x 2 covariance),
    to check the generator of the two-point motion; returns the increments of u, (2, paths)."""
    kw = _noise(activation, d, s)
    k1 = float(sto.kappa(1.0, activation, **kw))
    ku = float(sto.kappa(u0, activation, **kw))
    x = np.zeros(d)
    x[0] = 1.0
    y = np.zeros(d)
    y[0], y[1] = u0, np.sqrt(1 - u0**2)
    C = np.linalg.cholesky(np.array([[k1, ku], [ku, k1]]))
    Z = rng.standard_normal((paths, 2, d))
    out = []
    for sign in (1.0, -1.0):
        xi = sign * np.einsum("ab,pbd->pad", C, Z)
        pts = np.stack([x, y])
        P = geometry.project_tangent(
            np.broadcast_to(pts, xi.shape).reshape(-1, d), xi.reshape(-1, d)
        )
        step = pts[None] * (1 - h * k1 * (d - 1) / 2) + np.sqrt(h) * P.reshape(xi.shape)
        step /= np.linalg.norm(step, axis=-1, keepdims=True)
        out.append(np.einsum("pd,pd->p", step[:, 0], step[:, 1]) - u0)
    return np.array(out)


@pytest.mark.statement("sync-prop-two-point")
@pytest.mark.parametrize("u0", [-0.8, 0.0, 0.6])
def test_two_point_motion(u0):
    # drift E[du]/h -> G0(u0) and variance E[du^2]/h -> 2 G1(u0), both up to O(h); the
    # antithetic pair cancels the O(sqrt h) martingale part of the mean, so the mean has
    # O(h) fluctuations and 4 SE is a sharp test; h = 1e-3 makes the O(h) bias ~1e-3 relative.
    rng = np.random.default_rng(5)
    activation, d, s, h, paths = "sigmoid", 5, 0.1, 1e-3, 40_000
    du = _one_step_pairs(activation, d, s, u0, h, paths, rng)
    t = sto.lemma_4_1_terms([u0], activation, d=d, beta=1.0, sigma_U=s, sigma_W=s)
    mean = du.mean(axis=0) / h
    np.testing.assert_allclose(
        mean.mean(), t.G0[0], atol=4 * mean.std() / np.sqrt(paths) + 5e-3 * abs(t.G0[0])
    )
    var = (du**2).mean(axis=0) / h
    np.testing.assert_allclose(
        var.mean(), 2 * t.G1[0], atol=4 * var.std() / np.sqrt(paths) + 5e-3 * t.G1[0]
    )


# -- Theorem 1.4 and its corollary ---------------------------------------------------------------


def _decay_run(activation, d, s, V, *, n, paths, T, L, rng):
    model = sto.StochasticTransformer(
        sto.MLPNoise(activation, width=None, sigma_U=s, sigma_W=s), V=V
    )
    X0 = sampling.uniform_sphere(n, d, rng=rng)
    return sto.simulate_sde(model, X0, T=T, L=L, n_paths=paths, rng=rng, save_every=L // 10)


@pytest.mark.statement("sync-thm-dissipation")
@pytest.mark.parametrize(("activation", "d", "s"), [("relu", 64, 0.1), ("sigmoid", 5, 0.0)])
@pytest.mark.parametrize("attention_on", [False, True], ids=["noise", "attention"])
def test_theorem_1_4_decay_rate(activation, d, s, attention_on):
    # Q = K = I (Q^T K = beta I with beta = 1) and V = I: Assumption 2 with epsilon = 0
    # (Remark 1.6), so the bound is lambda_bar'. The measured rate is a least-squares slope of
    # the log mean energy over 30 paths; it must lie below the bound up to 3 SE (delta method).
    # The theorem itself is the pointwise bound E S(t) <= e^{lambda_bar' t} S(0) at every saved
    # depth: the mean over paths must lie under it up to 3 SE (all paths start from one cloud).
    rng = np.random.default_rng(6)
    V = np.eye(d) if attention_on else np.zeros((d, d))
    res = _decay_run(activation, d, s, V, n=16, paths=30, T=5.0, L=100, rng=rng)
    E = sto.synchronization_energy(res.X, beta=1.0)
    est = sto.energy_decay_rate(res.times, E)
    bound = sto.dissipation_rate(activation, d=d, beta=1.0, sigma_U=s, sigma_W=s)
    assert est.mean <= bound + 3 * est.stderr, (est, bound)
    envelope = np.exp(bound * res.times) * E[:, 0].mean()
    se = E.std(axis=0, ddof=1) / np.sqrt(E.shape[0])
    # 3 SE, and rounding at t = 0 (every path starts with the same energy, so se = 0 there)
    assert np.all(E.mean(axis=0) <= envelope * (1 + 1e-12) + 3 * se), (
        E.mean(axis=0) / envelope
    ).max()


@pytest.mark.statement("sync-thm-dissipation")
def test_noise_energy_drift_matches_the_ito_formula():
    # Two tokens of weight 1/2: S_beta = (e^beta - e^{beta u}) / 4, and the Itô formula gives
    # d/dt E S_beta = -(1/4) beta e^{beta u} G(u) = noise_energy_drift (terms (II)+(III)+(IV)).
    # Measured by one antithetic Euler step of size h (bias O(h)), 4 SE.
    rng = np.random.default_rng(7)
    activation, d, s, u0, h, beta = "relu", 6, 0.2, 0.3, 1e-3, 1.0
    du = _one_step_pairs(activation, d, s, u0, h, 40_000, rng)
    dS = -0.25 * (np.exp(beta * (u0 + du)) - np.exp(beta * u0))  # S of two tokens, weights 1/2
    rate = dS.mean(axis=0) / h
    X = np.zeros((2, d))
    X[0, 0], X[1, 0], X[1, 1] = 1.0, u0, np.sqrt(1 - u0**2)
    drift = sto.noise_energy_drift(X, activation, beta=beta, sigma_U=s, sigma_W=s)
    np.testing.assert_allclose(
        rate.mean(), drift, atol=4 * rate.std() / np.sqrt(rate.size) + 5e-3 * abs(drift)
    )


@pytest.mark.statement("sync-cor-attractor")
def test_random_point_attractor():
    # noise alone, Assumption 1 (ReLU, d = 64, sigma = 0.1): the mean squared pair distance at
    # T = 5 is below (4 / sinh beta) e^{lambda_bar' T} E S_beta(mu_0), up to 3 SE; and the
    # point the tokens gather at is random: its mean over 30 paths is far from the sphere.
    rng = np.random.default_rng(8)
    d, s, T = 64, 0.1, 5.0
    res = _decay_run("relu", d, s, np.zeros((d, d)), n=16, paths=30, T=T, L=100, rng=rng)
    XT = res.X[:, -1]
    pair = np.mean(np.sum((XT[:, :, None] - XT[:, None]) ** 2, axis=-1), axis=(1, 2))
    S0 = sto.synchronization_energy(res.X[:, 0], beta=1.0).mean()
    rate = sto.dissipation_rate("relu", d=d, beta=1.0, sigma_U=s, sigma_W=s)
    bound = 4 / np.sinh(1.0) * np.exp(rate * T) * S0
    assert pair.mean() <= bound + 3 * pair.std(ddof=1) / np.sqrt(pair.size)
    centres = geometry.normalize(XT.mean(axis=1))
    # for i.i.d. uniform points on S^63 the norm of the mean of 30 is about 1/sqrt(30) = 0.18
    assert np.linalg.norm(centres.mean(axis=0)) < 0.5


# -- attention: Remark 1.6 -----------------------------------------------------------------------


def _attention_velocity(X, beta):
    field = attention.Softmax(beta * np.eye(X.shape[1]), np.eye(X.shape[1]))
    return geometry.project_tangent(X, field.velocity(X))


@pytest.mark.statement("sync-prop-attention")
def test_attention_epsilon_zero():
    rng = np.random.default_rng(9)
    for beta in (0.5, 1.0, 3.0):
        for n, d in ((2, 3), (10, 4), (40, 16)):
            X = sampling.uniform_sphere(n, d, rng=rng)
            v = _attention_velocity(X, beta)
            dS = sto.energy_derivative(X, v, beta=beta)
            Z = np.exp(beta * X @ X.T).mean(axis=1)
            expected = -beta * np.mean(Z * np.sum(v**2, axis=1))
            np.testing.assert_allclose(dS, expected, rtol=1e-12)
            assert dS <= 0
            ratio = sto.attention_forcing(
                X, beta=beta, Q=np.sqrt(beta) * np.eye(d), K=np.sqrt(beta) * np.eye(d)
            )
            S = float(sto.synchronization_energy(X, beta=beta))
            np.testing.assert_allclose(ratio, expected / S, rtol=1e-12)


@pytest.mark.statement("sync-prop-attention")
def test_attention_forcing_of_nearly_merged_tokens():
    # Two tokens at angle theta on the circle, symmetric about e_1 (Q = K = V = I, weights 1/2):
    # each turns towards the other at speed p sin(theta), p = e^cos(theta) / (e + e^cos(theta)),
    # and S_beta = (e^beta - e^(beta cos theta)) / 4, so the ratio is
    # -2 beta p sin(theta)^2 / expm1(2 beta sin(theta / 2)^2), -> -2 as theta -> 0. The
    # velocity P_x Attn = a - <a, x> x carries a rounding of eps against its size theta:
    # rtol 10 eps / theta. Before, <v_i, x_j> took the eps of v_i's radial part against the
    # theta^2 of the ratio's terms: 2 % off at theta = 1e-7, 0 at 1e-9.
    for beta in (1.0, 3.0):
        for theta in (1e-3, 1e-5, 1e-7, 1e-9):
            X = np.array(
                [[np.cos(theta / 2), np.sin(theta / 2)], [np.cos(theta / 2), -np.sin(theta / 2)]]
            )
            p = np.exp(np.cos(theta)) / (np.e + np.exp(np.cos(theta)))
            ratio = -2 * beta * p * np.sin(theta) ** 2 / np.expm1(2 * beta * np.sin(theta / 2) ** 2)
            tol = 10 * np.finfo(float).eps / theta
            assert sto.attention_forcing(X, beta=beta) == pytest.approx(ratio, rel=tol)


@pytest.mark.statement("sync-prop-attention")
def test_attention_energy_derivative_matches_a_finite_difference():
    # along the noiseless flow (RK4 on the sphere, step 1e-4), the central difference of
    # S_beta over 2h = 2e-3 matches its derivative to O(h^2) ~ 1e-6 relative
    X0 = sampling.uniform_sphere(12, 5, rng=11)
    beta, h = 2.0, 1e-3
    field = attention.Softmax(beta * np.eye(5), np.eye(5))
    traj = integrators.integrate(
        lambda t, X: field.velocity(X), X0, [0.0, h, 2 * h], dt=1e-4, geometry="sphere"
    )
    S = sto.synchronization_energy(traj.states, beta=beta)
    fd = (S[2] - S[0]) / (2 * h)
    dS = sto.energy_derivative(traj.states[1], _attention_velocity(traj.states[1], beta), beta=beta)
    np.testing.assert_allclose(fd, dS, rtol=1e-5)


# -- odd fields ----------------------------------------------------------------------------------


@pytest.mark.statement("sync-prop-odd")
def test_odd_field_keeps_antipodal_pairs():
    rng = np.random.default_rng(12)
    d = 4
    x = sampling.uniform_sphere(3, d, rng=rng)
    X0 = np.vstack([x[0], -x[0], x[1:]])
    sums = {}
    for s in (0.0, 0.1):
        model = sto.StochasticTransformer(
            sto.MLPNoise("tanh", width=32, sigma_U=s, sigma_W=s), V=np.zeros((d, d))
        )
        res = sto.simulate(model, X0, T=5.0, L=200, n_paths=3, rng=rng, save_every=200)
        sums[s] = np.abs(res.X[:, -1, 0] + res.X[:, -1, 1]).max()
    assert sums[0.0] < 1e-12  # rounding over 200 layers
    assert sums[0.1] > 1e-3  # a bias breaks the symmetry
    # the limit SDE: kappa(-1) = -kappa(1), so the field at -x is minus the field at x and the
    # flow is odd, phi_t(-x) = -phi_t(x), to rounding over 200 steps (a bias: kappa(-1) >
    # -kappa(1), the field at -x has a part independent of the one at x)
    for s in (0.0, 0.1):
        model = sto.StochasticTransformer(
            sto.MLPNoise("tanh", width=None, sigma_U=s, sigma_W=s), V=np.zeros((d, d))
        )
        res = sto.simulate_sde(model, X0, T=5.0, L=200, n_paths=3, rng=rng, save_every=200)
        sums[s] = np.abs(res.X[:, -1, 0] + res.X[:, -1, 1]).max()
    assert sums[0.0] < 1e-12
    assert sums[0.1] > 1e-3


# -- estimators and experiments: input checks --------------------------------------------------


def test_estimators_reject_bad_input():
    with pytest.raises(ValueError, match="`times`"):
        sto.energy_decay_rate([0.0], np.ones((3, 1)))
    with pytest.raises(ValueError, match="`energies`"):
        sto.energy_decay_rate([0.0, 1.0], np.ones((1, 2)))
    with pytest.raises(ValueError, match="positive means"):
        sto.energy_decay_rate([0.0, 1.0], np.zeros((3, 2)))
    with pytest.raises(ValueError, match="`states`"):
        sto.separation_exponent([0.0, 1.0], np.ones((2, 2, 3, 4)))
    with pytest.raises(ValueError, match="`velocity`"):
        sto.energy_derivative(np.eye(3), np.ones((2, 3)), beta=1.0)
    with pytest.raises(ValueError, match="`u`"):
        sto.lemma_4_1_terms([1.5], "relu", d=5, beta=1.0)


def test_energy_decay_rate_recovers_an_exponential():
    # E_k = c_p e^{r t_k}: the log of the mean is exactly linear, slope r, whatever the c_p
    t = np.linspace(0.0, 2.0, 7)
    c = np.random.default_rng(0).uniform(0.5, 2.0, size=50)
    est = sto.energy_decay_rate(t, c[:, None] * np.exp(-0.7 * t))
    assert est.mean == pytest.approx(-0.7, abs=1e-12)
    assert est.stderr < 1e-10  # the paths differ by a constant factor: no noise in the slope


def test_experiment_without_mlp_is_the_attention_flow_and_dissipates():
    run = sto.synchronization_experiment(None, 5, scale=1.0, n_tokens=16, L=150, rng=3)
    # attention with Q = K = I, V = I decreases S_beta (Remark 1.6); the Euler step of the
    # discrete model keeps the sign at this step size
    assert np.all(np.diff(run.energy) <= 1e-12)
    assert run.cosines().shape == (151, 120)


def test_experiment_saves_the_last_layer_with_or_without_mlp():
    # L = 10, save_every = 4: layers 0, 4, 8 and the last, 10, in both branches; without MLP
    # the run stopped at layer 8 (depth 0.8 T), and a T <= 0 was reported as bad `times`
    kw = {"n_tokens": 4, "L": 10, "T": 5.0, "rng": 0}
    for activation in (None, "relu"):
        run = sto.synchronization_experiment(activation, 3, save_every=4, width=4, **kw)
        np.testing.assert_array_equal(run.times, [0.0, 2.0, 4.0, 5.0])
        every = sto.synchronization_experiment(activation, 3, width=4, **kw)
        np.testing.assert_array_equal(run.X[-1], every.X[-1])
    with pytest.raises(ValueError, match="`T`"):
        sto.synchronization_experiment(None, 3, n_tokens=4, L=10, T=-1.0)


# -- the paper's experiments at full size (make test-fullsize) ---------------------------------

# Agazzi et al. (2026), Figure 1: N = 64, d = 4, L = 2000, T = 20, m = 2048, no bias, no attention.
FIGURE_1 = {"d": 4, "n_tokens": 64, "L": 2000, "T": 20.0, "width": 2048}
# Appendix B, Figures 2-6: N = 64, L = 150, T = 5, beta = 1. Width 512: the noise covariance,
# hence the limit, does not depend on the width, and 2048 makes the 90 runs last about an hour.
FIGURES_2_6 = {"n_tokens": 64, "L": 150, "T": 5.0, "width": 512, "save_every": 5}


@pytest.mark.fullsize
@pytest.mark.statement("sync-prop-odd")
def test_figure_1_full_size():
    rng = np.random.default_rng(2000)
    runs = {
        act: sto.synchronization_experiment(act, scale=0.0, save_every=100, rng=rng, **FIGURE_1)
        for act in ("relu", "tanh")
    }
    cos = {act: run.cosines()[-1] for act, run in runs.items()}
    # tanh (odd): two antipodal groups; ReLU: clusters (cos > 0.99, a cap of measure ~1e-3 for
    # uniform tokens on S^3) and no antipodal structure. Thresholds as in the book's notebook,
    # where three seeds at reduced size gave medians >= 0.94 and antipodal fractions >= 0.28.
    assert np.median(np.abs(cos["tanh"])) > 0.9
    assert np.mean(cos["tanh"] < -0.9) > 0.05 > np.mean(cos["relu"] < -0.9)
    assert np.mean(cos["relu"] > 0.99) > 0.05
    for run in runs.values():
        assert run.energy[-1] < run.energy[0]


@pytest.mark.fullsize
@pytest.mark.statement("sync-thm-dissipation")
@pytest.mark.parametrize("activation", ["relu", "silu", "sigmoid", "tanh", None])
def test_figures_2_to_6_full_size(activation):
    rng = np.random.default_rng(150)
    for d in sto.TABLE_1_DIMENSIONS:
        for s in sto.TABLE_1_SIGMAS if activation else (0.0,):
            for scale in (1.0, 0.0, -1.0):
                run = sto.synchronization_experiment(
                    activation, d, sigma=s, scale=scale, rng=rng, **FIGURES_2_6
                )
                assert np.all(np.isfinite(run.energy))
                np.testing.assert_allclose(np.linalg.norm(run.X, axis=-1), 1.0, atol=1e-12)
                if activation is None or scale < 0:
                    continue
                row = sto.noise_exponents(activation, d=d, sigma_U=s, sigma_W=s)
                if row.assumption_1:
                    # Theorem 1.4 with epsilon = 0 (scale 0, or scale 1 with Q = K = I: Remark
                    # 1.6): E S_T <= e^{lambda_bar' T} S_0, so by Markov's inequality one run
                    # exceeds 1e3 times the bound with probability <= 1e-3
                    rate = sto.dissipation_rate(activation, d=d, beta=1.0, sigma_U=s, sigma_W=s)
                    bound = np.exp(rate * FIGURES_2_6["T"]) * run.energy[0]
                    assert run.energy[-1] <= 1e3 * bound, (activation, d, s, scale)


# -- extreme arguments: finite where the answer is, named errors where it is not ----------------


def test_dissipation_function_in_the_log_domain_matches_the_quotient():
    """At beta = 800, beta (1 - u) runs from 400 to 1600 over u in [-1, 0.5]: across e^709 the
    function switches to its log-domain form. Against beta G e^-x / (1 - e^-x), x = beta (1 - u)
    (an independent rewriting, finite for x > 0), with G from lemma_4_1_terms: to 1e-12
    relative (the logs of numbers of size 1e3 cost a few hundred ulps)."""
    beta, kw = 800.0, {"d": 64, "sigma_U": 0.1, "sigma_W": 0.1}
    u = np.linspace(-1.0, 0.5, 31)
    G = sto.lemma_4_1_terms(u, "relu", beta=beta, **kw).G
    x = beta * (1 - u)
    ref = beta * G * np.exp(-x) / -np.expm1(-x)
    F = sto.dissipation_function(u, "relu", beta=beta, **kw)
    # past the switch F ~ x^2 e^-x is below 1e-300, where floats are subnormal or nearly so
    # and carry fewer digits: an absolute 1e-300 there
    np.testing.assert_allclose(F, ref, rtol=1e-12, atol=1e-300)
    assert np.any(x > 709.8) and np.any(x < 709.7)  # both forms are used
    assert np.any(F[x < 709.7] > 1e-200)  # and the direct one on numbers with all their digits


def test_dissipation_at_huge_beta_is_finite_and_keeps_its_limit():
    """beta = 1e200: F vanishes away from the diagonal (e^-beta(1-u) wins), F(1) = -lambda_bar
    exactly, and the rate lies in [lambda_bar, 0] as Lemma 4.1 says."""
    kw = {"d": 64, "sigma_U": 0.1, "sigma_W": 0.1}
    lam_bar = sto.relu_noise_exponents(64, sigma_U=0.1, sigma_W=0.1).lambda_bar
    F = sto.dissipation_function([-1.0, 0.0, 0.9, 1.0], "relu", beta=1e200, **kw)
    np.testing.assert_array_equal(F[:3], 0.0)
    assert F[3] == pytest.approx(-lam_bar, rel=1e-14)
    rate = sto.dissipation_rate("relu", beta=1e200, **kw)
    assert lam_bar <= rate <= 0.0


def test_noise_energy_drift_beyond_float64_is_an_error_and_a_dirac_drifts_zero():
    X = sampling.uniform_sphere(4, 5, rng=3)
    # the largest inner product of distinct tokens is 0.46: the drift is about e^(0.46 beta)
    with pytest.raises(FloatingPointError, match=r"noise drift of the energy.*`beta`"):
        sto.noise_energy_drift(X, "relu", beta=1e4, sigma_U=0.1)
    # a Dirac mass: G(1) = 0 on every pair, whatever beta
    assert sto.noise_energy_drift(np.repeat(X[:1], 3, 0), "relu", beta=1e200, sigma_U=0.1) == 0.0
    # with the largest exponential taken out and put back in the log domain, the drift is the
    # plain sum -beta/2 sum_(i != j) e^(beta u) G(u) / n^2 where that is representable (beta =
    # 300 and 1000, where e^beta alone overflows), to the few hundred ulps of exp and log at
    # arguments of size 1000
    off = ~np.eye(4, dtype=bool)
    u = np.clip(X @ X.T, -1.0, 1.0)
    for beta in (300.0, 1000.0):
        G = sto.lemma_4_1_terms(u.ravel(), "relu", d=5, beta=beta, sigma_U=0.1).G
        terms = np.exp(beta * u[off]) * G.reshape(u.shape)[off]
        plain = -0.5 * beta * terms.sum() / 16
        drift = sto.noise_energy_drift(X, "relu", beta=beta, sigma_U=0.1)
        assert drift == pytest.approx(plain, rel=1e-10)


def test_relu_exponents_beyond_float64_raise():
    with pytest.raises(FloatingPointError, match=r"ReLU noise exponents.*`sigma_U`"):
        sto.relu_noise_exponents(64, sigma_U=1e200)
    with pytest.raises(FloatingPointError, match="kernel kappa"):
        sto.noise_exponents("relu", d=64, sigma_W=1e200)
    # a bounded activation has finite exponents at any bias
    row = sto.noise_exponents("tanh", d=64, sigma_U=1e200)
    assert row.kappa_1 == pytest.approx(1.0, rel=1e-14)


def test_estimators_are_scale_free():
    """The decay rate is the same for energies times 1e200 and divided by 1e200 for times
    times 1e200; the separation exponent is unchanged by scaling the states. Exact up to the
    rounding of the scaled inputs (1e-13 relative)."""
    rng = np.random.default_rng(5)
    t = np.linspace(0.0, 2.0, 6)
    E = rng.uniform(0.5, 2.0, (40, 1)) * np.exp(-0.7 * t) * rng.uniform(0.9, 1.1, (40, 6))
    ref = sto.energy_decay_rate(t, E)
    for scaled in (sto.energy_decay_rate(t, 1e200 * E), sto.energy_decay_rate(t, 1e-200 * E)):
        assert scaled.mean == pytest.approx(ref.mean, rel=1e-13)
        assert scaled.stderr == pytest.approx(ref.stderr, rel=1e-10)
    slow = sto.energy_decay_rate(1e200 * t, E)
    assert slow.mean * 1e200 == pytest.approx(ref.mean, rel=1e-13)
    fast = sto.energy_decay_rate(1e-200 * t, E)
    assert fast.mean * 1e-200 == pytest.approx(ref.mean, rel=1e-13)
    S = rng.standard_normal((3, 4, 2, 5))
    base = sto.separation_exponent(np.arange(4.0), S).mean
    for k in (1e200, 1e-200):
        assert sto.separation_exponent(np.arange(4.0), k * S).mean == pytest.approx(base, rel=1e-12)


def test_separation_exponent_reads_the_same_at_every_scale_of_the_states():
    """The gap |x - y| is known to the rounding of the tokens' coordinates, eps |max(|x|, |y|)|:
    a floor relative to the tokens' size, so states scaled by 1e-6, 1 or 1e6 report the same.
    Tokens one or five units in the last place apart at the last time are rounding; the old
    floor (an exact zero) reported the log of each scale's ulp grid: -29.73, -29.69, -29.64 at
    one ulp, -27.94, -28.08, -28.03 at five. Tokens a relative 1e-6 apart give one exponent: the
    scaling moves each coordinate by eps/2 of itself, the log-gap by at most
    eps |x| / |x - y| = 2e-10 (asked with 1e-9, the time span being 1)."""
    x = np.random.default_rng(0).standard_normal((4, 3))[3]
    for ulps in (1, 5):
        y = x.copy()
        y[0] += ulps * np.spacing(x[0])
        S = np.array([[[x, x + 1e-3], [x, y]]] * 2)  # 2 paths, the pair meets at the last time
        for k in (1e-6, 1.0, 1e6):
            with pytest.raises(FloatingPointError, match=r"within 10 roundings.*`times`"):
                sto.separation_exponent([0.0, 1.0], k * S)
    S = np.array([[[x, x * (1 + 1e-3)], [x, x * (1 + 1e-6)]]] * 2)
    base = sto.separation_exponent([0.0, 1.0], S).mean
    assert base == pytest.approx(np.log(1e-3), abs=1e-9)
    for k in (1e-6, 1e6):
        assert sto.separation_exponent([0.0, 1.0], k * S).mean == pytest.approx(base, abs=1e-9)


def test_experiment_and_exponent_arguments_are_named():
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None), V=np.zeros((5, 5)))
    with pytest.raises(ValueError, match=r"`T`.*too short"):
        sto.two_point_lyapunov_exponent(model, 5, T=1e-200, L=4, n_paths=2, rng=0)
    with pytest.raises(ValueError, match="`separation`"):
        sto.two_point_lyapunov_exponent(model, 5, T=1.0, L=4, separation=1e-200, rng=0)
    # lambda_1 = -0.48 (ReLU, d = 64, sigma = 0.1): by T = 70 the pair 1e-3 apart contracts to
    # about 1e-3 e^(-0.48 T) = 3e-18, below the rounding of unit vectors; the exponent of such
    # pairs was the rounding's (-0.41, 370 standard errors from lambda_1), now refused
    noise = sto.MLPNoise("relu", width=None, sigma_U=0.1, sigma_W=0.1)
    contracting = sto.StochasticTransformer(noise, V=np.zeros((64, 64)))
    with pytest.raises(FloatingPointError, match=r"pair contracted.*shorten `T`"):
        sto.two_point_lyapunov_exponent(contracting, 64, T=70.0, L=700, n_paths=20, rng=3)
    for bad in ("1.0", 1j, None):
        with pytest.raises(ValueError, match="`scale`"):
            sto.synchronization_experiment("relu", 3, scale=bad, n_tokens=3, L=2, width=4)
    with pytest.raises(TypeError, match="`X`"):
        sto.synchronization_energy([[1.0, 0.0], [1.0]], beta=1.0)
    with pytest.raises(ValueError, match="`times`"):
        sto.separation_exponent(np.zeros((1, 2)), np.ones((2, 2, 2, 3)))


def test_pair_spread_is_twice_one_minus_the_squared_mean_on_the_sphere():
    # |x - y|^2 = 2 - 2<x, y> on the sphere: the spread is 2 (1 - |mean|^2), to rounding
    rng = np.random.default_rng(12)
    X = sampling.uniform_sphere(9, 4, rng=rng)
    w = rng.dirichlet(np.ones(9))
    mean = w @ X
    np.testing.assert_allclose(sto.pair_spread(X, weights=w), 2 * (1 - mean @ mean), rtol=1e-13)
    # leading axes are kept, and a near-Dirac keeps its digits (no 1 - |mean|^2 cancellation)
    eps = 1e-9
    near = geometry.normalize(np.array([[1.0, 0.0], [1.0, eps]]))
    stack = np.stack([X, X[::-1]])
    np.testing.assert_allclose(sto.pair_spread(stack), sto.pair_spread(X), rtol=1e-13)
    np.testing.assert_allclose(sto.pair_spread(near), 0.5 * eps**2, rtol=1e-6)


@pytest.mark.statement("sync-prop-distance")
@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0, 1000.0])
def test_distance_bound_holds_with_equality_for_antipodal_pairs(beta):
    rng = np.random.default_rng(13)
    clouds = np.stack([sampling.uniform_sphere(7, 3, rng=rng) for _ in range(20)])
    # the bound, up to the rounding of the two sums (relative 1e-12)
    assert np.all(sto.pair_spread(clouds) <= sto.distance_bound(clouds, beta) * (1 + 1e-12))
    # equal or antipodal pairs only: |x - y|^2 = 2 (e^b - e^{b<x,y>}) / sinh(b) for each pair
    x = sampling.uniform_sphere(1, 3, rng=rng)[0]
    pm = np.array([x, -x, x])
    np.testing.assert_allclose(sto.distance_bound(pm, beta), sto.pair_spread(pm), rtol=1e-12)


@pytest.mark.statement("sync-prop-two-point")
@pytest.mark.parametrize("activation", ["relu", "erf"])
def test_two_point_exponent_over_a_long_horizon(activation):
    # The pair starts 1e-3 apart and contracts at lambda_1 = (d-3)/2 kappa'(1) - (d-1)/2
    # kappa(1) (about -0.6 here): over T = 20 to about 1e-9, far below the 1e-5 where a
    # jittered factor of the kernel matrix stalled it (and halved the exponent). Standard error
    # sqrt((kappa(1) + kappa'(1)) / (T n_paths)), about 0.008; the step h = 0.02 adds an O(h)
    # bias below it (measured 0.9 SE at seed 1); 4 SE leave a 6e-5 chance of a false alarm.
    d = 5
    noise = sto.MLPNoise(activation, width=None, sigma_W=0.5)
    model = sto.StochasticTransformer(noise, V=np.zeros((d, d)))
    k1, kp = float(noise.kappa(1.0, d=d)), float(noise.kappa_prime(1.0, d=d))
    lam = (d - 3) / 2 * kp - (d - 1) / 2 * k1
    assert 1e-3 * np.exp(20.0 * lam) < 1e-8  # the horizon takes the pair far below 1e-5
    est = sto.two_point_lyapunov_exponent(model, d, T=20.0, L=1000, n_paths=400, rng=1)
    assert abs(est.mean - lam) < 4 * est.stderr, (est, lam)


def test_energy_decay_rate_standard_error_is_calibrated():
    """The delta-method standard error is the spread of the rate over independent experiments.

    400 experiments of 50 paths with log-normal noise (sigma 0.3) at four times: the standard
    deviation of the 400 fitted rates estimates the true one to a relative 1/sqrt(2 * 399)
    (3.5%), and the delta method is exact to O(1/P) = 2% here; 15% is four of those standard
    errors. An error that dropped the 1/P of the covariance of the means would be sqrt(50) = 7
    times too large."""
    rng = np.random.default_rng(11)
    t = np.array([0.0, 0.5, 1.0, 2.0])
    rates, errors = [], []
    for _ in range(400):
        E = np.exp(-0.7 * t) * rng.lognormal(0.0, 0.3, (50, t.size))
        est = sto.energy_decay_rate(t, E)
        rates.append(est.mean)
        errors.append(est.stderr)
    assert np.std(rates, ddof=1) == pytest.approx(np.mean(errors), rel=0.15)
    # and the rate itself: the mean of E_k is e^{-0.7 t_k} E[lognormal], so log-linear in t
    assert np.mean(rates) == pytest.approx(-0.7, abs=4 * np.std(rates) / np.sqrt(400))


def test_separation_exponent_is_the_log_gap_growth_per_unit_time():
    """Two tokens whose gap grows by the factor e^{r (t_1 - t_0)} give the exponent r whatever
    the origin of time: the estimate uses the elapsed time t_1 - t_0, not t_1. Gaps are built
    as s e^{r (t - t_0)} along one axis (any scale of `states` is allowed); the rounding of one
    exp and one log per end over a span of 1 (1e-14), asked with a margin of 100."""
    r, s = -1.3, 1e-3
    for t0 in (0.0, 5.0, -2.0):
        times = np.array([t0, t0 + 0.4, t0 + 1.0])
        gaps = s * np.exp(r * (times - t0)) * np.array([[1.0], [2.0]])  # two paths
        states = np.zeros((2, times.size, 2, 3))
        states[..., 1, 0] = gaps  # the first token at the origin: the gap is exact
        est = sto.separation_exponent(times, states)
        np.testing.assert_allclose(est.mean, r, rtol=1e-12)
        assert est.stderr < 1e-12  # the two paths have the same exponent


def test_experiment_without_mlp_is_the_layer_normed_euler_step_of_the_docstring():
    """Each saved layer is ``LN(X + T/L Attn(X))`` with a dense softmax, Q = K = I, V = scale I.

    The reference is written from the docstring's formula with its own softmax; both evaluate
    the same O(1) quantities on the unit sphere, so they agree to a few ulps per layer
    (atol 1e-13 after 4 layers). A step of T/(L+1) or a wrong V would move them by O(T/L^2).
    """
    d, n, L, T, scale = 3, 5, 4, 2.0, 0.7
    run = sto.synchronization_experiment(None, d, scale=scale, n_tokens=n, L=L, T=T, rng=11)
    X0 = sampling.uniform_sphere(n, d, rng=np.random.default_rng(11))
    np.testing.assert_allclose(run.X[0], X0, rtol=0, atol=1e-15)  # renormalised: an ulp
    X = X0
    for k in range(1, L + 1):
        S = X @ X.T
        P = np.exp(S - S.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        Y = X + T / L * scale * (P @ X)
        X = Y / np.linalg.norm(Y, axis=1, keepdims=True)
        np.testing.assert_allclose(run.X[k], X, rtol=0, atol=1e-13)
    np.testing.assert_allclose(run.times, np.linspace(0.0, T, L + 1), rtol=0, atol=1e-15)


def test_experiment_with_mlp_is_the_model_with_sigma_u_equal_to_sigma_w():
    """The run is :func:`simulate` of ``MLPNoise(act, width, sigma_U = sigma_W = sigma)``.

    Same seed, same draws (the initial cloud first, then the model's), so the trajectories agree
    to rounding; a bias scale other than ``sigma`` changes the noise at O(1).
    """
    d, n, L, width, sigma = 3, 4, 3, 8, 0.6
    run = sto.synchronization_experiment(
        "relu", d, sigma=sigma, scale=0.5, n_tokens=n, L=L, T=1.0, width=width, rng=12
    )
    rng = np.random.default_rng(12)
    X0 = sampling.uniform_sphere(n, d, rng=rng)
    noise = sto.MLPNoise("relu", width=width, sigma_U=sigma, sigma_W=sigma)
    model = sto.StochasticTransformer(noise, V=0.5 * np.eye(d))
    res = sto.simulate(model, X0, T=1.0, L=L, rng=rng)
    np.testing.assert_allclose(run.X, res.X[0], rtol=0, atol=1e-14)
