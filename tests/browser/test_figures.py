"""Figures and explorers of the built site, read as a reader does.

Every image in a page's content is inside a numbered figure with a caption and alt text, and is
drawn at least at ``MIN_WIDTH_PX`` (readable at the page width) from a source with at least
twice the pixels (sharp on a high-density screen). Every explorer (a precomputed view of a
widget) responds: moving any of its controls changes the picture.
"""

import pytest

from ..book_sources import traceability
from .test_site import is_notebook

NOTEBOOKS = [p for p in traceability.toc_pages() if is_notebook(p)]
#: Pages whose notebooks hold an explorer (``token_dynamics.widgets``).
EXPLORER_PAGES = ["book/tokens/particles", "book/gaussian/cone"]
#: Narrowest rendered width of a figure: a 3-inch panel at the screen's 96 px per inch.
MIN_WIDTH_PX = 280

#: [src, has figure, caption text, alt, rendered width, natural width] of each content image
#: (notebook outputs and figures) outside explorers and animations.
IMAGES_JS = """() => Array.from(document.querySelectorAll("main .cell_output img, main figure img"))
  .filter(img => !img.closest(".td-explorer, .animation, .sig"))
  .map(img => {
    const fig = img.closest("figure");
    const cap = fig ? fig.querySelector("figcaption") : null;
    return [img.src.slice(-40), !!fig, cap ? cap.innerText.trim() : "",
            img.getAttribute("alt") || "", img.getBoundingClientRect().width,
            img.naturalWidth];
  })"""


@pytest.mark.browser
@pytest.mark.parametrize("page_name", NOTEBOOKS)
def test_every_figure_has_a_numbered_caption_alt_text_and_size(page, base_url, page_name):
    page.goto(f"{base_url}/{page_name}.html", wait_until="load")
    page.wait_for_timeout(300)
    for src, in_figure, caption, alt, width, natural in page.evaluate(IMAGES_JS):
        assert in_figure and caption.startswith("Figure "), f"{src}: no numbered caption"
        assert alt.strip() and not alt.startswith("_"), f"{src}: no alt text"
        assert width >= MIN_WIDTH_PX, f"{src}: drawn {width:.0f} px wide"
        assert natural >= 1.9 * width, f"{src}: {natural} px drawn over {width:.0f} px"


@pytest.mark.browser
@pytest.mark.parametrize("page_name", EXPLORER_PAGES)
def test_each_explorer_control_changes_the_picture(page, base_url, page_name):
    page.goto(f"{base_url}/{page_name}.html", wait_until="load")
    explorers = page.locator(".td-explorer")
    assert explorers.count() >= 1, "no precomputed explorer on the page"
    assert page.locator(".jupyter-widgets").count() == 0, "a widget without a kernel is shown"
    for e in range(explorers.count()):
        explorer = explorers.nth(e)
        img = explorer.locator("img")
        controls = explorer.locator("[data-control]")
        assert controls.count() >= 1
        # the player ran: it enabled the controls and removed the line saying they need it
        assert explorer.locator(".td-explorer-inert").count() == 0
        assert explorer.locator("[data-control]:disabled").count() == 0
        for c in range(controls.count()):
            control = controls.nth(c)
            before = img.get_attribute("src")
            if control.evaluate("el => el.tagName") == "SELECT":
                options = control.locator("option")
                current = control.input_value()
                other = next(
                    options.nth(k).get_attribute("value")
                    for k in range(options.count())
                    if options.nth(k).get_attribute("value") != current
                )
                control.select_option(other)
            else:
                value = int(control.input_value())
                top = int(control.get_attribute("max"))
                control.evaluate(  # as a drag does: a new value, then an input event
                    "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }",
                    str(value - 1 if value == top else value + 1),
                )
            after = img.get_attribute("src")
            assert after != before, f"explorer {e}: control {c} left the picture unchanged"
            assert img.evaluate("i => i.complete && i.naturalWidth > 0")
    assert not page.errors, f"page errors: {page.errors[:5]}"
