"""List the public names whose docstring lacks a numpydoc section the API reference promises.

Usage: ``PYTHONPATH=src python tools/api_coverage.py`` prints one line per public name (from the
``__all__`` of every public module, at its home in the API reference) with the sections it
lacks: ``Examples`` for every name, ``Parameters`` for a function or class that takes
arguments (``Attributes`` will do for a class). Exit status 1 when something is missing, so
that it can become a check once the library is complete.
"""

from __future__ import annotations

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


def missing_sections() -> dict[str, list[str]]:
    """``"module.name (kind)"`` -> the sections its docstring lacks, for every public name."""
    entries = {(where, name): obj for where, name, obj in api_reference.documented()}
    missing = {}
    for (modname, name), obj in entries.items():
        kind = api_reference._kind(obj)
        doc = "\n" + (inspect.getdoc(obj) or "")
        wanted = ["Examples"]
        described = kind == "class" and "\nAttributes\n---" in doc  # a result container
        if kind in ("function", "class") and _takes_arguments(obj) and not described:
            wanted.insert(0, "Parameters")
        lacks = [s for s in wanted if f"\n{s}\n---" not in doc] if doc.strip() else ["docstring"]
        if lacks:
            missing[f"{modname}.{name} ({kind})"] = lacks
    return missing


if __name__ == "__main__":
    found = missing_sections()
    for name, lacks in found.items():
        print(f"{name}: no {', '.join(lacks)}")
    print(f"{len(found)} public names with a section missing", file=sys.stderr)
    sys.exit(1 if found else 0)
