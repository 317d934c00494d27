"""Plotting helpers for the chapter on the gradient-flow structure (ax in, artist out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._tokens import _plot_curves

__all__: list[str] = [
    "plot_circle_snapshots",
    "plot_energy_curves",
    "plot_energy_landscape",
    "plot_energy_staircase",
    "plot_flow_quantities",
    "plot_step_convergence",
    "plot_translation_profile",
]


def plot_energy_curves(
    ax: Any,
    times: Any,
    energies: Mapping[str, Any],
    *,
    relative: bool = True,
) -> list:
    """Draw several energy curves ``E(t)`` (or ``E(t) / E(0)`` if ``relative``), one per label.

    Parameters
    ----------
    ax : matplotlib Axes
    times : array_like, shape (T,)
    energies : mapping label -> array_like, shape (T,)
    relative : bool
        Divide each curve by its first value.

    Returns
    -------
    list of Line2D
    """
    curves = {label: np.asarray(E, dtype=float) for label, E in energies.items()}
    if relative:
        curves = {label: E / E[0] for label, E in curves.items()}
    return _plot_curves(
        ax,
        times,
        curves,
        xlabel="time $t$ (depth)",
        ylabel=r"$\mathcal{E}(t)/\mathcal{E}(0)$" if relative else r"$\mathcal{E}(t)$",
    )


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


def plot_energy_landscape(ax: Any, xs: Any, ys: Any, values: Any, *, levels: int = 20) -> Any:
    """Filled contour plot of an energy on the grid ``xs`` x ``ys`` (``values[j, i]``).

    Returns
    -------
    QuadContourSet
    """
    cs = ax.contourf(np.asarray(xs), np.asarray(ys), np.asarray(values), levels=levels)
    ax.figure.colorbar(cs, ax=ax)
    ax.set_aspect("equal")
    return cs


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


def plot_flow_quantities(
    ax: Any, times: Any, series: Mapping[str, Any], *, logy: bool = False
) -> list:
    """Draw named time series on one axis.

    Returns
    -------
    list of Line2D
    """
    return _plot_curves(ax, times, series, xlabel="time $t$", logy=logy)


def plot_circle_snapshots(
    ax: Any, states: Any, indices: Sequence[int], *, labels: Sequence[str] | None = None
) -> list:
    """Tokens on the circle at several times, drawn on concentric circles (inner = earliest).

    Parameters
    ----------
    states : array_like, shape (T, n, 2)
        Tokens on the unit circle.
    indices : sequence of int
        Which states to draw.
    labels : sequence of str, optional

    Returns
    -------
    list of PathCollection
    """
    X = np.asarray(states, dtype=float)
    arts = []
    phi = np.linspace(0, 2 * np.pi, 200)
    for k, i in enumerate(indices):
        r = 1.0 + 0.5 * k
        ax.plot(r * np.cos(phi), r * np.sin(phi), color="0.85", lw=0.8)
        lab = None if labels is None else labels[k]
        arts.append(ax.scatter(r * X[i, :, 0], r * X[i, :, 1], s=12, label=lab, zorder=3))
    ax.set_aspect("equal")
    ax.set_axis_off()
    if labels is not None:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return arts


def plot_step_convergence(
    ax: Any, steps: Any, errors: Any, *, order: float | None = None, label: str = "error"
) -> list:
    """Error against a step size on log-log axes, with a reference slope ``order`` if given.

    Parameters
    ----------
    steps, errors : array_like, shape (k,)
    order : float, optional
        Draw ``C h^order`` through the largest step.

    Returns
    -------
    list of Line2D
    """
    h = np.asarray(steps, dtype=float)
    e = np.asarray(errors, dtype=float)
    lines = ax.loglog(h, e, "o-", label=label)
    if order is not None:
        k = int(np.argmax(h))
        lines += ax.loglog(h, e[k] * (h / h[k]) ** order, "--", label=f"slope {order:g}")
    ax.set_xlabel("step $h$")
    ax.set_ylabel(label)
    ax.legend(fontsize="small")
    return lines
