"""Curves against time or a parameter (ax in, artist out): energies, distances,
Monte-Carlo means with their bands, histograms and counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..stochastic import ACTIVATIONS, kappa

__all__ = [
    "BAND_SE",
    "COSINE_BAND",
    "plot_angle_histogram",
    "plot_cosine_similarities",
    "plot_count_check",
    "plot_curves",
    "plot_dissipation_function",
    "plot_energy_decay",
    "plot_energy_staircase",
    "plot_growth",
    "plot_kernels",
    "plot_layer_energy",
    "plot_mc_estimate",
    "plot_rank_histogram",
    "plot_sample_vs_gaussian",
    "plot_stability_ratios",
    "plot_translation_profile",
]


#: Width of the shaded bands, in standard errors: +-2 SE is a 95% band for a Gaussian mean.
BAND_SE = 2.0


#: Quantiles of the pairwise cosines drawn as a band around their median: the central 80 %.
COSINE_BAND = (0.1, 0.9)


def plot_curves(
    ax: Any,
    x: Any,
    curves: Mapping[str, Any],
    *,
    xlabel: str,
    ylabel: str,
    relative: bool = False,
    logx: bool = False,
    logy: bool = False,
    **style: Any,
) -> list:
    """Several named quantities against one variable (time, depth, ``n``), one line each.

    Parameters
    ----------
    ax : matplotlib Axes
    x : array_like, shape (T,)
    curves : mapping label -> array_like, shape (T,)
        The legend entries and the values.
    xlabel, ylabel : str
        Axis labels, with the quantity and its unit.
    relative : bool
        Divide each curve by its first value (an energy ``E(t) / E(0)``).
    logx, logy : bool
        Logarithmic axes.
    **style
        Passed to ``ax.plot`` (``marker``, ``linestyle``, ...).

    Returns
    -------
    list of Line2D

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> t = np.linspace(0, 1, 5)
    >>> (line,) = plot_curves(ax, t, {"E": 2 * np.exp(-t)}, xlabel="time $t$",
    ...                       ylabel="energy", relative=True)
    >>> float(line.get_ydata()[0])
    1.0
    >>> plt.close(fig)
    """
    x = np.asarray(x, dtype=float)
    lines = []
    for label, values in curves.items():
        v = np.asarray(values, dtype=float)
        lines += ax.plot(x, v / v[0] if relative else v, label=label, **style)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    return lines


def plot_mc_estimate(
    ax: Any,
    x: Any,
    estimate: Any,
    *,
    predicted: Any = None,
    label: str = "simulation",
    color: Any = "C0",
    xlabel: str | None = None,
    ylabel: str | None = None,
) -> Any:
    """Plot a Monte-Carlo mean with a +-2 SE band, and optionally the predicted curve.

    Parameters
    ----------
    ax : matplotlib Axes
    x : (k,) array_like
    estimate : MCEstimate
        With ``mean`` and ``stderr`` of shape ``(k,)``.
    predicted : (k,) array_like, optional
        Drawn dashed in black.
    label : str
    color : color
    xlabel, ylabel : str, optional
        Axis labels, with the quantity and its unit (left as they are if not given).

    Returns
    -------
    Line2D
        The line of the mean.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.stochastic import MCEstimate
    >>> fig, ax = plt.subplots()
    >>> line = plot_mc_estimate(ax, [0, 1], MCEstimate(np.array([1.0, 0.5]), np.zeros(2), 10))
    >>> plt.close(fig)
    """
    x = np.asarray(x, dtype=np.float64)
    mean, se = np.asarray(estimate.mean), np.asarray(estimate.stderr)
    (line,) = ax.plot(x, mean, color=color, label=label)
    ax.fill_between(x, mean - BAND_SE * se, mean + BAND_SE * se, color=color, alpha=0.25, lw=0)
    if predicted is not None:
        ax.plot(x, np.asarray(predicted), "k--", lw=1, label="prediction")
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.legend()
    return line


def plot_kernels(
    ax: Any,
    activations: Any = ACTIVATIONS,
    *,
    d: int,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
) -> list:
    r"""Normalised noise kernels :math:`\kappa(t)/\kappa(1)` on ``[-1, 1]``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> lines = plot_kernels(ax, ["relu"], d=4)
    >>> plt.close(fig)
    """
    t = np.linspace(-1.0, 1.0, 201)
    lines = []
    for act in activations:
        k = kappa(t, act, d=d, sigma_U=sigma_U, sigma_W=sigma_W)
        (line,) = ax.plot(t, k / k[-1], label=act)
        lines.append(line)
    ax.set_xlabel(r"$t = \langle x, y\rangle$")
    ax.set_ylabel(r"$\kappa(t)/\kappa(1)$")
    ax.legend()
    return lines


def plot_energy_decay(
    ax: Any,
    times: Any,
    energies: Any,
    *,
    rate: float | None = None,
    label: str = "mean energy",
    color: Any = "C0",
) -> Any:
    """Mean energy over paths (+-2 SE) on a log scale, with the bound ``E_0 exp(-rate t)``.

    Parameters
    ----------
    ax : matplotlib Axes
    times : (T,) array_like
    energies : (paths, T) array_like
    rate : float, optional
        Guaranteed decay rate; its bound is drawn dashed.
    label : str
    color : color

    Returns
    -------
    Line2D

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> line = plot_energy_decay(ax, [0, 1], np.ones((3, 2)), rate=0.1)
    >>> plt.close(fig)
    """
    times = np.asarray(times, dtype=np.float64)
    E = np.asarray(energies, dtype=np.float64)
    mean = E.mean(axis=0)
    se = E.std(axis=0, ddof=1) / np.sqrt(E.shape[0])
    (line,) = ax.plot(times, mean, color=color, label=label)
    lo = np.clip(mean - BAND_SE * se, mean * 1e-3, None)
    ax.fill_between(times, lo, mean + BAND_SE * se, color=color, alpha=0.25, lw=0)
    if rate is not None:
        ax.plot(
            times, mean[0] * np.exp(-rate * times), "k--", lw=1, label=f"bound, rate {rate:.3g}"
        )
    ax.set_yscale("log")
    ax.set_xlabel("depth $t$")
    ax.set_ylabel("energy")
    ax.legend()
    return line


def plot_angle_histogram(
    ax: Any, X: Any, *, bins: int = 48, label: str | None = None, color: Any = "C0"
) -> Any:
    """Histogram of the angles of tokens on the circle (``d = 2``): an empirical measure.

    Parameters
    ----------
    ax : matplotlib Axes
    X : (n, 2) array_like
        Tokens on the unit circle.
    bins : int
    label : str, optional
    color : color

    Returns
    -------
    The patches of the histogram.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> patches = plot_angle_histogram(ax, np.eye(2))
    >>> plt.close(fig)
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != 2:
        raise ValueError(f"`X` must have shape (n, 2) (tokens on the circle); got {X.shape}.")
    theta = np.arctan2(X[:, 1], X[:, 0])
    *_, patches = ax.hist(
        theta, bins=bins, range=(-np.pi, np.pi), density=True, alpha=0.6, color=color, label=label
    )
    ax.set_xlabel(r"angle $\theta$ (radians)")
    ax.set_ylabel("density")
    ax.set_xlim(-np.pi, np.pi)
    if label is not None:
        ax.legend()
    return patches


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
    ax.set_ylabel(r"energy $\mathcal{S}_\beta$")
    return line


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


def plot_energy_staircase(ax: Any, result: Any, *, show_clusters: bool = True) -> list:
    """Energy staircase of :func:`token_dynamics.gradient_flow.circle_metastability`.

    The energy is drawn against log time; the number of clusters (a step curve) on a twin
    axis if ``show_clusters``.

    Returns
    -------
    list of Line2D
    """
    t, E = result.times[1:], result.energies[1:]
    lines = ax.semilogx(t, E, color="C0", label=r"energy $E_\beta$")
    ax.set_xlabel("time $t$ (log scale)")
    ax.set_ylabel(r"$E_\beta$", color="C0")
    if show_clusters:
        twin = ax.twinx()
        lines += twin.step(t, result.cluster_counts[1:], where="post", color="C3", label="clusters")
        twin.set_yscale("log")
        twin.set_ylabel("number of clusters", color="C3")
    return lines


def plot_translation_profile(
    ax: Any, s: Any, values: Any, *, second_derivative: float | None = None
) -> list:
    """Energy along a translation geodesic ``s -> E(mu_s)``, with its osculating parabola.

    Parameters
    ----------
    s, values : array_like, shape (k,)
        Must contain ``s = 0``.
    second_derivative : float, optional
        Draw ``E(0) + E''(0) s^2 / 2`` when given (the first derivative is assumed zero).

    Returns
    -------
    list of Line2D
    """
    s = np.asarray(s, dtype=float)
    v = np.asarray(values, dtype=float)
    lines = ax.plot(s, v, label="energy along the geodesic")
    if second_derivative is not None:
        v0 = v[np.argmin(np.abs(s))]
        lines += ax.plot(s, v0 + 0.5 * second_derivative * s**2, "--", label="osculating parabola")
    ax.set_xlabel("geodesic parameter $s$")
    ax.set_ylabel(r"$\mathcal{E}(\mu_s)$")
    ax.legend(fontsize="small")
    return lines


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


def plot_growth(
    ax, solutions: Sequence[Any], labels: Sequence[str], *, t_star: float | None = None
):
    """``tr Sigma(t)`` on a log scale for several runs, with the predicted blow-up time."""
    lines = []
    for sol, lab in zip(solutions, labels, strict=True):
        tr = np.trace(sol.covariances, axis1=1, axis2=2)
        (line,) = ax.semilogy(sol.times, tr, label=lab)
        lines.append(line)
        if sol.blew_up:
            ax.axvline(sol.blowup_time, color=line.get_color(), ls=":", lw=1)
    if t_star is not None:
        ax.axvline(t_star, color="k", ls="--", lw=0.8, label=r"predicted $t^*$")
    ax.set_xlabel("t")
    ax.set_ylabel(r"tr $\Sigma(t)$")
    ax.legend()
    return lines


def plot_rank_histogram(
    ax, counts: Any, *, label: str | None = None, offset: float = 0.0, width: float = 0.4
):
    """Bar chart of the ranks of a :class:`~token_dynamics.gaussian.RankCounts`, with its bound."""
    hist = np.bincount(counts.ranks, minlength=counts.d + 1)
    bars = ax.bar(np.arange(counts.d + 1) + offset, hist, width=width, label=label)
    ax.axvline(counts.bound + 0.5, color="k", ls="--", lw=0.8)
    ax.set_xlabel("rank of the limit")
    ax.set_ylabel("runs")
    ax.set_title(f"d = {counts.d}")
    return bars


def plot_count_check(
    ax: Any, sum_m: Any, measured: Any, bound: Any, *, label: str = "blocks"
) -> list:
    """Measured counts of many constructions against the paper's formula, one point per data set.

    Returns
    -------
    list of matplotlib artists
    """
    sum_m, measured, bound = (np.asarray(v, dtype=float) for v in (sum_m, measured, bound))
    artists = [
        ax.scatter(sum_m, measured, s=18, label=f"{label} of our construction"),
        ax.scatter(sum_m, bound, s=18, marker="_", color="k", label="paper's formula"),
    ]
    ax.set_xlabel(r"$\sum_j m_j$")
    ax.set_ylabel(label)
    ax.legend()
    return artists
