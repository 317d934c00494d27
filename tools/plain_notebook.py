"""A book notebook as a plain Jupyter notebook: MyST markup converted to Markdown.

The site offers each notebook page's executed notebook for download. Its Markdown cells are
written in MyST for Jupyter Book: directives (``{exercise}``, ``{solution}``, ``{glue:figure}``,
``{prf:theorem}``, admonitions), roles (``{glue:text}``, ``{prf:ref}``, ``{ref}``, ``{cite}``,
...) and targets (``(label)=``), which Jupyter shows as raw text. :func:`plain_notebook` rewrites
them as plain Markdown, as QuantEcon's downloads do:

- an exercise or a statement becomes a bold heading with its number and title; a proof starts
  with *Proof.*; a solution is folded in ``<details>`` under "Solution to Exercise 3.2" (a
  gated one, whose code cells lie between ``{solution-start}`` and ``{solution-end}``, gets
  that heading unfolded: Markdown cannot fold other cells);
- ``{glue:text}`` becomes the glued value (formatted as the role asks), ``{glue:figure}`` the
  glued image (a cell attachment) with its number and caption; hidden glue outputs left in the
  cells are dropped;
- a cross-reference becomes the text the book shows for it ("Theorem 3.2", a section's title,
  "Castin et al. (2025)"), as given by ``resolve(role, target, text)``, linked to the place on
  the published site that ``locate(role, target)`` gives (no link where it gives None);
- a first cell (:func:`install_cell`) installs the library when ``import token_dynamics``
  fails (Colab, a plain Jupyter), so that the notebook runs without Jupyter Book.

The Sphinx extension ``book/_ext/editions.py`` applies it to the downloads at the end of the
build, with a resolver that reads the build's numbers and titles and a locator that reads its
pages; ``tools/publish_notebooks.py`` gathers the same notebooks for the launch buttons.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable

#: Where myst-nb's ``glue(..., display=False)`` hides a value in the cell's outputs.
GLUE_PREFIX = "application/papermill.record/"
#: The library's extras that the notebooks need beyond its core: the explorers of
#: ``token_dynamics.widgets`` need ipywidgets, which a plain JupyterLab or VS Code lacks (Colab
#: and Binder have it).
EXTRAS = ("widgets",)
#: The first cell of every download (``{requirement}``: the library from the repository).
INSTALL_CELL = """\
# Outside the book's environment (a plain Jupyter, Colab): install the library if missing.
try:
    import token_dynamics  # noqa: F401
except ImportError:
    %pip install --quiet "{requirement}"
"""

_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*)$")
_OPTION = re.compile(r"^:(?P<key>[\w-]+):[ \t]*(?P<value>.*)$")
_ROLE = re.compile(r"\{(?P<role>[\w:-]+)\}`(?P<content>[^`]*)`")
_TARGET = re.compile(r"^\([\w:.-]+\)=[ \t]*$\n?", re.MULTILINE)
_EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
_ADMONITIONS = {"note", "tip", "warning", "important", "caution", "attention", "hint", "seealso"}

Resolver = Callable[[str, str, str | None], str]
Locator = Callable[[str, str], str | None]
#: Roles of sphinxcontrib-bibtex: their target is a comma-separated list of citation keys.
_CITE_ROLES = {"cite", "cite:p", "cite:t", "cite:ps", "cite:ts"}


def glue_values(notebook: dict) -> dict[str, dict]:
    """The glued values of an executed notebook: name -> MIME bundle (prefix removed)."""
    found = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is not None:
                found[name] = {
                    key.removeprefix(GLUE_PREFIX): value
                    for key, value in output.get("data", {}).items()
                }
    return found


def glue_text(bundle: dict, spec: str = "") -> str:
    """The text of a glued value as ``{glue:text}`name:spec``` shows it (myst-nb's rule: the
    format spec applies to the value read back from its plain-text form)."""
    text = "".join(bundle.get("text/plain", ""))
    if spec:
        try:
            return format(ast.literal_eval(text), spec)
        except (ValueError, SyntaxError, TypeError):
            pass
    return text.strip("'\"") if re.fullmatch(r"'[^']*'|\"[^\"]*\"", text) else text


def _split_role(content: str) -> tuple[str | None, str]:
    """``text <target>`` -> (text, target); ``target`` -> (None, target)."""
    match = _EXPLICIT.match(content)
    if match:
        return match["text"], match["target"]
    return None, content


def directives(text: str):
    """Yield (start, end, name, argument, options, body) of each top-level directive."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i].rstrip("\n"))
        if not match:
            i += 1
            continue
        fence = match["fence"]
        close = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j].rstrip("\n")):
            j += 1
        body = lines[i + 1 : j]
        options = {}
        while body and (option := _OPTION.match(body[0].rstrip("\n"))):
            options[option["key"]] = option["value"].strip()
            body = body[1:]
        yield (
            offsets[i],
            offsets[min(j + 1, len(lines))],
            match["name"],
            match["arg"].strip(),
            options,
            "".join(body).strip("\n"),
        )
        i = j + 1


def _sentence(heading: str) -> str:
    """`heading` ending with a full stop, unless it ends with its own punctuation."""
    return heading if heading.endswith((".", "?", "!")) else heading + "."


def _linked(text: str, url: str | None) -> str:
    """`text` as a Markdown link to `url`, or as is without one."""
    return f"[{text}]({url})" if url else text


class _Converter:
    def __init__(self, resolve: Resolver, glued: dict[str, dict], locate: Locator | None = None):
        self.resolve = resolve
        self.locate = locate or (lambda role, target: None)
        self.glued = glued
        self.attachments: dict[str, dict] = {}

    def roles(self, text: str) -> str:
        def role(match: re.Match) -> str:
            name, content = match["role"], match["content"]
            if name == "glue:text" or name == "glue":
                key, _, spec = content.partition(":")
                if key not in self.glued:
                    raise KeyError(f"no glued value named {key!r} in the notebook")
                return glue_text(self.glued[key], spec)
            if name == "math":
                return f"${content}$"
            explicit, target = _split_role(content)
            if name.startswith("py:"):
                shown = target.removeprefix("~")
                return f"`{shown.rsplit('.', 1)[-1] if target.startswith('~') else shown}`"
            if name in _CITE_ROLES:  # each key its own link, to its bibliography entry
                keys = [key.strip() for key in target.split(",") if key.strip()]
                return "; ".join(
                    _linked(self.resolve(name, key, None), self.locate(name, key)) for key in keys
                )
            return _linked(self.resolve(name, target, explicit), self.locate(name, target))

        return _ROLE.sub(role, text)

    def markdown(self, text: str) -> str:
        text = _TARGET.sub("", text)
        out, last = [], 0
        for start, end, name, arg, options, body in directives(text):
            out.append(self.roles(text[last:start]))
            out.append(self.directive(name, arg, options, self.markdown(body)) + "\n")
            last = end
        out.append(self.roles(text[last:]))
        return re.sub(r"\n{3,}", "\n\n", "".join(out)).strip("\n")

    def directive(self, name: str, arg: str, options: dict, body: str) -> str:
        arg = self.roles(arg)
        if name == "exercise":
            heading = self.resolve("numref", options["label"], None) if "label" in options else ""
            heading = heading or "Exercise"
            return f"**{_sentence(heading + (f': {arg}' if arg else ''))}**\n\n{body}\n"
        if name == "solution":
            exercise = self.resolve("numref", arg, None)
            summary = f"Solution to {exercise}"
            return f"<details>\n<summary>{summary}</summary>\n\n{body}\n\n</details>\n"
        if name == "exercise-start":  # a gated exercise: its cells follow, up to exercise-end
            return self.directive("exercise", arg, options, "")
        if name == "solution-start":  # a gated solution: its cells (code too) are not folded
            return f"**Solution to {self.resolve('numref', arg, None)}.**\n"
        if name in ("exercise-end", "solution-end"):
            return ""
        if name == "dropdown":
            return f"<details>\n<summary>{arg}</summary>\n\n{body}\n\n</details>\n"
        if name in ("code-block", "code"):
            return f"```{arg}\n{body}\n```\n"
        if name == "prf:proof":
            return f"*Proof.* {body} $\\square$\n"
        if name.startswith("prf:"):
            label = options.get("label")
            numbered = label and "nonumber" not in options  # else its kind alone, as on the site
            heading = self.resolve("prf:ref", label, None) if numbered else name[4:].capitalize()
            return f"**{_sentence(heading + (f' ({arg})' if arg else ''))}** {body}\n"
        if name == "glue:figure":
            if arg not in self.glued:
                raise KeyError(f"no glued figure named {arg!r} in the notebook")
            image = next(k for k in self.glued[arg] if k.startswith("image/"))
            filename = f"{arg}.{image.split('/')[1].split('+')[0]}"
            self.attachments[filename] = {image: self.glued[arg][image]}
            # numbered as on the site ("Figure 3.1: caption"); the glued name stays in the URL
            number = self.resolve("numref", options["name"], None) if "name" in options else ""
            caption = f"{number}: {body}" if number and body else number or body
            return f"![{number or 'Figure'}](attachment:{filename})\n\n*{caption}*\n"
        if name in ("math", "math:math"):
            return f"$$\n{body}\n$$\n"
        if name in _ADMONITIONS or name == "admonition":
            title = arg or name.capitalize()
            quoted = "\n".join(f"> {line}".rstrip() for line in body.splitlines())
            return f"> **{title}.**\n>\n{quoted}\n"
        raise ValueError(
            f"no plain Markdown for the directive {{{name}}}: add it to tools/plain_notebook.py"
        )


def library_requirement(repository: str, commit: str = "") -> str:
    """The pip requirement that installs the library with the extras the notebooks use
    (:data:`EXTRAS`): ``token-dynamics[widgets] @ git+<repository>`` (at `commit` when given),
    or ``token-dynamics[widgets]`` by name when `repository` is empty."""
    requirement = f"token-dynamics[{','.join(EXTRAS)}]"
    if repository:
        requirement += f" @ git+{repository.removesuffix('/')}" + (f"@{commit}" if commit else "")
    return requirement


def install_cell(repository: str, commit: str = "") -> dict:
    """The first cell of a plain notebook: installs the library when it cannot be imported.

    Parameters
    ----------
    repository : str
        The repository's URL, from which the cell installs the library (with pip's ``git+``
        scheme); empty: the cell installs ``token-dynamics`` by name.
    commit : str
        The commit the notebook was built from: the cell installs the library at it, so that
        a reader's run computes what the notebook shows (Binder's environment pins the same
        commit); empty: the repository's default branch.

    Returns
    -------
    dict
        An nbformat 4 code cell, not executed.
    """
    requirement = library_requirement(repository, commit)
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": "install-token-dynamics",
        "metadata": {},
        "outputs": [],
        "source": INSTALL_CELL.format(requirement=requirement),
    }


def plain_notebook(
    notebook: dict,
    resolve: Resolver,
    *,
    repository: str,
    commit: str = "",
    glued: dict[str, dict] | None = None,
    locate: Locator | None = None,
) -> dict:
    """`notebook` (nbformat 4 JSON, executed) with its MyST markup as plain Markdown and an
    install cell first. Not in place.

    Parameters
    ----------
    notebook : dict
        An executed notebook of the book (its glue outputs give the values of the prose).
    resolve : callable
        ``resolve(role, target, text)`` -> the text a cross-reference shows; `text` is the
        explicit text of ``{role}`text <target>``` or None.
    repository : str
        The repository's URL, from which the install cell installs the library (with pip's
        ``git+`` scheme); empty: the install cell installs ``token-dynamics`` by name.
    commit : str, optional
        The commit the notebook was built from, at which the install cell installs the library
        (see `install_cell`); empty: the repository's default branch.
    glued : dict, optional
        Glued values (name -> MIME bundle) besides those in the notebook's outputs: myst-nb
        takes the hidden ones out of the notebook it writes, and keeps them in
        ``<page>.glue.json``.
    locate : callable, optional
        ``locate(role, target)`` -> the URL of the place on the published site that a
        cross-reference points at (a citation: one key), or None; each cross-reference shown
        as text becomes a link to it. None (the default): no links.

    Raises
    ------
    KeyError
        If the prose refers to a glued name the notebook does not hold.
    ValueError
        If a Markdown cell holds a directive with no plain Markdown form here.
    """
    notebook = copy.deepcopy(notebook)
    converter = _Converter(resolve, {**(glued or {}), **glue_values(notebook)}, locate)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            converter.attachments = {}
            source = "".join(cell["source"])
            cell["source"] = converter.markdown(source)
            if converter.attachments:
                cell["attachments"] = converter.attachments
        elif cell["cell_type"] == "code":
            cell["outputs"] = [
                out
                for out in cell.get("outputs", [])
                if not any(key.startswith(GLUE_PREFIX) for key in out.get("data", {}))
            ]
    notebook["cells"].insert(0, install_cell(repository, commit))
    notebook.get("metadata", {}).pop("jupytext", None)
    return notebook


def raw_myst(text: str) -> list[str]:
    """The MyST markup left in `text` (roles, directive fences, targets): what a plain
    notebook must not show."""
    found = [m[0] for m in _ROLE.finditer(text)]
    found += [line for line in text.splitlines() if _FENCE.match(line)]
    found += [m[0].strip() for m in _TARGET.finditer(text)]
    return found


_DEFINED = (
    re.compile(r"^\((?P<name>[\w:.-]+)\)=[ \t]*$", re.MULTILINE),  # a MyST target
    re.compile(r"^:(?:label|name):[ \t]*(?P<name>\S+)[ \t]*$", re.MULTILINE),  # a directive's
    re.compile(r"""\bglue\(\s*["'](?P<name>[^"']+)["']"""),  # a glued value
    re.compile(r"^@\w+\{(?P<name>[^,\s]+),", re.MULTILINE),  # a BibTeX entry's key
)
#: A link's target (``](url)``) and an attachment's name: where a label may stand in a URL.
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")


def defined_names(text: str) -> set[str]:
    """The names that a book source `text` (MyST, or BibTeX) defines for cross-references and
    glued values: its targets ``(label)=``, ``:label:`` and ``:name:`` options, the names of
    ``glue("name", ...)`` and citation keys. A reader must never see one as it is."""
    return {match["name"] for pattern in _DEFINED for match in pattern.finditer(text)}


def raw_names(text: str, names: set[str]) -> list[str]:
    """The names of `names` that `text` (Markdown) shows as they are, outside link URLs.

    Only names that no prose word can equal are looked for: those holding a hyphen, an
    underscore or a digit (``mf-thm-meanfield``, ``flamary2021pot``, ``gap_ratio``); a label
    that is an ordinary word (``intro``) cannot be told from the prose around it.
    """
    text = _LINK_TARGET.sub("]()", text)
    found = []
    for name in sorted(names):
        if re.search(r"[-_\d]", name) and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
            found.append(name)
    return found
