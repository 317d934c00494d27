"""What a reader of the built site sees on a page, and what must not be in it.

A page's visible text is split in two: the prose, and the code (``<code>``, ``<pre>``, ``<kbd>``,
``<samp>``: code cells, literals, the code of the checks page and of the API reference). Maths
(elements of class ``math``, typeset by MathJax) is in neither: ``X_{\\text{ref}}`` is a
formula, not a role. Scripts and styles are not text.

- :data:`MYST`: MyST markup that the build did not render (a directive fence, a role, a target).
  None of it may appear in the prose; code may show it, as the API reference does to explain
  how chapters link to it.
- :data:`TOOLING`: the test suite's machinery (pytest markers, test files, test names). Only the
  page that lists the tests of each statement (:data:`CHECKS_PAGE`) shows it, in code and
  explained; on every other page it may appear neither in the prose nor in the code.
"""

from __future__ import annotations

import html.parser
import re
from pathlib import Path

#: Unrendered MyST: a colon or backtick directive fence, a role (``{prf:ref}``, ``{glue:text}``,
#: ``{cite}``, ...), with or without its backticks, or a label target ``(name)=``.
MYST = re.compile(
    r":::\{|```\{"
    r"|\{(?:prf:[\w-]+|glue(?::[\w-]+)?|cite(?::\w+)?|ref|numref|eq|doc|download|term|abbr"
    r"|math|dropdown|exercise|solution|py:\w+|code-cell|admonition|figure|only)\}"
    r"|\{[a-z][\w-]*(?::[\w-]+)?\}`"
    r"|(?:^|\s)\([a-z][\w-]*\)=(?:\s|$)"
)
#: The test suite: a pytest marker, a test file or folder, a test's node id or name.
TOOLING = re.compile(
    r"@pytest|pytest\.mark|\bconftest\.py\b|(?<![\w/])tests/|\btest_\w+\.py\b|::test_\w+"
    r"|\btest_\w*[a-z0-9]_(?:\w+|\*)"
)
#: The page that lists each statement's tests: its code names them, and its prose says how.
CHECKS_PAGE = Path("book/checks.html")

_CODE = {"code", "pre", "kbd", "samp"}
_HIDDEN = {"script", "style", "template"}
_VOID = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr",
}  # fmt: skip


class _Visible(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, str]] = []  # (tag, what its text is: prose, code, math, hidden)
        self.prose: list[str] = []
        self.code: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            return
        kind = self.open[-1][1] if self.open else "prose"
        classes = (dict(attrs).get("class") or "").split()
        if tag in _HIDDEN:
            kind = "hidden"
        elif kind == "prose" and "math" in classes:
            kind = "math"
        elif kind == "prose" and tag in _CODE:
            kind = "code"
        self.open.append((tag, kind))

    def handle_startendtag(self, tag, attrs):
        pass  # <br/>, <img/>: no text

    def handle_endtag(self, tag):
        # close up to the matching tag (HTML allows some end tags to be left out)
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i][0] == tag:
                del self.open[i:]
                return

    def handle_data(self, data):
        kind = self.open[-1][1] if self.open else "prose"
        if kind == "prose":
            self.prose.append(data)
        elif kind == "code":
            self.code.append(data)


def visible_text(page: str) -> tuple[str, str]:
    """(the prose, the code) of the HTML `page`, each run of white space one space."""
    parser = _Visible()
    parser.feed(page)
    parser.close()
    return " ".join(" ".join(parser.prose).split()), " ".join(" ".join(parser.code).split())


def pages(site: Path) -> list[Path]:
    """Every page of the built `site` (not the sources and static files it serves)."""
    skip = {"_sources", "_static", "_images", "_downloads"}
    return sorted(p for p in site.rglob("*.html") if not skip & set(p.relative_to(site).parts))


def offences(site: Path, page: Path) -> list[str]:
    """What `page` of `site` shows a reader that it must not: unrendered MyST in its prose, the
    test suite anywhere but in the code of :data:`CHECKS_PAGE`."""
    prose, code = visible_text(page.read_text(encoding="utf-8", errors="replace"))
    found = [m.group(0).strip() for m in MYST.finditer(prose)]
    tooling = prose if page.relative_to(site) == CHECKS_PAGE else prose + " " + code
    found += [m.group(0) for m in TOOLING.finditer(tooling)]
    return sorted(set(found))
