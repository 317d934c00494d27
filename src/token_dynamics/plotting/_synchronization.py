"""Plotting helpers for the chapter on synchronization by noise (ax in, artist out).

Pairwise cosine similarities and the energy over the layers (the panels of Agazzi et al.'s
Figures 1-6), the sorted Gram matrix of a cloud, the function F of their Lemma 4.1, and their
Table 1 drawn as a table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "plot_cosine_matrix",
    "plot_cosine_similarities",
    "plot_dissipation_function",
    "plot_layer_energy",
    "plot_noise_exponent_table",
]

#: Quantiles of the pairwise cosines drawn as a band around their median: the central 80 %.
COSINE_BAND = (0.1, 0.9)


def plot_cosine_similarities(
    ax: Any, times: Any, cosines: Any, *, color: Any = "C0", label: str | None = None
) -> Any:
    """Median of the pairwise cosine similarities over the layers, with a 10-90 % band.

    Parameters
    ----------
    ax : matplotlib Axes
    times : (K,) array_like
    cosines : (K, P) array_like
        The ``P`` pairwise cosines at each saved layer (``SynchronizationRun.cosines()``).
    color : color
    label : str, optional

    Returns
    -------
    Line2D

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> line = plot_cosine_similarities(ax, [0, 1], np.array([[0.0, 0.5], [0.9, 1.0]]))
    >>> plt.close(fig)
    """
    t = np.asarray(times, dtype=np.float64)
    C = np.asarray(cosines, dtype=np.float64)
    lo, mid, hi = np.quantile(C, [COSINE_BAND[0], 0.5, COSINE_BAND[1]], axis=1)
    (line,) = ax.plot(t, mid, color=color, label=label)
    ax.fill_between(t, lo, hi, color=color, alpha=0.2, lw=0)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("depth t")
    ax.set_ylabel("cosine similarity")
    return line


def plot_layer_energy(
    ax: Any,
    times: Any,
    energy: Any,
    *,
    color: Any = "C0",
    label: str | None = None,
    linestyle: str = "-",
) -> Any:
    r"""The energy :math:`\mathcal S_\beta` of one run over the layers, on a log scale.

    Parameters
    ----------
    ax : matplotlib Axes
    times : (K,) array_like
    energy : (K,) array_like
    color : color
    label : str, optional
    linestyle : str

    Returns
    -------
    Line2D

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> line = plot_layer_energy(ax, [0, 1], [1.0, 0.5])
    >>> plt.close(fig)
    """
    E = np.asarray(energy, dtype=np.float64)
    (line,) = ax.plot(times, np.maximum(E, 1e-300), color=color, label=label, ls=linestyle)
    ax.set_yscale("log")
    ax.set_xlabel("depth t")
    ax.set_ylabel(r"$\mathcal S_\beta$")
    return line


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


def plot_dissipation_function(
    ax: Any,
    u: Any,
    F: Any,
    *,
    lambda_bar: float,
    rate: float,
    color: Any = "C0",
    label: str | None = None,
) -> Any:
    r"""Lemma 4.1's :math:`F` on :math:`[-1, 1]`, its limit :math:`-\bar\lambda` at 1 and its
    infimum :math:`-\bar\lambda'`.

    Parameters
    ----------
    ax : matplotlib Axes
    u, F : (k,) array_like
    lambda_bar, rate : float
        :math:`\bar\lambda` and :math:`\bar\lambda'`.
    color : color
    label : str, optional

    Returns
    -------
    Line2D

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> line = plot_dissipation_function(ax, [-1, 1], [0.5, 0.9], lambda_bar=-0.9, rate=-0.5)
    >>> plt.close(fig)
    """
    (line,) = ax.plot(u, F, color=color, label=label)
    ax.axhline(-rate, color=color, ls=":", lw=1)
    ax.plot([1.0], [-lambda_bar], "o", color=color, ms=4)
    ax.set_xlabel(r"$u = \langle x, y\rangle$")
    ax.set_ylabel(r"$F(u)$")
    return line


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
