"""Means with their bands (ax in, artist out): a Monte-Carlo mean with its standard-error band,
the mean energy of many noisy paths against its bound, the median pairwise cosine with a
quantile band.
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.typing import ColorType

from .._typing import ArrayLike, FloatArray
from .._validation import as_matrix, as_times, check_attributes, check_positive
from ..stochastic import MCEstimate, mc_estimate
from ._checks import _check_ax, _check_color, _drawable, _log_drawable
from ._curves import _curve

__all__ = [
    "BAND_SE",
    "COSINE_BAND",
    "plot_cosine_similarities",
    "plot_energy_decay",
    "plot_mc_estimate",
]


#: Width of the shaded bands, in standard errors: +-2 SE is a 95% band for a Gaussian mean.
BAND_SE = 2.0


#: Quantiles of the pairwise cosines drawn as a band around their median: the central 80 %.
COSINE_BAND = (0.1, 0.9)


def plot_mc_estimate(
    ax: Axes,
    x: ArrayLike,
    estimate: MCEstimate,
    *,
    predicted: ArrayLike | None = None,
    label: str = "simulation",
    color: ColorType = "C0",
    xlabel: str | None = None,
    ylabel: str | None = None,
) -> Line2D:
    """A Monte-Carlo mean with a band of +-``BAND_SE`` standard errors, and a prediction.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    x : array_like, shape (k,)
        The variable (depth, time).
    estimate : MCEstimate
        With ``mean`` and ``stderr`` of shape ``(k,)``.
    predicted : array_like, shape (k,), optional
        The predicted mean, drawn dashed in black.
    label : str
        Legend entry of the mean.
    color : color
        Of the mean and its band.
    xlabel, ylabel : str, optional
        Axis labels, with the quantity and its unit (left as they are if not given).

    Returns
    -------
    matplotlib.lines.Line2D
        The line of the mean.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_mc_estimate
    >>> from token_dynamics.stochastic import MCEstimate
    >>> fig, ax = plt.subplots()
    >>> estimate = MCEstimate(np.array([1.0, 0.5]), np.array([0.0, 0.1]), 10)
    >>> line = plot_mc_estimate(ax, [0, 1], estimate, predicted=[1.0, 0.5], xlabel="depth $t$")
    >>> line.get_ydata().tolist()
    [1.0, 0.5]
    >>> plt.close(fig)
    """
    _check_ax(ax)
    fix = "Pass the result of `mc_estimate` over samples of shape (n, k)."
    estimate = check_attributes(estimate, ("mean", "stderr"), "estimate", fix)
    mean = _curve(estimate.mean, "estimate")
    se = _curve(estimate.stderr, "estimate", size=len(mean))
    x = _curve(x, "x", size=len(mean))
    if predicted is not None:
        predicted = _curve(predicted, "predicted", size=len(mean))
    color = _check_color(color)
    if not isinstance(label, str):
        raise TypeError(f"`label` must be the legend entry of the mean (a str); got {label!r}.")
    (line,) = ax.plot(x, mean, color=color, label=label)
    ax.fill_between(x, mean - BAND_SE * se, mean + BAND_SE * se, color=color, alpha=0.25, lw=0)
    if predicted is not None:
        ax.plot(x, predicted, "k--", lw=1, label="prediction")
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.legend()
    return line


def _decay(rate: float, elapsed: FloatArray) -> FloatArray:
    r""":math:`e^{-\mathrm{rate}\, s}` for ``s >= 0``: at most one; a product ``rate * s`` that
    overflows stands for an exponential that underflows to its true value, zero."""
    with np.errstate(over="ignore"):
        return np.exp(-rate * elapsed)


def plot_energy_decay(
    ax: Axes,
    times: ArrayLike,
    energies: ArrayLike,
    *,
    rate: float | None = None,
    label: str = "mean energy",
    color: ColorType = "C0",
) -> Line2D:
    r"""Mean energy over paths (+-``BAND_SE`` SE) on a log scale, with the bound
    :math:`E_0 e^{-\mathrm{rate}\, (t - t_0)}` from the first depth :math:`t_0`.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    times : array_like, shape (T,)
        The depths, increasing.
    energies : array_like, shape (paths, T)
        The energy of each path at each depth.
    rate : float, optional
        Guaranteed decay rate; its bound is drawn dashed.
    label : str
        Legend entry of the mean.
    color : color
        Of the mean and its band.

    Returns
    -------
    matplotlib.lines.Line2D
        The line of the mean.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_energy_decay
    >>> fig, ax = plt.subplots()
    >>> line = plot_energy_decay(ax, [0, 1], [[1.0, 0.5], [1.0, 0.7]], rate=0.1)
    >>> line.get_ydata().tolist()
    [1.0, 0.6]
    >>> plt.close(fig)
    """
    _check_ax(ax)
    times = as_times(_drawable(times, "times"))
    E = as_matrix(_drawable(energies, "energies"), "energies", shape=(None, len(times)))
    if E.shape[0] < 2 or not np.all(E > 0):
        raise ValueError(
            "`energies` must hold positive energies of at least two paths (a standard error "
            f"needs two; the axis is logarithmic); got shape {E.shape}."
        )
    _log_drawable(E, "energies")
    rate = None if rate is None else check_positive(rate, "rate", allow_zero=True)
    color = _check_color(color)
    if not isinstance(label, str):
        raise TypeError(f"`label` must be the legend entry of the mean (a str); got {label!r}.")
    estimate = mc_estimate(E)  # overflow-safe mean and standard error
    mean, se = np.asarray(estimate.mean), np.asarray(estimate.stderr)
    (line,) = ax.plot(times, mean, color=color, label=label)
    lo = np.clip(mean - BAND_SE * se, mean * 1e-3, None)
    ax.fill_between(times, lo, mean + BAND_SE * se, color=color, alpha=0.25, lw=0)
    if rate is not None:
        ax.plot(
            times,
            mean[0] * _decay(rate, times - times[0]),
            "k--",
            lw=1,
            label=f"bound, rate {rate:.3g}",
        )
    ax.set_yscale("log")
    ax.set_xlabel("depth $t$")
    ax.set_ylabel("energy")
    ax.legend()
    return line


def plot_cosine_similarities(
    ax: Axes,
    times: ArrayLike,
    cosines: ArrayLike,
    *,
    color: ColorType = "C0",
    label: str | None = None,
) -> Line2D:
    """Median of the pairwise cosine similarities over the layers, with a 10-90 % band.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    times : array_like, shape (K,)
        The depths of the saved layers.
    cosines : array_like, shape (K, P)
        The ``P`` pairwise cosines at each saved layer (``SynchronizationRun.cosines()``).
    color : color
        Of the median and its band.
    label : str, optional
        Legend entry of the median.

    Returns
    -------
    matplotlib.lines.Line2D
        The line of the median.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_cosine_similarities
    >>> fig, ax = plt.subplots()
    >>> line = plot_cosine_similarities(ax, [0, 1], np.array([[0.0, 0.5], [0.9, 1.0]]))
    >>> line.get_ydata().tolist()
    [0.25, 0.95]
    >>> plt.close(fig)
    """
    _check_ax(ax)
    t = _curve(times, "times")
    C = as_matrix(_drawable(cosines, "cosines"), "cosines", shape=(len(t), None))
    if C.shape[1] < 1:
        raise ValueError("`cosines` must hold at least one pairwise cosine per time; got none.")
    color = _check_color(color)
    lo, mid, hi = np.quantile(C, [COSINE_BAND[0], 0.5, COSINE_BAND[1]], axis=1)
    (line,) = ax.plot(t, mid, color=color, label=label)
    ax.fill_between(t, lo, hi, color=color, alpha=0.2, lw=0)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("depth t")
    ax.set_ylabel("cosine similarity")
    return line
