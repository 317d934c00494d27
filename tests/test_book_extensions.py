"""The book's Sphinx extensions: the API reference covers the library (one page per public
module, each public name once), and the site helpers of `book/_ext/book_site.py`.

The pages themselves are rendered (and every reference in them checked) by the book build
(`-n -W`); `tests/browser/test_reader.py` reads them in Chromium.
"""

import importlib
import importlib.util
import re
import sys

import pytest

from .helpers import ROOT

API = ROOT / "book" / "api"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "book" / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


api_reference = _load("api_reference")
book_site = _load("book_site")
DIRECTIVE = re.compile(r"^\.\. api-module:: (\S+)$", re.MULTILINE)


def test_one_page_per_public_module():
    pages = {}
    for path in sorted(API.glob("*.rst")):
        for modname in DIRECTIVE.findall(path.read_text(encoding="utf-8")):
            pages.setdefault(modname, []).append(path.name)
    modules = api_reference.public_modules()
    assert "token_dynamics.integrators" in modules and "token_dynamics._validation" not in modules
    missing = [m for m in modules if m not in pages]
    assert not missing, f"public modules with no page in book/api/ (add <module>.rst): {missing}"
    stale = [m for m in pages if m not in modules]
    assert not stale, f"book/api/ pages naming no public module: {stale}"
    twice = {m: p for m, p in pages.items() if len(p) > 1}
    assert not twice, twice
    # the table of contents finds the module pages by their file name
    for modname, (page,) in pages.items():
        assert page in ("index.rst", f"{modname}.rst"), (modname, page)


def test_every_public_name_has_one_home_that_lists_it():
    """Each object of an ``__all__`` is documented on exactly one page, which exports it."""
    homes = {}
    for where, name, obj in api_reference.documented():
        assert name in importlib.import_module(where).__all__
        homes.setdefault(id(obj), set()).add(f"{where}.{name}")
    assert len(homes) > 100, "the scan found almost nothing"
    several = [sorted(h) for h in homes.values() if len(h) > 1]
    assert not several, f"objects documented twice: {several[:5]}"
    # a name defined in a submodule lives there, not in the package that re-exports it
    integrate = importlib.import_module("token_dynamics").integrate
    modules = api_reference.public_modules()
    assert api_reference.home("integrate", integrate, modules) == "token_dynamics.integrators"


def test_module_page_lists_all_of_its_names():
    lines = "\n".join(api_reference.module_rst("token_dynamics.integrators"))
    for name in importlib.import_module("token_dynamics.integrators").__all__:
        assert f"token_dynamics.integrators.{name}" in lines, name
    assert ".. autofunction:: token_dynamics.integrators.integrate" in lines
    assert ".. autoclass:: token_dynamics.integrators.Trajectory" in lines
    top = "\n".join(api_reference.module_rst("token_dynamics"))
    assert ":py:func:`token_dynamics.integrators.integrate`" in top  # re-export: a link


def test_unreferenced_footnotes_become_a_list():
    lines = [
        "See the paper [2]_.",
        ".. [1] A. Author, first line",
        "   second line",
        ".. [2] B. Author",
        "",
        "After.",
    ]
    api_reference.references_as_list(lines)
    assert lines == [
        "See the paper [2]_.",
        "- [1] A. Author, first line",
        "  second line",
        ".. [2] B. Author",
        "",
        "After.",
    ]


def test_private_bases_are_replaced_by_their_public_bases():
    class Public:
        pass

    class _Private(Public):
        pass

    class Other:
        pass

    class Child(_Private, Other):
        pass

    assert api_reference.public_bases(list(Child.__bases__)) == [Public, Other]


@pytest.mark.parametrize(
    ("title", "plain"),
    [
        (r"USA is a twisted-$W_2$ gradient flow", "USA is a twisted-W₂ gradient flow"),
        (r"$\ell_2$ attention", "ℓ₂ attention"),
        (r"not $\lambda$-convex for any $\lambda$", "not λ-convex for any λ"),
        (r"The sign of $VA + A^\top V^\top$", "The sign of VA + Aᵀ Vᵀ"),
        ("No maths", "No maths"),
    ],
)
def test_proof_index_titles_in_plain_text(title, plain):
    assert book_site.plain_title(title) == plain


def test_slim_notebook_keeps_what_jupyter_shows():
    import nbformat

    html = "<script>" + "frame" * 5_000 + "</script>"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    cell = nbformat.v4.new_code_cell("animate()")
    model = {"model_id": "0a1b", "version_major": 2, "version_minor": 0}
    view = {book_site.WIDGET_VIEW: model}
    cell.outputs = [
        nbformat.v4.new_output("display_data", {"text/html": html, "text/plain": repr(html)}),
        nbformat.v4.new_output("execute_result", {"text/plain": "42"}, execution_count=1),
        nbformat.v4.new_output("display_data", {"image/png": "iVBO", "text/plain": "<Figure>"}),
        nbformat.v4.new_output("display_data", {**view, "text/html": "<div>static</div>"}),
        nbformat.v4.new_output("display_data", view),
    ]
    notebook.cells = [cell]
    slim = book_site.slim_notebook(nbformat.from_dict(notebook))
    nbformat.validate(slim)
    assert "widgets" not in slim.metadata
    first, second, third, explorer, bare = slim.cells[0].outputs
    assert first.data == {"text/html": html}  # the 25 kB repr of the HTML is gone
    assert second.data == {"text/plain": "42"}  # a plain result stays
    assert third.data["text/plain"] == "<Figure>"  # a short fallback stays
    # a widget's view, whose state is gone, gives way to the static view beside it ...
    assert explorer.data == {"text/html": "<div>static</div>"}
    assert bare.data == view  # ... and stays where it is all the output has


def test_no_proof_folds_through_its_class():
    """sphinx-proof renders a proof without an admonition title, and sphinx-togglebutton throws
    (a JavaScript error on the page) on a `dropdown` class without one: a long proof folds
    through a `{dropdown}` inside it instead."""
    options = r"(?::\w+:[^\n]*\n)*"
    proof = re.compile(r"^`{3,}\{prf:proof\}[^\n]*\n" + options + r":class:[^\n]*dropdown", re.M)
    offenders = [
        str(page.relative_to(ROOT))
        for page in sorted((ROOT / "book").rglob("*.md"))
        if proof.search(page.read_text(encoding="utf-8"))
    ]
    assert not offenders, f"proofs folded by `:class: dropdown`: {offenders}"


def test_no_kind_word_before_a_numbered_reference():
    """A reference to a statement, an exercise or a figure renders with its kind ("Exercise 3.1"):
    a kind word written before it reads twice ("exercise Exercise 3.1")."""
    kinds = r"(?:exercises?|theorems?|propositions?|lemmas?|corollar(?:y|ies)|figures?)"
    doubled = re.compile(rf"(?i)\b{kinds}\s+\{{(?:ref|prf:ref|numref)\}}`")
    offenders = {
        str(page.relative_to(ROOT)): doubled.findall(page.read_text(encoding="utf-8"))
        for page in sorted((ROOT / "book").rglob("*.md"))
    }
    offenders = {page: found for page, found in offenders.items() if found}
    assert not offenders, f"a kind word before a numbered reference: {offenders}"


def test_launch_buttons_open_the_published_notebook():
    """The Binder and Colab buttons open the page's plain notebook on the notebooks branch
    (`launch_buttons` of `_config.yml`), not its MyST source on the main branch."""
    launch = {
        "binderhub_url": "https://mybinder.org/",
        "colab_url": "https://colab.research.google.com",
        "notebook_interface": "jupyterlab",
    }
    options = {"repository_url": "https://github.com/o/r/", "launch_buttons": launch}
    assert book_site.notebook_launch_urls(options, "book/x/y") == {
        "Binder": "https://mybinder.org/v2/gh/o/r/notebooks?urlpath=lab/tree/book/x/y.ipynb",
        "Colab": "https://colab.research.google.com/github/o/r/blob/notebooks/book/x/y.ipynb",
    }
    launch.update(notebooks_repository="https://github.com/o/nbs.git", notebooks_branch="v2")
    urls = book_site.notebook_launch_urls(options, "book/x/y")
    assert urls["Colab"].endswith("/github/o/nbs/blob/v2/book/x/y.ipynb")
    # off GitHub: Binder clones the repository by its URL, Colab cannot open it
    launch["notebooks_repository"] = "https://git.example.org/o/nbs"
    assert book_site.notebook_launch_urls(options, "book/x/y") == {
        "Binder": "https://mybinder.org/v2/git/https%3A%2F%2Fgit.example.org%2Fo%2Fnbs/v2"
        "?urlpath=lab/tree/book/x/y.ipynb"
    }
