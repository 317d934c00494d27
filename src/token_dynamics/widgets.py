"""Interactive widgets (ipywidgets) over the library's pure functions.

A leaf of the package: nothing else imports it, and it imports ipywidgets and matplotlib only
when a builder is called. Each builder returns a widget whose callbacks call the same functions a
notebook would call (``make_field``, ``integrate``, the plotting helpers), so what the widget
shows is what the static figure next to it shows, at other parameter values.

Each builder also precomputes a static view: the same figure drawn on a grid of parameter
values, with HTML controls that switch between the frames. A live front end shows the widget;
the book's static pages, which have no kernel, show the static view, which says what it is.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._typing import ArrayLike
from ._validation import as_tokens, as_vector, check_positive
from .attention import VARIANTS, make_field
from .integrators import GEOMETRIES, METHODS, Trajectory, integrate

if TYPE_CHECKING:  # matplotlib is imported when a builder is called
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["attention_explorer", "draw_variant", "figure_sliders"]

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
  controls.forEach(function (c) { c.addEventListener("input", show); });
  show();
})();"""


def _png_uri(fig: Figure) -> tuple[str, int]:
    """A frame as a data URI of the book's compressed 2x PNG, and its width in CSS pixels."""
    from .plotting import figure_png

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
    for i, (name, _, lab, start, kind) in enumerate(controls):
        label = html_lib.escape(name)
        if kind == "range":
            parts.append(
                f'<label>{label} <input type="range" data-control="{i}" min="0" '
                f'max="{len(lab) - 1}" step="1" value="{start}" aria-label="{label}"> '
                f'<output data-value="{i}">{html_lib.escape(lab[start])}</output></label>'
            )
        else:
            options = "".join(
                f'<option value="{j}"{" selected" if j == start else ""}>'
                f"{html_lib.escape(text)}</option>"
                for j, text in enumerate(lab)
            )
            parts.append(
                f'<label>{label} <select data-control="{i}" aria-label="{label}">'
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
    without a kernel.
    """
    live = box._repr_mimebundle_

    def bundle(**kwargs: object) -> dict[str, object]:
        return {**(live(**kwargs) or {}), "text/html": html}

    box._repr_mimebundle_ = bundle
    box.static_html = html
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
    png = io.BytesIO()
    fig.savefig(png, format="png", bbox_inches="tight")  # as the inline backend renders it
    data = {"image/png": base64.b64encode(png.getvalue()).decode("ascii"), "text/plain": repr(fig)}
    out.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)


def draw_variant(
    ax: Axes,
    X0: ArrayLike,
    variant: str,
    beta: float,
    *,
    times: ArrayLike,
    geometry: str = "euclidean",
    method: str = "rk4",
    dt: float | None = 0.05,
) -> Trajectory:
    """Integrate one attention variant from ``X0`` and draw its trajectories on ``ax``.

    The parameters are the identity (``A = V = I``) with ``beta`` as inverse temperature, as in
    :func:`~token_dynamics.attention.make_field`.

    Parameters
    ----------
    ax : matplotlib Axes
        Cleared, then drawn on (3D axes for ``d = 3``).
    X0 : array_like, shape (n, 2) or (n, 3)
    variant : str
        One of ``attention.VARIANTS``.
    beta : float
    times : array_like, shape (T,)
    geometry, method, dt
        As in :func:`~token_dynamics.integrators.integrate`.

    Returns
    -------
    Trajectory

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> import numpy as np, matplotlib.pyplot as plt
    >>> from token_dynamics.widgets import draw_variant
    >>> fig, ax = plt.subplots()
    >>> X0 = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> draw_variant(ax, X0, "softmax", 2.0, times=[0.0, 1.0], geometry="sphere").states.shape
    (2, 3, 2)
    >>> plt.close(fig)
    """
    from .plotting import plot_sphere, plot_trajectories

    X0 = as_tokens(X0, "X0")
    field = make_field(variant, X0.shape[1], beta=beta)
    traj = integrate(field, X0, times, method=method, dt=dt, geometry=geometry)
    ax.clear()
    if geometry == "sphere":
        plot_sphere(ax, d=X0.shape[1])
    plot_trajectories(ax, traj)
    ax.set_title(f"{variant}, beta = {beta:.3g}, t = {traj.times[-1]:.3g}")
    return traj


def attention_explorer(
    X0: ArrayLike,
    *,
    times: ArrayLike | None = None,
    variants: Sequence[str] = VARIANTS,
    beta: float = 1.0,
    beta_range: tuple[float, float] = (0.1, 30.0),
    geometry: str = "euclidean",
    method: str = "rk4",
    dt: float | None = 0.05,
) -> Widget:
    """A widget over the inverse temperature and the attention variant that redraws the cloud.

    A log-scale slider sets ``beta``, a drop-down menu the variant; each change calls
    :func:`draw_variant` on one figure shown in an ``Output`` widget. The static view draws
    every variant at ``STATIC_STEPS`` values of ``beta`` spread geometrically over
    ``beta_range``; a frame whose computation fails numerically (a Sinkhorn iteration that
    does not converge at a small temperature) says so in place of the picture.

    Parameters
    ----------
    X0 : array_like, shape (n, 2) or (n, 3)
        Initial tokens.
    times : array_like, shape (T,), optional
        Output times; default ``np.linspace(0, 5, 26)``.
    variants : sequence of str
        Entries of the menu (names of ``attention.VARIANTS``).
    beta : float
        Initial inverse temperature.
    beta_range : (float, float)
        Slider bounds, positive.
    geometry, method, dt
        As in :func:`~token_dynamics.integrators.integrate`.

    Returns
    -------
    ipywidgets.VBox
        Children: the slider, the menu and the output. Its attributes ``figure``, ``slider``,
        ``menu``, ``trajectory`` (the last drawn) and ``static_html`` (the static view, also
        its ``text/html`` representation) give access from code.

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.widgets import attention_explorer
    >>> box = attention_explorer(np.eye(2), times=[0.0, 0.5], variants=("softmax", "hardmax"))
    >>> box.menu.value = "hardmax"
    >>> box.trajectory.states.shape
    (2, 2, 2)
    >>> box.static_html.count("data:image/png")  # 5 values of beta, 2 variants, 1 shown
    11
    """
    widgets = _ipywidgets()
    from matplotlib.figure import Figure

    X0 = as_tokens(X0, "X0")
    if X0.shape[1] not in (2, 3):
        raise ValueError(f"`X0` must have d = 2 or 3 columns to be drawn; got {X0.shape[1]}.")
    times = np.linspace(0.0, 5.0, 26) if times is None else as_vector(times, "times")
    variants = tuple(variants)
    bad = [v for v in variants if v not in VARIANTS]
    if not variants or bad:
        raise ValueError(f"`variants` must be names from {VARIANTS}; got {variants!r}.")
    lo = check_positive(beta_range[0], "beta_range")
    hi = check_positive(beta_range[1], "beta_range")
    beta = check_positive(beta, "beta")
    if not lo <= beta <= hi:
        raise ValueError(f"`beta` = {beta} must lie in `beta_range` = {beta_range}.")
    if geometry not in GEOMETRIES or method not in METHODS:
        raise ValueError(f"`geometry` must be in {GEOMETRIES} and `method` in {METHODS}.")

    fig = Figure(figsize=(5, 5))
    ax = fig.add_subplot(projection="3d" if X0.shape[1] == 3 else None)
    slider = widgets.FloatLogSlider(
        value=beta, base=10, min=np.log10(lo), max=np.log10(hi), step=0.05, description="beta"
    )
    menu = widgets.Dropdown(options=variants, value=variants[0], description="variant")
    out = widgets.Output()
    box = widgets.VBox([slider, menu, out])

    def redraw(_: object = None) -> None:
        box.trajectory = draw_variant(
            ax, X0, menu.value, slider.value, times=times, geometry=geometry, method=method, dt=dt
        )
        _show(out, fig)

    slider.observe(redraw, names="value")
    menu.observe(redraw, names="value")
    box.figure, box.slider, box.menu = fig, slider, menu
    redraw()

    def frame(ax: Axes, b: float, variant: str) -> None:
        try:
            draw_variant(ax, X0, variant, b, times=times, geometry=geometry, method=method, dt=dt)
        except FloatingPointError as exc:
            ax.clear()
            ax.set_axis_off()
            ax.figure.text(  # figure text: the same call for 2D and 3D axes
                0.5,
                0.5,
                f"{variant}, beta = {b:.3g}:\n{exc}",
                ha="center",
                va="center",
                wrap=True,
                fontsize="small",
            )

    grid = np.geomspace(lo, hi, STATIC_STEPS)
    start = int(np.argmin(np.abs(np.log(grid / beta))))
    html = _static_view(
        frame,
        [
            ("beta", grid, [f"{b:.3g}" for b in grid], start, "range"),
            ("variant", variants, variants, 0, "select"),
        ],
        figsize=(4.0, 4.0),
        projection="3d" if X0.shape[1] == 3 else None,
        note=(
            f"Precomputed view ({STATIC_STEPS * len(variants)} frames): beta takes "
            f"{STATIC_STEPS} values from {lo:g} to {hi:g}. In Jupyter the widget recomputes "
            "for any value."
        ),
    )
    return _with_static_view(box, html)


def figure_sliders(
    draw: Callable[..., object],
    *,
    figsize: tuple[float, float] = (4.0, 4.0),
    static: Mapping[str, ArrayLike] | None = None,
    **ranges: tuple[float, float, float, float],
) -> Widget:
    """Sliders over the keyword arguments of ``draw``, redrawing one figure on each change.

    The static view draws ``draw`` at every combination of the values in ``static`` (by
    default ``STATIC_STEPS`` values over each range), the other arguments at their initial
    values, with one HTML slider per argument of ``static``.

    Parameters
    ----------
    draw : callable ``draw(ax, **values)``
        Draws on a cleared matplotlib Axes.
    figsize : (float, float)
        Size of the figure, in inches.
    static : mapping name -> sequence of float, optional
        Values of the static view, for some of the arguments; the number of combinations is
        at most ``MAX_STATIC_FRAMES``.
    **ranges : (min, max, step, value)
        One float slider per keyword argument of ``draw``.

    Returns
    -------
    ipywidgets.VBox
        Children: the sliders in the order given, then the output. Its attributes ``figure``,
        ``sliders`` (a dict by name) and ``static_html`` (the static view, also its
        ``text/html`` representation) give access from code.

    Examples
    --------
    >>> from token_dynamics.widgets import figure_sliders
    >>> calls = []
    >>> box = figure_sliders(lambda ax, a: calls.append(a), a=(0.0, 1.0, 0.1, 0.5))
    >>> box.sliders["a"].value = 0.8
    >>> calls[0], calls[-1]  # the first drawing, then the one the slider asked for
    (0.5, 0.8)
    >>> calls[1:-1]  # in between, the static view: 5 values from 0 to 1
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    widgets = _ipywidgets()
    from matplotlib.figure import Figure

    if not callable(draw):
        raise ValueError(f"`draw` must be a function draw(ax, **values); got {draw!r}.")
    if not ranges:
        raise ValueError("give at least one slider range, as name=(min, max, step, value).")
    for name, spec in ranges.items():
        try:
            lo, hi, step, value = (float(v) for v in spec)
            ok = lo < hi and step > 0 and lo <= value <= hi
        except (TypeError, ValueError):  # not four numbers
            ok = False
        if not ok:
            raise ValueError(
                f"`{name}` must be (min, max, step, value) with min < max, step > 0 and "
                f"min <= value <= max; got {spec!r}."
            )
    fig = Figure(figsize=figsize)
    ax = fig.add_subplot()
    sliders = {
        name: widgets.FloatSlider(
            min=spec[0], max=spec[1], step=spec[2], value=spec[3], description=name
        )
        for name, spec in ranges.items()
    }
    out = widgets.Output()
    box = widgets.VBox([*sliders.values(), out])

    def redraw(_: object = None) -> None:
        ax.clear()
        draw(ax, **{name: slider.value for name, slider in sliders.items()})
        _show(out, fig)

    for slider in sliders.values():
        slider.observe(redraw, names="value")
    box.figure, box.sliders = fig, sliders
    redraw()

    if static is None:
        static = {
            name: np.linspace(spec[0], spec[1], STATIC_STEPS) for name, spec in ranges.items()
        }
    if not isinstance(static, Mapping) or not static or set(static) - set(ranges):
        raise ValueError(
            f"`static` must map some of the slider names {sorted(ranges)} to values; "
            f"got {static!r}."
        )
    grids = {name: as_vector(values, f"static[{name!r}]") for name, values in static.items()}
    fixed = {name: float(spec[3]) for name, spec in ranges.items() if name not in grids}

    def frame(ax: Axes, *values: float) -> None:
        draw(ax, **fixed, **{k: float(v) for k, v in zip(grids, values, strict=True)})

    controls = [
        (
            name,
            grid,
            [f"{v:.3g}" for v in grid],
            int(np.argmin(np.abs(grid - ranges[name][3]))),
            "range",
        )
        for name, grid in grids.items()
    ]
    n = int(np.prod([len(g) for g in grids.values()]))
    if n > MAX_STATIC_FRAMES:
        raise ValueError(
            f"`static` gives {n} combinations of values, more than {MAX_STATIC_FRAMES}: give "
            "fewer values, or name fewer sliders (the others keep their initial value)."
        )
    kept = "; ".join(f"{name} = {v:g}" for name, v in fixed.items())
    note = (
        f"Precomputed view ({n} frames)"
        + (f", with {kept}" if kept else "")
        + (". In Jupyter the widget recomputes for any value.")
    )
    return _with_static_view(box, _static_view(frame, controls, figsize=figsize, note=note))
