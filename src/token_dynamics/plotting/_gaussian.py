"""Plotting helpers for the chapter on Gaussian preservation (ax in, artist out)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.patches import Circle, Ellipse

from ..gaussian import cone_coordinates

__all__ = [
    "plot_cone_trajectories",
    "plot_covariance_ellipse",
    "plot_disk_trajectories",
    "plot_gaussian_cloud",
    "plot_growth",
    "plot_moment_error_vs_n",
    "plot_rank_histogram",
]


def plot_covariance_ellipse(ax, mean: Any, cov: Any, *, n_std: float = 2.0, **kwargs) -> Ellipse:
    """Draw the ``n_std`` level set of ``N(mean, cov)`` (2-D) on ``ax``; returns the patch."""
    mean = np.asarray(mean, dtype=float)
    lam, U = np.linalg.eigh(0.5 * (np.asarray(cov, float) + np.asarray(cov, float).T))
    lam = np.clip(lam, 0.0, None)
    angle = np.degrees(np.arctan2(U[1, 1], U[0, 1]))
    kwargs.setdefault("fill", False)
    kwargs.setdefault("lw", 1.5)
    patch = Ellipse(
        mean, 2 * n_std * np.sqrt(lam[1]), 2 * n_std * np.sqrt(lam[0]), angle=angle, **kwargs
    )
    ax.add_patch(patch)
    return patch


def plot_gaussian_cloud(
    ax,
    X: Any,
    mean: Any,
    cov: Any,
    *,
    color: str = "C0",
    n_std: float = 2.0,
    s: float = 3.0,
    label: str | None = None,
):
    """Scatter the tokens ``X`` (n, 2) with the ODE's ``n_std`` ellipse on top.

    Returns ``(scatter, ellipse)``.
    """
    X = np.asarray(X, dtype=float)
    pts = ax.scatter(X[:, 0], X[:, 1], s=s, color=color, alpha=0.35, lw=0, label=label)
    ell = plot_covariance_ellipse(ax, mean, cov, n_std=n_std, color=color)
    ax.plot(*np.asarray(mean, float), marker="+", color=color, ms=8)
    ax.set_aspect("equal")
    return pts, ell


def plot_disk_trajectories(ax, solutions: Sequence[Any], *, color: str = "C0", lw: float = 1.0):
    r"""Covariance trajectories in the cross-section of the PSD cone.

    Each 2x2 covariance is drawn at :math:`((a-b), 2c)/(a+b)`: the shape of the ellipse,
    forgetting its size. The unit circle is the rank-one boundary. Blown-up runs end with a
    cross, the others with a dot. Returns the list of line artists.
    """
    ax.add_patch(Circle((0, 0), 1.0, fill=False, color="0.5", lw=0.8))
    lines = []
    for sol in solutions:
        P = cone_coordinates(sol.covariances)
        xy = P[:, :2] / np.where(P[:, 2:] > 0, P[:, 2:], 1.0)
        (line,) = ax.plot(xy[:, 0], xy[:, 1], color=color, lw=lw, alpha=0.8)
        ax.plot(*xy[-1], marker="x" if sol.blew_up else "o", ms=3, color=color)
        lines.append(line)
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_aspect("equal")
    ax.set_xlabel(r"$(a-b)/(a+b)$")
    ax.set_ylabel(r"$2c/(a+b)$")
    return lines


def plot_cone_trajectories(
    ax, solutions: Sequence[Any], *, color: str = "C0", height: float | None = None
):
    """Covariance trajectories in the PSD cone ``(a - b, 2c, a + b)`` on a 3-D ``ax``.

    The cone's surface (rank one) is drawn as a wireframe up to ``height`` (default: the
    largest trace reached, capped at 3). Returns the list of line artists.
    """
    pts = [cone_coordinates(sol.covariances) for sol in solutions]
    top = height if height is not None else min(3.0, max(float(p[:, 2].max()) for p in pts))
    th, z = np.meshgrid(np.linspace(0, 2 * np.pi, 40), np.linspace(0, top, 8))
    ax.plot_wireframe(z * np.cos(th), z * np.sin(th), z, color="0.7", lw=0.4)
    lines = []
    for p in pts:
        keep = p[:, 2] <= top * 1.05
        (line,) = ax.plot(p[keep, 0], p[keep, 1], p[keep, 2], color=color, lw=1.0)
        lines.append(line)
    ax.set_xlabel("a - b")
    ax.set_ylabel("2c")
    ax.set_zlabel("a + b")
    return lines


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


def plot_moment_error_vs_n(ax, ns: Any, errors: Any, *, label: str | None = None):
    """Log-log plot of an error against the number of tokens, with an ``n^-1/2`` guide."""
    ns, errors = np.asarray(ns, float), np.asarray(errors, float)
    (line,) = ax.loglog(ns, errors, "o-", label=label)
    ref = errors[0] * np.sqrt(ns[0] / ns)
    ax.loglog(ns, ref, "k--", lw=0.8, label=r"$n^{-1/2}$" if label is None else None)
    ax.set_xlabel("n")
    ax.set_ylabel("error")
    return line
