"""Tests of token_dynamics.integrators and token_dynamics.geometry on closed forms.

Tolerances: integrated quantities are compared at C h^p (p = 1 for Euler, 4 for RK4) or at the
solve_ivp tolerance, as derived in each test; 1e-15 to 1e-12 is round-off of identical arithmetic.
"""

import numpy as np
import pytest
from scipy.linalg import expm

from token_dynamics.attention import Softmax, Unnormalised
from token_dynamics.diagnostics import interaction_energy, min_inner_product
from token_dynamics.geometry import normalize
from token_dynamics.integrators import Trajectory, integrate
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
    traj = integrate(field, X0, [0.0, h], method="euler")
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


@pytest.mark.statement("tok-thm-sphere-clustering")
def test_tokens_cluster_to_one_point_on_the_sphere():
    """Spec §1 test 8 (g11): d = 3, beta = 2, n = 32, RK4, h = 0.01, 3000 steps."""
    X0 = uniform_sphere(32, 3, rng=5)
    field = Softmax(np.eye(3), np.eye(3), beta=2.0)
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
                       rf"at t = 0 with method='{method}'"):  # fmt: skip
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
