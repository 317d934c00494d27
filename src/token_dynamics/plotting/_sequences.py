"""Several token sequences at once (ax in, artist out): each sequence in its own colour, the
phases of an interpolating transformer, and the moves of the tokens through one layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PathCollection

from .._typing import ArrayLike, FloatArray
from .._validation import as_tokens, check_attributes
from ._checks import _check_ax, _check_color, _check_size, _drawable
from ._clouds import _colour, _label_coordinates

if TYPE_CHECKING:
    from ..interpolation import HardmaxInterpolator

__all__ = ["plot_moves", "plot_phases", "plot_token_sets"]


def _planar_sequences(sequences: object, name: str) -> list[FloatArray]:
    """The sequences as finite ``(n_j, d)`` arrays with ``d >= 2`` (their plane is drawn)."""
    from ..interpolation import as_sequences

    arrays = as_sequences(sequences, name)  # type: ignore[arg-type]
    if arrays[0].shape[1] < 2:
        raise ValueError(
            f"`{name}` must have d >= 2 columns (the first two are drawn); got d = "
            f"{arrays[0].shape[1]}."
        )
    return arrays


def plot_token_sets(
    ax: Axes,
    sequences: Sequence[ArrayLike],
    *,
    targets: Sequence[ArrayLike] | None = None,
    title: str | None = None,
    size: float = 30.0,
) -> list[PathCollection]:
    """Scatter the tokens of each sequence (first two coordinates) in its own colour.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    sequences : list of array_like, shapes (n_j, d)
        The sequences, ``d >= 2``.
    targets : list of array_like, shapes (m_j, d), optional
        Drawn as rings of the same colour.
    title : str, optional
        Title of the axes.
    size : float
        Marker size.

    Returns
    -------
    list of matplotlib.collections.PathCollection
        One per sequence, then one per target set.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_token_sets
    >>> fig, ax = plt.subplots()
    >>> len(plot_token_sets(ax, [np.zeros((2, 2)), np.ones((3, 2))], targets=[np.ones((1, 2))] * 2))
    4
    >>> plt.close(fig)
    """
    _check_ax(ax)
    size = _check_size(size)
    artists = []
    for j, Z in enumerate(_planar_sequences(sequences, "sequences")):
        artists.append(
            ax.scatter(Z[:, 0], Z[:, 1], s=size, color=_colour(j), alpha=0.8, label=f"$X^{j + 1}$")
        )
    for j, Z in enumerate([] if targets is None else _planar_sequences(targets, "targets")):
        artists.append(
            ax.scatter(
                Z[:, 0], Z[:, 1], s=3 * size, facecolors="none", edgecolors=_colour(j), lw=1.5
            )
        )
    _label_coordinates(ax)
    ax.set_aspect("equal", adjustable="datalim")
    if title is not None:
        ax.set_title(title)
    return artists


def plot_phases(
    axes: Iterable[Axes],
    interp: HardmaxInterpolator,
    *,
    targets: Sequence[ArrayLike] | None = None,
) -> list[list[PathCollection]]:
    """One panel per phase of a :class:`~token_dynamics.interpolation.HardmaxInterpolator`.

    Parameters
    ----------
    axes : iterable of matplotlib.axes.Axes
        As many as phases (five), or fewer to draw the first ones; spare panels are switched
        off.
    interp : HardmaxInterpolator
        Its ``phases`` hold each phase's ``name``, ``n_layers`` and ``sequences``.
    targets : list of array_like, optional
        Drawn as rings in the last panel.

    Returns
    -------
    list of lists of matplotlib.collections.PathCollection
        The artists of :func:`plot_token_sets`, one list per panel.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.interpolation import build_hardmax_interpolator
    >>> from token_dynamics.plotting import plot_phases
    >>> X = [np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[-1.0, 0.5], [0.5, -1.0]])]
    >>> Y = [np.array([[0.5, 0.5]]), np.array([[-0.5, 0.5]])]
    >>> fig, axes = plt.subplots(2, 3)
    >>> panels = plot_phases(axes.flat, build_hardmax_interpolator(X, Y, rng=0), targets=Y)
    >>> len(panels)
    5
    >>> plt.close(fig)
    """
    titles = {
        "input": "input",
        "separated": "1. separated",
        "leaders": "2. leaders chosen",
        "collapsed": "3. collapsed",
        "interpolated": "4. interpolated",
    }
    try:
        axes = list(axes)  # a grid's `.flat` is consumed once
    except TypeError:
        raise TypeError(
            f"`axes` must be an iterable of matplotlib Axes (e.g. `axs.flat`); got {axes!r}."
        ) from None
    for k, ax in enumerate(axes):
        _check_ax(ax, f"axes[{k}]")
    fix = "Build one with `build_hardmax_interpolator`."
    check_attributes(interp, ("phases",), "interp", fix)
    out = []
    for ax, phase in zip(axes, interp.phases, strict=False):
        last = phase.name == "interpolated"
        out.append(
            plot_token_sets(
                ax,
                phase.sequences,
                targets=targets if last else None,
                title=f"{titles.get(phase.name, phase.name)} (layer {phase.n_layers})",
            )
        )
    for ax in axes[len(out) :]:  # a grid of 3 a row may have a spare panel
        ax.set_axis_off()
    return out


def plot_moves(
    ax: Axes,
    before: ArrayLike,
    after: ArrayLike,
    *,
    color: str = "C0",
    title: str | None = None,
) -> list[Artist]:
    """Tokens before a layer (dots), after it (crosses) and the jump between them (segments).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    before, after : array_like, shape (n, d)
        The tokens before and after the layer, ``d >= 2``; only the first two coordinates are
        drawn.
    color : str
        Colour of the tokens before the layer.
    title : str, optional
        Title of the axes.

    Returns
    -------
    list of matplotlib.artist.Artist
        The segments (a ``LineCollection``), the dots and the crosses.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_moves
    >>> fig, ax = plt.subplots()
    >>> len(plot_moves(ax, np.zeros((3, 2)), np.ones((3, 2))))
    3
    >>> plt.close(fig)
    """
    _check_ax(ax)
    B = as_tokens(_drawable(before, "before"), "before")
    A = as_tokens(_drawable(after, "after"), "after")
    if B.shape != A.shape or B.shape[1] < 2:
        raise ValueError(
            "`before` and `after` must have one common shape (n, d) with d >= 2 (the same tokens "
            f"before and after the layer); got {B.shape} and {A.shape}."
        )
    B, A = B[:, :2], A[:, :2]
    color = _check_color(color)
    segments = LineCollection(list(np.stack([B, A], axis=1)), colors="0.6", lw=0.8)
    artists: list[Artist] = [
        ax.add_collection(segments),
        ax.scatter(B[:, 0], B[:, 1], s=20, color=color),
        ax.scatter(A[:, 0], A[:, 1], s=60, marker="x", color="k"),
    ]
    _label_coordinates(ax)
    ax.set_aspect("equal", adjustable="datalim")
    ax.autoscale_view()
    if title is not None:
        ax.set_title(title)
    return artists
