"""The student edition holds no solution of the real book, and nothing leads to one.

Every ``{solution}`` of the book's sources is cut into fragments a reader would recognise: its
sentences and clauses, its formulas, its lines of code (each long enough to be its own, and
found nowhere else in the book's text). Each fragment must be absent

- from every file of the installed library, ``token_dynamics`` (the package a student
  installs: the checks of ``token_dynamics.exercises`` hold no worked answer); this needs no
  build;
- from every file under ``_build/student/`` (every page of the site, its search index, and what
  the build left beside it: no executed notebook survives there), and, so that the check can
  fail, present in the full edition. The search index is checked word by word: a word that
  only solutions use is not a search term of the student edition.

The site checks need both editions built (``make build``; ``make site`` runs this file after
it). The student site has every page of the table of contents but the instructor's guide, and
none of them points to what holds the answers (the repository, the answer keys, the problem
sets' solutions).
"""

from __future__ import annotations

import ast
import html
import importlib.util
import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml

import token_dynamics

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "_build" / "html"
STUDENT = ROOT / "_build" / "student"
_spec = importlib.util.spec_from_file_location(
    "plain_notebook", ROOT / "tools" / "plain_notebook.py"
)
plain_notebook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plain_notebook)
_spec = importlib.util.spec_from_file_location(
    "student_config", ROOT / "tools" / "student_config.py"
)
student_config = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(student_config)

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
# code in a solution: a fenced block, or an indented block after a blank line
_CODE = re.compile(
    r"^(`{3,}|~{3,})[^\n]*\n(?P<fenced>.*?)^\1[ \t]*$|(?:\A|\n)\n(?P<indented>(?: {4}[^\n]*\n?)+)",
    re.M | re.S,
)
#: What leads a student to the answers: each is in the full edition and in no student page (the
#: repository holds the solutions: the checks page's sentence on links to it is the full
#: edition's only).
LEADS = (
    "has its solution folded below it",
    "answer key",
    "make coursework",
    "autograder",
    "Each test links to its line in the repository",
)
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
    for match in _CODE.finditer(solution):
        code = textwrap.dedent(match["fenced"] or match["indented"] or "")
        pieces = [line.split("  #")[0] for line in code.splitlines()]  # without comments
        pieces += calls(code)
        found |= {_squash(p) for p in pieces if len(_squash(p)) >= MIN_FRAGMENT}
    prose = _MATH.sub("\0", _CODE.sub("\n\n", solution))
    for piece in re.split(r"\0", _BREAK.sub("\0", prose)):
        piece = _squash(piece).strip(" ,;:.")
        if len(piece) >= MIN_FRAGMENT:
            found.add(piece)
    return found


def _numbers(node: ast.AST) -> bool:
    """Whether `node` holds a number of its own (not one inside a call it makes)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    return not isinstance(node, ast.Call) and any(map(_numbers, ast.iter_child_nodes(node)))


def calls(code: str) -> list[str]:
    """Each call of a block of code that passes numbers of its own (the exercise's data), as
    written and without its module (``td.integrate(...)`` and ``integrate(...)``): a renamed
    copy of a solution still makes its calls. ``td.Softmax(np.eye(2), np.eye(2))`` passes none:
    an idiom of every page, not an answer."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
        text = ast.get_source_segment(code, node)
        if text and any(map(_numbers, arguments)):
            found.append(text)
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                found.append(text.removeprefix(node.func.value.id + "."))
    return found


_BEGIN_SOLUTION = re.compile(r"^\s*# BEGIN SOLUTION( NO PROMPT)?\s*$")
_END_SOLUTION = re.compile(r"^\s*# END SOLUTION\s*$")
_MARKER = re.compile(r"^\s*(?:#|\"\"\") ?(?:BEGIN|END) |^\s*(?:`{3,}|:{3,})")


def coursework_solutions(root: Path = ROOT / "coursework") -> tuple[list[set[str]], str]:
    """(the code lines and calls of each solution block of the problem sets, the sets' text
    without them). A block runs from ``# BEGIN SOLUTION`` to its ``# END SOLUTION``
    (otter-grader's markers, nested in a code cell or around cells)."""
    blocks, rest = [], []
    for path in sorted(root.glob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        starts, inside = [], [False] * len(lines)
        for i, line in enumerate(lines):
            if _BEGIN_SOLUTION.match(line):
                starts.append(i)
            elif _END_SOLUTION.match(line) and starts:
                start = starts.pop()
                inside[start : i + 1] = [True] * (i + 1 - start)
                blocks.append(lines[start + 1 : i])
        rest += [line for line, hidden in zip(lines, inside, strict=True) if not hidden]
    per_block = []
    for block in blocks:
        code = textwrap.dedent("\n".join(line for line in block if not _MARKER.match(line)))
        pieces = [line.split("  #")[0] for line in code.splitlines()] + calls(code)
        per_block.append({_squash(p) for p in pieces if len(_squash(p)) >= MIN_FRAGMENT})
    return per_block, _squash("\n".join(rest))


def leaks(per_solution: list[set[str]], files: dict[str, str]) -> dict[str, list[str]]:
    """file -> the fragments of solutions found in its text (files without any left out)."""
    fragments_ = sorted({f for found in per_solution for f in found})
    found = {name: [f for f in fragments_ if f in text] for name, text in files.items()}
    return {name: hits for name, hits in found.items() if hits}


def library_files() -> dict[str, str]:
    """Every .py file of the installed package, as a student's ``inspect.getsource`` reads it."""
    package = Path(token_dynamics.__file__).parent
    return {
        str(path.relative_to(package.parent)): _squash(html.unescape(path.read_text("utf-8")))
        for path in sorted(package.rglob("*.py"))
    }


def toc_pages(toc: dict | None = None) -> list[str]:
    """The docnames of `toc` (by default `_toc.yml`), globs expanded, in reading order."""
    toc = toc or yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    found = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                found.append(entry["file"])
            if "glob" in entry:
                found.extend(
                    sorted(
                        p.relative_to(ROOT).with_suffix("").as_posix()
                        for p in ROOT.glob(entry["glob"] + ".*")
                    )
                )
            for key in ("parts", "chapters", "sections"):
                walk(entry.get(key))

    walk(toc.get("parts"))
    walk(toc.get("chapters"))
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
    without its solutions)."""
    pages = [p.read_text(encoding="utf-8") for p in book_sources()]
    shared = _squash(html.unescape("\n".join(without_solutions(t) for t in pages)))
    bodies = [body for text in pages for body in solutions(text)]
    per_solution = [{f for f in fragments(body) if f not in shared} for body in bodies]
    prose = " ".join(_MATH.sub(" ", body) for body in bodies)
    return per_solution, {w.lower() for w in _WORD.findall(prose)}, shared


def test_no_solution_in_the_library(book):
    """No sentence, formula or line of code of a solution is in the package a student
    installs (``inspect.getsource`` shows all of it)."""
    per_solution, _words, _shared = book
    files = library_files()
    assert "token_dynamics/exercises.py" in files and len(files) >= 50, sorted(files)
    # the control: the same scan finds a solution copied into a module
    planted = [found for found in per_solution if found]
    for found in planted:
        assert leaks([found], {"planted.py": _squash(" ".join(found))})
    found = leaks(per_solution, files)
    print(
        f"library: {sum(map(len, per_solution))} fragments of {len(per_solution)} solutions, "
        f"{len(files)} files of {Path(token_dynamics.__file__).parent}: {len(found)} leaks"
    )
    assert not found, f"solution text in the installed library: {found}"


def test_no_problem_set_answer_in_the_library(book):
    """The problem sets' answers live in the instructor notebooks of ``coursework/`` only:
    no line of code or call of a solution block is in the installed library."""
    _per_solution, _words, shared = book
    blocks, rest = coursework_solutions()
    per_block = [{f for f in found if f not in rest and f not in shared} for found in blocks]
    assert len(blocks) >= 12 and sum(map(len, per_block)) >= 40, "solution blocks not found"
    for found in filter(None, per_block):  # the control, as for the book's solutions
        assert leaks([found], {"planted.py": _squash(" ".join(found))})
    found = leaks(per_block, library_files())
    assert not found, f"problem-set answers in the installed library: {found}"


def test_the_student_table_of_contents_leaves_out_the_staff_pages():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = toc_pages(toc)
    assert set(student_config.STAFF_PAGES) <= set(pages)
    student = toc_pages(student_config.student_toc(toc))
    assert student == [d for d in pages if d not in student_config.STAFF_PAGES]


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
    # every page of the table of contents but the staff's is built, so every page is scanned
    pages = [d for d in toc_pages() if d not in student_config.STAFF_PAGES]
    unbuilt = [d for d in pages if not (STUDENT / "html" / f"{d}.html").exists()]
    assert len(pages) >= 40 and not unbuilt, f"pages missing from the student edition: {unbuilt}"
    found = leaks(per_solution, {str(p.relative_to(STUDENT)): t for p, t in student_files.items()})
    print(
        f"student edition: {len(per_solution)} solutions, {len(checked)} fragments "
        f"({untracked} solutions too short to have one of their own), "
        f"{len(student_files)} files scanned under {STUDENT.relative_to(ROOT)}: "
        f"{len(found)} leaks"
    )
    assert untracked <= len(per_solution) // 10, "most solutions must be checked"
    assert not found, f"solution text published in the student edition: {found}"


def test_no_solution_word_in_the_student_search_index(sites, book):
    full, student = sites
    from sphinx.search.en import SearchEnglish

    stem = SearchEnglish({}).stem
    _per_solution, words, shared = book
    # the words of the book outside its solutions, and of the library's docstrings, which the
    # API reference shows
    elsewhere = " ".join([shared, *library_files().values()]).lower()
    # by stem, as the index has them: "nonnegative" of a solution and "nonnegativity" of a
    # theorem are one search term
    stems = {stem(w) for w in words} - {stem(w) for w in re.findall(r"[a-z]+", elsewhere)}
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
    sources hold the solutions) nor to Binder (which opens them); no sentence that promises
    solutions or points to the answer keys; no page for the course staff (the instructor's
    guide)."""
    full, student = sites
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
    full_text = " ".join(site_text(p) for p in full.rglob("*.html"))
    assert all(lead in full_text for lead in LEADS), "the full edition has each (control)"
    pointers = {
        str(p.relative_to(student)): lead
        for p in student.rglob("*.html")
        for lead in LEADS
        if lead in site_text(p)
    }
    assert not pointers, f"student pages pointing to the answers: {pointers}"
    staff = [p for p in student_config.STAFF_PAGES if list(STUDENT.rglob(Path(p).name + ".*"))]
    assert not staff, f"pages for the course staff in the student edition: {staff}"
    assert all((full / f"{page}.html").exists() for page in student_config.STAFF_PAGES)
