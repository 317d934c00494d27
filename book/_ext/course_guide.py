"""Sphinx extension: the computed parts of the instructor's guide (``book/instructor.md``).

- ``{learning-goals}``: for each chapter of `_toc.yml`, its learning goals, read from its theory
  page (the numbered list after ``**Learning goals.**``), followed by the chapter's exercises
  (from ``exercise_index.collect()``);
- ``{notebook-times}``: for each page of the book, its reading time (its words at
  ``WORDS_PER_MINUTE``) and, for a notebook, its execution time measured by
  ``python coursework/build.py --time-notebooks`` (``coursework/notebook_times.csv``).

Both are regenerated at every build from the sources, so the guide cannot drift from them.
``reading_minutes`` and ``learning_goals`` are the same computations as plain data, used by
``tests/test_exercise_index.py``.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from exercise_index import collect
from traceability import ROOT, chapters, page_title, rebuild_every_time, table, toc_pages, xref

#: Reading speed for mathematical prose: a third of the 200-250 words a minute of plain text,
#: since a reader works through the displays and checks the steps.
WORDS_PER_MINUTE = 75
TIMES_FILE = ROOT / "coursework" / "notebook_times.csv"
_GOALS = re.compile(
    r"^\*\*Learning goals\.\*\*[^\n]*\n\n(?P<items>(?:(?:\d+\.| {3})[^\n]*\n)+)", re.M
)
_CODE_CELL = re.compile(r"^```\{code-cell\}.*?^```[ \t]*$", re.M | re.S)
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)


def reading_minutes(docname: str, root: Path = ROOT) -> float:
    """Minutes to read a page: its words outside code cells and front matter, at
    ``WORDS_PER_MINUTE``."""
    text = (root / f"{docname}.md").read_text(encoding="utf-8")
    prose = _CODE_CELL.sub("", _FRONT_MATTER.sub("", text))
    return len(prose.split()) / WORDS_PER_MINUTE


def learning_goals(chapter: str, root: Path = ROOT) -> str:
    """The numbered list of a chapter's learning goals (MyST), its relative ``{doc}`` links made
    absolute; ``""`` when the page has none."""
    path = root / f"{chapter}.md"
    match = _GOALS.search(path.read_text(encoding="utf-8")) if path.exists() else None
    if not match:
        return ""
    folder = chapter.rsplit("/", 1)[0]
    return re.sub(r"\{doc\}`(?!/)([^`<]+)`", rf"{{doc}}`/{folder}/\1`", match["items"])


def measured_seconds(path: Path = TIMES_FILE) -> dict[str, float]:
    """The execution time of each notebook (docname -> seconds) of the last measurement."""
    if not path.exists():
        return {}
    with path.open(encoding="utf-8") as f:
        return {row["notebook"]: float(row["seconds"]) for row in csv.DictReader(f)}


def setup(app):
    from docutils import nodes
    from docutils.statemachine import StringList
    from sphinx.util.docutils import SphinxDirective

    class LearningGoals(SphinxDirective):
        """One rubric per chapter: its learning goals, then its exercises."""

        def run(self):
            out = []
            chapter_of = chapters()
            exercises = collect()
            for chapter in dict.fromkeys(chapter_of[d] for d in toc_pages()):
                goals = learning_goals(chapter)
                if not goals:
                    continue
                out.append(nodes.rubric("", "", xref("std", "doc", "/" + chapter)))
                container = nodes.container()
                self.state.nested_parse(
                    StringList(goals.splitlines()), self.content_offset, container
                )
                out += container.children
                para = nodes.paragraph(text="Exercises of the chapter: ")
                for i, e in enumerate(e for e in exercises if e.chapter == chapter):
                    para += nodes.Text(", " if i else "")
                    para += xref("std", "numref", e.label)
                    para += nodes.Text(f" ({e.kind}, {e.difficulty})")
                para += nodes.Text(".")
                out.append(para)
            return out

    class NotebookTimes(SphinxDirective):
        """A table: each page of each chapter, its reading time and its execution time."""

        def run(self):
            seconds = measured_seconds()
            chapter_of = chapters()
            rows = []
            total_read = total_run = 0.0
            for docname in toc_pages():
                chapter = chapter_of.get(docname, docname)
                if not learning_goals(chapter):
                    continue  # front and back matter, the API reference: not chapters
                minutes, run = reading_minutes(docname), seconds.get(docname)
                total_read += minutes
                total_run += run or 0.0
                rows.append(
                    [
                        xref("std", "doc", "/" + docname, page_title(docname)),
                        f"{minutes:.0f}",
                        "-" if run is None else f"{run:.0f}",
                    ]
                )
            rows.append(["All chapters", f"{total_read:.0f}", f"{total_run:.0f}"])
            headers = ["Page", "Reading (min)", "Running (s)"]
            return [table(headers, rows, (60, 20, 20), "notebook-times")]

    app.add_directive("learning-goals", LearningGoals)
    app.add_directive("notebook-times", NotebookTimes)
    rebuild_every_time(app, "/instructor")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
