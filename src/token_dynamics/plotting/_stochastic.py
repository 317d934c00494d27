"""Plotting helpers for the chapters on stochastic limits and synchronization (ax in, artist out).

Monte-Carlo curves with their standard-error bands, convergence studies on log-log axes with the
fitted slope, kernels, and energy decay against a rate.
Animations of tokens on the sphere reuse :func:`token_dynamics.plotting.animate`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..stochastic import ACTIVATIONS, kappa

__all__ = [
    "plot_angle_histogram",
    "plot_convergence",
    "plot_energy_decay",
    "plot_kernels",
    "plot_limit_grid",
    "plot_mc_estimate",
]

#: Width of the shaded bands, in standard errors: +-2 SE is a 95% band for a Gaussian mean.
BAND_SE = 2.0


def plot_mc_estimate(
    ax: Any,
    x: Any,
    estimate: Any,
    *,
    predicted: Any = None,
    label: str = "simulation",
    color: Any = "C0",
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
    ax.legend(frameon=False)
    return line


def plot_convergence(
    ax: Any,
    study: Any,
    *,
    xlabel: str = "L",
    ylabel: str = "error",
    reference_slope: float | None = None,
    color: Any = "C0",
) -> Any:
    """Log-log plot of a :class:`ConvergenceStudy` with +-2 SE bars and its fitted line.

    Parameters
    ----------
    ax : matplotlib Axes
    study : ConvergenceStudy
    xlabel, ylabel : str
    reference_slope : float, optional
        A dotted line of this slope through the first point, for comparison.
    color : color

    Returns
    -------
    ErrorbarContainer

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.stochastic import ConvergenceStudy
    >>> s = ConvergenceStudy(np.array([1.0, 2.0]), np.array([1.0, 0.5]), np.zeros(2), -1.0)
    >>> fig, ax = plt.subplots()
    >>> bars = plot_convergence(ax, s)
    >>> plt.close(fig)
    """
    x, y = study.values, study.mean
    bars = ax.errorbar(x, y, yerr=BAND_SE * study.stderr, fmt="o", color=color, capsize=3)
    intercept = np.mean(np.log(y) - study.slope * np.log(x))
    ax.plot(
        x, np.exp(intercept) * x**study.slope, color=color, label=f"fit: slope {study.slope:.2f}"
    )
    if reference_slope is not None:
        ax.plot(x, y[0] * (x / x[0]) ** reference_slope, "k:", label=f"slope {reference_slope:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False)
    return bars


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
    ax.legend(frameon=False)
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
    ax.set_xlabel("depth t")
    ax.legend(frameon=False)
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
    ax.set_xlabel(r"angle $\theta$")
    ax.set_xlim(-np.pi, np.pi)
    if label is not None:
        ax.legend(frameon=False)
    return patches


def plot_limit_grid(ax: Any, error: Any, *, grid_times: bool = False) -> list:
    """Mean error of the discrete model against the SDE, one line per width, against ``L``.

    Parameters
    ----------
    ax : matplotlib Axes
    error : DeepLimitError
        From :func:`token_dynamics.stochastic.deep_limit_error`.
    grid_times : bool
        Plot the error at layer times (``error.grid``) instead of the sup over all times.

    Returns
    -------
    list of ErrorbarContainer

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.stochastic import DeepLimitError
    >>> e = DeepLimitError(np.array([2.0, 4.0]), (None,), np.ones((3, 2, 1)),
    ...                    np.ones((3, 2, 1)), np.zeros((3, 2, 1)))
    >>> fig, ax = plt.subplots()
    >>> bars = plot_limit_grid(ax, e)
    >>> plt.close(fig)
    """
    values = error.grid if grid_times else error.sup
    n = values.shape[0]
    bars = []
    for j, m in enumerate(error.widths):
        mean = values[:, :, j].mean(axis=0)
        se = values[:, :, j].std(axis=0, ddof=1) / np.sqrt(n)
        label = "m = inf" if m is None else f"m = {m}"
        bars.append(
            ax.errorbar(error.depths, mean, yerr=BAND_SE * se, fmt="o-", capsize=3, label=label)
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("depth L")
    ax.legend(frameon=False)
    return bars
