"""Histograms and bar charts (ax in, artist out): the angles of tokens on the circle, a sample
against a Gaussian density, the ranks of limiting covariances.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.typing import ColorType

from .._typing import ArrayLike
from .._validation import as_tokens, check_attributes, check_int, check_positive, check_real
from ._checks import _check_ax, _check_color, _drawable

if TYPE_CHECKING:
    from ..gaussian import RankCounts

#: Largest |x| and |mean| of `plot_sample_vs_gaussian`: the density's exponent squares their
#: difference, which must stay in float64 (sqrt of its largest number, with room for the grid).
_MAX_GAUSSIAN = 1e150

__all__ = ["plot_angle_histogram", "plot_rank_histogram", "plot_sample_vs_gaussian"]


def plot_angle_histogram(
    ax: Axes,
    X: ArrayLike,
    *,
    bins: int = 48,
    label: str | None = None,
    color: ColorType = "C0",
) -> BarContainer:
    r"""Density histogram of the angles :math:`\theta_i = \operatorname{atan2}(x_i^{(2)},
    x_i^{(1)})` of tokens on the circle (``d = 2``): an empirical measure.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    X : array_like, shape (n, 2)
        Tokens on the unit circle.
    bins : int
        Number of bins on :math:`[-\pi, \pi]`.
    label : str, optional
        Legend entry.
    color : color
        Of the bars.

    Returns
    -------
    matplotlib.container.BarContainer
        The bars.

    Raises
    ------
    ValueError
        If ``X`` is not of shape ``(n, 2)``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_angle_histogram
    >>> fig, ax = plt.subplots()
    >>> bars = plot_angle_histogram(ax, np.eye(2), bins=4)
    >>> [round(float(b.get_height()) * np.pi / 2, 12) for b in bars]  # heights sum to 2/pi
    [0.0, 0.0, 0.5, 0.5]
    >>> plt.close(fig)
    """
    _check_ax(ax)
    X = as_tokens(X, d=2)
    bins = check_int(bins, "bins")
    color = _check_color(color)
    theta = np.arctan2(X[:, 1], X[:, 0])
    *_, patches = ax.hist(
        theta, bins=bins, range=(-np.pi, np.pi), density=True, alpha=0.6, color=color, label=label
    )
    ax.set_xlabel(r"angle $\theta$ (radians)")
    ax.set_ylabel("density")
    ax.set_xlim(-np.pi, np.pi)
    if label is not None:
        ax.legend()
    return cast(BarContainer, patches)  # one data set, histtype "bar": one BarContainer


def plot_sample_vs_gaussian(
    ax: Axes, x: ArrayLike, mean: float, var: float, *, bins: int = 30
) -> list[Artist]:
    r"""Density histogram of a 1-D sample against the density of :math:`\mathcal N(m, s)`,

    .. math::

        p(x) = \frac{1}{\sqrt{2\pi s}} e^{-(x - m)^2 / (2s)}.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    x : array_like, shape (n,) or (n, 1)
        The sample.
    mean, var : float
        :math:`m` and :math:`s > 0`.
    bins : int
        Number of bins of the histogram.

    Returns
    -------
    list of matplotlib.artist.Artist
        The bars of the histogram, then the line of the density.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_sample_vs_gaussian
    >>> x = np.random.default_rng(0).standard_normal(200)
    >>> fig, ax = plt.subplots()
    >>> *bars, density = plot_sample_vs_gaussian(ax, x, 0.0, 1.0, bins=10)
    >>> len(bars), round(float(density.get_ydata().max()), 2)  # 1 / sqrt(2 pi)
    (10, 0.4)
    >>> plt.close(fig)
    """
    _check_ax(ax)
    x = _drawable(x, "x")
    if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[1] != 1) or x.size < 1:
        raise ValueError(f"`x` must be a non-empty sample of shape (n,) or (n, 1); got {x.shape}.")
    x = x.ravel()
    mean = check_real(mean, "mean")
    var = check_positive(var, "var")
    bins = check_int(bins, "bins")
    if max(abs(mean), np.max(np.abs(x))) > _MAX_GAUSSIAN:
        raise ValueError(
            f"`x` and `mean` must be at most {_MAX_GAUSSIAN:g} in magnitude to draw the Gaussian "
            "density over them; rescale the sample and its mean."
        )
    _, _, patches = ax.hist(x, bins=bins, density=True, alpha=0.5, label=f"{x.size} tokens")
    grid = np.linspace(x.min() - 0.5, x.max() + 0.5, 300)
    dens = np.exp(-((grid - mean) ** 2) / (2 * var)) / np.sqrt(2 * np.pi * var)
    lines = ax.plot(grid, dens, "k-", label=rf"$\mathcal{{N}}({mean:.2f}, {var:.2f})$")
    ax.set_xlabel("$x$")
    ax.set_ylabel("density")
    ax.legend(fontsize="small")
    return [*cast(BarContainer, patches), *lines]  # one data set: one BarContainer


def plot_rank_histogram(
    ax: Axes,
    counts: RankCounts,
    *,
    label: str | None = None,
    offset: float = 0.0,
    width: float = 0.4,
) -> BarContainer:
    """Bar chart of the ranks of a :class:`~token_dynamics.gaussian.RankCounts`, with its bound
    drawn as a dashed line just right of it.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    counts : RankCounts
        The ranks of the limiting covariances over random runs, and their bound.
    label : str, optional
        Legend entry of the bars.
    offset : float
        Shift of the bars from the integer ranks (two sets of bars side by side).
    width : float
        Width of the bars.

    Returns
    -------
    matplotlib.container.BarContainer
        One bar per rank ``0, ..., d``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.gaussian import RankCounts
    >>> from token_dynamics.plotting import plot_rank_histogram
    >>> counts = RankCounts(d=3, ranks=np.array([1, 1, 2]), bound=2, blowups=0)
    >>> fig, ax = plt.subplots()
    >>> [int(b.get_height()) for b in plot_rank_histogram(ax, counts)]  # runs of rank 0, ..., 3
    [0, 2, 1, 0]
    >>> plt.close(fig)
    """
    _check_ax(ax)
    fix = "Pass the result of `limiting_ranks`."
    counts = check_attributes(counts, ("ranks", "d", "bound"), "counts", fix)
    offset = check_real(offset, "offset")
    width = check_positive(width, "width")
    hist = np.bincount(counts.ranks, minlength=counts.d + 1)
    bars = ax.bar(np.arange(counts.d + 1) + offset, hist, width=width, label=label)
    ax.axvline(counts.bound + 0.5, color="k", ls="--", lw=0.8)
    ax.set_xlabel("rank of the limit")
    ax.set_ylabel("runs")
    ax.set_title(f"d = {counts.d}")
    return bars
