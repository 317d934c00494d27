"""Plotting helpers for the chapter on exact sequence interpolation (ax in, artist out).

Token sets of several sequences (one colour each, targets as rings), the phases of the
constructive interpolator, an animation through all its layers, the softmax error against the
temperature, block and parameter counts, and the Tikhonov scaling plot.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import check_int
from ._tokens import animate

__all__ = [
    "animate_layers",
    "layer_frames",
    "plot_count_check",
    "plot_counts",
    "plot_error_vs_tau",
    "plot_moves",
    "plot_phases",
    "plot_tikhonov",
    "plot_token_sets",
]


def _colour(j: int) -> str:
    return f"C{j % 10}"


def plot_token_sets(
    ax: Any,
    sequences: Sequence[Any],
    *,
    targets: Sequence[Any] | None = None,
    title: str | None = None,
    size: float = 30.0,
) -> list:
    """Scatter the tokens of each sequence (first two coordinates) in its own colour.

    Parameters
    ----------
    ax : matplotlib Axes
    sequences : list of array_like, shapes (n_j, d)
    targets : list of array_like, shapes (m_j, d), optional
        Drawn as rings of the same colour.
    title : str, optional
    size : float
        Marker size.

    Returns
    -------
    list of matplotlib artists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> len(plot_token_sets(ax, [np.zeros((2, 2)), np.ones((3, 2))], targets=[np.ones((1, 2))] * 2))
    4
    >>> plt.close(fig)
    """
    artists = []
    for j, Z in enumerate(sequences):
        Z = np.asarray(Z, dtype=float)
        artists.append(
            ax.scatter(Z[:, 0], Z[:, 1], s=size, color=_colour(j), alpha=0.8, label=f"$X^{j + 1}$")
        )
    for j, Z in enumerate(targets or []):
        Z = np.asarray(Z, dtype=float)
        artists.append(
            ax.scatter(
                Z[:, 0], Z[:, 1], s=3 * size, facecolors="none", edgecolors=_colour(j), lw=1.5
            )
        )
    ax.set_aspect("equal", adjustable="datalim")
    if title is not None:
        ax.set_title(title)
    return artists


def plot_phases(axes: Sequence[Any], interp: Any, *, targets: Sequence[Any] | None = None) -> list:
    """One panel per phase of a :class:`~token_dynamics.interpolation.HardmaxInterpolator`.

    Parameters
    ----------
    axes : sequence of matplotlib Axes
        As many as phases (five), or fewer to draw the first ones.
    interp : HardmaxInterpolator
    targets : list of arrays, optional
        Drawn as rings in the last panel.

    Returns
    -------
    list of lists of artists
    """
    titles = {
        "input": "input",
        "separated": "1. separated",
        "leaders": "2. leaders chosen",
        "collapsed": "3. collapsed",
        "interpolated": "4. interpolated",
    }
    out = []
    for ax, phase in zip(axes, interp.phases, strict=False):
        last = phase.name == "interpolated"
        out.append(
            plot_token_sets(
                ax,
                phase.sequences,
                targets=targets if last else None,
                title=f"{titles.get(phase.name, phase.name)} (layer {phase.n_layers})",
            )
        )
    return out


def layer_frames(states: Sequence[Sequence[Any]], *, substeps: int = 3) -> np.ndarray:
    """Stack the token sets of every layer into one array of frames, with ``substeps``
    straight-line frames between consecutive layers (the layers themselves are jumps).

    Parameters
    ----------
    states : list over layers of lists over sequences of arrays (n_j, d)
        For instance ``transformer.layer_states(inputs)``.
    substeps : int

    Returns
    -------
    ndarray, shape (1 + (len(states) - 1) * substeps, sum(n_j), d)

    Examples
    --------
    >>> layer_frames([[np.zeros((1, 2))], [np.ones((1, 2))]], substeps=2)[:, 0, 0].tolist()
    [0.0, 0.5, 1.0]
    """
    substeps = check_int(substeps, "substeps")
    stacked = np.array([np.vstack(s) for s in states])
    frames = [stacked[0]]
    for a, b in itertools.pairwise(stacked):
        for k in range(1, substeps + 1):
            frames.append(a + (b - a) * k / substeps)
    return np.array(frames)


def animate_layers(
    transformer: Any, inputs: Sequence[Any], *, substeps: int = 2, **kwargs: Any
) -> Any:
    """Self-contained HTML animation of the token sets through every layer of a network.

    Tokens keep the colour of their sequence. Extra keyword arguments go to
    :func:`token_dynamics.plotting.animate` (``max_frames``, ``dpi``, ``figsize``, ``title``).

    Returns
    -------
    AnimationHTML
    """
    states = transformer.layer_states(inputs)
    colours = [_colour(j) for j, Z in enumerate(states[0]) for _ in range(Z.shape[0])]
    frames = layer_frames([[Z[:, :2] for Z in s] for s in states], substeps=substeps)
    return animate(frames, color=colours, **kwargs)


def plot_error_vs_tau(
    ax: Any,
    taus: Any,
    errors: Any,
    *,
    tau_star: float | None = None,
    label: str | None = None,
    **kwargs: Any,
) -> list:
    """Log-log plot of an interpolation error against the softmax temperature, with an optional
    vertical line at the critical temperature.

    Returns
    -------
    list of matplotlib artists
    """
    errors = np.maximum(np.asarray(errors, dtype=float), 1e-17)  # log axes: clip exact zeros
    style = {"marker": "o", "linestyle": "-"} | kwargs  # a caller's `ls=` replaces the line
    if "ls" in kwargs:
        style.pop("linestyle")
    artists = list(ax.loglog(taus, errors, label=label, **style))
    if tau_star is not None:
        artists.append(ax.axvline(tau_star, color="0.4", ls="--", lw=1))
    ax.set_xlabel(r"temperature $\tau$")
    ax.set_ylabel("relative Hausdorff error")
    return artists


def plot_counts(
    ax: Any, n_values: Any, series: dict[str, Any], *, ylabel: str = "parameters"
) -> list:
    """Counts (blocks or parameters) against the input length, one line per model.

    Returns
    -------
    list of matplotlib artists
    """
    artists = []
    for name, values in series.items():
        artists.extend(ax.loglog(n_values, values, "o-", label=name))
    ax.set_xlabel("input length $n$")
    ax.set_ylabel(ylabel)
    ax.legend()
    return artists


def plot_tikhonov(ax: Any, sweep: Any, *, authors_norm_sq: float | None = None) -> list:
    """Minimal training loss against the weight decay ``eps`` (log-log), with the threshold
    ``eps |theta*|^2`` and a slope-one reference line.

    Parameters
    ----------
    ax : matplotlib Axes
    sweep : TikhonovSweep
    authors_norm_sq : float, optional
        Also draw the threshold computed with this (the authors' code's) squared norm.

    Returns
    -------
    list of matplotlib artists
    """
    eps, loss = np.asarray(sweep.eps), np.asarray(sweep.loss)
    artists = list(ax.loglog(eps, loss, "o-", label="trained loss"))
    artists += ax.loglog(
        eps, sweep.threshold, "s--", label=r"threshold $\varepsilon\|\theta^*\|^2$"
    )
    if authors_norm_sq is not None:
        artists += ax.loglog(
            eps, eps * authors_norm_sq, "^:", color="C3", label="threshold of the authors' code"
        )
    ref = loss[0] * eps / eps[0]
    artists += ax.loglog(eps, ref, ":", color="0.5", label="slope 1")
    ax.set_xlabel(r"weight decay $\varepsilon$")
    ax.set_ylabel("loss")
    ax.legend()
    return artists


def plot_moves(
    ax: Any, before: Any, after: Any, *, color: str = "C0", title: str | None = None
) -> list:
    """Tokens before a layer (dots), after it (crosses) and the jump between them (segments).

    Parameters
    ----------
    ax : matplotlib Axes
    before, after : array_like, shape (n, 2 or more)
        Only the first two coordinates are drawn.

    Returns
    -------
    list of matplotlib artists

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> len(plot_moves(ax, np.zeros((3, 2)), np.ones((3, 2))))
    3
    >>> plt.close(fig)
    """
    from matplotlib.collections import LineCollection

    B = np.asarray(before, dtype=float)[:, :2]
    A = np.asarray(after, dtype=float)[:, :2]
    segments = LineCollection(list(np.stack([B, A], axis=1)), colors="0.6", lw=0.8)
    artists = [
        ax.add_collection(segments),
        ax.scatter(B[:, 0], B[:, 1], s=20, color=color),
        ax.scatter(A[:, 0], A[:, 1], s=60, marker="x", color="k"),
    ]
    ax.set_aspect("equal", adjustable="datalim")
    ax.autoscale_view()
    if title is not None:
        ax.set_title(title)
    return artists


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
