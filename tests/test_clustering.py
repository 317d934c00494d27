"""Long-time clustering (token_dynamics.clustering), against closed forms and simulations."""

import math

import numpy as np
import pytest
from scipy import stats

import token_dynamics as td
from token_dynamics import clustering as cl
from token_dynamics.attention import Softmax, Unnormalised

# -- hemispheres ------------------------------------------------------------------------------


def test_wendel_probability_beyond_the_float_range_of_its_terms():
    # from n ~ 1025 the binomials and 2^(n-1) overflow a float (an OverflowError): the sum is
    # kept in integers. Closed values: n even, d = n/2 gives exactly 1/2 by the symmetry
    # C(n-1, k) = C(n-1, n-1-k); d = n - 1 misses only the last term, 1 - 2^(1-n) = 1.0 in
    # floats; d = 1 gives 2^(1-n), which underflows to 0 beyond n = 1076
    assert cl.wendel_probability(2000, 1000) == 0.5
    assert cl.wendel_probability(1100, 1099) == 1.0
    assert cl.wendel_probability(1100, 1) == 2.0**-1099
    assert cl.wendel_probability(2000, 1) == 0.0


def test_wendel_probability_closed_values():
    # d >= n: always in a hemisphere; d = 2: n / 2^(n-1); d = 1: the two signs agree
    for n in range(1, 8):
        assert cl.wendel_probability(n, n) == 1.0
        assert cl.wendel_probability(n, n + 3) == 1.0
        assert cl.wendel_probability(n, 2) == pytest.approx(min(1.0, n / 2 ** (n - 1)), abs=0)
        assert cl.wendel_probability(n, 1) == 2.0 ** (1 - n)
    # symmetry of the binomial sum: p(n, d) + p(n, n - d) = 1 for 0 < d < n
    for n, d in [(5, 2), (7, 3), (10, 4)]:
        assert cl.wendel_probability(n, d) + cl.wendel_probability(n, n - d) == pytest.approx(1)
    with pytest.raises(ValueError, match="`n`"):
        cl.wendel_probability(0, 3)


@pytest.mark.parametrize(("n", "d"), [(4, 2), (5, 3), (6, 4), (7, 3)])
def test_wendel_probability_against_monte_carlo(n, d):
    rng = np.random.default_rng(n * 10 + d)
    trials = 600
    hits = sum(cl.open_hemisphere(td.uniform_sphere(n, d, rng=rng)).inside for _ in range(trials))
    p = cl.wendel_probability(n, d)
    # a binomial count: within 4.5 standard deviations (two-sided false alarm ~7e-6)
    assert abs(hits / trials - p) <= 4.5 * math.sqrt(p * (1 - p) / trials)


def test_open_hemisphere_certifies_its_pole():
    rng = np.random.default_rng(3)
    for _ in range(20):
        w = td.uniform_sphere(1, 5, rng=rng)[0]
        X = td.uniform_sphere(9, 5, rng=rng)
        X = np.where((X @ w)[:, None] > 0, X, -X)  # reflect into the hemisphere of w
        h = cl.open_hemisphere(X)
        assert h.inside
        np.testing.assert_allclose(np.linalg.norm(h.direction), 1.0, rtol=1e-15)
        # the margin is recomputed exactly from the returned pole, and it is at least the
        # margin of w (the program maximises it over the box, then normalises: up to sqrt(d))
        np.testing.assert_allclose(h.margin, np.min(X @ h.direction), rtol=0, atol=0)
        assert h.margin * math.sqrt(5) >= np.min(X @ w) - 1e-9


def test_open_hemisphere_refuses_configurations_around_the_origin():
    # an antipodal pair, the cross, the regular simplex: 0 is a convex combination of them
    simplex = np.eye(4) - 0.25
    simplex /= np.linalg.norm(simplex, axis=1, keepdims=True)
    for X in ([[1.0, 0.0], [-1.0, 0.0]], [[1, 0], [0, 1], [-1, 0], [0, -1]], simplex):
        assert not cl.open_hemisphere(np.asarray(X, dtype=float)).inside
    with pytest.raises(ValueError, match="unit sphere"):
        cl.open_hemisphere([[2.0, 0.0]])


@pytest.mark.parametrize("seed", range(6))
def test_cone_collapse_inequality_along_trajectories(seed):
    # tokens in an open hemisphere (d >= n: almost surely) collapse to x*, and
    # alpha(t) = min_i <x_i(t), x*> obeys 1 - alpha(t) <= (1 - alpha(0)) e^{-t / (2 n e^{2 beta})}
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    d = n + int(rng.integers(0, 3))
    beta = float(rng.uniform(0.0, 3.0))
    X0 = td.uniform_sphere(n, d, rng=rng)
    assert cl.open_hemisphere(X0).inside
    times = np.linspace(0.0, 60.0, 301)
    traj = td.integrate(
        Softmax(beta * np.eye(d), np.eye(d)), X0, times, method="solve_ivp",
        geometry="sphere", rtol=1e-11, atol=1e-13,
    )  # fmt: skip
    x_star = traj.states[-1].mean(axis=0)
    x_star /= np.linalg.norm(x_star)
    gap = 1.0 - np.min(traj.states @ x_star, axis=1)
    bound = gap[0] * np.exp(-cl.cone_collapse_rate(n, beta) * times)
    # the integrator's error (rtol 1e-11 on O(1) states) and the estimate of x* from the last
    # state (its own gap is below the bound at t = 60 by the same inequality): 1e-9
    assert np.all(gap <= bound + 1e-9)


# -- orthogonal tokens ------------------------------------------------------------------------


@pytest.mark.parametrize("dynamics", ["SA", "USA"])
@pytest.mark.parametrize("n", [2, 3, 7])
def test_overlap_at_beta_zero_is_the_closed_form(dynamics, n):
    t = np.linspace(0.0, 6.0, 13)
    curve = cl.orthogonal_overlap(n, t, beta=0.0, dynamics=dynamics)
    E = np.exp(2 * t)
    # the integrator at rtol 1e-12 on a smooth bounded right-hand side
    np.testing.assert_allclose(curve.gamma, (E - 1) / (E + n - 1), rtol=1e-10, atol=1e-14)


@pytest.mark.statement("meta-thm-orthogonal")
@pytest.mark.parametrize(("dynamics", "field"), [("SA", Softmax), ("USA", Unnormalised)])
@pytest.mark.parametrize(("n", "d", "beta"), [(4, 6, 2.0), (3, 3, 0.5), (5, 9, 4.0)])
def test_overlap_is_every_pairwise_inner_product_of_orthogonal_tokens(dynamics, field, n, d, beta):
    rng = np.random.default_rng(n + d)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X0 = Q[:n]  # n orthonormal rows
    times = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    traj = td.integrate(
        field(beta * np.eye(d), np.eye(d)), X0, times, method="solve_ivp", geometry="sphere",
        rtol=1e-12, atol=1e-14,
    )  # fmt: skip
    G = traj.states @ np.swapaxes(traj.states, -1, -2)
    off = G[:, ~np.eye(n, dtype=bool)]
    gamma = cl.orthogonal_overlap(n, times, beta=beta, dynamics=dynamics).gamma
    # two integrations at rtol 1e-12 of O(1) quantities: 1e-9
    np.testing.assert_allclose(off, np.repeat(gamma[:, None], off.shape[1], axis=1), atol=1e-9)


def test_clustering_time_is_where_the_overlap_reaches_one_minus_delta():
    for n, beta, delta, dyn in [(4, 0.0, 1e-3, "SA"), (32, 3.0, 1e-3, "SA"), (8, 1.0, 1e-2, "USA")]:
        t = cl.clustering_time(n, beta=beta, delta=delta, dynamics=dyn)
        g = cl.orthogonal_overlap(n, [0.0, t], beta=beta, dynamics=dyn).gamma[-1]
        np.testing.assert_allclose(g, 1 - delta, rtol=1e-9)
    np.testing.assert_allclose(
        cl.clustering_time(5, beta=0.0, delta=0.01), 0.5 * math.log(1 + 5 * 0.99 / 0.01), rtol=1e-10
    )
    # a hotter system (smaller beta) clusters sooner under softmax attention
    times = [cl.clustering_time(32, beta=b, delta=1e-3) for b in (0.5, 2.0, 8.0)]
    assert times[0] < times[1] < times[2]
    with pytest.raises(ValueError, match="`delta`"):
        cl.clustering_time(4, beta=1.0, delta=1.5)


def test_overlap_at_the_ends_of_the_float_range():
    # delta far below machine epsilon: the closed form at beta = 0 (the integrand is written per
    # unit gap 1 - gamma, so nothing divides by a rounded-off gap)
    t = cl.clustering_time(4, beta=0.0, delta=1e-300)
    np.testing.assert_allclose(t, 0.5 * math.log1p(4 * (1 - 1e-300) / 1e-300), rtol=1e-12)
    # horizons far past the time at which 1 - gamma is below half an ulp: gamma is 1 there
    curve = cl.orthogonal_overlap(4, [0.0, 1.0, 1e200], beta=1.0)
    assert curve.gamma[-1] == 1.0 and curve.status == "completed"
    with pytest.raises(ValueError, match="`atol`"):
        cl.orthogonal_overlap(4, [0.0, 1.0], beta=1.0, atol=1e-300)


@pytest.mark.parametrize("n", [10**8, 10**9, 10**12])
def test_clustering_time_of_many_tokens_meets_its_tolerance(n):
    """At beta = 0 the time is (1/2) log(1 + n (1 - delta) / delta) in closed form; the quadrature
    must meet its rtol (1e-12) for any n. The integrand depends on (n - 1) gamma + 1 near
    gamma = 1 - e^{-s} ~ s ~ 1/n, where 1.0 - e^{-s} keeps only the digits of s above eps:
    3e-11 off at n = 1e8, no convergence at n = 1e9."""
    for delta in (0.5, 1e-6):
        expected = 0.5 * math.log1p(n * (1 - delta) / delta)
        t = cl.clustering_time(n, beta=0.0, delta=delta)
        np.testing.assert_allclose(t, expected, rtol=1e-12)


def test_clustering_time_of_many_tokens_at_the_largest_beta():
    """n = 1e6, beta = 700: the integrand of t = int d gamma / rate falls from e^700 / 2 to about
    1/2 within s = log(1 + beta). The time to reach 1/2 is about 3.4e298; going on to 1 - delta,
    delta down to half an ulp, adds O(log(1 / delta)) = O(40), 300 orders below: the times
    agree to the quadrature's rtol (1e-12; 1e-11 for two quadratures). The quadrature of the
    whole range used to stop on round-off (IntegrationWarning, then FloatingPointError), and
    with it `orthogonal_overlap`, which integrates up to that time."""
    n, beta = 10**6, 700.0
    half = cl.clustering_time(n, beta=beta, delta=0.5)
    for delta in (1e-8, 0.5 * np.finfo(float).eps):
        t = cl.clustering_time(n, beta=beta, delta=delta)
        assert t >= half * (1 - 1e-11)
        np.testing.assert_allclose(t, half, rtol=1e-11)
    curve = cl.orthogonal_overlap(n, [0.0, 1.0, 2.0], beta=beta)
    assert curve.status == "completed" and np.all(np.diff(curve.gamma) >= 0)


def test_beta_past_double_precision_is_refused_by_name():
    # the SA clustering time grows like e^beta (metastability), so past e^700 it is no number
    for dynamics in ("SA", "USA"):
        with pytest.raises(ValueError, match=r"`beta`.*beta <= 700"):
            cl.clustering_time(4, beta=1e4, delta=1e-3, dynamics=dynamics)
        with pytest.raises(ValueError, match="`beta`"):
            cl.orthogonal_overlap(4, [0.0, 1.0], beta=1e4, dynamics=dynamics)


# -- phase diagrams and staircases -------------------------------------------------------------


def test_clustered_fraction_counts_pairs():
    X = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    assert float(cl.clustered_fraction(X)) == pytest.approx(2 / 6)
    batch = np.stack([X, np.repeat(X[:1], 4, axis=0)])
    np.testing.assert_allclose(cl.clustered_fraction(batch), [2 / 6, 1.0])
    with pytest.raises(ValueError, match="`threshold`"):
        cl.clustered_fraction(X, threshold=1.0)
    with pytest.raises(ValueError, match="`X` must lie on the unit sphere"):
        cl.clustered_fraction(2.0 * batch)  # a pair at inner product 4 is no pair of tokens


def test_phase_diagram_matches_the_library_integrator():
    # the batched RK4 of the phase diagram and `integrate` (RK4 on the sphere, same step) move
    # the same initial tokens the same way: the fractions agree exactly
    n, d, dt, seed = 6, 3, 0.05, 4
    times = np.array([0.0, 2.0, 6.0])
    for dynamics, field in (("SA", Softmax), ("USA", Unnormalised)):
        pd = cl.phase_diagram(
            n, d, [1.5], times, n_systems=5, dt=dt, dynamics=dynamics, threshold=0.99, rng=seed
        )
        G = np.random.default_rng(seed).standard_normal((5, n, d))
        X0 = G / np.linalg.norm(G, axis=-1, keepdims=True)
        fractions = []
        for x0 in X0:
            traj = td.integrate(
                field(1.5 * np.eye(d), np.eye(d)), x0, times, method="rk4", dt=dt,
                geometry="sphere",
            )  # fmt: skip
            fractions.append(cl.clustered_fraction(traj.states, threshold=0.99))
        np.testing.assert_allclose(pd.fraction[0], np.mean(fractions, axis=0), atol=1e-12)


def test_phase_diagram_refuses_a_step_budget_past_the_integrators():
    with pytest.raises(ValueError, match=r"`dt`.*larger `dt` or shorter `times`"):
        cl.phase_diagram(3, 3, [1.0], [0.0, 1e200], n_systems=2, dt=0.1, rng=0)


def test_cluster_staircase_of_a_circle_run():
    run = td.gradient_flow.circle_metastability(8.0, 12, 1e4, n_times=120, rng=2)
    s = cl.cluster_staircase(run.times, run.cluster_counts)
    assert np.all(np.diff(s.levels) != 0)
    np.testing.assert_allclose(s.durations.sum(), run.times[-1] - run.times[0])
    assert s.complete[:-1].all() and not s.complete[-1]
    with pytest.raises(ValueError, match="`counts`"):
        cl.cluster_staircase([0.0, 1.0], [1.5, 1.0])


# -- Part V, chapter "metastability": statements of book/metastability/theory ------------------


@pytest.mark.statement("meta-prop-gamma")
@pytest.mark.parametrize("n", [2, 5, 32])
def test_zero_temperature_curve_in_closed_form(n):
    t = np.linspace(0.0, 6.0, 25)
    closed = (np.exp(2 * t) - 1) / (np.exp(2 * t) + n - 1)
    for dynamics in ("SA", "USA"):
        # solver at rtol 1e-12 on a solution bounded by 1
        np.testing.assert_allclose(
            cl.orthogonal_overlap(n, t, beta=0.0, dynamics=dynamics).gamma, closed, atol=1e-10
        )
    for delta in (0.5, 1e-3, 1e-8):
        # adaptive quadrature at rtol 1e-12 against 1/2 log(1 + n (1 - delta)/delta)
        np.testing.assert_allclose(
            cl.clustering_time(n, beta=0.0, delta=delta),
            0.5 * math.log1p(n * (1 - delta) / delta),
            rtol=1e-10,
        )


@pytest.mark.statement("meta-prop-gamma")
def test_gamma_is_monotone_in_beta_in_opposite_directions():
    n, t = 6, np.linspace(0.0, 5.0, 21)
    betas = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0]
    sa = np.array([cl.orthogonal_overlap(n, t, beta=b).gamma for b in betas])
    usa = np.array([cl.orthogonal_overlap(n, t, beta=b, dynamics="USA").gamma for b in betas])
    # comparison principle: strict for t > 0 since the rates differ strictly on (0, 1), as long
    # as gamma has not rounded to 1 (USA at large beta gets there within the window)
    assert np.all(np.diff(sa[:, 1:], axis=0) < 0)
    below = usa[1:, 1:] < 1 - 1e-6
    assert np.all(np.diff(usa, axis=0) >= 0) and np.all(np.diff(usa[:, 1:], axis=0)[below] > 0)
    assert np.all(np.diff(sa, axis=1) >= 0) and np.all(sa < 1)  # increasing, below 1


@pytest.mark.statement("meta-prop-gamma")
@pytest.mark.parametrize("n", [2, 8, 128])
@pytest.mark.parametrize("delta", [0.5, 1e-3])
def test_clustering_time_lower_bound(n, delta):
    for beta in (0.0, 1.0, 5.0, 9.0, 20.0):
        bound = (math.exp(beta / 2) + n - 1) * math.log(n + 1) / (2 * n)
        t = cl.clustering_time(n, beta=beta, delta=delta)
        # an inequality proved exactly, with equality at beta = 0, delta = 1/2 (both are
        # log(n + 1) / 2): up to the quadrature's rtol 1e-12
        assert t >= bound * (1 - 1e-12)
    # not sharp at large beta: the time grows like e^beta / beta, the bound like e^{beta/2}
    assert cl.clustering_time(n, beta=20.0, delta=delta) > 100 * (
        (math.exp(10.0) + n - 1) * math.log(n + 1) / (2 * n)
    )


@pytest.mark.statement("meta-prop-gamma")
def test_curve_is_where_gamma_reaches_one_minus_delta():
    n, delta = 16, 1e-3
    betas = np.linspace(0.1, 9.0, 12)
    times = np.array([cl.clustering_time(n, beta=b, delta=delta) for b in betas])
    assert np.all(np.diff(times) > 0)  # the curve is the graph of an increasing function
    for b, t in zip(betas, times, strict=True):
        g = cl.orthogonal_overlap(n, [0.0, t], beta=b).gamma[-1]
        # two solvers at rtol 1e-12 on the same equation; 1 - gamma = delta is resolved to
        # relative accuracy ~1e-9 of delta
        np.testing.assert_allclose(1 - g, delta, rtol=1e-6)


@pytest.mark.statement("meta-thm-high-d")
def test_random_tokens_follow_gamma_with_deviation_of_order_one_over_sqrt_d():
    n, beta, seeds = 4, 1.0, 6
    times = np.array([0.0, 0.5, 1.0])
    gamma = cl.orthogonal_overlap(n, times, beta=beta).gamma
    rng = np.random.default_rng(9)
    mean_dev = {}
    for d in (64, 1024):
        field = Softmax(beta * np.eye(d), np.eye(d))
        devs = []
        for _ in range(seeds):
            X0 = td.uniform_sphere(n, d, rng=rng)
            traj = td.integrate(field, X0, times, method="rk4", dt=0.05, geometry="sphere")
            devs.append(cl.overlap_deviation(traj.states, gamma))
        devs = np.array(devs)
        # t = 0: the first branch 2 sqrt(log d / d) bounds every draw (each overlap is about
        # N(0, 1/d); the branch is 2 sqrt(log d) > 4 standard deviations at these d: 36 draws exceed
        # it with probability < 2e-3)
        assert np.all(devs[:, 0] <= 2 * math.sqrt(math.log(d) / d))
        mean_dev[d] = devs.mean(axis=0)
    # d grows 16 times: the deviation shrinks about 4 times (d^{-1/2}); a mean of 6 maxima over
    # 6 pairs fluctuates by tens of percent, hence the window [2.5, 6.5]
    ratio = mean_dev[64] / mean_dev[1024]
    assert np.all((ratio > 2.5) & (ratio < 6.5)), ratio


def test_overlap_deviation_validates_and_does_not_modify():
    X = np.stack([np.eye(3), np.eye(3)])
    before = X.copy()
    np.testing.assert_allclose(cl.overlap_deviation(X, [0.0, 0.5]), [0.0, 0.5], atol=0)
    np.testing.assert_array_equal(X, before)
    with pytest.raises(ValueError, match="`gamma` must have shape"):
        cl.overlap_deviation(X, [0.0])
    with pytest.raises(ValueError, match="`states` must have shape"):
        cl.overlap_deviation(np.eye(3), [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="`states` must have shape"):
        cl.overlap_deviation(np.ones((2, 1, 3)), [0.0, 0.0])


# -- the chapter "Clustering in long time" (book/clustering/theory) ----------------------------


def _sa_energy(X, beta):
    """E_beta(X) = (1/(2 beta n^2)) sum_ij e^{beta <x_i, x_j>}, written out for the tests."""
    n = X.shape[0]
    return float(np.exp(beta * X @ X.T).sum() / (2 * beta * n**2))


def _energy_gradient(X, beta, h=1e-6):
    """Euclidean gradient of E_beta by central differences (error O(h^2) ~ 1e-12)."""
    grad = np.zeros_like(X)
    for idx in np.ndindex(*X.shape):
        step = np.zeros_like(X)
        step[idx] = h
        grad[idx] = (_sa_energy(X + step, beta) - _sa_energy(X - step, beta)) / (2 * h)
    return grad


@pytest.mark.statement("clu-prop-gradient-structure")
@pytest.mark.parametrize("beta", [0.3, 1.0, 2.5])
def test_sa_and_usa_are_gradient_ascents_of_the_energy(beta):
    rng = np.random.default_rng(int(10 * beta))
    n, d = 5, 3
    X = td.uniform_sphere(n, d, rng=rng)
    grad = _energy_gradient(X, beta)
    round_grad = grad - np.sum(grad * X, axis=1, keepdims=True) * X  # tangent projection
    Z = np.exp(beta * X @ X.T).sum(axis=1)
    usa = Unnormalised(beta * np.eye(d), np.eye(d))(0.0, X)
    sa = Softmax(beta * np.eye(d), np.eye(d))(0.0, X)
    usa = usa - np.sum(usa * X, axis=1, keepdims=True) * X
    sa = sa - np.sum(sa * X, axis=1, keepdims=True) * X
    # USA = n grad E; SA = n (n / Z_i) grad_i E (the metric (1/n) sum_i Z_i <a_i, b_i>);
    # central differences with h = 1e-6 on O(e^beta) values: error ~ 1e-9 relative
    np.testing.assert_allclose(usa, n * round_grad, atol=1e-7)
    np.testing.assert_allclose(sa, n * (n / Z)[:, None] * round_grad, atol=1e-7)


@pytest.mark.statement("clu-lem-strict-saddle-beta0")
@pytest.mark.parametrize("signs", [(1, 1, -1), (1, 1, 1, -1, -1), (1, -1), (1, 1, -1, -1)])
def test_quadratic_energy_critical_points_are_saddles_except_consensus(signs):
    eps = np.asarray(signs, dtype=float)
    n = eps.size
    u, v = np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0])
    X = eps[:, None] * u
    s = X.sum(axis=0)
    # a critical point: every token parallel to the sum
    np.testing.assert_allclose(s - (X @ s)[:, None] * X, 0.0, atol=1e-15)

    def energy(Y):
        return float(np.sum(Y.sum(axis=0) ** 2) / (2 * n**2))

    i = int(np.argmin(eps))  # a token with sign -1
    h = 1e-4

    def rotated(theta):
        Y = X.copy()
        Y[i] = X[i] * math.cos(theta) + v * math.sin(theta)
        return Y

    second = (energy(rotated(h)) - 2 * energy(X) + energy(rotated(-h))) / h**2
    # closed form of the proof, divided by 2 n^2: 2(|s| + 1), or 2 when s = 0
    norm_s = float(np.linalg.norm(s))
    predicted = (2 * (norm_s + 1) if norm_s > 0 else 2.0) / (2 * n**2)
    # central second difference: error O(h^2) ~ 1e-8, plus rounding eps / h^2 ~ 2e-8
    np.testing.assert_allclose(second, predicted, rtol=1e-6)
    assert second > 0


def _final_min_overlap(field, X0, t_end):
    traj = td.integrate(
        field, X0, [0.0, t_end], method="solve_ivp", geometry="sphere", rtol=1e-10, atol=1e-12
    )
    assert traj.status == "completed", traj.message
    return float(np.min(traj.final @ traj.final.T))


@pytest.mark.statement("clu-thm-beta0")
@pytest.mark.parametrize("d", [2, 3])
def test_random_starts_at_beta_zero_reach_consensus_and_the_antipodal_pair_does_not(d):
    rng = np.random.default_rng(d)
    field = Softmax(np.zeros((d, d)), np.eye(d))  # beta = 0: uniform weights
    for _ in range(8):
        assert _final_min_overlap(field, td.uniform_sphere(5, d, rng=rng), 80.0) > 1 - 1e-8
    pair = np.zeros((2, d))
    pair[0, 0], pair[1, 0] = 1.0, -1.0
    end = td.integrate(field, pair, [0.0, 50.0], method="rk4", dt=0.1, geometry="sphere").final
    np.testing.assert_allclose(end, pair, atol=1e-14)  # an equilibrium: the velocity is 0


@pytest.mark.statement("clu-thm-beta-vanishing")
@pytest.mark.statement("clu-thm-small-beta")
@pytest.mark.parametrize("field", [Softmax, Unnormalised])
def test_random_starts_at_small_beta_reach_one_cluster(field):
    n, d = 6, 2  # the circle: the hardest dimension
    beta = 0.5 / n
    rng = np.random.default_rng(11)
    for _ in range(8):
        X0 = td.uniform_sphere(n, d, rng=rng)
        # from random data: rate about 1 near consensus, so t = 100 leaves a gap below 1e-8
        assert _final_min_overlap(field(beta * np.eye(d), np.eye(d)), X0, 100.0) > 1 - 1e-8


@pytest.mark.statement("clu-thm-large-beta")
@pytest.mark.parametrize("d", [2, 3, 5])
def test_large_beta_kernel_changes_sign_at_an_angle_that_shrinks(d):
    # g_beta(z) = e^{beta cos z}((d-1) cos z - beta sin^2 z) is positive below the angle
    # tau* solving beta sin^2 tau = (d-1) cos tau and negative beyond it; tau* -> 0 like
    # sqrt((d-1)/beta), which is what forces a non-positive Hessian into a consensus
    zeta = np.linspace(0.0, math.pi, 20001)
    previous = math.pi
    for beta in (1.0, 10.0, 100.0, 1000.0):
        g = (d - 1) * np.cos(zeta) - beta * np.sin(zeta) ** 2  # the sign of g (e^{...} > 0)
        c = (-(d - 1) + math.sqrt((d - 1) ** 2 + 4 * beta**2)) / (2 * beta)  # cos tau*
        tau = math.acos(c)
        np.testing.assert_allclose(beta * math.sin(tau) ** 2, (d - 1) * math.cos(tau), rtol=1e-12)
        assert np.all(g[zeta < tau - 1e-9] > 0) and np.all(g[zeta > tau + 1e-9] < 0)
        assert tau < previous
        previous = tau
    # tau*^2 = (d-1)/beta (1 + O((d-1)/beta)): relative error (d-1)/(4 beta) <= 1e-3
    np.testing.assert_allclose(previous, math.sqrt((d - 1) / 1000.0), rtol=2e-3)


@pytest.mark.statement("clu-thm-wendel")
@pytest.mark.parametrize(("n", "d"), [(3, 2), (5, 2), (5, 3), (6, 4), (7, 3)])
def test_sign_patterns_in_a_hemisphere_count_the_regions_of_the_arrangement(n, d):
    # the proof's key step: for points in general position, the number of sign vectors eps
    # with (eps_i x_i) in an open hemisphere is 2 sum_{k<d} C(n-1, k), exactly
    rng = np.random.default_rng(100 * n + d)
    X = td.uniform_sphere(n, d, rng=rng)
    count = 0
    for signs in np.ndindex(*(2,) * n):
        eps = 1.0 - 2.0 * np.asarray(signs, dtype=float)
        count += cl.open_hemisphere(eps[:, None] * X).inside
    assert count == 2 * sum(math.comb(n - 1, k) for k in range(d))
    assert count / 2**n == cl.wendel_probability(n, d)


@pytest.mark.statement("clu-lem-cone-collapse")
@pytest.mark.statement("clu-thm-high-dimension")
@pytest.mark.parametrize("seed", range(4))
def test_cone_collapse_with_random_query_and_key(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    d = n + int(rng.integers(0, 3))
    beta = float(rng.uniform(0.2, 1.5))
    Q, K = rng.standard_normal((2, d, d)) / math.sqrt(d)
    A = K.T @ Q
    X0 = td.uniform_sphere(n, d, rng=rng)
    h = cl.open_hemisphere(X0)
    assert h.inside  # d >= n: almost surely
    times = np.linspace(0.0, 60.0, 601)
    for field in (Softmax(beta * A, np.eye(d)), Unnormalised(beta * A, np.eye(d))):
        traj = td.integrate(
            field, X0, times, method="solve_ivp", geometry="sphere", rtol=1e-11, atol=1e-13
        )
        assert traj.status == "completed", traj.message
        # item 1: the smallest overlap with the pole never decreases (integrator error 1e-10)
        r = np.min(traj.states @ h.direction, axis=1)
        assert np.all(np.diff(r) >= -1e-10)
        x_star = traj.final.mean(axis=0)
        x_star /= np.linalg.norm(x_star)
        gap = 1.0 - np.min(traj.states @ x_star, axis=1)
        # item 3 once alpha >= 1/2, with lambda = p / 2 and p the smallest weight:
        # e^{-2 beta |A|} / n for SA, e^{-beta |A|} / n for USA
        a = beta * np.linalg.norm(A, 2)
        p = math.exp(-2 * a) / n if isinstance(field, Softmax) else math.exp(-a) / n
        i0 = int(np.argmax(gap <= 0.5))
        bound = gap[i0] * np.exp(-0.5 * p * (times - times[i0]))
        assert np.all(gap[i0:] <= bound[i0:] + 1e-9)
        assert gap[-1] < 1e-9  # the exponential collapse of the theorem


@pytest.mark.statement("clu-prop-extremisers")
@pytest.mark.parametrize("beta", [0.5, 2.0, 6.0])
def test_energy_lies_between_the_uniform_measure_and_a_dirac(beta):
    # on S^2 the uniform measure has E = sinh(beta) / (2 beta^2), a Dirac e^beta / (2 beta)
    rng = np.random.default_rng(int(beta * 10))
    lower, upper = math.sinh(beta) / (2 * beta**2), math.exp(beta) / (2 * beta)
    for n in (2, 7, 40):
        for _ in range(30):
            e = td.interaction_energy(td.uniform_sphere(n, 3, rng=rng), beta=beta)
            assert lower < e <= upper * (1 + 1e-15)
    x = td.uniform_sphere(1, 3, rng=rng)
    np.testing.assert_allclose(td.interaction_energy(np.repeat(x, 5, axis=0), beta=beta), upper)
    # many uniform tokens approach the lower bound: E_n - E = O(1/n) (the diagonal) plus a
    # fluctuation with standard deviation O(1/n)
    e_many = td.interaction_energy(td.uniform_sphere(4000, 3, rng=rng), beta=beta)
    assert 0 < e_many - lower < 40 * upper / 4000


# -- critical points of E_beta and the large-beta theorem (clu-thm-large-beta) -----------------


def _geodesic(X, xi, t):
    """Each token moved by t xi_i along its great circle (a geodesic of the product)."""
    length = np.linalg.norm(xi, axis=1)
    safe = np.where(length > 0, length, 1.0)
    return np.cos(t * length)[:, None] * X + (np.sin(t * length) / safe)[:, None] * xi


def _tangent(X, rng):
    xi = rng.standard_normal(X.shape)
    return xi - np.sum(xi * X, axis=1, keepdims=True) * X


def _fd_errors(f, exact, h):
    """Errors of the central first or second difference of f at 0, at steps h and h / 2."""
    return [abs(f(s) - exact) for s in (h, h / 2)]


@pytest.mark.parametrize(("d", "beta"), [(2, 0.7), (3, 1.5), (4, 3.0)])
def test_sphere_gradient_is_the_usa_velocity_and_the_derivative_along_geodesics(d, beta):
    rng = np.random.default_rng(d)
    n = 5
    X = td.uniform_sphere(n, d, rng=rng)
    before = X.copy()
    grad = cl.sphere_energy_gradient(X, beta=beta)
    np.testing.assert_array_equal(X, before)
    np.testing.assert_allclose(np.sum(grad * X, axis=1), 0.0, atol=1e-15 * math.exp(beta))
    # USA is n grad E (the chapter's gradient structure), the field projected on the sphere
    usa = Unnormalised(beta * np.eye(d), np.eye(d))(0.0, X)
    usa -= np.sum(usa * X, axis=1, keepdims=True) * X
    np.testing.assert_allclose(n * grad, usa, rtol=1e-13, atol=1e-14 * math.exp(beta))
    # the first derivative of the book's energy along a geodesic, by central differences:
    # error O(h^2), so halving h divides it by 4 (h = 0.02: rounding ~ 1e-16 / h is negligible)
    xi = _tangent(X, rng)

    def energy(t):
        return td.interaction_energy(_geodesic(X, xi, t), beta=beta)

    def slope(h):
        return (energy(h) - energy(-h)) / (2 * h)

    e1, e2 = _fd_errors(slope, float(np.sum(grad * xi)), 0.02)
    assert 3.5 < e1 / e2 < 4.5


@pytest.mark.parametrize(("d", "beta"), [(2, 0.7), (3, 1.5), (4, 3.0)])
def test_sphere_hessian_is_the_second_derivative_along_geodesics(d, beta):
    rng = np.random.default_rng(10 + d)
    X = td.uniform_sphere(5, d, rng=rng)
    H = cl.sphere_energy_hessian(X, beta=beta)
    np.testing.assert_allclose(H.matrix, H.matrix.T, rtol=0, atol=0)
    # the same spectrum, to the rounding of an eigensolver (a few ulps of the largest)
    top = np.abs(H.eigenvalues).max()
    np.testing.assert_allclose(
        H.eigenvalues, np.linalg.eigvalsh(H.matrix), rtol=0, atol=1e-14 * top
    )
    np.testing.assert_allclose(np.einsum("iad,id->ia", H.basis, X), 0.0, atol=1e-15)
    for _ in range(3):  # a quadratic form is fixed by its values: random directions suffice
        xi = _tangent(X, rng)

        def energy(t, xi=xi):
            return td.interaction_energy(_geodesic(X, xi, t), beta=beta)

        def curvature(h):
            return (energy(h) - 2 * energy(0.0) + energy(-h)) / h**2

        # geodesics have no acceleration, so the second derivative is Hess[xi, xi] at any
        # point; central second differences: error O(h^2), halving h divides it by 4
        # (h = 0.02: rounding ~ 1e-16 / h^2 ~ 3e-13 is negligible against the O(h^2) term)
        e1, e2 = _fd_errors(curvature, H.quadratic_form(xi), 0.02)
        assert 3.5 < e1 / e2 < 4.5


@pytest.mark.statement("clu-lem-subset-sums")
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [0.5, 2.0])
def test_rotating_a_subset_changes_only_the_pairs_across_the_cut(d, beta):
    from scipy.linalg import expm

    rng = np.random.default_rng(int(10 * beta) + d)
    n = 5
    X = td.uniform_sphere(n, d, rng=rng)
    subset = np.array([True, False, True, True, False])
    M = rng.standard_normal((d, d))
    B = M - M.T

    def energy(t):
        Y = X.copy()
        Y[subset] = X[subset] @ expm(t * B).T
        return td.interaction_energy(Y, beta=beta)

    def curvature(h):
        return (energy(h) - 2 * energy(0.0) + energy(-h)) / h**2

    exact = cl.rotation_second_variation(X, subset, B, beta=beta)
    e1, e2 = _fd_errors(curvature, exact, 0.01)  # O(h^2), as above
    assert 3.5 < e1 / e2 < 4.5
    # summed over the coordinate rotations B_kl = e_k e_l^T - e_l e_k^T, the second
    # variations give -G(S)/n^2 (Lagrange's identity sum_kl <B_kl x, y>^2 = 1 - <x, y>^2 and
    # sum_kl <B_kl^2 x, y> = -(d - 1) <x, y>): an identity, to rounding
    total = 0.0
    for k in range(d):
        for m in range(k + 1, d):
            Bkm = np.zeros((d, d))
            Bkm[m, k], Bkm[k, m] = 1.0, -1.0
            total += cl.rotation_second_variation(X, subset, Bkm, beta=beta)
    sums = cl.subset_sums(X, beta=beta)
    code = int(sum(2**i for i in range(n) if subset[i] != subset[-1]))  # S or its complement
    row = int(np.flatnonzero((sums.subsets @ (2 ** np.arange(n))) == code)[0])
    np.testing.assert_allclose(total, -sums.sums[row] / n**2, rtol=1e-12)


def test_subset_sums_against_a_direct_sum_over_cuts():
    rng = np.random.default_rng(5)
    for n, d, beta in [(4, 2, 1.0), (6, 3, 4.0), (7, 5, 0.3)]:
        X = td.uniform_sphere(n, d, rng=rng)
        s = cl.subset_sums(X, beta=beta)
        assert s.subsets.shape == (2 ** (n - 1) - 1, n) and not s.subsets[:, -1].any()
        theta = np.arccos(np.clip(X @ X.T, -1.0, 1.0))
        g = cl.subset_kernel(theta, beta=beta, d=d)
        for mask, value in zip(s.subsets, s.sums, strict=True):
            direct = g[np.ix_(mask, ~mask)].sum()
            # arccos then cos loses up to sqrt(eps) near theta = 0; none here is that close
            np.testing.assert_allclose(value, direct, rtol=1e-9, atol=1e-12 * math.exp(beta))
        size = np.minimum(s.subsets.sum(axis=1), n - s.subsets.sum(axis=1))
        np.testing.assert_allclose(
            s.eigenvalue_bound, np.max(-s.sums / (n**2 * (d - 1) * size)), rtol=1e-15
        )
    with pytest.raises(ValueError, match=r"`X` has n = 17 tokens.*n <= 16"):
        cl.subset_sums(td.uniform_sphere(17, 2, rng=rng), beta=1.0)
    with pytest.raises(ValueError, match="`beta`"):
        cl.subset_sums(td.uniform_sphere(3, 2, rng=rng), beta=800.0)


def test_rotation_second_variation_validates_its_subset_and_generator():
    X = cl.polygon_clusters([1, 1, 1], 3)
    B = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="`B` must be skew-symmetric"):
        cl.rotation_second_variation(X, [True, False, False], np.eye(3), beta=1.0)
    with pytest.raises(TypeError, match="`subset` must be a boolean mask"):
        cl.rotation_second_variation(X, [1, 0, 0], B, beta=1.0)
    with pytest.raises(ValueError, match="`subset` must have shape"):
        cl.rotation_second_variation(X, [True, False], B, beta=1.0)


def test_polygon_clusters_are_critical_points_and_newton_keeps_them():
    for sizes in ([3, 3], [4, 1], [2, 2, 2], [1] * 5, [6]):
        for d in (2, 3):
            X = cl.polygon_clusters(sizes, d)
            assert X.shape == (sum(sizes), d)
            cp = cl.find_critical_point(X, beta=2.0)
            # critical by symmetry: the gradient is rounding, ~ n eps in units of e^beta / n^2
            assert cp.status == "completed" and cp.iterations == 0, cp.message
            assert cp.gradient_norm < 1e-14
    with pytest.raises(ValueError, match="`sizes`"):
        cl.polygon_clusters([2, 0], 2)


def test_newton_converges_quadratically_and_reports_failure():
    rng = np.random.default_rng(8)
    X0 = td.uniform_sphere(5, 3, rng=rng)
    before = X0.copy()
    cp = cl.find_critical_point(X0, beta=3.0, tol=1e-13)
    np.testing.assert_array_equal(X0, before)  # nothing passed in is modified
    assert cp.status == "completed", cp.message
    np.testing.assert_allclose(np.linalg.norm(cp.X, axis=1), 1.0, rtol=1e-15)
    scale = 5**2 * math.exp(-3.0)
    g = np.linalg.norm(cl.sphere_energy_gradient(cp.X, beta=3.0)) * scale
    assert g == pytest.approx(cp.gradient_norm, rel=1e-12) and g <= 1e-13
    # from a start near the end point, Newton converges quadratically: three steps from a
    # perturbation of 1e-3 (gradient 1e-3 -> 1e-6 -> 1e-12 -> rounding)
    near = cp.X + 1e-3 * _tangent(cp.X, rng)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    assert cl.find_critical_point(near, beta=3.0, tol=1e-13).iterations <= 4
    failed = cl.find_critical_point(X0, beta=3.0, max_iter=1)
    assert failed.status == "failed" and "max_iter" in failed.message
    with pytest.raises(ValueError, match="`X0` must lie on the unit sphere"):
        cl.find_critical_point(2 * X0, beta=1.0)
    with pytest.raises(ValueError, match="`X0` must have d >= 2"):
        cl.find_critical_point(np.ones((3, 1)), beta=1.0)


def test_far_apart_tokens_at_large_beta_are_not_taken_for_a_critical_point():
    """Tokens on the circle at angles 0, 2 and 4 are no critical point (the equilateral
    triangle, 2 pi / 3 apart, is): their weights e^{beta c} are far below e^beta, and the
    gradient in units of e^beta passed tol = 1e-11 from beta ~ 18 on, the start returned as
    critical after 0 steps. Newton's method must reach the triangle at every beta, and the
    gradient at beta = 700 (e^{700 c} ~ 1e-127, whose quotient by e^700 underflowed to an
    exact 0) must be the direct sum's, to the rounding of exp at 700 |c| (beta eps ~ 2e-13)
    of its largest term (token 1's two pulls cancel: its gradient is that rounding)."""
    angles = np.array([0.0, 2.0, 4.0])
    X0 = np.column_stack([np.cos(angles), np.sin(angles)])
    for beta in (20.0, 50.0, 700.0):
        cp = cl.find_critical_point(X0, beta=beta)
        assert cp.status == "completed" and cp.iterations > 0, cp.message
        # the triangle: every pair at inner product cos(2 pi / 3), to the tolerance's 1e-11
        C = cp.X @ cp.X.T
        np.testing.assert_allclose(C[~np.eye(3, dtype=bool)], -0.5, atol=1e-10)
    C = X0 @ X0.T
    direct = [
        sum(math.exp(700.0 * C[i, j]) * (X0[j] - C[i, j] * X0[i]) for j in range(3) if j != i) / 9
        for i in range(3)
    ]
    scale = float(np.abs(direct).max())
    assert scale > 1e-130  # the largest pull, e^{700 cos 2} / 9, far from an underflow
    np.testing.assert_allclose(
        cl.sphere_energy_gradient(X0, beta=700.0), direct, rtol=0, atol=1e-12 * scale
    )


def test_newton_step_is_shortened_uniformly_to_max_step():
    """A step longer than max_step is scaled as a whole so that the longest geodesic move is
    max_step: with max_step = 3/4 of the free Newton step's longest move, every token moves 3/4
    of its free move (the geodesic angle arccos<x, x'> through arctan2, exact to ~1e-15 rad;
    1e-12 relative on moves of order 0.1)."""
    rng = np.random.default_rng(11)
    X0 = td.uniform_sphere(5, 3, rng=rng)

    def moves(max_step):
        X1 = cl.find_critical_point(X0, beta=3.0, max_iter=1, max_step=max_step).X
        cross = np.linalg.norm(np.cross(X0, X1), axis=1)
        return np.arctan2(cross, np.sum(X0 * X1, axis=1))

    free = moves(10.0)
    assert 1e-2 < free.max() < 3.0  # a real step, shorter than the unclipped bound 10
    short = moves(0.75 * free.max())
    assert short.max() == pytest.approx(0.75 * free.max(), rel=1e-12)
    np.testing.assert_allclose(short, 0.75 * free, rtol=1e-12, atol=1e-15)


def _families(n):
    """The symmetric critical points: k equal clusters at a regular k-gon (k | n, k >= 2), two
    antipodal clusters of unequal sizes, and the consensus."""
    equal = [[n // k] * k for k in range(2, n + 1) if n % k == 0]
    unequal = [[a, n - a] for a in range(n // 2 + 1, n)]
    return [*equal, *unequal, [n]]


def _census(d, beta, n_random, rng):
    """Critical points of E_beta (n = 3..6) from random starts and the symmetric families,
    each with its Hessian, subset sums and the Hessian's rounding level; `beta` None takes
    beta = 1/(4n) for each n."""
    found = []
    for n in range(3, 7):
        beta_n = 1 / (4 * n) if beta is None else beta
        starts = [td.uniform_sphere(n, d, rng=rng) for _ in range(n_random)]
        starts += [cl.polygon_clusters(sizes, d) for sizes in _families(n)]
        for X0 in starts:
            cp = cl.find_critical_point(X0, beta=beta_n)
            if cp.status != "completed":
                continue
            H = cl.sphere_energy_hessian(cp.X, beta=beta_n)
            # eigenvalues of a symmetric matrix are exact to its rounding: a few hundred ulps
            # of its largest entries, n beta e^beta / n^2 (the Hessian's scale)
            resolution = 1e-13 * (1 + beta_n) * math.exp(beta_n) / n
            consensus = bool(np.min(cp.X @ cp.X.T) > 1 - 1e-8)
            found.append((cp, H, cl.subset_sums(cp.X, beta=beta_n), resolution, consensus))
    return found


@pytest.mark.statement("clu-lem-subset-sums")
@pytest.mark.statement("clu-thm-large-beta")
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [0.5, 2.0, 5.0, 10.0])
def test_at_every_critical_point_a_negative_subset_sum_forces_a_positive_eigenvalue(d, beta):
    # the proof's key step: at a critical point the second variation of rotating S by e^{tB}
    # is Hess[xi, xi] (xi_i = B x_i on S); summed over the coordinate rotations it is
    # -G(S)/n^2 and sum_B |xi|^2 = (d - 1)|S|, so lambda_max >= -G(S)/(n^2 (d-1) |S|): a
    # Hessian without positive eigenvalue has every G(S) >= 0
    rng = np.random.default_rng(int(100 * beta) + d)
    found = _census(d, beta, 8, rng)
    assert len(found) >= 40
    for cp, H, sums, resolution, _ in found:
        n = cp.X.shape[0]
        grad = np.linalg.norm(cl.sphere_energy_gradient(cp.X, beta=beta))
        # at an approximate critical point the curve's acceleration B^2 x_i (norm <= |B|^2)
        # adds <grad, B^2 x> to the second variation: |.| <= sqrt(|S|) |grad| |B|^2
        subset = rng.random(n) < 0.5
        subset[0], subset[-1] = True, False
        M = rng.standard_normal((d, d))
        B = (M - M.T) / np.linalg.norm(M - M.T, 2)
        xi = np.where(subset[:, None], cp.X @ B.T, 0.0)
        np.testing.assert_allclose(
            cl.rotation_second_variation(cp.X, subset, B, beta=beta),
            H.quadratic_form(xi),
            atol=math.sqrt(n) * grad + resolution,
        )
        # summed over the coordinate rotations the accelerations add up to -(d - 1) x_i, normal
        # to the sphere, so that error cancels exactly (the next test): only rounding is left
        assert H.max_eigenvalue >= sums.eigenvalue_bound - resolution
        if H.max_eigenvalue <= resolution:  # no positive eigenvalue: no negative subset sum
            assert sums.smallest >= -resolution * n**2 * (d - 1)


@pytest.mark.statement("clu-lem-subset-sums")
@pytest.mark.parametrize("d", [2, 3, 4])
def test_summed_over_coordinate_rotations_the_gradient_terms_cancel_at_any_configuration(d):
    # sum_{k<l} B_kl^2 = -(d - 1) I, and the gradient at x_i is tangent: away from a critical
    # point, the sum over the coordinate rotations of the Hessian on xi^B is still -G(S)/n^2,
    # so lambda_max >= the subset-sum bound at every configuration
    rng = np.random.default_rng(40 + d)
    beta, n = 1.7, 5
    pairs = [(k, l) for k in range(d) for l in range(k + 1, d)]
    for _ in range(3):
        X = td.uniform_sphere(n, d, rng=rng)
        H = cl.sphere_energy_hessian(X, beta=beta)
        assert H.gradient_norm > 0.1 * math.exp(beta) / n**2  # far from critical
        sums = cl.subset_sums(X, beta=beta)
        # the quadratic forms are sums of O(n^2) terms of size e^beta/n^2: rounding ~1e-15 each
        unit = math.exp(beta) / n**2
        for subset, G in zip(sums.subsets, sums.sums, strict=True):
            total = 0.0
            for k, l in pairs:
                B = np.zeros((d, d))
                B[k, l], B[l, k] = 1.0, -1.0
                total += H.quadratic_form(np.where(subset[:, None], X @ B.T, 0.0))
            assert abs(total + G / n**2) <= 1e-12 * unit
        assert H.max_eigenvalue >= sums.eigenvalue_bound - 1e-12 * unit


@pytest.mark.statement("clu-thm-small-beta")
@pytest.mark.parametrize("d", [2, 3])
def test_at_beta_one_over_4n_every_non_consensus_critical_point_has_the_proofs_eigenvalue(d):
    # the proof's strict-saddle step: at a critical point X of E_beta that is not a consensus,
    # some token has <s, x_i> <= 0 (else X is a consensus), and rotating it gives a Hessian
    # eigenvalue >= 1/n^2 - 2 beta e^beta / n, positive for beta <= 1/(4n)
    found = 0
    for cp, H, _, resolution, consensus in _census(d, None, 6, np.random.default_rng(7 + d)):
        X = cp.X
        n = X.shape[0]
        beta = 1 / (4 * n)
        s = X.sum(axis=0)
        if consensus:
            assert np.min(X @ s) > 0
            continue
        found += 1
        assert np.min(X @ s) <= 1e-9
        assert H.max_eigenvalue >= 1 / n**2 - 2 * beta * math.exp(beta) / n - resolution
    assert found >= 20


@pytest.mark.statement("clu-thm-large-beta")
@pytest.mark.parametrize("d", [2, 3])
def test_at_large_beta_every_critical_point_but_the_consensus_is_a_strict_saddle(d):
    beta = 10.0  # the largest beta at which float64 resolves the flattest saddles (below)
    rng = np.random.default_rng(1000 + d)
    found = _census(d, beta, 12, rng)
    saddles = [f for f in found if not f[4]]
    assert len(saddles) >= 40 and len(found) > len(saddles)  # the consensus is found too
    for _cp, H, sums, resolution, consensus in found:
        if consensus:
            assert H.max_eigenvalue <= resolution and sums.smallest > 0
            continue
        # the flattest saddle, two antipodal clusters, has lambda_max = e^{-beta}/n ~ 1.5e-5,
        # about 2e3 times the (conservative) resolution here; the ratio falls like
        # e^{-2 beta}, and the rounding itself (~1e-15 of e^beta/n^2) hides it from beta ~ 18
        assert H.max_eigenvalue > 1e3 * resolution
        # and the proof's mechanism sees it: some subset sum is negative
        assert sums.smallest < 0 and sums.eigenvalue_bound > 0


@pytest.mark.statement("clu-thm-large-beta")
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_antipodal_clusters_are_saddles_with_the_closed_form_eigenvalue(d, n):
    # two antipodal clusters of sizes a, b: only the relative rotation of the clusters raises
    # the energy, with curvature ab e^{-beta}/n^2 for the relative angle, so lambda_max =
    # ab e^{-beta}/n^2 (1/a + 1/b) = e^{-beta}/n; the cut between the clusters has
    # G = -ab (d-1) e^{-beta}, and every other cut splits a cluster (g(0) = (d-1) e^beta > 0)
    for a in range((n + 1) // 2, n):
        b = n - a
        X = cl.polygon_clusters([a, b], d)
        for beta in (1.0, 5.0, 10.0):
            H = cl.sphere_energy_hessian(X, beta=beta)
            resolution = 1e-13 * (1 + beta) * math.exp(beta) / n
            np.testing.assert_allclose(H.max_eigenvalue, math.exp(-beta) / n, atol=resolution)
        # the subset sums need no cancellation: certified at beta = 4 n^2, beyond C(d) n^2
        # for any C(d) <= 4 (the constant itself is unknown)
        beta = 4.0 * n**2
        sums = cl.subset_sums(X, beta=beta)
        np.testing.assert_allclose(sums.smallest, -a * b * (d - 1) * math.exp(-beta), rtol=1e-12)
        np.testing.assert_allclose(sums.eigenvalue_bound, a * math.exp(-beta) / n**2, rtol=1e-12)


@pytest.mark.statement("clu-thm-large-beta")
@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_polygons_of_equal_clusters_have_a_negative_cut_at_every_beta(n):
    # k equal clusters at a regular k-gon (k | n, k >= 2): the cut around one cluster sums
    # g_beta over its neighbours at 2 pi q / k, all beyond tau*_beta once beta is large, so
    # the subset sums certify a positive eigenvalue, with no cancellation, up to beta = 4 n^2
    for d in (2, 3):
        for sizes in _families(n)[:-1]:
            X = cl.polygon_clusters(sizes, d)
            for beta in (1.0, float(n**2), 4.0 * n**2):
                assert cl.subset_sums(X, beta=beta).eigenvalue_bound > 0


@pytest.mark.statement("clu-thm-large-beta")
@pytest.mark.parametrize("d", [2, 3, 5])
def test_threshold_angle_solves_its_equation_and_shrinks_like_sqrt_d_over_beta(d):
    for beta in (0.1, 1.0, 10.0, 1e2, 1e3, 1e4, 1e6):
        tau = cl.threshold_angle(beta, d)
        # the defining equation, to rounding of its O(d) terms
        assert abs(beta * math.sin(tau) ** 2 - (d - 1) * math.cos(tau)) <= 8e-16 * (d + beta)
        if beta <= 700:
            theta = np.array([tau * (1 - 1e-6), tau * (1 + 1e-6), math.pi])
            g = cl.subset_kernel(theta, beta=beta, d=d)
            assert g[0] > 0 and g[1] < 0 and g[2] < 0  # positive below tau*, negative beyond
        # tau* = sqrt(eps)(1 - eps/12 - 3 eps^2/160 + O(eps^3)), eps = (d-1)/beta (the series
        # of beta sin^2 = (d-1) cos; the O(eps^3) coefficient is below 1 in absolute value)
        eps = (d - 1) / beta
        if eps < 0.5:
            series = 1 - eps / 12 - 3 * eps**2 / 160
            assert abs(tau / math.sqrt(eps) - series) <= eps**3 + 1e-15
    assert cl.threshold_angle(1e-3, 2) < math.pi / 2


@pytest.mark.parametrize("n", [1, 2, 5, 40])
def test_cone_collapse_rate_is_the_lemmas_constant(n):
    """The lemma's rate 1 / (2 n e^{2 beta}): the softmax weights lie in [e^{-2 beta} / n, 1],
    whence the e^{2 beta}. The trajectory test above cannot see the exponent (the true rates
    are far larger than the bound's); here the closed form, to the rounding of one exp and one
    division (1e-15 relative), and the factor e^{-2} per unit of beta."""
    for beta in (0.0, 0.5, 3.0):
        rate = cl.cone_collapse_rate(n, beta)
        assert rate * 2 * n * np.exp(2 * beta) == pytest.approx(1.0, rel=1e-15)
        assert cl.cone_collapse_rate(n, beta + 1.0) / rate == pytest.approx(np.exp(-2.0), rel=1e-14)


def test_phase_diagram_standard_error_is_that_of_the_systems_mean():
    """The error bar of each fraction is the standard error of a mean of `n_systems`
    independent fractions, s / sqrt(n_systems) with the unbiased s. At t = 0 the systems are
    their initial tokens (the normalised normal draws of the `rng`, as in the test above), so
    both sides are the same few sums of 12 numbers in [0, 1]: 1e-13. The threshold 0 makes the
    fractions spread (about half the pairs), so a wrong divisor shows."""
    n, d, seed, P = 6, 3, 4, 12
    pd = cl.phase_diagram(
        n, d, [0.5, 2.0], [0.0, 0.1], n_systems=P, dt=0.05, threshold=0.0, rng=seed
    )
    G = np.random.default_rng(seed).standard_normal((P, n, d))
    f = cl.clustered_fraction(G / np.linalg.norm(G, axis=-1, keepdims=True), threshold=0.0)
    assert np.std(f) > 0.05  # the systems differ: the error bar is not trivially zero
    np.testing.assert_allclose(pd.fraction[:, 0], f.mean(), rtol=1e-13)
    np.testing.assert_allclose(pd.stderr[:, 0], stats.sem(f, ddof=1), rtol=1e-13)
