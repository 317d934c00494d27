"""Execution budget of the book: time each jupytext notebook in a fresh kernel, one at a time.

Usage: ``python benchmarks/notebooks.py [SUBSTRING ...]`` (only the notebooks whose path contains
one of the substrings). Prints one row per notebook (seconds, status) and the total; a notebook
that fails is reported as failed with its error and left out of the total. Budget (issue 9):
each notebook under 60 s, the whole book under 5 minutes on 2 cores.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from notebook_code import execute, notebooks  # noqa: E402

#: Per-notebook budget of the issue, in seconds.
NOTEBOOK_BUDGET_S = 60.0
#: Whole-book budget of the issue, in seconds.
BOOK_BUDGET_S = 300.0


def time_notebook(path: Path) -> tuple[float, str]:
    """Wall time of executing ``path`` in a fresh ``python3`` kernel and ``"ok"`` or the error."""
    start = time.perf_counter()
    try:
        execute(path)  # the book build's timeout per cell
    except CellExecutionError as exc:
        last = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return time.perf_counter() - start, f"FAILED: {last[:100]}"
    except Exception as exc:  # a timeout or a dead kernel: report it, keep going
        return time.perf_counter() - start, f"FAILED: {type(exc).__name__}: {str(exc)[:80]}"
    return time.perf_counter() - start, "ok"


def run(selection: list[str] | None = None) -> list[tuple[str, float, str]]:
    """Time the selected notebooks sequentially and print the table (markdown)."""
    rows = []
    paths = [p for p in notebooks() if not selection or any(s in p.as_posix() for s in selection)]
    print("| notebook | seconds | status |")
    print("|---|---:|---|")
    for path in paths:
        name = path.relative_to(ROOT).as_posix()
        seconds, status = time_notebook(path)
        if status == "ok" and seconds > NOTEBOOK_BUDGET_S:
            status = f"over the {NOTEBOOK_BUDGET_S:.0f} s budget"
        rows.append((name, seconds, status))
        print(f"| {name} | {seconds:.1f} | {status} |", flush=True)
    ok = [s for _, s, status in rows if not status.startswith("FAILED")]
    failed = len(rows) - len(ok)
    total = sum(ok)
    verdict = "within" if total <= BOOK_BUDGET_S else "OVER"
    print(
        f"\ntotal of the {len(ok)} notebooks that ran: {total:.1f} s ({verdict} the "
        f"{BOOK_BUDGET_S:.0f} s budget); {failed} failed and are not counted"
    )
    return rows


if __name__ == "__main__":
    run(sys.argv[1:] or None)
