"""The coursework checks its own graders: the autograder gives the instructor solutions full
marks, an untouched student notebook and one answered with NaN zero, and a deliberately wrong
submission partial marks; every plausible wrong answer of ``coursework/wrong_answers.yml``
fails a visible check, with its message, and loses points, and every made-up answer (typed in,
guessed, fitted to the visible checks) fails a hidden recomputation and keeps at most the
points of its right parts; the student notebooks hold no solution, no hidden test and no
solution expression in a visible test, start with a cell that installs what they need, and
run their checks under another file name and on Colab.

One build of every problem set (``coursework/build.py``, as ``make coursework`` runs it, with
the answer key left unexecuted) serves every test of this module, and the wrong answers to all
the problems of a set share one graded submission per round (the k-th wrong answer of each).
"""

import ast
import csv
import importlib.util
import json
import os
import re
import shutil
import sys
import textwrap
import types
import zipfile
from pathlib import Path

import jupytext
import nbformat
import psutil
import pytest
import yaml
from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("coursework_build", ROOT / "coursework" / "build.py")
coursework = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("coursework_build", coursework)
_spec.loader.exec_module(coursework)

SETS = coursework.problem_sets()
PROBLEM = coursework.PROBLEM
SOLUTION_BLOCK = re.compile(r"# BEGIN SOLUTION NO PROMPT\n(?P<body>.*?)# END SOLUTION", re.DOTALL)
HIDDEN_TEST = re.compile(
    r'""" # BEGIN TEST CONFIG\nhidden: true\n(?:.*\n)*?""" # END TEST CONFIG\n([^`]*)'
)
WRONG = yaml.safe_load((ROOT / "coursework" / "wrong_answers.yml").read_text(encoding="utf-8"))
#: (set, k): the rounds of wrong answers, one graded submission each
ROUNDS = [(name, k) for name in sorted(WRONG) for k in range(max(map(len, WRONG[name].values())))]


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


def _expressions(code, modules=frozenset(), smallest=1):
    """The expressions of `code` as ``ast.unparse`` writes them (spacing, quotes, redundant
    parentheses and ``=`` against ``==`` do not count), of `smallest` syntax nodes or more,
    except those too common to give an answer away: names, constants, slices and those built
    from `modules` alone (``np.log``, ``np.eye(2)``)."""
    found = set()
    for node in ast.walk(ast.parse(textwrap.dedent(code))):
        if not isinstance(node, ast.expr) or isinstance(
            node, (ast.Name, ast.Constant, ast.Slice, ast.Starred)
        ):
            continue
        if isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        parts = [n for n in ast.walk(node) if isinstance(n, ast.expr)]
        if {n.id for n in parts if isinstance(n, ast.Name)} <= modules or len(parts) < smallest:
            continue
        found.add(ast.unparse(node))
    return found


def _solution_expressions(name):
    """Question -> the expressions a solution computes (the values of its assignments and
    returns, and their parts) that the notebook does not show anyway (in its statements,
    given cells and prompts); and the modules the notebook imports."""
    notebook = jupytext.read(ROOT / "coursework" / f"{name}.md")
    public, solutions, modules, question = set(), {}, frozenset(), None
    for cell in notebook.cells:
        source = cell.source
        if cell.cell_type == "raw" and source.startswith("# BEGIN QUESTION"):
            question = re.search(r"^name: (\w+)$", source, re.MULTILINE).group(1)
        elif cell.cell_type == "markdown":
            for snippet in re.findall(r"`([^`]+)`", source):
                try:
                    public |= _expressions(snippet)
                except SyntaxError:  # words in backticks
                    pass
        elif cell.cell_type == "code" and "# BEGIN SOLUTION" in source:
            for prompt in re.findall(r'""" # BEGIN PROMPT\n(.*?)""" # END PROMPT', source, re.S):
                public |= _expressions(prompt)
            blocks = re.findall(
                r"# BEGIN SOLUTION(?: NO PROMPT)?\n(.*?)# END SOLUTION", source, re.S
            )
            for block in blocks:
                for node in ast.walk(ast.parse(textwrap.dedent(block))):
                    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
                        if node.value is None:
                            continue
                        # the value itself (`plan.n_blocks`), and its parts of four nodes
                        # or more (`plan.m.sum()`, not `len(X)`)
                        value = ast.unparse(node.value)
                        found = _expressions(value, modules) & {value}
                        found |= _expressions(value, modules, smallest=4)
                        solutions.setdefault(question, set()).update(found)
        elif cell.cell_type == "code" and not source.startswith('""" # BEGIN TEST CONFIG'):
            public |= _expressions(source)  # a given cell
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    modules |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return {q: found - public for q, found in solutions.items()}, modules


def _visible_code(out, name):
    """Question -> the code of its visible tests, as the student notebook holds it (doctest
    lines, shown to the student when they fail)."""
    tests = nbformat.read(out / "student" / f"{name}.ipynb", as_version=4).metadata.otter.tests
    return {
        question: [
            "\n".join(
                line[4:] for line in case["code"].splitlines() if line[:4] in (">>> ", "... ")
            )
            for case in test["suites"][0]["cases"]
        ]
        for question, test in tests.items()
    }


def _leaks(solution, visible, modules):
    """The expressions of `solution` (from :func:`_solution_expressions`) that occur in the
    code of the `visible` tests."""
    return solution & set().union(*(_expressions(code, modules) for code in visible))


def test_leak_scan_compares_expressions():
    """The scan finds an answer key's expression in a visible test written differently."""
    solutions, modules = _solution_expressions("ps1_tokens")
    shown = "assert first_metastable_beta==min( b for b in cluster_betas if clusters[b]>1 )"
    assert "min((b for b in cluster_betas if clusters[b] > 1))" in _leaks(
        solutions["q4_clusters"], [shown], modules
    )
    assert not _leaks(solutions["q4_clusters"], ["assert clusters[1.0] == 1"], modules)


@pytest.mark.parametrize("name", SETS)
def test_visible_tests_hold_no_solution_expression(built, name):
    """A visible test's code is shown to the student when it fails: it checks a property of an
    answer (its type, shape, range, finiteness) and holds no expression of the solution that
    the notebook does not show anyway, whether assigned (``x = ...``) or compared
    (``x == ...``)."""
    solutions, modules = _solution_expressions(name)
    assert sum(map(len, solutions.values())) >= 10, "the scan found almost nothing"
    visible = _visible_code(built(name), name)
    leaked = {q: _leaks(solutions.get(q, set()), visible[q], modules) for q in visible}
    assert not any(leaked.values()), leaked


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


def test_grading_a_missing_folder_says_so_without_a_traceback(tmp_path):
    """`make grade` without SUBMISSIONS grades `_build/submissions`: where it does not exist,
    the command ends with the message that names it, not a traceback."""
    missing = tmp_path / "submissions"
    with pytest.raises(SystemExit, match=r"no submission `.*submissions`: give notebooks"):
        coursework.main(["--grade", str(missing)])
    (tmp_path / "notes.txt").write_text("not a notebook", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"notes\.txt` is neither a notebook"):
        coursework.main(["--grade", str(tmp_path / "notes.txt")])


def test_grading_goes_on_past_a_submission_it_cannot_grade(built, tmp_path, monkeypatch, capsys):
    """A class's folder with a notebook that names no problem set and a file that is no
    notebook: the others are graded, and the command ends with an error that lists the two (it
    once stopped at the first with a traceback, the rest of the class ungraded). A bundle older
    than its set's notebook (a problem added since ``make coursework``) is rebuilt first."""
    name = "ps4_interpolation"  # the quickest set to run
    out = tmp_path / "coursework"
    shutil.copytree(built(name), out)
    student = out / "student" / f"{name}.ipynb"
    folder = tmp_path / "submissions"
    for who in ("ann", "ben", "cat"):
        (folder / who).mkdir(parents=True)
    shutil.copy(student, folder / "ann" / f"{name}-Copy1.ipynb")  # renamed: graded
    anonymous = nbformat.read(student, as_version=4)
    del anonymous.metadata["otter"]
    nbformat.write(anonymous, folder / "ben" / "homework.ipynb")  # names no set
    (folder / "cat" / f"{name}.ipynb").write_text('{"cells": [', encoding="utf-8")  # not JSON
    bundle = out / "autograder" / f"{name}.zip"
    assert not coursework.stale(name, out)
    os.utime(bundle, (0, 0))  # built before the set's notebook last changed
    assert coursework.stale(name, out)
    rebuilt = []

    def build(where, names):  # what `make coursework` would remake: the bundle, newer
        rebuilt.append((where, names))
        os.utime(bundle)

    monkeypatch.setattr(coursework, "build", build)
    table = tmp_path / "grades" / "class.csv"
    with pytest.raises(SystemExit, match=r"2 submission\(s\) not graded") as exit_:
        coursework.main(["--grade", str(folder), "--out", str(out), "--csv", str(table)])
    assert rebuilt == [(out, [name])]
    assert "homework.ipynb` answers no problem set" in str(exit_.value)
    assert f"cat/{name}.ipynb: " in str(exit_.value)
    printed = capsys.readouterr().out
    assert f"ann/{name}-Copy1.ipynb ({name})" in printed
    total = re.search(r"^total: 0 / ([1-9]\d*)$", printed, re.MULTILINE)
    assert total, printed
    # the gradebook's table: a row per file, the unanswered notebook's zeros, why two failed
    with table.open(newline="", encoding="utf-8") as f:
        rows = {Path(row["submission"]).parent.name: row for row in csv.DictReader(f)}
    assert set(rows) == {"ann", "ben", "cat"}
    questions = [q for q in rows["ann"] if q.startswith("q")]
    assert questions and all(rows["ann"][q] == "0" for q in questions)
    assert (rows["ann"]["total"], rows["ann"]["possible"], rows["ann"]["note"]) == (
        "0",
        total.group(1),
        "",
    )
    assert rows["ann"]["problem set"] == name
    for who in ("ben", "cat"):
        assert rows[who]["total"] == "" and rows[who]["note"].startswith("not graded: ")
    assert "answers no problem set" in rows["ben"]["note"]


def test_csv_only_with_grade(capsys):
    with pytest.raises(SystemExit) as exit_:
        coursework.main(["--csv", "grades.csv"])
    assert exit_.value.code == 2 and "--csv writes the grades of --grade" in capsys.readouterr().err


def test_readme_grading_example_shows_the_tests_messages():
    """The grading output that coursework/README.md shows quotes messages the tests print."""
    messages = {"visible": set(), "hidden": set()}
    config_block = re.compile(r'""" # BEGIN TEST CONFIG\n(.*?)""" # END TEST CONFIG', re.S)
    for name in SETS:
        for config in config_block.findall(_source(name)):
            case = yaml.safe_load(config)
            messages["hidden" if case.get("hidden") else "visible"].add(case["failure_message"])
    readme = (ROOT / "coursework" / "README.md").read_text(encoding="utf-8")
    shown = re.findall(r"^  failed \((visible|hidden) test\): (.*)$", readme, re.MULTILINE)
    assert {kind for kind, _ in shown} == {"visible", "hidden"}, shown
    assert all(message in messages[kind] for kind, message in shown), shown


def test_readme_command_to_check_a_problem_selects_its_tests():
    """The ``pytest -k`` line that coursework/README.md gives for checking a new problem names
    a problem set and tests of this module that exist (a renamed test would select nothing)."""
    readme = (ROOT / "coursework" / "README.md").read_text(encoding="utf-8")
    (words,) = re.findall(r'pytest tests/test_coursework\.py -k "(.*)"', readme)
    tests = [name for name in globals() if name.startswith("test_")]
    for word in words.split(" or "):
        assert word in SETS or any(word in name for name in tests), word


def test_help_prints_the_usage_and_builds_nothing(tmp_path, monkeypatch, capsys):
    """``python coursework/build.py --help`` prints the usage; it once took ``--help`` for the
    output folder and built every set into ``./--help``."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        coursework.main(["--help"])
    assert exit_.value.code == 0
    assert "--grade SUBMISSION" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())
    with pytest.raises(SystemExit) as exit_:
        coursework.main(["out", "--grade", "submission.ipynb"])
    assert exit_.value.code == 2 and "with --grade, name the built coursework with --out" in (
        capsys.readouterr().err
    )


def test_build_says_how_far_it_is_and_why_it_stopped(tmp_path, monkeypatch, capsys):
    """``make coursework`` builds the sets one at a time (minutes in all) and prints a line
    for each; a set whose solution fails its own tests (``otter assign`` fails) ends the
    build with otter's output, not a traceback."""
    built_sets = []

    def build(out, names):
        if names == [SETS[1]]:
            raise RuntimeError(f"otter assign failed on {SETS[1]}:\nAssertionError")
        built_sets.extend(names)
        return out

    monkeypatch.setattr(coursework, "build", build)
    with pytest.raises(SystemExit, match=rf"otter assign failed on {SETS[1]}:\nAssertionError"):
        coursework.main([str(tmp_path)])
    assert built_sets == SETS[:1]
    assert capsys.readouterr().out == f"{SETS[0]}: built\n"


def test_bad_problem_set_name_is_refused(tmp_path):
    with pytest.raises(ValueError, match="`names` holds unknown problem sets"):
        coursework.build(tmp_path, ["ps9_missing"])


def _questions(name):
    """The questions of set `name`, in the order of the notebook."""
    return re.findall(r"^name: (q\w+)$", _source(name), re.MULTILINE)


def _answer_cells(notebook):
    """The answer cells of a student notebook, one per question, in order."""
    return [c for c in notebook.cells if "otter_answer_cell" in c.metadata.get("tags", [])]


def _with_wrong_answers(notebook, name, k):
    """`notebook` (the student notebook answered with the instructor solutions) with the k-th
    wrong answer of every problem of set `name` that has one; returns the wrong answers made,
    by question."""
    made = {}
    answers = dict(zip(_questions(name), _answer_cells(notebook), strict=True))
    for question, wrongs in WRONG[name].items():
        if k >= len(wrongs):
            continue
        if "answer" in wrongs[k]:
            answers[question].source = wrongs[k]["answer"].rstrip("\n")
        for old, new in wrongs[k].get("replace", {}).items():
            cells = [c for c in notebook.cells if c.cell_type == "code" and old in c.source]
            assert len(cells) == 1 and cells[0].source.count(old) == 1, (name, question, old)
            cells[0].source = cells[0].source.replace(old, new)
        made[question] = wrongs[k]
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


@pytest.mark.parametrize("name", SETS)
def test_nan_answers_get_zero(built, tmp_path, name):
    """A student notebook with NaN for every answer (and functions that return NaN) scores
    nothing: the visible checks, which carry no points, pass no NaN, and the hidden ones
    recompute the answers."""
    out = built(name)
    notebook = nbformat.read(out / "student" / f"{name}.ipynb", as_version=4)
    for cell in _answer_cells(notebook):
        assert "..." in cell.source, cell.source
        cell.source = re.sub(r"^(\s+)\.\.\.$", r"\1return np.nan", cell.source, flags=re.M)
        cell.source = cell.source.replace("= ...", "= np.nan")
    submission = tmp_path / f"{name}.ipynb"
    nbformat.write(notebook, submission)
    score = coursework.grade(name, submission, out)
    assert score.max_total > 0 and score.total == 0, coursework.report(score)


@pytest.fixture(scope="module")
def wrong(built, tmp_path_factory):
    """``wrong(name, k)``: (submission path, wrong answers by question, score) of the student
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
    """At least three wrong answers per problem that a visible check catches, each with its
    mistake in words and its replacements or whole answer."""
    assert sorted(WRONG) == SETS
    for name in SETS:
        assert sorted(WRONG[name]) == sorted(_questions(name)), name
        for question, wrongs in WRONG[name].items():
            assert sum(w.get("visible", True) for w in wrongs) >= 3, (name, question)
            for w in wrongs:
                assert w["mistake"] and (w.get("replace") or w.get("answer")), (name, question)
                assert set(w) <= {"mistake", "replace", "answer", "visible", "keeps"}, w
                assert "keeps" not in w or not w.get("visible", True), w


@pytest.mark.parametrize("name", SETS)
def test_every_test_says_what_is_wrong(built, name):
    """Every test case, visible or hidden, carries a failure message, shown by ``grader.check``
    and by the grading output; the visible ones carry no points, and the hidden ones, which
    recompute the answer, all the points of their problem (otter would split them evenly)."""
    with zipfile.ZipFile(built(name) / "autograder" / f"{name}.zip") as bundle:
        tests = [f for f in bundle.namelist() if f.startswith("tests/") and f.endswith(".py")]
        for test in tests:
            namespace = {}
            exec(bundle.read(test).decode("utf-8"), namespace)
            cases = namespace["test"]["suites"][0]["cases"]
            for case in cases:
                assert case.get("failure_message"), (test, case["code"])
                assert (case["points"] > 0) == case["hidden"], (test, case["code"])
            assert sum(case["points"] for case in cases) == namespace["test"]["points"], test
    assert len(tests) == len(PROBLEM.findall(_source(name)))


@pytest.mark.parametrize(("name", "k"), ROUNDS)
def test_wrong_answers_lose_points(built, wrong, name, k):
    """A wrong answer fails a visible check, with a message of the student notebook's own
    checks, and loses points; a made-up answer that passes the visible checks (``visible:
    false``) fails a hidden test and keeps at most the points of its right parts."""
    out = built(name)
    _, made, score = wrong(name, k)
    visible = _visible_messages(out, name)
    report = coursework.report(score)
    for question, entry in made.items():
        mistake = entry["mistake"]
        if entry.get("visible", True):
            failed = [f["message"] for f in score.failures[question] if not f["hidden"]]
            assert failed, (question, mistake, score.failures[question])
            assert set(failed) <= set(visible[question]), (question, failed)
            assert score.questions[question] < score.possible[question], (question, mistake)
        else:
            failed = [f["message"] for f in score.failures[question] if f["hidden"]]
            assert failed, (question, mistake, score.failures[question])
            assert score.questions[question] <= entry.get("keeps", 0), (question, mistake, score)
        for message in failed:
            assert message in report, (question, message)


def _execute(notebook, folder, kernel_name="python3"):
    """Run `notebook` from the top in a fresh kernel of `kernel_name`, in `folder`."""
    NotebookClient(
        notebook,
        timeout=coursework.CELL_TIMEOUT_S,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(folder)}},
    ).execute()


def _shown_checks(notebook, folder, made, visible, kernel_name="python3"):
    """Run `notebook` from the top in `folder`, as a student runs it, and check that each
    ``grader.check`` cell of the questions answered wrongly in `made` prints the message of a
    failed visible test, and never that every test passed."""
    _execute(notebook, folder, kernel_name)
    for question in made:
        assert made[question].get("visible", True), question
        (cell,) = [c for c in notebook.cells if c.source == f'grader.check("{question}")']
        shown = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
        assert "All test cases passed" not in shown, (question, shown)
        assert any(m in shown for m in visible[question]), (question, shown)


def test_student_sees_why_a_check_fails(built, wrong, tmp_path):
    """Run as a student runs it, the answered notebook's ``grader.check`` cells print the
    message of each failed visible check, and never that every test passed; under another
    file name too (Jupyter's "Make a copy"), beside a notebook of another set."""
    name = "ps4_interpolation"  # the quickest set to run
    submission, made, _ = wrong(name, 0)
    # otter reads the visible tests from the notebook's file: its first cell finds it
    path = tmp_path / f"{name}-Copy1.ipynb"
    path.write_bytes(submission.read_bytes())
    other = built("ps5_clustering") / "student" / "ps5_clustering.ipynb"
    shutil.copy(other, tmp_path / "ps0_other_set.ipynb")  # found first, and of another set
    notebook = nbformat.read(path, as_version=4)
    _shown_checks(notebook, tmp_path, made, _visible_messages(built(name), name))


#: A stand-in for Colab's kernel, as otter and the notebook's first cell meet it: the shell's
#: class is ``google.colab._shell.Shell`` (otter reads "google.colab" in ``str(get_ipython())``),
#: and ``google.colab._message.blocking_request("get_ipynb")`` returns the notebook the browser
#: holds (here read from the file that the environment variable names, outside the kernel's
#: folder: on Colab no file of the notebook is beside the kernel).
COLAB_STAND_IN = {
    "__init__.py": "",
    "_shell.py": "from ipykernel.zmqshell import ZMQInteractiveShell\n\n\n"
    "class Shell(ZMQInteractiveShell):\n    pass\n",
    "_kernel.py": "from ipykernel.ipkernel import IPythonKernel\nfrom traitlets import Type\n\n"
    "from ._shell import Shell\n\n\nclass Kernel(IPythonKernel):\n    shell_class = Type(Shell)\n",
    "_message.py": "import json\nimport os\n\n\n"
    "def blocking_request(request_type, request='', timeout_sec=5, parent=None):\n"
    "    assert request_type == 'get_ipynb', request_type\n"
    "    with open(os.environ['COLAB_STAND_IN_NOTEBOOK'], encoding='utf-8') as f:\n"
    "        return {'ipynb': json.load(f)}\n",
}


def _colab_kernel(tmp_path, notebook_file, monkeypatch):
    """The name of a Jupyter kernel that runs as Colab's does (:data:`COLAB_STAND_IN`)."""
    package = tmp_path / "site" / "google" / "colab"
    package.mkdir(parents=True)
    for file, text in COLAB_STAND_IN.items():
        (package / file).write_text(text, encoding="utf-8")
    spec = tmp_path / "jupyter" / "kernels" / "colab-stand-in"
    spec.mkdir(parents=True)
    kernel = {
        "argv": [
            sys.executable,
            "-m",
            "ipykernel_launcher",
            "--IPKernelApp.kernel_class=google.colab._kernel.Kernel",
            "-f",
            "{connection_file}",
        ],
        "display_name": "Colab stand-in",
        "language": "python",
        "env": {
            "PYTHONPATH": str(tmp_path / "site"),
            "COLAB_STAND_IN_NOTEBOOK": str(notebook_file),
        },
    }
    (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return "colab-stand-in"


def test_student_sees_why_a_check_fails_on_colab(built, wrong, tmp_path, monkeypatch):
    """On Colab the notebook has no file beside the kernel, and otter reads tests there from
    files only: the first cells write the visible tests from the notebook that Colab sends the
    kernel, and the ``grader.check`` cells print the messages of the failed checks, as in
    Jupyter. A notebook whose metadata Colab dropped says why its checks cannot run."""
    name = "ps4_interpolation"
    submission, made, _ = wrong(name, 0)
    browser = tmp_path / "browser"  # the notebook as the browser holds it
    browser.mkdir()
    held = browser / "notebook.ipynb"
    held.write_bytes(submission.read_bytes())
    runtime = tmp_path / "content"  # Colab's working folder: no notebook in it
    runtime.mkdir()
    kernel = _colab_kernel(tmp_path, held, monkeypatch)
    notebook = nbformat.read(held, as_version=4)
    _shown_checks(notebook, runtime, made, _visible_messages(built(name), name), kernel)
    assert sorted(p.stem for p in (runtime / f"tests_{name}").glob("*.py")) == sorted(
        notebook.metadata.otter.tests
    )
    stripped = nbformat.read(held, as_version=4)
    del stripped.metadata["otter"]
    nbformat.write(stripped, held)
    stripped.cells = stripped.cells[:2]  # the install cell and otter's
    with pytest.raises(CellExecutionError, match="Colab did not pass this notebook's checks"):
        _execute(stripped, runtime, kernel)


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
        f'%pip install --quiet "token-dynamics[widgets] @ git+{repository}"',
        f'%pip install --quiet "{otter}"',
    ]
    assert run(["otter"]) == [f'%pip install --quiet "{otter}"']


@pytest.mark.parametrize("name", SETS)
def test_autograder_bundle_installs_the_library(built, name):
    """Gradescope builds the grading image from the bundle's environment: it installs the
    library as the student notebook's install cell does (the tests import it), with
    otter-grader."""
    with zipfile.ZipFile(built(name) / "autograder" / f"{name}.zip") as bundle:
        environment = yaml.safe_load(bundle.read("environment.yml"))
    (pip,) = [dep["pip"] for dep in environment["dependencies"] if isinstance(dep, dict)]
    assert coursework.library_requirement() in pip, pip
    assert coursework.library_requirement() in coursework.install_cell().source
    assert any(req.startswith("otter-grader") for req in pip), pip


def test_readme_names_the_requirement_the_bundles_install():
    """coursework/README.md writes the library's requirement as the bundles and the install
    cell have it (it once left out the extra, `[widgets]`)."""
    readme = (ROOT / "coursework" / "README.md").read_text(encoding="utf-8")
    shown = coursework.library_requirement().replace(coursework._repository(), "<repository>")
    assert f"`{shown}`" in readme, shown


@pytest.mark.parametrize("name", SETS)
def test_student_notebook_starts_with_the_install_cell(built, name):
    notebook = nbformat.read(built(name) / "student" / f"{name}.ipynb", as_version=4)
    assert notebook.cells[0].source == coursework.install_cell().source
    assert notebook.cells[1].source.startswith("# Initialize Otter\nimport otter")


def _graded(out, name, tmp_path, answers_edit, **limits):
    """The student notebook of set `name` answered with the key, its answer cells (by question)
    edited by `answers_edit`, graded."""
    notebook = _answered(out, name)
    answers_edit(notebook, dict(zip(_questions(name), _answer_cells(notebook), strict=True)))
    submission = tmp_path / f"{name}.ipynb"
    nbformat.write(notebook, submission)
    return submission, coursework.grade(name, submission, out, **limits)


def test_grading_runs_the_notebook_whatever_kernel_it_names(built, tmp_path):
    """A notebook saved by Anaconda's Jupyter names its kernel ``conda-env-<name>-py``: it is
    graded in this environment's kernel (otter could not find that kernel, and the notebook
    was not graded)."""
    name = "ps4_interpolation"

    def conda(notebook, answers):
        notebook.metadata.kernelspec = {"name": "conda-env-course-py", "display_name": "Python"}

    _, score = _graded(built(name), name, tmp_path, conda)
    assert score.total == score.max_total > 0, coursework.report(score)


def test_grading_says_what_a_cell_raised(built, tmp_path):
    """Under each problem, the teaching assistant reads what its cells raised: the exception,
    its message and the student's line; the CSV's note has it too. Grading gave the tests'
    messages only."""
    name = "ps4_interpolation"

    def divide_by_zero(notebook, answers):
        answers["q2_temperature"].source = "slope = 1 / 0\n" + answers["q2_temperature"].source

    submission, score = _graded(built(name), name, tmp_path, divide_by_zero)
    raised = "ZeroDivisionError: division by zero, at line 1: `slope = 1 / 0`"
    assert score.errors == {"q2_temperature": [raised]}
    assert score.questions["q2_temperature"] == 0
    assert score.total == score.max_total - score.possible["q2_temperature"]
    assert f"q2_temperature: 0 / {score.possible['q2_temperature']:g}\n  raised: {raised}\n" in (
        coursework.report(score)
    )
    table = tmp_path / "grades.csv"
    coursework.write_grades(table, [submission], {submission: name}, {submission: score}, {})
    with table.open(newline="", encoding="utf-8") as f:
        (row,) = csv.DictReader(f)
    assert row["note"] == f"q2_temperature: {raised}"


def test_grading_reports_a_setup_error_once(built, tmp_path):
    """An error in a cell before the problems (a misspelt import) is reported as the setup's,
    with the student's line, and the report says once that every problem that uses what it
    defines fails with it; the problems list only what their own cells raised. Grading listed
    it under the first problem, as that problem's error."""
    name = "ps4_interpolation"

    def misspelt_import(notebook, answers):
        first = notebook.cells.index(next(c for c in notebook.cells if PROBLEM.search(c.source)))
        (setup,) = [c for c in notebook.cells[:first] if "from token_dynamics import" in c.source]
        setup.source = setup.source.replace(
            "from token_dynamics import", "from token_dynamic import"
        )

    _, score = _graded(built(name), name, tmp_path, misspelt_import)
    raised = (
        "ModuleNotFoundError: No module named 'token_dynamic', at line 3: "
        "`from token_dynamic import interpolation`"
    )
    assert score.errors[coursework.SETUP] == [raised], score.errors
    assert next(iter(score.errors)) == coursework.SETUP  # first, as in the report
    assert all(raised not in errors for q, errors in score.errors.items() if q != coursework.SETUP)
    assert score.total < score.max_total
    report = coursework.report(score)
    said = "setup: a cell before the problems raised, and every problem that uses what it defines"
    assert report.startswith(f"{said} fails with it\n  raised: {raised}\n"), report
    assert report.count(raised) == 1 and report.count(said) == 1, report


def test_grading_stops_a_cell_that_does_not_end(built, tmp_path):
    """A cell that does not end (a ``while True:``, or a check that calls a function that
    loops) is stopped after the cell limit, with the reason under its problem, which is
    graded as the notebook then stands; the others are graded as usual. Grading waited for
    the loop for ever, the rest of the class ungraded."""
    name, limit = "ps4_interpolation", 30  # its cells run in seconds

    def loops(notebook, answers):
        head, body = answers["q3_snap_weights"].source.split("\n", 1)
        assert head == "def snap_weights(w, y, b1, b2):", head
        answers["q3_snap_weights"].source = f"{head}\n    while True:\n        pass\n{body}"
        answers["q4_separation"].source = (
            "while True:\n    pass\n" + answers["q4_separation"].source
        )

    _, score = _graded(built(name), name, tmp_path, loops, cell_timeout_s=limit)
    assert list(score.errors) == ["q3_snap_weights", "q4_separation"], score.errors
    for question in score.errors:
        (stopped,) = score.errors[question]
        assert re.fullmatch(
            rf"timed out after {limit} s, at line [1-3]: `(while True:|pass)`", stopped
        )
        assert score.questions[question] == 0
        assert f"{question}: 0 / {score.possible[question]:g}\n  raised: {stopped}\n" in (
            coursework.report(score)
        )
    others = score.max_total - sum(score.possible[q] for q in score.errors)
    assert score.total == others, coursework.report(score)


def test_grading_stops_a_check_left_to_the_end(built, tmp_path):
    """A function that loops, in a notebook whose ``grader.check`` cell of that problem was
    deleted, is first tested after the notebook: that test is stopped after the cell limit,
    with the reason under its problem, and every other problem keeps its points. Otter ran
    every test left in one last cell, whose stop left no results: the notebook was not
    graded."""
    name, limit = "ps4_interpolation", 30  # its cells run in seconds

    def loops_unchecked(notebook, answers):
        head, body = answers["q3_snap_weights"].source.split("\n", 1)
        answers["q3_snap_weights"].source = f"{head}\n    while True:\n        pass\n{body}"
        (check,) = [c for c in notebook.cells if c.source == 'grader.check("q3_snap_weights")']
        notebook.cells.remove(check)

    _, score = _graded(built(name), name, tmp_path, loops_unchecked, cell_timeout_s=limit)
    stopped = f"timed out after {limit} s, at line 2: `while True:`"
    assert score.errors == {"q3_snap_weights": [stopped]}, score.errors
    assert list(score.questions) == _questions(name)
    assert score.questions["q3_snap_weights"] == 0
    assert score.total == score.max_total - score.possible["q3_snap_weights"], score
    assert f"q3_snap_weights: 0 / {score.possible['q3_snap_weights']:g}\n  raised: {stopped}\n" in (
        coursework.report(score)
    )


def test_grading_tells_a_students_exit_from_its_own_stop(built, tmp_path):
    """A cell that raises ``KeyboardInterrupt`` or exits (``raise SystemExit``,
    ``sys.exit(3)``, ``exit()``, ``os._exit(0)``) ends there, says so with its line, and the
    grading goes on: the timeout's message is for a cell that the grading stopped. Grading read
    a student's ``KeyboardInterrupt`` as its own timeout, and ``exit()`` and ``os._exit`` ended
    the kernel, and with it the grading of the notebook."""
    name = "ps4_interpolation"
    exits = {
        "q1_hardmax_interpolator": ["raise KeyboardInterrupt"],
        "q2_temperature": ["import sys\nsys.exit(3)"],
        "q3_snap_weights": ["exit()"],
        "q4_separation": ["import os\nos._exit(0)", "raise SystemExit"],
    }

    def exit_after_answering(notebook, answers):
        for question, sources in exits.items():
            at = notebook.cells.index(answers[question]) + 1
            notebook.cells[at:at] = [nbformat.v4.new_code_cell(s) for s in sources]

    _, score = _graded(built(name), name, tmp_path, exit_after_answering)
    ended = "ends the kernel: the grading ended this cell only"
    assert score.errors == {
        "q1_hardmax_interpolator": ["KeyboardInterrupt, at line 1: `raise KeyboardInterrupt`"],
        "q2_temperature": ["SystemExit: 3, at line 2: `sys.exit(3)`"],
        "q3_snap_weights": [f"SystemExit: exit() or quit() {ended}, at line 1: `exit()`"],
        "q4_separation": [
            f"SystemExit: os._exit() {ended}, at line 2: `os._exit(0)`",
            "SystemExit, at line 1: `raise SystemExit`",
        ],
    }, score.errors
    assert score.total == score.max_total > 0, coursework.report(score)  # each after its answer


def test_grading_ends_a_cell_that_outlives_its_stop(built, tmp_path):
    """A cell that ignores the interrupt (here it turns SIGINT off) ends the grading of its
    notebook at the submission's limit, as not graded with the reason, and leaves no kernel
    running the loop."""
    name = "ps4_interpolation"
    out = built(name)
    notebook = nbformat.read(out / "student" / f"{name}.ipynb", as_version=4)
    pid_file = tmp_path / "kernel.pid"
    _answer_cells(notebook)[0].source = (
        f"import os, signal\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    )
    submission = tmp_path / f"{name}.ipynb"
    nbformat.write(notebook, submission)
    with pytest.raises(RuntimeError, match=r"could not grade .*: timed out after 60 s"):
        coursework.grade(name, submission, out, cell_timeout_s=10, timeout_s=60)
    kernel = int(pid_file.read_text())
    assert not psutil.pid_exists(kernel) or psutil.Process(kernel).status() == "zombie"


def test_cell_limit_is_the_books_own(tmp_path, monkeypatch):
    """A cell of a submission or of the answer key may run as long as a cell of the book,
    ``execute.timeout`` in _config.yml (Jupyter Book reads it there), which build.py reads as
    tools/notebook_code.py does: a copy of the repository whose _config.yml says otherwise
    grades with its value (build.py once wrote its own 90 beside it, free to drift). The
    guide states the value it has."""
    config = (ROOT / "_config.yml").read_text(encoding="utf-8")
    limit = yaml.safe_load(config)["execute"]["timeout"]
    assert coursework.CELL_TIMEOUT_S == limit
    changed, count = re.subn(rf"(?m)^(  timeout: ){limit}\b", rf"\g<1>{limit + 7}", config)
    assert count == 1, "the book's timeout moved in _config.yml"
    (tmp_path / "_config.yml").write_text(changed, encoding="utf-8")
    for path in ("coursework/build.py", "tools/notebook_code.py"):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    spec = importlib.util.spec_from_file_location("build_copy", tmp_path / "coursework/build.py")
    copy = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "build_copy", copy)
    spec.loader.exec_module(copy)
    assert copy.CELL_TIMEOUT_S == limit + 7
    readme = (ROOT / "coursework" / "README.md").read_text(encoding="utf-8")
    assert f"more than {limit} seconds" in readme
    shown = re.findall(r"raised: timed out after (\d+) s", readme)
    assert shown and all(int(seconds) == limit for seconds in shown), shown


def test_build_one_problem_set(tmp_path, monkeypatch, capsys):
    """``make coursework SET=ps3`` (``build.py --set ps3``) rebuilds that set alone, named whole
    or by its number; an unknown set is refused with the known ones."""
    built_sets = []
    monkeypatch.setattr(coursework, "build", lambda out, names: built_sets.extend(names))
    coursework.main([str(tmp_path), "--set", "ps3", "ps5_clustering"])
    assert built_sets == ["ps3_noise", "ps5_clustering"]
    assert capsys.readouterr().out.startswith("ps3_noise: built\nps5_clustering: built\n")
    with pytest.raises(SystemExit) as exit_:
        coursework.main(["--set", "ps9"])
    assert exit_.value.code == 2 and "'ps9' names no problem set; known: [" in (
        capsys.readouterr().err
    )
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "$(if $(SET),--set $(SET))" in makefile
