"""Tests of token_dynamics.diagnostics against closed forms and brute force.

Tolerances: 1e-14 to 1e-12 relative is round-off (machine epsilon times the handful of
operations per entry, or the n-term sums of a moment); other tolerances are commented.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from token_dynamics import attention as att
from token_dynamics.diagnostics import (
    cluster_count,
    diameter,
    empirical_covariance,
    empirical_mean,
    excess_kurtosis,
    fit_power_law,
    interaction_energy,
    min_inner_product,
    numerical_rank,
)


def test_weighted_moments_equal_repeated_tokens():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 3))
    counts = np.array([1, 3, 2, 1, 4])
    Xr = np.repeat(X, counts, axis=0)
    w = counts / counts.sum()
    np.testing.assert_allclose(empirical_mean(X, weights=w), Xr.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(
        empirical_covariance(X, weights=w), np.cov(Xr.T, bias=True), rtol=1e-12
    )
    C = empirical_covariance(X)
    np.testing.assert_array_equal(C, C.T)
    assert np.linalg.eigvalsh(C).min() > -1e-15


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30))
def test_diameter_and_min_inner_product_brute_force(seed, n):
    X = np.random.default_rng(seed).standard_normal((n, 2))
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    np.testing.assert_allclose(diameter(X), D.max(), rtol=1e-14)
    np.testing.assert_allclose(min_inner_product(X), (X @ X.T).min(), rtol=1e-14)


def test_diameter_in_blocks(monkeypatch):
    X = np.random.default_rng(1).standard_normal((50, 3))
    dense = diameter(X)
    monkeypatch.setattr(att._kernels, "BLOCK_ELEMENTS", 7)
    assert diameter(X) == dense
    # tight cluster: differences, not |x|^2 + |y|^2 - 2<x,y>, so no cancellation
    Y = np.array([[1e3, 0.0], [1e3 + 1e-9, 0.0]])
    assert diameter(Y) == Y[1, 0] - Y[0, 0]  # the exact difference (Sterbenz), ~1e-9


@pytest.mark.statement("tok-prop-sphere-energy")
def test_interaction_energy_closed_forms():
    beta = 3.0
    one = np.tile([[0.0, 1.0]], (4, 1))
    np.testing.assert_allclose(
        interaction_energy(one, beta=beta), np.exp(beta) / (2 * beta), rtol=1e-14
    )
    X = np.array([[1.0, 0.0], [0.0, 1.0]])  # orthogonal pair: (2 e^beta + 2) / 4 / (2 beta)
    np.testing.assert_allclose(
        interaction_energy(X, beta=beta), (np.exp(beta) + 1) / (4 * beta), rtol=1e-14
    )
    w = np.array([0.25, 0.75])
    expected = (w[0] ** 2 * np.exp(beta) + w[1] ** 2 * np.exp(beta) + 2 * w[0] * w[1]) / (2 * beta)
    np.testing.assert_allclose(interaction_energy(X, beta=beta, weights=w), expected, rtol=1e-14)
    A = np.diag([2.0, 0.0])
    expected = (np.exp(2 * beta) + 3) / (8 * beta)
    np.testing.assert_allclose(interaction_energy(X, beta=beta, A=A), expected, rtol=1e-14)
    # large beta: summed in the log domain, finite while e^(beta) alone is near the limit
    np.testing.assert_allclose(
        interaction_energy(one, beta=700.0), np.exp(700.0) / 1400, rtol=1e-12
    )
    with pytest.raises(FloatingPointError, match="float64 range"):
        interaction_energy(one, beta=800.0)
    # negative beta: 1/(2 beta) < 0
    assert interaction_energy(X, beta=-1.0) < 0


def test_cluster_count():
    rng = np.random.default_rng(2)
    centres = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    X = np.repeat(centres, 40, axis=0) + 1e-4 * rng.standard_normal((120, 2))
    assert cluster_count(X, 1e-2) == 3
    assert cluster_count(X, 10.0) == 1
    assert cluster_count(X, 0.0) == 120
    # a chain of points 1 apart is one single-linkage cluster at tol = 1, n at tol < 1
    chain = np.column_stack([np.arange(30.0)[::-1], np.zeros(30)])
    assert cluster_count(chain, 1.0) == 1
    assert cluster_count(chain, 0.99) == 30


def test_cluster_count_in_blocks(monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 2)) * 3
    dense = cluster_count(X, 0.3)
    monkeypatch.setattr(att._kernels, "BLOCK_ELEMENTS", 5 * 200)
    assert cluster_count(X, 0.3) == dense
    from scipy.cluster.hierarchy import fcluster, linkage

    labels = fcluster(linkage(X, "single"), t=0.3, criterion="distance")
    assert dense == labels.max()  # scipy's single linkage as a cross-implementation


def test_numerical_rank():
    rng = np.random.default_rng(4)
    U = rng.standard_normal((10, 2))
    assert numerical_rank(U @ rng.standard_normal((2, 6))) == 2
    assert numerical_rank(np.zeros((3, 3))) == 0
    assert numerical_rank(np.diag([1.0, 1e-6]), rtol=1e-5) == 1
    assert numerical_rank(np.diag([1.0, 1e-6]), rtol=1e-7) == 2


def test_numerical_rank_counts_singular_values_strictly_above_the_threshold():
    """#{i : sigma_i > rtol sigma_1}, a strict inequality: with rtol = 0 a zero singular value
    is not counted, and one equal to the threshold is not either (the singular values of a
    diagonal matrix of powers of two are exact)."""
    assert numerical_rank(np.diag([1.0, 0.0]), rtol=0) == 1
    assert numerical_rank(np.diag([1.0, 0.5, 0.25]), rtol=0.5) == 1
    assert numerical_rank(np.diag([1.0, 0.5, 0.25]), rtol=0.25) == 2


def test_numerical_rank_default_threshold_is_the_larger_dimension_times_eps():
    """The default rtol is max(p, q) eps, numpy.linalg.matrix_rank's: a 10 x 2 matrix with
    orthogonal coordinate columns of norms 1 and 4 eps has those singular values to a few ulps,
    and 4 eps lies between min(p, q) eps = 2 eps and max(p, q) eps = 10 eps (a factor 2 from
    each), so the rank is 1 with the larger dimension and 2 with the smaller."""
    eps = np.finfo(np.float64).eps
    M = np.zeros((10, 2))
    M[0, 0], M[1, 1] = 1.0, 4 * eps
    for A in (M, M.T):
        assert numerical_rank(A) == np.linalg.matrix_rank(A) == 1
        assert numerical_rank(A, rtol=2 * eps) == 2


def test_power_law_fit_is_the_least_squares_line_and_evaluates_c_x_to_the_p():
    """On exact data y = 3 x^(-1/2) the log-log line is exact: slope -1/2, intercept log 3, and
    the fit evaluates to y (the logarithms are exact to an ulp, the 2 x 2 normal equations of
    log x in [0, log 100] well conditioned: 1e-12 relative). On noisy data the fit is the
    least-squares solution of [log x, 1] [p, log C] = log y, computed here by lstsq."""
    x = np.array([1.0, 4.0, 16.0, 100.0])
    fit = fit_power_law(x, 3.0 * x**-0.5)
    assert fit.slope == pytest.approx(-0.5, rel=1e-12)
    assert fit.intercept == pytest.approx(np.log(3.0), rel=1e-12)
    np.testing.assert_allclose(fit(np.array([2.0, 9.0])), 3.0 / np.sqrt([2.0, 9.0]), rtol=1e-12)
    rng = np.random.default_rng(3)
    y = 3.0 * x**-0.5 * np.exp(0.1 * rng.standard_normal(x.size))
    fit = fit_power_law(x, y)
    A = np.column_stack([np.log(x), np.ones(x.size)])
    (p, logc), *_ = np.linalg.lstsq(A, np.log(y), rcond=None)
    assert (fit.slope, fit.intercept) == pytest.approx((p, logc), rel=1e-12)
    np.testing.assert_allclose(fit(x), np.exp(logc) * x**p, rtol=1e-12)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: empirical_mean(np.ones(3)), "`X`"),
        (lambda: empirical_covariance(np.ones((3, 2)), weights=[1.0, 0.0, 0.5]), "`weights`"),
        (lambda: interaction_energy(np.ones((2, 2)), beta=0.0), "`beta`"),
        (lambda: interaction_energy(np.ones((2, 2)), A=np.eye(3)), "`A`"),
        (lambda: cluster_count(np.ones((2, 2)), -1.0), "`tol`"),
        (lambda: numerical_rank(np.ones(3)), "`M`"),
        (lambda: numerical_rank(np.eye(2), rtol=-1.0), "`rtol`"),
    ],
)
def test_bad_inputs_raise_named_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("scale", [1e-100, 1e100, 1e150, 1e200])
def test_diameter_and_covariance_are_overflow_safe(scale):
    """Issue 15, defects 5 and 7: diameter and covariance scale as c and c^2, without overflow.

    The rescaling is by a power of two (exact), so only the final product rounds: a few ulps.
    """
    X = np.array([[1.0, 0.0], [-1.0, 0.5], [0.25, 2.0]])
    np.testing.assert_allclose(diameter(scale * X), scale * diameter(X), rtol=1e-15)
    if scale <= 1e150:
        np.testing.assert_allclose(
            empirical_covariance(scale * X) / scale**2, empirical_covariance(X), rtol=1e-14
        )
    else:  # entries of order 1e400 have no float64 value
        with pytest.raises(FloatingPointError, match="`X`"):
            empirical_covariance(scale * X)
    with pytest.raises(FloatingPointError, match="diameter"):
        diameter([[-1e308, 0.0], [1e308, 0.0]])  # 2e308 > the largest float


def test_excess_kurtosis_of_two_point_and_gaussian_clouds():
    # two symmetric values: fourth moment = variance^2, so 1 - 3 exactly (to rounding)
    X = np.array([[1.0, 5.0], [-1.0, 3.0], [1.0, 3.0], [-1.0, 5.0]])
    np.testing.assert_allclose(excess_kurtosis(X), [-2.0, -2.0], rtol=1e-14)
    # a Gaussian sample: zero within 5 standard errors sqrt(24 / n)
    n = 20_000
    G = np.random.default_rng(0).standard_normal((n, 3))
    assert np.all(np.abs(excess_kurtosis(G)) < 5 * np.sqrt(24 / n))
    # uniform: -6/5 (standard error sqrt(1.6 / n) ~ 0.01 at this n: 5 of them)
    U = np.random.default_rng(1).uniform(-1, 1, size=(n, 1))
    np.testing.assert_allclose(excess_kurtosis(U), [-1.2], atol=5 * np.sqrt(1.6 / n))
    # invariant under shifts and scalings of a coordinate, even huge ones (no overflow)
    np.testing.assert_allclose(excess_kurtosis(1e200 * G + 3.0), excess_kurtosis(G), rtol=1e-12)
    with pytest.raises(ValueError, match="constant coordinate"):
        excess_kurtosis(np.column_stack([G[:, 0], np.ones(n)]))


def test_cluster_count_is_exact_beside_a_far_token_and_at_tiny_scales():
    # a gap of 1e-3 beside a token at 1e200: the squares of the rescaled gap underflow, so the
    # pair is decided from its coordinate differences scaled by their largest one
    X = np.array([[0.0, 0.0], [1e-3, 0.0], [1e200, 0.0]])
    assert cluster_count(X, 1e-4) == 3 and cluster_count(X, 2e-3) == 2
    # a gap of 1e-200 (its square underflows float64) beside a unit token
    Y = np.array([[0.0, 0.0], [1e-200, 0.0], [1.0, 0.0]])
    assert cluster_count(Y, 1e-201) == 3 and cluster_count(Y, 2e-200) == 2
    # distinct tokens at 1e-200 and at subnormal 1e-310 (tol = 0 counts distinct tokens)
    Z = np.random.default_rng(5).standard_normal((6, 3))
    for scale in (1e-200, 1e-310):
        assert cluster_count(Z * scale, 0.0) == 6
    assert cluster_count(np.vstack([Z, Z[:2]]) * 1e-310, 0.0) == 6
    # huge distances within a huge tol: no overflow to a false "far"
    assert cluster_count(np.array([[-1e300, 0.0], [1e300, 0.0]]), 3e300) == 1


@pytest.mark.parametrize("d", [2, 3, 5])
def test_cluster_count_links_as_the_exact_distance_says_beyond_a_few_ulps_of_tol(d):
    # the promise of the docstring: a pair is linked as its exact distance (rational arithmetic
    # on the tokens' own values) says whenever that distance is not within a relative
    # (d + 4) eps of tol. Each pair is asked at tol 2 (d + 4) eps above and below its exact
    # distance (rounded once to a float: half an eps more), on both sides of the margin
    eps = np.finfo(np.float64).eps
    rng = np.random.default_rng(d)
    for x, y in rng.uniform(-1, 1, size=(50, 2, d)):
        exact = math.sqrt(sum((Fraction(a) - Fraction(b)) ** 2 for a, b in zip(x, y, strict=True)))
        pair = np.array([x, y])
        assert cluster_count(pair, exact * (1 + 2 * (d + 4) * eps)) == 1
        assert cluster_count(pair, exact * (1 - 2 * (d + 4) * eps)) == 2


def test_rows_of_zero_weight_play_no_role():
    # a huge token of zero weight must not set the scale (it pushed the others into underflow)
    X = np.random.default_rng(0).standard_normal((6, 3))
    for big in (1e160, 1e200, 1e300):
        Xb = X.copy()
        Xb[-1] *= big
        w = np.full(6, 0.2)
        w[-1] = 0.0
        # sums of n = 5 terms of size up to m = max|x| (the mean) or (2m)^2 (the centred
        # products), each rounded to eps: within n eps m and 4 n eps m^2 of the support's own
        n, m, eps = 5, np.abs(X[:5]).max(), np.finfo(np.float64).eps
        np.testing.assert_allclose(
            empirical_covariance(Xb, weights=w),
            np.cov(X[:5].T, bias=True),
            rtol=0,
            atol=4 * n * eps * m**2,
        )
        np.testing.assert_allclose(
            empirical_mean(Xb, weights=w), X[:5].mean(axis=0), rtol=0, atol=n * eps * m
        )
        np.testing.assert_allclose(
            interaction_energy(Xb, weights=w), interaction_energy(X[:5]), rtol=1e-14
        )
