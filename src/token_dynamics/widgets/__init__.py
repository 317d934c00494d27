"""Interactive widgets (ipywidgets) over the library's pure functions.

A leaf of the package: nothing else imports it, and it imports ipywidgets and matplotlib only
when a builder is called. Each builder returns a widget whose callbacks call the same functions a
notebook would call (``make_field``, ``integrate``, the plotting helpers), so what the widget
shows is what the static figure next to it shows, at other parameter values.

Each builder also precomputes a static view: the same figure drawn on a grid of parameter
values, with HTML controls that switch between the frames. A live front end shows the widget;
the book's static pages, which have no kernel, show the static view, which says what it is.

The static view (precomputed frames and their HTML player) is in ``_static``; the builders in
``_explorers``.
"""

from ._explorers import attention_explorer, draw_variant, figure_sliders
from ._static import MAX_STATIC_FRAMES, STATIC_DPI, STATIC_STEPS

__all__ = [
    "MAX_STATIC_FRAMES",
    "STATIC_DPI",
    "STATIC_STEPS",
    "attention_explorer",
    "draw_variant",
    "figure_sliders",
]
