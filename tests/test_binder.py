"""Binder on this branch (the MyST sources, for authors): JupyterLab opens every page.

``binder/postBuild`` makes JupyterLab open each ``.md`` file as a notebook, which jupytext's
contents manager reads from the text. Each page must read as MyST, as JupyterLab reads it: with
the jupytext configuration found from the page's folder (``[tool.jupytext]`` of
pyproject.toml). Left to jupytext's guess, a page without a jupytext header that uses ``:::``
fences (the introduction, the theory pages) is read as Pandoc Markdown, which needs pandoc:
JupyterLab 4.6 then shows "File Load Error ... pandoc was not found" and no page.
"""

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
