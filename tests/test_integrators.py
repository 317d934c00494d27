"""Tests of token_dynamics.integrators and token_dynamics.geometry on closed forms.

Tolerances: integrated quantities are compared at C h^p (p = 1 for Euler, 4 for RK4) or at the
solve_ivp tolerance, as derived in each test; 1e-15 to 1e-12 is round-off of identical arithmetic.
"""

import itertools
import math
import re

import numpy as np
import pytest
from scipy.linalg import expm

from token_dynamics import _richardson
from token_dynamics.attention import Softmax, Unnormalised
from token_dynamics.diagnostics import cluster_count, interaction_energy, min_inner_product
from token_dynamics.geometry import normalize, project_tangent
from token_dynamics.integrators import (
    DEFAULT_TOLERANCES,
    FLOAT32_TOLERANCES,
    STATUSES,
    ToleranceWarning,
    Trajectory,
    integrate,
)
from token_dynamics.sampling import uniform_sphere

from .helpers import loglog_slope


def linear_field(M):
    return lambda t, X: X @ M.T


@pytest.fixture
def linear_problem():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((3, 3)) / np.sqrt(3)
    X0 = rng.standard_normal((4, 3))
    return M, X0, X0 @ expm(M).T  # exact solution at t = 1


@pytest.mark.statement("tok-prop-resnet-euler")
def test_euler_step_is_exactly_a_residual_layer():
    rng = np.random.default_rng(1)
    X0 = rng.standard_normal((5, 2))
    field = Softmax(rng.standard_normal((2, 2)), rng.standard_normal((2, 2)))
    h = 0.1
    traj = integrate(field, X0, [0.0, h], method="euler", dt=h)
    np.testing.assert_array_equal(traj.states[1], X0 + h * field.velocity(X0))  # bitwise
    # L layers of scale T/L on the sphere = ResNet + LayerNorm
    Xs = normalize(X0)
    traj = integrate(field, Xs, [0.0, 3 * h], method="euler", dt=h, geometry="sphere")
    X = Xs
    for layer in range(3):
        X = X + h * field.velocity(X, layer * h)
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
    np.testing.assert_allclose(traj.final, X, rtol=0, atol=1e-15)
    assert traj.n_steps == 3


@pytest.mark.statement("tok-prop-resnet-euler")
@pytest.mark.parametrize(
    ("method", "order", "steps"), [("euler", 1, [20, 40, 80, 160]), ("rk4", 4, [5, 10, 20, 40])]
)
def test_convergence_orders_against_expm(linear_problem, method, order, steps):
    """Global error ~ C h^p: the fitted log-log slope is p to +-0.2 (steps chosen in the
    asymptotic range, errors from 1e-1 to 1e-9, far above round-off)."""
    M, X0, exact = linear_problem
    hs, errors = [], []
    for m in steps:
        traj = integrate(linear_field(M), X0, [0.0, 1.0], method=method, dt=1.0 / m)
        hs.append(1.0 / m)
        errors.append(np.abs(traj.final - exact).max())
    assert abs(loglog_slope(hs, errors) - order) < 0.2


def test_rk4_agrees_with_solve_ivp():
    rng = np.random.default_rng(2)
    X0 = rng.standard_normal((10, 2))
    field = Softmax(rng.standard_normal((2, 2)), rng.standard_normal((2, 2)) / 2)
    times = np.linspace(0, 2, 5)
    rk4 = integrate(field, X0, times, method="rk4", dt=0.005)
    ref = integrate(field, X0, times, method="solve_ivp", rtol=1e-12, atol=1e-13)
    # RK4 global error ~ h^4 = 6e-10 times a constant of order one; solve_ivp at 1e-12
    np.testing.assert_allclose(rk4.states, ref.states, rtol=0, atol=1e-8)
    assert ref.method == "solve_ivp" and ref.states.shape == (5, 10, 2)


@pytest.mark.parametrize("method", ["euler", "rk4", "solve_ivp"])
def test_sphere_constraint_along_trajectories(method):
    X0 = uniform_sphere(12, 3, rng=3)
    field = Softmax(np.eye(3), np.eye(3), beta=2.0)
    traj = integrate(field, X0, np.linspace(0, 2, 9), method=method, dt=0.05, geometry="sphere")
    norms = np.linalg.norm(traj.states, axis=-1)
    # renormalised steps: a few ulps; solve_ivp integrates the projected field, which keeps
    # |x| = 1 exactly, so the drift is its local error, controlled by rtol = 1e-10
    tol = 1e-8 if method == "solve_ivp" else 1e-12
    np.testing.assert_allclose(norms, 1.0, rtol=0, atol=tol)


@pytest.mark.statement("tok-prop-sphere-energy")
@pytest.mark.parametrize("cls", [Softmax, Unnormalised])
def test_interaction_energy_is_nondecreasing_on_the_sphere(cls):
    beta = 1.5
    X0 = uniform_sphere(20, 3, rng=4)
    field = cls(np.eye(3), np.eye(3), beta=beta)
    traj = integrate(field, X0, np.linspace(0, 5, 51), method="rk4", dt=0.01, geometry="sphere")
    E = np.array([interaction_energy(X, beta=beta) for X in traj.states])
    # non-decreasing up to round-off of the energy (~1e-15 relative to E ~ e^beta)
    assert np.all(np.diff(E) >= -1e-12 * E[:-1])
    assert E[-1] > E[0] and E[-1] <= np.exp(beta) / (2 * beta) * (1 + 1e-12)


def test_the_energy_at_another_temperature_can_decrease_on_the_sphere():
    """The remark after tok-prop-sphere-energy: with Q = K = I (A = I / sqrt(d)) the energy that
    increases is E_{beta / sqrt d}, and E_beta can decrease: four tokens at e_1 and two at 150
    degrees on either side, d = 64, beta = 2 (the witness of the tokens notebook)."""
    d, beta, angle = 64, 2.0, np.radians(150.0)
    X0 = np.zeros((6, d))
    X0[:4, 0] = 1.0
    X0[4:, :2] = [[np.cos(angle), np.sin(angle)], [np.cos(angle), -np.sin(angle)]]
    field = Softmax(np.eye(d) / np.sqrt(d), np.eye(d), beta=beta)
    traj = integrate(field, X0, [0.0, 0.1], method="rk4", dt=0.01, geometry="sphere")
    E = {b: [interaction_energy(X, beta=b) for X in traj.states] for b in (beta, beta / 8)}
    # relative rates -1.3e-2 and +1.8e-3 at t = 0: over t = 0.1 the changes are 1e-3 and 2e-4 of
    # E, far above RK4's error (1e-8 per step) and the energy's rounding (1e-15)
    assert E[beta][1] < (1 - 5e-4) * E[beta][0]
    assert E[beta / 8][1] > (1 + 5e-5) * E[beta / 8][0]


@pytest.mark.statement("tok-thm-sphere-clustering")
@pytest.mark.parametrize("cls", [Softmax, Unnormalised])
def test_tokens_cluster_to_one_point_on_the_sphere(cls):
    """Spec §1 test 8 (g11): d = 3, beta = 2, n = 32, RK4, h = 0.01, 3000 steps; the theorem
    covers unnormalised attention too (its tokens meet by t = 10: 1 - min <x_i, x_j> = 1e-16)."""
    X0 = uniform_sphere(32, 3, rng=5)
    field = cls(np.eye(3), np.eye(3), beta=2.0)
    traj = integrate(field, X0, [0.0, 30.0], method="rk4", dt=0.01, geometry="sphere")
    assert traj.n_steps == 3000
    assert min_inner_product(traj.final) > 1 - 1e-6


@pytest.mark.statement("tok-prop-empirical-solution")
def test_empirical_measure_is_a_weak_solution():
    """d/dt int phi dmu_t = int grad(phi) . Gamma_{mu_t} dmu_t for the particles' measure."""
    rng = np.random.default_rng(6)
    X0 = rng.standard_normal((15, 2))
    field = Softmax(rng.standard_normal((2, 2)), rng.standard_normal((2, 2)))
    a = np.array([0.7, -1.3])
    phi = lambda X: np.sin(X @ a).mean()  # noqa: E731
    grad_phi = lambda X: np.cos(X @ a)[:, None] * a  # noqa: E731
    t, k = 0.5, 1e-3
    traj = integrate(field, X0, [0.0, t - k, t, t + k], method="solve_ivp", rtol=1e-12, atol=1e-13)
    lhs = (phi(traj.states[3]) - phi(traj.states[1])) / (2 * k)
    Xt = traj.states[2]
    rhs = np.mean(np.sum(grad_phi(Xt) * field.velocity(Xt), axis=1))
    # central difference error ~ k^2 |phi'''| ~ 1e-6; solver error / k ~ 1e-9
    np.testing.assert_allclose(lhs, rhs, rtol=0, atol=1e-5)


def test_dt_substeps_and_outputs():
    X0 = np.ones((1, 1))
    traj = integrate(lambda t, X: 0 * X + 1, X0, [0.0, 0.1, 0.3], method="euler", dt=0.01)
    assert traj.n_steps == 30  # 0.1 / 0.01 counts 10 steps despite rounding
    np.testing.assert_allclose(traj.states[:, 0, 0], [1.0, 1.1, 1.3], rtol=1e-14)
    assert isinstance(traj, Trajectory) and traj.geometry == "euclidean"
    np.testing.assert_array_equal(traj.final, traj.states[-1])
    single = integrate(lambda t, X: X, X0, [0.0])
    assert single.states.shape == (1, 1, 1)


def test_time_dependent_field_uses_the_right_times():
    """x' = t x: x(t) = exp(t^2/2); RK4 stages must evaluate at t + h/2 and t + h."""
    traj = integrate(lambda t, X: t * X, np.ones((1, 1)), [0.0, 1.0], method="rk4", dt=0.01)
    # RK4 global error ~ h^4 = 1e-8 times a constant well below one here (smooth, slow field)
    np.testing.assert_allclose(traj.final[0, 0], np.exp(0.5), rtol=1e-9)


def test_blow_up_is_reported():
    with pytest.raises(FloatingPointError, match="non-finite at t ="):
        integrate(lambda t, X: X**2, np.ones((1, 1)), [0.0, 2.0], method="euler", dt=0.01)


def test_progress_bar(capsys):
    traj = integrate(lambda t, X: -X, np.ones((2, 2)), [0.0, 1.0], dt=0.1, progress=True)
    assert traj.n_steps == 10
    assert "integrate" in capsys.readouterr().err
    integrate(lambda t, X: -X, np.ones((2, 2)), [0.0, 1.0], method="solve_ivp", progress=True)


def test_inputs_are_not_mutated():
    X0 = normalize(np.random.default_rng(7).standard_normal((4, 3)))
    times = np.array([0.0, 1.0])
    c0, ct = X0.copy(), times.copy()
    integrate(Softmax(np.eye(3), np.eye(3)), X0, times, geometry="sphere", dt=0.1)
    np.testing.assert_array_equal(X0, c0)
    np.testing.assert_array_equal(times, ct)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"field": "softmax"}, "`field`"),
        ({"method": "rk45"}, "`method`"),
        ({"geometry": "torus"}, "`geometry`"),
        ({"times": [0.0, 0.0]}, "`times`"),
        ({"times": [[0.0, 1.0]]}, "`times`"),
        ({"dt": -0.1}, "`dt`"),
        ({"rtol": 0.0}, "`rtol`"),
        ({"X0": np.ones(3)}, "`X0`"),
        ({"field": lambda t, X: X[:1]}, "`field`"),
        ({"X0": np.zeros((2, 2)), "geometry": "sphere"}, "`X0`"),
        ({"progress": 1}, "`progress`"),
    ],
)
def test_bad_inputs_raise_named_errors(kwargs, match):
    args = {"field": lambda t, X: -X, "X0": np.ones((2, 2)), "times": [0.0, 1.0]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        integrate(args.pop("field"), args.pop("X0"), args.pop("times"), **args)


@pytest.mark.parametrize("method", ["euler", "rk4", "solve_ivp", "RK45", "LSODA"])
def test_one_failure_policy_for_every_method(method):
    # x' = x^2 from 1 blows up at t = 1: every method raises the same FloatingPointError naming
    # the method and a time (RK4's stages no longer reach the field as NaN tokens).
    with pytest.raises(FloatingPointError, match=rf"method='{method}'.*(blow|non-finite)|"
                       rf"non-finite at t = .* method='{method}'"):  # fmt: skip
        integrate(lambda t, X: X**2, np.ones((1, 1)), [0.0, 2.0], method=method, dt=0.01)


@pytest.mark.parametrize("method", ["euler", "rk4", "solve_ivp"])
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_field_is_reported_at_the_initial_state(method, value):
    # A field that is non-finite everywhere made solve_ivp shrink its step forever; a list X0
    # crashed with AttributeError. Now the first evaluation, at t = 0, raises.
    def field(t, X):
        return np.full_like(X, value)

    with pytest.raises(FloatingPointError, match=rf"velocity field's values became non-finite "
                       rf"at t = 0.0 with method='{method}'"):  # fmt: skip
        integrate(field, [[1.0, 2.0], [0.5, 0.0]], [0.0, 1.0], method=method)


def test_vocabulary_and_result_shape():
    # A solve_ivp method name is a `method` of its own, the same as method="solve_ivp" with
    # ivp_method: identical arithmetic, so identical states.
    X0 = np.array([[1.0, 0.5]])
    a = integrate(lambda t, X: -X, X0, [0.0, 0.5, 1.0], method="RK45", rtol=1e-8)
    b = integrate(lambda t, X: -X, X0, [0.0, 0.5, 1.0], method="solve_ivp", ivp_method="RK45",
                  rtol=1e-8)  # fmt: skip
    np.testing.assert_array_equal(a.states, b.states)
    assert a.method == "RK45" and a.status == b.status == "completed" and a.message
    with pytest.raises(ValueError, match="`ivp_method` is only read with method='solve_ivp'"):
        integrate(lambda t, X: -X, X0, [0.0, 1.0], method="rk4", ivp_method="RK45")


def test_a_step_budget_refuses_a_dt_that_would_never_finish():
    """Issue 15 (no hang): dt = 1e-200 on [0, 1] asks for 1e200 steps; it is refused by name
    before any step, for fixed steps and as the maximal step of solve_ivp."""
    for method in ("euler", "rk4", "solve_ivp"):
        with pytest.raises(ValueError, match=r"`dt` = 1e-200 asks for about 1e\+200 steps"):
            integrate(lambda t, X: -X, np.ones((1, 2)), [0.0, 1.0], method=method, dt=1e-200)


def test_a_field_refusing_the_state_names_field_and_X0():
    """A field built for d = 2 given tokens in d = 3 says which arguments disagree."""
    field = Softmax(np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match=r"`field` refused the state built from `X0`"):
        integrate(field, np.ones((3, 3)), [0.0, 1.0])


def test_a_complex_field_is_refused_not_cast():
    # the cast to the tokens' dtype dropped the imaginary part with a mere ComplexWarning
    with pytest.raises(TypeError, match=r"`field` must return real numbers; .* complex128"):
        integrate(lambda t, X: 1j * X, np.ones((1, 2)), [0.0, 1.0], dt=0.1)


# --- The default step (dt=None): step doubling to a stated tolerance (issue 28, item 1) ---


@pytest.fixture(scope="module")
def clustering_problem():
    """The issue's case: Softmax(3I, I) on the sphere up to t = 12, where one RK4 step of size
    12 was off by 1.6; the reference is DOP853 at rtol 1e-12 (error ~1e-11, far below)."""
    X0 = uniform_sphere(32, 3, rng=0)
    field = Softmax(3 * np.eye(3), np.eye(3))
    times = np.linspace(0.0, 12.0, 5)
    ref = integrate(field, X0, times, method="solve_ivp", geometry="sphere", rtol=1e-12,
                    atol=1e-13)  # fmt: skip
    return field, X0, times, ref.states


@pytest.mark.parametrize("n_times", [2, 5])
def test_default_step_meets_the_default_tolerance(clustering_problem, n_times):
    field, X0, times, ref = clustering_problem
    pick = [0, -1] if n_times == 2 else slice(None)
    traj = integrate(field, X0, times[pick], geometry="sphere")
    rtol, atol = DEFAULT_TOLERANCES["rk4"]
    assert traj.status == "completed" and "estimated error" in traj.message
    assert traj.error_estimate is not None and traj.error_estimate <= atol + rtol  # |x_i| = 1
    # The Richardson estimate is the leading term C h^4 of the error, exact up to a relative
    # O(h): twice the tolerance bounds the true error of every token at every output time.
    err = np.linalg.norm(traj.states - ref[pick], axis=-1).max()
    assert err <= 2 * (atol + rtol)
    # the clustering picture is the reference's (one RK4 step of 12 gave 32 clusters)
    assert cluster_count(traj.final, 1e-3) == cluster_count(ref[-1], 1e-3)


def test_default_step_converges_as_the_tolerance_shrinks(clustering_problem):
    field, X0, _, ref = clustering_problem
    errors, steps = [], []
    for rtol in (1e-4, 1e-6, 1e-8, 1e-10):
        traj = integrate(field, X0, [0.0, 12.0], geometry="sphere", rtol=rtol, atol=rtol / 1e3)
        assert traj.status == "completed" and traj.error_estimate <= rtol * (1 + 1e-3)
        errors.append(np.linalg.norm(traj.final - ref[-1], axis=-1).max())
        steps.append(traj.n_steps)
    # each tolerance is met by the true error up to the O(h) slack of the estimate (factor 2),
    # and RK4 needs ~ rtol^(-1/4) steps: 100 times tighter, about 3 times more steps (the
    # doubling rounds up to a power of two: between 2 and 8 times)
    assert all(e <= 2 * r for e, r in zip(errors, (1e-4, 1e-6, 1e-8, 1e-10), strict=True))
    assert all(2 <= b / a <= 8 for a, b in itertools.pairwise(steps))


def test_default_euler_meets_its_tolerance(linear_problem):
    M, X0, exact = linear_problem
    traj = integrate(linear_field(M), X0, [0.0, 0.5, 1.0], method="euler", rtol=1e-3, atol=1e-6)
    assert traj.status == "completed" and traj.n_steps > 100
    # Euler's Richardson estimate is exact up to a relative O(h), h < 1e-2 here
    tol = 1e-6 + 1e-3 * np.linalg.norm(exact, axis=-1)
    assert np.all(np.linalg.norm(traj.final - exact, axis=-1) <= 2 * tol)


def test_default_step_is_not_read_from_two_runs_that_agree_by_chance():
    """x' = sin^2(4 pi t) M x vanishes at every stage time of one and of two RK4 steps on
    [0, 1] (multiples of 1/4), so those two runs both return X0 and agree exactly: the estimate
    0 was accepted at the first comparison ("completed", 2 steps, an error of 0.6). The
    estimate must have stopped growing, which needs a comparison before it."""
    M = np.array([[0.5, 1.0], [-1.0, 0.5]])
    X0 = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, -0.8]])
    traj = integrate(lambda t, X: np.sin(4 * np.pi * t) ** 2 * X @ M.T, X0, [0.0, 1.0])
    # the flow of a scalar multiple of M: X0 e^{M int_0^1 sin^2} = X0 e^{M / 2}
    exact = X0 @ expm(M / 2).T
    rtol, atol = DEFAULT_TOLERANCES["rk4"]
    assert traj.status == "completed" and traj.n_steps > 2
    # the Richardson estimate is the error up to a relative O(h): twice the tolerance bounds it
    tol = atol + rtol * np.linalg.norm(exact, axis=-1)
    assert np.all(np.linalg.norm(traj.final - exact, axis=-1) <= 2 * tol)


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_default_step_from_tokens_at_the_origin_returns(method):
    """x' = x + 1 from x = 0: the rate |f| / |x| of the first step count is infinite (it asked
    for 1e307 steps and never returned); the coarsest run is capped at the budget, and the
    doubling then meets the tolerance against the exact e^t - 1."""
    traj = integrate(lambda t, X: X + 1.0, np.zeros((2, 2)), [0.0, 1.0], method=method)
    assert traj.status == "completed" and traj.n_steps <= 4 * _richardson.MAX_DEFAULT_STEPS
    rtol, atol = DEFAULT_TOLERANCES[method]
    tol = atol + rtol * np.linalg.norm(traj.final, axis=-1)
    # the estimate is within a relative O(h) of the error (h <= 2^-12)
    assert np.all(np.linalg.norm(traj.final - (np.e - 1), axis=-1) <= 1.01 * tol)


def test_missed_tolerance_returns_its_status_and_warns(monkeypatch):
    """x' = x^2 from 1 reaches 100 at t = 0.99, where the error of RK4 at 2^10 steps is ~h^4
    times a constant of order (1 - t)^-5 = 1e10: the tolerance cannot be met in the budget."""
    monkeypatch.setattr(_richardson, "MAX_DEFAULT_STEPS", 2**10)
    with pytest.warns(ToleranceWarning, match="misses rtol = 1e-06"):
        traj = integrate(lambda t, X: X**2, np.ones((1, 1)), [0.0, 0.99])
    assert traj.status == "tolerance_not_met" and traj.status in STATUSES
    assert traj.error_estimate > 1e-6 * 100 and "smaller `dt`" in traj.message
    assert traj.n_steps == 2**10  # the finest run of the budget is the one returned
    # past the pole no step is small enough: the finest run's failure is raised
    with pytest.raises(FloatingPointError, match=r"non-finite at t = .* method='rk4'"):
        integrate(lambda t, X: X**2, np.ones((1, 1)), [0.0, 2.0])


@pytest.mark.parametrize("method", ["euler", "rk4", "solve_ivp"])
def test_failure_time_is_printed_to_the_last_digit(method):
    """The velocity turns NaN from t = 1e6 + 1 on: the message names that time (Euler and RK4
    meet it on the grid, at 1000001.0; solve_ivp a little after), never the 1e+06 of six
    significant digits, which is also the start."""
    dt = None if method == "solve_ivp" else 0.5
    times = 1e6 + np.array([0.0, 1.0, 2.0])
    with pytest.raises(FloatingPointError, match=r"non-finite at t = (\S+) with") as caught:
        integrate(lambda t, X: X * (np.nan if t >= 1e6 + 1 else 1.0), np.ones((2, 2)), times,
                  method=method, dt=dt)  # fmt: skip
    t_fail = float(re.search(r"at t = (\S+) with", str(caught.value))[1])
    assert 1e6 + 1 <= t_fail < 1e6 + 2
    if method != "solve_ivp":
        assert t_fail == 1e6 + 1


def test_explicit_dt_is_run_as_given():
    """An explicit dt is the classical RK4 recurrence on the sphere, with no estimate."""
    rng = np.random.default_rng(3)
    X0 = normalize(rng.standard_normal((6, 3)))
    field = Softmax(rng.standard_normal((3, 3)), rng.standard_normal((3, 3)))
    h = 0.25
    traj = integrate(field, X0, [0.0, 0.5, 1.0], dt=h, geometry="sphere")
    X, states = X0, [X0]
    for s in range(4):
        t = s * h

        def f(t, Y):
            return project_tangent(Y, field.velocity(Y, t))

        k1 = f(t, X)
        k2 = f(t + h / 2, X + (h / 2) * k1)
        k3 = f(t + h / 2, X + (h / 2) * k2)
        k4 = f(t + h, X + h * k3)
        X = normalize(X + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4))
        states.append(X)
    # the same arithmetic up to the rounding of the normalisation (a few ulps of |x| = 1)
    np.testing.assert_allclose(traj.states, np.stack(states)[[0, 2, 4]], rtol=0, atol=1e-15)
    assert traj.n_steps == 4 and traj.error_estimate is None and traj.status == "completed"


def test_default_step_in_float32_uses_the_float32_tolerance(linear_problem):
    M, X0, exact = linear_problem
    traj = integrate(linear_field(M), X0, [0.0, 1.0], dtype="float32")
    rtol, atol = FLOAT32_TOLERANCES
    assert traj.status == "completed" and traj.states.dtype == np.float32
    # the estimate meets 1e-4 relative; float32 round-off (1e-7 per step) is far below it
    tol = atol + rtol * np.linalg.norm(exact, axis=-1)
    assert np.all(np.linalg.norm(traj.final - exact, axis=-1) <= 2 * tol)


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_error_estimate_is_the_richardson_difference_over_2p_minus_1(method):
    """On x' = x one step of Euler multiplies by R(h) = 1 + h, one of RK4 by the Taylor
    polynomial of e^h of degree 4, so the runs of the doubling are known in closed form: the
    finest, with step h = T / n_steps, is R(h)^(t/h) x0, the one before R(2h)^(t/(2h)) x0, and
    the reported estimate is max_t |R(h)^(t/h) - R(2h)^(t/(2h))| max_i |x_i| / (2^p - 1). The two
    runs differ by 1e-7 (RK4) or 1e-2 (Euler) and each carries n_steps * eps * e ~ 1e-14 of
    rounding: a relative 1e-7 of the estimate at most, so rtol = 1e-6. A divisor 2^p (a
    relative 1/2 for Euler, 1/15 for RK4) or any other error norm is far outside."""
    X0 = np.array([[1.0, -0.5], [0.3, 0.2]])
    times = np.array([0.0, 0.5, 1.0])
    taylor = {"euler": 1, "rk4": 4}[method]

    def R(z):
        return sum(z**k / math.factorial(k) for k in range(taylor + 1))

    traj = integrate(lambda t, X: X, X0, times, method=method)
    assert traj.status == "completed"
    h = (times[-1] - times[0]) / traj.n_steps  # equal intervals: equal steps
    fine, coarse = R(h) ** (times / h), R(2 * h) ** (times / (2 * h))
    np.testing.assert_allclose(traj.states, fine[:, None, None] * X0, rtol=1e-12)
    expected = np.abs(fine - coarse).max() * np.linalg.norm(X0, axis=1).max() / (2**taylor - 1)
    np.testing.assert_allclose(traj.error_estimate, expected, rtol=1e-6)


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_default_step_meets_the_tolerance_of_each_token_not_of_the_largest(method):
    """The tolerance is atol + rtol |x_i| token by token: a token of size 1e-3 growing as e^(4t)
    next to a still token of size 1e3 must meet its own, not atol + rtol 1e3 (which lets the
    small token's error reach 1e-3 with RK4, 10 with Euler, far above its own 5e-8 and 0.5).
    The still token has no error, so the estimate is the small token's, exact up to a
    relative O(h): twice its tolerance bounds its true error (as in the tests above)."""
    lam = np.array([4.0, 0.0])
    X0 = np.array([[1e-3, 0.0], [1e3, 0.0]])
    traj = integrate(lambda t, X: lam[:, None] * X, X0, [0.0, 1.0], method=method)
    exact = X0 * np.exp(lam)[:, None]
    rtol, atol = DEFAULT_TOLERANCES[method]
    tol = atol + rtol * np.linalg.norm(exact, axis=-1)
    assert traj.status == "completed"
    assert np.all(np.linalg.norm(traj.final - exact, axis=-1) <= 2 * tol)


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_float32_default_tolerance_is_the_loosest_of_the_two(method):
    """In float32 the default tolerances are loosened to FLOAT32_TOLERANCES, never tightened
    (float32 rounds at 6e-8: a step doubling cannot resolve RK4's 1e-6 there): the default run
    is the run with rtol, atol = max(DEFAULT_TOLERANCES, FLOAT32_TOLERANCES), bit for bit."""
    rng = np.random.default_rng(4)
    M = rng.standard_normal((3, 3)) / np.sqrt(3)
    X0 = rng.standard_normal((4, 3))
    (rtol64, atol64), (rtol32, atol32) = DEFAULT_TOLERANCES[method], FLOAT32_TOLERANCES
    rtol, atol = max(rtol64, rtol32), max(atol64, atol32)
    default = integrate(linear_field(M), X0, [0.0, 1.0], method=method, dtype="float32")
    explicit = integrate(
        linear_field(M), X0, [0.0, 1.0], method=method, dtype="float32", rtol=rtol, atol=atol
    )
    assert default.n_steps == explicit.n_steps and default.message == explicit.message
    np.testing.assert_array_equal(default.states, explicit.states)


@pytest.mark.parametrize("method", ["euler", "rk4", "solve_ivp"])
def test_sphere_tokens_are_normalised_first(method):
    """On the sphere X0 is normalised before the run: tokens 3 x0 and x0 give one trajectory,
    which starts at |x_i| = 1. The two runs differ by the rounding of the first normalisation
    (an ulp), carried over four steps of a smooth field: 1e-13."""
    X0 = uniform_sphere(6, 3, rng=5)
    field = Softmax(2 * np.eye(3), np.eye(3))
    scaled = integrate(field, 3 * X0, [0.0, 0.5, 1.0], method=method, dt=0.25, geometry="sphere")
    unit = integrate(field, X0, [0.0, 0.5, 1.0], method=method, dt=0.25, geometry="sphere")
    np.testing.assert_allclose(np.linalg.norm(scaled.states[0], axis=1), 1.0, rtol=1e-15)
    np.testing.assert_allclose(scaled.states, unit.states, rtol=0, atol=1e-13)


def test_solve_ivp_never_steps_farther_than_dt(linear_problem):
    """With method='solve_ivp', `dt` is the maximal step: every step starts with an evaluation
    of the field at its left end and evaluates only inside [t_n, t_n + h_n], so consecutive
    distinct evaluation times are at most dt apart (up to the rounding of t_n + h, 1e-15).
    Unbounded, DOP853 crosses [0, 1] of this smooth linear flow in a few steps, with gaps of
    about 0.1: the bound 0.01 is not met by chance."""
    M, X0, exact = linear_problem
    seen = []

    def field(t, X):
        seen.append(t)
        return X @ M.T

    dt = 0.01
    traj = integrate(field, X0, [0.0, 1.0], method="solve_ivp", dt=dt)
    assert traj.status == "completed"
    assert np.diff(np.unique(seen)).max() <= dt * (1 + 1e-12)
    # and it is still the flow: DOP853 at the default rtol 1e-10 (relative to |x| of order 1)
    np.testing.assert_allclose(traj.final, exact, rtol=0, atol=1e-7)


def test_solve_ivp_default_is_dop853_at_the_default_tolerances(linear_problem):
    """method='solve_ivp' without `ivp_method` is scipy's DOP853 at DEFAULT_TOLERANCES
    ['solve_ivp'], reporting its evaluations as `n_steps`: a direct call of scipy on the
    flattened state performs the same floating-point operations, so the states agree to
    round-off (rtol 1e-14) and the evaluation counts exactly. RK45 at the same tolerances
    takes other steps and another number of evaluations."""
    from scipy.integrate import solve_ivp

    M, X0, _ = linear_problem
    times = np.linspace(0.0, 1.0, 5)
    traj = integrate(linear_field(M), X0, times, method="solve_ivp")
    rtol, atol = DEFAULT_TOLERANCES["solve_ivp"]
    ref = solve_ivp(
        lambda t, y: (y.reshape(X0.shape) @ M.T).ravel(), (0.0, 1.0), X0.ravel(),
        method="DOP853", t_eval=times, rtol=rtol, atol=atol,
    )  # fmt: skip
    np.testing.assert_allclose(traj.states, ref.y.T.reshape(traj.states.shape), rtol=1e-14)
    assert traj.n_steps == ref.nfev


def test_solve_ivp_in_float32_returns_float32_states(linear_problem):
    """dtype='float32' is the precision of the returned states for every method: solve_ivp
    integrates in float64 (scipy's adaptive control needs it) and rounds the states once, so
    they are the float64 run's states to float32 rounding, 2^-24 relative (6e-8)."""
    M, X0, _ = linear_problem
    times = np.linspace(0.0, 1.0, 4)
    single = integrate(linear_field(M), X0, times, method="solve_ivp", dtype="float32")
    double = integrate(linear_field(M), X0, times, method="solve_ivp")
    assert single.states.dtype == np.float32 and double.states.dtype == np.float64
    np.testing.assert_allclose(single.states, double.states, rtol=2.0**-24, atol=0)
