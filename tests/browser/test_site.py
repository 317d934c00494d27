"""Open every page of the table of contents in headless Chromium, offline.

For each page: no request leaves 127.0.0.1, no 4xx, no page error, the maths is typeset with no
TeX error, no display equation is wider than the page and no raw TeX is left in the prose,
every image has loaded. On notebook pages: the executed .ipynb is offered for download, jshtml
animations show a frame, and widgets render their saved state.
"""

import json
import re
from pathlib import Path

import pytest

from ..book_sources import traceability
from .conftest import HTML, ROOT

# MathJax has to start up and typeset every page (the checks page holds hundreds of formulas):
# generous for a loaded 2-core machine.
TIMEOUT_MS = 60_000


def is_notebook(page: str) -> bool:
    source = ROOT / f"{page}.md"
    return source.exists() and source.read_text(encoding="utf-8").lstrip().startswith(
        "---\njupytext:"
    )


PAGES = traceability.toc_pages()

#: Text of the page as a reader sees it, minus code, cell outputs and typeset maths.
PROSE_JS = """() => {
  const skip = "pre, code, .sig, script, style, svg, mjx-container, .cell_output, textarea";
  const root = document.querySelector("main") || document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const parts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.parentElement.closest(skip)) parts.push(n.textContent);
  }
  return parts.join(" ");
}"""
RAW_TEX = re.compile(r"\$|\\[A-Za-z]+")
#: Display equations reaching past the right edge of the article (MathJax 3 does not break
#: lines, and the overflow is clipped): [pixels over, TeX source].
WIDE_MATH_JS = """() => {
  const article = document.querySelector("article") || document.querySelector("main");
  const right = article.getBoundingClientRect().right;
  const out = [];
  for (const el of article.querySelectorAll("mjx-container[display='true']")) {
    const box = el.getBoundingClientRect();
    const over = Math.max(box.right - right, el.scrollWidth - el.clientWidth);
    if (over > 2) {
      const item = MathJax.startup.document.getMathItemsWithin(el)[0];
      out.push([Math.round(over), item ? item.math.slice(0, 80) : ""]);
    }
  }
  return out;
}"""


def test_toc_pages_were_built():
    missing = [p for p in PAGES if not (HTML / f"{p}.html").exists()]
    assert not missing, f"pages in _toc.yml with no HTML: {missing}"


def numbered_chapters() -> dict[str, list[str]]:
    """Chapter page -> its pages (itself, then its sections), for the numbered parts of _toc.yml."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    chapters = {}
    for part in toc["parts"]:
        if part.get("numbered"):
            for chapter in part["chapters"]:
                sections = [s["file"] for s in chapter.get("sections", [])]
                chapters[chapter["file"]] = [chapter["file"], *sections]
    return chapters


CAPTION_NUMBER = re.compile(r'<span class="caption-number">([A-Z][a-z]+) ([0-9.]+) </span>')
CHAPTER_NUMBER = re.compile(r'<h1><span class="section-number">([0-9]+)\. </span>')


def test_numbering_is_chapter_scoped():
    """Chapters count 1, 2, ... in reading order; each statement, exercise, figure and equation
    of a chapter (theory page and notebooks) is numbered k.m within chapter k, m from 1 up."""
    chapters = numbered_chapters()
    assert chapters, "no numbered part in _toc.yml"
    for k, (chapter, pages) in enumerate(chapters.items(), start=1):
        html = (HTML / f"{chapter}.html").read_text(encoding="utf-8")
        title = CHAPTER_NUMBER.search(html)
        assert title and title.group(1) == str(k), f"{chapter} is not numbered chapter {k}"
        seen: dict[str, set[int]] = {}
        for name in pages:
            html = (HTML / f"{name}.html").read_text(encoding="utf-8")
            captions = CAPTION_NUMBER.findall(html)
            equations = re.findall(r'<span class="eqno">\(([0-9.]+)\)', html)
            for kind, number in [*captions, *(("Equation", n) for n in equations)]:
                head, _, m = number.rpartition(".")
                assert head == str(k), f"{kind} {number} on {name}, in chapter {k}"
                counter = kind if kind in ("Exercise", "Equation", "Figure") else "statement"
                seen.setdefault(counter, set()).add(int(m))
        for counter, numbers in seen.items():
            assert numbers == set(range(1, len(numbers) + 1)), (chapter, counter, numbers)


@pytest.mark.browser
@pytest.mark.parametrize("page_name", PAGES)
def test_page_renders_offline(page, base_url, page_name):
    page.goto(f"{base_url}/{page_name}.html", wait_until="load")
    html = page.content()
    if "mjx" in html or "math notranslate" in html:
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=TIMEOUT_MS
        )
        page.evaluate("() => MathJax.startup.promise")
        raw_math = page.locator("main .math").count()
        typeset = page.locator("main mjx-container").count()
        assert typeset >= raw_math > 0 or raw_math == 0, (typeset, raw_math)
        # unknown macros render red, TeX syntax errors as merror
        bad = page.locator("mjx-merror, mjx-mtext[style*='color: red']")
        assert bad.count() == 0, [bad.nth(i).inner_text() for i in range(min(bad.count(), 5))]
        wide = page.evaluate(WIDE_MATH_JS)
        assert not wide, f"display maths wider than the page (px over, TeX): {wide[:3]}"
    # maths the parser missed reaches the reader as raw TeX: dollars or backslash commands in
    # the prose (a `$$` display glued to the line above is read as inline dollars, and the
    # dollars after it pair up wrongly)
    prose = page.evaluate(PROSE_JS)
    stray = [prose[max(0, m.start() - 40) : m.end() + 40] for m in RAW_TEX.finditer(prose)]
    assert not stray, f"raw TeX in the text: {stray[:3]}"

    images = page.locator("main img")
    for i in range(images.count()):
        ok = images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0")
        assert ok, f"image {i} did not load: {images.nth(i).get_attribute('src')[:120]}"

    if is_notebook(page_name):
        # the download button's local file (the launch buttons' Binder and Colab links end in
        # .ipynb too, but point at the published notebooks)
        link = page.locator("a[href$='.ipynb']:not([href^='http'])")
        assert link.count() >= 1, "no executed .ipynb offered for download"
        href = link.first.get_attribute("href")
        response = page.request.get(f"{base_url}/{Path(page_name).parent}/{href}")
        assert response.ok and b'"cells"' in response.body(), href
        cells = json.loads(response.body())["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        assert not code or any(c["outputs"] for c in code), f"{href}: executed with no output"
        if page.locator(".animation").count():
            assert page.locator(".animation img").first.evaluate("i => i.naturalWidth > 0")
        if "application/vnd.jupyter.widget-view+json" in html:
            page.wait_for_selector(".jupyter-widgets", timeout=TIMEOUT_MS)
            page.wait_for_selector(
                ".widget-output img, .jupyter-widgets-output-area img", timeout=TIMEOUT_MS
            )

    page.wait_for_timeout(200)  # let late requests and errors arrive
    assert not page.external, f"requests left the machine: {page.external[:5]}"
    assert not page.missing, f"missing assets: {page.missing[:5]}"
    assert not page.errors, f"page errors: {page.errors[:5]}"


@pytest.mark.browser
def test_checks_page_lists_statements(page, base_url):
    page.goto(f"{base_url}/book/checks.html", wait_until="load")
    rows = page.locator("table.statement-checks tbody tr")
    assert rows.count() == len(traceability.collect())
    assert "no check yet" not in page.inner_text("main")


@pytest.mark.browser
def test_search_works_offline(page, base_url):
    """The site search (Sphinx's index, loaded from the site itself) finds the Sinkhorn pages."""
    page.goto(f"{base_url}/search.html?q=sinkhorn", wait_until="load")
    page.wait_for_selector("ul.search li", timeout=TIMEOUT_MS)
    page.wait_for_timeout(500)  # results are appended one by one
    titles = page.locator("ul.search li a").all_inner_texts()
    assert any("Sinkhorn" in title for title in titles), titles
    assert not page.external, f"requests left the machine: {page.external[:5]}"
    assert not page.errors, f"page errors: {page.errors[:5]}"


#: The whole site on disk (`du`): without the 24 MB of MathJax that no page loads, source maps,
#: and text copies of animations in the downloadable notebooks it weighs about 24.5 MB.
SITE_MAX_BYTES = 25_000_000


def test_site_size():
    size = sum(p.stat().st_size for p in HTML.rglob("*") if p.is_file())
    biggest = sorted(HTML.rglob("*"), key=lambda p: p.stat().st_size if p.is_file() else 0)[-5:]
    assert size < SITE_MAX_BYTES, f"the site weighs {size / 1e6:.1f} MB; biggest: {biggest}"
