"""Tests of the fast paths of the attention kernels (threads, folded softmax shift, clamping)
and of the log-domain Sinkhorn solver on problems where plain scaling underflows.

Tolerances. 1e-12 relative against the dense formulas is round-off: each velocity entry is a
ratio of two sums of n <= 1000 positive terms, each one exp of a score computed from d <= 3
products, so a few hundred ulps (2.2e-16) at most; the folded shift moves each exponent by an
error of a few ulps of the scores (|s| <= 1e3 here), which adds |s| * 2.2e-16 <= 1e-13.
An entry of a velocity is a signed sum (V times a weighted mean of tokens), so the round-off is
relative to the largest entry, not to that entry: `assert_rounded` adds atol = RTOL * max|ref|.
Threaded and serial evaluations cut the rows into the same slabs, so they agree to the last bit;
1e-15 leaves room for a BLAS that reorders a sum across calls. No timing is asserted here: speed
lives in `benchmarks/`.
"""

import itertools
import threading
import time
from concurrent.futures import Future

import numpy as np
import pytest
from scipy.special import expit, softmax
from threadpoolctl import ThreadpoolController

from token_dynamics.attention import (
    L2,
    Causal,
    Hardmax,
    Sigmoid,
    Softmax,
    Unnormalised,
    _sigmoid,
    _softmax,
    sinkhorn_plan,
    with_positions,
)
from token_dynamics.attention import _kernels as K_

from .helpers import all_fields, dense_softmax_velocity

RTOL = 1e-12


def assert_rounded(actual, ref):
    """Equal to round-off: RTOL relative to each entry or to the largest one (see above)."""
    ref = np.asarray(ref)
    np.testing.assert_allclose(actual, ref, rtol=RTOL, atol=RTOL * np.abs(ref).max())


def fields(rng, d):
    """Every single-head variant of `test_attention.all_fields` (multi-head is a sum of them)."""
    return {k: f for k, f in all_fields(rng, d).items() if k != "multihead"}


def shifts_without_and_with_hull(monkeypatch, F, G, bias=None):
    """``exact`` of ``softmax_shift`` with the maxima of the slabs (the loose rows), then the
    whole result with the keys' hull allowed at any size (left allowed)."""
    monkeypatch.setattr(_softmax, "HULL_MIN_ENTRIES", 10**18)
    loose = _softmax.softmax_shift(F, G, bias)[1]
    monkeypatch.setattr(_softmax, "HULL_MIN_ENTRIES", 0)
    return loose, _softmax.softmax_shift(F, G, bias)


@pytest.fixture
def threaded(monkeypatch):
    """Many small slabs, always on the pool (two threads even on a one-core runner)."""
    monkeypatch.setattr(K_, "THREADS", 2)
    monkeypatch.setattr(K_, "PARALLEL_MIN_ELEMENTS", 0)
    monkeypatch.setattr(K_, "BLOCK_ELEMENTS", 7 * 257)


@pytest.mark.parametrize("d", [2, 5])  # products of at most 4 columns on the pool; wider not
def test_threaded_equals_serial_for_every_variant(monkeypatch, threaded, d):
    rng = np.random.default_rng(0)
    n = 257
    X = rng.standard_normal((n, d))
    w = rng.dirichlet(np.ones(n))
    for name, field in fields(rng, d).items():
        v2, P2 = field.velocity(X, weights=w), field.attention_matrix(X, weights=w)
        monkeypatch.setattr(K_, "THREADS", 1)
        v1, P1 = field.velocity(X, weights=w), field.attention_matrix(X, weights=w)
        monkeypatch.setattr(K_, "THREADS", 2)
        np.testing.assert_allclose(v2, v1, rtol=1e-15, atol=0, err_msg=name)
        np.testing.assert_allclose(P2, P1, rtol=1e-15, atol=0, err_msg=name)


def test_threaded_blocked_equals_dense(threaded):
    rng = np.random.default_rng(1)
    n, d = 500, 2
    X = rng.standard_normal((n, d))
    A = 2.0 * rng.standard_normal((d, d))
    V = rng.standard_normal((d, d))
    w = rng.dirichlet(np.ones(n))
    ref = dense_softmax_velocity(X, A, V, 2.0, w)
    assert_rounded(Softmax(A, V, 2.0).velocity(X, weights=w), ref)
    # the other exponential and sigmoid kernels, against their formulas
    S = X @ A.T @ X.T
    assert_rounded(Unnormalised(A, V, beta=0.5).velocity(X), (np.exp(0.5 * S) / n) @ X @ V.T)
    assert_rounded(Sigmoid(A, V, b=-0.3).velocity(X), (expit(S - 0.3) / n) @ X @ V.T)
    Qb, Kb = rng.standard_normal((2, 3, d))
    D2 = ((X @ Qb.T)[:, None, :] - (X @ Kb.T)[None, :, :]) ** 2
    P = softmax(-D2.sum(-1) / 1.5, axis=1)
    assert_rounded(L2(Qb, Kb, V, s=1.5).velocity(X), P @ X @ V.T)


def test_velocity_at_query_points_threaded(threaded):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 2))
    Y = 3 * rng.standard_normal((411, 2))
    A, V = rng.standard_normal((2, 2, 2))
    ref = dense_softmax_velocity(X, A, V, 1.0, Y=Y)
    assert_rounded(Softmax(A, V).velocity_at(Y, X), ref)


@pytest.mark.parametrize(
    ("beta", "far", "path"),
    [
        (1.0, 1.0, "folded shift"),  # bounds tight: the shift folded into the score product
        (40.0, 1.0, "clamped"),  # scores spread ~500: some exponents below EXP_FLOOR
        (400.0, 1.0, "exact maximum"),  # Cauchy-Schwarz gap > SHIFT_SLACK: exact row maxima
        (1.0, 30.0, "mixed"),  # a few far tokens: exact rows and folded rows in one call
    ],
)
@pytest.mark.parametrize("block", [7 * 257, 64])
@pytest.mark.parametrize("hull", [False, True])
def test_softmax_paths_agree_with_dense(monkeypatch, threaded, block, hull, beta, far, path):
    """Every branch of the softmax path gives the dense log-sum-exp result to round-off, with
    whole rows per slab and with rows cut into key tiles (``block`` < n keys, as n > 65536),
    the loose rows' maxima found in the scores or from the keys' convex hull."""
    monkeypatch.setattr(K_, "BLOCK_ELEMENTS", block)
    rng = np.random.default_rng(3)
    n, d = 400, 2
    X = rng.standard_normal((n, d))
    X[:5] *= far
    A = np.array([[1.0, 0.4], [-0.3, 0.8]])
    V = rng.standard_normal((d, d))
    F = beta * X @ A.T
    loose, (L, exact, clamp, _) = shifts_without_and_with_hull(monkeypatch, F, X)
    if not hull:  # the maxima of the slabs, here and in the velocity below
        monkeypatch.setattr(_softmax, "HULL_MIN_ENTRIES", 10**18)
        L, exact, clamp, _ = _softmax.softmax_shift(F, X, None)
    if path == "folded shift":
        assert not loose.any() and not clamp.any()
    elif path == "clamped":
        assert clamp.any() and not loose.all()
    elif path == "exact maximum":
        assert loose.mean() > 0.5  # rows with a short query can still use the folded shift
    else:
        assert loose.any() and not loose.all()
    S = F @ X.T
    smax = S.max(axis=1)
    if hull:  # the hull's vertices give the loose rows their maxima: none is left exact
        assert not exact.any()
        # a 2-term score rounds to within 2u |f_i| |x_j| (u = 1.1e-16): two roundings apart
        tol = 4 * np.finfo(float).eps * np.linalg.norm(F, axis=1) * np.linalg.norm(X, axis=1).max()
        assert np.all(np.abs(L[loose] - smax[loose]) <= tol[loose])
    else:
        np.testing.assert_array_equal(exact, loose)
    # the shift is a lower bound on the row maximum (up to the rounding of the products, a
    # few ulps), within SHIFT_SLACK where it is used
    assert np.all(L[~exact] <= smax[~exact] + 1e-13 * np.abs(smax[~exact]))
    assert np.all(smax[~exact] - L[~exact] <= _softmax.SHIFT_SLACK)
    ref = dense_softmax_velocity(X, A, V, beta)
    v = Softmax(A, V, beta).velocity(X)
    # relative to each row's scale: rows are averages of V x_j, O(10) here
    assert_rounded(v, ref)


@pytest.mark.parametrize(
    ("d", "bias", "hull"),
    [(1, False, True), (2, True, True), (3, False, True), (3, True, False), (4, False, False)],
)
def test_hull_vertices_give_exact_maxima_up_to_three_lifted_dimensions(monkeypatch, d, bias, hull):
    """Scores <f_i, g_j> + b_j are linear in the lifted key (g_j, b_j): their maximum over the
    keys is reached at a vertex of the keys' hull, which Qhull finds in up to HULL_MAX_DIM
    dimensions. Wider lifted keys keep the exact maxima of the score slabs."""
    rng = np.random.default_rng(14)
    n = 500
    G = 2.0 + rng.standard_normal((n, d))  # off the origin: |g| is no proxy for <f, g>
    F = 300.0 * rng.standard_normal((n, d))  # Cauchy-Schwarz gaps of hundreds: loose rows
    b = 50.0 * rng.standard_normal(n) if bias else None
    S = F @ G.T + (0.0 if b is None else b)
    loose, (L, exact, clamp, _) = shifts_without_and_with_hull(monkeypatch, F, G, b)
    assert loose.mean() > 0.3  # in one dimension, the rows of negative f_i
    if not hull:
        np.testing.assert_array_equal(exact, loose)
        return
    assert not exact.any() and clamp.any()
    # d + 1 rounded terms per score, each of the two ways: (d + 1) u (|f_i| |g_j| + |b_j|) apart
    size = np.linalg.norm(F, axis=1)[:, None] * np.linalg.norm(G, axis=1)
    tol = 2 * (d + 1) * np.finfo(float).eps * (size + np.abs(0.0 if b is None else b)).max(axis=1)
    np.testing.assert_array_less(np.abs(L - S.max(axis=1))[loose], tol[loose])
    R = np.column_stack([G, np.ones(n)])
    out = K_.apply_rows(F, G, R, _softmax.softmax_transform, bias=b, normalise=True)
    ref = softmax(S, axis=1) @ G
    assert_rounded(out, ref)


def test_flat_keys_keep_the_exact_maxima_of_the_scores(monkeypatch, threaded):
    """Keys on a line of the plane: Qhull refuses them, the loose rows keep their exact maxima
    from the score slabs and the velocity is still the dense one."""
    rng = np.random.default_rng(15)
    n = 300
    X = np.outer(rng.standard_normal(n), [0.6, 0.8]) + np.array([1.0, -2.0])
    A, V = np.array([[1.0, 0.4], [-0.3, 0.8]]), rng.standard_normal((2, 2))
    F = 400.0 * X @ A.T
    loose, (_, exact, _, _) = shifts_without_and_with_hull(monkeypatch, F, X)
    assert exact.mean() > 0.3
    np.testing.assert_array_equal(exact, loose)
    assert_rounded(Softmax(A, V, 400.0).velocity(X), dense_softmax_velocity(X, A, V, 400.0))


@pytest.mark.parametrize("block", [7 * 257, 64])
def test_exact_rows_return_their_maximum_as_shift(monkeypatch, threaded, block):
    """Rows whose bounds are loose are shifted by their exact maximum, found in the slab when
    it holds whole rows (``block`` >= n keys) or in a first pass over the key tiles; the kernel
    returns each row's shift, which the unnormalised kernel puts back."""
    monkeypatch.setattr(K_, "BLOCK_ELEMENTS", block)
    monkeypatch.setattr(_softmax, "HULL_MIN_ENTRIES", 10**18)  # the maxima of the slabs
    rng = np.random.default_rng(3)
    n = 400
    X = rng.standard_normal((n, 2))
    F = 400.0 * X @ np.array([[1.0, 0.4], [-0.3, 0.8]]).T  # scores up to ~4000
    R = np.column_stack([X, np.ones(n)])
    _, exact, _, _ = _softmax.softmax_shift(F, X, None)
    assert exact.mean() > 0.5 and not exact.all()
    out = np.empty((n, 3))
    shift = K_._softmax_rows(F, X, R, None, out)
    S = F @ X.T
    np.testing.assert_allclose(shift[exact], S.max(axis=1)[exact], rtol=1e-14)
    # each exponent carries the rounding of a score, |s| u ~ 4000 * 1.1e-16 = 4.4e-13 times a
    # few operations: relative errors of a few 1e-12 in the terms and their sums
    ref = np.exp(S - shift[:, None]) @ R
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-300)


def test_softmax_extreme_scores_stay_finite_and_exact():
    """Scores spread over 1e5: most terms underflow; the rows are still the dense ones."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((200, 2))
    A, V = np.eye(2), np.eye(2)
    v = Softmax(A, V, beta=3e4).velocity(X)
    ref = dense_softmax_velocity(X, A, V, 3e4)
    assert np.all(np.isfinite(v))
    assert_rounded(v, ref)


@pytest.mark.parametrize("block", [7 * 257, 64])
def test_l2_and_sinkhorn_bias_paths_agree_with_dense(monkeypatch, threaded, block):
    """The key biases (l2's -|K x|^2, Sinkhorn's potential) ride in the folded product."""
    monkeypatch.setattr(K_, "BLOCK_ELEMENTS", block)
    rng = np.random.default_rng(5)
    n, d = 300, 2
    X = rng.standard_normal((n, d))
    F, G, bias = 4 * rng.standard_normal((n, d)), X, 30 * rng.standard_normal(n)
    R = np.column_stack([X, np.ones(n)])
    S = F @ G.T + bias
    P = softmax(S, axis=1)
    ref = P @ X
    out = K_.apply_rows(F, G, R, _softmax.softmax_transform, bias=bias, normalise=True)
    assert_rounded(out, ref)


def test_errors_raised_in_a_worker_reach_the_caller_in_serial_order(threaded):
    """Tasks on the pool that raise: the caller gets the error of the earliest group (the
    serial order), whichever worker finished first."""
    blocks = [slice(i, i + 1) for i in range(16)]

    def task(group: list[slice]) -> None:
        if group[0].start >= 4:  # every group from the second on fails, naming itself
            raise ValueError(f"group at {group[0].start}")

    with pytest.raises(ValueError, match=r"group at 4$"):
        K_._run(task, blocks, 10**9, 1)


def test_the_caller_takes_part_and_each_group_runs_once(monkeypatch, threaded):
    """On the pool the calling thread works too (one pool worker fewer to wake): every group
    runs exactly once, each thread takes its groups in order, the caller some of them."""
    sizes = []
    executor = K_._executor
    monkeypatch.setattr(K_, "_executor", lambda workers: sizes.append(workers) or executor(workers))
    blocks = [slice(i, i + 1) for i in range(16)]
    ran: list[tuple[int, int]] = []

    def task(group: list[slice]) -> None:
        time.sleep(0.005)  # long next to a wake-up: both threads get groups
        ran.append((threading.get_ident(), group[0].start))

    K_._run(task, blocks, 10**9, 1)
    assert sizes == [1]  # THREADS = 2: the caller and one pool worker
    starts = [start for _, start in ran]
    assert sorted(starts) == list(range(0, 16, 2))  # 8 groups of 2 blocks, each once
    for thread in {t for t, _ in ran}:
        mine = [start for t, start in ran if t == thread]
        assert mine == sorted(mine)
    assert threading.get_ident() in {t for t, _ in ran}


def test_a_task_may_run_kernels_on_the_pool_itself(threaded):
    """Nested use of the pool (a task that evaluates a field) finishes: the inner call's helper,
    queued behind the worker that waits on it, is cancelled once the inner caller has done
    every group."""
    rng = np.random.default_rng(16)
    X = rng.standard_normal((200, 2))
    field = Softmax(np.eye(2), np.eye(2))
    ref = field.velocity(X)
    results: dict[int, np.ndarray] = {}

    def task(group: list[slice]) -> None:
        for block in group:
            results[block.start] = field.velocity(X)

    blocks = [slice(i, i + 1) for i in range(4)]
    runner = threading.Thread(target=K_._run, args=(task, blocks, 10**9, 1), daemon=True)
    runner.start()
    runner.join(timeout=60)
    assert not runner.is_alive()
    assert sorted(results) == [0, 1, 2, 3]
    for v in results.values():
        np.testing.assert_array_equal(v, ref)


def test_scratch_buffers_are_kept_per_thread_and_never_shared():
    """A thread gets its scratch buffer back on its next use (no fresh mapping per call), a
    larger request or another dtype gets a buffer of its own, and so does a nested use."""
    with K_.scratch(100, np.float64) as a:
        with K_.scratch(10, np.float64) as nested:
            assert not np.shares_memory(a, nested)
        assert a.size >= 100 and a.dtype == np.float64
    with K_.scratch(50, np.float64) as again:
        assert again is a
    with K_.scratch(50, np.float32) as single:
        assert single.dtype == np.float32 and not np.shares_memory(single, a)
    with K_.scratch(1000, np.float64) as larger:
        assert larger.size >= 1000
    seen: list[np.ndarray] = []

    def other_thread() -> None:
        with K_.scratch(1000, np.float64) as b:
            seen.append(b)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert not np.shares_memory(seen[0], larger)


def test_causal_query_that_sees_no_token_is_named(threaded):
    """Causal attention: a query that sees no token raises, naming the first such query."""
    rng = np.random.default_rng(6)
    n = 300
    X = with_positions(rng.standard_normal((n, 2)), positions=np.arange(n) / n)
    w = np.ones(n)
    w[:120] = 0.0  # queries 0..119 see no token of positive weight
    w /= w.sum()
    with pytest.raises(ValueError, match="query 0 "):
        Causal(np.eye(2), np.eye(2)).velocity(X, weights=w)


def test_parallel_threshold_keeps_small_problems_on_the_caller(monkeypatch):
    calls = []
    monkeypatch.setattr(K_, "_executor", lambda workers: calls.append(workers))
    monkeypatch.setattr(K_, "THREADS", 2)
    X = np.random.default_rng(7).standard_normal((64, 2))
    Softmax(np.eye(2), np.eye(2)).velocity(X)  # 64^2 << PARALLEL_MIN_ELEMENTS
    assert calls == []


@pytest.mark.parametrize("spread", [100, 200])
@pytest.mark.parametrize("symmetric", [True, False])
def test_sinkhorn_small_eps_where_plain_scaling_underflows(spread, symmetric):
    """eps = 0.1 with scores spread over 100 to 200 eps: e^(S/eps) spans e^200, so plain
    scaling loses whole rows to underflow once multiplied by its scalings; the log-domain
    solver converges to a 1e-9 marginal error."""
    rng = np.random.default_rng(8)
    n, eps = 120, 0.1
    X = rng.standard_normal((n, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    A = np.array([[1.0, 0.3], [0.3, 0.6]]) if symmetric else np.array([[1.0, 0.7], [-0.2, 0.6]])
    S = X @ A.T @ X.T
    S *= spread * eps / np.ptp(S)
    res = sinkhorn_plan(S, eps, tol=1e-9, max_iter=20_000)
    assert res.converged
    a = np.full(n, 1 / n)
    # marginals recomputed here from the returned plan (1e-9 target; sums of n terms add
    # n * 2.2e-16 of rounding)
    assert np.abs(res.plan.sum(axis=1) - a).sum() <= 1e-9 + 1e-13
    assert np.abs(res.plan.sum(axis=0) - a).sum() <= 1e-9 + 1e-13
    # Gibbs form: log plan = (f_i + g_j + S_ij)/eps + log a_i b_j wherever the plan is normal
    logp = np.log(res.plan, where=res.plan > 1e-300, out=np.full_like(S, np.nan))
    model = (res.f[:, None] + res.g[None, :] + S) / eps + 2 * np.log(a)
    ok = np.isfinite(logp)
    np.testing.assert_allclose(logp[ok], model[ok], rtol=0, atol=1e-9)
    # plain scaling: the kernel itself spans e^(spread), so its row sums reach e^(spread/2)
    # and beyond; with spread 200 the scaled plan is inexact or not finite
    with np.errstate(all="ignore"):
        K = np.exp(S / eps)
    assert np.ptp(np.log(K[K > 0])) > 0.9 * spread


@pytest.mark.parametrize(("value", "expected"), [("", 2), ("1", 1), (" 3 ", 3)])
def test_threads_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("TOKEN_DYNAMICS_THREADS", value)
    assert K_._threads_from_env(2) == expected


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_bad_threads_setting_is_named(monkeypatch, value):
    monkeypatch.setenv("TOKEN_DYNAMICS_THREADS", value)
    with pytest.raises(ValueError, match="TOKEN_DYNAMICS_THREADS must be a positive integer"):
        K_._threads_from_env(2)


def test_kernels_share_their_work_out_with_blas_on_one_thread(monkeypatch):
    """Every kernel above PARALLEL_MIN_ELEMENTS shares its slabs or tiles out to the pool,
    whatever the width of its products, and BLAS runs on one thread while the pool works (and
    while the field is evaluated); BLAS gets its threads back afterwards."""
    blas = ThreadpoolController().select(user_api="blas")
    threads_seen = []

    class Recording(_Inline):
        def submit(self, fn, *args):
            threads_seen.append(max(i["num_threads"] for i in blas.info()))
            return super().submit(fn, *args)

    monkeypatch.setattr(K_, "_executor", lambda workers: Recording())
    monkeypatch.setattr(K_, "THREADS", 2)
    monkeypatch.setattr(K_, "PARALLEL_MIN_ELEMENTS", 0)
    rng = np.random.default_rng(10)
    with blas.limit(limits=2):  # BLAS on two threads, even where the environment pins one
        for d, field, method in [
            (K_.SKINNY_INNER + 1, Unnormalised, "attention_matrix"),
            (2, Unnormalised, "attention_matrix"),
            (K_.SKINNY_INNER + 1, Unnormalised, "velocity"),
            (16, Softmax, "velocity"),
            (16, Sigmoid, "velocity"),
            (16, Hardmax, "attention_matrix"),
        ]:
            threads_seen.clear()
            X = rng.standard_normal((600, d)) / np.sqrt(d)
            getattr(field(np.eye(d), np.eye(d)), method)(X)
            assert threads_seen and set(threads_seen) == {1}, (d, field, method)
            assert max(i["num_threads"] for i in blas.info()) == 2


def test_serial_blas_nests_and_restores_the_outermost_limit():
    """Nested (and concurrent) holds share one limit, lifted when the last one leaves."""
    blas = ThreadpoolController().select(user_api="blas")

    def threads():
        return max(i["num_threads"] for i in blas.info())

    with blas.limit(limits=2):
        with K_.serial_blas():
            with K_.serial_blas():
                assert threads() == 1
            assert threads() == 1
        assert threads() == 2
        with pytest.raises(ZeroDivisionError), K_.serial_blas():
            1 / 0  # noqa: B018
        assert threads() == 2


def test_wide_tiles_agree_with_dense_after_sharing(monkeypatch):
    """d = 16 tiles shared out: the softmax and unnormalised kernels equal the dense formulas."""
    monkeypatch.setattr(K_, "_executor", lambda workers: _Inline())
    monkeypatch.setattr(K_, "THREADS", 2)
    monkeypatch.setattr(K_, "PARALLEL_MIN_ELEMENTS", 0)
    X = np.random.default_rng(10).standard_normal((300, 16)) / 4
    assert_rounded(
        Softmax(np.eye(16), np.eye(16)).velocity(X),
        dense_softmax_velocity(X, np.eye(16), np.eye(16), 1.0),
    )
    # the unnormalised kernel on the same tiles, its row shifts put back: sum_j e^(s_ij) x_j / n
    # (scores of size ~1: round-off of sums of 300 terms)
    S = X @ X.T
    ref = np.exp(S) @ X / len(X)
    np.testing.assert_allclose(
        Unnormalised(np.eye(16), np.eye(16)).velocity(X), ref, rtol=1e-12, atol=1e-14
    )


@pytest.mark.parametrize("n_rows", [1, 300, 16384, 100_000])
@pytest.mark.parametrize("n_cols", [1, 257, 16384, 100_000])
@pytest.mark.parametrize("inner", [3, 4, 5, 18, 66, 1000])
def test_tiles_cover_the_scores_once_in_cache_sized_tiles(n_rows, n_cols, inner):
    """Row blocks and key tiles partition the score matrix; wide tiles take TILE_KEYS keys and
    fill BLOCK_ELEMENTS entries (twice as many beyond TALL_INNER inner columns), and no tile
    holds more (bounded memory per worker)."""
    rows, cols = K_.tiles(n_rows, n_cols, inner)
    for parts, total in ((rows, n_rows), (cols, n_cols)):
        assert parts[0].start == 0 and parts[-1].stop == total
        assert all(p.stop == q.start for p, q in itertools.pairwise(parts))
        assert all(p.stop > p.start for p in parts)
    fill = (2 if inner > K_.TALL_INNER else 1) * K_.BLOCK_ELEMENTS
    entries = (rows[0].stop - rows[0].start) * (cols[0].stop - cols[0].start)
    assert entries <= max(fill, n_cols if n_cols <= K_.BLOCK_ELEMENTS else 0)
    if inner > K_.SKINNY_INNER:
        keys = min(n_cols, K_.TILE_KEYS)
        assert cols[0].stop - cols[0].start == keys
        assert rows[0].stop - rows[0].start == min(n_rows, fill // keys)


@pytest.mark.parametrize(("beta", "far"), [(1.0, 1.0), (250.0, 1.0), (400.0, 1.0), (1.0, 30.0)])
def test_wide_tiles_agree_with_dense_on_every_path(monkeypatch, threaded, beta, far):
    """d = 16 in many small tiles (several key tiles per row block, shared out to the pool):
    unshifted, folded, clamped, exact and mixed rows of the softmax, and the sigmoid, against
    the dense formulas. Same round-off argument as above, with d = 16 products per score."""
    monkeypatch.setattr(K_, "TILE_KEYS", 29)  # 46 x 29 tiles (d = 16: tall, twice the rows)
    monkeypatch.setattr(K_, "BLOCK_ELEMENTS", 23 * 29)
    rng = np.random.default_rng(13)
    n, d = 301, 16
    X = rng.standard_normal((n, d)) / 4
    X[:5] *= far
    A = np.eye(d) + 0.3 * rng.standard_normal((d, d)) / 4
    V = rng.standard_normal((d, d))
    F = beta * X @ A.T
    L, exact, clamp, unshifted = _softmax.softmax_shift(F, X, None)
    assert unshifted == (beta == 1.0 and far == 1.0)
    # rows whose Cauchy-Schwarz bound keeps every score within the slack are not probed (no
    # shift); the others' shift is a score of the row, so at most its maximum
    bound = np.linalg.norm(F, axis=1) * np.linalg.norm(X, axis=1).max()
    assert np.all(L[bound <= _softmax.SHIFT_SLACK] == 0.0)
    best = (F @ X.T).max(axis=1)[~exact]
    assert np.all(L[~exact] <= best + 1e-12 * np.abs(best))  # round-off of d = 16 products
    if beta == 250.0:
        assert clamp.any() and not exact.all()
    elif beta == 400.0:
        assert exact.mean() > 0.5
    elif far > 1.0:
        assert exact.any() and not exact.all()
    assert_rounded(Softmax(A, V, beta).velocity(X), dense_softmax_velocity(X, A, V, beta))
    S = X @ A.T @ X.T
    ref = (expit(beta * S - 1.0) / n) @ X @ V.T
    assert_rounded(Sigmoid(beta * A, V, b=-1.0).velocity(X), ref)


class _Inline:
    """Stand-in executor that runs each task at once, on the calling thread."""

    def submit(self, fn, *args):
        future = Future()
        future.set_result(fn(*args))
        return future


def dense_hardmax(X, A, V, w, tol):
    S = X @ A.T @ X.T
    m = S.max(axis=1, keepdims=True)
    P = (S >= m - tol * np.maximum(1.0, np.abs(m))) * w
    return (P / P.sum(axis=1, keepdims=True)) @ X @ V.T, S, m


@pytest.mark.parametrize("block", [7 * 257, 64])
def test_hardmax_gathers_single_best_keys_and_shares_ties(monkeypatch, block):
    """The argmax path (one best key, its row gathered) and the tie path (indicator product)
    in one call give the formula's average; duplicated tokens make exact ties."""
    monkeypatch.setattr(K_, "BLOCK_ELEMENTS", block)
    rng = np.random.default_rng(11)
    n, d, tol = 300, 2, 1e-9
    X = rng.standard_normal((n, d))
    X[n // 2 :] = X[: n - n // 2]  # every key twice: rows whose best key is duplicated tie
    X[:40] = rng.standard_normal((40, d))  # ... except for these forty
    A, V = rng.standard_normal((2, d, d))
    w = rng.dirichlet(np.ones(n))
    ref, S, m = dense_hardmax(X, A, V, w, tol)
    n_best = (S >= m - tol * np.maximum(1.0, np.abs(m))).sum(axis=1)
    assert np.any(n_best == 1) and np.any(n_best == 2)
    v = Hardmax(A, V, tol=tol).velocity(X, weights=w)
    assert_rounded(v, ref)


@pytest.mark.parametrize("block", [7 * 257, 64])
@pytest.mark.parametrize(("scale", "far"), [(1.0, 1.0), (300.0, 1.0), (1.0, 40.0)])
def test_sigmoid_rows_agree_with_expit_on_every_path(monkeypatch, threaded, block, scale, far):
    """Tight bounds (exp straight away), scores beyond +-700 (expit slabs and clamps), and a
    few far tokens (both kinds of slab in one call) against ``expit(S + b) @ X V^T / n``."""
    monkeypatch.setattr(K_, "BLOCK_ELEMENTS", block)
    rng = np.random.default_rng(12)
    n, d, b = 400, 2, -0.3
    X = rng.standard_normal((n, d))
    X[:5] *= far
    A = scale * np.array([[1.0, 0.4], [-0.3, 0.8]])
    V = rng.standard_normal((d, d))
    S = X @ A.T @ X.T + b
    if scale > 1 or far > 1:
        assert np.abs(S).max() > _sigmoid.SIGMOID_EXP_MAX
    ref = (expit(S) / n) @ X @ V.T
    v = Sigmoid(A, V, b=b).velocity(X)
    assert_rounded(v, ref)


@pytest.mark.parametrize("b", [0.0, -0.3, 5.0])
def test_sigmoid_transform_matches_expit(b):
    """The exp-based sigmoid equals scipy's expit to a few ulps (1 exp, 1 add, 1 reciprocal:
    about 3 roundings, 2.2e-16 each), exactly 1 above x = 37, and defers to expit on slabs
    reaching below -700 (subnormal tail)."""
    rng = np.random.default_rng(9)
    x = np.concatenate([np.linspace(-699.0, 800.0, 20000), 20 * rng.standard_normal(20000)])
    y = _sigmoid.sigmoid_transform(x.reshape(40, -1).copy(), b).ravel()
    np.testing.assert_allclose(y, expit(x + b), rtol=1e-15, atol=0)
    assert np.all(y[x + b > 37] == 1.0)
    tail = np.linspace(-800.0, 0.0, 1001)
    np.testing.assert_array_equal(_sigmoid.sigmoid_transform(tail.copy(), b), expit(tail + b))
