"""What a reader relies on besides the pages themselves: search, indexes, the API reference,
the maths staying visible, no Live Code button that cannot run, and the checks page on a phone.

(`test_site.py` opens every page and fails on any JavaScript error, uncaught or logged.)
"""

import re

import pytest

from ..book_sources import traceability

TIMEOUT_MS = 60_000
#: TeX as it reaches a reader when nothing typesets it.
RAW_TEX = re.compile(r"\\[A-Za-z]+|\\\(|\$")
#: TeX of a page's HTML source, where MathJax has not run: ``\(``, ``\[``, commands of two letters
#: or more (code cells in snippets hold ``\n``).
RAW_TEX_IN_PAGES = re.compile(r"\\[(\[]|\\[A-Za-z]{2,}|\$")
#: A phone in portrait (CSS pixels), the width the checks page must read at.
PHONE = {"width": 390, "height": 844}
#: The checks page with every chapter folded (the summary line, one bar per chapter): its
#: height on the phone. Unfolded, the page was 24,000 px tall.
PHONE_PAGE_MAX_PX = 3_000


def wait_mathjax(page):
    page.wait_for_function(
        "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=TIMEOUT_MS
    )
    page.evaluate("() => MathJax.startup.promise")


def visible_count(page, selector):
    return page.evaluate(
        """s => [...document.querySelectorAll(s)].filter(e => {
             const box = e.getBoundingClientRect();
             return box.width > 0 && box.height > 0 && getComputedStyle(e).visibility !== "hidden";
           }).length""",
        selector,
    )


SEARCH_CONTROLS = ".search-button-field, .search-button, form.bd-search input"


@pytest.mark.browser
@pytest.mark.parametrize(
    "viewport", [{"width": 1280, "height": 1000}, PHONE], ids=["laptop", "phone"]
)
def test_one_search_box(page, base_url, viewport):
    page.set_viewport_size(viewport)
    page.goto(f"{base_url}/book/intro.html", wait_until="load")
    assert visible_count(page, SEARCH_CONTROLS) == 1
    assert not page.errors, page.errors


@pytest.mark.browser
def test_no_live_code_button(page, base_url):
    """No Thebe: a static page has no kernel (CONTRIBUTING.md, "The site")."""
    page.goto(f"{base_url}/book/tokens/particles.html", wait_until="load")
    html = page.content()
    assert "thebe" not in html.lower(), "a Thebe script or button is still on the page"
    assert page.locator("a[href*='mybinder.org']").count() >= 1, "the Binder launch link is gone"


@pytest.mark.browser
def test_general_index_lists_the_library(page, base_url):
    """genindex.html holds the library's names, each linking to its API reference entry."""
    page.goto(f"{base_url}/genindex.html", wait_until="load")
    links = page.locator("main a[href*='api/']")
    names = " ".join(links.all_inner_texts())
    for name in ("integrate()", "Softmax", "wasserstein2()"):
        assert name in names, f"{name} missing from the general index"
    href = page.locator("main a", has_text="integrate()").first.get_attribute("href")
    page.goto(f"{base_url}/{href}", wait_until="load")
    anchor = href.split("#")[1]
    assert page.locator(f"[id='{anchor}']").count() == 1, href


@pytest.mark.browser
def test_proof_index_is_readable(page, base_url):
    """prf-prf.html names statements as the book does ("Theorem 4.1: ..."), no raw label, no TeX."""
    page.goto(f"{base_url}/prf-prf.html", wait_until="load")
    entries = page.locator("main table.indextable a").all_inner_texts()
    statements = traceability.collect()
    assert len(entries) >= len(statements), (len(entries), len(statements))
    labels = {s.label for s in statements}
    assert not labels & set(entries), sorted(labels & set(entries))[:5]
    assert all(
        # "Theorem 4.1: title", or "Proposition: title" for a statement outside the numbered parts
        re.match(r"(Theorem|Proposition|Lemma|Corollary|Definition|\w+)[ :]", e)
        for e in entries
    )
    raw = [e for e in entries if RAW_TEX.search(e)]
    assert not raw, f"raw TeX in the proof index: {raw[:3]}"


@pytest.mark.browser
def test_api_reference_links_and_examples(page, base_url):
    """The API reference: every module page, each entry with a signature; the short path of a
    re-exported name (token_dynamics.integrate) resolves to the entry in its home module."""
    page.goto(f"{base_url}/book/api/index.html", wait_until="load")
    link = page.locator(
        "main a[href*='token_dynamics.integrators.html#token_dynamics.integrators.integrate']"
    )
    assert link.count() >= 1
    page.goto(f"{base_url}/book/api/token_dynamics.integrators.html", wait_until="load")
    entry = page.locator("dl.py.function:has(#token_dynamics\\.integrators\\.integrate)")
    assert entry.locator("dt .sig-param").count() >= 3, "no signature"
    text = entry.inner_text()
    for section in ("Parameters", "Returns", "Raises", "Examples", ">>>"):
        assert section in text, f"integrate's entry has no {section}"


MENU_SETTINGS = '{"explorer": true, "collapsible": true, "renderer": "SVG", "speech": true}'


@pytest.mark.browser
def test_mathjax_menu_settings_cannot_hide_the_maths(page, base_url):
    """A reader's saved MathJax menu settings that would need components the site does not
    serve (accessibility explorer, SVG output) leave the maths visible; their items are off."""
    page.add_init_script(f"localStorage.setItem('MathJax-Menu-Settings', '{MENU_SETTINGS}')")
    page.goto(f"{base_url}/book/meanfield/theory.html", wait_until="load")
    wait_mathjax(page)
    page.wait_for_timeout(1_000)  # a component load the settings asked for would start here
    containers = page.locator("main mjx-container")
    assert containers.count() > 10
    shown = page.evaluate(
        """() => [...document.querySelectorAll("main mjx-container")].filter(e => {
             const box = e.getBoundingClientRect();
             return box.width > 0 && box.height > 0 && e.getAttribute("jax") === "CHTML";
           }).length"""
    )
    assert shown == containers.count(), (shown, containers.count())
    disabled = page.evaluate(
        """() => { const menu = MathJax.startup.document.menu.menu;
                   return [menu.findID("Accessibility").disabled,
                           menu.findID("Settings", "Renderer").disabled]; }"""
    )
    assert disabled == [True, True]
    assert not page.missing and not page.external and not page.errors, (
        page.missing + page.external + page.errors
    )


@pytest.mark.browser
def test_search_snippets_have_no_raw_tex(page, base_url):
    page.goto(f"{base_url}/search.html?q=velocity", wait_until="load")
    page.wait_for_function(
        "() => (document.querySelector('p.search-summary') || {}).innerText?.includes('found')",
        timeout=TIMEOUT_MS,
    )
    page.wait_for_timeout(1_000)  # each snippet arrives with its page
    snippets = page.locator("ul.search li p.context").all_inner_texts()
    assert len(snippets) >= 5, snippets
    raw = [s for s in snippets if RAW_TEX_IN_PAGES.search(s)]
    assert not raw, f"raw TeX in search snippets: {raw[:2]}"
    assert not page.errors, page.errors


@pytest.mark.browser
def test_checks_page_on_a_phone(page, base_url):
    """At 390 px: folded per chapter, a short page; unfolded, no table wider than the screen;
    every test id links to its line in the repository."""
    page.set_viewport_size(PHONE)
    page.goto(f"{base_url}/book/checks.html", wait_until="load")
    wait_mathjax(page)
    folds = page.locator("main .statement-checks-chapter")
    chapters = {traceability.chapters()[s.docname] for s in traceability.collect()}
    assert folds.count() == len(chapters)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < PHONE_PAGE_MAX_PX, f"the folded checks page is {height} px tall"
    for i in range(folds.count()):
        folds.nth(i).locator("button.toggle-button").click()
    page.wait_for_timeout(500)
    too_wide = page.evaluate(
        """() => [...document.querySelectorAll("main table")].filter(t => {
             const box = t.getBoundingClientRect();
             return box.right > window.innerWidth + 1 || t.scrollWidth > t.clientWidth + 1;
           }).length"""
    )
    assert too_wide == 0, f"{too_wide} tables wider than the phone's screen"
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    statements = traceability.collect()
    links = page.locator("table.statement-checks a[href*='/blob/']")
    assert links.count() == sum(len(s.tests) for s in statements)
    expected = {
        traceability.source_url("", "", test, s.lines[test]).split("/blob/")[1].split("/", 1)[1]
        for s in statements
        for test in s.tests
    }
    hrefs = {href.split("/blob/")[1].split("/", 1)[1] for href in _hrefs(links)}
    assert hrefs == expected
    assert not page.errors, page.errors


def _hrefs(links):
    return [links.nth(i).get_attribute("href") for i in range(links.count())]
