"""The coursework checks its own graders: the autograder gives the instructor solutions full
marks, an untouched student notebook zero, and a deliberately wrong submission partial marks;
the student notebooks hold no solution and no hidden test.

One build of every problem set (``coursework/build.py``, as ``make coursework`` runs it, with
the answer key left unexecuted) serves every test of this module.
"""

import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("coursework_build", ROOT / "coursework" / "build.py")
coursework = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("coursework_build", coursework)
_spec.loader.exec_module(coursework)

SETS = coursework.problem_sets()
PROBLEM = re.compile(r"^\*\*Problem \d+ \((?P<kind>[a-z]+)", re.MULTILINE)
SOLUTION_BLOCK = re.compile(r"# BEGIN SOLUTION NO PROMPT\n(?P<body>.*?)# END SOLUTION", re.DOTALL)
HIDDEN_TEST = re.compile(r'""" # BEGIN TEST CONFIG\nhidden: true\n""" # END TEST CONFIG\n([^`]*)')


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``built(name)``: the output folder, with problem set `name` built on first request (so
    that each pytest-xdist worker builds only the sets its tests grade)."""
    out = tmp_path_factory.mktemp("coursework")
    done = set()

    def get(name):
        if name not in done:
            coursework.build(out, [name], execute_key=False)
            done.add(name)
        return out

    return get


def _source(name):
    return (ROOT / "coursework" / f"{name}.md").read_text(encoding="utf-8")


def test_one_problem_set_per_part_with_four_to_eight_problems():
    assert SETS == ["ps1_tokens", "ps2_transformer_pde", "ps3_noise", "ps4_interpolation"]
    for name in SETS:
        kinds = PROBLEM.findall(_source(name))
        assert 4 <= len(kinds) <= 8, (name, kinds)
        assert set(kinds) <= {"computation", "derivation", "proof"}, (name, kinds)
        assert 2 * kinds.count("computation") >= len(kinds), (name, kinds)
        assert _source(name).count("# BEGIN QUESTION") == len(kinds), name


@pytest.mark.parametrize("name", SETS)
def test_student_notebook_holds_no_solution_and_no_hidden_test(built, name):
    student = (built(name) / "student" / f"{name}.ipynb").read_text(encoding="utf-8")
    source = _source(name)
    blocks = SOLUTION_BLOCK.findall(source) + HIDDEN_TEST.findall(source)
    public = source
    for block in blocks:
        public = public.replace(block, "")
    # the lines of the solutions and hidden tests that the statements do not show anyway
    secret_lines = [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if len(line.strip()) > 12
        and not line.strip().startswith("#")
        and line.strip() not in public
    ]
    assert len(secret_lines) >= 8, "the scan found almost nothing"
    leaked = [line for line in secret_lines if line in student]
    assert not leaked, leaked


@pytest.mark.parametrize("name", SETS)
def test_instructor_solutions_get_full_marks(built, name):
    out = built(name)
    score = coursework.grade(name, out / "answers" / f"{name}.ipynb", out)
    assert len(score.possible) == len(PROBLEM.findall(_source(name)))
    assert score.total == score.max_total > 0, score


@pytest.mark.parametrize("name", SETS)
def test_untouched_student_notebook_gets_zero(built, name):
    out = built(name)
    score = coursework.grade(name, out / "student" / f"{name}.ipynb", out)
    assert score.max_total > 0 and score.total == 0, score


def test_wrong_submission_gets_partial_marks(built, tmp_path):
    """A submission with a right order of Euler's method but the wrong rate of problem 2, and
    a sign error in the derivation of problem 3: the two other problems keep full marks."""
    name = "ps1_tokens"
    out = built(name)
    notebook = nbformat.read(out / "answers" / f"{name}.ipynb", as_version=4)
    edits = {
        "decay_rate = float(np.polyfit(betas, np.log(differences), 1)[0])": (
            "decay_rate = -float(np.polyfit(betas, np.log(differences), 1)[0])"
        ),
        "return -np.sin(2 * theta)": "return np.sin(2 * theta)",
    }
    for old, new in edits.items():
        cells = [c for c in notebook.cells if old in c.source]
        assert len(cells) == 1, old
        cells[0].source = cells[0].source.replace(old, new)
    submission = tmp_path / "wrong.ipynb"
    nbformat.write(notebook, submission)
    score = coursework.grade(name, submission, out)
    assert score.questions["q1_euler_order"] == score.possible["q1_euler_order"]
    assert score.questions["q4_clusters"] == score.possible["q4_clusters"]
    assert score.questions["q2_hardmax_rate"] < score.possible["q2_hardmax_rate"]
    assert score.questions["q3_two_tokens"] < score.possible["q3_two_tokens"]
    assert 0 < score.total < score.max_total, score


def test_bad_problem_set_name_is_refused(tmp_path):
    with pytest.raises(ValueError, match="`names` holds unknown problem sets"):
        coursework.build(tmp_path, ["ps9_missing"])
