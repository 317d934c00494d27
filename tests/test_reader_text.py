"""Every page of both editions reads as a book: no unrendered MyST markup in the prose (a proof
that shows ``:::{dropdown} The proof`` as text), and no test machinery where a reader looks
(``@pytest.mark...``, ``tests/test_x.py``, test names), except in the code of the page that
lists each statement's tests, which explains it (``tests/reader_text.py`` says what counts).

Needs both editions built (``make build``; ``make site`` runs this file after it). The PDF's text
is checked in ``tests/test_pdf.py``, which prints one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .reader_text import CHECKS_PAGE, MYST, TOOLING, offences, pages, visible_text

ROOT = Path(__file__).resolve().parents[1]
SITES = {"full": ROOT / "_build" / "html", "student": ROOT / "_build" / "student" / "html"}


@pytest.fixture(scope="module", params=sorted(SITES))
def site(request):
    site = SITES[request.param]
    if not (site / "index.html").exists():
        pytest.fail(f"no built site at {site}: run `make build` first")
    return site


def test_no_markup_and_no_test_machinery_where_a_reader_looks(site):
    found = {str(p.relative_to(site)): offences(site, p) for p in pages(site)}
    found = {page: what for page, what in found.items() if what}
    assert not found, f"pages that show MyST markup or the test suite to a reader: {found}"


def test_the_checks_page_shows_the_test_suite_in_code_only(site):
    # the pattern finds the test suite where the book does show it (so the test above can
    # fail), and that is in code, never in the prose
    prose, code = visible_text((site / CHECKS_PAGE).read_text(encoding="utf-8"))
    assert "@pytest.mark.statement" in code and TOOLING.search(code)
    assert not TOOLING.search(prose), TOOLING.findall(prose)


def test_what_counts_as_prose_code_and_maths():
    page = (
        '<div class="proof admonition"><p>Proof. :::{dropdown} The proof</p></div>'
        "<p>see {prf:ref}`sync-thm-dissipation` and <code>{prf:ref}`label`</code></p>"
        '<p>error <span class="math notranslate">\\(X_{\\text{ref}} - X_{eq}\\)</span></p>'
        "<pre>import pytest<br>@pytest.mark.statement('label')</pre>"
        "<script>var x = ':::{';</script><p>tested in tests/test_float32.py</p>"
    )
    prose, code = visible_text(page)
    assert [m.group(0) for m in MYST.finditer(prose)] == [":::{", "{prf:ref}"]
    assert "{text}" not in prose + code and "X_" not in prose + code  # maths is neither
    assert MYST.search(code) and TOOLING.findall(code) == ["@pytest"]
    assert TOOLING.findall(prose) == ["tests/", "test_float32.py"]
