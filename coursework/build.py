"""Build the coursework from the instructor notebooks, and grade a submission.

Usage::

    python coursework/build.py [OUT]        # default OUT: _build/coursework
    python coursework/build.py --grade ps1_tokens SUBMISSION.ipynb [OUT]
    python coursework/build.py --time-notebooks [SUBSTRING ...]

Each problem set ``coursework/ps*.md`` is one instructor notebook (jupytext MyST) in
otter-grader's format: it holds the problems, their solutions and their tests. ``otter assign``
turns it into

- ``OUT/student/<set>.ipynb``: the notebook to hand out, without solutions or hidden tests;
- ``OUT/answers/<set>.ipynb``: the answer key, solutions executed, for teaching assistants;
- ``OUT/autograder/<set>.zip``: the autograder bundle (``otter run -a <zip> <submission>``
  grades locally, Gradescope takes the zip as it is).

``otter assign`` runs every test against the solutions while it builds, so a build that
finishes has checked that the instructor solutions pass.

``--time-notebooks`` executes the book's notebooks one at a time in fresh kernels (those whose
path contains one of the substrings, or all) and records their wall times in
``coursework/notebook_times.csv``, from which the instructor's guide shows its time estimates.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "coursework"
DEFAULT_OUT = ROOT / "_build" / "coursework"
#: Seconds a cell of the answer key may run (the book's cell timeout, _config.yml).
CELL_TIMEOUT_S = 90
TIMES_FILE = SOURCES / "notebook_times.csv"


@dataclass(frozen=True)
class Score:
    """The autograder's verdict on one submission: points per question and in total."""

    questions: dict[str, float]
    possible: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.questions.values())

    @property
    def max_total(self) -> float:
        return sum(self.possible.values())


def problem_sets() -> list[str]:
    """Names of the problem sets, in order (``ps1_tokens``, ...)."""
    return sorted(p.stem for p in SOURCES.glob("ps*.md"))


def _assign(name: str, work: Path) -> Path:
    """Run ``otter assign`` on one instructor notebook; return its output folder."""
    source = work / f"{name}.ipynb"
    nbformat.write(jupytext.read(SOURCES / f"{name}.md"), source)
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
            shutil.copy(bundle, out / "autograder" / f"{name}.zip")
            key = out / "answers" / f"{name}.ipynb"
            shutil.copy(dist / "autograder" / f"{name}.ipynb", key)
        if execute_key:
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


def grade(name: str, submission: Path, out: Path = DEFAULT_OUT) -> Score:
    """Grade `submission` (an ``.ipynb``) with the autograder bundle of problem set `name`."""
    bundle = Path(out) / "autograder" / f"{name}.zip"
    if not bundle.is_file():
        raise FileNotFoundError(f"no autograder bundle {bundle}: run `make coursework` first")
    with tempfile.TemporaryDirectory() as tmp:
        # otter grades a copy named like the assignment's notebook, in a folder of its own
        shutil.copy(submission, Path(tmp) / f"{name}.ipynb")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "otter",
                "run",
                "--no-logo",
                "-a",
                str(bundle.resolve()),
                "-o",
                tmp,
                f"{name}.ipynb",
            ],
            check=True,
            cwd=tmp,
            capture_output=True,
            text=True,
        )
        results = json.loads((Path(tmp) / "results.json").read_text(encoding="utf-8"))
    graded = [t for t in results["tests"] if t.get("max_score") is not None]
    return Score(
        questions={t["name"]: float(t["score"]) for t in graded},
        possible={t["name"]: float(t["max_score"]) for t in graded},
    )


def time_notebooks(selection: list[str] | None = None, path: Path = TIMES_FILE) -> dict:
    """Execute the selected book notebooks and record their wall times (seconds) in `path`;
    earlier times of notebooks not selected are kept."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from notebooks import notebooks, time_notebook

    times = {}
    if path.exists():
        with path.open(encoding="utf-8") as f:
            times = {row["notebook"]: float(row["seconds"]) for row in csv.DictReader(f)}
    for nb in notebooks():
        docname = nb.relative_to(ROOT).with_suffix("").as_posix()
        if selection and not any(s in docname for s in selection):
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


def main(argv: list[str]) -> None:
    if argv[:1] == ["--time-notebooks"]:
        time_notebooks(argv[1:])
        return
    if argv[:1] == ["--grade"]:
        name, submission, *rest = argv[1:]
        score = grade(name, Path(submission), Path(rest[0]) if rest else DEFAULT_OUT)
        for question, points in score.questions.items():
            print(f"{question}: {points:g} / {score.possible[question]:g}")
        print(f"total: {score.total:g} / {score.max_total:g}")
        return
    out = build(Path(argv[0]) if argv else DEFAULT_OUT)
    print(f"coursework built in {out}: student/, answers/, autograder/")


if __name__ == "__main__":
    main(sys.argv[1:])
