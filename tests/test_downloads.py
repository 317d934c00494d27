"""The notebooks the site offers for download are plain notebooks that run without the book.

Needs the full edition built (``make build``; ``make site`` runs this file after it). Each
downloadable notebook (``_build/html/_sources/**/*.ipynb``, what the download button serves)
must have no MyST markup left in its Markdown and an install cell first, and must run in a
fresh kernel in which the book's tool chain cannot be imported: an import blocker, installed by
a ``sitecustomize`` on the kernel's path, makes Jupyter Book, Sphinx, docutils, myst-nb,
myst-parser, jupyter-cache and jupytext unimportable, so that only the library and its runtime
dependencies (with IPython and ipywidgets) are left. (A virtual environment built in the test
would say the same, at the price of a full install per run.)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "tools"))
from notebook_code import CELL_TIMEOUT_S, notebooks, stderr_outputs  # noqa: E402
from plain_notebook import raw_myst  # noqa: E402

#: The book's tool chain: nothing a downloaded notebook may need.
BLOCKED = (
    "jupyter_book",
    "sphinx",
    "sphinx_book_theme",
    "sphinx_exercise",
    "sphinx_proof",
    "sphinxcontrib",
    "docutils",
    "myst_nb",
    "myst_parser",
    "jupyter_cache",
    "jupytext",
)
BLOCKER = f'''
import sys

BLOCKED = {BLOCKED!r}


class _Blocker:
    """Refuse the book's tool chain, as in an environment where it is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
'''
CHECK_BLOCKED = f"""
import importlib
for name in {BLOCKED!r}:
    try:
        importlib.import_module(name)
    except ImportError:
        continue
    raise AssertionError(f"{{name}} is importable: the blocker is not in force")
"""


def downloads() -> list[Path]:
    return sorted((SITE / "_sources").rglob("*.ipynb"))


def test_every_notebook_page_offers_a_plain_notebook():
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built site at {SITE}: run `make build` first")
    offered = {p.relative_to(SITE / "_sources").with_suffix("") for p in downloads()}
    pages = {p.relative_to(ROOT).with_suffix("") for p in notebooks()}
    assert offered == pages


@pytest.mark.notebook
@pytest.mark.parametrize(
    "path", downloads(), ids=lambda p: str(p.relative_to(SITE / "_sources" / "book"))
)
def test_download_runs_without_the_book(path, tmp_path):
    notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    first = notebook.cells[0]
    assert first.cell_type == "code" and "%pip install" in first.source
    raw = {
        i: raw_myst(cell.source)
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "markdown" and raw_myst(cell.source)
    }
    assert not raw, f"MyST markup left in Markdown cells (cell index: markup): {raw}"
    # the outputs the site shows (glued values, figures) are in the text or under the cells
    assert any(cell.get("outputs") for cell in notebook.cells)

    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    notebook.cells.insert(1, nbformat.v4.new_code_cell(CHECK_BLOCKED))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), str(ROOT / "src")])
    run = tmp_path / "run"  # a folder of its own, as a reader's download folder
    run.mkdir()
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(run)}},
    )
    client.execute(env=env)
    stderr = stderr_outputs(notebook)
    assert not stderr, f"cells writing to stderr (cell index, text): {stderr}"
    # the glued values are displayed under their cells, by name, since no book shows them
    glued = [
        out
        for cell in notebook.cells
        for out in cell.get("outputs", [])
        if "scrapbook" in out.get("metadata", {})
    ]
    assert not glued, "myst-nb's glue ran: the notebook depends on the book's tool chain"
