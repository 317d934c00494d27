"""Single-head attention variants whose weights are functions of the scores (private)."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar, Self

import numpy as np

from .._backend import all_finite
from .._guards import float_guard
from .._typing import ParameterLike
from .._validation import check_positive, check_real
from ._array_api import (
    exp_velocity,
    hardmax_velocity,
    queries_values,
    run,
    scores_in_range,
    sigmoid_velocity,
    softmax_field,
    velocity_stats,
)
from ._base import (
    AttentionField,
    Parameter,
    checked_velocity,
    eval_parameter,
    finite_result,
    fold_qk,
    init_parameter,
    known_dim,
    positive_keys,
    scatter_columns,
    weighted_values,
    xp_parameter,
)
from ._hardmax import hardmax_rows, tie_threshold
from ._kernels import apply_rows, matrix_rows
from ._sigmoid import sigmoid_rows, sigmoid_transform
from ._softmax import Transform, exp_transform, softmax_transform

__all__ = ["Hardmax", "Linear", "Sigmoid", "Softmax", "Unnormalised"]

#: What to do when linear attention, cubic in the tokens, leaves the float range.
_LINEAR_FIX = "its size grows as |x|^3: scale the tokens, `A` or `V` down"


def _overflow_check(out: np.ndarray, what: str) -> np.ndarray:
    if not np.all(np.isfinite(out)):
        limit = np.log(np.finfo(out.dtype).max)  # 709.8 in float64, 88.7 in float32
        raise FloatingPointError(
            f"{what} overflowed: some weight e^(beta s_ij) exceeds the {out.dtype} range "
            f"(beta * score > ~{limit:.0f}). Lower `beta` or the token norms, or use `Softmax`, "
            "which normalises through log-sum-exp."
        )
    return out


@dataclass(frozen=True, eq=False)
class _Bilinear(AttentionField):
    """Variants with scores ``s_ij = <A x_i, x_j>`` and a value matrix ``V`` (shared code)."""

    A: Parameter
    V: Parameter

    def __post_init__(self) -> None:
        object.__setattr__(self, "A", init_parameter(self.A, "A"))
        object.__setattr__(self, "V", init_parameter(self.V, "V"))
        if not callable(self.A) and not callable(self.V) and self.A.shape != self.V.shape:
            raise ValueError(
                "`A` and `V` must both be (d, d) for the same d; "
                f"got {self.A.shape} and {self.V.shape}."
            )

    def _dim(self) -> int | None:
        return known_dim((self.A, 0), (self.V, 0))

    def _params(self, t: float, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d, dt = X.shape[1], X.dtype
        return eval_parameter(self.A, "A", t, (d, d), dt), eval_parameter(
            self.V, "V", t, (d, d), dt
        )

    def _params_xp(self, xp: ModuleType, t: float, X: Any) -> tuple[Any, Any]:
        """The transposes of ``A(t)`` and ``V(t)`` as arrays of ``xp`` like ``X``
        (``_base.xp_parameter``), for the products ``Y A^T`` and ``X V^T``."""
        d = X.shape[1]
        return xp_parameter(xp, self.A, "A", t, (d, d), X, transpose=True), xp_parameter(
            xp, self.V, "V", t, (d, d), X, transpose=True
        )

    def _slab_matrix(
        self, X: np.ndarray, t: float, w: np.ndarray, transform: Transform, *, normalise: bool
    ) -> np.ndarray:
        """Attention matrix of the weights ``transform(s_ij)`` (``_kernels.matrix_rows``)."""
        A, _ = self._params(t, X)
        Xk, wk = positive_keys(X, w)
        return scatter_columns(matrix_rows(X @ A.T, Xk, wk, transform, normalise=normalise), w)

    @classmethod
    def from_qk(
        cls, Q: ParameterLike, K: ParameterLike, V: Parameter, *args: float, **kwargs: float
    ) -> Self:
        r"""Build the field from queries and keys, :math:`A = K^\top Q/\sqrt{k}`.

        ``Q`` and ``K`` have shape ``(k, d)`` (or are functions of time returning such arrays);
        further arguments are passed to the constructor.

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import Softmax
        >>> Q = K = np.ones((1, 2))
        >>> Softmax.from_qk(Q, K, np.eye(2)).A
        array([[1., 1.],
               [1., 1.]])
        """
        return cls(fold_qk(Q, K), V, *args, **kwargs)


@dataclass(frozen=True, eq=False)
class _Exponential(_Bilinear):
    """Weights ``w_j e^{beta s_ij}``, normalised over the keys (softmax) or not (shared code)."""

    beta: float = 1.0
    _normalised: ClassVar[bool] = True
    _checks_tokens_xp: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "beta", check_real(self.beta, "beta"))

    def _velocity_at(self, Y, X, t, w):
        A, V = self._params(t, X)
        Xk, wk = positive_keys(X, w)
        F = Y @ A.T
        if self.beta != 1.0:
            F *= self.beta
        # unweighted values and the weights apart: the kernel folds tiny weights into the scores
        if self._normalised:
            R = weighted_values(Xk, V, np.ones_like(wk))
            return apply_rows(F, Xk, R, softmax_transform, weights=wk, normalise=True)
        out = apply_rows(F, Xk, Xk @ V.T, exp_transform, weights=wk, normalise=False)
        return _overflow_check(out, "Unnormalised attention")

    def _velocity_xp(self, xp, Y, X, t, w):
        d = X.shape[1]
        AT, norm_A = xp_parameter(xp, self.A, "A", t, (d, d), X, norm=True, transpose=True)
        VT = xp_parameter(xp, self.V, "V", t, (d, d), X, transpose=True)
        # the max-shifted softmax cannot overflow, but a score itself can (tokens of norm
        # ~1e155): the scores' bound, the tokens and the result checked together, after it
        scale = abs(self.beta) * norm_A
        if self._normalised:
            log_w = None if w is None else xp.log(w)
            out, stats = softmax_field(xp, Y, X, AT, VT, self.beta, log_w)
            return checked_velocity(xp, out, stats, Y, X, scale, "the softmax attention velocity")
        F, R = queries_values(xp, Y, X, AT, VT, self.beta)
        R = R / X.shape[0] if w is None else w[:, None] * R
        out = run(xp, exp_velocity, F, X, R)
        stats = velocity_stats(xp, Y, X, out, Y is X)
        what, fix = "the unnormalised attention velocity", "lower `beta` or the token norms"
        return checked_velocity(xp, out, stats, Y, X, scale, what, fix)

    def _matrix(self, X, t, w):
        A, _ = self._params(t, X)
        Xk, wk = positive_keys(X, w)
        F = self.beta * (X @ A.T)
        if self._normalised:
            return scatter_columns(matrix_rows(F, Xk, wk, softmax_transform, normalise=True), w)
        P = matrix_rows(F, Xk, wk, exp_transform, normalise=False)
        return scatter_columns(_overflow_check(P, "Unnormalised attention"), w)


@dataclass(frozen=True, eq=False)
class Softmax(_Exponential):
    r"""Softmax self-attention with inverse temperature :math:`\beta`.

    .. math::

        \Gamma_\mu(x) = \frac{\int e^{\beta\langle Ax, y\rangle}\, V y\, d\mu(y)}
                             {\int e^{\beta\langle Ax, y\rangle}\, d\mu(y)},
        \qquad P_{ij} = \frac{w_j e^{\beta s_{ij}}}{\sum_\ell w_\ell e^{\beta s_{i\ell}}} .

    Computed through log-sum-exp, in row blocks of the score matrix (bounded memory).

    Arrays: numpy; in ``velocity`` and ``velocity_at`` (so as the right-hand side of
    ``integrate``) also torch, JAX, CuPy or any array-API library, the result in the caller's
    array type, device and float dtype (torch's and JAX's fused attention where they apply);
    ``attention_matrix`` takes numpy arrays.

    Parameters
    ----------
    A : array_like, shape (d, d), or callable ``t -> (d, d)``
        Folded query-key matrix, :math:`A = K^\top Q/\sqrt k`; the scores are
        :math:`s_{ij}=\langle A x_i, x_j\rangle`.
    V : array_like, shape (d, d), or callable ``t -> (d, d)``
        Value matrix.
    beta : float
        Inverse temperature (any finite real; ``0`` gives the plain mean).

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, *A Unified Perspective on the Dynamics of Deep
    Transformers*, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> field = Softmax(np.zeros((2, 2)), np.eye(2))
    >>> field.velocity(X)                      # A = 0: every token moves to the mean
    array([[0.5, 0.5],
           [0.5, 0.5]])
    >>> field.attention_matrix(X).sum(axis=1)
    array([1., 1.])
    """

    _normalised: ClassVar[bool] = True


@dataclass(frozen=True, eq=False)
class Unnormalised(_Exponential):
    r"""Unnormalised self-attention (USA): no division by the partition function.

    .. math::

        \Gamma_\mu(x) = \int e^{\beta\langle Ax, y\rangle}\, V y\, d\mu(y),
        \qquad P_{ij} = w_j e^{\beta s_{ij}} .

    The weights are the measure's (``1/n`` for the empirical measure), so duplicating every
    token leaves the field unchanged. An overflow of the exponentials raises
    ``FloatingPointError``.

    Arrays: numpy; in ``velocity`` and ``velocity_at`` (so as the right-hand side of
    ``integrate``) also torch, JAX, CuPy or any array-API library, the result in the caller's
    array type, device and float dtype; ``attention_matrix`` takes numpy arrays.

    Parameters
    ----------
    A, V : array_like, shape (d, d), or callable ``t -> (d, d)``
    beta : float

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A mathematical perspective on
    Transformers*, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Unnormalised
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> Unnormalised(np.zeros((2, 2)), np.eye(2)).velocity(X)
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """

    _normalised: ClassVar[bool] = False


@dataclass(frozen=True, eq=False)
class Hardmax(_Bilinear):
    r"""Hardmax self-attention: each token averages its best-scoring keys, ties shared.

    .. math::

        \Gamma_\mu(x_i) = V \frac{\sum_{j \in C_i} w_j x_j}{\sum_{j\in C_i} w_j},
        \qquad C_i = \{ j : s_{ij} \ge m_i - \mathrm{tol}\,\max(1, |m_i|)\},\quad
        m_i = \max_\ell s_{i\ell},

    the zero-temperature limit of :class:`Softmax` (with uniform weights, tied keys share the
    weight equally). Keys of zero weight are never selected.

    Arrays: numpy; in ``velocity`` and ``velocity_at`` (so as the right-hand side of
    ``integrate``) also torch, JAX, CuPy or any array-API library, the result in the caller's
    array type, device and float dtype; ``attention_matrix`` takes numpy arrays.

    Parameters
    ----------
    A, V : array_like, shape (d, d), or callable ``t -> (d, d)``
    tol : float
        Relative tolerance under which two scores count as tied.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact Sequence Interpolation with Transformers*,
    arXiv:2502.02270, 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Hardmax
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    >>> Hardmax(np.eye(2), np.eye(2)).attention_matrix(X)
    array([[1. , 0. , 0. ],
           [0. , 0.5, 0.5],
           [0. , 0.5, 0.5]])
    """

    tol: float = 1e-9

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "tol", check_positive(self.tol, "tol", allow_zero=True))

    def _transform(self, S: np.ndarray, rows: slice, e: int) -> tuple[np.ndarray, None]:
        # the tie indicator overwrites the slab in place (no boolean or float copies)
        np.greater_equal(S, tie_threshold(S.max(axis=1, keepdims=True), self.tol, e), out=S)
        return S, None

    def _velocity_at(self, Y, X, t, w):
        A, V = self._params(t, X)
        Xk, wk = positive_keys(X, w)
        sums = hardmax_rows(Y @ A.T, Xk, weighted_values(Xk, V, wk), self.tol)
        return sums[:, :-1] / sums[:, -1:]

    def _velocity_xp(self, xp, Y, X, t, w):
        AT, VT = self._params_xp(xp, t, X)
        wk = xp.ones_like(X[:, 0]) if w is None else w
        R = xp.concat([wk[:, None] * xp.matmul(X, VT), wk[:, None]], axis=1)
        F = xp.matmul(Y, AT)
        out = run(xp, hardmax_velocity, F, X, R, self.tol)
        ok = run(xp, scores_in_range, F, X)
        return finite_result(xp, out, "the hardmax attention velocity", in_range=ok)

    def _matrix(self, X, t, w):
        return self._slab_matrix(X, t, w, self._transform, normalise=True)


@dataclass(frozen=True, eq=False)
class Sigmoid(_Bilinear):
    r"""Sigmoid self-attention (unnormalised, the measure carries the ``1/n``).

    .. math::

        \Gamma_\mu(x) = \int \sigma(\langle Ax, y\rangle + b)\, V y\, d\mu(y),
        \qquad \sigma(u) = \frac{1}{1+e^{-u}} .

    Arrays: numpy; in ``velocity`` and ``velocity_at`` (so as the right-hand side of
    ``integrate``) also torch, JAX, CuPy or any array-API library, the result in the caller's
    array type, device and float dtype; ``attention_matrix`` takes numpy arrays.

    Parameters
    ----------
    A, V : array_like, shape (d, d), or callable ``t -> (d, d)``
    b : float
        Bias added to every score (Ramapuram et al. use ``b = -log n``).

    References
    ----------
    J. Ramapuram et al., *Theory, Analysis, and Best Practices for Sigmoid Self-Attention*,
    arXiv:2409.04431, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Sigmoid
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> Sigmoid(np.zeros((2, 2)), np.eye(2)).velocity(X)   # sigma(0) = 1/2
    array([[0.25, 0.25],
           [0.25, 0.25]])
    """

    b: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "b", check_real(self.b, "b"))

    def _transform(self, S: np.ndarray, rows: slice, e: int) -> tuple[np.ndarray, None]:
        return sigmoid_transform(S, self.b, e), None

    def _velocity_at(self, Y, X, t, w):
        A, V = self._params(t, X)
        Xk, wk = positive_keys(X, w)
        return sigmoid_rows(Y @ A.T, Xk, wk[:, None] * (Xk @ V.T), self.b)

    def _velocity_xp(self, xp, Y, X, t, w):
        AT, VT = self._params_xp(xp, t, X)
        R = xp.matmul(X, VT)
        R = R / X.shape[0] if w is None else w[:, None] * R
        F = xp.matmul(Y, AT)
        # a bias beyond the dtype's range (torch refuses to make a float32 array of 1e300) acts
        # as one at its edge: sigmoid 0 or 1 for every score the range check lets through
        top = float(xp.finfo(X.dtype).max)
        out = run(xp, sigmoid_velocity, F, X, R, min(max(self.b, -top), top))
        ok = run(xp, scores_in_range, F, X)
        return finite_result(xp, out, "the sigmoid attention velocity", in_range=ok)

    def _matrix(self, X, t, w):
        return self._slab_matrix(X, t, w, self._transform, normalise=False)


@dataclass(frozen=True, eq=False)
class Linear(_Bilinear):
    r"""Linear attention: the weights are the scores themselves.

    .. math::

        \Gamma_\mu(x) = \int \langle Ax, y\rangle\, V y\, d\mu(y) = V\, M_2(\mu)\, A x,
        \qquad M_2(\mu) = \int y y^\top d\mu(y),

    evaluated through the second-moment matrix in :math:`O(n d^2)` operations.

    Arrays: numpy; in ``velocity`` and ``velocity_at`` (so as the right-hand side of
    ``integrate``) also torch, JAX, CuPy or any array-API library, the result in the caller's
    array type, device and float dtype; ``attention_matrix`` takes numpy arrays.

    Parameters
    ----------
    A, V : array_like, shape (d, d), or callable ``t -> (d, d)``

    References
    ----------
    A. Katharopoulos et al., *Transformers are RNNs: Fast Autoregressive Transformers with Linear
    Attention*, ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Linear
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> Linear(np.eye(2), np.eye(2)).velocity(X)     # M_2 = I / 2
    array([[0.5, 0. ],
           [0. , 0.5]])
    """

    def _velocity_at(self, Y, X, t, w):
        A, V = self._params(t, X)
        with float_guard("the linear attention velocity", _LINEAR_FIX):
            M2 = X.T @ (w[:, None] * X)
            return Y @ A.T @ M2 @ V.T

    def _velocity_xp(self, xp, Y, X, t, w):
        AT, VT = self._params_xp(xp, t, X)
        Xw = X / X.shape[0] if w is None else w[:, None] * X
        with np.errstate(all="ignore"):  # numpy-backed namespaces: the overflow is named below
            M2 = xp.matmul(xp.matrix_transpose(X), Xw)
            VM = xp.matmul(M2, VT)
            out = xp.matmul(xp.matmul(Y, AT), VM)
        if not all_finite(xp, out):
            raise FloatingPointError(
                f"the linear attention velocity left the float range: {_LINEAR_FIX}."
            )
        return out

    def _matrix(self, X, t, w):
        A, _ = self._params(t, X)
        with float_guard("the linear attention matrix", _LINEAR_FIX):
            return (X @ A.T @ X.T) * w
