"""Measure the shape of the library: the numbers the "one house" issue asks for, in one run.

    PYTHONPATH=src .venv/bin/python tools/house_report.py [--no-mypy] [--no-duplicates]

Prints

- the public names of the package and of each public subpackage or module (its ``__all__``,
  submodules left out);
- the lines of each module of ``src/token_dynamics``, flagging those over the soft cap
  (:data:`SOFT_CAP`);
- the ``Any`` annotations per package (the word ``Any`` in code, not in docstrings or comments);
- the number of errors ``mypy`` reports at the setting of ``pyproject.toml``;
- the pairs of places that repeat six or more lines (the ``duplicates`` command, where it is
  installed), each classed by what the shared lines are: ``docstring`` (numpydoc sections that
  the house style repeats on purpose), ``boilerplate`` (as the command marks it: thin or common
  shapes), ``declaration`` (import lists, ``__all__`` lists, signatures) or ``code`` (the
  pairs to look at).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import io
import pkgutil
import re
import shutil
import subprocess
import sys
import tokenize
import types
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "token_dynamics"
#: The soft cap on a module's length, in lines (CONTRIBUTING.md and the design guide).
SOFT_CAP = 400
#: The classes of a pair of `duplicates`, the ones to look at first.
KINDS = ("code", "declaration", "docstring", "boilerplate")
#: A row of `duplicates`: ``D1 a.py:10-24 ~ b.py:40-54 [shape] [boilerplate] (+N more runs)``.
ROW = re.compile(r"^D\d+ (\S+):(\d+)-(\d+) ~ (\S+):(\d+)-(\d+)(.*)$")


def public_names() -> dict[str, list[str]]:
    """Module name -> its ``__all__`` without submodules, for the package and its public parts."""
    sys.path.insert(0, str(SRC))
    import token_dynamics

    walk = pkgutil.walk_packages(token_dynamics.__path__, "token_dynamics.")
    names = ["token_dynamics", *sorted(m.name for m in walk)]
    out = {}
    for name in names:
        if any(part.startswith("_") for part in name.split(".")):
            continue
        module = importlib.import_module(name)
        out[name] = [
            key
            for key in getattr(module, "__all__", ())
            if not isinstance(getattr(module, key, None), types.ModuleType)
        ]
    return out


def module_lines() -> dict[str, int]:
    """Path relative to ``src`` -> number of lines, for every module of the package."""
    return {
        str(path.relative_to(SRC)): len(path.read_text().splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def any_count(path: Path) -> int:
    """Occurrences of the name ``Any`` in the code of `path` (strings and comments left out)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return sum(tok.type == tokenize.NAME and tok.string == "Any" for tok in tokens)


def any_per_package() -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        key = "token_dynamics (top-level modules)" if len(rel.parts) == 1 else rel.parts[0]
        counts[key] += any_count(path)
    return counts


def mypy_errors() -> tuple[int, str]:
    """The number of errors mypy reports at the project's setting, and its last line."""
    mypy = Path(sys.executable).with_name("mypy")
    run = subprocess.run(
        [str(mypy) if mypy.exists() else "mypy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    last = (run.stdout.strip().splitlines() or ["(no output)"])[-1]
    found = re.search(r"Found (\d+) errors?", last)
    return (int(found.group(1)) if found else 0), last


def _kinds_of_lines(path: Path) -> tuple[set[int], set[int]]:
    """Line numbers of `path` in docstrings, and in declarations: imports, ``__all__`` lists and
    function signatures (from ``def`` to the body), which repeat by design, not as logic."""
    tree = ast.parse(path.read_text())
    docs: set[int] = set()
    decls: set[int] = set()

    def span(node: ast.AST) -> range:
        start = getattr(node, "lineno", 0)
        return range(start, (getattr(node, "end_lineno", None) or start) + 1)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docs.update(span(first))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            decls.update(range(node.lineno, node.body[0].lineno))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            decls.update(span(node))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            decls.update(span(node))
    return docs, decls


def classify(row: str, base: Path) -> tuple[str, str]:
    """(kind, row) for one row of `duplicates`: docstring, declaration, boilerplate or code.

    A pair is ``docstring`` (or ``declaration``) when at least half of the lines of each side
    are docstring lines (or docstring and declaration lines); ``code`` otherwise.
    """
    match = ROW.match(row)
    if not match:
        return "other", row
    a, a0, a1, b, b0, b1, rest = match.groups()
    if "boilerplate" in rest:
        return "boilerplate", row
    sides = [(base / a, int(a0), int(a1)), (base / b, int(b0), int(b1))]
    doc_share, decl_share = 1.0, 1.0
    for path, start, end in sides:
        docs, decls = _kinds_of_lines(path)
        lines = set(range(start, end + 1))
        doc_share = min(doc_share, len(lines & docs) / len(lines))
        decl_share = min(decl_share, len(lines & (docs | decls)) / len(lines))
    if doc_share >= 0.5:
        return "docstring", row
    return ("declaration" if decl_share >= 0.5 else "code"), row


def duplicate_pairs(most: int = 200) -> list[tuple[str, str]] | None:
    """The rows of ``duplicates --repo src --most N``, classified; None without the command."""
    command = shutil.which("duplicates")
    if command is None:
        return None
    run = subprocess.run(
        [command, "--repo", str(SRC), "--most", str(most), "--seconds", "120"],
        capture_output=True,
        text=True,
        check=False,
    )
    return [classify(line, SRC) for line in run.stdout.splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-mypy", action="store_true", help="skip the mypy run")
    parser.add_argument("--no-duplicates", action="store_true", help="skip `duplicates`")
    args = parser.parse_args()

    print("## Public names per subpackage or module")
    names = public_names()
    for name, public in names.items():
        print(f"{len(public):4d}  {name}")
    print(f"{sum(map(len, names.values())):4d}  in all (a re-export counted where it is listed)")

    print(f"\n## Lines per module (* over the soft cap of {SOFT_CAP})")
    lines = module_lines()
    for path, count in lines.items():
        print(f"{count:5d}{' *' if count > SOFT_CAP else '  '} {path}")
    over = [p for p, c in lines.items() if c > SOFT_CAP]
    print(f"{sum(lines.values()):5d}   in {len(lines)} modules, {len(over)} over the cap")

    print("\n## Any per package (in code, not in docstrings or comments)")
    counts = any_per_package()
    for key, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{count:4d}  {key}")
    print(f"{sum(counts.values()):4d}  in all")

    if not args.no_mypy:
        errors, last = mypy_errors()
        print(f"\n## mypy (setting of pyproject.toml): {errors} errors\n{last}")

    if not args.no_duplicates:
        rows = duplicate_pairs()
        if rows is None:
            print("\n## duplicates: the command is not installed here")
        else:
            kinds = Counter(kind for kind, _ in rows if kind != "other")
            header = next((r for k, r in rows if k == "other"), "")
            print(f"\n## duplicates --repo src --most 200\n{header}")
            print(", ".join(f"{kinds[k]} {k}" for k in KINDS))
            for kind in KINDS:
                for k, row in rows:
                    if k == kind:
                        print(f"  {kind:11s} {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
