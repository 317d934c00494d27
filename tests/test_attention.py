"""Tests of token_dynamics.attention: oracles, invariants, numerics, errors.

Tolerances. Unless a comment says otherwise, a tolerance between 1e-15 and 1e-12 (relative)
is round-off: machine epsilon (2.2e-16) times the few dozen operations behind each entry
(a product of small matrices, one exp, one division). Sinkhorn quantities are exact only to the
solver's marginal tolerance, and integrated quantities to the scheme's h^p; both are derived
where they appear.
"""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.linalg import expm
from scipy.special import expit, softmax

from token_dynamics import attention as att
from token_dynamics.attention import (
    L2,
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
    make_field,
    sinkhorn_plan,
    with_positions,
)
from token_dynamics.integrators import integrate

from .helpers import all_fields, dense_scores, dense_softmax_velocity, random_params

# Round-off of one velocity evaluation: a few hundred ulps of the O(1) quantities involved
# (sums of n <= 64 products, one exp and one division per weight).
RTOL_ROUNDOFF = 1e-12


def tol_for(name):
    # Sinkhorn is exact only up to its marginal tolerance (1e-9 in l1): the potentials, hence the
    # velocities, are known to about that accuracy; the other variants to round-off.
    return 1e-8 if name == "sinkhorn" else RTOL_ROUNDOFF


@pytest.mark.statement("tok-prop-equivariance")
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 9), d=st.integers(1, 4))
def test_permutation_equivariance_of_every_variant(seed, n, d):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    perm = rng.permutation(n)
    for name, field in all_fields(rng, d).items():
        v, vp = field.velocity(X), field.velocity(X[perm])
        scale = max(1.0, np.abs(v).max())
        np.testing.assert_allclose(vp, v[perm], rtol=0, atol=tol_for(name) * scale, err_msg=name)
    # causal attention is equivariant when tokens move together with their positions
    A, V = random_params(rng, d)
    Xs = np.column_stack([rng.permutation(n) / n, X])
    field = Causal(A, V, beta=1.2)
    np.testing.assert_allclose(
        field.velocity(Xs[perm]), field.velocity(Xs)[perm], rtol=0, atol=RTOL_ROUNDOFF * 10
    )


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 9), d=st.integers(1, 4))
def test_attention_matrix_reproduces_velocity_and_rows_sum_to_one(seed, n, d):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.dirichlet(np.ones(n))
    for name, field in all_fields(rng, d).items():
        if name == "multihead":
            continue
        P = field.attention_matrix(X, weights=w)
        V = field.V
        scale = max(1.0, np.abs(P @ X @ V.T).max())
        np.testing.assert_allclose(
            field.velocity(X, weights=w), P @ X @ V.T, rtol=0, atol=tol_for(name) * scale
        )
        assert np.all(P >= 0) or name == "linear"
        if name in {"softmax", "hardmax", "l2", "sinkhorn"}:
            # rows are normalised by construction: one division, round-off only
            np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-14 * n)


@pytest.mark.statement("tok-prop-empirical-solution")
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 7), d=st.integers(1, 3))
def test_mean_field_consistency_duplicated_tokens(seed, n, d):
    """The field depends on the tokens only through their empirical measure."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X2 = np.concatenate([X, X])
    counts = rng.integers(1, 4, size=n)
    Xc = np.repeat(X, counts, axis=0)
    w = counts / counts.sum()
    for name, field in all_fields(rng, d).items():
        v = field.velocity(X)
        scale = max(1.0, np.abs(v).max())
        np.testing.assert_allclose(
            field.velocity(X2)[:n], v, rtol=0, atol=tol_for(name) * scale, err_msg=name
        )
        # integer multiplicities == weights of the measure
        vw = field.velocity(X, weights=w)
        np.testing.assert_allclose(
            field.velocity(Xc), np.repeat(vw, counts, axis=0), rtol=0, atol=tol_for(name) * scale
        )


def test_zero_scores_give_value_of_the_mean():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((11, 3))
    _, V = random_params(rng, 3)
    v = Softmax(np.zeros((3, 3)), V, beta=5.0).velocity(X)
    np.testing.assert_allclose(v, np.tile(V @ X.mean(axis=0), (11, 1)), rtol=RTOL_ROUNDOFF)


@pytest.mark.parametrize("block", [1, 7, 64, 10**9])
def test_blocked_equals_dense(monkeypatch, block):
    """Every row-block size gives the dense result (1e-12 relative, round-off)."""
    rng = np.random.default_rng(1)
    n, d = 300, 2
    X = rng.standard_normal((n, d))
    A, V = random_params(rng, d, scale=2.0)
    w = rng.dirichlet(np.ones(n))
    monkeypatch.setattr(att._kernels, "BLOCK_ELEMENTS", block * n)
    ref = dense_softmax_velocity(X, A, V, 2.0, w)
    np.testing.assert_allclose(Softmax(A, V, 2.0).velocity(X, weights=w), ref, rtol=1e-12)
    P = softmax(2.0 * dense_scores(X, A) + np.log(w), axis=1)
    np.testing.assert_allclose(Softmax(A, V, 2.0).attention_matrix(X, weights=w), P, rtol=1e-12)
    # the other score-based kernels go through the same blocks
    for field in all_fields(rng, d).values():
        monkeypatch.setattr(att._kernels, "BLOCK_ELEMENTS", 10**9)
        dense = field.velocity(X)
        monkeypatch.setattr(att._kernels, "BLOCK_ELEMENTS", block * n)
        np.testing.assert_allclose(field.velocity(X), dense, rtol=1e-12, atol=1e-13)


def test_large_n_runs_in_bounded_memory():
    """n = 10^4 in d = 2: a dense score matrix alone takes 800 MB; the blocks stay < 128 MiB.

    The peak is a few slabs of 8 * BLOCK_ELEMENTS bytes plus O(n d): n = 10^5 is the same code
    path (100x the work, so not run here; measured once: 39 MiB traced peak, rows equal to the
    dense formula to 2e-15) and stays well under 1 GiB.
    """
    rng = np.random.default_rng(2)
    n = 10_000
    X = rng.standard_normal((n, 2))
    field = Softmax(np.eye(2), np.eye(2))
    tracemalloc.start()
    v = field.velocity(X)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 128 * 2**20
    assert peak < 4 * 8 * att.BLOCK_ELEMENTS + 200 * n  # slab temporaries + O(n d) arrays
    # spot-check rows against the dense formula on those rows
    idx = rng.choice(n, 5, replace=False)
    P = softmax(X[idx] @ X.T, axis=1)
    np.testing.assert_allclose(v[idx], P @ X, rtol=1e-12)


def test_softmax_is_finite_and_correct_at_large_beta_and_norms():
    """beta = 1e3, |x| = 1e3: scores ~ 1e9 differ by O(1); a naive exp overflows."""
    beta = 1e3
    A = np.diag([1.0, 0.0])
    X = np.array([[1e3, 0.0], [1e3 + 1e-6, 5.0]])
    field = Softmax(A, np.eye(2), beta)
    P = field.attention_matrix(X)
    # beta (s_12 - s_11) = beta * 1e3 * 1e-6 = 1, so P_12 = expit(1); the scores (~1e6) are
    # rounded at 1e-10 and multiplied by beta: an absolute error ~2e-7 in the exponent
    p = expit(1.0)
    np.testing.assert_allclose(P[0], [1 - p, p], rtol=1e-6)
    assert np.all(np.isfinite(field.velocity(X)))
    # large norms without large beta as well
    X = 1e3 * np.random.default_rng(3).standard_normal((20, 2))
    v = Softmax(np.eye(2), np.eye(2), beta).velocity(X)
    assert np.all(np.isfinite(v))
    np.testing.assert_allclose(v, Hardmax(np.eye(2), np.eye(2)).velocity(X), rtol=1e-12)


@pytest.mark.statement("tok-prop-hardmax-limit")
def test_softmax_tends_to_hardmax_with_the_bound():
    """|SA_beta(x_i) - SA_hard(x_i)| <= sharp bound <= 2 n |V| max|x| exp(-beta gap_i), ties
    included."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((6, 2))
    X = np.concatenate([X, X[:2]])  # exact duplicates: tied maximisers
    n = X.shape[0]
    A, V = random_params(rng, 2)
    S = dense_scores(X, A)
    gaps = np.array([np.diff(np.unique(row))[-1] for row in S])  # best minus second-best
    R = np.linalg.norm(X, axis=1).max()
    hard = Hardmax(A, V).velocity(X)
    # the sharp bound |V|/c sum_{j not in M} exp(-beta (s* - s_j)) |x_j - mean(x_M)|, capped
    # by |V| max_j |x_j - mean(x_M)|: M the c maximisers of row i (duplicates tie exactly)
    top = S.max(axis=1, keepdims=True)
    tied = S == top
    c = tied.sum(axis=1)
    centre = (tied @ X) / c[:, None]
    dist = np.linalg.norm(X[None, :, :] - centre[:, None, :], axis=2)
    normV = np.linalg.norm(V, 2)
    errors = []
    for beta in [1.0, 4.0, 16.0, 64.0, 256.0]:
        err = np.linalg.norm(Softmax(A, V, beta).velocity(X) - hard, axis=1)
        bound = 2 * n * normV * R * np.exp(-beta * gaps)
        weighted = np.where(tied, 0.0, np.exp(-beta * (top - S)) * dist).sum(axis=1) / c
        sharp = normV * np.minimum(weighted, dist.max(axis=1))
        assert np.all(err <= sharp + 1e-13)  # the bound, plus round-off of two evaluations
        assert np.all(sharp <= bound)  # the sharp bound implies the crude one
        errors.append(err.max())
    assert np.all(np.diff(errors) < 0) and errors[-1] < 1e-13  # exp(-256 * 0.16) ~ 1e-18


@pytest.mark.statement("tok-prop-hardmax-limit")
def test_softmax_equals_hardmax_when_every_score_ties():
    """A query with every score tied (M_i = all keys) has error 0 at every beta, no gap needed."""
    v = np.array([1.0, 0.0])
    A = np.outer(v, v)  # scores <v, x_i><v, x_j>: the whole row of a query with <v, x_i> = 0 is 0
    V = np.array([[0.3, -1.2], [0.8, 0.5]])
    X = np.array([[0.0, 1.0], [1.0, 2.0], [-2.0, 0.5], [0.5, -1.0], [3.0, 0.0]])
    hard = Hardmax(A, V).velocity(X)[0]
    np.testing.assert_allclose(hard, V @ X.mean(axis=0), rtol=0, atol=1e-15)
    for beta in [1.0, 16.0, 256.0]:
        soft = Softmax(A, V, beta).velocity(X)[0]
        # both are V times the plain mean of the keys: equal up to the rounding of two
        # summation orders, a few ulps of |V| max|x| ~ 5
        np.testing.assert_allclose(soft, hard, rtol=0, atol=1e-14)


def test_hardmax_shares_ties_equally():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    P = Hardmax(np.eye(2), np.eye(2)).attention_matrix(X)
    np.testing.assert_array_equal(P[1], [0, 1 / 3, 1 / 3, 1 / 3])
    P = Hardmax(np.eye(2), np.eye(2)).attention_matrix(X, weights=[0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(P[1], [0, 2 / 9, 3 / 9, 4 / 9], rtol=1e-15)


def test_sinkhorn_plan_is_doubly_stochastic_and_symmetric():
    rng = np.random.default_rng(5)
    n, d = 40, 3
    X = rng.standard_normal((n, d))
    B = rng.standard_normal((d, d))
    A = B + B.T  # symmetric scores
    field = Sinkhorn(A, np.eye(d), eps=0.5)
    res = field.plan(X)
    assert res.converged and res.marginal_error <= field.tol
    # each marginal entry deviates by at most the reported l1 error
    np.testing.assert_allclose(res.plan.sum(axis=1), 1 / n, rtol=0, atol=res.marginal_error)
    np.testing.assert_allclose(res.plan.sum(axis=0), 1 / n, rtol=0, atol=res.marginal_error)
    P = field.attention_matrix(X)
    np.testing.assert_allclose(P.sum(axis=0), 1.0, rtol=0, atol=n * res.marginal_error)
    # A = A^T: the (unique) plan is symmetric; the symmetric solver keeps it so exactly
    np.testing.assert_array_equal(res.plan, res.plan.T)


def test_sinkhorn_log_domain_survives_a_wide_cost_spread():
    """eps = 0.1 and scores spread over 150 eps: exp(-S/eps) would span 1e65, still converges."""
    rng = np.random.default_rng(6)
    S = 15.0 * rng.random((50, 50))
    res = sinkhorn_plan(S, 0.1, tol=1e-9, max_iter=10_000)
    assert res.converged and np.all(np.isfinite(res.plan))
    np.testing.assert_allclose(res.plan.sum(axis=0), 1 / 50, rtol=0, atol=1e-9)
    # the dual potentials satisfy the first-order conditions
    log_plan = (res.f[:, None] + res.g[None, :] + S) / 0.1 + 2 * np.log(1 / 50)
    with np.errstate(under="ignore"):
        np.testing.assert_allclose(np.exp(log_plan), res.plan, rtol=1e-12, atol=0)


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_sinkhorn_plan_matches_pot(symmetric, eps):
    """Cross-implementation: POT's log-domain Sinkhorn (the spec's reference) on the cost -S."""
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(18)
    X = rng.standard_normal((25, 2)) / 2
    B = rng.standard_normal((2, 2))
    A = B + B.T if symmetric else B
    S = dense_scores(X, A)
    res = sinkhorn_plan(S, eps, tol=1e-12, max_iter=20_000)
    u = np.full(25, 1 / 25)
    ref = ot.sinkhorn(u, u, -S, reg=eps, method="sinkhorn_log", stopThr=1e-13, numItermax=50_000)
    assert res.converged
    # both solve the same strictly convex problem to marginal errors ~1e-12; the plans agree
    # to that accuracy times the conditioning of the dual (mild at these eps)
    np.testing.assert_allclose(res.plan, ref, rtol=0, atol=1e-10)


def test_sinkhorn_symmetric_solver_is_fast_at_small_eps():
    """eps = 0.1 on 60 Gaussian tokens with A = I: near-permutation plan; converges quickly."""
    X = np.random.default_rng(19).standard_normal((60, 2))
    res = Sinkhorn(np.eye(2), np.eye(2), eps=0.1).plan(X)
    assert res.converged and res.n_iter < 200
    np.testing.assert_allclose(res.plan.sum(axis=0), 1 / 60, rtol=0, atol=res.marginal_error)


def test_sinkhorn_non_convergence_is_reported():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((10, 2))
    S = dense_scores(X, 3 * np.eye(2))
    res = sinkhorn_plan(S, 0.05, tol=1e-12, max_iter=2)
    assert not res.converged and res.n_iter == 2 and res.marginal_error > 1e-12
    with pytest.warns(SinkhornConvergenceWarning, match="did not converge"):
        Sinkhorn(3 * np.eye(2), np.eye(2), eps=0.05, tol=1e-12, max_iter=2).velocity(X)
    with pytest.raises(SinkhornConvergenceError, match="max_iter"):
        Sinkhorn(3 * np.eye(2), np.eye(2), eps=0.05, tol=1e-12, max_iter=2, strict=True).velocity(X)


def test_velocity_at_extends_the_field():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((12, 2))
    Y = rng.standard_normal((5, 2))
    for name, field in all_fields(rng, 2).items():
        np.testing.assert_allclose(field.velocity_at(X, X), field.velocity(X), rtol=1e-13)
        # a query point of zero weight does not change the field at the others
        w = np.concatenate([np.full(12, 1 / 12), np.zeros(5)])
        XY = np.concatenate([X, Y])
        np.testing.assert_allclose(
            field.velocity(XY, weights=w), field.velocity_at(XY, X), rtol=1e-12, atol=1e-12,
            err_msg=name,
        )  # fmt: skip


def test_linear_closed_form_and_sigmoid_value():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((8, 3))
    A, V = random_params(rng, 3)
    M2 = X.T @ X / 8
    np.testing.assert_allclose(Linear(A, V).velocity(X), X @ A.T @ M2 @ V.T, rtol=1e-12)
    P = expit(dense_scores(X, A) + 0.5) / 8
    np.testing.assert_allclose(Sigmoid(A, V, b=0.5).attention_matrix(X), P, rtol=1e-13)


def test_unnormalised_overflow_is_reported():
    X = np.array([[30.0, 0.0], [0.0, 1.0]])
    with pytest.raises(FloatingPointError, match="overflowed"):
        Unnormalised(np.eye(2), np.eye(2), beta=1.0).velocity(X)


def test_l2_matches_its_formula():
    rng = np.random.default_rng(10)
    X = rng.standard_normal((9, 2))
    Qb, Kb = rng.standard_normal((2, 3, 2))
    D2 = ((X @ Qb.T)[:, None, :] - (X @ Kb.T)[None, :, :]) ** 2
    P = softmax(-D2.sum(-1) / 0.7, axis=1)
    np.testing.assert_allclose(L2(Qb, Kb, np.eye(2), s=0.7).attention_matrix(X), P, rtol=1e-12)


def test_multihead_one_head_and_linearity():
    rng = np.random.default_rng(11)
    X = rng.standard_normal((7, 4))
    Q, K, V = rng.standard_normal((3, 4, 4))
    one = MultiHead.from_qkv(Q, K, V, 1).velocity(X)
    np.testing.assert_allclose(one, Softmax.from_qk(Q, K, V).velocity(X), rtol=1e-13)
    two = MultiHead.from_qkv(Q, K, V, 2)
    parts = [
        Softmax.from_qk(Q[r], K[r], np.eye(4)[:, r] @ V[r]).velocity(X)
        for r in (slice(0, 2), slice(2, 4))
    ]
    np.testing.assert_allclose(two.velocity(X), parts[0] + parts[1], rtol=1e-12)
    assert two.attention_matrices(X).shape == (2, 7, 7)
    with pytest.raises(TypeError, match="attention_matrices"):
        two.attention_matrix(X)


def test_time_dependent_parameters():
    rng = np.random.default_rng(12)
    X = rng.standard_normal((6, 2))
    A0, V0 = random_params(rng, 2)
    field = Softmax(lambda t: (1 + t) * A0, lambda t: np.cos(t) * V0)
    for t in (0.0, 0.3, 2.0):
        const = Softmax((1 + t) * A0, np.cos(t) * V0)
        np.testing.assert_array_equal(field.velocity(X, t), const.velocity(X))
        np.testing.assert_array_equal(field(t, X), const.velocity(X))
    Q = lambda t: np.eye(2) * (1 + t)  # noqa: E731
    f = Softmax.from_qk(Q, np.eye(2), np.eye(2))
    np.testing.assert_allclose(
        f.velocity(X, 1.0), Softmax(np.eye(2) * 2 / np.sqrt(2), np.eye(2)).velocity(X)
    )
    with pytest.raises(ValueError, match=r"`A\(t=0.5\)`"):
        Softmax(lambda t: np.eye(3), np.eye(2)).velocity(X, 0.5)


@pytest.mark.statement("tok-prop-causal")
def test_causal_never_sees_the_future_and_first_token_is_linear():
    rng = np.random.default_rng(13)
    n, d = 8, 2
    A, V = random_params(rng, d)
    X0 = with_positions(rng.standard_normal((n, d)))
    field = Causal(A, V, beta=2.0)
    P = field.attention_matrix(X0)
    np.testing.assert_array_equal(np.triu(P, 1), 0.0)
    times = np.linspace(0, 1, 11)
    traj = integrate(field, X0, times, method="rk4", dt=0.01)
    X1 = X0.copy()
    X1[-1, 1:] += 0.7
    traj1 = integrate(field, X1, times, method="rk4", dt=0.01)
    np.testing.assert_array_equal(traj1.states[:, :-1], traj.states[:, :-1])  # bitwise
    assert np.all(traj.states[:, :, 0] == X0[:, 0])  # positions never move
    # token 1 sees only itself: x_1(t) = expm(t V) x_1(0); RK4 with h = 0.01: error ~ h^4 = 1e-8
    for t, Xt in zip(times, traj.states, strict=True):
        np.testing.assert_allclose(Xt[0, 1:], expm(t * V) @ X0[0, 1:], rtol=0, atol=1e-8)


@pytest.mark.statement("tok-prop-causal")
def test_attention_sink_block_evolves_autonomously():
    rng = np.random.default_rng(14)
    A, V = random_params(rng, 2)
    X = with_positions(rng.standard_normal((9, 2)), n_sink=3)
    field = Causal(A, V, sink=True)
    P = field.attention_matrix(X)
    assert np.all(P[:, :3] > 0)  # every query sees the sink
    v = field.velocity(X)
    np.testing.assert_allclose(v[:3, 1:], Softmax(A, V).velocity(X[:3, 1:]), rtol=1e-13)
    with pytest.raises(ValueError, match="position 0"):
        Causal(A, V, sink=True).velocity(with_positions(X[:, 1:], positions=np.linspace(0.1, 1, 9)))


def test_make_field_builds_every_variant():
    X = np.random.default_rng(15).standard_normal((5, 2))
    for name in att.VARIANTS:
        assert make_field(name, 2, beta=2.0).velocity(X).shape == (5, 2)
    with pytest.raises(ValueError, match="`variant`"):
        make_field("cosine", 2)


def test_inputs_are_not_mutated():
    rng = np.random.default_rng(16)
    X = rng.standard_normal((6, 2))
    w = rng.dirichlet(np.ones(6))
    A, V = random_params(rng, 2)
    copies = [a.copy() for a in (X, w, A, V)]
    for field in [*all_fields(rng, 2).values(), Softmax(A, V)]:
        field.velocity(X, weights=w)
    Softmax(A, V).attention_matrix(X, weights=w)
    for a, c in zip((X, w, A, V), copies, strict=True):
        np.testing.assert_array_equal(a, c)
    assert A.flags.writeable  # the field stores its own read-only copy
    assert not Softmax(A, V).A.flags.writeable


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: Softmax(np.eye(2), np.eye(2)).velocity(np.ones(3)), "`X`"),
        (lambda: Softmax(np.eye(2), np.eye(2)).velocity(np.ones((3, 3))), "`X`"),
        (lambda: Softmax(np.eye(2), np.eye(2)).velocity([[np.nan, 0.0]]), "`X`"),
        (lambda: Softmax(np.ones((2, 3)), np.eye(2)), "`A`"),
        (lambda: Softmax(np.eye(2), np.eye(3)), "`A` and `V`"),
        (lambda: Softmax(np.eye(2), np.eye(2), beta=np.inf), "`beta`"),
        (lambda: Softmax(np.eye(2), np.eye(2)).velocity(np.ones((2, 2)), t=np.nan), "`t`"),
        (
            lambda: Softmax(np.eye(2), np.eye(2)).velocity(np.ones((2, 2)), weights=[1, 1]),
            "`weights`",
        ),
        (lambda: Hardmax(np.eye(2), np.eye(2), tol=-1.0), "`tol`"),
        (lambda: L2(np.eye(2), np.eye(2), np.eye(2), s=0.0), "`s`"),
        (lambda: L2(np.eye(2), np.ones((3, 3)), np.eye(2)).velocity(np.ones((2, 2))), "`Kbar`"),
        (lambda: Sinkhorn(np.eye(2), np.eye(2), eps=0.0), "`eps`"),
        (lambda: Sinkhorn(np.eye(2), np.eye(2), max_iter=0), "`max_iter`"),
        (lambda: sinkhorn_plan(np.ones(3), 1.0), "`S`"),
        (lambda: sinkhorn_plan(np.ones((2, 2)), 1.0, a=[0.5, 0.6]), "`a`"),
        (lambda: Causal(np.eye(2), np.eye(2)).velocity(np.ones((2, 3)) * 2), r"`X\[:, 0\]`"),
        (lambda: Causal(np.eye(2), np.eye(2)).velocity(np.ones((2, 2))), "`X`"),
        (lambda: MultiHead(()), "`heads`"),
        (lambda: MultiHead((Softmax(np.eye(2), np.eye(2)),), W=(np.eye(2),) * 2), "`W`"),
        (lambda: MultiHead.from_qkv(np.eye(3), np.eye(3), np.eye(3), 2), "`n_heads`"),
        (lambda: with_positions(np.ones((2, 2)), positions=[0.0, 2.0]), "`positions`"),
        (lambda: with_positions(np.ones((2, 2)), n_sink=3), "`n_sink`"),
    ],
)
def test_bad_inputs_raise_named_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.statement("tok-prop-empirical-solution")
def test_weighted_flow_equals_flow_of_repeated_tokens():
    """The particle flow depends only on the measure: weights 1/6, 2/6, 3/6 = repeated tokens."""
    rng = np.random.default_rng(17)
    X0 = rng.standard_normal((3, 2))
    A, V = random_params(rng, 2)
    field = Softmax(A, V, beta=1.3)
    counts = np.array([1, 2, 3])
    times = np.linspace(0, 1, 5)
    weighted = integrate(field.with_weights(counts / 6), X0, times, dt=0.01)
    repeated = integrate(field, np.repeat(X0, counts, axis=0), times, dt=0.01)
    # same arithmetic up to the order of summation: round-off accumulated over 100 RK4 steps
    np.testing.assert_allclose(
        np.repeat(weighted.states, counts, axis=1), repeated.states, rtol=0, atol=1e-12
    )
    with pytest.raises(ValueError, match="`weights`"):
        field.with_weights([0.5, 0.6])


def test_softmax_weights_is_the_fields_softmax():
    # The one softmax of the library gives the Softmax field's attention matrix (rows sum to
    # one, key weights enter as log-weights); both are sums of n = 5 positive terms, so they
    # agree to a few ulps.
    from token_dynamics.attention import Softmax, softmax_weights

    rng = np.random.default_rng(3)
    X, A = rng.normal(size=(5, 2)), rng.normal(size=(2, 2))
    w = rng.dirichlet(np.ones(5))
    P = softmax_weights(2.0 * X @ A.T @ X.T, log_weights=np.log(w))
    np.testing.assert_allclose(
        P, Softmax(A, np.eye(2), beta=2.0).attention_matrix(X, weights=w), rtol=1e-13
    )
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-15 * 5)
    # scores of size 1e300 do not overflow: the largest logit of each row is subtracted first
    big = softmax_weights(np.array([[1e300, 1e300 - 1e285], [-1e300, 0.0]]))
    np.testing.assert_array_equal(big, [[1.0, 0.0], [0.0, 1.0]])


def test_softmax_key_weight_below_the_exp_floor_gets_exact_attention():
    """Issue 15, defect 10: a key of weight 1e-303 gets attention w e^s / sum (about 1e-303),
    not the O(1) share of a clamped exponent; the log-weights enter before any floor."""
    from token_dynamics.attention import softmax_weights

    P = softmax_weights(np.array([[0.0, 0.0]]), log_weights=np.log([1e-303, 1.0]))
    np.testing.assert_allclose(P, [[1e-303, 1.0]], rtol=1e-12)
    P = softmax_weights(np.array([[700.0, 0.0]]), log_weights=np.log([1e-303, 1.0]))
    r = np.exp(700.0 + np.log(1e-303))  # e^700 * 1e-303 against 1
    np.testing.assert_allclose(P, [[r / (1 + r), 1 / (1 + r)]], rtol=1e-12)
