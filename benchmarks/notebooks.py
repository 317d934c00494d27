"""Execution budget of the book: run each jupytext notebook in a fresh kernel, one at a time.

Usage: ``python benchmarks/notebooks.py [SUBSTRING ...]`` (only the notebooks whose path contains
one of the substrings). Prints one row per notebook (seconds, status) and the total; a notebook
that fails is reported as failed with its error and left out of the total. Budget (issue 9):
each notebook under 60 s, the whole book under 5 minutes on 2 cores.

``python benchmarks/notebooks.py --binder [SUBSTRING ...] [--csv PATH]`` measures instead what
each plain notebook costs a reader on Binder (one CPU, a 2 GB memory limit): the kernel's peak
resident memory and its CPU time on one thread, written to ``benchmarks/results/notebooks.csv``
and each judged against ``BINDER_NOTEBOOK_MIB`` and ``NOTEBOOK_BUDGET_S``. The kernel runs the
code cells of the page's source, which are those of its plain notebook (``tools/plain_notebook.py``
rewrites the Markdown and adds the install cell, a no-op where the library is installed), in a
folder of its own, with every thread pool at one thread and, as on Binder, neither the book's
tool chain nor the array libraries Binder does not install (``NOT_ON_BINDER``) importable.
CPU time, not wall time: other processes on a shared machine steal the one, not the other.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from notebook_code import BOOK_TOOLS, blocker, client, execute, notebooks  # noqa: E402

#: Per-notebook budget of the issue, in seconds.
NOTEBOOK_BUDGET_S = 60.0
#: Whole-book budget of the issue, in seconds.
BOOK_BUDGET_S = 300.0
#: mybinder.org's memory limit per reader, in MiB: above it the kernel is killed, and the
#: reader sees only that it died.
BINDER_MEMORY_MIB = 2048.0
#: What one notebook's kernel may take of it: half. The Jupyter server lives in the same limit,
#: and JupyterLab keeps the kernel of a notebook the reader has closed running, so the reader
#: who goes on to the next notebook holds two kernels.
BINDER_NOTEBOOK_MIB = BINDER_MEMORY_MIB / 2
#: Array libraries that Binder's environment (binder/requirements.txt) does not install: a
#: notebook imports them only when they are there (book/scale.md), and they are not on Binder.
NOT_ON_BINDER = ("torch", "jax", "jaxlib", "cupy")
#: Every thread pool at one thread (Binder gives a reader one CPU): BLAS, OpenMP, the kernels'.
ONE_THREAD = {
    name: "1"
    for name in (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "TOKEN_DYNAMICS_THREADS",
    )
}
#: Where ``--binder`` writes its table.
CSV_PATH = ROOT / "benchmarks" / "results" / "notebooks.csv"


def failure(exc: Exception) -> str:
    """The status of a notebook whose run raised `exc`: a failing cell's last line of error, or
    the exception (a timeout, a dead kernel)."""
    if isinstance(exc, CellExecutionError):
        last = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return f"FAILED: {last[:100]}"
    return f"FAILED: {type(exc).__name__}: {str(exc)[:80]}"


def time_notebook(path: Path) -> tuple[float, str]:
    """Wall time of executing ``path`` in a fresh ``python3`` kernel and ``"ok"`` or the error."""
    start = time.perf_counter()
    try:
        execute(path)  # the book build's timeout per cell
    except Exception as exc:  # a failing cell, a timeout or a dead kernel: report it, keep going
        return time.perf_counter() - start, failure(exc)
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


@dataclass(frozen=True)
class Usage:
    """What one notebook cost its kernel: peak resident memory (MiB, the kernel and its child
    processes), CPU time (s, user and system, children included) up to the end of its last cell,
    the code cells (counted from 1, the install cell of the plain notebook not counted) that
    took the most CPU time and raised the peak most, and ``"ok"`` or the error."""

    peak_mib: float
    cpu_s: float
    slowest_cell: int
    largest_cell: int
    status: str


def _peak_mib(process: psutil.Process) -> float:
    """Peak resident memory of `process` and its living descendants, in MiB: the sum of their
    high-water marks (``VmHWM``, which the kernel keeps exactly; no sampling misses a spike)."""
    total = 0
    for p in [process, *process.children(recursive=True)]:
        try:
            status = Path(f"/proc/{p.pid}/status").read_text(encoding="ascii")
        except FileNotFoundError:  # a child that ended meanwhile
            continue
        total += int(
            next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]
        )
    return total / 1024


def _cpu_s(process: psutil.Process) -> float:
    """User and system CPU time of `process` and of its children it has waited for, in s."""
    t = process.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def binder_usage(path: Path) -> Usage:
    """Run the notebook at `path` as a Binder reader's kernel would (see the module docstring)
    and measure it, reading the kernel's process after each code cell."""
    if not Path("/proc/self/status").exists():
        raise RuntimeError("`--binder` reads the kernel's peak memory from /proc: run it on Linux")
    samples: list[tuple[float, float]] = []  # (peak MiB, CPU s): kernel up, then after each cell
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "run"  # a folder of its own, as a reader's
        folder.mkdir()
        env = {
            **os.environ,
            **ONE_THREAD,
            "PYTHONPATH": os.pathsep.join(
                [str(blocker(Path(tmp) / "blocker", BOOK_TOOLS + NOT_ON_BINDER)), str(ROOT / "src")]
            ),
        }

        def sample(**hook_arguments) -> None:
            kernel = psutil.Process(runner.km.provisioner.pid)
            samples.append((_peak_mib(kernel), _cpu_s(kernel)))

        runner = client(
            path,
            folder=folder,
            on_notebook_start=sample,  # the kernel is up, idle
            on_cell_executed=sample,  # after each code cell
        )
        status = "ok"
        try:
            runner.execute(env=env)
        except Exception as exc:  # a failing cell, a timeout or a dead kernel: report it
            status = failure(exc)
    if len(samples) < 2:
        return Usage(float("nan"), float("nan"), -1, -1, status)
    growth = [m - m0 for (m0, _), (m, _) in itertools.pairwise(samples)]
    cpu = [c - c0 for (_, c0), (_, c) in itertools.pairwise(samples)]
    return Usage(
        peak_mib=samples[-1][0],
        cpu_s=samples[-1][1],
        slowest_cell=1 + max(range(len(cpu)), key=cpu.__getitem__),
        largest_cell=1 + max(range(len(growth)), key=growth.__getitem__),
        status=status,
    )


def verdict(usage: Usage) -> str:
    """`usage` against Binder's memory and the reader's minute."""
    if usage.status != "ok":
        return usage.status
    found = []
    if usage.peak_mib > BINDER_MEMORY_MIB:
        found.append(f"OVER Binder's {BINDER_MEMORY_MIB:.0f} MiB")
    elif usage.peak_mib > BINDER_NOTEBOOK_MIB:
        found.append(f"over half of Binder's {BINDER_MEMORY_MIB:.0f} MiB")
    if usage.cpu_s > NOTEBOOK_BUDGET_S:
        found.append(f"over the {NOTEBOOK_BUDGET_S:.0f} s budget")
    return "; ".join(found) or "ok"


def run_binder(selection: list[str] | None = None, out: Path = CSV_PATH) -> list[dict]:
    """Measure the selected notebooks one after the other, print the table (markdown) and write
    it to `out` (CSV)."""
    paths = [p for p in notebooks() if not selection or any(s in p.as_posix() for s in selection)]
    print(
        f"one thread, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}\n\n"
        "| notebook | peak MiB | CPU s | slowest cell | largest cell | verdict |\n"
        "|---|---:|---:|---:|---:|---|",
        flush=True,
    )
    rows = []
    for path in paths:
        usage = binder_usage(path)
        row = {
            "notebook": path.relative_to(ROOT).with_suffix(".ipynb").as_posix(),
            "peak_mib": round(usage.peak_mib, 1),
            "cpu_s": round(usage.cpu_s, 1),
            "slowest_cell": usage.slowest_cell,
            "largest_cell": usage.largest_cell,
            "verdict": verdict(usage),
        }
        rows.append(row)
        print("| " + " | ".join(str(v) for v in row.values()) + " |", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["notebook"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"\nwritten to {out}")
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("selection", nargs="*", help="only the notebooks whose path contains one")
    parser.add_argument(
        "--binder", action="store_true", help="peak memory and one-thread CPU time per notebook"
    )
    parser.add_argument("--csv", type=Path, default=CSV_PATH, help="the table of --binder")
    args = parser.parse_args()
    if args.binder:
        run_binder(args.selection or None, args.csv)
    else:
        run(args.selection or None)
