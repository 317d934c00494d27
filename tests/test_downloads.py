"""The notebooks the site offers, to download or to launch, are plain notebooks that run
without the book.

Needs the full edition built and its notebooks gathered (``make build``, which runs ``make
notebooks``' step; ``make site`` runs this file after it). The notebooks that the launch buttons
open (``_build/notebooks/``, published on the notebooks branch) are the downloads
(``_build/html/_sources/**/*.ipynb``, what the download button serves), byte for byte, so
that one run of each checks both; every notebook page's Binder and Colab links open its
notebook there, on the configured branch, and Binder's environment there holds every module
the notebooks import. Each notebook must have no MyST markup nor a raw label (a target, a glued
name, a citation key of the book) left in its Markdown and an install cell first, and must run
in a fresh kernel in which the book's tool chain cannot be imported: an import blocker, installed by
a ``sitecustomize`` on the kernel's path, makes Jupyter Book, Sphinx, docutils, myst-nb,
myst-parser, jupyter-cache and jupytext unimportable, so that only the library and its runtime
dependencies (with IPython and ipywidgets) are left. (A virtual environment built in the test
would say the same, at the price of a full install per run.)
"""

from __future__ import annotations

import ast
import html
import importlib.metadata
import os
import re
import sys
from functools import cache
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
NOTEBOOKS = ROOT / "_build" / "notebooks"
sys.path.insert(0, str(ROOT / "tools"))
from notebook_code import (  # noqa: E402
    BOOK_TOOLS,
    CELL_TIMEOUT_S,
    blocker,
    notebooks,
    stderr_outputs,
)
from plain_notebook import defined_names, raw_myst, raw_names  # noqa: E402
from publish_notebooks import launch_config, source_commit  # noqa: E402

CHECK_BLOCKED = f"""
import importlib
for name in {BOOK_TOOLS!r}:
    try:
        importlib.import_module(name)
    except ImportError:
        continue
    raise AssertionError(f"{{name}} is importable: the blocker is not in force")
"""


def downloads() -> list[Path]:
    return sorted((SITE / "_sources").rglob("*.ipynb"))


@cache
def book_names() -> frozenset[str]:
    """Every label, glued name and citation key that the book's sources define."""
    sources = [*(ROOT / "book").rglob("*.md"), *(ROOT / "book").rglob("*.bib")]
    return frozenset(name for p in sources for name in defined_names(p.read_text("utf-8")))


def test_the_launched_notebooks_are_the_downloads():
    """``make notebooks`` gathers the downloads: the same files, so one run checks both."""
    if not (NOTEBOOKS / "README.md").exists():
        pytest.fail(f"no notebooks in {NOTEBOOKS}: run `make notebooks` (or `make build`)")
    launched = {p.relative_to(NOTEBOOKS) for p in NOTEBOOKS.rglob("*.ipynb")}
    offered = {p.relative_to(SITE / "_sources") for p in downloads()}
    assert launched == offered
    differ = [
        str(rel)
        for rel in offered
        if (NOTEBOOKS / rel).read_bytes() != (SITE / "_sources" / rel).read_bytes()
    ]
    assert not differ, f"launched notebooks that differ from their download: {differ}"


def test_every_launch_button_opens_its_notebook():
    """Each notebook page's Binder and Colab links open its plain notebook, at its path on the
    notebooks branch of the configured repository, where ``make notebooks`` wrote it."""
    config = launch_config(ROOT)
    owner, repo = re.fullmatch(
        r"https://github\.com/([^/]+)/([^/]+)", config["notebooks_repository"]
    ).groups()
    branch = config["branch"]
    binder = rf"https://mybinder\.org/v2/gh/{owner}/{repo}/([^/\"]+)\?urlpath=lab/tree/([^\"]+)"
    colab = rf"https://colab\.research\.google\.com/github/{owner}/{repo}/blob/([^/\"]+)/([^\"]+)"
    pages = [p.relative_to(ROOT).with_suffix("") for p in notebooks()]
    assert pages
    for page in pages:
        text = html.unescape((SITE / page).with_suffix(".html").read_text(encoding="utf-8"))
        # every link to either service, whatever it opens
        launches = re.findall(
            r'href="(https://(?:mybinder\.org|colab\.research\.google\.com)/[^"]*)"', text
        )
        for service, pattern in (("Binder", binder), ("Colab", colab)):
            links = [match.groups() for url in launches if (match := re.fullmatch(pattern, url))]
            assert len(links) == 1, f"{page}: {len(links)} {service} links to {owner}/{repo}"
            link_branch, path = links[0]
            assert (link_branch, path) == (branch, f"{page.as_posix()}.ipynb"), (service, page)
            assert (NOTEBOOKS / path).is_file(), f"{service} opens {path}, not generated"
        assert len(launches) == 2, f"{page}: launch links besides its notebook's: {launches}"


def test_cross_references_link_to_the_site():
    """Each link of a notebook into the site (``html.baseurl``) opens a built page, at an
    element of that page when it names one: the place the cross-reference points at."""
    base = launch_config(ROOT)["site"]
    assert base, "no `html.baseurl` in _config.yml: the notebooks link to no site"
    ids: dict[Path, set[str]] = {}
    broken, count = [], 0
    for path in downloads():
        notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
        for cell in notebook.cells:
            if cell.cell_type != "markdown":
                continue
            for url in re.findall(r"\]\((\S+?)\)", cell.source):
                if not url.startswith(base):
                    continue
                count += 1
                page, _, anchor = url.removeprefix(base).partition("#")
                built = SITE / page
                if built.is_file() and built not in ids:
                    ids[built] = set(re.findall(r'id="([^"]+)"', built.read_text("utf-8")))
                if not built.is_file() or (anchor and anchor not in ids[built]):
                    broken.append((path.name, url))
    assert count, "no cross-reference links to the site"
    assert not broken, f"links to no page or no element of it: {broken}"


def test_binder_of_the_notebooks_holds_what_they_import():
    """The environment published with the notebooks provides every module they import."""
    pinned = {
        re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", line)[0]).lower()
        for line in (NOTEBOOKS / "binder" / "requirements.txt").read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert "token-dynamics" in pinned and not (NOTEBOOKS / "binder" / "postBuild").exists()
    from IPython.core.inputtransformer2 import TransformerManager

    modules = set()
    for path in NOTEBOOKS.rglob("*.ipynb"):
        notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                tree = ast.parse(TransformerManager().transform_cell(cell.source))
                optional = {  # imports under `try: ... except ImportError` are optional
                    id(inner)
                    for node in ast.walk(tree)
                    if isinstance(node, ast.Try)
                    and any(
                        isinstance(h.type, ast.Name) and h.type.id == "ImportError"
                        for h in node.handlers
                    )
                    for stmt in node.body
                    for inner in ast.walk(stmt)
                }
                for node in ast.walk(tree):
                    if id(node) in optional:
                        continue
                    if isinstance(node, ast.Import):
                        modules |= {alias.name.split(".")[0] for alias in node.names}
                    elif isinstance(node, ast.ImportFrom) and node.level == 0:
                        modules.add(node.module.split(".")[0])
    distributions = importlib.metadata.packages_distributions()
    missing = {
        module
        for module in modules - set(sys.stdlib_module_names)
        if not {d.lower() for d in distributions.get(module, [])} & pinned
    }
    assert modules and not missing, f"imported but not in Binder's requirements: {missing}"


def test_every_notebook_page_offers_a_plain_notebook():
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built site at {SITE}: run `make build` first")
    offered = {p.relative_to(SITE / "_sources").with_suffix("") for p in downloads()}
    pages = {p.relative_to(ROOT).with_suffix("") for p in notebooks()}
    assert offered == pages


def test_explorers_open_as_their_static_view():
    """A download has no saved widget state (``slim_notebook``), so an explorer's widget view
    has no model: once the notebook is trusted, JupyterLab would show "Error displaying widget:
    model not found" instead of the explorer's static view (seen in JupyterLab 4.6). Every
    explorer output is its static view alone."""
    explorers, views = 0, []
    for path in downloads():
        notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
        assert "widgets" not in notebook.metadata, path
        for i, cell in enumerate(notebook.cells):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                explorers += 'class="td-explorer"' in "".join(data.get("text/html", ""))
                if "application/vnd.jupyter.widget-view+json" in data:
                    views.append(f"{path.relative_to(SITE / '_sources')}, cell {i}")
    assert explorers > 0, "no explorer's static view in any download"
    assert not views, f"widget views without their state: {views}"


@pytest.mark.notebook
@pytest.mark.parametrize(
    "path", downloads(), ids=lambda p: str(p.relative_to(SITE / "_sources" / "book"))
)
def test_download_runs_without_the_book(path, tmp_path):
    notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    first = notebook.cells[0]
    assert first.cell_type == "code" and "%pip install" in first.source
    # outside Binder (Colab, a plain Jupyter) the library installed is the one the notebook was
    # built from, at the commit Binder's environment pins, not the newest
    assert f'@{source_commit()[0]}"' in first.source, first.source
    raw = {
        i: raw_myst(cell.source)
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "markdown" and raw_myst(cell.source)
    }
    assert not raw, f"MyST markup left in Markdown cells (cell index: markup): {raw}"
    labels = {
        i: raw_names(cell.source, book_names())
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "markdown" and raw_names(cell.source, book_names())
    }
    assert not labels, f"labels shown raw in Markdown cells (cell index: names): {labels}"
    # the outputs the site shows (glued values, figures) are in the text or under the cells
    assert any(cell.get("outputs") for cell in notebook.cells)

    notebook.cells.insert(1, nbformat.v4.new_code_cell(CHECK_BLOCKED))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker(tmp_path / "blocker")), str(ROOT / "src")])
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
