"""Execute every book notebook (MyST .md, jupytext) in a fresh kernel; a failing cell fails."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from notebook_code import execute, notebooks  # noqa: E402

NOTEBOOKS = notebooks()
# seconds per cell; a notebook is meant to run in well under a minute in total
CELL_TIMEOUT = 300


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_notebook_executes(path):
    execute(path, timeout=CELL_TIMEOUT)  # raises CellExecutionError on the first failing cell


def test_found_notebooks():
    assert NOTEBOOKS, "no jupytext notebooks found under book/"
    in_toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    missing = [p for p in NOTEBOOKS if p.relative_to(ROOT).with_suffix("").as_posix() not in in_toc]
    assert not missing, f"notebooks missing from _toc.yml: {missing}"
