"""Token clouds (ax in, artist out): a cloud in 2D or 3D, the unit circle or sphere behind it,
the velocity field a cloud induces, and snapshots of a cloud on the circle.

The private helpers at the top (coordinate labels, dimension and trajectory checks) are shared
by the other drawing modules of the package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.quiver import Quiver

from .._typing import ArrayLike, FloatArray
from .._validation import as_tokens, as_weights, check_int, check_real
from ._checks import _check_ax, _check_color, _check_indices, _check_size, _drawable

if TYPE_CHECKING:
    from ..attention import AttentionField
    from ..integrators import Trajectory

__all__ = [
    "plot_circle_snapshots",
    "plot_sphere",
    "plot_tokens",
    "plot_velocity_field",
]


def _axes(ax: Axes, d: int) -> Axes:
    _check_ax(ax)
    if d == 3 and getattr(ax, "name", "") != "3d":
        raise ValueError("`ax` must be a 3D axes (projection='3d') to draw tokens in d = 3.")
    return ax


def _label_coordinates(ax: Axes, d: int = 2) -> None:
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


def _states(trajectory: Trajectory | ArrayLike, name: str = "trajectory") -> FloatArray:
    """The states of a Trajectory or a finite real array of shape (T, n, d), T, n >= 1."""
    states = getattr(trajectory, "states", trajectory)
    arr = _drawable(states, name)
    if arr.ndim != 3 or 0 in arr.shape:
        raise ValueError(
            f"`{name}` must be a Trajectory or a finite array of shape (T, n, d) with T, n, "
            f"d >= 1; got shape {arr.shape}."
        )
    return arr


def _scatter(ax: Axes, X: FloatArray, **kwargs: Any) -> PathCollection:
    """Scatter the rows of ``X`` (``d`` = 2 or 3) on a 2D or a 3D axes."""
    if X.shape[1] == 3:  # a 3D axes (checked by `_axes`): mpl_toolkits publishes no types
        return cast(PathCollection, cast(Any, ax).scatter(X[:, 0], X[:, 1], X[:, 2], **kwargs))
    return ax.scatter(X[:, 0], X[:, 1], **kwargs)


def _colour(j: int) -> str:
    """The colour of the ``j``-th sequence: the cycle's ``C0``, ..., ``C9``, then again."""
    return f"C{j % 10}"


def plot_tokens(
    ax: Axes, X: ArrayLike, *, weights: ArrayLike | None = None, size: float = 20.0, **kwargs: Any
) -> PathCollection:
    """Scatter plot of a token cloud in 2D or 3D.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 3D axes for ``d = 3``.
    X : array_like, shape (n, 2) or (n, 3)
        The tokens, one per row.
    weights : array_like, shape (n,), optional
        Marker areas proportional to ``n * weights`` (a weighted measure).
    size : float
        Marker area of a token of weight ``1/n``.
    **kwargs
        Passed to ``ax.scatter`` (``color``, ``c``, ``label``, ...).

    Returns
    -------
    matplotlib.collections.PathCollection
        The markers (``Path3DCollection`` on a 3D axes).

    Raises
    ------
    ValueError
        If ``X`` has neither 2 nor 3 columns, or has 3 and ``ax`` is not a 3D axes.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023 (token
    clouds on the sphere).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.plotting import plot_tokens
    >>> fig, ax = plt.subplots()
    >>> art = plot_tokens(ax, [[0.0, 1.0], [1.0, 0.0]])
    >>> art.get_offsets().shape
    (2, 2)
    >>> plt.close(fig)
    """
    _check_ax(ax)
    X = as_tokens(_drawable(X, "X"))
    n, d = X.shape
    _check_dim(d, "X")
    w = as_weights(weights, n)
    size = _check_size(size)
    ax = _axes(ax, d)
    _label_coordinates(ax, d)
    return _scatter(ax, X, s=size * n * w, **kwargs)


def plot_sphere(ax: Axes, *, d: int = 2, color: str = "0.8", **kwargs: Any) -> Any:
    """Draw the unit circle (``d = 2``) or a wireframe unit sphere (``d = 3``) as a backdrop.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 3D axes when ``d = 3``.
    d : {2, 3}
        The dimension of token space.
    color : str
        Colour of the circle or wireframe.
    **kwargs
        Passed to ``ax.plot`` (2D) or ``ax.plot_wireframe`` (3D).

    Returns
    -------
    matplotlib.lines.Line2D or mpl_toolkits.mplot3d.art3d.Line3DCollection
        The circle's line or the sphere's wireframe.

    Raises
    ------
    ValueError
        If ``d`` is neither 2 nor 3, or is 3 and ``ax`` is not a 3D axes.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.plotting import plot_sphere
    >>> fig, ax = plt.subplots()
    >>> line = plot_sphere(ax)
    >>> line.get_xydata().shape
    (201, 2)
    >>> plt.close(fig)
    """
    _check_ax(ax)
    d = check_int(d, "d", minimum=2)
    _check_dim(d, "d")
    color = _check_color(color)
    ax = _axes(ax, d)
    if d == 2:
        th = np.linspace(0, 2 * np.pi, 201)
        ax.set_aspect("equal")
        _label_coordinates(ax)
        return ax.plot(np.cos(th), np.sin(th), color=color, lw=kwargs.pop("lw", 1.0), **kwargs)[0]
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    xyz = np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v)
    ax3d = cast(Any, ax)  # a 3D axes (checked by `_axes`): mpl_toolkits publishes no types
    ax3d.set_box_aspect((1, 1, 1))
    _label_coordinates(ax, 3)
    return ax3d.plot_wireframe(*xyz, color=color, lw=kwargs.pop("lw", 0.4), **kwargs)


def plot_velocity_field(
    ax: Axes,
    field: AttentionField,
    X: ArrayLike,
    *,
    t: float = 0.0,
    weights: ArrayLike | None = None,
    grid: int = 15,
    extent: Sequence[float] | None = None,
    **kwargs: Any,
) -> Quiver:
    r"""Arrows of the field :math:`\Gamma_\mu` of the tokens' measure on a grid (``d = 2``).

    .. math::

        \Gamma_\mu(y) = \frac{\sum_j w_j e^{\langle A y, x_j\rangle} V x_j}
        {\sum_j w_j e^{\langle A y, x_j\rangle}}

    for softmax attention, and the field of ``field`` in general.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    field : AttentionField
        Any object with ``velocity_at(Y, X, t, weights=...)``.
    X : array_like, shape (n, 2)
        Tokens defining :math:`\mu`.
    t : float
        The time at which a time-dependent field is evaluated.
    weights : array_like, shape (n,), optional
        Weights of the tokens (uniform by default).
    grid : int
        Number of arrows per side.
    extent : (xmin, xmax, ymin, ymax), optional
        Default: the tokens' bounding box with a 20 % margin.
    **kwargs
        Passed to ``ax.quiver``.

    Returns
    -------
    matplotlib.quiver.Quiver
        The arrows.

    Raises
    ------
    ValueError
        If ``X`` is not of shape ``(n, 2)`` or ``grid`` is below 2.

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.plotting import plot_velocity_field
    >>> fig, ax = plt.subplots()
    >>> q = plot_velocity_field(ax, Softmax(np.eye(2), -np.eye(2)), np.eye(2), grid=4)
    >>> q.U.shape
    (16,)
    >>> plt.close(fig)
    """
    _check_ax(ax)
    if not callable(getattr(field, "velocity_at", None)):
        raise TypeError(
            f"`field` must have a method velocity_at(Y, X, t, weights=...); got "
            f"{type(field).__name__}. Build one with `make_field` or `Softmax(A, V)`."
        )
    X = as_tokens(X, d=2)
    t = check_real(t, "t")
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


def plot_circle_snapshots(
    ax: Axes,
    states: ArrayLike,
    indices: Sequence[int],
    *,
    labels: Sequence[str] | None = None,
) -> list[PathCollection]:
    """Tokens on the circle at several times, drawn on concentric circles (inner = earliest).

    The ``k``-th snapshot is drawn on the circle of radius ``1 + k / 2``, so that clusters that
    merge over time read from the centre outwards.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Its axis frame is switched off.
    states : array_like, shape (T, n, 2)
        Tokens on the unit circle at ``T`` times.
    indices : sequence of int
        Which states to draw, earliest first.
    labels : sequence of str, optional
        One legend entry per index (``"t = 10"``).

    Returns
    -------
    list of matplotlib.collections.PathCollection
        The markers of each snapshot.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_circle_snapshots
    >>> states = np.stack([np.eye(2), np.eye(2)[::-1]])
    >>> fig, ax = plt.subplots()
    >>> arts = plot_circle_snapshots(ax, states, [0, 1], labels=["t = 0", "t = 1"])
    >>> arts[1].get_offsets().tolist()  # the second snapshot, on the circle of radius 1.5
    [[0.0, 1.5], [1.5, 0.0]]
    >>> plt.close(fig)
    """
    _check_ax(ax)
    X = _states(states, "states")
    _check_dim(X.shape[2], "states")
    indices = _check_indices(indices, len(X))
    if labels is not None and (isinstance(labels, str) or len(labels) != len(indices)):
        raise ValueError(
            f"`labels` must hold one legend entry per index ({len(indices)}); got {labels!r}."
        )
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
