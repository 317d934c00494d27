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

from .._typing import ArrayLike
from ._clouds import _colour, _label_coordinates

if TYPE_CHECKING:
    from ..interpolation import HardmaxInterpolator

__all__ = ["plot_moves", "plot_phases", "plot_token_sets"]


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
    artists = []
    for j, Z in enumerate(sequences):
        Z = np.asarray(Z, dtype=float)
        artists.append(
            ax.scatter(Z[:, 0], Z[:, 1], s=size, color=_colour(j), alpha=0.8, label=f"$X^{j + 1}$")
        )
    for j, Z in enumerate(targets or []):
        Z = np.asarray(Z, dtype=float)
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
    axes = list(axes)  # a grid's `.flat` is consumed once
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
    B = np.asarray(before, dtype=float)[:, :2]
    A = np.asarray(after, dtype=float)[:, :2]
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
