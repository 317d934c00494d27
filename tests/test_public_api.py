"""The public API is tidy: what a reader can reach is what the package declares.

- every module of the package, private files included, declares ``__all__``, and each name in it
  exists;
- the namespace of the package and of each public subpackage holds nothing public-looking that is
  not in its ``__all__`` (apart from its submodules): no ``td.version`` from importlib, no
  constant imported for internal use;
- a public single-file module defines no public-looking function or class outside ``__all__``
  (a helper is private);
- re-exports live in one place: each object is exported by one public subpackage or module (its
  home), and the top-level ``token_dynamics`` re-exports only such objects;
- the ground floor (``_validation``, ``_guards``, ``_linalg``) stays private: none of its
  helpers is exported.

Modules of other chapters that do not comply yet are listed in :data:`PENDING`; a listed
module that complies (or no longer exists) is accepted, so the list is edited by hand as it
shrinks.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import token_dynamics

#: Known deviations in packages other chapters are reworking: module -> the rule it breaks.
PENDING: dict[str, str] = {}
#: The private ground floor: argument checks and shared linear algebra.
GROUND_FLOOR = ("token_dynamics._validation", "token_dynamics._guards", "token_dynamics._linalg")

_WALK = pkgutil.walk_packages(token_dynamics.__path__, "token_dynamics.")
MODULES = ["token_dynamics", *sorted(m.name for m in _WALK)]
PUBLIC = [m for m in MODULES if not any(p.startswith("_") for p in m.split("."))]


def _is_package(module: types.ModuleType) -> bool:
    return hasattr(module, "__path__")


def stray_names(module: types.ModuleType) -> list[str]:
    """Public-looking names a reader of `module` meets that its ``__all__`` does not declare.

    For a package, every such name in ``dir`` that is not a submodule; for a single-file
    module, the functions and classes it defines itself (what it imports is not its own).
    """
    declared = set(getattr(module, "__all__", ()))
    out = []
    for name, value in vars(module).items():
        if name.startswith("_") or name in declared or isinstance(value, types.ModuleType):
            continue
        if _is_package(module) and name != "annotations":
            out.append(name)
        elif (inspect.isfunction(value) or inspect.isclass(value)) and (
            value.__module__ == module.__name__
        ):
            out.append(name)
    return sorted(out)


def problems(name: str) -> list[str]:
    module = importlib.import_module(name)
    if not hasattr(module, "__all__"):
        return ["no __all__"]
    found = [
        f"__all__ names {n!r}, which is not defined"
        for n in module.__all__
        if not hasattr(module, n)
    ]
    if len(set(module.__all__)) != len(module.__all__):
        found.append("__all__ lists a name twice")
    if name in PUBLIC:
        found += [f"stray name {n!r}" for n in stray_names(module)]
    return found


@pytest.mark.parametrize("name", [m for m in MODULES if m not in PENDING])
def test_every_module_declares_its_public_names(name):
    found = problems(name)
    assert not found, f"{name}: {'; '.join(found)}"


def test_the_checks_can_fail():
    """A planted package with importlib's `version`, and a module with a public helper."""
    package = types.ModuleType("planted")
    package.__path__ = []
    package.__all__ = ["f"]
    package.f = lambda: None
    package.version = lambda: "1.0"  # as `from importlib.metadata import version` would leave
    package.sub = types.ModuleType("planted.sub")
    assert stray_names(package) == ["version"]
    module = types.ModuleType("planted_module")
    exec("def public(): pass\ndef _private(): pass\nfrom math import sqrt", module.__dict__)
    module.__all__ = []
    assert stray_names(module) == ["public"]


def test_top_level_namespace():
    assert isinstance(token_dynamics.__version__, str)
    assert not hasattr(token_dynamics, "version")
    assert stray_names(token_dynamics) == []


def _exports() -> dict[int, list[str]]:
    """id(object) -> the public subpackages and modules whose ``__all__`` exports it."""
    where: dict[int, list[str]] = {}
    for name in PUBLIC[1:]:
        module = importlib.import_module(name)
        for key in getattr(module, "__all__", ()):
            value = getattr(module, key, None)
            if value is not None and not isinstance(
                value, (types.ModuleType, str, int, float, tuple)
            ):
                where.setdefault(id(value), []).append(f"{name}.{key}")
    return where


def test_each_object_is_exported_from_one_home():
    where = _exports()
    twice = [homes for homes in where.values() if len(homes) > 1]
    assert not twice, f"exported from more than one place: {twice}"
    # The top level re-exports, and only what a subpackage or module exports as its own.
    for key in token_dynamics.__all__:
        value = getattr(token_dynamics, key)
        if not isinstance(value, (types.ModuleType, str)):
            assert id(value) in where, f"token_dynamics.{key} has no home among the subpackages"


def test_the_ground_floor_stays_private():
    for name in PUBLIC:
        module = importlib.import_module(name)
        exported = [
            key
            for key in getattr(module, "__all__", ())
            if getattr(getattr(module, key), "__module__", "") in GROUND_FLOOR
        ]
        assert not exported, f"{name} exports ground-floor helpers {exported}"


#: Public functions that take a defaulted argument positionally on purpose, and why (the rule
#: of CONTRIBUTING.md, "One argument order": a probe is part of the state, a sampler takes its
#: sizes first, `glue` mirrors myst_nb's).
POSITIONAL_OPTIONS_PENDING = {
    "token_dynamics.book.glue": "mirrors myst_nb's glue(name, variable, display)",
    "token_dynamics.gradient_flow.energy_gradient": "points: the probe (state), default X",
    "token_dynamics.gradient_flow.first_variation": "points: the probe (state), default X",
    "token_dynamics.gradient_flow.softmax_metric_density": "points: the probe (state), default X",
    "token_dynamics.interpolation.as_sequences": "a checker: (value, name), as the ground floor's",
    "token_dynamics.interpolation.tikhonov_dataset": "a sampler: its sizes come first",
}


def positional_options(func: object) -> list[str]:
    """Parameters of `func` that have a default but may be passed by position."""
    return [
        p.name
        for p in inspect.signature(func).parameters.values()  # type: ignore[arg-type]
        if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty
    ]


def _public_functions() -> dict[str, object]:
    """Every public function under its home: the public subpackage or module exporting it."""
    found: dict[str, object] = {}
    for name in PUBLIC[1:]:  # the top level only re-exports (see the test below)
        module = importlib.import_module(name)
        for key in getattr(module, "__all__", ()):
            value = getattr(module, key)
            if inspect.isfunction(value):
                found[f"{name}.{key}"] = value
    return found


def test_options_are_keyword_only():
    """Options with a default are keyword-only in functions (a class takes its model's order)."""
    offenders = {
        name: positional_options(f)
        for name, f in _public_functions().items()
        if name not in POSITIONAL_OPTIONS_PENDING and positional_options(f)
    }
    assert not offenders, f"options with a default that may be passed by position: {offenders}"


def test_the_keyword_only_check_can_fail():
    namespace: dict[str, object] = {}
    exec("def f(X, beta=1.0, *, weights=None): pass\ndef g(X, *, beta=1.0): pass", namespace)
    assert positional_options(namespace["f"]) == ["beta"]
    assert positional_options(namespace["g"]) == []
