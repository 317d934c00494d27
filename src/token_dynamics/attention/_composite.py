"""Multi-head and causal (masked) attention, and a registry of the variants (private)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._typing import ArrayLike, DTypeLike
from .._validation import as_matrix, as_tokens, as_vector, check_bool, check_int, check_real
from ._array_api import masked_softmax_velocity, run, scores_in_range
from ._base import (
    AttentionField,
    Parameter,
    check_tokens_xp,
    eval_parameter,
    finite_result,
    init_parameter,
    known_dim,
    positive_keys,
    scatter_columns,
    weighted_values,
    xp_parameter,
)
from ._l2 import L2
from ._masked import causal_matrix, causal_rows
from ._sinkhorn import Sinkhorn
from ._variants import Hardmax, Linear, Sigmoid, Softmax, Unnormalised

__all__ = ["VARIANTS", "Causal", "MultiHead", "make_field", "with_positions"]


@dataclass(frozen=True, eq=False)
class MultiHead(AttentionField):
    r"""Multi-head attention: a weighted sum of heads.

    .. math::

        \Gamma_\mu(x) = \sum_{h=1}^H W_h\, \Gamma^{(h)}_\mu(x) .

    Arrays: numpy; in ``velocity`` and ``velocity_at`` (so as the right-hand side of
    ``integrate``) also torch, JAX, CuPy or any array-API library, the result in the caller's
    array type, device and float dtype, when every head accepts them (the library's all do);
    ``attention_matrix`` takes numpy arrays.

    Parameters
    ----------
    heads : sequence of AttentionField
        The heads, acting on tokens of the same dimension ``d``: all masked (``Causal``, on
        tokens with a position in column 0) or none.
    W : sequence of array_like (d, d) or callables, optional
        Output matrix of each head; identity if ``None`` (heads simply add). For masked heads,
        its first row is zero after column 0, so that positions never move.

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025 (multi-head section).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import MultiHead, Softmax
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> head = Softmax(np.zeros((2, 2)), np.eye(2))
    >>> MultiHead((head, head)).velocity(X)          # two identical heads add up
    array([[1., 1.],
           [1., 1.]])
    """

    heads: tuple[AttentionField, ...]
    W: tuple[Parameter, ...] | None = None

    def __post_init__(self) -> None:
        heads = tuple(self.heads) if not isinstance(self.heads, AttentionField) else (self.heads,)
        if not heads or not all(isinstance(h, AttentionField) for h in heads):
            raise ValueError("`heads` must be a non-empty sequence of AttentionField objects.")
        object.__setattr__(self, "heads", heads)
        masked = [is_masked(h) for h in heads]
        if any(masked) and not all(masked):
            raise ValueError(
                "`heads` mixes masked heads (`Causal`) with unmasked ones: an unmasked head would "
                "read the position column as content and move it. Make every head `Causal`."
            )
        if self.W is not None:
            W = tuple(init_parameter(Wh, f"W[{h}]") for h, Wh in enumerate(self.W))
            if len(W) != len(heads):
                raise ValueError(f"`W` must hold one matrix per head ({len(heads)}); got {len(W)}.")
            object.__setattr__(self, "W", W)
            if all(masked):
                for h, Wh in enumerate(W):
                    if not callable(Wh):
                        check_fixed_positions(Wh, h)

    def _dim(self) -> int | None:
        dims = {dim for h in self.heads if (dim := h._dim()) is not None}
        dims |= {Wh.shape[0] for Wh in (self.W or ()) if not callable(Wh)}
        if len(dims) > 1:
            raise ValueError(
                f"`heads` and `W` must act on one token dimension; got {sorted(dims)}."
            )
        return dims.pop() if dims else None

    def _velocity_at(self, Y, X, t, w):
        d = X.shape[1]
        out = np.zeros((Y.shape[0], d), dtype=X.dtype)
        for h, head in enumerate(self.heads):
            v = head._velocity_at(Y, X, t, w)
            if self.W is not None:
                v = v @ eval_parameter(self.W[h], f"W[{h}]", t, (d, d), X.dtype).T
            out += v
        return out

    def _velocity_xp(self, xp, Y, X, t, w):
        d = X.shape[1]
        out = None
        for h, head in enumerate(self.heads):
            v = head._velocity_xp(xp, Y, X, t, w)
            if self.W is not None:
                WhT = xp_parameter(xp, self.W[h], f"W[{h}]", t, (d, d), X, transpose=True)
                v = xp.matmul(v, WhT)
            out = v if out is None else out + v
        return out

    def attention_matrix(
        self,
        X: ArrayLike,
        t: float = 0.0,
        *,
        weights: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ) -> np.ndarray:
        """Not defined for several heads: use :meth:`attention_matrices`.

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import MultiHead, Softmax
        >>> MultiHead((Softmax(np.eye(2), np.eye(2)),)).attention_matrix(np.eye(2))
        Traceback (most recent call last):
        ...
        TypeError: `MultiHead` has one attention matrix per head; call `attention_matrices`.
        """
        raise TypeError("`MultiHead` has one attention matrix per head; call `attention_matrices`.")

    def attention_matrices(
        self, X: ArrayLike, t: float = 0.0, *, weights: ArrayLike | None = None
    ) -> np.ndarray:
        """Attention matrix of each head, shape ``(H, n, n)``.

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import Hardmax, MultiHead, Softmax
        >>> mh = MultiHead((Softmax(np.eye(2), np.eye(2)), Hardmax(np.eye(2), np.eye(2))))
        >>> mh.attention_matrices(np.eye(2)).shape
        (2, 2, 2)
        """
        return np.stack([h.attention_matrix(X, t, weights=weights) for h in self.heads])

    @classmethod
    def from_qkv(
        cls,
        Q: ArrayLike,
        K: ArrayLike,
        V: ArrayLike,
        n_heads: int,
        *,
        beta: float = 1.0,
        W: ArrayLike | None = None,
    ) -> MultiHead:
        r"""Split ``Q, K, V`` of shape ``(H k, d)`` into ``H`` softmax heads of ``k`` rows each.

        Head ``h`` uses :math:`A_h = K_h^\top Q_h/\sqrt{k}` and the value matrix
        :math:`W_{:, h} V_h` (``W`` of shape ``(d, H k)``, identity if ``None``), as in Castin's
        code.

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import MultiHead
        >>> mh = MultiHead.from_qkv(np.eye(2), np.eye(2), np.eye(2), 2)
        >>> len(mh.heads), mh.heads[0].V
        (2, array([[1., 0.],
               [0., 0.]]))
        """
        n_heads = check_int(n_heads, "n_heads")
        Q = as_matrix(Q, "Q")
        K = as_matrix(K, "K", shape=Q.shape)
        V = as_matrix(V, "V", shape=(Q.shape[0], Q.shape[1]))
        if Q.shape[0] % n_heads:
            raise ValueError(
                f"`n_heads` = {n_heads} must divide the number of rows of `Q` ({Q.shape[0]})."
            )
        k = Q.shape[0] // n_heads
        W = (
            np.eye(Q.shape[1], Q.shape[0])
            if W is None
            else as_matrix(W, "W", shape=(Q.shape[1], Q.shape[0]))
        )
        heads = []
        for h in range(n_heads):
            rows = slice(h * k, (h + 1) * k)
            A_h = K[rows].T @ Q[rows] / np.sqrt(k)
            heads.append(Softmax(A_h, W[:, rows] @ V[rows], beta))
        return cls(tuple(heads))


@dataclass(frozen=True, eq=False)
class Causal(AttentionField):
    r"""Masked (causal) softmax attention on tokens that carry a position.

    A token is a row ``(s, x)`` of ``X`` of shape ``(n, 1 + d)``: its position ``s`` in
    :math:`[0, 1]` in column 0, its content ``x`` in the other columns. Token ``i`` sees token
    ``j`` iff :math:`s_j \le s_i`, and positions do not move:

    .. math::

        \Gamma_\mu(s, x) = \Big(0,\ \frac{\int \mathbf 1\{s'\le s\}
            e^{\beta\langle Ax, y\rangle} V y\, d\mu(s', y)}{\int \mathbf 1\{s'\le s\}
            e^{\beta\langle Ax, y\rangle}\, d\mu(s', y)}\Big).

    Tokens at position 0 are seen by every query (an attention sink, e.g. a BOS token); a block
    of them attends only to itself, so it evolves autonomously. With the usual positions
    :math:`s_i = (i-1)/n` the first token satisfies :math:`x_1(t) = e^{tV} x_1(0)`.
    ``attention_matrix`` returns ``P`` with ``velocity[:, 1:] = P @ X[:, 1:] @ V.T``.

    Arrays: numpy; in ``velocity`` and ``velocity_at`` (so as the right-hand side of
    ``integrate``) also torch, JAX, CuPy or any array-API library, the result in the caller's
    array type, device and float dtype; ``attention_matrix`` takes numpy arrays.

    Parameters
    ----------
    A, V : array_like, shape (d, d), or callable ``t -> (d, d)``
        Act on the content columns only.
    beta : float
        Inverse temperature.
    sink : bool
        If True, require a token of positive weight at position 0 (the sink) and raise
        ``ValueError`` otherwise; the mask already lets every query see it, so the flag changes
        no value, it states and checks the setting.

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025 (masked attention and
    the conditional Wasserstein distance).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Causal, with_positions
    >>> X = with_positions(np.array([[1.0, 0.0], [0.0, 1.0]]))
    >>> X
    array([[0. , 1. , 0. ],
           [0.5, 0. , 1. ]])
    >>> Causal(np.zeros((2, 2)), np.eye(2)).attention_matrix(X)
    array([[1. , 0. ],
           [0.5, 0.5]])
    """

    A: Parameter
    V: Parameter
    beta: float = 1.0
    sink: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "A", init_parameter(self.A, "A"))
        object.__setattr__(self, "V", init_parameter(self.V, "V"))
        object.__setattr__(self, "beta", check_real(self.beta, "beta"))
        check_bool(self.sink, "sink")

    def _dim(self) -> int | None:
        d = known_dim((self.A, 0), (self.V, 0))
        return None if d is None else d + 1

    def _tokens(self, X: ArrayLike, name: str = "X") -> np.ndarray:
        X = as_tokens(X, name, d=self._dim())
        if X.shape[1] < 2:
            raise ValueError(
                f"`{name}` must have shape (n, 1 + d): positions in column 0, then content."
            )
        s = X[:, 0]
        if np.any(s < 0) or np.any(s > 1):
            raise ValueError(
                f"`{name}[:, 0]` holds the positions and must lie in [0, 1]; got range "
                f"[{s.min():.3g}, {s.max():.3g}]. Build X with `with_positions`."
            )
        return X

    def _prepare(self, Y, X, t, w):
        d = X.shape[1] - 1
        A = eval_parameter(self.A, "A", t, (d, d), X.dtype)
        V = eval_parameter(self.V, "V", t, (d, d), X.dtype)
        Xk, wk = positive_keys(X, w)
        if self.sink and not np.any(Xk[:, 0] == 0):
            raise ValueError(
                "`X` must hold a token of positive weight at position 0 when `sink=True`."
            )
        return A, V, Xk, wk

    def _velocity_at(self, Y, X, t, w):
        A, V, Xk, wk = self._prepare(Y, X, t, w)
        Xc = Xk[:, 1:]
        R = weighted_values(Xc, V, np.ones_like(wk))  # the weights apart: see causal_rows
        out = np.zeros_like(Y)
        out[:, 1:] = causal_rows(self.beta * (Y[:, 1:] @ A.T), Xc, R, wk, Y[:, 0], Xk[:, 0])
        return out

    def _velocity_xp(self, xp, Y, X, t, w):
        d = X.shape[1] - 1
        if d < 1:
            raise ValueError("`X` must have shape (n, 1 + d): positions in column 0, then content.")
        pq, pk = Y[:, 0], X[:, 0]
        # the positions checked the whole rows: the content alone may lie below the normal floats
        check_tokens_xp(xp, "the causal attention velocity", X[:, 1:], Y[:, 1:])
        sees = xp.all(pq >= xp.min(pk))  # a query before the earliest key sees none
        if not bool(sees & xp.any(pk == 0) if self.sink else sees):  # one transfer to the host
            self._refuse_xp(xp, Y, X)
        AT = xp_parameter(xp, self.A, "A", t, (d, d), X, transpose=True)
        VT = xp_parameter(xp, self.V, "V", t, (d, d), X, transpose=True)
        F = xp.matmul(Y[:, 1:], AT)
        if self.beta != 1.0:
            F = F * self.beta
        R = xp.matmul(X[:, 1:], VT)
        log_w = None if w is None else xp.log(w)
        out = run(xp, masked_softmax_velocity, F, X[:, 1:], R, log_w, pq, pk)
        ok = run(xp, scores_in_range, F, X[:, 1:])
        out = finite_result(xp, out, "the causal attention velocity", in_range=ok)
        return xp.concat([xp.zeros_like(Y[:, :1]), out], axis=1)

    def _tokens_xp(self, xp, X):
        """The check of ``_tokens`` on the tokens' positions, on all of them (zero weights too)."""
        lo, hi = float(xp.min(X[:, 0])), float(xp.max(X[:, 0]))
        if lo < 0 or hi > 1:
            raise ValueError(
                "`X[:, 0]` holds the positions and must lie in [0, 1]; got range "
                f"[{lo:.3g}, {hi:.3g}]. Build X with `with_positions`."
            )

    def _refuse_xp(self, xp, Y, X):
        """The error of the numpy path (``_prepare``, ``causal_rows``) for a query that sees no
        key of positive weight or a missing sink, on arrays of another library."""
        before = Y[:, 0] < xp.min(X[:, 0])
        if bool(xp.any(before)):
            i = int(xp.argmax(xp.astype(before, xp.int32)))  # the first such query
            raise ValueError(
                f"query {i} (position {float(Y[i, 0]):.3g}) sees no token of positive weight; "
                "give a positive weight to a token at or before it."
            )
        raise ValueError("`X` must hold a token of positive weight at position 0 when `sink=True`.")

    def _matrix(self, X, t, w):
        A, _, Xk, wk = self._prepare(X, X, t, w)
        F = self.beta * (X[:, 1:] @ A.T)
        return scatter_columns(causal_matrix(F, Xk[:, 1:], wk, X[:, 0], Xk[:, 0]), w)


def is_masked(field: AttentionField) -> bool:
    """Whether `field` is masked attention on tokens with positions: a ``Causal`` head, or a
    ``MultiHead`` of such heads (positions in column 0, never moving)."""
    if isinstance(field, MultiHead):
        return all(is_masked(h) for h in field.heads)
    return isinstance(field, Causal)


def check_fixed_positions(Wh: np.ndarray, h: int) -> None:
    """Refuse an output matrix of a masked head that would move the positions.

    A masked head's velocity is 0 in column 0, so ``v @ Wh.T`` keeps the positions fixed iff
    the first row of ``Wh`` vanishes off the diagonal; the content then moves by
    ``Wh[1:, 1:]``."""
    if np.any(Wh[0, 1:] != 0):
        raise ValueError(
            f"`W[{h}]` moves the positions of a masked head: its first row must be zero after "
            f"column 0 (got {Wh[0, 1:]!r}). Act on the content only, e.g. "
            "`scipy.linalg.block_diag(1, W_content)`."
        )


def with_positions(
    X: ArrayLike, *, positions: ArrayLike | None = None, n_sink: int = 0
) -> np.ndarray:
    r"""Prepend a position column to tokens, for :class:`Causal`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Token contents.
    positions : array_like, shape (n,), optional
        Positions in :math:`[0, 1]`; default :math:`s_i = (i - 1)/n` (or, with ``n_sink``
        sink tokens, 0 for the first ``n_sink`` rows and equally spaced in :math:`(0, 1)` after).
    n_sink : int
        Number of leading tokens placed at position 0 (an attention-sink block).

    Returns
    -------
    ndarray, shape (n, 1 + d)

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals, both `positions` and `n_sink` are given,
        `n_sink` exceeds ``n`` or a position lies outside ``[0, 1]``.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025 (tokens with a position
    coordinate for masked attention).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import with_positions
    >>> with_positions(np.zeros((4, 1)), n_sink=2)[:, 0]
    array([0.        , 0.        , 0.33333333, 0.66666667])
    """
    X = as_tokens(X)
    n = X.shape[0]
    n_sink = check_int(n_sink, "n_sink", minimum=0)
    if n_sink > n:
        raise ValueError(f"`n_sink` must be at most the number of tokens ({n}); got {n_sink}.")
    if positions is None:
        if n_sink == 0:
            s = np.arange(n) / n
        else:
            s = np.concatenate([np.zeros(n_sink), np.arange(1, n - n_sink + 1) / (n - n_sink + 1)])
    else:
        if n_sink:
            raise ValueError("Pass either `positions` or `n_sink`, not both.")
        s = as_vector(positions, "positions", size=n)
        if np.any(s < 0) or np.any(s > 1):
            raise ValueError("`positions` must lie in [0, 1].")
    return np.column_stack([s, X])


#: Names accepted by :func:`make_field`, in the order the book shows them.
VARIANTS = ("softmax", "unnormalised", "hardmax", "l2", "sinkhorn", "sigmoid", "linear")


def make_field(
    variant: str,
    d: int,
    *,
    beta: float = 1.0,
    A: ArrayLike | None = None,
    V: ArrayLike | None = None,
) -> AttentionField:
    r"""Build one attention variant from a name, with :math:`A = V = I_d` by default.

    ``beta`` plays the role of an inverse temperature in each: the softmax and USA ``beta``;
    the Sinkhorn :math:`\varepsilon = 1/\beta`; the l2 width :math:`s = 1/\beta` with
    :math:`\bar Q = A`, :math:`\bar K = I`; sigmoid and linear use :math:`\beta A`; hardmax
    ignores it.

    Parameters
    ----------
    variant : str
        One of :data:`VARIANTS`.
    d : int
        Token dimension.
    beta : float
        Inverse temperature, positive.
    A, V : array_like, shape (d, d), optional

    Returns
    -------
    AttentionField

    Raises
    ------
    ValueError
        If `variant` is not one of :data:`VARIANTS`, `d` is not a positive integer, `beta` is not
        positive or `A`, `V` are not ``(d, d)``.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025 (the variants).

    Examples
    --------
    >>> from token_dynamics.attention import make_field
    >>> type(make_field("sinkhorn", 2, beta=4.0)).__name__, make_field("sinkhorn", 2, beta=4.0).eps
    ('Sinkhorn', 0.25)
    """
    from .._validation import check_positive

    d = check_int(d, "d")
    beta = check_positive(beta, "beta")
    A = np.eye(d) if A is None else as_matrix(A, "A", shape=(d, d))
    V = np.eye(d) if V is None else as_matrix(V, "V", shape=(d, d))
    builders = {
        "softmax": lambda: Softmax(A, V, beta),
        "unnormalised": lambda: Unnormalised(A, V, beta),
        "hardmax": lambda: Hardmax(A, V),
        "l2": lambda: L2(A, np.eye(d), V, s=1.0 / beta),
        "sinkhorn": lambda: Sinkhorn(A, V, eps=1.0 / beta),
        "sigmoid": lambda: Sigmoid(beta * A, V),
        "linear": lambda: Linear(beta * A, V),
    }
    if not isinstance(variant, str) or variant not in builders:
        raise ValueError(f"`variant` must be one of {VARIANTS}; got {variant!r}.")
    if variant in ("l2", "sinkhorn") and not math.isfinite(1.0 / beta):
        raise ValueError(
            f"`beta` = {beta!r} makes the {variant} temperature 1/beta infinite; pass a larger "
            "`beta`."
        )
    return builders[variant]()
