"""The public API as a fuzz target: valid arguments for every callable, and ways to spoil them.

`public_callables` enumerates the ``__all__`` of ``token_dynamics`` and of each public
subpackage, so a new public function is swept as soon as it is exported. `valid_arguments`
builds a fresh, small, valid call for each one from a registry of argument factories keyed by
parameter name (:data:`BY_NAME`), with a few per-callable overrides (:data:`OVERRIDES`) where
the same name means something else. `corruptions` spoils one argument at a time (bad shapes,
NaN, inf, huge and tiny magnitudes, empty inputs, wrong dtypes, n <= d, duplicated tokens, zero
covariances, extreme scalars), and `run_case` calls the function under the failure policy of
``CONTRIBUTING.md`` and classifies how it ended.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import inspect
import os
import pkgutil
import re
import signal
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

os.environ.setdefault("MPLBACKEND", "Agg")  # plotting and widgets draw off screen
import token_dynamics as td

#: Public subpackages left out of the sweep, with the reason (none: plotting and widgets are
#: swept too, on a fresh off-screen axes per call).
EXCLUDED_MODULES: dict[str, str] = {}

#: Token count and dimension of the valid calls: small enough that every call is quick, with
#: n > d + 1 so that an empirical covariance of the valid cloud is non-degenerate.
N, D = 5, 2
#: Seconds a single call may take before it counts as a hang (the valid calls take < 1 s).
TIME_LIMIT = 20.0
#: Longer limits for the callables whose default step doubling runs its whole budget on a
#: stiff spoiled case (tokens scaled by 53: 2^13 RK4 steps of a near-hardmax softmax took 15 s
#: alone on the 2-core VM, beyond 20 s beside the rest of the suite; `stability_ratios` flows
#: two clouds: 18 s alone with its tokens scaled by 156, 20 s at 1e3, and past 20 s in CI
#: beside the suite; `limiting_ranks` at a final time scaled by 1e12 to 1e300 spends both of
#: `solve_moments`' budgets, 100,000 DOP853 and then 100,000 Radau evaluations of a collapsing
#: covariance, before it reports the stiff run: 6-7 s alone, past 20 s in the long profile
#: beside the suite). Three times the slowest case measured alone; a hang still shows.
SLOW_LIMITS = {
    f"token_dynamics.{name}": 60.0
    for name in (
        "integrate",
        "meanfield.stability_check",
        "meanfield.stability_ratios",
        "gaussian.limiting_ranks",
    )
}

_A = [[1.0, 0.2], [0.2, 0.8]]
_V = [[1.0, 0.0], [0.0, 1.0]]
_COV = [[1.0, 0.3], [0.3, 0.5]]


def public_callables() -> dict[str, Callable]:
    """Every public callable of the library, by dotted name.

    A callable re-exported at several places is listed once, under its first name.
    """
    modules = ["token_dynamics"] + [
        f"token_dynamics.{m.name}" for m in pkgutil.iter_modules(td.__path__) if m.name[0] != "_"
    ]
    found: dict[str, Callable] = {}
    seen: set[int] = set()
    for name in modules:
        if name in EXCLUDED_MODULES:
            continue
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if callable(obj) and id(obj) not in seen:
                seen.add(id(obj))
                found[f"{name}.{attr}"] = obj
    return found


def _tokens(n: int = N, d: int = D, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d))


def _sphere(n: int = N, d: int = 3, seed: int = 0) -> np.ndarray:
    X = _tokens(n, d, seed)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _field() -> Any:
    return td.Softmax(np.array(_A), np.array(_V))


def _model() -> Any:
    from token_dynamics import stochastic

    return stochastic.StochasticTransformer(stochastic.MLPNoise(width=8))


def _dataset() -> tuple[list[np.ndarray], list[np.ndarray]]:
    inputs = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 0.5]])]
    targets = [np.array([[0.5, 0.5]]), np.array([[-1.0, 0.0], [0.0, 2.0]])]
    return inputs, targets


def _hardmax_transformer() -> Any:
    from token_dynamics import interpolation

    inputs, targets = _dataset()
    return interpolation.build_hardmax_interpolator(inputs, targets, rng=0).transformer


def _tikhonov_data() -> Any:
    from token_dynamics import interpolation

    return interpolation.tikhonov_dataset(n_sequences=3, n_tokens=4, d=3, width=2, rng=0)


#: Valid values by parameter name; each factory returns a fresh object.
BY_NAME: dict[str, Callable[[], Any]] = {
    "X": _tokens,
    "Y": lambda: _tokens(seed=1),
    "X0": _tokens,
    "Y0": lambda: _tokens(seed=1),
    "dX": lambda: _tokens(seed=2),
    "velocity": lambda: _tokens(seed=2),
    "direction": lambda: np.array([1.0, -0.5]),
    "points": lambda: _tokens(3, seed=3),
    "queries": lambda: _tokens(3, seed=3),
    "other_queries": lambda: _tokens(3, seed=4),
    "A": lambda: np.array(_A),
    "V": lambda: np.array(_V),
    "Q": lambda: np.array(_A),
    "K": lambda: np.array(_V),
    "Qbar": lambda: np.array(_A),
    "Kbar": lambda: np.array(_V),
    "M": lambda: np.array(_COV),
    "S": lambda: np.array([[0.3, -0.2], [0.1, 0.5]]),
    "B": lambda: np.array([[0.3, 0.1], [0.1, 0.5]]),
    "scores": lambda: np.array([[0.3, -0.2, 1.0], [0.1, 0.5, -2.0]]),
    "log_weights": lambda: np.log(np.array([0.2, 0.3, 0.5])),
    "mean": lambda: np.array([0.1, -0.2]),
    "mean0": lambda: np.array([0.1, -0.2]),
    "m1": lambda: np.array([0.1, -0.2]),
    "m2": lambda: np.array([0.0, 0.3]),
    "cov": lambda: np.array(_COV),
    "cov0": lambda: np.array(_COV),
    "S1": lambda: np.array(_COV),
    "S2": lambda: np.eye(D),
    "covariances": lambda: np.tile(np.array(_COV), (3, 1, 1)),
    "means": lambda: np.zeros((3, D)),
    "states": lambda: np.stack([_tokens(), _tokens(seed=1)]),
    "weights": lambda: np.full(N, 1.0 / N),
    "weights_x": lambda: np.full(N, 1.0 / N),
    "weights_y": lambda: np.full(N, 1.0 / N),
    "times": lambda: np.linspace(0.0, 1.0, 5),
    "t": lambda: 0.0,
    "T": lambda: 1.0,
    "L": lambda: 4,
    "beta": lambda: 1.0,
    "eps": lambda: 1.0,
    "v": lambda: 1.0,
    "a": lambda: 1.0,
    "var0": lambda: 1.0,
    "var": lambda: 1.0,
    "tol": lambda: 0.5,
    "d": lambda: D,
    "n": lambda: N,
    "rng": lambda: 0,
    "field": _field,
    "equations": lambda: __import__("token_dynamics").gaussian.SoftmaxMoments(_A, _V),
    "activation": lambda: "relu",
    "sigma_U": lambda: 0.1,
    "sigma_W": lambda: 0.1,
    "model": _model,
    "u": lambda: np.array([-0.5, 0.0, 0.5, 0.9]),
    "R": lambda: 1.5,
    "R0": lambda: 1.5,
    "x": lambda: np.array([0.1, 0.5, 0.9, 1.3]),
    "y": lambda: np.array([1.0, 2.1, 2.9, 4.2]),
    "inputs": lambda: _dataset()[0],
    "targets": lambda: _dataset()[1],
    "transformer": _hardmax_transformer,
    "data": _tikhonov_data,
    "heads": lambda: (_field(), td.Softmax(np.eye(D), np.eye(D))),
}


def _causal_tokens(seed: int = 0) -> np.ndarray:
    """Tokens with their position in column 0, as the masked fields read them."""
    return np.column_stack([np.linspace(0.2, 1.0, N), _tokens(seed=seed)])


def _hat_points() -> np.ndarray:
    return np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])


def _tikhonov_theta() -> np.ndarray:
    from token_dynamics import interpolation

    return interpolation.train_tikhonov(_tikhonov_data(), 0.1, epochs=1, rng=0).theta


#: Arguments that differ from :data:`BY_NAME` within one module (keyed by the module's name).
MODULE_OVERRIDES: dict[str, dict[str, Callable[[], Any]]] = {
    # the stochastic chapter lives on the sphere, in a dimension where Assumption 1 can hold
    "token_dynamics.stochastic": {
        "X": _sphere,
        "X0": _sphere,
        "velocity": lambda: _sphere(seed=2),
        "d": lambda: 5,
        "t": lambda: np.array([-0.5, 0.0, 0.5, 1.0]),
        "states": lambda: np.stack([_sphere(2, seed=s)[None].repeat(5, 0) for s in (0, 1)]),
        "A": lambda: np.eye(3),
        "V": lambda: np.eye(3),
        "Q": lambda: np.eye(3),
        "K": lambda: np.eye(3),
        "sigma_U": lambda: 1.0,
        "sigma_W": lambda: 1.0,
    },
    # long-time clustering: tokens on the sphere, output times from 0, a small phase diagram
    "token_dynamics.clustering": {
        "X": _sphere,
        "times": lambda: np.array([0.0, 0.5, 1.0]),
        "counts": lambda: np.array([3, 2, 2]),
        "betas": lambda: np.array([0.5, 2.0]),
        "n_systems": lambda: 3,
        "dt": lambda: 0.1,
        "delta": lambda: 1e-2,
        "n": lambda: 3,
        "d": lambda: 3,
        "max_degree": lambda: 4,
        "t": lambda: np.array([-1.0, 0.0, 0.5, 1.0]),
        "X0": _sphere,
        "theta": lambda: np.array([0.0, 0.5, 3.0]),
        "sizes": lambda: np.array([2.0, 1.0]),
    },
    # the Gronwall bounds integrate nested quadratures: a short horizon keeps a call quick
    "token_dynamics.meanfield": {"times": lambda: np.array([0.0, 0.5])},
    # moments of softmax attention with A of norm one blow up at t = 0.39
    "token_dynamics.gaussian": {"times": lambda: np.linspace(0.0, 0.2, 3)},
}

#: Arguments that differ from :data:`BY_NAME` for one callable (keyed by its short name).
OVERRIDES: dict[str, dict[str, Callable[[], Any]]] = {
    "glue": {"name": lambda: "fuzz-value", "variable": lambda: 1.0},
    # a trajectory of three tokens on the sphere at three times, and one curve value per time
    "overlap_deviation": {
        "states": lambda: np.stack([_sphere(3, 3, seed=s) for s in range(3)]),
        "gamma": lambda: np.array([0.0, 0.5, 0.9]),
    },
    # a subset of the five tokens and a skew-symmetric rotation generator in d = 3
    "rotation_second_variation": {
        "subset": lambda: np.array([True, False, True, False, False]),
        "B": lambda: np.array([[0.0, -0.3, 0.1], [0.3, 0.0, -0.2], [-0.1, 0.2, 0.0]]),
    },
    "check_answer": {"exercise": lambda: "gf-ex-indefinite", "answer": lambda: 1.0},
    "layer_remainder": {"steps": lambda: np.array([0.1, 0.05]), "n_draws": lambda: 3},
    "ExerciseCheck": {
        "expects": lambda: "a number",
        "inputs": lambda: (),
        "judge": lambda: lambda answer: answer == 1.0,
    },
    "L2": {"Qbar": lambda: np.eye(D), "Kbar": lambda: np.eye(D)},
    "make_field": {"variant": lambda: "softmax"},
    "gaussian_mixture": {
        "means": lambda: np.array([[0.0, 0.0], [1.0, 1.0]]),
        "covs": lambda: np.stack([np.eye(D), np.array(_COV)]),
        "weights": lambda: np.array([0.4, 0.6]),
    },
    "sinkhorn_plan": {
        "eps": lambda: 0.5,
        "a": lambda: np.full(2, 0.5),
        "b": lambda: np.full(2, 0.5),
    },
    "ray_blowup_time": {"u": lambda: np.array([1.0, 0.0])},
    "ray_covariance": {"u": lambda: np.array([1.0, 0.0]), "times": lambda: np.linspace(0, 0.2, 3)},
    "softmax_gaussian_1d": {"mean0": lambda: 0.1},
    "softmax_gaussian_centred": {"times": lambda: np.linspace(0.0, 0.2, 3)},
    "low_rank_limit": {"v": lambda: -1.0},
    "MultiHeadMoments": {
        "heads": lambda: (td.gaussian.SoftmaxMoments(_A, _V), td.gaussian.LinearMoments(_A, _V))
    },
    "noise_exponent_table": {
        "activations": lambda: ("relu",),
        "dimensions": lambda: (5,),
        "sigmas": lambda: (1.0,),
    },
    "cone_regime": {"name": lambda: "line"},
    "limiting_ranks": {"n_runs": lambda: 2, "T": lambda: 5.0},
    "trace_one_grid": {"n_angles": lambda: 4},
    "gaussian_energy": {"A": lambda: 0.3 * np.array(_A)},
    "gaussian_energy_along": {"A": lambda: 0.3 * np.array(_A)},
    "sampled_gaussian_energy": {"A": lambda: 0.3 * np.array(_A)},
    "observed_monotonicity": {"values": lambda: np.array([3.0, 2.0, 1.5])},
    "gaussian_translation_second_variation": {"A": lambda: 0.3 * np.array(_A)},
    "sinkhorn_bures_wasserstein_check": {"A": lambda: 0.3 * np.array(_A)},
    "sinkhorn_gaussian_cost": {"A": lambda: 0.3 * np.array(_A)},
    "bures_wasserstein_velocity": {
        "functional": lambda: lambda m, S: float(np.trace(S) + m @ m),
    },
    "circle_metastability": {"t_max": lambda: 1.0, "n_times": lambda: 5},
    # `name` is the name the messages give the sequences: the argument's own name here
    "as_sequences": {"sequences": lambda: _dataset()[0], "name": lambda: "sequences"},
    "relative_hausdorff_errors": {"outputs": lambda: _dataset()[1]},
    "overlapping_dataset": {"n_sequences": lambda: 2, "d": lambda: 2},
    "paper_block_count": {"m": lambda: np.array([2, 3])},
    "block_count_bound": {"m": lambda: np.array([2, 3])},
    "resnet_counts": {"n_tokens": lambda: 3, "n_sequences": lambda: 2},
    "hat_move": {
        "points": _hat_points,
        "p": lambda: _hat_points()[0],
        "q": lambda: np.array([0.5, 0.5]),
    },
    "critical_temperature": {"tolerance": lambda: 0.1},
    "softmax_deviation_bound": {"tau": lambda: 0.1},
    "substitution_errors": {"taus": lambda: np.array([0.1, 0.05])},
    "Factored": {"left": lambda: np.array([1.0, 0.0]), "right": lambda: np.array([0.0, 2.0])},
    "snap_layer": {
        "c": lambda: 0.0,
        "delta": lambda: 0.5,
        "w": lambda: np.array([1.0, 0.0]),
        "e": lambda: np.array([1.0, 0.0]),
        "y": lambda: np.array([0.3, 0.2]),
    },
    "tikhonov_objective": {"theta": _tikhonov_theta, "eps": lambda: 0.1},
    "tikhonov_sweep": {"eps_values": lambda: np.array([0.1, 1.0]), "epochs": lambda: 2},
    "train_tikhonov": {"eps": lambda: 0.1, "epochs": lambda: 2},
    "tikhonov_dataset": {
        "n_sequences": lambda: 3,
        "n_tokens": lambda: 4,
        "d": lambda: 3,
        "width": lambda: 2,
    },
    "conditional_sensitivity": {
        "field": lambda: td.Causal(np.array(_A), np.array(_V)),
        "Z": _causal_tokens,
        "Z_perturbed": lambda: _causal_tokens(1),
    },
    "first_token_sensitivity": {"field": lambda: td.Causal(np.array(_A), np.array(_V))},
    "first_token_solution": {"x0": lambda: np.array([0.1, -0.2])},
    "mean_field_errors": {
        "ns": lambda: np.array([4, 8]),
        "T": lambda: 0.3,
        "mean0": lambda: np.zeros(D),
        "n_seeds": lambda: 2,
        "n_ref": lambda: 16,
        "dt": lambda: 0.1,
    },
    "moment_gap_study": {"ns": lambda: np.array([4, 8]), "T": lambda: 0.3, "repeats": lambda: 2},
    "chaos_rate": {"N": lambda: np.array([4.0, 8.0])},
    "hardmax_limit": {"betas": lambda: np.array([1.0, 4.0])},
    "one_point_correlation": {"noise": lambda: td.stochastic.MLPNoise("relu")},
    "deep_limit_error": {
        "depths": lambda: np.array([2, 4]),
        "L_ref": lambda: 8,
        "n_paths": lambda: 2,
        "T": lambda: 0.5,
    },
    "propagation_of_chaos": {
        "sizes": lambda: np.array([4, 8]),
        "N_ref": lambda: 16,
        "L": lambda: 4,
        "n_times": lambda: 2,
        "n_paths": lambda: 2,
        "T": lambda: 0.5,
    },
    "two_point_lyapunov_exponent": {"n_paths": lambda: 4},
    "synchronization_experiment": {
        "n_tokens": lambda: 4,
        "L": lambda: 4,
        "width": lambda: 8,
        "T": lambda: 0.5,
    },
    "layer_norm_remainder": {
        "v": lambda: np.array([1.0, 0.0, 0.0]),
        "w": lambda: np.array([0.0, 1.0, 0.5]),
        "scales": lambda: np.array([0.1, 0.05, 0.025]),
    },
    "mc_estimate": {"values": lambda: np.array([1.0, 1.2, 0.9, 1.1])},
    "energy_decay_rate": {"energies": lambda: np.exp(-np.linspace(0, 1, 5))[None].repeat(3, 0)},
    "conditional_w1": {"X": _causal_tokens, "Y": lambda: _causal_tokens(1)},
    "conditional_w2": {"X": _causal_tokens, "Y": lambda: _causal_tokens(1)},
    "w2_gaussian_1d": {"mean": lambda: 0.1, "weights": lambda: np.full(4, 0.25)},
    "step_errors": {"reference": _tokens, "layers": lambda: [2, 4]},
    "covariance_path_error": {
        "path": lambda: np.tile(np.array(_COV), (3, 1, 1)),
        "reference": lambda: np.tile(np.eye(D), (3, 1, 1)),
    },
    "count_moved_points": {"before": lambda: [_tokens()], "after": lambda: [_tokens(seed=1)]},
}

#: Result records (frozen dataclasses the library fills and returns), and the public callable
#: that makes one: a valid record is a real result, taken apart field by field. A record holds
#: what it is given, like SciPy's ``OptimizeResult``: only its valid construction is swept.
RECORD_SOURCES: dict[str, str] = {
    "Trajectory": "integrate",
    "SinkhornPlan": "sinkhorn_plan",
    "PowerLawFit": "fit_power_law",
    "StepErrors": "step_errors",
    "IdentityGaps": "covariance_identity_gaps",
    "AnswerCheck": "check_answer",
    "GaussianPath": "solve_moments",
    "ParticleMoments": "particle_moments",
    "RankCounts": "limiting_ranks",
    "BuresWassersteinCheck": "sinkhorn_bures_wasserstein_check",
    "CircleMetastability": "circle_metastability",
    "GaussianEnergy": "gaussian_energy",
    "GradientFlowCheck": "gradient_flow_check",
    "TwistedMetric": "twisted_metric",
    "HardmaxInterpolator": "build_hardmax_interpolator",
    "PhaseState": "build_hardmax_interpolator",
    "SoftmaxInterpolator": "build_softmax_interpolator",
    "Transformer": "build_hardmax_interpolator",
    "TransformerBlock": "build_hardmax_interpolator",
    "FeedForward": "build_hardmax_interpolator",
    "TikhonovData": "tikhonov_dataset",
    "TikhonovFit": "train_tikhonov",
    "TikhonovSweep": "tikhonov_sweep",
    "FieldConstants": "field_constants",
    "MaskedCloud": "causal_cloud",
    "MeanFieldErrors": "mean_field_errors",
    "HardmaxLimit": "hardmax_limit",
    "MeasureSymmetry": "measure_symmetry",
    "MomentGapStudy": "moment_gap_study",
    "Sensitivity": "first_token_sensitivity",
    "StabilityBound": "gronwall_bound",
    "StabilityCheck": "stability_check",
    "StabilityRun": "stability_ratios",
    "StochasticResult": "simulate",
    "ConvergenceStudy": "layer_norm_remainder",
    "ChaosStudy": "propagation_of_chaos",
    "DeepLimitError": "deep_limit_error",
    "MCEstimate": "mc_estimate",
    "Lemma41Terms": "lemma_4_1_terms",
    "NoiseExponents": "noise_exponents",
    "SynchronizationRun": "synchronization_experiment",
    "Hemisphere": "open_hemisphere",
    "OverlapCurve": "orthogonal_overlap",
    "PhaseDiagram": "phase_diagram",
    "Staircase": "cluster_staircase",
    "EnergySpectrum": "energy_spectrum",
    "EnergyHessian": "sphere_energy_hessian",
    "CriticalPoint": "find_critical_point",
    "SubsetSums": "subset_sums",
}


def _find_instance(value: Any, cls: type, depth: int = 0) -> Any:
    if isinstance(value, cls):
        return value
    if depth > 6:
        return None
    children: list[Any] = []
    if isinstance(value, (list, tuple)):
        children = list(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = [getattr(value, f.name) for f in dataclasses.fields(value)]
    for child in children:
        found = _find_instance(child, cls, depth + 1)
        if found is not None:
            return found
    return None


def _record_arguments(cls: type) -> dict[str, Any]:
    calls = {k.rsplit(".", 1)[-1]: (k, f) for k, f in public_callables().items()}
    source, func = calls[RECORD_SOURCES[cls.__name__]]
    kwargs, _ = valid_arguments(source, func)
    record = _find_instance(func(**kwargs), cls)
    if record is None:
        raise LookupError(f"{source} returned no {cls.__name__}")
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(cls) if f.init}


def _is_exception(func: Any) -> bool:
    return isinstance(func, type) and issubclass(func, BaseException)


def valid_arguments(name: str, func: Callable) -> tuple[dict[str, Any], list[str]]:
    """A fresh valid call of `func` as keyword arguments, and the names that may be spoiled.

    Required parameters come from :data:`OVERRIDES` or :data:`BY_NAME`; an optional parameter
    is passed when a factory exists for it, or spoiled from its default when that default is a
    plain number, flag or string.
    """
    if _is_exception(func):
        return {}, []
    module, short = name.rsplit(".", 1)
    if short in RECORD_SOURCES:
        return _record_arguments(func), []
    table = {**BY_NAME, **MODULE_OVERRIDES.get(module, {}), **OVERRIDES.get(short, {})}
    kwargs: dict[str, Any] = {}
    spoilable: list[str] = []
    for p in inspect.signature(func).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in table:
            kwargs[p.name] = table[p.name]()
            spoilable.append(p.name)
        elif p.default is p.empty:
            raise LookupError(f"no factory for parameter `{p.name}` of {name}")
        elif isinstance(p.default, (int, float, str, bool)):
            kwargs[p.name] = p.default
            spoilable.append(p.name)
    if any(p.kind is p.VAR_KEYWORD for p in inspect.signature(func).parameters.values()):
        # a `**ranges` kind of argument: the override names the keywords a valid call needs
        for key, make in OVERRIDES.get(short, {}).items():
            if key not in kwargs:
                kwargs[key] = make()
                spoilable.append(key)
    return kwargs, spoilable


# ---------------------------------------------------------------------------------------------
# Corruptions: each takes a valid value and returns a spoiled copy (or raises Inapplicable).


class Inapplicable(Exception):
    """The corruption does not apply to this value."""


def _float_array(v: Any) -> np.ndarray:
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return v.copy()
    raise Inapplicable


def _set_first(value: float) -> Callable[[Any], Any]:
    def spoil(v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size:
            out = v.copy()
            out.flat[0] = value
            return out
        if isinstance(v, list) and v and isinstance(v[0], np.ndarray):
            return [spoil(v[0]), *v[1:]]
        raise Inapplicable

    return spoil


def _scaled(factor: float) -> Callable[[Any], Any]:
    def spoil(v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            return v * factor
        if isinstance(v, list) and v and isinstance(v[0], np.ndarray):
            return [x * factor for x in v]
        if isinstance(v, float):
            return v * factor if v else factor
        raise Inapplicable

    return spoil


def _array_only(f: Callable[[np.ndarray], Any]) -> Callable[[Any], Any]:
    def spoil(v: Any) -> Any:
        return f(_float_array(v))

    return spoil


def _rows(f: Callable[[np.ndarray], Any]) -> Callable[[Any], Any]:
    def spoil(v: Any) -> Any:
        arr = _float_array(v)
        if arr.ndim != 2:
            raise Inapplicable
        return f(arr)

    return spoil


def _scalar(value: Any, kinds: tuple[type, ...] = (float, int)) -> Callable[[Any], Any]:
    def spoil(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, kinds):
            raise Inapplicable
        return value

    return spoil


def _kind(kinds: tuple[type, ...], value: Any) -> Callable[[Any], Any]:
    def spoil(v: Any) -> Any:
        if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
            raise Inapplicable
        return value

    return spoil


def _object(value: Any) -> Callable[[Any], Any]:
    """Replace an argument that is an object of the library (a field, a model, a transformer)."""

    def spoil(v: Any) -> Any:
        if isinstance(v, (np.ndarray, int, float, str, bool, list, tuple)) or v is None:
            raise Inapplicable
        return value

    return spoil


#: Ways to spoil one argument, by name.
CORRUPTIONS: dict[str, Callable[[Any], Any]] = {
    # arrays
    "nan": _set_first(np.nan),
    "inf": _set_first(np.inf),
    "-inf": _set_first(-np.inf),
    "huge": _scaled(1e200),
    "tiny": _scaled(1e-200),
    "max": _set_first(1e308),
    "zeros": _array_only(np.zeros_like),
    "empty": _array_only(lambda a: a[:0] if a.ndim else np.array([])),
    "0-d": _array_only(lambda a: np.float64(a.flat[0]) if a.ndim else a[None]),
    "extra axis": _array_only(lambda a: a[None]),
    "flattened": _array_only(lambda a: a.ravel() if a.ndim > 1 else a.reshape(-1, 1)),
    "column dropped": _array_only(lambda a: a[..., :-1] if a.ndim else a),
    "transposed": _rows(lambda a: a.T if a.shape[0] != a.shape[1] else a[:, :1]),
    "complex": _array_only(lambda a: a + 1j),
    "bool": _array_only(lambda a: a > 0),
    "str": _array_only(lambda a: a.astype(str)),
    "object": _array_only(lambda a: a.astype(object)),
    "nested list": _array_only(lambda a: a.tolist()),
    "int": _array_only(lambda a: np.rint(a).astype(int)),
    "negated": _array_only(lambda a: -a),
    "one row": _rows(lambda a: a[:1]),
    "n = d": _rows(lambda a: a[: a.shape[1]]),
    "duplicated": _rows(lambda a: np.repeat(a[:1], len(a), axis=0)),
    "ragged": _rows(lambda a: [list(a[0]), list(a[1, :-1])]),
    # numbers
    "nan scalar": _scalar(float("nan")),
    "inf scalar": _scalar(float("inf")),
    "zero": _scalar(0.0),
    "negative": _scalar(-1.0),
    "huge scalar": _scalar(1e300),
    "tiny scalar": _scalar(1e-300),
    "string number": _scalar("1.0"),
    "complex scalar": _scalar(1 + 1j),
    "true": _scalar(True),
    "none": _kind((int, float, str, np.ndarray, list), None),
    "fraction": _kind((int,), 2.5),
    "numpy int": lambda v: (
        np.int64(v)
        if isinstance(v, int) and not isinstance(v, bool)
        else (_ for _ in ()).throw(Inapplicable)
    ),
    # flags and names
    "flag as int": _kind((bool,), 1),
    "flag as string": _kind((bool,), "yes"),
    "unknown name": _kind((str,), "no-such-name"),
    "name as number": _kind((str,), 1),
    # library objects
    "object as None": _object(None),
    "object as number": _object(1.0),
    "object as array": _object(np.eye(D)),
}


def corruptions(value: Any) -> list[str]:
    """The names of the corruptions that apply to `value`."""
    names = []
    for key, spoil in CORRUPTIONS.items():
        try:
            spoil(value)
        except Inapplicable:
            continue
        names.append(key)
    return names


# ---------------------------------------------------------------------------------------------
# Running a case


class CallTimeout(Exception):
    """The call ran past :data:`TIME_LIMIT`."""


def _raise_timeout(signum: int, frame: Any) -> None:
    raise CallTimeout


#: The messages of numpy's own floating-point errors, which name nothing a reader can act on.
NUMPY_KINDS = ("overflow", "underflow", "invalid value", "divide by zero")
_NAMED = re.compile(r"`([A-Za-z_][A-Za-z_0-9]*)")


def _finite(value: Any, depth: int = 0) -> bool:
    """True when every number reachable from `value` (arrays, dataclass fields) is finite."""
    if depth > 4:
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind not in "fc" or bool(np.all(np.isfinite(value)))
    if isinstance(value, (float, complex, np.floating)):
        return bool(np.isfinite(value))
    if isinstance(value, (list, tuple)):
        return all(_finite(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_finite(v, depth + 1) for v in value.values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return all(_finite(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    return True


def _failed_status(value: Any) -> bool:
    """A result that reports its own failure: a status other than completed, a flag
    (``finite``, ``converged``) that is False, or a ``reason`` why its value is inf."""
    status = getattr(value, "status", None)
    flags = [getattr(value, name, None) for name in ("finite", "converged")]
    reason = getattr(value, "reason", "")  # GaussianEnergy: why its value is inf
    return (
        (isinstance(status, str) and status != "completed")
        or any(f is False for f in flags)
        or (isinstance(reason, str) and bool(reason))
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(np.all((a == b) | ((a != a) & (b != b))))
            if a.dtype.kind in "fc"
            else isinstance(b, np.ndarray) and np.array_equal(a, b)
        )
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return True


#: Callables whose documented answer may be +inf, keyed by their name and saying when. The
#: policy (CONTRIBUTING.md, "Solvers: one vocabulary, one failure policy"): +inf is a value, not
#: a failure, where it is the true answer or a void bound -- an infinite blow-up time, a bound
#: that exceeds float64 -- as SciPy's special functions return ``inf`` on overflow. A result
#: with +inf counts as clean ("documented inf") only for a callable listed here whose docstring
#: says when it returns ``inf`` (`test_fuzz.py` checks both); NaN and -inf never are.
INFINITE_BY_DESIGN = {
    "scalar_blowup_time": "inf when v a <= 0: no blow-up",
    "isotropic_blowup_time": "inf when no eigenvalue is positive: no blow-up",
    "ray_blowup_time": "inf when lambda q <= 0: no blow-up",
    "lipschitz_measure": "inf once e^{2 k R^2} overflows: the bound is void, not wrong",
    "field_constants": "a constant is inf once it exceeds float64: a void estimate",
    "stability_constant": "log_constant is inf once its integrand overflows: a void bound",
    "softmax_deviation_bound": "inf where a hardmax margin is lost: a void bound",
    "gaussian_energy_along": "inf where the Gaussian energy is infinite",
    "gronwall_bound": "radius and log_constant are inf once they exceed float64: a void bound",
    "stability_check": "its Gronwall bound is void (inf) once the constant overflows",
    "hardmax_limit": "the gap is inf on a row whose scores all tie: no second-best score",
}


def _only_plus_inf(value: Any, depth: int = 0) -> bool:
    """True when no number reachable from `value` is NaN or -inf (+inf is allowed)."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return not bool(np.any(np.isnan(value) | (value == -np.inf)))
    if isinstance(value, (float, np.floating)):
        return value == value and value != -np.inf
    if isinstance(value, (list, tuple)):
        return all(_only_plus_inf(v, depth + 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and depth < 4:
        return all(
            _only_plus_inf(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)
        )
    return True


#: How a case may end cleanly.
CLEAN = ("finite", "documented inf", "failure status", "named error", "FloatingPointError")


def spoil(value: Any, corruption: str | float) -> Any:
    """Apply a named corruption, or scale `value` by a number (a drawn magnitude)."""
    if isinstance(corruption, str):
        return CORRUPTIONS[corruption](value)
    return _scaled(corruption)(value)


def run_case(name: str, func: Callable, param: str | None, corruption: str | float | None) -> str:
    """Call `func` with one argument spoiled and say how it ended (one of :data:`CLEAN` or a
    description of the defect). `corruption` is a key of :data:`CORRUPTIONS` or a factor that
    scales a float argument."""
    kwargs, _ = valid_arguments(name, func)
    if param is not None:
        kwargs[param] = spoil(kwargs[param], corruption)
    before = _snapshot(kwargs)
    params = set() if _is_exception(func) else set(inspect.signature(func).parameters)
    params |= set(kwargs)  # and the keywords a `**kwargs` parameter received
    args = ("a message",) if _is_exception(func) else ()
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    limit = SLOW_LIMITS.get(name, TIME_LIMIT)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = func(*args, **kwargs)
    except CallTimeout:
        return f"no answer within {limit:g} s"
    except FloatingPointError as exc:
        outcome = "FloatingPointError"
        if not str(exc) or str(exc).split(" encountered")[0] in NUMPY_KINDS:
            outcome = f"FloatingPointError with numpy's message: {exc}"
    except (ValueError, TypeError) as exc:
        named = set(_NAMED.findall(str(exc)))
        outcome = (
            "named error"
            if named & params or (named and param is None)
            else f"{type(exc).__name__} naming no argument: {exc}"
        )
        if type(exc).__module__.startswith(("numpy", "scipy")):
            outcome = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    except Warning as exc:  # a library's own warning (ToleranceWarning) reports a failure
        own = type(exc).__module__.startswith("token_dynamics")
        outcome = "failure status" if own else f"{type(exc).__name__} escaped: {exc}"
    except Exception as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    else:
        if _failed_status(result):
            outcome = "failure status"
        elif _finite(result):
            outcome = "finite"
        elif name.rsplit(".", 1)[-1] in INFINITE_BY_DESIGN and _only_plus_inf(result):
            outcome = "documented inf"
        else:
            outcome = "non-finite result returned silently"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _close_figures()
    if not all(_same(before[k], kwargs[k]) for k in kwargs):
        outcome = "an input was modified in place"
    return outcome


def scalable(name: str, func: Callable) -> list[str]:
    """The arguments of `func` that a drawn factor can scale (float arrays and numbers)."""
    kwargs, spoilable = valid_arguments(name, func)
    return [p for p in spoilable if "huge" in corruptions(kwargs[p])]


def all_cases(name: str, func: Callable) -> list[tuple[str | None, str | None]]:
    """The valid call and every (parameter, corruption) pair that applies to `func`."""
    if _is_exception(func) or name.rsplit(".", 1)[-1] in RECORD_SOURCES:
        return [(None, None)]
    kwargs, spoilable = valid_arguments(name, func)
    return [(None, None)] + [(p, c) for p in spoilable for c in corruptions(kwargs[p])]


# ---------------------------------------------------------------------------------------------
# Plotting and widgets: a fresh off-screen axes per call (closed after the call, so memory
# stays flat), results of the library as the records the helpers draw, widgets built without a
# kernel (as tests/test_widgets.py does).


def _is_canvas(value: Any) -> bool:
    """A matplotlib axes or figure: drawn on by design, so neither copied nor compared."""
    return type(value).__module__.startswith(("matplotlib.", "mpl_toolkits."))


def _snapshot(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of the arguments to compare with after the call (axes and figures shared)."""
    memo: dict[int, Any] = {}
    for value in kwargs.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if _is_canvas(item):
                memo[id(item)] = item
    return copy.deepcopy(kwargs, memo)


def _close_figures() -> None:
    """Close the pyplot figures a call opened (the factories' figures are not pyplot's)."""
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


def _figure() -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(3.0, 3.0), dpi=50)


def _ax() -> Any:
    return _figure().add_subplot()


def _ax3d() -> Any:
    return _figure().add_subplot(projection="3d")


@functools.cache
def _cached_record(cls_name: str) -> Any:
    calls = {k.rsplit(".", 1)[-1]: (k, f) for k, f in public_callables().items()}
    cls = calls[cls_name][1]
    source, func = calls[RECORD_SOURCES[cls_name]]
    kwargs, _ = valid_arguments(source, func)
    record = _find_instance(func(**kwargs), cls)
    if record is None:
        raise LookupError(f"{source} returned no {cls_name}")
    return record


def _record(cls_name: str) -> Callable[[], Any]:
    """A factory of a fresh copy of a real result of the library (computed once)."""
    return lambda: copy.deepcopy(_cached_record(cls_name))


def _solutions() -> list[Any]:
    return [_record("GaussianPath")(), _record("GaussianPath")()]


def _grid_values() -> np.ndarray:
    xs, ys = np.linspace(-1.0, 1.0, 4), np.linspace(-1.0, 1.0, 3)
    return xs[None, :] ** 2 + ys[:, None] ** 2


MODULE_OVERRIDES["token_dynamics.plotting"] = {
    "ax": _ax,
    "axes": lambda: [_ax(), _ax()],
    "fig": lambda: _ax().figure,
    "html": lambda: "<p>frame</p>",
    "states": lambda: np.stack([_sphere(N, 2, seed=s) for s in range(3)]),
    "trajectory": lambda: np.stack([_tokens(seed=s) for s in range(3)]),
    "indices": lambda: [0, 2],
    "labels": lambda: ["first", "second"],
    "before": _tokens,
    "after": lambda: _tokens(seed=1),
    "sequences": lambda: _dataset()[0],
    "interp": _record("HardmaxInterpolator"),
    "error": _record("DeepLimitError"),
    "sweep": _record("TikhonovSweep"),
    "solutions": _solutions,
    "rows": lambda: [_record("NoiseExponents")()],
    "counts": _record("RankCounts"),
    "result": _record("CircleMetastability"),
    "runs": lambda: {"run": _record("StabilityRun")()},
    "bound": _record("StabilityBound"),
    "estimate": _record("MCEstimate"),
    "x": lambda: np.array([1.0, 2.0, 4.0, 8.0]),
    "y": lambda: np.array([1.0, 0.5, 0.26, 0.12]),
    "xlabel": lambda: "$h$",
    "ylabel": lambda: "error",
    "curves": lambda: {"a": np.array([1.0, 2.0, 3.0, 4.0]), "b": np.array([2.0, 1.0, 0.5, 0.2])},
    "P": lambda: np.full((3, 3), 1.0 / 3.0),
    "xs": lambda: np.linspace(-1.0, 1.0, 4),
    "ys": lambda: np.linspace(-1.0, 1.0, 3),
    "values": _grid_values,
    "u": lambda: np.linspace(-1.0, 1.0, 5),
    "F": lambda: np.linspace(-1.0, 1.0, 5) - 1.0,
    "lambda_bar": lambda: 0.5,
    "rate": lambda: 0.5,
    "times": lambda: np.linspace(0.0, 1.0, 4),
    "cosines": lambda: np.linspace(0.5, 1.0, 4)[:, None] * np.ones((4, 3)),
    "energies": lambda: np.exp(-np.linspace(0, 1, 4))[None].repeat(3, 0),
}
MODULE_OVERRIDES["token_dynamics.widgets"] = {
    "ax": _ax,
    "X0": _tokens,
    "variant": lambda: "softmax",
    "times": lambda: np.linspace(0.0, 0.5, 3),
    "draw": lambda: lambda ax, a: ax.plot([0.0, 1.0], [0.0, a]),
}
OVERRIDES.update(
    {
        "plot_cone_trajectories": {"ax": _ax3d},
        "plot_cosine_matrix": {"X": _sphere},
        "plot_sample_vs_gaussian": {"x": lambda: _tokens(40)[:, 0], "mean": lambda: 0.0},
        "plot_mc_estimate": {
            "x": lambda: np.array([1.0, 2.0, 3.0]),
            "estimate": lambda: td.stochastic.mc_estimate(_tokens(4, 3)),
        },
        "plot_causal_paths": {
            "states": lambda: np.stack([_causal_tokens(seed=s) for s in range(3)]),
            "exact_first": lambda: _tokens(3),
        },
        "attention_explorer": {"variants": lambda: ("softmax",)},
        # one slider: its range is the `**ranges` of the valid call
        "figure_sliders": {"a": lambda: (0.0, 1.0, 0.5, 0.5)},
        "animate": {
            "labels": lambda: ["a", "b", "c"],
            "max_frames": lambda: 3,
            "dpi": lambda: 20.0,
            "figsize": lambda: (1.0, 1.0),
        },
        # `animate`'s options pass through its `**kwargs`: few small frames keep a call quick
        "animate_layers": {
            "substeps": lambda: 1,
            "max_frames": lambda: 3,
            "dpi": lambda: 20.0,
            "figsize": lambda: (1.0, 1.0),
        },
    }
)


# ---------------------------------------------------------------------------------------------
# Scales and separations: answers checked, not only endings. A spoiled call above is clean when
# it ends well; a finite answer can still be wrong. These cases put tokens at distances 1e-2 to
# 1e-12 of their size, scale them (and the interpolation targets) and one key weight over the
# float64 range, and compare each answer with a second way to it: a velocity with the attention
# matrix applied to the values, an interpolator's outputs with its targets. A case is clean when
# the two agree, or when it ends in a named error or a FloatingPointError: never a plausible
# wrong number.

#: Distances between tokens, relative to their size.
SEPARATIONS = tuple(10.0**-k for k in range(2, 13, 2))
#: Sizes (largest entry) of the tokens, or of the interpolation inputs and targets.
SIZES = (1e-300, 1e-150, 1e-6, 1.0, 1e3, 1e6, 1e150, 1e300)
#: The weight of key 0 (the other keys share the rest), from 1/2 down to the smallest normal
#: doubles' decade.
KEY_WEIGHTS = (0.5, 1e-20, 1e-100, 1e-200, 1e-300, 1e-308)
#: Outcomes of a scale case that are clean (a softmax interpolator whose collapse is not exact
#: says so: a failure status).
SCALE_CLEAN = ("agrees", "failure status", "named error", "FloatingPointError")
#: Interpolation: exact means within this fraction of the targets' size (item 4 of issue 28).
INTERPOLATION_RTOL = 1e-10


def _weighted_fields() -> dict[str, Callable[[], Any]]:
    """The attention fields that take key weights, with O(1) parameters."""
    A, V = np.array(_A), np.array(_V)
    att = importlib.import_module("token_dynamics.attention")
    return {
        "Softmax": lambda: att.Softmax(A, V, beta=1.5),
        "Unnormalised": lambda: att.Unnormalised(A, V),
        "L2": lambda: att.L2(A, np.eye(D), V),
        "Hardmax": lambda: att.Hardmax(A, V),
        "Sigmoid": lambda: att.Sigmoid(A, V, b=-0.5),
        "MultiHead": lambda: att.MultiHead((att.Softmax(A, V), att.L2(A, np.eye(D), V))),
        "Causal": lambda: att.Causal(A, V),
    }


def scale_cases() -> list[tuple[Any, ...]]:
    """Every case of the sweep: ``("attention", field, size, separation, weight)`` and
    ``("interpolation", builder, input size, target size, separation)``."""
    cases: list[tuple[Any, ...]] = [
        ("attention", name, size, sep, w0)
        for name in _weighted_fields()
        for size in SIZES
        for sep in SEPARATIONS
        for w0 in KEY_WEIGHTS
    ]
    cases += [
        ("interpolation", builder, sx, sy, sep)
        for builder in ("build_hardmax_interpolator", "build_softmax_interpolator")
        for sx in SIZES
        for sy in SIZES
        for sep in SEPARATIONS[::2]
    ]
    return cases


def scale_key(case: tuple[Any, ...]) -> tuple[str, str, str]:
    """The case as a line of ``fuzz_known_defects.txt``: callable | "scales" | its numbers."""
    kind, name, *numbers = case
    module = "attention" if kind == "attention" else "interpolation"
    return f"token_dynamics.{module}.{name}", "scales", " ".join(f"{x:.0e}" for x in numbers)


def _cluster(n: int, d: int, size: float, sep: float, seed: int, lead: bool = False) -> np.ndarray:
    """``n`` points of size about ``size``, pairwise about ``sep * size`` apart (a cluster around
    one point, so that the scores differ by that relative amount). With ``lead``, point 0 sticks
    out of the cluster along ``A c`` (``c`` its centre): it is every query's best key, and the
    small weight it gets meets the clamped terms of the others."""
    rng = np.random.default_rng(seed)
    centre = np.linspace(1.0, 0.5, d)
    Z = centre + sep * rng.normal(size=(n, d))
    if lead:
        u = np.array(_A) @ centre
        Z[0] = centre + 4.0 * sep * u / np.linalg.norm(u)
    return size * (Z / np.abs(Z).max())


def _attention_case(name: str, size: float, sep: float, w0: float) -> str:
    field = _weighted_fields()[name]()
    n = N
    w = np.full(n, (1.0 - w0) / (n - 1))
    w[0] = w0
    content = _cluster(n, D, size, sep, seed=1, lead=True)
    X = content
    if name == "Causal":  # positions first; key 0 comes first, so every query sees it
        X = np.column_stack([np.linspace(0.0, 1.0, n), content])
    v = field.velocity(X, weights=w)
    if name == "MultiHead":
        P = field.attention_matrices(X, weights=w).sum(axis=0)
    else:
        P = field.attention_matrix(X, weights=w)
    values = content @ np.array(_V).T
    with np.errstate(over="ignore", invalid="ignore"):
        vP = P @ values
        if name == "Causal":
            v = v[:, 1:]
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(vP))):
            return "non-finite result returned silently"
        # Scores are known to a few hundred roundings of their size (|x|^2 times O(1) parameters),
        # which moves each weight by that fraction: kappa. Normalised fields then move by at most
        # 2 kappa times the spread of the values, unnormalised ones by kappa times their sum.
        kappa = min(1.0, 512 * np.finfo(float).eps * float(np.float64(size) ** 2))
        if name in ("Unnormalised", "Sigmoid"):
            scale = np.abs(P) @ np.abs(values)
            tol = (1e-10 + 2 * kappa) * scale
        else:
            spread = float(np.ptp(values, axis=0).max())
            tol = 1e-10 * float(np.abs(values).max()) + 2 * kappa * spread
        if np.all(np.abs(v - vP) <= tol):
            return "agrees"
        worst = float(np.max(np.abs(v - vP) / np.maximum(tol, np.finfo(float).tiny)))
    return f"plausible wrong number: the velocity is {worst:.3g} tolerances off P @ values"


def _interpolation_data(sx: float, sy: float, sep: float) -> tuple[list, list]:
    """Three overlapping input sequences with two tokens ``sep`` apart (relative), and targets
    with two points ``sep`` apart, at sizes ``sx`` and ``sy``."""
    P = _cluster(4, D, 1.0, 1.0, seed=2)
    P[1] = P[0] + sep * np.array([0.6, 0.8])
    Y0 = _cluster(2, D, 1.0, 1.0, seed=3)
    Y0[1] = Y0[0] + sep * np.array([0.8, -0.6])
    inputs = [P[[0, 1, 2]], P[[1, 3]], P[[0, 3]]]
    targets = [Y0, _cluster(2, D, 1.0, 1.0, seed=4), _cluster(1, D, 1.0, 1.0, seed=5)]
    return [sx * Z for Z in inputs], [sy * Z for Z in targets]


def _interpolation_case(builder: str, sx: float, sy: float, sep: float) -> str:
    X, Y = _interpolation_data(sx, sy, sep)
    interpolation = importlib.import_module("token_dynamics.interpolation")
    interp = getattr(interpolation, builder)(X, Y, rng=0)
    if getattr(interp, "exact_collapse", True) is False:
        return "failure status"
    size = max(float(np.abs(Z).max()) for Z in Y)
    outs = interp.transformer(X)
    worst = max(interpolation.hausdorff_distance(o, y) for o, y in zip(outs, Y, strict=True)) / size
    if worst <= INTERPOLATION_RTOL:
        return "agrees"
    return f"plausible wrong number: outputs {worst:.3g} of the targets' size off the targets"


def run_scale_case(case: tuple[Any, ...]) -> str:
    """Run one case of :func:`scale_cases` and say how it ended: one of :data:`SCALE_CLEAN`, or
    a description of the defect."""
    kind, name, *numbers = case
    run = _attention_case if kind == "attention" else _interpolation_case
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return run(name, *numbers)
    except CallTimeout:
        return f"no answer within {TIME_LIMIT:g} s"
    except FloatingPointError as exc:
        if not str(exc) or str(exc).split(" encountered")[0] in NUMPY_KINDS:
            return f"FloatingPointError with numpy's message: {exc}"
        return "FloatingPointError"
    except (ValueError, TypeError) as exc:
        if _NAMED.search(str(exc)):
            return "named error"
        return f"{type(exc).__name__} naming no argument: {exc}"
    except Warning as exc:
        return f"{type(exc).__name__} escaped: {exc}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
