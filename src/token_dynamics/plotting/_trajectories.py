"""Token trajectories (ax in, artist out): the path of every token over time, and the paths of
masked tokens coloured by their position in the sequence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.lines import Line2D
from matplotlib.typing import ColorType

from .._typing import ArrayLike
from .._validation import as_matrix, check_bool, check_int
from ._checks import _check_alpha, _check_ax, _check_cmap, _check_color, _drawable
from ._clouds import _axes, _check_dim, _label_coordinates, _scatter, _states

if TYPE_CHECKING:
    from ..integrators import Trajectory

__all__ = ["plot_causal_paths", "plot_trajectories"]


def plot_trajectories(
    ax: Axes,
    trajectory: Trajectory | ArrayLike,
    *,
    color: ColorType = "C0",
    alpha: float = 0.6,
    show_start: bool = True,
    show_end: bool = True,
    **kwargs: Any,
) -> LineCollection:
    """Paths of every token over time, with its start (hollow) and end (filled) marked.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 3D axes for ``d = 3``.
    trajectory : Trajectory or array_like, shape (T, n, d)
        ``d`` = 2 or 3.
    color : color
        Of the paths and their end points.
    alpha : float
        Opacity of the paths.
    show_start, show_end : bool
        Mark the initial tokens (hollow circles) and the final ones (dots).
    **kwargs
        Passed to the line collection.

    Returns
    -------
    matplotlib.collections.LineCollection
        One segment chain per token (a ``Line3DCollection`` on a 3D axes).

    Raises
    ------
    ValueError
        If the states are not a finite ``(T, n, d)`` array with ``d`` = 2 or 3, or ``d = 3``
        and ``ax`` is not a 3D axes.

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_trajectories
    >>> fig, ax = plt.subplots()
    >>> states = np.linspace(0, 1, 5)[:, None, None] * np.ones((5, 3, 2))
    >>> len(plot_trajectories(ax, states).get_segments())
    3
    >>> plt.close(fig)
    """
    _check_ax(ax)
    states = _states(trajectory)
    color = _check_color(color)
    alpha = _check_alpha(alpha)
    show_start = check_bool(show_start, "show_start")
    show_end = check_bool(show_end, "show_end")
    d = states.shape[2]
    _check_dim(d, "trajectory")
    ax = _axes(ax, d)
    segments = np.swapaxes(states, 0, 1)  # (n, T, d)
    lines: LineCollection
    if d == 2:
        lines = LineCollection(list(segments), colors=color, alpha=alpha, **kwargs)
        ax.add_collection(lines)
        ax.autoscale_view()
    else:
        from mpl_toolkits.mplot3d.art3d import Line3DCollection

        lines = Line3DCollection(list(segments), colors=color, alpha=alpha, **kwargs)
        cast(Any, ax).add_collection3d(lines)  # a 3D axes (checked): mpl_toolkits is untyped
    if show_start:
        _scatter(ax, states[0], s=12, facecolors="none", edgecolors=color)
    if show_end:
        _scatter(ax, states[-1], s=16, color=color)
    _label_coordinates(ax, d)
    return lines


def plot_causal_paths(
    ax: Axes,
    states: ArrayLike,
    *,
    exact_first: ArrayLike | None = None,
    n_sink: int = 0,
    cmap: str = "viridis",
) -> list[Line2D]:
    """Paths of masked tokens in the plane, coloured by their position in the sequence.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    states : array_like, shape (T, n, 1 + 2)
        A trajectory of tokens with positions (in ``[0, 1]``) in column 0 and 2-D contents.
    exact_first : array_like, shape (T, 2), optional
        Exact path of the first token (e.g. :func:`~token_dynamics.meanfield.first_token_solution`),
        drawn dashed over the computed one.
    n_sink : int
        Number of leading sink tokens, drawn in black.
    cmap : str
        The colour map of the positions.

    Returns
    -------
    list of matplotlib.lines.Line2D
        Each token's path and end point, then the exact path if given.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_causal_paths
    >>> positions = np.broadcast_to([[0.0], [1.0]], (4, 2, 1))
    >>> contents = np.linspace(1, 0.5, 4)[:, None, None] * np.ones((4, 2, 2))
    >>> fig, ax = plt.subplots()
    >>> len(plot_causal_paths(ax, np.concatenate([positions, contents], axis=2)))
    4
    >>> plt.close(fig)
    """
    _check_ax(ax)
    S = _states(states, "states")
    if S.shape[2] != 3:
        raise ValueError(
            "`states` must have 1 + 2 columns (the position, then the 2-D content); got "
            f"{S.shape[2]}."
        )
    n_sink = check_int(n_sink, "n_sink", minimum=0)
    cm = mpl.colormaps[_check_cmap(cmap)]
    artists: list[Line2D] = []
    for i in range(S.shape[1]):
        colour = "k" if i < n_sink else cm(S[0, i, 0])
        artists += ax.plot(S[:, i, 1], S[:, i, 2], "-", color=colour, lw=0.8, alpha=0.8)
        artists += ax.plot(S[-1, i, 1], S[-1, i, 2], "o", color=colour, ms=3)
    if exact_first is not None:
        E = as_matrix(_drawable(exact_first, "exact_first"), "exact_first", shape=(None, 2))
        artists += ax.plot(E[:, 0], E[:, 1], "r--", lw=2, label=r"first token, $e^{tV}x_1(0)$")
        ax.legend(fontsize="small")
    _label_coordinates(ax)
    ax.set_aspect("equal", adjustable="datalim")
    return artists
