"""Fuzz the whole public API under the failure policy of CONTRIBUTING.md.

Every public callable (the ``__all__`` of ``token_dynamics`` and of each public subpackage,
plotting and widgets included, on a fresh off-screen axes per call) is called with one
argument spoiled at a time: bad shapes, NaN, inf, huge and tiny magnitudes, empty inputs, wrong
dtypes, n <= d, duplicated tokens, zero covariances, extreme scalars. A case ends cleanly with a
finite result, a documented +inf (a callable of :data:`tests.fuzz_api.INFINITE_BY_DESIGN`, whose
docstring says when: an infinite blow-up time, a void bound), a result whose status reports the
failure, a ``ValueError``/``TypeError`` that names an argument in backticks, or a
``FloatingPointError``; within
:data:`tests.fuzz_api.TIME_LIMIT`, with warnings turned into errors, its inputs unmodified.

Hypothesis draws the cases: the named corruptions, and factors drawn over the whole float64
range that scale one float argument (for a step, all but the band of long runs the caller asks
for: :data:`STEP_FACTORS`). The profile is chosen by ``TOKEN_DYNAMICS_FUZZ``:
``quick`` (the default, deterministic, in ``make test``) draws 25 cases per callable;
``long`` (``make fuzz``, randomised) draws 2000.
``tools/fuzz_report.py`` runs every named case once and prints the fraction that ends cleanly.

A second sweep checks answers, not only endings (`tests.fuzz_api.scale_cases`): tokens at
distances 1e-2 to 1e-12 of their size, sizes and key weights over the float64 range, and
interpolation data of any sizes; each answer is compared with a second way to it.

Cases in ``tests/fuzz_known_defects.txt`` are defects found and not yet fixed: they are
reported by the sweep, and `test_known_defects_are_current` fails once one of them is fixed,
so the list only shrinks.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .fuzz_api import (
    CLEAN,
    INFINITE_BY_DESIGN,
    SCALE_CLEAN,
    all_cases,
    public_callables,
    run_case,
    run_scale_case,
    scalable,
    scale_cases,
    scale_key,
    valid_arguments,
)

#: The profiles: name -> (derandomize, cases per callable).
PROFILES = {"quick": (True, 25), "long": (False, 2000)}
for _name, (_derandomize, _examples) in PROFILES.items():
    settings.register_profile(
        _name,
        derandomize=_derandomize,
        deadline=None,
        max_examples=_examples,
        suppress_health_check=list(HealthCheck),
    )
PROFILE = settings.get_profile(os.environ.get("TOKEN_DYNAMICS_FUZZ", "quick"))

CALLABLES = public_callables()
KNOWN_FILE = Path(__file__).with_name("fuzz_known_defects.txt")


def _known() -> set[tuple[str, str, str]]:
    lines = KNOWN_FILE.read_text().splitlines() if KNOWN_FILE.exists() else []
    return {tuple(line.split(" | ")) for line in lines if line and not line.startswith("#")}


KNOWN = _known()
#: Step sizes, which a caller's call runs as given (CONTRIBUTING.md, "Defaults and accuracy"),
#: up to `integrators.MAX_STEPS` steps in all; beyond, the call is refused by name. The valid
#: calls take steps of 0.05-0.1 over short horizons: a step divided by 10 still runs in
#: seconds, one divided by 1e8 asks for more than MAX_STEPS and must be refused, and in between
#: lie runs of up to 10^7 steps, minutes long, which are what the caller asked for and no
#: defect (drawn there, phase_diagram took more than the time limit at a step divided by 1.6e4;
#: attention_explorer takes 8 s at a step divided by 100 on the 2-core VM under load).
STEP_ARGUMENTS = {"dt"}
STEP_FACTORS = st.floats(0.1, 1e300) | st.floats(1e-300, 1e-8) | st.floats(-1e300, -1e-300)
#: Callables with arguments to spoil (records and exception classes have only their valid call).
SPOILABLE = sorted(n for n, f in CALLABLES.items() if len(all_cases(n, f)) > 1)


def test_every_public_callable_is_swept():
    """Each public subpackage declares `__all__`, and each callable in it has a valid call."""
    assert len(CALLABLES) > 150
    for name, func in CALLABLES.items():
        valid_arguments(name, func)  # raises LookupError naming a parameter without a factory


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_valid_call_ends_cleanly(name):
    """The valid call of the registry works: the sweep starts from a correct call."""
    assert run_case(name, CALLABLES[name], None, None) in CLEAN


@pytest.mark.parametrize("name", SPOILABLE)
def test_spoiled_call_ends_cleanly(name):
    """One spoiled argument ends in a finite result, a failure status or a named error."""
    func = CALLABLES[name]
    cases = st.sampled_from(all_cases(name, func)[1:])
    scalable_args = scalable(name, func)
    steps = [p for p in scalable_args if p in STEP_ARGUMENTS]
    others = [p for p in scalable_args if p not in STEP_ARGUMENTS]
    if others:  # and magnitudes drawn over the whole float64 range
        factors = st.floats(1e-300, 1e300) | st.floats(-1e300, -1e-300)
        cases = cases | st.tuples(st.sampled_from(others), factors)
    if steps:  # a step: any magnitude but those that ask for an honest run of minutes
        cases = cases | st.tuples(st.sampled_from(steps), STEP_FACTORS)

    @PROFILE
    @given(case=cases)
    def check(case):
        param, corruption = case
        outcome = run_case(name, func, param, corruption)
        if _known_key(name, param, corruption) not in KNOWN:
            assert outcome in CLEAN, f"{name}({param}: {corruption}) -> {outcome}"

    check()


def _known_key(name: str, param: str, corruption: str | float) -> tuple[str, str, str]:
    """The listed case a spoiled call stands for: a drawn factor stands for `huge` (|f| > 1)
    or `tiny`, the named corruptions that represent its family."""
    if isinstance(corruption, str):
        return name, param, corruption
    return name, param, "huge" if abs(corruption) > 1 else "tiny"


#: The sweep over scales and separations, by its line in the known-defects list.
SCALE_CASES = {scale_key(case): case for case in scale_cases()}


def test_scales_and_separations_give_the_right_answers():
    """Every case of the scale sweep (tokens 1e-2 to 1e-12 apart, sizes and one key weight over
    the float64 range; interpolation inputs and targets of sizes over that range): the velocity
    agrees with the attention matrix applied to the values, the interpolator meets its targets
    to 1e-10 of their size, or the call ends in a named error or a FloatingPointError. All
    cases, a few seconds: issue 28's defects were single cases of it."""
    defects = [
        f"{key} -> {outcome}"
        for key, case in SCALE_CASES.items()
        if key not in KNOWN and (outcome := run_scale_case(case)) not in SCALE_CLEAN
    ]
    assert not defects, "\n".join(defects[:20])


def _ends_cleanly(name: str, param: str, corruption: str) -> bool:
    if param == "scales":
        return run_scale_case(SCALE_CASES[name, param, corruption]) in SCALE_CLEAN
    return run_case(name, CALLABLES[name], param, corruption) in CLEAN


def test_known_defects_are_current():
    """Each listed defect still occurs: remove its line from the list once it is fixed (an
    empty list, every case clean, is the goal; a loop rather than a parametrisation, so that
    the empty list is checked rather than skipped)."""
    fixed = [
        (name, param, corruption)
        for name, param, corruption in sorted(KNOWN)
        if _ends_cleanly(name, param, corruption)
    ]
    assert not fixed, f"fixed, remove from tests/fuzz_known_defects.txt: {fixed}"


def test_the_sweep_detects_each_kind_of_defect():
    """The classifier can fail: planted defects of every kind are reported, not passed."""

    def silent_nan(X):
        return np.full(np.shape(X), np.nan)

    def mutates(X):
        X[0, 0] = 2.0  # the valid X is all ones
        return 0.0

    def unnamed(X):
        raise ValueError("shapes do not match")

    def warns(X):
        return np.exp(np.asarray(X) * 1e3)

    X = np.ones((2, 2))
    for planted in (silent_nan, mutates, unnamed, warns):
        outcome = _call(planted, {"X": X.copy()})
        assert outcome not in CLEAN, planted.__name__
    assert _call(lambda X: float(np.sum(X)), {"X": X}) == "finite"


def test_documented_inf_is_listed_and_documented():
    """+inf is clean only for a listed public callable whose docstring says when it occurs."""
    short = {name.rsplit(".", 1)[-1]: func for name, func in CALLABLES.items()}
    for key in INFINITE_BY_DESIGN:
        assert key in short, f"{key} of INFINITE_BY_DESIGN is not a public callable"
        assert re.search(r"\binf\b", short[key].__doc__ or ""), f"{key}: say when it is inf"


def test_inf_counts_only_where_documented():
    """The same +inf is a defect from an unlisted callable; NaN and -inf from a listed one."""
    from . import fuzz_api

    X = np.ones((2, 2))
    assert _call(lambda X: np.inf, {"X": X}) == "non-finite result returned silently"
    fuzz_api.INFINITE_BY_DESIGN["planted"] = "a test"
    try:
        assert _call(lambda X: np.array([1.0, np.inf]), {"X": X}) == "documented inf"
        for bad in (np.nan, -np.inf):
            assert _call(lambda X, bad=bad: np.array([1.0, bad]), {"X": X}) not in CLEAN
    finally:
        del fuzz_api.INFINITE_BY_DESIGN["planted"]


def _call(func, kwargs):
    from . import fuzz_api

    fuzz_api.OVERRIDES["planted"] = {k: (lambda v=v: v.copy()) for k, v in kwargs.items()}
    try:
        return run_case("tests.planted", func, None, None)
    finally:
        del fuzz_api.OVERRIDES["planted"]
