"""Write the code cells of every book notebook to ``OUT/<path>.py`` so that ruff can lint them.

Usage: ``python tools/notebook_code.py OUT``. Each output file holds a notebook's code cells in
order (jupytext's percent format), so line numbers in ruff's report point at the cell content.
"""

import sys
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]


def notebooks() -> list[Path]:
    """Every jupytext notebook under book/ (hidden and private folders skipped)."""
    book = ROOT / "book"
    return sorted(
        p
        for p in book.rglob("*.md")
        if not any(part.startswith((".", "_")) for part in p.relative_to(book).parts)
        and p.read_text(encoding="utf-8").lstrip().startswith("---\njupytext:")
    )


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
