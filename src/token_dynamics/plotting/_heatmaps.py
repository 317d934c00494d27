"""Heat maps and tables (ax in, artist out): attention and Gram matrices, an energy
landscape, a table of exponents.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import as_matrix
from ._clouds import _label_coordinates

__all__ = [
    "plot_attention_matrix",
    "plot_cosine_matrix",
    "plot_energy_landscape",
    "plot_noise_exponent_table",
]


def plot_attention_matrix(
    ax: Any, P: Any, *, cmap: str = "viridis", colorbar: bool = True, **kwargs: Any
) -> Any:
    """Image of an attention matrix, query ``i`` down the rows and key ``j`` across.

    Parameters
    ----------
    ax : matplotlib Axes
    P : array_like, shape (n, m)
        E.g. ``field.attention_matrix(X)``.
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
    >>> plot_attention_matrix(ax, np.eye(3) / 1.0).get_array().shape
    (3, 3)
    >>> plt.close(fig)
    """
    P = as_matrix(P, "P")
    image = ax.imshow(P, cmap=cmap, interpolation="nearest", **kwargs)
    ax.set_xlabel("key $j$")
    ax.set_ylabel("query $i$")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return image


def plot_cosine_matrix(ax: Any, X: Any) -> Any:
    """The Gram matrix of a cloud of unit tokens, rows ordered by a hierarchical clustering.

    Clusters show as blocks of ones; an antipodal pair of clusters as blocks of minus ones.

    Parameters
    ----------
    ax : matplotlib Axes
    X : (N, d) array_like
        Unit tokens.

    Returns
    -------
    AxesImage

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> image = plot_cosine_matrix(ax, np.eye(3))
    >>> plt.close(fig)
    """
    from scipy.cluster import hierarchy

    X = np.asarray(X, dtype=np.float64)
    C = np.clip(X @ X.T, -1.0, 1.0)
    i, j = np.triu_indices(len(X), 1)
    order = hierarchy.leaves_list(hierarchy.linkage(1.0 - C[i, j], method="average"))
    image = ax.imshow(C[np.ix_(order, order)], vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks([])
    ax.set_yticks([])
    return image


def plot_energy_landscape(ax: Any, xs: Any, ys: Any, values: Any, *, levels: int = 20) -> Any:
    """Filled contour plot of an energy on the grid ``xs`` x ``ys`` (``values[j, i]``).

    Returns
    -------
    QuadContourSet
    """
    cs = ax.contourf(np.asarray(xs), np.asarray(ys), np.asarray(values), levels=levels)
    ax.figure.colorbar(cs, ax=ax, label="energy")
    ax.set_aspect("equal")
    _label_coordinates(ax)
    return cs


def plot_noise_exponent_table(ax: Any, rows: Any) -> Any:
    r"""Rows of :class:`~token_dynamics.stochastic.NoiseExponents` as a table (the paper's Table 1).

    Three significant digits, as the paper prints them; rows with :math:`\bar\lambda < 0` in bold.

    Parameters
    ----------
    ax : matplotlib Axes
        Its axis frame is switched off.
    rows : sequence of NoiseExponents

    Returns
    -------
    matplotlib.table.Table

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.stochastic import relu_noise_exponents
    >>> fig, ax = plt.subplots()
    >>> table = plot_noise_exponent_table(ax, [relu_noise_exponents(5)])
    >>> plt.close(fig)
    """
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
