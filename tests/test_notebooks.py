"""Execute every book notebook (MyST .md, jupytext) in a fresh kernel; a failing cell, or one
that writes to stderr (a warning), fails."""

import sys

import pytest

from .helpers import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from notebook_code import execute, notebooks, stderr_outputs

NOTEBOOKS = notebooks()


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_notebook_executes(path):
    nb = execute(path)  # the build's timeout per cell; raises CellExecutionError on a failing cell
    # nothing on stderr: a warning printed in a cell is published in the book (with the local
    # path of the library in it)
    stderr = stderr_outputs(nb)
    assert not stderr, f"cells writing to stderr (cell index, text): {stderr}"


def test_found_notebooks():
    assert NOTEBOOKS, "no jupytext notebooks found under book/"
    in_toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    missing = [p for p in NOTEBOOKS if p.relative_to(ROOT).with_suffix("").as_posix() not in in_toc]
    assert not missing, f"notebooks missing from _toc.yml: {missing}"
