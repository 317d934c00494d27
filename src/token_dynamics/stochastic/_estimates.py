r"""Monte-Carlo means with their standard errors, and convergence studies (private module)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._linalg import power_of_two_scale
from .._typing import ArrayLike, FloatArray
from .._validation import as_real_array
from ..diagnostics import fit_power_law

__all__ = ["ConvergenceStudy", "MCEstimate", "mc_estimate"]


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
    >>> from token_dynamics.stochastic import MCEstimate
    >>> MCEstimate(1.0, 0.1, 100).stderr
    0.1
    """

    mean: float | FloatArray
    stderr: float | FloatArray
    samples: int


def mc_estimate(values: ArrayLike) -> MCEstimate:
    r"""Mean over axis 0 of i.i.d. samples (e.g. one per path), with its standard error.

    Parameters
    ----------
    values : (n, ...) array_like
        ``n >= 2`` independent samples.

    Returns
    -------
    MCEstimate
        ``mean`` and ``stderr`` of shape ``(...)``.

    .. math:: \bar v = \frac1n\sum_{k=1}^n v_k,\qquad
              \mathrm{SE} = \Big(\frac1{n(n-1)}\sum_{k=1}^n (v_k - \bar v)^2\Big)^{1/2}.

    The samples are divided by a power of two before squaring (exactly), so that neither the mean
    nor the standard error overflows where it is representable.

    Raises
    ------
    ValueError
        If `values` is not a finite real array with at least two samples along axis 0.
    TypeError
        If `values` holds complex numbers, booleans or strings.

    Examples
    --------
    >>> from token_dynamics.stochastic import mc_estimate
    >>> est = mc_estimate([1.0, 2.0, 3.0])
    >>> float(est.mean), round(float(est.stderr), 4)
    (2.0, 0.5774)
    """
    values = as_real_array(values, "values")
    if values.ndim == 0 or values.shape[0] < 2:
        raise ValueError("`values` needs at least two samples along its first axis.")
    return _estimate(values)


def _estimate(values: np.ndarray) -> MCEstimate:
    """Mean over axis 0 of i.i.d. samples, with the standard error of that mean."""
    n = values.shape[0]
    # divided by a power of two (exact) so that the squares of the deviations cannot overflow
    scale = power_of_two_scale(values, axis=0)[0]
    scaled = values / scale
    std = scaled.std(axis=0, ddof=1) if n > 1 else np.zeros_like(scaled[0])
    with float_guard("the Monte-Carlo mean", "rescale `values`"):
        return MCEstimate(scale * scaled.mean(axis=0), scale * (std / np.sqrt(n)), n)


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
    >>> import numpy as np
    >>> from token_dynamics.stochastic import ConvergenceStudy
    >>> s = ConvergenceStudy(np.array([1.0, 2.0]), np.array([1.0, 0.5]), np.zeros(2), -1.0)
    >>> s.slope
    -1.0
    """

    values: np.ndarray
    mean: np.ndarray
    stderr: np.ndarray
    slope: float


def _study(values: ArrayLike, errors: np.ndarray) -> ConvergenceStudy:
    x = np.asarray(values, dtype=np.float64)
    est = _estimate(errors)
    mean, stderr = np.asarray(est.mean), np.asarray(est.stderr)
    return ConvergenceStudy(x, mean, stderr, fit_power_law(x, mean).slope)
