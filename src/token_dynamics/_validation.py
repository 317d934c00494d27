"""Input validation shared by every public function (private module).

Each helper checks one argument once, at the public boundary, and raises a
``ValueError`` (or ``TypeError``) whose message names the argument in backticks
and says what would fix it. Every helper returns a *new* float64 array when it
converts, so callers may never mutate what the user passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import numpy as np

__all__ = [
    "as_matrix",
    "as_parameter",
    "as_rng",
    "as_sphere_tokens",
    "as_tokens",
    "as_vector",
    "as_weights",
    "check_int",
    "check_positive",
]

#: Tolerance on | ||x|| - 1 | for tokens that must lie on the unit sphere: a few hundred ulps
#: absorbs the rounding of a renormalisation step.
SPHERE_TOL = 1e-8
#: Tolerance on |sum(w) - 1| for probability weights given in float64.
WEIGHTS_TOL = 1e-9


def _finite_float_array(value: Any, name: str) -> np.ndarray:
    try:
        arr = np.array(value, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be a real array-like; got {type(value).__name__}.") from exc
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` contains NaN or infinite entries; pass finite values.")
    return arr


def as_tokens(X: Any, name: str = "X", *, d: int | None = None) -> np.ndarray:
    """Return tokens as a fresh float64 array of shape ``(n, d)``.

    Raises ``ValueError`` naming `name` if the array is not 2-D with at least one
    row and column, has the wrong number of columns, or is not finite.

    Examples
    --------
    >>> as_tokens([[0.0, 1.0], [2.0, 3.0]]).shape
    (2, 2)
    """
    arr = _finite_float_array(X, name)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(
            f"`{name}` must have shape (n, d) with one token per row; got shape {arr.shape}. "
            "Reshape a single token x to x[None, :]."
        )
    if d is not None and arr.shape[1] != d:
        raise ValueError(
            f"`{name}` must have d = {d} columns to match the parameters; got {arr.shape[1]}."
        )
    return arr


def as_sphere_tokens(X: Any, name: str = "X", *, tol: float = SPHERE_TOL) -> np.ndarray:
    """Return tokens of shape ``(n, d)`` that lie on the unit sphere (rows of norm one)."""
    arr = as_tokens(X, name)
    err = np.max(np.abs(np.linalg.norm(arr, axis=1) - 1.0))
    if err > tol:
        raise ValueError(
            f"`{name}` must lie on the unit sphere (every row of norm 1); the largest deviation is "
            f"{err:.3g}. Normalise with X / np.linalg.norm(X, axis=1, keepdims=True)."
        )
    return arr


def as_vector(x: Any, name: str, *, size: int | None = None) -> np.ndarray:
    """Return a finite 1-D float64 array (optionally of length `size`)."""
    arr = _finite_float_array(x, name)
    if arr.ndim != 1 or (size is not None and arr.shape[0] != size):
        want = f"({size},)" if size is not None else "(k,)"
        raise ValueError(f"`{name}` must have shape {want}; got shape {arr.shape}.")
    return arr


def as_matrix(
    M: Any, name: str, *, shape: tuple[int | None, int | None] | None = None
) -> np.ndarray:
    """Return a finite 2-D float64 array; ``None`` entries of `shape` are free."""
    arr = _finite_float_array(M, name)
    if arr.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D matrix; got shape {arr.shape}.")
    if shape is not None:
        for axis, want in enumerate(shape):
            if want is not None and arr.shape[axis] != want:
                want_str = "(" + ", ".join("k" if s is None else str(s) for s in shape) + ")"
                raise ValueError(f"`{name}` must have shape {want_str}; got shape {arr.shape}.")
    return arr


def as_weights(w: Any, n: int, name: str = "weights") -> np.ndarray:
    """Return probability weights of shape ``(n,)``: nonnegative, summing to one.

    ``None`` gives the uniform weights ``1/n`` of the empirical measure.
    """
    if w is None:
        return np.full(n, 1.0 / n)
    arr = as_vector(w, name, size=n)
    if np.any(arr < 0):
        raise ValueError(f"`{name}` must be nonnegative; the smallest entry is {arr.min():.3g}.")
    total = arr.sum()
    if abs(total - 1.0) > WEIGHTS_TOL:
        raise ValueError(f"`{name}` must sum to one; got {total!r}. Divide by its sum.")
    return arr


def as_parameter(
    P: Any, name: str, *, shape: tuple[int | None, int | None]
) -> Callable[[float], np.ndarray]:
    """Normalise a constant or time-dependent matrix parameter to a function of time.

    A constant is validated once; a callable ``t -> array`` is validated at each call.
    """
    if callable(P):

        def value(t: float) -> np.ndarray:
            return as_matrix(P(t), f"{name}(t={t:g})", shape=shape)

        return value
    const = as_matrix(P, name, shape=shape)
    const.setflags(write=False)
    return lambda t: const


def check_positive(value: Any, name: str, *, allow_zero: bool = False) -> float:
    """Return `value` as a float after checking it is finite and positive."""
    if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value):
        raise ValueError(f"`{name}` must be a finite real number; got {value!r}.")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "nonnegative" if allow_zero else "positive"
        raise ValueError(f"`{name}` must be {bound}; got {value!r}.")
    return float(value)


def check_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """Return `value` as an int after checking it is an integer >= `minimum`."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"`{name}` must be an integer; got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be at least {minimum}; got {value!r}.")
    return int(value)


def as_rng(rng: Any) -> np.random.Generator:
    """Normalise `rng` (a Generator, a seed, or None) through ``np.random.default_rng``."""
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"`rng` must be a numpy Generator, an integer seed or None; got {rng!r}."
        ) from exc
