"""Shared pytest configuration: headless plotting, deterministic hypothesis, notebook timings."""

import os

import matplotlib
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")

# Deterministic property-based tests: the same examples on every run and every machine.
settings.register_profile(
    "book",
    derandomize=True,
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("book")


def pytest_terminal_summary(terminalreporter):
    """Print each notebook's execution time, so that the time budget stays visible: the book's
    notebooks (tests/test_notebooks.py, `make unit`) or their downloads (tests/test_downloads.py,
    `make site`, which `make test` runs instead)."""
    runs = ("test_notebook_executes", "test_download_runs_without_the_book")
    reports = [
        r
        for r in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
        if r.when == "call" and any(run in r.nodeid for run in runs)
    ]
    if not reports:
        return
    terminalreporter.section("notebook execution times")
    for report in sorted(reports, key=lambda r: -r.duration):
        name = report.nodeid.split("[", 1)[-1].rstrip("]")
        terminalreporter.write_line(f"{report.duration:7.1f} s  {report.outcome:6s}  {name}")
    total = sum(r.duration for r in reports)
    terminalreporter.write_line(f"{total:7.1f} s  total over {len(reports)} notebooks")
