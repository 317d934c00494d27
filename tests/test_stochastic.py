"""Tests of token_dynamics.stochastic: the oracles of chapter 5 of the specification.

Monte-Carlo checks use fixed seeds and tolerances stated in standard errors (SE = std/sqrt(n));
3 SE is a two-sided 99.7% band for one Gaussian estimate, 4 SE is used where several estimates
are compared in one test (Bonferroni over about ten comparisons).
"""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy import integrate, special

from token_dynamics import stochastic as sto
from token_dynamics.attention import Softmax
from token_dynamics.diagnostics import interaction_energy
from token_dynamics.sampling import uniform_sphere
from token_dynamics.stochastic import _model

ACTS = ["relu", "erf", "tanh", "identity"]
PHI = {
    "relu": lambda u: np.maximum(u, 0.0),
    "erf": special.erf,
    "tanh": np.tanh,
    "identity": lambda u: u,
}
DPHI = {
    "relu": lambda u: (u > 0).astype(float),
    "erf": lambda u: 2 / np.sqrt(np.pi) * np.exp(-(u**2)),
    "tanh": lambda u: 1 - np.tanh(u) ** 2,
    "identity": np.ones_like,
}


# --------------------------------------------------------------------------------------------
# kernels


@pytest.mark.statement("sto-prop-kernel")
@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("sigma1", [0.5, 1.0, 2.0])
def test_kernel_matches_monte_carlo(activation, sigma1):
    rng = np.random.default_rng(11)
    n = 400_000
    for rho in (-0.7, 0.2, 0.95):
        z1, z2 = rng.standard_normal((2, n))
        u = sigma1 * z1
        v = sigma1 * (rho * z1 + np.sqrt(1 - rho**2) * z2)
        sample = 1.5**2 * PHI[activation](u) * PHI[activation](v)
        se = sample.std() / np.sqrt(n)
        k = sto.noise_kernel(rho, activation, sigma1=sigma1, sigma2=1.5)
        # 4 SE: nine comparisons per activation
        assert abs(float(k) - sample.mean()) < 4 * se


@pytest.mark.statement("sto-prop-kernel")
@pytest.mark.parametrize("activation", ACTS)
def test_kernel_derivative_is_price_identity(activation):
    rho = np.linspace(-0.9, 0.9, 7)
    dk = sto.noise_kernel_derivative(rho, activation, sigma1=0.8, sigma2=1.3)
    step = 1e-5
    fd = (
        sto.noise_kernel(rho + step, activation, sigma1=0.8, sigma2=1.3)
        - sto.noise_kernel(rho - step, activation, sigma1=0.8, sigma2=1.3)
    ) / (2 * step)
    # central difference: O(step^2) truncation plus O(1e-16 / step) rounding, both below 1e-8
    np.testing.assert_allclose(dk, fd, atol=1e-8)


@pytest.mark.statement("sto-prop-kernel")
def test_kernel_constants_reference_values():
    # exact values of the table of the book at sigma1 = sigma2 = 1 (tanh by 1-D adaptive quadrature)
    gauss = lambda z: np.exp(-(z**2) / 2) / np.sqrt(2 * np.pi)  # noqa: E731
    tanh0 = integrate.quad(lambda z: np.tanh(z) ** 2 * gauss(z), -np.inf, np.inf, epsabs=1e-13)[0]
    tanh1 = integrate.quad(
        lambda z: (1 - np.tanh(z) ** 2) ** 2 * gauss(z), -np.inf, np.inf, epsabs=1e-13
    )[0]
    expected = {
        "relu": (0.5, 0.5),
        "erf": (2 / np.pi * np.arcsin(2 / 3), 4 / (np.pi * np.sqrt(5))),
        "tanh": (tanh0, tanh1),
        "identity": (1.0, 1.0),
    }
    for act, (kappa0, k1) in expected.items():
        c = sto.kernel_constants(act)
        # Gauss-Hermite with 160 nodes: ~2e-13 for tanh; closed forms to rounding
        np.testing.assert_allclose([c.kappa0, c.k1], [kappa0, k1], rtol=1e-11)


@pytest.mark.statement("sto-prop-kernel")
@pytest.mark.parametrize("width", [1, 3])
def test_mlp_noise_covariance_holds_at_every_width(width):
    """E[g(x) g(y)^T] = k(<x, y>) I_d for an MLP of any width, whatever the other tokens."""
    d, draws = 3, 200_000
    rng = np.random.default_rng(5)
    x, y = np.eye(d)[0], np.array([0.6, 0.8, 0.0])
    model = sto.StochasticTransformer("erf", width=width)
    noise = _model._Noise(model, draws, d, rng)
    g = noise.field(np.broadcast_to(np.stack([x, y]), (draws, 2, d)), noise.draw())
    cov = np.einsum("pa,pb->pab", g[:, 0], g[:, 1])
    se = cov.std(axis=0) / np.sqrt(draws)
    target = float(sto.noise_kernel(0.6, "erf")) * np.eye(d)
    # 4 SE: nine entries compared
    assert np.all(np.abs(cov.mean(axis=0) - target) < 4 * se)


@pytest.mark.statement("sto-prop-kernel")
@given(
    st.sampled_from(ACTS),
    st.floats(0.3, 3.0),
    st.lists(st.floats(-1.0, 1.0), min_size=12, max_size=12),
)
def test_kernel_matrix_is_positive_semidefinite(activation, sigma1, coords):
    """A covariance kernel: k(<x_i, x_j>) is a PSD matrix for any points on the sphere."""
    X = np.reshape(coords, (4, 3)) + 1e-3 * np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]])
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    assume(np.all(norms > 1e-6))
    X /= norms
    K = sto.noise_kernel(np.clip(X @ X.T, -1, 1), activation, sigma1=sigma1)
    np.testing.assert_allclose(K, K.T, atol=1e-14)
    # eigenvalues: rounding of the entries, ~1e-12 relative to the largest
    assert np.linalg.eigvalsh(K).min() >= -1e-10 * max(1.0, np.abs(K).max())


@pytest.mark.statement("sto-prop-kernel")
@pytest.mark.parametrize("width", [None, 2])
def test_mlp_covariance_estimator(width):
    model = sto.StochasticTransformer("relu", width=width)
    est = sto.mlp_covariance(model, -0.3, 4, samples=50_000, rng=2)
    assert abs(est.mean - float(sto.noise_kernel(-0.3, "relu"))) < 3 * est.stderr


def test_plotting_helpers_draw_on_the_given_axes():
    import matplotlib.pyplot as plt

    from token_dynamics import plotting

    fig, axes = plt.subplots(1, 5)
    est = sto.MCEstimate(np.array([1.0, 0.5]), np.array([0.1, 0.1]), 10)
    plotting.plot_mc_estimate(axes[0], [0.0, 1.0], est, predicted=[1.0, 0.4])
    study = sto.ConvergenceStudy(
        np.array([1.0, 2.0, 4.0]), np.array([1.0, 0.5, 0.25]), np.zeros(3), -1.0
    )
    plotting.plot_convergence(axes[1], study, reference_slope=-0.5)
    plotting.plot_lyapunov_dimensions(axes[2], [3, 8], {"erf": [sto.MCEstimate(-0.1, 0.01, 5)] * 2})
    plotting.plot_kernels(axes[3])
    plotting.plot_energy_decay(axes[4], [0.0, 1.0], np.ones((4, 2)), rate=0.5)
    assert all(ax.lines for ax in axes)
    assert axes[1].get_xscale() == "log"
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# discrete model


def test_softmax_drift_matches_attention_module():
    rng = np.random.default_rng(0)
    X = uniform_sphere(7, 4, rng=rng)
    A, V = rng.standard_normal((2, 4, 4))
    ours = _model._softmax_drift(X[None], A, V, 1.7)[0]
    np.testing.assert_allclose(ours, Softmax(A, V, beta=1.7).velocity(X), atol=1e-12)


def test_energies_match_diagnostics_and_brute_force():
    X = uniform_sphere(6, 3, rng=1)
    np.testing.assert_allclose(sto.attention_energy(X, 2.0), interaction_energy(X, 2.0), rtol=1e-12)
    brute = np.mean([np.linalg.norm(a - b) ** 0.5 for a in X for b in X])
    np.testing.assert_allclose(sto.distance_energy(X, 0.5), brute, rtol=1e-12)


@pytest.mark.parametrize(("activation", "width"), [("erf", None), ("tanh", 5), ("relu", 5)])
@pytest.mark.parametrize("reading", ["fresh", "fixed_first"])
def test_tokens_stay_on_the_sphere_and_runs_are_reproducible(activation, width, reading):
    model = sto.StochasticTransformer(activation, width=width, reading=reading, beta=2.0)
    X0 = uniform_sphere(6, 4, rng=2)
    a = sto.simulate(model, X0, 2.0, 30, paths=5, rng=3)
    b = sto.simulate(model, X0, 2.0, 30, paths=5, rng=3)
    np.testing.assert_array_equal(a.states, b.states)
    # renormalised every layer: |x| = 1 to rounding
    np.testing.assert_allclose(np.linalg.norm(a.states, axis=-1), 1.0, atol=1e-12)
    assert a.times[-1] == pytest.approx(2.0)


def test_readings_differ_only_in_the_first_layer_weights():
    rng = np.random.default_rng(0)
    fresh = _model._Noise(sto.StochasticTransformer(width=4), 2, 3, rng)
    fixed = _model._Noise(sto.StochasticTransformer(width=4, reading="fixed_first"), 2, 3, rng)
    w_fresh = [fresh.draw() for _ in range(2)]
    w_fixed = [fixed.draw() for _ in range(2)]
    assert not np.array_equal(w_fresh[0][0], w_fresh[1][0])
    np.testing.assert_array_equal(w_fixed[0][0], w_fixed[1][0])
    assert not np.array_equal(w_fixed[0][1], w_fixed[1][1])


@given(st.permutations(range(5)))
def test_model_is_permutation_equivariant(perm):
    # with a finite width the weights drawn do not depend on the tokens: same seed, same weights
    model = sto.StochasticTransformer("relu", width=6, beta=1.5)
    X0 = uniform_sphere(5, 3, rng=4)
    a = sto.simulate(model, X0, 1.0, 8, paths=2, rng=9).states
    b = sto.simulate(model, X0[list(perm)], 1.0, 8, paths=2, rng=9).states
    np.testing.assert_allclose(b, a[:, :, list(perm)], atol=1e-12)


def test_progress_bar_runs():
    traj = sto.simulate(sto.StochasticTransformer(width=2), np.eye(2), 1.0, 3, rng=0, progress=True)
    assert traj.states.shape == (1, 4, 2, 2)


def test_bad_arguments_raise_named_errors():
    model = sto.StochasticTransformer()
    with pytest.raises(ValueError, match="`d` must be at least 2"):
        sto.simulate(model, np.ones((3, 1)), 1.0, 4)
    with pytest.raises(ValueError, match="`width`"):
        sto.StochasticTransformer(width=0)
    with pytest.raises(ValueError, match="`L`"):
        sto.simulate(model, np.eye(3), 1.0, 0)
    with pytest.raises(ValueError, match="`activation`"):
        sto.StochasticTransformer(activation="gelu")
    with pytest.raises(ValueError, match="`activation`"):
        sto.noise_kernel(0.5, "softplus")
    with pytest.raises(ValueError, match="unit sphere"):
        sto.simulate(model, 2 * np.eye(3), 1.0, 4)
    with pytest.raises(ValueError, match="`reading`"):
        sto.StochasticTransformer(reading="shared")
    with pytest.raises(ValueError, match="`d`"):
        sto.lyapunov_exponent(1)
    with pytest.raises(ValueError, match="`rho`"):
        sto.noise_kernel(1.5)
    with pytest.raises(ValueError, match="finite"):
        sto.tangent_growth(sto.StochasticTransformer(width=None), 3, T=1.0, L=2)
    with pytest.raises(ValueError, match="divide"):
        sto.strong_error(model, np.eye(3), 1.0, [3], L_ref=8)
    with pytest.raises(ValueError, match="`sizes`"):
        sto.propagation_of_chaos(model, 3, [8, 64], 32, T=1.0, L=2)
    with pytest.raises(ValueError, match="paths"):
        sto.simulate(model, np.ones((2, 2, 3)) / np.sqrt(3), 1.0, 2, paths=3)
    traj = sto.simulate(model, np.eye(3), 1.0, 2)
    with pytest.raises(ValueError, match="token indices"):
        sto.pair_correlation(traj, 0, 3)
    with pytest.raises(ValueError, match="`rho`"):
        sto.two_point_step(model, 1.5, 3)


def test_blow_up_is_reported_not_returned_as_nan():
    model = sto.StochasticTransformer(width=4, sigma2=1e300)
    with pytest.raises(FloatingPointError, match="layer 1"):
        sto.simulate(model, np.eye(3), 1.0, 2, rng=0)


# --------------------------------------------------------------------------------------------
# the limit SDE


@pytest.mark.statement("sto-prop-one-point")
@pytest.mark.statement("sto-prop-ito")
@pytest.mark.statement("sto-thm-limit")
@pytest.mark.parametrize(("activation", "width"), [("relu", None), ("erf", None), ("relu", 1)])
def test_one_point_motion_is_spherical_brownian_motion(activation, width):
    d, T = 5, 1.0
    model = sto.StochasticTransformer(activation, width=width, attention=False)
    traj = sto.simulate(model, np.eye(d)[:1], T, 400, paths=3000, save_every=200, rng=21)
    est = sto.one_point_correlation(traj)
    kappa0 = sto.kernel_constants(activation).kappa0
    predicted = np.exp(-(d - 1) * kappa0 * traj.times / 2)
    # 3 SE (SE ~ 0.01 with 3000 paths); the O(h) = O(1/400) bias is far smaller
    assert np.all(np.abs(est.mean - predicted) <= 3 * est.stderr + 1e-12)


@pytest.mark.statement("sto-prop-ito")
def test_renormalisation_supplies_the_ito_drift():
    """One noise layer: E<x_new - x, x> / h = -(d - 1) k(1) / 2 (the Itô correction)."""
    d, h, paths = 4, 1e-3, 200_000
    model = sto.StochasticTransformer("erf", width=None, attention=False)
    x = np.eye(d)[:1]
    traj = sto.simulate(model, x, h, 1, paths=paths, rng=8)
    drift = (traj.states[:, -1, 0] @ x[0] - 1.0) / h
    se = drift.std() / np.sqrt(paths)
    kappa0 = sto.kernel_constants("erf").kappa0
    # 3 SE plus the O(h) bias of one step
    assert abs(drift.mean() + (d - 1) * kappa0 / 2) < 3 * se + 10 * h


def test_renormalised_scheme_has_the_ito_drift_of_a_fixed_feature_field():
    """Fixed features w_k (reading R2): the mean step is -(d-1)/2 K_m(x, x) x, with no tangential
    part, although K_m is not isotropic (the Stratonovich form would add P_x grad K_m(x, x) / 4)."""
    d, m, h, samples = 3, 3, 1e-3, 100_000
    rng = np.random.default_rng(12)
    model = sto.StochasticTransformer("tanh", width=m, attention=False)
    W1 = np.broadcast_to(rng.standard_normal((m, d)), (samples, m, d))
    W2 = rng.standard_normal((samples, d, m))
    x = np.array([[0.6, 0.0, 0.8]])
    X = np.broadcast_to(x, (samples, 1, d))
    noise = _model._Noise(model, samples, d, rng)
    I = np.eye(d)
    plus = _model._layer(model, X, h, noise, I, I, 1, weights=(W1, W2))
    minus = _model._layer(model, X, h, noise, I, I, 1, sign=-1.0, weights=(W1, W2))
    step = (0.5 * (plus + minus)[:, 0] - x) / h  # antithetic: the sqrt(h) part cancels
    feats = np.tanh(W1[0] @ x[0])
    K_m = feats @ feats / m
    tangent = step - np.outer(step @ x[0], x[0])
    se = step.std(axis=0) / np.sqrt(samples)
    # 4 SE per coordinate (six comparisons) plus the O(h) bias of one step
    assert abs((step @ x[0]).mean() + (d - 1) / 2 * K_m) < 4 * se.max() + 10 * h
    grad = 2 * (feats * (1 - feats**2)) @ W1[0] / m
    assert np.linalg.norm(grad - (grad @ x[0]) * x[0]) / 4 > 10 * se.max()  # the term is visible
    assert np.all(np.abs(tangent.mean(axis=0)) < 4 * se + 10 * h)


@pytest.mark.statement("sto-thm-limit")
@pytest.mark.statement("sto-thm-strong")
def test_strong_error_has_order_one_half():
    X0 = uniform_sphere(4, 3, rng=0)
    model = sto.StochasticTransformer("relu", width=64, beta=1.0)
    study = sto.strong_error(model, X0, 1.0, [16, 32, 64, 128, 256], L_ref=4096, paths=100, rng=4)
    # E sup |error|^2 ~ L^-1 (strong order 1/2); the band [-1.2, -0.7] is the spec's, it absorbs
    # the ~10% standard errors of the five means and the reference's own error at L_ref / 16
    assert -1.2 <= study.slope <= -0.7
    assert np.all(np.diff(study.mean) < 0)


@pytest.mark.statement("sto-prop-width")
@pytest.mark.statement("sto-thm-commute")
def test_lyapunov_exponent_does_not_depend_on_the_width():
    est = [
        sto.tangent_growth(
            sto.StochasticTransformer("relu", width=m, attention=False),
            3,
            T=4.0,
            L=400,
            paths=200,
            rng=30 + m,
        ).lyapunov()
        for m in (4, 50, 200)
    ]
    for a in est:
        for b in est:
            # independent runs: 3 SE of the difference
            assert abs(a.mean - b.mean) <= 3 * np.hypot(a.stderr, b.stderr)
        assert abs(a.mean - sto.lyapunov_exponent(3, "relu")) <= 3 * a.stderr


@pytest.mark.statement("sto-thm-chaos")
def test_propagation_of_chaos_rate():
    model = sto.StochasticTransformer("relu", width=32, beta=1.0)
    study = sto.propagation_of_chaos(model, 3, [8, 16, 32, 64], 512, T=1.0, L=40, paths=20, rng=5)
    # the paper's N^(-1/2) is an upper bound; i.i.d. samples on the 2-sphere give ~ log N / N,
    # which over N in [8, 64] measures about -0.7 to -0.8: the slope must be at least as steep
    # as -1/2 (with 0.1 slack for the ~15% standard errors) and not steeper than -1
    assert -1.1 <= study.slope <= -0.4


# --------------------------------------------------------------------------------------------
# synchronization


@pytest.mark.statement("sync-prop-two-point")
@pytest.mark.parametrize("activation", ["relu", "erf"])
@pytest.mark.parametrize("width", [None, 8])
def test_two_point_generator(activation, width):
    model = sto.StochasticTransformer(activation, width=width)
    for rho in (-0.5, 0.3, 0.9):
        step = sto.two_point_step(model, rho, 5, h=1e-3, samples=20_000, rng=3)
        drift = sto.two_point_drift(rho, 5, activation)
        qv = sto.two_point_diffusion(rho, activation)
        # 4 SE (six comparisons) plus the O(h) bias of one layer
        assert abs(step.drift.mean - drift) < 4 * step.drift.stderr + 2e-3
        assert abs(step.diffusion.mean - qv) < 4 * step.diffusion.stderr + 2e-3


@pytest.mark.statement("sync-thm-lyapunov")
@pytest.mark.parametrize(
    ("activation", "d", "L"),
    [("relu", 3, 400), ("relu", 8, 800), ("erf", 8, 800), ("erf", 20, 1600)],
)
def test_lyapunov_exponent_formula(activation, d, L):
    model = sto.StochasticTransformer(activation, width=16, attention=False)
    est = sto.tangent_growth(model, d, T=4.0, L=L, paths=200, rng=40 + d).lyapunov()
    # h = T / L small enough that the O(d h) bias is below one SE (~0.035)
    assert abs(est.mean - sto.lyapunov_exponent(d, activation)) <= 3 * est.stderr


@pytest.mark.statement("sync-cor-threshold")
def test_sign_threshold():
    # d <= 3: negative for every activation and every sigma1
    for act in ACTS:
        for s1 in (0.5, 1.0, 2.0):
            for d in (2, 3):
                assert sto.lyapunov_exponent(d, act, sigma1=s1) < 0
    # ReLU: lambda = -k(1) = -sigma1^2 sigma2^2 / 2 in every dimension
    for d in (2, 5, 50):
        assert sto.lyapunov_exponent(d, "relu", sigma1=2.0, sigma2=0.5) == pytest.approx(-0.5)
    assert sto.sign_threshold("relu") == np.inf
    # the spec's table, rounded to one decimal there (tanh at sigma1 = 1 is 14.248, printed 14.3)
    table = {
        ("erf", 0.5): 52.6,
        ("erf", 1.0): 11.9,
        ("erf", 2.0): 5.6,
        ("tanh", 0.5): 62.5,
        ("tanh", 1.0): 14.3,
        ("tanh", 2.0): 6.3,
    }
    for (act, s1), dstar in table.items():
        assert sto.sign_threshold(act, sigma1=s1) == pytest.approx(dstar, abs=0.06)
        assert sto.lyapunov_exponent(int(np.floor(dstar)), act, sigma1=s1) < 0
        assert sto.lyapunov_exponent(int(np.ceil(dstar)), act, sigma1=s1) > 0


@pytest.mark.statement("sync-cor-threshold")
def test_erf_sign_flips_in_simulation():
    model = sto.StochasticTransformer("erf", width=16, attention=False)
    low = sto.tangent_growth(model, 8, T=4.0, L=800, paths=200, rng=1).lyapunov()
    high = sto.tangent_growth(model, 20, T=4.0, L=1600, paths=200, rng=2).lyapunov()
    assert low.mean + 3 * low.stderr < 0 < high.mean - 3 * high.stderr


@pytest.mark.statement("sync-prop-attention")
@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_attention_adds_minus_one(beta):
    model = sto.StochasticTransformer("relu", width=16, beta=beta)
    growth = sto.tangent_growth(model, 3, T=4.0, L=800, paths=200, rng=7)
    est = growth.lyapunov()
    assert abs(est.mean - sto.lyapunov_exponent(3, "relu", attention_rate=1.0)) <= 3 * est.stderr
    g = growth.moment_exponent(0.5)
    assert abs(g.mean - (sto.moment_exponent(0.5, 3, "relu") - 0.5)) <= 3 * g.stderr


@pytest.mark.statement("sync-prop-moments")
@pytest.mark.parametrize("q", [0.25, 0.5])
def test_moment_exponents(q):
    model = sto.StochasticTransformer("relu", width=16, attention=False)
    g = sto.tangent_growth(model, 5, T=4.0, L=600, paths=400, rng=60).moment_exponent(q)
    assert sto.moment_exponent(q, 5, "relu") == pytest.approx(0.5 * q * (q - 1))
    # delta-method SE of log E|v|^q / T; 3 SE
    assert abs(g.mean - sto.moment_exponent(q, 5, "relu")) <= 3 * g.stderr


@pytest.mark.statement("sync-prop-antipodal")
@pytest.mark.parametrize(
    ("activation", "width"),
    [("erf", None), ("identity", None), ("erf", 6), ("tanh", 6), ("identity", 6), ("tanh", None)],
)
def test_odd_activations_keep_antipodal_pairs(activation, width):
    model = sto.StochasticTransformer(activation, width=width, attention=False)
    x = uniform_sphere(1, 4, rng=0)
    # (the infinite-width tanh kernel is a 160 x 160 quadrature per pair: few layers)
    traj = sto.simulate(
        model, np.vstack([x, -x]), 2.0, 20 if activation == "tanh" else 100, paths=10, rng=1
    )
    rho = np.einsum("ptd,ptd->pt", traj.states[:, :, 0], traj.states[:, :, 1])
    np.testing.assert_allclose(rho, -1.0, atol=1e-12)


@pytest.mark.statement("sync-prop-antipodal")
def test_relu_breaks_antipodal_pairs():
    model = sto.StochasticTransformer("relu", width=None, attention=False)
    x = uniform_sphere(1, 4, rng=0)
    traj = sto.simulate(model, np.vstack([x, -x]), 2.0, 100, paths=10, rng=1)
    rho = np.einsum("pd,pd->p", traj.states[:, -1, 0], traj.states[:, -1, 1])
    assert np.all(rho > -0.99)


@pytest.mark.statement("sync-thm-dissipation")
def test_two_point_rates():
    # the spec's table for ReLU (kappa0 = 1/2): antipodal supremum in low d, kappa0 q (1 - q) above
    assert sto.two_point_rate(0.5, 2) == pytest.approx(0.0625, abs=1e-4)
    for d in (4, 5, 8):
        assert sto.two_point_rate(0.5, d) == pytest.approx(0.125, abs=1e-6)
    assert sto.two_point_rate(0.1, 4) == pytest.approx(0.037, abs=1e-3)
    assert sto.two_point_rate(0.1, 8) == pytest.approx(0.045, abs=1e-6)


@pytest.mark.statement("sync-thm-dissipation")
@pytest.mark.parametrize("d", [3, 5])
def test_distance_energy_dissipates_at_least_at_rate_gamma(d):
    model = sto.StochasticTransformer("relu", width=None, attention=False)
    X0 = uniform_sphere(8, d, rng=1)
    traj = sto.simulate(model, X0, 2.0, 200, paths=400, save_every=50, rng=8)
    E = sto.distance_energy(traj.states, 0.5)
    bound = E[0, 0] * np.exp(-sto.two_point_rate(0.5, d) * traj.times)
    se = E.std(axis=0) / np.sqrt(E.shape[0])
    # (1 + 1e-12): at t = 0 the mean of equal numbers may differ from them by rounding
    assert np.all(E.mean(axis=0) <= bound * (1 + 1e-12) + 3 * se)


@pytest.mark.statement("sync-thm-paper")
def test_noise_and_attention_synchronise_tokens():
    model = sto.StochasticTransformer("relu", width=16, beta=1.0)
    X0 = uniform_sphere(16, 3, rng=3)
    traj = sto.simulate(model, X0, 12.0, 600, paths=20, save_every=600, rng=4)
    gap = sto.attention_energy(traj.states[:, -1], 1.0)
    # one cluster maximises E_beta at e^beta / (2 beta); every path is within 1e-4 of it
    np.testing.assert_allclose(gap, np.e / 2, atol=1e-4)
    diameter = np.linalg.norm(traj.states[:, -1, :, None] - traj.states[:, -1, None], axis=-1)
    assert np.all(diameter.max(axis=(-2, -1)) < 1e-2)
