"""Sinkhorn's potential of the tokens' self-plan on arrays of any array-API library (private).

The same iterates as the numpy solver (``_sinkhorn_scaling``): the relaxed symmetric update
from the potential :math:`u_i = -\\max_j K_{ij}/2` when the scores are symmetric, the alternating
exact updates otherwise, here in log-sum-exp form with the scores recomputed in query blocks
at every update (``_array_api.log_sum_exp_rows``: at most ``BLOCK_ENTRIES`` of them at once,
where the numpy solver stores the ``n x n`` kernel), in float64, in the caller's namespace and
on its device. One number per iteration (the marginal error) goes to the host.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from ._array_api import log_sum_exp_rows, max_rows, run, scores_in_range
from ._sinkhorn_scaling import _Relaxation

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
        ``error`` reached ``tol``; scores beyond the float range
        (``_array_api.scores_in_range``), or an error that is not finite, stop the iterations
        at once with an infinite error.
    """
    rows = xp.matmul(X, xp.matrix_transpose(A)) / eps  # K = rows X^T
    if not bool(run(xp, scores_in_range, rows, X)):
        return xp.zeros_like(log_w), 0, False, math.inf
    a = xp.exp(log_w)
    if symmetric:
        u = -run(xp, max_rows, rows, X) / 2
        relax = _Relaxation()
        updates = 0
        while True:
            T = -run(xp, log_sum_exp_rows, rows, X, u + log_w)
            err = float(xp.sum(xp.abs(a * xp.expm1(u - T))))  # row (= column) error
            if err <= tol or not math.isfinite(err) or updates >= 2 * max_iter:
                return u, (updates + 1) // 2, err <= tol, err
            u = u + relax.update(err) * (T - u)
            updates += 1
    cols = xp.matmul(X, A) / eps  # K^T = cols X^T
    v = xp.zeros_like(log_w)
    u = -run(xp, log_sum_exp_rows, rows, X, log_w)
    n_iter = 0
    while True:
        L = run(xp, log_sum_exp_rows, cols, X, u + log_w)  # column log-sums of the plan
        err = float(xp.sum(xp.abs(a * xp.expm1(v + L))))
        if err <= tol or not math.isfinite(err) or n_iter >= max_iter:
            return v, n_iter, err <= tol, err
        v = -L
        u = -run(xp, log_sum_exp_rows, rows, X, v + log_w)
        n_iter += 1
