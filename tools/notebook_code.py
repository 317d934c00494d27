"""The book's notebooks as code: find them, execute one, check their imports, or extract their
code for the linter.

Usage: ``python tools/notebook_code.py OUT`` writes the code cells of every notebook to
``OUT/<path>.py`` in order (jupytext's percent format), so that ruff can lint them.
``notebooks()`` and ``execute()`` serve the notebook tests and the execution benchmark;
``import_violations()`` checks the one import convention of the contributing guide.
"""

import ast
import importlib
import sys
import types
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


#: The only ``from token_dynamics.<module> import <name>`` lines a notebook may have.
ALLOWED_FROM = {("token_dynamics.book", "glue"), ("token_dynamics.exercises", "check_answer")}


def code_cells(path: Path) -> list[str]:
    """The source of every code cell of the jupytext notebook at `path`, in order."""
    return [cell.source for cell in jupytext.read(path).cells if cell.cell_type == "code"]


def _is_module(name: str) -> bool:
    """Whether ``token_dynamics.<name>`` is a module of the package."""
    try:
        importlib.import_module(f"token_dynamics.{name}")
    except ModuleNotFoundError:
        return False
    return True


def import_violations(source: str) -> list[str]:
    """What in the code `source` breaks the notebooks' import convention, one message per place.

    The convention (CONTRIBUTING.md, "Notebook"): ``import token_dynamics as td`` for the names
    the top level re-exports, used as ``td.name``; the modules a page uses imported by their own
    name, without alias (``from token_dynamics import plotting, stochastic``), used as
    ``plotting.plot_tokens``; and ``from token_dynamics.book import glue``,
    ``from token_dynamics.exercises import check_answer``. Any other import of the package, a
    ``td.<module>.<name>`` chain, a ``td.<name>`` the top level does not export, a
    ``<module>.<name>`` that the top level re-exports (write ``td.<name>``), or one that
    another module defines and this one re-exports (one home per object: write
    ``<home>.<name>``) is reported.
    """
    import token_dynamics as td

    violations: list[str] = []
    modules: set[str] = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "token_dynamics":
                    continue
                if (alias.name, alias.asname) != ("token_dynamics", "td"):
                    shown = alias.name + (f" as {alias.asname}" if alias.asname else "")
                    violations.append(
                        f"{where}: `import {shown}`; write `import token_dynamics as td`"
                    )
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == (
            "token_dynamics"
        ):
            for alias in node.names:
                if (node.module, alias.name) in ALLOWED_FROM and alias.asname is None:
                    continue
                if node.module == "token_dynamics" and alias.asname is None:
                    if _is_module(alias.name):
                        modules.add(alias.name)
                        continue
                    violations.append(
                        f"{where}: `from token_dynamics import {alias.name}` imports a name, not "
                        f"a module; use `td.{alias.name}`"
                    )
                    continue
                shown = f"from {node.module} import {alias.name}" + (
                    f" as {alias.asname}" if alias.asname else ""
                )
                violations.append(
                    f"{where}: `{shown}`; import the module by its own name "
                    f"(`from token_dynamics import <module>`) or use `td.<name>`"
                )
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            continue
        owner, name = node.value.id, node.attr
        where = f"line {node.lineno}"
        if owner == "td":
            if name not in td.__all__:
                violations.append(f"{where}: `td.{name}` is not exported by `token_dynamics`")
            elif isinstance(getattr(td, name), types.ModuleType):
                violations.append(
                    f"{where}: `td.{name}.` reaches a module through `td`; write "
                    f"`from token_dynamics import {name}` and use `{name}.<name>`"
                )
        elif owner in modules:
            module = importlib.import_module(f"token_dynamics.{owner}")
            obj = getattr(module, name, None)
            home = getattr(obj, "__module__", None) or ""
            if name in td.__all__ and getattr(td, name) is obj:
                violations.append(
                    f"{where}: `{owner}.{name}` is re-exported by the top level; write `td.{name}`"
                )
            elif home.startswith("token_dynamics.") and not (
                home == module.__name__ or home.startswith(module.__name__ + ".")
            ):
                public = home.split(".")[1]
                violations.append(
                    f"{where}: `{owner}.{name}` lives in `{public}`; write `{public}.{name}`"
                )
    return violations


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
