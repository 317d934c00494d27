"""Covariances (ax in, artist out): the level-set ellipse of a Gaussian, alone or over a sample;
covariance paths in the cone of 2x2 covariances and in its cross-section; the growth of
``tr Sigma(t)`` up to a blow-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, Ellipse

from .._typing import ArrayLike
from .._validation import (
    as_covariance,
    as_tokens,
    as_vector,
    check_attributes,
    check_positive,
    check_real,
)
from ..gaussian import GaussianPath, cone_coordinates
from ._checks import _check_ax, _check_color, _check_size, _drawable
from ._clouds import _label_coordinates

__all__ = [
    "plot_cone_trajectories",
    "plot_covariance_ellipse",
    "plot_disk_trajectories",
    "plot_gaussian_cloud",
    "plot_growth",
]


#: What the drawings read from a GaussianPath.
_PATH_FIELDS = ("times", "covariances", "blew_up", "blowup_time")


def _paths(solutions: object) -> list[GaussianPath]:
    """Check `solutions` is a non-empty sequence of 2x2 :class:`GaussianPath` results."""
    if not isinstance(solutions, Sequence) or not solutions:
        raise TypeError(
            "`solutions` must be a non-empty list of GaussianPath (from `solve_moments`); got "
            f"{solutions!r}."
        )
    fix = "Pass the results of `solve_moments` (GaussianPath)."
    paths = [
        check_attributes(p, _PATH_FIELDS, f"solutions[{k}]", fix) for k, p in enumerate(solutions)
    ]
    for k, p in enumerate(paths):
        if p.covariances.shape[1:] != (2, 2):
            raise ValueError(
                f"`solutions[{k}]` must hold 2x2 covariances (d = 2); got shape "
                f"{p.covariances.shape[1:]}."
            )
    return paths


def plot_covariance_ellipse(
    ax: Axes, mean: ArrayLike, cov: ArrayLike, *, n_std: float = 2.0, **kwargs: Any
) -> Ellipse:
    r"""The ``n_std`` level set of :math:`\mathcal N(m, \Sigma)` in the plane.

    .. math::

        \{x : (x - m)^\top \Sigma^{-1} (x - m) = n_{\mathrm{std}}^2\},

    the ellipse whose half-axes are ``n_std`` times the square roots of the eigenvalues of
    :math:`\Sigma`, along its eigenvectors.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    mean : array_like, shape (2,)
        The centre :math:`m`.
    cov : array_like, shape (2, 2)
        The covariance :math:`\Sigma` (symmetrised; negative round-off eigenvalues read as 0).
    n_std : float
        The level, in standard deviations.
    **kwargs
        Passed to :class:`matplotlib.patches.Ellipse` (default: unfilled, line width 1.5).

    Returns
    -------
    matplotlib.patches.Ellipse
        The patch, added to ``ax``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.plotting import plot_covariance_ellipse
    >>> fig, ax = plt.subplots()
    >>> ell = plot_covariance_ellipse(ax, [0.0, 0.0], [[4.0, 0.0], [0.0, 1.0]], n_std=1.0)
    >>> round(float(ell.width), 12), round(float(ell.height), 12)  # 2 sqrt(4) and 2 sqrt(1)
    (4.0, 2.0)
    >>> plt.close(fig)
    """
    _check_ax(ax)
    centre = as_vector(_drawable(mean, "mean"), "mean", size=2)
    S = as_covariance(_drawable(cov, "cov"), "cov", d=2)
    n_std = check_positive(n_std, "n_std")
    lam, U = np.linalg.eigh(0.5 * (S + S.T))
    lam = np.clip(lam, 0.0, None)
    angle = np.degrees(np.arctan2(U[1, 1], U[0, 1]))
    kwargs.setdefault("fill", False)
    kwargs.setdefault("lw", 1.5)
    patch = Ellipse(
        (float(centre[0]), float(centre[1])),
        2 * n_std * np.sqrt(lam[1]),
        2 * n_std * np.sqrt(lam[0]),
        angle=angle,
        **kwargs,
    )
    ax.add_patch(patch)
    _label_coordinates(ax)
    return patch


def plot_gaussian_cloud(
    ax: Axes,
    X: ArrayLike,
    mean: ArrayLike,
    cov: ArrayLike,
    *,
    color: str = "C0",
    n_std: float = 2.0,
    s: float = 3.0,
    label: str | None = None,
) -> tuple[PathCollection, Ellipse]:
    """Scatter the tokens ``X`` with the ``n_std`` ellipse of a Gaussian (the ODE's) on top.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    X : array_like, shape (n, 2)
        The tokens.
    mean : array_like, shape (2,)
        Mean of the Gaussian, marked with a cross.
    cov : array_like, shape (2, 2)
        Its covariance.
    color : str
        Of the tokens, the ellipse and the mean.
    n_std : float
        The level of the ellipse (:func:`plot_covariance_ellipse`).
    s : float
        Marker area of the tokens.
    label : str, optional
        Legend entry of the tokens.

    Returns
    -------
    (matplotlib.collections.PathCollection, matplotlib.patches.Ellipse)
        The tokens and the ellipse.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_gaussian_cloud
    >>> X = np.random.default_rng(0).standard_normal((50, 2))
    >>> fig, ax = plt.subplots()
    >>> points, ellipse = plot_gaussian_cloud(ax, X, np.zeros(2), np.eye(2))
    >>> points.get_offsets().shape, float(ellipse.width)
    ((50, 2), 4.0)
    >>> plt.close(fig)
    """
    _check_ax(ax)
    X = as_tokens(_drawable(X, "X"), d=2)
    color = _check_color(color)
    s = _check_size(s, "s")
    mean = as_vector(_drawable(mean, "mean"), "mean", size=2)
    pts = ax.scatter(X[:, 0], X[:, 1], s=s, color=color, alpha=0.35, lw=0, label=label)
    ell = plot_covariance_ellipse(ax, mean, cov, n_std=n_std, color=color)
    ax.plot(*mean, marker="+", color=color, ms=8)
    ax.set_aspect("equal")
    return pts, ell


def plot_disk_trajectories(
    ax: Axes, solutions: Sequence[GaussianPath], *, color: str = "C0", lw: float = 1.0
) -> list[Line2D]:
    r"""Covariance trajectories in the cross-section of the cone of 2x2 covariances.

    A covariance :math:`\begin{pmatrix} a & c \\ c & b \end{pmatrix}` is drawn at

    .. math::

        \left(\frac{a - b}{a + b}, \frac{2c}{a + b}\right),

    the shape of its ellipse, forgetting its size. The unit circle is the rank-one boundary.
    Runs that blew up end with a cross, the others with a dot.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    solutions : sequence of GaussianPath
        Paths of 2x2 covariances (``covariances`` of shape ``(T, 2, 2)``).
    color : str
        Of every path.
    lw : float
        Line width.

    Returns
    -------
    list of matplotlib.lines.Line2D
        One line per path.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.gaussian import GaussianPath
    >>> from token_dynamics.plotting import plot_disk_trajectories
    >>> covs = np.array([np.eye(2), np.diag([3.0, 1.0])])
    >>> path = GaussianPath(np.array([0.0, 1.0]), np.zeros((2, 2)), covs)
    >>> fig, ax = plt.subplots()
    >>> (line,) = plot_disk_trajectories(ax, [path])
    >>> line.get_xydata().tolist()  # the identity at the centre, diag(3, 1) at (1/2, 0)
    [[0.0, 0.0], [0.5, 0.0]]
    >>> plt.close(fig)
    """
    _check_ax(ax)
    solutions = _paths(solutions)
    color = _check_color(color)
    lw = check_positive(lw, "lw")
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
    ax: Any,
    solutions: Sequence[GaussianPath],
    *,
    color: str = "C0",
    height: float | None = None,
) -> list[Any]:
    r"""Covariance trajectories in the cone of 2x2 covariances, on a 3D axes.

    A covariance :math:`\begin{pmatrix} a & c \\ c & b \end{pmatrix}` is the point
    :math:`(a - b, 2c, a + b)`; it is positive semidefinite when
    :math:`(a - b)^2 + 4c^2 \le (a + b)^2`, inside the cone whose surface (rank one) is drawn as
    a wireframe up to ``height``. As in :func:`plot_disk_trajectories`, runs that blew up end
    with a cross, the others with a dot, so that where the paths go can be read.

    Parameters
    ----------
    ax : mpl_toolkits.mplot3d.axes3d.Axes3D
        A 3D axes (``projection="3d"``).
    solutions : sequence of GaussianPath
        Paths of 2x2 covariances (``covariances`` of shape ``(T, 2, 2)``).
    color : str
        Of every path.
    height : float, optional
        Where the cone is cut, in ``a + b``; default: the largest trace reached, capped at 3.
        Points above it are not drawn.

    Returns
    -------
    list of mpl_toolkits.mplot3d.art3d.Line3D
        One line per path.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.gaussian import GaussianPath
    >>> from token_dynamics.plotting import plot_cone_trajectories
    >>> covs = np.array([np.eye(2), np.diag([2.0, 0.5])])
    >>> path = GaussianPath(np.array([0.0, 1.0]), np.zeros((2, 2)), covs)
    >>> fig = plt.figure()
    >>> lines = plot_cone_trajectories(fig.add_subplot(projection="3d"), [path])
    >>> len(lines)
    1
    >>> plt.close(fig)
    """
    if getattr(ax, "name", "") != "3d":
        raise TypeError(
            "`ax` must be a 3D matplotlib Axes, e.g. from `fig.add_subplot(projection='3d')`; "
            f"got {type(ax).__name__}."
        )
    color = _check_color(color)
    height = None if height is None else check_positive(height, "height")
    paths = _paths(solutions)
    pts = [cone_coordinates(sol.covariances) for sol in paths]
    top = height if height is not None else min(3.0, max(float(p[:, 2].max()) for p in pts))
    th, z = np.meshgrid(np.linspace(0, 2 * np.pi, 40), np.linspace(0, top, 8))
    ax.plot_wireframe(z * np.cos(th), z * np.sin(th), z, color="0.7", lw=0.4)
    lines = []
    for sol, p in zip(paths, pts, strict=True):
        keep = p[:, 2] <= top * 1.05
        (line,) = ax.plot(p[keep, 0], p[keep, 1], p[keep, 2], color=color, lw=1.0)
        if keep[-1]:  # the end, where it is inside the drawn part of the cone
            ax.plot(*p[-1], marker="x" if sol.blew_up else "o", ms=4, color=color, mec="k", mew=0.5)
        lines.append(line)
    ax.set_xlabel("a - b")
    ax.set_ylabel("2c")
    ax.set_zlabel("a + b")
    return lines


def plot_growth(
    ax: Axes,
    solutions: Sequence[GaussianPath],
    labels: Sequence[str],
    *,
    t_star: float | None = None,
) -> list[Line2D]:
    r"""The trace :math:`\operatorname{tr}\Sigma(t)` of several covariance paths, on a log scale.

    A run that blew up gets a dotted vertical line at its estimated blow-up time, in its colour;
    ``t_star`` (a predicted blow-up time) a dashed black one.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    solutions : sequence of GaussianPath
        The paths (``times``, ``covariances``, ``blew_up``, ``blowup_time``).
    labels : sequence of str
        One legend entry per path.
    t_star : float, optional
        The predicted blow-up time.

    Returns
    -------
    list of matplotlib.lines.Line2D
        One line per path.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.gaussian import GaussianPath
    >>> from token_dynamics.plotting import plot_growth
    >>> t = np.linspace(0.0, 0.9, 4)
    >>> covs = np.eye(2) / (1 - t)[:, None, None]
    >>> path = GaussianPath(t, np.zeros((4, 2)), covs, status="blowup", blowup_time=1.0)
    >>> fig, ax = plt.subplots()
    >>> (line,) = plot_growth(ax, [path], ["softmax"], t_star=1.0)
    >>> np.allclose(line.get_ydata(), 2 / (1 - t))
    True
    >>> plt.close(fig)
    """
    _check_ax(ax)
    solutions = _paths(solutions)
    if isinstance(labels, str) or not isinstance(labels, Sequence) or len(labels) != len(solutions):
        raise ValueError(
            f"`labels` must be a sequence of one legend entry per path ({len(solutions)}); got "
            f"{labels!r}."
        )
    t_star = None if t_star is None else check_real(t_star, "t_star")
    lines = []
    for sol, lab in zip(solutions, labels, strict=True):
        tr = np.trace(sol.covariances, axis1=1, axis2=2)
        (line,) = ax.semilogy(sol.times, tr, label=lab)
        lines.append(line)
        if sol.blew_up and sol.blowup_time is not None:
            ax.axvline(sol.blowup_time, color=line.get_color(), ls=":", lw=1)
    if t_star is not None:
        ax.axvline(t_star, color="k", ls="--", lw=0.8, label=r"predicted $t^*$")
    ax.set_xlabel("t")
    ax.set_ylabel(r"tr $\Sigma(t)$")
    ax.legend()
    return lines
