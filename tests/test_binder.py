"""Binder on this branch (the MyST sources, for authors): its environment is the book's, and
JupyterLab opens every page.

``binder/requirements.txt`` pins what the notebooks need at the versions of the root
requirements.txt, which builds and tests the book, without the book's tool chain.

``binder/postBuild`` makes JupyterLab open each ``.md`` file as a notebook, which jupytext's
contents manager reads from the text. Each page must read as MyST, as JupyterLab reads it: with
the jupytext configuration found from the page's folder (``[tool.jupytext]`` of
pyproject.toml). Left to jupytext's guess, a page without a jupytext header that uses ``:::``
fences (the introduction, the theory pages) is read as Pandoc Markdown, which needs pandoc:
JupyterLab 4.6 then shows "File Load Error ... pandoc was not found" and no page.
"""

import re
from pathlib import Path

import jupytext
import pytest
from jupytext.config import JupytextConfiguration, load_jupytext_config, preferred_format

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    p
    for p in (ROOT / "book").rglob("*.md")
    if not any(part.startswith((".", "_")) for part in p.relative_to(ROOT).parts)
)


#: What the root requirements.txt pins to build the book, and Binder does not need.
BOOK_ONLY = {"jupyter-book", "sphinx-proof", "sphinx-exercise", "sphinx-mathjax-offline"}


def pins(path: Path) -> dict[str, str]:
    """name (normalised) -> version of each ``name==version`` line of a requirements file."""
    found = re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", path.read_text("utf-8"), re.MULTILINE)
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in found}


def test_binder_pins_the_books_versions():
    """Every package the root requirements.txt pins, but the book's tool chain, is pinned in
    Binder's at the same version: a reader runs what CI ran."""
    book, binder = pins(ROOT / "requirements.txt"), pins(ROOT / "binder" / "requirements.txt")
    wanted = {name: version for name, version in book.items() if name not in BOOK_ONLY}
    assert {name: binder.get(name) for name in wanted} == wanted


def test_pages_found():
    # the notebooks, and the pages without a jupytext header: introduction, theory pages, ...
    assert len(PAGES) > 30 and ROOT / "book" / "intro.md" in PAGES


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_jupyterlab_reads_every_page_as_myst(path):
    # what jupytext's contents manager does on opening `path` in JupyterLab
    config = load_jupytext_config(str(path.parent)) or JupytextConfiguration()
    fmt = preferred_format(path.suffix, config.preferred_jupytext_formats_read)
    notebook = jupytext.reads(path.read_text(encoding="utf-8"), fmt=fmt, config=config)
    assert notebook.metadata["jupytext"]["text_representation"]["format_name"] == "myst"
