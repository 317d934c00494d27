r"""Check-your-answer for the computational exercises of the book.

Each computational exercise of the book is followed by a cell that calls :func:`check_answer`
with the reader's answer. The expected answer is computed here, from the library, at the time of
the check (nothing is stored), and compared within a tolerance that says why it is that size;
the verdict says whether the answer is right, never what the right answer is.

A judge holds no worked answer: it computes the quantity the exercise defines, in the words of
its statement, with the library functions that exist for that mathematics (a step-error study,
a cluster count, a Wasserstein distance), or it checks the property that defines the answer (a
threshold by the sign change around it) instead of solving for it. The reasoning of a
solution (its closed forms, its signs, its why) is written only in the book's full edition,
and the project's own checks verify that no solution's sentences, formulas or code lines are
in this package. The checks themselves are not hidden: their source is part of the installed
package, and a reader who opens it finds how each expected answer is computed (the computation
the exercise asks for), not a stored value. They help a reader who works alone; they are not an
examination.

An answer of the wrong form (a string where a number is asked, a dict where a pair is asked, a
count that is not a whole number) raises an error that names the form; a number of the right
form that is not finite (NaN, an infinity) is not right, in every check.

Examples
--------
>>> from token_dynamics.exercises import check_answer
>>> check_answer("sync-ex-tanh-bias", ...)
Not answered yet: replace `...` by the smallest bias sigma_W (a number, two digits).
>>> check_answer("sync-ex-tanh-bias", 10.0)
Not yet: 10 is not right. Expected: the smallest bias sigma_W (a number, two digits), within 0.01.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np
from scipy.special import ndtri

from . import diagnostics, discretisation, stochastic, wasserstein
from .attention import Softmax
from .gaussian import moment_gap, moment_matched_cloud, softmax_gaussian_1d, solve_moments
from .gradient_flow import circle_metastability, energy_rate
from .integrators import integrate
from .sampling import gaussian_cloud, uniform_sphere

__all__ = ["CHECKS", "AnswerCheck", "ExerciseCheck", "check_answer", "exercise_labels"]


def _real(value: object) -> TypeGuard[numbers.Real]:
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def _shown(answer: object) -> str:
    """`answer` as a student wrote it: NumPy scalars, alone or inside a tuple, a list or a dict,
    as the plain numbers they print as (``(1.5, 2.0)``, not ``(np.float64(1.5), ...)``); a
    float to six significant digits; arrays as NumPy shows them."""

    def plain(value: object) -> object:
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, tuple):  # a named tuple too, shown as a plain one
            return tuple(map(plain, value))
        if isinstance(value, list):
            return list(map(plain, value))
        if isinstance(value, Mapping):
            return {plain(k): plain(v) for k, v in value.items()}
        return value

    value = plain(answer)
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _number(answer: object) -> float:
    """`answer` as a float, if it is one real number: a Python or NumPy integer or float, not a
    bool, a string, an array or a complex number. NaN and the infinities are real numbers: they
    pass, and :func:`check_answer` judges them not right."""
    if not _real(answer):
        raise TypeError(f"`answer` must be a real number, not {_shown(answer)}")
    return float(answer)


def _pair(answer: object) -> tuple[float, float]:
    """`answer` as two floats, if it is a tuple, a list or a 1-d array of two real numbers
    (strings are refused, not converted)."""
    if isinstance(answer, tuple | list) or (isinstance(answer, np.ndarray) and answer.ndim == 1):
        items = list(answer)
        if len(items) == 2 and all(map(_real, items)):
            return float(items[0]), float(items[1])
    raise TypeError(f"`answer` must be a pair of numbers, not {_shown(answer)}")


def _finite(value: object) -> bool:
    """Whether every number of a parsed answer (a float, a pair, a dict of counts) is finite."""
    numbers_ = list(value.values()) if isinstance(value, Mapping) else value
    return bool(np.all(np.isfinite(np.asarray(numbers_, dtype=float))))


@dataclass(frozen=True)
class AnswerCheck:
    """The verdict on one answer; it shows as its message.

    Attributes
    ----------
    exercise : str
        The label of the exercise.
    status : str
        ``"correct"``, ``"incorrect"`` or ``"unanswered"`` (the answer is still ``...``).
    message : str
        What the reader sees: the verdict, and what was expected in form (never in value).

    Examples
    --------
    :func:`check_answer` returns one; an answer left as ``...`` is not judged:

    >>> from token_dynamics.exercises import check_answer
    >>> verdict = check_answer("gauss-ex-particles-near-blowup", ..., seed=1)
    >>> verdict.status, verdict.correct
    ('unanswered', False)
    """

    exercise: str
    status: str
    message: str

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def __repr__(self) -> str:
        return self.message


@dataclass(frozen=True)
class ExerciseCheck:
    """How one exercise is checked.

    Attributes
    ----------
    expects : str
        The form of the answer, as the reader is told it.
    inputs : tuple of str
        The keyword arguments :func:`check_answer` needs besides the answer (the exercise's
        data, from its notebook).
    judge : callable
        ``judge(value, **inputs) -> bool``: whether the answer is right, given the value that
        `parse` made of it (only finite ones: an answer with NaN or an infinity is not right
        without a judgement); may raise ``ValueError`` on a value outside the form.
    tolerance : str
        The tolerance, as the reader is told it ("" when the answer must be exact).
    parse : callable
        ``parse(answer) -> value``: the answer in the form the judge takes (a float, a pair of
        floats, a dict of counts); raises ``TypeError`` or ``ValueError``, naming the form, on
        an answer of another form. By default one real number.

    Examples
    --------
    >>> from token_dynamics.exercises import CHECKS
    >>> CHECKS["tok-ex-clusters"].inputs
    ('X0',)
    """

    expects: str
    inputs: tuple[str, ...]
    judge: Callable[..., bool]
    tolerance: str = ""
    parse: Callable[[object], object] = _number


# -- Part I: tokens ---------------------------------------------------------------------------
EULER_LAYERS = (50, 100, 200, 400)  # the exercise's numbers of layers on [0, 2]


def _euler_order(order, *, field, X0):
    # the exercise's comparison: projected Euler with L layers on [0, 2] against the RK4 run
    rk4 = integrate(field, X0, [0, 2], dt=0.01, geometry="sphere").final
    study = discretisation.step_errors(
        field, X0, 2.0, rk4, EULER_LAYERS, method="euler", geometry="sphere"
    )
    # the integer order or a fitted slope: a fit over three halvings is within O(h) of it
    return abs(order - study.order) < 0.25


CLUSTER_BETAS = (1.0, 4.0, 16.0, 64.0)  # the exercise's inverse temperatures


def _counts(answer: object) -> dict[float, int]:
    """`answer` as {beta: count}, if it is a dict whose keys are the exercise's betas (numbers,
    each once) and whose values are whole numbers (``2`` or ``2.0``; not ``1.9`` or NaN)."""
    form = (
        f"`answer` must be a dict {{beta: number of clusters}} with the keys {CLUSTER_BETAS} "
        f"and whole-number counts, not {_shown(answer)}"
    )
    if not isinstance(answer, Mapping) or not all(map(_real, [*answer, *answer.values()])):
        raise TypeError(form)
    counts = {float(b): float(c) for b, c in answer.items()}
    if len(counts) != len(answer) or set(counts) != set(CLUSTER_BETAS):
        raise TypeError(form)
    if not all(np.isfinite(c) and c == int(c) for c in counts.values()):
        raise ValueError(form)
    return {b: int(c) for b, c in counts.items()}


def _cluster_counts(counts, *, X0):
    I2 = np.eye(2)
    return all(
        count
        == diagnostics.cluster_count(
            integrate(Softmax(I2, I2, beta=b), X0, [0, 20], dt=0.05, geometry="sphere").final,
            1e-3,
        )
        for b, count in counts.items()
    )


# -- Part II: the Transformer PDE -------------------------------------------------------------
# the exercises that ask for a rate of change at one cloud: 3% passes a one-sided difference
# over the step 0.01 of the chapters' runs and the answer rounded to two digits (both within 2%
# in each exercise, below), and refuses the nearest wrong answers (23% and more off)
RELATIVE = 0.03


def _energy_first_change(rate):
    # the exercise's cloud X_line, spread along the first axis, and its indefinite pair
    X = gaussian_cloud(20, np.zeros(2), np.diag([1.0, 1e-4]), rng=0)
    A, V = np.eye(2), np.diag([1.0, -1.0])
    expected = energy_rate(A, X, Softmax(A, V).velocity(X))
    # the rate is a closed form (rounding only); a one-sided difference quotient of the energy
    # over a step h is off by a relative O(h) at X_line: 2.0 h along the flow (2% on the
    # chapter's grid of step 0.01), 1.2 h along the straight step x + h v. 3% passes them, and
    # refuses the opposite sign and the rate of unnormalised attention (70% off)
    return abs(rate - expected) <= RELATIVE * abs(expected)


MERGE_FACTOR = 1.5


def _late_merges(time, *, n, t_max):
    # the chapter's run (seed 1, 300 log-spaced output times), at beta = 9
    run = circle_metastability(9.0, n, t_max, n_times=300, rng=1)
    last = np.nonzero(np.diff(run.cluster_counts))[0][-1]
    # the merge is seen only between two output times (a factor 1.07 apart here): within a
    # factor 1.5 of them, the time before or after it on any output grid with steps of at most
    # a factor 1.5 (54 or more output times over the chapter's window) is right; the merges
    # before it, and the last one at beta = 16, are orders of magnitude away
    return run.times[last] / MERGE_FACTOR <= time <= MERGE_FACTOR * run.times[last + 1]


def _quantile_distances(pair, *, m0, s0, v, a, T):
    n = 1000
    x = (m0 + np.sqrt(s0) * ndtri((np.arange(1, n + 1) - 0.5) / n))[:, None]
    exact = softmax_gaussian_1d(a, v, m0, s0, [0.0, T])
    # RK4's error in the distance falls like dt^4: 1.5e-7 relative at dt = 0.05 against a step of
    # 0.005, measured at the chapter's parameters (1e-5 at the chapter's own step 0.15)
    final = integrate(Softmax(np.array([[a]]), np.array([[v]])), x, [0.0, T], dt=0.05).final
    expected = (
        wasserstein.w2_gaussian_1d(x[:, 0], m0, s0),
        wasserstein.w2_gaussian_1d(
            final[:, 0], float(exact.means[-1, 0]), float(exact.covariances[-1, 0, 0])
        ),
    )
    # 2%: the reader's own RK4 step moves the second distance by a relative dt^4, far less
    return bool(np.allclose(pair, expected, rtol=0.02, atol=0))


def _swapped_order(pair, *, tokens):
    swapped = tokens.copy()
    swapped[[0, 1], 1:] = tokens[[1, 0], 1:]
    expected = (
        wasserstein.wasserstein2(tokens[:, 1:], swapped[:, 1:]),
        wasserstein.conditional_w2(tokens, swapped),
    )
    # both are exact computations (a linear program, a closed form): rounding only. A reader's
    # own solver may compute a distance from the Gram formula |x|^2 + |y|^2 - 2 <x, y>, whose
    # rounding, of the order of eps times the squared spread under a square root, does not
    # shrink with the distance: each entry is judged against the larger of the two
    scale = max(max(expected), np.finfo(float).tiny)
    return bool(np.allclose(pair, expected, rtol=1e-6, atol=1e-6 * scale))


NEAR_BLOWUP_TIMES = (0.3, 1.0)  # the exercise's two depths, far from and near t* = 1.25
# RK4 at any step up to 0.1 moves the ratio of a cloud by less than 3e-4 (measured at three
# seeds): 1% accepts the reader's own step and refuses a ratio computed on another cloud
NEAR_BLOWUP_RTOL = 0.01


def _near_blowup_ratio(ratio, *, seed):
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool | np.bool_) or seed < 0:
        raise TypeError(
            "`seed` must be the whole number >= 0 you passed to "
            f"`gaussian.moment_matched_cloud` as `rng`, not {_shown(seed)}"
        )
    field, mean, cov = Softmax(np.eye(2), np.eye(2)), np.zeros(2), 0.4 * np.eye(2)
    times = (0.0, *NEAR_BLOWUP_TIMES)
    moments = solve_moments(field, mean, cov, times)
    # the ratio of two sampling errors changes from cloud to cloud: it is judged on the
    # reader's own
    cloud = moment_matched_cloud(1000, mean, cov, rng=int(seed))
    states = integrate(field, cloud, times, dt=0.02).states
    far, near = (moment_gap(states[k], moments.means[k], moments.covariances[k]) for k in (1, 2))
    return abs(ratio - near / far) <= NEAR_BLOWUP_RTOL * near / far


# -- Part III: noise --------------------------------------------------------------------------
TWO_DIGITS = 0.01  # "to two digits"


def _lambda_bar(sigma_W: float) -> float:
    return stochastic.noise_exponents("tanh", d=4, sigma_W=sigma_W).lambda_bar


def _tanh_bias(sigma):
    # the smallest bias for Assumption 1 (lambda_bar < 0) lies within two digits of the
    # answer: lambda_bar is not yet negative just below it and is negative just above it
    if sigma < 0:
        raise ValueError(f"`answer` must be a bias sigma_W >= 0, not {_shown(sigma)}")
    below, above = max(sigma - TWO_DIGITS, 0.0), sigma + TWO_DIGITS
    return bool(_lambda_bar(below) >= 0 > _lambda_bar(above))


def _repulsive_ratio(ratio):
    # Assumption 2 with epsilon = 0 asks d/dt S_beta <= 0 along attention at every cloud: its
    # ratio d/dt S_beta / S_beta at the exercise's initial cloud X0 (beta = 1, V = -I)
    X = uniform_sphere(16, 5, rng=0)
    expected = stochastic.attention_forcing(X, beta=1.0, V=-np.eye(5))
    # a closed form (rounding only); a one-sided difference quotient of S_beta over a step h is
    # off by a relative O(h) at X0, 0.6 h along the flow on the sphere: 3% passes h <= 0.05,
    # and refuses the ratio of V = I, that of the milder V = -0.1 I of the chapter and
    # d/dt S_beta not divided by S_beta (23% off)
    return abs(ratio - expected) <= RELATIVE * abs(expected)


#: The check of each computational exercise of the book, by the exercise's label: the form of
#: its answer, the inputs it needs from the notebook, and how it judges an answer.
CHECKS: dict[str, ExerciseCheck] = {
    "tok-ex-layernorm": ExerciseCheck(
        "the order p of the projected Euler method, whose error behaves like h^p in the step h "
        "(a number)",
        ("field", "X0"),
        _euler_order,
        "0.25",
    ),
    "tok-ex-clusters": ExerciseCheck(
        "a dict {beta: number of clusters} for beta = 1, 4, 16, 64",
        ("X0",),
        _cluster_counts,
        parse=_counts,
    ),
    "gf-ex-indefinite": ExerciseCheck(
        "the energy's first change rate dE/dt at t = 0 for the cloud X_line (a number)",
        (),
        _energy_first_change,
        f"a relative {RELATIVE:.0%}",
    ),
    "gf-ex-beta": ExerciseCheck(
        "the time of the last merge at beta = 9 (a number)",
        ("n", "t_max"),
        _late_merges,
        f"a factor {MERGE_FACTOR:g}",
    ),
    "mf-ex-quantiles": ExerciseCheck(
        "the pair (W2 at time 0, W2 at time T) of the quantile tokens",
        ("m0", "s0", "v", "a", "T"),
        _quantile_distances,
        "a relative 2%",
        parse=_pair,
    ),
    "mf-ex-order": ExerciseCheck(
        "the pair (W2 of the contents, conditional W2) of the swapped tokens",
        ("tokens",),
        _swapped_order,
        "1e-6 times the larger of the two distances",
        parse=_pair,
    ),
    "gauss-ex-particles-near-blowup": ExerciseCheck(
        "the moment error at t = 1.0 divided by the one at t = 0.3, for the moment-matched "
        "cloud of `seed` (a number)",
        ("seed",),
        _near_blowup_ratio,
        f"a relative {NEAR_BLOWUP_RTOL:.0%}",
    ),
    "sync-ex-tanh-bias": ExerciseCheck(
        "the smallest bias sigma_W (a number, two digits)", (), _tanh_bias, f"{TWO_DIGITS}"
    ),
    "sync-ex-repulsive": ExerciseCheck(
        "the ratio (dS_beta/dt) / S_beta of the repulsive flow at X0 (a number)",
        (),
        _repulsive_ratio,
        f"a relative {RELATIVE:.0%}",
    ),
}


def exercise_labels() -> list[str]:
    """The labels of the exercises :func:`check_answer` knows, sorted.

    Returns
    -------
    list of str
        The labels (``"tok-ex-clusters"``, ...), as in the book's exercise directives.

    Examples
    --------
    >>> from token_dynamics.exercises import exercise_labels
    >>> "tok-ex-clusters" in exercise_labels()
    True
    """
    return sorted(CHECKS)


def check_answer(exercise: str, answer: object, **inputs: object) -> AnswerCheck:
    """Say whether `answer` answers the computational exercise `exercise`, without the answer.

    Parameters
    ----------
    exercise : str
        The exercise's label (``"tok-ex-clusters"``, ...: :func:`exercise_labels`).
    answer : object
        The reader's answer, in the form the exercise asks (``CHECKS[exercise].expects``);
        ``...`` (Ellipsis) means not answered yet.
    **inputs
        The exercise's data from its notebook (``CHECKS[exercise].inputs``).

    Returns
    -------
    AnswerCheck
        Its ``status`` is ``"correct"``, ``"incorrect"`` or ``"unanswered"``; it shows as its
        message.

    Raises
    ------
    ValueError
        For an unknown exercise or missing inputs, or an answer outside its form (a count
        that is not a whole number, a negative bias).
    TypeError
        For an answer of the wrong type (a string, a dict or an array where a number is asked),
        or an input of the wrong type (a seed that is not a whole number).

    Examples
    --------
    >>> from token_dynamics.exercises import check_answer
    >>> check_answer("gauss-ex-particles-near-blowup", ..., seed=1)
    Not answered yet: replace `...` by the moment error at t = 1.0 divided by the one at
    t = 0.3, for the moment-matched cloud of `seed` (a number).
    >>> check_answer("gauss-ex-particles-near-blowup", float("nan"), seed=1)
    Not yet: nan is not right. Expected: the moment error at t = 1.0 divided by the one at
    t = 0.3, for the moment-matched cloud of `seed` (a number), within a relative 1%.
    """
    if exercise not in CHECKS:
        raise ValueError(f"`exercise` must be one of {exercise_labels()}, not {exercise!r}")
    check = CHECKS[exercise]
    missing = [name for name in check.inputs if name not in inputs]
    extra = sorted(set(inputs) - set(check.inputs))
    if missing or extra:
        raise ValueError(
            f"`inputs` of {exercise!r} must be exactly {list(check.inputs)}: "
            f"missing {missing}, unexpected {extra}"
        )
    if answer is Ellipsis:
        message = f"Not answered yet: replace `...` by {check.expects}."
        return AnswerCheck(exercise, "unanswered", message)
    value = check.parse(answer)
    if _finite(value) and check.judge(value, **inputs):
        return AnswerCheck(exercise, "correct", "Correct.")
    within = f", within {check.tolerance}" if check.tolerance else ""
    message = f"Not yet: {_shown(answer)} is not right. Expected: {check.expects}{within}."
    return AnswerCheck(exercise, "incorrect", message)
