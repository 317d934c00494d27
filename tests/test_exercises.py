"""`token_dynamics.exercises`: each check accepts the right answer (derived here independently,
from a closed form where the book's solution has one), refuses a wrong one, never shows the
expected value, and says when the answer is missing or has the wrong form. Every computational
exercise of the book has a check and a check-your-answer cell that calls it.
"""

import re
from pathlib import Path

import numpy as np
import ot
import pytest
from scipy.special import ndtri

import token_dynamics as td
from token_dynamics import stochastic as sto
from token_dynamics.exercises import CHECKS, check_answer, exercise_labels

ROOT = Path(__file__).resolve().parents[1]
I2 = np.eye(2)


def _right_and_wrong():
    """(label, right answer, wrong answer, inputs) for every check."""
    X8 = td.uniform_sphere(8, 2, rng=3)  # small clouds keep the checks' recomputation short
    counts = {
        b: td.cluster_count(
            td.integrate(td.Softmax(I2, I2, beta=b), X8, [0, 20], dt=0.05, geometry="sphere").final,
            1e-3,
        )
        for b in (1.0, 4.0, 16.0, 64.0)
    }
    # the book's solution: sigma_W^2 > 3 kappa'(1) - kappa_0(1) in d = 4 (no bias: kappa_0)
    plain = sto.noise_exponents("tanh", d=4)
    sigma_w = float(np.sqrt(3 * plain.kappa_prime_1 - plain.kappa_1))
    tokens = td.meanfield.causal_cloud(td.uniform_sphere(6, 2, rng=4)).tokens
    # swapping two contents: the multiset is unchanged (W2 = 0), and index-matched the
    # conditional distance is sqrt(2/n) |x_1 - x_2| (the book's solution)
    w_lambda = np.sqrt(2 / 6) * np.linalg.norm(tokens[0, 1:] - tokens[1, 1:])
    m0, s0, v, a, T = 0.5, 0.4, 0.8, -0.6, 1.5
    x = (m0 + np.sqrt(s0) * ndtri((np.arange(1000) + 0.5) / 1000))[:, None]
    exact = td.gaussian.softmax_gaussian_1d(a, v, m0, s0, [0.0, T])
    # the reader's own step (0.05): the check's 2% covers it
    final = td.integrate(td.Softmax([[a]], [[v]]), x, [0, T], dt=0.05).final
    w_quantiles = (
        td.wasserstein.w2_gaussian_1d(x[:, 0], m0, s0),
        td.wasserstein.w2_gaussian_1d(final[:, 0], exact.means[-1, 0], exact.covariances[-1, 0, 0]),
    )
    wrong_counts = {b: c + 1 for b, c in counts.items()}
    return [
        ("tok-ex-layernorm", 1, 2, {"field": td.Softmax(I2, I2, beta=4.0), "X0": X8}),
        ("tok-ex-clusters", counts, wrong_counts, {"X0": X8}),
        ("gf-ex-indefinite", 1, -1, {}),  # m^T A V m = m_1^2 - m_2^2 > 0 along e_1
        ("gf-ex-beta", "earlier", "later", {"n": 24, "t_max": 1e6}),
        (
            "mf-ex-quantiles",
            w_quantiles,
            (w_quantiles[0], 2 * w_quantiles[1]),
            {"m0": m0, "s0": s0, "v": v, "a": a, "T": T},
        ),
        ("mf-ex-order", (0.0, w_lambda), (w_lambda, w_lambda), {"tokens": tokens}),
        ("gauss-ex-particles-near-blowup", 100.0, 1.0, {}),  # "one to two orders of magnitude"
        ("sync-ex-tanh-bias", round(sigma_w, 2), sigma_w + 0.05, {}),
        ("sync-ex-repulsive", False, True, {}),  # the forcing of V = -I changes sign
    ]


CASES = _right_and_wrong()


def test_every_computational_exercise_has_a_check_and_a_cell():
    labels = []
    cells = {}
    for path in sorted((ROOT / "book").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        labels += re.findall(r"^:label: (\S+)\n:class: kind-computation", text, flags=re.MULTILINE)
        for label in re.findall(r'check_answer\("([^"]+)", \.\.\.', text):
            cells[label] = cells.get(label, 0) + 1
    assert sorted(labels) == exercise_labels() == sorted(c[0] for c in CASES)
    assert cells == dict.fromkeys(labels, 1), cells


@pytest.mark.parametrize("label, right, wrong, inputs", CASES, ids=[c[0] for c in CASES])
def test_right_answer_is_accepted_and_wrong_one_refused(label, right, wrong, inputs):
    verdict = check_answer(label, right, **inputs)
    assert verdict.status == "correct" and verdict.correct and repr(verdict) == "Correct."
    verdict = check_answer(label, wrong, **inputs)
    assert verdict.status == "incorrect" and not verdict.correct
    assert repr(verdict).startswith("Not yet:") and CHECKS[label].expects in repr(verdict)
    # the message holds the reader's answer, the form expected and the tolerance: nothing
    # computed from the expected answer
    shown = f"{wrong:g}" if isinstance(wrong, float) else repr(wrong)
    tolerance = CHECKS[label].tolerance
    within = f", within {tolerance}" if tolerance else ""
    assert (
        repr(verdict)
        == f"Not yet: {shown} is not right. Expected: {CHECKS[label].expects}{within}."
    )


@pytest.mark.parametrize("label", exercise_labels())
def test_unanswered(label):
    inputs = next(c[3] for c in CASES if c[0] == label)
    verdict = check_answer(label, ..., **inputs)
    assert verdict.status == "unanswered" and "replace `...`" in repr(verdict)


def test_the_swapped_order_accepts_a_zero_computed_any_exact_way():
    # the book's cloud (30 causal tokens in the plane): the contents' W2 is exactly 0, and a
    # reader's solver (an assignment, POT on the cost |x|^2 + |y|^2 - 2<x, y>) gives 0 up to
    # its rounding; the library's own distance once gave 2.7e-9 there, beyond the old 1e-9
    rng = np.random.default_rng(0)
    tokens = td.meanfield.causal_cloud(rng.uniform(-1, 1, size=(30, 2))).tokens
    swapped = tokens.copy()
    swapped[[0, 1], 1:] = tokens[[1, 0], 1:]
    assert td.wasserstein.wasserstein2(tokens[:, 1:], swapped[:, 1:]) == 0.0
    w_lambda = np.sqrt(2 / 30) * np.linalg.norm(tokens[0, 1:] - tokens[1, 1:])
    C = ot.dist(tokens[:, 1:], swapped[:, 1:])  # POT's default cost: the Gram formula
    w_pot = float(np.sqrt(max(ot.emd2(np.full(30, 1 / 30), np.full(30, 1 / 30), C), 0.0)))
    for w in (0.0, w_pot):
        assert check_answer("mf-ex-order", (w, w_lambda), tokens=tokens).status == "correct"
    wrong = check_answer("mf-ex-order", (1e-3 * w_lambda, w_lambda), tokens=tokens)
    assert wrong.status == "incorrect"


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="`exercise` must be one of"):
        check_answer("no-such-exercise", 1)
    with pytest.raises(ValueError, match=r"`inputs` of 'tok-ex-clusters' must be exactly \['X0'\]"):
        check_answer("tok-ex-clusters", {}, X=1)
    with pytest.raises(TypeError, match="`answer` must be a real number"):
        check_answer("sync-ex-tanh-bias", "0.3")
    with pytest.raises(ValueError, match="`answer` must be a bias sigma_W >= 0"):
        check_answer("sync-ex-tanh-bias", -0.5)
    with pytest.raises(TypeError, match="`answer` must be a pair of numbers"):
        check_answer("mf-ex-order", 0.0, tokens=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="`answer` must be \\+1 \\(increases\\) or -1"):
        check_answer("gf-ex-indefinite", 0)
    with pytest.raises(TypeError, match="`answer` must be True or False"):
        check_answer("sync-ex-repulsive", "no")
    with pytest.raises(TypeError, match="`answer` must be a dict with the keys"):
        check_answer("tok-ex-clusters", [1, 2], X0=np.eye(2))


def test_the_bias_threshold_is_judged_on_both_sides():
    """The check of `sync-ex-tanh-bias` reads the sign of lambda_bar around the answer: an
    answer within the two digits asked is right on either side of the threshold, one 0.02 away
    is wrong on either side (the closed form of the book's solution gives the threshold)."""
    plain = sto.noise_exponents("tanh", d=4)
    threshold = float(np.sqrt(3 * plain.kappa_prime_1 - plain.kappa_1))
    for offset, right in ((-0.005, True), (0.005, True), (-0.02, False), (0.02, False)):
        assert check_answer("sync-ex-tanh-bias", threshold + offset).correct is right, offset
