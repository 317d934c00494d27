"""Plotting helpers for the chapter on tokens (ax in, artist out).

Token clouds in 2D, 3D and on the circle/sphere, trajectories, attention matrices, the velocity
field of a token cloud, and :func:`animate`, which returns a self-contained HTML animation
(jshtml, frames embedded as PNG) under a frame cap and a size cap and closes its figure.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from matplotlib.collections import LineCollection

from .._validation import as_matrix, as_tokens, as_weights, check_int, check_positive

__all__ = [
    "MAX_ANIMATION_BYTES",
    "MAX_ANIMATION_FRAMES",
    "AnimationHTML",
    "animate",
    "plot_attention_matrix",
    "plot_sphere",
    "plot_tokens",
    "plot_trajectories",
    "plot_velocity_field",
]

#: Default frame cap of :func:`animate`: 60 frames play 5 s at 12 fps, enough to see a cloud
#: cluster, and keep a page light.
MAX_ANIMATION_FRAMES = 60
#: Default size cap of :func:`animate` (bytes of HTML): 60 small PNG frames take ~1-2 MB; 5 MiB
#: leaves room for 3D frames while keeping each book page well under the usual 10 MB budget.
MAX_ANIMATION_BYTES = 5 * 2**20


def _axes(ax: Any, d: int) -> Any:
    if ax is not None:
        if d == 3 and getattr(ax, "name", "") != "3d":
            raise ValueError("`ax` must be a 3D axes (projection='3d') to draw tokens in d = 3.")
        return ax
    import matplotlib.pyplot as plt

    return plt.figure().add_subplot(projection="3d") if d == 3 else plt.gca()


def _check_dim(d: int, name: str) -> None:
    if d not in (2, 3):
        raise ValueError(
            f"`{name}` must have d = 2 or 3 columns to be drawn; got d = {d}. Project the tokens "
            "first (e.g. on two coordinates or principal axes)."
        )


def _states(trajectory: Any) -> np.ndarray:
    states = getattr(trajectory, "states", trajectory)
    arr = np.asarray(states, dtype=np.float64)
    if arr.ndim != 3 or not np.all(np.isfinite(arr)):
        raise ValueError(
            "`trajectory` must be a Trajectory or a finite array of shape (T, n, d); "
            f"got shape {arr.shape}."
        )
    return arr


def _plot_curves(
    ax: Any,
    x: Any,
    curves: Any,
    *,
    xlabel: str,
    ylabel: str | None = None,
    logy: bool = False,
) -> list:
    """One line per ``label -> values`` of ``curves`` against ``x``, labelled, with a legend."""
    x = np.asarray(x, dtype=float)
    lines = []
    for label, values in curves.items():
        lines += ax.plot(x, np.asarray(values, dtype=float), label=label)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    return lines


def plot_tokens(
    X: Any, *, ax: Any = None, weights: Any = None, size: float = 20.0, **kwargs: Any
) -> Any:
    """Scatter plot of a token cloud in 2D or 3D.

    Parameters
    ----------
    X : array_like, shape (n, 2) or (n, 3)
    ax : matplotlib Axes, optional
        A 3D axes for ``d = 3``; the current (or a new 3D) axes if ``None``.
    weights : array_like, shape (n,), optional
        Marker areas proportional to ``n * weights`` (a weighted measure).
    size : float
        Marker area of a token of weight ``1/n``.
    **kwargs
        Passed to ``ax.scatter`` (``color``, ``c``, ``label``, ...).

    Returns
    -------
    matplotlib.collections.PathCollection

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023 (token
    clouds on the sphere).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> art = plot_tokens([[0.0, 1.0], [1.0, 0.0]], ax=ax)
    >>> art.get_offsets().shape
    (2, 2)
    >>> plt.close(fig)
    """
    X = as_tokens(X)
    n, d = X.shape
    _check_dim(d, "X")
    w = as_weights(weights, n)
    ax = _axes(ax, d)
    return ax.scatter(*X.T, s=size * n * w, **kwargs)


def plot_sphere(ax: Any, *, d: int = 2, color: str = "0.8", **kwargs: Any) -> Any:
    """Draw the unit circle (``d = 2``) or a wireframe unit sphere (``d = 3``) as a backdrop.

    Parameters
    ----------
    ax : matplotlib Axes
        3D axes when ``d = 3``.
    d : {2, 3}
    color : str
    **kwargs
        Passed to ``ax.plot`` (2D) or ``ax.plot_wireframe`` (3D).

    Returns
    -------
    matplotlib artist
        The circle's ``Line2D`` or the sphere's wireframe.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> line = plot_sphere(ax)
    >>> line.get_xydata().shape
    (201, 2)
    >>> plt.close(fig)
    """
    _check_dim(d, "d")
    ax = _axes(ax, d)
    if d == 2:
        th = np.linspace(0, 2 * np.pi, 201)
        ax.set_aspect("equal")
        return ax.plot(np.cos(th), np.sin(th), color=color, lw=kwargs.pop("lw", 1.0), **kwargs)[0]
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    xyz = np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v)
    ax.set_box_aspect((1, 1, 1))
    return ax.plot_wireframe(*xyz, color=color, lw=kwargs.pop("lw", 0.4), **kwargs)


def plot_trajectories(
    trajectory: Any,
    *,
    ax: Any = None,
    color: Any = "C0",
    alpha: float = 0.6,
    show_start: bool = True,
    show_end: bool = True,
    **kwargs: Any,
) -> Any:
    """Paths of every token over time, with its start (hollow) and end (filled) marked.

    Parameters
    ----------
    trajectory : Trajectory or array_like, shape (T, n, d)
        ``d`` = 2 or 3.
    ax : matplotlib Axes, optional
    color : color
    alpha : float
    show_start, show_end : bool
    **kwargs
        Passed to the line collection.

    Returns
    -------
    matplotlib.collections.LineCollection (or Line3DCollection in 3D)

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> import numpy as np, matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> states = np.linspace(0, 1, 5)[:, None, None] * np.ones((5, 3, 2))
    >>> len(plot_trajectories(states, ax=ax).get_segments())
    3
    >>> plt.close(fig)
    """
    states = _states(trajectory)
    d = states.shape[2]
    _check_dim(d, "trajectory")
    ax = _axes(ax, d)
    segments = np.swapaxes(states, 0, 1)  # (n, T, d)
    if d == 2:
        lines = LineCollection(list(segments), colors=color, alpha=alpha, **kwargs)
        ax.add_collection(lines)
        ax.autoscale_view()
    else:
        from mpl_toolkits.mplot3d.art3d import Line3DCollection

        lines = Line3DCollection(list(segments), colors=color, alpha=alpha, **kwargs)
        ax.add_collection3d(lines)
    if show_start:
        ax.scatter(*states[0].T, s=12, facecolors="none", edgecolors=color)
    if show_end:
        ax.scatter(*states[-1].T, s=16, color=color)
    return lines


def plot_attention_matrix(
    P: Any, *, ax: Any = None, cmap: str = "viridis", colorbar: bool = True, **kwargs: Any
) -> Any:
    """Image of an attention matrix, query ``i`` down the rows and key ``j`` across.

    Parameters
    ----------
    P : array_like, shape (n, m)
        E.g. ``field.attention_matrix(X)``.
    ax : matplotlib Axes, optional
    cmap : str
    colorbar : bool
        Add a colour bar next to the axes.
    **kwargs
        Passed to ``ax.imshow``.

    Returns
    -------
    matplotlib.image.AxesImage

    References
    ----------
    A. Vaswani et al., *Attention Is All You Need*, NeurIPS 2017.

    Examples
    --------
    >>> import numpy as np, matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> plot_attention_matrix(np.eye(3) / 1.0, ax=ax).get_array().shape
    (3, 3)
    >>> plt.close(fig)
    """
    P = as_matrix(P, "P")
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    image = ax.imshow(P, cmap=cmap, interpolation="nearest", **kwargs)
    ax.set_xlabel("key $j$")
    ax.set_ylabel("query $i$")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return image


def plot_velocity_field(
    field: Any,
    X: Any,
    *,
    ax: Any = None,
    t: float = 0.0,
    weights: Any = None,
    grid: int = 15,
    extent: Any = None,
    **kwargs: Any,
) -> Any:
    r"""Arrows of the field :math:`\Gamma_\mu` of the tokens' measure on a grid (``d = 2``).

    Parameters
    ----------
    field : AttentionField
        Any object with ``velocity_at(Y, X, t, weights=...)``.
    X : array_like, shape (n, 2)
        Tokens defining :math:`\mu`.
    ax : matplotlib Axes, optional
    t : float
    weights : array_like, shape (n,), optional
    grid : int
        Number of arrows per side.
    extent : (xmin, xmax, ymin, ymax), optional
        Default: the tokens' bounding box with a 20 % margin.
    **kwargs
        Passed to ``ax.quiver``.

    Returns
    -------
    matplotlib.quiver.Quiver

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> import numpy as np, matplotlib.pyplot as plt
    >>> from token_dynamics.attention import Softmax
    >>> fig, ax = plt.subplots()
    >>> q = plot_velocity_field(Softmax(np.eye(2), -np.eye(2)), np.eye(2), ax=ax, grid=4)
    >>> q.U.shape
    (16,)
    >>> plt.close(fig)
    """
    X = as_tokens(X, d=2)
    grid = check_int(grid, "grid", minimum=2)
    if extent is None:
        lo, hi = X.min(axis=0), X.max(axis=0)
        pad = 0.2 * np.maximum(hi - lo, 1.0)
        extent = (lo[0] - pad[0], hi[0] + pad[0], lo[1] - pad[1], hi[1] + pad[1])
    x0, x1, y0, y1 = (float(e) for e in extent)
    gx, gy = np.meshgrid(np.linspace(x0, x1, grid), np.linspace(y0, y1, grid))
    Y = np.column_stack([gx.ravel(), gy.ravel()])
    U = field.velocity_at(Y, X, t, weights=weights)
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    return ax.quiver(Y[:, 0], Y[:, 1], U[:, 0], U[:, 1], **kwargs)


#: Matplotlib's jshtml player draws its buttons with Font Awesome from a CDN; these glyphs
#: replace the icons so that the page makes no outside request.
_ICONS = {
    "fa fa-play fa-flip-horizontal": "\u25c0",  # play backwards
    "fa fa-fast-backward": "\u23ee",
    "fa fa-step-backward": "\u23f4|",
    "fa fa-step-forward": "|\u23f5",
    "fa fa-fast-forward": "\u23ed",
    "fa fa-pause": "\u23f8",
    "fa fa-minus": "\u2212",
    "fa fa-plus": "+",
    "fa fa-play": "\u25b6",
}


#: Size in bytes of matplotlib's jshtml player without frames (measured: ~16 kB), used to
#: estimate how many frames fit under the size cap.
_PLAYER_BYTES = 20_000


def _self_contained(html: str) -> str:
    """Drop the Font Awesome stylesheet of matplotlib's player and inline its icons."""
    html = re.sub(r"<link[^>]*font-awesome[^>]*>", "", html)
    for cls, glyph in _ICONS.items():
        html = html.replace(f'<i class="{cls}"></i>', glyph)
    return html


class AnimationHTML(str):
    """HTML text of an animation that a notebook displays as such (``_repr_html_``).

    Examples
    --------
    >>> AnimationHTML("<p>frame</p>")._repr_html_()
    '<p>frame</p>'
    """

    def _repr_html_(self) -> str:
        return str(self)


def animate(
    trajectory: Any,
    *,
    sphere: bool = False,
    max_frames: int = MAX_ANIMATION_FRAMES,
    max_bytes: int = MAX_ANIMATION_BYTES,
    interval: int = 80,
    dpi: float = 72.0,
    figsize: tuple[float, float] = (4.0, 4.0),
    color: Any = "C0",
    title: str | None = None,
    labels: Any = None,
) -> AnimationHTML:
    """Self-contained HTML animation (jshtml) of a token trajectory in 2D or 3D.

    At most ``max_frames`` frames are drawn (evenly spaced, the last state included). If the
    HTML exceeds ``max_bytes``, it is drawn again with the number of frames that fits (estimated
    from the size per frame); if even two frames do not fit, ``ValueError`` asks for a lower
    ``dpi`` or ``figsize``. The figure is closed before returning, so nothing else is displayed.
    The player's icons are inlined as Unicode glyphs: the HTML makes no outside request.

    Parameters
    ----------
    trajectory : Trajectory or array_like, shape (T, n, d)
        ``d`` = 2 or 3.
    sphere : bool
        Draw the unit circle/sphere behind the tokens and fix the limits to it.
    max_frames : int
    max_bytes : int
    interval : int
        Milliseconds between frames.
    dpi : float
    figsize : (float, float)
    color : color
    title : str, optional
        Title; ``{t}`` in it is replaced by the frame's time (its index for a bare array).
    labels : sequence of str, shape (T,), optional
        One title per state, e.g. ``"beta = 4"`` when the frames are the final clouds of a
        parameter sweep (the static-site stand-in for a widget); overrides ``title``.

    Returns
    -------
    AnimationHTML
        A ``str`` of HTML (with ``_repr_html_``) that needs no external file or server.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> states = np.linspace(1, 0, 4)[:, None, None] * np.ones((4, 3, 2))
    >>> html = animate(states, max_frames=3)
    >>> "<script" in html and "http" not in html
    True
    """
    import matplotlib as mpl
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    states = _states(trajectory)
    T, _, d = states.shape
    _check_dim(d, "trajectory")
    max_frames = check_int(max_frames, "max_frames", minimum=2)
    max_bytes = check_int(max_bytes, "max_bytes")
    interval = check_int(interval, "interval")
    dpi = check_positive(dpi, "dpi")
    times = getattr(trajectory, "times", None)
    if labels is not None:
        labels = [str(label) for label in labels]
        if len(labels) != T:
            raise ValueError(f"`labels` must hold one title per state ({T}); got {len(labels)}.")
    if sphere:
        lo, hi = np.full(d, -1.1), np.full(d, 1.1)
    else:
        lo, hi = states.min(axis=(0, 1)), states.max(axis=(0, 1))
        pad = 0.05 * np.maximum(hi - lo, 1e-9)
        lo, hi = lo - pad, hi + pad

    def render(n_frames: int) -> str:
        frames = np.unique(np.linspace(0, T - 1, min(n_frames, T)).round().astype(int))
        fig = plt.figure(figsize=figsize, dpi=dpi)
        try:
            # a 2D Axes or an mpl_toolkits Axes3D (untyped) by the dimension
            ax: Any = fig.add_subplot(projection="3d" if d == 3 else None)
            if sphere:
                plot_sphere(ax, d=d)
            for k, (a, b) in enumerate(zip(lo, hi, strict=True)):
                getattr(ax, f"set_{'xyz'[k]}lim")(a, b)
            if d == 2:
                ax.set_aspect("equal")
            scat = ax.scatter(*states[frames[0]].T, s=14, color=color)

            def update(k: int) -> tuple[Any, ...]:
                X = states[frames[k]]
                if d == 2:
                    scat.set_offsets(X)
                else:
                    scat._offsets3d = (X[:, 0], X[:, 1], X[:, 2])
                if labels is not None:
                    ax.set_title(labels[frames[k]])
                elif title is not None:
                    t = times[frames[k]] if times is not None else frames[k]
                    ax.set_title(title.replace("{t}", f"{t:.2f}"))
                return (scat,)

            anim = FuncAnimation(fig, update, frames=len(frames), interval=interval, blit=False)
            with mpl.rc_context({"animation.embed_limit": 4 * max_bytes / 2**20}):
                return _self_contained(anim.to_jshtml(default_mode="once"))
        finally:
            plt.close(fig)

    n_frames = min(max_frames, T)
    while True:
        html = render(n_frames)
        size = len(html.encode())
        if size <= max_bytes:
            return AnimationHTML(html)
        # the player's script is ~20 kB; the rest grows with the number of frames
        per_frame = max(size - _PLAYER_BYTES, 1) / n_frames
        fit = int((max_bytes - _PLAYER_BYTES) / per_frame)
        if n_frames <= 2 or fit < 2:
            raise ValueError(
                f"The animation exceeds `max_bytes` = {max_bytes} bytes ({size} with {n_frames} "
                "frames); lower `dpi` or `figsize`, or raise `max_bytes`."
            )
        n_frames = max(2, min(fit, n_frames - 1))
