r"""Step doubling: the default step of the fixed-step methods, chosen to meet a tolerance.

A method of order :math:`p` run with steps :math:`h` has a global error
:math:`X_h - X = C h^p + O(h^{p+1})` at each output time, so two runs with steps :math:`h` and
:math:`h/2` estimate the error of the finer one (Richardson):

.. math::

    X_{h/2} - X \approx \frac{X_{h/2} - X_h}{2^p - 1} .

:func:`refine` halves every step until that estimate is within ``atol + rtol |x_i|`` for every
token :math:`x_i` (a row, in the Euclidean norm) at every output time, and has stopped growing
(so that it is read in the asymptotic range, not from two coarse runs that agree by chance).
The estimate is a global one: it includes the growth of the errors along the flow, which a
per-step control does not see. The run that misses the tolerance within
:data:`MAX_DEFAULT_STEPS` steps returns its finest run and says so. A run that fails (a
non-finite state) is a step too large while a finer one is affordable; at the finest
affordable step the failure is raised.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._linalg import power_of_two_scale

__all__ = ["MAX_DEFAULT_STEPS", "Refined", "refine"]

#: Most steps the default (``dt=None``) of a fixed-step method takes in its finest run: RK4 at
#: 4096 equal steps over a unit interval has a global error near 1e-14 C for a smooth field,
#: so a run that still misses its tolerance there is near a blow-up, stiff or non-smooth (a
#: near-hardmax softmax of huge tokens), not short of steps; the runs of the doubling sum to
#: twice the last, 8192 RK4 steps at most, seconds for a small cloud.
MAX_DEFAULT_STEPS = 2**12


@dataclass(frozen=True)
class Refined:
    """The finest run of a step doubling and its estimated error (private record)."""

    states: np.ndarray
    substeps: list[int]
    error: float
    met: bool


def refine(
    run: Callable[[list[int]], np.ndarray],
    substeps: list[int],
    order: int,
    rtol: float,
    atol: float,
) -> Refined:
    """Halve the steps of ``run`` until its Richardson estimate meets ``rtol``/``atol``.

    ``run(substeps)`` integrates with ``substeps[k]`` equal steps on the ``k``-th interval
    between output times and returns the states, shape ``(T, n, d)``; ``substeps`` is the
    coarsest split tried.
    """
    budget = max(MAX_DEFAULT_STEPS, 4 * sum(substeps))  # three runs at least
    coarse: np.ndarray | None = None
    previous = math.inf
    while True:
        finest = 2 * sum(substeps) > budget
        try:
            fine = run(substeps)
        except FloatingPointError:  # a step too large while finer steps are affordable
            if finest:
                raise
            coarse, previous = None, math.inf
            substeps = [2 * m for m in substeps]
            continue
        if coarse is not None:
            fine64 = fine.astype(np.float64)
            with np.errstate(over="ignore"):  # a coarse run far off: inf, never met
                diff = _row_norms(fine64 - coarse) / (2**order - 1)
                error = float(diff.max())
                met = bool(np.all(diff <= atol + rtol * _row_norms(fine64)))
            # ``previous`` finite: an estimate is accepted once it has not grown since the last
            # one, so never from the first comparison (two coarse runs that agree by chance: a
            # field sampled at the same zeros by one and two steps gave 0 for an error of 0.6)
            if (met and error <= previous < math.inf) or finest:
                return Refined(fine, substeps, error, met)
            previous = error
        elif finest:  # a failed run before this one: nothing to compare with
            return Refined(fine, substeps, math.inf, False)
        coarse = fine.astype(np.float64)
        substeps = [2 * m for m in substeps]


def _row_norms(Y: np.ndarray) -> np.ndarray:
    """Euclidean norms along the last axis, rescaled so that no square overflows."""
    scale = power_of_two_scale(Y, axis=-1)
    return scale[..., 0] * np.linalg.norm(Y / scale, axis=-1)
