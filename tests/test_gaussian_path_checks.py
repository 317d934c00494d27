"""Tests of the checks on Gaussian paths: the relative gap between two covariance paths, the
identities of the softmax covariance equation and the trace tr(V^-1 Sigma) along a path."""

import numpy as np
import pytest

from token_dynamics import gaussian as g

from .helpers import random_spd


def test_path_error_on_hand_made_paths():
    """The three scales on paths whose gaps are known exactly (powers of two: no rounding)."""
    ref = np.stack([np.diag([1.0, 4.0]), np.diag([2.0, 8.0])])
    path = ref.copy()
    path[0, 0, 0] = 1.5  # gap 0.5 at t0, where the reference's largest entry is 4
    path[1, 1, 1] = 9.0  # gap 1 at t1, where it is 8
    with pytest.raises(ValueError, match="zero entry"):  # off-diagonal zeros
        g.covariance_path_error(path, ref, scale="entry")
    assert g.covariance_path_error(path, ref, scale="time") == 0.125  # max(0.5/4, 1/8)
    assert g.covariance_path_error(path, ref, scale="path") == 0.125  # 1/8
    assert g.covariance_path_error(path[:, 0, 0], ref[:, 0, 0], scale="entry") == 0.5


@pytest.mark.statement("gauss-prop-scalar")
def test_path_error_of_the_solver_against_the_scalar_closed_form():
    """The moment solver follows the closed-form variance to its tolerance (relative 1e-8 is
    what the book claims; the solver runs at rtol 1e-10) up to the blow-up."""
    a, v, s0, m0 = 0.9, 0.7, 0.4, 0.3
    run = g.solve_moments(g.SoftmaxMoments([[a]], [[v]]), [m0], [[s0]], np.linspace(0, 3, 301))
    exact = g.softmax_gaussian_1d(a, v, m0, s0, run.times)
    assert run.status == "blowup"
    assert g.covariance_path_error(run, exact, scale="entry") < 1e-8
    # the same gap from the arrays, and a path against itself has none
    assert g.covariance_path_error(
        run.covariances[:, 0, 0], exact.covariances, scale="entry"
    ) == g.covariance_path_error(run, exact, scale="entry")
    assert g.covariance_path_error(run, run, scale="path") == 0.0


def test_path_error_is_scale_invariant_and_leaves_inputs_alone():
    rng = np.random.default_rng(0)
    ref = np.stack([random_spd(rng, 3, shift=0.1) for _ in range(4)])
    path = ref + 1e-3 * rng.normal(size=ref.shape)
    copies = path.copy(), ref.copy()
    for scale in ("time", "path"):
        e = g.covariance_path_error(path, ref, scale=scale)
        # multiplying both by a power of two is exact in floating point
        assert g.covariance_path_error(2.0**40 * path, 2.0**40 * ref, scale=scale) == e
    np.testing.assert_array_equal(path, copies[0])
    np.testing.assert_array_equal(ref, copies[1])


@pytest.mark.parametrize(
    ("path", "ref", "kwargs", "match"),
    [
        (np.ones((3, 2, 2)), np.ones((4, 2, 2)), {}, "same times"),
        (np.ones((3, 2, 3)), np.ones((3, 2, 3)), {}, "GaussianPath"),
        (np.ones(3), np.ones(3), {"scale": "max"}, "`scale`"),
        (np.ones((2, 2, 2)), np.zeros((2, 2, 2)), {"scale": "time"}, "zero matrix"),
        (np.ones((2, 2, 2)), np.zeros((2, 2, 2)), {"scale": "path"}, "zero along"),
    ],
)
def test_path_error_bad_arguments(path, ref, kwargs, match):
    with pytest.raises(ValueError, match=match):
        g.covariance_path_error(path, ref, **kwargs)


@pytest.mark.statement("gauss-prop-identities")
@pytest.mark.parametrize("seed", range(5))
def test_identity_gaps_are_rounding(seed):
    """Both identities hold exactly; the gaps are rounding of traces of products of three or
    four matrices of norm O(1): below 1e-12 relative to the size of the terms."""
    rng = np.random.default_rng(seed)
    d = 3
    A, V, S = rng.normal(size=(d, d)), random_spd(rng, d, shift=0.1), random_spd(rng, d, shift=0.5)
    gaps = g.covariance_identity_gaps(g.SoftmaxMoments(A, V, beta=1.5), S)
    size = np.linalg.norm(A) * np.linalg.norm(S) ** 2 * np.linalg.cond(V) * np.linalg.norm(V)
    assert gaps.trace < 1e-12 * size and gaps.logdet < 1e-12 * size * np.linalg.cond(S)


def test_identity_gaps_bad_arguments():
    S = np.eye(2)
    with pytest.raises(TypeError, match="`equations`"):
        g.covariance_identity_gaps(g.LinearMoments(np.eye(2), np.eye(2)), S)
    with pytest.raises(ValueError, match="`V`"):
        g.covariance_identity_gaps(g.SoftmaxMoments(np.eye(2), [[1.0, 2.0], [0.0, 1.0]]), S)
    with pytest.raises(ValueError, match="invertible"):
        g.covariance_identity_gaps(g.SoftmaxMoments(np.eye(2), np.zeros((2, 2))), S)
    with pytest.raises(ValueError, match="positive definite"):
        g.covariance_identity_gaps(g.SoftmaxMoments(np.eye(2), np.eye(2)), np.zeros((2, 2)))


@pytest.mark.statement("gauss-prop-dissipative")
def test_lyapunov_trace_never_increases_on_a_dissipative_run():
    """V = V^T > 0 and A + A^T <= 0: tr(V^-1 Sigma) is non-increasing; the solver's relative
    tolerance (1e-10) bounds the increases seen between two saved times."""
    rng = np.random.default_rng(1)
    B = rng.normal(size=(2, 2))
    A = -B @ B.T + (B - B.T)  # symmetric part -B B^T <= 0
    V = random_spd(rng, 2, shift=0.2)
    run = g.solve_moments(g.SoftmaxMoments(A, V), np.zeros(2), np.eye(2), np.linspace(0, 20, 81))
    tr = g.lyapunov_trace(V, run)
    assert run.status == "completed"
    assert np.all(np.diff(tr) <= 1e-9 * tr[0]) and tr[-1] < 0.5 * tr[0]
    np.testing.assert_allclose(tr[0], np.trace(np.linalg.inv(V)), rtol=1e-14)


def test_lyapunov_trace_bad_arguments():
    with pytest.raises(ValueError, match="`V`"):
        g.lyapunov_trace([[1.0, 2.0], [0.0, 1.0]], np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="`covariances`"):
        g.lyapunov_trace(np.eye(2), np.ones((2, 3, 3)))
    with pytest.raises(ValueError, match="invertible"):
        g.lyapunov_trace(np.zeros((2, 2)), np.ones((2, 2, 2)))
    # tr(Sigma) = 2e308 overflows: reported, as the docstring promises (einsum, which computes
    # the traces, overflows without a floating-point error: it came back as inf)
    with pytest.raises(FloatingPointError, match=r"tr\(V\^-1 Sigma\) leaves the float64 range"):
        g.lyapunov_trace(np.eye(2), np.array([1e308 * np.eye(2)] * 2))


def test_covariance_path_error_refuses_an_empty_path_by_name():
    from token_dynamics.gaussian import covariance_path_error

    for bad in (np.empty((0, 2, 2)), np.empty(0)):
        with pytest.raises(ValueError, match="`path` must hold at least one time"):
            covariance_path_error(bad, np.ones((1, 2, 2)))
        with pytest.raises(ValueError, match="`reference` must hold at least one time"):
            covariance_path_error(np.ones(3), bad)
