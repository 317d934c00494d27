"""L2 self-attention: a Gaussian kernel of query-key distances (private)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._linalg import power_of_two_scale
from .._validation import check_positive
from ._array_api import run, scores_in_range, softmax_velocity
from ._base import (
    AttentionField,
    Parameter,
    eval_parameter,
    finite_result,
    init_parameter,
    known_dim,
    positive_keys,
    scatter_columns,
    weighted_values,
    xp_parameter,
)
from ._kernels import apply_rows, matrix_rows
from ._softmax import softmax_transform

__all__ = ["L2"]


@dataclass(frozen=True, eq=False)
class L2(AttentionField):
    r"""L2 self-attention: Gaussian kernel of the distance between queries and keys.

    .. math::

        \Gamma_\mu(x) = \frac{\int e^{-|\bar Q x - \bar K y|^2/s}\, V y\, d\mu(y)}
                             {\int e^{-|\bar Q x - \bar K y|^2/s}\, d\mu(y)} .

    The term :math:`|\bar Q x|^2` cancels in the normalisation and is never computed, so the
    scores are :math:`(2\langle \bar Q x_i, \bar K x_j\rangle - |\bar K x_j|^2)/s`.
    Castin's code uses :math:`s = 1`, :math:`\bar Q = Q/\sqrt d`, :math:`\bar K = K`.

    Arrays: numpy; in ``velocity`` and ``velocity_at`` (so as the right-hand side of
    ``integrate``) also torch, JAX, CuPy or any array-API library, the result in the caller's
    array type, device and float dtype; ``attention_matrix`` takes numpy arrays.

    Parameters
    ----------
    Qbar, Kbar : array_like, shape (k, d), or callable ``t -> (k, d)``
    V : array_like, shape (d, d), or callable ``t -> (d, d)``
    s : float
        Width (temperature) of the Gaussian kernel, positive.

    References
    ----------
    H. Kim, G. Papamakarios, A. Mnih, *The Lipschitz Constant of Self-Attention*, ICML 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import L2
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> P = L2(np.eye(2), np.eye(2), np.eye(2)).attention_matrix(X)
    >>> np.round(P, 4)      # e^{-1} / (1 + e^{-1})
    array([[0.7311, 0.2689],
           [0.2689, 0.7311]])
    """

    Qbar: Parameter
    Kbar: Parameter
    V: Parameter
    s: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "Qbar", init_parameter(self.Qbar, "Qbar", square=False))
        object.__setattr__(self, "Kbar", init_parameter(self.Kbar, "Kbar", square=False))
        object.__setattr__(self, "V", init_parameter(self.V, "V"))
        object.__setattr__(self, "s", check_positive(self.s, "s"))
        # the constant parameters agree at once: Qbar, Kbar (k, d), V (d, d)
        shapes = {"Qbar": self.Qbar, "Kbar": self.Kbar, "V": self.V}
        fixed = {k: P.shape for k, P in shapes.items() if not callable(P)}
        dims = {k: shape[1] for k, shape in fixed.items()}
        heads = {k: shape[0] for k, shape in fixed.items() if k != "V"}
        if len(set(dims.values())) > 1 or len(set(heads.values())) > 1:
            got = ", ".join(f"{k} {shape}" for k, shape in fixed.items())
            raise ValueError(
                f"`Qbar` and `Kbar` must be (k, d) and `V` (d, d), for the same k and d; got {got}."
            )

    def _dim(self) -> int | None:
        return known_dim((self.V, 0), (self.Qbar, 1), (self.Kbar, 1))

    def _parts(
        self, Y: np.ndarray, X: np.ndarray, t: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """``F, G, bias`` of the scores and the exponent ``e`` of their scale (true scores
        ``(F G^T + bias) * 2**e``): tokens too long for the squared norms of the bias are
        rescaled by a power of two (exact), once for queries and keys."""
        d = X.shape[1]
        Qb = eval_parameter(self.Qbar, "Qbar", t, (None, d), X.dtype)
        Kb = eval_parameter(self.Kbar, "Kbar", t, (Qb.shape[0], d), X.dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            F, G = (2.0 / self.s) * (Y @ Qb.T), X @ Kb.T
            bias = -np.einsum("ij,ij->i", G, G) / self.s
            fits = np.isfinite(F).all() and np.isfinite(bias).all()
        if fits:
            return F, G, bias, 0
        c = int(np.frexp(float(power_of_two_scale(np.concatenate([Y, X]))))[1]) - 1
        Y, X = np.ldexp(Y, -c).astype(Y.dtype), np.ldexp(X, -c).astype(X.dtype)
        with float_guard("the L2 attention scores", "scale `Qbar`, `Kbar` or `s` to moderate"):
            F, G = (2.0 / self.s) * (Y @ Qb.T), X @ Kb.T
            bias = -np.einsum("ij,ij->i", G, G) / self.s
        return F, G, bias, 2 * c

    def _velocity_at(self, Y, X, t, w):
        V = eval_parameter(self.V, "V", t, (X.shape[1], X.shape[1]), X.dtype)
        Xk, wk = positive_keys(X, w)
        F, G, bias, e = self._parts(Y, Xk, t)
        R = weighted_values(Xk, V, np.ones_like(wk))  # the weights apart: see apply_rows
        return apply_rows(
            F, G, R, softmax_transform, bias=bias, weights=wk, normalise=True, log2_scale=e
        )

    def _velocity_xp(self, xp, Y, X, t, w):
        d = X.shape[1]
        QbT = xp_parameter(xp, self.Qbar, "Qbar", t, (None, d), X, transpose=True)
        KbT = xp_parameter(xp, self.Kbar, "Kbar", t, (QbT.shape[1], d), X, transpose=True)
        VT = xp_parameter(xp, self.V, "V", t, (d, d), X, transpose=True)
        F = xp.matmul(Y, QbT) * (2.0 / self.s)
        G = xp.matmul(X, KbT)
        bias = -xp.sum(G * G, axis=1) / self.s
        if w is not None:
            bias = bias + xp.log(w)
        R = xp.matmul(X, VT)
        out = softmax_velocity(xp, F, G, R, bias)
        ok = run(xp, scores_in_range, F, G, bias)
        return finite_result(xp, out, "the L2 attention velocity", in_range=ok)

    def _matrix(self, X, t, w):
        eval_parameter(self.V, "V", t, (X.shape[1], X.shape[1]))
        Xk, wk = positive_keys(X, w)
        F, G, bias, e = self._parts(X, Xk, t)
        P = matrix_rows(F, G, wk, softmax_transform, bias=bias, normalise=True, log2_scale=e)
        return scatter_columns(P, w)
