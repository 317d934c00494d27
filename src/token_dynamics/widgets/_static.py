"""The static view of a widget: precomputed frames and a few lines of HTML to switch them (private).

A static page has no kernel, so a widget's figure is drawn beforehand on a grid of parameter
values; inline JavaScript shows the frame its HTML controls select. Also the helpers every
builder shares: the lazy import of ipywidgets and the display of a figure in an ``Output``.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # matplotlib is imported when a builder is called
    from matplotlib.figure import Figure

__all__ = ["MAX_STATIC_FRAMES", "STATIC_DPI", "STATIC_STEPS", "Widget"]

#: ipywidgets publishes no types: its widgets (``VBox``, ``Output``) are ``Any`` here.
Widget = Any

#: Most frames a static view precomputes: each is a PNG of ~20-40 kB at the default size, and the
#: site holds its explorers under a few MB (the site's size test caps the whole at 25 MB).
MAX_STATIC_FRAMES = 64

#: Values of a slider in the static view when none are given: enough to see the trend.
STATIC_STEPS = 5

#: Resolution of the static frames, in CSS pixels per inch of the figure (a 4-inch figure is
#: shown 320 pixels wide); each frame holds twice as many pixels, for a high-density screen.
STATIC_DPI = 80.0

_PLAYER_JS = """(function () {
  var root = document.getElementById("%(id)s");
  var frames = %(frames)s, labels = %(labels)s, strides = %(strides)s;
  var controls = root.querySelectorAll("[data-control]");
  function show() {
    var k = 0;
    controls.forEach(function (c, i) {
      var j = parseInt(c.value, 10);
      k += strides[i] * j;
      var out = root.querySelector("[data-value='" + i + "']");
      if (out) { out.textContent = labels[i][j]; }
    });
    root.querySelector("img").src = frames[k];
  }
  controls.forEach(function (c) {
    c.disabled = false;
    c.addEventListener("input", show);
  });
  root.querySelectorAll(".td-explorer-inert").forEach(function (p) { p.remove(); });
  show();
})();"""

#: What a viewer that does not run the static view's script shows instead of working controls
#: (an untrusted notebook in JupyterLab, which strips scripts): the controls are disabled
#: until the script enables them, and this line, which the script removes, says why.
INERT_NOTE = (
    "Precomputed frames: the controls below need this view's script, which has not run here "
    "(in a notebook: trust it, or run the cell for the live explorer)."
)


def _png_uri(fig: Figure) -> tuple[str, int]:
    """A frame as a data URI of the book's compressed 2x PNG, and its width in CSS pixels."""
    from ..plotting import figure_png

    png, width, _ = figure_png(fig, dpi=STATIC_DPI)
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii"), width


def _static_view(
    draw: Callable[..., object],
    controls: Sequence[tuple[str, Collection[object], Sequence[str], int, str]],
    *,
    figsize: tuple[float, float],
    projection: str | None = None,
    note: str = "",
) -> str:
    """Self-contained HTML of precomputed frames with one control per parameter.

    ``controls`` holds ``(name, values, labels, start, kind)`` with ``kind`` ``"range"`` (a
    slider over the values) or ``"select"`` (a menu); ``draw(ax, *values)`` draws one frame on
    fresh axes. Every combination of values is drawn once (row-major over ``controls``) and a
    few lines of inline JavaScript show the frame the controls select: the page needs no kernel
    and makes no outside request.
    """
    import html as html_lib
    import itertools
    import json

    from matplotlib.figure import Figure

    sizes = [len(values) for _, values, *_ in controls]
    total = int(np.prod(sizes))
    if total > MAX_STATIC_FRAMES:
        raise ValueError(
            f"The static view would draw {total} frames (more than {MAX_STATIC_FRAMES}); "
            "give fewer values per control."
        )
    frames = []
    for combo in itertools.product(*(values for _, values, *_ in controls)):
        fig = Figure(figsize=figsize)
        ax = fig.add_subplot(projection=projection)
        draw(ax, *combo)
        uri, width = _png_uri(fig)
        frames.append(uri)
    strides = [int(np.prod(sizes[i + 1 :])) for i in range(len(sizes))]
    labels = [list(map(str, lab)) for _, _, lab, _, _ in controls]
    uid = "td-explorer-" + hashlib.sha1("".join(frames).encode()).hexdigest()[:12]
    parts = [f'<div class="td-explorer" id="{uid}">']
    if note:
        parts.append(f'<p class="td-explorer-note">{html_lib.escape(note)}</p>')
    parts.append(f'<p class="td-explorer-inert">{html_lib.escape(INERT_NOTE)}</p>')
    for i, (name, _, lab, start, kind) in enumerate(controls):
        label = html_lib.escape(name)
        if kind == "range":
            parts.append(
                f'<label>{label} <input type="range" data-control="{i}" min="0" '
                f'max="{len(lab) - 1}" step="1" value="{start}" aria-label="{label}" disabled> '
                f'<output data-value="{i}">{html_lib.escape(lab[start])}</output></label>'
            )
        else:
            options = "".join(
                f'<option value="{j}"{" selected" if j == start else ""}>'
                f"{html_lib.escape(text)}</option>"
                for j, text in enumerate(lab)
            )
            parts.append(
                f'<label>{label} <select data-control="{i}" aria-label="{label}" disabled>'
                f"{options}</select></label>"
            )
    first = sum(s * c[3] for s, c in zip(strides, controls, strict=True))
    alt = "Precomputed frame for " + ", ".join(c[0] for c in controls)
    parts.append(f'<img alt="{html_lib.escape(alt)}" width="{width}" src="{frames[first]}">')
    script = _PLAYER_JS % {
        "id": uid,
        "frames": json.dumps(frames),
        "labels": json.dumps(labels),
        "strides": json.dumps(strides),
    }
    parts.append(f"<script>{script}</script></div>")
    return "\n".join(parts)


def _with_static_view(box: Widget, html: str) -> Widget:
    """Give the widget ``box`` a second representation, the static view ``html``.

    A live front end (JupyterLab, Binder) shows the widget, which it ranks first; the book, whose
    build ranks HTML above widgets (``_config.yml``), shows the static view, which responds
    without a kernel. ipywidgets 7 (Colab's) displays a widget through ``_ipython_display_``,
    which IPython calls instead of any bundle: there the widget is left to show itself as
    ipywidgets means it to, and the static view is only ``box.static_html``.
    """
    box.static_html = html
    live = getattr(box, "_repr_mimebundle_", None)
    if live is None:  # ipywidgets 7
        return box

    def bundle(**kwargs: object) -> dict[str, object]:
        return {**(live(**kwargs) or {}), "text/html": html}

    box._repr_mimebundle_ = bundle
    return box


def _ipywidgets() -> Any:  # the module ipywidgets (untyped)
    try:
        import ipywidgets
    except ImportError as exc:  # pragma: no cover - ipywidgets is in the pinned environment
        raise ImportError(
            "The widgets need ipywidgets: pip install 'token-dynamics[widgets]'."
        ) from exc
    return ipywidgets


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def _show(out: Widget, fig: Figure) -> None:
    """Make ``fig`` the only output of the ``Output`` widget ``out``, set from the kernel side.

    Not ``with out: display(fig)``: that capture makes nbclient (which executes the book) send
    the widget's state back on the shell channel while it awaits the cell's reply there, and the
    reply is then sometimes missed until the cell timeout (jupyter/nbclient#312; seen here in
    about one run in three of the book build).
    """
    if not _in_kernel():  # outside a kernel there is nowhere to show the figure
        return
    from ..plotting import figure_png

    # as the notebook shows a figure in the house style: at its own dpi, drawn at twice the
    # pixels (a bare savefig would draw at savefig.dpi, 200, and show it twice as large)
    png, width, height = figure_png(fig)
    data = {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": repr(fig)}
    metadata = {"image/png": {"width": width, "height": height}}
    out.outputs = ({"output_type": "display_data", "data": data, "metadata": metadata},)
