"""The student edition holds: no solution of the real book is anywhere in it.

Needs both editions built (``make build``; ``make site`` runs this file after it). Every
``{solution}`` of the book's sources is cut into fragments a reader would recognise: its
sentences and clauses, its formulas, its lines of code (each long enough to be its own, and
found nowhere else in the book's text or the library). Each fragment must be absent from every
file under ``_build/student/`` (the site, its search index, and what the build left beside it:
no executed notebook survives there), and, so that the check can fail, present in the full
edition. The search index is checked word by word: a word that only solutions use is not a
search term of the student edition.
"""

from __future__ import annotations

import html
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "_build" / "html"
STUDENT = ROOT / "_build" / "student"
_spec = importlib.util.spec_from_file_location(
    "plain_notebook", ROOT / "tools" / "plain_notebook.py"
)
plain_notebook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plain_notebook)

#: A fragment shorter than this could be any sentence of the book ("by Theorem 3.2, ...").
MIN_FRAGMENT = 24
#: A formula shorter than this ($x_i$, $t \to \infty$) is common to many pages.
MIN_FORMULA = 16
_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+)\$", re.DOTALL)
# What the rendered page does not show as such, so a fragment stops there: roles, Markdown
# emphasis and code marks, quotes (made typographic), list and heading marks, fences.
_BREAK = re.compile(
    r"\{[\w:-]+\}`[^`]*`|\n\s*\n|\n\s*(?:[-*+]|\d+\.)\s|[*`_\"'\[\]<>&|#~]|--|\.\.\.|\n\s*:\w+:"
)
_TAG = re.compile(r"<[^>]*>")
_WORD = re.compile(r"[A-Za-z]{5,}")


def _squash(text: str) -> str:
    return " ".join(text.split())


def book_sources() -> list[Path]:
    book = ROOT / "book"
    return sorted(p for p in book.rglob("*.md") if "_ext" not in p.parts)


def solutions(text: str) -> list[str]:
    """The bodies of the ``{solution}`` directives of a page (also nested ones, and the text
    between ``{solution-start}`` and ``{solution-end}``)."""
    found, start = [], None
    for begin, end, name, _arg, _options, body in plain_notebook.directives(text):
        if name == "solution":
            found.append(body)
        elif name == "solution-start":
            start = end
        elif name == "solution-end" and start is not None:
            found.append(text[start:begin])
            start = None
        else:
            found += solutions(body)
    return found


def without_solutions(text: str) -> str:
    for body in solutions(text):
        text = text.replace(body, "\n\n")
    return text


def fragments(solution: str) -> set[str]:
    """The sentences, clauses, formulas and code lines of a solution, whitespace squashed."""
    found = {_squash(m[1] or m[2]) for m in _MATH.finditer(solution)}
    found = {f for f in found if len(f) >= MIN_FORMULA}
    prose = _MATH.sub("\0", solution)
    for piece in re.split(r"\0", _BREAK.sub("\0", prose)):
        piece = _squash(piece).strip(" ,;:.")
        if len(piece) >= MIN_FRAGMENT:
            found.add(piece)
    return found


def site_text(path: Path) -> str:
    text = path.read_bytes().decode("utf-8", errors="ignore")
    if path.suffix == ".html":
        text = _TAG.sub("", text)
    return _squash(html.unescape(text))


def search_terms(site: Path) -> set[str]:
    index = (site / "searchindex.js").read_text(encoding="utf-8")
    data = json.loads(index[index.index("(") + 1 : index.rindex(")")])
    return set(data["terms"])


@pytest.fixture(scope="module")
def sites():
    for site in (FULL, STUDENT / "html"):
        if not (site / "index.html").exists():
            pytest.fail(f"no built site at {site}: run `make build` first")
    return FULL, STUDENT / "html"


@pytest.fixture(scope="module")
def book():
    """(fragments specific to each solution, the words of the solutions, the book's text
    without its solutions and the library's source)."""
    pages = [p.read_text(encoding="utf-8") for p in book_sources()]
    library = [p.read_text(encoding="utf-8") for p in (ROOT / "src").rglob("*.py")]
    shared = _squash(html.unescape("\n".join([without_solutions(t) for t in pages] + library)))
    bodies = [body for text in pages for body in solutions(text)]
    per_solution = [{f for f in fragments(body) if f not in shared} for body in bodies]
    prose = " ".join(_MATH.sub(" ", body) for body in bodies)
    return per_solution, {w.lower() for w in _WORD.findall(prose)}, shared


def test_no_solution_in_the_student_edition(sites, book):
    full, _student = sites
    per_solution, _words, _shared = book
    assert len(per_solution) >= 40, "the book's solutions were not found in its sources"
    full_files = [site_text(p) for p in full.rglob("*") if p.is_file()]
    student_files = {p: site_text(p) for p in STUDENT.rglob("*") if p.is_file()}
    checked = [f for found in per_solution for f in found]
    # the control: the check can fail, since each fragment is found in the full edition
    missing = [f for f in checked if not any(f in text for text in full_files)]
    assert not missing, f"fragments not found in the full edition (extraction broken): {missing}"
    untracked = sum(1 for found in per_solution if not found)
    leaks = {
        str(path.relative_to(STUDENT)): fragment
        for fragment in checked
        for path, text in student_files.items()
        if fragment in text
    }
    print(
        f"student edition: {len(per_solution)} solutions, {len(checked)} fragments "
        f"({untracked} solutions too short to have one of their own), "
        f"{len(student_files)} files scanned under {STUDENT.relative_to(ROOT)}: "
        f"{len(leaks)} leaks"
    )
    assert untracked <= len(per_solution) // 10, "most solutions must be checked"
    assert not leaks, f"solution text published in the student edition: {leaks}"


def test_no_solution_word_in_the_student_search_index(sites, book):
    full, student = sites
    from sphinx.search.en import SearchEnglish

    stem = SearchEnglish({}).stem
    _per_solution, words, shared = book
    # by stem, as the index has them: "nonnegative" of a solution and "nonnegativity" of a
    # theorem are one search term
    stems = {stem(w) for w in words} - {stem(w) for w in re.findall(r"[a-z]+", shared.lower())}
    full_terms, student_terms = search_terms(full), search_terms(student)
    indexed = stems & full_terms
    print(
        f"search index: {len(stems)} word stems used only by solutions, {len(indexed)} of them "
        f"search terms of the full edition, {len(indexed & student_terms)} of the student one"
    )
    assert indexed, "no solution-only word in the full edition's index (check broken)"
    assert not indexed & student_terms, sorted(indexed & student_terms)


def test_nothing_leads_to_the_solutions(sites):
    """No page sources, notebooks or executed notebooks; no link to the repository (its
    sources hold the solutions) nor to Binder (which opens them)."""
    _full, student = sites
    import yaml

    repository = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"][
        "url"
    ]
    kept = [
        str(p.relative_to(STUDENT))
        for p in STUDENT.rglob("*")
        if p.suffix == ".ipynb"
        or (p.suffix == ".md" and "_static" not in p.parts)  # _static: vendored assets
        or "_sources" in p.parts
        or "jupyter_execute" in p.parts
    ]
    assert not kept, f"the student build keeps sources or notebooks: {kept}"
    links = {
        str(p.relative_to(student)): needle
        for p in student.rglob("*.html")
        for needle in (repository, "mybinder.org", "binderhub", "_sources/")
        if needle in p.read_text(encoding="utf-8")
    }
    assert not links, f"student pages linking to what holds the solutions: {links}"
    intro = site_text(student / "book" / "intro.html")
    assert "This is the student edition" in intro and "Clone the repository" not in intro
