"""The softmax velocity on other array libraries (torch, JAX, array-api-strict) against numpy.

Run by ``make test-backends`` (which installs ``requirements-backends.txt``), not by ``make unit``:
JAX and array-api-strict are required here; torch runs when importable (its CPU wheel is not on
PyPI's default index) and is reported as skipped, with the reason, otherwise.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import array_api_strict
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from token_dynamics import integrate
from token_dynamics._backend import has_float64, is_numpy, to_numpy
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
    with_positions,
)
from token_dynamics.attention._array_api import (
    BLOCK_ENTRIES,
    TORCH_CPU_BLOCK_ENTRIES,
    generic_softmax_velocity,
    query_blocks,
    softmax_velocity,
)
from token_dynamics.diagnostics import interaction_energy

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
    if hasattr(A_, "requires_grad_"):  # a torch parameter that carries a gradient
        A_.requires_grad_(True)
    out = Softmax(A_, V_, beta=1.3).velocity(asarray(X), weights=asarray(w))
    # the parameters are read once into float64 numpy arrays: the float64 comparison above
    np.testing.assert_allclose(to_numpy(out), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


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


def test_unnormalised_overflow_is_named(lib):
    asarray, _, _ = lib
    X, A, V, _ = _problem(n=10, d=2)
    with pytest.raises(FloatingPointError, match="unnormalised attention velocity left the float"):
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
    with pytest.raises(FloatingPointError, match="left the float range"):
        case.field.velocity(asarray(X))


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
