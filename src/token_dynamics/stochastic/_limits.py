"""Monte-Carlo estimates and convergence studies of the scaling limits (private module)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..diagnostics import fit_power_law

__all__ = ["ConvergenceStudy", "MCEstimate"]


@dataclass(frozen=True)
class MCEstimate:
    """A Monte-Carlo mean with its standard error (``std / sqrt(samples)``).

    Attributes
    ----------
    mean, stderr : float or ndarray
    samples : int
        Number of independent samples averaged.

    Examples
    --------
    >>> MCEstimate(1.0, 0.1, 100).stderr
    0.1
    """

    mean: Any
    stderr: Any
    samples: int


def _estimate(values: np.ndarray) -> MCEstimate:
    """Mean over axis 0 of i.i.d. samples, with the standard error of that mean."""
    n = values.shape[0]
    std = values.std(axis=0, ddof=1) if n > 1 else np.zeros_like(values[0])
    return MCEstimate(values.mean(axis=0), std / np.sqrt(n), n)


@dataclass(frozen=True)
class ConvergenceStudy:
    """Monte-Carlo errors against a resolution, with the fitted log-log slope.

    Attributes
    ----------
    values : (k,) ndarray
        The resolutions (depths ``L``, widths ``m`` or token numbers ``N``).
    mean, stderr : (k,) ndarray
        Mean error at each resolution and its standard error over the paths.
    slope : float
        Least-squares slope of ``log mean`` against ``log values``.

    Examples
    --------
    >>> s = ConvergenceStudy(np.array([1.0, 2.0]), np.array([1.0, 0.5]), np.zeros(2), -1.0)
    >>> s.slope
    -1.0
    """

    values: np.ndarray
    mean: np.ndarray
    stderr: np.ndarray
    slope: float


def _study(values, errors: np.ndarray) -> ConvergenceStudy:
    values = np.asarray(values, dtype=np.float64)
    est = _estimate(errors)
    return ConvergenceStudy(values, est.mean, est.stderr, fit_power_law(values, est.mean).slope)
