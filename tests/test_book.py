"""token_dynamics.book.glue: myst-nb's glue inside the book, a named display without it."""

import re
import sys

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from token_dynamics.book import glue


@pytest.fixture
def shell():
    yield InteractiveShell.instance()  # display() needs a running IPython
    InteractiveShell.clear_instance()


@pytest.fixture
def without_myst_nb(monkeypatch):
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # `import myst_nb` now fails


def test_in_the_book_glue_is_myst_nbs(shell):
    with capture_output() as captured:
        glue("answer", 42, display=False)
    (output,) = captured.outputs
    assert output.metadata["scrapbook"]["name"] == "answer"
    # hidden: the value is stored under myst-nb's prefix, which Jupyter does not display
    assert set(output.data) == {"application/papermill.record/text/plain"}


def test_without_myst_nb_the_value_is_shown_with_its_name(shell, without_myst_nb):
    with capture_output() as captured:
        glue("answer", 42, display=False)
    (output,) = captured.outputs
    assert output.data == {"text/plain": "answer: 42"}


def test_without_myst_nb_a_figure_is_shown(shell, without_myst_nb):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from IPython.core.pylabtools import select_figure_formats

    select_figure_formats(shell, {"png"})  # what a Jupyter kernel's inline backend does
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    with capture_output() as captured:
        glue("fig", fig, display=False)
    plt.close(fig)
    (output,) = captured.outputs
    assert "image/png" in output.data


def test_the_name_must_be_a_string():
    with pytest.raises(TypeError, match="`name` must be a string"):
        glue(3, 1.0)


# --- the book's sources: what the reader reads ---------------------------------------------------

from .book_sources import unowned_numbers  # noqa: E402
from .helpers import ROOT  # noqa: E402

BOOK_PAGES = sorted(p for p in (ROOT / "book").rglob("*.md") if "_ext" not in p.parts)
# the first line of a proof's body: sphinx-proof glues "Proof. " to it, so a fence there is
# printed as text (`Proof. :::{dropdown} The proof`)
_PROOF_START = re.compile(
    r"^[ \t]*(?:`{3,}|:{3,})\{prf:proof\}[^\n]*\n(?:[ \t]*:[\w-]+:[^\n]*\n)*(?P<first>[^\n]*)",
    re.MULTILINE,
)


def test_pages_found():
    assert len(BOOK_PAGES) >= 20, BOOK_PAGES


@pytest.mark.parametrize("page", BOOK_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_numbered_result_of_a_paper_names_the_paper(page):
    # the book's own statements are numbered by the build ({prf:ref}); a number written out is
    # a paper's, and next to the book's own numbers the reader must be told whose
    bare = unowned_numbers(page.read_text(encoding="utf-8"))
    assert not bare, f"name the paper of each numbered result (Agazzi et al., Theorem 1.4): {bare}"


@pytest.mark.parametrize("page", BOOK_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_proof_opens_with_a_line_of_prose(page):
    text = page.read_text(encoding="utf-8")
    bad = [
        m["first"]
        for m in _PROOF_START.finditer(text)
        if not m["first"].strip() or m["first"].lstrip().startswith(("```", ":::"))
    ]
    assert not bad, f"a proof whose body opens with a blank line or a fence: {bad}"


@pytest.mark.parametrize(
    ("text", "bare"),
    [
        ("Agazzi et al. (2026), Theorem 1.1, Proposition 2.1, Remarks 1.2 and 1.3.", []),
        ("Table 1 of Agazzi et al. {cite}`agazzi2026stochastic`, checks their Lemma 4.1.", []),
        ("Agazzi et al., Figures 2–6: a grid. As in Raimond (1999, Theorem 3.1).", []),
        ("| {prf:ref}`sto-lem-norm` | Agazzi et al., Lemma 2.8 | here |", []),
        ("```{code-cell} ipython3\nL = 4  # the constants of Theorem 1.1\n```\n", []),
        ("the proof of the paper's main result, Theorem 1.4.", ["Theorem 1.4"]),
        ("## Figure 1: the noise alone\n\nAgazzi et al. show it.", ["Figure 1"]),
        ("Agazzi et al. (2026), Remark 1.5. The rate of Lemma 4.1 is sharp.", ["Lemma 4.1"]),
        ("| Agazzi et al. (2026) | Lemmas 2.6 and 2.7 |", ["Lemmas 2.6 and 2.7"]),
        (
            "```{code-cell} ipython3\n---\nmystnb:\n  figure:\n    caption: Prop. 1.5, measured\n"
            "---\nx = 1\n```\n",
            ["Prop. 1.5"],
        ),
    ],
)
def test_which_numbers_name_their_paper(text, bare):
    found = unowned_numbers(text)
    assert len(found) == len(bare) and all(b in f for b, f in zip(bare, found, strict=True)), found


# what the browser stage finds on the built site, caught here in the sources: a page title goes
# into the sidebar of every page (maths there loads nowhere on pages without maths, and MathJax
# waits forever); a labelled heading is the text of every `{ref}` to it, where TeX is not typeset;
# a line of inline maths that starts with `+ ` or `- ` is read as a list item
_TITLE = re.compile(r"^# (?P<title>.*)$", re.MULTILINE)
_LABELLED_HEADING = re.compile(r"^\([\w-]+\)=\n#+ (?P<title>.*)$", re.MULTILINE)
_CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)


def _outside_code(text: str) -> str:
    return _CODE_CELL.sub("", text)


@pytest.mark.parametrize("page", BOOK_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_titles_and_labelled_headings_have_no_tex(page):
    text = _outside_code(page.read_text(encoding="utf-8"))
    titles = [m["title"] for m in _TITLE.finditer(text)][:1]
    bad = [t for t in titles if "$" in t]
    bad += [m["title"] for m in _LABELLED_HEADING.finditer(text) if "\\" in m["title"]]
    assert not bad, f"say it in words (the sidebar and `{{ref}}` links show TeX raw): {bad}"


@pytest.mark.parametrize("page", BOOK_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_cell_has_a_caption_and_alt_text(page):
    bad = [
        m["body"].split("\n---\n")[-1].strip().splitlines()[0]
        for m in _CODE_CELL.finditer(page.read_text(encoding="utf-8"))
        if "plt.show()" in m["body"] and not ("caption:" in m["body"] and "alt:" in m["body"])
    ]
    assert not bad, f"a figure cell needs `mystnb: figure: caption` and `image: alt`: {bad}"
