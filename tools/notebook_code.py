"""The book's notebooks as code: find them, execute one, check their imports, or extract their
code for the linter.

Usage: ``python tools/notebook_code.py OUT`` writes the code cells of every notebook to
``OUT/<path>.py`` in order (jupytext's percent format), so that ruff can lint them;
``python tools/notebook_code.py --fix-imports FILE.md ...`` rewrites notebooks to the one
import convention (after a merge brings back an alias, say).
``notebooks()``, ``client()`` and ``execute()`` serve the notebook tests and the execution
benchmark, ``blocker()`` the runs of the plain notebooks without the book's tool chain,
``run_as_built()`` the build's execution beforehand (``tools/book_config.py --execute``);
``import_violations()`` checks the one import convention of the contributing guide.
"""

import ast
import importlib
import re
import sys
import types
from pathlib import Path
from typing import Any

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


def client(
    path: Path, *, timeout: float = CELL_TIMEOUT_S, folder: Path | None = None, **hooks: Any
) -> NotebookClient:
    """A client that runs the notebook at `path` in a fresh ``python3`` kernel, in `folder` (by
    default its own, as the book build does), with the build's timeout per cell and nbclient's
    `hooks` (``on_cell_executed=...``); its ``execute(env=...)`` raises ``CellExecutionError``
    on the first failing cell."""
    return NotebookClient(
        jupytext.read(path),
        timeout=timeout,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(folder or path.parent)}},
        **hooks,
    )


def execute(path: Path, *, timeout: float = CELL_TIMEOUT_S):
    """Run the notebook at `path` in a fresh ``python3`` kernel, in its own folder (as the book
    build does, with its timeout per cell), and return it executed; raise ``CellExecutionError``
    on the first failing cell."""
    return client(path, timeout=timeout).execute()


#: The book's tool chain: nothing a plain notebook (a download, or what Binder and Colab open)
#: may need.
BOOK_TOOLS = (
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
_BLOCKER = '''
import sys

BLOCKED = {names!r}


class _Blocker:
    """Refuse these modules, as in an environment where they are not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
'''


def blocker(folder: Path, names: tuple[str, ...] = BOOK_TOOLS) -> Path:
    """Write into `folder` a ``sitecustomize.py`` that makes the top-level modules `names`
    unimportable in a Python whose path starts with `folder` (a kernel's ``PYTHONPATH``), as if
    they were not installed; return `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_BLOCKER.format(names=names), encoding="utf-8")
    return folder


def run_as_built(path: Path, timeout: float = CELL_TIMEOUT_S):
    """Execute the notebook at `path` as the book build's cache mode does: read by myst-nb
    (whose reading its cache matches), run in its folder with the build's timeout per cell.
    Returns it with its run time in seconds and the traceback of a failure (else None)."""
    from jupyter_cache.executors.utils import single_nb_execution
    from myst_nb.core.read import myst_nb_reader_plugin

    nb = myst_nb_reader_plugin(str(path))
    result = single_nb_execution(nb, cwd=str(path.parent), timeout=timeout, allow_errors=False)
    return nb, result.time, result.exc_string if result.err is not None else None


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


_CODE_CELL = re.compile(r"(```\{code-cell\}[^\n]*\n)(.*?)(\n```)", re.S)


def _cell_body(source: str) -> tuple[str, str]:
    """Split a MyST code cell into its option header (``---`` block or ``:key:`` lines) and code."""
    lines = source.split("\n")
    i = 0
    if lines and lines[0] == "---":
        i = lines.index("---", 1) + 1
    else:
        while i < len(lines) and lines[i].startswith(":"):
            i += 1
    return "\n".join(lines[:i]), "\n".join(lines[i:])


def _resolve(path: str) -> Any:
    obj: Any = importlib.import_module("token_dynamics")
    for part in path.split(".")[1:]:
        if isinstance(obj, types.ModuleType):
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
                continue
            except ModuleNotFoundError:
                pass
        obj = getattr(obj, part)
    return obj


def fix_imports(path: Path) -> list[str]:
    """Rewrite the notebook at `path` to the one import convention of :func:`import_violations`.

    Every reference to the library in the code cells is rewritten from the page's own imports
    (``tg.solve_moments`` -> ``gaussian.solve_moments``, ``Softmax`` -> ``td.Softmax``,
    ``token_dynamics.plotting.x`` -> ``plotting.x``), the imports are replaced by
    ``import token_dynamics as td`` and one ``from token_dynamics import ...`` line, and module
    aliases in the prose (``tg.`` in a solution's code) are spelled out. Returns the modules the
    page now imports. Run ``ruff`` and the notebook afterwards: a name the rewrite could not see
    (a string, a ``getattr``) is left as it was.
    """
    import token_dynamics as td

    text = path.read_text(encoding="utf-8")
    cells = list(_CODE_CELL.finditer(text))
    alias: dict[str, str] = {}
    parsed = []
    for m in cells:
        header, body = _cell_body(m.group(2))
        tree = ast.parse(body)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "token_dynamics":
                        if a.asname:
                            alias[a.asname] = a.name
                        else:
                            alias["token_dynamics"] = "token_dynamics"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == (
                "token_dynamics"
            ):
                for a in node.names:
                    if (node.module, a.name) not in ALLOWED_FROM:
                        alias[a.asname or a.name] = f"{node.module}.{a.name}"
        parsed.append((header, body, tree))
    used: set[str] = set()
    uses_td = False

    def canonical(full: str) -> str:
        nonlocal uses_td
        obj, parts = _resolve(full), full.split(".")
        if isinstance(obj, types.ModuleType):
            used.add(parts[1])
            return parts[1]
        name = parts[-1]
        if name in td.__all__ and getattr(td, name) is obj:
            uses_td = True
            return f"td.{name}"
        home = getattr(obj, "__module__", "") or ""
        module = home.split(".")[1] if home.startswith("token_dynamics.") else parts[1]
        if module.startswith("_"):
            module = parts[1]
        used.add(module)
        return f"{module}.{name}"

    def edits(tree: ast.AST) -> list[tuple[ast.expr, str]]:
        out: list[tuple[ast.expr, str]] = []

        def visit(node: ast.AST) -> None:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                return
            if isinstance(node, ast.Attribute):
                chain, root = [], node
                while isinstance(root, ast.Attribute):
                    chain.append(root)
                    root = root.value
                if isinstance(root, ast.Name) and root.id in alias:
                    full, target = alias[root.id], None
                    for a in reversed(chain):
                        if not isinstance(_resolve(full), types.ModuleType):
                            break
                        full, target = f"{full}.{a.attr}", a
                    out.append((target if target is not None else root, canonical(full)))
                    return
            if isinstance(node, ast.Name) and node.id in alias:
                out.append((node, canonical(alias[node.id])))
                return
            for child in ast.iter_child_nodes(node):
                visit(child)

        visit(tree)
        return out

    def apply(src: str, found: list[tuple[ast.expr, str]]) -> str:
        data = src.encode()  # ast offsets count bytes
        starts = [0]
        for line in data.split(b"\n"):
            starts.append(starts[-1] + len(line) + 1)
        spans = [
            (
                starts[n.lineno - 1] + n.col_offset,
                starts[(n.end_lineno or n.lineno) - 1] + (n.end_col_offset or 0),
                new.encode(),
            )
            for n, new in found
        ]
        for a, b, new in sorted(spans, reverse=True):
            data = data[:a] + new + data[b:]
        return data.decode()

    bodies = [apply(body, edits(tree)) for _, body, tree in parsed]
    placed = False
    for k, body in enumerate(bodies):
        lines = body.split("\n")
        kill = [
            node
            for node in ast.parse(body).body
            if (
                isinstance(node, ast.Import)
                and any(a.name.split(".")[0] == "token_dynamics" for a in node.names)
            )
            or (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").split(".")[0] == "token_dynamics"
                and not all((node.module, a.name) in ALLOWED_FROM for a in node.names)
            )
        ]
        if not kill:
            continue
        first = kill[0].lineno - 1
        for node in reversed(kill):
            del lines[node.lineno - 1 : node.end_lineno]
        if not placed:
            block = ["import token_dynamics as td"] if uses_td else []
            if used:
                block.append("from token_dynamics import " + ", ".join(sorted(used)))
            lines[first:first] = block
            placed = True
        bodies[k] = "\n".join(lines)
    out, last = [], 0
    for m, (header, _, _), body in zip(cells, parsed, bodies, strict=True):
        out += [text[last : m.start(2)], (header + "\n" if header else "") + body]
        last = m.end(2)
    out.append(text[last:])
    result = "".join(out)
    # module aliases in the prose and in solutions' code: `tg.x` -> `gaussian.x`
    for short, full in alias.items():
        obj = _resolve(full)
        parts = full.split(".")
        if isinstance(obj, types.ModuleType) and len(parts) == 2 and short != parts[1]:
            result = re.sub(rf"(?<![\w.]){re.escape(short)}\.", f"{parts[1]}.", result)
    path.write_text(result, encoding="utf-8")
    return sorted(used)


def main(out: Path) -> None:
    for path in notebooks():
        nb = jupytext.read(path)
        nb.cells = [cell for cell in nb.cells if cell.cell_type == "code"]
        target = out / path.relative_to(ROOT).with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(nb, target, fmt="py:percent")
    print(f"extracted the code of {len(notebooks())} notebooks to {out}")


if __name__ == "__main__":
    if sys.argv[1] == "--fix-imports":
        for name in sys.argv[2:]:
            print(name, fix_imports(Path(name)))
    else:
        main(Path(sys.argv[1]))
