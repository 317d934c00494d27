"""Argument checks shared by the drawing helpers: the axes, colours, colour maps, opacities and
marker sizes, indices of states, and data that matplotlib can draw (finite, real, and far enough
below the float64 limit that its margins and transforms do not overflow); and the tick labels of
their log axes (`_log_ticks`).
"""

from __future__ import annotations

from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

from .._typing import FloatArray
from .._validation import as_real_array, check_instance, check_positive, check_real

__all__ = ["MAX_DRAWABLE", "MAX_LOG_REACH"]

#: Largest magnitude of data drawn: matplotlib pads the data limits by a margin and maps them
#: to the canvas, which overflows float64 for data within a factor ~10 of its largest number.
#: A bound far below that and far above any quantity the book draws.
MAX_DRAWABLE = 1e300


def _drawable(value: object, name: str) -> FloatArray:
    """A fresh finite float64 array of real numbers no larger than :data:`MAX_DRAWABLE`."""
    arr = as_real_array(value, name)
    if arr.size and np.max(np.abs(arr)) > MAX_DRAWABLE:
        raise ValueError(
            f"`{name}` has entries of magnitude up to {np.max(np.abs(arr)):.3g}, beyond the "
            f"{MAX_DRAWABLE:g} that can be drawn; rescale it (e.g. divide by its maximum)."
        )
    return arr


def _check_ax(ax: object, name: str = "ax") -> Axes:
    """Return `ax` after checking it is a matplotlib Axes (a ``TypeError`` naming `name`)."""
    return check_instance(
        ax, Axes, name, "Pass a matplotlib Axes, e.g. from `fig, ax = plt.subplots()`."
    )


def _check_color(color: object, name: str = "color") -> Any:
    """Return `color` after checking matplotlib reads it as one colour."""
    from matplotlib.colors import is_color_like

    if isinstance(color, (int, float)) or not is_color_like(color):
        raise ValueError(
            f"`{name}` must be a matplotlib colour ('C0', 'k', '0.5', '#0072B2' or an (r, g, b) "
            f"tuple); got {color!r}."
        )
    return color


def _check_cmap(cmap: object, name: str = "cmap") -> str:
    """Return `cmap` after checking it names a registered matplotlib colour map."""
    if not isinstance(cmap, str) or cmap not in mpl.colormaps:
        raise ValueError(
            f"`{name}` must name a matplotlib colour map ('viridis', 'magma', ...; see "
            f"matplotlib.colormaps); got {cmap!r}."
        )
    return cmap


def _check_alpha(alpha: object, name: str = "alpha") -> float:
    """Return the opacity `alpha` after checking it is a number in [0, 1]."""
    value = check_real(alpha, name)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` is an opacity: pass a number in [0, 1]; got {alpha!r}.")
    return value


def _check_size(size: object, name: str = "size") -> float:
    """Return the marker area `size` after checking it is a finite number >= 0."""
    return check_positive(size, name, allow_zero=True)


def _check_indices(indices: object, T: int, name: str = "indices") -> list[int]:
    """Return `indices` as a list of ints, each a valid index of `T` states."""
    try:
        items = list(indices)  # type: ignore[call-overload]
    except TypeError:
        items = None
    if items is None or not all(
        isinstance(i, (int, np.integer)) and not isinstance(i, bool) and -T <= i < T for i in items
    ):
        raise ValueError(
            f"`{name}` must be a sequence of integer indices of the {T} states; got {indices!r}."
        )
    return [int(i) for i in items]


#: Reach of positive data on a logarithmic axis, in decades: the decade of its largest value
#: plus its span in decades. Matplotlib pads the limits by 5 % of the span and, on a small
#: axes, places its ticks up to about a span beyond them, which overflows float64 past decade
#: 308; data from 1e-100 to 1e100 (reach 300) still draws on a third of a figure, data from
#: 1e-324 to 1e100 (reach 524) does not.
MAX_LOG_REACH = 300.0


def _log_drawable(values: FloatArray, name: str) -> FloatArray:
    """Check the positive entries of `values` reach at most :data:`MAX_LOG_REACH` decades."""
    positive = values[values > 0]
    if positive.size:
        top, bottom = np.log10(positive.max()), np.log10(positive.min())
        if top + (top - bottom) > MAX_LOG_REACH:
            raise ValueError(
                f"`{name}` spans {positive.min():.3g} to {positive.max():.3g}; a logarithmic "
                f"axis draws data whose top decade plus its span in decades is at most "
                f"{MAX_LOG_REACH:g} (e.g. 1e-100 to 1e100): rescale it or drop the extremes."
            )
    return values


def _log_ticks(axis: Axis) -> None:
    """Tick labels of a log axis over the data it shows (with the axes sharing it) that never
    collide, placed here rather than by matplotlib's locators (whose choices differ between its
    releases: 3.8 falls back to linear ticks, every one labelled, where fewer than two of the
    asked ones are in view).

    Over two decades or more: powers of ten alone, as matplotlib puts them. Below: labels at 1, 2
    and 5 times the powers of ten where at least two of those lie among the values; under that
    (within a factor of 4 at most), at two to four round decimals, as on a linear axis. Labels
    are decimals ("0.02", "1.5", "500") from 1e-3 to 1e4 and powers of ten beyond; unlabelled
    minor ticks stay at matplotlib's places."""
    # everything the axes hold (an earlier call, a curve drawn by hand), and the axes that
    # share this axis (`sharey`), whose ticks are these
    ax = axis.axes
    name = "x" if axis is ax.xaxis else "y"
    shared = getattr(ax, f"get_shared_{name}_axes")().get_siblings(ax)
    v = np.concatenate([getattr(a, f"{name}axis").get_data_interval() for a in shared])
    v = v[np.isfinite(v) & (v > 0)]
    if not v.size:
        return
    low, high = float(v.min()), float(v.max())
    axis.set_minor_formatter(NullFormatter())
    if np.log10(high / low) >= 2 or high <= low * (1 + 1e-9):
        return
    # marks a decade beyond the values each way: those in view are drawn, and an axis shared
    # with panels of other values labels their marks too
    powers = 10.0 ** np.arange(np.floor(np.log10(low)) - 1, np.ceil(np.log10(high)) + 2)
    marks = np.sort(np.concatenate([powers, 2 * powers, 5 * powers]))
    inside = (marks >= low * (1 - 1e-9)) & (marks <= high * (1 + 1e-9))
    if np.count_nonzero(inside) < 2:
        step = np.diff(MaxNLocator(nbins=3, steps=[1, 2, 5, 10]).tick_values(low, high))[0]
        span = high - low
        first = max(np.ceil((low - 5 * span) / step), 1.0)
        marks = step * np.arange(first, np.floor((high + 5 * span) / step) + 1)
    axis.set_major_locator(FixedLocator(marks.tolist()))
    axis.set_major_formatter(FuncFormatter(_tick_label))


def _tick_label(x: float, _: object = None) -> str:
    """`x` as a decimal from 1e-3 to 1e4 ("0.35", "200"), in powers of ten beyond ("10^-5",
    "2.5×10^-7", in mathtext as matplotlib writes its log labels)."""
    if 1e-3 <= x < 1e4:
        return f"{x:.10g}"
    exponent = int(np.floor(np.log10(x) + 1e-9))
    mantissa = f"{x / 10.0**exponent:.10g}"
    text = f"10^{{{exponent}}}" if mantissa == "1" else f"{mantissa}\\times10^{{{exponent}}}"
    return f"$\\mathdefault{{{text}}}$"
