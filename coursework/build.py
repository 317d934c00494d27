"""Build the coursework from the instructor notebooks, and grade a submission.

Usage::

    python coursework/build.py [OUT]        # default OUT: _build/coursework
    python coursework/build.py [OUT] --set ps3 [...]   # those problem sets alone
    python coursework/build.py --grade SUBMISSION.ipynb|FOLDER ... [--out OUT]
    python coursework/build.py --time-notebooks [SUBSTRING ...]

Each problem set ``coursework/ps*.md`` is one instructor notebook (jupytext MyST) in
otter-grader's format: it holds the problems, their solutions and their tests. ``otter assign``
turns it into

- ``OUT/student/<set>.ipynb``: the notebook to hand out, without solutions or hidden tests,
  with a first cell that installs the library and otter-grader where they are missing;
- ``OUT/answers/<set>.ipynb``: the answer key, solutions executed, for teaching assistants;
- ``OUT/autograder/<set>.zip``: the autograder bundle (``otter run -a <zip> <submission>``
  grades locally, Gradescope takes the zip as it is).

``otter assign`` runs every test against the solutions while it builds, so a build that
finishes has checked that the instructor solutions pass.

``--grade`` grades each notebook given, and each in the folders given (the problem set read
from the notebook's metadata): the points per question, the message of every failed test and
what each cell raised; a cell that runs past ``CELL_TIMEOUT_S`` is stopped and the next runs;
with ``--csv FILE``, the class's grades too, a row per submission.
It first builds the bundle of a set that is missing or older than the set's notebook, and
grades the other submissions when one cannot be graded (then exits with an error naming it).

``--time-notebooks`` executes the book's notebooks one at a time in fresh kernels (those whose
path contains one of the substrings, or all) and records their wall times in
``coursework/notebook_times.csv``, from which the instructor's guide shows its time estimates.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import PIPE

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "coursework"
DEFAULT_OUT = ROOT / "_build" / "coursework"


def _tool(name: str):
    """The module ``tools/<name>.py`` (``plain_notebook``, which writes the install cell of the
    book's downloads; ``notebook_code``, which runs the book's notebooks)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Seconds a cell of the answer key, or of a submission being graded, may run: the book's cell
#: timeout, ``execute.timeout`` in _config.yml (which Jupyter Book reads, hence its one home),
#: as tools/notebook_code.py reads it. A problem's cells run in seconds.
CELL_TIMEOUT_S = _tool("notebook_code").CELL_TIMEOUT_S
#: Seconds the grading of one submission may take in all: a set grades in under a minute
#: (ps1_tokens: 40 s on a busy two-core machine), with room for a few cells stopped at
#: CELL_TIMEOUT_S; past it, a cell that outlived its stop (a loop that catches the
#: interrupt) ends the grading of that submission.
SUBMISSION_TIMEOUT_S = 600
#: A problem's statement, ``**Problem 1 (computation: ...``, and its kind; its check cell,
#: ``grader.check("q1_euler_order")``; a frame of a notebook cell in IPython's traceback
#: (``Cell In[7], line 2``); the colour codes of that traceback.
PROBLEM = re.compile(r"^\*\*Problem \d+ \((?P<kind>[a-z]+)", re.MULTILINE)
CHECK_CELL = re.compile(r'^grader\.check\("(\w+)"\)', re.MULTILINE)
CELL_FRAME = re.compile(r"Cell In\[(\d+)\], line (\d+)")
ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")
#: A cell of the grading's own, after the notebook: the tests of one problem that no
#: ``grader.check`` cell ran (``_OTTER_RUN``), ``..._checked('./tests/q3_two_tokens.py')``.
GRADING_CHECK = re.compile(r"^_Checker\.check_if_not_already_checked\('(?:.*/)?(\w+)\.py'\)$")
#: Where :func:`cell_errors` lists what the cells before the first problem's statement raised
#: (the imports, the generator): every problem that uses what they define fails with them.
SETUP = "setup"
TIMES_FILE = SOURCES / "notebook_times.csv"
#: The first line of an instructor notebook's first cell, otter's assignment config.
ASSIGNMENT_CONFIG = "# ASSIGNMENT CONFIG"
#: The cell ``otter assign`` puts first: the install cell goes before it.
OTTER_INIT = "# Initialize Otter"
#: What the first cell of ``otter assign`` becomes: ``otter.Notebook("<set>.ipynb")`` reads the
#: visible tests from the notebook's file by that name, and a copy under another name (Jupyter's
#: "Make a copy": ``<set>-Copy1.ipynb``) alone in its folder failed every check. The notebook's
#: file is then the one Jupyter names (``__session__``), else a notebook of the same set beside
#: it (every notebook of a set holds the same visible tests). Colab keeps the notebook in the
#: browser, with no file to read, and otter 7 there reads tests only from files: the cell writes
#: the visible tests, from the notebook Colab sends the kernel on request, to a folder of test
#: files (otter's own test for Colab: ``google.colab`` in the shell's name).
OTTER_INIT_SOURCE = """# Initialize Otter
import otter


def _this_notebook(name="{name}"):
    \"\"\"This notebook's file, under any name: the checks read their tests from it.\"\"\"
    import glob
    import json
    import os

    session = os.path.basename(globals().get("__session__") or "")  # set by Jupyter
    for path in [f"{{name}}.ipynb", session, *sorted(glob.glob("*.ipynb"))]:
        if path.endswith(".ipynb") and os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                metadata = json.load(f).get("metadata", {{}})
            if metadata.get("otter", {{}}).get("assignment_name") == name:
                return path
    return f"{{name}}.ipynb"


def _colab_tests(name="{name}"):
    \"\"\"On Colab: a folder holding this notebook's visible tests, one file each.\"\"\"
    import os

    from google.colab import _message

    reply = _message.blocking_request("get_ipynb", timeout_sec=60) or {{}}  # None: no reply
    metadata = reply.get("ipynb", {{}}).get("metadata", {{}}).get("otter", {{}})
    if metadata.get("assignment_name") != name:
        raise RuntimeError(
            "Colab did not pass this notebook's checks (kept in its metadata) to the kernel: "
            "the grader.check cells cannot run here; the grading of the notebook you hand in is "
            "not affected. Upload the notebook as it was handed out (File > Upload notebook) "
            "and run this cell again."
        )
    folder = f"tests_{{name}}"
    os.makedirs(folder, exist_ok=True)
    for question, test in metadata["tests"].items():
        with open(os.path.join(folder, f"{{question}}.py"), "w", encoding="utf-8") as f:
            f.write(f"OK_FORMAT = True\\ntest = {{test!r}}\\n")
    return folder


if "google.colab" in str(get_ipython()):  # noqa: F821 (Colab, as otter detects it)
    grader = otter.Notebook(tests_dir=_colab_tests())
else:
    grader = otter.Notebook(_this_notebook())"""
#: The installer of a missing otter-grader, after the library's (tools/plain_notebook.py).
OTTER_INSTALL = """
try:
    import otter  # noqa: F401
except ImportError:
    %pip install --quiet "{requirement}"
"""

#: Run in a child process by :func:`grade` (otter changes the working directory, the PATH and
#: the logging of the process it runs in): grade one submission, print the verdict of every
#: test case and the errors of every code cell as JSON. Every notebook runs in this
#: environment's kernel, whatever kernel its metadata names (a student's Anaconda saves
#: ``conda-env-<name>-py``, which ``otter run`` failed to find), and a cell that runs past the
#: limit (``sys.argv[3]`` seconds) is interrupted, as Jupyter's stop button does, and the next
#: cell runs: a student's ``while True:`` hung the grading of the class. The tests that no
#: ``grader.check`` cell ran (its cell deleted) run after the notebook one test file per cell
#: (:data:`GRADING_CHECK`), each under the limit: otter runs them all in its last cell, and a
#: function that looped there was stopped with every test after it and the results of all.
_OTTER_RUN = """
import json, sys
import nbconvert.preprocessors
import nbformat
import otter.execute.preprocessor
from otter.execute.preprocessor import GradingPreprocessor
from otter.run import main


class Limited(nbconvert.preprocessors.ExecutePreprocessor):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.kernel_name, self.interrupt_on_timeout = "python3", True
        self.timeout = int(sys.argv[3])

    async def _async_handle_timeout(self, timeout, cell=None):
        if cell is not None:  # the interrupt is the grading's, not a student's
            cell.metadata["stopped_by_grading"] = True
        return await super()._async_handle_timeout(timeout, cell)


nbconvert.preprocessors.ExecutePreprocessor = Limited  # as otter's grade_notebook imports it
# in the kernel: a test stopped by the interrupt is recorded as failed, so that otter's last cell
# does not run it again (and wait for it again)
otter.execute.preprocessor.INIT_CELL_SOURCE += '''
from otter.execute import Checker as _Checker
from otter.test_files import create_test_file as _create_test_file
from otter.test_files.abstract_test import TestCaseResult as _TestCaseResult


def _check_or_stop(path, nbmeta_config, test_name=None, global_env=None, _check=_Checker.check):
    try:
        return _check(path, nbmeta_config, test_name, global_env)
    except KeyboardInterrupt:
        stopped = _create_test_file(path, nbmeta_config, test_name=test_name)
        cases = stopped.test_cases
        stopped.test_case_results = [_TestCaseResult(case, "stopped", False) for case in cases]
        _Checker._test_files.append(stopped)
        raise


_Checker.check = _check_or_stop

# exit(), quit() and os._exit() end the cell that calls them, as sys.exit() does, not the kernel
# (its end ended the grading of the whole notebook); every SystemExit shows its line (IPython
# shows its name alone)
import os as _os


def _ends_the_cell(call, kernel=_os.getpid(), getpid=_os.getpid, os_exit=_os._exit):
    def end(*args, **kwargs):
        if getpid() != kernel:  # a process forked from the kernel exits as it asks
            os_exit(*args, **kwargs)
        raise SystemExit(call + " ends the kernel: the grading ended this cell only")

    end.__code__ = end.__code__.replace(co_filename="<grading>")  # not a frame of a cell
    return end


_os._exit = _ends_the_cell("os._exit()")
get_ipython().ask_exit = _ends_the_cell("exit() or quit()")
_show_traceback = get_ipython().showtraceback
get_ipython().showtraceback = lambda *a, exception_only=False, **k: _show_traceback(*a, **k)
'''
_add_cells = GradingPreprocessor.add_init_and_export_cells


def _one_check_per_cell(self, nb):
    _add_cells(self, nb)  # its last cell, which stores the results, still runs last
    checks = [f"_Checker.check_if_not_already_checked({path!r})" for path in self.tests_glob]
    nb.cells[-1:-1] = [nbformat.v4.new_code_cell(check) for check in checks]


GradingPreprocessor.add_init_and_export_cells = _one_check_per_cell
results = main(sys.argv[2], autograder=sys.argv[1], output_dir=None, no_logo=True)
print("\\n@@results@@" + json.dumps({
    name: {
        "score": test_file.score,
        "possible": test_file.possible,
        "cases": [
            {"hidden": r.test_case.hidden, "passed": r.passed,
             "message": r.test_case.failure_message, "output": r.message}
            for r in test_file.test_case_results
        ],
    }
    for name, test_file in sorted(results.results.items())  # the problems in order
}))
print("\\n@@cells@@" + json.dumps([
    {"type": cell.cell_type, "source": cell.source, "count": cell.get("execution_count"),
     "stopped": cell.metadata.get("stopped_by_grading", False),
     "errors": [o for o in cell.get("outputs", []) if o["output_type"] == "error"]}
    for cell in (results.notebook.cells if results.notebook else [])
]))
"""


@dataclass(frozen=True)
class Score:
    """The autograder's verdict on one submission: points per question and in total, the
    failure message of every failed test case (``hidden`` tells the tests students do not run
    themselves), and what the notebook's cells raised, by question (:func:`cell_errors`)."""

    questions: dict[str, float]
    possible: dict[str, float]
    failures: dict[str, list[dict]] = field(default_factory=dict)
    errors: dict[str | None, list[str]] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.questions.values())

    @property
    def max_total(self) -> float:
        return sum(self.possible.values())


def _repository() -> str:
    """The repository's URL: pyproject.toml's ``Repository`` (the same as _config.yml's)."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["urls"]["Repository"]


def _otter_requirement() -> str:
    """otter-grader as pinned in requirements-dev.txt (``otter-grader==7.0.0``)."""
    text = (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    (pin,) = re.findall(r"^otter-grader==\S+", text, re.MULTILINE)
    return pin


def library_requirement() -> str:
    """The library as the install cell of the book's downloads installs it, a pip requirement
    (``token-dynamics[widgets] @ git+<repository>``)."""
    return _tool("plain_notebook").library_requirement(_repository())


def install_cell() -> dict:
    """The first cell of a student notebook: outside this repository's environment (a plain
    Jupyter, Binder, Colab) it installs the library and otter-grader when they are missing.

    The library's part is the install cell of the book's downloads (tools/plain_notebook.py,
    which writes the requirement from the repository's URL); otter's follows it.
    """
    plain = _tool("plain_notebook")
    empty = {"cells": [], "metadata": {}}
    (cell,) = plain.plain_notebook(empty, lambda *_: "", repository=_repository())["cells"]
    cell = nbformat.from_dict(cell)
    cell.id = "install-requirements"
    cell.source = (
        cell.source.rstrip("\n") + "\n" + OTTER_INSTALL.format(requirement=_otter_requirement())
    )
    return cell


def _with_install_cell(path: Path, name: str) -> None:
    """Put the install cell first in the notebook at `path` of problem set `name` (before
    otter's own first cell), and let otter's cell find the notebook under any file name."""
    notebook = nbformat.read(path, as_version=4)
    if not notebook.cells[0].source.startswith(OTTER_INIT):
        raise RuntimeError(f"{path}: otter's first cell moved; where does the install cell go?")
    notebook.cells[0].source = OTTER_INIT_SOURCE.format(name=name)
    notebook.cells.insert(0, install_cell())
    nbformat.write(notebook, path)


def problem_sets() -> list[str]:
    """Names of the problem sets, in order (``ps1_tokens``, ...)."""
    return sorted(p.stem for p in SOURCES.glob("ps*.md"))


def _with_requirement(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """`notebook` (an instructor notebook) whose assignment config names the library as the
    autograder's requirement: otter writes it into the bundle's environment, so that the image
    Gradescope builds from the bundle installs the library its tests import."""
    config = notebook.cells[0]
    if not config.source.startswith(ASSIGNMENT_CONFIG) or "\nrequirements: null\n" not in (
        config.source + "\n"
    ):
        raise RuntimeError("the assignment config moved, or names requirements of its own")
    line = "requirements:\n  - " + json.dumps(library_requirement())
    config.source = (config.source + "\n").replace("requirements: null\n", line + "\n").rstrip()
    return notebook


def _assign(name: str, work: Path) -> Path:
    """Run ``otter assign`` on one instructor notebook; return its output folder."""
    import jupytext

    source = work / f"{name}.ipynb"
    nbformat.write(_with_requirement(jupytext.read(SOURCES / f"{name}.md")), source)
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "otter", "assign", "--no-pdfs", str(source), str(dist)],
        check=True,
        cwd=work,
        capture_output=True,
        text=True,
    )
    return dist


def build(
    out: Path = DEFAULT_OUT, names: list[str] | None = None, *, execute_key: bool = True
) -> Path:
    """Generate the student notebooks, the answer key and the autograder bundles in `out`.

    `execute_key` runs the answer key so that it shows its outputs (``otter assign`` has already
    run its tests); ``False`` leaves it unexecuted, which halves the time of a build.
    """
    names = problem_sets() if names is None else names
    unknown = sorted(set(names) - set(problem_sets()))
    if unknown:
        raise ValueError(f"`names` holds unknown problem sets {unknown}; known: {problem_sets()}")
    out = Path(out)
    for folder in ("student", "answers", "autograder"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                dist = _assign(name, Path(tmp))
            except subprocess.CalledProcessError as err:
                message = f"otter assign failed on {name}:\n{err.stdout}{err.stderr}"
                raise RuntimeError(message) from None
            shutil.copy(dist / "student" / f"{name}.ipynb", out / "student" / f"{name}.ipynb")
            (bundle,) = (dist / "autograder").glob(f"{name}-autograder_*.zip")
            shutil.copy(bundle, bundle_path(name, out))
            key = out / "answers" / f"{name}.ipynb"
            shutil.copy(dist / "autograder" / f"{name}.ipynb", key)
        for notebook_path in (out / "student" / f"{name}.ipynb", key):
            _with_install_cell(notebook_path, name)
        if execute_key:
            from nbclient import NotebookClient

            # in its own folder: its first cell opens the notebook by its file name
            notebook = nbformat.read(key, as_version=4)
            NotebookClient(
                notebook,
                timeout=CELL_TIMEOUT_S,
                kernel_name="python3",
                resources={"metadata": {"path": str(key.parent)}},
            ).execute()
            nbformat.write(notebook, key)
            # the log otter's checks write beside the notebook they run in
            (key.parent / ".OTTER_LOG").unlink(missing_ok=True)
    return out


def assignment_of(submission: Path) -> str:
    """The problem set a submission answers: the name otter wrote in the notebook's metadata,
    else the file's name (``ps1_tokens.ipynb``)."""
    metadata = nbformat.read(submission, as_version=4).metadata
    name = metadata.get("otter", {}).get("assignment_name") or Path(submission).stem
    if name not in problem_sets():
        raise ValueError(
            f"`{submission}` answers no problem set: its metadata names none and its file name "
            f"is none of {problem_sets()} (rename it `<set>.ipynb`)"
        )
    return name


def grade(
    name: str,
    submission: Path,
    out: Path = DEFAULT_OUT,
    *,
    cell_timeout_s: int = CELL_TIMEOUT_S,
    timeout_s: float = SUBMISSION_TIMEOUT_S,
) -> Score:
    """Grade `submission` (an ``.ipynb``) with the autograder bundle of problem set `name`.

    A cell that runs longer than `cell_timeout_s` seconds is stopped, and its problem graded
    as the notebook then stands; a submission whose grading runs longer than `timeout_s`
    seconds in all (a loop that outlives the stop) is not graded (``RuntimeError``).
    """
    bundle = bundle_path(name, out)
    if not bundle.is_file():
        raise FileNotFoundError(f"no autograder bundle {bundle}: run `make coursework` first")
    command = [sys.executable, "-c", _OTTER_RUN, str(bundle.resolve()), f"{name}.ipynb"]
    command += [str(cell_timeout_s)]
    with tempfile.TemporaryDirectory() as tmp:
        # otter grades a copy named like the assignment's notebook, in a folder of its own
        shutil.copy(submission, Path(tmp) / f"{name}.ipynb")
        with subprocess.Popen(command, cwd=tmp, stdout=PIPE, stderr=PIPE, text=True) as run:
            try:
                stdout, stderr = run.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_with_children(run.pid)
                raise RuntimeError(
                    f"otter could not grade {submission}: timed out after {timeout_s:g} s (a "
                    "cell went on after it was stopped)"
                ) from None
    if run.returncode != 0 or "@@cells@@" not in stdout:
        raise RuntimeError(f"otter could not grade {submission}:\n{stdout}{stderr}")
    results, cells = map(json.loads, stdout.rsplit("@@results@@", 1)[1].split("@@cells@@"))
    errors = cell_errors(cells, cell_timeout_s)
    if not results:  # otter's last cell, which runs the tests left, did not finish
        raise RuntimeError(f"otter could not grade {submission}: " + _error_note(errors))
    for result in results.values():
        for case in result["cases"]:
            case["output"] = case["output"].strip()
    return Score(
        questions={q: float(r["score"]) for q, r in results.items()},
        possible={q: float(r["possible"]) for q, r in results.items()},
        failures={
            q: [
                # a test without a message: the last line of its output (the exception)
                {"hidden": c["hidden"], "message": c["message"] or c["output"].split("\n")[-1]}
                for c in r["cases"]
                if not c["passed"]
            ]
            for q, r in results.items()
        },
        errors=errors,
    )


def _kill_with_children(pid: int) -> None:
    """End process `pid` and every process it started (the kernel is in a session of its own:
    ending the process alone leaves the kernel running the student's loop)."""
    import psutil

    process = psutil.Process(pid)
    processes = [*process.children(recursive=True), process]
    for each in processes:
        with contextlib.suppress(psutil.NoSuchProcess):  # it ended meanwhile
            each.kill()
    psutil.wait_procs(processes, timeout=10)


def cell_errors(cells: list[dict], cell_timeout_s: float) -> dict[str | None, list[str]]:
    """What the `cells` of an executed submission raised (``[{"type", "source", "count",
    "stopped", "errors"}]``, the errors as Jupyter's error outputs of its code cells), by
    problem: ``"NameError: name 'x' is not defined, at line 2: `y = x + 1`"``, the line of the
    deepest frame in a cell of the notebook (the student's line, from which an error raised in
    the library was called), and
    ``"timed out after 90 s, at line 1: `while True:`"`` for a cell stopped by the grading
    (``"stopped"``; a student's own ``KeyboardInterrupt`` or ``SystemExit`` is named as such).
    A cell counts to the problem of the first ``grader.check`` cell at or after it, a check of
    the grading's own (:data:`GRADING_CHECK`) to its problem, and a cell before the first
    problem's statement to :data:`SETUP`; errors after the last check cell (in otter's own)
    are listed under ``None``."""
    sources = {c["count"]: c["source"].splitlines() for c in cells if c["type"] == "code"}
    statements = (
        i for i, c in enumerate(cells) if c["type"] == "markdown" and PROBLEM.search(c["source"])
    )
    first = next(statements, 0)  # no statement (a notebook of code alone): no setup
    found: dict[str | None, list[str]] = {}
    question = None
    for i, cell in reversed(list(enumerate(cells))):
        question = next(iter(CHECK_CELL.findall(cell["source"])), question)
        where = next(iter(GRADING_CHECK.findall(cell["source"])), question)
        where = SETUP if i < first else where
        for error in reversed(cell["errors"]):
            if error["ename"] == "KeyboardInterrupt" and cell.get("stopped"):
                what = f"timed out after {cell_timeout_s:g} s"
            else:  # a student's own KeyboardInterrupt or SystemExit says what it is
                what = ": ".join(filter(None, [error["ename"], error["evalue"]]))
            frames = CELL_FRAME.findall(ANSI_CODE.sub("", "\n".join(error["traceback"])))
            if frames:
                count, line = map(int, frames[-1])
                lines = sources.get(count, [])
                if 0 < line <= len(lines):
                    what += f", at line {line}: `{lines[line - 1].strip()}`"
            found.setdefault(where, []).insert(0, what)
    return dict(reversed(found.items()))  # in the notebook's order


def bundle_path(name: str, out: Path = DEFAULT_OUT) -> Path:
    """The autograder bundle of problem set `name` in the built coursework `out`."""
    return Path(out) / "autograder" / f"{name}.zip"


def stale(name: str, out: Path = DEFAULT_OUT) -> bool:
    """Whether the autograder bundle of problem set `name` in `out` is missing or older than
    what it is built from (the set's notebook ``coursework/<set>.md``, this script): grading
    with it would leave out a problem added since, or grade one as it was."""
    bundle = bundle_path(name, out)
    sources = (SOURCES / f"{name}.md", Path(__file__))
    return not bundle.is_file() or bundle.stat().st_mtime < max(p.stat().st_mtime for p in sources)


def grade_all(found: list[Path], out: Path = DEFAULT_OUT, table: Path | None = None) -> None:
    """Grade every submission of `found` and print its :func:`report`, building first the
    bundles that are :func:`stale`; with `table`, also write the class's grades there
    (:func:`write_grades`). A submission that cannot be graded (no problem set named, not a
    notebook, otter failed) is reported and the others are graded; the command then exits
    with an error that lists it."""
    names, failed, scores = {}, {}, {}
    for submission in found:
        try:
            names[submission] = assignment_of(submission)
        except Exception as err:  # a student's file can be anything: say so, grade the others
            failed[submission] = str(err) if str(submission) in str(err) else f"{submission}: {err}"
    for name in sorted(set(names.values())):
        if stale(name, out):
            print(f"building {name} into {out}: its bundle is missing or older than its source")
            build(out, [name])
    for submission, name in names.items():
        print(f"== {submission} ({name})")
        try:
            scores[submission] = grade(name, submission, out)
            print(report(scores[submission]), flush=True)
        except RuntimeError as err:  # otter could not run the notebook at all, or in time
            print(f"not graded: {err}", flush=True)
            reason = str(err).split("\n")[0].removeprefix(f"otter could not grade {submission}:")
            failed[submission] = f"{submission}: otter could not grade it" + (
                reason or " (its output is above)"
            )
    if table is not None:
        write_grades(table, found, names, scores, failed)
        print(f"grades of {len(scores)} submission(s) written to {table}")
    if failed:
        message = "\n".join(failed.values())
        raise SystemExit(f"{len(failed)} submission(s) not graded:\n{message}")


def write_grades(
    table: Path,
    found: list[Path],
    names: dict[Path, str],
    scores: dict[Path, Score],
    failed: dict[Path, str],
) -> None:
    """The class's grades as CSV, a row per submission in the order graded: its path, its
    problem set, the points of each problem (the problems of every set met, in order; empty
    where the set has no such problem), the total and the most possible, and why a submission
    was not graded (its points then empty) or what its cells raised."""
    questions = list(dict.fromkeys(q for score in scores.values() for q in score.questions))
    table.parent.mkdir(parents=True, exist_ok=True)
    with table.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "problem set", *questions, "total", "possible", "note"])
        for submission in found:
            score = scores.get(submission)
            if score is None:
                points, note = [""] * (len(questions) + 2), f"not graded: {failed[submission]}"
            else:
                points = [
                    f"{score.questions[q]:g}" if q in score.questions else "" for q in questions
                ]
                points = [*points, f"{score.total:g}", f"{score.max_total:g}"]
                note = _error_note(score.errors)
            writer.writerow([submission, names.get(submission, ""), *points, note])


def _error_note(errors: dict[str | None, list[str]]) -> str:
    """The errors of :func:`cell_errors` on one line, each after its problem."""
    return "; ".join(
        f"{q or 'after the problems'}: {e}" for q, raised in errors.items() for e in raised
    )


def report(score: Score) -> str:
    """The points per question and in total, and under each question what its cells raised
    and the message of every test it failed."""
    lines = []
    if score.errors.get(SETUP):
        lines.append(
            f"{SETUP}: a cell before the problems raised, and every problem that uses what it "
            "defines fails with it"
        )
        lines += [f"  raised: {error}" for error in score.errors[SETUP]]
    for question, points in score.questions.items():
        lines.append(f"{question}: {points:g} / {score.possible[question]:g}")
        lines += [f"  raised: {error}" for error in score.errors.get(question, [])]
        for failure in score.failures.get(question, []):
            kind = "hidden test" if failure["hidden"] else "visible test"
            lines.append(f"  failed ({kind}): {failure['message']}")
    lines += [f"raised after the problems: {error}" for error in score.errors.get(None, [])]
    lines.append(f"total: {score.total:g} / {score.max_total:g}")
    return "\n".join(lines)


def submissions(paths: list[Path]) -> list[Path]:
    """The notebooks among `paths`, and those in the folders among them (recursively)."""
    found = []
    for path in map(Path, paths):
        if not path.exists():
            raise FileNotFoundError(f"no submission `{path}`: give notebooks or folders of them")
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        elif path.suffix == ".ipynb":
            found.append(path)
        else:
            raise ValueError(f"`{path}` is neither a notebook (.ipynb) nor a folder of notebooks")
    return found


def time_notebooks(selection: list[str] | None = None, path: Path = TIMES_FILE) -> dict:
    """Execute the selected book notebooks and record their wall times (seconds) in `path`;
    earlier times of notebooks not selected are kept. Only the pages of the chapters, which the
    instructor's guide lists, are timed (not the back matter's running-at-scale page)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from notebooks import notebooks, time_notebook
    from traceability import chapters

    chapter_of = chapters()
    times = {}
    if path.exists():
        with path.open(encoding="utf-8") as f:
            times = {row["notebook"]: float(row["seconds"]) for row in csv.DictReader(f)}
    for nb in notebooks():
        docname = nb.relative_to(ROOT).with_suffix("").as_posix()
        if selection and not any(s in docname for s in selection):
            continue
        if chapter_of.get(docname, docname) == docname:  # a chapter of its own: not in the guide
            continue
        seconds, status = time_notebook(nb)
        if status != "ok":
            raise RuntimeError(f"{docname} failed: {status}")
        times[docname] = round(seconds, 1)
        print(f"{docname}: {seconds:.1f} s", flush=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["notebook", "seconds"])
        writer.writerows(sorted(times.items()))
    return times


def _problem_set(name: str) -> str:
    """The problem set that `name` names, whole (``ps3_noise``) or by its number (``ps3``)."""
    found = [s for s in problem_sets() if name in (s, s.split("_")[0])]
    if not found:
        raise argparse.ArgumentTypeError(f"{name!r} names no problem set; known: {problem_sets()}")
    return found[0]


def _arguments(argv: list[str]) -> argparse.Namespace:
    """The command line of the module's usage (its docstring, which ``--help`` prints)."""
    parser = argparse.ArgumentParser(
        prog="python coursework/build.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "build_out",
        nargs="?",
        type=Path,
        metavar="OUT",
        help=f"build every problem set into OUT (default: {DEFAULT_OUT.relative_to(ROOT)})",
    )
    task = parser.add_mutually_exclusive_group()
    task.add_argument(
        "--grade",
        nargs="+",
        type=Path,
        metavar="SUBMISSION",
        help="grade these notebooks, and the notebooks in these folders",
    )
    task.add_argument(
        "--time-notebooks",
        nargs="*",
        metavar="SUBSTRING",
        help=f"time the book's notebooks (those whose path holds a SUBSTRING, or all) into "
        f"{TIMES_FILE.relative_to(ROOT)}",
    )
    parser.add_argument(
        "--set",
        nargs="+",
        type=_problem_set,
        metavar="SET",
        help="build only these problem sets into OUT, by name or number (ps3_noise or ps3); "
        "the others already there are kept",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="with --grade: the built coursework whose bundles grade (a bundle missing or "
        "older than its set's notebook is built first)",
    )
    parser.add_argument(
        "--csv",
        type=Path,
        metavar="FILE",
        help="with --grade: also write the grades to FILE, a row per submission (the points of "
        "each problem, the total, why a submission was not graded)",
    )
    args = parser.parse_args(argv)
    if args.build_out is not None and (args.grade or args.time_notebooks is not None):
        parser.error("OUT is for a build; with --grade, name the built coursework with --out")
    if args.set and (args.grade or args.time_notebooks is not None):
        parser.error(
            "--set picks the problem sets of a build (with --grade, a submission's "
            "set is read from the notebook)"
        )
    if args.csv is not None and not args.grade:
        parser.error("--csv writes the grades of --grade: give the submissions with --grade")
    return args


def main(argv: list[str]) -> None:
    args = _arguments(argv)
    if args.time_notebooks is not None:
        time_notebooks(args.time_notebooks or None)
        return
    if args.grade:
        try:
            found = submissions(args.grade)
        except (FileNotFoundError, ValueError) as err:  # a wrong path: its message, no traceback
            raise SystemExit(str(err)) from None
        if not found:
            raise SystemExit(f"no submission (.ipynb) in {[str(a) for a in args.grade]}")
        grade_all(found, args.out, args.csv)
        return
    out = args.build_out or DEFAULT_OUT
    for name in args.set or problem_sets():  # a minute or more each: say how far it is
        try:
            build(out, [name])
        except RuntimeError as err:  # otter's output, which names the test that failed
            raise SystemExit(str(err)) from None
        print(f"{name}: built", flush=True)
    print(f"coursework built in {out}: student/, answers/, autograder/")


if __name__ == "__main__":
    main(sys.argv[1:])
