r"""The staircase of cluster counts: plateaus, the times they end, and how long they last."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._typing import ArrayLike, FloatArray, IntArray
from .._validation import as_real_array, as_times

__all__ = ["Staircase", "cluster_staircase"]


@dataclass(frozen=True)
class Staircase:
    r"""Plateaus of a cluster count along a run.

    Attributes
    ----------
    levels : ndarray of int, shape (k,)
        The successive cluster counts, in the order they appear.
    starts : ndarray, shape (k,)
        The first output time at each level.
    ends : ndarray, shape (k,)
        The first output time at the next level (the last output time for the last level,
        which is then still running: see `complete`).
    durations : ndarray, shape (k,)
        ``ends - starts``: the waiting time at each level, resolved to the output times.
    complete : ndarray of bool, shape (k,)
        Whether the level ended within the run.

    Examples
    --------
    Returned by :func:`cluster_staircase`:

    >>> from token_dynamics.clustering import cluster_staircase
    >>> cluster_staircase([0, 1, 2, 3], [3, 3, 2, 2]).levels.tolist()
    [3, 2]
    """

    levels: IntArray
    starts: FloatArray
    ends: FloatArray
    durations: FloatArray
    complete: np.ndarray


def cluster_staircase(times: ArrayLike, counts: ArrayLike) -> Staircase:
    r"""Cut a series of cluster counts into plateaus and measure how long each one lasts.

    A plateau is a maximal run of equal counts. Its duration is measured between the first
    output times of two consecutive levels, so it is known to within the spacing of `times`
    at each end: log-spaced times give a relative resolution, as the waiting times of
    metastable states grow exponentially.

    Parameters
    ----------
    times : array_like, shape (T,)
        Increasing output times.
    counts : array_like, shape (T,)
        Cluster counts at those times (integers).

    Returns
    -------
    Staircase

    Raises
    ------
    ValueError
        If the shapes differ or a count is not a nonnegative integer.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794 (metastability of clusters).

    Examples
    --------
    >>> from token_dynamics.clustering import cluster_staircase
    >>> s = cluster_staircase([0.0, 1.0, 2.0, 4.0, 8.0], [5, 3, 3, 3, 1])
    >>> s.levels.tolist(), s.durations.tolist(), s.complete.tolist()
    ([5, 3, 1], [1.0, 7.0, 0.0], [True, True, False])
    """
    times = as_times(times)
    c = as_real_array(counts, "counts")
    if c.shape != times.shape:
        raise ValueError(f"`counts` must have the shape of `times` {times.shape}; got {c.shape}.")
    if np.any(c < 0) or np.any(c != np.round(c)):
        raise ValueError("`counts` must be nonnegative integers.")
    c = c.astype(np.int64)
    change = np.flatnonzero(np.diff(c)) + 1
    first = np.concatenate([[0], change])
    starts = times[first]
    ends = np.append(times[change], times[-1])
    complete = np.append(np.ones(change.size, dtype=bool), False)
    return Staircase(c[first], starts, ends, ends - starts, complete)
