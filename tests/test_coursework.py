"""The coursework checks its own graders: the autograder gives the instructor solutions full
marks, an untouched student notebook zero, and a deliberately wrong submission partial marks;
every plausible wrong answer of ``coursework/wrong_answers.yml`` fails a visible check, with
its message, and loses points; the student notebooks hold no solution and no hidden test, and
start with a cell that installs what they need.

One build of every problem set (``coursework/build.py``, as ``make coursework`` runs it, with
the answer key left unexecuted) serves every test of this module, and the wrong answers to all
the problems of a set share one graded submission per round (the k-th wrong answer of each).
"""

import importlib.util
import re
import sys
import types
import zipfile
from pathlib import Path

import nbformat
import pytest
import yaml
from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("coursework_build", ROOT / "coursework" / "build.py")
coursework = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("coursework_build", coursework)
_spec.loader.exec_module(coursework)

SETS = coursework.problem_sets()
PROBLEM = re.compile(r"^\*\*Problem \d+ \((?P<kind>[a-z]+)", re.MULTILINE)
SOLUTION_BLOCK = re.compile(r"# BEGIN SOLUTION NO PROMPT\n(?P<body>.*?)# END SOLUTION", re.DOTALL)
HIDDEN_TEST = re.compile(
    r'""" # BEGIN TEST CONFIG\nhidden: true\n(?:.*\n)*?""" # END TEST CONFIG\n([^`]*)'
)
WRONG = yaml.safe_load((ROOT / "coursework" / "wrong_answers.yml").read_text(encoding="utf-8"))


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
    assert SETS == [
        "ps1_tokens",
        "ps2_transformer_pde",
        "ps3_noise",
        "ps4_interpolation",
        "ps5_clustering",
    ]
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


def _with_wrong_answers(notebook, name, k):
    """`notebook` (the answer key) with the k-th wrong answer of every problem of set `name`
    that has one; returns the mistakes made, by question."""
    made = {}
    for question, wrongs in WRONG[name].items():
        if k >= len(wrongs):
            continue
        for old, new in wrongs[k]["replace"].items():
            cells = [c for c in notebook.cells if c.cell_type == "code" and old in c.source]
            assert len(cells) == 1 and cells[0].source.count(old) == 1, (name, question, old)
            cells[0].source = cells[0].source.replace(old, new)
        made[question] = wrongs[k]["mistake"]
    return made


def _answered(out, name):
    """The student notebook of set `name` with every answer cell filled in from the answer key
    (the two notebooks have the same cells): what a student hands in."""
    student = nbformat.read(out / "student" / f"{name}.ipynb", as_version=4)
    key = nbformat.read(out / "answers" / f"{name}.ipynb", as_version=4)
    assert len(student.cells) == len(key.cells), name
    answers = [
        i for i, c in enumerate(student.cells) if "otter_answer_cell" in c.metadata.get("tags", [])
    ]
    assert len(answers) == len(PROBLEM.findall(_source(name))), name
    for i in answers:
        student.cells[i].source = key.cells[i].source
    return student


@pytest.fixture(scope="module")
def wrong(built, tmp_path_factory):
    """``wrong(name, k)``: (submission path, mistakes by question, score) of the student
    notebook of set `name` answered with the k-th wrong answer of each problem, graded once."""
    folder = tmp_path_factory.mktemp("wrong")
    done = {}

    def get(name, k):
        if (name, k) not in done:
            out = built(name)
            notebook = _answered(out, name)
            made = _with_wrong_answers(notebook, name, k)
            submission = folder / f"{name}_wrong{k}.ipynb"
            nbformat.write(notebook, submission)
            done[name, k] = submission, made, coursework.grade(name, submission, out)
        return done[name, k]

    return get


def _visible_messages(out, name):
    """Question -> the failure messages of its visible tests, as the student notebook holds
    them (``grader.check`` runs these)."""
    tests = nbformat.read(out / "student" / f"{name}.ipynb", as_version=4).metadata.otter.tests
    return {
        question: [case.get("failure_message") for case in test["suites"][0]["cases"]]
        for question, test in tests.items()
    }


def test_every_problem_has_three_wrong_answers():
    assert sorted(WRONG) == SETS
    for name in SETS:
        questions = re.findall(r"^name: (q\w+)$", _source(name), re.MULTILINE)
        assert sorted(WRONG[name]) == sorted(questions), name
        for question, wrongs in WRONG[name].items():
            assert len(wrongs) >= 3, (name, question)
            assert all(w["mistake"] and w["replace"] for w in wrongs), (name, question)


@pytest.mark.parametrize("name", SETS)
def test_every_test_says_what_is_wrong(built, name):
    """Every test case, visible or hidden, carries a failure message, shown by ``grader.check``
    and by the grading output."""
    with zipfile.ZipFile(built(name) / "autograder" / f"{name}.zip") as bundle:
        tests = [f for f in bundle.namelist() if f.startswith("tests/") and f.endswith(".py")]
        for test in tests:
            namespace = {}
            exec(bundle.read(test).decode("utf-8"), namespace)
            for case in namespace["test"]["suites"][0]["cases"]:
                assert case.get("failure_message"), (test, case["code"])
    assert len(tests) == len(PROBLEM.findall(_source(name)))


@pytest.mark.parametrize("k", range(3))
@pytest.mark.parametrize("name", SETS)
def test_wrong_answers_fail_a_visible_check_and_lose_points(built, wrong, name, k):
    out = built(name)
    _, made, score = wrong(name, k)
    visible = _visible_messages(out, name)
    report = coursework.report(score)
    for question, mistake in made.items():
        failed = [f["message"] for f in score.failures[question] if not f["hidden"]]
        # a visible check failed, with a message of the student notebook's own checks
        assert failed, (question, mistake, score.failures[question])
        assert set(failed) <= set(visible[question]), (question, failed)
        assert score.questions[question] < score.possible[question], (question, mistake)
        for message in failed:
            assert message in report, (question, message)


def test_student_sees_why_a_check_fails(built, wrong, tmp_path):
    """Run as a student runs it, the answered notebook's ``grader.check`` cells print the
    message of each failed visible check, and never that every test passed."""
    name = "ps4_interpolation"  # the quickest set to run
    submission, made, _ = wrong(name, 0)
    # otter reads the visible tests from the notebook's own file, by its name
    path = tmp_path / f"{name}.ipynb"
    path.write_bytes(submission.read_bytes())
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=coursework.CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    visible = _visible_messages(built(name), name)
    for question in made:
        (cell,) = [c for c in notebook.cells if c.source == f'grader.check("{question}")']
        shown = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
        assert "All test cases passed" not in shown, (question, shown)
        assert any(m in shown for m in visible[question]), (question, shown)


def test_install_cell_installs_only_what_is_missing(monkeypatch):
    """The first cell of a student notebook runs ``%pip install`` for the library (from the
    repository, as pyproject.toml names it) and for otter-grader (as requirements-dev.txt pins
    it) where their import fails, and for nothing where it succeeds."""
    cell = coursework.install_cell()
    code = TransformerManager().transform_cell(cell.source)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (repository,) = re.findall(r'^Repository = "(.*)"$', pyproject, re.MULTILINE)
    (otter,) = re.findall(r"^otter-grader==.*$", (ROOT / "requirements-dev.txt").read_text(), re.M)

    def run(missing):
        calls = []

        class Shell:
            def run_line_magic(self, magic, line):
                calls.append(f"%{magic} {line}")

        with monkeypatch.context() as patch:
            for module in ("token_dynamics", "otter"):
                # None: `import module` raises ImportError; a bare module: the import succeeds
                stand_in = None if module in missing else types.ModuleType(module)
                patch.setitem(sys.modules, module, stand_in)
            exec(code, {"get_ipython": Shell})
        return calls

    assert run([]) == []
    assert run(["token_dynamics", "otter"]) == [
        f'%pip install --quiet "token-dynamics @ git+{repository}"',
        f'%pip install --quiet "{otter}"',
    ]
    assert run(["otter"]) == [f'%pip install --quiet "{otter}"']


@pytest.mark.parametrize("name", SETS)
def test_student_notebook_starts_with_the_install_cell(built, name):
    notebook = nbformat.read(built(name) / "student" / f"{name}.ipynb", as_version=4)
    assert notebook.cells[0].source == coursework.install_cell().source
    assert notebook.cells[1].source.startswith("# Initialize Otter\nimport otter")
