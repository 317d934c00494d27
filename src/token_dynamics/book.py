"""What the book's notebooks need from Jupyter Book, without Jupyter Book.

The notebooks put computed numbers and figures into their prose with ``glue``. Inside the book
build (and wherever ``myst_nb`` is installed) :func:`glue` is myst-nb's own, so that the
``{glue:text}`` and ``{glue:figure}`` roles of the page find the values. Elsewhere (JupyterLab
on Binder, a downloaded notebook in a plain Python environment) it displays the value under
the cell, named, so that nothing the prose refers to is hidden from the reader.
"""

from __future__ import annotations

import numpy as np

__all__ = ["glue"]


def glue(name: str, variable: object, display: bool = True) -> None:
    """Record `variable` under `name` for the book's prose, or show it where there is no book.

    Parameters
    ----------
    name : str
        The name the page's ``{glue:text}`name``` and ``{glue:figure}`` refer to.
    variable : object
        A number, a string, a matplotlib figure: anything Jupyter can display.
    display : bool, default True
        Whether myst-nb also shows the value under the cell in the book. Without myst-nb the
        value is always shown (its prose cannot show it), preceded by its name when it is
        plain text.

    Raises
    ------
    TypeError
        If `name` is not a string.

    Examples
    --------
    Outside a notebook (no IPython display), the value is printed with its name:

    >>> from unittest import mock
    >>> from token_dynamics.book import glue
    >>> with mock.patch.dict("sys.modules", {"myst_nb": None}):  # as without Jupyter Book
    ...     glue("answer", 42, display=False)
    answer: 42
    """
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a string (the glue key), got {type(name).__name__}")
    if isinstance(variable, np.generic):  # a numpy scalar prints as np.float64(...) in numpy 2
        variable = variable.item()
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        myst_glue = None
    if myst_glue is not None:
        myst_glue(name, variable, display=display)
        return
    try:
        from IPython import get_ipython
        from IPython.core.formatters import format_display_data
        from IPython.display import display as ipy_display
    except ImportError:
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        print(f"{name}: {variable!r}")
        return
    bundle, _ = format_display_data(variable)
    if set(bundle) == {"text/plain"}:
        ipy_display({"text/plain": f"{name}: {bundle['text/plain']}"}, raw=True)
    else:
        ipy_display(variable)
