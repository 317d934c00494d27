"""The shared argument checks: each error names the argument, nothing is mutated or aliased."""

import numpy as np
import pytest

from token_dynamics import _validation as v
from token_dynamics import stochastic as sto
from token_dynamics._guards import float_guard


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


def test_tokens_normalised_in_float32_lie_on_the_sphere():
    # a row normalised in float32 has a norm within about d / 2 round-offs of one (5.9e-8 here
    # at d = 3), beyond float64's 1e-8: float32 tokens are held to d eps_32, float64 ones not
    X = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    off = np.abs(np.linalg.norm(X.astype(np.float64), axis=1) - 1).max()
    assert v.SPHERE_TOL < off <= v.sphere_tol(3, True) == 3 * np.finfo(np.float32).eps
    np.testing.assert_array_equal(v.as_sphere_tokens(X), X)
    with pytest.raises(ValueError, match=r"the largest deviation is 5\.85e-08"):
        v.as_sphere_tokens(X.astype(np.float64))
    model = sto.StochasticTransformer(sto.MLPNoise("tanh", width=8))
    for dtype in (None, "float32"):  # numpy's simulate refused them, torch's and JAX's took them
        assert np.all(np.isfinite(sto.simulate(model, X, T=1.0, L=3, rng=0, dtype=dtype).X))


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


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (np.array([1.0 + 2.0j]), "complex numbers"),
        (np.array([True, False]), "booleans"),
        (["1.0", "2.0"], "strings"),
        (np.array([1.0, None], dtype=object), "Python objects"),
    ],
)
def test_real_arrays_refuse_what_numpy_would_coerce(value, what):
    # numpy casts each of these to float64 (dropping an imaginary part, reading True as 1);
    # the ground floor refuses them with a TypeError naming the argument.
    with pytest.raises(TypeError, match=f"`x` must be a real array-like; got an array of {what}"):
        v.as_real_array(value, "x")
    with pytest.raises(TypeError, match="`X` must be a real array-like"):
        v.as_tokens(np.atleast_2d(value))


def test_as_times():
    np.testing.assert_array_equal(v.as_times([0, 1, 3]), [0.0, 1.0, 3.0])
    np.testing.assert_array_equal(v.as_times(2.0, scalar=True), [2.0])
    np.testing.assert_array_equal(v.as_times([0, 1, 1], strict=False), [0.0, 1.0, 1.0])
    for bad in ([], [0.0, 0.0], [1.0, 0.5], [[0.0, 1.0]]):
        with pytest.raises(ValueError, match="`times` must be a non-empty strictly increasing"):
            v.as_times(bad)
    with pytest.raises(ValueError, match="`t` must be nonnegative"):
        v.as_times([-1.0, 0.0], "t", nonnegative=True)


@pytest.mark.parametrize("scale", [1e-200, 1e-8, 1.0, 1e8, 1e200])
def test_one_covariance_tolerance_is_scale_invariant(scale):
    # MATRIX_RTOL is relative to max|S|: the verdict on S and on scale * S is the same.
    ok = scale * np.array([[1.0, 0.5], [0.5, 1.0]])
    np.testing.assert_array_equal(v.as_covariance(ok), ok)
    rounding = ok + np.array([[0.0, 1e-12], [0.0, 0.0]]) * scale  # asymmetry 1e-12 relative
    np.testing.assert_allclose(v.as_covariance(rounding), 0.5 * (rounding + rounding.T))
    with pytest.raises(ValueError, match="`cov` must be positive semi-definite"):
        v.as_covariance(scale * np.diag([1.0, -1e-6]))
    with pytest.raises(ValueError, match="`cov` must be symmetric"):
        v.as_covariance(scale * np.array([[1.0, 1e-6], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"`cov` must be a square \(d, d\) matrix"):
        v.as_covariance(np.ones((2, 3)))


def test_psd_sqrt_and_factor():
    from token_dynamics import _linalg

    rng = np.random.default_rng(0)
    L = rng.standard_normal((3, 2))
    S = L @ L.T  # rank 2: one eigenvalue is zero up to rounding, possibly negative
    R = _linalg.psd_sqrt(S)
    F = _linalg.psd_factor(S)
    # eigh is backward stable: errors are a few ulps of ||S|| ~ 10, so 1e-12 relative.
    np.testing.assert_allclose(R, R.T, atol=1e-12 * np.abs(S).max())
    np.testing.assert_allclose(R @ R, S, atol=1e-12 * np.abs(S).max())
    np.testing.assert_allclose(F @ F.T, S, atol=1e-12 * np.abs(S).max())
    assert np.all(np.isfinite(R))


def test_row_blocks_tile_the_rows():
    from token_dynamics._linalg import BLOCK_ELEMENTS, row_blocks

    blocks = list(row_blocks(10, BLOCK_ELEMENTS // 3))
    assert [b.stop - b.start for b in blocks] == [3, 3, 3, 1]
    assert list(row_blocks(4, 10 * BLOCK_ELEMENTS)) == [slice(i, i + 1) for i in range(4)]


def test_float_guard_names_the_quantity_and_the_fix():
    """numpy's overflow, division by zero and invalid values become one FloatingPointError that
    names what was computed and the remedy; underflow to zero stays silent (it is harmless)."""
    for bad in (lambda: np.exp(np.array([1e3])), lambda: np.array([1.0]) / 0.0):
        with pytest.raises(FloatingPointError, match=r"^the energy leaves .* scale `X` down\.$"):
            with float_guard("the energy", "scale `X` down"):
                bad()
    with float_guard("the energy", "scale `X` down"):
        assert np.exp(np.array([-1e3]))[0] == 0.0

    @float_guard("the energy", "scale `X` down")
    def already_ours():
        raise FloatingPointError("a message of the library")

    with pytest.raises(FloatingPointError, match=r"^a message of the library$"):
        already_ours()


def test_check_instance_and_check_rtol():
    with pytest.raises(TypeError, match=r"`field` must be a dict; got float\. Pass a dict\."):
        v.check_instance(1.0, dict, "field", "Pass a dict.")
    assert v.check_rtol(1e-10) == 1e-10
    with pytest.raises(ValueError, match=r"`rtol` = 1e-16 is below"):
        v.check_rtol(1e-16)  # below 100 eps, where solve_ivp would clamp it with a warning
    # from 1 up an error as large as the solution passes: a finite number that is no answer (on
    # scipy 1.13, rtol = 3.7e170 also made orthogonal_overlap's solve_ivp divide 0 by 0)
    for loose in (1.0, 3.7e170):
        with pytest.raises(ValueError, match=r"`rtol` = .* is not below 1"):
            v.check_rtol(loose)
    from token_dynamics.clustering import orthogonal_overlap

    with pytest.raises(ValueError, match=r"`rtol` = 3\.7e\+170 is not below 1"):
        orthogonal_overlap(4, [0.0, 1.0], beta=1.0, rtol=3.7e170)


def test_as_symmetric_does_not_overflow_near_the_largest_float():
    M = np.array([[1.7e308, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(v.as_symmetric(M, "M"), M)


def test_check_attributes_takes_any_object_with_the_fields_and_names_the_missing_ones():
    from types import SimpleNamespace

    record = SimpleNamespace(mean=np.zeros(2), stderr=np.ones(2))
    assert v.check_attributes(record, ("mean", "stderr"), "estimate", "") is record
    with pytest.raises(TypeError, match=r"`estimate` must have the attributes stderr; got"):
        v.check_attributes(SimpleNamespace(mean=0.0), ("mean", "stderr"), "estimate", "")


def test_short_float_weights_are_accepted_to_their_rounding_and_normalised():
    """Weights in float32 that sum to one only up to their rounding (here 1 + 8.4 eps_32, below
    the 2 n eps_32 of n = 100 float32 round-offs, above float64's 1e-9) are accepted and
    divided by their sum: the result sums to one to float64 rounding (n eps_64) and is
    proportional to the input (each entry to one ulp)."""
    eps32 = float(np.finfo(np.float32).eps)
    w = np.full(100, 0.01, dtype=np.float32)
    w[0] += np.float32(1e-6)
    total = float(w.astype(np.float64).sum())
    assert 2 * eps32 < abs(total - 1.0) < 2 * 100 * eps32
    out = v.as_weights(w, 100)
    assert out.dtype == np.float64
    assert abs(out.sum() - 1.0) <= 100 * np.finfo(float).eps
    np.testing.assert_allclose(out, w.astype(np.float64) / total, rtol=4 * np.finfo(float).eps)
    with pytest.raises(ValueError, match="`weights` must sum to one"):
        v.as_weights(w.astype(np.float64), 100)  # the same numbers in float64: not rounding


def test_the_zero_matrix_is_a_covariance_and_the_symmetric_part_is_exact():
    """The zero covariance (a Dirac) has no asymmetry at all and is accepted, whatever the
    tolerance relative to its scale 0; a matrix with a rounding asymmetry comes back as its
    symmetric part, exactly symmetric (halving is exact in binary)."""
    np.testing.assert_array_equal(v.as_covariance(np.zeros((2, 2))), np.zeros((2, 2)))
    np.testing.assert_array_equal(v.as_symmetric(np.zeros((3, 3)), "M"), np.zeros((3, 3)))
    M = np.array([[2.0, 1.0 + 1e-12], [1.0, 3.0]])
    S = v.as_covariance(M)
    np.testing.assert_array_equal(S, S.T)
    np.testing.assert_array_equal(S, 0.5 * M + 0.5 * M.T)


@pytest.mark.parametrize("peak", [3.0, 1.0, 0.75, 2.0**-1074, 1.7e308])
def test_power_of_two_scale_brackets_the_peak(peak):
    """The scale c is the power of two with c <= max|X| < 2 c: X / c is exact and its largest
    entry lies in [1, 2), for normal, subnormal and huge peaks; along an axis, per slice, and
    1 for an all-zero slice."""
    from token_dynamics._linalg import power_of_two_scale

    X = np.array([0.5 * peak, -peak])
    c = float(power_of_two_scale(X))
    assert np.frexp(c)[0] == 0.5  # a power of two
    assert c <= peak < 2 * c
    M = np.array([[peak, 0.0], [-0.25 * peak, 0.0]])
    cols = power_of_two_scale(M, axis=0)
    assert cols.shape == (1, 2) and cols[0, 1] == 1.0 and cols[0, 0] == c


def test_float_guard_raises_on_an_invalid_value_and_checked_finite_on_any_overflow():
    """0/0 and sqrt(-1) are invalid values: named like an overflow. `checked_finite` passes a
    finite value through and refuses a single inf or NaN among finite entries."""
    for bad in (lambda: np.array([0.0]) / 0.0, lambda: np.sqrt(np.array([-1.0]))):
        with pytest.raises(FloatingPointError, match=r"^the energy leaves .*invalid value"):
            with float_guard("the energy", "scale `X` down"):
                bad()
    from token_dynamics._guards import checked_finite

    value = np.array([1.0, 2.0])
    assert checked_finite(value, "the sum", "rescale") is value
    for bad in (np.array([1.0, np.inf]), np.array([np.nan, 2.0]), float("inf")):
        with pytest.raises(FloatingPointError, match=r"^the sum leaves the float64 range"):
            checked_finite(bad, "the sum", "rescale")


def test_time_text_reads_back_and_tells_neighbours_apart():
    """The times of the solvers' messages: the text reads back as the same float, so the next
    float prints otherwise (6 significant digits printed 1e6 and 1000001 both as 1e+06)."""
    from token_dynamics._validation import time_text

    for t in (1e6, 1e6 + 1, 0.1 + 0.2, 1e9 + 1.9841188, -3.0, 5e-324, 1.7e308, np.float64(2.5)):
        text = time_text(t)
        assert float(text) == t
        assert time_text(np.nextafter(t, np.inf)) != text
    assert time_text(1e6 + 1) == "1000001.0"


def test_messages_print_the_time_they_mean():
    """Every message that names a time prints it with time_text: a time-dependent parameter of
    the wrong shape and a Sinkhorn field that stops short, at t = 1000001 (which :g printed as
    1e+06, the time 1000000 beside it)."""
    from token_dynamics.attention import Sinkhorn, SinkhornConvergenceWarning, Softmax

    X = np.random.default_rng(5).standard_normal((12, 2))
    field = Softmax(lambda t: np.eye(3), np.eye(2))
    with pytest.raises(ValueError, match=r"`A\(t=1000001\.0\)` must have shape \(2, 2\)"):
        field.velocity(X, 1e6 + 1)
    loose = Sinkhorn(np.eye(2), np.eye(2), eps=0.05, tol=1e-14, max_iter=2)
    with pytest.warns(SinkhornConvergenceWarning, match=r"did not converge at t = 1000001\.0:"):
        loose.velocity(X, 1e6 + 1)
