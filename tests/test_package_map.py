"""The package map that ends CONTRIBUTING.md is the package as it is.

The map is written by ``tools/package_map.py --write`` from the modules themselves (their
docstrings and ``__all__``), so it cannot be wrong when it is current; these tests make it
current: a module added, split, renamed or removed, or a public name moved, fails here until
the map is written again.
"""

from __future__ import annotations

import re

from .helpers import load_tool

package_map = load_tool("package_map")


def _map() -> str:
    return package_map.section(package_map.CONTRIBUTING.read_text())


def test_every_module_is_on_the_map_and_nothing_else():
    labels = re.findall(r"^\s*- `([^`]+)`:", _map(), flags=re.M)
    expected = []
    for name in package_map.modules():
        path = name.replace("token_dynamics", "", 1).lstrip(".").replace(".", "/")
        is_package = bool(getattr(__import__(name, fromlist=["_"]), "__path__", None))
        expected.append(path + "/" if path and is_package else (path + ".py" if path else name))
    missing = sorted(set(expected) - set(labels))
    extra = sorted(set(labels) - set(expected))
    assert not missing and not extra, (
        f"modules missing from the map: {missing}; on the map but gone: {extra}. "
        "Run `PYTHONPATH=src .venv/bin/python tools/package_map.py --write`."
    )


def test_the_map_is_current():
    assert _map() == package_map.package_map(), (
        "The package map of CONTRIBUTING.md is stale: run "
        "`PYTHONPATH=src .venv/bin/python tools/package_map.py --write`."
    )


def test_a_stale_map_is_detected():
    """The check can fail: a map without one of the modules differs from the generated one."""
    current = package_map.package_map()
    stale = "\n".join(line for line in current.splitlines() if "_gronwall.py" not in line) + "\n"
    assert stale != current
    text = f"x\n{package_map.BEGIN}\n{stale}{package_map.END}\n"
    assert package_map.section(text) == stale
