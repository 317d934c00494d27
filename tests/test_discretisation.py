"""Tests of token_dynamics.discretisation: the error at time T against the step h = T/L."""

import numpy as np
import pytest

import token_dynamics as td
from token_dynamics.discretisation import StepErrors, step_errors
from token_dynamics.meanfield import first_token_solution

V_ROT = np.array([[-0.2, -1.0], [1.0, -0.2]])  # a damped rotation


@pytest.fixture
def causal_problem():
    """Causal attention, whose first token solves x' = V x exactly whatever the others do:
    an exact reference for the whole system at T = 1."""
    rng = np.random.default_rng(3)
    Z0 = td.with_positions(rng.normal(size=(8, 2)))
    exact = first_token_solution(V_ROT, Z0[0, 1:], [1.0])  # shape (1, 2)
    return td.Causal(np.eye(2), V_ROT), Z0, exact


@pytest.mark.statement("tok-prop-resnet-euler")
@pytest.mark.parametrize(("method", "order"), [("euler", 1), ("rk4", 4)])
def test_orders_of_euler_and_rk4_against_the_exact_first_token(causal_problem, method, order):
    """Global error ~ C h^p: the fitted slope is p to +-0.2 (h from 1/8 to 1/128 lies in the
    asymptotic range; the RK4 errors, 6e-6 to 9e-11, stay far above rounding)."""
    field, Z0, exact = causal_problem
    study = step_errors(
        field, Z0, 1.0, exact, [8, 16, 32, 64, 128], method=method, tokens=[0], coordinates=[1, 2]
    )
    np.testing.assert_array_equal(study.steps, 1.0 / np.array([8, 16, 32, 64, 128]))
    assert np.all(np.diff(study.errors) < 0)  # each halving of h lowers the error
    assert abs(study.order - order) < 0.2, study.order


@pytest.mark.statement("tok-prop-resnet-euler")
@pytest.mark.parametrize(("method", "order"), [("euler", 1), ("rk4", 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_orders_on_the_whole_attention_system(causal, method, order):
    """The orders hold for the nonlinear attention system, every token compared (the first
    causal token alone solves a linear equation). Reference: DOP853 at rtol 1e-13, below the
    smallest RK4 error compared (about 1e-10 at h = 1/128) by three decades."""
    rng = np.random.default_rng(6)
    X0 = rng.normal(size=(12, 2))
    if causal:
        field, X0, columns = td.Causal(np.eye(2), V_ROT), td.with_positions(X0), [1, 2]
    else:
        field, columns = td.Softmax(rng.normal(size=(2, 2)), V_ROT), [0, 1]
    reference = td.integrate(
        field, X0, [0.0, 1.0], method="solve_ivp", rtol=1e-13, atol=1e-14
    ).final[:, columns]
    study = step_errors(
        field, X0, 1.0, reference, [8, 16, 32, 64, 128], method=method, coordinates=columns
    )
    assert np.all(np.diff(study.errors) < 0)
    assert abs(study.order - order) < 0.2, study.order


def test_one_euler_layer_is_compared_part_by_part():
    """With L = 1 the Euler state is X0 + T v(X0) exactly (bitwise, one residual layer), so
    the error is the norm of that part minus the reference, to rounding of one norm."""
    rng = np.random.default_rng(4)
    X0 = rng.normal(size=(5, 3))
    field = td.Softmax(rng.normal(size=(3, 3)), rng.normal(size=(3, 3)))
    ref = rng.normal(size=(2, 2))
    final = X0 + 0.5 * field.velocity(X0)
    study = step_errors(field, X0, 0.5, ref, [1], tokens=[4, 1], coordinates=[0, 2])
    expected = np.linalg.norm(final[np.ix_([4, 1], [0, 2])] - ref)
    np.testing.assert_allclose(study.errors, [expected], rtol=1e-15)
    assert isinstance(study, StepErrors) and study.method == "euler"


def test_inputs_are_not_modified(causal_problem):
    field, Z0, exact = causal_problem
    Z0_copy, exact_copy = Z0.copy(), exact.copy()
    step_errors(field, Z0, 1.0, exact, [4, 8], tokens=[0], coordinates=[1, 2])
    np.testing.assert_array_equal(Z0, Z0_copy)
    np.testing.assert_array_equal(exact, exact_copy)


def test_zero_error_has_no_order():
    """A field with V = 0 does not move the tokens: every method is exact, no order exists."""
    X0 = np.random.default_rng(5).normal(size=(4, 2))
    study = step_errors(td.Softmax(np.eye(2), np.zeros((2, 2))), X0, 1.0, X0, [2, 4])
    np.testing.assert_array_equal(study.errors, [0.0, 0.0])
    with pytest.raises(ValueError, match="order cannot be fitted"):
        _ = study.order


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"layers": [0, 4]}, "`layers`"),
        ({"layers": [2.5]}, "`layers`"),
        ({"layers": []}, "`layers`"),
        ({"method": "solve_ivp"}, "`method`"),
        ({"T": -1.0}, "`T`"),
        ({"tokens": [9]}, "`tokens`"),
        ({"coordinates": [True]}, "`coordinates`"),
        ({"reference": np.zeros((3, 2))}, "`reference`"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    X0 = np.random.default_rng(6).normal(size=(4, 2))
    args = {"field": td.Softmax(np.eye(2), np.eye(2)), "X0": X0, "T": 1.0, "reference": X0}
    args |= {"layers": [2, 4]}
    args |= kwargs
    with pytest.raises(ValueError, match=match):
        step_errors(**args)


def test_steps_are_T_over_L_and_euler_errors_are_the_residual_powers(causal_problem):
    """At T = 2 the steps are h = T / L, not 1 / L, and the first causal token, which solves
    x' = V x, goes through L residual layers as (I + h V)^L x0 against the exact e^(TV) x0: the
    Euler errors are those norms in closed form. Both sides round L matrix-vector products of
    O(1) entries (1e-15 each) against errors of 1e-2 and more: rtol = 1e-10."""
    field, Z0, _ = causal_problem
    T, layers = 2.0, np.array([4, 8, 16])
    z0 = Z0[0, 1:]
    exact = first_token_solution(V_ROT, z0, [T])
    study = step_errors(field, Z0, T, exact, layers, tokens=[0], coordinates=[1, 2])
    np.testing.assert_allclose(study.steps, T / layers, rtol=1e-15)
    layer = np.eye(2) + (T / layers[:, None, None]) * V_ROT
    euler = [np.linalg.matrix_power(M, L) @ z0 for M, L in zip(layer, layers, strict=True)]
    expected = [np.linalg.norm(x - exact[0]) for x in euler]
    np.testing.assert_allclose(study.errors, expected, rtol=1e-10)
