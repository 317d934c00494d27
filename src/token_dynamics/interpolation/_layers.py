"""Transformer layers as data: the feed-forward and self-attention layers and the low-rank and
identity matrices they are built from (private; re-exported by
:mod:`token_dynamics.interpolation`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypeAlias, cast

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import (
    as_matrix,
    as_real_array,
    as_square,
    as_tokens,
    as_vector,
    check_int,
    check_positive,
    check_real,
)
from ..attention import Hardmax, Softmax

__all__ = ["Factored", "FeedForward", "Identity", "SelfAttention"]

#: Relative tie tolerance of hardmax: scores within ``HARDMAX_TOL * max(1, |max|)`` of the row
#: maximum are tied (the convention of ``attention.Hardmax``). Every margin the constructions
#: of this chapter rely on is larger than 1e-6 relative, far above this threshold.
HARDMAX_TOL = 1e-9
#: Largest feed-forward width of the book's construction (ReLU, width at most 4).
MAX_WIDTH = 4


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Factored:
    r"""A low-rank matrix stored, and counted, by its factors.

    .. math:: M = L R^\top = \sum_{k=1}^r \ell_k r_k^\top, \qquad L, R \in \mathbb R^{d\times r},

    counted as the :math:`2dr` entries of its factors, not the :math:`d^2` of :math:`M`: the
    low-rank attention that keeps the parameter count :math:`O(d\sum_j m_j)`.

    Parameters
    ----------
    left, right : array_like, shape (d, r)
        The factors; a 1-D vector of length ``d`` is read as one column (rank one).

    Raises
    ------
    ValueError
        If a factor is not a finite matrix or the two factors have different shapes.
    TypeError
        If a factor is not real (complex, boolean, string or object).

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the low-rank attention of the abstract).

    Examples
    --------
    >>> from token_dynamics.interpolation import Factored
    >>> m = Factored([1.0, 0.0], [0.0, 2.0])
    >>> m.matrix.tolist(), m.n_params
    ([[0.0, 2.0], [0.0, 0.0]], 4)
    """

    left: np.ndarray
    right: np.ndarray

    def __post_init__(self) -> None:
        mats = []
        for name in ("left", "right"):
            value = as_real_array(getattr(self, name), name)
            if value.ndim == 1:
                value = value[:, None]
            mats.append(_readonly(as_matrix(value, name)))
        if mats[0].shape != mats[1].shape:
            raise ValueError(
                f"`left` and `right` must have the same shape (d, r); got {mats[0].shape} "
                f"and {mats[1].shape}."
            )
        object.__setattr__(self, "left", mats[0])
        object.__setattr__(self, "right", mats[1])

    @property
    def dim(self) -> int:
        return int(self.left.shape[0])

    @property
    def matrix(self) -> np.ndarray:
        """The dense ``(d, d)`` matrix ``left @ right.T``."""
        return self.left @ self.right.T

    @property
    def n_params(self) -> int:
        """Number of entries of the two factors (the book's rule for low-rank matrices)."""
        return int(self.left.size + self.right.size)


@dataclass(frozen=True)
class Identity:
    r"""The identity matrix of size ``d``: a structural choice, not a trained parameter.

    Used for the attention matrices of a layer that averages tokens, it counts no parameter.

    .. math:: I_d = (\delta_{kl})_{1 \le k, l \le d}.

    Parameters
    ----------
    d : int
        Size of the matrix.

    Raises
    ------
    ValueError
        If `d` is not a positive integer.

    Examples
    --------
    >>> from token_dynamics.interpolation import Identity
    >>> Identity(2).matrix.tolist(), Identity(2).n_params
    ([[1.0, 0.0], [0.0, 1.0]], 0)
    """

    d: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "d", check_int(self.d, "d"))

    @property
    def dim(self) -> int:
        return self.d

    @property
    def matrix(self) -> np.ndarray:
        return np.eye(self.d)

    @property
    def n_params(self) -> int:
        return 0


#: An attention or value matrix as a layer stores it: low-rank, the identity, or dense (d, d).
Operator: TypeAlias = Factored | Identity | FloatArray
#: What a layer accepts for such a matrix: ``None`` (the zero matrix), or an operator or array.
Operand: TypeAlias = Factored | Identity | ArrayLike | None


def _as_operator(M: Operand, name: str) -> Operator | None:
    """Normalise an attention matrix argument (None, Identity, Factored or a dense array)."""
    if M is None or isinstance(M, Factored | Identity):
        return M
    return _readonly(as_square(M, name))


def _dense(M: Operator) -> FloatArray:
    return M if isinstance(M, np.ndarray) else M.matrix


def _count(M: Operand) -> int:
    """Parameters of a normalised matrix: its factors, none for the identity, or its entries."""
    if isinstance(M, Factored | Identity):
        return M.n_params
    return int(M.size) if isinstance(M, np.ndarray) else 0


def _dim(M: Operand) -> int | None:
    """Dimension of a normalised matrix (None for the zero matrix ``None``)."""
    if isinstance(M, Factored | Identity):
        return M.dim
    return int(M.shape[0]) if isinstance(M, np.ndarray) else None


@dataclass(frozen=True, eq=False)
class FeedForward:
    r"""Token-wise ReLU feed-forward layer, applied to each token of a sequence:

    .. math:: \mathrm{FF}(x) = \eta x + W\sigma(Ux + b), \qquad \sigma(z) = \max(z, 0).

    Parameters
    ----------
    U : array_like, shape (w, d)
        Input weights (one hidden unit per row); the width ``w`` is at most 4.
    b : array_like, shape (w,)
        Hidden biases.
    W : array_like, shape (d, w)
        Output weights.
    eta : float
        Skip weight: 1 for a residual layer, 0 for the non-residual layer of the softmax
        construction.

    Raises
    ------
    ValueError
        If `U` has more than 4 rows, `b` or `W` does not match its shape, or an entry is not
        finite.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Notes
    -----
    The parameter count is ``2 w d + w + 1`` (``U``, ``W``, ``b`` and ``eta``), that is at most
    ``8 d + 5`` at width 4.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the feed-forward layer of its transformer blocks).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import FeedForward
    >>> ff = FeedForward(U=[[1.0, 0.0]], b=[0.0], W=[[0.0], [1.0]])
    >>> ff(np.array([[2.0, 0.0], [-1.0, 0.0]])).tolist()
    [[2.0, 2.0], [-1.0, 0.0]]
    >>> ff.n_params, ff.width
    (6, 1)
    """

    U: np.ndarray
    b: np.ndarray
    W: np.ndarray
    eta: float = 1.0

    def __post_init__(self) -> None:
        U = as_matrix(self.U, "U")
        w, d = U.shape
        if w > MAX_WIDTH:
            raise ValueError(f"`U` has {w} hidden units; the construction allows width <= 4.")
        b = as_vector(self.b, "b", size=w)
        W = as_matrix(self.W, "W", shape=(d, w))
        eta = check_real(self.eta, "eta")
        object.__setattr__(self, "U", _readonly(U))
        object.__setattr__(self, "b", _readonly(b))
        object.__setattr__(self, "W", _readonly(W))
        object.__setattr__(self, "eta", float(eta))

    @property
    def dim(self) -> int:
        return int(self.U.shape[1])

    @property
    def width(self) -> int:
        return int(self.U.shape[0])

    @property
    def n_params(self) -> int:
        return int(self.U.size + self.b.size + self.W.size + 1)

    def __call__(self, X: ArrayLike) -> np.ndarray:
        """Apply the layer to tokens ``X`` of shape ``(n, d)`` (returns a new array)."""
        return self._apply(as_tokens(X, "X", d=self.dim))

    def _apply(self, X: FloatArray) -> np.ndarray:
        """The layer on validated tokens (the constructions' inner loops)."""
        hidden = np.maximum(X @ self.U.T + self.b, 0.0)
        return self.eta * X + hidden @ self.W.T


@dataclass(frozen=True, eq=False)
class SelfAttention:
    r"""Self-attention layer on one sequence of tokens :math:`x_1, \dots, x_n`:

    .. math:: \mathrm{SA}(X)_i = \rho x_i + V\sum_{\ell=1}^n \pi_{i\ell} x_\ell,

    with hardmax weights :math:`\pi_{i\ell} = \mathbf 1[\ell \in C_i]/|C_i|`, uniform over the
    maximisers :math:`C_i` of :math:`\ell\mapsto\langle A x_i, x_\ell\rangle`, or softmax
    weights :math:`\pi_{i\ell} \propto \exp(\langle A x_i, x_\ell\rangle/\tau)`, normalised
    over the tokens of the sequence.

    Parameters
    ----------
    A, V : None, Identity, Factored or array_like of shape (d, d)
        Attention and value matrices. ``V=None`` means ``V = 0`` (the layer is ``rho x``);
        ``A=None`` means ``A = 0`` (uniform weights).
    rho : float
        Skip weight (1 residual, 0 non-residual).
    attention : {"hardmax", "softmax"}
    tau : float, optional
        Softmax temperature (required for softmax).

    Raises
    ------
    ValueError
        If `attention` is neither name, `tau` is missing or not positive for softmax, a matrix
        is not square and finite, or `A` and `V` act on different dimensions.
    TypeError
        If a matrix is not real, or `rho` is not a real number.

    Notes
    -----
    Parameters are counted by the book's rule: a factored matrix by its factors, the identity
    as structure (0), a dense matrix by its ``d**2`` entries, plus one for ``rho``; the
    temperature is a hyper-parameter and is not counted.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the self-attention layer, hardmax and softmax).

    Examples
    --------
    Rank-one hardmax attention sends every token with a positive projection to the maximiser:

    >>> import numpy as np
    >>> from token_dynamics.interpolation import Factored, Identity, SelfAttention
    >>> sa = SelfAttention(A=Factored([1.0, 0.0], [1.0, 0.0]), V=Identity(2), rho=0.0)
    >>> sa(np.array([[1.0, 0.0], [3.0, 1.0]])).tolist()
    [[3.0, 1.0], [3.0, 1.0]]
    >>> sa.n_params
    5
    """

    A: Operand = None
    V: Operand = None
    rho: float = 1.0
    attention: str = "hardmax"
    tau: float | None = None
    _dense_A: np.ndarray | None = field(default=None, init=False, repr=False)
    _dense_V: np.ndarray | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        A = _as_operator(self.A, "A")
        V = _as_operator(self.V, "V")
        if self.attention not in ("hardmax", "softmax"):
            raise ValueError(f"`attention` must be 'hardmax' or 'softmax'; got {self.attention!r}.")
        tau = self.tau
        if self.attention == "softmax":
            if tau is None:
                raise ValueError("`tau` is required for softmax attention; pass a temperature > 0.")
            tau = check_positive(tau, "tau")
        check_real(self.rho, "rho")
        dims = {dd for dd in (_dim(A), _dim(V)) if dd is not None}
        if len(dims) > 1:
            raise ValueError(f"`A` and `V` must act on the same dimension; got {sorted(dims)}.")
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "V", V)
        object.__setattr__(self, "rho", float(self.rho))
        object.__setattr__(self, "tau", tau)
        object.__setattr__(self, "_dense_A", None if A is None else _readonly(_dense(A).copy()))
        object.__setattr__(self, "_dense_V", None if V is None else _readonly(_dense(V).copy()))

    @property
    def dim(self) -> int | None:
        return _dim(self.A) or _dim(self.V)

    @property
    def n_params(self) -> int:
        # A plays no role when V = 0, so it is not counted then.
        return (_count(self.A) if self.V is not None else 0) + _count(self.V) + 1

    def weights(self, X: np.ndarray) -> np.ndarray:
        """Attention matrix of shape ``(n, n)`` (rows sum to one) on one sequence ``X``."""
        A = np.zeros((X.shape[1], X.shape[1])) if self._dense_A is None else self._dense_A
        return _attention_weights(X, A, self.attention, self.tau)

    def __call__(self, X: ArrayLike) -> np.ndarray:
        """Apply the layer to one sequence ``X`` of shape ``(n, d)`` (returns a new array)."""
        return self._apply(as_tokens(X, "X", d=self.dim))

    def _apply(self, X: FloatArray) -> np.ndarray:
        """The layer on a validated sequence (the constructions' inner loops)."""
        if self._dense_V is None:
            return self.rho * X
        return self.rho * X + self.weights(X) @ X @ self._dense_V.T

    def with_attention(self, attention: str, tau: float | None = None) -> SelfAttention:
        """The same layer with other attention weights (hardmax or softmax at ``tau``)."""
        return replace(self, attention=attention, tau=tau)


def _attention_weights(X: np.ndarray, A: np.ndarray, kind: str, tau: float | None) -> np.ndarray:
    """Hardmax or softmax attention matrix on one sequence, from :mod:`token_dynamics.attention`.

    ``Hardmax(A, V, tol)`` or ``Softmax(A, V, beta=1/tau)``: scores ``S = X @ A.T @ X.T``
    (``S[i, l] = <A x_i, x_l>``), normalised over the key index ``l``; the value matrix plays
    no role in the weights.
    """
    V = np.zeros_like(A)
    field: Hardmax | Softmax
    if kind == "hardmax":
        field = Hardmax(A, V, tol=HARDMAX_TOL)
    else:
        field = Softmax(A, V, beta=1.0 / cast(float, tau))  # tau is given for softmax
    return field.attention_matrix(X)
