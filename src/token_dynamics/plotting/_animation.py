"""Animations as self-contained HTML (jshtml, frames embedded as PNG).

:func:`animate` draws a token trajectory under a frame cap and a size cap and closes its
figure; :func:`animate_layers` plays the token sets through the layers of a network.
"""

from __future__ import annotations

import base64
import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.typing import ColorType

from .._typing import ArrayLike, FloatArray
from .._validation import check_attributes, check_bool, check_int, check_positive
from ._checks import _drawable
from ._clouds import _check_dim, _colour, _scatter, _states, plot_sphere
from ._style import _check_pixels, _compress_png

if TYPE_CHECKING:
    from ..integrators import Trajectory
    from ..interpolation import Transformer

__all__ = [
    "MAX_ANIMATION_BYTES",
    "MAX_ANIMATION_FRAMES",
    "AnimationHTML",
    "animate",
    "animate_layers",
]


#: Default frame cap of :func:`animate`: 60 frames play 5 s at 12 fps, enough to see a cloud
#: cluster, and keep a page light.
MAX_ANIMATION_FRAMES = 60


#: Default size cap of :func:`animate` (bytes of HTML): 60 small PNG frames take ~1-2 MB; 5 MiB
#: leaves room for 3D frames while keeping each book page well under the usual 10 MB budget.
MAX_ANIMATION_BYTES = 5 * 2**20


#: Matplotlib's jshtml player draws its buttons with Font Awesome from a CDN; these glyphs
#: replace the icons so that the page makes no outside request. Only triangles of the
#: Geometric Shapes block, a Dingbats bar and ASCII: the media symbols of U+23E9-U+23FA
#: (first, last, pause) are missing from common fonts (DejaVu included) and showed as boxes.
_ICONS = {
    "fa fa-play fa-flip-horizontal": "\u25c0",  # play backwards
    "fa fa-fast-backward": "|\u25c0\u25c0",
    "fa fa-step-backward": "|\u25c0",
    "fa fa-step-forward": "\u25b6|",
    "fa fa-fast-forward": "\u25b6\u25b6|",
    "fa fa-pause": "\u275a\u275a",
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


def _compress_frames(html: str) -> str:
    """Re-encode every embedded PNG frame with the book's palette (:func:`_compress_png`)."""

    def one(match: re.Match[str]) -> str:
        data = re.sub(r"[\\\s]", "", match.group(1))  # matplotlib breaks lines with "\\"
        png = _compress_png(base64.b64decode(data))
        return "data:image/png;base64," + base64.b64encode(png).decode("ascii")

    return re.sub(r"data:image/png;base64,([A-Za-z0-9+/=\\\s]+)", one, html)


def _first_frame_shown(html: str) -> str:
    """Give the player's image its first frame, and that frame's size, in the markup.

    Matplotlib's player leaves its ``<img>`` empty and sets its source from a script. In
    JupyterLab's default windowing mode, after "Run All" an animation rendered out of view stayed
    0 px tall (its controls showing, its frames not) until a button changed the frame; an image
    that has its source from the start is shown. The size (from the PNG's header) reserves the
    space before the frame is decoded; the frame still shrinks to a narrower column.
    """
    match = re.search(r'frames\[0\] = "(data:image/png;base64,([A-Za-z0-9+/=]+))"', html)
    if match is None:
        return html
    header = base64.b64decode(match.group(2)[:32])  # the signature and the IHDR chunk
    width, height = int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")
    return re.sub(
        r'<img id="(_anim_img\w+)">',
        lambda img: (
            f'<img id="{img.group(1)}" src="{match.group(1)}" width="{width}" height="{height}"'
            ' style="max-width: 100%; height: auto;" alt="the animation\'s frame">'
        ),
        html,
        count=1,
    )


class AnimationHTML(str):
    """HTML text of an animation that a notebook displays as such (``_repr_html_``).

    Returned by :func:`animate` and :func:`animate_layers`; a ``str`` otherwise.

    Parameters
    ----------
    html : str
        The HTML text.

    Examples
    --------
    >>> from token_dynamics.plotting import AnimationHTML
    >>> AnimationHTML("<p>frame</p>")._repr_html_()
    '<p>frame</p>'
    """

    def __new__(cls, html: str) -> AnimationHTML:
        if not isinstance(html, str):
            raise TypeError(
                f"`html` must be the HTML text of an animation (a str); got {type(html).__name__}."
                " Build one with `animate` or `animate_layers`."
            )
        return super().__new__(cls, html)

    def _repr_html_(self) -> str:
        return str(self)


def _check_figsize(figsize: object) -> tuple[float, float]:
    """Return `figsize` as two positive widths in inches."""
    if not isinstance(figsize, (tuple, list)) or len(figsize) != 2:
        raise ValueError(f"`figsize` must be (width, height) in inches; got {figsize!r}.")
    return check_positive(figsize[0], "figsize"), check_positive(figsize[1], "figsize")


def _check_colors(color: object, n: int) -> None:
    """Check `color` is one colour, or a sequence of one colour per token."""
    from matplotlib.colors import is_color_like

    one = not isinstance(color, (int, float)) and is_color_like(color)
    each = (
        isinstance(color, (list, tuple))
        and len(color) == n
        and all(not isinstance(c, (int, float)) and is_color_like(c) for c in color)
    )
    if not (one or each):
        raise ValueError(
            f"`color` must be a matplotlib colour ('C0', '#0072B2') or a list of one colour per "
            f"token ({n}); got {color!r}."
        )


def animate(
    trajectory: Trajectory | ArrayLike,
    *,
    sphere: bool = False,
    max_frames: int = MAX_ANIMATION_FRAMES,
    max_bytes: int = MAX_ANIMATION_BYTES,
    interval: int = 80,
    dpi: float = 100.0,
    figsize: tuple[float, float] = (4.0, 4.0),
    color: ColorType | Sequence[ColorType] = "C0",
    title: str | None = None,
    labels: Sequence[str] | None = None,
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
        The most frames drawn (at least 2).
    max_bytes : int
        The most bytes of HTML.
    interval : int
        Milliseconds between frames.
    dpi : float
        Resolution of the frames: each is ``figsize`` times ``dpi`` pixels (400 x 400 by
        default), shown at that size or narrower.
    figsize : (float, float)
        Size of the frames, in inches.
    color : color or sequence of colors
        Of every token, or one per token.
    title : str, optional
        Title; ``{t}`` in it is replaced by the frame's time (its index for a bare array).
    labels : sequence of str, shape (T,), optional
        One title per state, e.g. ``"beta = 4"`` when the frames are the final clouds of a
        parameter sweep (the static-site stand-in for a widget); overrides ``title``.

    Returns
    -------
    AnimationHTML
        A ``str`` of HTML (with ``_repr_html_``) that needs no external file or server.

    Raises
    ------
    ValueError
        If the states are not a finite ``(T, n, d)`` array with ``d`` = 2 or 3, ``labels`` has
        not one entry per state, a cap is not a positive integer, or two frames exceed
        ``max_bytes``.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from token_dynamics.plotting import animate
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
    sphere = check_bool(sphere, "sphere")
    figsize = _check_figsize(figsize)
    _check_pixels(figsize, dpi, "figsize` and `dpi")
    _check_colors(color, states.shape[1])
    if title is not None and not isinstance(title, str):
        raise TypeError(f"`title` must be a str (with {{t}} for the time) or None; got {title!r}.")
    times = getattr(trajectory, "times", None)
    titles = None if labels is None else [str(label) for label in labels]
    if titles is not None and len(titles) != T:
        raise ValueError(f"`labels` must hold one title per state ({T}); got {len(titles)}.")
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
            ax = fig.add_subplot(projection="3d" if d == 3 else None)
            if sphere:
                plot_sphere(ax, d=d)
            for k, (a, b) in enumerate(zip(lo, hi, strict=True)):
                getattr(ax, f"set_{'xyz'[k]}lim")(a, b)
            if d == 2:
                ax.set_aspect("equal")
            scat = _scatter(ax, states[frames[0]], s=14, color=color)

            def update(k: int) -> tuple[PathCollection]:
                X = states[frames[k]]
                if d == 2:
                    scat.set_offsets(X)
                else:
                    cast(Any, scat)._offsets3d = (X[:, 0], X[:, 1], X[:, 2])
                if titles is not None:
                    ax.set_title(titles[frames[k]])
                elif title is not None:
                    t = times[frames[k]] if times is not None else frames[k]
                    ax.set_title(title.replace("{t}", f"{t:.2f}"))
                return (scat,)

            anim = FuncAnimation(fig, update, frames=len(frames), interval=interval, blit=False)
            # the frames are saved at savefig.dpi (the house style's 200), not the figure's
            embed_limit = 4 * max_bytes / 2**20
            with mpl.rc_context({"animation.embed_limit": embed_limit, "savefig.dpi": dpi}):
                html = anim.to_jshtml(default_mode="once")
                return _first_frame_shown(_compress_frames(_self_contained(html)))
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


def _layer_frames(states: Sequence[Sequence[ArrayLike]], *, substeps: int = 3) -> FloatArray:
    """Stack the token sets of every layer into one array of frames, with ``substeps``
    straight-line frames between consecutive layers (the layers themselves are jumps).

    Parameters
    ----------
    states : list over layers of lists over sequences of arrays (n_j, d)
        For instance ``transformer.layer_states(inputs)``.
    substeps : int

    Returns
    -------
    ndarray, shape (1 + (len(states) - 1) * substeps, sum(n_j), d)

    Examples
    --------
    >>> _layer_frames([[np.zeros((1, 2))], [np.ones((1, 2))]], substeps=2)[:, 0, 0].tolist()
    [0.0, 0.5, 1.0]
    """
    substeps = check_int(substeps, "substeps")
    stacked = np.array([np.vstack(s) for s in states])
    frames = [stacked[0]]
    for a, b in itertools.pairwise(stacked):
        for k in range(1, substeps + 1):
            frames.append(a + (b - a) * k / substeps)
    return np.array(frames)


def animate_layers(
    transformer: Transformer, inputs: Sequence[ArrayLike], *, substeps: int = 2, **kwargs: Any
) -> AnimationHTML:
    """Self-contained HTML animation of the token sets through every layer of a network.

    The first two coordinates of the tokens are drawn; tokens keep the colour of their
    sequence, and ``substeps`` straight-line frames join consecutive layers (a layer itself is
    a jump).

    Parameters
    ----------
    transformer : Transformer
        Any object with ``layer_states(inputs)`` (a list over layers of lists over sequences).
    inputs : sequence of array_like, shapes (n_j, d)
        The input sequences, ``d >= 2``.
    substeps : int
        Frames from one layer to the next.
    **kwargs
        Passed to :func:`animate` (``max_frames``, ``dpi``, ``figsize``, ``title``).

    Returns
    -------
    AnimationHTML
        The animation, as :func:`animate` returns it.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from token_dynamics.interpolation import build_hardmax_interpolator
    >>> from token_dynamics.plotting import animate_layers
    >>> X = [np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[-1.0, 0.5], [0.5, -1.0]])]
    >>> Y = [np.array([[0.5, 0.5]]), np.array([[-0.5, 0.5]])]
    >>> net = build_hardmax_interpolator(X, Y, rng=0).transformer
    >>> html = animate_layers(net, X, max_frames=4, dpi=20, figsize=(2.0, 2.0))
    >>> html.count('] = "data:image/png;base64')  # the player's frames
    4
    """
    from ..interpolation import as_sequences

    fix = "Build one with `build_hardmax_interpolator(...).transformer`."
    transformer = check_attributes(transformer, ("layer_states",), "transformer", fix)
    for Z in as_sequences(inputs, "inputs"):
        _drawable(Z, "inputs")
    states = transformer.layer_states(inputs)
    colours = [_colour(j) for j, Z in enumerate(states[0]) for _ in range(Z.shape[0])]
    frames = _layer_frames([[Z[:, :2] for Z in s] for s in states], substeps=substeps)
    return animate(frames, color=colours, **kwargs)
