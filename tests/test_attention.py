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
    SINKHORN_MAX_ITER,
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


def test_sinkhorn_plan_with_a_massless_token_raises_no_numpy_warning():
    """A zero weight in a symmetric problem whose first update overflows (scores of 1e3 eps):
    the log-sum-exp iterations took ``0 * expm1(inf)`` for the massless entry, and numpy's
    overflow and invalid-value warnings escaped (errors under this suite's filterwarnings),
    against the failure policy. The massless entry now adds nothing to the marginal error: the
    plan is that of the problem without it, to the tolerance."""
    X = np.random.default_rng(3).standard_normal((6, 2))
    S = 10.0 * X @ X.T
    a = np.array([0.0, 0.2, 0.2, 0.2, 0.2, 0.2])
    res = sinkhorn_plan(S, 0.01, a=a, b=a)
    ref = sinkhorn_plan(S[1:, 1:], 0.01)
    assert res.converged and res.marginal_error <= 1e-9
    np.testing.assert_array_equal(res.plan[0], 0.0)
    # both plans meet the l1 tolerance 1e-9 on the same marginals of a strictly convex problem
    np.testing.assert_allclose(res.plan[1:, 1:], ref.plan, rtol=0, atol=1e-8)
    # the alternating iterations (a != b), same massless entries: no warning either
    alt = sinkhorn_plan(S, 0.01, a=a, b=a[::-1].copy(), max_iter=10)
    assert np.isfinite(alt.marginal_error)


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_sinkhorn_plan_matches_pot(symmetric, eps):
    """Cross-implementation: POT's log-domain Sinkhorn on the cost -S (POT is a dependency of the
    library: its absence is an error here, not a skip)."""
    import ot

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


def test_sinkhorn_symmetric_solver_keeps_pace_with_the_alternating_one():
    """Issue 15, item 11: on 2 tokens at eps = 0.1 whose plan is nearly anti-diagonal (each
    token avoids itself), the averaged symmetric update contracts by (1 - lambda_min) / 2 ~
    0.995 per update and missed 1e-9 after 1000 iterations where the alternating one converges
    in ~750. Relaxed, it contracts as fast per matrix-vector product as the alternating one, so
    their iteration counts (two products each) agree up to the few iterations it takes to read
    the rate (10 %)."""
    S = np.array([[-0.395, 0.2977], [0.2977, -0.0498]])
    res = sinkhorn_plan(S, 0.1)  # symmetric: the relaxed symmetric update
    alt = sinkhorn_plan(S + np.array([[0.0, 1e-9], [0.0, 0.0]]), 0.1)  # alternating updates
    assert alt.converged and 500 < alt.n_iter < SINKHORN_MAX_ITER
    assert res.converged and res.n_iter <= 1.1 * alt.n_iter
    assert res.marginal_error <= 1e-9
    np.testing.assert_array_equal(res.plan, res.plan.T)
    # the same plan: the problems differ by 1e-9 in one score (1e-8 after division by eps)
    np.testing.assert_allclose(res.plan, alt.plan, rtol=0, atol=1e-8)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's own overflow warnings
def test_a_velocity_that_leaves_the_float_range_is_reported():
    """beta or a parameter beyond the float32 range (1e39) made the float32 queries or values
    infinite, and the softmax, sigmoid, l2 and multi-head velocities came out NaN, the hardmax
    one -inf, with numpy's warnings only: now a FloatingPointError that offers float64, where
    the same fields compute them (the variants rescale large scores); in float64, values of
    2e308 are reported too, without that offer."""
    I2 = np.eye(2)
    X = np.random.default_rng(0).standard_normal((5, 2))
    X32 = X.astype(np.float32)
    fields = [
        Softmax(I2, I2, beta=1e39),
        Softmax(I2 * 1e39, I2),
        Softmax(I2, I2 * 1e39),
        Sigmoid(I2, I2 * 1e39),
        Hardmax(I2, I2 * 1e39),
        L2(I2, I2, I2 * 1e39),
        MultiHead([Softmax(I2, I2 * 1e39)]),
    ]
    for field in fields:
        with pytest.raises(FloatingPointError, match=r"velocity in float32 left the float range"):
            field.velocity(X32)
        with pytest.raises(FloatingPointError, match=r'dtype="float64"'):
            field.velocity_at(X32[:2], X32)
        assert np.all(np.isfinite(field.velocity(X)))  # float64 computes it
    with pytest.raises(FloatingPointError, match=r"in float64 left the float range; [^`]*\.$"):
        Softmax(I2, I2 * 1e308).velocity(X * 2)  # values beyond 1.8e308


def test_sinkhorn_relaxation_is_given_up_when_the_error_grows_tenfold():
    """Errors that stall (ratios 1 - 1e-16) set the relaxation theta ~ 1; an error that then
    reaches ten times its value when the relaxation began returns it to 1/2 for good, even
    without rising steadily (it swung over 200 orders of magnitude on torch's rounding)."""
    from token_dynamics.attention._sinkhorn_scaling import RELAX_WINDOW, _Relaxation

    relax = _Relaxation()
    for k in range(RELAX_WINDOW + 1):
        theta = relax.update(0.72 * (1 - 1e-16) ** k)
    assert relax.state == "relaxed" and theta == pytest.approx(1.0)
    for err in (0.5, 3.0, 0.1, 7.0):  # up and down, below ten times 0.72: kept
        assert relax.update(err) == theta
    assert relax.update(7.3) == 0.5 and relax.state == "fixed"
    assert relax.update(1e-3) == 0.5  # for good
    contracting = _Relaxation()
    for k in range(3 * RELAX_WINDOW):  # a rate read in the linear regime stays relaxed
        theta = contracting.update(0.9**k)
    assert contracting.state == "relaxed" and theta == pytest.approx(1 / 1.1)


@pytest.mark.parametrize("symmetric", [True, False])
def test_sinkhorn_streamed_kernel_gives_the_stored_kernel_iterates(monkeypatch, symmetric):
    """Beyond the memory budget the kernel is recomputed block by block with the same
    elementwise operations as the stored one: the same iterates, the same plan, to the bit
    (an absorption included: scores spread over 200 eps)."""
    from token_dynamics.attention import _sinkhorn_scaling as scaling

    rng = np.random.default_rng(20)
    n = 300  # several row blocks of BLOCK_ELEMENTS
    X = rng.standard_normal((n, 2))
    A = np.array([[1.0, 0.3], [0.3, 0.6]]) if symmetric else np.array([[1.0, 0.7], [-0.2, 0.6]])
    S = dense_scores(X, A)
    S *= 200 * 0.1 / np.ptp(S)
    stored = sinkhorn_plan(S, 0.1, max_iter=20_000)
    monkeypatch.setattr(scaling, "KERNEL_MEMORY_BUDGET", 0)
    streamed = sinkhorn_plan(S, 0.1, max_iter=20_000)
    assert stored.converged and streamed.n_iter == stored.n_iter
    np.testing.assert_array_equal(streamed.f, stored.f)
    # the plan: the stored kernel scaled in place, or rebuilt at the final potentials (exp of
    # a sum that differs by rounding: relative 1e-13 on entries of exponent up to ~200)
    np.testing.assert_allclose(streamed.plan, stored.plan, rtol=1e-12, atol=0)


def test_sinkhorn_scores_near_the_float64_limit():
    """Fuzz case `S | max`: a score of 1e308 among scores of 1 is a finite problem (no warning);
    the plan sends the first token's whole mass to itself. Divided by eps < 1 it overflows:
    a FloatingPointError naming the quotient, not an inf."""
    S = np.ones((3, 3))
    S[0, 0] = 1e308
    res = sinkhorn_plan(S, 1.0)
    assert res.converged and res.marginal_error <= 1e-9
    np.testing.assert_allclose(res.plan[0], [1 / 3, 0, 0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.plan[1:, 1:], 1 / 6, rtol=0, atol=1e-9)
    with pytest.raises(FloatingPointError, match="divided by `eps`"):
        sinkhorn_plan(S, 0.1)


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
    with pytest.raises(ValueError, match="`variant` must be one of"):  # not a hashing error
        make_field(["softmax"], 2)
    for name in ("l2", "sinkhorn"):  # 1/beta = inf: named as `beta`, not as `eps` or `s`
        with pytest.raises(ValueError, match="`beta` = 1e-320 makes the"):
            make_field(name, 2, beta=1e-320)


def test_overflowing_scores_are_named_with_the_fix():
    X = np.random.default_rng(0).standard_normal((5, 2))
    with pytest.raises(FloatingPointError, match=r"Sinkhorn scores .* left the float range"):
        att.Sinkhorn(np.eye(2), np.eye(2)).velocity(X * 1e160)
    # the unnormalised weights: the limit of the dtype computed in, 88 in float32
    with pytest.raises(FloatingPointError, match=r"float32 range \(beta \* score > ~89\)"):
        att.Unnormalised(np.eye(2), np.eye(2), beta=50.0).velocity(3 * X, dtype="float32")


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
        (lambda: L2(np.ones((2, 4)), np.ones((2, 4)), np.eye(3)), r"and `V` \(d, d\)"),
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


@pytest.mark.statement("tok-prop-hardmax-limit")
def test_hardmax_limit_errors_lie_below_both_bounds():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((7, 2))
    X = np.concatenate([X, X[:2]])  # exact duplicates: tied maximisers
    A, V = random_params(rng, 2)
    betas = [1.0, 4.0, 16.0, 64.0, 256.0]
    limit = att.hardmax_limit(A, V, X, betas)
    S = dense_scores(X, A)
    # the margins: best minus second-best distinct score, read off the sorted rows
    gaps = np.array([np.diff(np.unique(row))[-1] for row in S])
    # (the reference scores are summed in another order: a few ulps of max|s| ~ 5 apart)
    np.testing.assert_allclose(limit.gap, gaps, rtol=0, atol=1e-14)
    np.testing.assert_allclose(limit.radius, np.linalg.norm(X, axis=1).max(), rtol=1e-15)
    np.testing.assert_allclose(limit.trivial_bound, 2 * np.linalg.norm(V, 2) * limit.radius)
    # the error is the softmax-hardmax distance itself (the same evaluations: to rounding)
    hard = Hardmax(A, V).velocity(X)
    for k, beta in enumerate(betas):
        soft = Softmax(A, V, beta).velocity(X)
        np.testing.assert_allclose(limit.error[k], np.linalg.norm(soft - hard, axis=1))
    # the chain of the proposition, with round-off of two evaluations (1e-13) on the first
    assert np.all(limit.error <= limit.sharp_bound + 1e-13)
    assert np.all(limit.sharp_bound <= limit.crude_bound)
    assert np.all(limit.sharp_bound <= limit.trivial_bound)
    # the crude bound is 2 n |V| R exp(-beta gap): halving |V| halves every bound
    half = att.hardmax_limit(A, 0.5 * V, X, betas)
    np.testing.assert_allclose(half.crude_bound, 0.5 * limit.crude_bound, rtol=1e-14)
    np.testing.assert_allclose(half.sharp_bound, 0.5 * limit.sharp_bound, rtol=1e-14)


@pytest.mark.statement("tok-prop-hardmax-limit")
def test_hardmax_limit_keeps_the_ties_that_rounding_splits():
    """Tokens at the vertices of a regular hexagon and A the rotation by pi/6: each query lies
    halfway between two keys, whose scores tie at cos(pi/6), and the next ones score
    cos(pi/2), so every gap is cos(pi/6) - cos(pi/2). Rounding splits some ties by an ulp;
    the hardmax still averages the two keys (its relative tol, 1e-9), and so must the bounds:
    the old exact test gave those rows one maximiser and a gap of 1e-16, hence a crude bound of
    2 n |V| R, the trivial one, at every beta. The gap is a difference of cosines rounded to a
    few ulps (1e-15); the error stays under the sharp bound up to rounding (1e-13)."""
    n = 6
    theta = 2 * np.pi * np.arange(n) / n
    X = np.column_stack([np.cos(theta), np.sin(theta)])
    c, s = np.cos(np.pi / n), np.sin(np.pi / n)
    A = np.array([[c, -s], [s, c]])
    limit = att.hardmax_limit(A, np.eye(2), X, [1.0, 10.0, 100.0])
    np.testing.assert_allclose(limit.gap, np.cos(np.pi / n) - np.cos(3 * np.pi / n), atol=1e-15)
    assert np.all(limit.error <= limit.sharp_bound + 1e-13)
    assert np.all(limit.sharp_bound <= limit.crude_bound)
    assert limit.crude_bound[-1].max() < 1e-30  # 2 n R e^(-100 gap), gap = 0.87


def test_hardmax_limit_with_all_scores_tied_and_bad_betas():
    # A = 0: every score ties, the error and both bounds vanish, the gap is infinite
    X = np.array([[0.0, 1.0], [1.0, 2.0], [-2.0, 0.5]])
    limit = att.hardmax_limit(np.zeros((2, 2)), np.eye(2), X, [1.0, 100.0])
    assert np.all(np.isinf(limit.gap))
    np.testing.assert_allclose(limit.error, 0.0, atol=1e-15)  # both are the plain mean
    np.testing.assert_array_equal(limit.crude_bound, 0.0)
    np.testing.assert_array_equal(limit.sharp_bound, 0.0)
    with pytest.raises(ValueError, match="`betas` must be positive"):
        att.hardmax_limit(np.eye(2), np.eye(2), X, [0.0, 1.0])
    with pytest.raises(ValueError, match="`X`"):
        att.hardmax_limit(np.eye(3), np.eye(3), X, [1.0])


@pytest.mark.statement("tok-prop-equivariance")
def test_measure_symmetry_separates_the_measure_fields_from_the_others():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((7, 2))
    A, V = random_params(rng, 2)
    # the exact unmasked variants: rounding, relative to the size of the velocities (1e-12)
    for field in (Softmax(A, V), Linear(A, V), Hardmax(A, V), Unnormalised(A, V)):
        sym = att.measure_symmetry(field, X, rng=0)
        scale = max(1.0, np.abs(field.velocity(X)).max())
        assert sym.permutation_error < 1e-12 * scale, (field, sym)
        assert sym.duplication_error < 1e-12 * scale, (field, sym)
    # a causal field with the positions attached as a coordinate: permuting the tokens
    # permutes their positions too, and the velocities follow (rounding)
    causal = att.measure_symmetry(Causal(A, V), with_positions(X), rng=0)
    assert causal.permutation_error < 1e-12
    with pytest.raises(TypeError, match="`field`"):
        att.measure_symmetry(lambda t, X: X, X)


# --- softmax_weights at its public entry (issue 15: named errors, -inf allowed) -------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"scores": [[0.0, np.nan]]}, ValueError, "`scores` contains NaN or \\+inf"),
        ({"scores": [[0.0, np.inf]]}, ValueError, "`scores` contains NaN or \\+inf"),
        ({"scores": [["a", "b"]]}, TypeError, "`scores` must be a real array-like"),
        ({"scores": [[0.0, 1.0], [2.0]]}, TypeError, "`scores` must be a real array-like"),
        ({"scores": None}, TypeError, "`scores` must be a real array-like"),
        ({"scores": 1.0}, ValueError, "`scores` must be a non-empty array"),
        ({"scores": [[0.0, -np.inf]], "log_weights": [-np.inf, 0.0]}, ValueError, "finite logit"),
        ({"log_weights": [0.0, np.nan, 0.0]}, ValueError, "`log_weights` contains NaN"),
        ({"log_weights": [0.0, 0.0]}, ValueError, "`log_weights` of shape \\(2,\\)"),
        ({"log_weights": [[0.0], [0.0], [0.0]]}, ValueError, "`log_weights` of shape \\(3, 1\\)"),
        ({"log_weights": np.zeros(0)}, ValueError, "`log_weights` of shape \\(0,\\)"),
        ({"axis": 0.0}, TypeError, "`axis` must be an integer"),
        ({"axis": True}, TypeError, "`axis` must be an integer"),
        ({"axis": "1"}, TypeError, "`axis` must be an integer"),
        ({"axis": 2}, ValueError, "`axis` = 2 is out of range"),
        ({"axis": -3}, ValueError, "`axis` = -3 is out of range"),
        ({"normalise": 1}, ValueError, "`normalise` must be True or False"),
        ({"out": np.zeros((3, 2))}, ValueError, "`out` must be a float64 ndarray of shape"),
        ({"scores": [[1e308, 0, 0]], "log_weights": [1e308, 0, 0]}, FloatingPointError, "logits"),
    ],
)
def test_softmax_weights_refuses_bad_arguments_by_name(kwargs, error, match):
    from token_dynamics.attention import softmax_weights

    args = {"scores": np.array([[0.3, -0.2, 1.0], [0.1, 0.5, -2.0]])} | kwargs
    with pytest.raises(error, match=match):
        softmax_weights(**args)


def test_softmax_weights_masks_with_minus_inf_and_leaves_its_input_alone():
    # -inf is a masked key (weight exactly 0) or the log of a zero weight; the other weights
    # are the softmax of the rest, to round-off; the input array is not modified, any axis
    from token_dynamics.attention import softmax_weights

    S = np.array([[0.0, -np.inf, np.log(3.0)], [1.0, 1.0, -np.inf]])
    copy = S.copy()
    P = softmax_weights(S, log_weights=np.log([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(P, [[0.25, 0.0, 0.75], [0.5, 0.5, 0.0]], rtol=1e-15)
    np.testing.assert_array_equal(S, copy)
    np.testing.assert_allclose(softmax_weights(S.T, axis=0), P.T, rtol=1e-15)
    out = np.empty_like(S)
    assert softmax_weights(S, out=out) is out
    np.testing.assert_allclose(out, P, rtol=1e-15)


def test_softmax_weights_of_scores_spread_beyond_the_float_range_warn_of_nothing():
    """Finite scores of +-1e308 lie further apart than the largest float: the shifted score
    -1e308 - 1e308 is -inf, whose weight e^-inf = 0 is exact (the true one, e^-2e308, is 0 in
    float64 too). No overflow is left in the result, so none is reported (it warned
    'overflow encountered in subtract', an error under this suite's filterwarnings)."""
    S = np.array([[1e308, 1e308, -1e308], [0.0, -1.7e308, 1.7e308]])
    np.testing.assert_array_equal(att.softmax_weights(S), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])


# --- overflow-safe velocities at token norms ~1e155 (issue 15, defect 5) ----------------------

# Scores of tokens of norm c = 2**520 (1e156) are about c**2, beyond float64; the kernels
# rescale the factors by powers of two (exact). At that scale every gap between two distinct
# scores times beta is far beyond 745, so the softmax weights are exactly the hardmax ones
# (e^-gap is 0 in float64) and the velocity divided by c is the hardmax velocity of the
# unscaled tokens, to round-off of the O(1) quantities (RTOL_VEL).
HUGE = 2.0**520


def _separated_tokens(n=6, d=3, seed=11):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(d, d)), rng.normal(size=(d, d))


@pytest.mark.parametrize("scale", [HUGE, 2.0**1000])
def test_softmax_at_huge_norms_is_the_hardmax_limit(scale):
    X, A, V = _separated_tokens()
    hard = Hardmax(A, V).velocity(X)
    soft = Softmax(A, V).velocity(X * scale)
    np.testing.assert_allclose(soft / scale, hard, rtol=1e-14, atol=1e-14 * np.abs(hard).max())
    P = Softmax(A, V).attention_matrix(X * scale)
    np.testing.assert_array_equal(P, Hardmax(A, V).attention_matrix(X))
    # the hardmax itself is scale-free: the same tie sets at any scale
    np.testing.assert_allclose(Hardmax(A, V).velocity(X * scale) / scale, hard, rtol=1e-14)
    np.testing.assert_array_equal(
        Hardmax(A, V).attention_matrix(X * scale), Hardmax(A, V).attention_matrix(X)
    )


def test_softmax_at_huge_norms_in_float32():
    # float32 overflows from 3.4e38: tokens of norm 2**70 (1e21) have scores 1e42
    X, A, V = _separated_tokens()
    c = np.float32(2.0**70)
    X32, A32, V32 = (M.astype(np.float32) for M in (X, A, V))
    soft = Softmax(A32, V32).velocity(X32 * c)
    assert soft.dtype == np.float32
    hard = Hardmax(A32, V32).velocity(X32)
    np.testing.assert_allclose(soft / c, hard, rtol=1e-5, atol=1e-5 * np.abs(hard).max())


def test_huge_norm_variants_finite_or_named():
    X, A, V = _separated_tokens()
    Y = X * HUGE
    # causal: the hardmax over the visible keys
    Yp = with_positions(Y)
    soft = Causal(A, V).velocity(Yp)[:, 1:] / HUGE
    P = Causal(A, V).attention_matrix(Yp)
    assert set(np.unique(P)) <= {0.0, 1.0}
    np.testing.assert_allclose(soft, P @ X @ V.T, rtol=1e-14, atol=1e-14)
    np.testing.assert_array_equal(np.tril(P), P)  # still causal
    # multi-head: the sum of its heads' velocities
    heads = MultiHead((Softmax(A, V), Softmax(A.T, V)))
    np.testing.assert_allclose(
        heads.velocity(Y),
        Softmax(A, V).velocity(Y) + Softmax(A.T, V).velocity(Y),
        rtol=1e-15,
    )
    # L2 with Qbar = Kbar = I: each query's nearest key is itself, so the velocity is V x_i
    I3 = np.eye(3)
    np.testing.assert_allclose(L2(I3, I3, V).velocity(Y) / HUGE, X @ V.T, rtol=1e-13, atol=1e-13)
    # sigmoid of scores of size 1e312 is 1 or 0: the field is the mean of V x_j over s_ij > 0
    S = X @ A.T @ X.T
    ref = ((S > 0) / len(X)) @ X @ V.T
    np.testing.assert_allclose(Sigmoid(A, V).velocity(Y) / HUGE, ref, rtol=1e-14, atol=1e-14)
    # no finite answer: the unnormalised weights e^(s_ij) and the cubic linear field overflow
    with pytest.raises(FloatingPointError, match="Unnormalised attention overflowed"):
        Unnormalised(A, V).velocity(Y)
    with pytest.raises(FloatingPointError, match="linear attention velocity"):
        Linear(A, V).velocity(Y)


# --- bounded memory of the other kernels (issue 20, item 1) -----------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Hardmax(np.eye(2), np.eye(2)),
        lambda: Unnormalised(np.eye(2), np.eye(2), beta=0.1),
        lambda: Sigmoid(np.eye(2), np.eye(2)),
        lambda: Causal(np.eye(2), np.eye(2)),
    ],
    ids=["hardmax", "unnormalised", "sigmoid", "causal"],
)
def test_other_kernels_memory_is_bounded(make):
    # as for the softmax: n = 10^4 tokens (a dense score matrix would be 800 MB); the extra
    # memory is a few slabs of BLOCK_ELEMENTS scores (one per worker, with its masks) plus
    # O(n d) arrays, whatever n: the softmax's bound, its 200 n bytes for tokens of 2 columns
    # read as 100 bytes (about a dozen float64 copies) per entry of X (causal tokens carry a
    # third column, their position)
    rng = np.random.default_rng(5)
    n = 10_000
    field = make()
    X = rng.standard_normal((n, 2))
    if isinstance(field, Causal):
        X = with_positions(X)
    tracemalloc.start()
    v = field.velocity(X)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert np.all(np.isfinite(v))
    assert peak < 4 * 8 * att.BLOCK_ELEMENTS + 100 * X.size


def test_hardmax_rows_longer_than_a_slab_use_key_tiles(monkeypatch):
    # slabs of 16 scores: rows of 50 keys are cut into tiles of 4 keys (a first pass for each
    # row's maximum, a second for the tie sums); with duplicated tokens (exact ties) the result
    # is the dense tie-set average, to the round-off of sums of at most 50 terms
    rng = np.random.default_rng(8)
    X = rng.standard_normal((25, 3))
    X = np.concatenate([X, X[:25]])
    A, V = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    S = X @ A.T @ X.T
    m = S.max(axis=1, keepdims=True)
    tied = S >= m - 1e-9 * np.maximum(1.0, np.abs(m))
    ref = (tied / tied.sum(axis=1, keepdims=True)) @ X @ V.T
    monkeypatch.setattr(att._kernels, "BLOCK_ELEMENTS", 16)
    np.testing.assert_allclose(Hardmax(A, V).velocity(X), ref, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("block", [7, 64, 10**6])
def test_causal_prefix_slabs_match_the_dense_masked_softmax(monkeypatch, block):
    # keys sorted by position, queries in blocks of at most `block` scores (7: fewer than a
    # row; 10**6: one slab): the masked softmax P_ij ~ w_j e^(beta s_ij) 1{p_j <= p_i} of
    # unsorted, partly equal positions and partly zero weights, to round-off of sums of n terms
    rng = np.random.default_rng(21)
    n, d, beta = 40, 3, 1.5
    A, V = random_params(rng, d)
    pos = rng.integers(0, 12, size=n) / 12.0
    pos[5] = 0.0  # a sink, of positive weight: every query sees a token
    X = with_positions(rng.standard_normal((n, d)), positions=pos)
    w = rng.dirichlet(np.ones(n))
    w[rng.choice(np.flatnonzero(pos > 0), 6, replace=False)] = 0.0
    w /= w.sum()
    S = beta * X[:, 1:] @ A.T @ X[:, 1:].T
    K = w * np.exp(S - S.max(axis=1, keepdims=True)) * (pos[None, :] <= pos[:, None])
    P = K / K.sum(axis=1, keepdims=True)
    monkeypatch.setattr(att._kernels, "BLOCK_ELEMENTS", block)
    field = Causal(A, V, beta=beta)
    np.testing.assert_allclose(field.attention_matrix(X, weights=w), P, rtol=1e-13, atol=1e-16)
    v = field.velocity(X, weights=w)
    np.testing.assert_array_equal(v[:, 0], 0.0)
    np.testing.assert_allclose(v[:, 1:], P @ X[:, 1:] @ V.T, rtol=1e-12, atol=1e-14)


# Key weights swept over the float64 range: 0.1 down to 1e-308 (the smallest normal: 2.2e-308).
KEY_WEIGHTS = np.concatenate([10.0 ** -np.arange(1, 308, 19), [1e-308]])


def _spread_fields(d):
    """One field of each variant that takes key weights, with scores spread over thousands of
    e-folds (so that the kernels shift and clamp their exponentials)."""
    A, V = 400.0 * np.eye(d), np.eye(d)
    return {
        "softmax": Softmax(A, V),
        "unnormalised": Unnormalised(A, V, beta=1.6 / d),  # e^640 at most: no overflow
        "l2": L2(np.eye(d), np.eye(d), V, s=0.002),
        "hardmax": Hardmax(A, V),
        "sigmoid": Sigmoid(A, V, b=-30.0),
        "multihead": MultiHead((Softmax(A, V), L2(np.eye(d), np.eye(d), V, s=0.002))),
        "causal": Causal(A[1:, 1:], V[1:, 1:]),
        "sinkhorn": Sinkhorn(np.eye(d), V, eps=1 / 400),
    }


@pytest.mark.parametrize(
    "name, n, d",
    [
        (name, n, d)
        for name in ("softmax", "unnormalised", "l2", "hardmax", "sigmoid", "multihead", "causal")
        # a few keys; the keys' hull giving the shifts (n^2 >= HULL_MIN_ENTRIES); wide tiles
        for n, d in ((7, 3), (600, 3), (300, 16))
    ]
    + [("sinkhorn", 7, 3)],  # its plan, at eps = 1/400, is solved for these weights too
)
def test_key_weights_over_the_float64_range_agree_with_the_attention_matrix(name, n, d):
    """Issue 28, item 3: the velocity is ``P @ (X V^T)`` with ``P`` the attention matrix for key
    weights from 1 down to 1e-308 on the query's best key; before, a weight below e^-700 of the
    others lost to their clamped exponentials (velocity 0.9 where the exact value was 1e-127).
    Both are also checked against the one softmax with the weights as log-weights.

    Tolerance: the normalised velocities are convex combinations of the values ``V x_j``, so
    their round-off is a few hundred ulps of ``max |V x_j|`` (RTOL_ROUNDOFF); the unnormalised
    ones (unnormalised, sigmoid) of ``sum_j P_ij |V x_j|``, the size of the sum."""
    rng = np.random.default_rng(28)
    X = rng.uniform(-1.0, 0.0, size=(n, d))
    X[0] = 1.0  # the best key of query 0, all others 1200 e-folds (l2: 1500) below it
    if name == "causal":
        X[:, 0] = np.linspace(0.0, 1.0, n)  # token 0 first in position: every query sees it
    field = _spread_fields(d)[name]
    V = X @ np.eye(d).T if name != "causal" else X[:, 1:]
    for w0 in KEY_WEIGHTS:
        w = np.full(n, (1.0 - w0) / (n - 1))
        w[0] = w0
        v = field.velocity(X, weights=w)
        if name == "multihead":  # the heads add up (W = identity)
            P = field.attention_matrices(X, weights=w).sum(axis=0)
        else:
            P = field.attention_matrix(X, weights=w)
        vP = P @ V
        if name == "causal":
            v = v[:, 1:]
        if name in ("unnormalised", "sigmoid"):  # each row at the size of its own sum
            scale = (np.abs(P) @ np.abs(V)).max(axis=1, keepdims=True)
        else:
            scale = np.abs(V).max()
        worst = float(np.max(np.abs(v - vP) / scale))
        assert worst <= RTOL_ROUNDOFF, f"w0 = {w0:g}: error {worst:.3g} of the values' size"
        if name == "softmax":
            ref = att.softmax_weights(400.0 * X @ X.T, log_weights=np.log(w))
            np.testing.assert_allclose(P, ref, rtol=0, atol=RTOL_ROUNDOFF)


@pytest.mark.parametrize("w0", [1e-20, 1e-308])
def test_small_weights_times_small_values_keep_their_digits(w0):
    """A weight of 1e-20 times values of size 1e-300 is subnormal (few digits) or zero: the
    causal query at position 0 sees key 0 alone, and its velocity ``w_0 V x_0 / w_0`` came out
    wrong by 1e4 tolerances (zero for 1e-308). The kernels divide each value column by a power
    of two (exact) before the weights multiply in, or fold tiny weights into the scores: the
    velocity is ``V x_0`` to round-off."""
    rng = np.random.default_rng(2)
    n, d = 5, 2
    content = 1e-300 * rng.uniform(0.5, 1.0, size=(n, d))
    X = np.column_stack([np.linspace(0.0, 1.0, n), content])
    w = np.full(n, (1.0 - w0) / (n - 1))
    w[0] = w0
    V = np.array([[1.0, 0.5], [0.0, 1.0]])
    v = Causal(np.eye(d), V).velocity(X, weights=w)
    np.testing.assert_allclose(v[0, 1:], V @ content[0], rtol=RTOL_ROUNDOFF)
    for field in (Softmax(np.eye(d), V), Unnormalised(np.eye(d), V)):  # the unmasked kernels
        P = field.attention_matrix(content, weights=w)
        np.testing.assert_allclose(
            field.velocity(content, weights=w), P @ content @ V.T, rtol=RTOL_ROUNDOFF
        )


@pytest.mark.parametrize(
    ("best", "gap"),
    [(0.0, 5e-10), (10.0, 5e-9)],  # the window tol max(1, |m|): 1e-9 at m = 0, 1e-8 at m = 10
)
@pytest.mark.parametrize("key_tiles", [False, True])
def test_hardmax_ties_are_the_keys_within_tol_max_1_m_of_the_best(
    monkeypatch, best, gap, key_tiles
):
    """C_i = {j : s_ij >= m_i - tol max(1, |m_i|)}: a key half a window below the best score is
    tied with it (at m = 0 the window is tol itself, not tol |m| = 0), a key far below is not.
    The query (1, 0) with A = I scores a key by its first coordinate, so the scores are exact
    and the velocity is V times the mean of the two tied keys, up to the rounding of one sum
    and one halving (a few ulps). Slabs of 2 scores cut the 3 keys into tiles of one key (the
    path of rows longer than a slab: maximum first, then the tie sums)."""
    if key_tiles:
        monkeypatch.setattr(att._kernels, "BLOCK_ELEMENTS", 2)
    rng = np.random.default_rng(21)
    V = rng.standard_normal((2, 2))
    Y = np.array([[1.0, 0.0]])
    X = np.array([[best, 1.0], [best - gap, 2.0], [best - 1.0, -3.0]])
    field = Hardmax(np.eye(2), V, tol=1e-9)
    expected = V @ X[:2].mean(axis=0)
    np.testing.assert_allclose(field.velocity_at(Y, X)[0], expected, rtol=1e-14)
    # below the window the best key alone is selected
    X[1, 0] = best - 4 * gap
    np.testing.assert_allclose(field.velocity_at(Y, X)[0], V @ X[0], rtol=1e-14)


@pytest.mark.parametrize(
    ("k", "s"),
    [
        (512, 2.0**1023),  # |2^512 g|^2 overflows: L2 rescales the tokens itself
        (506, 2.0**1012),  # L2's parts are finite, the kernel rescales F, G and the bias
    ],
)
def test_l2_at_norms_whose_squares_overflow_is_the_rescaled_field(k, s):
    """The L2 score -|Qbar y - Kbar x|^2 / s is invariant under x -> c x, s -> c^2 s, and the
    value V x is linear: L2(I, I, V, s) at tokens 2^k g is 2^k L2(I, I, V, s / 4^k) at g
    (s / 4^k = 1/2 and 1 here). With |g| = 1.2 the squares 4^k |g|^2 pass 2^1024 (k = 512),
    or the headroom 2^1008 of the kernel's scores (k = 506), so this runs the two rescaled
    paths, where the scores and the bias -|Kbar x|^2 / s must be scaled back by the same power
    of two. Powers of two are exact: the two agree to round-off (RTOL_ROUNDOFF)."""
    rng = np.random.default_rng(22)
    g = rng.standard_normal((6, 2))
    g *= 1.2 / np.linalg.norm(g, axis=1, keepdims=True)
    V = rng.standard_normal((2, 2))
    big = L2(np.eye(2), np.eye(2), V, s=s).velocity(2.0**k * g)
    small = L2(np.eye(2), np.eye(2), V, s=s / 2.0**k / 2.0**k).velocity(g)
    np.testing.assert_allclose(big, 2.0**k * small, rtol=RTOL_ROUNDOFF)


def plan_marginal_error(plan, a, b):
    """The larger l1 error of the two marginals of `plan`, recomputed from it."""
    return max(np.abs(plan.sum(axis=1) - a).sum(), np.abs(plan.sum(axis=0) - b).sum())


@pytest.mark.parametrize("max_iter", [2, SINKHORN_MAX_ITER])
def test_sinkhorn_plan_reports_the_larger_marginal_error_and_converges_by_it(max_iter):
    """A rectangular problem with unequal marginals: each iteration of the alternating solver
    ends on the row scaling, so the rows hold to round-off and the whole error is in the
    columns. The reported error is the larger l1 error of the two marginals of the returned
    plan (recomputed here from the plan: equal to round-off, 1e-12), and `converged` says
    whether it is within `tol` (two iterations: 5e-2; a thousand: below 1e-9)."""
    rng = np.random.default_rng(23)
    S = rng.standard_normal((6, 9))
    a = rng.uniform(0.5, 1.5, 6)
    b = rng.uniform(0.5, 1.5, 9)
    a, b = a / a.sum(), b / b.sum()
    res = sinkhorn_plan(S, 0.5, a=a, b=b, max_iter=max_iter)
    np.testing.assert_allclose(res.marginal_error, plan_marginal_error(res.plan, a, b), rtol=1e-12)
    assert res.converged == (res.marginal_error <= 1e-9)
    assert res.converged == (max_iter == SINKHORN_MAX_ITER)


@pytest.mark.parametrize("symmetric", [True, False])
def test_sinkhorn_below_the_rounding_of_the_plan_does_not_report_convergence(symmetric):
    """A `tol` of 1e-16 is below the rounding of the plan's sums (n sums of n terms of size
    1/n^2: a few 1e-16 in l1): the iterations' own error, on the scaled kernel, reached it (in
    26 and 70 iterations), but the returned plan's marginal error (2.8e-16 and 3.9e-16) does
    not. `converged` is `marginal_error <= tol`, as
    documented, so the plan is not converged, and a strict Sinkhorn attention raises instead of
    returning its velocity as if the tolerance had been met."""
    rng = np.random.default_rng(41)
    X = rng.standard_normal((100, 3))
    A = np.eye(3) if symmetric else rng.standard_normal((3, 3))
    res = sinkhorn_plan(dense_scores(X, A), 1.0, tol=1e-16)
    assert res.marginal_error > 1e-16
    assert not res.converged
    field = Sinkhorn(A, np.eye(3), tol=1e-16, strict=True)
    with pytest.raises(SinkhornConvergenceError, match="tol = 1e-16"):
        field.velocity(X)


def test_multihead_output_matrices_act_on_each_head():
    """Gamma(x) = sum_h W_h Gamma_h(x), and a head's output is linear in its value matrix:
    W_h (V_h sum_j P_ij x_j) = (W_h V_h) sum_j P_ij x_j, so the heads with output matrices
    W_h are the heads with values W_h V_h, summed (non-symmetric W_h: W_h^T is another field).
    The two differ by the association of three small products: round-off."""
    rng = np.random.default_rng(24)
    X = rng.standard_normal((7, 3))
    A1, V1, W1, A2, V2, W2 = rng.standard_normal((6, 3, 3))
    heads = (Softmax(A1, V1), Sigmoid(A2, V2, b=0.4))
    field = MultiHead(heads, W=(W1, W2))
    expected = Softmax(A1, W1 @ V1).velocity(X) + Sigmoid(A2, W2 @ V2, b=0.4).velocity(X)
    np.testing.assert_allclose(field.velocity(X), expected, rtol=RTOL_ROUNDOFF)


def test_hardmax_limit_bounds_are_the_formulas_of_the_proposition():
    """The two bounds, written out densely from the proposition: with M_i the c_i maximisers
    of row i and m_i their mean, sharp = |V| min(sum_{j not in M_i} e^(-beta (s*_i - s_ij))
    |x_j - m_i| / c_i, max_j |x_j - m_i|) and crude = 2 n |V| R e^(-beta gap_i). Duplicated
    tokens give rows with c_i = 2, where the division by c_i matters. Both sides evaluate the
    same formulas in another order: round-off, 1e-13 relative."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((7, 2))
    X = np.concatenate([X, X[:2]])  # exact duplicates: tied maximisers
    A, V = random_params(rng, 2)
    betas = np.array([1.0, 4.0, 16.0])
    limit = att.hardmax_limit(A, V, X, betas)
    n, norm_V = X.shape[0], np.linalg.norm(V, 2)
    S = X @ A.T @ X.T  # the same product as the library: ties are exact
    for i in range(n):
        M = S[i] == S[i].max()
        dist = np.linalg.norm(X - X[M].mean(axis=0), axis=1)
        for k, beta in enumerate(betas):
            tail = np.sum(np.exp(-beta * (S[i].max() - S[i][~M])) * dist[~M]) / M.sum()
            sharp = norm_V * min(tail, dist.max())
            np.testing.assert_allclose(limit.sharp_bound[k, i], sharp, rtol=1e-13)
    R = np.linalg.norm(X, axis=1).max()
    crude = 2 * n * norm_V * R * np.exp(-np.outer(betas, limit.gap))
    np.testing.assert_allclose(limit.crude_bound, crude, rtol=1e-13)


@pytest.mark.parametrize("beta", [0.5, 4.0])
def test_make_field_beta_is_the_inverse_temperature_of_softmax_and_l2(beta):
    """make_field's beta is an inverse temperature: softmax weights softmax_j(beta <A x_i, x_j>)
    and l2 weights softmax_j(-beta |A x_i - x_j|^2) (width s = 1/beta, Qbar = A, Kbar = I),
    written densely here; round-off (RTOL_ROUNDOFF)."""
    rng = np.random.default_rng(26)
    X = rng.standard_normal((6, 2))
    A, V = random_params(rng, 2)
    D2 = ((X @ A.T)[:, None, :] - X[None, :, :]) ** 2
    P_l2 = softmax(-beta * D2.sum(-1), axis=1)
    l2 = make_field("l2", 2, beta=beta, A=A, V=V)
    np.testing.assert_allclose(l2.attention_matrix(X), P_l2, rtol=RTOL_ROUNDOFF)
    P_soft = softmax(beta * dense_scores(X, A), axis=1)
    soft = make_field("softmax", 2, beta=beta, A=A, V=V)
    np.testing.assert_allclose(soft.attention_matrix(X), P_soft, rtol=RTOL_ROUNDOFF)


@pytest.mark.parametrize(
    ("symmetric_scores", "symmetric"), [(True, True), (False, False), (True, False)]
)
@pytest.mark.parametrize("massless", [False, True])
def test_sinkhorn_every_solver_path_returns_its_potentials_and_counts_its_iterations(
    symmetric_scores, symmetric, massless
):
    """The four solver paths (symmetric or alternating; scalings for positive weights, log-sum-exp
    iterations with a massless token; symmetric scores with unequal marginals are not a
    symmetric problem) all return a plan, potentials and a count that agree:

    * first-order conditions: on the support, ``pi_ij = a_i b_j e^{(f_i + g_j + S_ij)/eps}``.
      Both sides are exponentials of the same O(10) exponent, so they agree to a few ulps of
      it times that size: rtol 1e-12;
    * the reported error is the larger l1 marginal error of the returned plan (a sum of n
      terms of size 1/n: equal to round-off 1e-12, absolute), and it is within `tol`;
    * a run stopped at `max_iter` reports `max_iter` iterations (an iteration is two updates of
      the symmetric solver, one row and one column update of the alternating one)."""
    rng = np.random.default_rng(31)
    n, eps, tol = 12, 0.3, 1e-10
    X = rng.standard_normal((n, 2))
    B = rng.standard_normal((2, 2))
    S = dense_scores(X, B + B.T if symmetric_scores else B)
    a = rng.uniform(0.5, 1.5, n)
    if massless:
        a[3] = 0.0
    a /= a.sum()
    b = a.copy() if symmetric else a[::-1].copy()
    res = sinkhorn_plan(S, eps, a=a, b=b, tol=tol, max_iter=SINKHORN_MAX_ITER)
    assert res.converged and res.n_iter < SINKHORN_MAX_ITER
    np.testing.assert_allclose(
        res.marginal_error, plan_marginal_error(res.plan, a, b), rtol=0, atol=1e-12
    )
    assert res.marginal_error <= tol
    support = np.outer(a > 0, b > 0)
    with np.errstate(invalid="ignore"):  # a massless entry's potential may be infinite
        model = np.outer(a, b) * np.exp((res.f[:, None] + res.g[None, :] + S) / eps)
    np.testing.assert_allclose(res.plan[support], model[support], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(res.plan[~support], 0.0)
    stopped = sinkhorn_plan(S, eps, a=a, b=b, tol=1e-300, max_iter=3)
    assert not stopped.converged and stopped.n_iter == 3


@pytest.mark.parametrize("n_sink", [0, 1, 3])
def test_with_positions_default_is_the_documented_equal_spacing(n_sink):
    """Default positions: without a sink ``s_i = (i - 1)/n``, so n equally spaced points from 0
    with step 1/n (the last at 1 - 1/n); with ``n_sink`` sinks, 0 for the sinks and the other
    m = n - n_sink tokens equally spaced strictly inside (0, 1), i.e. ``k/(m + 1)``: the gaps
    from 0 to the first, between tokens, and from the last to 1 are all equal. Each position
    is rounded once, a gap is the difference of two: within 4 ulps of 1, relative to the gap
    1/(m + 1)."""
    X = np.random.default_rng(32).standard_normal((7, 2))
    Z = with_positions(X, n_sink=n_sink)
    np.testing.assert_array_equal(Z[:, 1:], X)
    s = Z[:, 0]
    m = X.shape[0] - n_sink
    np.testing.assert_array_equal(s[:n_sink], 0.0)
    if n_sink == 0:
        gaps = np.diff(np.concatenate([s, [1.0]]))
        assert s[0] == 0.0
        np.testing.assert_allclose(gaps, 1.0 / m, rtol=4 * np.finfo(float).eps * (m + 1))
    else:
        gaps = np.diff(np.concatenate([[0.0], s[n_sink:], [1.0]]))
        np.testing.assert_allclose(gaps, 1.0 / (m + 1), rtol=4 * np.finfo(float).eps * (m + 1))


def test_multihead_of_masked_heads_keeps_the_positions_fixed():
    """A masked head moves the content only (its velocity is 0 in column 0): a multi-head of
    masked heads is masked attention again when every head is masked and each output matrix
    leaves the position column alone (first row zero after column 0); the content then moves by
    the block W_h[1:, 1:], and the position entry W_h[0, 0] changes nothing. An unmasked head
    beside masked ones would read the position as content and move it: refused."""
    rng = np.random.default_rng(40)
    A, V, B = rng.standard_normal((3, 2, 2))
    X = with_positions(rng.standard_normal((6, 2)), n_sink=1)
    heads = (Causal(A, V), Causal(A.T, V.T, beta=0.5))
    W = [np.zeros((3, 3)), np.zeros((3, 3))]
    W[0][0, 0], W[0][1:, 1:], W[0][1:, 0] = 7.0, B, [1.0, -2.0]  # column 0 meets v[:, 0] = 0
    W[1][1:, 1:] = np.eye(2)
    v = MultiHead(heads, W=W).velocity(X)
    expected = Causal(A, B @ V).velocity(X) + heads[1].velocity(X)
    np.testing.assert_allclose(v, expected, rtol=RTOL_ROUNDOFF, atol=1e-15)
    assert np.all(v[:, 0] == 0)
    moving = W[0].copy()
    moving[0, 2] = 0.1
    with pytest.raises(ValueError, match=r"`W\[0\]` moves the positions of a masked head"):
        MultiHead(heads, W=(moving, W[1]))
    with pytest.raises(ValueError, match="mixes masked heads"):
        MultiHead((heads[0], Softmax(np.eye(3), np.eye(3))))
