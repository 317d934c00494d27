"""Heat maps and tables (ax in, artist out): attention and Gram matrices, an energy
landscape, a table of exponents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.contour import QuadContourSet
from matplotlib.image import AxesImage
from matplotlib.table import Table

from .._typing import ArrayLike
from .._validation import (
    as_matrix,
    as_sphere_tokens,
    as_vector,
    check_attributes,
    check_bool,
    check_int,
)
from ._checks import _check_ax, _check_cmap, _drawable
from ._clouds import _label_coordinates

if TYPE_CHECKING:
    from ..stochastic import NoiseExponents

__all__ = [
    "plot_attention_matrix",
    "plot_cosine_matrix",
    "plot_energy_landscape",
    "plot_noise_exponent_table",
]


def plot_attention_matrix(
    ax: Axes, P: ArrayLike, *, cmap: str = "viridis", colorbar: bool = True, **kwargs: Any
) -> AxesImage:
    """Image of an attention matrix, query ``i`` down the rows and key ``j`` across.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    P : array_like, shape (n, m)
        E.g. ``field.attention_matrix(X)``.
    cmap : str
        The colour map.
    colorbar : bool
        Add a colour bar next to the axes.
    **kwargs
        Passed to ``ax.imshow``.

    Returns
    -------
    matplotlib.image.AxesImage
        The image of ``P``.

    Raises
    ------
    ValueError
        If ``P`` is not a 2-D array.

    References
    ----------
    A. Vaswani et al., *Attention Is All You Need*, NeurIPS 2017.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_attention_matrix
    >>> fig, ax = plt.subplots()
    >>> plot_attention_matrix(ax, np.eye(3) / 1.0).get_array().shape
    (3, 3)
    >>> plt.close(fig)
    """
    _check_ax(ax)
    P = as_matrix(_drawable(P, "P"), "P")
    if 0 in P.shape:
        raise ValueError(f"`P` must have at least one row and one column; got shape {P.shape}.")
    cmap = _check_cmap(cmap)
    colorbar = check_bool(colorbar, "colorbar")
    image = ax.imshow(P, cmap=cmap, interpolation="nearest", **kwargs)
    ax.set_xlabel("key $j$")
    ax.set_ylabel("query $i$")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return image


def plot_cosine_matrix(ax: Axes, X: ArrayLike) -> AxesImage:
    r"""The Gram matrix :math:`C_{ij} = \langle x_i, x_j\rangle` of a cloud of unit tokens,
    rows ordered by a hierarchical clustering (average linkage on :math:`1 - C_{ij}`).

    Clusters show as blocks of ones; an antipodal pair of clusters as blocks of minus ones.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes; its ticks are removed.
    X : array_like, shape (N, d)
        Unit tokens.

    Returns
    -------
    matplotlib.image.AxesImage
        The reordered Gram matrix, on the colour scale ``[-1, 1]``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_cosine_matrix
    >>> fig, ax = plt.subplots()
    >>> image = plot_cosine_matrix(ax, np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]))
    >>> np.asarray(image.get_array()).diagonal().tolist()
    [1.0, 1.0, 1.0]
    >>> plt.close(fig)
    """
    from scipy.cluster import hierarchy

    _check_ax(ax)
    X = as_sphere_tokens(X)
    if len(X) < 2:
        raise ValueError(f"`X` must hold at least two tokens to be clustered; got {len(X)}.")
    C = np.clip(X @ X.T, -1.0, 1.0)
    i, j = np.triu_indices(len(X), 1)
    order = hierarchy.leaves_list(hierarchy.linkage(1.0 - C[i, j], method="average"))
    image = ax.imshow(C[np.ix_(order, order)], vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks([])
    ax.set_yticks([])
    return image


def plot_energy_landscape(
    ax: Axes, xs: ArrayLike, ys: ArrayLike, values: ArrayLike, *, levels: int = 20
) -> QuadContourSet:
    """Filled contour plot of an energy on the grid ``xs`` x ``ys``, with a colour bar.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    xs : array_like, shape (k,)
        The first coordinates of the grid.
    ys : array_like, shape (l,)
        The second coordinates.
    values : array_like, shape (l, k)
        ``values[j, i]``: the energy at ``(xs[i], ys[j])``.
    levels : int
        Number of contour levels.

    Returns
    -------
    matplotlib.contour.QuadContourSet
        The filled contours.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_energy_landscape
    >>> grid = np.linspace(-1, 1, 5)
    >>> fig, ax = plt.subplots()
    >>> cs = plot_energy_landscape(ax, grid, grid, np.add.outer(grid**2, grid**2), levels=4)
    >>> float(cs.levels.min()) <= 0.0 and float(cs.levels.max()) >= 2.0
    True
    >>> plt.close(fig)
    """
    _check_ax(ax)
    xs, ys = as_vector(xs, "xs"), as_vector(ys, "ys")
    values = as_matrix(_drawable(values, "values"), "values", shape=(len(ys), len(xs)))
    if len(xs) < 2 or len(ys) < 2:
        raise ValueError(
            f"`xs` and `ys` must have at least two points each; got {len(xs)} and {len(ys)}."
        )
    levels = check_int(levels, "levels")
    cs = ax.contourf(xs, ys, values, levels=levels)
    ax.figure.colorbar(cs, ax=ax, label="energy")
    ax.set_aspect("equal")
    _label_coordinates(ax)
    return cs


def plot_noise_exponent_table(ax: Axes, rows: Sequence[NoiseExponents]) -> Table:
    r"""Rows of :class:`~token_dynamics.stochastic.NoiseExponents` as a table (the paper's Table 1).

    Three significant digits, as the paper prints them; rows with :math:`\bar\lambda < 0` in bold.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Its axis frame is switched off.
    rows : sequence of NoiseExponents
        One row of the table each.

    Returns
    -------
    matplotlib.table.Table
        The table, with a header row.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.plotting import plot_noise_exponent_table
    >>> from token_dynamics.stochastic import relu_noise_exponents
    >>> fig, ax = plt.subplots()
    >>> table = plot_noise_exponent_table(ax, [relu_noise_exponents(5)])
    >>> table[1, 0].get_text().get_text()
    'relu'
    >>> plt.close(fig)
    """
    _check_ax(ax)
    if not isinstance(rows, Sequence) or isinstance(rows, str):
        raise TypeError(
            f"`rows` must be a list of NoiseExponents (from `noise_exponents`); got {rows!r}."
        )
    fix = "Pass the results of `noise_exponents` (NoiseExponents)."
    fields = ("activation", "d", "sigma_U", "kappa_1", "kappa_prime_1", "lambda_1", "lambda_bar")
    rows = [check_attributes(r, fields, f"rows[{k}]", fix) for k, r in enumerate(rows)]
    header = ["activation", "d", "σ", "κ(1)", "κ'(1)", "λ₁", "λ̄"]
    cells = [
        [
            r.activation,
            str(r.d),
            f"{r.sigma_U:g}",
            *(f"{v:.3g}" for v in (r.kappa_1, r.kappa_prime_1, r.lambda_1, r.lambda_bar)),
        ]
        for r in rows
    ]
    ax.axis("off")
    table = ax.table(cellText=cells, colLabels=header, loc="center", cellLoc="right")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    for k, r in enumerate(rows, start=1):
        if r.lambda_bar < 0:
            for c in range(len(header)):
                table[k, c].set_text_props(fontweight="bold")
    return table
