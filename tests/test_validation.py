"""The shared argument checks: each error names the argument, nothing is mutated or aliased."""

import numpy as np
import pytest

from token_dynamics import _validation as v


def test_as_tokens_copies_and_converts():
    X = np.arange(6, dtype=np.int64).reshape(3, 2)
    out = v.as_tokens(X)
    assert out.dtype == np.float64 and out.shape == (3, 2)
    out[0, 0] = 99.0
    assert X[0, 0] == 0  # a fresh array, never a view of the input


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.zeros(3), r"`X` must have shape \(n, d\)"),
        (np.zeros((0, 2)), r"`X` must have shape \(n, d\)"),
        (np.array([[0.0, np.nan]]), "`X` contains NaN"),
        ([["a", "b"]], "`X` must be a real array-like"),
    ],
)
def test_as_tokens_rejects(value, match):
    with pytest.raises((ValueError, TypeError), match=match):
        v.as_tokens(value)


def test_as_tokens_checks_dimension():
    with pytest.raises(ValueError, match="`Y` must have d = 3 columns"):
        v.as_tokens(np.zeros((2, 2)), "Y", d=3)


def test_as_sphere_tokens():
    X = np.array([[1.0, 0.0], [0.6, 0.8]])
    np.testing.assert_array_equal(v.as_sphere_tokens(X), X)
    with pytest.raises(ValueError, match="`X` must lie on the unit sphere"):
        v.as_sphere_tokens(2 * X)


def test_as_weights():
    np.testing.assert_allclose(v.as_weights(None, 4), np.full(4, 0.25))
    with pytest.raises(ValueError, match="`weights` must sum to one"):
        v.as_weights([0.5, 0.6], 2)
    with pytest.raises(ValueError, match="`weights` must be nonnegative"):
        v.as_weights([1.5, -0.5], 2)
    with pytest.raises(ValueError, match=r"`weights` must have shape \(3,\)"):
        v.as_weights([0.5, 0.5], 3)


def test_as_matrix_shape():
    assert v.as_matrix(np.eye(2), "A", shape=(2, 2)).shape == (2, 2)
    with pytest.raises(ValueError, match=r"`A` must have shape \(3, k\)"):
        v.as_matrix(np.eye(2), "A", shape=(3, None))
    with pytest.raises(ValueError, match="`A` must be a 2-D matrix"):
        v.as_matrix(np.ones(2), "A")


def test_as_parameter_constant_is_frozen_and_callable_is_checked():
    A = np.eye(2)
    value = v.as_parameter(A, "A", shape=(2, 2))
    A[0, 0] = 5.0  # the stored copy does not follow later edits of the caller's array
    assert value(0.0)[0, 0] == 1.0
    with pytest.raises(ValueError, match="read-only"):
        value(0.0)[0, 0] = 3.0
    moving = v.as_parameter(lambda t: t * np.eye(2), "A", shape=(2, 2))
    np.testing.assert_array_equal(moving(2.0), 2 * np.eye(2))
    bad = v.as_parameter(lambda t: np.eye(3), "A", shape=(2, 2))
    with pytest.raises(ValueError, match=r"`A\(t=0.5\)` must have shape \(2, 2\)"):
        bad(0.5)


@pytest.mark.parametrize("value", [0, -1.0, np.inf, "1", True])
def test_check_positive_rejects(value):
    with pytest.raises(ValueError, match="`beta`"):
        v.check_positive(value, "beta")


def test_check_positive_and_int():
    assert v.check_positive(0, "eps", allow_zero=True) == 0.0
    assert v.check_int(np.int64(3), "L") == 3
    with pytest.raises(ValueError, match="`L` must be at least 1"):
        v.check_int(0, "L")
    with pytest.raises(ValueError, match="`L` must be an integer"):
        v.check_int(2.5, "L")


def test_as_rng():
    a = v.as_rng(7).normal(size=3)
    np.testing.assert_array_equal(a, np.random.default_rng(7).normal(size=3))
    gen = np.random.default_rng(1)
    assert v.as_rng(gen) is gen
    with pytest.raises(TypeError, match="`rng` must be"):
        v.as_rng("seed")
