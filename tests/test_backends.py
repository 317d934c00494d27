"""The softmax velocity on other array libraries (torch, JAX, array-api-strict) against numpy.

Run by ``make test-backends`` (which installs ``requirements-backends.txt``), not by ``make unit``:
JAX and array-api-strict are required here; torch runs when importable (its CPU wheel is not on
PyPI's default index) and is reported as skipped, with the reason, otherwise.
"""

from __future__ import annotations

import array_api_strict
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from token_dynamics import integrate
from token_dynamics._backend import is_numpy
from token_dynamics.attention import Hardmax, Linear, Softmax
from token_dynamics.attention._array_api import generic_softmax_velocity, softmax_velocity

jax.config.update("jax_enable_x64", True)

LIBRARIES = ["array_api_strict", "jax", "torch"]
EPS32 = float(np.finfo(np.float32).eps)


def _library(name: str):
    """``(asarray, to_numpy, namespace)`` of a library; torch only when importable."""
    if name == "torch":
        torch = pytest.importorskip(
            "torch", reason="torch is not installed (its CPU wheel: see requirements-backends.txt)"
        )
        from array_api_compat import torch as xp

        return torch.asarray, lambda a: a.detach().cpu().numpy(), xp
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
    with pytest.raises(ValueError, match=r"`X` must be a non-empty array of shape \(n, 2\)"):
        Softmax(A, V).velocity(asarray(X[:, :1]))
    with pytest.raises(TypeError, match=r"numpy arrays only so far.*np\.asarray"):
        Hardmax(A, V).velocity(asarray(X))
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
