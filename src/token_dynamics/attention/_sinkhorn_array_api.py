"""Sinkhorn's potential of the tokens' self-plan on arrays of any array-API library (private).

The numpy solver's iterates (``_sinkhorn_scaling``), in float64, in the caller's namespace and on
its device: the relaxed symmetric update from the potential :math:`u_i = -\\max_j K_{ij}/2` when
the scores are symmetric, the alternating exact updates otherwise. While the ``n x n`` kernel
fits :data:`KERNEL_MEMORY_BUDGET` (as on numpy), in the scaling form: the kernel at the absorbed
potentials is stored and each update is a matrix-vector product with it, the scalings absorbed
into the potentials before they leave ``[e^-ABSORB_LOG, e^ABSORB_LOG]``; a scaling that turns
non-finite hands over to the log-sum-exp updates, started afresh as on numpy. Beyond the budget,
the log-sum-exp updates with the scores recomputed in query blocks at every update
(``_array_api.log_sum_exp_rows``: at most ``BLOCK_ENTRIES`` of them at once). A few numbers per
iteration (the marginal error, the range of the scalings) go to the host. Each solver returns
``(u, v, n_iter, error)``, its potentials and its own error; convergence is then judged as on
numpy, on the marginals of the plan at ``(u, v)``.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from .._backend import scalar
from .._linalg import EXP_FLOOR
from ._array_api import log_sum_exp_rows, max_rows, plan_sums, run, scores_in_range
from ._sinkhorn_plan import plan_convergence
from ._sinkhorn_scaling import ABSORB_LOG, KERNEL_MEMORY_BUDGET, _Relaxation

__all__ = ["sinkhorn_potential"]


def sinkhorn_potential(
    xp: ModuleType,
    X: Any,
    A: Any,
    log_w: Any,
    eps: float,
    tol: float,
    max_iter: int,
    *,
    symmetric: bool,
) -> tuple[Any, int, bool, float]:
    r"""The potential :math:`v` (in units of :math:`\varepsilon`) of the entropic plan
    :math:`\pi_{ij} = w_i w_j e^{K_{ij} + u_i + v_j}` of the tokens' measure with itself, for
    the scores :math:`K_{ij} = \langle A x_i, x_j\rangle / \varepsilon`.

    Parameters
    ----------
    xp : namespace
    X : array, shape (n, d), float64
        Tokens of positive weight.
    A : array, shape (d, d), float64
    log_w : array, shape (n,)
        Logarithms of the weights (finite).
    eps, tol, max_iter :
        As in :class:`Sinkhorn`.
    symmetric : bool
        Whether ``A`` is symmetric (then so are the scores): the relaxed symmetric update.

    Returns
    -------
    (v, n_iter, converged, error)
        The column potential, the iterations, whether the :math:`\ell^1` marginal error
        ``error`` of the plan at the final potentials reached ``tol`` (judged as on numpy:
        ``_sinkhorn_plan.plan_convergence``); scores beyond the float range
        (``_array_api.scores_in_range``), or an iteration error that is not finite, stop the
        iterations at once with an infinite error.
    """
    rows = xp.matmul(X, xp.matrix_transpose(A)) / eps  # K = rows X^T
    if not bool(run(xp, scores_in_range, rows, X)):
        return xp.zeros_like(log_w), 0, False, math.inf
    n = X.shape[0]
    found = None
    if n * n * 8 <= KERNEL_MEMORY_BUDGET:
        K = xp.matmul(rows, xp.matrix_transpose(X))
        found = (_symmetric_scaling if symmetric else _alternating_scaling)(
            xp, K, log_w, tol, max_iter
        )
        u0 = xp.zeros_like(log_w)  # on a fallback, the numpy solver starts afresh
    else:
        u0 = -run(xp, max_rows, rows, X) / 2
    if found is None and symmetric:
        found = _symmetric_iterations(xp, rows, X, log_w, u0, tol, max_iter)
    elif found is None:
        found = _alternating_iterations(xp, rows, X @ A / eps, X, log_w, tol, max_iter)
    u, v, n_iter, err = found
    if not math.isfinite(err):
        return v, n_iter, False, math.inf
    r, c = run(xp, plan_sums, rows, X, u + log_w, v + log_w)
    a = xp.exp(log_w)
    if symmetric:  # the row sums of the numpy solver's plan, symmetrised
        r, c = (r + c) / 2, None
    error, converged = plan_convergence(xp, r, c, a, a, tol)
    return v, n_iter, converged, error


def _symmetric_iterations(xp, rows, X, log_w, u, tol, max_iter):
    """The relaxed symmetric updates in log-sum-exp form (``symmetric_iterations``)."""
    a = xp.exp(log_w)
    relax = _Relaxation()
    updates = 0
    while True:
        T = -run(xp, log_sum_exp_rows, rows, X, u + log_w)
        err = scalar(xp.sum(xp.abs(a * xp.expm1(u - T))))  # row (= column) error
        if err <= tol or not math.isfinite(err) or updates >= 2 * max_iter:
            return u, u, (updates + 1) // 2, err
        u = u + relax.update(err) * (T - u)
        updates += 1


def _alternating_iterations(xp, rows, cols, X, log_w, tol, max_iter):
    """Alternate exact updates in log-sum-exp form (``alternating_iterations``); ``cols`` gives
    the transposed scores, ``K^T = cols X^T``."""
    a = xp.exp(log_w)
    v = xp.zeros_like(log_w)
    u = -run(xp, log_sum_exp_rows, rows, X, log_w)
    n_iter = 0
    while True:
        L = run(xp, log_sum_exp_rows, cols, X, u + log_w)  # column log-sums of the plan
        err = scalar(xp.sum(xp.abs(a * xp.expm1(v + L))))
        if err <= tol or not math.isfinite(err) or n_iter >= max_iter:
            return u, v, n_iter, err
        v = -L
        u = -run(xp, log_sum_exp_rows, rows, X, v + log_w)
        n_iter += 1


def _kernel(xp: ModuleType, K: Any, log_w: Any, u: Any, v: Any) -> Any:
    """The plan at the potentials ``(u, v)``, :math:`w_i w_j e^{K_{ij} + u_i + v_j}`, its
    exponents clamped at ``EXP_FLOOR`` (``_sinkhorn_scaling._Kernel``)."""
    E = K + (u + log_w)[:, None] + (v + log_w)[None, :]
    return xp.exp(xp.clip(E, min=EXP_FLOOR))


def _in_range(xp: ModuleType, s: Any) -> Any:
    """0-d: whether a scaling lies in ``[e^-ABSORB_LOG, e^ABSORB_LOG]``."""
    return (xp.min(s) >= math.exp(-ABSORB_LOG)) & (xp.max(s) <= math.exp(ABSORB_LOG))


def _symmetric_scaling(xp, K, log_w, tol, max_iter):
    """``symmetric_scaling`` on the stored kernel; ``None`` when a scaling turns non-finite."""
    a = xp.exp(log_w)
    u = -xp.max(K, axis=1) / 2
    P = _kernel(xp, K, log_w, u, u)
    alpha = xp.ones_like(a)
    relax = _Relaxation()
    updates = 0
    while True:
        r = alpha * xp.matmul(P, alpha)  # the row sums of the plan
        err = scalar(xp.sum(xp.abs(r - a)))
        if not (math.isfinite(err) and bool(xp.min(r) > 0)):
            return None
        if err <= tol or updates >= 2 * max_iter:
            u = u + xp.log(alpha)
            return u, u, (updates + 1) // 2, err
        theta = relax.update(err)
        alpha = alpha * (xp.sqrt(a / r) if theta == 0.5 else (a / r) ** theta)
        updates += 1
        if not bool(_in_range(xp, alpha)):
            u = u + xp.log(alpha)
            P = _kernel(xp, K, log_w, u, u)
            alpha = xp.ones_like(a)


def _alternating_scaling(xp, K, log_w, tol, max_iter):
    """``alternating_scaling`` on the stored kernel, built at ``u = -max_j K_ij``; ``None`` when
    a scaling turns non-finite."""
    a = xp.exp(log_w)
    u, v = -xp.max(K, axis=1), xp.zeros_like(a)
    P = _kernel(xp, K, log_w, u, v)
    beta = xp.ones_like(a)
    n_iter = 0
    while True:
        alpha = a / xp.matmul(P, beta)
        c = xp.matmul(alpha, P)  # the column sums, before the column update
        err = scalar(xp.sum(xp.abs(beta * c - a)))
        usable = xp.all(xp.isfinite(alpha)) & xp.all(alpha > 0) & (xp.min(c) > 0)
        if not (math.isfinite(err) and bool(usable)):
            return None
        if err <= tol or n_iter >= max_iter:
            return u + xp.log(alpha), v + xp.log(beta), n_iter, err
        beta = a / c
        n_iter += 1
        if not bool(_in_range(xp, alpha) & _in_range(xp, beta)):
            u, v = u + xp.log(alpha), v + xp.log(beta)
            P = _kernel(xp, K, log_w, u, v)
            beta = xp.ones_like(a)
