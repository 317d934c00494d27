"""The house style of the book's figures, set once when the plotting package is imported.

Colours: the Okabe-Ito palette, told apart under the common colour-vision deficiencies and, by
its spread of lightness, in greyscale; ordered so that the cycle's names keep their usual
meaning (``C0`` blue, ``C1`` orange, ``C2`` green, ``C3`` red). Font sizes readable at the page
width. Figures shown in a notebook are rendered at twice the screen resolution (``retina``), so
that they stay sharp on a high-density screen.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OKABE_ITO", "STYLE", "use_house_style"]

#: Okabe & Ito (2002), "Color Universal Design": blue, orange, bluish green, vermillion,
#: reddish purple, sky blue, yellow, black.
OKABE_ITO = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
)

#: Matplotlib settings of the house style. 10 pt text and 9 pt ticks read at the page width of
#: a 6-inch figure; legends without a frame cover less of the data.
STYLE: dict[str, Any] = {
    "font.size": 10.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 10.0,
    "xtick.labelsize": 9.0,
    "ytick.labelsize": 9.0,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "savefig.dpi": 200.0,
}


def use_house_style() -> None:
    """Apply :data:`STYLE` and the Okabe-Ito colour cycle; in a notebook, render at 2x.

    Examples
    --------
    >>> import matplotlib as mpl
    >>> use_house_style()
    >>> mpl.rcParams["axes.prop_cycle"].by_key()["color"][1]
    '#E69F00'
    """
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams.update(STYLE)
    mpl.rcParams["axes.prop_cycle"] = cycler(color=list(OKABE_ITO))
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is in the pinned environment
        return
    if getattr(get_ipython(), "kernel", None) is not None:  # a notebook: 2x PNG
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("retina")
