"""token_dynamics.book.glue: myst-nb's glue inside the book, a named display without it."""

import sys

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from token_dynamics.book import glue


@pytest.fixture
def shell():
    yield InteractiveShell.instance()  # display() needs a running IPython
    InteractiveShell.clear_instance()


@pytest.fixture
def without_myst_nb(monkeypatch):
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # `import myst_nb` now fails


def test_in_the_book_glue_is_myst_nbs(shell):
    with capture_output() as captured:
        glue("answer", 42, display=False)
    (output,) = captured.outputs
    assert output.metadata["scrapbook"]["name"] == "answer"
    # hidden: the value is stored under myst-nb's prefix, which Jupyter does not display
    assert set(output.data) == {"application/papermill.record/text/plain"}


def test_without_myst_nb_the_value_is_shown_with_its_name(shell, without_myst_nb):
    with capture_output() as captured:
        glue("answer", 42, display=False)
    (output,) = captured.outputs
    assert output.data == {"text/plain": "answer: 42"}


def test_without_myst_nb_a_figure_is_shown(shell, without_myst_nb):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from IPython.core.pylabtools import select_figure_formats

    select_figure_formats(shell, {"png"})  # what a Jupyter kernel's inline backend does
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    with capture_output() as captured:
        glue("fig", fig, display=False)
    plt.close(fig)
    (output,) = captured.outputs
    assert "image/png" in output.data


def test_the_name_must_be_a_string():
    with pytest.raises(TypeError, match="`name` must be a string"):
        glue(3, 1.0)
