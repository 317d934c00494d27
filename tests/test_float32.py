"""The float32 path: attention fields, `integrate` and `simulate` in single precision agree
with float64 to bounds derived from float32's unit round-off, and stay in float32.

Tolerances. float32's unit round-off is u = 2^-24 ~ 6e-8. A softmax-type velocity entry is a
ratio of two sums over n keys of exponentials of scores s_ij = <f_i, g_j> (+ bias); a score
computed from d products carries an absolute error of at most ~d u |f_i| |g_j| (+ the folded
shift, of the same size), which exp turns into a relative error of each weight; each sum adds
at most ~n u relative (the tiles accumulate in any order). So a velocity entry, a signed
average, is off by at most ~(n + d s_max + 10) u times the largest entry, with s_max the
largest |score|; the worst case is rarely approached (measured errors are 100-1000x below).
An ODE step adds at most that times h plus the rounding of the state, u |X|, and K steps of
a flow whose Lipschitz constant is Lip add up to at most K (u + h tol_field) e^(Lip T) |X|.
"""

import numpy as np
import pytest

from token_dynamics import integrate
from token_dynamics.attention import Causal, Sinkhorn, Softmax, with_positions
from token_dynamics.stochastic import MLPNoise, StochasticTransformer, simulate

from .test_attention import all_fields

U32 = float(np.finfo(np.float32).eps) / 2  # unit round-off, 6e-8


def field_bound(n, d, smax):
    """Worst-case relative error of a float32 velocity (see the module docstring)."""
    return (n + d * smax + 10) * U32


def assert_within(actual, ref, bound):
    err = np.abs(np.asarray(actual, dtype=np.float64) - ref).max() / np.abs(ref).max()
    assert err <= bound, f"relative error {err:.2e} > bound {bound:.2e}"


@pytest.mark.parametrize("d", [2, 16, 64])
def test_every_variant_in_float32_agrees_with_float64(d):
    rng = np.random.default_rng(20)
    n = 300
    X = rng.standard_normal((n, d)) / np.sqrt(np.sqrt(d))
    X32 = X.astype(np.float32)
    for name, field in all_fields(rng, d).items():
        if name == "hardmax":
            continue  # a discontinuous field: float32 may pick another best key (next test)
        v64 = field.velocity(X)
        v32 = field.velocity(X32)  # a float32 array selects float32
        assert v32.dtype == np.float32 and v64.dtype == np.float64, name
        S = np.abs(X @ X.T).max() * 4.0  # |<A x, y>| with |A| <= ~2 (beta, 1/s and L2's factor 2)
        assert_within(v32, v64, field_bound(n, d, S))
        if name != "multihead":
            P32 = field.attention_matrix(X, dtype="float32")
            assert P32.dtype == np.float32
            assert_within(P32, field.attention_matrix(X), field_bound(n, d, S))


def test_hardmax_in_float32_where_the_best_key_is_clear():
    """With every row's best score ahead of the second by far more than float32 round-off,
    float32 selects the same keys: the same velocity to the rounding of the values."""
    rng = np.random.default_rng(21)
    d = 4
    X = rng.standard_normal((200, d))
    field = all_fields(rng, d)["hardmax"]
    A = field.A
    S = np.sort(X @ A.T @ X.T, axis=1)
    clear = S[:, -1] - S[:, -2] > 1e-4 * np.abs(S[:, -1]).max()
    v64 = field.velocity(X)[clear]
    v32 = field.velocity(X, dtype=np.float32)[clear]
    assert clear.mean() > 0.9 and v32.dtype == np.float32
    assert_within(v32, v64, 10 * d * U32)


def test_large_scores_in_float32_stay_finite():
    """Scores up to 1e3 (far beyond float32's exp range, 88): the shift keeps every weight in
    range; the error follows the scores' round-off, d u |s| relative."""
    rng = np.random.default_rng(22)
    n, d = 400, 16
    X = rng.standard_normal((n, d)) / 2
    field = Softmax(np.eye(d), np.eye(d), beta=100.0)
    v32 = field.velocity(X, dtype="float32")
    assert np.all(np.isfinite(v32))
    smax = 100.0 * np.abs(X @ X.T).max()
    assert_within(v32, field.velocity(X), field_bound(n, d, smax))


def test_small_tokens_in_float32():
    """Tokens of 1e-30: the value columns are brought to unit size by a power of two before
    the weights multiply them; that scale was a float64 array, which promoted them and made
    BLAS refuse the float32 output. The result is the float64 one of the same float32 tokens to
    the float32 rounding of the values (the scores are ~1e-60, so the weights are uniform)."""
    X = (np.random.default_rng(23).standard_normal((50, 2)) * 1e-30).astype(np.float32)
    for field in (Softmax(np.eye(2), np.eye(2)), Softmax(np.eye(2), np.eye(2), beta=-3.0)):
        v32 = field.velocity(X)
        assert v32.dtype == np.float32
        ref = field.velocity(X.astype(np.float64))
        assert np.abs(v32 - ref).max() <= 8 * 50 * float(np.finfo(np.float32).eps) * 1e-30 * 4


def test_causal_and_sinkhorn_in_float32():
    rng = np.random.default_rng(23)
    n, d = 64, 3
    X = rng.standard_normal((n, d))
    Xp = with_positions(X)
    A, V = np.eye(d) / 2, np.eye(d)
    causal = Causal(A, V)
    assert_within(causal.velocity(Xp, dtype="float32"), causal.velocity(Xp), field_bound(n, d, 20))
    sk = Sinkhorn(A, V, eps=1.0)
    v32 = sk.velocity(X, dtype="float32")  # the plan is solved in float64
    assert v32.dtype == np.float32
    assert_within(v32, sk.velocity(X), field_bound(n, d, 20))


def test_dtype_is_checked():
    field = Softmax(np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match="`dtype` must be float64 or float32"):
        field.velocity(np.eye(2), dtype="float16")
    with pytest.raises(ValueError, match="`dtype` must be float64 or float32"):
        integrate(field, np.eye(2), [0.0, 1.0], dtype=int)
    model = StochasticTransformer(MLPNoise("relu", width=4))
    with pytest.raises(ValueError, match="`dtype` must be float64 or float32"):
        simulate(model, np.eye(2), T=1.0, L=1, dtype="complex64")


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_integrate_in_float32_agrees_with_float64(method):
    rng = np.random.default_rng(24)
    n, d, T, K = 256, 16, 1.0, 20
    X0 = rng.standard_normal((n, d)) / 4
    A = rng.standard_normal((d, d)) / (2 * np.sqrt(d))
    V = rng.standard_normal((d, d)) / (2 * np.sqrt(d))
    field = Softmax(A, V)
    t64 = integrate(field, X0, [0.0, T], method=method, dt=T / K)
    t32 = integrate(field, X0, [0.0, T], method=method, dt=T / K, dtype="float32")
    assert t32.states.dtype == np.float32 and t64.states.dtype == np.float64
    # Lipschitz constant of the softmax field on |x| <= R: |V| (1 + 2 |A| R^2)
    R = np.linalg.norm(t64.states, axis=-1).max()
    lip = np.linalg.norm(V, 2) * (1 + 2 * np.linalg.norm(A, 2) * R**2)
    tol_field = field_bound(n, d, np.linalg.norm(A, 2) * R**2)
    bound = K * (U32 + (T / K) * tol_field) * np.exp(lip * T)
    assert bound < 1e-2  # not vacuous: e^(Lip T) is about 20 here
    assert_within(t32.final, t64.final, bound)


@pytest.mark.parametrize("width", [256, None])
def test_simulate_in_float32_agrees_with_float64(width):
    """The same draws (the weights are drawn in float64 and rounded): over L layers each adds
    at most ~(N + m + d) u of round-off (attention sums over N tokens, the MLP over m units),
    and the layer normalisation keeps the tokens on the sphere."""
    rng = np.random.default_rng(25)
    N, d, L = 64, 8, 20
    X0 = rng.standard_normal((N, d))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    model = StochasticTransformer(MLPNoise("tanh", width=width))
    r64 = simulate(model, X0, T=0.5, L=L, rng=3)
    r32 = simulate(model, X0, T=0.5, L=L, rng=3, dtype="float32")
    assert r32.X.dtype == np.float32
    m = N if width is None else width  # the Gaussian field: an N x N root, in float64
    assert_within(r32.X, r64.X, 10 * L * (N + m + d) * U32)
