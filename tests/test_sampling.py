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
