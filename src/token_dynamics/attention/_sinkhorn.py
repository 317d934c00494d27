"""Sinkhorn (doubly stochastic) attention: the velocity field of the entropic self-plan (private).

The plan itself, its solver and its failure classes are in :mod:`._sinkhorn_plan`; they are
re-exported here, the attention package's one entry for Sinkhorn.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .._backend import device, has_float64, to_namespace
from .._typing import ArrayLike
from .._validation import as_weights, check_bool, check_int, check_positive, time_text
from . import _kernels as K_
from ._array_api import run, scores_in_range, softmax_velocity
from ._base import (
    XP_RANGE_FIX,
    AttentionField,
    Parameter,
    check_time,
    eval_parameter,
    finite_result,
    init_parameter,
    known_dim,
    positive_keys,
    scatter_columns,
    weighted_values,
)
from ._sinkhorn_array_api import sinkhorn_potential
from ._sinkhorn_plan import (
    SINKHORN_MAX_ITER,
    SYMMETRY_RTOL,
    SinkhornConvergenceError,
    SinkhornConvergenceWarning,
    SinkhornPlan,
    sinkhorn_plan,
)

__all__ = [
    "SINKHORN_MAX_ITER",
    "Sinkhorn",
    "SinkhornConvergenceError",
    "SinkhornConvergenceWarning",
    "SinkhornPlan",
    "sinkhorn_plan",
]


def _weights64(w: np.ndarray) -> np.ndarray:
    """float32 weights back in float64, summing to one again (their rounding undone)."""
    w = w.astype(np.float64)
    return w / w.sum()


@dataclass(frozen=True, eq=False)
class Sinkhorn(AttentionField):
    r"""Sinkhorn attention: the doubly stochastic (entropic optimal transport) attention.

    .. math::

        \Gamma_\mu(x) = \int \pi_\mu(x, y)\, V y\, d\mu(y),\qquad
        \pi_\mu(x, y) = e^{(f(x) + g(y) + \langle Ax, y\rangle)/\varepsilon},

    where :math:`\pi_\mu` is the density, with respect to :math:`\mu\otimes\mu`, of the entropic
    transport plan from :math:`\mu` to itself for the cost :math:`-\langle Ax, y\rangle`. For
    tokens, ``attention_matrix`` is the plan with rows divided by the weights (``n P`` for
    uniform weights): rows sum to one exactly, and :math:`\sum_i w_i P_{ij} = w_j` within the
    solver's tolerance (columns sum to one for uniform weights). At other query points the
    field uses the potential's extension (a softmax with key biases ``g_j``).

    A plan that misses ``tol`` after ``max_iter`` iterations emits a
    :class:`SinkhornConvergenceWarning` (``strict=False``) or raises
    :class:`SinkhornConvergenceError` (``strict=True``). Memory is :math:`O(n^2)`. The plan is
    solved in float64 whatever the ``dtype`` of a call (a marginal tolerance of 1e-9 is below
    float32's resolution); a float32 call returns its result in float32.

    Arrays: numpy; in ``velocity`` and ``velocity_at`` (so as the right-hand side of
    ``integrate``) also torch, JAX, CuPy or any array-API library, the result in the caller's
    array type, device and float dtype, its plan solved in float64 on the caller's device (a
    library without float64 there is refused by name), by the same iterates and the same test
    of convergence (the marginal error of the plan itself) as on numpy (its kernel stored while
    it fits 1 GiB, else recomputed in blocks at each update); ``plan`` and ``attention_matrix``
    take numpy arrays.

    Parameters
    ----------
    A, V : array_like, shape (d, d), or callable ``t -> (d, d)``
    eps : float
        Entropic regularisation (temperature), positive.
    tol : float
        :math:`\ell^1` tolerance on the marginals of the plan.
    max_iter : int
    strict : bool
        Raise instead of warn when the plan did not converge.

    References
    ----------
    M. E. Sander, P. Ablin, M. Blondel, G. Peyré, *Sinkformers: Transformers with Doubly
    Stochastic Attention*, AISTATS 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Sinkhorn
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> P = Sinkhorn(np.eye(2), np.eye(2)).attention_matrix(X)
    >>> np.allclose(P.sum(axis=0), 1.0), np.allclose(P.sum(axis=1), 1.0)
    (True, True)
    """

    A: Parameter
    V: Parameter
    eps: float = 1.0
    tol: float = 1e-9
    max_iter: int = SINKHORN_MAX_ITER
    strict: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "A", init_parameter(self.A, "A"))
        object.__setattr__(self, "V", init_parameter(self.V, "V"))
        object.__setattr__(self, "eps", check_positive(self.eps, "eps"))
        object.__setattr__(self, "tol", check_positive(self.tol, "tol"))
        object.__setattr__(self, "max_iter", check_int(self.max_iter, "max_iter"))
        check_bool(self.strict, "strict")

    def _dim(self) -> int | None:
        return known_dim((self.A, 0), (self.V, 0))

    def plan(
        self, X: ArrayLike, t: float = 0.0, *, weights: ArrayLike | None = None
    ) -> SinkhornPlan:
        """Sinkhorn plan of the tokens' measure with itself (no warning; read ``converged``).

        Parameters
        ----------
        X : array_like, shape (n, d)
        t : float
        weights : array_like, shape (n,), optional

        Returns
        -------
        SinkhornPlan
            Plan over the tokens of positive weight.

        Examples
        --------
        >>> import numpy as np
        >>> from token_dynamics.attention import Sinkhorn
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
        >>> Sinkhorn(np.eye(2), np.eye(2)).plan(X).converged
        True
        """
        X = self._tokens(X)
        w = as_weights(weights, X.shape[0])
        return self._plan(*positive_keys(X, w), check_time(t))

    def _plan(self, Xk, wk, t):
        d = Xk.shape[1]
        A = eval_parameter(self.A, "A", t, (d, d))
        with np.errstate(over="ignore", invalid="ignore"):
            S = (Xk @ A.T) @ Xk.T
        if not np.all(np.isfinite(S)):
            raise FloatingPointError(
                "the Sinkhorn scores <A x_i, x_j> left the float range; scale the tokens `X` "
                "or `A` down."
            )
        return sinkhorn_plan(S, self.eps, a=wk, b=wk, tol=self.tol, max_iter=self.max_iter)

    def _checked_plan(self, Xk, wk, t):
        res = self._plan(Xk, wk, t)
        if not res.converged:
            msg = self._unconverged(t, res.marginal_error, res.n_iter)
            if self.strict:
                raise SinkhornConvergenceError(msg)
            warnings.warn(msg, SinkhornConvergenceWarning, stacklevel=4)
        return res

    def _unconverged(self, t: float, error: float, n_iter: int) -> str:
        """The message of a plan that missed ``tol`` (warned, or raised with ``strict``)."""
        return (
            f"Sinkhorn attention did not converge at t = {time_text(t)}: marginal error "
            f"{error:.3g} > tol = {self.tol:g} after {n_iter} iterations. "
            "Increase `max_iter` or `eps`, or loosen `tol`."
        )

    def _velocity_xp(self, xp, Y, X, t, w):
        if not has_float64(xp, X):
            raise TypeError(
                "Sinkhorn solves its plan in float64, which the array library of `X` lacks on "
                "its device; enable it (JAX: `jax.config.update('jax_enable_x64', True)`), or "
                "pass `np.asarray(X)`."
            )
        d, dtype = X.shape[1], X.dtype
        A_np = eval_parameter(self.A, "A", t, (d, d))
        V_np = eval_parameter(self.V, "V", t, (d, d))
        # symmetric A gives symmetric scores: the numpy solver's test, on the d x d factor
        symmetric = bool(np.all(np.abs(A_np - A_np.T) <= SYMMETRY_RTOL * np.abs(A_np).max()))
        X64 = xp.astype(X, xp.float64)
        Y64 = X64 if Y is X else xp.astype(Y, xp.float64)
        A, V = (to_namespace(xp, P, X64, xp.float64) for P in (A_np, V_np))
        n = X.shape[0]
        log_w = xp.full((n,), -math.log(n), dtype=xp.float64, device=device(X))
        if w is not None:
            log_w = xp.log(xp.astype(w, xp.float64) / xp.sum(xp.astype(w, xp.float64)))
        v, n_iter, converged, error = sinkhorn_potential(
            xp, X64, A, log_w, self.eps, self.tol, self.max_iter, symmetric=symmetric
        )
        if not math.isfinite(error):
            raise FloatingPointError(
                f"the Sinkhorn potentials left the float range at eps = {self.eps:g}; "
                f"increase `eps`, or {XP_RANGE_FIX}."
            )
        if not converged:
            msg = self._unconverged(t, error, n_iter)
            if self.strict:
                raise SinkhornConvergenceError(msg)
            warnings.warn(msg, SinkhornConvergenceWarning, stacklevel=4)
        F = xp.matmul(Y64, xp.matrix_transpose(A)) / self.eps
        R = xp.matmul(X64, xp.matrix_transpose(V))
        bias = v + log_w
        out = xp.astype(softmax_velocity(xp, F, X64, R, bias), dtype)
        ok = run(xp, scores_in_range, F, X64, bias)  # the queries may lie elsewhere
        return finite_result(xp, out, "the Sinkhorn attention velocity", in_range=ok)

    def _velocity_at(self, Y, X, t, w):
        if X.dtype != np.float64:  # the plan is solved in float64 (see the class docstring)
            Y64, X64 = Y.astype(np.float64), X.astype(np.float64)
            return self._velocity_at(Y64, X64, t, _weights64(w)).astype(X.dtype)
        d = X.shape[1]
        A = eval_parameter(self.A, "A", t, (d, d))
        V = eval_parameter(self.V, "V", t, (d, d))
        Xk, wk = positive_keys(X, w)
        res = self._checked_plan(Xk, wk, t)
        R = weighted_values(Xk, V, np.ones_like(wk))  # the weights apart: see apply_rows
        F = (Y @ A.T) / self.eps
        g = res.g / self.eps
        return K_.apply_rows(F, Xk, R, K_.softmax_transform, bias=g, weights=wk, normalise=True)

    def _matrix(self, X, t, w):
        if X.dtype != np.float64:
            return self._matrix(X.astype(np.float64), t, _weights64(w)).astype(X.dtype)
        Xk, wk = positive_keys(X, w)
        d = X.shape[1]
        A = eval_parameter(self.A, "A", t, (d, d))
        eval_parameter(self.V, "V", t, (d, d))
        res = self._checked_plan(Xk, wk, t)
        F = (X @ A.T) / self.eps
        P = K_.matrix_rows(F, Xk, wk, K_.softmax_transform, bias=res.g / self.eps, normalise=True)
        return scatter_columns(P, w)
