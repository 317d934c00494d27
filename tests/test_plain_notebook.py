"""tools/plain_notebook.py: a book notebook's MyST markup as plain Markdown for the downloads."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "plain_notebook", ROOT / "tools" / "plain_notebook.py"
)
plain_notebook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plain_notebook)

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
    assert "![fig.png](attachment:fig.png)\n\n*The caption, with $x$.*" in text
    # hidden glue outputs dropped, the others kept
    assert code["outputs"] == [notebook["cells"][0]["outputs"][3]]
    assert 'git+https://example.org/r"' in install["source"]
    assert "except ImportError:\n    %pip install" in install["source"]


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
