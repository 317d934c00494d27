"""Sphinx extension: what the site's pages load, and the indexes a reader sees.

- **No Live Code button.** Jupyter Book always loads sphinx-thebe, whose script fetches Thebe
  from a CDN and a kernel from Binder when clicked: offline it hangs, and its inline
  ``const THEBE_JS_URL`` is emitted twice and throws on every page. Its handlers and stylesheet
  are removed here (``launch_buttons.thebe: false`` removes the button); CONTRIBUTING.md says
  why. The Binder and download buttons stay.
- **Launch buttons open the plain notebooks.** The Binder and Colab buttons of a notebook page
  open its plain notebook (``make notebooks``: numbers, cross-references and glued values as
  the site shows them), published by ``tools/publish_notebooks.py`` at the page's path on the
  branch ``launch_buttons.notebooks_branch`` of ``launch_buttons.notebooks_repository`` (empty:
  ``repository.url``), not its MyST source on the repository's main branch.
- **MathJax served locally, pruned to what the pages use** (``tex-chtml.js``, its TeX extensions
  and fonts: 2 MB of the 24 MB that sphinx-mathjax-offline copies), with ``mathjax-settings.js``
  keeping every menu setting that can hide or blank the maths out of reach.
- **Search snippets without raw TeX** (``search-snippets.js``).
- **One search box**: the sidebar's search field is dropped; the header's search button stays.
- **A readable proof index**: "Theorem 4.1: title", grouped by kind, instead of raw labels.
- **No build-only files in the site**: source maps, the theme's translation catalogues; and
  in the downloadable executed notebooks (``_sources/**/*.ipynb``), no text fallback that
  repeats an HTML output and no saved widget state (no kernel runs them there); after a cached
  build, those notebooks get the outputs myst-nb leaves out of them.
"""

from __future__ import annotations

import re
import shutil
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The part of MathJax 3's distribution the pages load: the combined TeX + CommonHTML
#: component, the TeX extensions it autoloads on demand, and the CommonHTML web fonts.
MATHJAX_KEEP = ("tex-chtml.js", "input/tex/extensions", "output/chtml/fonts/woff-v2")
#: Files of the theme and extensions that no page requests: source maps, translation
#: catalogues (used at build time), and Font Awesome's TrueType fallbacks (the stylesheet offers
#: WOFF2 first, which every browser of the last years reads).
BUILD_ONLY = ("**/*.map", "locales", "vendor/fontawesome/webfonts/*.ttf")
#: A text/plain fallback this long next to an HTML or image output is a repr of it (an
#: animation's HTML string repeated as text, 1.5 MB): the downloaded notebook drops it.
PLAIN_FALLBACK_MAX = 10_000
#: The output kind of a widget's live view, which needs the widget state that
#: ``slim_notebook`` drops.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

_GREEK = (
    "alpha beta gamma delta epsilon varepsilon zeta eta theta kappa lambda mu nu xi pi rho "
    "sigma tau phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega"
).split()
_GREEK_TEXT = "αβγδεεζηθκλμνξπρστφφχψωΓΔΘΛΞΠΣΦΨΩ"
_TEX_WORDS = {f"\\{name}": char for name, char in zip(_GREEK, _GREEK_TEXT, strict=True)}
_TEX_WORDS |= {
    "\\ell": "ℓ",
    "\\top": "ᵀ",
    "\\infty": "∞",
    "\\le": "≤",
    "\\leq": "≤",
    "\\ge": "≥",
    "\\geq": "≥",
    "\\to": "→",
    "\\cdot": "·",
    "\\times": "×",
    "\\in": "∈",
    "\\mathbb{R}": "ℝ",
    "\\mathbb{S}": "𝕊",
}
_SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def plain_title(title: str) -> str:
    """`title` with its inline maths (``$...$``) written in plain text, for pages without MathJax.

    >>> plain_title(r"The sign of $VA + A^\\top V^\\top$ and $\\ell_2$, $W_2$, $\\lambda$")
    'The sign of VA + Aᵀ Vᵀ and ℓ₂, W₂, λ'
    """

    def convert(match: re.Match) -> str:
        tex = match[1]
        for word in sorted(_TEX_WORDS, key=len, reverse=True):
            tex = re.sub(re.escape(word) + r"(?![A-Za-z])", _TEX_WORDS[word], tex)
        tex = re.sub(r"_\{?(\d+)\}?", lambda m: m[1].translate(_SUBSCRIPT), tex)
        tex = re.sub(r"\^\{?(\d+)\}?", lambda m: m[1].translate(_SUPERSCRIPT), tex)
        tex = tex.replace("^ᵀ", "ᵀ").replace("^{ᵀ}", "ᵀ")
        return re.sub(r"\\[A-Za-z]+|[{}]", "", tex)

    return re.sub(r"\$([^$]+)\$", convert, title)


_PLURALS = {"corollary": "Corollaries", "property": "Properties"}


def _prf_titles() -> dict[str, tuple[str, str]]:
    """Label -> (kind, title) of every labelled sphinx-proof directive of the book."""
    import traceability

    found = {}
    for path, _docname in traceability._book_pages():
        text = path.read_text(encoding="utf-8")
        for match in traceability._DIRECTIVE.finditer(text):
            label = traceability._LABEL.search(match["options"])
            if label:
                found[label["label"]] = (match["kind"], match["title"].strip())
    return found


def _readable_proof_index():
    from sphinx_proof.domain import ProofIndex

    class ReadableProofIndex(ProofIndex):
        """Entries "Theorem 4.1: title" grouped by kind, in reading order, page as extra."""

        def generate(self, docnames=None):
            env = self.domain.env
            proofs = getattr(env, "proof_list", {})
            titles = _prf_titles()
            groups = defaultdict(list)
            for anchor, values in proofs.items():
                kind = values["realtype"]
                numbers = env.toc_fignumbers.get(values["docname"], {})
                number = numbers.get(values.get("countertype", kind), {}).get(anchor)
                name = kind.capitalize()
                if number:
                    name += " " + ".".join(map(str, number))
                title = plain_title(titles.get(anchor, ("", ""))[1])
                if title:
                    name += f": {title}"
                page = env.titles[values["docname"]].astext()
                groups[_PLURALS.get(kind, kind.capitalize() + "s")].append(
                    (number or (), (name, 0, values["docname"], anchor, page, "", ""))
                )
            content = [
                (group, [entry for _, entry in sorted(entries, key=lambda e: e[0])])
                for group, entries in sorted(groups.items())
            ]
            return content, False

    return ReadableProofIndex


def _drop_thebe(app):
    """Disconnect sphinx-thebe (loaded by Jupyter Book whatever the configuration)."""
    for listeners in app.events.listeners.values():
        for listener in list(listeners):
            if getattr(listener.handler, "__module__", "").startswith("sphinx_thebe"):
                listeners.remove(listener)
    app.registry.css_files = [
        (name, attrs) for name, attrs in app.registry.css_files if "thebe" not in str(name)
    ]


def slim_notebook(notebook: dict) -> dict:
    """`notebook` (nbformat JSON) without saved widget state nor long text/plain fallbacks
    beside a rich output; the outputs a reader sees in Jupyter are unchanged. In place.

    Without the saved state a widget's view has no model to show: JupyterLab, once the
    notebook is trusted, prefers that view to the output's other representations and writes
    "Error displaying widget: model not found" until the cell is run again. So the view goes
    too wherever the output has another representation (an explorer's static view, in HTML,
    whose frames switch without a kernel), which JupyterLab then shows, trusted or not."""
    notebook.get("metadata", {}).pop("widgets", None)
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data and len(data) > 1:
                del data[WIDGET_VIEW]
            plain = data.get("text/plain")
            rich = any(kind == "text/html" or kind.startswith("image/") for kind in data)
            if rich and plain is not None and len("".join(plain)) > PLAIN_FALLBACK_MAX:
                del data["text/plain"]
    return notebook


def _downloadable_notebooks(app) -> None:
    """Rewrite the executed notebooks offered for download (``_sources/**/*.ipynb``): slimmed,
    and, after a cached build, with their outputs. (myst-nb 1.4 writes the notebook *before*
    merging the cached outputs into it: a page read from jupyter-cache offered a notebook with
    no output at all.)"""
    import nbformat

    cache = None
    if app.config.nb_execution_mode == "cache":
        from jupyter_cache import get_cache

        cache = get_cache(app.config.nb_execution_cache_path or ".jupyter_cache")
    for path in (Path(app.outdir) / "_sources").rglob("*.ipynb"):
        notebook = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
        if cache is not None and not any(c.get("outputs") for c in notebook.cells):
            try:
                _, notebook = cache.merge_match_into_notebook(notebook)
            except KeyError:  # not in the cache: a notebook without code, or never executed
                pass
        path.write_text(nbformat.writes(slim_notebook(notebook)), encoding="utf-8")


def _finish_site(app, exception):
    """Copy the part of MathJax the pages load (replaces sphinx-mathjax-offline's full copy),
    remove the files no page requests, slim the downloadable notebooks."""
    if exception is not None or app.builder.format != "html":
        return
    import importlib

    source = Path(importlib.import_module("sphinx-mathjax-offline").__file__).parent
    source = source / "static" / "mathjax"
    target = Path(app.outdir) / "_static" / "mathjax"
    shutil.rmtree(target, ignore_errors=True)
    for part in MATHJAX_KEEP:
        (target / part).parent.mkdir(parents=True, exist_ok=True)
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part)
        else:
            shutil.copy2(source / part, target / part)
    static = Path(app.outdir) / "_static"
    for pattern in BUILD_ONLY:
        for path in list(static.glob(pattern)):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    _downloadable_notebooks(app)


#: Where a launch button of a notebook page opens its plain notebook by default: the branch
#: ``notebooks`` of the book's own repository (``launch_buttons`` of ``_config.yml``).
NOTEBOOKS_BRANCH = "notebooks"


def notebook_launch_urls(theme_options: dict, pagename: str) -> dict[str, str]:
    """Binder and Colab URLs that open the plain notebook of the page `pagename`.

    Parameters
    ----------
    theme_options : dict
        The theme's options as Jupyter Book sets them from ``_config.yml``: ``repository_url``,
        and ``launch_buttons`` with ``binderhub_url``, ``colab_url``, ``notebook_interface``,
        ``notebooks_repository`` (empty or absent: ``repository_url``) and
        ``notebooks_branch`` (absent: ``notebooks``).
    pagename : str
        The page's document name (``book/gaussian/cone``): its notebook is
        ``<pagename>.ipynb`` in the published notebooks.

    Returns
    -------
    dict
        ``{"Binder": url, "Colab": url}``, each for the services configured; Colab only for a
        repository on GitHub.

    Examples
    --------
    >>> options = {"repository_url": "https://github.com/o/r",
    ...            "launch_buttons": {"binderhub_url": "https://mybinder.org",
    ...                               "colab_url": "https://colab.research.google.com",
    ...                               "notebook_interface": "jupyterlab"}}
    >>> urls = notebook_launch_urls(options, "book/x/y")
    >>> urls["Binder"]
    'https://mybinder.org/v2/gh/o/r/notebooks?urlpath=lab/tree/book/x/y.ipynb'
    >>> urls["Colab"]
    'https://colab.research.google.com/github/o/r/blob/notebooks/book/x/y.ipynb'
    """
    from urllib.parse import quote

    launch = theme_options.get("launch_buttons", {})
    repository = (
        launch.get("notebooks_repository") or theme_options.get("repository_url", "")
    ).removesuffix("/")
    branch = launch.get("notebooks_branch") or NOTEBOOKS_BRANCH
    path = f"{pagename}.ipynb"
    github = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?", repository)
    urls = {}
    if binder := launch.get("binderhub_url", "").strip("/"):
        ui = {"classic": "tree", "jupyterlab": "lab/tree"}[
            launch.get("notebook_interface", "classic")
        ]
        where = f"gh/{github[1]}/{github[2]}" if github else f"git/{quote(repository, safe='')}"
        urls["Binder"] = f"{binder}/v2/{where}/{branch}?urlpath={ui}/{path}"
    if (colab := launch.get("colab_url", "").strip("/")) and github:
        urls["Colab"] = f"{colab}/github/{github[1]}/{github[2]}/blob/{branch}/{path}"
    return urls


def _launch_plain_notebooks(app, pagename, templatename, context, doctree):
    """Point the page's Binder and Colab buttons (made by the theme, at priority 501, for the
    MyST source on the repository's branch) at its plain notebook."""
    urls = notebook_launch_urls(app.config.html_theme_options, pagename)
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        # a service that cannot open the plain notebook (Colab, off GitHub) offers no button
        group["buttons"] = [
            button
            for button in group["buttons"]
            if button.get("text") not in ("Binder", "Colab") or button["text"] in urls
        ]
        for button in group["buttons"]:
            if button.get("text") in urls:
                button["url"] = urls[button["text"]]
                button["tooltip"] = f"Open this page's notebook on {button['text']}"


def _config_inited(app, config):
    # the sidebar without its search field: the header's search button is the one search box
    config.html_sidebars = {
        "**": ["navbar-logo.html", "icon-links.html", "sbt-sidebar-nav.html"],
        **config.html_sidebars,
    }


def _builder_inited(app):
    for listeners in app.events.listeners.values():  # sphinx-mathjax-offline's full copy
        for listener in list(listeners):
            if listener.handler.__module__ == "sphinx-mathjax-offline":
                listeners.remove(listener)


def setup(app):
    from sphinx_proof.domain import ProofDomain

    ProofDomain.indices = {_readable_proof_index()}
    _drop_thebe(app)  # Jupyter Book sets sphinx-thebe up before the book's own extensions
    app.connect("config-inited", _config_inited)
    app.connect("builder-inited", _builder_inited)
    app.connect("build-finished", _finish_site)
    app.connect("html-page-context", _launch_plain_notebooks, priority=502)
    # deferred: they run after the page's inline MathJax configuration and searchtools.js,
    # and before MathJax itself (also deferred, later in the page)
    app.add_js_file("mathjax-settings.js", loading_method="defer", priority=400)
    app.add_js_file("search-snippets.js", loading_method="defer")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
