"""Plotting helpers for the chapter on the mean-field limit (ax in, artist out)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.ticker import NullFormatter

from ._tokens import _plot_curves

__all__: list[str] = [
    "plot_against_n",
    "plot_causal_paths",
    "plot_distance_curves",
    "plot_error_vs_n",
    "plot_sample_vs_gaussian",
    "plot_stability_ratios",
]


def plot_error_vs_n(
    ax: Any,
    errors: Any,
    *,
    reference_slopes: Mapping[str, float] | None = None,
    label: str = r"$W_2(\mu^n(T), \mu(T))$",
    color: str = "C0",
) -> list:
    """Log-log plot of the mean-field error against n, with the fitted slope and reference rates.

    Parameters
    ----------
    ax : matplotlib Axes
    errors : MeanFieldErrors
        From :func:`token_dynamics.meanfield.mean_field_errors`.
    reference_slopes : mapping label -> slope, optional
        Dashed guide lines :math:`\\propto n^{p}`, anchored at the first mean error.
    label : str
    color : str

    Returns
    -------
    list of Artists
    """
    ns = np.asarray(errors.ns, dtype=float)
    mean = errors.final.mean(axis=0)
    artists = []
    for row in errors.final:
        artists += ax.loglog(ns, row, ".", color=color, alpha=0.3)
    artists += ax.loglog(ns, mean, "o", color=color, label=f"{label}, mean over seeds")
    fit = errors.fit
    artists += ax.loglog(ns, fit(ns), "-", color=color, label=f"fit: slope {fit.slope:.2f}")
    for k, (name, slope) in enumerate((reference_slopes or {}).items()):
        guide = mean[0] * (ns / ns[0]) ** slope
        artists += ax.loglog(ns, guide, "--", color=f"C{k + 2}", label=name)
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide on short decades
    ax.set_xlabel("number of tokens $n$")
    ax.set_ylabel("Wasserstein distance")
    ax.legend(fontsize="small")
    return artists


def plot_stability_ratios(
    ax: Any,
    runs: Mapping[str, Any],
    *,
    bound: Any = None,
    yscale: str = "linear",
) -> list:
    """Measured ratios :math:`W(t)/W(0)` of several runs, and optionally the Gronwall bound.

    Parameters
    ----------
    ax : matplotlib Axes
    runs : mapping label -> StabilityRun
        From :func:`token_dynamics.meanfield.stability_ratios`.
    bound : StabilityBound, optional
        From :func:`token_dynamics.meanfield.stability_constant`; drawn as :math:`\\log C(t)`.
    yscale : str
        Matplotlib scale of the y axis; ``"symlog"`` shows a bound many decades above the data.

    Returns
    -------
    list of Line2D
    """
    lines = []
    for label, run in runs.items():
        lines += ax.plot(run.times, np.log(run.ratio), label=label)
    if bound is not None:
        lines += ax.plot(
            bound.times, bound.log_constant, "k--", label=r"Gronwall bound $\log C(t, R_0)$"
        )
    ax.set_xlabel("time $t$ (depth)")
    ax.set_yscale(yscale)
    ax.set_ylabel(r"$\log\, W_2(\mu_t, \nu_t) / W_2(\mu_0, \nu_0)$")
    ax.legend(fontsize="small")
    return lines


def plot_distance_curves(
    ax: Any, times: Any, curves: Mapping[str, Any], *, log: bool = True
) -> list:
    """Several distances against time (e.g. :math:`W_2` and :math:`W_{2,\\lambda}`).

    Parameters
    ----------
    ax : matplotlib Axes
    times : array_like, shape (T,)
    curves : mapping label -> array_like, shape (T,)
    log : bool
        Logarithmic y axis.

    Returns
    -------
    list of Line2D
    """
    return _plot_curves(ax, times, curves, xlabel="time $t$ (depth)", ylabel="distance", logy=log)


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
    ax.set_xlabel("$x^{(1)}$")
    ax.set_ylabel("$x^{(2)}$")
    ax.set_aspect("equal", adjustable="datalim")
    return artists


def plot_against_n(
    ax: Any,
    ns: Any,
    curves: Mapping[str, Any],
    *,
    ylabel: str = "ratio",
    loglog: bool = True,
) -> list:
    """Several quantities against the number of tokens n, one marked line per label.

    Parameters
    ----------
    ax : matplotlib Axes
    ns : array_like, shape (k,)
    curves : mapping label -> array_like, shape (k,)
    ylabel : str
    loglog : bool
        Logarithmic axes.

    Returns
    -------
    list of Line2D
    """
    n = np.asarray(ns, dtype=float)
    lines = []
    for label, values in curves.items():
        draw = ax.loglog if loglog else ax.semilogx
        lines += draw(n, np.asarray(values, dtype=float), "o-", label=label)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("number of tokens $n$")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    return lines


def plot_sample_vs_gaussian(ax: Any, x: Any, mean: float, var: float, *, bins: int = 30) -> list:
    """Histogram of a 1-D sample against the density of :math:`\\mathcal N(m, s)`.

    Parameters
    ----------
    ax : matplotlib Axes
    x : array_like, shape (n,) or (n, 1)
    mean, var : float
    bins : int

    Returns
    -------
    list of Artists
    """
    x = np.asarray(x, dtype=float).ravel()
    _, _, patches = ax.hist(x, bins=bins, density=True, alpha=0.5, label=f"{x.size} tokens")
    grid = np.linspace(x.min() - 0.5, x.max() + 0.5, 300)
    dens = np.exp(-((grid - mean) ** 2) / (2 * var)) / np.sqrt(2 * np.pi * var)
    lines = ax.plot(grid, dens, "k-", label=rf"$\mathcal{{N}}({mean:.2f}, {var:.2f})$")
    ax.set_xlabel("$x$")
    ax.set_ylabel("density")
    ax.legend(fontsize="small")
    return [*patches, *lines]
