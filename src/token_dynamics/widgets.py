"""Interactive widgets (ipywidgets) over the library's pure functions.

A leaf of the package: nothing else imports it, and it imports ipywidgets and matplotlib only
when a builder is called. Each builder returns a widget whose callbacks call the same functions a
notebook would call (``make_field``, ``integrate``, the plotting helpers), so what the widget
shows is what the static figure next to it shows, at other parameter values.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._validation import as_tokens, as_vector, check_positive
from .attention import VARIANTS, make_field
from .integrators import GEOMETRIES, METHODS, Trajectory, integrate

__all__ = ["attention_explorer", "draw_variant", "figure_sliders"]


def _ipywidgets() -> Any:
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


def _show(out: Any, fig: Any) -> None:
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
    ax: Any,
    X0: Any,
    variant: str,
    beta: float,
    *,
    times: Any,
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
    plot_trajectories(traj, ax=ax)
    ax.set_title(f"{variant}, beta = {beta:.3g}, t = {traj.times[-1]:.3g}")
    return traj


def attention_explorer(
    X0: Any,
    *,
    times: Any = None,
    variants: Sequence[str] = VARIANTS,
    beta: float = 1.0,
    beta_range: tuple[float, float] = (0.1, 30.0),
    geometry: str = "euclidean",
    method: str = "rk4",
    dt: float | None = 0.05,
) -> Any:
    """A widget over the inverse temperature and the attention variant that redraws the cloud.

    A log-scale slider sets ``beta``, a drop-down menu the variant; each change calls
    :func:`draw_variant` on one figure shown in an ``Output`` widget.

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
        ``menu`` and ``trajectory`` (the last drawn) give access from code.

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

    def redraw(_: Any = None) -> None:
        box.trajectory = draw_variant(
            ax, X0, menu.value, slider.value, times=times, geometry=geometry, method=method, dt=dt
        )
        _show(out, fig)

    slider.observe(redraw, names="value")
    menu.observe(redraw, names="value")
    box.figure, box.slider, box.menu = fig, slider, menu
    redraw()
    return box


def figure_sliders(
    draw: Callable[..., Any],
    *,
    figsize: tuple[float, float] = (4.0, 4.0),
    **ranges: tuple[float, float, float, float],
) -> Any:
    """Sliders over the keyword arguments of ``draw``, redrawing one figure on each change.

    Parameters
    ----------
    draw : callable ``draw(ax, **values)``
        Draws on a cleared matplotlib Axes.
    figsize : (float, float)
        Size of the figure, in inches.
    **ranges : (min, max, step, value)
        One float slider per keyword argument of ``draw``.

    Returns
    -------
    ipywidgets.VBox
        Children: the sliders in the order given, then the output. Its attributes ``figure`` and
        ``sliders`` (a dict by name) give access from code.

    Examples
    --------
    >>> from token_dynamics.widgets import figure_sliders
    >>> calls = []
    >>> box = figure_sliders(lambda ax, a: calls.append(a), a=(0.0, 1.0, 0.1, 0.5))
    >>> box.sliders["a"].value = 0.8
    >>> calls
    [0.5, 0.8]
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

    def redraw(_: Any = None) -> None:
        ax.clear()
        draw(ax, **{name: slider.value for name, slider in sliders.items()})
        _show(out, fig)

    for slider in sliders.values():
        slider.observe(redraw, names="value")
    box.figure, box.sliders = fig, sliders
    redraw()
    return box
