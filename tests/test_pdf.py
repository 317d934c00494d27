"""The whole-book PDF (`make pdf`, `tools/book_pdf.py`): every page of the table of contents in
its order, the chapter titles, the numbered statements with their titles, typeset maths, the
figures and the bibliography; and the student edition's PDF carries no solution.

The whole-book test prints the site that `make build` left in `_build/html` (it fails with that
instruction when there is none, rather than skip); `make test` runs this module after the build.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .helpers import (
    EXERCISE,
    GOOD_NOTEBOOK,
    ROOT,
    build_book,
    load_tool,
    make_book,
    student_config,
)

HTML = ROOT / "_build" / "html"
book_pdf = load_tool("book_pdf")
# statement kinds whose titles are sampled, as sphinx-proof prints them ("Theorem 3.2 (Title)")
SAMPLED_KINDS = ("theorem", "proposition", "lemma", "corollary")
STATEMENT = re.compile(r"^`{3,4}\{prf:(" + "|".join(SAMPLED_KINDS) + r")\} *(.+)$", re.MULTILINE)


def pdf_text(path: Path) -> str:
    """The text of the PDF at `path` (poppler's ``pdftotext``), every run of white space one
    space, so that a title broken over two lines is still found."""
    text = subprocess.run(
        ["pdftotext", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout
    return " ".join(text.split())


def squeeze(text: str) -> str:
    """`text` without white space, with typographic quotes as plain ones."""
    return "".join(text.translate(str.maketrans("‘’“”", "''\"\"")).split())


def toc_pages() -> list[str]:
    """The pages of `_toc.yml` in reading order, as paths of the built site (``book/x.html``)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries:
            if "file" in entry:
                pages.append(entry["file"])
            else:  # a glob, expanded in name order as Sphinx does
                found = sorted(ROOT.glob(entry["glob"] + ".*"))
                pages.extend(str(p.relative_to(ROOT).with_suffix("")) for p in found)
            walk(entry.get("sections", []))

    for part in toc["parts"]:
        walk(part["chapters"])
    return [f"{page}.html" for page in pages]


def chapter_titles() -> list[str]:
    """The `# Title` of every chapter's theory page."""
    titles = []
    for theory in sorted((ROOT / "book").glob("*/theory.md")):
        heading = re.search(r"^# (.+)$", theory.read_text(encoding="utf-8"), re.MULTILINE)
        titles.append(heading.group(1).strip())
    return titles


def statement_titles() -> list[tuple[str, str]]:
    """``(Kind, title)`` of every sampled statement whose title is plain text (no maths)."""
    found = []
    for page in sorted((ROOT / "book").rglob("*.md")):
        for kind, title in STATEMENT.findall(page.read_text(encoding="utf-8")):
            if not re.search(r"[$\\{`]", title):
                found.append((kind.capitalize(), title.strip()))
    return found


def require_tools():
    missing = [t for t in ("pdftotext", "pdfinfo", "pdfunite", "pdfimages") if not shutil.which(t)]
    if missing:
        pytest.fail(f"{missing} missing: run `make poppler` (Debian's poppler-utils)")
    if not book_pdf.CHROMIUM.exists():
        pytest.fail(f"no Chromium at {book_pdf.CHROMIUM}: run `make chromium`")


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    """The site of `make build` printed once: the PDF's path, its pages, its text."""
    require_tools()
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built site at {HTML}: run `make build` first")
    out = tmp_path_factory.mktemp("pdf") / "token-dynamics.pdf"
    printed = book_pdf.print_book(HTML, out)
    return out, printed, pdf_text(out)


@pytest.mark.slow
def test_every_page_in_toc_order_and_the_page_count(book):
    out, printed, _ = book
    assert [page for page, _ in printed] == toc_pages()
    # each page of the site starts a page of the PDF, and pdfunite joins them without loss
    assert all(count >= 1 for _, count in printed), printed
    assert book_pdf.pdf_pages(out) == sum(count for _, count in printed)


@pytest.mark.slow
def test_chapter_titles_and_numbered_statements(book):
    _, _, text = book
    missing = [title for title in chapter_titles() if title not in text]
    assert not missing, f"chapter titles not in the PDF: {missing}"
    statements = statement_titles()
    assert len(statements) >= 10, statements  # the sample is the book's, not a handful
    # compared without white space (a line may break after a dash) and with typographic quotes
    # made plain, as the site prints the title's apostrophes
    flat = squeeze(text)
    missing = [
        f"{kind} ({title})"
        for kind, title in statements
        if not re.search(rf"{kind}\d+\.\d+\({re.escape(squeeze(title))}\)", flat)
    ]
    assert not missing, f"statements without their number in the PDF: {missing}"


@pytest.mark.slow
def test_maths_typeset_figures_and_bibliography(book):
    out, _, text = book
    # MathJax ran on every page: none of the delimiters \( \) \[ \] that Sphinx writes around
    # the prose's maths is left as text (TeX commands do occur as text: in code cells' labels)
    raw = sorted(set(re.findall(r"\\[()[\]]", text)))
    assert not raw, f"untypeset maths in the PDF: {raw}"
    images = subprocess.run(
        ["pdfimages", "-list", str(out)], capture_output=True, text=True, check=True
    ).stdout.splitlines()[2:]  # two header lines
    # every figure of the site (each PNG under _images) is printed at least once
    figures = len(list((HTML / "_images").glob("*.png")))
    assert len(images) >= figures > 0, (len(images), figures)
    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    titles = re.findall(r"^\s*title\s*=\s*\{(.+)\},?\s*$", bib, re.MULTILINE)
    assert titles
    # the first words of each title, in any case (the bibliography style lowercases titles)
    lowered = text.lower()
    missing = [
        t for t in titles if " ".join(re.sub(r"[{}]", "", t).lower().split()[:4]) not in lowered
    ]
    assert not missing, f"bibliography entries not in the PDF: {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("edition", ["full", "student"])
def test_student_edition_pdf_carries_no_solution(tmp_path, edition):
    """The fixture book's exercise is printed in both editions; its solution (unfolded) only in
    the full one."""
    require_tools()
    book_dir = make_book(tmp_path, {"book/nb.md": GOOD_NOTEBOOK + EXERCISE})
    options = ("--config", str(student_config(book_dir))) if edition == "student" else ()
    result = build_book(book_dir, *options)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = tmp_path / "book.pdf"
    book_pdf.print_book(book_dir / "_build" / "html", out)
    text = pdf_text(out)
    assert "Compute two plus two" in text
    assert ("SOLUTION-TEXT-4" in text) == (edition == "full")


@pytest.mark.slow
def test_no_markup_and_no_test_machinery_in_the_pdf_text(book):
    """The PDF's text shows no unrendered MyST and no test suite (``tests/reader_text.py``)
    beyond what the site shows as code: each such string occurs in the PDF at most as often as
    in the code of the site's pages (the checks page's ``@pytest.mark.statement``, the API
    reference's roles), so one left in the prose of any page makes it fail."""
    from collections import Counter

    from .reader_text import MYST, TOOLING, pages, visible_text

    def found(text: str) -> Counter:
        # test names and files are left to tests/test_reader_text.py (on the pages printed
        # here): the PDF breaks the checks page's long names anywhere, into pieces that match
        keys = (m.group(0).strip() for pattern in (MYST, TOOLING) for m in pattern.finditer(text))
        return Counter(k for k in keys if not re.match(r"(?:::)?test_", k))

    in_code = Counter()
    for page in pages(HTML):
        in_code += found(visible_text(page.read_text(encoding="utf-8", errors="replace"))[1])
    in_pdf = found(book[2])
    extra = {s: n - in_code[s] for s, n in in_pdf.items() if n > in_code[s]}
    assert not extra, f"MyST markup or the test suite in the PDF's text, beyond the code: {extra}"
