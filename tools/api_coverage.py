"""List the public names whose docstring lacks a numpydoc section the API reference promises.

Usage: ``PYTHONPATH=src python tools/api_coverage.py`` prints one line per public name (from the
``__all__`` of every public module, at its home in the API reference) with the sections it
lacks. The rule, by kind of name:

- a function or a class: ``Parameters`` when it takes arguments (``Attributes`` will do for a
  result class, whose fields are its arguments) and ``Examples`` that import every name they
  use, so that they run when copied into a fresh interpreter. A result class is exemplified
  by the function returning it: its ``Examples`` section may show that function's call;
- an exception: a docstring of its own saying when it is raised (no example: raising it on
  purpose would teach nothing);
- data (a module constant): a ``#:`` comment describing it, which the reference renders (no
  example: its value is shown on the page).

Exit status 1 when something is missing; ``tests/test_docstrings.py`` turns it into a check.
"""

from __future__ import annotations

import ast
import builtins
import doctest
import importlib.util
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("api_reference", ROOT / "book/_ext/api_reference.py")
api_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(api_reference)


def _takes_arguments(obj) -> bool:
    try:
        parameters = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False
    return any(name not in ("self", "cls") for name in parameters)


def free_names(doc: str) -> list[str]:
    """Names the examples of `doc` use before binding them: what a reader who copies the
    examples into a fresh interpreter would miss (``np`` without ``import numpy as np``)."""
    bound = set(dir(builtins))
    free = []
    for example in doctest.DocTestParser().get_examples(doc):
        try:
            tree = ast.parse(example.source)
        except SyntaxError:
            continue
        stores, loads = set(), []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                stores |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                stores.add(node.name)
            elif isinstance(node, ast.arg):
                stores.add(node.arg)
            elif isinstance(node, ast.Name):
                (loads.append(node.id) if isinstance(node.ctx, ast.Load) else stores.add(node.id))
        free += [name for name in dict.fromkeys(loads) if name not in bound | stores | set(free)]
        bound |= stores
    return free


def lacks(modname: str, name: str, obj) -> list[str]:
    """The sections the docstring of public `name` (documented in `modname`) lacks."""
    kind = api_reference._kind(obj)
    if kind == "data":
        return [] if api_reference._data_doc(modname, name) else ["#: description"]
    if kind == "exception":
        return [] if (obj.__dict__.get("__doc__") or "").strip() else ["docstring"]
    doc = "\n" + (inspect.getdoc(obj) or "")
    if not doc.strip():
        return ["docstring"]
    wanted = ["Examples"]
    described = kind == "class" and "\nAttributes\n---" in doc  # a result container
    if kind in ("function", "class") and _takes_arguments(obj) and not described:
        wanted.insert(0, "Parameters")
    missing = [s for s in wanted if f"\n{s}\n---" not in doc]
    unimported = free_names(doc)
    if unimported:
        missing.append(f"import of {', '.join(unimported)} in Examples")
    return missing


def missing_sections() -> dict[str, list[str]]:
    """``"module.name (kind)"`` -> the sections its docstring lacks, for every public name."""
    entries = {(where, name): obj for where, name, obj in api_reference.documented()}
    missing = {}
    for (modname, name), obj in entries.items():
        found = lacks(modname, name, obj)
        if found:
            missing[f"{modname}.{name} ({api_reference._kind(obj)})"] = found
    return missing


if __name__ == "__main__":
    found = missing_sections()
    for name, lacks in found.items():
        print(f"{name}: no {', '.join(lacks)}")
    print(f"{len(found)} public names with a section missing", file=sys.stderr)
    sys.exit(1 if found else 0)
