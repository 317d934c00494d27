"""Tests of token_dynamics.wasserstein: closed forms, POT cross-checks, invariants, errors."""

import numpy as np
import ot
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.integrate import quad
from scipy.stats import norm

import token_dynamics.wasserstein as wd
from token_dynamics.wasserstein import (
    OptimalTransportError,
    bures_wasserstein,
    conditional_w1,
    conditional_w2,
    w2_gaussian_1d,
    wasserstein1,
    wasserstein2,
)

# Rounding of sums of O(1) terms over n <= 100 points: a few hundred ulps.
EXACT = 1e-12


# --- wasserstein2 / wasserstein1 -----------------------------------------------------------------


def test_translation_is_the_distance():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    shift = np.array([0.3, -1.0, 2.0])
    # A rigid translation of a measure is at W2 and W1 distance |shift| (the identity coupling
    # is optimal, Brenier); exact solvers give it to rounding.
    np.testing.assert_allclose(wasserstein2(X, X + shift), np.linalg.norm(shift), rtol=EXACT)
    np.testing.assert_allclose(wasserstein1(X, X + shift), np.linalg.norm(shift), rtol=1e-10)


@pytest.mark.parametrize("offset", [1e6, 1e8, 1e12])
def test_far_from_the_origin_the_distances_do_not_cancel(offset):
    # Clouds of size 1 at distance 1, both moved by `offset`: the moved coordinates are rounded
    # by at most eps * offset / 2 each, so every |x_i - y_j| moves by at most sqrt(d) eps offset
    # and W1, W2 (1-Lipschitz in the largest displacement) by at most that. The cost formed as
    # |x|^2 + |y|^2 - 2 <x, y> lost everything there (12 % on W2 and 51 % on W1 at 1e8).
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((5, 2)), rng.standard_normal((7, 2)) + 1.0
    tol = 2 * np.sqrt(2) * np.finfo(float).eps * offset + EXACT
    assert wasserstein2(X + offset, Y + offset) == pytest.approx(wasserstein2(X, Y), abs=tol)
    assert wasserstein1(X + offset, Y + offset) == pytest.approx(wasserstein1(X, Y), abs=tol)
    M = np.array([[2.0, 0.5], [0.5, 1.0]])  # the twisted cost: differences mapped, not points
    tol_M = np.sqrt(np.linalg.norm(M, 2)) * tol
    assert wasserstein2(X + offset, Y + offset, metric=M) == pytest.approx(
        wasserstein2(X, Y, metric=M), abs=tol_M
    )
    # entropic: the same plan up to its marginal tolerance 1e-9 (a relative change of the cost
    # of that order), plus the rounding above
    ref = wasserstein2(X, Y, method="entropic", reg=0.5)
    moved = wasserstein2(X + offset, Y + offset, method="entropic", reg=0.5)
    assert moved == pytest.approx(ref, rel=1e-8, abs=tol)


@pytest.mark.parametrize("scale", [1e-8, 1e-20, 1e-200, 1e100, 1e200])
def test_distances_scale_with_the_clouds(scale):
    # W(sX, sY) = s W(X, Y): each scaled coordinate is rounded relatively by eps, so each
    # distance and the optimal cost move by a few eps relatively. The network simplex works
    # with absolute tolerances: costs of 1e-16 gave a plan 1 % off before the cost was brought
    # to order one; below 1e-163 the squares underflowed to 0 (in d = 3, and in d = 1, whose
    # sorting path gave W2 = 0 at 1e-200 and an overflow error at 1e200). The conditional
    # distance of one-token positions and a block of two likewise (0 at 1e-200).
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((6, 3)), rng.standard_normal((8, 3)) + 0.5
    for dist in (wasserstein2, wasserstein1):
        for Xd, Yd in ((X, Y), (X[:, :1], Y[:, :1])):
            assert dist(scale * Xd, scale * Yd) / scale == pytest.approx(dist(Xd, Yd), rel=EXACT)
    pos = np.array([0.0, 0.0, 0.5, 1.0])
    Xc, Yc = np.column_stack([pos, X[:4, :2]]), np.column_stack([pos, Y[:4, :2]])
    for cond in (conditional_w2, conditional_w1):
        scaled = cond(Xc * [1.0, scale, scale], Yc * [1.0, scale, scale]) / scale
        assert scaled == pytest.approx(cond(Xc, Yc), rel=EXACT)
    if 1e-150 < scale < 1e150:  # reg, in units of squared distance, scales by scale^2
        got = wasserstein2(scale * X, scale * Y, method="entropic", reg=0.5 * scale**2)
        ref = wasserstein2(X, Y, method="entropic", reg=0.5)
        assert got / scale == pytest.approx(ref, rel=1e-8)


def test_matches_pot_and_is_symmetric():
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(40, 2)), rng.normal(size=(25, 2)) + 0.5
    a = rng.dirichlet(np.ones(40))
    ref = np.sqrt(ot.emd2(a, np.full(25, 1 / 25), ot.dist(X, Y)))
    np.testing.assert_allclose(wasserstein2(X, Y, weights_x=a), ref, rtol=EXACT)
    np.testing.assert_allclose(wasserstein2(Y, X, weights_y=a), ref, rtol=EXACT)


def test_one_dimensional_sorting_matches_network_simplex():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(50, 1)), rng.exponential(size=(70, 1))
    # In 1-D the exact path sorts; compare with POT's network simplex on the same cost.
    ref2 = np.sqrt(ot.emd2(np.full(50, 0.02), np.full(70, 1 / 70), ot.dist(x, y)))
    ref1 = ot.emd2(np.full(50, 0.02), np.full(70, 1 / 70), ot.dist(x, y, metric="euclidean"))
    np.testing.assert_allclose(wasserstein2(x, y), ref2, rtol=1e-10)
    np.testing.assert_allclose(wasserstein1(x, y), ref1, rtol=1e-10)


def test_twisted_metric_equals_euclidean_after_change_of_variables():
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(20, 2)), rng.normal(size=(20, 2))
    B = rng.normal(size=(2, 2))
    M = B @ B.T + 0.5 * np.eye(2)
    L = np.linalg.cholesky(M)
    # (x - y)^T M (x - y) = |L^T (x - y)|^2, so the twisted W2 is the plain one of the images.
    np.testing.assert_allclose(wasserstein2(X, Y, metric=M), wasserstein2(X @ L, Y @ L), rtol=EXACT)


def test_twisted_metric_in_one_dimension_scales_the_distance():
    """In 1-D the ground cost m (x - y)^2 is m times the Euclidean one, so W2 scales by sqrt(m)
    (the sorting path); embedding the points as (x, 0) with metric diag(m, 1) gives the same
    value through POT's network simplex, an independent solver. Sums of O(1) terms: EXACT."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(12, 1)), rng.normal(1.0, 2.0, size=(9, 1))
    m = 4.0
    value = wasserstein2(x, y, metric=[[m]])
    np.testing.assert_allclose(value, np.sqrt(m) * wasserstein2(x, y), rtol=EXACT)
    x2, y2 = np.hstack([x, np.zeros_like(x)]), np.hstack([y, np.zeros_like(y)])
    np.testing.assert_allclose(value, wasserstein2(x2, y2, metric=np.diag([m, 1.0])), rtol=EXACT)


def test_entropic_upper_bound_converges_to_exact():
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(30, 2)) + 1.0
    exact = wasserstein2(X, Y)
    values = [wasserstein2(X, Y, method="entropic", reg=r) for r in (3.0, 1.0, 0.3)]
    # The entropic plan is feasible, so its cost is >= the optimum (up to the 1e-6 marginal
    # tolerance); the bias shrinks with reg, like reg log n, here ~3% of W2^2 at reg = 0.3.
    assert all(v >= exact - 1e-6 for v in values)
    assert values[0] >= values[1] >= values[2]
    np.testing.assert_allclose(values[-1], exact, rtol=5e-2)


@pytest.mark.parametrize("reg", [1.0, 0.3, 0.1, 0.03, 0.01])
def test_entropic_bias_obeys_its_bound(reg):
    """0 <= <pi_eps, C> - W2^2 <= reg * min(H(a), H(b)) (the docstring's bound: the entropic
    plan minimises <pi, C> + reg KL(pi | a x b), and the KL of an optimal plan is at most either
    marginal's entropy). The plan's marginals are met to SINKHORN_ACCEPT in l1, which moves its
    cost by at most that times max C: the slack of both inequalities."""
    rng = np.random.default_rng(7)
    X, Y = rng.normal(size=(60, 2)), rng.normal(size=(80, 2)) + np.array([1.0, 0.5])
    a = rng.dirichlet(np.ones(60))
    C = ot.dist(X, Y)
    exact2 = wasserstein2(X, Y, weights_x=a) ** 2
    value2 = wasserstein2(X, Y, weights_x=a, method="entropic", reg=reg) ** 2
    slack = wd._solvers.SINKHORN_ACCEPT * C.max()
    entropy = min(-np.sum(a * np.log(a)), np.log(80))
    assert -slack <= value2 - exact2 <= reg * entropy + slack
    # the bias is a real effect of reg, not round-off: at reg = 1 it is ~0.4 of the bound
    if reg == 1.0:
        assert value2 - exact2 > 0.1 * reg * entropy


def test_entropic_matches_pot_log_sinkhorn():
    """The same strictly convex problem solved by POT's plain log-domain Sinkhorn: both stop at
    marginal errors <= 1e-9, so the costs agree to ~1e-9 times max C."""
    rng = np.random.default_rng(8)
    X, Y = rng.normal(size=(40, 3)), rng.normal(size=(50, 3))
    a, b = np.full(40, 1 / 40), np.full(50, 1 / 50)
    C = ot.dist(X, Y)
    ref = ot.sinkhorn2(a, b, C, 0.5, method="sinkhorn_log", stopThr=1e-12, numItermax=100_000)
    value = wasserstein2(X, Y, method="entropic", reg=0.5) ** 2
    np.testing.assert_allclose(value, float(ref), rtol=0, atol=1e-8 * C.max())


def test_entropic_ignores_massless_points_and_shows_progress(capsys):
    rng = np.random.default_rng(9)
    X, Y = rng.normal(size=(20, 2)), rng.normal(size=(25, 2))
    w = np.r_[np.full(15, 1 / 15), np.zeros(5)]
    ref = wasserstein2(X[:15], Y, method="entropic", reg=0.2)
    # zero weights drop out before the solve: bitwise the same computation
    assert wasserstein2(X, Y, weights_x=w, method="entropic", reg=0.2) == ref
    assert wasserstein2(X[:15], Y, method="entropic", reg=0.2, progress=True) == ref
    assert "entropic W2" in capsys.readouterr().err


def test_entropic_iteration_cap_is_reported(monkeypatch):
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(10, 2)), 10 * rng.normal(size=(10, 2))
    # reg tiny against costs ~ 100 needs hundreds of iterations; a cap of 5 cannot be enough
    # (with the real cap the solver converges here, even at reg = 1e-6: the failure is forced)
    # the cap is read where `wasserstein2` lives (the package re-exports its value)
    monkeypatch.setattr(wd._discrete, "SINKHORN_MAX_ITER", 5)
    with pytest.raises(OptimalTransportError, match=r"reg = 0\.001: marginal error .* increase"):
        wasserstein2(X, Y, method="entropic", reg=1e-3)


@given(st.integers(0, 10_000))
def test_triangle_inequality(seed):
    rng = np.random.default_rng(seed)
    X, Y, Z = (rng.normal(size=(8, 2)) for _ in range(3))
    assert wasserstein2(X, Z) <= wasserstein2(X, Y) + wasserstein2(Y, Z) + 1e-12
    assert wasserstein1(X, Y) <= wasserstein2(X, Y) + 1e-12  # Jensen: W1 <= W2


def test_arguments_are_validated():
    X = np.zeros((3, 2))
    with pytest.raises(ValueError, match="`Y` must have d = 2"):
        wasserstein2(X, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="`weights_x` must sum to one"):
        wasserstein2(X, X, weights_x=[0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="`method`"):
        wasserstein2(X, X, method="sinkhorn")
    with pytest.raises(ValueError, match=r"`reg` is required.*mean squared distance"):
        wasserstein2(X, X, method="entropic")
    with pytest.raises(ValueError, match="`progress` must be True or False"):
        wasserstein2(X, X, method="entropic", reg=1.0, progress=1)
    with pytest.raises(ValueError, match="`reg` is only used"):
        wasserstein2(X, X, reg=0.1)
    with pytest.raises(ValueError, match="`metric` must be positive definite"):
        wasserstein2(X, X, metric=-np.eye(2))
    with pytest.raises(ValueError, match="`metric` must be symmetric"):
        wasserstein2(X, X, metric=[[1.0, 1.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="`X` contains NaN"):
        wasserstein1(np.full((2, 2), np.nan), X)


# --- exact 1-D W2 to a Gaussian ---------------------------------------------------------------


@pytest.mark.statement("mf-prop-w2-quantile")
@pytest.mark.parametrize("weighted", [False, True])
def test_gaussian_1d_matches_quantile_integral(weighted):
    rng = np.random.default_rng(6)
    x = np.sort(rng.normal(0.3, 1.2, size=7))
    m, s = -0.2, 0.7
    w = rng.dirichlet(np.ones(7)) if weighted else np.full(7, 1 / 7)
    # W2^2 = int_0^1 (F^{-1}(u) - G^{-1}(u))^2 du, integrated piecewise by adaptive quadrature
    # between the cumulative weights c_{i-1}, c_i (the statement's weighted measure).
    edges = np.concatenate([[0.0], np.cumsum(w)])
    edges[-1] = 1.0
    val = sum(
        quad(lambda u, xi=xi: (xi - m - np.sqrt(s) * norm.ppf(u)) ** 2, a, b)[0]
        for xi, a, b in zip(x, edges[:-1], edges[1:], strict=True)
    )
    got = w2_gaussian_1d(x, m, s, weights=w if weighted else None)
    np.testing.assert_allclose(got, np.sqrt(val), rtol=1e-8)  # quad accuracy


@pytest.mark.statement("mf-prop-w2-quantile")
def test_gaussian_1d_matches_pot_on_large_samples():
    rng = np.random.default_rng(7)
    x = rng.normal(0.5, np.sqrt(0.4), size=300)
    ref = rng.normal(0.5, np.sqrt(0.4), size=400_000)
    exact = w2_gaussian_1d(x, 0.5, 0.4)
    sampled = wasserstein2(x[:, None], ref[:, None])
    # The reference sample is itself off by W2 ~ sqrt(loglog N / N) ~ 2e-3 (1-D Gaussian rate),
    # so by the triangle inequality the two agree to a few 1e-3.
    np.testing.assert_allclose(sampled, exact, atol=5e-3)


def test_gaussian_1d_limits_and_weights():
    # Variance 0: the Gaussian is a Dirac and W2^2 is the second moment about the mean.
    x = np.array([0.0, 1.0, 3.0])
    np.testing.assert_allclose(w2_gaussian_1d(x, 1.0, 0.0), np.sqrt(5 / 3), rtol=EXACT)
    # A single point at the mean: W2^2 = s (all the spread of the Gaussian).
    np.testing.assert_allclose(w2_gaussian_1d([2.0], 2.0, 0.49), 0.7, rtol=EXACT)
    # Duplicating points with halved weights leaves the measure, hence W2, unchanged.
    w = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(
        w2_gaussian_1d(np.repeat(x, 2), 0.1, 0.8, weights=np.repeat(w / 2, 2)),
        w2_gaussian_1d(x, 0.1, 0.8, weights=w),
        rtol=1e-12,
    )
    # (n, 1) tokens are accepted as well as (n,) samples.
    assert w2_gaussian_1d(x[:, None], 0.0, 1.0) == w2_gaussian_1d(x, 0.0, 1.0)


@pytest.mark.parametrize(("k", "var"), [(-700, 0.0), (510, 0.5)])
def test_gaussian_1d_scales_with_the_sample(k, var):
    """W2(s x, N(s m, s^2 v)) = s W2(x, N(m, v)), for s a power of two (every scaled input
    exact, the same arithmetic: EXACT). At s = 2^-700 (points near 1e-211; v = 0, since
    s^2 v would underflow) the squared points underflowed to a distance of 0; at s = 2^510
    (points near 1e154, variance near 1e307) the square of the point at 8 s overflowed."""
    x, m = np.array([1.0, -2.0, 8.0]), 0.5
    s = 2.0**k
    scaled = w2_gaussian_1d(s * x, s * m, s**2 * var) / s
    assert scaled == pytest.approx(w2_gaussian_1d(x, m, var), rel=EXACT)


def test_gaussian_1d_is_accurate_for_large_quantile_samples():
    """The n = 1e5 quantile points z_i = Phi^-1((i + 1/2)/n) of N(5, 2) are within W2 ~ 1.4e-3
    of it: W2^2 = 2e-6 is a difference of terms of size s = 2. The reference takes the
    interval ends c_i = i/n as they are (np.arange(n + 1)/n, each to one rounding) and sums by
    parts, cross = sum_i phi(q_i)(x_(i) - x_(i-1)). Both evaluations round the O(1) sums by
    about 1e-15, 5e-10 of W2^2 (an mpmath value at 30 digits agrees with the reference to
    2e-10): rtol 1e-8. A plain cumulative sum of the weights rounded the c_i by up to 2e-12,
    which gave W2 1.7e-5 off (1e-3 at n = 1e6)."""
    n = 100_000
    x = 5.0 + np.sqrt(2.0) * norm.ppf((np.arange(n) + 0.5) / n)
    q = norm.ppf(np.arange(1, n) / n)
    cross = np.sum(norm.pdf(q) * np.diff(np.sort(x) - 5.0))
    ref = np.sqrt(np.mean((x - 5.0) ** 2) - 2.0 * np.sqrt(2.0) * cross + 2.0)
    np.testing.assert_allclose(w2_gaussian_1d(x, 5.0, 2.0), ref, rtol=1e-8)


def test_gaussian_1d_validation():
    with pytest.raises(ValueError, match="`var` must be nonnegative"):
        w2_gaussian_1d([0.0], 0.0, -1.0)
    with pytest.raises(ValueError, match="`mean` must be a finite"):
        w2_gaussian_1d([0.0], np.nan, 1.0)
    with pytest.raises(ValueError, match="`x` must have shape"):
        w2_gaussian_1d(np.zeros((2, 2)), 0.0, 1.0)


# --- Bures-Wasserstein -------------------------------------------------------------------------


def test_bures_closed_forms():
    # Commuting covariances: W2^2 = |dm|^2 + |S1^{1/2} - S2^{1/2}|_F^2.
    S1, S2 = np.diag([1.0, 4.0]), np.diag([9.0, 1.0])
    m1, m2 = np.array([0.0, 1.0]), np.array([3.0, 5.0])
    expected = np.sqrt(25 + (1 - 3) ** 2 + (2 - 1) ** 2)
    np.testing.assert_allclose(bures_wasserstein(m1, S1, m2, S2), expected, rtol=EXACT)
    # Symmetric, zero on the diagonal, and degenerate covariances are allowed.
    P = np.array([[1.0, 0.0], [0.0, 0.0]])
    assert bures_wasserstein(m1, P, m1, P) == pytest.approx(0.0, abs=1e-7)  # sqrt of rounding


def test_bures_matches_pot_and_samples():
    rng = np.random.default_rng(8)
    B1, B2 = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    S1, S2 = B1 @ B1.T, B2 @ B2.T + np.eye(3)
    m1, m2 = rng.normal(size=3), rng.normal(size=3)
    ref = float(np.squeeze(ot.gaussian.bures_wasserstein_distance(m1, m2, S1, S2)))
    np.testing.assert_allclose(bures_wasserstein(m1, S1, m2, S2), ref, rtol=1e-8)
    np.testing.assert_allclose(
        bures_wasserstein(m1, S1, m2, S2), bures_wasserstein(m2, S2, m1, S1), rtol=1e-10
    )


@pytest.mark.parametrize("exponent", [-330, -20, 20, 330])
def test_bures_scales_with_the_gaussians(exponent):
    # W2(s m1, s^2 S1; s m2, s^2 S2) = s W2(m1, S1; m2, S2). With s a power of two every
    # scaled entry is exact, and so is the covariances' rescaling by a power of two: the same
    # arithmetic, up to the last rounding. At s = 2^-330 (covariances near 1e-200) the cross
    # term S1^{1/2} S2 S1^{1/2} underflowed and the distance came out 3.5x too large.
    S1, S2 = np.array([[2.0, 0.3], [0.3, 1.0]]), np.array([[1.0, -0.2], [-0.2, 0.5]])
    m1, m2 = np.array([0.5, -1.0]), np.array([0.25, 0.0])
    s = 2.0**exponent
    ref = bures_wasserstein(m1, S1, m2, S2)
    got = bures_wasserstein(s * m1, s**2 * S1, s * m2, s**2 * S2)
    assert got / s == pytest.approx(ref, rel=4 * np.finfo(float).eps)
    # the covariance part alone (equal means), which underflowed
    ref0 = bures_wasserstein(m1, S1, m1, S2)
    assert bures_wasserstein(s * m1, s**2 * S1, s * m1, s**2 * S2) / s == pytest.approx(
        ref0, rel=4 * np.finfo(float).eps
    )


def test_bures_validation():
    with pytest.raises(ValueError, match="`S2` must be positive semi-definite"):
        bures_wasserstein([0.0], [[1.0]], [0.0], [[-1.0]])
    with pytest.raises(ValueError, match="`S1` must be symmetric"):
        bures_wasserstein([0, 0], [[1.0, 1.0], [0.0, 1.0]], [0, 0], np.eye(2))
    with pytest.raises(ValueError, match="`m2` must have shape"):
        bures_wasserstein([0, 0], np.eye(2), [0.0], np.eye(2))


# --- conditional W_{2, lambda} -----------------------------------------------------------------


def _positions(n):
    return np.arange(n) / n


@pytest.mark.statement("mf-prop-conditional")
@given(st.integers(0, 10_000))
def test_conditional_dominates_plain_w2(seed):
    rng = np.random.default_rng(seed)
    n = 12
    X = np.column_stack([_positions(n), rng.normal(size=(n, 2))])
    Y = np.column_stack([_positions(n), rng.normal(size=(n, 2))])
    cond = conditional_w2(X, Y)
    # One token per position: W_{2,lambda} is the index-matched RMS distance.
    np.testing.assert_allclose(cond, np.sqrt(np.mean(np.sum((X - Y) ** 2, axis=1))), rtol=EXACT)
    # Gluing the conditional couplings gives a coupling of the token marginals: W2 <= W_{2,lambda}.
    assert wasserstein2(X[:, 1:], Y[:, 1:]) <= cond + 1e-12
    # Also in the joint space [0, 1] x R^d, where positions are matched exactly.
    assert wasserstein2(X, Y) <= cond + 1e-12


@pytest.mark.statement("mf-prop-conditional")
def test_conditional_with_blocks_and_weights():
    rng = np.random.default_rng(9)
    # Two tokens at position 0 (a sink block, mass 1/2) and one at each of 0.5 and 1.
    pos = np.array([0.0, 0.0, 0.5, 1.0])
    w = np.array([0.25, 0.25, 0.25, 0.25])
    X = np.column_stack([pos, rng.normal(size=(4, 2))])
    Y = np.column_stack([pos, rng.normal(size=(4, 2))])
    block = wasserstein2(X[:2, 1:], Y[:2, 1:]) ** 2
    rest = np.sum((X[2:, 1:] - Y[2:, 1:]) ** 2, axis=1) @ w[2:]
    np.testing.assert_allclose(
        conditional_w2(X, Y, weights_x=w, weights_y=w), np.sqrt(0.5 * block + rest), rtol=EXACT
    )
    # Inside a block the order of tokens does not matter (a measure, not a list).
    np.testing.assert_allclose(conditional_w2(X, Y[[1, 0, 2, 3]]), conditional_w2(X, Y), rtol=EXACT)


# --- conditional W_{1, lambda} -----------------------------------------------------------------


def test_conditional_w1_by_hand():
    # A block of two tokens at position 0 (mass 1/2) and one token at 0.5 and at 1 (mass 1/4
    # each). In the block X = {(0, 0), (3, 4)} and Y = {(0, 0), (0, 0)}: every coupling moves
    # (3, 4) to the origin, so W1 = 5/2 and W2 = (25/2)^(1/2) there. The single tokens move by
    # |(1, 0)| = 1 and |(0, -2)| = 2. Hence W_{1,lambda} = 5/4 + 1/4 + 2/4 = 2 and
    # W_{2,lambda}^2 = 25/4 + 1/4 + 4/4 = 7.5.
    pos = np.array([0.0, 0.0, 0.5, 1.0])
    X = np.column_stack([pos, [[0.0, 0.0], [3.0, 4.0], [1.0, 1.0], [0.0, 2.0]]])
    Y = np.column_stack([pos, [[0.0, 0.0], [0.0, 0.0], [2.0, 1.0], [0.0, 0.0]]])
    np.testing.assert_allclose(conditional_w1(X, Y), 2.0, rtol=EXACT)
    np.testing.assert_allclose(conditional_w2(X, Y) ** 2, 7.5, rtol=EXACT)
    # On the line (the sorting path): a block X = {0, 3}, Y = {1, 2} at mass 2/3, where the
    # monotone matching moves each token by 1 (W1 = 1; the crossed one would give 2), and one
    # token at 0.5 moving by 4 at mass 1/3: W_{1,lambda} = 2/3 + 4/3 = 2.
    Z = np.column_stack([[0.0, 0.0, 0.5], [0.0, 3.0, 0.0]])
    W = np.column_stack([[0.0, 0.0, 0.5], [1.0, 2.0, 4.0]])
    np.testing.assert_allclose(conditional_w1(Z, W), 2.0, rtol=EXACT)
    # Weights: the same measures with the block's mass carried by its first token only
    # (zero-weight tokens are dropped): block W1 = |0 - 1| = 1 at mass 1/2, then 4 at mass 1/2.
    w = [0.5, 0.0, 0.5]
    np.testing.assert_allclose(conditional_w1(Z, W, weights_x=w, weights_y=w), 2.5, rtol=EXACT)


def test_conditional_w1_at_the_two_extremes_of_lambda():
    rng = np.random.default_rng(11)
    n, d = 9, 2
    X, Y = rng.normal(size=(n, d)), rng.normal(size=(n, d)) + 0.3
    w = rng.dirichlet(np.ones(n))
    # lambda a single atom: every token at one position, W_{1,lambda} is the plain W1.
    one = np.zeros((n, 1))
    np.testing.assert_allclose(
        conditional_w1(np.hstack([one, X]), np.hstack([one, Y]), weights_x=w, weights_y=w),
        wasserstein1(X, Y, weights_x=w, weights_y=w),
        rtol=EXACT,
    )
    # lambda with n atoms, one token each: the index-matched mean distance sum_i w_i |x_i - y_i|.
    pos = _positions(n)[:, None]
    np.testing.assert_allclose(
        conditional_w1(np.hstack([pos, X]), np.hstack([pos, Y]), weights_x=w, weights_y=w),
        w @ np.linalg.norm(X - Y, axis=1),
        rtol=EXACT,
    )


@pytest.mark.statement("mf-prop-conditional")
@given(st.integers(0, 10_000))
def test_conditional_w1_between_plain_w1_and_conditional_w2(seed):
    # The proposition for p = 1 and p = 2: W1 <= W_{1,lambda} (glue the conditional couplings),
    # both for the contents and in [0, 1] x R^d, and W_{1,lambda} <= W_{2,lambda} (Jensen, then
    # W1 <= W2 block by block). Blocks of random sizes, Dirichlet weights; the slack 1e-12 is
    # the rounding of sums of n <= 12 terms of order one.
    rng = np.random.default_rng(seed)
    n, d = 12, 2
    pos = np.sort(rng.integers(0, 4, size=n)) / 4.0
    w = rng.dirichlet(np.ones(n))
    X = np.column_stack([pos, rng.normal(size=(n, d))])
    Y = np.column_stack([pos, rng.normal(size=(n, d))])
    wy = w.copy()  # Y's weights: the same mass at each position, split otherwise inside it
    for s in np.unique(pos):
        wy[pos == s] = w[pos == s].sum() * rng.dirichlet(np.ones(np.sum(pos == s)))
    cond1 = conditional_w1(X, Y, weights_x=w, weights_y=wy)
    cond2 = conditional_w2(X, Y, weights_x=w, weights_y=wy)
    assert wasserstein1(X[:, 1:], Y[:, 1:], weights_x=w, weights_y=wy) <= cond1 + 1e-12
    assert wasserstein1(X, Y, weights_x=w, weights_y=wy) <= cond1 + 1e-12
    assert cond1 <= cond2 + 1e-12


@pytest.mark.parametrize("cond", [conditional_w2, conditional_w1])
def test_conditional_requires_a_shared_position_marginal(cond):
    X = np.column_stack([_positions(4), np.zeros(4)])
    Y = X.copy()
    Y[1, 0] = 0.3
    with pytest.raises(ValueError, match="same position marginal"):
        cond(X, Y)
    with pytest.raises(ValueError, match="same position marginal"):
        cond(X, X, weights_y=[0.4, 0.2, 0.2, 0.2])
    with pytest.raises(ValueError, match=r"\(n, 1 \+ d\)"):
        cond(np.zeros((3, 1)), np.zeros((3, 1)))
