"""The book's notebooks as code: find them, execute one, or extract their code for the linter.

Usage: ``python tools/notebook_code.py OUT`` writes the code cells of every notebook to
``OUT/<path>.py`` in order (jupytext's percent format), so that ruff can lint them.
``notebooks()`` and ``execute()`` serve the notebook tests and the execution benchmark.
"""

import sys
from pathlib import Path

import jupytext
import yaml
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
#: Seconds a cell may run: the book build's own setting (``execute.timeout`` in _config.yml).
CELL_TIMEOUT_S = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["execute"][
    "timeout"
]


def notebooks() -> list[Path]:
    """Every jupytext notebook under book/ (hidden and private folders skipped)."""
    book = ROOT / "book"
    return sorted(
        p
        for p in book.rglob("*.md")
        if not any(part.startswith((".", "_")) for part in p.relative_to(book).parts)
        and p.read_text(encoding="utf-8").lstrip().startswith("---\njupytext:")
    )


def execute(path: Path, *, timeout: float = CELL_TIMEOUT_S):
    """Run the notebook at `path` in a fresh ``python3`` kernel, in its own folder (as the book
    build does, with its timeout per cell), and return it executed; raise ``CellExecutionError``
    on the first failing cell."""
    return NotebookClient(
        jupytext.read(path),
        timeout=timeout,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()


def stderr_outputs(nb) -> list[tuple[int, str]]:
    """(cell index, first 300 characters) of every output an executed notebook wrote to
    stderr: a warning printed in a cell would be published with the page."""
    return [
        (i, out["text"][:300])
        for i, cell in enumerate(nb.cells)
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream" and out.get("name") == "stderr"
    ]


def main(out: Path) -> None:
    for path in notebooks():
        nb = jupytext.read(path)
        nb.cells = [cell for cell in nb.cells if cell.cell_type == "code"]
        target = out / path.relative_to(ROOT).with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(nb, target, fmt="py:percent")
    print(f"extracted the code of {len(notebooks())} notebooks to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
