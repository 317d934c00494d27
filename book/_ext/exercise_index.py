"""Sphinx extension: the index of every exercise of the book, by chapter.

An exercise is a sphinx-exercise directive with its title on the directive line, a ``:label:``
and a ``:class:`` option that gives its kind and difficulty::

    ```{exercise} How many clusters?
    :label: tok-ex-clusters
    :class: kind-computation difficulty-easy

The directive ``{exercise-index}`` renders one table per chapter (number, title, kind,
difficulty) and a line of counts; ``collect()`` is the same scan as plain data, used by
``tests/test_exercise_index.py``. The build regenerates the index from the sources, so it cannot
drift from them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from traceability import (
    ROOT,
    chapters,
    rebuild_every_time,
    table,
    toc_pages,
    with_maths,
    xref,
)

KINDS = ("proof", "derivation", "computation")
DIFFICULTIES = ("easy", "medium", "hard")
# ```{exercise} Title   (backtick or colon fences, any length >= 3), then its options
_EXERCISE = re.compile(
    r"^(?:`{3,}|:{3,})\{exercise\}[ \t]*(?P<title>[^\n]*)\n"
    r"(?P<options>(?:[ \t]*:[a-z_-]+:[^\n]*\n)*)",
    re.MULTILINE,
)
_OPTION = re.compile(r"^[ \t]*:(?P<name>[a-z_-]+):[ \t]*(?P<value>[^\n]*)$", re.MULTILINE)


@dataclass(frozen=True)
class Exercise:
    label: str
    title: str
    kind: str | None
    difficulty: str | None
    docname: str
    chapter: str


def _tagged(classes: list[str], prefix: str, allowed: tuple[str, ...]) -> str | None:
    """The one value of `classes` tagged ``prefix-<value>`` (None when absent or unknown)."""
    found = [c.removeprefix(prefix) for c in classes if c.startswith(prefix)]
    return found[0] if len(found) == 1 and found[0] in allowed else None


def collect(root: Path = ROOT) -> list[Exercise]:
    """Every exercise of the pages of `_toc.yml`, in reading order.

    An exercise without a label, a kind or a difficulty is returned with ``None`` there (the
    test of the index refuses it); its title is ``""`` when the directive line has none.
    """
    chapter_of = chapters(root / "_toc.yml")
    found = []
    for docname in toc_pages(root / "_toc.yml"):
        path = root / f"{docname}.md"
        if not path.exists():
            continue
        for match in _EXERCISE.finditer(path.read_text(encoding="utf-8")):
            options = {m["name"]: m["value"].strip() for m in _OPTION.finditer(match["options"])}
            classes = options.get("class", "").split()
            found.append(
                Exercise(
                    label=options.get("label"),
                    title=match["title"].strip(),
                    kind=_tagged(classes, "kind-", KINDS),
                    difficulty=_tagged(classes, "difficulty-", DIFFICULTIES),
                    docname=docname,
                    chapter=chapter_of.get(docname, docname),
                )
            )
    return found


def setup(app):
    from docutils import nodes
    from sphinx.util.docutils import SphinxDirective

    class ExerciseIndex(SphinxDirective):
        """Render the exercise index: one rubric and one table per chapter."""

        def run(self):
            exercises = collect()
            counts = ", ".join(
                f"{sum(e.kind == kind for e in exercises)} {kind}s" for kind in KINDS
            )
            out = [nodes.paragraph(text=f"{len(exercises)} exercises: {counts}.")]
            by_chapter: dict[str, list[Exercise]] = {}
            for exercise in exercises:
                by_chapter.setdefault(exercise.chapter, []).append(exercise)
            for chapter, rows in by_chapter.items():
                out.append(nodes.rubric("", "", xref("std", "doc", "/" + chapter)))
                cells = [
                    [
                        xref("std", "numref", e.label),
                        nodes.paragraph("", "", *with_maths(e.title)),
                        e.kind or "?",
                        e.difficulty or "?",
                    ]
                    for e in rows
                ]
                headers = ["Exercise", "Title", "Kind", "Difficulty"]
                out.append(table(headers, cells, (20, 50, 15, 15), "exercise-index"))
            return out

    app.add_directive("exercise-index", ExerciseIndex)
    rebuild_every_time(app, "/exercises")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
