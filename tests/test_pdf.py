"""The book's PDF (`make pdf`, `tools/book_pdf.py`): a title page with the published site's
address and a contents page with the page numbers, an outline of parts, chapters and sections
in the order of `_toc.yml`, the metadata, running page numbers, every page of the table of
contents but the API reference in its order, the chapter titles, the numbered statements with
their titles, typeset maths, the figures and the bibliography, links that stay inside the PDF
(those to the API reference lead to the published site), no formula too wide for the printed
line (display or inline), no page that ends with a heading and no page left blank; the API
reference printed apart (`--api only`); the student edition's PDF carries no solution and no
address; and the print layout of `tools/book_pdf.py` (PRINT_LAYOUT) on a fixture book: wide
formulas scaled down or wrapped, one that cannot fit and an inline one wider than the line
reported, an animation printed as its first and last frames, an explorer's frame captioned with
its parameter values, headings kept with what follows them, a code cell almost a page tall
printed from the page of its heading, a long line of code that goes on at its indentation after
a mark, a tall code cell that breaks between its lines where a short one is kept whole, a tall
statement, folded box or table that breaks across pages rather than moving whole, a figure
shrunk into the room left above it (or moved whole when that room is too small), a picture
narrowed to the line in its own proportions.

The whole-book tests print the site that `make build` left in `_build/html` once (the module's
fixture `book`; it fails with that instruction when there is none, rather than skip); `make test`
runs this module after the build. The others build a small fixture book of their own.
"""

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from urllib.parse import urljoin

import pytest
import yaml
from pypdf import PdfReader

from .helpers import (
    API_PAGE,
    EXERCISE,
    GOOD_NOTEBOOK,
    NOTEBOOK_HEADER,
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
# the number sphinx-proof gives a statement in a numbered chapter, without white space
NUMBER = r"\d+\.\d+"
STATEMENT = re.compile(
    r"^`{3,4}\{prf:(" + "|".join(SAMPLED_KINDS) + r")\} *(.+)\n((?::\w+:.*\n)*)", re.MULTILINE
)


def pdf_text(path: Path) -> str:
    """The text of the PDF at `path` (poppler's ``pdftotext``), every run of white space one
    space, so that a title broken over two lines is still found."""
    return " ".join(page_texts(path).replace("\f", " ").split())


def page_texts(path: Path) -> str:
    """The text of the PDF at `path` as poppler's ``pdftotext`` writes it: a form feed after
    each page."""
    return subprocess.run(
        ["pdftotext", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout


def squeeze(text: str) -> str:
    """`text` without white space, with typographic quotes as plain ones."""
    return "".join(text.translate(str.maketrans("‘’“”", "''\"\"")).split())


def outline(reader: PdfReader) -> list:
    """The outline of `reader` as nested ``(title, page index, children)``."""

    def walk(items):
        tree = []
        for item in items:
            if isinstance(item, list):  # the children of the item before
                title, page, _ = tree[-1]
                tree[-1] = (title, page, walk(item))
            else:
                tree.append((item.title, reader.get_destination_page_number(item), []))
        return tree

    return walk(reader.outline)


def toc_tree() -> list[tuple[str | None, list]]:
    """`_toc.yml` as ``(part caption, [(file, [section files])])``, the root first with no part;
    a glob expanded in name order as Sphinx does."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))

    def files(entries):
        for entry in entries:
            if "file" in entry:
                yield entry["file"], list(files(entry.get("sections", [])))
            else:
                for found in sorted(ROOT.glob(entry["glob"] + ".*")):
                    yield str(found.relative_to(ROOT).with_suffix("")), []

    tree: list[tuple[str | None, list]] = [(None, [(toc["root"], [])])]
    for part in toc["parts"]:
        tree.append((part["caption"], list(files(part["chapters"]))))
    return tree


def without_api(tree):
    """`tree` (of `toc_tree`) without the pages of the API reference, which `make pdf` leaves
    out, and without a part left empty."""
    api = book_pdf.API.removesuffix(".html")
    kept = [
        (caption, [(f, s) for f, s in chapters if not f"{f}.html".startswith(api)])
        for caption, chapters in tree
    ]
    return [(caption, chapters) for caption, chapters in kept if chapters]


def toc_pages() -> list[str]:
    """The pages of `_toc.yml` in reading order, as paths of the built site (``book/x.html``)."""
    pages = []
    for _, chapters in toc_tree():
        for chapter, sections in chapters:
            pages.extend([chapter, *(section for section, _ in sections)])
    return [f"{page}.html" for page in pages]


def heading(page: str) -> str:
    """The `# Title` of the book's page `page` (``book/x``)."""
    text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
    return re.search(r"^# (.+)$", text, re.MULTILINE).group(1).strip()


def chapter_titles() -> list[str]:
    """The `# Title` of every chapter's theory page."""
    return [
        heading(str(p.relative_to(ROOT).with_suffix("")))
        for p in sorted(ROOT.glob("book/*/theory.md"))
    ]


def statement_titles() -> list[tuple[str, str, bool]]:
    """``(Kind, title, numbered)`` of every sampled statement whose title is plain text (no
    maths); ``numbered`` is false for a statement with ``:nonumber:`` among its options (one
    outside the numbered parts, which the site prints as "Proposition (Title)")."""
    found = []
    for page in sorted((ROOT / "book").rglob("*.md")):
        for match in STATEMENT.finditer(page.read_text(encoding="utf-8")):
            kind, title, options = match.groups()
            if not re.search(r"[$\\{`]", title):
                found.append((kind.capitalize(), title.strip(), ":nonumber:" not in options))
    return found


def require_tools():
    missing = [t for t in ("pdftotext", "pdfimages") if not shutil.which(t)]
    if missing:
        pytest.fail(f"{missing} missing: run `make poppler` (Debian's poppler-utils)")
    if not book_pdf.CHROMIUM.exists():
        pytest.fail(f"no Chromium at {book_pdf.CHROMIUM}: run `make chromium`")


@dataclass(frozen=True)
class Printed:
    """A PDF as the tests read it: its path, what `print_book` returned, its reader, the text of
    each page and the whole text on one line."""

    out: Path
    book: object  # book_pdf.Book
    reader: PdfReader
    pages: list[str]
    text: str


def read_pdf(out: Path, book) -> Printed:
    pages = page_texts(out).split("\f")[:-1]  # a form feed ends each page
    return Printed(out, book, PdfReader(out), pages, " ".join(" ".join(pages).split()))


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    """The site of `make build` printed once as `make pdf` prints it (no API reference)."""
    require_tools()
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built site at {HTML}: run `make build` first")
    out = tmp_path_factory.mktemp("pdf") / "token-dynamics.pdf"
    return read_pdf(out, book_pdf.print_book(HTML, out))


@pytest.mark.slow
def test_every_page_in_toc_order_and_the_page_count(book):
    expected = [page for page in toc_pages() if not page.startswith(book_pdf.API)]
    assert [page.path for page in book.book.printed] == expected
    assert len(expected) < len(toc_pages())  # the API reference is in the site, not the PDF
    # each page of the site starts a page of the PDF, numbered on from the one before, and the
    # title and contents come before them without loss
    assert all(page.pages >= 1 for page in book.book.printed), book.book.printed
    firsts = [page.first for page in book.book.printed]
    assert firsts == [1 + sum(p.pages for p in book.book.printed[:k]) for k in range(len(firsts))]
    assert len(book.reader.pages) == book.book.front + sum(p.pages for p in book.book.printed)


@pytest.mark.slow
def test_outline_parts_chapters_and_sections_in_toc_order(book):
    """Bookmarks: the contents, then each part of `_toc.yml` with its chapters and their
    sections, in order; each leads to the page where its title is printed."""
    tree = outline(book.reader)
    assert tree[0][:2] == ("Contents", 1)  # after the title page
    numbered = iter(range(1, 100))  # the chapters of the numbered parts, counted across parts
    config = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    is_numbered = {part["caption"]: bool(part.get("numbered")) for part in config["parts"]}
    expected = []  # (title, file, [(title, file, [])]) in the outline's shape
    for caption, chapters in without_api(toc_tree()):
        items = []
        for chapter, sections in chapters:
            number = f"{next(numbered)}. " if is_numbered.get(caption) else ""
            children = [(heading(s), s, []) for s, _ in sections]
            items.append((number + heading(chapter), chapter, children))
        expected.extend(items if caption is None else [(caption, None, items)])
    start = {page.path: book.book.front + page.first - 1 for page in book.book.printed}

    def shape(items):  # titles (the site prints typographic quotes) and nesting only
        return [(squeeze(title), shape(children)) for title, _, children in items]

    assert shape(tree[1:]) == shape(expected)

    def check(found, wanted):
        for (title, page, children), (_, file, kids) in zip(found, wanted, strict=True):
            if file is None:  # a part starts where its first chapter does
                assert page == start[f"{kids[0][1]}.html"], title
            else:
                assert page == start[f"{file}.html"], title
                printed_title = squeeze(book.pages[page])
                assert squeeze(heading(file)) in printed_title, (title, page)
            check(children, kids)

    check(tree[1:], expected)


@pytest.mark.slow
def test_title_page_contents_and_running_page_numbers(book):
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    title, _, subtitle = config["title"].partition(": ")
    cover = " ".join(book.pages[0].split())
    assert title in cover and subtitle.lower() in cover.lower() and config["author"] in cover
    # the published site's address, linked: the pages speak of its buttons and notebooks
    site = config["html"]["baseurl"]
    assert site in cover
    links = [ref.get_object()["/A"]["/URI"] for ref in book.reader.pages[0].get("/Annots") or []]
    assert links == [site]
    # the contents: every page of the book on a line of its own with the number of its first
    # page, in order (the text as laid out on the page, a line of the contents a line of text)
    front = book.book.front
    laid_out = subprocess.run(
        ["pdftotext", "-layout", "-f", "2", "-l", str(front), str(book.out), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [squeeze(line) for line in laid_out.splitlines() if line.strip()]
    assert lines[0] == "Contents"
    wanted = [squeeze(page.entry.title) + str(page.first) for page in book.book.printed]
    assert [line for line in lines if line in wanted] == wanted
    # the viewer's page labels are the printed numbers: i, ii, ... then 1, 2, ...
    labels = book.reader.page_labels
    roman = ["i", "ii", "iii", "iv", "v", "vi"][:front]
    assert labels[:front] == roman
    assert labels[front:] == [str(k) for k in range(1, len(labels) - front + 1)]
    # every page but the title page prints that number in its bottom margin (18 mm of the A4
    # page's 842 pt, read as text at 72 dpi: 1 pt a pixel), and no other number: the margin
    # holds only the number, but a tall MathJax glyph's box may reach into it
    feet = subprocess.run(
        ["pdftotext", "-x", "0", "-y", "791", "-W", "595", "-H", "51", str(book.out), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\f")[:-1]
    numbers = [[w for w in foot.split() if re.fullmatch(r"\d+|[ivx]+", w)] for foot in feet]
    assert numbers == [[], *([label] for label in labels[1:])]


@pytest.mark.slow
def test_metadata(book):
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    meta = book.reader.metadata
    assert meta.title == config["title"]
    assert meta.author == config["author"]
    assert meta.subject == book_pdf.SUBJECT and meta["/Keywords"] == book_pdf.KEYWORDS
    assert book.reader.page_mode == "/UseOutlines"


@pytest.mark.slow
def test_links_stay_inside_the_pdf(book):
    """A link between pages of the site leads to a page of the PDF (the local server that
    printed it is gone); each line of the contents leads to its page."""
    index = {page.indirect_reference.idnum: k for k, page in enumerate(book.reader.pages)}
    local, inside = [], 0
    for k, page in enumerate(book.reader.pages):
        for ref in page.get("/Annots") or []:
            annotation = ref.get_object()
            uri = str(annotation.get("/A", {}).get("/URI", ""))
            if uri.startswith(("http://127.0.0.1", "http://localhost", book_pdf.PAGE_LINK)):
                local.append((k, uri))
            if "/Dest" in annotation:
                dest = annotation["/Dest"]
                assert dest[0].idnum in index, (k, dest)
                inside += 1
    assert not local, f"links to the local server or placeholders left in the PDF: {local[:5]}"
    contents = [
        index[ref.get_object()["/Dest"][0].idnum]
        for page in book.reader.pages[1 : book.book.front]
        for ref in page["/Annots"]
    ]
    front = book.book.front
    assert contents == [front + page.first - 1 for page in book.book.printed]
    assert inside > len(contents)  # the pages link to each other too


@pytest.mark.slow
def test_chapter_titles_and_numbered_statements(book):
    missing = [title for title in chapter_titles() if title not in book.text]
    assert not missing, f"chapter titles not in the PDF: {missing}"
    statements = statement_titles()
    assert len(statements) >= 10, statements  # the sample is the book's, not a handful
    # compared without white space (a line may break after a dash) and with typographic quotes
    # made plain, as the site prints the title's apostrophes
    flat = squeeze(book.text)
    missing = [
        f"{kind} ({title})"
        for kind, title, numbered in statements
        if not re.search(kind + NUMBER * numbered + rf"\({re.escape(squeeze(title))}\)", flat)
    ]
    assert not missing, f"statements without their number in the PDF: {missing}"


@pytest.mark.slow
def test_maths_typeset_figures_and_bibliography(book):
    text = book.text
    # MathJax ran on every page: none of the delimiters \( \) \[ \] that Sphinx writes around
    # the prose's maths is left as text (TeX commands do occur as text: in code cells' labels)
    raw = sorted(set(re.findall(r"\\[()[\]]", text)))
    assert not raw, f"untypeset maths in the PDF: {raw}"
    images = subprocess.run(
        ["pdfimages", "-list", str(book.out)], capture_output=True, text=True, check=True
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


# a fixture book with two parts, a chapter with a section, and an API reference under book/api/
PARTS_TOC = """format: jb-book
root: book/intro
parts:
  - caption: "Part I: Fixture"
    numbered: 1
    chapters:
      - file: book/nb
        sections:
          - file: book/api
  - caption: Back matter
    chapters:
      - file: book/api/index
        sections:
          - file: book/api/token_dynamics.geometry
"""
PARTS_BOOK = {
    "_toc.yml": PARTS_TOC,
    "book/api.rst": "A section\n=========\n\nThe chapter's section.\n",
    "book/api/index.rst": "API reference\n=============\n\nThe library, module by module.\n",
    "book/api/token_dynamics.geometry.rst": API_PAGE,
}


@pytest.mark.slow
def test_api_reference_left_out_or_printed_apart(tmp_path):
    """`make pdf` leaves the API reference out (the links to it lead to the published site);
    `--api only` prints it alone, its index over its modules; `--api append` keeps it as the
    book's last part (the links to it stay inside the PDF)."""
    require_tools()
    (tmp_path / "book" / "api").mkdir(parents=True)
    book_dir = make_book(tmp_path, PARTS_BOOK)
    result = build_book(book_dir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = book_dir / "_build" / "html"
    shapes = {}
    for api in book_pdf.API_CHOICES:
        out = tmp_path / f"{api}.pdf"
        printed = read_pdf(out, book_pdf.print_book(html, out, api=api))
        tree = outline(printed.reader)

        def shape(items):
            return [(title, shape(children)) for title, _, children in items]

        shapes[api] = shape(tree)
        in_text = "Geometry of the token space" in printed.text
        assert in_text == (api != "omit"), api
        assert ("A notebook" in printed.text) == (api != "only"), api
        uris = [
            str(ref.get_object().get("/A", {}).get("/URI", ""))
            for page in printed.reader.pages
            for ref in page.get("/Annots") or []
        ]
        assert not [u for u in uris if u.startswith("http://127.0.0.1")], (api, uris)
        # the intro's link to `token_dynamics.normalize`, where its page is not printed
        site = yaml.safe_load((book_dir / "_config.yml").read_text(encoding="utf-8"))["html"]
        published = [u for u in uris if u.startswith(site["baseurl"] + book_pdf.API)]
        assert bool(published) == (api == "omit"), (api, uris)
    book_part = [
        ("Contents", []),
        ("Intro", []),
        ("Part I: Fixture", [("1. A notebook", [("A section", [])])]),
    ]
    api_part = [("API reference", [("Geometry", [])])]
    assert shapes["omit"] == book_part
    assert shapes["only"] == [("Contents", []), *api_part]
    assert shapes["append"] == [*book_part, ("Back matter", api_part)]


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
    # the title page gives the published site's address; the student edition has none
    # (tools/student_config.py), its PDF no address of the full edition
    config = yaml.safe_load((book_dir / "_config.yml").read_text(encoding="utf-8"))
    assert (config["html"]["baseurl"] in text) == (edition == "full")


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
    in_pdf = found("\n".join(book.pages))
    extra = {s: n - in_code[s] for s, n in in_pdf.items() if n > in_code[s]}
    assert not extra, f"MyST markup or the test suite in the PDF's text, beyond the code: {extra}"


# --- the print layout (tools/book_pdf.py's PRINT_LAYOUT) on a fixture book -----------------------


def sums(first: int, count: int) -> str:
    """A display formula's TeX: ``x_{first}^2 + ...``, `count` terms with distinct subscripts,
    so that the PDF's text shows whether each term is printed."""
    return " + ".join(f"x_{{{k}}}^{{2}}" for k in range(first, first + count))


# (first subscript, terms): a sum a little too wide for the printed line (it fits scaled down)
# and one far too wide (it must wrap)
SCALED, WRAPPED = (101, 14), (201, 60)
LAYOUT_NOTEBOOK = (
    NOTEBOOK_HEADER
    + f"""# Print layout

A formula a little too wide for the printed line:

$$
{sums(*SCALED)}
$$ (fixture-wide)

A formula far too wide, which must wrap:

$$
{sums(*WRAPPED)}
$$

```{{code-cell}} ipython3
import numpy as np
from token_dynamics import plotting, widgets
states = np.linspace(1, 0, 6)[:, None, None] * np.ones((6, 3, 2))
plotting.animate(states, max_frames=6, dpi=40, figsize=(3, 3), title="t = {{t}}")
```

```{{code-cell}} ipython3
def draw(ax, a, b):
    ax.plot([0, 1], [0, a + b])

widgets.figure_sliders(
    draw, figsize=(3, 3), static={{"a": [0.0, 0.5, 1.0]}}, a=(0, 1, 0.1, 0.5), b=(0, 1, 0.1, 0.2)
)
```
"""
)
# a matrix wider than the line at 60% of its size, which cannot wrap between its terms, and an
# inline sum wider than the line, which MathJax cannot break (the page clips what is past the
# line's end)
UNFIT_PAGE = (
    "# Too wide\n\n$$\n\\begin{pmatrix} "
    + " & ".join(f"a_{{{k}}}" for k in range(301, 390))
    + " \\end{pmatrix}\n$$\n\nAn inline sum: $"
    + sums(401, 40)
    + "$.\n"
)
# two-line headings after blank space of growing height from the top of a page: one of them
# ends where its first line fits on the page but not the rest, or not the cell after it
SPACES = range(860, 981, 15)
HEADINGS_NOTEBOOK = (
    NOTEBOOK_HEADER
    + "# Headings\n\nEach heading below comes after blank space, from the top of a page.\n"
    + "".join(
        f'\n<div style="break-before: page; height: {space}px"></div>\n\n'
        f"## A heading long enough to take two lines of the printed page, after {space} pixels\n\n"
        f"```{{code-cell}} ipython3\nprint({space})\n```\n"
        for space in SPACES
    )
)
# a heading and a code cell of n lines, from the top of a page, for n from a cell that fits on the
# heading's page to one that does not, though it fits on a page of its own
TALL_LINES = range(48, 58)
TALL_NOTEBOOK = (
    NOTEBOOK_HEADER
    + "# Tall cells\n\nEach heading below comes with a code cell almost a page tall.\n"
    + "".join(
        f'\n<h2 style="break-before: page">A cell of {n} lines</h2>\n\n```{{code-cell}} ipython3\n'
        + "".join(f"x{k} = {n}\n" for k in range(n - 1))
        + f"print({n})\n```\n"
        for n in TALL_LINES
    )
)
# lines of code too long for the printed line, one indented in a cell's code and one in its
# output, each between two words that mark its ends
WRAPPED_CODE = 'return "WRAPA " + "' + "w " * 40 + '" + "WRAPZ"'
WRAPPED_OUTPUT = "OUTA " + "v " * 40 + "OUTZ"
# a cell of TALL_CELL_LINES lines, each too long for the printed line (two lines on paper), taller
# than a third of a page but less than a page, after blank space from the top of a page that
# leaves room for part of it; then a cell of a few lines after blank space that leaves too little
TALL_CELL_LINES = 26
CODE_NOTEBOOK = (
    NOTEBOOK_HEADER
    + f"""# Code

```{{code-cell}} ipython3
def wrapped():
    {WRAPPED_CODE}


print("OUT0")
print(" " * 8 + "{WRAPPED_OUTPUT}")
```

<div style="break-before: page"></div>

Tallfiller

<div style="height: 300px"></div>

```{{code-cell}} ipython3
"""
    + "".join(
        f't{k:02} = "T{k:02}A " + "{"t " * 40}" + "T{k:02}Z"\n' for k in range(TALL_CELL_LINES)
    )
    + """```

<div style="break-before: page"></div>

Shortfiller

<div style="height: 800px"></div>

```{code-cell} ipython3
"""
    + "".join(f"s{k:02} = {k}\n" for k in range(12))
    + "```\n"
)


def picture(width: int, height: int, size: tuple[int, int]) -> str:
    """A red picture `width` by `height` (its proportions), to which the page gives the size
    `size` (CSS pixels, width by height): found on the printed page by its colour (`red_box`)."""
    svg = (
        f"%3Csvg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'%3E"
        f"%3Crect width='{width}' height='{height}' fill='red'/%3E%3C/svg%3E"
    )
    return f'<img src="data:image/svg+xml,{svg}" style="width: {size[0]}px; height: {size[1]}px">'


def lines(mark: str, count: int) -> str:
    """`count` paragraphs of two printed lines, the first starting `mark`A, the last ending
    `mark`Z."""
    line = "of the box, long enough that each of its paragraphs takes two printed lines"
    text = [f"Paragraph {k} {line}, as in a statement or a proof." for k in range(count)]
    return f"{mark}A " + "\n\n".join(text) + f" {mark}Z\n"


# boxes, a table and figures that do not fit below a filler of some height (CSS pixels), and a
# picture that the page gives a size wider than the line in other proportions than its own
FIGURE_ROOM = 430  # the filler's height above the figure that must shrink to fit
BOXES_PAGE = (
    '# Boxes\n\nBoxfiller\n\n<div style="height: 600px"></div>\n\n'
    "```{prf:theorem} A long statement\n:label: fixture-long\n\n"
    + lines("BOX", 12)
    + '```\n\n<div style="break-before: page"></div>\n\nFoldfiller\n\n'
    '<div style="height: 600px"></div>\n\n'
    "```{admonition} A folded box\n:class: dropdown\n\n"
    + lines("FOLD", 12)
    + '```\n\n<div style="break-before: page"></div>\n\nTablefiller\n\n'
    '<div style="height: 600px"></div>\n\n| row | value |\n|---|---|\n'
    + "".join(f"| TROW{k:02} | {k} |\n" for k in range(24))
    + '\n<div style="break-before: page"></div>\n\nFigurefiller\n\n'
    f'<div style="height: {FIGURE_ROOM}px"></div>\n\n'
    f"<figure>{picture(100, 100, (500, 500))}<figcaption>Shrunk</figcaption></figure>\n\n"
    '<div style="break-before: page"></div>\n\nBigfiller\n\n'
    '<div style="height: 700px"></div>\n\n'
    f"<figure>{picture(100, 100, (500, 500))}<figcaption>Moved</figcaption></figure>\n\n"
    '<div style="break-before: page"></div>\n\nWidefiller\n\n'
    f"{picture(200, 100, (900, 600))}\n"
)
LAYOUT_TOC = """format: jb-book
root: book/intro
chapters:
  - file: book/nb
  - file: book/unfit
  - file: book/headings
  - file: book/tall
  - file: book/code
  - file: book/boxes
"""


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """A fixture book of a page with wide formulas, an animation and an explorer, a page with a
    formula too wide to fit, a page of headings near the pages' ends, a page of tall code
    cells and a page of long lines of code and of cells near the pages' ends, printed."""
    require_tools()
    tmp_path = tmp_path_factory.mktemp("layout")
    (tmp_path / "book").mkdir()
    book_dir = make_book(
        tmp_path,
        {
            "_toc.yml": LAYOUT_TOC,
            "book/intro.md": "# Intro\n\nA fixture book.\n",
            "book/nb.md": LAYOUT_NOTEBOOK,
            "book/unfit.md": UNFIT_PAGE,
            "book/headings.md": HEADINGS_NOTEBOOK,
            "book/tall.md": TALL_NOTEBOOK,
            "book/code.md": CODE_NOTEBOOK,
            "book/boxes.md": BOXES_PAGE,
        },
    )
    (book_dir / "book" / "api.rst").unlink()
    result = build_book(book_dir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = tmp_path / "layout.pdf"
    return read_pdf(out, book_pdf.print_book(book_dir / "_build" / "html", out))


def page_range(printed: Printed, path: str) -> range:
    """The indexes (from 0) of the PDF pages that the site's page `path` was printed on."""
    page = next(p for p in printed.book.printed if p.path == path)
    start = printed.book.front + page.first - 1
    return range(start, start + page.pages)


def words(out: Path, index: int) -> list[tuple[float, float, float, float, str]]:
    """The words of the PDF page `index` (from 0) with their boxes ``(x0, y0, x1, y1, text)``
    in points from the top left (poppler's ``pdftotext -bbox``)."""
    return words_by_page(out, out.stat().st_mtime_ns)[index]


@functools.cache
def words_by_page(out: Path, modified: int) -> list[list[tuple[float, float, float, float, str]]]:
    """`words` of every page of the PDF at `out` as modified at `modified` (ns), read in one run
    of ``pdftotext -bbox``."""
    xml = subprocess.run(
        ["pdftotext", "-bbox", str(out), "-"], capture_output=True, text=True, check=True
    ).stdout
    box = r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>'
    return [
        [(*map(float, found[:4]), unescape(found[4])) for found in re.findall(box, page)]
        for page in xml.split("<page ")[1:]
    ]


# the text of a page lies between its running head and its page number (16 mm and 18 mm of the
# A4 page's 842 pt); body text is 12 pt, whose words poppler boxes about 14 pt high, a heading of
# the first three levels over 18 pt
TEXT_TOP, TEXT_BOTTOM, HEADING_PT = 46.0, 790.0, 18.0


def body(out: Path, index: int) -> list[tuple[float, float, float, float, str]]:
    """The words of the PDF page `index` (from 0) between its running head and its number."""
    return [w for w in words(out, index) if w[1] > TEXT_TOP and w[3] < TEXT_BOTTOM]


def ends_in_a_heading(out: Path, pages) -> list[tuple[int, str]]:
    """The pages among `pages` (indexes from 0) whose text ends with a line in a heading's type
    (every word of the last line taller than ``HEADING_PT``): a heading left alone at the foot
    of its page, or a heading broken over two pages. With the line's text."""
    found = []
    for index in pages:
        body_words = body(out, index)
        if not body_words:
            continue
        bottom = max(w[3] for w in body_words)
        last = [w for w in body_words if w[3] > bottom - 4]
        if all(w[3] - w[1] > HEADING_PT for w in last):
            found.append((index, " ".join(w[4] for w in last)))
    return found


def blank_pages(out: Path, pages) -> list[int]:
    """The pages among `pages` (indexes from 0) that show no image and no text but headings and
    the running head and number: a page left blank, or showing only a heading and the empty
    frame of a block (a code cell, an admonition) whose content went on to the next page."""
    listed = subprocess.run(
        ["pdfimages", "-list", str(out)], capture_output=True, text=True, check=True
    ).stdout.splitlines()[2:]  # two header lines
    with_image = {int(line.split()[0]) - 1 for line in listed}
    return [
        index
        for index in pages
        if index not in with_image and all(w[3] - w[1] > HEADING_PT for w in body(out, index))
    ]


@pytest.mark.slow
def test_wide_formulas_scaled_or_wrapped_on_the_page(layout):
    """A display formula too wide for the printed line is printed whole: scaled down when 60%
    of its size fits, else wrapped; each of its terms is in the PDF's text (a clipped formula
    loses those past the line's end)."""
    text = " ".join(layout.pages[k] for k in page_range(layout, "book/nb.html")).split()
    for first, count in (SCALED, WRAPPED):
        missing = [k for k in range(first, first + count) if str(k) not in text]
        assert not missing, f"terms of a wide formula missing from the PDF: {missing}"
    assert layout.book.layout["scaled"] == 3  # the two sums and the matrix
    assert layout.book.layout["wrapped"] == 2  # the long sum and the matrix
    # and nothing is printed past the right margin (15 mm of the 595 pt page)
    right = max(w[2] for k in page_range(layout, "book/nb.html") for w in words(layout.out, k))
    assert right <= 595 - 42.5 + 1, right


@pytest.mark.slow
def test_formula_that_cannot_fit_is_reported(layout):
    """The matrix that neither scaling nor wrapping fits and the inline sum wider than its line
    are reported, and no other formula of the fixture book (those of its notebook fit)."""
    unfit = layout.book.unfit
    assert [(f.path, f.tex.split()[0], f.inline) for f in unfit] == [
        ("book/unfit.html", r"\begin{pmatrix}", False),
        ("book/unfit.html", "x_{401}^{2}", True),
    ]
    matrix, inline = unfit
    assert matrix.width > matrix.room / book_pdf.MIN_MATH_SCALE
    assert inline.width > inline.room


@pytest.mark.slow
def test_animation_printed_as_its_first_and_last_frames(layout):
    text = " ".join(layout.pages[k] for k in page_range(layout, "book/nb.html"))
    flat = " ".join(text.split())
    assert "First frame (1 of 6)" in flat and "Last frame (6 of 6)" in flat
    # the player's controls are not printed: its loop modes are labelled Once, Loop, Reflect
    assert "Reflect" not in flat
    pages = [str(k + 1) for k in page_range(layout, "book/nb.html")]
    listed = subprocess.run(
        ["pdfimages", "-list", "-f", pages[0], "-l", pages[-1], str(layout.out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()[2:]
    assert len(listed) >= 3, listed  # the two frames and the explorer's frame
    assert layout.book.layout["animations"] == 1


@pytest.mark.slow
def test_explorer_says_which_frame_it_shows(layout):
    text = " ".join(" ".join(layout.pages[k] for k in page_range(layout, "book/nb.html")).split())
    assert "Frame shown: a = 0.5" in text
    assert layout.book.layout["explorers"] == 1


@pytest.mark.slow
def test_no_heading_alone_at_the_foot_of_a_page(layout):
    """Each heading of the fixture is printed whole, on the page of the cell after it."""
    pages = page_range(layout, "book/headings.html")
    assert not ends_in_a_heading(layout.out, pages)
    flat = squeeze(" ".join(layout.pages[k] for k in pages))
    for space in SPACES:
        heading = f"A heading long enough to take two lines of the printed page, after {space}"
        assert squeeze(heading) + "pixels" + f"print({space}){space}" in flat, space


@pytest.mark.slow
def test_code_cell_printed_from_the_page_of_its_heading(layout):
    """A code cell almost a page tall after a heading: where the two do not fit on one page, the
    code starts under the heading and goes on to the next page; no page shows the heading over
    an empty frame, the code on the page after. Every line is printed, in order."""
    pages = page_range(layout, "book/tall.html")
    assert not blank_pages(layout.out, pages)
    # the pages' text without the running head and the page number
    text = squeeze(" ".join(re.sub(r"^\s*Tall cells|\d+\s*$", "", layout.pages[k]) for k in pages))
    for n in TALL_LINES:
        code = "".join(f"x{k}={n}" for k in range(n - 1)) + f"print({n}){n}"
        assert squeeze(f"A cell of {n} lines") + code in text, n


@pytest.mark.slow
def test_book_formulas_fit_no_heading_ends_a_page_and_none_is_blank(book):
    """The whole book: no formula overflows the printed line (a display formula too wide even
    scaled and wrapped, an inline one wider than its line), no page ends with a heading, no page
    is left blank or shows only a heading over an empty frame."""
    assert not book.book.unfit, "formulas too wide for the printed page: " + "; ".join(
        f"{f.path}: {f.tex[:80]}" for f in book.book.unfit
    )
    pages = range(book.book.front, len(book.reader.pages))
    stranded = ends_in_a_heading(book.out, pages)
    assert not stranded, f"pages (from 0) that end with a heading: {stranded}"
    blank = blank_pages(book.out, pages)
    assert not blank, f"pages (from 0) with nothing but headings on them: {blank}"


def line_of(out: Path, index: int, y: float) -> list[tuple[float, float, float, float, str]]:
    """The words of the line of text at height `y` (points from the top) of the PDF page
    `index`, from left to right."""
    return sorted(w for w in words(out, index) if abs(w[1] - y) < 2)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("start", "end", "indent"),
    [('"WRAPA', '"WRAPZ"', 4), ("OUTA", "OUTZ", 8)],  # the words at its ends, as printed
    ids=["code", "output"],
)
def test_long_code_line_goes_on_at_its_indentation_after_a_mark(layout, start, end, indent):
    """A line of code too long for the printed line (a cell's, indented in a function, and its
    output's) goes on under its first character, two columns further in, as LaTeX's listings
    with breaklines, and a mark is drawn in those two columns; the mark is a picture, not text:
    the PDF's text of the line is the line's, and copied code has no mark in it."""
    pages = page_range(layout, "book/code.html")
    index, at = next((k, w[1]) for k in pages for w in words(layout.out, k) if w[4] == start)
    first = line_of(layout.out, index, at)
    # column 0: the line above it (`def wrapped():` and the output's `OUT0`) starts there
    above = max(w[1] for w in words(layout.out, index) if w[1] < at - 2)
    column = line_of(layout.out, index, above)[0][0]
    width = (first[0][2] - first[0][0]) / len(first[0][4])  # of a character (monospace)
    assert first[0][0] - column == pytest.approx(indent * width, abs=width / 4)
    below = min(w[1] for w in words(layout.out, index) if w[1] > at + 2)
    continued = line_of(layout.out, index, below)
    assert continued[-1][4] == end, continued  # one line of the code, wrapped once
    # the continuation starts two columns to the right of the line's first character
    assert continued[0][0] - first[0][0] == pytest.approx(2 * width, abs=width / 4)
    # the mark: drawn (darker than the code's background) in the two columns before it
    scale = 4  # pixels per point
    left, top = first[0][0], below
    crop = (left, top, continued[0][0] - left, continued[0][3] - top)  # in points
    x, y, w, h = (str(round(v * scale)) for v in crop)
    page = str(index + 1)
    pgm = subprocess.run(
        [
            *("pdftoppm", "-gray", "-r", str(72 * scale), "-f", page, "-l", page),
            *("-x", x, "-y", y, "-W", w, "-H", h, str(layout.out)),
        ],
        capture_output=True,
        check=True,
    ).stdout
    pixels = pgm.split(b"\n", 3)[3]  # after the header: P5, width height, 255
    assert min(pixels) < 200, "no continuation mark before the wrapped line's continuation"
    # the PDF's text is the code's: no mark, and the line whole in order
    code = WRAPPED_CODE if indent == 4 else WRAPPED_OUTPUT
    text = " ".join(layout.pages[k] for k in pages)
    assert squeeze(code) in squeeze(text)


@pytest.mark.slow
def test_tall_code_cell_breaks_between_its_lines_a_short_one_is_kept_whole(layout):
    """A code cell taller than a third of a page (`TALL_CELL`), which does not fit below what
    precedes it, starts there and goes on on the next page, rather than moving whole to the next
    page and leaving most of this one blank; it breaks between two of its lines, never inside
    one (each line of it takes two printed lines). A cell of a few lines that does not fit is
    printed whole on the next page."""
    pages = [layout.pages[k] for k in page_range(layout, "book/code.html")]

    def page_of(word: str) -> int:
        found = [k for k, text in enumerate(pages) if word in text]
        assert len(found) == 1, (word, found)
        return found[0]

    tall = page_of("Tallfiller")
    starts = [page_of(f"T{k:02}A") for k in range(TALL_CELL_LINES)]
    ends = [page_of(f"T{k:02}Z") for k in range(TALL_CELL_LINES)]
    assert starts[0] == tall, "the tall cell moved to the page after the one it starts on"
    assert ends[-1] == tall + 1
    assert starts == ends, "a line of code split between two pages"
    assert starts == sorted(starts)
    short = page_of("Shortfiller")
    assert {page_of(f"s{k:02} = {k}") for k in range(12)} == {short + 1}


@pytest.mark.slow
def test_links_to_the_api_reference_lead_to_the_published_site(book):
    """The API reference is not in the PDF: each link of the printed pages to it leads to its
    place on the published site (``html.baseurl``), which the built site has."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    site = config["html"]["baseurl"]
    linked = set()  # the links of the printed pages' text into the API reference, on the site
    for page in book.book.printed:
        text = (HTML / page.path).read_text(encoding="utf-8")
        article = text[text.index("<article") : text.index("</article>")]
        for href in re.findall(r'<a [^>]*href="([^"]+)"', article):
            target = urljoin(page.path, href)
            if target.startswith(book_pdf.API):
                linked.add(site + target)
    assert linked, "the book links to its API reference (the checks page does)"
    uris = {
        str(ref.get_object()["/A"]["/URI"])
        for page in book.reader.pages
        for ref in page.get("/Annots") or []
        if "/URI" in ref.get_object().get("/A", {})
    }
    assert {uri for uri in uris if uri.startswith(site + book_pdf.API)} == linked
    for uri in linked:  # each leads to a page of the site, and to a place there
        path, _, place = uri.removeprefix(site).partition("#")
        page = (HTML / path).read_text(encoding="utf-8")
        assert not place or f'id="{place}"' in page, uri


def red_box(out: Path, index: int) -> tuple[float, float, float, float] | None:
    """The box ``(x0, y0, x1, y1)``, in points from the top left, of the red pixels of the PDF
    page `index` (from 0) rendered at 72 dpi, a pixel a point (`picture`); None if none."""
    import numpy as np

    page = str(index + 1)
    ppm = subprocess.run(
        ["pdftoppm", "-r", "72", "-f", page, "-l", page, str(out)], capture_output=True, check=True
    ).stdout
    _, size, _, pixels = ppm.split(b"\n", 3)  # after the header: P6, width height, 255
    width, height = map(int, size.split())
    rgb = np.frombuffer(pixels, np.uint8).reshape(height, width, 3).astype(int)
    rows, cols = np.nonzero((rgb[..., 0] > 200) & (rgb[..., 1] < 60) & (rgb[..., 2] < 60))
    if not rows.size:
        return None
    return cols.min(), rows.min(), cols.max() + 1, rows.max() + 1


def page_of(printed: Printed, path: str, word: str) -> int:
    """The index (from 0) of the one PDF page of the site's page `path` that shows `word`."""
    found = [k for k in page_range(printed, path) if word in printed.pages[k]]
    assert len(found) == 1, (word, found)
    return found[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("filler", "first", "last", "title"),
    [
        ("Boxfiller", "BOXA", "BOXZ", "A long statement"),
        ("Foldfiller", "FOLDA", "FOLDZ", "A folded box"),
        ("Tablefiller", "TROW00", "TROW23", "row"),
    ],
    ids=["statement", "folded", "table"],
)
def test_tall_box_or_table_breaks_across_pages(layout, filler, first, last, title):
    """A statement's box, a folded box (unfolded on paper) or a table taller than a third of a
    page, which does not fit below what precedes it, starts there, its title with its first
    lines, and goes on on the next page, rather than moving whole to the next page and leaving
    most of this one blank (as the screen's theme asks for a box or a table kept whole)."""
    page = page_of(layout, "book/boxes.html", filler)
    assert page_of(layout, "book/boxes.html", first) == page, "moved whole to the next page"
    assert title in layout.pages[page]
    assert page_of(layout, "book/boxes.html", last) > page


@pytest.mark.slow
def test_figure_shrinks_into_the_room_left_or_moves_whole(layout):
    """A figure that does not fit below what precedes it is shrunk into the room left when that
    room holds it at `MIN_FIGURE_SCALE` of its size or more, in its proportions, its caption
    under it; else it moves whole to the next page, at its size."""
    size = 500 * 72 / 96  # the picture's 500 CSS pixels, in points
    page = page_of(layout, "book/boxes.html", "Figurefiller")
    assert page_of(layout, "book/boxes.html", "Shrunk") == page
    x0, y0, x1, y1 = red_box(layout.out, page)
    assert book_pdf.MIN_FIGURE_SCALE * size <= y1 - y0 < size - 2
    assert x1 - x0 == pytest.approx(y1 - y0, abs=2)  # square: its proportions, to a pixel
    page = page_of(layout, "book/boxes.html", "Bigfiller")
    assert red_box(layout.out, page) is None  # not shrunk below MIN_FIGURE_SCALE
    assert page_of(layout, "book/boxes.html", "Moved") == page + 1
    x0, y0, x1, y1 = red_box(layout.out, page + 1)
    assert y1 - y0 == pytest.approx(size, abs=2) and x1 - x0 == pytest.approx(size, abs=2)
    assert layout.book.layout["fitted"] == 1


@pytest.mark.slow
def test_picture_narrowed_to_the_line_keeps_its_proportions(layout):
    """A picture to which the page gives a width and a height, wider than the printed line, is
    narrowed to the line in its own proportions (2:1 here), not squeezed into the height the
    page gives it."""
    x0, y0, x1, y1 = red_box(layout.out, page_of(layout, "book/boxes.html", "Widefiller"))
    assert x1 - x0 <= 595 - 2 * 42.5  # within the margins (15 mm of the 595 pt page)
    assert (x1 - x0) / (y1 - y0) == pytest.approx(2, rel=0.02)  # a pixel in 100
