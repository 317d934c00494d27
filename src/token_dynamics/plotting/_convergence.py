"""Convergence on log-log axes (ax in, artist out): errors against a step, a number of
tokens, a depth or a temperature, with the fitted slope and reference slopes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.container import ErrorbarContainer
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter
from matplotlib.typing import ColorType

from .._typing import ArrayLike, FloatArray
from .._validation import check_attributes, check_bool, check_positive, check_real
from ._bands import BAND_SE
from ._checks import _check_ax, _drawable, _log_drawable, _log_ticks

if TYPE_CHECKING:
    from ..interpolation import TikhonovSweep
    from ..stochastic import DeepLimitError

__all__ = ["LOG_FLOOR", "plot_limit_grid", "plot_loglog", "plot_tikhonov"]


#: Where a value that is exactly zero is drawn on a log axis: below the double-precision
#: round-off (2.2e-16 relative), so that "exact" reads as such and stays on the plot.
LOG_FLOOR = 1e-17


def _fit_slope(x: FloatArray, y: FloatArray) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def plot_loglog(
    ax: Axes,
    x: ArrayLike,
    y: ArrayLike,
    *,
    xlabel: str,
    ylabel: str,
    label: str | None = None,
    yerr: ArrayLike | None = None,
    samples: ArrayLike | None = None,
    fit: bool | float = False,
    guides: Mapping[str, float] | None = None,
    marks: Mapping[str, float] | None = None,
    color: ColorType | None = None,
    **style: Any,
) -> list[Line2D | ErrorbarContainer]:
    r"""Log-log plot of an error (or a count) ``y`` against ``x``, with its slope.

    The one convergence plot of the book: errors against a step, a number of tokens, a depth, a
    width or a temperature. A power law :math:`y = C x^p` is a line of slope :math:`p`.

    .. math::

        \log y = p \log x + \log C.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    x, y : array_like, shape (k,)
        Positive ``x``; values ``y <= 0`` (an exact result) are drawn at ``LOG_FLOOR``.
    xlabel, ylabel : str
        Axis labels, with the quantity and its unit (never a curve's name).
    label : str, optional
        Legend entry of the curve.
    yerr : array_like, shape (k,), optional
        Standard errors of ``y``: bars of +-``BAND_SE`` standard errors.
    samples : array_like, shape (s, k), optional
        The values behind ``y`` (one row per seed), drawn as faint dots.
    fit : bool or float
        ``True``: fit the slope by least squares on the logarithms and draw the line; a number:
        draw the line of that (already fitted) slope through the least-squares intercept.
    guides : mapping label -> slope, optional
        Reference slopes, dotted, through the first point.
    marks : mapping label -> float, optional
        Vertical dashed lines at these values of ``x`` (a critical value).
    color : color, optional
        Of the curve and its fit; the next colour of the cycle by default.
    **style
        Passed to ``ax.plot`` for the curve (``marker``, ``linestyle``, ...).

    Returns
    -------
    list of matplotlib.lines.Line2D or matplotlib.container.ErrorbarContainer
        The curve first (an ``ErrorbarContainer`` when ``yerr`` is given), then the fit, the
        samples, the guides and the marks that were asked for.

    Raises
    ------
    ValueError
        If ``x`` and ``y`` are not 1-D of one shape, or ``x`` is not positive.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_loglog
    >>> fig, ax = plt.subplots()
    >>> h = np.array([0.1, 0.05, 0.025])
    >>> arts = plot_loglog(ax, h, h**2, xlabel="step $h$", ylabel="error", fit=True,
    ...                    guides={"slope 2": 2.0})
    >>> arts[1].get_label()
    'fit: slope 2.00'
    >>> plt.close(fig)
    """
    _check_ax(ax)
    x = _drawable(x, "x")
    y = _drawable(y, "y")
    if x.ndim != 1 or y.shape != x.shape or not np.all(x > 0):
        raise ValueError(
            f"`x` and `y` must be 1-D arrays of one shape, `x` positive; got shapes {x.shape} "
            f"and {y.shape}."
        )
    if x.size < 1:
        raise ValueError("`x` and `y` must have at least one point; got none.")
    if not isinstance(fit, bool):
        fit = check_real(fit, "fit")
    y = _log_drawable(np.where(y > 0, y, LOG_FLOOR), "y")
    _log_drawable(x, "x")
    curve_style: dict[str, Any] = {"marker": "o", "linestyle": "-"} | style
    if "ls" in style:
        curve_style.pop("linestyle")
    if yerr is not None:
        curve_style.setdefault("capsize", 3)
        bars = ax.errorbar(
            x,
            y,
            yerr=BAND_SE * _drawable(yerr, "yerr"),
            color=color,
            label=label,
            **curve_style,
        )
        artists: list[Line2D | ErrorbarContainer] = [bars]
        color = bars.lines[0].get_color()
    else:
        (line,) = ax.plot(x, y, color=color, label=label, **curve_style)
        artists, color = [line], line.get_color()
    if fit is not False:
        slope = _fit_slope(x, y) if fit is True else float(fit)
        intercept = np.mean(np.log(y) - slope * np.log(x))
        artists += ax.plot(
            x,
            np.exp(intercept) * x**slope,
            "-",
            color=color,
            alpha=0.6,
            lw=2.5,
            label=f"fit: slope {slope:.2f}",
        )
    if samples is not None:
        for row in np.atleast_2d(_drawable(samples, "samples")):
            artists += ax.plot(x, row, ".", color=color, alpha=0.3)
    for k, (name, slope) in enumerate((guides or {}).items()):
        artists += ax.plot(
            x, y[0] * (x / x[0]) ** slope, ":", color="0.3", dashes=(1 + k, 2), label=name
        )
    for name, value in (marks or {}).items():
        artists.append(ax.axvline(value, color="0.4", ls="--", lw=1, label=name))
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        _log_ticks(axis)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if any(not str(a.get_label()).startswith("_") for a in ax.get_lines()) or label or marks:
        ax.legend(fontsize="small")
    return artists


def plot_tikhonov(
    ax: Axes, sweep: TikhonovSweep, *, authors_norm_sq: float | None = None
) -> list[Line2D]:
    r"""Trained loss against the weight decay :math:`\varepsilon` (log-log), with the threshold
    :math:`\varepsilon\|\theta^*\|^2` and a reference line of slope one.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    sweep : TikhonovSweep
        From :func:`token_dynamics.interpolation.tikhonov_sweep`.
    authors_norm_sq : float, optional
        Also draw the threshold computed with this (the authors' code's) squared norm.

    Returns
    -------
    list of matplotlib.lines.Line2D
        The loss, the slope-one line through its first point, the threshold, and the authors'
        threshold if asked for.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.interpolation import tikhonov_dataset, tikhonov_sweep
    >>> from token_dynamics.plotting import plot_tikhonov
    >>> data = tikhonov_dataset(2, 4, 2, 2, rng=0)
    >>> sweep = tikhonov_sweep(data, [1e-1, 1e-2], epochs=100, rng=0)
    >>> fig, ax = plt.subplots()
    >>> [a.get_label() for a in plot_tikhonov(ax, sweep)][:2]
    ['trained loss', 'slope 1']
    >>> plt.close(fig)
    """
    fix = "Pass the result of `tikhonov_sweep`."
    sweep = check_attributes(sweep, ("eps", "loss", "threshold"), "sweep", fix)
    if authors_norm_sq is not None:
        authors_norm_sq = check_positive(authors_norm_sq, "authors_norm_sq")
    eps = np.asarray(sweep.eps, dtype=float)
    xlabel, ylabel = r"weight decay $\varepsilon$", "loss"
    artists = plot_loglog(
        ax,
        eps,
        sweep.loss,
        xlabel=xlabel,
        ylabel=ylabel,
        label="trained loss",
        guides={"slope 1": 1.0},
    )
    artists += plot_loglog(
        ax,
        eps,
        sweep.threshold,
        xlabel=xlabel,
        ylabel=ylabel,
        label=r"threshold $\varepsilon\|\theta^*\|^2$",
        marker="s",
        ls="--",
    )
    if authors_norm_sq is not None:
        artists += plot_loglog(
            ax,
            eps,
            eps * authors_norm_sq,
            xlabel=xlabel,
            ylabel=ylabel,
            label="threshold of the authors' code",
            marker="^",
            ls=":",
            color="C3",
        )
    return cast(list[Line2D], artists)  # without `yerr`, plot_loglog draws only Line2D


def plot_limit_grid(
    ax: Axes, error: DeepLimitError, *, grid_times: bool = False
) -> list[ErrorbarContainer]:
    r"""Mean error of the discrete model against the SDE, one line per width, against the
    depth ``L``, with bars of +-``BAND_SE`` standard errors over the paths (log-log).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    error : DeepLimitError
        From :func:`token_dynamics.stochastic.deep_limit_error`.
    grid_times : bool
        Plot the error at layer times (``error.grid``) instead of the sup over all times.

    Returns
    -------
    list of matplotlib.container.ErrorbarContainer
        One per width.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_limit_grid
    >>> from token_dynamics.stochastic import DeepLimitError
    >>> e = DeepLimitError(np.array([2.0, 4.0]), (None,), np.ones((3, 2, 1)),
    ...                    np.ones((3, 2, 1)), np.zeros((3, 2, 1)))
    >>> fig, ax = plt.subplots()
    >>> (bars,) = plot_limit_grid(ax, e)
    >>> bars.get_label()
    'm = inf'
    >>> plt.close(fig)
    """
    _check_ax(ax)
    fix = "Pass the result of `deep_limit_error`."
    error = check_attributes(error, ("sup", "grid", "widths", "depths"), "error", fix)
    grid_times = check_bool(grid_times, "grid_times")
    values = error.grid if grid_times else error.sup
    n = values.shape[0]
    bars = []
    for j, m in enumerate(error.widths):
        mean = values[:, :, j].mean(axis=0)
        se = values[:, :, j].std(axis=0, ddof=1) / np.sqrt(n)
        (curve, *_) = plot_loglog(
            ax,
            error.depths,
            mean,
            yerr=se,
            label="m = inf" if m is None else f"m = {m}",
            xlabel="depth $L$ (layers)",
            ylabel="sup error" if not grid_times else "error at layer times",
        )
        bars.append(cast(ErrorbarContainer, curve))  # with `yerr`, the curve is an errorbar
    depths = np.asarray(error.depths)
    ax.set_xticks(depths, [f"{L:g}" for L in depths])  # a few depths: label each one
    ax.xaxis.set_minor_formatter(NullFormatter())
    return bars
