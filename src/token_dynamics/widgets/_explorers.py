"""The widget builders: an attention explorer and sliders over any figure (private)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import as_tokens, as_vector, check_instance, check_positive
from ..attention import VARIANTS, make_field
from ..integrators import GEOMETRIES, METHODS, Trajectory, integrate
from ._static import (
    MAX_STATIC_FRAMES,
    STATIC_STEPS,
    Widget,
    _ipywidgets,
    _show,
    _static_view,
    _with_static_view,
)

if TYPE_CHECKING:  # matplotlib is imported when a builder is called
    from matplotlib.axes import Axes

__all__ = ["attention_explorer", "draw_variant", "figure_sliders"]


def _drawn_tokens(X0: ArrayLike) -> FloatArray:
    """The initial tokens, checked to have d = 2 or 3 columns (the dimensions drawn)."""
    X0 = as_tokens(X0, "X0")
    if X0.shape[1] not in (2, 3):
        raise ValueError(f"`X0` must have d = 2 or 3 columns to be drawn; got {X0.shape[1]}.")
    return X0


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

    Raises
    ------
    TypeError
        If ``ax`` is not a matplotlib Axes.
    ValueError
        If ``X0`` does not have 2 or 3 columns, or an argument of ``integrate`` is invalid.
    FloatingPointError
        If the trajectory leaves the range a figure can draw (``plotting.MAX_DRAWABLE``), or
        the integration fails.

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
    from matplotlib.axes import Axes

    from ..plotting import MAX_DRAWABLE, plot_sphere, plot_trajectories

    fix = "Pass a matplotlib Axes, e.g. from `fig, ax = plt.subplots()`."
    ax = check_instance(ax, Axes, "ax", fix)
    X0 = _drawn_tokens(X0)
    field = make_field(variant, X0.shape[1], beta=beta)
    traj = integrate(field, X0, times, method=method, dt=dt, geometry=geometry)
    reach = float(np.max(np.abs(traj.states)))
    if reach > MAX_DRAWABLE:
        raise FloatingPointError(
            f"the {variant} trajectory from `X0` reaches |x| = {reach:.3g} by t = "
            f"{traj.times[-1]:g} ({method}), beyond the {MAX_DRAWABLE:g} a figure can draw; "
            "start from smaller tokens or stop earlier."
        )
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

    X0 = _drawn_tokens(X0)
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
