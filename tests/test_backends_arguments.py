"""Arguments on the array-library path (torch, JAX, array-api-strict): what is accepted, what is
refused and how, where an audit found silent errors or unclear refusals.

Run by ``make test-backends`` with tests/test_backends.py (same libraries, same skips).
"""

from __future__ import annotations

import subprocess
import sys

import array_api_strict
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from token_dynamics import integrate
from token_dynamics.attention import L2, Hardmax, Sinkhorn, Softmax
from token_dynamics.stochastic import MLPNoise, StochasticTransformer, simulate, simulate_sde

from .test_backends import EPS32, LIBRARIES, _library

jax.config.update("jax_enable_x64", True)

I2 = np.eye(2)


@pytest.fixture(params=LIBRARIES)
def lib(request):
    return _library(request.param)


@pytest.mark.parametrize("scale", [1e-160, 1e200])
def test_sphere_start_is_normalised_at_any_scale(lib, scale):
    # the squares of rows of norm 1e-160 are subnormal, those of 1e200 overflow: each row is
    # divided by its largest entry first, as on the numpy path, so the start is on the sphere
    # to a few roundings and the run is numpy's (the same arithmetic up to rounding, 1e-14)
    asarray, to_numpy, _ = lib
    X = np.random.default_rng(0).standard_normal((6, 3)) * scale
    field = Softmax(np.eye(3), np.eye(3))
    ref = integrate(field, X, [0.0, 1.0], method="rk4", dt=0.25, geometry="sphere")
    got = integrate(field, asarray(X), [0.0, 1.0], method="rk4", dt=0.25, geometry="sphere")
    start = to_numpy(got.states[0, ...])
    np.testing.assert_allclose(np.linalg.norm(start, axis=1), 1.0, rtol=0, atol=4e-16)
    np.testing.assert_allclose(to_numpy(got.final), ref.final, rtol=0, atol=1e-14)


def test_float32_weights_are_accepted_up_to_their_rounding(lib):
    # weights normalised in float32 sum to one within about n eps_32, far beyond the float64
    # tolerance 1e-9 that refused them; they are accepted within 2 n eps_32 and normalised
    asarray, to_numpy, _ = lib
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 2))
    w32 = rng.random(300).astype(np.float32)
    w32 /= w32.sum()
    field = Softmax(I2, I2)
    w64 = w32.astype(np.float64) / w32.astype(np.float64).sum()
    got = to_numpy(field.velocity(asarray(X), weights=asarray(w32)))
    np.testing.assert_allclose(got, field.velocity(X, weights=w64), rtol=0, atol=1e-13)
    off = w32.astype(np.float64) * (1 + 1e-3)  # not a rounding: refused
    with pytest.raises(ValueError, match="`weights` must sum to one"):
        field.velocity(asarray(X), weights=asarray(off.astype(np.float32)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weights_below_the_normal_floats_are_refused_by_name(lib, dtype):
    # a positive weight that the computing dtype rounds to zero (1e-300 in float32), or that
    # XLA reads as zero (a subnormal), made a key of weight zero inside the computation: the
    # l2, hardmax and Sinkhorn velocities then failed with "left the float range" (0 / 0,
    # log 0), and the causal one where numpy names a query that sees no key
    asarray, _, _ = lib
    tiny = 1e-300 if dtype == np.float32 else 1e-320
    X = np.random.default_rng(2).standard_normal((4, 2)).astype(dtype)
    w = np.array([tiny, 0.5, 0.25, 0.25 - tiny])
    for field in (L2(I2, I2, I2), Hardmax(I2, I2), Sinkhorn(I2, I2), Softmax(I2, I2)):
        with pytest.raises(ValueError, match=r"`weights` holds positive weights below"):
            field.velocity(asarray(X), weights=w)
        w0 = np.where(w == tiny, 0.0, w) / (1 - tiny)  # the fix the message gives: computed
        assert np.all(np.isfinite(np.asarray(field.velocity(asarray(X), weights=w0))))


def test_parameters_and_weights_that_require_grad_are_refused_by_name():
    X = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    A = torch.eye(2, dtype=torch.float64, requires_grad=True)
    w = torch.full((5,), 0.2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(TypeError, match=r"`A` requires grad.*pass `A.detach\(\)`"):
        Softmax(A, I2)
    with pytest.raises(TypeError, match="`weights` requires grad"):
        Softmax(I2, I2).velocity(X, weights=w)
    # the tokens are differentiated: d/dX of sum(velocity) against central differences
    Xg = X.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(Softmax(I2, I2).velocity(Xg).sum(), Xg)
    f = Softmax(I2, I2)
    h, e = 1e-6, np.zeros((5, 2))
    e[2, 1] = h
    Xn = X.numpy()
    fd = (f.velocity(Xn + e).sum() - f.velocity(Xn - e).sum()) / (2 * h)
    assert float(grad[2, 1]) == pytest.approx(fd, abs=1e-8)  # h^2 and eps/h: below 1e-9


def test_simulate_names_model_matrices_beyond_float32(lib):
    # Q = K = sqrt(beta) I with beta = 1e39: A = K^T Q is infinite in float32, and simulate
    # said the tokens became non-finite at layer 1, "increase L or lower the noise"; now the
    # matrix is named, with float64 as the fix, on every library and on numpy's path
    asarray, _, _ = lib
    root = np.sqrt(1e39) * np.eye(3)
    model = StochasticTransformer(MLPNoise("tanh", width=8), Q=root, K=root)
    X0 = np.eye(3, dtype=np.float32)
    for X, dtype in ((X0, "float32"), (asarray(X0), None)):  # numpy's default is float64
        with pytest.raises(FloatingPointError, match=r"A = K\^T Q has entries up to 1e\+39"):
            simulate(model, X, T=1.0, L=3, rng=0, dtype=dtype)
    assert np.all(np.isfinite(simulate(model, X0.astype(np.float64), T=1.0, L=3, rng=0).X))


def test_sinkhorn_differentiates_tokens_that_require_grad_quietly():
    # the solver read its errors with float(), and torch warned of converting a tensor that
    # requires grad (an error under the tests' warning filter); now read apart from the graph.
    # The gradient of a weighted sum, through the unrolled iterations, against central
    # differences of the numpy path: h^2 ~ 1e-10, and the solver's tol / h = 1e-8
    X = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    C = np.random.default_rng(1).standard_normal((5, 2))
    f = Sinkhorn(np.array([[1.0, 0.3], [-0.2, 0.5]]), I2, tol=1e-13)
    Xg = X.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad((f.velocity(Xg) * torch.asarray(C)).sum(), Xg)
    h, e = 1e-5, np.zeros((5, 2))
    e[2, 1] = h
    Xn = X.numpy()
    fd = ((f.velocity(Xn + e) - f.velocity(Xn - e)) * C).sum() / (2 * h)
    assert float(grad[2, 1]) == pytest.approx(fd, abs=1e-8)


@pytest.mark.parametrize("transform", ["jit", "grad", "vmap"])
def test_jax_transformations_are_refused_with_the_reason(transform):
    X = jnp.ones((3, 2)) * jnp.arange(1.0, 4.0)[:, None]
    f = Softmax(I2, I2)
    call = {
        "jit": lambda: jax.jit(f.velocity)(X),
        "grad": lambda: jax.grad(lambda Z: f.velocity(Z).sum())(X),
        "vmap": lambda: jax.vmap(f.velocity)(jnp.stack([X, X])),
    }[transform]
    with pytest.raises(TypeError, match=r"cannot run inside jax\.jit, jax\.grad or jax\.vmap"):
        call()


@pytest.mark.parametrize("dtype", [np.float32, "f4", "float32"])
def test_numpy_names_of_float32_are_accepted(dtype):
    X = np.random.default_rng(2).standard_normal((7, 2))
    got = Softmax(I2, I2).velocity(jnp.asarray(X), dtype=dtype)
    assert got.dtype == jnp.float32
    assert np.abs(np.asarray(got) - Softmax(I2, I2).velocity(X)).max() < 64 * EPS32 * 10


def test_float64_without_jax_x64_is_refused():
    # JAX without x64 gives float32 for dtype='float64', silently (only JAX's warning): refused
    code = (
        "import numpy as np, jax.numpy as jnp\n"
        "from token_dynamics.attention import Softmax\n"
        "X = jnp.asarray(np.ones((3, 2)))\n"
        "try:\n"
        "    Softmax(np.eye(2), np.eye(2)).velocity(X, dtype='float64')\n"
        "except TypeError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "`dtype` asks for float64" in out.stdout and "jax_enable_x64" in out.stdout


def test_integrate_on_arrays_names_what_went_wrong():
    X = array_api_strict.asarray(np.random.default_rng(3).standard_normal((5, 2)))
    traj = integrate(Softmax(I2, I2), X, [0.0, 1.0], method="rk4", dt=0.5)
    assert traj.final.shape == (5, 2)  # states[-1] alone is refused by the standard's indexing
    with pytest.raises(TypeError, match="`field` must return an array of the tokens' library"):
        integrate(lambda t, Z: [[0.0, 0.0]] * 5, X, [0.0, 1.0], method="euler", dt=0.5)
    with pytest.raises(FloatingPointError, match="pass numpy tokens to use method='solve_ivp'"):
        integrate(lambda t, Z: Z * float("nan"), X, [0.0, 1.0], method="rk4", dt=0.5)


def test_scalars_given_as_arrays_are_told_to_become_numbers():
    with pytest.raises(ValueError, match=r"Pass a Python number, float\(beta\)"):
        Softmax(I2, I2, beta=jnp.asarray(0.5))


def test_simulate_sde_does_not_offer_a_finite_width():
    model = StochasticTransformer(MLPNoise("tanh", width=16))
    X0 = jnp.asarray(np.eye(3))
    with pytest.raises(TypeError, match="simulate_sde samples") as err:
        simulate_sde(model, X0, T=1.0, L=2, rng=0)
    assert "finite width" not in str(err.value)


def test_subnormal_clouds_are_refused(lib):
    # XLA on the CPU reads subnormal numbers as zeros: the velocity of tokens of 1e-310 came
    # out exactly zero; the numpy path rescales them and stays the reference
    asarray, to_numpy, _ = lib
    X = np.random.default_rng(4).standard_normal((6, 3)) * 1e-310
    assert np.abs(Softmax(np.eye(3), np.eye(3)).velocity(X)).max() > 0
    with pytest.raises(FloatingPointError, match="below the smallest normal float"):
        Softmax(np.eye(3), np.eye(3)).velocity(asarray(X))
    # tokens of 1e-170 are normal floats, whose squares underflow: computed, as numpy does
    # (the scores vanish, the weights are uniform: the mean of the values, to rounding)
    Y = X * 1e140
    got = to_numpy(Softmax(np.eye(3), np.eye(3)).velocity(asarray(Y)))
    ref = Softmax(np.eye(3), np.eye(3)).velocity(Y)
    np.testing.assert_allclose(got, ref, rtol=1e-14, atol=0)
