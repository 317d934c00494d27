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
in this package.

Examples
--------
>>> from token_dynamics.exercises import check_answer
>>> check_answer("sync-ex-tanh-bias", ...)
Not answered yet: replace `...` by the smallest bias sigma_W (a number, two digits).
>>> check_answer("sync-ex-tanh-bias", 10.0)
Not yet: 10 is not right. Expected: the smallest bias sigma_W (a number, two digits), within 0.01.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.special import ndtri

from . import diagnostics, discretisation, stochastic, wasserstein
from .attention import Softmax
from .gaussian import moment_gap, moment_matched_cloud, softmax_gaussian_1d, solve_moments
from .gradient_flow import circle_metastability, energy_rate
from .integrators import integrate
from .sampling import gaussian_cloud, uniform_sphere

__all__ = ["CHECKS", "AnswerCheck", "ExerciseCheck", "check_answer", "exercise_labels"]


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
    >>> verdict = check_answer("gauss-ex-particles-near-blowup", ...)
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
        ``judge(answer, **inputs) -> bool``: whether the answer is right; raises ``TypeError``
        or ``ValueError`` on an answer of the wrong form.
    tolerance : str
        The tolerance, as the reader is told it ("" when the answer must be exact).

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


def _number(answer: object) -> float:
    if isinstance(answer, bool) or not np.isscalar(answer) or not np.isreal(answer):
        raise TypeError(f"`answer` must be a real number, not {answer!r}")
    return float(np.real(answer))


def _pair(answer: object) -> tuple[float, float]:
    values = np.asarray(answer, dtype=float) if not isinstance(answer, str) else None
    if values is None or values.shape != (2,):
        raise TypeError(f"`answer` must be a pair of numbers, not {answer!r}")
    return float(values[0]), float(values[1])


# -- Part I: tokens ---------------------------------------------------------------------------
EULER_LAYERS = (50, 100, 200, 400)  # the exercise's numbers of layers on [0, 2]


def _euler_order(answer, *, field, X0):
    # the exercise's comparison: projected Euler with L layers on [0, 2] against the RK4 run
    rk4 = integrate(field, X0, [0, 2], dt=0.01, geometry="sphere").final
    study = discretisation.step_errors(
        field, X0, 2.0, rk4, EULER_LAYERS, method="euler", geometry="sphere"
    )
    # the integer order or a fitted slope: a fit over three halvings is within O(h) of it
    return abs(_number(answer) - study.order) < 0.25


CLUSTER_BETAS = (1.0, 4.0, 16.0, 64.0)  # the exercise's inverse temperatures


def _cluster_counts(answer, *, X0):
    if not isinstance(answer, Mapping) or {float(b) for b in answer} != set(CLUSTER_BETAS):
        raise TypeError(f"`answer` must be a dict with the keys {CLUSTER_BETAS}, not {answer!r}")
    I2 = np.eye(2)
    return all(
        int(count)
        == diagnostics.cluster_count(
            integrate(Softmax(I2, I2, beta=b), X0, [0, 20], dt=0.05, geometry="sphere").final,
            1e-3,
        )
        for b, count in answer.items()
    )


# -- Part II: the Transformer PDE -------------------------------------------------------------
def _indefinite_sign(answer):
    sign = _number(answer)
    if sign not in (-1.0, 1.0):
        raise ValueError(f"`answer` must be +1 (increases) or -1 (decreases), not {answer!r}")
    # a cloud spread along the first axis, as the exercise asks
    X = gaussian_cloud(20, np.zeros(2), np.diag([1.0, 1e-4]), rng=0)
    A, V = np.eye(2), np.diag([1.0, -1.0])
    return sign == np.sign(energy_rate(A, X, Softmax(A, V).velocity(X)))


@cache
def _last_merge_time(n: int, beta: float, t_max: float) -> float:
    run = circle_metastability(beta, n, t_max, n_times=300, rng=1)
    return float(run.times[np.nonzero(np.diff(run.cluster_counts))[0][-1] + 1])


def _late_merges(answer, *, n, t_max):
    if answer not in ("earlier", "later"):
        raise ValueError(f'`answer` must be "earlier" or "later", not {answer!r}')
    earlier = _last_merge_time(n, 9.0, t_max) < _last_merge_time(n, 16.0, t_max)
    return answer == ("earlier" if earlier else "later")


def _quantile_distances(answer, *, m0, s0, v, a, T):
    w0, wT = _pair(answer)
    n = 1000
    x = (m0 + np.sqrt(s0) * ndtri((np.arange(1, n + 1) - 0.5) / n))[:, None]
    exact = softmax_gaussian_1d(a, v, m0, s0, [0.0, T])
    final = integrate(Softmax(np.array([[a]]), np.array([[v]])), x, [0.0, T], dt=0.01).final
    expected = (
        wasserstein.w2_gaussian_1d(x[:, 0], m0, s0),
        wasserstein.w2_gaussian_1d(
            final[:, 0], float(exact.means[-1, 0]), float(exact.covariances[-1, 0, 0])
        ),
    )
    # 2%: the reader's own RK4 step moves the second distance by a relative dt^4
    return bool(np.allclose((w0, wT), expected, rtol=0.02, atol=0))


def _swapped_order(answer, *, tokens):
    w_contents, w_conditional = _pair(answer)
    swapped = tokens.copy()
    swapped[[0, 1], 1:] = tokens[[1, 0], 1:]
    expected = (
        wasserstein.wasserstein2(tokens[:, 1:], swapped[:, 1:]),
        wasserstein.conditional_w2(tokens, swapped),
    )
    # both are exact computations (a linear program, a closed form): rounding only. The
    # contents' distance is 0 (the same multiset), which a reader's own solver gives up to its
    # rounding, of the order of eps times the squared spread under a square root: judged
    # against the larger of the two distances
    scale = max(max(expected), np.finfo(float).tiny)
    return bool(np.allclose((w_contents, w_conditional), expected, rtol=1e-6, atol=1e-6 * scale))


NEAR_BLOWUP_TIMES = (0.3, 1.0)  # the exercise's two depths, far from and near t* = 1.25


@cache
def _near_blowup_ratios() -> tuple[float, ...]:
    field, mean, cov = Softmax(np.eye(2), np.eye(2)), np.zeros(2), 0.4 * np.eye(2)
    times = (0.0, *NEAR_BLOWUP_TIMES)
    moments = solve_moments(field, mean, cov, times)
    ratios = []
    for seed in (1, 2, 3):
        cloud = moment_matched_cloud(1000, mean, cov, rng=seed)
        states = integrate(field, cloud, times, dt=0.02).states
        near, far = (
            moment_gap(states[k], moments.means[k], moments.covariances[k]) for k in (2, 1)
        )
        ratios.append(near / far)
    return tuple(ratios)


def _near_blowup_ratio(answer):
    ratio = _number(answer)
    # the ratio of two sampling errors varies from cloud to cloud: the answer must lie between
    # a third of the smallest and three times the largest over three clouds
    ratios = _near_blowup_ratios()
    return min(ratios) / 3 <= ratio <= 3 * max(ratios)


# -- Part III: noise --------------------------------------------------------------------------
TWO_DIGITS = 0.01  # "to two digits"


def _lambda_bar(sigma_W: float) -> float:
    return stochastic.noise_exponents("tanh", d=4, sigma_W=sigma_W).lambda_bar


def _tanh_bias(answer):
    # the smallest bias for Assumption 1 (lambda_bar < 0) lies within two digits of the
    # answer: lambda_bar is not yet negative just below it and is negative just above it
    sigma = _number(answer)
    if sigma < 0:
        raise ValueError(f"`answer` must be a bias sigma_W >= 0, not {answer!r}")
    below, above = max(sigma - TWO_DIGITS, 0.0), sigma + TWO_DIGITS
    return bool(_lambda_bar(below) >= 0 > _lambda_bar(above))


@cache
def _repulsive_forcing() -> float:
    """The largest d/dt S_beta / S_beta of repulsive attention (V = -I, d = 5) over clouds of
    every size from 2 to 40 tokens (the assumption is about every cloud)."""
    rng = np.random.default_rng(0)
    clouds = [uniform_sphere(n, 5, rng=rng) for n in range(2, 41)]
    return max(stochastic.attention_forcing(X, beta=1.0, V=-np.eye(5)) for X in clouds)


def _repulsive_assumption(answer):
    if not isinstance(answer, bool | np.bool_):
        raise TypeError(f"`answer` must be True or False, not {answer!r}")
    # Assumption 2 with epsilon = 0 asks d/dt S_beta <= 0 along attention at every cloud
    return bool(answer) == bool(_repulsive_forcing() <= 0)


#: The check of each computational exercise of the book, by the exercise's label: the form of
#: its answer, the inputs it needs from the notebook, and how it judges an answer.
CHECKS: dict[str, ExerciseCheck] = {
    "tok-ex-layernorm": ExerciseCheck(
        "the order of the projected Euler method (a number)", ("field", "X0"), _euler_order, "0.25"
    ),
    "tok-ex-clusters": ExerciseCheck(
        "a dict {beta: number of clusters} for beta = 1, 4, 16, 64", ("X0",), _cluster_counts
    ),
    "gf-ex-indefinite": ExerciseCheck(
        "the sign of the energy's first change for a cloud along the first axis (+1 or -1)",
        (),
        _indefinite_sign,
    ),
    "gf-ex-beta": ExerciseCheck(
        'when the late merges come at beta = 9 ("earlier" or "later")', ("n", "t_max"), _late_merges
    ),
    "mf-ex-quantiles": ExerciseCheck(
        "the pair (W2 at time 0, W2 at time T) of the quantile tokens",
        ("m0", "s0", "v", "a", "T"),
        _quantile_distances,
        "a relative 2%",
    ),
    "mf-ex-order": ExerciseCheck(
        "the pair (W2 of the contents, conditional W2) of the swapped tokens",
        ("tokens",),
        _swapped_order,
        "1e-6 times the larger of the two distances",
    ),
    "gauss-ex-particles-near-blowup": ExerciseCheck(
        "the moment error at t = 1.0 divided by the one at t = 0.3 (a number)",
        (),
        _near_blowup_ratio,
        "a factor 3, the spread of the ratio between clouds",
    ),
    "sync-ex-tanh-bias": ExerciseCheck(
        "the smallest bias sigma_W (a number, two digits)", (), _tanh_bias, f"{TWO_DIGITS}"
    ),
    "sync-ex-repulsive": ExerciseCheck(
        "whether Assumption 2 holds with epsilon = 0 (True or False)", (), _repulsive_assumption
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
        For an unknown exercise or missing inputs.
    TypeError
        For an answer of the wrong form.

    Examples
    --------
    >>> from token_dynamics.exercises import check_answer
    >>> check_answer("gauss-ex-particles-near-blowup", ...)
    Not answered yet: replace `...` by the moment error at t = 1.0 divided by the one at
    t = 0.3 (a number).
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
    if check.judge(answer, **inputs):
        return AnswerCheck(exercise, "correct", "Correct.")
    within = f", within {check.tolerance}" if check.tolerance else ""
    shown = f"{answer:g}" if isinstance(answer, float) else repr(answer)
    message = f"Not yet: {shown} is not right. Expected: {check.expects}{within}."
    return AnswerCheck(exercise, "incorrect", message)
