"""Tests of token_dynamics.sampling: moments within Monte Carlo error, reproducibility."""

import numpy as np
import pytest

from token_dynamics.sampling import gaussian_cloud, gaussian_mixture, uniform_sphere


def test_gaussian_cloud_moments():
    n = 20_000
    mean = np.array([1.0, -2.0, 0.5])
    B = np.random.default_rng(0).standard_normal((3, 3))
    cov = B @ B.T + 0.1 * np.eye(3)
    X = gaussian_cloud(n, mean, cov, rng=1)
    assert X.shape == (n, 3) and X.dtype == np.float64
    # Monte Carlo: mean error ~ sqrt(diag(cov)/n), covariance error ~ |cov| sqrt(2/n); 5 sigma
    np.testing.assert_allclose(
        X.mean(axis=0), mean, rtol=0, atol=5 * np.sqrt(cov.diagonal().max() / n)
    )
    np.testing.assert_allclose(
        np.cov(X.T), cov, rtol=0, atol=5 * np.abs(cov).max() * np.sqrt(2 / n)
    )


def test_covariance_near_the_largest_float_has_finite_tokens():
    # 1e308 [[1, 0.9], [0.9, 1]] is a valid covariance whose largest eigenvalue, 1.9e308, passes
    # the largest float: its factor held inf and every token was +-inf. The factor's entries are
    # of order 1e154; the sample covariance, read at 1e154 per unit, is the matrix within
    # Monte Carlo error, |cov| sqrt(2/n) per entry (5 sigma)
    n = 20_000
    unit = np.array([[1.0, 0.9], [0.9, 1.0]])
    X = gaussian_cloud(n, [0.0, 0.0], 1e308 * unit, rng=3)
    assert np.all(np.isfinite(X))
    np.testing.assert_allclose(np.cov((X / 1e154).T), unit, rtol=0, atol=5 * np.sqrt(2 / n))


def test_degenerate_covariance_is_accepted():
    X = gaussian_cloud(100, [0.0, 0.0], [[1.0, 1.0], [1.0, 1.0]], rng=2)
    np.testing.assert_allclose(X[:, 0], X[:, 1], rtol=0, atol=1e-12)  # rank one: on the diagonal


def test_uniform_sphere_is_on_the_sphere_and_centred():
    n, d = 20_000, 3
    X = uniform_sphere(n, d, rng=3)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=0, atol=1e-15)
    # uniform on S^2: mean 0 and second moment I/3, each coordinate with variance <= 1/n; 5 sigma
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=5 / np.sqrt(n))
    np.testing.assert_allclose(X.T @ X / n, np.eye(3) / 3, atol=5 / np.sqrt(n))


def test_gaussian_mixture_proportions_and_components():
    n = 10_000
    means = np.array([[-10.0, 0.0], [10.0, 0.0]])
    X = gaussian_mixture(
        n, means, np.stack([np.eye(2), 0.25 * np.eye(2)]), weights=[0.3, 0.7], rng=4
    )
    left = X[:, 0] < 0
    # binomial proportion: std sqrt(p(1-p)/n) ~ 0.0046; 5 sigma
    assert abs(left.mean() - 0.3) < 5 * np.sqrt(0.21 / n)
    np.testing.assert_allclose(X[~left].var(axis=0), 0.25, rtol=0.1)  # 5 sigma of sqrt(2/7000)
    shared = gaussian_mixture(10, means, np.eye(2), rng=4)
    assert shared.shape == (10, 2)


def test_rng_reproducibility():
    np.testing.assert_array_equal(uniform_sphere(5, 4, rng=9), uniform_sphere(5, 4, rng=9))
    gen = np.random.default_rng(9)
    a = gaussian_cloud(3, [0.0], [[1.0]], rng=gen)
    b = gaussian_cloud(3, [0.0], [[1.0]], rng=gen)
    assert not np.array_equal(a, b)  # a Generator is consumed, not reseeded


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: gaussian_cloud(0, [0.0], [[1.0]]), "`n`"),
        (lambda: gaussian_cloud(5, [0.0, 0.0], [[1.0]]), "`cov`"),
        (lambda: gaussian_cloud(5, [0.0, 0.0], [[1.0, 2.0], [0.0, 1.0]]), "`cov`"),
        (lambda: gaussian_cloud(5, [0.0, 0.0], [[1.0, 0.0], [0.0, -1.0]]), "`cov`"),
        (lambda: uniform_sphere(5, 0), "`d`"),
        (lambda: gaussian_mixture(5, [[0.0], [1.0]], np.ones((3, 1, 1))), "`covs`"),
        (lambda: gaussian_mixture(5, [[0.0], [1.0]], [[1.0]], weights=[0.5, 0.6]), "`weights`"),
    ],
)
def test_bad_inputs_raise_named_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_rng_is_a_type_error():
    with pytest.raises(TypeError, match="`rng`"):
        uniform_sphere(3, 2, rng="seed")


def test_uniform_sphere_has_the_fourth_moment_of_the_uniform_law():
    """Second moments (I/d) do not tell the uniform law from other rotation-free-looking ones
    (normalised points of a cube have them too): the fourth moment does. For the uniform law on
    S^{d-1}, E x_1^4 = 3 / (d (d + 2)) (1/5 on S^2, where by Archimedes x_1 is uniform on [-1, 1]
    and E x_1^8 = 1/9). Monte Carlo: the mean of x^4 over n tokens has standard deviation
    sqrt(1/9 - 1/25) / sqrt(n) = 0.0019 at n = 20000 (the mean over the three coordinates no
    more); 5 sigma. Normalised uniform points of the cube [-1, 1]^3 give 0.180, ten sigma away."""
    n, d = 20_000, 3
    X = uniform_sphere(n, d, rng=5)
    sigma = np.sqrt(1 / 9 - 1 / 25) / np.sqrt(n)
    assert abs(np.mean(X**4) - 3 / (d * (d + 2))) < 5 * sigma


def test_gaussian_mixture_components_have_their_anisotropic_covariances():
    """Each component of the mixture is N(m_k, Sigma_k) for a rotated, anisotropic Sigma_k (an
    isotropic one cannot tell a factor L from its transpose). Components 40 apart are separated
    exactly by the sign of the first coordinate; Monte Carlo error of a covariance entry over
    n_k ~ 2500 tokens is at most |Sigma| sqrt(2 / n_k) (Gaussian fourth moments); 5 sigma."""
    n = 5000
    means = np.array([[-20.0, 0.0], [20.0, 0.0]])
    c, s = np.cos(0.6), np.sin(0.6)
    R = np.array([[c, -s], [s, c]])
    covs = np.stack([R @ np.diag([4.0, 0.25]) @ R.T, R.T @ np.diag([1.0, 0.04]) @ R])
    X = gaussian_mixture(n, means, covs, rng=6)
    for k, sel in enumerate((X[:, 0] < 0, X[:, 0] >= 0)):
        n_k = int(sel.sum())
        np.testing.assert_allclose(
            X[sel].mean(axis=0), means[k], rtol=0, atol=5 * np.sqrt(covs[k].max() / n_k)
        )
        np.testing.assert_allclose(
            np.cov(X[sel].T), covs[k], rtol=0, atol=5 * np.abs(covs[k]).max() * np.sqrt(2 / n_k)
        )


def test_a_zero_covariance_is_the_dirac_at_the_mean():
    """Degenerate covariances are allowed: the zero matrix (rank zero) is the Dirac at the
    mean, every token equal to it exactly (the factor is zero)."""
    X = gaussian_cloud(7, [1.5, -2.0], np.zeros((2, 2)), rng=0)
    np.testing.assert_array_equal(X, np.tile([1.5, -2.0], (7, 1)))
