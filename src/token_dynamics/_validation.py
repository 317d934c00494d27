"""Input validation shared by every public function (private module, the ground floor).

Each helper checks one argument once, at the public boundary, and raises a
``ValueError`` (or ``TypeError``) whose message names the argument in backticks
and says what would fix it. Every helper returns a *new* float64 array when it
converts, so callers may never mutate what the user passed in.

One checker per kind of argument: real arrays (:func:`as_real_array`, :func:`as_vector`,
:func:`as_matrix`, :func:`as_tokens`), times (:func:`as_times`), square, symmetric and
covariance matrices with one tolerance policy (:data:`MATRIX_RTOL`), probability weights
(:func:`as_weights`), objects of the library (:func:`check_instance`) and random generators
(:func:`as_rng`); a time in a message is printed by :func:`time_text`. A chapter package uses
these and never re-makes them.

The numerical half of the failure policy (the float guard) and the progress bars of long
computations live in :mod:`token_dynamics._guards`.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from types import ModuleType
from typing import Any, TypeVar

import numpy as np
from numpy.typing import DTypeLike

from ._backend import all_finite, float_dtype, is_numpy, namespace, to_numpy
from ._typing import FloatArray, ParameterLike, SeedLike

_T = TypeVar("_T")

__all__ = [
    "MATRIX_RTOL",
    "as_counts",
    "as_covariance",
    "as_dtype",
    "as_matrix",
    "as_parameter",
    "as_real_array",
    "as_rng",
    "as_sphere_tokens",
    "as_square",
    "as_symmetric",
    "as_times",
    "as_tokens",
    "as_tokens_xp",
    "as_vector",
    "as_weights",
    "check_attributes",
    "check_bool",
    "check_instance",
    "check_int",
    "check_positive",
    "check_real",
    "check_rtol",
    "sphere_tol",
    "time_text",
]

#: Tolerance on | ||x|| - 1 | for tokens that must lie on the unit sphere: a few hundred ulps
#: absorbs the rounding of a renormalisation step.
SPHERE_TOL = 1e-8
#: Tolerance on |sum(w) - 1| for probability weights given in float64.
WEIGHTS_TOL = 1e-9
#: The one tolerance policy for symmetric and covariance matrices: ``|M - M^T|`` and a negative
#: eigenvalue may reach ``MATRIX_RTOL`` times ``max|M|`` (the matrix's own scale, so the test is
#: unchanged by rescaling). A few hundred thousand ulps of float64: it absorbs the rounding of
#: products such as ``L @ L.T``, ``X.T @ X`` or ``V @ inv(A)`` and of an eigen-decomposition,
#: while a genuinely indefinite or asymmetric matrix is off by far more.
MATRIX_RTOL = 1e-10
#: Array kinds read as real numbers: signed and unsigned integers and floats. Booleans, complex
#: numbers, strings and Python objects are refused instead of being coerced silently.
_REAL_KINDS = "iuf"


def as_real_array(
    value: object, name: str, *, neg_inf: bool = False, nonnegative: bool = False
) -> FloatArray:
    """Return a fresh, finite float64 array of any shape, from real numbers only.

    Raises ``TypeError`` naming `name` for complex, boolean, string or object input (which
    numpy would coerce, dropping an imaginary part or reading ``True`` as 1), and
    ``ValueError`` for NaN or infinite entries. With ``neg_inf=True`` entries of ``-inf`` are
    kept (logarithms: ``log 0``, a masked score); NaN and ``+inf`` are still refused. With
    ``nonnegative=True`` negative entries are refused (radii, whose sign a square would hide).

    Examples
    --------
    >>> as_real_array([1, 2.5], "x")
    array([1. , 2.5])
    >>> as_real_array([1 + 2j], "x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: `x` must be a real array-like; got an array of complex numbers. ...
    """
    if getattr(value, "requires_grad", False) is True:  # a torch tensor in an autograd graph
        raise TypeError(
            f"`{name}` requires grad, but it is read as numbers on the host and no gradient "
            f"would reach it; pass `{name}.detach()` (gradients flow through the tokens only)."
        )
    try:
        raw = np.asarray(value) if is_numpy(value) else to_numpy(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"`{name}` must be a real array-like (nested lists of equal length, or an ndarray); "
            f"got {type(value).__name__}."
        ) from exc
    if raw.dtype.kind not in _REAL_KINDS:
        what = {"b": "booleans", "c": "complex numbers", "U": "strings", "S": "bytes"}.get(
            raw.dtype.kind, "Python objects (ragged lists or non-numbers)"
        )
        fix = (
            " Pass its real part (np.real(x)) if that is what you mean."
            if raw.dtype.kind == "c"
            else " Pass an array of floats, e.g. np.asarray(x, dtype=float)."
        )
        raise TypeError(f"`{name}` must be a real array-like; got an array of {what}.{fix}")
    arr = np.array(raw, dtype=np.float64, copy=True)
    if neg_inf:
        if np.any(np.isnan(arr) | (arr == np.inf)):
            raise ValueError(
                f"`{name}` contains NaN or +inf entries; pass finite values (or -inf, the "
                "logarithm of a zero weight)."
            )
    elif not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` contains NaN or infinite entries; pass finite values.")
    if nonnegative and np.any(arr < 0):
        raise ValueError(f"`{name}` must be nonnegative; got {float(arr[arr < 0].flat[0])!r}.")
    return arr


def as_tokens(X: object, name: str = "X", *, d: int | None = None) -> FloatArray:
    """Return tokens as a fresh float64 array of shape ``(n, d)``.

    Raises ``ValueError`` naming `name` if the array is not 2-D with at least one
    row and column, has the wrong number of columns, or is not finite.

    Examples
    --------
    >>> as_tokens([[0.0, 1.0], [2.0, 3.0]]).shape
    (2, 2)
    """
    arr = as_real_array(X, name)
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


def as_tokens_xp(X: Any, name: str = "X", dtype: object | None = None) -> tuple[ModuleType, Any]:
    """Tokens of another array library (torch, JAX, CuPy): their array-API namespace and the
    tokens in the computing dtype (``_backend.float_dtype``: float32 stays float32), on their
    device. ``X`` itself is never modified (the cast may return it unchanged).

    Raises ``ValueError`` naming `name` if ``X`` is not 2-D with at least one row and column or
    is not finite, and ``TypeError`` if it does not hold real numbers: the checks of
    :func:`as_tokens`, made in the array's namespace (one reduction read on the host).
    """
    xp = namespace(X)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(
            f"`{name}` must be a non-empty array of shape (n, d), one token per row; got shape "
            f"{tuple(X.shape)}. Reshape a single token x to x[None, :]."
        )
    if not xp.isdtype(X.dtype, ("real floating", "integral")):
        raise TypeError(f"`{name}` must hold real numbers; got dtype {X.dtype}.")
    Xc = xp.astype(X, float_dtype(xp, X, dtype), copy=False)
    if not all_finite(xp, Xc):
        raise ValueError(f"`{name}` must be finite; remove the NaN or inf entries.")
    return xp, Xc


def sphere_tol(d: int, float32: bool) -> float:
    """The tolerance on ``| |x| - 1 |`` of tokens in dimension ``d``: :data:`SPHERE_TOL`, or
    ``d eps_32`` for tokens normalised in float32 (a row normalised in float32 has a norm within
    about ``d / 2`` round-offs of one: 6e-8 at d = 3, which float64's tolerance refused)."""
    return max(SPHERE_TOL, d * float(np.finfo(np.float32).eps)) if float32 else SPHERE_TOL


def as_sphere_tokens(
    X: object, name: str = "X", *, tol: float | None = None, batched: bool = False
) -> FloatArray:
    """Return tokens of shape ``(n, d)`` (``(..., n, d)`` if `batched`) on the unit sphere, to
    ``tol`` (by default :func:`sphere_tol` of the tokens' dtype)."""
    if batched:
        arr = as_real_array(X, name)
        if arr.ndim < 2 or arr.shape[-2] < 1 or arr.shape[-1] < 1:
            raise ValueError(
                f"`{name}` must have shape (..., n, d) with one token per row; got {arr.shape}."
            )
    else:
        arr = as_tokens(X, name)
    if tol is None:
        tol = sphere_tol(arr.shape[-1], getattr(X, "dtype", None) == np.float32)
    with np.errstate(over="ignore"):  # a row too long for its squared norm is far off the sphere
        err = np.max(np.abs(np.linalg.norm(arr, axis=-1) - 1.0), initial=0.0)
    if err > tol:
        raise ValueError(
            f"`{name}` must lie on the unit sphere (every row of norm 1); the largest deviation is "
            f"{err:.3g}. Normalise with X / np.linalg.norm(X, axis=1, keepdims=True)."
        )
    return arr


def as_vector(x: object, name: str, *, size: int | None = None) -> FloatArray:
    """Return a finite 1-D float64 array (optionally of length `size`)."""
    arr = as_real_array(x, name)
    if arr.ndim != 1 or (size is not None and arr.shape[0] != size):
        want = f"({size},)" if size is not None else "(k,)"
        raise ValueError(f"`{name}` must have shape {want}; got shape {arr.shape}.")
    return arr


def as_matrix(
    M: object, name: str, *, shape: tuple[int | None, int | None] | None = None
) -> FloatArray:
    """Return a finite 2-D float64 array; ``None`` entries of `shape` are free."""
    arr = as_real_array(M, name)
    if arr.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D matrix; got shape {arr.shape}.")
    if shape is not None:
        for axis, want in enumerate(shape):
            if want is not None and arr.shape[axis] != want:
                want_str = "(" + ", ".join("k" if s is None else str(s) for s in shape) + ")"
                raise ValueError(f"`{name}` must have shape {want_str}; got shape {arr.shape}.")
    return arr


def as_times(
    times: object,
    name: str = "times",
    *,
    strict: bool = True,
    nonnegative: bool = False,
    scalar: bool = False,
) -> FloatArray:
    """Return times as a fresh 1-D float64 array of at least one entry, in increasing order.

    ``strict=True`` asks for strictly increasing times (output times of a solver),
    ``strict=False`` for nondecreasing ones; ``nonnegative=True`` refuses negative times;
    ``scalar=True`` reads a single number as ``[t]``.

    Examples
    --------
    >>> as_times([0.0, 0.5, 2.0])
    array([0. , 0.5, 2. ])
    >>> as_times(3.0, scalar=True)
    array([3.])
    """
    arr = as_real_array(times, name)
    if scalar:
        arr = np.atleast_1d(arr)
    order = "strictly increasing" if strict else "nondecreasing"
    steps = np.diff(arr) if arr.ndim == 1 else None
    bad = steps is None or arr.size < 1 or (np.any(steps <= 0) if strict else np.any(steps < 0))
    if bad or (nonnegative and arr[0] < 0):
        sign = "nonnegative and " if nonnegative else ""
        raise ValueError(
            f"`{name}` must be {sign}a non-empty {order} 1-D array of times; got "
            f"{np.array2string(arr, threshold=6)}. Pass e.g. np.linspace(0, T, 50)."
        )
    return arr


def as_square(M: object, name: str, *, d: int | None = None) -> FloatArray:
    """Return a finite square ``(d, d)`` float64 matrix (any ``d`` when `d` is None).

    Examples
    --------
    >>> as_square([[1, 2], [3, 4]], "A").shape
    (2, 2)
    """
    arr = as_matrix(M, name, shape=(d, d))
    if arr.shape[0] != arr.shape[1]:
        raise ValueError(f"`{name}` must be a square (d, d) matrix; got shape {arr.shape}.")
    return arr


def _scale(M: FloatArray) -> float:
    return float(np.max(np.abs(M))) if M.size else 0.0


def as_symmetric(
    M: object, name: str, *, d: int | None = None, what: str = "symmetric"
) -> FloatArray:
    """Return the symmetric part of a square matrix that is symmetric up to :data:`MATRIX_RTOL`.

    `what` words the requirement in the error (``"`A` must be <what>; ..."``).

    Examples
    --------
    >>> as_symmetric([[1.0, 2.0], [2.0, 1.0]], "A")
    array([[1., 2.],
           [2., 1.]])
    """
    S = as_square(M, name, d=d)
    gap = float(np.max(np.abs(S - S.T)))
    if gap > MATRIX_RTOL * _scale(S):
        raise ValueError(
            f"`{name}` must be {what}; max |{name} - {name}^T| = {gap:.3g}. "
            f"Pass ({name} + {name}.T) / 2 if the antisymmetric part is rounding."
        )
    return 0.5 * S + 0.5 * S.T  # halves first: no overflow near the largest float


def as_covariance(cov: object, name: str = "cov", *, d: int | None = None) -> FloatArray:
    """Return a symmetric positive semidefinite ``(d, d)`` float64 matrix or raise ValueError.

    Symmetry and the sign of the smallest eigenvalue are judged with the one tolerance
    :data:`MATRIX_RTOL` relative to ``max |cov|``; degenerate covariances (a Dirac, rank one)
    are accepted.

    Examples
    --------
    >>> as_covariance([[1.0, 0.0], [0.0, 0.0]])
    array([[1., 0.],
           [0., 0.]])
    """
    S = as_symmetric(cov, name, d=d)
    lam_min = float(np.linalg.eigvalsh(S)[0])
    if lam_min < -MATRIX_RTOL * _scale(S):
        raise ValueError(
            f"`{name}` must be positive semi-definite; its smallest eigenvalue is {lam_min:.3g}. "
            "Build a positive semidefinite matrix as L @ L.T."
        )
    return S


def as_weights(w: object, n: int, name: str = "weights") -> FloatArray:
    """Return probability weights of shape ``(n,)``: nonnegative, summing to one.

    ``None`` gives the uniform weights ``1/n`` of the empirical measure.
    """
    if w is None:
        return np.full(n, 1.0 / n)
    arr = as_vector(w, name, size=n)
    if np.any(arr < 0):
        raise ValueError(f"`{name}` must be nonnegative; the smallest entry is {arr.min():.3g}.")
    total = arr.sum()
    # weights given in a shorter float (float32 tensors, JAX's default) sum to one only up to
    # their rounding, about n eps of their type: accepted within 2 n eps, and normalised here
    eps = _SHORT_FLOAT_EPS.get(str(getattr(w, "dtype", "")).rpartition(".")[2], 0.0)
    tol = max(WEIGHTS_TOL, 2 * n * eps)
    if abs(total - 1.0) > tol:
        raise ValueError(f"`{name}` must sum to one; got {total!r}. Divide by its sum.")
    return arr / total if tol > WEIGHTS_TOL else arr


#: Rounding unit of the float types shorter than float64 that weights may come in.
_SHORT_FLOAT_EPS = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def as_parameter(
    P: ParameterLike, name: str, *, shape: tuple[int | None, int | None]
) -> Callable[[float], FloatArray]:
    """Normalise a constant or time-dependent matrix parameter to a function of time.

    A constant is validated once; a callable ``t -> array`` is validated at each call.
    """
    if callable(P):

        def value(t: float) -> FloatArray:
            return as_matrix(P(t), f"{name}(t={time_text(t)})", shape=shape)

        return value
    const = as_matrix(P, name, shape=shape)
    const.setflags(write=False)
    return lambda t: const


def _not_a_number(value: object, name: str) -> ValueError:
    """The error for a scalar argument that is no finite real number; a 0-d array of another
    library (a torch or JAX scalar) is told to become a Python number."""
    hint = f" Pass a Python number, float({name})." if hasattr(value, "shape") else ""
    return ValueError(f"`{name}` must be a finite real number; got {value!r}.{hint}")


def check_positive(value: object, name: str, *, allow_zero: bool = False) -> float:
    """Return `value` as a float after checking it is finite and positive."""
    if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(float(value)):
        raise _not_a_number(value, name)
    if value < 0 or (value == 0 and not allow_zero):
        bound = "nonnegative" if allow_zero else "positive"
        raise ValueError(f"`{name}` must be {bound}; got {value!r}.")
    return float(value)


def check_real(value: object, name: str) -> float:
    """Return `value` as a float after checking it is a finite real number (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(float(value)):
        raise _not_a_number(value, name)
    return float(value)


#: Smallest relative tolerance an adaptive solver can honour: SciPy's ``solve_ivp`` raises any
#: ``rtol`` below 100 machine epsilons to that value, with a warning.
MIN_RTOL = 100 * np.finfo(np.float64).eps


def check_rtol(value: object) -> float:
    """Return the relative tolerance `rtol` after checking it is at least :data:`MIN_RTOL` and
    below 1 (at 1 an error as large as the solution passes: the result would be no answer)."""
    rtol = check_positive(value, "rtol")
    if rtol < MIN_RTOL:
        raise ValueError(
            f"`rtol` = {rtol:g} is below {MIN_RTOL:.3g} (100 machine epsilons), which an adaptive "
            f"solver cannot honour; pass rtol >= {MIN_RTOL:.3g}."
        )
    if rtol >= 1:
        raise ValueError(
            f"`rtol` = {rtol:g} is not below 1: it accepts an error as large as the solution "
            "itself; pass rtol < 1 (1e-6 keeps about six digits)."
        )
    return rtol


def check_int(value: object, name: str, *, minimum: int = 1) -> int:
    """Return `value` as an int after checking it is an integer >= `minimum`."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"`{name}` must be an integer; got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be at least {minimum}; got {value!r}.")
    return int(value)


def as_counts(values: object, name: str, *, minimum: int = 1) -> np.ndarray:
    """Return `values`, the abscissae of a power-law fit in a count (numbers of tokens), as a 1-D
    int array after checking each is an integer >= `minimum` and that two at least differ."""
    arr = np.atleast_1d(np.asarray(values, dtype=object))  # object: floats stay floats
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be a 1-D sequence of integers; got shape {arr.shape}.")
    counts = np.array([check_int(v, name, minimum=minimum) for v in arr], dtype=int)
    if np.unique(counts).size < 2:
        raise ValueError(
            f"`{name}` must hold at least two distinct values, the points of the power-law fit "
            f"of the rate; got {counts.tolist()}. Pass e.g. [100, 200, 400]."
        )
    return counts


def as_rng(rng: SeedLike) -> np.random.Generator:
    """Normalise `rng` (a Generator, a seed, or None) through ``np.random.default_rng``."""
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"`rng` must be a numpy Generator, an integer seed or None; got {rng!r}."
        ) from exc


def check_bool(value: object, name: str) -> bool:
    """Return `value` after checking it is True or False (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False; got {value!r}.")
    return value


#: Floating dtypes the kernels, the integrators and the stochastic simulator compute in.
DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def as_dtype(dtype: DTypeLike | None, name: str = "dtype", *, like: object = None) -> np.dtype:
    """Return the computing dtype: float64 or float32 (``"float64"``, ``np.float32``, ...).

    ``None`` gives float32 when ``like`` is a float32 array (a computation keeps the precision
    of its input) and float64 otherwise.
    """
    if dtype is None:
        is32 = isinstance(like, np.ndarray) and like.dtype == np.float32
        return DTYPES[1] if is32 else DTYPES[0]
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in DTYPES:
        raise ValueError(
            f"`{name}` must be float64 or float32 (np.float64, np.float32 or their names); "
            f"got {dtype!r}."
        )
    return dt


def check_instance(value: object, cls: type[_T] | tuple[type[_T], ...], name: str, fix: str) -> _T:
    """Return `value` after checking it is an instance of `cls` (a ``TypeError`` naming `name`
    and saying how to build one, `fix`, otherwise)."""
    if not isinstance(value, cls):
        want = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise TypeError(f"`{name}` must be a {want}; got {type(value).__name__}. {fix}")
    return value


def check_attributes(value: _T, attributes: tuple[str, ...], name: str, fix: str) -> _T:
    """Return `value` after checking it has each of `attributes` (a ``TypeError`` naming `name`,
    the missing attributes and `fix` otherwise).

    For a result of the library read by a drawing or a report, where any object with the same
    fields (a stand-in, a record loaded from disk) serves as well as the result itself.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> check_attributes(SimpleNamespace(mean=1.0), ("mean",), "estimate", "").mean
    1.0
    >>> check_attributes(1.0, ("mean", "stderr"), "estimate", "Pass an MCEstimate.")
    Traceback (most recent call last):
    ...
    TypeError: `estimate` must have the attributes mean, stderr; got float. Pass an MCEstimate.
    """
    missing = [a for a in attributes if not hasattr(value, a)]
    if missing:
        raise TypeError(
            f"`{name}` must have the attributes {', '.join(missing)}; got "
            f"{type(value).__name__}. {fix}"
        )
    return value


def time_text(t: float) -> str:
    """A time as a message prints it: the shortest text that reads back as the same float
    (Python's ``repr``), so that two different times never print the same (6 significant
    digits printed 1000001 as ``1e+06``, the time 1000000 of the grid beside it).

    >>> time_text(1000001.0), time_text(0.5)
    ('1000001.0', '0.5')
    """
    return repr(float(t))
