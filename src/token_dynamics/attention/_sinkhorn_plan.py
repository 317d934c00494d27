"""The entropic optimal transport plan of a score matrix, by Sinkhorn's iterations (private).

The result record :class:`SinkhornPlan`, the solver :func:`sinkhorn_plan` (argument checks, the
choice between the symmetric and the alternating iterations, the plan's marginal error) and its
failure classes; the iterations themselves are in :mod:`._sinkhorn_scaling`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from .._backend import scalar
from .._guards import float_guard
from .._typing import ArrayLike, FloatArray
from .._validation import as_matrix, as_weights, check_int, check_positive
from . import _sinkhorn_scaling as scaling

__all__ = [
    "SINKHORN_MAX_ITER",
    "SinkhornConvergenceError",
    "SinkhornConvergenceWarning",
    "SinkhornPlan",
    "plan_convergence",
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

    plan: FloatArray
    converged: bool
    n_iter: int
    marginal_error: float
    f: FloatArray
    g: FloatArray


def plan_convergence(
    xp: ModuleType, rows: Any, cols: Any | None, a: Any, b: Any, tol: float
) -> tuple[float, bool]:
    r"""The :math:`\ell^1` marginal error of a plan from its row and column sums (``cols``
    ``None``: a symmetric plan, whose column sums are its row sums), and whether it is within
    ``tol``: the one test of convergence of the numpy solver and of the array path. It reads the
    sums of the plan itself, not the iterations' own error (of the scaled kernel), which can meet
    a ``tol`` below the rounding of those sums (a few 1e-16), where this one does not."""
    err = scalar(xp.sum(xp.abs(rows - a)))
    if cols is not None:
        err = max(err, scalar(xp.sum(xp.abs(cols - b))))
    return err, err <= tol


def _log(w: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(w)


#: Relative asymmetry of a score matrix below which it counts as symmetric (round-off of
#: ``X @ A.T @ X.T`` with a symmetric ``A``: a few ulps per product, d products per entry).
SYMMETRY_RTOL = 1e-12


def _is_symmetric(K: FloatArray, row_max: FloatArray, eps: float) -> bool:
    """Whether the scores ``K = S / eps`` equal their transpose to :data:`SYMMETRY_RTOL` (relative
    to ``max(1, max |S|)``), tile by tile (a non-symmetric matrix usually stops at its first
    tile). The symmetric solver does not need ``K`` symmetric to the last bit: its plan is
    symmetrised at the end, so ``K`` is only read here."""
    if K.shape[0] != K.shape[1]:
        return False
    tol = SYMMETRY_RTOL * max(1.0 / eps, float(row_max.max()), -float(K.min()))
    with np.errstate(over="ignore"):  # 1e308 - (-1e308) is inf: not symmetric, rightly
        for r, c in scaling.tile_pairs(K.shape[0]):
            if not np.all(np.abs(K[r, c] - K[c, r].T) <= tol):
                return False
    return True


def sinkhorn_plan(
    S: ArrayLike,
    eps: float,
    *,
    a: ArrayLike | None = None,
    b: ArrayLike | None = None,
    tol: float = 1e-9,
    max_iter: int = SINKHORN_MAX_ITER,
) -> SinkhornPlan:
    r"""Entropic optimal transport plan for the cost :math:`-S`, in the log domain.

    Solves :math:`\max_\pi \langle \pi, S\rangle - \varepsilon\,\mathrm{KL}(\pi \,|\, a\otimes b)`
    over couplings of ``a`` and ``b`` by alternating exact updates of the dual potentials,

    .. math::

        g_j = -\varepsilon \log \sum_i a_i e^{(f_i + S_{ij})/\varepsilon},\qquad
        f_i = -\varepsilon \log \sum_j b_j e^{(g_j + S_{ij})/\varepsilon},

    computed in the log-stabilised scaling form: each update is a matrix-vector product with the
    plan at the last absorbed potentials (the cost of plain Sinkhorn scaling; one pass over it
    per iteration, each row block's row update and column sums taken while it is in cache), and
    the scalings are absorbed into the potentials before they can over- or underflow, so no
    exponential leaves the float64 range whatever :math:`S/\varepsilon` (plain log-sum-exp
    updates take over if a scaling still turns non-finite, or when a weight is zero).
    Stops when the column marginal is within ``tol`` in :math:`\ell^1` (the rows are exact after
    each update). When ``S`` is symmetric (to round-off) and ``a = b`` (self-attention with a
    symmetric ``A``), the symmetric update :math:`f \leftarrow f + \theta(T(f) - f)` with
    :math:`g = f` is used instead, averaged (:math:`\theta = 1/2`) until the contraction rate
    :math:`\rho` of its error is known, then relaxed to :math:`\theta = 1/(2 - \rho)` if
    :math:`\rho > 1/2`: the plan is exactly symmetric, convergence takes a few tens of
    iterations when tokens attend to themselves, and no more matrix-vector products than the
    alternating updates when they avoid themselves. Non-convergence is reported in the result,
    not raised.

    Memory: while the kernel (the plan at the absorbed potentials) fits
    ``KERNEL_MEMORY_BUDGET`` (1 GiB, n = m = 11585) two ``(n, m)`` float64 arrays, the scores
    (our copy, divided by :math:`\varepsilon` in place) and the kernel, scaled in place into
    the returned plan; beyond it the kernel is recomputed row block by row block at every
    iteration (one exponential per entry and iteration) and the plan built in the scores'
    buffer: one ``(n, m)`` array and a block of ``BLOCK_ELEMENTS`` entries.

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
    FloatingPointError
        If ``S / eps`` leaves the float64 range, or the plan is not finite.

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
    # the scaling iterations need positive weights (a zero weight is a -inf potential)
    positive = bool(np.all(a > 0) and np.all(b > 0))
    with float_guard("the scores divided by `eps`", "rescale `S` or increase `eps`"):
        K = np.divide(S, eps, out=S)  # S is our own validated copy
    row_max = K.max(axis=1)  # the symmetry check's scale and the solvers' first potentials
    symmetric = n == m and np.array_equal(a, b) and _is_symmetric(K, row_max, eps)
    plan = None
    if symmetric:
        if positive:
            u, n_iter, _, plan = scaling.symmetric_scaling(K, row_max, log_a, tol, max_iter)
        else:
            u, n_iter, _ = scaling.symmetric_iterations(K, log_a, tol, max_iter)
        v = u
    elif positive:
        u, v, n_iter, _, plan = scaling.alternating_scaling(K, row_max, log_a, log_b, tol, max_iter)
    else:
        u, v, n_iter, _ = scaling.alternating_iterations(K, log_a, log_b, tol, max_iter)
    if plan is None:  # after the log-sum-exp iterations; a score near -1e308 gives -inf: 0
        with np.errstate(under="ignore", over="ignore"):
            plan = np.exp(K + (u + log_a)[:, None] + (v + log_b)[None, :])
        if symmetric:
            plan = scaling.symmetrize(plan)  # equal already, up to the rounding of the sums
    rows = plan.sum(axis=1)  # non-negative entries: a non-finite one makes its row sum so
    if not np.all(np.isfinite(rows)):
        raise FloatingPointError(
            f"the Sinkhorn plan is not finite after {n_iter} iterations at eps = {eps:g}; "
            "rescale `S` or increase `eps`."
        )
    cols = None if symmetric else plan.sum(axis=0)
    err, converged = plan_convergence(np, rows, cols, a, b, tol)
    f, g = eps * u, eps * v
    return SinkhornPlan(plan, converged, n_iter, err, f, g)
