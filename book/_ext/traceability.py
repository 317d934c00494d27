"""Sphinx extension: the table that ties every labelled statement to the checks behind it.

The book states results with sphinx-proof directives (``{prf:theorem}``, ``{prf:proposition}``,
...), each with a ``:label:``. A test in ``tests/`` that checks a statement carries
``@pytest.mark.statement("label")``; a notebook that shows it refers to it with
``{prf:ref}`label```. The directive ``{statement-checks}`` renders one row per statement with
its tests and notebooks; a statement with no test is listed as such. ``collect()`` is the
same scan as plain data, used by ``tests/test_traceability.py``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
TESTS = ROOT / "tests"

# ```{prf:theorem} Optional title   (backtick or colon fences, any length >= 3)
_DIRECTIVE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{prf:(?P<kind>[a-z]+)\}[ \t]*(?P<title>[^\n]*)\n"
    r"(?P<options>(?:[ \t]*:[a-z_-]+:[^\n]*\n)*)",
    re.MULTILINE,
)
_LABEL = re.compile(r"^[ \t]*:label:[ \t]*(?P<label>\S+)", re.MULTILINE)
_PRF_REF = re.compile(r"\{prf:ref\}`(?:[^`<]*<)?(?P<label>[^`>]+)>?`")
# Directives that state something a computation can check; proofs, remarks, ... are not rows.
STATEMENT_KINDS = ("theorem", "proposition", "lemma", "corollary", "conjecture", "property")


@dataclass
class Statement:
    label: str
    kind: str
    title: str
    docname: str
    tests: list[str] = field(default_factory=list)
    notebooks: list[str] = field(default_factory=list)
    #: the line of each test's definition in its file
    lines: dict[str, int] = field(default_factory=dict)


def toc_pages(toc_file: Path | None = None) -> list[str]:
    """Docnames of `_toc.yml` (``book/...``, no suffix) in reading order."""
    import yaml

    toc = yaml.safe_load((toc_file or ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            pages.extend(_entry_pages(entry))
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return pages


def _entry_pages(entry: dict) -> list[str]:
    """Docnames of one `_toc.yml` entry: its ``file``, or the sorted pages its ``glob`` matches."""
    if "file" in entry:
        return [entry["file"]]
    if "glob" in entry:
        matches = {p.with_suffix("").as_posix() for p in ROOT.glob(entry["glob"] + ".*")}
        return sorted(m.removeprefix(ROOT.as_posix() + "/") for m in matches)
    return []


def _is_notebook(text: str) -> bool:
    return text.lstrip().startswith("---\njupytext:")


def _book_pages():
    # within a page, statements keep their order of appearance (the sort in collect is stable)
    for path in sorted(BOOK.rglob("*.md")):
        rel = path.relative_to(BOOK)
        if any(part.startswith((".", "_")) for part in rel.parts):
            continue
        yield path, "book/" + rel.with_suffix("").as_posix()


def _marker_labels(node: ast.AST) -> list[str]:
    """Labels of ``pytest.mark.statement("a", "b")`` calls inside `node`."""
    labels = []
    for call in ast.walk(node):
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "statement"
        ):
            labels += [a.value for a in call.args if isinstance(a, ast.Constant)]
    return labels


def test_sites() -> dict[str, list[tuple[str, int]]]:
    """Map each statement label to the tests marked with it: (``tests/x.py::name``, line).

    The line is that of the test's ``def`` or ``class`` (1 for a module-wide ``pytestmark``).
    """
    found: dict[str, list[tuple[str, int]]] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(ROOT).as_posix()
        module_labels: list[str] = []
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
            ):
                module_labels += _marker_labels(node.value)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                for label in {lab for dec in node.decorator_list for lab in _marker_labels(dec)}:
                    found.setdefault(label, []).append((f"{rel}::{node.name}", node.lineno))
        for label in module_labels:
            found.setdefault(label, []).append((rel, 1))
    return found


def test_markers() -> dict[str, list[str]]:
    """Map each statement label to the test ids (``tests/x.py::name``) marked with it."""
    return {label: [test for test, _ in sites] for label, sites in test_sites().items()}


def chapters(toc_file: Path | None = None) -> dict[str, str]:
    """Map each docname of `_toc.yml` to the docname of its chapter (itself for a chapter)."""
    import yaml

    toc = yaml.safe_load((toc_file or ROOT / "_toc.yml").read_text(encoding="utf-8"))
    found = {toc["root"]: toc["root"]}

    def walk(entries, chapter=None):
        for entry in entries or []:
            for page in _entry_pages(entry):
                found[page] = chapter or page
            walk(entry.get("sections"), chapter or entry.get("file"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return found


def page_title(docname: str) -> str:
    """The first ``# `` heading of a page's source (its docname when it has none)."""
    path = ROOT / f"{docname}.md"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return docname


def source_url(repository: str, branch: str, test: str, line: int) -> str:
    """Link to a test's line in the repository's web view (GitHub-style ``blob/.../#L``)."""
    path = test.split("::")[0]
    return f"{repository.rstrip('/')}/blob/{branch}/{path}#L{line}"


def collect() -> list[Statement]:
    """Every labelled statement of the book, with its tests and notebooks, in reading order.

    Pages are read in the order of `_toc.yml` (pages missing from it come last, by name).
    """
    statements: dict[str, Statement] = {}
    refs: dict[str, list[str]] = {}
    for path, docname in _book_pages():
        text = path.read_text(encoding="utf-8")
        for match in _DIRECTIVE.finditer(text):
            label = _LABEL.search(match["options"])
            if match["kind"] in STATEMENT_KINDS and label:
                statements[label["label"]] = Statement(
                    label["label"], match["kind"], match["title"].strip(), docname
                )
        if _is_notebook(text):
            for ref in _PRF_REF.finditer(text):
                refs.setdefault(ref["label"], [])
                if docname not in refs[ref["label"]]:
                    refs[ref["label"]].append(docname)
    sites = test_sites()
    for label, stmt in statements.items():
        stmt.tests = [test for test, _ in sites.get(label, [])]
        stmt.lines = dict(sites.get(label, []))
        stmt.notebooks = refs.get(label, [])
    toc = ROOT / "_toc.yml"
    order = {doc: i for i, doc in enumerate(toc_pages(toc))} if toc.exists() else {}

    def reading_order(stmt: Statement) -> tuple[int, str]:
        return order.get(stmt.docname, len(order)), stmt.docname

    return sorted(statements.values(), key=reading_order)


# Node builders shared by the book's generated pages (this one, the exercise index, the
# instructor's guide).


def xref(domain: str, reftype: str, target: str, text: str | None = None):
    """A cross-reference node, resolved by Sphinx like the role ``{domain:reftype}`target```."""
    from docutils import nodes
    from sphinx import addnodes

    ref = addnodes.pending_xref(
        "", refdomain=domain, reftype=reftype, reftarget=target, refexplicit=text is not None
    )
    ref += nodes.inline(text=text or target)
    return ref


def with_maths(text: str) -> list:
    """Text nodes of a title, its inline maths (``$...$``) typeset rather than shown in dollars."""
    from docutils import nodes

    return [
        nodes.math(text=piece) if i % 2 else nodes.Text(piece)
        for i, piece in enumerate(text.split("$"))
        if piece
    ]


def table(headers: list[str], rows: list[list], widths: tuple[int, ...], css_class: str):
    """A docutils table; a cell is a string, a text node or any node (wrapped in a paragraph
    unless it is a block already)."""
    from docutils import nodes

    def row(cells):
        out = nodes.row()
        for cell in cells:
            if isinstance(cell, str):
                cell = nodes.paragraph(text=cell)
            elif isinstance(cell, nodes.Text | nodes.Inline):
                cell = nodes.paragraph("", "", cell)
            entry = nodes.entry()
            entry += cell
            out += entry
        return out

    node = nodes.table(classes=[css_class])
    group = nodes.tgroup(cols=len(widths))
    node += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    head += row(headers)
    body = nodes.tbody()
    group += body
    for cells in rows:
        body += row(cells)
    return node


def rebuild_every_time(app, page: str) -> None:
    """Mark the page whose docname ends with `page` outdated at every build: a generated page
    depends on every other page (and on tests/), which Sphinx cannot know."""

    def outdated(app, env, added, changed, removed):
        return [doc for doc in env.found_docs if doc.endswith(page)]

    app.connect("env-get-outdated", outdated)


def setup(app):
    from docutils import nodes
    from sphinx.util.docutils import SphinxDirective

    class StatementChecks(SphinxDirective):
        """Render the statement -> checks tables: one fold per chapter, one table per page."""

        def run(self):
            rows = collect()
            options = self.config.html_theme_options or {}
            self.repository = options.get("repository_url", "")
            self.branch = options.get("repository_branch", "main")
            out = [
                nodes.paragraph(
                    text=f"{len(rows)} statements; "
                    f"{sum(bool(s.tests) for s in rows)} with at least one test; "
                    f"{sum(bool(s.notebooks) for s in rows)} shown in a notebook."
                )
            ]
            chapter_of = chapters() if (ROOT / "_toc.yml").exists() else {}
            folds: dict[str, dict[str, list[Statement]]] = {}
            for stmt in rows:
                chapter = chapter_of.get(stmt.docname, stmt.docname)
                folds.setdefault(chapter, {}).setdefault(stmt.docname, []).append(stmt)
            for chapter, pages in folds.items():
                count = sum(map(len, pages.values()))
                # an admonition of class "dropdown": sphinx-togglebutton folds it (closed)
                fold = nodes.admonition(classes=["dropdown", "statement-checks-chapter"])
                fold += nodes.title(text=f"{page_title(chapter)} ({count} statements)")
                for docname, statements in pages.items():
                    fold += nodes.rubric("", "", xref("std", "doc", "/" + docname))
                    fold += self._table(statements)
                out.append(fold)
            return out

        def _test_item(self, stmt, test):
            short = test.removeprefix("tests/")
            text = nodes.literal(text=short)
            if self.repository:
                url = source_url(self.repository, self.branch, test, stmt.lines.get(test, 1))
                text = nodes.reference("", "", text, refuri=url)
            return nodes.list_item("", nodes.paragraph("", "", text))

        def _table(self, statements):
            rows = []
            for stmt in statements:
                tests = nodes.bullet_list()
                for test in stmt.tests:
                    tests += self._test_item(stmt, test)
                if not stmt.tests:
                    tests = nodes.strong(text="no check yet")
                shown = nodes.paragraph()
                for i, doc in enumerate(stmt.notebooks):
                    if i:
                        shown += nodes.Text(", ")
                    shown += xref("std", "doc", "/" + doc)
                # the reference already reads "Proposition 3": the title follows it alone
                statement = nodes.paragraph("", "", xref("prf", "ref", stmt.label))
                statement += nodes.Text(" ")
                statement += nodes.emphasis("", "", *with_maths(stmt.title or ""))
                rows.append([statement, tests, shown])
            return table(["Statement", "Tests", "Shown in"], rows, (35, 45, 20), "statement-checks")

    app.add_directive("statement-checks", StatementChecks)
    rebuild_every_time(app, "checks")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
