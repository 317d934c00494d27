"""Covariance ellipses (ax in, artist out): the level set of a Gaussian, alone or over a
sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.patches import Ellipse

from ._clouds import _label_coordinates

__all__ = [
    "plot_covariance_ellipse",
    "plot_gaussian_cloud",
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
    _label_coordinates(ax)
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
