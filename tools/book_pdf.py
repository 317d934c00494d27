"""Print the built book as one PDF: every page of the site, in the order of the table of contents.

Usage (what ``make pdf`` runs after ``make book``)::

    python tools/book_pdf.py [--html _build/html] [--out _build/pdf/token-dynamics.pdf]

Each page of the built site is opened in Debian's headless Chromium, offline, exactly as a reader
sees it: MathJax has typeset the maths, sphinx-proof has numbered the statements (Theorem 3.2),
figures, animations (their first frame) and the bibliography are there. The page is then printed
on A4 with its navigation hidden and its folded solutions unfolded (the student edition has none
to unfold), its pages numbered on from the previous page's, its title in the running head; the
printed pages are joined with poppler's ``pdfunite``. The order is the site's own: the chain of
"next" links from the first page, which Sphinx derives from ``_toc.yml``.

Needs ``/usr/bin/chromium`` (``make chromium``) and poppler-utils (``make poppler``).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urljoin, urlsplit

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# Chromium flags for a closed network (the same as the browser tests): no background
# connections, no sandbox when run as root.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# A page that has not typeset its maths within this time has a broken MathJax: fail, not hang.
TIMEOUT_MS = 60_000
# The screen's chrome (header, sidebars, buttons, previous/next links, the theme's printed
# "Contents" list of the page) has no place on paper; folded content (solutions, hidden cells'
# outputs, <details>) is printed unfolded; long code lines wrap instead of being cut.
PRINT_CSS = """
@page {
  size: A4;
  margin: 16mm 15mm 18mm 15mm;
  @top-right { content: TITLE; font: 8pt sans-serif; color: #666; }
  @bottom-center { content: counter(page); font: 9pt sans-serif; color: #444; }
}
@page :first { counter-increment: page FIRST; @top-right { content: none; } }
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .header-article, .bd-header-article,
.prev-next-area, .bd-footer, .bd-footer-article, .bd-footer-content, footer,
.toggle-button, button.toggle-button, .headerlink, .copybtn, #pst-back-to-top,
.search-button-field, .skip-link, #jb-print-toc { display: none !important; }
.bd-main, .bd-content, .bd-article-container, .bd-article { max-width: none !important; }
.toggle-hidden { display: block !important; visibility: visible !important;
  height: auto !important; opacity: 1 !important; }
pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
.cell_input, .cell_output, img, figure, mjx-container[display="true"], div.math {
  break-inside: avoid; }
h1, h2, h3 { break-after: avoid; }
"""


@contextmanager
def serve(html: Path) -> Iterator[str]:
    """Serve `html` on 127.0.0.1 for the lifetime of the context; yield its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def pdf_pages(path: Path) -> int:
    """The number of pages of the PDF at `path` (poppler's ``pdfinfo``)."""
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True)
    for line in info.stdout.splitlines():
        if line.startswith("Pages:"):
            return int(line.split()[1])
    raise ValueError(f"`pdfinfo` reports no page count for {path}")


def first_page(html: Path) -> str:
    """The site's first page, relative to `html` (where ``index.html`` redirects to)."""
    index = (html / "index.html").read_text(encoding="utf-8")
    marker = "url="
    if marker not in index:
        raise ValueError(f"{html / 'index.html'} does not redirect to the book's first page")
    return index.split(marker, 1)[1].split('"', 1)[0].strip()


def print_book(
    html: Path, out: Path, *, chromium: Path = CHROMIUM, progress: bool = False
) -> list[tuple[str, int]]:
    """Print every page of the site built in `html` into the PDF `out`; return each page's path
    (relative to `html`) with the number of PDF pages it took, in the order printed."""
    from playwright.sync_api import sync_playwright

    if not (html / "index.html").exists():
        raise ValueError(f"no built site at {html}: run `make book` (or `make build`) first")
    if not chromium.exists():
        raise ValueError(f"no Chromium at {chromium}: run `make chromium` first")
    for tool in ("pdfinfo", "pdfunite"):
        if shutil.which(tool) is None:
            raise ValueError(f"`{tool}` is missing: run `make poppler` (Debian's poppler-utils)")
    out.parent.mkdir(parents=True, exist_ok=True)
    printed: list[tuple[str, int]] = []
    parts: list[Path] = []
    with (
        serve(html) as base,
        tempfile.TemporaryDirectory() as scratch,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=str(chromium), args=ARGS)
        page = browser.new_page(viewport={"width": 1000, "height": 1400})
        # offline: a request that leaves the machine is refused (the site serves everything)
        page.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith(base) else route.abort()
            ),
        )
        url: str | None = urljoin(base, first_page(html))
        next_number = 1
        while url is not None:
            relative = urlsplit(url).path.removeprefix(urlsplit(base).path)
            if relative in (done for done, _ in printed):
                raise ValueError(f"the chain of next links returns to {relative}")
            page.goto(url, wait_until="networkidle", timeout=TIMEOUT_MS)
            if page.locator("script[src*='mathjax/tex']").count():  # only pages with maths load it
                page.wait_for_function(
                    "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                    timeout=TIMEOUT_MS,
                )
                page.evaluate("() => MathJax.startup.promise")
            title = page.evaluate(
                "() => (document.querySelector('article h1') || document.querySelector('h1'))"
                ".innerText.replace(/#$/, '').trim()"
            )
            css = PRINT_CSS.replace("TITLE", json.dumps(title)).replace("FIRST", str(next_number))
            page.add_style_tag(content=css)
            page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
            part = Path(scratch) / f"{len(parts):03d}.pdf"
            page.pdf(path=str(part), prefer_css_page_size=True, print_background=True, outline=True)
            parts.append(part)
            printed.append((relative, pdf_pages(part)))
            next_number += printed[-1][1]
            if progress:
                print(f"{relative}: to page {next_number - 1}", file=sys.stderr)
            following = page.evaluate(
                "() => { const a = document.querySelector('a.right-next'); "
                "return a ? a.href : null; }"
            )
            url = following
        browser.close()
        subprocess.run(["pdfunite", *map(str, parts), str(out)], check=True)
    return printed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf" / "token-dynamics.pdf")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        pages = print_book(args.html, args.out, progress=True)
    except ValueError as error:
        print(f"book_pdf: {error}", file=sys.stderr)
        return 1
    print(
        f"{args.out}: {len(pages)} pages of the site, {pdf_pages(args.out)} PDF pages, "
        f"{time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
