"""tools/plain_notebook.py: a book notebook's MyST markup as plain Markdown for the downloads."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "plain_notebook", ROOT / "tools" / "plain_notebook.py"
)
plain_notebook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plain_notebook)
sys.path.insert(0, str(ROOT / "tools"))
from notebook_code import code_cells, notebooks  # noqa: E402

PREFIX = plain_notebook.GLUE_PREFIX
MARKDOWN = """(nb-target)=
## A section

The tokens sit in {glue:text}`clusters` cluster(s), the rate is {glue:text}`rate:.3f`, as
{prf:ref}`thm-one` and {cite}`castin2025unified` say; see {ref}`the section <nb-target>`,
{numref}`ex-one` and {py:func}`~token_dynamics.integrate`.

```{glue:figure} fig
:name: fig-one

The caption, with $x$.
```

```{exercise} Two plus two
:label: ex-one

Compute $2 + 2$.
```

````{solution} ex-one
:class: dropdown

It is 4: see {prf:ref}`thm-one`.

```python
print(2 + 2)
```
````
"""
NAMES = {
    ("prf:ref", "thm-one"): "Theorem 3.2",
    ("cite", "castin2025unified"): "Castin et al. (2025)",
    ("numref", "ex-one"): "Exercise 3.1",
    ("numref", "fig-one"): "Figure 3.3",
}


def resolve(role, target, text):
    return text or NAMES[role, target]


def glue_output(name, bundle):
    return {
        "output_type": "display_data",
        "metadata": {"scrapbook": {"name": name, "mime_prefix": PREFIX}},
        "data": {PREFIX + key: value for key, value in bundle.items()},
    }


@pytest.fixture
def notebook():
    code = {
        "cell_type": "code",
        "execution_count": 1,
        "id": "c1",
        "metadata": {},
        "source": "glue(...)",
        "outputs": [
            glue_output("clusters", {"text/plain": "3"}),
            glue_output("rate", {"text/plain": "0.123456"}),
            glue_output("fig", {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}),
            {"output_type": "stream", "name": "stdout", "text": "kept\n"},
        ],
    }
    markdown = {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": MARKDOWN}
    return {"cells": [code, markdown], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_markup_becomes_plain_markdown(notebook):
    plain = plain_notebook.plain_notebook(notebook, resolve, repository="https://example.org/r")
    install, code, markdown = plain["cells"]
    text = markdown["source"]
    assert plain_notebook.raw_myst(text) == []
    assert "sit in 3 cluster(s), the rate is 0.123," in text
    assert "as\nTheorem 3.2 and Castin et al. (2025) say; see the section,\nExercise 3.1" in text
    assert "`integrate`" in text
    assert "**Exercise 3.1: Two plus two.**\n\nCompute $2 + 2$." in text
    # the solution folded, its inner code fence and cross-reference converted too
    summary = "<details>\n<summary>Solution to Exercise 3.1</summary>\n\n"
    assert summary + "It is 4: see Theorem 3.2." in text
    assert "```python\nprint(2 + 2)\n```\n\n</details>" in text
    # the glued figure: an attachment of the cell, with its caption
    assert markdown["attachments"] == {"fig.png": {"image/png": "iVBORw0KGgo="}}
    assert "![Figure 3.3](attachment:fig.png)\n\n*Figure 3.3: The caption, with $x$.*" in text
    # hidden glue outputs dropped, the others kept
    assert code["outputs"] == [notebook["cells"][0]["outputs"][3]]
    assert 'git+https://example.org/r"' in install["source"]
    assert "except ImportError:\n    %pip install" in install["source"]


def test_the_install_cell_pins_the_commit_built():
    source = plain_notebook.install_cell("https://example.org/r/", "0123abc")["source"]
    pip = '%pip install --quiet "token-dynamics[widgets] @ git+https://example.org/r@0123abc"'
    assert pip in source
    assert '"token-dynamics[widgets]"' in plain_notebook.install_cell("", "0123abc")["source"]


def test_the_install_cell_installs_the_extras_the_notebooks_use():
    """Outside Binder and Colab (a plain JupyterLab, VS Code) ipywidgets may be missing: the
    install cell brings every extra of the library that a book notebook needs, or the explorer's
    cell raises ImportError and Run All stops there."""
    uses = {  # what a notebook's code does that needs each extra of pyproject.toml
        "widgets": re.compile(r"\bwidgets\.\w+\("),
        "progress": re.compile(r"\bprogress\s*=\s*True\b"),
    }
    sources = [source for path in notebooks() for source in code_cells(path)]
    needed = {extra for extra, use in uses.items() if any(use.search(s) for s in sources)}
    assert "widgets" in needed  # the explorers of tokens/particles and gaussian/cone
    for repository in ("https://example.org/r", ""):
        requirement = Requirement(plain_notebook.library_requirement(repository, "0123abc"))
        assert requirement.name == "token-dynamics" and needed <= requirement.extras


def test_the_input_is_not_modified(notebook):
    before = repr(notebook)
    plain_notebook.plain_notebook(notebook, resolve, repository="")
    assert repr(notebook) == before


def test_glued_values_kept_out_of_the_notebook(notebook):
    """myst-nb writes the notebook without its hidden glue outputs, and them to a file."""
    glued = {
        "clusters": {"text/plain": "3"},
        "rate": {"text/plain": "0.123456"},
        "fig": {"image/png": "iVBORw0KGgo="},
    }
    notebook["cells"][0]["outputs"] = notebook["cells"][0]["outputs"][3:]
    plain = plain_notebook.plain_notebook(notebook, resolve, repository="", glued=glued)
    assert "sit in 3 cluster(s), the rate is 0.123," in plain["cells"][2]["source"]


def test_a_missing_glued_value_is_an_error(notebook):
    notebook["cells"][0]["outputs"] = []
    with pytest.raises(KeyError, match="no glued value named 'clusters'"):
        plain_notebook.plain_notebook(notebook, resolve, repository="")


def test_an_unknown_directive_is_an_error(notebook):
    notebook["cells"][1]["source"] = "```{tabbed} A\nx\n```\n"
    with pytest.raises(ValueError, match=r"directive \{tabbed\}"):
        plain_notebook.plain_notebook(notebook, resolve, repository="")


def test_raw_myst_finds_markup():
    found = plain_notebook.raw_myst("(a)=\nSee {ref}`a`.\n```{note}\nx\n```\n")
    assert found == ["{ref}`a`", "```{note}", "(a)="]


def test_a_title_keeps_its_own_punctuation(notebook):
    notebook["cells"][1]["source"] = "```{exercise} Why?\n:label: ex-one\n\nSay why.\n```\n"
    plain = plain_notebook.plain_notebook(notebook, resolve, repository="")
    assert plain["cells"][2]["source"].startswith("**Exercise 3.1: Why?**\n\nSay why.")


def test_gated_exercise_and_solution(notebook):
    cells = [
        "```{exercise-start} Run it\n:label: ex-one\n```\n\nRun the cell below.",
        "```{exercise-end}\n```",
        "```{solution-start} ex-one\n:class: dropdown\n```",
        "```{solution-end}\n```",
    ]
    notebook["cells"][1:] = [
        {"cell_type": "markdown", "id": f"m{i}", "metadata": {}, "source": text}
        for i, text in enumerate(cells)
    ]
    plain = plain_notebook.plain_notebook(notebook, resolve, repository="")
    texts = [cell["source"] for cell in plain["cells"][2:]]
    assert texts == [
        "**Exercise 3.1: Run it.**\n\nRun the cell below.",
        "",
        "**Solution to Exercise 3.1.**",
        "",
    ]


SITE = "https://example.org/book/"


def locate(role, target):
    """The site's places of the targets of MARKDOWN (none for the section)."""
    return {
        "thm-one": SITE + "theory.html#thm-one",
        "castin2025unified": SITE + "references.html#id3",
        "ex-one": SITE + "notebook.html#ex-one",
    }.get(target)


def test_cross_references_link_to_the_site(notebook):
    plain = plain_notebook.plain_notebook(notebook, resolve, repository="", locate=locate)
    text = plain["cells"][2]["source"]
    assert plain_notebook.raw_myst(text) == []
    assert f"as\n[Theorem 3.2]({SITE}theory.html#thm-one) and" in text
    assert f"[Castin et al. (2025)]({SITE}references.html#id3) say" in text
    # no place found: the text alone
    assert "see the section,\n[Exercise 3.1]" in text
    # the headings of an exercise and its solution are not links
    assert "**Exercise 3.1: Two plus two.**" in text
    assert "<summary>Solution to Exercise 3.1</summary>" in text
    # the labels stand in the URLs only
    assert plain_notebook.raw_names(text, {"thm-one", "castin2025unified", "ex-one"}) == []


def test_each_cited_key_is_its_own_link(notebook):
    notebook["cells"][1]["source"] = "As {cite}`castin2025unified, other2024key` show."
    names = {("cite", "other2024key"): "Other (2024)", **NAMES}
    plain = plain_notebook.plain_notebook(
        notebook, lambda role, target, text: names[role, target], repository="", locate=locate
    )
    assert plain["cells"][2]["source"] == (
        f"As [Castin et al. (2025)]({SITE}references.html#id3); Other (2024) show."
    )


def test_install_cell():
    cell = plain_notebook.install_cell("https://example.org/r/")
    assert cell["cell_type"] == "code" and cell["outputs"] == []
    pip = '%pip install --quiet "token-dynamics[widgets] @ git+https://example.org/r"'
    assert pip in cell["source"]
    by_name = plain_notebook.install_cell("")["source"]
    assert '%pip install --quiet "token-dynamics[widgets]"' in by_name
    # the cell is valid Python once IPython turns the magic into a call
    from IPython.core.inputtransformer2 import TransformerManager

    compile(TransformerManager().transform_cell(by_name), "<install>", "exec")


def test_defined_names():
    source = (
        "(sec-one)=\n## A\n\n```{prf:theorem} T\n:label: thm-one\n```\n\n"
        "```{glue:figure} fig\n:name: fig-one\n```\n"
        'glue("rate_1", 0.5)\n@article{castin2025unified,\n'
    )
    assert plain_notebook.defined_names(source) == {
        "sec-one",
        "thm-one",
        "fig-one",
        "rate_1",
        "castin2025unified",
    }


def test_raw_names_finds_labels_outside_links():
    names = {"mf-thm-meanfield", "flamary2021pot", "gap_ratio", "intro", "mf-w2-formula"}
    text = (
        "See mf-thm-meanfield, [POT](https://x.org/r.html#flamary2021pot), "
        "mf-w2-formula:.4f, the intro, (gap_ratio) and mf-thm-meanfield-two."
    )
    # a word label (intro) cannot be told from prose; a longer name is not its prefix's
    assert plain_notebook.raw_names(text, names) == [
        "gap_ratio",
        "mf-thm-meanfield",
        "mf-w2-formula",
    ]
