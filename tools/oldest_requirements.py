"""Print the oldest releases the library accepts, one ``name==version`` line each.

    python tools/oldest_requirements.py [EXTRA ...] > requirements-oldest.txt

Each dependency of ``pyproject.toml`` (and of the optional groups named, e.g. ``widgets``) is
pinned at its ``>=`` bound exactly, so that ``make test-oldest`` tests the bounds as written:
a bound that no longer holds fails there instead of on a reader's machine. A dependency without
a ``>=`` bound is an error, as is an interpreter other than the oldest Python the project
accepts (``requires-python``), since the oldest releases are tested on it.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
_BOUND = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*([0-9][^,;\s]*)\s*$")


def oldest(requirements: list[str]) -> list[str]:
    """``name==version`` for each ``name>=version`` of `requirements`.

    >>> oldest(["numpy>=2", "scipy>=1.13"])
    ['numpy==2', 'scipy==1.13']
    """
    pins = []
    for requirement in requirements:
        match = _BOUND.match(requirement)
        if match is None:
            raise SystemExit(
                f"pyproject.toml: {requirement!r} is not of the form `name>=version`; give every "
                "dependency a lower bound and nothing else, so that the oldest can be tested."
            )
        pins.append(f"{match[1]}=={match[2]}")
    return pins


def main(extras: list[str]) -> None:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    python = project["requires-python"].removeprefix(">=")
    running = ".".join(map(str, sys.version_info[:2]))
    if running != python:
        raise SystemExit(
            f"the oldest releases are tested on Python {python} (`requires-python`), not on "
            f"{running}: pass PYTHON=python{python}."
        )
    groups = project["optional-dependencies"]
    unknown = sorted(set(extras) - set(groups))
    if unknown:
        raise SystemExit(
            f"no optional dependencies named {unknown}; pyproject.toml has {list(groups)}."
        )
    requirements = project["dependencies"] + [r for extra in extras for r in groups[extra]]
    print("\n".join(oldest(requirements)))


if __name__ == "__main__":
    main(sys.argv[1:])
