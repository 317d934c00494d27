"""Token clouds and their trajectories (ax in, artist out).

Clouds in 2D, 3D and on the circle or sphere, paths over time, the velocity field of a cloud,
several sequences in their own colours, and covariance paths in the cone of 2x2 covariances.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.patches import Circle

from .._validation import as_tokens, as_weights, check_int
from ..gaussian import cone_coordinates

__all__ = [
    "plot_causal_paths",
    "plot_circle_snapshots",
    "plot_cone_trajectories",
    "plot_disk_trajectories",
    "plot_moves",
    "plot_phases",
    "plot_sphere",
    "plot_token_sets",
    "plot_tokens",
    "plot_trajectories",
    "plot_velocity_field",
]


def _axes(ax: Any, d: int) -> Any:
    if d == 3 and getattr(ax, "name", "") != "3d":
        raise ValueError("`ax` must be a 3D axes (projection='3d') to draw tokens in d = 3.")
    return ax


def _label_coordinates(ax: Any, d: int = 2) -> None:
    """Name the coordinates of token space on the axes that have no label yet."""
    for k, axis in enumerate("xyz"[:d]):
        if not getattr(ax, f"get_{axis}label")():
            getattr(ax, f"set_{axis}label")(f"$x^{{({k + 1})}}$")


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


def plot_tokens(ax: Any, X: Any, *, weights: Any = None, size: float = 20.0, **kwargs: Any) -> Any:
    """Scatter plot of a token cloud in 2D or 3D.

    Parameters
    ----------
    ax : matplotlib Axes
        A 3D axes for ``d = 3``.
    X : array_like, shape (n, 2) or (n, 3)
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
    >>> art = plot_tokens(ax, [[0.0, 1.0], [1.0, 0.0]])
    >>> art.get_offsets().shape
    (2, 2)
    >>> plt.close(fig)
    """
    X = as_tokens(X)
    n, d = X.shape
    _check_dim(d, "X")
    w = as_weights(weights, n)
    ax = _axes(ax, d)
    _label_coordinates(ax, X.shape[1])
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
        _label_coordinates(ax)
        return ax.plot(np.cos(th), np.sin(th), color=color, lw=kwargs.pop("lw", 1.0), **kwargs)[0]
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    xyz = np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v)
    ax.set_box_aspect((1, 1, 1))
    _label_coordinates(ax, 3)
    return ax.plot_wireframe(*xyz, color=color, lw=kwargs.pop("lw", 0.4), **kwargs)


def plot_trajectories(
    ax: Any,
    trajectory: Any,
    *,
    color: Any = "C0",
    alpha: float = 0.6,
    show_start: bool = True,
    show_end: bool = True,
    **kwargs: Any,
) -> Any:
    """Paths of every token over time, with its start (hollow) and end (filled) marked.

    Parameters
    ----------
    ax : matplotlib Axes
        A 3D axes for ``d = 3``.
    trajectory : Trajectory or array_like, shape (T, n, d)
        ``d`` = 2 or 3.
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
    >>> len(plot_trajectories(ax, states).get_segments())
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
    _label_coordinates(ax, states.shape[2])
    return lines


def plot_velocity_field(
    ax: Any,
    field: Any,
    X: Any,
    *,
    t: float = 0.0,
    weights: Any = None,
    grid: int = 15,
    extent: Any = None,
    **kwargs: Any,
) -> Any:
    r"""Arrows of the field :math:`\Gamma_\mu` of the tokens' measure on a grid (``d = 2``).

    Parameters
    ----------
    ax : matplotlib Axes
    field : AttentionField
        Any object with ``velocity_at(Y, X, t, weights=...)``.
    X : array_like, shape (n, 2)
        Tokens defining :math:`\mu`.
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
    >>> q = plot_velocity_field(ax, Softmax(np.eye(2), -np.eye(2)), np.eye(2), grid=4)
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
    _label_coordinates(ax)
    return ax.quiver(Y[:, 0], Y[:, 1], U[:, 0], U[:, 1], **kwargs)


def _colour(j: int) -> str:
    return f"C{j % 10}"


def plot_token_sets(
    ax: Any,
    sequences: Sequence[Any],
    *,
    targets: Sequence[Any] | None = None,
    title: str | None = None,
    size: float = 30.0,
) -> list:
    """Scatter the tokens of each sequence (first two coordinates) in its own colour.

    Parameters
    ----------
    ax : matplotlib Axes
    sequences : list of array_like, shapes (n_j, d)
    targets : list of array_like, shapes (m_j, d), optional
        Drawn as rings of the same colour.
    title : str, optional
    size : float
        Marker size.

    Returns
    -------
    list of matplotlib artists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
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


def plot_phases(axes: Sequence[Any], interp: Any, *, targets: Sequence[Any] | None = None) -> list:
    """One panel per phase of a :class:`~token_dynamics.interpolation.HardmaxInterpolator`.

    Parameters
    ----------
    axes : sequence of matplotlib Axes
        As many as phases (five), or fewer to draw the first ones.
    interp : HardmaxInterpolator
    targets : list of arrays, optional
        Drawn as rings in the last panel.

    Returns
    -------
    list of lists of artists
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
    ax: Any, before: Any, after: Any, *, color: str = "C0", title: str | None = None
) -> list:
    """Tokens before a layer (dots), after it (crosses) and the jump between them (segments).

    Parameters
    ----------
    ax : matplotlib Axes
    before, after : array_like, shape (n, 2 or more)
        Only the first two coordinates are drawn.

    Returns
    -------
    list of matplotlib artists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> len(plot_moves(ax, np.zeros((3, 2)), np.ones((3, 2))))
    3
    >>> plt.close(fig)
    """
    from matplotlib.collections import LineCollection

    B = np.asarray(before, dtype=float)[:, :2]
    A = np.asarray(after, dtype=float)[:, :2]
    segments = LineCollection(list(np.stack([B, A], axis=1)), colors="0.6", lw=0.8)
    artists = [
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


def plot_circle_snapshots(
    ax: Any, states: Any, indices: Sequence[int], *, labels: Sequence[str] | None = None
) -> list:
    """Tokens on the circle at several times, drawn on concentric circles (inner = earliest).

    Parameters
    ----------
    states : array_like, shape (T, n, 2)
        Tokens on the unit circle.
    indices : sequence of int
        Which states to draw.
    labels : sequence of str, optional

    Returns
    -------
    list of PathCollection
    """
    X = np.asarray(states, dtype=float)
    arts = []
    phi = np.linspace(0, 2 * np.pi, 200)
    for k, i in enumerate(indices):
        r = 1.0 + 0.5 * k
        ax.plot(r * np.cos(phi), r * np.sin(phi), color="0.85", lw=0.8)
        lab = None if labels is None else labels[k]
        arts.append(ax.scatter(r * X[i, :, 0], r * X[i, :, 1], s=12, label=lab, zorder=3))
    ax.set_aspect("equal")
    ax.set_axis_off()
    if labels is not None:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return arts


def plot_causal_paths(
    ax: Any,
    states: Any,
    *,
    exact_first: Any = None,
    n_sink: int = 0,
    cmap: str = "viridis",
) -> list:
    """Paths of masked tokens in the plane, coloured by their position in the sequence.

    Parameters
    ----------
    ax : matplotlib Axes
    states : array_like, shape (T, n, 1 + 2)
        A trajectory of tokens with positions in column 0 and 2-D contents.
    exact_first : array_like, shape (T, 2), optional
        Exact path of the first token (e.g. :func:`~token_dynamics.meanfield.first_token_solution`),
        drawn dashed over the computed one.
    n_sink : int
        Number of leading sink tokens, drawn in black.
    cmap : str

    Returns
    -------
    list of Artists
    """
    S = np.asarray(states, dtype=float)
    cm = mpl.colormaps[cmap]
    artists = []
    for i in range(S.shape[1]):
        colour = "k" if i < n_sink else cm(S[0, i, 0])
        artists += ax.plot(S[:, i, 1], S[:, i, 2], "-", color=colour, lw=0.8, alpha=0.8)
        artists += ax.plot(S[-1, i, 1], S[-1, i, 2], "o", color=colour, ms=3)
    if exact_first is not None:
        E = np.asarray(exact_first, dtype=float)
        artists += ax.plot(E[:, 0], E[:, 1], "r--", lw=2, label=r"first token, $e^{tV}x_1(0)$")
        ax.legend(fontsize="small")
    _label_coordinates(ax)
    ax.set_aspect("equal", adjustable="datalim")
    return artists


def plot_disk_trajectories(ax, solutions: Sequence[Any], *, color: str = "C0", lw: float = 1.0):
    r"""Covariance trajectories in the cross-section of the PSD cone.

    Each 2x2 covariance is drawn at :math:`((a-b), 2c)/(a+b)`: the shape of the ellipse,
    forgetting its size. The unit circle is the rank-one boundary. Blown-up runs end with a
    cross, the others with a dot. Returns the list of line artists.
    """
    ax.add_patch(Circle((0, 0), 1.0, fill=False, color="0.5", lw=0.8))
    lines = []
    for sol in solutions:
        P = cone_coordinates(sol.covariances)
        xy = P[:, :2] / np.where(P[:, 2:] > 0, P[:, 2:], 1.0)
        (line,) = ax.plot(xy[:, 0], xy[:, 1], color=color, lw=lw, alpha=0.8)
        ax.plot(*xy[-1], marker="x" if sol.blew_up else "o", ms=3, color=color)
        lines.append(line)
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_aspect("equal")
    ax.set_xlabel(r"$(a-b)/(a+b)$")
    ax.set_ylabel(r"$2c/(a+b)$")
    return lines


def plot_cone_trajectories(
    ax, solutions: Sequence[Any], *, color: str = "C0", height: float | None = None
):
    """Covariance trajectories in the PSD cone ``(a - b, 2c, a + b)`` on a 3-D ``ax``.

    The cone's surface (rank one) is drawn as a wireframe up to ``height`` (default: the
    largest trace reached, capped at 3). Returns the list of line artists.
    """
    pts = [cone_coordinates(sol.covariances) for sol in solutions]
    top = height if height is not None else min(3.0, max(float(p[:, 2].max()) for p in pts))
    th, z = np.meshgrid(np.linspace(0, 2 * np.pi, 40), np.linspace(0, top, 8))
    ax.plot_wireframe(z * np.cos(th), z * np.sin(th), z, color="0.7", lw=0.4)
    lines = []
    for p in pts:
        keep = p[:, 2] <= top * 1.05
        (line,) = ax.plot(p[keep, 0], p[keep, 1], p[keep, 2], color=color, lw=1.0)
        lines.append(line)
    ax.set_xlabel("a - b")
    ax.set_ylabel("2c")
    ax.set_zlabel("a + b")
    return lines
