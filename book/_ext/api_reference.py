"""Sphinx extension: the API reference, generated from each module's ``__all__``.

A page of ``book/api/`` holds one directive, ``.. api-module:: token_dynamics.attention``. It
renders the module's docstring, a summary table of its public names and, for each name of
``__all__``, the autodoc entry (signature, docstring through napoleon: formula, parameters,
raises, examples). A name moved or renamed in the library needs no edit here: the page follows
``__all__`` at every build.

Each object is documented once, in its *home*: the public module listing it in ``__all__``
whose name is the longest prefix of the object's ``__module__`` (``Softmax``, defined in
``token_dynamics.attention._variants``, lives on the ``token_dynamics.attention`` page). Other
modules re-exporting it list it with a link. A reference to any public path of an object
(``{py:func}`token_dynamics.integrate``` as well as
``{py:func}`token_dynamics.integrators.integrate```) resolves to its home entry; a reference
to a name the library does not have stays broken, and ``-n -W`` fails the build on it.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import inspect
import pkgutil
import re
import types

PACKAGE = "token_dynamics"
#: Libraries the docstrings and signatures name, which the offline build cannot link to.
EXTERNAL = r"(numpy|np|scipy|matplotlib|ipywidgets|ot|collections|typing|numbers)(\..*)?"


def public_modules(package: str = PACKAGE) -> list[str]:
    """Names of the package and of its submodules with no ``_``-prefixed part, sorted."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def public_names(module: types.ModuleType) -> list[str]:
    try:
        return list(module.__all__)
    except AttributeError:
        raise ValueError(f"`{module.__name__}` has no `__all__`: list its public names") from None


def home(name: str, obj: object, modules: list[str]) -> str:
    """The public module whose page documents `obj` (exported as `name`)."""
    listing = []
    for modname in modules:
        module = importlib.import_module(modname)
        if name in public_names(module) and getattr(module, name, None) is obj:
            listing.append(modname)
    defined = getattr(obj, "__module__", None) or ""
    prefixes = [m for m in listing if defined == m or defined.startswith(m + ".")]
    # longest prefix of the defining module; else the deepest module listing it
    return max(prefixes or listing, key=lambda m: (m.count("."), m))


def documented() -> list[tuple[str, str, object]]:
    """(module, name, object) of every public name listed where its page documents it.

    An object re-exported under several modules appears once per module that lists it, each
    time with its home; the test suite checks that each object has a single home.
    """
    modules = public_modules()
    found = []
    for modname in modules:
        module = importlib.import_module(modname)
        for name in public_names(module):
            obj = getattr(module, name)
            if not name.startswith("__") and _kind(obj) != "module":
                found.append((home(name, obj, modules), name, obj))
    return found


def _kind(obj: object) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return "data"


def _data_doc(modname: str, name: str) -> list[str] | None:
    """The ``#:`` comment documenting data `name`, read from `modname`, one of its private
    submodules or a private module of the package's ground floor (a re-exported constant has no
    ``__module__``, and autodoc would otherwise fall back to the docstring of its type, e.g.
    ``dict``)."""
    from sphinx.pycode import ModuleAnalyzer

    def private(package: str) -> list[str]:
        path = getattr(importlib.import_module(package), "__path__", [])
        return [f"{package}.{info.name}" for info in pkgutil.iter_modules(path)]

    ground = [m for m in private(PACKAGE) if m.rpartition(".")[2].startswith("_")]
    places = [modname, *private(modname), *ground]
    for place in places:
        try:
            docs = ModuleAnalyzer.for_module(place).find_attr_docs()
        except Exception:  # a module without source: look further
            continue
        if ("", name) in docs:
            return [line for line in docs[("", name)] if line is not None]
    return None


def module_rst(modname: str) -> list[str]:
    """The reStructuredText of one module's reference page (after its title)."""
    modules = public_modules()
    module = importlib.import_module(modname)
    here, elsewhere, submodules = [], [], []
    for name in public_names(module):
        if name.startswith("__"):  # __version__
            continue
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType):
            submodules.append(obj.__name__)
        elif home(name, obj, modules) == modname:
            here.append(name)
        else:
            elsewhere.append((name, home(name, obj, modules), _kind(obj)))
    lines = [f".. automodule:: {modname}", "   :no-members:", ""]
    if submodules:
        lines += [".. rubric:: Modules", "", ".. autosummary::", ""]
        lines += [f"   {sub.removeprefix(modname + '.')}" for sub in submodules] + [""]
    # data take their one-line summary from their type's docstring in autosummary (e.g. dict's):
    # they are listed only in full below
    summarised = [name for name in here if _kind(getattr(module, name)) != "data"]
    if summarised:
        lines += [".. rubric:: Summary", "", ".. autosummary::", ""]
        lines += [f"   {name}" for name in summarised] + [""]
    if elsewhere:
        lines += [".. rubric:: Also importable from here", ""]
        for name, where, kind in elsewhere:
            role = {"function": "func", "class": "class", "exception": "exc"}.get(kind, "obj")
            lines.append(f"- ``{modname}.{name}``: :py:{role}:`{where}.{name}`")
        lines.append("")
    for name in here:
        kind = _kind(getattr(module, name))
        doc = _data_doc(modname, name) if kind == "data" else None
        if doc is not None:
            lines += [f".. py:data:: {modname}.{name}", "   :module:", ""]
            lines += [f"   {line}".rstrip() for line in doc] + [""]
            continue
        lines.append(f".. auto{kind}:: {modname}.{name}")
        if kind in ("class", "exception"):
            lines.append("   :members:")
            if public_bases(list(getattr(module, name).__bases__)) != [object]:
                lines.append("   :show-inheritance:")
        lines.append("")
    return lines


def _resolve(path: str):
    """The object at dotted `path` (module attributes, then class attributes), or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = inspect.getattr_static(obj, part)
        except AttributeError:
            return None
        return obj
    return None


_FOOTNOTE = re.compile(r"^(\s*)\.\. \[(\w+)\] ")


def references_as_list(lines: list[str]) -> None:
    """Turn the unreferenced numpydoc footnotes ``.. [1] ...`` of `lines` into a list, in place.

    numpydoc's References section is a list of footnotes; a docstring that never cites them
    with ``[1]_`` would make docutils warn "Footnote [1] is not referenced" (fatal under -W).
    """
    text = "\n".join(lines)
    inside = None
    for i, line in enumerate(lines):
        match = _FOOTNOTE.match(line)
        if match and f"[{match[2]}]_" not in text:
            inside = match[1]
            lines[i] = f"{inside}- [{match[2]}] " + line[match.end() :]
        elif inside is not None and line.startswith(inside + "   ") and line.strip():
            lines[i] = inside + "  " + line[len(inside) + 3 :]
        else:
            inside = None


def public_bases(bases: list) -> list:
    """`bases` with each private class (``_Name``) replaced by its own public bases."""
    out = []
    for base in bases:
        if getattr(base, "__name__", "").startswith("_"):
            out += public_bases(list(base.__bases__))
        elif base not in out:
            out.append(base)
    return out


def setup(app):
    from docutils.statemachine import StringList
    from sphinx.util.docutils import SphinxDirective
    from sphinx.util.nodes import nested_parse_with_titles

    class ApiModule(SphinxDirective):
        """``.. api-module:: token_dynamics.x``: the reference of one module, from ``__all__``."""

        required_arguments = 1

        def run(self):
            from docutils import nodes

            modname = self.arguments[0]
            source = self.get_source_info()[0]
            for name in public_modules():  # the page changes whenever the library does
                spec = importlib.util.find_spec(name)
                if spec and spec.origin:
                    self.env.note_dependency(spec.origin)
            container = nodes.container()
            content = StringList(module_rst(modname), source=source)
            nested_parse_with_titles(self.state, content, container)
            return container.children

    def missing_reference(app, env, node, contnode):
        """A public path of a library object resolves to the object's home entry."""
        target = node.get("reftarget", "")
        if node.get("refdomain") != "py" or not target.startswith(PACKAGE + "."):
            return None
        obj = _resolve(target)
        if obj is None:
            return None
        domain = env.get_domain("py")
        for fullname, entry in domain.objects.items():
            if fullname != target and fullname.startswith(PACKAGE + ".") and not entry.aliased:
                if _resolve(fullname) is obj:
                    return domain.resolve_xref(
                        env, node["refdoc"], app.builder, "obj", fullname, node, contnode
                    )
        return None

    def config_inited(app, config):
        # builtins (``int``, ``ValueError`` in signatures and Raises sections) and the
        # libraries named in docstrings have no target in an offline build: not ours to link
        ignore = [(f"py:{role}", name) for name in dir(builtins) for role in ("class", "exc")]
        config.nitpick_ignore = [*config.nitpick_ignore, *ignore]
        config.nitpick_ignore_regex = [
            *config.nitpick_ignore_regex,
            *((f"py:{role}", EXTERNAL) for role in ("class", "obj", "func", "data", "exc")),
        ]

    def process_docstring(app, what, name, obj, options, lines):
        references_as_list(lines)

    def process_bases(app, name, obj, options, bases):
        bases[:] = public_bases(bases)

    app.add_directive("api-module", ApiModule)
    app.connect("autodoc-process-docstring", process_docstring)
    app.connect("autodoc-process-bases", process_bases)
    app.connect("missing-reference", missing_reference)
    app.connect("config-inited", config_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
