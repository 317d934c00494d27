"""Tests of token_dynamics.interpolation: exact sequence interpolation (book Part IV)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import check_grad

from token_dynamics.interpolation import (
    Factored,
    FeedForward,
    Identity,
    SelfAttention,
    Transformer,
    TransformerBlock,
    as_sequences,
    block_count_bound,
    build_hardmax_interpolator,
    build_softmax_interpolator,
    check_dataset,
    critical_temperature,
    hat_move,
    hausdorff_distance,
    overlapping_dataset,
    paper_block_count,
    relative_hausdorff_errors,
    resnet_counts,
    snap_layer,
    softmax_deviation_bound,
    substitution_errors,
    tikhonov_dataset,
    tikhonov_objective,
    tikhonov_sweep,
    train_tikhonov,
)

from .helpers import loglog_slope

# Exactness threshold: the construction is exact in exact arithmetic, and the rounding of
# ~2 sum(m) hat layers, each O(|D| eps_mach / delta), was measured below 1e-11.
EXACT_RTOL = 1e-8


def random_dataset(rng, d, N, pool_size=9, max_len=7):
    """N distinct sequences drawn from a shared pool of tokens (heavy overlaps) and targets."""
    pool = rng.normal(size=(pool_size, d))
    X, Y, seen = [], [], set()
    while len(X) < N:
        n = int(rng.integers(1, max_len + 1))
        idx = rng.choice(pool_size, size=n, replace=False)
        key = frozenset(idx.tolist())
        if key in seen:
            continue
        seen.add(key)
        X.append(pool[idx])
        m = int(rng.integers(1, n + 1))
        Y.append(3.0 * rng.normal(size=(m, d)))
    return X, Y


DATASETS = [random_dataset(np.random.default_rng(s), 2 + s % 5, 1 + s % 6) for s in range(24)]


@pytest.mark.statement("interp-thm-hardmax")
@pytest.mark.parametrize("seed", range(24))
def test_hardmax_interpolates_exactly(seed):
    X, Y = DATASETS[seed]
    interp = build_hardmax_interpolator(X, Y, rng=seed)
    errors = relative_hausdorff_errors(interp.transformer(X), Y)
    assert errors.max() <= EXACT_RTOL
    np.testing.assert_allclose(errors, interp.errors, rtol=0, atol=0)
    # every output token is one of the targets, and every target is reached
    for out, tgt in zip(interp.transformer(X), Y, strict=True):
        assert out.shape[0] == 0 or hausdorff_distance(out, tgt) <= EXACT_RTOL * 10


@pytest.mark.statement("interp-prop-counts")
@pytest.mark.parametrize("seed", range(24))
def test_counts_follow_the_formulas(seed):
    X, Y = DATASETS[seed]
    interp = build_hardmax_interpolator(X, Y, rng=seed)
    N, d, m = len(X), X[0].shape[1], interp.m
    L, S = interp.n_blocks, interp.n_separation
    assert L == S + 2 * m.sum()
    assert S <= N - 1
    paper = paper_block_count(m, attention="hardmax")
    assert L <= 2 * m.sum() + N - 1 <= paper == 2 * m.sum() + 2 * N + 1
    assert block_count_bound(m) == 2 * m.sum() + N - 1
    assert interp.transformer.max_width <= 4
    assert interp.n_params <= (8 * d + 5) * L + (4 * d + 1) * S + L
    # the bounds hold layer by layer, not only in sum: the S separation blocks come first
    for i, block in enumerate(interp.transformer.blocks):
        assert block.ff.n_params <= 8 * d + 5
        assert block.sa.n_params <= (4 * d + 1 if i < S else 1)
    for block in interp.transformer.blocks:
        for M in (block.sa.A, block.sa.V):
            assert M is None or isinstance(M, Identity) or M.left.shape[1] == 1  # rank one


@pytest.mark.statement("interp-prop-counts")
def test_counts_do_not_depend_on_the_input_length():
    rng = np.random.default_rng(5)
    d = 3
    Y = [rng.normal(size=(2, d)), rng.normal(size=(1, d))]
    blocks = set()
    for n in (3, 10, 40):
        X = [rng.normal(size=(n, d)), rng.normal(size=(n + 1, d))]
        interp = build_hardmax_interpolator(X, Y, rng=0)
        assert interp.max_error <= EXACT_RTOL
        blocks.add((interp.n_blocks, interp.n_params))
    assert len(blocks) == 1  # disjoint inputs: S = 0, and sizes depend on m only


@pytest.mark.statement("interp-prop-resnet")
def test_resnet_count_grows_with_input_length():
    n = np.array([5, 10, 20, 40])
    params = np.array([resnet_counts(int(k), 3, 4)[1] for k in n])
    slope = loglog_slope(n, params)
    # 4 (6 n d + 4) parameters: linear in n up to the constant 4, so the log-log slope is ~1
    assert 0.95 < slope <= 1.0
    assert resnet_counts(10, 3, 4)[0] == 4


@pytest.mark.statement("interp-prop-resnet")
@pytest.mark.parametrize("n", [2, 5, 12])
def test_flattened_hat_resnet_interpolates_with_the_counted_parameters(n):
    # the construction of the proof: each sequence one vector of R^{nd}, one width-3 hat per
    # sequence onto its targets listed with repetitions (m_j < n, so never an input vector)
    rng = np.random.default_rng(n)
    d, N = 3, 4
    X = [rng.normal(size=(n, d)) for _ in range(N)]
    Y = [rng.normal(size=(int(rng.integers(1, n)), d)) for _ in range(N)]
    flat = np.array([x.ravel() for x in X])
    listing = np.array([np.resize(y, (n, d)).ravel() for y in Y])
    hats = []
    for j in range(N):
        hats.append(hat_move(flat, flat[j], listing[j], rng=rng))
        flat = hats[-1](flat)
    errors = relative_hausdorff_errors([f.reshape(n, d) for f in flat], Y)
    assert errors.max() <= EXACT_RTOL
    assert max(h.width for h in hats) == 3
    assert sum(h.n_params for h in hats) == resnet_counts(n, d, N)[1]


@pytest.mark.statement("interp-prop-phases")
@pytest.mark.parametrize("seed", range(0, 24, 3))
def test_phase_invariants(seed):
    X, Y = DATASETS[seed]
    interp = build_hardmax_interpolator(X, Y, rng=seed)
    sep = interp.phase("separated").sequences
    scale = max(np.abs(Z).max() for Z in sep)
    tol = 1e-9 * scale  # coincidence tolerance of the construction (COINCIDE_RTOL)
    for j in range(len(sep)):
        assert len(_distinct(sep[j], tol)) == sep[j].shape[0]  # tokens stay distinct
        for k in range(j):
            assert np.linalg.norm(sep[j][:, None] - sep[k][None], axis=2).min() > tol
    collapsed = interp.phase("collapsed").sequences
    for j, Z in enumerate(collapsed):
        assert len(_distinct(Z, tol)) == interp.m[j]
    # phases are recorded in order along the layers of the network
    layers = [p.n_layers for p in interp.phases]
    assert layers == sorted(layers) and layers[-1] == 2 * interp.n_blocks
    states = interp.transformer.layer_states(X)
    for p in interp.phases:
        for a, b in zip(states[p.n_layers], p.sequences, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("scale", [2.0**-20, 1e3])
def test_phases_are_the_network_states_for_data_far_from_unit_size(scale):
    """The construction runs on data brought to unit size, and the network takes the inputs'
    scale in its first layer: every phase is still the network's own state after its first
    ``n_layers`` layers, the input at its size and, with no separation block (one sequence), the
    "separated" phase the input itself."""
    rng = np.random.default_rng(5)
    X, Y = [scale * rng.normal(size=(5, 2))], [rng.normal(size=(2, 2))]
    interp = build_hardmax_interpolator(X, Y, rng=0)
    assert interp.n_separation == 0
    states = interp.transformer.layer_states(X)
    for p in interp.phases:
        for a, b in zip(states[p.n_layers], p.sequences, strict=True):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * np.abs(a).max())
    assert interp.phase("separated").n_layers == 0


def _distinct(Z, tol):
    reps = []
    for z in Z:
        if not any(np.linalg.norm(z - r) <= tol for r in reps):
            reps.append(z)
    return reps


@pytest.mark.statement("interp-lem-hat")
@given(st.integers(0, 10_000), st.integers(2, 6), st.integers(2, 12))
def test_hat_move_moves_one_point(seed, d, M):
    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(M, d))
    q = 5 * rng.normal(size=d)
    ff = hat_move(pts, pts[0], q, rng=seed)
    out = ff(pts)
    assert ff.width == 3
    # the moved point: rounding of |D| eps / delta, with delta >~ 1e-3 for these draws
    np.testing.assert_allclose(out[0], q, atol=1e-9)
    s = pts @ ff.U[0]
    left = s < s[0]
    # left of the hat every ReLU is off: bitwise fixed; right of it, the three ReLU terms cancel
    # up to rounding (a few ulps of |s| times |D| / delta)
    np.testing.assert_array_equal(out[left], pts[left])
    np.testing.assert_allclose(out[1:], pts[1:], rtol=0, atol=1e-9)
    # the fourth unit (U = 0, b = 1) adds a common translation t: p still lands on q, every
    # other point moves by t, to the same rounding plus that of adding t (|t| <= ~10)
    t = rng.normal(size=d)
    shifted = hat_move(pts, pts[0], q, translation=t, rng=seed)
    assert shifted.width == 4
    out = shifted(pts)
    np.testing.assert_allclose(out[0], q, atol=1e-9)
    np.testing.assert_allclose(out[1:], pts[1:] + t, rtol=0, atol=1e-9)


@pytest.mark.parametrize("size", [1e-10, 1e-200])
def test_hat_move_keeps_tiny_points_apart(size):
    # points far below unit size are still distinct points: only `p` moves (a hat layer on unit
    # data rescaled by `size`; rounding as in the unit case, relative to the points' size)
    pts = size * np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    q = size * np.array([5.0, 5.0])
    out = hat_move(pts, pts[1], q, rng=0)(pts)
    np.testing.assert_allclose(out, [pts[0], q, pts[2]], rtol=0, atol=1e-12 * size)


@pytest.mark.statement("interp-lem-rank-one")
@given(st.integers(0, 10_000), st.integers(2, 5))
def test_lemma_rank_one(seed, d):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(8, d))
    v = rng.normal(size=d)
    X[-1] -= (X[-1] @ v) / (v @ v) * v  # one token with <v, x> = 0
    sa = SelfAttention(A=Factored(v, v), V=Identity(d), rho=0.0)
    out = sa(X)
    p = X @ v
    top, bottom = X[np.argmax(p)], X[np.argmin(p)]
    pos, neg = p > 1e-9, p < -1e-9
    np.testing.assert_allclose(out[pos], np.broadcast_to(top, out[pos].shape), atol=1e-14)
    np.testing.assert_allclose(out[neg], np.broadcast_to(bottom, out[neg].shape), atol=1e-14)
    np.testing.assert_allclose(out[-1], X.mean(axis=0), atol=1e-12)  # all tied: the mean


@pytest.mark.statement("interp-lem-orthant")
@given(st.integers(0, 10_000), st.integers(2, 5))
def test_lemma_orthant_leader(seed, d):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.1, 3.0, size=(10, d))
    R = X.max() + rng.uniform(0.01, 1.0)
    X = np.vstack([X, R * np.ones(d)])
    out = SelfAttention(A=Identity(d), V=Identity(d), rho=0.0)(X)
    np.testing.assert_array_equal(out, np.broadcast_to(R * np.ones(d), out.shape))


@pytest.mark.statement("interp-lem-sphere")
@given(st.integers(0, 10_000), st.integers(2, 5), st.floats(0.5, 20.0))
def test_lemma_sphere_points_fixed(seed, d, radius):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(10, d))
    X *= radius / np.linalg.norm(X, axis=1, keepdims=True)
    out = SelfAttention(A=Identity(d), V=Identity(d), rho=0.0)(X)
    np.testing.assert_array_equal(out, X)


@pytest.mark.statement("interp-prop-equivariance")
@pytest.mark.parametrize("seed", [1, 4, 7, 10])
def test_permutation_equivariance(seed):
    X, Y = DATASETS[seed]
    interp = build_hardmax_interpolator(X, Y, rng=seed)
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(Z.shape[0]) for Z in X]
    out = interp.transformer(X)
    out_perm = interp.transformer([Z[p] for Z, p in zip(X, perms, strict=True)])
    for a, b, p in zip(out, out_perm, perms, strict=True):
        np.testing.assert_allclose(b, a[p], rtol=0, atol=1e-12 * max(1, np.abs(a).max()))
    soft = interp.transformer.with_attention("softmax", 0.05)
    with np.errstate(under="ignore"):
        out = soft(X)
        out_perm = soft([Z[p] for Z, p in zip(X, perms, strict=True)])
    for a, b, p in zip(out, out_perm, perms, strict=True):
        np.testing.assert_allclose(b, a[p], rtol=1e-9, atol=1e-9)


def test_block_order_is_feed_forward_first():
    ff = FeedForward(U=np.zeros((1, 2)), b=[1.0], W=[[2.0], [0.0]])  # translation by (2, 0)
    sa = SelfAttention(A=None, V=None, rho=0.5)
    X = np.array([[0.0, 1.0]])
    np.testing.assert_allclose(TransformerBlock(ff, sa)(X), [[1.0, 0.5]])  # 0.5 (x + t)
    T = Transformer([TransformerBlock(ff, sa)]) + Transformer([TransformerBlock(ff, sa)])
    np.testing.assert_allclose(T([X])[0], [[1.5, 0.25]])


def test_layers_read_their_tokens_like_the_transformer():
    """A layer or block applied by hand takes what the network takes: nested lists and integer
    arrays are tokens, tokens of another dimension or NaN are refused naming `X` (a list used to
    fail on `rho * X`, another d in numpy's matmul, and NaN came back as NaN)."""
    ff = FeedForward(U=[[1.0, 0.0]], b=[0.0], W=[[0.0], [1.0]])
    sa = SelfAttention(A=np.eye(2), V=np.eye(2), rho=0.5, attention="softmax", tau=1.0)
    X = [[2, 0], [-1, 1]]
    for layer in (ff, sa, TransformerBlock(ff, sa)):
        np.testing.assert_array_equal(layer(X), layer(np.array(X, dtype=float)))
        with pytest.raises(ValueError, match="`X` must have d = 2"):
            layer(np.ones((2, 3)))
        with pytest.raises(ValueError, match="`X` contains NaN"):
            layer([[np.nan, 0.0]])
    np.testing.assert_array_equal(SelfAttention(rho=2.0)([[1, 2, 3]]), [[2.0, 4.0, 6.0]])


def test_parameter_counting_rule():
    d = 3
    ff = FeedForward(U=np.ones((4, d)), b=np.zeros(4), W=np.ones((d, 4)))
    assert ff.n_params == 8 * d + 5
    u = np.ones(d)
    assert SelfAttention(A=Factored(u, u), V=Factored(u, u)).n_params == 4 * d + 1
    assert SelfAttention(A=Identity(d), V=Identity(d), rho=0.0).n_params == 1
    assert SelfAttention().n_params == 1
    assert SelfAttention(A=np.eye(d), V=np.eye(d)).n_params == 2 * d * d + 1


def test_block_refuses_layers_of_two_dimensions():
    ff = FeedForward(U=np.zeros((1, 2)), b=[1.0], W=[[1.0], [0.0]])
    with pytest.raises(ValueError, match=r"`ff` acts on d = 2 but `sa` on d = 3"):
        TransformerBlock(ff, SelfAttention(A=Identity(3), V=Identity(3)))


def test_network_refuses_sequences_of_another_dimension_by_name():
    ff = FeedForward(U=np.zeros((1, 2)), b=[1.0], W=[[1.0], [0.0]])
    T = Transformer([TransformerBlock(ff, SelfAttention())])
    for apply in (T, T.layer_states):
        with pytest.raises(ValueError, match=r"`inputs\[0\]` must have d = 2 columns"):
            apply([np.zeros((2, 3))])


def test_sequences_come_as_a_list_or_one_array_of_equal_lengths():
    X = np.random.default_rng(0).normal(size=(3, 4, 2))
    assert [s.shape for s in as_sequences(X)] == [(4, 2)] * 3
    ff = FeedForward(U=np.zeros((1, 2)), b=[1.0], W=[[1.0], [0.0]])
    T = Transformer([TransformerBlock(ff, SelfAttention(A=Identity(2), V=Identity(2)))])
    for a, b in zip(T(X), T(list(X)), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="`targets` must be a non-empty list"):
        as_sequences([], "targets")


def test_network_width_is_the_widest_feed_forward_layer():
    # a translation (width 1) composed with a hat (width 3, the hat lemma), in either order:
    # the network needs the wider hidden layer, and has the parameters of its two blocks
    pts = np.random.default_rng(0).normal(size=(4, 2))
    ff = FeedForward(U=np.zeros((1, 2)), b=[1.0], W=[[1.0], [0.0]])
    shift = TransformerBlock(ff, SelfAttention())
    hat = TransformerBlock(hat_move(pts, pts[0], [5.0, 5.0], rng=0), SelfAttention())
    for T in (Transformer([shift, hat]), Transformer([hat, shift])):
        assert T.max_width == 3
        assert T.n_params == shift.n_params + hat.n_params


@pytest.mark.statement("interp-prop-softmax-limit")
@pytest.mark.parametrize("seed", [2, 5, 9, 13])
def test_softmax_substitution_error_and_critical_temperature(seed):
    X, Y = DATASETS[seed]
    interp = build_hardmax_interpolator(X, Y, rng=seed)
    T = interp.transformer
    scale = max(1.0, max(np.abs(Z).max() for Z in Y))
    tau_mp = critical_temperature(T, X, 1e-12 * scale)
    taus = tau_mp * np.array([1.0, 0.5, 0.1])
    # below tau*, softmax reproduces the hardmax network up to the bound (1e-12 relative) plus
    # the rounding of the hardmax network (a few ulps times |q - p| / delta per hat): ask 1e-10
    assert substitution_errors(T, X, Y, taus).max() <= 1e-10
    # monotone decrease of the error as tau decreases, in the exponential regime
    grid = tau_mp * np.geomspace(30.0, 1.0, 8)
    err = substitution_errors(T, X, Y, grid)
    # Monotone in the exponential regime: between the rounding floor (1e-12, below which the
    # noise of the exact network dominates) and 0.1 (above it the softmax network is O(1) off
    # and the error saturates and wobbles: measured, an unqualified monotonicity is false)
    regime = (err > 1e-12) & (err < 0.1)
    assert regime.sum() >= 2
    assert np.all(np.diff(err[regime]) <= 0)
    # the a-priori bound dominates the measured deviation from the hardmax network
    hard = T(X)
    for tau in tau_mp * np.array([3.0, 10.0, 30.0]):
        with np.errstate(under="ignore"):
            soft = T.with_attention("softmax", tau)(X)
        bounds = softmax_deviation_bound(T, X, tau)
        for a, b, e in zip(soft, hard, bounds, strict=True):
            assert np.all(np.linalg.norm(a - b, axis=1) <= e + 1e-12 * scale)


def test_critical_temperature_exercise_numbers():
    """The solution of exercise interp-ex-critical-tau: the bound 2 (n - 1) |V| R e^(-Delta/tau)
    of interp-prop-softmax-limit at 1e-12, for n = 10 and 20, R = 5, Delta = 2, as printed."""
    import re
    from pathlib import Path

    book = Path(__file__).resolve().parents[1] / "book"
    text = (book / "interpolation" / "softmax.md").read_text(encoding="utf-8")
    solution = text[text.index("{solution} interp-ex-critical-tau") :]
    solution = solution[: solution.index("```")]

    def tau(n):
        return 2.0 / np.log(2 * (n - 1) * 5.0 / 1e-12)

    printed = [float(x) for x in re.findall(r"\\approx (0\.\d+)", solution)]
    # three significant digits as printed: the rounding of the value, 5e-5
    assert printed[0] == pytest.approx(tau(10), abs=5e-5)
    assert printed[-1] == pytest.approx(tau(20), abs=5e-5)
    # doubling n adds log(38 / 18) = log(19 / 9) to the logarithm (0.75 as printed)
    increment = float(re.search(r"\\log\(19/9\) \\approx (\d\.\d+)", solution).group(1))
    assert increment == pytest.approx(np.log(19 / 9), abs=5e-3)


@pytest.mark.statement("interp-prop-softmax-limit")
@pytest.mark.parametrize("seed", [2, 9])
def test_substitution_bound_grows_with_the_temperature(seed):
    """The proof's monotonicity: every step of the recursion is non-decreasing in tau, so the
    bound on each output token is too (the bisection for tau* relies on it)."""
    X, Y = DATASETS[seed]
    T = build_hardmax_interpolator(X, Y, rng=seed).transformer
    tau_mp = critical_temperature(T, X, 1e-12)
    previous = None
    for tau in tau_mp * np.geomspace(0.1, 30.0, 12):
        bounds = np.concatenate(softmax_deviation_bound(T, X, tau))
        if previous is not None:
            # exact comparison: the same floating-point operations on larger exp(-D / tau)
            # can only round to larger or equal values, and inf stays inf
            assert np.all(bounds >= previous)
        previous = bounds


@pytest.mark.statement("interp-thm-softmax")
@pytest.mark.parametrize("seed", [0, 3, 6, 8, 11, 15])
def test_softmax_interpolator_snaps_exactly(seed):
    X, Y = DATASETS[seed]
    interp = build_softmax_interpolator(X, Y, rng=seed)
    assert interp.exact_collapse
    assert interp.collapse_radius < 0.5 * interp.snap_radius  # a-priori bound held
    assert interp.max_error <= EXACT_RTOL
    N, m = len(X), interp.m
    assert interp.n_blocks == interp.n_separation + 2 * m.sum() + 1
    assert interp.n_blocks <= paper_block_count(m, attention="softmax") == 2 * m.sum() + 3 * N
    assert interp.transformer.max_width <= 4
    # exactness does not come from tau -> 0: the substitution alone is far off at this tau
    plan = build_hardmax_interpolator(X, Y, rng=seed)
    sub = substitution_errors(plan.transformer, X, Y, [interp.tau])[0]
    assert sub > 1e3 * interp.max_error or sub < 1e-10
    # "for every temperature below tau*": the construction at tau* / 10 and tau* / 1000 is exact
    # too, with the same blocks (the temperature changes no count)
    for tau in interp.tau_star * np.array([1e-1, 1e-3]):
        with np.errstate(under="ignore"):
            cold = build_softmax_interpolator(X, Y, tau=tau, rng=seed)
        assert cold.tau == tau and cold.tau_star == interp.tau_star
        assert cold.exact_collapse and cold.max_error <= EXACT_RTOL
        assert cold.n_blocks == interp.n_blocks
        assert {b.sa.tau for b in cold.transformer.blocks if b.sa.attention == "softmax"} == {tau}


@pytest.mark.statement("interp-lem-snap")
def test_snap_layer_is_constant_near_the_leader():
    rng = np.random.default_rng(0)
    d = 3
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    g = rng.normal(size=d)
    e = w + g - (g @ w) * w
    y = rng.normal(size=d)
    ff = snap_layer(2.0, 0.4, w, e, y)
    a = 2.0 + rng.uniform(-0.2, 0.2, size=50)  # plateau |a - c| <= delta / 2
    out = ff(a[:, None] * w[None, :])
    np.testing.assert_allclose(out, np.broadcast_to(y, out.shape), atol=1e-14)
    far = np.concatenate([rng.uniform(-5, 1.6, 20), rng.uniform(2.4, 8, 20)])
    pts = far[:, None] * w[None, :]
    np.testing.assert_allclose(ff(pts), pts, atol=1e-13)  # identity outside the window


@pytest.mark.statement("interp-cor-tikhonov")
def test_tikhonov_reduced_sweep():
    data = tikhonov_dataset(10, 20, 4, 4, rng=1)
    # exact interpolant: zero loss, and the norm the authors' code reports is inflated by the
    # inputs' Frobenius norm (|X|_F^2 ~ N n d / 3 = 267 in place of d = 4)
    assert tikhonov_objective(data.exact, data, 0.0)[0] <= 1e-28  # rounding of a mean: ~eps^2
    np.testing.assert_allclose(
        data.authors_norm_sq - data.exact_norm_sq, np.sum(data.inputs**2) - 4, rtol=1e-12
    )
    eps = np.array([1e-1, 1e-2, 1e-3])
    sweep = tikhonov_sweep(data, eps, epochs=[2000, 3000, 6000], rng=1)
    assert np.all(sweep.loss <= sweep.threshold)
    # the threshold is J_eps(theta*) = eps |theta*|^2 with the interpolant's own norm (18.3
    # here; the losses sit 10 to 80 times below it, so a threshold from the authors' norm, 283,
    # would pass the line above unnoticed): the same products, to rounding
    norm_sq = data.exact @ data.exact
    np.testing.assert_allclose(sweep.threshold, eps * norm_sq, rtol=1e-15)
    for e in eps:  # J_eps(theta*) = eps |theta*|^2, the loss of theta* being ~eps^2
        np.testing.assert_allclose(tikhonov_objective(data.exact, data, e)[0], e * norm_sq)
    # the chain for each run: J_eps(theta_eps) <= J_eps(theta*), hence |theta_eps| <= |theta*|
    for fit in sweep.fits:
        assert fit.loss <= fit.objective <= fit.eps * norm_sq
        assert fit.theta @ fit.theta <= norm_sq
    assert np.all(np.diff(sweep.loss) < 0)
    # an observation, not the corollary (which bounds the loss): the minimal loss is close to
    # linear in eps (slope 1 +- 0.3 allows for a local optimiser on a non-smooth loss)
    assert 0.7 <= sweep.slope <= 1.3


@pytest.mark.fullsize
@pytest.mark.statement("interp-cor-tikhonov")
def test_tikhonov_full_sweep():
    """The authors' sizes and epochs (about 5 minutes): `make test-fullsize` runs it."""
    data = tikhonov_dataset(10, 100, 16, 4, rng=0)
    sweep = tikhonov_sweep(data, [1e-1, 1e-2, 1e-3], epochs=[5000, 10000, 50000], lr=1e-3, rng=0)
    assert np.all(sweep.loss <= sweep.threshold)
    assert 0.7 <= sweep.slope <= 1.3


def test_tikhonov_gradient():
    data = tikhonov_dataset(4, 6, 3, 4, rng=2)
    theta = np.random.default_rng(3).normal(size=data.exact.size) * 0.5
    f = lambda t: tikhonov_objective(t, data, 0.1)[0]  # noqa: E731
    g = lambda t: tikhonov_objective(t, data, 0.1)[1]  # noqa: E731
    # central structure: forward differences with step sqrt(eps) ~ 1.5e-8 are accurate to ~1e-7
    assert check_grad(f, g, theta) <= 1e-5 * np.linalg.norm(g(theta))
    fit = train_tikhonov(data, 0.1, theta0=data.exact, epochs=50)
    assert fit.objective <= tikhonov_objective(data.exact, data, 0.1)[0]


@given(st.integers(0, 10_000), st.integers(1, 6), st.integers(1, 6))
def test_hausdorff_is_a_metric_on_sets(seed, n, m):
    rng = np.random.default_rng(seed)
    X, Y, Z = rng.normal(size=(n, 2)), rng.normal(size=(m, 2)), rng.normal(size=(3, 2))
    assert hausdorff_distance(X, X[rng.permutation(n)]) == 0.0
    assert hausdorff_distance(X, np.vstack([X, X])) == 0.0
    assert hausdorff_distance(X, Y) == hausdorff_distance(Y, X)
    assert hausdorff_distance(X, Z) <= hausdorff_distance(X, Y) + hausdorff_distance(Y, Z) + 1e-12


@pytest.mark.parametrize("size", [1e-160, 1e-300, 1e300])
def test_hausdorff_distance_to_the_origin_at_any_size(size):
    """d_H({(3s, 4s)}, {0}) = 5s exactly up to one rounding, for points far below or above unit
    size: the distance is taken on both sets divided by one power of two. (A zero set used to
    impose its scale 1, so the squares of 1e-160 underflowed to a distance 0.)"""
    X, origin = [[3.0 * size, 4.0 * size]], [[0.0, 0.0]]
    assert hausdorff_distance(X, origin) == pytest.approx(5.0 * size, rel=1e-15, abs=0)
    assert hausdorff_distance(origin, X) == pytest.approx(5.0 * size, rel=1e-15, abs=0)


@pytest.mark.parametrize(
    ("X", "Y", "match"),
    [
        ([[[0.0, 0.0], [0.0, 0.0]]], [[[1.0, 1.0]]], "pairwise distinct within a sequence"),
        ([[[0.0, 0.0], [1.0, 0.0]]] * 2, [[[1.0, 1.0]], [[2.0, 2.0]]], "same set of tokens"),
        ([[[0.0, 0.0]]], [[[1.0, 1.0]], [[2.0, 2.0]]], "one target per input"),
        ([[[0.0, 0.0]]], [[[1.0, 1.0], [2.0, 2.0]]], "m_j <= n_j"),
        ([[[0.0], [1.0]]], [[[1.0]]], "d >= 2"),
        ([[[0.0, 0.0], [1.0, 0.0]]], [[[1.0, 1.0], [1.0, 1.0]]], "targets"),
        ([[[0.0, 0.0], [1.0, 0.0]], [[1e-8, 0.0], [2.0, 0.0]]], [[[1.0, 1.0]]] * 2, "closer"),
    ],
)
def test_bad_data_names_the_assumption(X, Y, match):
    with pytest.raises(ValueError, match=match):
        build_hardmax_interpolator(X, Y, rng=0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="width <= 4"):
        FeedForward(U=np.ones((5, 2)), b=np.zeros(5), W=np.ones((2, 5)))
    with pytest.raises(ValueError, match="`tau` is required"):
        SelfAttention(A=Identity(2), V=Identity(2), attention="softmax")
    with pytest.raises(ValueError, match="`attention`"):
        SelfAttention(attention="sparsemax")
    with pytest.raises(TypeError, match="`inputs`"):
        build_hardmax_interpolator(np.ones((2, 2)), [np.ones((1, 2))])
    with pytest.raises(ValueError, match="`eps`"):
        train_tikhonov(tikhonov_dataset(2, 3, 2, 2, rng=0), -1.0)
    with pytest.raises(ValueError, match="`tau`"):
        softmax_deviation_bound(Transformer([]), [np.ones((1, 2))], 0.0)


# ----------------------------------------------------------------------------- the bound, fast
# The direct implementation of the a-priori bound (it recomputed every norm and score margin at
# each of the ~62 bisection steps): the reference that the precomputed version must reproduce.


def _reference_ff_factors(ff, X, e):
    H = X @ ff.U.T + ff.b
    unorm = np.linalg.norm(ff.U, axis=1)
    if not np.all(np.isfinite(e)):
        return np.full(X.shape[0], np.inf)
    near_kink = np.any(np.abs(H) <= e[:, None] * unorm[None, :], axis=1)
    out = np.full(X.shape[0], abs(ff.eta) + np.linalg.norm(ff.W, 2) * np.linalg.norm(ff.U, 2))
    for i in np.flatnonzero(~near_kink):
        J = ff.eta * np.eye(X.shape[1]) + (ff.W * (H[i] > 0)) @ ff.U
        out[i] = np.linalg.norm(J, 2)
    return out


def _reference_sa_bound(sa, X, e, tau):
    if sa.V is None:
        return abs(sa.rho) * e
    A = sa._dense_A if sa._dense_A is not None else np.zeros((X.shape[1], X.shape[1]))
    normA, normV = np.linalg.norm(A, 2), np.linalg.norm(sa._dense_V, 2)
    E = float(e.max())
    if not np.isfinite(E):
        return np.full_like(e, np.inf)
    R = float(np.linalg.norm(X, axis=1).max()) + E
    S = X @ A.T @ X.T
    top = S.max(axis=1, keepdims=True)
    tied = S >= top - 1e-9 * np.maximum(1.0, np.abs(top))
    for i in range(X.shape[0]):  # a tie of distinct keys: lost if perturbed or uneven
        if np.ptp(X[tied[i]], axis=0).max() > 0 and (E > 0 or S[i, tied[i]].min() < top[i, 0]):
            return np.full_like(e, np.inf)
    eff = top[:, 0] - np.where(tied, -np.inf, S).max(axis=1) - 2.0 * normA * (2 * R * E + E * E)
    if np.any(eff <= 0):
        return np.full_like(e, np.inf)
    leak = 2.0 * (X.shape[0] - 1) * normV * R * np.exp(-eff / tau)
    return abs(sa.rho) * e + normV * E + leak


def _reference_bound(T, X, tau):
    states = T.layer_states(X)
    bounds = [np.zeros(Z.shape[0]) for Z in states[0]]
    for k, block in enumerate(T.blocks):
        bounds = [
            _reference_ff_factors(block.ff, Z, e) * e
            for Z, e in zip(states[2 * k], bounds, strict=True)
        ]
        bounds = [
            _reference_sa_bound(block.sa, Z, e, tau)
            for Z, e in zip(states[2 * k + 1], bounds, strict=True)
        ]
    return bounds


def _reference_critical_temperature(T, X, tolerance):
    scale = max(1.0, max(float(np.abs(Z).max()) for st in T.layer_states(X) for Z in st)) ** 2
    ok = lambda tau: max(float(b.max()) for b in _reference_bound(T, X, tau)) <= tolerance  # noqa: E731
    lo, hi = np.log(1e-12 * scale), np.log(1e6 * scale)
    assert ok(np.exp(lo)) and not ok(np.exp(hi))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(np.exp(mid)) else (lo, mid)
    return float(np.exp(lo))


@pytest.mark.parametrize("seed", [2, 5, 9, 13, 17])
def test_precomputed_bound_matches_the_direct_one(seed):
    """Same bound and same tau* as the direct recursion. The two compute the same floating-point
    operations on the same numbers (only the stacking of sequences in one product differs), so
    they agree to a few ulps; tau* is then the same bisection point unless a step lands within
    round-off of the threshold: relative 1e-12 covers it (tau* itself is resolved to ~1e-16)."""
    X, Y = DATASETS[seed]
    T = build_hardmax_interpolator(X, Y, rng=seed).transformer
    scale = max(1.0, max(np.abs(Z).max() for Z in Y))
    tau = critical_temperature(T, X, 1e-6 * scale)
    np.testing.assert_allclose(tau, _reference_critical_temperature(T, X, 1e-6 * scale), rtol=1e-12)
    for t in tau * np.array([0.1, 1.0, 10.0, 1e3]):  # finite and lost (inf) bounds alike
        for new, ref in zip(
            softmax_deviation_bound(T, X, t), _reference_bound(T, X, t), strict=True
        ):
            np.testing.assert_allclose(new, ref, rtol=1e-12, atol=0)


def _spectral_norm_counter(monkeypatch):
    """Count the matrix 2-norms (``np.linalg.norm(M, 2)``) computed from now on."""
    norm, calls = np.linalg.norm, {"spectral": 0}

    def counting_norm(x, ord=None, *args, **kwargs):
        calls["spectral"] += ord == 2 and np.ndim(x) == 2
        return norm(x, ord, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "norm", counting_norm)
    return calls


def _per_layer_norm_bound(T):
    """Matrix 2-norms the tau-free terms need, layer by layer: a feed-forward layer of width w
    needs |W| and |U| for its global Lipschitz constant and one local Jacobian norm per
    activation pattern met (at most 2^w); an attention layer with a head needs |A| and |V|."""
    ff = sum(2 + 2**b.ff.width for b in T.blocks)
    sa = sum(2 for b in T.blocks if b.sa.V is not None)
    return ff + sa


def _grid_dataset(N):
    """The speed issue's data: N sequences of n = 16 tokens with m = 4 targets, d = 4."""
    rng = np.random.default_rng(N)
    return [rng.normal(size=(16, 4)) for _ in range(N)], [rng.normal(size=(4, 4)) for _ in range(N)]


@pytest.mark.parametrize("N", [5, 20])
def test_critical_temperature_computes_the_norms_once_per_block(monkeypatch, N):
    """The tau-free part of the bound (matrix norms, score margins, local Jacobians) is computed
    once per layer, not once per bisection step nor once per prefix of the network: the number
    of matrix-norm calls does not depend on the number of bisection steps, stays within the
    per-layer count (linear in the number of blocks; a rebuild at each of the 60 steps or for
    each prefix would exceed it by a factor ~60 or ~blocks / 2), and each layer's terms are
    built exactly once."""
    from token_dynamics.interpolation import _temperature

    X, Y = _grid_dataset(N)
    T = build_hardmax_interpolator(X, Y, rng=0).transformer
    calls = _spectral_norm_counter(monkeypatch)
    built = {"ff": 0, "sa": 0}

    def counted(name, fn):
        def wrapper(*args):
            built[name] += 1
            return fn(*args)

        return wrapper

    monkeypatch.setattr(_temperature, "_ff_terms", counted("ff", _temperature._ff_terms))
    monkeypatch.setattr(_temperature, "_sa_terms", counted("sa", _temperature._sa_terms))
    counts = []
    for steps in (5, 60):
        monkeypatch.setattr(_temperature, "N_BISECTION", steps)
        calls["spectral"], built["ff"], built["sa"] = 0, 0, 0
        critical_temperature(T, X, 1e-6)
        counts.append((calls["spectral"], dict(built)))
    assert counts[0] == counts[1]
    assert 0 < counts[0][0] <= _per_layer_norm_bound(T)
    assert counts[0][1] == {"ff": T.n_blocks, "sa": T.n_blocks}  # once per layer, all sequences


@pytest.mark.parametrize("N", [5, 20])
def test_softmax_build_computes_each_norm_once(monkeypatch, N):
    """Building the softmax interpolator computes the critical temperature of its hardmax head
    once: its matrix norms stay within the per-layer count of that head (so linear in the
    number of blocks) and do not depend on the number of bisection steps."""
    from token_dynamics.interpolation import _temperature

    X, Y = _grid_dataset(N)
    calls = _spectral_norm_counter(monkeypatch)
    counts = []
    for steps in (5, 60):
        monkeypatch.setattr(_temperature, "N_BISECTION", steps)
        calls["spectral"] = 0
        interp = build_softmax_interpolator(X, Y, rng=0)
        counts.append(calls["spectral"])
    head = Transformer(interp.transformer.blocks[: interp.n_separation + int(interp.m.sum())])
    assert counts[0] == counts[1]
    assert 0 < counts[0] <= _per_layer_norm_bound(head)
    assert interp.exact_collapse  # the count is that of a successful build


def test_training_progress_bar_changes_nothing(capsys):
    data = tikhonov_dataset(4, 6, 2, 2, rng=0)
    quiet = train_tikhonov(data, 1e-2, epochs=50, rng=0)
    shown = train_tikhonov(data, 1e-2, epochs=50, rng=0, progress=True)
    assert "train_tikhonov" in capsys.readouterr().err
    np.testing.assert_array_equal(shown.theta, quiet.theta)
    with pytest.raises(ValueError, match="`progress`"):
        tikhonov_sweep(data, [1e-1, 1e-2], epochs=5, progress="yes")


def test_tikhonov_sweep_refuses_repeated_eps_before_training():
    """One Tikhonov parameter run twice gives no slope: the sweep names `eps_values` before it
    trains (the fit of the slope would only fail after every run)."""
    data = tikhonov_dataset(2, 3, 2, 1, rng=0)
    with pytest.raises(ValueError, match="`eps_values` must hold at least two distinct"):
        tikhonov_sweep(data, [1e-1, 1e-1], epochs=1)


def test_distinct_points_match_the_greedy_scan_over_all_distances():
    """The k-d tree deduplication keeps exactly the rows of the greedy scan that compares every
    pair (cross-implementation; both compare the same distances with ``<=``, and the draws put
    no pair within rounding of the tolerance, the clusters being 1e-12 or 1e-3 wide)."""
    from scipy.spatial.distance import cdist

    from token_dynamics.interpolation._moves import _distinct

    def greedy(points, tol):
        D, keep = cdist(points, points), []
        taken = np.zeros(points.shape[0], dtype=bool)
        for i in range(points.shape[0]):
            if not taken[i]:
                keep.append(i)
                taken |= D[i] <= tol
        return points[keep]

    rng = np.random.default_rng(3)
    for _ in range(200):
        n, d = int(rng.integers(1, 60)), int(rng.integers(2, 5))
        centres = rng.normal(size=(int(rng.integers(1, n + 1)), d))
        spread = rng.choice([0.0, 1e-12, 1e-3], size=(n, 1))
        P = centres[rng.integers(0, len(centres), size=n)] + spread * rng.normal(size=(n, d))
        for tol in (1e-9, 1e-2):
            np.testing.assert_array_equal(_distinct(P, tol), greedy(P, tol))


def test_block_count_bound_refuses_what_is_not_a_length():
    assert block_count_bound([0]) == 0  # one sequence with an empty target: no block
    for bad in ([], [1.5], [-1], [[1, 2]], [2.0**60]):
        with pytest.raises(ValueError, match="`m`"):
            block_count_bound(bad)
        with pytest.raises(ValueError, match="`m`"):  # no count for no sequence, nor a rounded one
            paper_block_count(bad)
    # exact integers up to the largest length accepted: 2^53 + 3, which float64 rounds to 2^53
    assert paper_block_count([2**52]) == 2**53 + 3


# Sizes of inputs and targets a factor up to 1e6 apart either way, and far from unit size.
SCALE_PAIRS = [(1e6, 1.0), (1.0, 1e6), (1e-6, 1.0), (1.0, 1e-6), (1e3, 1e-3), (1e-140, 1e140)]


@pytest.mark.parametrize("build", [build_hardmax_interpolator, build_softmax_interpolator])
@pytest.mark.parametrize(("sx", "sy"), SCALE_PAIRS)
def test_interpolation_is_exact_relative_to_the_targets_at_any_scale(build, sx, sy):
    """Issue 28, item 4: inputs of size 1e3 and targets of size 1 used to be met to 5e-8 of the
    targets' size (the moves' rounding is relative to the largest point they pass); the network
    now works at unit size, its first layer taking the inputs' scale and its last the targets'
    (powers of two), so the error is the rounding of a unit-size build: 1e-10 of the targets'
    size is a hundred times the 1e-12 measured."""
    for seed in (0, 5):
        X, Y = DATASETS[seed]
        X, Y = [sx * Z for Z in X], [sy * Z for Z in Y]
        interp = build(X, Y, rng=seed)
        size = max(float(np.abs(Z).max()) for Z in Y)
        for out, tgt in zip(interp.transformer(X), Y, strict=True):
            assert hausdorff_distance(out, tgt) <= 1e-10 * size


def test_interpolators_commute_with_powers_of_two():
    """Data scaled by powers of two (beyond the unit sizes) give the same network but for the
    scales of its first and last layers: the outputs scale exactly, bit for bit."""
    X, Y = DATASETS[7]
    base = build_hardmax_interpolator([2.0**40 * Z for Z in X], [2.0**-30 * Z for Z in Y], rng=1)
    other = build_hardmax_interpolator([2.0**-50 * Z for Z in X], [2.0**60 * Z for Z in Y], rng=1)
    out_base = base.transformer([2.0**40 * Z for Z in X])
    out_other = other.transformer([2.0**-50 * Z for Z in X])
    for a, b in zip(out_base, out_other, strict=True):
        np.testing.assert_array_equal(2.0**90 * a, b)
    assert base.n_blocks == other.n_blocks and base.n_params == other.n_params


def test_dataset_coincidence_is_judged_at_each_objects_own_size():
    """Targets one apart are distinct whatever the inputs' size (1e7 made them coincide when
    tolerances followed the largest of both), and inputs 1e-10 apart at size 1e-5 are distinct
    too (the tolerance had a floor at 1)."""
    rng = np.random.default_rng(4)
    X = [1e7 * rng.normal(size=(3, 2))]
    Y = [np.array([[0.0, 0.0], [1.0, 0.0]])]
    interp = build_hardmax_interpolator(X, Y, rng=0)
    assert hausdorff_distance(interp.transformer(X)[0], Y[0]) <= 1e-10
    X = [1e-5 * np.array([[1.0, 0.0], [1.0 + 1e-5, 0.0]])]
    interp = build_hardmax_interpolator(X, Y, rng=0)
    assert hausdorff_distance(interp.transformer(X)[0], Y[0]) <= 1e-10


@pytest.mark.parametrize("name", ["inputs", "targets"])
@pytest.mark.parametrize("size", [1e200, 1e-200])
def test_data_beyond_the_float64_sizes_is_refused_by_name(name, size):
    X, Y = [np.array([[0.0, 0.0], [1.0, 0.5]])], [np.array([[1.0, 2.0]])]
    X, Y = ([size * X[0]], Y) if name == "inputs" else (X, [size * Y[0]])
    with pytest.raises(ValueError, match=rf"`{name}` is .*outside \[2\^-500, 2\^500\]"):
        build_hardmax_interpolator(X, Y, rng=0)


def test_relative_hausdorff_error_divides_by_the_largest_target_norm():
    """err = d_H / max(1, max_k |y_k|) with the Euclidean norm of the target tokens: a target
    (3, 4) of norm 5 and an output 10 away give 10 / 5 = 2 (the largest entry, 4, would give
    2.5); inside the unit ball the error is absolute. Exact up to one rounding (1e-15)."""
    Y = [np.array([[3.0, 4.0], [0.0, 1.0]]), np.array([[0.6, 0.0]])]
    outputs = [np.array([[3.0, 14.0], [0.0, 1.0]]), np.array([[0.6, 0.5]])]
    np.testing.assert_allclose(relative_hausdorff_errors(outputs, Y), [2.0, 0.5], rtol=1e-15)


@pytest.mark.statement("interp-prop-softmax-limit")
@pytest.mark.parametrize("seed", [3, 8, 11])
def test_critical_temperature_meets_its_tolerance_and_is_the_largest_that_does(seed):
    """tau* is the largest temperature at which the a-priori bound is within `tolerance`: the
    bound at tau* meets it, and the bound, increasing in tau, exceeds it 1% higher. The
    bisection runs 60 halvings of log(1e18) (relative 4e-17 in tau), far inside that 1%."""
    X, Y = DATASETS[seed]
    T = build_hardmax_interpolator(X, Y, rng=seed).transformer
    tol = 1e-6 * max(1.0, max(np.abs(Z).max() for Z in Y))
    tau = critical_temperature(T, X, tol)

    def worst(t):
        return max(b.max() for b in softmax_deviation_bound(T, X, t))

    assert worst(tau) <= tol < worst(1.01 * tau)


@pytest.mark.statement("interp-thm-softmax")
@pytest.mark.parametrize("seed", [3, 6, 8, 11, 15])
def test_snap_radius_is_the_narrowest_plateau_half_width(seed):
    """The snap radius is min_k delta_k / 2, the half-width of the narrowest plateau, and the
    fill is max_k dist_k / (delta_k / 2) over the tokens: so snap_radius * fill <= the largest
    distance (collapse_radius), with equality when the fill is attained on the narrowest
    plateau (seed 3). Products and quotients of the same numbers: 1e-12 relative. A radius of
    min_k delta_k, the full width, would break it by up to a factor 2."""
    X, Y = DATASETS[seed]
    interp = build_softmax_interpolator(X, Y, rng=seed)
    assert interp.collapse_radius > 0
    assert interp.snap_radius * interp.plateau_fill <= interp.collapse_radius * (1 + 1e-12)
    if seed == 3:
        assert interp.snap_radius * interp.plateau_fill == pytest.approx(
            interp.collapse_radius, rel=1e-12
        )


#: A feed-forward layer that adds nothing (W = 0): blocks of attention alone
NO_FEED_FORWARD = FeedForward(U=np.zeros((1, 2)), b=np.zeros(1), W=np.zeros((2, 1)))


@pytest.mark.statement("interp-prop-softmax-limit")
@pytest.mark.parametrize("tau", [0.25, 0.5, 1.0])
def test_deviation_bound_uses_the_jacobian_of_the_active_units(tau):
    """A sharp example, then a feed-forward layer whose Jacobian depends on the active units.

    Tokens x_1 = (1, h), x_2 = (-1, h), A = [[0, 1/h], [0, 0]]: A x_i = e_1, so both queries
    pick x_1 with margin 2, and the softmax puts eps / (1 + eps), eps = e^{-2/tau}, on x_2: the
    first coordinate of both outputs moves from 1 by 2 eps / (1 + eps). The layer
    FF(y) = y + 10 (relu(y_1) + relu(-y_1)) e_1 = y + 10 |y_1| e_1 has W U = 0 (its two units
    cancel) but the Jacobian I + 10 e_1 e_1^T where only the first unit is on (y_1 = 1, far from
    the kink at 0), so the deviation is 22 eps / (1 + eps) in closed form (rounding of O(1)
    numbers over deviations >= 7e-3: 1e-10). The bound takes the norm 11 of that Jacobian
    (11 times 2 R eps with R = |x_1| = 1.005: sharp to 1% + eps); with the norm of I + W U = I,
    taking both units on, it would be 11 times too small."""
    h = 0.1
    X = np.array([[1.0, h], [-1.0, h]])
    sharp = SelfAttention(A=np.array([[0.0, 1.0 / h], [0.0, 0.0]]), V=np.eye(2), rho=0.0)
    absolute = FeedForward(U=[[1.0, 0.0], [-1.0, 0.0]], b=[0.0, 0.0], W=[[10.0, 10.0], [0, 0]])
    T = Transformer(
        (TransformerBlock(NO_FEED_FORWARD, sharp), TransformerBlock(absolute, SelfAttention()))
    )
    hard = T([X])[0]
    soft = T.with_attention("softmax", tau)([X])[0]
    deviation = np.linalg.norm(soft - hard, axis=1)
    eps = np.exp(-2.0 / tau)
    np.testing.assert_allclose(deviation, 22 * eps / (1 + eps), rtol=1e-10)
    bound = softmax_deviation_bound(T, [X], tau)[0]
    assert np.all(deviation <= bound * (1 + 1e-12))


@pytest.mark.statement("interp-prop-softmax-limit")
@pytest.mark.parametrize("tau", [0.2, 0.25])
def test_deviation_bound_gives_up_at_a_tie_between_distinct_perturbed_keys(tau):
    """A hardmax tie between distinct keys amplifies any perturbation to O(1): the bound must
    then be infinite for that sequence.

    The first block (residual, A x = (x_2 / h, 0)) sends the three tokens to y_1 = (2, 2h),
    y_2 = (0, 2h), y_3 = (-1, h - 1) under hardmax, and the softmax moves y_1 and y_2 by about
    e^{-1/tau} (their margin is 1). The second block scores with A = w e_1^T, w orthogonal to
    y_1 - y_3: query y_1 ties y_1 and y_3 (hardmax: their midpoint), and the perturbation of
    y_1 alone shifts the score difference by |w| e^{-1/tau} ~ 300 e^{-1/tau} >> tau, so the
    softmax puts nearly all weight on one of them: the output moves by about |y_1 - y_3| / 2 =
    1.6, though the first block's own (finite) bound is below 0.1. A finite bound there, of
    the size of the incoming deviation, would be off by a factor 10 or more."""
    h, k = 0.1, 100.0
    X = np.array([[1.0, h], [-1.0, h], [0.0, -1.0]])
    first = SelfAttention(A=np.array([[0.0, 1.0 / h], [0.0, 0.0]]), V=np.eye(2), rho=1.0)
    w = -k * np.array([-(h + 1), 3.0])  # orthogonal to y_1 - y_3 = (3, h + 1)
    tie = SelfAttention(A=np.outer(w, [1.0, 0.0]), V=np.eye(2), rho=0.0)
    head = Transformer((TransformerBlock(NO_FEED_FORWARD, first),))
    T = Transformer((*head.blocks, TransformerBlock(NO_FEED_FORWARD, tie)))
    hard = T([X])[0]
    np.testing.assert_allclose(hard[0], [0.5, -0.35], rtol=1e-14)  # the midpoint of y_1, y_3
    with np.errstate(under="ignore"):
        soft = T.with_attention("softmax", tau)([X])[0]
    deviation = np.linalg.norm(soft - hard, axis=1)
    incoming = softmax_deviation_bound(head, [X], tau)[0]
    assert deviation.max() > 1.0 > 10 * incoming.max()
    bound = softmax_deviation_bound(T, [X], tau)[0]
    assert np.all(deviation <= bound)


def test_train_tikhonov_is_adam_with_the_documented_cosine_step():
    """`train_tikhonov` follows the update of its docstring, step by step.

    An independent transcription of that update (Adam, decay rates 0.9 and 0.999, bias-corrected
    moments, step ``lr/2 (1 + cos(pi (t - 1) / T))`` at epoch ``t``: PyTorch's
    ``CosineAnnealingLR(T_max=T)`` stepped after each epoch, the authors' schedule, so the first
    step is ``lr`` and none is zero; best iterate kept, the last one included) is run for a few
    epochs from the same start. With a small ``lr`` the objective decreases at every step, so the
    best iterate is the last one. The two do the same float64 operations up to their order, so
    they agree to rounding: a few ulps of ``lr`` per epoch (atol 1e-14 for lr = 1e-3, T = 6). A
    reversed annealing (step growing to lr), a schedule one epoch ahead (last step zero) or a
    missing bias correction move ``theta`` by about ``lr / T``.
    """
    data = tikhonov_dataset(3, 5, 3, 2, rng=4)
    theta0 = np.random.default_rng(5).normal(size=data.exact.size) * 0.5
    lr, T, eps = 1e-3, 6, 0.1
    theta, m1, m2 = theta0.copy(), 0.0, 0.0
    values = [tikhonov_objective(theta, data, eps)[0]]
    for t in range(1, T + 1):
        g = tikhonov_objective(theta, data, eps)[1]
        m1 = 0.9 * m1 + 0.1 * g
        m2 = 0.999 * m2 + 0.001 * g**2
        hat1, hat2 = m1 / (1 - 0.9**t), m2 / (1 - 0.999**t)
        theta = theta - lr / 2 * (1 + np.cos(np.pi * (t - 1) / T)) * hat1 / (np.sqrt(hat2) + 1e-8)
        values.append(tikhonov_objective(theta, data, eps)[0])
    assert np.all(np.diff(values) < 0)  # every step moves and decreases: the best is the last
    fit = train_tikhonov(data, eps, theta0=theta0, epochs=T, lr=lr)
    np.testing.assert_allclose(fit.theta, theta, rtol=0, atol=1e-14)
    np.testing.assert_allclose(fit.objective, values[-1], rtol=1e-13)


def test_train_tikhonov_first_step_is_the_full_adam_step():
    """One epoch is one Adam step of the full size ``lr``, as the authors' first epoch.

    At ``t = 1`` the bias-corrected moments are ``g`` and ``g^2``, so Adam moves each coordinate
    by ``lr g / (|g| + 1e-8)``, about ``lr`` times its sign (PyTorch's cosine schedule is at its
    maximum ``lr`` for the first epoch). The closed form and the library do the same few float64
    operations: rtol 1e-12. A schedule one epoch ahead has ``cos(pi) = -1`` and does not move.
    """
    data = tikhonov_dataset(3, 5, 3, 2, rng=4)
    theta0 = np.random.default_rng(5).normal(size=data.exact.size) * 0.5
    lr, eps = 1e-3, 0.1
    g = tikhonov_objective(theta0, data, eps)[1]
    step = theta0 - lr * g / (np.abs(g) + 1e-8)
    assert tikhonov_objective(step, data, eps)[0] < tikhonov_objective(theta0, data, eps)[0]
    fit = train_tikhonov(data, eps, theta0=theta0, epochs=1, lr=lr)
    np.testing.assert_allclose(fit.theta, step, rtol=1e-12)


def test_factored_matrix_is_left_times_right_transpose():
    """``Factored(L, R).matrix = L R^T = sum_k l_k r_k^T`` (a sum of outer products), 2 d r params.

    The separation stage uses ``V = Factored(gain w, u)`` (``V x = gain w <u, x>``) and adapts
    to whatever shifts it gets, so the interpolation tests do not see a transposed product; the
    outer-product sum is exact up to one rounding per entry (rtol 1e-15 for r = 2 terms).
    """
    rng = np.random.default_rng(8)
    left, right = rng.normal(size=(4, 2)), rng.normal(size=(4, 2))
    m = Factored(left, right)
    outer = np.outer(left[:, 0], right[:, 0]) + np.outer(left[:, 1], right[:, 1])
    np.testing.assert_allclose(m.matrix, outer, rtol=1e-15, atol=1e-15)
    assert m.n_params == 2 * 4 * 2
    x = rng.normal(size=4)
    v = SelfAttention(A=Identity(4), V=m, rho=0.0)(x[None, :])[0]  # one token: V x
    np.testing.assert_allclose(v, left @ (right.T @ x), rtol=1e-14, atol=1e-14)


@pytest.mark.statement("interp-prop-softmax-limit")
def test_deviation_bound_gives_up_at_an_uneven_tie_between_distinct_keys():
    """Hardmax ties keys whose scores differ by less than its tolerance (1e-9 relative) and
    averages them; softmax weighs them by e^{score / tau} and, once tau is below the score gap,
    puts almost all weight on one of them: undisturbed inputs, and yet a deviation of order one.

    A = e_1 e_1^T, x_1 = (1, 0), x_2 = (1 + 1e-11, 1): every query scores x_2 above x_1 by
    1e-11 times its first coordinate (a hardmax tie) and x_3 = (0.5, -1) lower by at least 0.25.
    Hardmax sends all three to the midpoint (1, 0.5); at tau = 1e-16 the softmax sends them to
    x_2, half the distance |x_1 - x_2| = 1 away (weights off by e^{-1e-11 / 2e-16}: none), and
    at tau = 1e-6 still 2.5e-6 away (the weights of x_1 and x_2 differ by about 1e-11 / tau).
    The bound must be infinite: a finite one is at most the leak from x_3, below 4 e^{-0.25 /
    tau} (0 to the last digit)."""
    u = np.array([1.0, 0.0])
    sa = SelfAttention(A=Factored(u, u), V=Identity(2), rho=0.0)
    T = Transformer((TransformerBlock(NO_FEED_FORWARD, sa),))
    X = np.array([[1.0, 0.0], [1.0 + 1e-11, 1.0], [0.5, -1.0]])
    hard = T([X])[0]
    np.testing.assert_allclose(hard, [[1.0, 0.5]] * 3, rtol=1e-10)
    for tau, least in [(1e-16, 0.49), (1e-6, 1e-6)]:
        deviation = np.linalg.norm(T.with_attention("softmax", tau)([X])[0] - hard, axis=1)
        assert deviation.min() > least
        assert np.all(deviation <= softmax_deviation_bound(T, [X], tau)[0])
    with pytest.raises(ValueError, match="tie of distinct tokens"):
        critical_temperature(T, [X], 1e-6)
    # an exact tie of distinct keys is averaged by softmax too: the bound stays finite
    X[1, 0] = 1.0
    hard = T([X])[0]
    deviation = np.linalg.norm(T.with_attention("softmax", 1e-6)([X])[0] - hard, axis=1)
    bound = softmax_deviation_bound(T, [X], 1e-6)[0]
    assert np.all(np.isfinite(bound)) and np.all(deviation <= bound + 1e-15)


def test_overlapping_dataset_counts_the_sets_its_lengths_allow():
    """A pool of 3 tokens and inputs of one token allow 3 distinct input sets, not 2^3 - 1 = 7:
    asking for 4 is refused (it used to draw forever), asking for 3 gives the three singletons."""
    with pytest.raises(ValueError, match="allow 3 distinct input sets"):
        overlapping_dataset(4, 2, pool_size=3, max_length=1, rng=0)
    X, _ = overlapping_dataset(3, 2, pool_size=3, max_length=1, rng=0)
    assert sorted(Z.shape[0] for Z in X) == [1, 1, 1]
    assert len(check_dataset(X, [Z.copy() for Z in X])[0]) == 3  # pairwise distinct sets
