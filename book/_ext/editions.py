"""Sphinx extension: what each edition of the book offers its reader.

- **The student edition** (``hide_solutions: true``, which ``make book EDITION=student`` sets)
  builds with the tag ``student``: a page shows text to students only with
  ``{only} student`` and hides it from them with ``{only} not student``.
- **Pages of one edition only.** The student edition leaves the instructor's guide out of its
  table of contents (``tools/student_config.py``); a reference to it inside an
  ``{only} not student`` block is not resolved there, and not reported as missing.
- **Downloads are plain notebooks.** Each executed notebook offered for download
  (``_sources/**/*.ipynb``) is rewritten by ``tools/plain_notebook.py``: its MyST markup as plain
  Markdown (numbers and titles of cross-references read from this build, glued values from
  myst-nb's ``<page>.glue.json`` in the text, solutions folded), each cross-reference a link
  to its place on the published site (``html.baseurl`` of ``_config.yml``; no links without
  it), and a first cell that installs the library when it is missing.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str):
    """The module of ``tools/<name>.py``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _citations(app) -> dict[str, str]:
    """Citation key -> "Castin et al. (2025)", from the book's bibliography."""
    from pybtex.database import parse_file

    found = {}
    for bibfile in app.config.bibtex_bibfiles:
        path = Path(app.srcdir) / bibfile
        for key, entry in parse_file(str(path)).entries.items():
            people = entry.persons.get("author", [])
            names = [" ".join(person.last_names) for person in people]
            who = names[0] + (" et al." if len(names) > 2 else "") if names else key
            if len(names) == 2:
                who = f"{names[0]} and {names[1]}"
            found[key] = f"{who} ({entry.fields.get('year', 'n.d.')})".replace("{", "").replace(
                "}", ""
            )
    return found


def resolver(app, docname: str):
    """``resolve(role, target, text)``: the text this build shows for a cross-reference made
    on the page `docname` (its number, title or citation), for ``plain_notebook``."""
    from sphinx.util import docname_join

    env = app.env
    std = env.get_domain("std")
    citations = _citations(app)
    exercises = getattr(env, "sphinx_exercise_registry", {})

    def number(doc: str, node_id: str, figtype: str | None = None) -> tuple[str, str] | None:
        for kind, ids in env.toc_fignumbers.get(doc, {}).items():
            if (figtype is None or kind == figtype) and node_id in ids:
                return kind, ".".join(map(str, ids[node_id]))
        return None

    def named(kind: str, numbered: str, text: str | None) -> str:
        if text:
            return text.replace("{number}", numbered).replace("%s", numbered)
        fmt = app.config.numfig_format.get(kind, kind.capitalize() + " %s")
        return fmt % numbered

    def resolve(role: str, target: str, text: str | None) -> str:
        if role == "prf:ref" and target in env.proof_list:
            entry = env.proof_list[target]
            found = number(entry["docname"], target, entry["countertype"])
            return text or f"{entry['realtype'].capitalize()} {found[1] if found else ''}".strip()
        if role.split(":")[0] == "cite":
            return "; ".join(citations.get(key.strip(), key.strip()) for key in target.split(","))
        if role == "doc":
            doc = docname_join(docname, target)
            return text or (env.titles[doc].astext() if doc in env.titles else target)
        if role == "eq":
            equations = env.get_domain("math").data.get("objects", {})
            doc = equations.get(target, (docname,))[0]
            found = number(doc, f"equation-{target}", "displaymath")
            return text or (f"({found[1]})" if found else f"({target})")
        if target in exercises:
            doc = exercises[target]["docname"]
            found = number(doc, target)
            return named(found[0], found[1], text) if found else text or target
        if target in std.labels or target in std.anonlabels:
            doc, label_id = std.anonlabels[target]
            found = number(doc, label_id)
            if role == "numref" and found:
                return named(found[0], found[1], text)
            if text:
                return text
            if target in std.labels:
                return std.labels[target][2]
            return named(*found, None) if found else target
        if target in env.proof_list:  # a {ref} to a statement
            return resolve("prf:ref", target, text)
        return text or target

    return resolve


def locator(app, docname: str):
    """``locate(role, target)``: the URL on the published site (``html_baseurl``) of what a
    cross-reference made on the page `docname` points at, for ``plain_notebook``; None when
    the site has no base URL or the target is not found."""
    from sphinx.util import docname_join

    base = app.config.html_baseurl
    env = app.env
    std = env.get_domain("std")
    exercises = getattr(env, "sphinx_exercise_registry", {})
    bibliography = {
        citation.key: (citation.bibliography_key.docname, citation.citation_id)
        for citation in env.domaindata.get("cite", {}).get("citations", [])
    }
    equations = env.get_domain("math").data.get("objects", {})

    def url(doc: str, anchor: str = "") -> str:
        page = base.rstrip("/") + "/" + app.builder.get_target_uri(doc)
        return page + (f"#{anchor}" if anchor else "")

    def locate(role: str, target: str) -> str | None:
        if not base:
            return None
        if role.split(":")[0] == "cite":
            return url(*bibliography[target]) if target in bibliography else None
        if role == "doc":
            doc = docname_join(docname, target)
            return url(doc) if doc in env.titles else None
        if role == "eq":
            return url(equations[target][0], f"equation-{target}") if target in equations else None
        if target in env.proof_list:  # {prf:ref}, or a {ref} to a statement
            return url(env.proof_list[target]["docname"], target)
        if target in exercises:
            return url(exercises[target]["docname"], target)
        if target in std.anonlabels:
            return url(*std.anonlabels[target])
        return None

    return locate


def _plain_downloads(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    sources = Path(app.outdir) / "_sources"
    if not sources.is_dir():  # the student edition publishes no sources
        return
    from myst_nb.sphinx_ext import OUTPUT_FOLDER  # where myst-nb writes executed notebooks

    converter = _tool("plain_notebook")
    repository = app.config.html_theme_options.get("repository_url", "")
    commit = _built_commit()
    for path in sources.rglob("*.ipynb"):
        docname = path.relative_to(sources).with_suffix("").as_posix()
        notebook = json.loads(path.read_text(encoding="utf-8"))
        # myst-nb keeps the hidden glued values out of the notebook, in <page>.glue.json
        glue_file = Path(app.outdir).parent / OUTPUT_FOLDER / f"{docname}.glue.json"
        glued = {}
        if glue_file.exists():
            glued = {
                name: output["data"]
                for name, output in json.loads(glue_file.read_text(encoding="utf-8")).items()
            }
        plain = converter.plain_notebook(
            notebook,
            resolver(app, docname),
            repository=repository,
            commit=commit,
            glued=glued,
            locate=locator(app, docname),
        )
        path.write_text(json.dumps(plain, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _built_commit() -> str:
    """The commit checked out in the book's repository (its downloads install the library at
    it, as Binder's environment does), or "" outside a git checkout."""
    try:
        return _tool("publish_notebooks").source_commit(ROOT)[0]
    except (OSError, RuntimeError):  # no git, or not a checkout
        return ""


def _left_out(app, domain, node):
    """True for a reference inside an ``{only}`` block that this build leaves out: its target
    may be a page of the other edition only (Sphinx resolves references before it removes
    such blocks)."""
    from sphinx import addnodes

    parent = node.parent
    while parent is not None:
        if isinstance(parent, addnodes.only) and not app.builder.tags.eval_condition(
            parent["expr"]
        ):
            return True
        parent = parent.parent
    return None


def _student_tag(app, config):
    if config.hide_solutions:
        app.tags.add("student")


def setup(app):
    app.connect("config-inited", _student_tag)
    app.connect("warn-missing-reference", _left_out)
    # after book_site's build-finished handler, which gives the notebooks their outputs
    app.connect("build-finished", _plain_downloads, priority=700)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
