"""Tests of token_dynamics.geometry: the sphere of layer normalisation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from token_dynamics.geometry import normalize, project_tangent

# One normalisation or projection costs a few roundings of O(1) numbers: 1e-14 leaves margin.
RTOL = 1e-14


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 10), d=st.integers(1, 5))
def test_normalize_is_a_unit_idempotent_rescaling(seed, n, d):
    X = np.random.default_rng(seed).standard_normal((n, d)) * 10.0
    U = normalize(X)
    np.testing.assert_allclose(np.linalg.norm(U, axis=1), 1.0, rtol=RTOL)
    np.testing.assert_allclose(normalize(U), U, rtol=RTOL, atol=RTOL)
    # same direction: U = X / |X| row by row
    np.testing.assert_allclose(U * np.linalg.norm(X, axis=1, keepdims=True), X, rtol=RTOL)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 10), d=st.integers(2, 5))
def test_project_tangent_is_the_orthogonal_projection(seed, n, d):
    rng = np.random.default_rng(seed)
    X = normalize(rng.standard_normal((n, d)))
    dX = rng.standard_normal((n, d))
    P = project_tangent(X, dX)
    np.testing.assert_allclose(np.sum(P * X, axis=1), 0.0, atol=1e-14 * np.abs(dX).max())
    np.testing.assert_allclose(project_tangent(X, P), P, rtol=1e-13, atol=1e-15)
    # the formula of the contract for unit tokens: dX - <dX_i, x_i> x_i
    expected = dX - np.sum(dX * X, axis=1, keepdims=True) * X
    np.testing.assert_allclose(P, expected, rtol=1e-13, atol=1e-15)
    # for tokens off the sphere: still orthogonal to x_i (projection on x_i^perp)
    P2 = project_tangent(3.0 * X, dX)
    np.testing.assert_allclose(P2, P, rtol=1e-13, atol=1e-14)


def test_inputs_are_not_mutated():
    X = np.array([[3.0, 4.0]])
    dX = np.array([[1.0, 1.0]])
    normalize(X)
    project_tangent(X, dX)
    np.testing.assert_array_equal(X, [[3.0, 4.0]])
    np.testing.assert_array_equal(dX, [[1.0, 1.0]])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: normalize([[0.0, 0.0]]), "`X`"),
        (lambda: normalize(np.ones(3)), "`X`"),
        (lambda: project_tangent(np.ones((2, 2)), np.ones((3, 2))), "`dX`"),
        (lambda: project_tangent(np.zeros((1, 2)), np.ones((1, 2))), "`X`"),
        (lambda: project_tangent(np.ones((1, 2)), [[np.inf, 0.0]]), "`dX`"),
    ],
)
def test_bad_inputs_raise_named_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("scale", [1e-200, 1e-150, 1e150, 1e200])
def test_normalize_and_project_are_scale_free(scale):
    """Issue 15, defect 7: rows of norm 1e+-200 give the directions of the unscaled rows.

    Both maps are invariant under x -> c x (and the projection is linear in v), so the answers
    at any scale equal those at scale one up to a few ulps of the rescaling by a power of two.
    """
    X = np.array([[3.0, 4.0], [-1.0, 2.0], [0.5, -0.25]])
    V = np.array([[1.0, 2.0], [0.0, -3.0], [2.0, 1.0]])
    np.testing.assert_allclose(normalize(scale * X), normalize(X), rtol=1e-15)
    np.testing.assert_allclose(project_tangent(scale * X, V), project_tangent(X, V), rtol=1e-14)
    np.testing.assert_allclose(
        project_tangent(X, scale * V) / scale, project_tangent(X, V), rtol=1e-14
    )
