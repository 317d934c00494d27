"""The common interface of every attention variant (private)."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from .._backend import (
    all_finite,
    device,
    float_dtype,
    is_numpy,
    library,
    namespace,
    scalar,
    to_namespace,
    to_numpy,
)
from .._typing import ArrayLike, DTypeLike, ParameterLike
from .._validation import (
    as_dtype,
    as_matrix,
    as_square,
    as_tokens,
    as_weights,
    check_real,
    time_text,
)
from ._kernels import serial_blas
from ._scale import SCORE_HEADROOM

__all__ = [
    "XP_RANGE_FIX",
    "AttentionField",
    "Parameter",
    "check_time",
    "check_tokens_xp",
    "checked_velocity",
    "eval_parameter",
    "finite_result",
    "fold_qk",
    "init_parameter",
    "known_dim",
    "positive_keys",
    "scatter_columns",
    "weighted_values",
    "xp_parameter",
]

#: A matrix parameter once checked: a read-only float64 array or a function of time.
Parameter = np.ndarray | Callable[[float], ArrayLike]


def check_time(t: object) -> float:
    """Return the time ``t`` as a finite float (named ValueError otherwise)."""
    return check_real(t, "t")


def init_parameter(P: ParameterLike, name: str, *, square: bool = True) -> Parameter:
    """Validate a constant parameter once (fresh read-only float64 copy) or keep a callable."""
    if callable(P):
        return P
    arr = as_square(P, name) if square else as_matrix(P, name)
    arr.setflags(write=False)
    return arr


def eval_parameter(
    P: Parameter,
    name: str,
    t: float,
    shape: tuple[int | None, int | None],
    dtype: DTypeLike = np.float64,
) -> np.ndarray:
    """Value of a parameter at time ``t``, checked against ``shape``, in ``dtype``."""
    if callable(P):
        return as_matrix(P(t), f"{name}(t={time_text(t)})", shape=shape).astype(dtype, copy=False)
    if any(want is not None and got != want for got, want in zip(P.shape, shape, strict=True)):
        want_str = "(" + ", ".join("k" if s is None else str(s) for s in shape) + ")"
        raise ValueError(
            f"`{name}` must have shape {want_str} to act on the tokens; got {P.shape}."
        )
    return P.astype(dtype, copy=False)


def known_dim(*params: tuple[Parameter, int]) -> int | None:
    """Token dimension fixed by the first constant parameter (``(P, axis)`` pairs), if any."""
    for P, axis in params:
        if not callable(P):
            return int(P.shape[axis])
    return None


def positive_keys(X: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens and weights of the support of the measure (keys of zero weight play no role)."""
    if np.all(w > 0):
        return X, w
    keep = w > 0
    return X[keep], w[keep]


def weighted_values(Xk: np.ndarray, V: np.ndarray, wk: np.ndarray) -> np.ndarray:
    """Columns ``[w_j V x_j, w_j]`` of a weighted average over the keys (the last column holds
    the weights, whose sums normalise it), built in place: one product into the array."""
    R = np.empty((Xk.shape[0], Xk.shape[1] + 1), dtype=Xk.dtype)
    np.matmul(Xk, V.T, out=R[:, :-1])
    R[:, :-1] *= wk[:, None]
    R[:, -1] = wk
    return R


@dataclass(frozen=True, eq=False)
class AttentionField:
    r"""Base class of the attention velocity fields :math:`x \mapsto \Gamma_\mu(x)`.

    A field is evaluated on tokens ``X`` of shape ``(n, d)`` carrying the probability weights
    of the measure :math:`\mu = \sum_j w_j \delta_{x_j}` (uniform ``1/n`` by default).
    ``field(t, X)`` is the right-hand side of the ODE :math:`\dot x_i = \Gamma_{\mu(t)}(x_i)`.
    Subclasses implement ``_velocity_at(Y, X, t, w)`` and ``_matrix(X, t, w)``. While a field
    is evaluated, the BLAS library that numpy calls is held to one thread: the kernels share
    their tiles out to their own threads (``TOKEN_DYNAMICS_THREADS``, at most two by default).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.attention import AttentionField
    >>> field = Softmax(np.eye(2), np.eye(2))
    >>> isinstance(field, AttentionField)
    True
    """

    #: Whether ``_velocity_xp`` checks the tokens' finiteness itself (``checked_velocity``),
    #: with the result: ``_backend_velocity`` then reads nothing on the host before it.
    _checks_tokens_xp: ClassVar[bool] = False

    def _dim(self) -> int | None:
        return None

    def _tokens(self, X: ArrayLike, name: str = "X") -> np.ndarray:
        return as_tokens(X, name, d=self._dim())

    def _inputs(
        self, X: ArrayLike, t: float, weights: ArrayLike | None, dtype: DTypeLike | None
    ) -> tuple[np.ndarray, float, np.ndarray]:
        """Tokens, time and weights validated, in the computing dtype."""
        dt = as_dtype(dtype, like=X)
        X = self._tokens(X).astype(dt, copy=False)
        w = as_weights(weights, X.shape[0]).astype(dt, copy=False)
        return X, check_time(t), w

    def velocity(
        self,
        X: ArrayLike,
        t: float = 0.0,
        *,
        weights: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> np.ndarray:
        r"""Velocity :math:`\Gamma_\mu(x_i)` of every token.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens, one per row; they also define the measure :math:`\mu`. A torch, JAX, CuPy
            or other array-API array gives the result in its library, on its device (every
            variant of the library accepts them; see its "Arrays" paragraph).
        t : float
            Time (depth), used by time-dependent parameters.
        weights : array_like, shape (n,), optional
            Probability weights of the tokens in :math:`\mu`; uniform if ``None``.
        dtype : {None, "float64", "float32"}
            Precision of the computation and of the result. ``None``: float32 when ``X`` is a
            float32 array, float64 otherwise. In float32 the velocity agrees with the float64
            one to a relative error of at most about ``n + d s_max`` float32 round-offs,
            ``s_max`` the largest score in absolute value (the bound the library's test suite
            checks; on unit tokens, 4 round-offs were measured at ``beta = 1``, 1800 at
            ``beta = 1e4``), and takes about half the time. Not so for a field that jumps with
            the tokens: :class:`Hardmax` at a tie of scores, which rounding to float32 can make
            or break, so that its velocity moves by up to the distance between the tied keys.

        Returns
        -------
        ndarray (or the array type of ``X``), shape (n, d)

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import Softmax
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
        >>> Softmax(np.zeros((2, 2)), np.eye(2)).velocity(X, weights=[0.75, 0.25])
        array([[0.75, 0.25],
               [0.75, 0.25]])
        """
        if type(X) is not np.ndarray and not is_numpy(X):  # the type test: no call for numpy
            return self._backend_velocity(X, X, t, weights, dtype)
        X, t, w = self._inputs(X, t, weights, dtype)
        with serial_blas():
            return self._finite(self._velocity_at(X, X, t, w))

    def velocity_at(
        self,
        Y: ArrayLike,
        X: ArrayLike,
        t: float = 0.0,
        *,
        weights: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> np.ndarray:
        r"""Field :math:`\Gamma_\mu(y)` of the measure of the tokens ``X`` at query points ``Y``.

        Parameters
        ----------
        Y : array_like, shape (m, d)
            Query points (for instance a plotting grid).
        X : array_like, shape (n, d)
            Tokens defining :math:`\mu`; ``Y`` and ``X`` may also be arrays of one other
            library (as in ``velocity``).
        t : float
            Time.
        weights : array_like, shape (n,), optional
            Weights of the tokens; uniform if ``None``.
        dtype : {None, "float64", "float32"}
            As in ``velocity`` (``None`` follows ``X``).

        Returns
        -------
        ndarray (or the array type of ``X``), shape (m, d)

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import Softmax
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
        >>> Softmax(np.zeros((2, 2)), np.eye(2)).velocity_at([[5.0, 5.0]], X)
        array([[0.5, 0.5]])
        """
        if not is_numpy(X, Y):
            return self._backend_velocity(Y, X, t, weights, dtype)
        X, t, w = self._inputs(X, t, weights, dtype)
        Y = as_tokens(Y, "Y", d=X.shape[1]).astype(X.dtype, copy=False)
        with serial_blas():
            return self._finite(self._velocity_at(Y, X, t, w))

    def _finite(self, out: np.ndarray) -> np.ndarray:
        """``out``, a velocity of the numpy path, if every entry is finite; else a
        ``FloatingPointError``. The variants rescale large scores and report the overflows they
        foresee; what is left (a parameter or ``beta`` beyond the float32 range, values whose
        sums overflow) would otherwise come out as ``inf`` or NaN."""
        fix = "lower the field's parameters or the token norms"
        if out.dtype == np.float32:
            fix += ', or compute in float64 (`dtype="float64"`)'
        return finite_result(np, out, f"the {type(self).__name__} velocity in {out.dtype}", fix)

    def attention_matrix(
        self,
        X: ArrayLike,
        t: float = 0.0,
        *,
        weights: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> np.ndarray:
        """Attention matrix ``P`` of shape ``(n, n)`` with ``velocity = P @ X @ V(t).T``.

        Parameters
        ----------
        X : array_like, shape (n, d)
        t : float
        weights : array_like, shape (n,), optional
        dtype : {None, "float64", "float32"}
            As in ``velocity`` (``None`` follows ``X``).

        Returns
        -------
        ndarray, shape (n, n)

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import Hardmax
        >>> Hardmax(np.eye(2), np.eye(2)).attention_matrix([[1.0, 0.0], [0.0, 1.0]])
        array([[1., 0.],
               [0., 1.]])
        """
        X, t, w = self._inputs(X, t, weights, dtype)
        with serial_blas():
            return self._matrix(X, t, w)

    def __call__(self, t: float, X: ArrayLike) -> np.ndarray:
        """Right-hand side ``f(t, X) = velocity(X, t)`` of the token ODE (uniform weights), in
        float32 when ``X`` is a float32 array.

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import Linear
        >>> Linear(np.eye(1), np.eye(1))(0.0, [[2.0]])
        array([[8.]])
        """
        return self.velocity(X, t)

    def with_weights(self, weights: ArrayLike) -> Callable[[float, ArrayLike], np.ndarray]:
        r"""Right-hand side ``f(t, X)`` for the measure :math:`\sum_j w_j \delta_{x_j}` with
        fixed weights (the weights of particles do not change along the flow).

        Parameters
        ----------
        weights : array_like, shape (n,)
            Probability weights.

        Returns
        -------
        callable ``f(t, X) -> (n, d)``

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import Softmax
        >>> f = Softmax(np.zeros((1, 1)), np.eye(1)).with_weights([0.25, 0.75])
        >>> f(0.0, [[0.0], [4.0]])
        array([[3.],
               [3.]])
        """
        w = as_weights(weights, int(np.size(weights)))

        def rhs(t: float, X: ArrayLike) -> np.ndarray:
            return self.velocity(X, t, weights=w)

        return rhs

    def _velocity_at(self, Y: np.ndarray, X: np.ndarray, t: float, w: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def _backend_velocity(
        self, Y: Any, X: Any, t: float, weights: object, dtype: DTypeLike | None
    ) -> Any:
        """``velocity_at`` on arrays of another library (``_backend``): the arguments checked
        in the caller's namespace, then :meth:`_velocity_xp`; the result in the caller's array
        type, device and dtype."""
        xp = namespace(X, Y)
        dt = float_dtype(xp, X, dtype)
        d = self._dim()
        for name, arr in (("X", X),) if Y is X else (("X", X), ("Y", Y)):
            if arr.ndim != 2 or arr.shape[0] == 0 or (d is not None and arr.shape[1] != d):
                want = "(n, d)" if d is None else f"(n, {d})"
                raise ValueError(
                    f"`{name}` must be a non-empty array of shape {want} (one token per row); "
                    f"got shape {tuple(arr.shape)}."
                )
            if not xp.isdtype(arr.dtype, ("real floating", "integral")):
                raise TypeError(f"`{name}` must hold real numbers; got dtype {arr.dtype}.")
        if Y.shape[1] != X.shape[1]:
            raise ValueError(
                f"`Y` must have the dimension of the tokens, {X.shape[1]}; got {Y.shape[1]}."
            )
        Xc = xp.astype(X, dt, copy=False)
        Yc = Xc if Y is X else xp.astype(Y, dt, copy=False)
        # checked here unless the field checks them with its result (not when keys are dropped)
        if not (self._checks_tokens_xp and weights is None):
            check_tokens_xp(xp, f"the {type(self).__name__} velocity", Xc, Yc)
        self._tokens_xp(xp, Xc)
        w = None
        if weights is not None:
            w_np = as_weights(weights, X.shape[0])
            keep = w_np > 0
            if not keep.all():  # keys of zero weight play no role (``positive_keys``)
                index = xp.asarray(np.flatnonzero(keep).tolist(), device=device(X))
                Xc, w_np = xp.take(Xc, index, axis=0), w_np[keep]
            normal = float(xp.finfo(dt).smallest_normal)
            if w_np.min() < normal:  # zero in the dtype, or subnormal: XLA reads those as zeros
                raise ValueError(
                    f"`weights` holds positive weights below the smallest normal float of the "
                    f"computation ({normal:.3g}; the least is {w_np.min():.3g}), which it would "
                    "read as zeros: set them to 0 (their keys then play no role), or compute in "
                    'float64 (`dtype="float64"`; below 2.2e-308, with numpy arrays).'
                )
            w = to_namespace(xp, w_np, X, dt)
        t = check_time(t)
        if library(xp) in _NATIVE:
            return self._velocity_xp(xp, Yc, Xc, t, w)
        # numpy-backed namespaces (array-api-strict) warn where an overflow gives inf, as it
        # should (the sigmoid's e^{-u}), or inf and nan that the variants report by name
        with np.errstate(over="ignore", invalid="ignore"):
            return self._velocity_xp(xp, Yc, Xc, t, w)

    def _tokens_xp(self, xp: ModuleType, X: Any) -> None:
        """Checks of the tokens beyond their shape and finiteness, on arrays of ``xp`` (the
        array form of a subclass's ``_tokens``; none by default)."""

    def _velocity_xp(self, xp: ModuleType, Y: Any, X: Any, t: float, w: Any) -> Any:
        """The velocity at the queries ``Y`` of the keys ``X`` (those of positive weight, whose
        weights ``w`` sum to one, ``None`` for uniform ones) in the namespace ``xp``. Every
        variant of the library overrides it; a field without an array-API formula refuses by
        name, with the fix."""
        raise TypeError(
            f"{type(self).__name__} computes on numpy arrays only (it has no array-API formula); "
            "pass the tokens `X` as a numpy array, e.g. `np.asarray(X)` (`X.cpu().numpy()` for a "
            "torch tensor)."
        )

    def _matrix(self, X: np.ndarray, t: float, w: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover


def xp_parameter(
    xp: ModuleType,
    P: Parameter,
    name: str,
    t: float,
    shape: Any,
    like: Any,
    *,
    norm: bool = False,
    transpose: bool = False,
) -> Any:
    r"""A parameter at time ``t``, checked against ``shape`` (``eval_parameter``), as an array of
    ``xp`` in the dtype and on the device of ``like`` (with ``transpose``, its transpose
    :math:`P(t)^\top`, which the products ``X P^\top`` of the array path take as it is); with
    ``norm``, the pair of it and its spectral norm :math:`\|P(t)\|_2` on the host (a
    time-dependent parameter evaluated once for both). The copy of a constant parameter, and its
    norm, are made once per library, device, dtype and orientation, and kept while the parameter
    lives (it is a read-only array of its field, ``init_parameter``): a copy to the device costs
    more than the attention itself at n = 1024 under JAX (about 0.3 ms, an array placed on a
    device), and a transpose in the namespace some microseconds a call."""

    def copy_of(value: np.ndarray) -> Any:
        return to_namespace(xp, value.T if transpose else value, like, like.dtype)

    if callable(P) or P.flags.writeable:  # a writeable array may change between calls
        value = eval_parameter(P, name, t, shape)
        return (copy_of(value), _spectral_norm(value)) if norm else copy_of(value)
    key = (id(P), library(xp), str(like.device), str(like.dtype), tuple(shape), transpose)
    copy = _kept(P, key, lambda: copy_of(eval_parameter(P, name, t, shape)))
    if not norm:
        return copy
    size = _kept(
        P,
        (id(P), "norm", "", "", tuple(shape), False),
        lambda: _spectral_norm(eval_parameter(P, name, t, shape)),
    )
    return copy, size


def _spectral_norm(M: np.ndarray) -> float:
    """The largest singular value of a matrix, as a float."""
    return float(np.linalg.norm(M, 2))


def _kept(P: np.ndarray, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """``_DEVICE_COPIES[key]``, made by ``make`` on the first call and dropped with ``P``."""
    value = _DEVICE_COPIES.get(key)
    if value is None:
        value = _DEVICE_COPIES[key] = make()
        weakref.finalize(P, _DEVICE_COPIES.pop, key, None)
    return value


#: The device copies of the constant parameters (``xp_parameter``), by the parameter's id, the
#: library, the device (an array's ``device`` attribute), the dtype, the shape asked for and
#: the orientation (``transpose``), and their spectral norms (``xp_parameter(..., norm=True)``,
#: the library ``"norm"``); an entry leaves with its parameter.
_DEVICE_COPIES: dict[tuple[Any, ...], Any] = {}


#: Libraries whose arrays compute in their own code, where numpy's floating-point warnings never
#: arise (``_backend_velocity`` enters ``np.errstate`` only for the others, numpy-backed
#: namespaces such as array-api-strict: some microseconds a call).
_NATIVE = frozenset({"torch", "jax", "cupy"})


#: The fix for scores beyond the float range on arrays of another library, where they are not
#: rescaled (the numpy path computes them on factors rescaled by powers of two, ``_scale``).
XP_RANGE_FIX = (
    "scale the tokens or the parameters down, or pass numpy arrays (`np.asarray(X)`), whose "
    "path rescales scores beyond the float range"
)


def finite_result(
    xp: ModuleType, out: Any, what: str, fix: str = XP_RANGE_FIX, *, in_range: Any = True
) -> Any:
    """``out``, if every entry is finite (``all_finite``) and ``in_range`` holds (a 0-d boolean
    array of ``xp``: ``_array_api.scores_in_range``); else a ``FloatingPointError`` naming
    ``what`` and the ``fix``."""
    if not (bool(in_range) and all_finite(xp, out)):
        raise FloatingPointError(f"{what} left the float range; {fix}.")
    return out


_NOT_FINITE = "`X` and `Y` must be finite; remove the NaN or inf entries."


def check_tokens_xp(xp: ModuleType, what: str, X: Any, Y: Any) -> None:
    """The tokens ``X`` and the queries ``Y`` of an array library, finite (else ``ValueError``)
    and not all below the normal floats (else ``FloatingPointError``, as in
    :func:`checked_velocity`), read in one transfer: their largest absolute entry (a NaN
    carries through the maxima)."""
    top = xp.max(xp.abs(X))
    if Y is not X:
        top = xp.maximum(top, xp.max(xp.abs(Y)))
    largest = scalar(top)
    if not math.isfinite(largest):
        raise ValueError(_NOT_FINITE)
    _refuse_subnormal(xp, what, largest, X, Y)


def _refuse_subnormal(xp: ModuleType, what: str, largest: float, X: Any, Y: Any) -> None:
    """``FloatingPointError`` when every entry of the tokens is below the smallest normal float
    of their dtype but not every one is zero (``largest``: their largest absolute entry, or
    norm, as the device computed it)."""
    normal = float(xp.finfo(X.dtype).smallest_normal)
    if largest < normal and 0 < max(float(np.abs(to_numpy(a)).max()) for a in (X, Y)) < normal:
        # XLA on the CPU reads subnormal numbers as zeros (a zero velocity came out, for every
        # variant), others compute them with fewer digits; the array path does not rescale
        # tokens as numpy's does. (A value below the normal floats, 0 included, is read again
        # on the host: the squares of normal entries of 1e-170 underflow too, harmlessly.)
        raise FloatingPointError(
            f"{what}: every token lies below the smallest normal float; scale the tokens up, "
            "or pass numpy arrays (`np.asarray(X)`), whose path rescales them."
        )


def checked_velocity(
    xp: ModuleType,
    out: Any,
    stats: Any,
    Y: Any,
    X: Any,
    scale: float,
    what: str,
    fix: str = XP_RANGE_FIX,
) -> Any:
    r"""``out``, the velocity of the scores :math:`\langle F_i, x_j\rangle` with
    :math:`|F_i| \le` ``scale`` :math:`|y_i|` (``scale`` = :math:`|\beta|\,\|A\|_2` for
    :math:`F = \beta Y A^\top`), after four checks read from ``stats``
    (``_array_api.velocity_stats``: the largest norms of ``Y`` and ``X``, the sum of ``out``):

    - the tokens are finite, else ``ValueError`` (a NaN or infinite norm is looked at again,
      since a finite row may have an overflowing norm);
    - some token reaches the normal floats, else ``FloatingPointError`` (XLA on the CPU reads
      subnormal numbers as zeros);
    - the scores stay within the float range: by Cauchy-Schwarz each is at most ``scale``
      :math:`\max_i |y_i| \max_j |x_j|`, which must stay below the dtype's largest float over
      ``2**SCORE_HEADROOM`` (``_scale``), else ``FloatingPointError``. The array path does not
      rescale such scores as the numpy path does; an overflowed score may come out as ``inf``
      of either sign, and torch's fused attention returns a row whose scores all overflowed
      to ``-inf`` as zeros: a finite, wrong velocity;
    - ``out`` is finite, else ``FloatingPointError`` (a sum that overflowed alone is told
      apart, as in ``all_finite``).

    One transfer to the host under JAX, one per statistic elsewhere (on torch's CPU two reads
    cost less than stacking them first).
    """
    if hasattr(stats, "tolist"):  # one array (JAX)
        y, x, total = (float(v) for v in stats.tolist())
    else:  # the largest norm of the tokens read once when the queries are the keys
        x = scalar(stats[1])
        y, total = x if stats[0] is stats[1] else scalar(stats[0]), scalar(stats[2])
    if not (math.isfinite(y) and math.isfinite(x)) and not all_finite(xp, X, Y):
        raise ValueError(_NOT_FINITE)
    _refuse_subnormal(xp, what, max(x, y), X, Y)
    limit = float(xp.finfo(out.dtype).max) * 2.0**-SCORE_HEADROOM
    bound = 0.0 if scale == 0 else scale * y * x
    if not bound <= limit:
        raise FloatingPointError(
            f"{what} may leave the float range: its scores reach up to {bound:.3g} by "
            f"Cauchy-Schwarz, beyond {limit:.3g} ({str(out.dtype).split('.')[-1]}); {fix}."
        )
    if not math.isfinite(total) and not all_finite(xp, out):
        raise FloatingPointError(f"{what} left the float range; {fix}.")
    return out


def scatter_columns(P_keys: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Embed a matrix over the positive-weight keys into the full ``(m, n)`` matrix."""
    if P_keys.shape[1] == w.shape[0]:
        return P_keys
    P = np.zeros((P_keys.shape[0], w.shape[0]))
    P[:, w > 0] = P_keys
    return P


def fold_qk(Q: ParameterLike, K: ParameterLike) -> Parameter:
    r"""Fold queries and keys into :math:`A = K^\top Q / \sqrt{k}` (constant or time-dependent)."""

    def fold(Qt: ArrayLike, Kt: ArrayLike, suffix: str) -> np.ndarray:
        Qm = as_matrix(Qt, f"Q{suffix}")
        Km = as_matrix(Kt, f"K{suffix}", shape=Qm.shape)
        return Km.T @ Qm / np.sqrt(Qm.shape[0])

    if callable(Q) or callable(K):
        Qf = Q if callable(Q) else (lambda t: Q)
        Kf = K if callable(K) else (lambda t: K)
        return lambda t: fold(Qf(t), Kf(t), f"(t={time_text(t)})")
    return fold(Q, K, "")
