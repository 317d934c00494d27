"""Write the package map that ends CONTRIBUTING.md: which module owns which object.

    PYTHONPATH=src .venv/bin/python tools/package_map.py [--write]

The map is generated from the package itself: one line per module of ``src/token_dynamics``
with the first sentence of its docstring and the public names it is the home of (its
``__all__``; for a module without one, the functions and classes it defines). Without
``--write`` it prints the map; with it, it replaces the section between :data:`BEGIN` and
:data:`END` in CONTRIBUTING.md. ``tests/test_package_map.py`` fails when the section differs
from what this writes, so a module added, split or renamed shows up there: run ``--write``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
#: The markers around the generated section of CONTRIBUTING.md.
BEGIN = "<!-- package map: written by tools/package_map.py --write, do not edit by hand -->"
END = "<!-- end of package map -->"
#: At most this many names per module; the others are counted ("+ 12 more").
MAX_NAMES = 8


def modules() -> list[str]:
    sys.path.insert(0, str(ROOT / "src"))
    import token_dynamics

    walk = pkgutil.walk_packages(token_dynamics.__path__, "token_dynamics.")
    return ["token_dynamics", *sorted(m.name for m in walk)]


def summary(module: types.ModuleType) -> str:
    """The first sentence of the module's docstring, without the words that say it is private."""
    text = " ".join((module.__doc__ or "").strip().split("\n\n")[0].split())
    first = re.split(r"(?<=\.)\s(?=[A-Z])", text, maxsplit=1)[0].rstrip(".:")
    first = re.sub(r"^token_dynamics:\s*", "", first)  # the package's title line
    first = re.sub(r"\s*\((private|private module)[^)]*\)$", "", first)
    return first[:1].upper() + first[1:]


def _defined_elsewhere(value: object, home: str) -> bool:
    """A function or class imported from another module (a re-export, not an own name)."""
    return (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ != home


def own_names(module: types.ModuleType) -> list[str]:
    """The names `module` is the home of: its ``__all__`` without submodules and re-exports."""
    if hasattr(module, "__all__"):
        names = [
            n
            for n in module.__all__
            if not isinstance(getattr(module, n, None), types.ModuleType)
            and not _defined_elsewhere(getattr(module, n, None), module.__name__)
        ]
        return names if not hasattr(module, "__path__") else []
    return [
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and (inspect.isfunction(v) or inspect.isclass(v))
        and v.__module__ == module.__name__
    ]


def package_map() -> str:
    lines = [
        "The package, module by module: what each one is the home of (its `__all__`; a",
        "subpackage re-exports the names of its private files). Written from the code by",
        "`tools/package_map.py --write`; `tests/test_package_map.py` fails when it is stale.",
        "",
    ]
    for name in modules():
        module = importlib.import_module(name)
        path = name.replace("token_dynamics", "", 1).lstrip(".").replace(".", "/")
        is_package = hasattr(module, "__path__")
        if not path:
            label = "`token_dynamics`"
        else:
            label = f"`{path}/`" if is_package else f"`{path}.py`"
        indent = "  " if "/" in path else ""
        names = own_names(module)
        shown = ", ".join(f"`{n}`" for n in names[:MAX_NAMES])
        if len(names) > MAX_NAMES:
            shown += f" (+ {len(names) - MAX_NAMES} more)"
        lines.append(f"{indent}- {label}: {summary(module)}." + (f" {shown}." if shown else ""))
    return "\n".join(lines) + "\n"


def section(text: str) -> str:
    """The generated part of `text`, between the markers (empty when they are missing)."""
    if BEGIN not in text or END not in text:
        return ""
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help="rewrite the section of CONTRIBUTING.md"
    )
    args = parser.parse_args()
    generated = package_map()
    if not args.write:
        print(generated, end="")
        return 0
    text = CONTRIBUTING.read_text()
    if BEGIN not in text:
        text = text.rstrip("\n") + f"\n\n## Package map\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    CONTRIBUTING.write_text(f"{head}{BEGIN}\n{generated}{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
