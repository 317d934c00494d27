"""The exercise index (`book/_ext/exercise_index.py`, rendered on `book/exercises.md`): every
exercise of the book is found, titled on its directive line, labelled, and tagged with one kind
and one difficulty; the scan finds exactly the exercises of the sources.
"""

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "book" / "_ext"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


_load("traceability")
exercise_index = _load("exercise_index")
EXERCISES = exercise_index.collect()


def test_every_exercise_of_the_sources_is_indexed():
    # an independent count: every exercise directive of every page under book/
    in_sources = sum(
        len(re.findall(r"^(?:`{3,}|:{3,})\{exercise\}", p.read_text(encoding="utf-8"), re.M))
        for p in (ROOT / "book").rglob("*.md")
        if not any(part.startswith((".", "_")) for part in p.relative_to(ROOT / "book").parts)
    )
    assert len(EXERCISES) == in_sources >= 40
    labels = [e.label for e in EXERCISES]
    assert None not in labels and len(set(labels)) == len(labels), "labels are unique"


def test_every_exercise_has_a_title_a_kind_and_a_difficulty():
    untitled = [e.label for e in EXERCISES if not e.title]
    assert not untitled, f"exercises without a title on the directive line: {untitled}"
    untagged = [e.label for e in EXERCISES if e.kind is None or e.difficulty is None]
    assert not untagged, (
        "give each exercise `:class: kind-<proof|derivation|computation> "
        f"difficulty-<easy|medium|hard>`: {untagged}"
    )
    kinds = {e.kind for e in EXERCISES}
    assert kinds == set(exercise_index.KINDS), kinds


def test_exercises_follow_the_table_of_contents(tmp_path):
    """A page is read in the order of `_toc.yml`, and its chapter is the theory page above it."""
    order = exercise_index.toc_pages()
    positions = [order.index(e.docname) for e in EXERCISES]
    assert positions == sorted(positions)
    particles = [e for e in EXERCISES if e.docname == "book/tokens/particles"]
    assert particles and all(e.chapter == "book/tokens/theory" for e in particles)


def test_a_missing_title_or_tag_is_reported(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nchapters:\n  - file: book/page\n", encoding="utf-8"
    )
    (tmp_path / "book" / "intro.md").write_text("# Intro\n", encoding="utf-8")
    (tmp_path / "book" / "page.md").write_text(
        "# Page\n\n```{exercise}\n:label: bare\n\nText.\n```\n\n"
        "````{exercise} Titled\n:label: tagged\n"
        ":class: kind-proof difficulty-hard\n\nText.\n````\n",
        encoding="utf-8",
    )
    bare, tagged = exercise_index.collect(tmp_path)
    assert (bare.label, bare.title, bare.kind, bare.difficulty) == ("bare", "", None, None)
    assert (tagged.title, tagged.kind, tagged.difficulty) == ("Titled", "proof", "hard")
