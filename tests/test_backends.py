"""The softmax velocity on other array libraries (torch, JAX, array-api-strict) against numpy.

Run by ``make test-backends`` (which installs ``requirements-backends.txt``), not by ``make unit``:
array-api-strict, JAX and torch (CPU) are all required here: a missing one is an error, not a
skip.
"""

from __future__ import annotations

import gc
import itertools
import re
from dataclasses import dataclass

import array_api_strict
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from token_dynamics import _backend, integrate
from token_dynamics._backend import (
    all_finite,
    device,
    device_normal,
    has_float64,
    is_numpy,
    to_numpy,
)
from token_dynamics._validation import SPHERE_TOL
from token_dynamics.attention import (
    L2,
    AttentionField,
    Causal,
    Hardmax,
    Linear,
    MultiHead,
    Sigmoid,
    Sinkhorn,
    SinkhornConvergenceError,
    SinkhornConvergenceWarning,
    Softmax,
    Unnormalised,
    sinkhorn_plan,
    with_positions,
)
from token_dynamics.attention._array_api import (
    BLOCK_ENTRIES,
    TORCH_CPU_BLOCK_ENTRIES,
    generic_softmax_velocity,
    query_blocks,
    scores_in_range,
    softmax_velocity,
)
from token_dynamics.attention._base import _DEVICE_COPIES, xp_parameter
from token_dynamics.attention._scale import SCORE_HEADROOM
from token_dynamics.diagnostics import (
    cluster_count,
    diameter,
    empirical_covariance,
    empirical_mean,
    excess_kurtosis,
    interaction_energy,
    min_inner_product,
    numerical_rank,
)
from token_dynamics.stochastic import MLPNoise, StochasticTransformer, _mlp, simulate, simulate_sde
from token_dynamics.stochastic import _array_api as stochastic_xp

from .helpers import dense_scores

jax.config.update("jax_enable_x64", True)

LIBRARIES = ["array_api_strict", "jax", "torch"]
EPS32 = float(np.finfo(np.float32).eps)


def _library(name: str):
    """``(asarray, to_numpy, namespace)`` of a library."""
    if name == "torch":
        import torch
        from array_api_compat import torch as xp

        return torch.asarray, to_numpy, xp
    if name == "jax":
        return jnp.asarray, np.asarray, jnp
    return array_api_strict.asarray, np.asarray, array_api_strict


@pytest.fixture(params=LIBRARIES)
def lib(request):
    return _library(request.param)


def _problem(n: int = 200, d: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    V = rng.standard_normal((d, d))
    w = rng.random(n) + 0.1
    return X, A, V, w / w.sum()


def _float32_bound(field: Softmax, X: np.ndarray) -> float:
    """Absolute float32 error bound: each score carries about ``d eps |f_i| |x_j|`` of rounding,
    which the exponential turns into the same relative error of the weights, and the sums over
    ``n`` keys add ``n eps``; the velocity is an average of the values, of size ``max |V x_j|``.
    So ``(n + d s) eps_32 max|V x|``, with ``s`` the largest ``|beta A x_i| |x_j|``."""
    n, d = X.shape
    norms = np.linalg.norm(X, axis=1)
    s = abs(field.beta) * np.linalg.norm(field.A, 2) * norms.max() ** 2
    scale = np.abs(X @ field.V.T).max()
    return float((n + d * s) * EPS32 * scale)


@pytest.mark.parametrize("weighted", [False, True])
def test_softmax_velocity_float64_matches_numpy(lib, weighted):
    asarray, to_numpy, _ = lib
    X, A, V, w = _problem()
    field = Softmax(A, V, beta=1.3)
    weights = w if weighted else None
    ref = field.velocity(X, weights=weights)
    Xa = asarray(X)
    before = to_numpy(Xa).copy()
    out = field.velocity(Xa, weights=weights)
    assert type(out) is type(Xa)
    assert str(out.dtype).endswith("float64")
    # the same formula in float64: agreement to round-off of the sums (1e-12 relative)
    np.testing.assert_allclose(to_numpy(out), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_array_equal(to_numpy(Xa), before)  # nothing passed in is modified


def test_parameters_and_weights_may_be_arrays_of_the_library(lib):
    asarray, to_numpy, _ = lib
    X, A, V, w = _problem()
    ref = Softmax(A, V, beta=1.3).velocity(X, weights=w)
    A_, V_ = asarray(A), asarray(V)
    if hasattr(A_, "requires_grad_"):  # one in an autograd graph would get no gradient: refused
        with pytest.raises(TypeError, match="`A` requires grad"):
            Softmax(A_.clone().requires_grad_(True), V_)
    out = Softmax(A_, V_, beta=1.3).velocity(asarray(X), weights=asarray(w))
    # the parameters are read once into float64 numpy arrays: the float64 comparison above
    np.testing.assert_allclose(to_numpy(out), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_all_finite_tells_an_overflowing_sum_from_a_non_finite_entry(lib, dtype):
    asarray, _, xp = lib
    big = np.full((3, 2), np.finfo(dtype).max, dtype=dtype)  # finite entries, an infinite sum
    assert all_finite(xp, asarray(big)) and all_finite(xp, asarray(big[:1]), asarray(big))
    for bad in (np.nan, np.inf, -np.inf):
        tokens = np.ones((3, 2), dtype=dtype)
        tokens[2, 1] = bad
        assert not all_finite(xp, asarray(tokens))
        assert not all_finite(xp, asarray(big), asarray(tokens))  # after a sum that overflowed
    # inf and -inf whose sum is NaN, and an entry that is inf among huge ones
    assert not all_finite(xp, asarray(np.array([np.inf, -np.inf], dtype=dtype)))
    assert not all_finite(xp, asarray(np.array([np.finfo(dtype).max, np.inf], dtype=dtype)))


def test_constant_parameters_are_copied_to_the_device_once(lib):
    asarray, to_numpy, xp = lib
    X, A, V, _ = _problem(n=16, d=4)
    field = Softmax(A, V)
    X64 = asarray(X)
    X32 = xp.astype(X64, xp.float32)
    first = xp_parameter(xp, field.A, "A", 0.0, (4, 4), X64)
    assert xp_parameter(xp, field.A, "A", 0.0, (4, 4), X64) is first  # the same copy again
    other = xp_parameter(xp, field.A, "A", 0.0, (4, 4), X32)  # another dtype: its own copy
    assert other is not first and other.dtype == xp.float32
    np.testing.assert_array_equal(to_numpy(first), A)
    # a field's velocity in one dtype, then in the other, then with a time-dependent V
    np.testing.assert_allclose(to_numpy(field.velocity(X32)), field.velocity(X), rtol=0, atol=1e-5)
    np.testing.assert_allclose(to_numpy(field.velocity(X64)), field.velocity(X), atol=1e-13)
    moving = Softmax(A, lambda t: (1 + t) * V)
    np.testing.assert_allclose(
        to_numpy(moving.velocity(X64, 1.0)), moving.velocity(X, 1.0), rtol=0, atol=1e-13
    )
    # a time-dependent A is evaluated once a call, for its device copy and its spectral norm
    # (the bound on the scores)
    calls = []
    turning = Softmax(lambda t: calls.append(t) or (1 + t) * A, V)
    np.testing.assert_allclose(
        to_numpy(turning.velocity(X64, 0.5)), Softmax(1.5 * A, V).velocity(X), rtol=0, atol=1e-13
    )
    assert calls == [0.5]
    # a writeable array is read at every call, as it may have changed in between
    loose = A.copy()
    xp_parameter(xp, loose, "A", 0.0, (4, 4), X64)
    loose[0, 0] += 1.0
    np.testing.assert_array_equal(to_numpy(xp_parameter(xp, loose, "A", 0.0, (4, 4), X64)), loose)
    # the copies, and the spectral norm the velocity's range check reads, leave with their
    # parameter
    # (two copies asked for above; the velocities keep the transposes, in both dtypes)
    keys = {key for key in _DEVICE_COPIES if key[0] == id(field.A)}
    assert len(keys) == 5
    AT = xp_parameter(xp, field.A, "A", 0.0, (4, 4), X64, transpose=True)
    np.testing.assert_array_equal(to_numpy(AT), A.T)
    assert {key for key in _DEVICE_COPIES if key[0] == id(field.A)} == keys  # kept from the call
    assert _DEVICE_COPIES[id(field.A), "norm", "", "", (4, 4), False] == np.linalg.norm(A, 2)
    del field, first, other
    gc.collect()
    assert not keys & set(_DEVICE_COPIES)


@pytest.mark.parametrize("beta", [1.3, -0.7])
def test_interaction_energy_matches_numpy(lib, beta, monkeypatch):
    asarray, _, _ = lib
    X, A, _, w = _problem(n=300, d=5)
    for name in ("BLOCK_ENTRIES", "TORCH_CPU_BLOCK_ENTRIES"):  # blocks of 20 rows
        monkeypatch.setattr(f"token_dynamics.attention._array_api.{name}", 20 * 300)
    w[:40] = 0.0  # the first two blocks: rows of zero weight only
    w /= w.sum()
    for kw in ({}, {"weights": w, "A": A}):
        ref = interaction_energy(X, beta=beta, **kw)
        # each exponent beta <A x_i, x_j> carries about d eps |beta| |A| |x|^2 of rounding, a
        # relative error of the terms; below 1e-13 here, so 1e-12 relative
        np.testing.assert_allclose(interaction_energy(asarray(X), beta=beta, **kw), ref, rtol=1e-12)
        s = (
            abs(beta)
            * np.linalg.norm(kw.get("A", np.eye(5)), 2)
            * (np.linalg.norm(X, axis=1) ** 2).max()
        )
        # float32: the same d s eps_32 per term, and n^2 terms summed in float32 (n eps_32)
        out32 = interaction_energy(asarray(X.astype(np.float32)), beta=beta, **kw)
        np.testing.assert_allclose(out32, ref, rtol=(X.shape[0] + 5 * s) * EPS32)


def test_interaction_energy_names_a_float32_overflow(lib):
    asarray, _, _ = lib
    X = np.ones((4, 2))
    # 1e38 * 2 > float32 max: the scores overflow in float32, the energy beyond float64 too
    for arr in (X, asarray(X.astype(np.float32))):
        with pytest.raises(FloatingPointError, match="lower `beta`"):
            interaction_energy(arr, beta=1e38)


@pytest.mark.parametrize("weighted", [False, True])
def test_moments_match_numpy_in_the_callers_array_type(lib, weighted):
    asarray, to_numpy, _ = lib
    X, _, _, w = _problem(n=300, d=5)
    X = 3.0 + X  # a mean away from zero: the centring matters
    weights = w if weighted else None
    n = X.shape[0]
    scale = np.abs(X).max()
    for dt, eps in ((np.float64, np.finfo(np.float64).eps), (np.float32, EPS32)):
        Xd = X.astype(dt)
        Xa = asarray(Xd)
        mean = empirical_mean(Xa, weights=weights)
        cov = empirical_covariance(Xa, weights=weights)
        kurt = excess_kurtosis(Xa)
        for out, shape in ((mean, (5,)), (cov, (5, 5)), (kurt, (5,))):
            assert type(out) is type(Xa) and tuple(out.shape) == shape
            assert str(out.dtype).endswith(np.dtype(dt).name)
        # each moment is a sum of n terms of size up to max|x| (the mean) or max|x|^2 (the
        # covariance), each rounded to eps: errors below n eps times that size
        Xr = Xd.astype(np.float64)  # the same values, summed in float64 by numpy
        ref_mean = empirical_mean(Xr, weights=weights)
        ref_cov = empirical_covariance(Xr, weights=weights)
        np.testing.assert_allclose(to_numpy(mean), ref_mean, rtol=0, atol=n * eps * scale)
        np.testing.assert_allclose(to_numpy(cov), ref_cov, rtol=0, atol=n * eps * scale**2)
        c = to_numpy(cov)
        np.testing.assert_array_equal(c, c.T)  # symmetric by construction
        # the kurtosis is a ratio of such sums over the (unit-scale) centred coordinates
        np.testing.assert_allclose(to_numpy(kurt), excess_kurtosis(Xr), rtol=0, atol=10 * n * eps)
        np.testing.assert_array_equal(to_numpy(Xa), Xd)  # nothing passed in is modified


def test_moments_report_overflow_and_bad_tokens(lib):
    asarray, _, xp = lib
    for big, dt in ((1e200, np.float64), (1e30, np.float32)):  # squares beyond the dtype's range
        X = np.array([[big, 0.0], [-big, 1.0]], dtype=dt)
        with pytest.raises(FloatingPointError, match=f"overflows {np.dtype(dt).name}"):
            empirical_covariance(asarray(X))
    with pytest.raises(ValueError, match="`X` must be finite"):
        empirical_mean(asarray(np.array([[0.0, np.nan]])))
    with pytest.raises(ValueError, match=r"`X` must be a non-empty array of shape \(n, d\)"):
        diameter(asarray(np.zeros(3)))
    with pytest.raises(TypeError, match="`X` must hold real numbers"):
        cluster_count(xp.asarray([[True, False]]), tol=0.1)
    with pytest.raises(ValueError, match="constant coordinate"):
        excess_kurtosis(asarray(np.array([[1.0, 2.0], [1.0, 3.0]])))


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_diameter_and_smallest_inner_product_match_numpy(lib, dt):
    asarray, _, _ = lib
    rng = np.random.default_rng(3)
    d = 6
    eps = float(np.finfo(dt).eps)
    spread = 1e-6 if dt == np.float64 else 1e-2
    clouds = [
        rng.standard_normal((300, d)),  # one cloud
        1e3 + spread * rng.standard_normal((300, d)),  # a tight cluster far from the origin
        1e150 * rng.standard_normal((50, d)) if dt == np.float64 else np.ones((50, d)),
    ]
    for X in clouds:
        X = X.astype(dt)
        Xr = X.astype(np.float64)  # the same values, for the numpy reference
        # the offsets z_i = x_i - x_1 satisfy |z_i| <= D, so each squared distance from inner
        # products carries (d + 2) eps D^2 of rounding: (d + 2) eps relative on D, twice that
        # with the reference's own rounding
        ref = diameter(Xr)
        assert abs(diameter(asarray(X)) - ref) <= 2 * (d + 2) * eps * ref
        # an inner product of d terms: d eps |x_i| |x_j| of rounding, plus the reference's
        top = (np.linalg.norm(Xr, axis=1) ** 2).max()
        assert abs(min_inner_product(asarray(X)) - min_inner_product(Xr)) <= 2 * d * eps * top
    assert diameter(asarray(np.ones((4, 3), dtype=dt))) == 0.0
    with pytest.raises(FloatingPointError, match="diameter of `X` overflows"):
        diameter(asarray(np.array([[-1e308, 0.0], [1e308, 0.0]])))
    with pytest.raises(FloatingPointError, match="inner product of `X` overflows"):
        min_inner_product(asarray(np.array([[-1e300, 0.0], [1e300, 0.0]])))


def test_cluster_count_matches_numpy_across_blocks(lib, monkeypatch):
    asarray, _, _ = lib
    rng = np.random.default_rng(4)
    centres = rng.standard_normal((6, 3))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    X = np.repeat(centres, 40, axis=0) + 1e-3 * rng.standard_normal((240, 3))
    X = X[rng.permutation(240)]
    X = np.vstack([X, X[:3]])  # three tokens twice: at tol = 0 equal tokens link
    # blocks of 20 rows
    monkeypatch.setattr("token_dynamics.attention._array_api.BLOCK_ENTRIES", 20 * 243)
    monkeypatch.setattr("token_dynamics.attention._array_api.TORCH_CPU_BLOCK_ENTRIES", 20 * 243)
    for tol in (0.0, 1e-4, 3e-3, 0.05, 1.0, 3.0):
        assert cluster_count(asarray(X), tol) == cluster_count(X, tol)
    assert cluster_count(asarray(X), 0.0) == 240
    assert cluster_count(asarray(X), 0.05) == 6


@pytest.mark.parametrize(("dt", "delta"), [(np.float64, 1e-8), (np.float32, 1e-3)])
def test_cluster_count_decides_pairs_below_the_rounding_of_inner_products(
    lib, dt, delta, monkeypatch
):
    # the first token at the origin, five more along a line at distance 1 from it, delta apart:
    # their squared distances, delta^2, lie below the rounding of inner products of offsets of
    # norm 1 (8 (d + 2) eps), so only coordinate differences decide them
    asarray, _, _ = lib
    for name in ("BLOCK_ENTRIES", "TORCH_CPU_BLOCK_ENTRIES"):  # blocks of 2 rows, slices of 1
        monkeypatch.setattr(f"token_dynamics.attention._array_api.{name}", 2 * 6)
    u = np.array([0.6, 0.8])
    X = np.vstack([[0.0, 0.0], np.array([1.0, 0.0]) + delta * np.arange(5)[:, None] * u])
    X = X.astype(dt)
    Xr = X.astype(np.float64)
    assert cluster_count(Xr, 1.5 * delta) == 2 and cluster_count(Xr, 0.5 * delta) == 6
    for tol in (0.5 * delta, 1.5 * delta, 4.5 * delta):
        assert cluster_count(asarray(X), tol) == cluster_count(Xr, tol)


def test_numerical_rank_matches_numpy(lib):
    asarray, _, _ = lib
    rng = np.random.default_rng(5)
    M = rng.standard_normal((50, 3)) @ rng.standard_normal((3, 8))  # rank 3
    for dt in (np.float64, np.float32):
        # the rounding of M and of its SVD is a few eps |M|, below the default max(p, q) eps
        assert numerical_rank(asarray(M.astype(dt))) == numerical_rank(M) == 3
    assert numerical_rank(asarray(M), rtol=0.9) == numerical_rank(M, rtol=0.9)
    assert numerical_rank(asarray(np.zeros((4, 2)))) == 0
    with pytest.raises(ValueError, match="`M` must be finite"):
        numerical_rank(asarray(np.array([[np.inf, 0.0]])))


def test_device_arrays_are_copied_to_the_host():
    class DeviceArray:  # the part of a CuPy array that `to_numpy` uses: `.get()` to the host
        __module__ = "cupy._core.core"

        def __array__(self, dtype=None, copy=None):
            raise TypeError("implicit conversion to a NumPy array is not allowed")

        def get(self):
            return np.array([1.0, 2.0])

    np.testing.assert_array_equal(to_numpy(DeviceArray()), [1.0, 2.0])


def test_softmax_velocity_float32_matches_numpy_within_bound(lib):
    asarray, to_numpy, _ = lib
    X, A, V, _ = _problem()
    field = Softmax(A, V, beta=0.7)
    ref = field.velocity(X)
    out = field.velocity(asarray(X.astype(np.float32)))
    assert str(out.dtype).endswith("float32")
    np.testing.assert_allclose(to_numpy(out), ref, rtol=0, atol=_float32_bound(field, X))


@pytest.mark.parametrize("weighted", [False, True])
def test_linear_velocity_matches_numpy(lib, weighted):
    asarray, to_numpy, _ = lib
    X, A, V, w = _problem()
    weights = w if weighted else None
    field = Linear(A, V)
    ref = field.velocity(X, weights=weights)
    out = field.velocity(asarray(X), weights=weights)
    assert type(out) is type(asarray(X))
    # three products of d x d or n x d factors, in another order: round-off, 1e-12 relative
    np.testing.assert_allclose(to_numpy(out), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_velocity_at_queries_elsewhere(lib):
    asarray, to_numpy, _ = lib
    X, A, V, _ = _problem(n=120, d=3)
    Y = np.random.default_rng(1).standard_normal((50, 3))
    field = Softmax(A, V)
    ref = field.velocity_at(Y, X)
    out = field.velocity_at(asarray(Y), asarray(X))
    np.testing.assert_allclose(to_numpy(out), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fast_paths_match_generic_path(lib, dtype):
    asarray, to_numpy, xp = lib
    X, A, V, _ = _problem(n=300, d=16, seed=2)
    F, K, R = (asarray(M.astype(dtype)) for M in (X @ A.T, X, X @ V.T))
    fast = softmax_velocity(xp, F, K, R, None)
    generic = generic_softmax_velocity(xp, F, K, R, None)
    # float64: round-off of the sums (the JAX kernel, float32 inside, is not taken in float64);
    # float32: the bound of the float32 test, for both paths' errors together
    atol = 1e-12 if dtype == np.float64 else 2 * _float32_bound(Softmax(A, V), X)
    np.testing.assert_allclose(to_numpy(fast), to_numpy(generic), rtol=0, atol=atol)


def test_query_blocks_give_the_same_rows(lib, monkeypatch):
    asarray, to_numpy, xp = lib
    X, A, V, w = _problem(n=100, d=4, seed=3)
    F, K, R = (asarray(M) for M in (X @ A.T, X, X @ V.T))
    log_w = asarray(np.log(w))
    whole = generic_softmax_velocity(xp, F, K, R, log_w)
    monkeypatch.setattr("token_dynamics.attention._array_api.BLOCK_ENTRIES", 7 * 100)
    blocked = generic_softmax_velocity(xp, F, K, R, log_w)  # 15 blocks of 7 rows (last: 2)
    # each row is computed by the same operations in either case
    np.testing.assert_allclose(to_numpy(blocked), to_numpy(whole), rtol=0, atol=1e-14)


def test_large_scores_stay_finite(lib):
    asarray, to_numpy, _ = lib
    X, A, V, _ = _problem(n=64, d=2, seed=4)
    field = Softmax(A, V, beta=500.0)  # scores of several hundred: exp would overflow unshifted
    ref = field.velocity(X)
    out = to_numpy(field.velocity(asarray(X)))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-10 * np.abs(ref).max())


def test_refusals_name_the_argument(lib):
    asarray, _, _ = lib
    X, A, V, _ = _problem(n=10, d=2)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="must be finite"):
        Softmax(A, V).velocity(asarray(bad))
    # the softmax checks the tokens with its result: NaN, +inf and -inf, in the keys, in the
    # queries, and in a key of zero weight (dropped before the velocity: checked at the door)
    w = np.full(10, 0.1)
    w[0], w[1] = 0.0, 0.2
    for value in (np.nan, np.inf, -np.inf):
        bad[0, 0] = value
        for field in (Softmax(A, V), Unnormalised(A, V)):
            for call in (
                lambda f=field: f.velocity(asarray(bad)),
                lambda f=field: f.velocity_at(asarray(bad), asarray(X)),
                lambda f=field: f.velocity_at(asarray(X), asarray(bad)),
                lambda f=field: f.velocity(asarray(bad), weights=w),
            ):
                with pytest.raises(ValueError, match="`X` and `Y` must be finite"):
                    call()
    with pytest.raises(ValueError, match=r"`X` must be a non-empty array of shape \(n, 2\)"):
        Softmax(A, V).velocity(asarray(X[:, :1]))
    with pytest.raises(TypeError, match=r"_NumpyOnly computes on numpy arrays only.*np\.asarray"):
        _NumpyOnly().velocity(asarray(X))
    with pytest.raises(FloatingPointError, match="linear attention velocity left the float"):
        Linear(A, V).velocity(asarray(X * 1e110))


@pytest.mark.parametrize("method", ["euler", "rk4"])
@pytest.mark.parametrize("geometry", ["euclidean", "sphere"])
def test_integrate_fixed_steps_match_numpy(lib, method, geometry):
    asarray, to_numpy, _ = lib
    X, A, V, _ = _problem(n=40, d=3, seed=5)
    field = Softmax(A, V)
    times = [0.0, 0.3, 1.0]
    ref = integrate(field, X, times, method=method, dt=0.05, geometry=geometry)
    X0 = asarray(X)
    traj = integrate(field, X0, times, method=method, dt=0.05, geometry=geometry)
    assert type(traj.states) is type(X0) and tuple(traj.states.shape) == (3, 40, 3)
    assert traj.n_steps == ref.n_steps == 20
    # the same steps on the same values: each evaluation agrees to round-off (1e-15), carried
    # over 20 steps of a field with Lipschitz constant of order one
    np.testing.assert_allclose(to_numpy(traj.states), ref.states, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(to_numpy(X0), X)


def test_integrate_keeps_the_tokens_precision_by_default(lib):
    # float32 tokens of another library are integrated in float32 unless float64 is asked for
    # (numpy tokens: float64 by default, as before)
    asarray, to_numpy, xp = lib
    X, A, V, _ = _problem(n=20, d=3, seed=5)
    field = Softmax(A, V)
    X32 = xp.astype(asarray(X), xp.float32)
    run = dict(method="rk4", dt=0.1)
    default = integrate(field, X32, [0.0, 0.5], **run)
    assert str(default.states.dtype).endswith("float32")
    explicit = integrate(field, X32, [0.0, 0.5], **run, dtype="float32")
    np.testing.assert_array_equal(to_numpy(default.states), to_numpy(explicit.states))
    assert str(integrate(field, X32, [0.0, 0.5], **run, dtype="float64").states.dtype).endswith(
        "float64"
    )
    assert integrate(field, X.astype(np.float32), [0.0, 0.5], **run).states.dtype == np.float64


def test_integrate_refuses_what_needs_numpy(lib):
    asarray, _, _ = lib
    X, A, V, _ = _problem(n=10, d=2)
    with pytest.raises(TypeError, match=r"explicit `dt`.*method='rk4', dt=0\.01"):
        integrate(Softmax(A, V), asarray(X), [0.0, 1.0])
    with pytest.raises(TypeError, match="solve_ivp need"):
        integrate(Softmax(A, V), asarray(X), [0.0, 1.0], method="solve_ivp", dt=0.1)


def test_what_is_no_foreign_array_takes_the_numpy_path():
    # a string or a dict is refused by the numpy path's validation, by name, as before
    with pytest.raises((TypeError, ValueError), match="`X`"):
        Softmax(np.eye(2), np.eye(2)).velocity("tokens")
    assert not is_numpy(jnp.zeros(2)) and not is_numpy(array_api_strict.asarray([1.0]))
    assert is_numpy(np.zeros(2), [1.0], 2.0, None, {"a": 1})


@dataclass(frozen=True, eq=False)
class _NumpyOnly(AttentionField):
    """A field with no array-API formula (a user's own variant): refused by name."""

    def _velocity_at(self, Y, X, t, w):
        return np.zeros_like(Y)


# ---- the other variants: one generic array-API formula each, against the numpy path ----


@dataclass(frozen=True)
class Case:
    """A variant on a problem: the field, its tokens (``(n, d)``, or ``(n, 1 + d)`` with
    positions for the causal field) and ``score``, a bound on ``|s_ij|`` for the exponent or
    argument that each query-key score enters (the float32 bound)."""

    field: AttentionField
    X: np.ndarray
    score: float


def _norm2(M: np.ndarray) -> float:
    return float(np.linalg.norm(M, 2))


def _case(name: str, n: int = 150, d: int = 4, seed: int = 7) -> Case:
    """The test problem of each variant: Gaussian tokens, moderate parameters (scores of a few
    units), a non-symmetric ``A`` (a symmetric one for ``sinkhorn_sym``)."""
    X, A, V, _ = _problem(n, d, seed)
    r2 = float((np.linalg.norm(X, axis=1) ** 2).max())  # the largest |x|^2
    S = (A + A.T) / 2
    if name == "unnormalised":
        return Case(Unnormalised(A, V, beta=0.5), X, 0.5 * _norm2(A) * r2)
    if name == "hardmax":
        return Case(Hardmax(A, V), X, _norm2(A) * r2)
    if name == "l2":
        Q, K = A[:2], np.roll(np.eye(d), 1, axis=1)[:2]
        return Case(L2(Q, K, V, s=2.0), X, (2 * _norm2(Q) * _norm2(K) + _norm2(K) ** 2) * r2 / 2)
    if name == "sigmoid":
        return Case(Sigmoid(A, V, b=-0.5), X, _norm2(A) * r2 + 0.5)
    if name == "multihead":
        heads = (Softmax(A, V, beta=0.8), Sigmoid(S, V), L2(A, np.eye(d), np.eye(d)))
        W = (np.eye(d), V.T, lambda t: (1 + t) * np.eye(d))  # one W time-dependent
        scores = (0.8 * _norm2(A), _norm2(S), 2 * _norm2(A) + 1)  # the l2 head: s = 1, K = I
        return Case(MultiHead(heads, W), X, max(scores) * r2)
    if name == "causal":
        return Case(Causal(A, V, beta=1.5), with_positions(X), 1.5 * _norm2(A) * r2)
    if name in ("sinkhorn", "sinkhorn_sym"):
        B = S if name == "sinkhorn_sym" else A
        # tol far below the agreement asked: both solvers stop within 1e-13 of the same plan.
        # A score's rounding moves each potential by no more (the soft c-transform is
        # 1-Lipschitz in the sup norm), so a log-weight f_i + g_j + s_ij by three times it
        return Case(Sinkhorn(B, V, eps=0.8, tol=1e-13), X, 3 * _norm2(B) * r2 / 0.8)
    if name == "time_dependent":  # A(t), V(t): the parameters evaluated at the call's time
        field = Softmax(lambda t: A * np.cos(t), lambda t: V + t * np.eye(d), beta=0.9)
        return Case(field, X, 0.9 * _norm2(A) * r2)
    raise AssertionError(name)


VARIANTS = [
    "unnormalised",
    "hardmax",
    "l2",
    "sigmoid",
    "multihead",
    "causal",
    "sinkhorn",
    "sinkhorn_sym",
    "time_dependent",
]


@pytest.mark.parametrize("name", [*VARIANTS, "softmax"])
def test_variant_refuses_subnormal_tokens(lib, name):
    """Tokens whose every entry lies below the smallest normal float (the content of the
    causal field's tokens; its positions are normal): XLA on the CPU reads them as zeros, and
    the hardmax, sigmoid, l2, Sinkhorn and causal velocities of float32 tokens of 1e-39 came
    out exactly zero on JAX (torch's float32 hardmax of 1e-41: 1.7e-3 from numpy). Refused by
    name on every library, as the softmax was; the numpy path rescales them."""
    asarray, _, _ = lib
    case = _case("sinkhorn" if name == "softmax" else name, n=12, d=2)
    field = Softmax(case.field.A, case.field.V) if name == "softmax" else case.field
    X = case.X.astype(np.float32)
    X[:, -2:] *= np.float32(1e-39)  # the content columns
    assert np.abs(field.velocity(X)[:, -2:]).max() > 0  # the reference computes them
    with pytest.raises(FloatingPointError, match="below the smallest normal float"):
        field.velocity(asarray(X))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b", [1e300, -1e300])
def test_sigmoid_bias_beyond_the_float_range(lib, dtype, b):
    """A bias beyond the dtype's largest float makes every sigmoid weight 1 (or 0): the
    velocity is the mean of the values (or zero). torch refused to build a float32 array of
    -1e300 (a RuntimeError that named no argument) and numpy's float32 path warned of an
    overflow in the cast; now the bias acts as one at the edge of the range, on every path."""
    asarray, to_numpy, _ = lib
    X, A, V, _ = _problem(n=20, d=3)
    X = X.astype(dtype)
    field = Sigmoid(A, V, b=b)
    exact = X.astype(np.float64).mean(axis=0) @ V.T if b > 0 else np.zeros(3)
    ref = field.velocity(X)  # warnings are errors in the tests
    # a sum of n terms and a product over d: (n + d) roundings of values up to |V| max |x|
    bound = (20 + 3) * float(np.finfo(dtype).eps) * _norm2(V) * float(np.abs(X).max())
    np.testing.assert_allclose(ref, np.broadcast_to(exact, ref.shape), rtol=0, atol=bound)
    np.testing.assert_allclose(to_numpy(field.velocity(asarray(X))), ref, rtol=0, atol=bound)


def _weights(n: int, kind: str) -> np.ndarray | None:
    """Uniform (``None``), positive, or with zero weights (keys that play no role; never the
    first token, the causal field's earliest key)."""
    if kind == "uniform":
        return None
    w = np.random.default_rng(11).random(n) + 0.1
    if kind == "zeros":
        w[3:9] = 0.0
    return w / w.sum()


def _variant_float32_bound(case: Case, t: float) -> float:
    """Absolute float32 error bound of a velocity ``P (X V^T)`` (``P`` the attention matrix with
    the key weights; for multi-head the sum over heads, with their output matrices): each score
    carries ``d eps |s|`` of rounding, the same relative error of its weight once through exp,
    sigmoid or the Sinkhorn scalings, and the sums over ``n`` keys add ``n eps``; so
    ``(n + d s) eps_32 max_i sum_j |P_ij| |V x_j|``."""
    field, X = case.field, case.X
    n, d = X.shape
    heads = field.heads if isinstance(field, MultiHead) else (field,)
    mass = np.zeros(n)
    for h, head in enumerate(heads):
        Xc = X[:, 1:] if isinstance(head, Causal) else X
        P = head.attention_matrix(X, t)
        V = head.V(t) if callable(head.V) else head.V
        Wh = np.eye(Xc.shape[1])
        if isinstance(field, MultiHead) and field.W is not None:
            Wh = field.W[h](t) if callable(field.W[h]) else field.W[h]
        mass += np.abs(P) @ np.abs(Xc @ (Wh @ V).T).max(axis=1)
    return float((n + d * case.score) * EPS32 * mass.max())


@pytest.fixture(params=VARIANTS)
def variant(request):
    return request.param


@pytest.mark.parametrize("kind", ["uniform", "positive", "zeros"])
def test_variant_float64_matches_numpy(lib, variant, kind):
    asarray, to_numpy, _ = lib
    case = _case(variant)
    weights = _weights(case.X.shape[0], kind)
    ref = case.field.velocity(case.X, 0.4, weights=weights)
    Xa = asarray(case.X)
    before = to_numpy(Xa).copy()
    out = case.field.velocity(Xa, 0.4, weights=weights)
    assert type(out) is type(Xa) and str(out.dtype).endswith("float64")
    assert tuple(out.shape) == case.X.shape
    # the same formula in float64, its sums in another order (and Sinkhorn's potentials by the
    # same iterates, both within 1e-13 of the plan): agreement to 1e-12 relative
    np.testing.assert_allclose(to_numpy(out), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_array_equal(to_numpy(Xa), before)  # nothing passed in is modified


def test_variant_float32_matches_numpy_within_bound(lib, variant):
    asarray, to_numpy, _ = lib
    case = _case(variant)
    if variant == "hardmax":  # the bound holds while float32 keeps every query's best key
        S = case.X @ case.field.A.T @ case.X.T
        top2 = np.sort(S, axis=1)[:, -2:]
        gap = float((top2[:, 1] - top2[:, 0]).min())
        assert gap > 100 * case.X.shape[1] * case.score * EPS32, gap
    ref = case.field.velocity(case.X, 0.4)
    out = case.field.velocity(asarray(case.X.astype(np.float32)), 0.4)
    assert str(out.dtype).endswith("float32")
    bound = _variant_float32_bound(case, 0.4)
    np.testing.assert_allclose(to_numpy(out), ref, rtol=0, atol=bound)


def test_variant_at_other_queries_and_in_blocks(lib, variant, monkeypatch):
    asarray, to_numpy, _ = lib
    case = _case(variant, n=61, seed=8)  # a size no other test uses: JAX compiles it afresh
    Y = np.random.default_rng(2).standard_normal((23, case.X.shape[1]))
    if variant == "causal":
        Y[:, 0] = np.linspace(0.0, 1.0, 23)  # positions of the queries
    ref = case.field.velocity_at(Y, case.X, 0.2)
    # at most 5 query rows against the 61 keys per block: 5 blocks of queries (last: 3)
    monkeypatch.setattr("token_dynamics.attention._array_api.BLOCK_ENTRIES", 5 * 61)
    out = case.field.velocity_at(asarray(Y), asarray(case.X), 0.2)
    assert type(out) is type(asarray(Y)) and tuple(out.shape) == Y.shape
    np.testing.assert_allclose(to_numpy(out), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_variant_rk4_matches_numpy(lib, variant):
    asarray, to_numpy, _ = lib
    case = _case(variant, n=40, d=3, seed=9)
    times = [0.0, 0.25, 0.5]
    ref = integrate(case.field, case.X, times, method="rk4", dt=0.05)
    X0 = asarray(case.X)
    traj = integrate(case.field, X0, times, method="rk4", dt=0.05)
    assert type(traj.states) is type(X0) and traj.n_steps == ref.n_steps == 10
    # 40 evaluations, each equal to round-off (1e-15 relative), carried over 10 steps of a field
    # with Lipschitz constant of order one: 1e-12 relative to the largest coordinate
    scale = np.abs(ref.states).max()
    np.testing.assert_allclose(to_numpy(traj.states), ref.states, rtol=0, atol=1e-12 * scale)
    np.testing.assert_array_equal(to_numpy(X0), case.X)


def test_causal_refusals_name_the_argument(lib):
    asarray, _, _ = lib
    case = _case("causal", n=12, d=2)
    field, X = case.field, case.X
    bad = X.copy()
    bad[4, 0] = 1.5
    with pytest.raises(ValueError, match=r"`X\[:, 0\]` holds the positions.*\[0, 1\]"):
        field.velocity(asarray(bad))
    Y = X[:3].copy()
    Y[:, 0] = [0.5, -0.2, 0.1]  # a query before every token, as on numpy
    for Ya, Xa in ((Y, X), (asarray(Y), asarray(X))):
        with pytest.raises(ValueError, match=r"query 1 \(position -0.2\) sees no token"):
            field.velocity_at(Ya, Xa)
    w0 = np.full(12, 1 / 11)
    w0[5] = 0.0
    bad[5, 0], bad[4, 0] = -3.0, X[4, 0]  # out of range, at a key of zero weight: refused too
    for Xa in (bad, asarray(bad)):
        with pytest.raises(ValueError, match=r"`X\[:, 0\]` holds the positions"):
            field.velocity(Xa, weights=w0)
    w = np.full(12, 1 / 10)
    w[:2] = 0.0  # the two earliest tokens weigh nothing: query 0 sees no key
    with pytest.raises(ValueError, match=r"query 0 \(position 0\) sees no token of positive"):
        field.velocity(asarray(X), weights=w)
    late = X.copy()
    late[:, 0] = np.linspace(0.1, 1.0, 12)
    sink = Causal(field.A, field.V, beta=field.beta, sink=True)
    with pytest.raises(ValueError, match="position 0 when `sink=True`"):
        sink.velocity(asarray(late))
    np.testing.assert_allclose(  # with a sink the flag changes no value
        np.asarray(sink.velocity(asarray(X))), field.velocity(X), rtol=0, atol=1e-12
    )


def test_sinkhorn_reports_convergence_as_on_numpy(lib):
    asarray, to_numpy, _ = lib
    case = _case("sinkhorn", n=30, d=2)
    A, V = case.field.A, case.field.V
    loose = Sinkhorn(A, V, eps=0.05, tol=1e-14, max_iter=2)  # two iterations cannot reach it
    with pytest.warns(SinkhornConvergenceWarning, match=r"did not converge at t = 0.*max_iter"):
        out = loose.velocity(asarray(case.X))
    assert np.all(np.isfinite(to_numpy(out)))
    strict = Sinkhorn(A, V, eps=0.05, tol=1e-14, max_iter=2, strict=True)
    with pytest.raises(SinkhornConvergenceError, match="after 2 iterations"):
        strict.velocity(asarray(case.X))


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("tol", [1e-16, 1e-8])
@pytest.mark.parametrize("path", ["stored", "streamed", "fallback"])
def test_sinkhorn_converged_agrees_with_numpy(lib, symmetric, tol, path, monkeypatch):
    """Both paths judge convergence by ``plan_convergence``, on the sums of the plan at their
    final potentials. 1e-16 lies below the rounding of those sums (100 sums of 100 entries of
    size 1e-4: a few 1e-16 in l1), which the iterations' own error reaches: on the array path
    it decided, and a strict field returned the velocity where numpy raised. 1e-8 lies far
    above the rounding: both converge."""
    asarray, _, _ = lib
    rng = np.random.default_rng(41)
    X = rng.standard_normal((100, 3))
    A = np.eye(3) if symmetric else rng.standard_normal((3, 3))
    module = "token_dynamics.attention._sinkhorn_array_api"
    if path == "streamed":
        monkeypatch.setattr(f"{module}.KERNEL_MEMORY_BUDGET", 0)
    elif path == "fallback":
        monkeypatch.setattr(f"{module}._symmetric_scaling", lambda *args: None)
        monkeypatch.setattr(f"{module}._alternating_scaling", lambda *args: None)
    converged = sinkhorn_plan(dense_scores(X, A), 1.0, tol=tol).converged
    assert converged == (tol == 1e-8)
    field = Sinkhorn(A, np.eye(3), tol=tol, strict=True)
    for tokens in (X, asarray(X)):
        if converged:
            field.velocity(tokens)
        else:
            with pytest.raises(SinkhornConvergenceError, match=f"tol = {tol:g}"):
                field.velocity(tokens)


def test_sinkhorn_relaxation_never_lets_the_error_run_away(lib):
    """25 tokens at eps = 1e-5 (scores over ~1e5 eps), symmetric: none of the solvers converges
    in 1000 iterations. The averaged updates' errors stall near 0.7, their ratios read
    1 - 1.5e-16, and the relaxation they set was theta = 1: on torch and JAX (other rounding
    than numpy's) the error then swung between 1e54 and 1e272 without rising steadily, and the
    warning reported 6.3e244 where numpy reported 0.28. Given up at ten times its starting error,
    the relaxation leaves every library at numpy's error and velocity."""
    asarray, to_numpy, _ = lib
    rng = np.random.default_rng(5)
    A, V = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    X = rng.standard_normal((25, 2))
    field = Sinkhorn((A + A.T) / 2, V, eps=1e-5)
    errors, outs = [], []
    for tokens in (X, asarray(X)):
        with pytest.warns(SinkhornConvergenceWarning, match="did not converge") as caught:
            outs.append(to_numpy(field.velocity(tokens)))
        errors.append(float(re.search(r"marginal error (\S+) >", str(caught[0].message))[1]))
    assert errors[0] < 1 and errors[1] < 1, errors
    # the same iterates up to rounding over 1000 iterations: 5e-12 apart, measured
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-9, atol=0)


def test_unnormalised_overflow_is_named(lib):
    asarray, _, _ = lib
    X, A, V, _ = _problem(n=10, d=2)
    with pytest.raises(
        FloatingPointError, match="unnormalised attention velocity left the float range"
    ):
        Unnormalised(A, V, beta=1e4).velocity(asarray(X))


def test_sinkhorn_refuses_a_library_without_float64():
    X, A, V, _ = _problem(n=10, d=2)
    with jax.enable_x64(False):  # JAX's default: no float64 arrays
        Xa = jnp.asarray(X.astype(np.float32))
        assert not has_float64(jnp, Xa)
        with pytest.raises(TypeError, match=r"float64.*`X`.*jax_enable_x64.*np\.asarray\(X\)"):
            Sinkhorn(A, V).velocity(Xa)
        # the other variants compute in the caller's float32
        out = Hardmax(A, V).velocity(Xa)
        assert out.dtype == jnp.float32


def test_integer_tokens_without_float64_ask_for_a_dtype():
    # integer (or half-float) tokens compute in float64 by default, as on numpy's path; JAX
    # without x64 has none, and gave float32 with a warning of its own only: refused by name,
    # float32 when asked for, and float32 tokens keep computing in float32
    X, A, V, _ = _problem(n=10, d=2)
    with jax.enable_x64(False):
        Xi = jnp.asarray(np.round(4 * X).astype(np.int32))
        with pytest.raises(TypeError, match=r"int32 are computed in float64 by default.*float32"):
            Softmax(A, V).velocity(Xi)
        out = Softmax(A, V).velocity(Xi, dtype="float32")
        assert out.dtype == jnp.float32
        Xr = np.round(4 * X)
        bound = _float32_bound(Softmax(A, V), Xr)
        np.testing.assert_allclose(np.asarray(out), Softmax(A, V).velocity(Xr), atol=bound, rtol=0)
        assert Softmax(A, V).velocity(jnp.asarray(X.astype(np.float32))).dtype == jnp.float32


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_scores_beyond_the_float_range_are_named(lib, name):
    # tokens of norm ~1e160: their scores leave float64, which the array path does not rescale
    # (the numpy path does), and an overflowed score may even change sign: a FloatingPointError
    # naming what left the range, never NaN nor a wrong finite value
    asarray, _, _ = lib
    case = _case(name, n=20, d=2)
    X = case.X * 1e160
    if name == "causal":
        X[:, 0] = case.X[:, 0]  # the positions stay in [0, 1]
    with pytest.raises(FloatingPointError, match=r"(left|may leave) the float range"):
        case.field.velocity(asarray(X))


def test_tokens_whose_squared_norms_overflow_are_not_refused_without_scores(lib):
    # float32 rows of norm ~1e20, whose squares overflow: with A = 0 every score is 0 (the
    # bound |beta| ||A|| max|y| max|x| is 0, whatever the norms), so the softmax is the mean
    # of the values, exact to float32 rounding
    asarray, to_numpy, xp = lib
    X, _, V, _ = _problem(n=10, d=2)
    big = xp.astype(asarray(X * 1e20), xp.float32)
    out = to_numpy(Softmax(np.zeros((2, 2)), V).velocity(big))
    ref = (X * 1e20).mean(axis=0) @ V.T
    np.testing.assert_allclose(out, np.broadcast_to(ref, out.shape), rtol=20 * EPS32)
    with pytest.raises(FloatingPointError, match=r"may leave the float range.*float32"):
        Softmax(np.eye(2), V).velocity(big)


def test_a_row_of_overflowed_scores_is_named_not_returned_as_zeros(lib):
    # every score of each row is below -3.4e38, -inf in float32: torch's fused kernel returns
    # such a row as zeros (a finite, wrong velocity), which the range of the scores catches
    asarray, _, xp = lib
    X = xp.astype(asarray(np.array([[1e20, 0.0], [2e20, 0.0]])), xp.float32)
    with pytest.raises(
        FloatingPointError, match="softmax attention velocity may leave the float range"
    ):
        Softmax(-np.eye(2), np.eye(2)).velocity(X)


@pytest.mark.parametrize("name", ["sinkhorn", "sinkhorn_sym"])
@pytest.mark.parametrize("path", ["streamed", "fallback"])
def test_sinkhorn_paths_agree_with_numpy(lib, name, path, monkeypatch):
    # the kernel stored (the other tests), beyond the memory budget (log-sum-exp updates on
    # scores recomputed in blocks), or after a scaling turned non-finite (the updates started
    # afresh): the same plan within tol = 1e-13, so the same velocity to 1e-12
    asarray, to_numpy, _ = lib
    case = _case(name, n=50, d=3, seed=12)
    ref = case.field.velocity(case.X)
    module = "token_dynamics.attention._sinkhorn_array_api"
    if path == "streamed":
        monkeypatch.setattr(f"{module}.KERNEL_MEMORY_BUDGET", 0)
    else:
        monkeypatch.setattr(f"{module}._symmetric_scaling", lambda *args: None)
        monkeypatch.setattr(f"{module}._alternating_scaling", lambda *args: None)
    out = to_numpy(case.field.velocity(asarray(case.X)))
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_query_blocks_cover_the_rows_within_the_bound(lib):
    asarray, _, xp = lib
    F, K = asarray(np.zeros((5000, 2))), asarray(np.zeros((3000, 2)))
    blocks = query_blocks(xp, F, K)
    # consecutive, covering every row once, each block's scores within the library's bound
    assert blocks[0].start == 0 and blocks[-1].stop == 5000
    assert all(a.stop == b.start for a, b in itertools.pairwise(blocks))
    torch_cpu = xp.__name__.endswith("torch")  # the tests' tensors live on the host
    bound = TORCH_CPU_BLOCK_ENTRIES if torch_cpu else BLOCK_ENTRIES
    sizes = [b.stop - b.start for b in blocks]
    assert max(sizes) * 3000 <= bound < (max(sizes) + 1) * 3000


# --- the stochastic model (1.1) with finite-width MLPs: layers and draws on the array's device


def _sphere(shape: tuple[int, ...], seed: int) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal(shape)
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def _activation(name: str, H: np.ndarray) -> np.ndarray:
    """The activation of ``_mlp`` applied to a copy of ``H``."""
    return _mlp._sigma_inplace(name)(H.copy())


@pytest.mark.parametrize("activation", ["relu", "silu", "sigmoid", "tanh", "erf"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mlp_layer_matches_numpy(lib, activation, dtype, monkeypatch):
    asarray, to_numpy, xp = lib
    paths, n, d, m = 3, 7, 4, 50
    noise = MLPNoise(activation, m, sigma_U=0.4, sigma_W=0.3)
    Y = _sphere((paths, n, d), 1)
    U, bU, W, bW = _mlp._draw_weights(noise, paths, d, np.random.default_rng(2))
    ref = _mlp._mlp(activation, Y, U, bU, W, bW)
    # 64 activations at a time: blocks of 3 hidden units, 17 of them, summed in order
    monkeypatch.setattr(stochastic_xp, "BLOCK_ENTRIES", 64)
    args = (asarray(a.astype(dtype)) for a in (Y, U, bU, W, bW))
    out = stochastic_xp.mlp_xp(xp, activation, *args)
    assert type(out) is type(asarray(Y)) and str(out.dtype).endswith(np.dtype(dtype).name)
    got = to_numpy(out).astype(np.float64)
    if dtype == np.float64:
        # the same sums of d and m products in another order: 1e-12 relative
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
        return
    # float32, to first order in eps: H = U y + b_U carries (d + 2) eps (|U| |y| + |b_U|)
    # (inputs rounded, d products summed), which the activation (Lipschitz <= 1.13: erf's
    # 2/sqrt(pi)) passes on; the sum over the m hidden units against W adds (m + 2) eps
    # |sigma(H)| |W|, the scale 1/sqrt(m) and b_W two eps of the result
    UT, WT = np.swapaxes(U, -1, -2), np.swapaxes(np.abs(W), -1, -2)
    H_abs = np.abs(Y) @ np.abs(UT) + np.abs(bU)[:, None, :]
    sigma_abs = np.abs(_activation(activation, Y @ UT + bU[:, None, :]))
    bound = EPS32 * ((m + 2) * (sigma_abs @ WT) + 1.13 * (d + 2) * (H_abs @ WT)) / np.sqrt(m)
    bound += 2 * EPS32 * (np.abs(ref) + np.abs(bW)[:, None, :])
    assert np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) / bound)


def _given_weights(noise: MLPNoise, paths: int, d: int, layers: int) -> list:
    """Weights of ``layers`` layers, drawn once by numpy, for both paths to use."""
    rng = np.random.default_rng(11)
    return [_mlp._draw_weights(noise, paths, d, rng) for _ in range(layers)]


def test_simulate_with_given_weights_matches_numpy(lib, monkeypatch):
    asarray, to_numpy, _ = lib
    paths, N, d, L = 2, 5, 3, 4
    noise = MLPNoise("silu", width=24, sigma_U=0.2, sigma_W=0.1)
    rng = np.random.default_rng(3)
    model = StochasticTransformer(noise, Q=rng.standard_normal((d, d)), V=0.8 * np.eye(d))
    X0 = _sphere((N, d), 4)
    layers = _given_weights(noise, paths, d, L)
    numpy_draws, xp_draws = iter(layers), iter(layers)
    monkeypatch.setattr(_mlp, "_draw_weights", lambda *args: next(numpy_draws))
    monkeypatch.setattr(
        stochastic_xp,
        "draw_weights_xp",
        lambda xp, noise, paths, d, normal, dtype: tuple(asarray(w) for w in next(xp_draws)),
    )
    ref = simulate(model, X0, T=0.8, L=L, n_paths=paths, rng=0)
    out = simulate(model, asarray(X0), T=0.8, L=L, n_paths=paths, rng=0)
    np.testing.assert_array_equal(out.times, ref.times)
    # every layer agrees to round-off (1e-15); the attention and MLP sub-layers, Lipschitz of
    # order one at this step (h = 0.2), and the normalisation carry it over 4 layers
    np.testing.assert_allclose(to_numpy(out.X), ref.X, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("activation", "sigma_U", "sigma_W"), [("relu", 0.5, 0.3), ("erf", 0, 0)])
def test_device_draws_have_the_kernel_covariance(lib, activation, sigma_U, sigma_W):
    asarray, to_numpy, _ = lib
    P, d = 4000, 3
    noise = MLPNoise(activation, width=16, sigma_U=sigma_U, sigma_W=sigma_W)
    x, y = _sphere((2, d), 5)
    Y = np.broadcast_to(np.stack([x, y]), (P, 2, d)).copy()
    G = to_numpy(noise.sample(asarray(Y), rng=7))  # one MLP per path, drawn on the device
    assert G.shape == (P, 2, d)
    # Cov(G(u), G(v)) = kappa(<u, v>) I_d at every width: each estimate is a mean over the P
    # independent paths, checked within 5 standard errors computed from the samples (a
    # two-sided normal tail of 6e-7 per check)
    for u, v in ((0, 0), (0, 1), (1, 1)):
        samples = np.mean(G[:, u] * G[:, v], axis=1)  # the d coordinates' mean, per path
        se = samples.std(ddof=1) / np.sqrt(P)
        want = float(noise.kappa(float(Y[0, u] @ Y[0, v]), d=d))
        assert abs(samples.mean() - want) <= 5 * se, (u, v, samples.mean(), want, se)
    for samples in (G[:, 0, 0] * G[:, 1, 1], G[:, 0, 0], G[:, 1, 2]):  # centred, uncorrelated
        assert abs(samples.mean()) <= 5 * samples.std(ddof=1) / np.sqrt(P)


def test_simulate_seeds_type_device_and_dtype(lib):
    asarray, to_numpy, _ = lib
    model = StochasticTransformer(MLPNoise("tanh", width=8, sigma_W=0.1), V=0.5 * np.eye(3))
    X0 = asarray(_sphere((4, 3), 6))
    before = to_numpy(X0).copy()
    run = dict(T=1.0, L=6, n_paths=3, save_every=4)
    a = simulate(model, X0, rng=1, **run)
    b = simulate(model, X0, rng=1, **run)
    c = simulate(model, X0, rng=2, **run)
    assert type(a.X) is type(X0) and device(a.X) == device(X0)
    assert tuple(a.X.shape) == (3, 3, 4, 3) and a.times.tolist() == [0.0, 4 / 6, 1.0]
    assert str(a.X.dtype).endswith("float64") and isinstance(a.times, np.ndarray)
    np.testing.assert_array_equal(to_numpy(a.X), to_numpy(b.X))  # the same seed: the same run
    assert not np.allclose(to_numpy(a.X)[:, -1], to_numpy(c.X)[:, -1])
    np.testing.assert_array_equal(to_numpy(a.X)[:, 0], np.broadcast_to(before, (3, 4, 3)))
    np.testing.assert_allclose(np.linalg.norm(to_numpy(a.X), axis=-1), 1.0, atol=1e-14)
    np.testing.assert_array_equal(to_numpy(X0), before)  # nothing passed in is modified


def test_simulate_and_sample_keep_float32(lib):
    asarray, to_numpy, _ = lib
    model = StochasticTransformer(MLPNoise("tanh", width=8, sigma_W=0.1), V=0.5 * np.eye(3))
    X32 = asarray(_sphere((4, 3), 6).astype(np.float32))
    r32 = simulate(model, X32, T=1.0, L=6, n_paths=3, rng=1, dtype="float32")
    assert type(r32.X) is type(X32) and str(r32.X.dtype).endswith("float32")
    # the default keeps the tokens' precision (float64 would refuse these rows, normalised in
    # float32, as off the sphere by 3e-8)
    default = simulate(model, X32, T=1.0, L=6, n_paths=3, rng=1)
    np.testing.assert_array_equal(to_numpy(default.X), to_numpy(r32.X))
    # float32 unit rows: within a few float32 round-offs of the sphere
    np.testing.assert_allclose(np.linalg.norm(to_numpy(r32.X), axis=-1), 1.0, atol=4 * EPS32)
    g32 = MLPNoise(width=8).sample(X32, rng=0)
    assert type(g32) is type(X32) and str(g32.dtype).endswith("float32") and g32.shape == (4, 3)


def test_simulate_takes_a_torch_generator():
    asarray, to_numpy, _ = _library("torch")
    import torch

    model = StochasticTransformer(MLPNoise("relu", width=8))
    X0 = asarray(_sphere((3, 2), 8))
    a = simulate(model, X0, T=1.0, L=3, rng=torch.Generator().manual_seed(5))
    b = simulate(model, X0, T=1.0, L=3, rng=torch.Generator().manual_seed(5))
    np.testing.assert_array_equal(to_numpy(a.X), to_numpy(b.X))


def test_stochastic_refusals_name_the_argument(lib):
    asarray, _, _ = lib
    X0 = _sphere((4, 3), 9)
    exact = StochasticTransformer(MLPNoise("erf", width=None))
    fix = r"np\.asarray\(X0\).*MLPNoise\(width=m\)"
    with pytest.raises(
        TypeError, match=r"`X0` is a .*simulate with MLPNoise\(width=None\).*" + fix
    ):
        simulate(exact, asarray(X0), T=1.0, L=2)
    # simulate_sde never runs on arrays, whatever the width: only numpy is offered
    with pytest.raises(TypeError, match=r"`X0` is a .*simulate_sde samples.*np\.asarray\(X0\)"):
        simulate_sde(exact, asarray(X0), T=1.0, L=2)
    with pytest.raises(TypeError, match=r"`Y` is a .*np\.asarray\(Y\)"):
        MLPNoise(width=None).sample(asarray(X0))
    with pytest.raises(ValueError, match="`X0` must lie on the unit sphere"):
        simulate(StochasticTransformer(), asarray(2 * X0), T=1.0, L=2)
    with pytest.raises(TypeError, match="`rng` must be an integer seed"):
        simulate(StochasticTransformer(), asarray(X0), T=1.0, L=2, rng="seed")
    # entries of 1e200: their squared norm overflows, reported by name, never a silent NaN
    loud = StochasticTransformer(MLPNoise("relu", width=4, sigma_W=1e200))
    with pytest.raises(FloatingPointError, match=r"non-finite or zero at layer 1 \(MLP\)"):
        simulate(loud, asarray(X0), T=1.0, L=2, rng=0)


def test_the_running_at_scale_page_runs_its_pytorch_branch():
    # what a reader with a GPU runs (on Colab), never run by the book's build, which has no
    # torch: the page's cells with `device = "cpu"`, at the page's CPU sizes, its checks included
    import sys

    import matplotlib
    import torch

    from .helpers import ROOT

    matplotlib.use("Agg")
    sys.path.insert(0, str(ROOT / "tools"))
    from notebook_code import code_cells

    source = "\n\n".join(code_cells(ROOT / "book" / "scale.md"))
    line = 'device = "cuda" if torch.cuda.is_available() else None'
    assert source.count(line) == 1, "the page no longer chooses its device on this line"
    page: dict = {}
    exec(compile(source.replace(line, 'device = "cpu"'), "scale.md", "exec"), page)
    assert page["where"] == "the CPU (PyTorch on cpu, float32)"
    traj = page["run"](64, 0)
    assert isinstance(traj.states, torch.Tensor) and traj.states.dtype == torch.float32


@pytest.mark.parametrize(
    ("dt", "far"), [(np.float64, 1e200), (np.float32, 1e17), (np.float32, 1e20)]
)
def test_cluster_count_is_exact_beside_a_far_token(lib, dt, far):
    # the 1e-3 gap, rescaled by the far token, squares to zero: below the rounding bound of
    # the inner products, so it is decided from coordinate differences scaled by their largest
    # one (no square underflows); the count is exact, as on numpy
    asarray, to_numpy, _ = lib
    X = np.array([[0.0, 0.0], [1e-3, 0.0], [far, 0.0]], dtype=dt)
    assert cluster_count(X.astype(np.float64), 1e-4) == 3
    assert cluster_count(asarray(X), 1e-4) == 3
    assert cluster_count(asarray(X), 2e-3) == 2
    np.testing.assert_array_equal(to_numpy(asarray(X)), X)  # nothing passed in is modified


def test_cluster_count_counts_distinct_tiny_tokens(lib):
    asarray, _, _ = lib
    Z = np.random.default_rng(5).standard_normal((6, 3))
    for scale in (1e-200, 1e-310):  # the second subnormal: flushed to zero by JAX on the CPU
        X = np.vstack([Z, Z[:2]]) * scale
        assert cluster_count(asarray(X), 0.0) == cluster_count(X, 0.0) == 6


def test_zero_weight_rows_play_no_role_on_arrays(lib):
    # a huge token of zero weight: dropped before the scale is taken (it pushed the others into
    # underflow) and before the scores (its score overflowed and the energy was refused)
    asarray, to_numpy, _ = lib
    X = np.random.default_rng(0).standard_normal((6, 3))
    n, m, eps = 5, np.abs(X[:5]).max(), np.finfo(np.float64).eps
    for big in (1e160, 1e200, 1e300):
        Xb = X.copy()
        Xb[-1] *= big
        w = np.full(6, 0.2)
        w[-1] = 0.0
        # n-term sums of terms up to m (the mean) or (2m)^2 (the covariance), rounded to eps
        cov = to_numpy(empirical_covariance(asarray(Xb), weights=w))
        np.testing.assert_allclose(cov, np.cov(X[:5].T, bias=True), rtol=0, atol=4 * n * eps * m**2)
        mean = to_numpy(empirical_mean(asarray(Xb), weights=w))
        np.testing.assert_allclose(mean, X[:5].mean(axis=0), rtol=0, atol=n * eps * m)
        # the energy sums n^2 exponentials of scores up to d m^2, each rounded to d eps
        # relative in the score: (n^2 + d m^2) eps relative
        ref = interaction_energy(X[:5])
        assert (
            abs(interaction_energy(asarray(Xb), weights=w) - ref) <= (n**2 + 3 * m**2) * eps * ref
        )


def test_energy_overflow_names_a_fix_that_applies(lib):
    asarray, _, _ = lib
    X = np.array([[1e160, 0.0], [0.0, 1.0]])  # a score of 1e320: beyond float64
    with pytest.raises(FloatingPointError, match="lower `beta` or the token norms") as info:
        interaction_energy(asarray(X))
    assert "float64" not in str(info.value).split(";")[1]  # the tokens are float64 already
    with pytest.raises(FloatingPointError, match="pass the tokens in float64"):
        interaction_energy(asarray(np.array([[1e20, 0.0], [0.0, 1.0]], dtype=np.float32)))


def test_subnormal_tokens_are_rescaled_or_refused(lib):
    # JAX on the CPU flushes subnormal numbers, inputs included: a cloud at 1e-310 is read on
    # the host and divided there by a power of two (exact), so the results agree with numpy's
    asarray, to_numpy, _ = lib
    X = np.random.default_rng(0).standard_normal((8, 3)) * 1e-310
    Xa = asarray(X)
    assert numerical_rank(Xa) == numerical_rank(X) == 3
    # diameter: (d + 2) eps relative on each side, as in the test at normal scales above
    eps = np.finfo(np.float64).eps
    assert abs(diameter(Xa) - diameter(X)) <= 2 * 5 * eps * diameter(X)
    # the mean of subnormal numbers keeps only their digits (down to 2**-1074): 8 terms
    np.testing.assert_allclose(to_numpy(empirical_mean(Xa)), empirical_mean(X), rtol=0,
                               atol=8 * 2.0**-1074)  # fmt: skip
    np.testing.assert_array_equal(to_numpy(Xa), X)  # nothing passed in is modified
    # entries more than 2**-1022 below the largest stay subnormal after any rescaling, and a
    # tol below the resolved distances cannot be decided: a named refusal where they flush
    mixed = np.array([[1.0, 0.0], [1.0, 1e-310]])
    if lib[2] is jnp:
        with pytest.raises(ValueError, match=r"`X` holds entries below .*np\.asarray\(X\)"):
            diameter(asarray(mixed))
        with pytest.raises(ValueError, match=r"`tol` = .*lies below.*np\.asarray\(X\)"):
            cluster_count(asarray(np.eye(2)), 1e-300)
    else:
        assert cluster_count(asarray(mixed), 0.0) == cluster_count(mixed, 0.0) == 2
        assert cluster_count(asarray(np.eye(2)), 1e-300) == 2


# --- added by the mutation audit (MUTANTS.md): checks that a plausible bug would fail
def test_hardmax_ties_below_unit_scores_use_an_absolute_tolerance(lib):
    """The tie set is ``{j : s_ij >= m_i - tol max(1, |m_i|)}``: below ``|m_i| = 1`` the
    tolerance is absolute. Scores of 0.1 and 0.1 - 5e-4 at ``tol = 1e-3`` are tied (a gap of
    half the tolerance), although the gap exceeds ``tol |m_i|`` = 1e-4; the velocity is then the
    mean of the two values, a dense formula to round-off (a sum of two terms, 1e-15 relative)."""
    asarray, to_numpy, _ = lib
    X = np.array([[0.1, 0.0], [0.1 - 5e-4, 0.3], [-0.2, 1.0]])  # scores <y, x_j> = x_j1
    Y = np.array([[1.0, 0.0]])
    V = np.array([[1.0, 2.0], [-0.5, 1.5]])
    field = Hardmax(np.eye(2), V, tol=1e-3)
    S = Y @ X.T
    m = S.max(axis=1, keepdims=True)
    tied = S >= m - 1e-3 * np.maximum(1.0, np.abs(m))
    assert tied.sum() == 2  # the two first keys
    want = (tied / tied.sum(axis=1, keepdims=True)) @ X @ V.T
    out = to_numpy(field.velocity_at(asarray(Y), asarray(X)))
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-15 * np.abs(want).max())


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_scores_in_range_counts_the_key_biases(lib, sign):
    """``scores_in_range`` bounds each score ``<F_i, K_j> + c_j`` by Cauchy-Schwarz,
    ``max|F_i| max|K_j| + max|c_j|``, against the largest float over ``2**SCORE_HEADROOM``:
    with zero products the biases alone decide, on either side of the limit (a factor 2 each
    way, far from rounding), and a bias of either sign counts (the l2 and Sinkhorn biases)."""
    asarray, _, xp = lib
    limit = float(np.finfo(np.float64).max) / 2.0**SCORE_HEADROOM
    F, K = asarray(np.zeros((3, 2))), asarray(np.ones((4, 2)))
    for c, inside in ((limit / 2, True), (2 * limit, False)):
        bias = asarray(np.array([0.0, sign * c, 1.0, -1.0]))
        assert bool(scores_in_range(xp, F, K, bias)) is inside, (c, inside)
    # the products count too: |F_i| |K_j| = 1e304 > limit = 2.7e303, zero biases (norms of
    # 1e152, whose squares stay finite)
    big = asarray(np.array([[1e152, 0.0]]))
    assert not bool(scores_in_range(xp, big, big, asarray(np.zeros(1))))


def test_queries_far_larger_than_the_keys_are_named(lib):
    """The Cauchy-Schwarz bound of the scores at queries ``Y`` elsewhere is
    ``|beta| ||A|| max|y_i| max|x_j|``, with the queries' own norms: float32 keys of norms 40
    and 50 and a query of norm 1e37 give scores of -4e38 and -5e38, both beyond the float32
    range (3.4e38): -inf, a row that torch's fused kernel returns as zeros (a finite, wrong
    velocity). The bound 5e38 exceeds the limit 3.4e38 / 2**16 by far, so the velocity is
    refused by name, whatever the keys' norms alone (50 * 50) would allow."""
    asarray, _, xp = lib
    X = xp.astype(asarray(np.array([[40.0, 0.0], [50.0, 0.0]])), xp.float32)
    Y = xp.astype(asarray(np.array([[-1e37, 0.0]])), xp.float32)
    with pytest.raises(FloatingPointError, match="may leave the float range"):
        Softmax(np.eye(2), np.eye(2)).velocity_at(Y, X)


def test_device_draws_are_fresh_standard_normals_at_each_call(lib):
    """``device_normal`` gives one generator whose successive draws are independent standard
    normals (each layer of ``simulate`` draws its own MLP weights): two draws of N = 20000 have
    a sample mean within 5 / sqrt(N) of 0, a sample variance within 5 sqrt(2 / N) of 1 (the
    standard deviation of the variance of N normals), and a sample correlation within
    5 / sqrt(N) of 0; a generator that repeats its draw has correlation 1."""
    asarray, to_numpy, xp = lib
    N = 20_000
    normal = device_normal(xp, asarray(np.zeros(1)), 3)
    a, b = (to_numpy(normal((N,), xp.float64)) for _ in range(2))
    for z in (a, b):
        assert abs(z.mean()) <= 5 / np.sqrt(N)
        assert abs(z.var() - 1) <= 5 * np.sqrt(2 / N)
    assert abs(np.corrcoef(a, b)[0, 1]) <= 5 / np.sqrt(N)


@pytest.mark.parametrize("name", ["array_api_strict", "jax", "torch"])
def test_device_seeds_differing_in_their_high_word_draw_differently(name, monkeypatch):
    """Seeds are 63-bit (``_seed``); JAX's key takes them as two 32-bit words (its keys are
    32-bit without x64) and torch's CPU generator keeps 32 bits (the two words are folded into
    one), so seeds that differ only above bit 32 must still give different draws: independent
    normals, whose difference has variance 2 (the largest of 1000 such differences exceeds 1
    but with probability below 1e-200)."""
    asarray, to_numpy, xp = _library(name)
    like = asarray(np.zeros(1))
    draws = []
    for seed in (12345, 12345 + 2**32):
        monkeypatch.setattr(_backend, "_seed", lambda rng, s=seed: s)
        draws.append(to_numpy(device_normal(xp, like, 0)((1000,), xp.float64)))
    assert np.abs(draws[0] - draws[1]).max() > 1.0


def test_scores_overflowing_from_tokens_of_finite_norm_are_named(lib):
    """float32 tokens of norms 1.5e19 and 1.8e19 (their squares, up to 3.24e38, stay below the
    largest float32 3.4e38, so every norm is finite) and ``A = -2 I``: every score
    ``-2 <x_i, x_j>`` lies below -4.5e38, -inf in float32, a row that torch's fused kernel
    returns as zeros (a finite, wrong velocity). The Cauchy-Schwarz bound
    ``|beta| ||A|| max|y| max|x| = 2 (1.8e19)^2 = 6.5e38`` exceeds the limit
    ``3.4e38 / 2**16`` by far: refused by name before any such result is returned."""
    asarray, _, xp = lib
    X = xp.astype(asarray(np.array([[1.5e19, 0.0], [1.8e19, 0.0]])), xp.float32)
    with pytest.raises(FloatingPointError, match="may leave the float range"):
        Softmax(-2 * np.eye(2), np.eye(2)).velocity(X)


@pytest.mark.parametrize("blocked", [False, True])
def test_attention_drift_matches_the_dense_formula(lib, blocked, monkeypatch):
    """``attention_drift_xp`` is ``V sum_j softmax_j(<A x_i, x_j>) x_j`` for each path, with a
    non-symmetric ``A`` (a transposed ``A`` gives other scores): densely over groups of paths,
    and path by path through the blocked softmax once ``n^2`` exceeds ``BLOCK_ENTRIES`` (20
    here, against n^2 = 36). Float64 sums of n = 6 terms of order one: 1e-13 relative."""
    asarray, to_numpy, xp = lib
    paths, n, d = 3, 6, 3
    X = _sphere((paths, n, d), 12)
    rng = np.random.default_rng(13)
    A, V = rng.standard_normal((d, d)), rng.standard_normal((d, d))
    S = np.einsum("pia,ba,pjb->pij", X, A, X)  # S_ij = <A x_i, x_j>
    P = np.exp(S - S.max(axis=-1, keepdims=True))
    want = (P / P.sum(axis=-1, keepdims=True)) @ X @ V.T
    if blocked:
        monkeypatch.setattr(stochastic_xp, "BLOCK_ENTRIES", 20)
    out = to_numpy(stochastic_xp.attention_drift_xp(xp, *(asarray(M) for M in (X, A, V))))
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-13 * np.abs(want).max())


def test_normalised_rows_report_a_collapse(lib):
    """``_normalised`` scales each row to norm one and reports whether every norm is finite and
    at least ``min_norm`` (the collapse check of each layer of ``simulate``, as on the numpy
    path): a row of norm min_norm / 2 or a NaN row fails it, a row of norm 2 min_norm passes,
    factors of two far from the rounding of a norm (1e-16 relative)."""
    asarray, to_numpy, xp = lib
    rows = np.array([[3.0, 4.0], [0.6, 0.8], [0.0, 2e-8]])
    Z, ok = stochastic_xp._normalised(xp, asarray(rows[None]), 1e-8)
    assert bool(ok)
    want = rows / np.linalg.norm(rows, axis=-1, keepdims=True)
    np.testing.assert_allclose(to_numpy(Z)[0], want, rtol=0, atol=1e-15)
    for bad in ([0.0, 0.5e-8], [np.nan, 1.0]):
        _, ok = stochastic_xp._normalised(xp, asarray(np.vstack([rows, [bad]])[None]), 1e-8)
        assert not bool(ok), bad


def test_simulate_reports_a_collapse_in_the_attention_sublayer(lib):
    """Identical tokens x attend uniformly, so the attention step gives ``x + h V x``; with
    ``V = -(1 - 1e-10) / h I`` that is ``1e-10 x``, of norm below ``MIN_NORM = 1e-8`` (100x,
    far from rounding): the layer collapses in its attention sub-layer, which both paths name,
    although the normalised token would look like a fine unit vector to the MLP after it."""
    asarray, _, _ = lib
    X0 = np.tile([0.6, 0.8, 0.0], (2, 1))
    h = 0.5
    noise = MLPNoise("tanh", width=4, sigma_W=0.1)
    model = StochasticTransformer(noise, V=-(1 - 1e-10) / h * np.eye(3))
    for X in (X0, asarray(X0)):
        with pytest.raises(FloatingPointError, match=r"zero at layer 1 \(attention\)"):
            simulate(model, X, T=h, L=1, n_paths=1, rng=0)


def test_sphere_start_is_checked_to_the_sphere_tolerance(lib):
    """The start must lie on the unit sphere to ``SPHERE_TOL`` in float64, as on the numpy
    path: rows of norm ``1 + 2 SPHERE_TOL`` are refused and rows of norm
    ``1 + SPHERE_TOL / 2`` accepted (factors of two, far above float64 rounding of a norm)."""
    asarray, _, _ = lib
    X = _sphere((4, 3), 14)
    noise = MLPNoise("tanh", width=4)
    noise.sample(asarray(X * (1 + SPHERE_TOL / 2)), rng=0)
    with pytest.raises(ValueError, match="must lie on the unit sphere"):
        noise.sample(asarray(X * (1 + 2 * SPHERE_TOL)), rng=0)
