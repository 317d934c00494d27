"""The library's type aliases, in one place: what an argument accepts and what a result holds.

A public function takes array inputs as :data:`ArrayLike` (anything ``np.asarray`` reads: a
list, a tuple, an array) and returns :data:`FloatArray` (float64, the shape in its docstring);
``rng`` is :data:`SeedLike` (what ``np.random.default_rng`` accepts). ``Any`` is left for what
has no better type: a matplotlib 3D axes (``mpl_toolkits`` is untyped), a value that a checker
receives precisely in order to find out what it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

__all__ = [
    "ArrayLike",
    "DTypeLike",
    "FloatArray",
    "IVPMethod",
    "IntArray",
    "ParameterLike",
    "SeedLike",
]

#: A float64 array (tokens ``(n, d)``, trajectories ``(T, n, d)``, times ``(T,)``, ...).
FloatArray: TypeAlias = NDArray[np.float64]
#: An integer array (indices, labels, counts).
IntArray: TypeAlias = NDArray[np.intp]
#: What ``rng=`` accepts: a Generator, a seed (int or SeedSequence) or None (fresh entropy).
SeedLike: TypeAlias = np.random.Generator | np.random.SeedSequence | int | None
#: The names of :func:`scipy.integrate.solve_ivp`'s methods (``integrators.IVP_METHODS``).
IVPMethod: TypeAlias = Literal["DOP853", "RK45", "RK23", "Radau", "BDF", "LSODA"]
#: An attention parameter as given (``A``, ``V``, ``W``, ...): a constant matrix, or a callable
#: ``t -> matrix`` for time-dependent parameters.
ParameterLike: TypeAlias = ArrayLike | Callable[[float], ArrayLike]
