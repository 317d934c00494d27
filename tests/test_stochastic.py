"""Tests of token_dynamics.stochastic: the model, kernel and limits of Agazzi et al. (2026).

Monte-Carlo checks use fixed seeds and tolerances stated in standard errors (SE = std/sqrt(n));
3 SE is a two-sided 99.7% band for one Gaussian estimate, 4 SE is used where several estimates
are compared in one test (Bonferroni over about ten comparisons).
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from token_dynamics import stochastic as sto
from token_dynamics.attention import Softmax
from token_dynamics.sampling import uniform_sphere
from token_dynamics.stochastic import _deep_limit, _kernels, _mlp, _model

from .helpers import loglog_slope

SIGMA = {
    "relu": lambda x: np.maximum(x, 0.0),
    "silu": lambda x: x * special.expit(x),
    "sigmoid": special.expit,
    "tanh": np.tanh,
    "erf": special.erf,
}
DSIGMA = {
    "relu": lambda x: (x > 0).astype(float),
    "silu": lambda x: special.expit(x) * (1 + x * (1 - special.expit(x))),
    "sigmoid": lambda x: special.expit(x) * (1 - special.expit(x)),
    "tanh": lambda x: 1 - np.tanh(x) ** 2,
    "erf": lambda x: 2 / np.sqrt(np.pi) * np.exp(-(x**2)),
}


# --------------------------------------------------------------------------------------------
# the kernel


@pytest.mark.statement("sto-prop-kernel")
@pytest.mark.parametrize("activation", sto.ACTIVATIONS)
@pytest.mark.parametrize(("d", "sigma"), [(3, 0.0), (5, 0.3), (64, 0.1)])
def test_kernel_matches_monte_carlo_of_the_paper_variables(activation, d, sigma):
    """kappa(t) = E[s(uX + vY + s_U b) s(uX - vY + s_U b)] + s_W^2, sampled directly."""
    rng = np.random.default_rng(11)
    n = 400_000
    X, Y, b = rng.standard_normal((3, n))
    for t in (-0.7, 0.2, 0.95):
        u, v = np.sqrt((1 + t) / (2 * d)), np.sqrt((1 - t) / (2 * d))
        s = SIGMA[activation]
        sample = s(u * X + v * Y + sigma * b) * s(u * X - v * Y + sigma * b) + sigma**2
        se = sample.std() / np.sqrt(n)
        k = sto.kappa(t, activation, d=d, sigma_U=sigma, sigma_W=sigma)
        # 4 SE: four comparisons per case, fifteen cases
        assert abs(float(k) - sample.mean()) < 4 * se
    # Lemma 4.2: kappa'(1) = (1/d) E[s'(X / sqrt(d) + s_U b)^2], sampled directly
    sample = DSIGMA[activation](X / np.sqrt(d) + sigma * b) ** 2 / d
    dk = sto.kappa_prime(1.0, activation, d=d, sigma_U=sigma, sigma_W=sigma)
    assert abs(float(dk) - sample.mean()) < 4 * sample.std() / np.sqrt(n)


def _dblquad(f, sa, sv):
    """``E[f(A + vY) f(A - vY)]``, ``A ~ N(0, sa^2)``, ``v = sv``, by adaptive 2-D quadrature
    (scipy's ``nquad``, independent of the library's rules), in standard variables on
    [-12, 12]^2 (Gaussian mass outside below 1e-31). The outer integral is split where ``f``
    bends (``|sa a| <= 40``: points +-c / sa), the inner one where ``sa a +- sv y`` changes
    sign (the kink of ReLU)."""
    from scipy import integrate

    def integrand(y, a):
        dens = np.exp(-0.5 * (a * a + y * y)) / (2.0 * np.pi)
        return float(f(np.float64(sa * a + sv * y)) * f(np.float64(sa * a - sv * y))) * dens

    def inner_opts(a):
        kink = abs(sa * a / sv) if sv > 0 else 0.0
        pts = [p for p in (-kink, kink) if -12.0 < p < 12.0]
        opts = {"limit": 200, "epsabs": 1e-15, "epsrel": 1e-13}
        return {**opts, "points": pts} if pts else opts

    cuts = [c / sa for c in (0.5, 2.0, 8.0, 40.0) if sa > 0 and c / sa < 12.0]
    outer = {"limit": 400, "epsabs": 1e-15, "epsrel": 1e-13, "points": [0.0, *cuts]}
    outer["points"] += [-c for c in cuts]
    val, _ = integrate.nquad(integrand, [[-12.0, 12.0], [-12.0, 12.0]], opts=[inner_opts, outer])
    return val


def _reference(activation, d, sigma_U, t, derivative=False):
    """The kernel (or its derivative) at inner products `t` by :func:`_dblquad`."""
    sa, sv = np.sqrt(sigma_U**2 + (1 + t) / (2 * d)), np.sqrt((1 - t) / (2 * d))
    f = (DSIGMA if derivative else SIGMA)[activation]
    val = np.array([_dblquad(f, a, v) for a, v in zip(sa, sv, strict=True)])
    return val / d if derivative else val


@pytest.mark.statement("sto-prop-kernel")
@pytest.mark.statement("sto-lem-kappa-prime")
@pytest.mark.parametrize("activation", sto.ACTIVATIONS)
@pytest.mark.parametrize(("d", "sigma_U"), [(2, 0.0), (5, 0.1), (4, 1.0)])
def test_kernel_matches_adaptive_quadrature(activation, d, sigma_U):
    """Closed forms and Gauss-Hermite against scipy's adaptive 2-D quadrature (an independent
    integrator, asked for 1e-13): the 1e-10 accuracy the docstring promises."""
    t = np.array([-1.0, -0.4, 0.3, 0.9, 1.0])
    ref = _reference(activation, d, sigma_U, t)
    dref = _reference(activation, d, sigma_U, t, derivative=True)
    k = sto.kappa(t, activation, d=d, sigma_U=sigma_U, sigma_W=0.2)
    dk = sto.kappa_prime(t, activation, d=d, sigma_U=sigma_U)
    np.testing.assert_allclose(k, np.array(ref) + 0.04, atol=1e-10, rtol=0)
    if activation == "relu":
        # the step function makes 2-D quadrature slow to converge at t = +-1 (a kink on the
        # diagonal); compare there only where the integrand is smooth across the domain
        np.testing.assert_allclose(dk[1:-1], dref[1:-1], atol=1e-8, rtol=0)
    else:
        np.testing.assert_allclose(dk, dref, atol=1e-10, rtol=0)


@pytest.mark.statement("sto-prop-kernel")
@pytest.mark.parametrize("activation", sto.ACTIVATIONS)
@pytest.mark.parametrize("sigma_U", [1e-2, 1e-1, 1.0, 10.0, 30.0, 100.0])
def test_kernel_is_accurate_for_wide_pre_activations(activation, sigma_U):
    """Over sigma_U in [1e-2, 1e2] (pre-activations far wider than the bend of the activation,
    where fixed Gauss-Hermite rules agree on a wrong value) kappa and kappa' match the adaptive
    2-D quadrature to 1e-6 relative: the reference is asked for 1e-13, the library's adaptive
    rule for 1e-12, so 1e-6 leaves six digits of margin for the references' error estimates."""
    d, t = 5, np.array([-0.4, 0.9])
    k = sto.kappa(t, activation, d=d, sigma_U=sigma_U)
    dk = sto.kappa_prime(t, activation, d=d, sigma_U=sigma_U)
    np.testing.assert_allclose(k, _reference(activation, d, sigma_U, t), rtol=1e-6)
    if activation != "relu":  # the ReLU step derivative is checked in the closed-form tests
        np.testing.assert_allclose(dk, _reference(activation, d, sigma_U, t, True), rtol=1e-6)


@pytest.mark.parametrize("activation", ["tanh", "sigmoid", "erf"])
def test_bounded_kernels_are_finite_at_any_bias(activation):
    """A bounded activation: kappa -> (f(inf)^2 + f(-inf)^2) / 2 as sigma_U -> inf, and
    kappa'(t) ~ C / sigma_U (the bend of f is hit with probability ~ 1/sigma_U): at 1e100 and
    1e200 the kernel is its limit to rounding and sigma_U kappa' is the same constant."""
    limit = {"tanh": 1.0, "sigmoid": 0.5, "erf": 1.0}[activation]
    t = np.array([-0.5, 0.5])
    scaled = []
    for s in (1e100, 1e200):
        np.testing.assert_allclose(sto.kappa(t, activation, d=5, sigma_U=s), limit, rtol=1e-14)
        scaled.append(s * sto.kappa_prime(t, activation, d=5, sigma_U=s))
    # the correction to C / sigma_U is O(1 / sigma_U^2): the two agree to the 1e-12 rule
    np.testing.assert_allclose(scaled[0], scaled[1], rtol=1e-9)
    assert np.all(scaled[0] > 0)


@pytest.mark.parametrize("activation", ["relu", "silu"])
def test_growing_kernels_beyond_float64_raise(activation):
    """ReLU and SiLU kernels grow like sigma_U^2 / 2: at 1e200 not representable, said so."""
    with pytest.raises(FloatingPointError, match="kernel kappa"):
        sto.kappa(0.5, activation, d=5, sigma_U=1e200)
    with pytest.raises(FloatingPointError, match="kernel kappa"):
        sto.kappa(0.5, "tanh", d=5, sigma_W=1e200)
    # the derivative tends to 1 / (2d) and stays finite
    np.testing.assert_allclose(sto.kappa_prime(0.5, activation, d=5, sigma_U=1e200), 0.1, rtol=1e-9)


@pytest.mark.statement("sto-prop-kernel")
@pytest.mark.statement("sto-lem-kappa-prime")
@pytest.mark.parametrize("activation", sto.ACTIVATIONS)
def test_kernel_derivative_is_the_derivative(activation):
    """Price's formula against a central difference of kappa itself."""
    t = np.linspace(-0.9, 0.9, 7)
    kw = {"d": 3, "sigma_U": 0.4, "sigma_W": 0.5}
    step = 1e-5
    fd = (sto.kappa(t + step, activation, **kw) - sto.kappa(t - step, activation, **kw)) / (
        2 * step
    )
    # central difference: O(step^2 kappa''') truncation plus O(1e-16 / step) rounding, < 1e-9
    np.testing.assert_allclose(sto.kappa_prime(t, activation, **kw), fd, atol=1e-9)


@pytest.mark.statement("sto-lem-kappa-prime")
@pytest.mark.parametrize("activation", sto.ACTIVATIONS)
@pytest.mark.parametrize(("d", "sigma_U"), [(5, 0.0), (64, 0.1), (128, 0.0)])
def test_lemma_4_2_kappa_prime_at_one(activation, d, sigma_U):
    """kappa'(1) = (1/d) E[s'(X / sqrt(d) + s_U b)^2], a 1-D integral (adaptive quad), equals the
    limit t -> 1- of Price's formula (the kernel at t = 1 - 1e-9, within the O(1e-9) slope)."""
    from scipy import integrate

    s = np.sqrt(1 / d + sigma_U**2)
    dens = lambda z: np.exp(-(z**2) / 2) / np.sqrt(2 * np.pi)  # noqa: E731
    # the integrand is continuous for every activation (ReLU's derivative squared is a step)
    one_d = (
        integrate.quad(
            lambda z: DSIGMA[activation](s * z) ** 2 * dens(z),
            -40,
            40,
            points=[0.0],
            epsabs=1e-14,
            limit=200,
        )[0]
        / d
    )
    at_one = float(sto.kappa_prime(1.0, activation, d=d, sigma_U=sigma_U))
    np.testing.assert_allclose(at_one, one_d, rtol=1e-10, atol=1e-14)
    near = float(sto.kappa_prime(1 - 1e-9, activation, d=d, sigma_U=sigma_U))
    # ReLU: kappa'(t) - kappa'(1) ~ sqrt(1 - t) / (pi d) (arcsin near 1); smooth ones ~ (1 - t)
    assert abs(near - at_one) < (1e-4 if activation == "relu" else 1e-8)


#: Table 1 of the paper, as printed (three significant digits): (activation, d, sigma) ->
#: kappa(1), kappa'(1); sigma_U = sigma_W = sigma.
TABLE_1 = {
    ("relu", 5, 0.0): (0.1, 0.1),
    ("relu", 64, 0.1): (2.28e-2, 7.81e-3),
    ("sigmoid", 64, 0.0): (0.251, 9.69e-4),
    ("tanh", 128, 0.0): (7.69e-3, 7.69e-3),
    ("silu", 128, 0.0): (1.96e-3, 1.97e-3),
}


@pytest.mark.statement("sto-lem-kappa-prime")
@pytest.mark.parametrize("key", list(TABLE_1))
def test_table_1_kernel_values(key):
    activation, d, sigma = key
    k1 = float(sto.kappa(1.0, activation, d=d, sigma_U=sigma, sigma_W=sigma))
    dk1 = float(sto.kappa_prime(1.0, activation, d=d, sigma_U=sigma, sigma_W=sigma))
    # printed to three significant digits: half a unit of the third digit
    for value, printed in ((k1, TABLE_1[key][0]), (dk1, TABLE_1[key][1])):
        assert abs(value - printed) <= 0.5 * 10 ** (np.floor(np.log10(printed)) - 2) * 1.0001


@pytest.mark.statement("sto-lem-kappa-prime")
@given(st.integers(2, 200), st.floats(0.0, 2.0), st.floats(0.0, 2.0))
@settings(max_examples=30, deadline=None)
def test_relu_closed_forms_of_proposition_1_5(d, sigma_U, sigma_W):
    """ReLU: kappa(1) = (1/d + s_U^2) / 2 + s_W^2 and kappa'(1) = 1 / (2d), to rounding."""
    k1 = sto.kappa(1.0, "relu", d=d, sigma_U=sigma_U, sigma_W=sigma_W)
    dk1 = sto.kappa_prime(1.0, "relu", d=d, sigma_U=sigma_U, sigma_W=sigma_W)
    np.testing.assert_allclose(k1, 0.5 * (1 / d + sigma_U**2) + sigma_W**2, rtol=1e-14)
    np.testing.assert_allclose(dk1, 1 / (2 * d), rtol=1e-14)


@pytest.mark.statement("sto-prop-kernel")
@given(
    st.sampled_from(sto.ACTIVATIONS),
    st.floats(0.0, 1.0),
    st.lists(st.floats(-1.0, 1.0), min_size=15, max_size=15),
)
@settings(max_examples=30, deadline=None)
def test_kernel_matrix_is_positive_semidefinite(activation, sigma, coords):
    """A covariance: kappa(<x_i, x_j>) is PSD for any points of the sphere."""
    X = np.reshape(coords, (5, 3)) + 1e-3 * np.arange(15).reshape(5, 3)
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    K = sto.kappa(np.clip(X @ X.T, -1, 1), activation, d=3, sigma_U=sigma, sigma_W=sigma)
    np.testing.assert_allclose(K, K.T, atol=1e-14)
    # eigenvalues: the 1e-13 quadrature error of the entries, relative to the largest
    assert np.linalg.eigvalsh(K).min() >= -1e-10 * max(1.0, np.abs(K).max())


@pytest.mark.parametrize("activation", ["silu", "sigmoid", "tanh"])
def test_simulation_interpolant_matches_the_kernel(activation):
    t = np.linspace(-1, 1, 1001)
    f = _kernels._interpolant(activation, 5, 0.1, 0.1)
    # Chebyshev coefficients below 1e-13 of their sum: the interpolant within ~1e-12
    np.testing.assert_allclose(
        f(t), sto.kappa(t, activation, d=5, sigma_U=0.1, sigma_W=0.1), atol=1e-11
    )


def test_kernel_bad_arguments():
    with pytest.raises(ValueError, match="`activation`"):
        sto.kappa(0.5, "gelu", d=3)
    with pytest.raises(ValueError, match="`t`"):
        sto.kappa(1.5, "relu", d=3)
    with pytest.raises(ValueError, match="`d`"):
        sto.kappa(0.5, "relu", d=1)
    with pytest.raises(ValueError, match="`sigma_U`"):
        sto.kappa_prime(0.5, "relu", d=3, sigma_U=-1.0)


# --------------------------------------------------------------------------------------------
# the discrete model


@pytest.mark.statement("sto-prop-kernel")
@pytest.mark.parametrize(("activation", "width"), [("relu", 1), ("tanh", 3), ("silu", None)])
def test_mlp_noise_covariance_holds_at_every_width(activation, width):
    """E[G(x) G(y)^T] = kappa(<x, y>) I_d for an MLP of any width, biases included."""
    d, draws = 3, 100_000
    noise = sto.MLPNoise(activation, width=width, sigma_U=0.5, sigma_W=0.3)
    x, y = np.eye(d)[0], np.array([0.6, 0.8, 0.0])
    g = noise.sample(np.broadcast_to(np.stack([x, y]), (draws, 2, d)), rng=5)
    cov = np.einsum("pa,pb->pab", g[:, 0], g[:, 1])
    se = cov.std(axis=0) / np.sqrt(draws)
    target = float(noise.kappa(0.6, d=d)) * np.eye(d)
    # 4 SE: nine entries compared
    assert np.all(np.abs(cov.mean(axis=0) - target) < 4 * se)


def test_attention_drift_matches_the_attention_module():
    """softmax_j <Q x_i, K x_j> V x_j: the attention module with A = K^T Q and beta = 1."""
    rng = np.random.default_rng(0)
    X = uniform_sphere(7, 4, rng=rng)
    Q, K, V = rng.standard_normal((3, 4, 4))
    model = sto.StochasticTransformer(sto.MLPNoise(), Q=Q, K=K, V=V)
    A, Vm = model.matrices(4)
    ours = _model._attention_drift(X[None], A, Vm)[0]
    S = (X @ Q.T) @ (X @ K.T).T
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ours, P @ X @ V.T, atol=1e-12)
    np.testing.assert_allclose(ours, Softmax(K.T @ Q, V).velocity(X), atol=1e-12)
    # a system larger than one tile goes through the row-blocked kernel: the same numbers
    Xb = uniform_sphere(200, 4, rng=rng)
    np.testing.assert_allclose(
        _model._attention_drift(Xb[None], A, Vm)[0], Softmax(A, Vm).velocity(Xb), atol=1e-12
    )


def test_layer_is_equation_1_1():
    """One layer against a direct transcription of eq. (1.1) with the same weights."""
    rng = np.random.default_rng(3)
    d, n, m, h = 4, 6, 300, 0.05  # n m > TILE_ELEMENTS? no: small path; tiled below
    X = uniform_sphere(n, d, rng=rng)
    V = -np.eye(d)
    model = sto.StochasticTransformer(sto.MLPNoise("silu", width=m, sigma_U=0.2, sigma_W=0.1), V=V)
    res = sto.simulate(model, X, T=h, L=1, rng=7)
    g = np.random.default_rng(7)
    U, bU, W, bW = _mlp._draw_weights(model.noise, 1, d, g)
    S = X @ X.T
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    Y = X + h * (P @ X) @ V.T
    Y /= np.linalg.norm(Y, axis=1, keepdims=True)
    G = (W[0] @ SIGMA["silu"](U[0] @ Y.T + bU[0][:, None])).T / np.sqrt(m) + bW[0]
    Z = Y + np.sqrt(h) * G
    np.testing.assert_allclose(
        res.X[0, -1], Z / np.linalg.norm(Z, axis=1, keepdims=True), atol=1e-13
    )


@pytest.mark.parametrize("activation", sto.ACTIVATIONS)
def test_tiled_mlp_equals_the_dense_product(activation):
    """n m above TILE_ELEMENTS: the tiled hidden layer gives the dense numbers (to rounding)."""
    rng = np.random.default_rng(4)
    d, n, m = 5, 300, 700
    Y = uniform_sphere(n, d, rng=rng)[None]
    noise = sto.MLPNoise(activation, width=m, sigma_U=0.3, sigma_W=0.2)
    U, bU, W, bW = _mlp._draw_weights(noise, 1, d, rng)
    tiled = _mlp._mlp(activation, Y, U, bU, W, bW)
    dense = (W[0] @ SIGMA[activation](U[0] @ Y[0].T + bU[0][:, None])).T / np.sqrt(m) + bW[0]
    np.testing.assert_allclose(tiled[0], dense, atol=1e-12)


@pytest.mark.parametrize(("activation", "width"), [("erf", None), ("tanh", 5), ("relu", 5)])
def test_tokens_stay_on_the_sphere_and_runs_are_reproducible(activation, width):
    model = sto.StochasticTransformer(sto.MLPNoise(activation, width=width, sigma_U=0.1))
    X0 = uniform_sphere(6, 4, rng=2)
    a = sto.simulate(model, X0, T=2.0, L=30, n_paths=5, rng=3)
    b = sto.simulate(model, X0, T=2.0, L=30, n_paths=5, rng=3)
    np.testing.assert_array_equal(a.X, b.X)
    # normalised after every sub-layer: |x| = 1 to rounding
    np.testing.assert_allclose(np.linalg.norm(a.X, axis=-1), 1.0, atol=1e-12)
    assert a.times[-1] == pytest.approx(2.0)
    assert a.status == "completed"


@given(st.permutations(range(5)))
@settings(max_examples=20, deadline=None)
def test_model_is_permutation_equivariant(perm):
    # with a finite width the weights drawn do not depend on the tokens: same seed, same weights
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=6, sigma_W=0.2))
    X0 = uniform_sphere(5, 3, rng=4)
    a = sto.simulate(model, X0, T=1.0, L=8, n_paths=2, rng=9).X
    b = sto.simulate(model, X0[list(perm)], T=1.0, L=8, n_paths=2, rng=9).X
    np.testing.assert_allclose(b, a[:, :, list(perm)], atol=1e-12)


def test_inputs_are_not_modified_and_progress_runs():
    X0 = np.eye(3)
    copy = X0.copy()
    res = sto.simulate(sto.StochasticTransformer(), X0, T=1.0, L=3, rng=0, progress=True)
    np.testing.assert_array_equal(X0, copy)
    assert res.X.shape == (1, 4, 3, 3)


def test_bad_arguments_raise_named_errors():
    model = sto.StochasticTransformer()
    with pytest.raises(ValueError, match="`d` must be at least 2"):
        sto.simulate(model, np.ones((3, 1)), T=1.0, L=4)
    with pytest.raises(ValueError, match="`width`"):
        sto.MLPNoise(width=0)
    with pytest.raises(ValueError, match="`L`"):
        sto.simulate(model, np.eye(3), T=1.0, L=0)
    with pytest.raises(ValueError, match="`activation`"):
        sto.MLPNoise("gelu")
    with pytest.raises(TypeError, match=r"`Y` must be a real array-like; .* complex"):
        sto.MLPNoise(width=8).sample(np.eye(3) * (1 + 0j), rng=0)  # was cast, ComplexWarning
    with pytest.raises(ValueError, match="unit sphere"):
        sto.simulate(model, 2 * np.eye(3), T=1.0, L=4)
    with pytest.raises(ValueError, match="n_paths"):
        sto.simulate(model, np.ones((2, 2, 3)) / np.sqrt(3), T=1.0, L=2, n_paths=3)
    with pytest.raises(TypeError, match="`noise`"):
        sto.StochasticTransformer(noise="relu")
    with pytest.raises(TypeError, match="`model`"):
        sto.simulate("relu", np.eye(3), T=1.0, L=2)
    with pytest.raises(ValueError, match="`method`"):
        sto.simulate_sde(model, np.eye(3), T=1.0, L=2, method="milstein")
    with pytest.raises(ValueError, match="`V`"):
        sto.simulate(sto.StochasticTransformer(V=np.eye(2)), np.eye(3), T=1.0, L=2)


def test_blow_up_is_reported_not_returned_as_nan():
    model = sto.StochasticTransformer(sto.MLPNoise(width=4, sigma_W=1e300))
    with pytest.raises(FloatingPointError, match="layer 1"):
        sto.simulate(model, np.eye(3), T=1.0, L=2, rng=0)


# --------------------------------------------------------------------------------------------
# the limit SDE


@pytest.mark.statement("sto-prop-one-point")
@pytest.mark.parametrize(
    ("simulator", "activation", "width"),
    [("model", "relu", None), ("model", "tanh", 1), ("sde", "erf", None), ("sde", "silu", None)],
)
def test_one_point_motion_is_spherical_brownian_motion(simulator, activation, width):
    """Without attention E<X_t, x_0> = exp(-(d - 1) kappa(1) t / 2), for the model (any width)
    and for the SDE."""
    d, T, L = 4, 2.0, 200
    noise = sto.MLPNoise(activation, width=width, sigma_U=0.5, sigma_W=0.3)
    model = sto.StochasticTransformer(noise, V=np.zeros((d, d)))
    run = sto.simulate if simulator == "model" else sto.simulate_sde
    res = run(model, np.eye(d)[:1], T=T, L=L, n_paths=4000, save_every=50, rng=21)
    corr = res.X[:, :, 0] @ np.eye(d)[0]
    mean, se = corr.mean(axis=0), corr.std(axis=0, ddof=1) / np.sqrt(corr.shape[0])
    predicted = np.exp(-(d - 1) * float(noise.kappa(1.0, d=d)) * res.times / 2)
    # 4 SE over the four saved depths (SE ~ 0.01), plus the O(h) = O(T / L) weak error of the
    # scheme, which a first-order expansion bounds by (d - 1) kappa(1) T h (below 0.01 here)
    bias = (d - 1) * float(noise.kappa(1.0, d=d)) * T * (T / L)
    assert np.all(np.abs(mean - predicted)[1:] <= 4 * se[1:] + bias)


@pytest.mark.statement("sto-prop-empirical-spde")
def test_empirical_measure_has_the_spde_drift_and_common_noise_variance():
    """For f(x) = <a, x> the weak form of the SPDE, at mu = mu^N and without attention, gives
    d<mu, f> = -kappa(1) (d-1)/2 <mu, f> dt + dM with
    d<M> = (1/N^2) sum_ij kappa(u_ij) a^T P_xi P_xj a dt: one short SDE step from a fixed cloud,
    over many paths, has that mean and variance (a common noise: the variance does not shrink
    like 1/N)."""
    d, N, h, paths = 4, 6, 1e-3, 4000
    noise = sto.MLPNoise("tanh", width=None, sigma_U=0.3, sigma_W=0.3)
    model = sto.StochasticTransformer(noise, V=np.zeros((d, d)))
    X0 = uniform_sphere(N, d, rng=5)
    a = np.array([1.0, -0.5, 0.25, 2.0])
    res = sto.simulate_sde(model, X0, T=h, L=1, n_paths=paths, method="euler", rng=6)
    f0 = float(np.mean(X0 @ a))
    incr = np.mean(res.X[:, -1] @ a, axis=-1) - f0
    k1 = float(noise.kappa(1.0, d=d))
    P = np.eye(d)[None] - X0[:, :, None] * X0[:, None, :]
    Pa = P @ a
    rate = float(np.mean(noise.kappa(np.clip(X0 @ X0.T, -1, 1), d=d) * (Pa @ Pa.T)))
    # the variance: relative SE sqrt(2 / paths) ~ 2.2 %, so 5 SE, plus an O(h) bias
    np.testing.assert_allclose(incr.var(ddof=1) / h, rate, rtol=5 * np.sqrt(2 / paths) + 0.01)
    # the mean: over one step of h = 1e-3 the drift (4e-4) is below the SE of the increment
    # (3.5e-4), so it is measured over L steps instead: the Euler noise is centred given the
    # tokens, so E<mu_L, a> = (1 - h kappa(1) (d-1)/2)^L <mu_0, a> exactly, within 4 SE
    # (SE ~ 0.02 against 0.5 between this and a drift doubled, halved or of the wrong sign)
    Y0 = X0 + 2 * a / np.linalg.norm(a)  # a cloud with <mu_0, a> of order |a|
    Y0 /= np.linalg.norm(Y0, axis=1, keepdims=True)
    T, L = 2.0, 50
    run = sto.simulate_sde(model, Y0, T=T, L=L, n_paths=2000, method="euler", rng=7)
    est = sto.mc_estimate(np.mean(run.X[:, -1] @ a, axis=-1))
    predicted = (1 - T / L * k1 * (d - 1) / 2) ** L * float(np.mean(Y0 @ a))
    assert abs(float(est.mean) - predicted) < 4 * float(est.stderr)
    # common noise: the variance is of order one in N, far above the independent-noise
    # value kappa(1) (1/N^2) sum_i |P_xi a|^2
    independent = k1 * float(np.mean(np.sum(Pa**2, axis=-1))) / N
    assert rate > 2 * independent


@pytest.mark.statement("sto-lem-norm")
def test_radial_drift_cancels_the_ito_correction():
    """Plain Euler-Maruyama: E|X_T|^2 - 1 = O(h) with the drift -kappa (d-1)/2 x, against
    (d - 1) kappa T without it (the Itô correction the radial drift removes)."""
    d, T, L = 5, 1.0, 400
    noise = sto.MLPNoise("tanh", width=None, sigma_U=0.3, sigma_W=0.3)
    model = sto.StochasticTransformer(noise)
    res = sto.simulate_sde(
        model,
        uniform_sphere(3, d, rng=0),
        T=T,
        L=L,
        n_paths=2000,
        method="euler",
        rng=1,
        save_every=L,
    )
    sq = np.sum(res.X[:, -1] ** 2, axis=-1).ravel()
    k1 = float(noise.kappa(1.0, d=d))
    # each step adds h^2 |drift|^2 + O(h^2) to E|X|^2: a total O(h) = 1/400, and the SE ~ 1e-3
    assert abs(sq.mean() - 1.0) < 4 * sq.std() / np.sqrt(sq.size) + 5 * k1 * d * T / L
    assert (d - 1) * k1 * T > 50 * abs(sq.mean() - 1.0)  # the correction it cancels is visible


# --------------------------------------------------------------------------------------------
# the expansion of the layer norm, the rates of the limits


@pytest.mark.statement("sto-lem-ln")
@given(
    st.lists(st.floats(-1, 1), min_size=4, max_size=4),
    st.lists(st.floats(-1, 1), min_size=4, max_size=4),
    st.floats(1e-3, 0.3),
)
@settings(max_examples=50, deadline=None)
def test_lemma_a1_remainder_bounds(v, w, eps):
    v = np.array(v) + np.array([1e-3, 0, 0, 0])
    v /= np.linalg.norm(v)
    w = eps * np.array(w)
    t = np.linspace(0, 1, 201)
    lo = np.min(np.linalg.norm(v[None] + t[:, None] * w[None], axis=1))
    exact = (v + w) / np.linalg.norm(v + w)
    Pw = w - (w @ v) * v
    R1 = exact - (v + Pw)
    R2 = exact - (v + Pw - (v @ w) * Pw - 0.5 * (Pw @ Pw) * v)
    # the lemma's constants, plus rounding (1e-15)
    assert np.linalg.norm(R1) <= 3 * (w @ w) / lo**2 + 1e-15
    assert np.linalg.norm(R2) <= 6 * np.linalg.norm(w) ** 3 / lo**3 + 1e-15


@pytest.mark.statement("sto-lem-ln")
def test_lemma_a1_orders():
    v, w = np.array([0.0, 0.6, 0.8]), np.array([0.5, -0.2, 0.4])
    scales = np.geomspace(1e-1, 1e-3, 5)
    # the remainders are exactly of order 2 and 3 (their leading coefficients do not vanish for
    # this w): the slopes are 2 and 3 up to the O(eps) next term, 0.05 at eps <= 0.1
    assert abs(sto.layer_norm_remainder(v, w, scales, order=1).slope - 2) < 0.05
    assert abs(sto.layer_norm_remainder(v, w, scales, order=2).slope - 3) < 0.05


@pytest.mark.statement("sto-lem-one-layer")
@pytest.mark.parametrize(("activation", "attention_on"), [("relu", True), ("silu", False)])
def test_one_layer_is_an_euler_maruyama_step_up_to_dt_three_halves(activation, attention_on):
    # Lemma 2.6 / 2.7: R = O(dt^{3/2}) for each draw of the MLP, so E|R|^2 has slope 3 against
    # dt. The next term of R is O(dt^2), a relative O(sqrt dt) <= 0.1 correction to |R|^2 at
    # dt <= 1e-2: the fitted slope is 3 up to 0.05. A wrong sign of either O(dt) term of the
    # expansion would leave an O(dt) remainder, slope 2.
    d = 5
    X = uniform_sphere(16, d, rng=20)
    noise = sto.MLPNoise(activation, width=64, sigma_U=0.2, sigma_W=0.1)
    model = sto.StochasticTransformer(noise, V=None if attention_on else np.zeros((d, d)))
    study = sto.layer_remainder(model, X, np.geomspace(1e-2, 1e-5, 7), n_draws=50, rng=21)
    assert abs(study.slope - 3) < 0.05
    # the bound holds path by path: |R|^2 / dt^3 is bounded over the steps (within a factor 2)
    scaled = study.mean / study.values**3
    assert scaled.max() < 2 * scaled.min()


def _no_growth(sizes, mean, stderr, label):
    """The errors at the larger sizes exceed the error at the smallest by less than three
    standard errors of the difference (independent runs, so the standard errors add in
    quadrature): an error growing with the size fails it, an error bounded by a constant
    independent of the size passes, up to a one-sided false alarm of ~0.1 % per comparison."""
    for k in range(1, len(mean)):
        slack = 3 * np.hypot(stderr[k], stderr[0])
        assert mean[k] - mean[0] < slack, (label, sizes, mean)


@pytest.mark.statement("sto-lem-one-layer")
def test_one_layer_remainder_constant_does_not_grow_with_tokens_or_width():
    # The lemma's c in E|R^i|^2 <= c dt^3 is independent of the width m, and the remainder of a
    # token sees the N others only through Delta t Attn, bounded by |V| whatever N: so
    # E|R|^2 / dt^3 (mean over the tokens) must not grow with N = 4, 16, 64 (m = 64) nor with
    # m = 8, 64, 512 (N = 16). Fresh uniform tokens for each of 2000 MLP draws, so the standard
    # error (3-8 %, from 1/sqrt(draws)) covers both; measured 0.22, 0.18, 0.16 against N and
    # 0.48, 0.18, 0.16 against m (a small width has heavier tails: G^m is Gaussian given its
    # hidden units, a scale mixture). An error of order N^(1/4) (m^(1/4)) would grow 2 (2.8)
    # fold; an attention summed over the keys instead of averaged grows it 10-fold in N.
    d, draws, dt = 5, 2000, 1e-3

    def scaled(N, m, seed):
        X = uniform_sphere(draws * N, d, rng=seed).reshape(draws, N, d)
        model = sto.StochasticTransformer(sto.MLPNoise("relu", width=m, sigma_U=0.2, sigma_W=0.1))
        study = sto.layer_remainder(model, X, [1e-2, dt], n_draws=draws, rng=seed + 1)
        return study.mean[1] / dt**3, study.stderr[1] / dt**3

    for label, runs in (
        ("N", [(N, 64) for N in (4, 16, 64)]),
        ("m", [(16, m) for m in (8, 64, 512)]),
    ):
        values = [scaled(N, m, 100 + 10 * k) for k, (N, m) in enumerate(runs)]
        mean, stderr = (np.array(v) for v in zip(*values, strict=True))
        sizes = np.array([run[0] if label == "N" else run[1] for run in runs])
        _no_growth(sizes, mean, stderr, label)


def test_layer_remainder_bad_arguments():
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None))
    with pytest.raises(ValueError, match="finite width"):
        sto.layer_remainder(model, np.eye(3), [1e-2, 1e-3])
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=4))
    with pytest.raises(ValueError, match="`steps`"):
        sto.layer_remainder(model, np.eye(3), [1e-2])
    with pytest.raises(TypeError, match="`model`"):
        sto.layer_remainder(sto.MLPNoise(), np.eye(3), [1e-2, 1e-3])
    # |R| ~ dt^(3/2) = 3e-17 at dt = 1e-11, below the rounding of the tokens: the slope through
    # such values was 1.6 or -0.1 (for 3); refused
    model = sto.StochasticTransformer(sto.MLPNoise("tanh", width=16, sigma_U=0.1, sigma_W=0.1))
    for steps in ([1e-10, 1e-11], [1e-11, 1e-12]):
        with pytest.raises(ValueError, match="vanished to rounding"):
            sto.layer_remainder(model, np.eye(3), steps, n_draws=4, rng=0)


@pytest.mark.statement("sto-thm-deep-wide")
@pytest.mark.statement("sto-prop-grid")
def test_depth_rate_of_theorem_1_1_and_remark_2_4():
    X0 = uniform_sphere(4, 3, rng=0)
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None))
    err = sto.deep_limit_error(
        model, X0, T=1.0, depths=[8, 16, 32, 64], L_ref=512, n_paths=100, rng=1
    )
    sup = err.depth_study(None)
    grid = err.depth_study(None, grid_times=True)
    # Theorem 1.1 bounds the sup error by c log L / L: against that rate the slope is at least
    # 1 (up to the ~0.1 error of a slope fitted to four means with ~5% standard errors)
    assert sup.slope >= 0.85
    # Remark 2.4: at layer times the rate is 1/L, and Euler-Maruyama's strong order 1/2 for
    # multiplicative noise makes it sharp: slope 1 against 1/L, +-0.25 (the SE of the slope
    # and the reference's own error at L_ref = 8 L)
    assert 0.75 <= grid.slope <= 1.25
    assert np.all(err.sup >= err.grid)


@pytest.mark.statement("sto-prop-grid")
def test_grid_error_constant_does_not_grow_with_tokens_or_width():
    # At infinite width the bound at the layer times is c_T / L with c_T independent of N: the
    # error at L = 8 must not grow with N = 2, 8, 32. At finite width it is c_{N,T}(1/L + 1/m),
    # a constant independent of m, so at fixed N and L the error must not grow with m = 4, 16,
    # 64, oo either (it falls: the width part shrinks). 200 paths, fresh uniform tokens on
    # each, standard errors 4-7 % (1/sqrt(paths)); measured 0.017, 0.016, 0.016 against N and
    # 0.21, 0.068, 0.027, 0.014 against m. An error growing like N^(1/4) would double; an
    # attention summed over the keys grows it 20-fold in N.
    P, L, L_ref = 200, 8, 64
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None))
    by_tokens = []
    for N in (2, 8, 32):
        X0 = uniform_sphere(P * N, 3, rng=N).reshape(P, N, 3)
        err = sto.deep_limit_error(model, X0, T=1.0, depths=[L], L_ref=L_ref, n_paths=P, rng=N + 1)
        by_tokens.append(err.grid[:, 0, 0])
    by_tokens = np.array(by_tokens)
    _no_growth([2, 8, 32], by_tokens.mean(axis=1), by_tokens.std(axis=1, ddof=1) / np.sqrt(P), "N")
    X0 = uniform_sphere(P * 8, 3, rng=40).reshape(P, 8, 3)
    widths = [4, 16, 64, None]
    err = sto.deep_limit_error(
        model, X0, T=1.0, depths=[L], L_ref=L_ref, widths=widths, n_paths=P, rng=41
    )
    grid = err.grid[:, 0, :]
    # the same noise drives every width: correlated errors, so hypot(SE) overstates the noise
    # of a difference and the check is conservative
    _no_growth(widths, grid.mean(axis=0), grid.std(axis=0, ddof=1) / np.sqrt(P), "m")


@pytest.mark.statement("sto-thm-deep-wide")
def test_the_log_of_the_depth_rate_is_the_motion_inside_a_layer():
    # Step 3 of the proof (Lemma 2.9): the SDE moves inside a layer of length T / L by
    # E max_l sup_{t in layer l} (1/N) sum_i |X_t - X_{t_l}|^2 <= c log L / L. The mean over 200
    # paths (SE ~2 %) of that oscillation, for L = 4..64 on one fine path of 2048 steps:
    # L * mean grows (so no bound c / L holds: the log is real), while L * mean / log L does
    # not (the rate log L / L is not exceeded); both by more than 4 SE.
    X0 = uniform_sphere(4, 3, rng=30)
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None))
    res = sto.simulate_sde(model, X0, T=1.0, L=2048, n_paths=200, rng=31)
    X = res.X[:, :-1]
    depths = np.array([4, 8, 16, 32, 64])
    osc = []
    for L in depths:
        start = np.repeat(X[:, :: 2048 // L], 2048 // L, axis=1)  # the token at its layer's start
        osc.append(np.mean(np.sum((X - start) ** 2, axis=-1), axis=-1).max(axis=1))
    osc = np.array(osc).T
    scaled = depths * osc.mean(axis=0)
    se = depths * osc.std(axis=0, ddof=1) / np.sqrt(osc.shape[0])
    assert scaled[-1] - scaled[0] > 4 * np.hypot(se[-1], se[0])
    per_log = scaled / np.log(depths)
    assert per_log[-1] - per_log[0] < 4 * np.hypot(se[-1], se[0]) / np.log(depths[0])


@pytest.mark.statement("sto-thm-deep-wide")
def test_width_rate_of_theorem_1_1():
    X0 = uniform_sphere(4, 3, rng=0)
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None, sigma_U=0.2))
    err = sto.deep_limit_error(
        model,
        X0,
        T=1.0,
        depths=[16],
        L_ref=64,
        widths=[4, 16, 64, 256, None],
        n_paths=60,
        rng=2,
    )
    study = err.width_study(16)
    # the coupling G^m = K_m^(1/2) K^(-1/2) G has E|G^m - G|^2 = d E||K_m^(1/2) - K^(1/2)||_F^2,
    # of order exactly 1/m (the fluctuation of an empirical Gram matrix): slope 1 against 1/m,
    # +-0.25 for the ~10% standard errors of the four means
    assert 0.75 <= study.slope <= 1.25


@pytest.mark.statement("sto-cor-limits")
def test_width_and_depth_limits_commute_for_a_smooth_activation():
    X0 = uniform_sphere(4, 3, rng=3)
    model = sto.StochasticTransformer(sto.MLPNoise("erf", width=None))
    err = sto.deep_limit_error(
        model,
        X0,
        T=1.0,
        depths=[4, 16, 64],
        L_ref=256,
        widths=[2, 16, None],
        n_paths=60,
        rng=4,
    )
    mean = err.sup.mean(axis=0)
    se = err.sup.std(axis=0, ddof=1) / np.sqrt(err.sup.shape[0])
    # both iterated limits go down to the corner (L = 64, m = inf): every row decreases with m
    # and every column with L, by more than 2 SE of the difference (the errors are positively
    # correlated on the shared noise, so this is conservative)
    assert np.all(np.diff(mean, axis=0) < 2 * np.hypot(se[1:], se[:-1]))
    assert np.all(np.diff(mean, axis=1) < 2 * np.hypot(se[:, 1:], se[:, :-1]))
    assert mean[-1, -1] < 0.25 * min(mean[0, -1], mean[-1, 0])


@pytest.mark.statement("sto-prop-spde")
@pytest.mark.statement("sto-cor-limits")
@pytest.mark.parametrize("d", [3, 4, 6])
def test_propagation_of_chaos_is_at_least_as_fast_as_the_bound(d):
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None))
    sizes = [4, 8, 16, 32]
    study = sto.propagation_of_chaos(
        model, d=d, sizes=sizes, N_ref=256, T=0.5, L=4, n_paths=8, n_times=2, rng=5
    )
    bound = loglog_slope(sizes, sto.chaos_rate(sizes, d))
    # Proposition 1.2 is a bound: the measured slope is at most the bound's (-1/2 for d = 3,
    # that of N^{-1/2} log(1 + N) over these N, about -0.13, for d = 4, -1/3 for d = 6) plus 0.1
    # for the ~10% standard errors of the four means; the sphere has dimension d - 1, so it is
    # steeper in fact
    assert study.slope <= bound + 0.1
    assert np.all(np.diff(study.mean) < 0)
    # the maximum over times includes t = 0, so it is at least the initial error, path by path
    assert np.all(study.initial.mean <= study.mean) and np.all(study.ratio.mean >= 1)
    # the stability estimate: the dynamics multiplies the initial error by a factor bounded in
    # N (log-log slope ~0); an error of the dynamics that did not decay in N would make the
    # factor grow like 1 / E W_2^2(0). Half of that slope separates the two
    ratio_slope = loglog_slope(sizes, study.ratio.mean)
    assert ratio_slope < 0.5 * abs(loglog_slope(sizes, study.initial.mean))


# --------------------------------------------------------------------------------------------
# larger runs of the chapter's checks (`make test-fullsize`, minutes)


@pytest.mark.fullsize
@pytest.mark.statement("sto-thm-deep-wide")
@pytest.mark.statement("sto-prop-grid")
def test_fullsize_depth_rate():
    X0 = uniform_sphere(8, 4, rng=10)
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None, sigma_U=0.1, sigma_W=0.1))
    err = sto.deep_limit_error(
        model, X0, T=1.0, depths=[8, 16, 32, 64, 128], L_ref=2048, n_paths=200, rng=11
    )
    # five depths over four octaves, 200 paths (SE ~ 5 % per mean): the slopes to about +-0.1
    assert err.depth_study(None).slope >= 0.9
    assert 0.85 <= err.depth_study(None, grid_times=True).slope <= 1.15


@pytest.mark.fullsize
@pytest.mark.statement("sto-thm-deep-wide")
def test_fullsize_width_rate():
    X0 = uniform_sphere(8, 4, rng=12)
    model = sto.StochasticTransformer(sto.MLPNoise("silu", width=None, sigma_U=0.1, sigma_W=0.1))
    err = sto.deep_limit_error(
        model,
        X0,
        T=1.0,
        depths=[64],
        L_ref=256,
        widths=[16, 64, 256, 1024, 4096, None],
        n_paths=300,
        rng=13,
    )
    assert 0.85 <= err.width_study(64).slope <= 1.15


@pytest.mark.fullsize
@pytest.mark.statement("sto-prop-spde")
@pytest.mark.parametrize("d", [3, 4, 6])
def test_fullsize_propagation_of_chaos(d):
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None))
    sizes = [16, 32, 64, 128]
    study = sto.propagation_of_chaos(
        model, d=d, sizes=sizes, N_ref=1024, T=1.0, L=8, n_paths=12, n_times=2, rng=14
    )
    bound = loglog_slope(sizes, sto.chaos_rate(sizes, d))
    # a bound: the measured slope at most the bound's, with 0.1 for the SE of four means
    assert study.slope <= bound + 0.1
    assert np.all(np.diff(study.mean) < 0)


# --------------------------------------------------------------------------------------------
# extreme arguments: finite where the answer is, named errors where it is not


def test_transformer_checks_its_matrices_at_construction():
    Q = np.eye(3)
    for bad in (np.nan, np.inf):
        M = np.eye(3)
        M[0, 1] = bad
        for name in ("Q", "K", "V"):
            with pytest.raises(ValueError, match=f"`{name}`"):
                sto.StochasticTransformer(sto.MLPNoise(), **{name: M})
    with pytest.raises(ValueError, match="same size"):
        sto.StochasticTransformer(sto.MLPNoise(), Q=np.eye(3), V=np.eye(2))
    model = sto.StochasticTransformer(sto.MLPNoise(), Q=Q)
    Q[0, 0] = 5.0  # the model holds its own copy
    np.testing.assert_array_equal(model.matrices(3)[0], np.eye(3))


def test_mc_estimate_is_scale_free():
    """Mean and standard error are homogeneous of degree one: at 1e200 and 1e-200 they are the
    unit-scale ones times the factor, to the rounding of the scaled samples (1e-14)."""
    values = np.random.default_rng(2).standard_normal((50, 3))
    ref = sto.mc_estimate(values)
    for k in (1e200, 1e-200):
        est = sto.mc_estimate(k * values)
        np.testing.assert_allclose(est.mean, k * ref.mean, rtol=1e-13)
        np.testing.assert_allclose(est.stderr, k * ref.stderr, rtol=1e-13)
    huge = sto.mc_estimate([1e308, -1e308, 1e308])  # deviations whose squares overflow
    assert np.isfinite(huge.stderr) and huge.mean == pytest.approx(1e308 / 3)


def test_layer_norm_remainder_names_its_arguments():
    v, w = [1.0, 0.0], [0.3, 0.4]
    with pytest.raises(ValueError, match="`w` must be a non-zero"):
        sto.layer_norm_remainder(v, [0.0, 0.0], [1e-2, 1e-3])
    for bad in (1e-2, [1e-2], [[1e-2, 1e-3]], [1e-2, -1e-3]):
        with pytest.raises(ValueError, match="`scales`"):
            sto.layer_norm_remainder(v, w, bad)
    with pytest.raises(ValueError, match="vanished to rounding"):
        sto.layer_norm_remainder(v, [3e-200, 4e-200], [1e-2, 1e-3])
    # remainders of the size of the rounding (|R_2| ~ |eps w|^3 = 1e-18 at eps = 1e-6), not
    # zero, gave slopes -1.4 and 0 (for 3): refused below 1e3 roundings
    for scales in ([1e-5, 1e-6], [1e-6, 1e-7]):
        with pytest.raises(ValueError, match="vanished to rounding"):
            sto.layer_norm_remainder(v, [0.3, 0.4], scales, order=2)
    # the second-order remainder ~ |eps w|^3 / 2 is not representable at |eps w| = 1e198
    with pytest.raises(FloatingPointError, match="layer-norm expansion"):
        sto.layer_norm_remainder(v, [3e200, 4e200], [1e-2, 1e-3])
    # |v + eps w| itself overflows: numpy before 2.3 returns inf from that norm without a
    # floating-point error (`make test-oldest`), which once surfaced as an error about `y`
    with pytest.raises(FloatingPointError, match="layer-norm expansion"):
        sto.layer_norm_remainder([1.0, 0.0, 0.0], [1e308, 1.0, 0.5], [0.1, 0.05, 0.025])


@pytest.mark.statement("sto-prop-one-point")
def test_one_point_correlation_against_the_relu_closed_form():
    # ReLU with biases: kappa(1) = (1/d + s_U^2) / 2 + s_W^2 (Lemma 4.2), so the correlation
    # is exp(-(d - 1) kappa(1) t / 2), to rounding
    d, s = 5, 0.3
    times = np.linspace(0.0, 3.0, 7)
    noise = sto.MLPNoise("relu", sigma_U=s, sigma_W=s)
    kappa1 = 0.5 * (1 / d + s**2) + s**2
    np.testing.assert_allclose(
        sto.one_point_correlation(noise, times, d=d),
        np.exp(-(d - 1) * kappa1 * times / 2),
        rtol=1e-13,
    )
    # a later start time: the correlation with the token at that time
    np.testing.assert_allclose(
        sto.one_point_correlation(noise, times + 2.0, d=d),
        sto.one_point_correlation(noise, times, d=d),
        rtol=1e-13,
    )
    with pytest.raises(TypeError, match="`noise`"):
        sto.one_point_correlation("relu", times, d=d)


def test_kernel_roots_run_with_blas_on_one_thread(monkeypatch):
    """The infinite-width field's Cholesky (and its eigh fallback) run with BLAS held to one
    thread: OpenBLAS's spinning threads made them 300x slower when the other core was busy.
    BLAS gets its threads back afterwards."""
    from threadpoolctl import ThreadpoolController

    blas = ThreadpoolController().select(user_api="blas")
    seen = []
    cholesky, eigh = np.linalg.cholesky, np.linalg.eigh

    def recording(f, fail=False):
        def call(*args, **kwargs):
            seen.append(max(i["num_threads"] for i in blas.info()))
            if fail:
                raise np.linalg.LinAlgError("not positive definite")
            return f(*args, **kwargs)

        return call

    Y = uniform_sphere(40, 3, rng=np.random.default_rng(3))[None]
    K = _mlp._kernel_matrix(sto.MLPNoise("relu", width=None), Y)
    with blas.limit(limits=2):  # BLAS on two threads, even where the environment pins one
        monkeypatch.setattr(np.linalg, "cholesky", recording(cholesky))
        R = _mlp._psd_root(K)
        monkeypatch.setattr(np.linalg, "cholesky", recording(cholesky, fail=True))
        monkeypatch.setattr(np.linalg, "eigh", recording(eigh))
        R_eig = _mlp._psd_root(K)
        assert max(i["num_threads"] for i in blas.info()) == 2
    assert seen == [1, 1, 1]
    # the roots' residuals: the backward errors of Cholesky and
    # eigh, n eps ||K|| with ||K|| <= n max K_ii (plus the clipped negative rounding, as small)
    n, scale = K.shape[-1], np.max(np.diagonal(K[0]))
    rounding = 4 * n * n * np.finfo(float).eps * scale
    np.testing.assert_allclose(R[0] @ R[0].T, K[0], atol=rounding)
    np.testing.assert_allclose(R_eig[0] @ R_eig[0].T, K[0], atol=rounding)


# -- the infinite-width field at every separation -----------------------------------------------


def _pair_and_others(gap, d=5, seed=0):
    """Tokens x, y with |x - y| = gap (to rounding), and two tokens far from both."""
    rng = np.random.default_rng(seed)
    x, u, a, b = uniform_sphere(4, d, rng=rng)
    v = u - (u @ x) * x
    v /= np.linalg.norm(v)
    half = 2.0 * np.arcsin(gap / 2.0)  # the angle of a chord of length gap
    y = np.cos(half) * x + np.sin(half) * v
    return np.stack([x, y, a, b])


@pytest.mark.parametrize("activation", ["relu", "erf", "tanh", "silu"])
@pytest.mark.parametrize("gap", [1e-4, 1e-6, 1e-8, 1e-12])
def test_field_increment_law_is_exact_at_small_separations(activation, gap):
    # The field is a linear map of the standard normals: with n = d tokens and Z = I the map
    # itself, A, whose A A^T is the covariance the sampler draws from. The increment of the two
    # near tokens must have variance 2 phi(s) = 2 (kappa(1) - kappa(1 - s)), s = |x - y|^2 / 2,
    # per coordinate, which is kappa'(1) |x - y|^2 (1 + O(|x - y|^2)), O(|x - y|) for ReLU,
    # whose kappa is not C^2 at 1 (relative gaps below |x - y| and |x - y|^2 here). The
    # tolerance 1e-9 is the kernel's 1e-10 accuracy with a margin (the gap's own rounding is
    # 1e-15 relative); the jittered factor of before gave 2e-10 kappa(1) at any separation
    # (1e6x the law at 1e-8).
    noise = sto.MLPNoise(activation, width=None)
    Y = _pair_and_others(gap, d=4)[None]
    A = _mlp._gaussian_field(noise, Y, np.eye(4)[None])[0]
    inc = A[0] - A[1]
    x, y = Y[0, 0], Y[0, 1]
    first_order = float(noise.kappa_prime(1.0, d=4)) * np.sum((x - y) ** 2)
    bias = gap if activation == "relu" else gap**2  # |kappa''(1)| / kappa'(1) < 2 here
    np.testing.assert_allclose(inc @ inc, first_order, rtol=1e-9 + bias)
    # and the rest of the covariance is the kernel matrix, to rounding
    np.testing.assert_allclose(A @ A.T, _mlp._kernel_matrix(noise, Y)[0], atol=1e-14)


@pytest.mark.parametrize("activation", ["relu", "erf", "tanh"])
@pytest.mark.parametrize(("sigma_U", "sigma_W"), [(0.0, 0.0), (0.0, 0.3), (0.3, 0.3)])
def test_two_token_field_has_the_kernel_as_its_covariance(activation, sigma_U, sigma_W):
    # Two tokens (the two-point motion) are drawn by the closed form of the tree's law: with
    # n = d = 2 and Z = I the sampler is a linear map A of the standard normals, and A A^T is
    # the covariance it draws, which must be the kernel matrix kappa(<y_i, y_j>) whole: the
    # variances kappa(1) as well as the cross-covariance, on a generic pair, a pair 1e-6 apart
    # and a pair 1e-6 from antipodal (the anchor of sign -1 of an odd field, and only of an odd
    # one: a bias b_W adds sigma_W^2 to kappa, and G(-x) = -G(x) fails). Both sides carry the
    # kernel's 1e-10 accuracy (its Chebyshev interpolant; 2e-11 measured for ReLU next to
    # t = -1, where it is not smooth): 1e-9 with a margin, against entries of order kappa(1).
    noise = sto.MLPNoise(activation, width=None, sigma_U=sigma_U, sigma_W=sigma_W)
    x, u = uniform_sphere(2, 2, rng=np.random.default_rng(4))
    near = np.cos(1e-6) * x + np.sin(1e-6) * np.array([-x[1], x[0]])
    Y = np.stack([np.stack([x, y]) for y in (u, near, -near)])
    A = _mlp._gaussian_field(noise, Y, np.broadcast_to(np.eye(2), Y.shape).copy())
    np.testing.assert_allclose(
        A @ np.swapaxes(A, 1, 2), _mlp._kernel_matrix(noise, Y), rtol=0, atol=1e-9
    )
    if sigma_U == sigma_W == 0.0 and activation != "relu":  # odd: G(-x) = -G(x) exactly
        A = _mlp._gaussian_field(noise, np.stack([x, -x])[None], np.eye(2)[None])[0]
        np.testing.assert_array_equal(A[1], -A[0])


@pytest.mark.parametrize("activation", ["erf", "tanh"])
@pytest.mark.parametrize("gap", [1e-4, 1e-6, 1e-8])
def test_odd_field_increment_law_is_exact_next_to_the_antipode(activation, gap):
    # For an odd field G(-y) = -G(y): a token next to the antipode of another is as close as the
    # pair of test_field_increment_law_is_exact_at_small_separations, and G(x) + G(-y) has the
    # variance 2 phi(|x - y|^2 / 2) = kappa'(1) |x - y|^2 (1 + O(gap^2)) per coordinate, to the
    # kernel's 1e-10 accuracy (1e-9 with a margin). Z = I: the sampler as a linear map.
    noise = sto.MLPNoise(activation, width=None)
    Y = _pair_and_others(gap, d=4)
    x, y = Y[0].copy(), Y[1].copy()
    Y[1] = -y
    A = _mlp._gaussian_field(noise, Y[None], np.eye(4)[None])[0]
    inc = A[0] + A[1]
    first_order = float(noise.kappa_prime(1.0, d=4)) * np.sum((x - y) ** 2)
    np.testing.assert_allclose(inc @ inc, first_order, rtol=1e-9 + gap**2)
    np.testing.assert_allclose(A @ A.T, _mlp._kernel_matrix(noise, Y[None])[0], atol=1e-14)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("gap", [1e-4, 1e-6, 1e-8])
def test_field_increment_variance_monte_carlo(activation, gap):
    # Sampled increments G(x) - G(y) of tokens `gap` apart, 2000 paths x 5 coordinates: their
    # mean square over kappa'(1) |x - y|^2 is 1 + O(gap) (ReLU) or 1 + O(gap^2), and the mean of
    # 10^4 squared normals has a relative standard error sqrt(2 / 10^4) = 0.014: 5 of them
    # leave a 6e-7 chance of a false alarm. The jitter of before gave 1e6 at gap 1e-8.
    noise = sto.MLPNoise(activation, width=None)
    Y = np.broadcast_to(_pair_and_others(gap, d=5, seed=1), (2000, 4, 5))
    G = noise.sample(Y, rng=7)
    inc = G[:, 0] - G[:, 1]
    ratio = np.mean(inc**2) / (
        float(noise.kappa_prime(1.0, d=5)) * np.sum((Y[0, 0] - Y[0, 1]) ** 2)
    )
    assert abs(ratio - 1.0) < 5 * np.sqrt(2.0 / inc.size) + gap, ratio


@pytest.mark.parametrize("activation", ["erf", "tanh"])
def test_odd_field_keeps_antipodal_tokens_antipodal(activation):
    # With an odd activation and no biases G(-x) = -G(x) exactly, at every width; the sampler
    # draws the antipode as the same point with sign -1, so x and -x stay exactly opposite
    # (to the rounding of the layer's own arithmetic, a few eps per layer) over 200 layers.
    d = 5
    rng = np.random.default_rng(3)
    x, a, b = uniform_sphere(3, d, rng=rng)
    model = sto.StochasticTransformer(sto.MLPNoise(activation, width=None), V=np.zeros((d, d)))
    res = sto.simulate(model, np.stack([x, -x, a, b]), T=2.0, L=200, n_paths=4, rng=5)
    assert np.max(np.abs(res.X[:, -1, 0] + res.X[:, -1, 1])) < 1e-14
    G = model.noise.sample(np.stack([x, -x, a, b]), rng=0)
    np.testing.assert_array_equal(G[1], -G[0])


def _three_clusters(diam, d, seed=0):
    """Three far-apart clusters of two tokens each, (a_c, y_c) with |y_c - a_c| = diam, the
    increment pointing towards the next cluster (so that increments in different clusters are
    strongly correlated): rows a_0, y_0, a_1, y_1, a_2, y_2."""
    centres = uniform_sphere(3, d, rng=np.random.default_rng(seed))
    rows = []
    for c in range(3):
        a, b = centres[c], centres[(c + 1) % 3]
        v = b - (b @ a) * a
        v /= np.linalg.norm(v)
        half = 2.0 * np.arcsin(diam / 2.0)
        rows += [a, np.cos(half) * a + np.sin(half) * v]
    return np.stack(rows)


def _exact_increment_covariance(noise, Y, i, j):
    """Cov(G(y_i) - G(a_i), G(y_j) - G(a_j)) per coordinate, a_i = Y[2i], y_i = Y[2i + 1], from
    the tokens' exact rational coordinates: for tanh the kernel's interpolant (the polynomial
    the sampler evaluates, 1e-13 from the kernel) in exact arithmetic, all four terms; for ReLU
    and erf the expansion -gamma kappa'(t) + alpha beta kappa''(t) at t = <a_i, a_j> in the
    exact differences of the half squared distances (its remainder is O(|y - a| / |a_i - a_j|)
    relative, below 1e-5 here), kappa' public and kappa'' its central difference (relative
    error h^2 = 1e-8)."""
    d = Y.shape[1]
    P = [[Fraction(float(x)) for x in row] for row in Y]
    a, y, b, z = P[2 * i], P[2 * i + 1], P[2 * j], P[2 * j + 1]

    def hs(u, v):  # |u - v|^2 / 2, exactly
        return sum((p - q) ** 2 for p, q in zip(u, v, strict=True)) / 2

    if noise.activation == "tanh":
        coef = [Fraction(float(c)) for c in _kernels._chebyshev_fit("tanh", d, 0.0, 0.0).coef]

        def k(s):  # Clenshaw at t = 1 - s
            t, b1, b2 = 1 - s, Fraction(0), Fraction(0)
            for c in reversed(coef[1:]):
                b1, b2 = 2 * t * b1 - b2 + c, b1
            return t * b1 - b2 + coef[0]

        return float(k(hs(y, z)) - k(hs(y, b)) - k(hs(a, z)) + k(hs(a, b)))
    s00 = hs(a, b)
    alpha, beta = hs(y, b) - s00, hs(a, z) - s00
    gamma = hs(y, z) - hs(y, b) - hs(a, z) + s00
    t, h = 1.0 - float(s00), 1e-4
    k1 = float(noise.kappa_prime(t, d=d))
    k2 = float(noise.kappa_prime(t + h, d=d) - noise.kappa_prime(t - h, d=d)) / (2 * h)
    return -float(gamma) * k1 + float(alpha) * float(beta) * k2


@pytest.mark.parametrize("activation", ["relu", "erf", "tanh"])
@pytest.mark.parametrize("diam", [1e-6, 1e-8, 1e-9])
def test_field_increments_in_different_tight_clusters_have_their_exact_covariance(activation, diam):
    # The sampler as a linear map A of the standard normals (Z = I): row differences are the
    # increments, their products the covariances it draws. Against the exact value, in units
    # of the geometric mean of the two variances (a correlation): the values of G are of order
    # sqrt(kappa(1)), so an increment read off them carries 4 eps sqrt(kappa(1) / kappa'(1)) /
    # diam of rounding (1e-6 at 1e-9), and the ReLU / erf reference its expansion's O(diam)
    # remainder. Summing the gaps, as before, gave errors of 2e-4 to 1e-3 in these units at
    # 1e-6, 0.8 to 1.7 at 1e-8 and 70 to 200 at 1e-9 (measured); now at most 2e-7.
    d = 3
    noise = sto.MLPNoise(activation, width=None)
    Y = _three_clusters(diam, d, seed=1)
    A = _mlp._gaussian_field(noise, Y[None], np.eye(6)[None])[0]
    inc = A[1::2] - A[0::2]
    k1, dk1 = float(noise.kappa(1.0, d=d)), float(noise.kappa_prime(1.0, d=d))
    var = dk1 * np.sum((Y[1::2] - Y[0::2]) ** 2, axis=1)
    np.testing.assert_allclose(np.sum(inc**2, axis=1), var, rtol=1e-6 + diam)
    tol = 4 * np.finfo(float).eps * np.sqrt(k1 / dk1) / diam + 10 * diam + 1e-12
    for i, j in ((0, 1), (0, 2), (1, 2)):
        exact = _exact_increment_covariance(noise, Y, i, j) / np.sqrt(var[i] * var[j])
        assert abs(exact) > 0.05  # the check has something to see
        assert abs(inc[i] @ inc[j] / np.sqrt(var[i] * var[j]) - exact) < tol, (i, j)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("diam", [1e-6, 1e-8, 1e-9])
def test_field_cross_cluster_increments_monte_carlo(activation, diam):
    # Sampled increments U, W in two different clusters, standardised by their exact standard
    # deviations, 4000 paths x 3 coordinates: the mean of U W estimates their correlation rho
    # with variance (1 + rho^2) / 12000 (Gaussian products); |z| < 5 leaves a 6e-7 chance of a
    # false alarm per pair. Summing the gaps, as before, failed this check at 1e-8 and 1e-9
    # (measured).
    d = 3
    noise = sto.MLPNoise(activation, width=None)
    Y = _three_clusters(diam, d, seed=1)
    G = noise.sample(np.broadcast_to(Y, (4000, 6, d)), rng=11)
    inc = G[:, 1::2] - G[:, 0::2]
    var = float(noise.kappa_prime(1.0, d=d)) * np.sum((Y[1::2] - Y[0::2]) ** 2, axis=1)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        rho = _exact_increment_covariance(noise, Y, i, j) / np.sqrt(var[i] * var[j])
        prod = inc[:, i] * inc[:, j] / np.sqrt(var[i] * var[j])
        z = (np.mean(prod) - rho) / np.sqrt((1 + rho**2) / prod.size)
        assert abs(z) < 5, (i, j, rho, z)


def test_field_coincident_tokens_share_their_value():
    # Exactly coincident tokens carry the same value of the field (a zero increment).
    Y = np.concatenate([uniform_sphere(3, 4, rng=np.random.default_rng(2))] * 2)
    G = sto.MLPNoise("relu", width=None).sample(Y, rng=1)
    np.testing.assert_array_equal(G[:3], G[3:])


@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("gap", [1e-4, 1e-8])
def test_coupled_width_m_field_has_the_mlp_increment_law_at_small_separations(activation, gap):
    # The width-m field of the deep-limit coupling, drawn given the infinite-width one, is the
    # MLP's field in law: E|G^m(x) - G^m(y)|^2 = 2 (kappa(1) - kappa(<x, y>)) per coordinate,
    # kappa'(1) |x - y|^2 (1 + O(gap)), at every width. 2000 paths x 5 coordinates: a relative
    # standard error sqrt(2 / 10^4) = 0.014, 5 of them a 6e-7 chance of a false alarm. A root of
    # the features' Gram matrix (before) carried a rounding floor of about eps kappa(1) per
    # token: mean squares 4x the law at 1e-8 (measured).
    d, paths = 5, 2000
    noise = sto.MLPNoise(activation, width=8)
    Y = np.ascontiguousarray(np.broadcast_to(_pair_and_others(gap, d=d, seed=2), (paths, 4, d)))
    rng = np.random.default_rng(5)
    G = _mlp._gaussian_field(sto.MLPNoise(activation, width=None), Y, rng.standard_normal(Y.shape))
    Gm = _deep_limit._width_m_field(noise, Y, G, rng)
    inc = Gm[:, 0] - Gm[:, 1]
    law = float(noise.kappa_prime(1.0, d=d)) * np.sum((Y[0, 0] - Y[0, 1]) ** 2)
    ratio = np.mean(inc**2) / law
    assert abs(ratio - 1.0) < 5 * np.sqrt(2.0 / inc.size) + gap, ratio


def test_mc_estimate_is_the_sample_mean_and_scipys_standard_error():
    """The estimate of a sample is its mean and s / sqrt(n) with the unbiased s (ddof = 1), as
    scipy.stats.sem computes it independently. Both are a few roundings of the same sums of
    seven numbers of order one (1e-14 relative); at n = 7 a denominator sqrt(n - 1) or a
    biased s is off by 8%."""
    values = np.random.default_rng(4).standard_normal((7, 3))
    est = sto.mc_estimate(values)
    np.testing.assert_allclose(est.mean, values.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(est.stderr, stats.sem(values, axis=0, ddof=1), rtol=1e-14)
    assert est.samples == 7


@pytest.mark.parametrize(("d", "exponent"), [(2, -0.5), (3, -0.5), (5, -0.4), (8, -0.25)])
def test_chaos_rate_is_the_rate_of_proposition_1_2(d, exponent):
    """r_d(N) = N^{-1/2} for d < 4, N^{-2/d} for d > 4 and N^{-1/2} log(1 + N) at d = 4, to the
    rounding of one power and one logarithm (1e-15 relative). At N = 1 the d = 4 rate is
    log 2, not log 1 = 0: a bound on the distance of one token's law is not zero."""
    N = np.array([1.0, 2.0, 10.0, 1000.0])
    np.testing.assert_allclose(sto.chaos_rate(N, d), N**exponent, rtol=1e-15)
    np.testing.assert_allclose(sto.chaos_rate(N, 4), np.log1p(N) / np.sqrt(N), rtol=1e-15)
    assert sto.chaos_rate(1, 4) == pytest.approx(np.log(2.0), rel=1e-15)


def test_deep_limit_studies_name_their_arguments():
    # depth 1 is a valid depth of the errors, but log L / L vanishes there (the sup study
    # failed inside fit_power_law, naming `x` and `y`); a width or depth not in the grid
    # failed with tuple.index's ValueError or an IndexError
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None))
    err = sto.deep_limit_error(
        model, np.eye(3), T=0.5, depths=[1, 2], L_ref=2, widths=[2, None], n_paths=2, rng=0
    )
    with pytest.raises(ValueError, match=r"depth 1.*grid_times=True"):
        err.depth_study(None)
    assert err.depth_study(None, grid_times=True).values.tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match="`width` must be one of"):
        err.depth_study(7)
    with pytest.raises(ValueError, match="`depth` must be one of"):
        err.width_study(3)


def test_depth_study_uses_the_rate_of_theorem_1_1_and_remark_2_4():
    """The sup study's resolution is Theorem 1.1's ``log L / L``, the grid study's ``1 / L``.

    Both are exact functions of the depths (rtol 1e-15, one rounding), and each study's mean is
    the path mean of the error it reports. The depth-rate test fits a slope >= 0.85, which a
    sup study against ``1 / L`` also passes, so the resolutions are checked here directly.
    """
    X0 = uniform_sphere(3, 3, rng=5)
    model = sto.StochasticTransformer(sto.MLPNoise("relu", width=None))
    L = np.array([2, 4, 8])
    err = sto.deep_limit_error(model, X0, T=0.5, depths=L, L_ref=8, n_paths=3, rng=6)
    sup, grid = err.depth_study(None), err.depth_study(None, grid_times=True)
    np.testing.assert_allclose(sup.values, np.log(L) / L, rtol=1e-15)
    np.testing.assert_allclose(grid.values, 1.0 / L, rtol=1e-15)
    np.testing.assert_allclose(sup.mean, err.sup[:, :, 0].mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(grid.mean, err.grid[:, :, 0].mean(axis=0), rtol=1e-14)
    # grid keeps layer times only: a maximum over fewer times than sup's, so grid <= sup; at
    # L = L_ref every fine step is one, so grid = sup exactly; at L = 2 each layer is frozen
    # for T/2 while the SDE moves, so the largest error falls between layer times and grid
    # < sup on every path (a grid updated at every fine step would equal sup)
    assert np.all(err.grid <= err.sup)
    np.testing.assert_array_equal(err.grid[:, 2], err.sup[:, 2])
    assert np.all(err.grid[:, 0] < err.sup[:, 0])


def test_euler_sde_evaluates_the_noise_kernel_on_the_sphere():
    """``method="euler"``: the field's covariance is kappa at the normalised tokens (§2.1).

    One token and no attention: the scheme is ``X + h (-(d-1)/2 kappa(1) X) + sqrt(h) P_X xi``
    with ``xi = sqrt(kappa(1)) Z`` whatever ``|X|`` (the field lives on the sphere), ``P_X w =
    w - <w, X> X`` at the unnormalised ``X``, and one standard normal array per step from the
    seed. The norms leave 1 after the first step (0.9 to 1.4 here), so a kernel read at
    ``<X, X>`` in place of 1 moves the second step by O(0.05); the reference does the same
    float64 operations on O(1) numbers, so it agrees to rounding (atol 1e-14).
    """
    d, h, L, paths = 3, 0.3, 3, 2
    noise = sto.MLPNoise("erf", width=None)
    model = sto.StochasticTransformer(noise, V=np.zeros((d, d)))
    x0 = np.array([[0.6, 0.0, 0.8]])
    res = sto.simulate_sde(model, x0, T=h * L, L=L, n_paths=paths, method="euler", rng=3)
    rng = np.random.default_rng(3)
    kappa1 = float(noise.kappa(1.0, d=d))
    X = np.broadcast_to(x0, (paths, 1, d)).copy()
    for k in range(L):
        xi = np.sqrt(kappa1) * rng.standard_normal(X.shape)
        Pxi = xi - np.sum(xi * X, axis=-1, keepdims=True) * X
        X = X - h * 0.5 * (d - 1) * kappa1 * X + np.sqrt(h) * Pxi
        np.testing.assert_allclose(res.X[:, k + 1], X, rtol=0, atol=1e-14)
    assert np.all(np.abs(np.linalg.norm(X, axis=-1) - 1) > 0.1)  # they did leave the sphere
