"""Sinkhorn (doubly stochastic) attention and the log-domain Sinkhorn solver (private)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp

from .._typing import ArrayLike
from .._validation import as_matrix, as_weights, check_bool, check_int, check_positive
from . import _kernels as K_
from ._base import (
    AttentionField,
    Parameter,
    check_time,
    eval_parameter,
    init_parameter,
    known_dim,
    positive_keys,
    scatter_columns,
)
from ._softmax import EXP_FLOOR

__all__ = [
    "Sinkhorn",
    "SinkhornConvergenceError",
    "SinkhornConvergenceWarning",
    "SinkhornPlan",
    "sinkhorn_plan",
]

#: Default cap on Sinkhorn iterations: at eps ~ the score spread, log-domain Sinkhorn reaches
#: marginal errors of 1e-9 in tens to a few hundred iterations; 1000 leaves a wide margin while
#: bounding the cost of a non-converging call.
SINKHORN_MAX_ITER = 1000


class SinkhornConvergenceWarning(RuntimeWarning):
    """Sinkhorn stopped at ``max_iter`` with a marginal error above ``tol``."""


class SinkhornConvergenceError(FloatingPointError, RuntimeError):
    """Raised instead of the warning by ``Sinkhorn(..., strict=True)``.

    A ``FloatingPointError`` (non-convergence, the library's failure policy) that is also a
    ``RuntimeError``, as it was before.
    """


@dataclass(frozen=True, eq=False)
class SinkhornPlan:
    r"""Result of :func:`sinkhorn_plan`.

    Attributes
    ----------
    plan : ndarray, shape (n, m)
        Entropic transport plan :math:`\pi_{ij} = a_i b_j e^{(f_i + g_j + S_{ij})/\varepsilon}`;
        its marginals are ``a`` and ``b`` within ``marginal_error`` (the rows exactly, up to
        rounding, in the non-symmetric case).
    converged : bool
        Whether ``marginal_error <= tol`` was reached within ``max_iter`` iterations.
    n_iter : int
        Number of (column, row) update pairs performed.
    marginal_error : float
        :math:`\max(\|\pi 1 - a\|_1, \|\pi^\top 1 - b\|_1)`.
    f, g : ndarray, shapes (n,) and (m,)
        Dual potentials.

    References
    ----------
    G. Peyré, M. Cuturi, *Computational Optimal Transport*, 2019, §4.4.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import sinkhorn_plan
    >>> sinkhorn_plan(np.zeros((2, 2)), 1.0).plan
    array([[0.25, 0.25],
           [0.25, 0.25]])
    """

    plan: np.ndarray
    converged: bool
    n_iter: int
    marginal_error: float
    f: np.ndarray
    g: np.ndarray


def _log(w: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(w)


#: Relative asymmetry of a score matrix below which it counts as symmetric (round-off of
#: ``X @ A.T @ X.T`` with a symmetric ``A``: a few ulps per product, d products per entry).
SYMMETRY_RTOL = 1e-12


#: Side of the square tiles in which a matrix is compared with, or averaged with, its transpose:
#: two 256 x 256 float64 tiles (1 MiB) stay in cache, where a whole transposed pass over a large
#: matrix reads memory with a stride (measured 6 s for the whole-matrix check at n = 4096 under
#: load, against tens of milliseconds by tiles).
TRANSPOSE_TILE = 256


def _tile_pairs(n: int):
    ts = [slice(i, min(i + TRANSPOSE_TILE, n)) for i in range(0, n, TRANSPOSE_TILE)]
    return [(r, c) for i, r in enumerate(ts) for c in ts[i:]]


def _is_symmetric(S: np.ndarray) -> bool:
    """Whether ``S`` equals its transpose to :data:`SYMMETRY_RTOL`, tile by tile (a
    non-symmetric matrix usually stops at its first tile)."""
    if S.shape[0] != S.shape[1]:
        return False
    tol = SYMMETRY_RTOL * max(1.0, float(np.abs(S).max()))
    for r, c in _tile_pairs(S.shape[0]):
        if not np.all(np.abs(S[r, c] - S[c, r].T) <= tol):
            return False
    return True


def _symmetrize(M: np.ndarray) -> np.ndarray:
    """``(M + M^T) / 2`` in place, tile by tile; returns ``M``."""
    for r, c in _tile_pairs(M.shape[0]):
        T = (M[r, c] + M[c, r].T) / 2
        M[r, c] = T
        M[c, r] = T.T
    return M


def _alternating_iterations(K, log_a, log_b, tol, max_iter):
    """Alternate exact row and column updates; stop on the column error (rows are exact)."""
    # potentials in units of eps: u = f / eps, v = g / eps
    v = np.zeros(K.shape[1])
    u = -logsumexp(K + log_b[None, :], axis=1)
    n_iter = 0
    while True:
        L = logsumexp(K + (u + log_a)[:, None], axis=0)  # column log-sums of the current plan
        if float(np.sum(np.abs(np.exp(log_b) * np.expm1(v + L)))) <= tol:
            return u, v, n_iter, True
        if n_iter >= max_iter:
            return u, v, n_iter, False
        v = -L
        u = -logsumexp(K + (v + log_b)[None, :], axis=1)
        n_iter += 1


def _symmetric_iterations(K, log_a, tol, max_iter):
    """Averaged symmetric updates ``u <- (u + T(u)) / 2`` for a symmetric problem.

    With ``f = g`` the plan stays exactly symmetric; averaging converges in a few tens of
    iterations even at small ``eps``, where the alternating updates crawl (Feydy et al., 2019).
    """
    u = np.zeros(K.shape[0])
    a = np.exp(log_a)
    n_iter = 0
    while True:
        T = -logsumexp(K + (u + log_a)[None, :], axis=1)
        if float(np.sum(np.abs(a * np.expm1(u - T)))) <= tol:  # row (= column) error
            return u, n_iter, True
        if n_iter >= max_iter:
            return u, n_iter, False
        u = (u + T) / 2
        n_iter += 1


#: The scaling iterations keep the plan as ``diag(alpha) P diag(beta)`` with a stored kernel
#: ``P`` (the plan at the last absorbed potentials); once a scaling leaves
#: ``[e^-ABSORB_LOG, e^ABSORB_LOG]`` it is absorbed into the potentials and ``P`` is rebuilt
#: (one exp pass). e^30 ~ 1e13 keeps every product ``P @ beta`` far from over- and underflow
#: while absorptions stay rare (one per solve, measured at eps = 0.1, spreads of 100-200 eps).
ABSORB_LOG = 30.0


def _absorbed_kernel(K, u, v, log_a, log_b):
    """``a_i b_j e^{K_ij + u_i + v_j}``: the plan at potentials ``(u, v)``, exponents clamped at
    ``EXP_FLOOR`` (a normal double; entries below it are far under any marginal tolerance and
    exp would otherwise take its slow subnormal path)."""
    E = np.add(K, (u + log_a)[:, None])
    E += (v + log_b)[None, :]
    np.maximum(E, EXP_FLOOR, out=E)
    return np.exp(E, out=E)


def _out_of_range(x: np.ndarray) -> bool:
    hi = np.exp(ABSORB_LOG)
    return not (x.min() >= 1.0 / hi and x.max() <= hi)  # also catches nan


def _alternating_scaling(K, log_a, log_b, tol, max_iter):
    """Alternating Sinkhorn as matrix-vector scalings of an absorbed kernel (log-stabilised).

    Same iterates as :func:`_alternating_iterations` (exact row update, stop on the column
    error), at the cost of two matrix-vector products per iteration, as plain scaling; the
    potentials absorb the scalings whenever these leave ``e^(+-ABSORB_LOG)``. The kernel is
    first built at ``u = -max_j K_ij`` (every row keeps a term of 1: no row underflows) and the
    first row update is a product with it. Falls back to the log-sum-exp iterations if a
    scaling turns non-finite (scores spread over ~700 eps). Returns the potentials, the
    iteration count, the convergence flag and the plan (``None`` after a fallback).
    """
    a, b = np.exp(log_a), np.exp(log_b)
    u, v = -K.max(axis=1), np.zeros(K.shape[1])
    P = _absorbed_kernel(K, u, v, log_a, log_b)
    beta = np.ones(K.shape[1])
    alpha = a / (P @ beta)  # the exact row update: rows of the plan sum to a
    n_iter = 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        while True:
            if _out_of_range(alpha) or _out_of_range(beta):
                if not (np.all(np.isfinite(alpha)) and np.all(np.isfinite(beta))):
                    return (*_alternating_iterations(K, log_a, log_b, tol, max_iter), None)
                if not (np.all(alpha > 0) and np.all(beta > 0)):
                    return (*_alternating_iterations(K, log_a, log_b, tol, max_iter), None)
                u, v = u + np.log(alpha), v + np.log(beta)
                P = _absorbed_kernel(K, u, v, log_a, log_b)
                alpha, beta = np.ones_like(alpha), np.ones_like(beta)
            c = P.T @ alpha  # column sums of the plan, divided by beta
            if float(np.sum(np.abs(beta * c - b))) <= tol or n_iter >= max_iter:
                converged = float(np.sum(np.abs(beta * c - b))) <= tol
                P *= alpha[:, None]
                P *= beta[None, :]
                return u + np.log(alpha), v + np.log(beta), n_iter, converged, P
            np.divide(b, c, out=beta)
            np.divide(a, P @ beta, out=alpha)
            n_iter += 1


def _symmetric_scaling(K, log_a, tol, max_iter):
    """:func:`_symmetric_iterations` as scalings of an absorbed symmetric kernel.

    With ``P = a_i a_j e^{K_ij + u_i + u_j}`` and the plan ``diag(alpha) P diag(alpha)``, the
    averaged update ``w <- (w + T(w)) / 2`` of the potential ``w = u + log(alpha)`` reads
    ``alpha <- sqrt(alpha * a / (P alpha))``: one matrix-vector product per iteration. The
    kernel is first built at ``u_i = -max_j K_ij / 2``, so that no entry exceeds ``a_i a_j``
    (``K_ij <= (m_i + m_j) / 2``). Returns the potential, the iteration count, the convergence
    flag and the plan (``None`` after a fallback).
    """
    a = np.exp(log_a)
    u = -K.max(axis=1) / 2
    P = _absorbed_kernel(K, u, u, log_a, log_a)  # symmetric up to the rounding of the sums
    alpha = np.ones(K.shape[0])
    n_iter = 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        while True:
            if _out_of_range(alpha):
                if not (np.all(np.isfinite(alpha)) and np.all(alpha > 0)):
                    return (*_symmetric_iterations(K, log_a, tol, max_iter), None)
                u = u + np.log(alpha)
                P = _absorbed_kernel(K, u, u, log_a, log_a)
                alpha = np.ones_like(alpha)
            r = P @ alpha  # row sums of the plan, divided by alpha
            if float(np.sum(np.abs(alpha * r - a))) <= tol or n_iter >= max_iter:
                converged = float(np.sum(np.abs(alpha * r - a))) <= tol
                P *= alpha[:, None]
                P *= alpha[None, :]
                return u + np.log(alpha), n_iter, converged, _symmetrize(P)  # exactly
            alpha *= a
            alpha /= r
            np.sqrt(alpha, out=alpha)
            n_iter += 1


def sinkhorn_plan(
    S: Any,
    eps: float,
    *,
    a: Any = None,
    b: Any = None,
    tol: float = 1e-9,
    max_iter: int = SINKHORN_MAX_ITER,
) -> SinkhornPlan:
    r"""Entropic optimal transport plan for the cost :math:`-S`, in the log domain.

    Solves :math:`\max_\pi \langle \pi, S\rangle - \varepsilon\,\mathrm{KL}(\pi \,|\, a\otimes b)`
    over couplings of ``a`` and ``b`` by alternating exact updates of the dual potentials,

    .. math::

        g_j = -\varepsilon \log \sum_i a_i e^{(f_i + S_{ij})/\varepsilon},\qquad
        f_i = -\varepsilon \log \sum_j b_j e^{(g_j + S_{ij})/\varepsilon},

    computed in the log-stabilised scaling form: the plan at the current potentials is stored,
    each update is a matrix-vector product with it (the cost of plain Sinkhorn scaling), and the
    scalings are absorbed into the potentials before they can over- or underflow, so no
    exponential leaves the float64 range whatever :math:`S/\varepsilon` (plain log-sum-exp
    updates take over if a scaling still turns non-finite, or when a weight is zero).
    Stops when the column marginal is within ``tol`` in :math:`\ell^1` (the rows are exact after
    each update). When ``S`` is symmetric (to round-off) and ``a = b`` (self-attention with a
    symmetric ``A``), the symmetric averaged update :math:`f \leftarrow (f + T(f))/2` with
    :math:`g = f` is used instead: the plan is then exactly symmetric, and convergence takes a
    few tens of iterations even at small :math:`\varepsilon`. Non-convergence is reported in
    the result, not raised.

    Memory: two ``(n, m)`` float64 arrays, the scores (our copy, divided by
    :math:`\varepsilon` in place) and the kernel, kept for the matrix-vector products and
    scaled in place into the returned plan (one more while the kernel is rebuilt after an
    absorption). The plan is returned dense, so streaming the kernel tile by tile would not
    lower this peak; it would only recompute ``n m`` exponentials at every iteration.

    Parameters
    ----------
    S : array_like, shape (n, m)
        Scores (the cost is ``-S``).
    eps : float
        Entropic regularisation, positive.
    a, b : array_like, shapes (n,) and (m,), optional
        Marginals (probability vectors); uniform if ``None``.
    tol : float
        Target :math:`\ell^1` error on the marginals.
    max_iter : int
        Maximum number of iterations.

    Returns
    -------
    SinkhornPlan

    Raises
    ------
    ValueError
        If `S` is not a 2-D array of finite reals, `a` or `b` are not probability weights of its
        sizes, or `eps`, `tol` or `max_iter` are not positive.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    M. E. Sander, P. Ablin, M. Blondel, G. Peyré, *Sinkformers: Transformers with Doubly
    Stochastic Attention*, AISTATS 2022. G. Peyré, M. Cuturi, *Computational Optimal Transport*,
    2019, §4.4. B. Schmitzer, *Stabilized Sparse Scaling Algorithms for Entropy Regularized
    Transport Problems*, SIAM J. Sci. Comput. 41(3), 2019 (absorption of the scalings).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import sinkhorn_plan
    >>> S = np.array([[2.0, 0.0], [0.0, 2.0]])
    >>> res = sinkhorn_plan(S, 1.0)
    >>> res.converged, np.allclose(res.plan.sum(axis=0), 0.5)
    (True, True)
    """
    S = as_matrix(S, "S")
    n, m = S.shape
    eps = check_positive(eps, "eps")
    a = as_weights(a, n, "a")
    b = as_weights(b, m, "b")
    tol = check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    log_a, log_b = _log(a), _log(b)
    symmetric = n == m and np.array_equal(a, b) and _is_symmetric(S)
    # the scaling iterations need positive weights (a zero weight is a -inf potential)
    scaling = bool(np.all(a > 0) and np.all(b > 0))
    K = np.divide(S, eps, out=S)  # S is our own validated copy
    plan = None
    if symmetric:
        K = _symmetrize(K)
        if scaling:
            u, n_iter, converged, plan = _symmetric_scaling(K, log_a, tol, max_iter)
        else:
            u, n_iter, converged = _symmetric_iterations(K, log_a, tol, max_iter)
        v = u
    elif scaling:
        u, v, n_iter, converged, plan = _alternating_scaling(K, log_a, log_b, tol, max_iter)
    else:
        u, v, n_iter, converged = _alternating_iterations(K, log_a, log_b, tol, max_iter)
    if plan is None:  # after the log-sum-exp iterations
        with np.errstate(under="ignore"):
            plan = np.exp(K + (u + log_a)[:, None] + (v + log_b)[None, :])
        if symmetric:
            plan = _symmetrize(plan)  # equal already, up to the rounding of the sums
    err = max(
        float(np.sum(np.abs(plan.sum(axis=1) - a))), float(np.sum(np.abs(plan.sum(axis=0) - b)))
    )
    f, g = eps * u, eps * v
    return SinkhornPlan(plan, converged, n_iter, err, f, g)


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
        S = (Xk @ A.T) @ Xk.T
        return sinkhorn_plan(S, self.eps, a=wk, b=wk, tol=self.tol, max_iter=self.max_iter)

    def _checked_plan(self, Xk, wk, t):
        res = self._plan(Xk, wk, t)
        if not res.converged:
            msg = (
                f"Sinkhorn attention did not converge at t = {t:g}: marginal error "
                f"{res.marginal_error:.3g} > tol = {self.tol:g} after {res.n_iter} iterations. "
                "Increase `max_iter` or `eps`, or loosen `tol`."
            )
            if self.strict:
                raise SinkhornConvergenceError(msg)
            warnings.warn(msg, SinkhornConvergenceWarning, stacklevel=4)
        return res

    def _velocity_at(self, Y, X, t, w):
        if X.dtype != np.float64:  # the plan is solved in float64 (see the class docstring)
            Y64, X64 = Y.astype(np.float64), X.astype(np.float64)
            return self._velocity_at(Y64, X64, t, _weights64(w)).astype(X.dtype)
        d = X.shape[1]
        A = eval_parameter(self.A, "A", t, (d, d))
        V = eval_parameter(self.V, "V", t, (d, d))
        Xk, wk = positive_keys(X, w)
        res = self._checked_plan(Xk, wk, t)
        R = np.column_stack([wk[:, None] * (Xk @ V.T), wk])
        F = (Y @ A.T) / self.eps
        return K_.apply_rows(F, Xk, R, K_.softmax_transform, bias=res.g / self.eps, normalise=True)

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
