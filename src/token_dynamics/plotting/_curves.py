"""Curves against time or a parameter (ax in, artist out): named quantities, the energy
staircase of metastable clusters, stability ratios, kernels and the dissipation function of
the noise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter
from matplotlib.typing import ColorType

from .._typing import ArrayLike, FloatArray
from .._validation import as_vector, check_attributes, check_bool, check_real
from ..stochastic import ACTIVATIONS, kappa
from ._checks import _check_ax, _check_color, _drawable, _log_drawable, _log_ticks

if TYPE_CHECKING:
    from ..gradient_flow import CircleMetastability
    from ..meanfield import StabilityBound, StabilityRun

__all__ = [
    "plot_curves",
    "plot_dissipation_function",
    "plot_energy_staircase",
    "plot_kernels",
    "plot_stability_ratios",
]


def _curve(values: object, name: str, size: int | None = None, *, gaps: bool = False) -> FloatArray:
    """A finite drawable vector (of length `size` when given, at least one point).

    With ``gaps=True`` entries of ``+inf`` (a documented infinite value: an infinite energy, a
    void bound) are accepted and returned as NaN, which matplotlib leaves out of the line; NaN
    and ``-inf`` are still refused.
    """
    off = None
    if gaps:
        try:
            raw = np.asarray(values)
        except (TypeError, ValueError):  # ragged: refused by name below
            raw = np.asarray(0.0)
        if raw.dtype.kind == "f" and np.any(raw == np.inf):
            off = raw == np.inf
            values = np.where(off, 0.0, raw)
    v = as_vector(_drawable(values, name), name, size=size)
    if v.size < 1:
        raise ValueError(f"`{name}` must have at least one point; got none.")
    if off is not None:
        v[off] = np.nan
    return v


def _labelled(value: object, name: str) -> Mapping[str, Any]:
    """Check `value` is a mapping from legend labels (str) to what is drawn under them."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"`{name}` must be a mapping from labels (str) to data; got {value!r}.")
    return value


def plot_curves(
    ax: Axes,
    x: ArrayLike,
    curves: Mapping[str, ArrayLike],
    *,
    xlabel: str,
    ylabel: str,
    relative: bool = False,
    logx: bool = False,
    logy: bool = False,
    styles: Mapping[str, Mapping[str, Any]] | None = None,
    legend: bool = True,
    **style: Any,
) -> list[Line2D]:
    """Several named quantities against one variable (time, depth, ``n``), one line each.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    x : array_like, shape (T,)
        The variable.
    curves : mapping label -> array_like, shape (T,)
        The legend entries and the values; an entry of ``+inf`` (an infinite energy, a void
        bound) is left out of its line, NaN and ``-inf`` are refused.
    xlabel, ylabel : str
        Axis labels, with the quantity and its unit.
    relative : bool
        Divide each curve by its first value (an energy ``E(t) / E(0)``).
    logx, logy : bool
        Logarithmic axes.
    styles : mapping label -> mapping, optional
        Style of one curve, over ``style`` (a reference curve dashed:
        ``{"parabola": {"linestyle": "--"}}``).
    legend : bool
        Draw the legend (``False`` when the caller draws one legend for several axes).
    **style
        Passed to ``ax.plot`` for every curve (``marker``, ``linestyle``, ``color``, ...).

    Returns
    -------
    list of matplotlib.lines.Line2D
        One line per curve, in the order of ``curves``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.plotting import plot_curves
    >>> fig, ax = plt.subplots()
    >>> t = np.linspace(0, 1, 5)
    >>> line, bound = plot_curves(ax, t, {"E": 2 * np.exp(-t), "bound": 2 * np.exp(-t / 2)},
    ...                           xlabel="time $t$", ylabel="energy", relative=True,
    ...                           styles={"bound": {"linestyle": "--"}})
    >>> float(line.get_ydata()[0]), bound.get_linestyle()
    (1.0, '--')
    >>> plt.close(fig)
    """
    _check_ax(ax)
    x = _curve(x, "x")
    relative, logx, logy, legend = (
        check_bool(flag, name)
        for flag, name in (
            (relative, "relative"),
            (logx, "logx"),
            (logy, "logy"),
            (legend, "legend"),
        )
    )
    styles = {} if styles is None else _labelled(styles, "styles")
    lines: list[Line2D] = []
    for label, values in _labelled(curves, "curves").items():
        v = _curve(values, f"curves[{label!r}]", size=len(x), gaps=True)
        if relative and not (np.isfinite(v[0]) and v[0] != 0):
            raise ValueError(
                f"`curves` entry {label!r} starts at {v[0]} and cannot be drawn relative to its "
                "first value; pass relative=False."
            )
        if logy:
            _log_drawable(v / v[0] if relative else v, "curves")
        own = dict(style) | dict((styles or {}).get(label, {}))
        lines += ax.plot(x, v / v[0] if relative else v, label=label, **own)
    if logx:
        _log_drawable(x, "x")
        ax.set_xscale("log")
        _log_ticks(ax.xaxis)
    if logy:
        ax.set_yscale("log")
        _log_ticks(ax.yaxis)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if legend:
        ax.legend(fontsize="small")
    return lines


def plot_kernels(
    ax: Axes,
    *,
    activations: Iterable[str] = ACTIVATIONS,
    d: int,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
) -> list[Line2D]:
    r"""Normalised noise kernels :math:`\kappa(t)/\kappa(1)` on ``[-1, 1]``, one per activation.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    activations : iterable of str
        Names of :data:`token_dynamics.stochastic.ACTIVATIONS` (all of them by default).
    d : int
        Dimension of token space.
    sigma_U, sigma_W : float
        Standard deviations of the biases of the random MLP.

    Returns
    -------
    list of matplotlib.lines.Line2D
        One line per activation.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.plotting import plot_kernels
    >>> fig, ax = plt.subplots()
    >>> (line,) = plot_kernels(ax, activations=["relu"], d=4)
    >>> float(line.get_ydata()[-1])  # kappa(1) / kappa(1)
    1.0
    >>> plt.close(fig)
    """
    _check_ax(ax)
    if isinstance(activations, str):
        raise TypeError(
            f"`activations` must be an iterable of activation names, e.g. ({activations!r},); "
            f"got the string {activations!r}."
        )
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


def plot_dissipation_function(
    ax: Axes,
    u: ArrayLike,
    F: ArrayLike,
    *,
    lambda_bar: float,
    rate: float,
    color: ColorType = "C0",
    label: str | None = None,
) -> Line2D:
    r"""Lemma 4.1's :math:`F` on :math:`[-1, 1]`, its limit :math:`-\bar\lambda` at 1 and its
    infimum :math:`-\bar\lambda'`.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    u : array_like, shape (k,)
        Points of :math:`[-1, 1]`.
    F : array_like, shape (k,)
        :math:`F(u)`.
    lambda_bar : float
        :math:`\bar\lambda`: the value :math:`-\bar\lambda` is marked at :math:`u = 1`.
    rate : float
        :math:`\bar\lambda'`: the level :math:`-\bar\lambda'` is drawn dotted.
    color : color
        Of the curve, its mark and its level.
    label : str, optional
        Legend entry of the curve.

    Returns
    -------
    matplotlib.lines.Line2D
        The curve of :math:`F`.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.plotting import plot_dissipation_function
    >>> fig, ax = plt.subplots()
    >>> line = plot_dissipation_function(ax, [-1, 1], [0.5, 0.9], lambda_bar=-0.9, rate=-0.5)
    >>> line.get_ydata().tolist()
    [0.5, 0.9]
    >>> plt.close(fig)
    """
    _check_ax(ax)
    u = _curve(u, "u")
    F = _curve(F, "F", size=len(u))
    lambda_bar = check_real(lambda_bar, "lambda_bar")
    rate = check_real(rate, "rate")
    color = _check_color(color)
    (line,) = ax.plot(u, F, color=color, label=label)
    ax.axhline(-rate, color=color, ls=":", lw=1)
    ax.plot([1.0], [-lambda_bar], "o", color=color, ms=4)
    ax.set_xlabel(r"$u = \langle x, y\rangle$")
    ax.set_ylabel(r"$F(u)$")
    return line


def plot_energy_staircase(
    ax: Axes, result: CircleMetastability, *, show_clusters: bool = True
) -> list[Line2D]:
    r"""The energy staircase of :func:`token_dynamics.gradient_flow.circle_metastability`.

    The energy :math:`E_\beta` is drawn against log time; the number of clusters (a step curve)
    on a twin axis if ``show_clusters``. The initial time ``0`` is left out of the log axis.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    result : CircleMetastability
        With ``times``, ``energies`` and ``cluster_counts`` of shape ``(T,)``.
    show_clusters : bool
        Draw the number of clusters on a twin axis.

    Returns
    -------
    list of matplotlib.lines.Line2D
        The energy, then the cluster count if drawn.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.gradient_flow import circle_metastability
    >>> from token_dynamics.plotting import plot_energy_staircase
    >>> result = circle_metastability(4.0, 8, 10.0, n_times=5, rng=0)
    >>> fig, ax = plt.subplots()
    >>> len(plot_energy_staircase(ax, result))
    2
    >>> plt.close(fig)
    """
    _check_ax(ax)
    fix = "Pass the result of `circle_metastability`."
    result = check_attributes(result, ("times", "energies", "cluster_counts"), "result", fix)
    show_clusters = check_bool(show_clusters, "show_clusters")
    t, E = result.times[1:], result.energies[1:]
    lines = ax.semilogx(t, E, color="C0", label=r"energy $E_\beta$")
    ax.set_xlabel("time $t$ (log scale)")
    ax.set_ylabel(r"$E_\beta$", color="C0")
    if show_clusters:
        twin = ax.twinx()
        lines += twin.step(t, result.cluster_counts[1:], where="post", color="C3", label="clusters")
        twin.set_yscale("log")
        # counts read as whole numbers (1, 2, 5, 10, 20, 50), not as powers of ten
        twin.yaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
        twin.yaxis.set_major_formatter(StrMethodFormatter("{x:.0f}"))
        twin.yaxis.set_minor_formatter(NullFormatter())
        twin.set_ylabel("number of clusters", color="C3")
    return lines


def plot_stability_ratios(
    ax: Axes,
    runs: Mapping[str, StabilityRun],
    *,
    bound: StabilityBound | None = None,
    yscale: str = "linear",
) -> list[Line2D]:
    r"""Measured ratios :math:`W_2(\mu_t, \nu_t)/W_2(\mu_0, \nu_0)` of several runs, as
    logarithms, and optionally the Gronwall bound :math:`\log C(t, R_0)`.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2D axes.
    runs : mapping label -> StabilityRun
        From :func:`token_dynamics.meanfield.stability_ratios`.
    bound : StabilityBound, optional
        From :func:`token_dynamics.meanfield.stability_constant`; drawn as :math:`\log C(t)`.
    yscale : str
        Matplotlib scale of the y axis; ``"symlog"`` shows a bound many decades above the data.

    Returns
    -------
    list of matplotlib.lines.Line2D
        One line per run, then the bound if given.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from token_dynamics.meanfield import StabilityRun
    >>> from token_dynamics.plotting import plot_stability_ratios
    >>> t = np.array([0.0, 1.0])
    >>> run = StabilityRun(t, np.array([0.2, 0.2 * np.e]), np.array([1.0, np.e]))
    >>> fig, ax = plt.subplots()
    >>> (line,) = plot_stability_ratios(ax, {"two clouds": run})
    >>> line.get_ydata().round(12).tolist()  # log W(t) / W(0)
    [0.0, 1.0]
    >>> plt.close(fig)
    """
    from matplotlib.scale import get_scale_names

    _check_ax(ax)
    fix = "Pass the results of `stability_ratios`."
    runs = {
        label: check_attributes(run, ("times", "ratio"), f"runs[{label!r}]", fix)
        for label, run in _labelled(runs, "runs").items()
    }
    if bound is not None:
        fix = "Pass the result of `stability_constant`, or None."
        bound = check_attributes(bound, ("times", "log_constant"), "bound", fix)
    if yscale not in get_scale_names():
        raise ValueError(f"`yscale` must be one of {get_scale_names()}; got {yscale!r}.")
    lines: list[Line2D] = []
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
