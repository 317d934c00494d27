"""The Sinkhorn iterations: log-stabilised scalings of a kernel, and log-sum-exp updates (private).

Both solve the entropic transport problem of :func:`sinkhorn_plan` for the scores ``K = S / eps``
and the log-weights ``log_a``, ``log_b``; the potentials are returned in units of ``eps``
(``u = f / eps``, ``v = g / eps``). The scalings keep the plan as ``diag(alpha) P diag(beta)``
with ``P`` the plan at the last absorbed potentials (:class:`_Kernel`), stored while it fits
:data:`KERNEL_MEMORY_BUDGET` and recomputed row block by row block beyond it. An alternating
iteration reads ``P`` once: each row block's row update and its share of the column sums run
while the block is in cache.
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
from scipy.special import logsumexp

from .._linalg import EXP_FLOOR, row_blocks
from .._typing import FloatArray

__all__ = [
    "ABSORB_LOG",
    "KERNEL_MEMORY_BUDGET",
    "RELAX_GIVE_UP",
    "RELAX_RATIO_SPREAD",
    "RELAX_WINDOW",
    "TRANSPOSE_TILE",
    "alternating_iterations",
    "alternating_scaling",
    "symmetric_iterations",
    "symmetric_scaling",
    "symmetrize",
    "tile_pairs",
]

#: Bytes of the stored kernel (the plan at the last absorbed potentials) beyond which it is not
#: kept but recomputed block by block at every iteration (one exponential per entry and
#: iteration, about 5x the cost of reading a stored entry here). 1 GiB: n = m = 11585 tokens;
#: below it the peak is two n x m arrays (the scores and the kernel that becomes the plan),
#: above it one (the plan is built in the scores' buffer) plus a row block.
KERNEL_MEMORY_BUDGET = 2**30

#: The scalings are absorbed into the potentials, and the kernel rebuilt (one exp pass), once a
#: scaling leaves ``[e^-ABSORB_LOG, e^ABSORB_LOG]``: e^30 ~ 1e13 keeps every product with the
#: kernel far from over- and underflow while absorptions stay rare (one per solve, measured at
#: eps = 0.1, spreads of 100-200 eps).
ABSORB_LOG = 30.0

#: Iterations of the averaged symmetric update whose error ratios must agree (to
#: ``RELAX_RATIO_SPREAD``) before the contraction rate they show is trusted to set the relaxation
#: (see :class:`_Relaxation`); the first iterations, before the slowest mode dominates, vary more.
RELAX_WINDOW = 8
#: Largest spread of the last ``RELAX_WINDOW`` error ratios for a trusted rate estimate.
RELAX_RATIO_SPREAD = 1e-2
#: Growth of the error, over its value when the relaxation began, at which the relaxation is
#: given up (see :class:`_Relaxation`): in the linear regime the relaxed update contracts every
#: mode, so an error ten times its starting value means the rate was read outside it.
RELAX_GIVE_UP = 10.0


#: Side of the square tiles in which a matrix is compared with, or averaged with, its transpose:
#: two 256 x 256 float64 tiles (1 MiB) stay in cache, where a whole transposed pass over a large
#: matrix reads memory with a stride (measured 6 s for the whole-matrix check at n = 4096 under
#: load, against tens of milliseconds by tiles).
TRANSPOSE_TILE = 256


def tile_pairs(n: int) -> list[tuple[slice, slice]]:
    """The pairs of square tiles ``(rows, cols)`` on and above the diagonal."""
    ts = [slice(i, min(i + TRANSPOSE_TILE, n)) for i in range(0, n, TRANSPOSE_TILE)]
    return [(r, c) for i, r in enumerate(ts) for c in ts[i:]]


def symmetrize(M: FloatArray) -> FloatArray:
    """``(M + M^T) / 2`` in place, tile by tile (halves first: no overflow); returns ``M``."""
    for r, c in tile_pairs(M.shape[0]):
        T = M[r, c] * 0.5
        T += M[c, r].T * 0.5
        M[r, c] = T
        M[c, r] = T.T
    return M


class _Kernel:
    """The plan at absorbed potentials, ``P_ij = a_i b_j e^{K_ij + u_i + v_j}``, by row blocks.

    Exponents are clamped at ``EXP_FLOOR`` (a normal double: entries below it are far under any
    marginal tolerance, and exp would otherwise take its slow subnormal path). ``block`` gives
    the stored rows, or computes them into a buffer when the kernel is streamed; both are the
    same elementwise operations, so the iterates do not depend on the mode.
    """

    def __init__(self, K: FloatArray, log_a: FloatArray, log_b: FloatArray, u, v) -> None:
        self.K, self.log_a, self.log_b = K, log_a, log_b
        self.blocks = list(row_blocks(*K.shape))
        self.stored = K.nbytes <= KERNEL_MEMORY_BUDGET
        if self.stored:
            self.P = np.empty_like(K)
        else:
            self.buffer = np.empty((self.blocks[0].stop, K.shape[1]))
        self.absorb(u, v)

    def _rows(self, rows: slice, out: FloatArray) -> FloatArray:
        with np.errstate(over="ignore"):  # a score near -1e308 minus a potential: -inf, clamped
            np.add(self.K[rows], self.row_shift[rows, None], out=out)
            out += self.col_shift[None, :]
        np.maximum(out, EXP_FLOOR, out=out)
        return np.exp(out, out=out)

    def absorb(self, u: FloatArray, v: FloatArray) -> None:
        """Move the kernel to the potentials ``(u, v)``."""
        self.u, self.v = u, v
        self.row_shift, self.col_shift = u + self.log_a, v + self.log_b
        if self.stored:
            for rows in self.blocks:
                self._rows(rows, self.P[rows])

    def block(self, rows: slice) -> FloatArray:
        if self.stored:
            return self.P[rows]
        return self._rows(rows, self.buffer[: rows.stop - rows.start])

    def plan(self, alpha: FloatArray, beta: FloatArray) -> FloatArray:
        """``diag(alpha) P diag(beta)``: the stored kernel scaled in place, or the kernel at the
        final potentials built in the scores' buffer (which is then spent)."""
        if not self.stored:
            u, v = self.u + np.log(alpha), self.v + np.log(beta)
            self.row_shift, self.col_shift = u + self.log_a, v + self.log_b
            for rows in self.blocks:
                self._rows(rows, self.K[rows])
            return self.K
        for rows in self.blocks:
            self.P[rows] *= alpha[rows, None]
            self.P[rows] *= beta[None, :]
        return self.P

    def symmetric_plan(self, alpha: FloatArray) -> FloatArray:
        """The symmetrised ``diag(alpha) P diag(alpha)``; a stored kernel is scaled and
        averaged with its transpose in one pass over tile pairs."""
        if not self.stored:
            return symmetrize(self.plan(alpha, alpha))
        P = self.P
        for r, c in tile_pairs(P.shape[0]):
            T = P[r, c] * alpha[r, None]
            T *= alpha[None, c]
            if r == c:  # a diagonal tile: its own transpose (the sum below is then symmetric)
                U = T.T
            else:
                U = P[c, r].T * alpha[r, None]
                U *= alpha[None, c]
            W = T * 0.5
            W += U * 0.5
            P[r, c] = W
            P[c, r] = W.T
        return P


def _usable(x: FloatArray) -> bool:
    """Positive and finite: a scaling that can be absorbed (its log is finite)."""
    return bool(np.all(x > 0) and np.all(np.isfinite(x)))


def _out_of_range(x: FloatArray) -> bool:
    hi = np.exp(ABSORB_LOG)
    return not (x.min() >= 1.0 / hi and x.max() <= hi)


def _marginal_error(w: FloatArray, log_ratio: FloatArray) -> float:
    """``sum_i |w_i (e^{log_ratio_i} - 1)|``, the l1 error of a marginal ``w`` whose sums are
    ``w e^log_ratio``. A massless entry (``w_i = 0``, potential unbounded) adds nothing, where
    ``0 * expm1`` of an overflowing ratio would be NaN; a ratio that overflows is an infinite
    error (far from converged), not a warning."""
    with np.errstate(over="ignore"):
        return float(np.sum(np.abs(w * np.expm1(np.where(w > 0, log_ratio, 0.0)))))


def alternating_iterations(K, log_a, log_b, tol, max_iter):
    """Alternate exact row and column updates in log-sum-exp form; stop on the column error
    (the rows are exact). Returns ``(u, v, n_iter, converged)``."""
    v = np.zeros(K.shape[1])
    u = -logsumexp(K + log_b[None, :], axis=1)
    n_iter = 0
    while True:
        L = logsumexp(K + (u + log_a)[:, None], axis=0)  # column log-sums of the current plan
        if _marginal_error(np.exp(log_b), v + L) <= tol:
            return u, v, n_iter, True
        if n_iter >= max_iter:
            return u, v, n_iter, False
        v = -L
        u = -logsumexp(K + (v + log_b)[None, :], axis=1)
        n_iter += 1


def alternating_scaling(K, row_max, log_a, log_b, tol, max_iter):
    """Alternating Sinkhorn as scalings of an absorbed kernel, one pass over it per iteration.

    Same iterates as :func:`alternating_iterations`. A sweep over the row blocks computes, for
    each block ``P_B``, the exact row update ``alpha_B = a_B / (P_B beta)`` and adds
    ``P_B^T alpha_B`` to the column sums ``c`` while ``P_B`` is in cache; then ``beta = b / c``.
    Plain scaling reads the kernel twice per iteration (``P beta``, then ``P^T alpha``), and at
    n = 4096 these reads from memory are the whole cost of an iteration. The kernel is first
    built at ``u = -max_j K_ij`` (every row keeps a term of 1: no row underflows). Falls back to
    the log-sum-exp iterations if a scaling turns non-finite (scores spread over ~700 eps).
    ``row_max`` is ``K.max(axis=1)``. Returns ``(u, v, n_iter, converged, plan)``, the plan
    ``None`` after a fallback.
    """
    a, b = np.exp(log_a), np.exp(log_b)
    kernel = _Kernel(K, log_a, log_b, -row_max, np.zeros(K.shape[1]))
    alpha, beta = np.empty(K.shape[0]), np.ones(K.shape[1])
    c, part = np.empty(K.shape[1]), np.empty(K.shape[1])
    n_iter = 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        while True:
            c.fill(0.0)
            for rows in kernel.blocks:
                P = kernel.block(rows)
                np.divide(a[rows], P @ beta, out=alpha[rows])
                c += np.dot(alpha[rows], P, out=part)
            if not (_usable(alpha) and _usable(c)):
                return (*alternating_iterations(K, log_a, log_b, tol, max_iter), None)
            err = float(np.sum(np.abs(beta * c - b)))
            if err <= tol or n_iter >= max_iter:
                u, v = kernel.u + np.log(alpha), kernel.v + np.log(beta)
                return u, v, n_iter, err <= tol, kernel.plan(alpha, beta)
            np.divide(b, c, out=beta)
            n_iter += 1
            if _out_of_range(alpha) or _out_of_range(beta):
                # P' = diag(alpha) P diag(beta): the next sweep's row update a / (P' 1) is the
                # exact update a / (P beta) relative to alpha
                kernel.absorb(kernel.u + np.log(alpha), kernel.v + np.log(beta))
                beta.fill(1.0)


class _Relaxation:
    r"""Relaxation :math:`\theta` of the symmetric update :math:`w \leftarrow w + \theta(T(w) - w)`.

    Linearised at the solution, :math:`T` has the derivative :math:`-\Pi` (the plan with rows
    divided by the weights), whose eigenvalues :math:`\lambda` are real, in :math:`[-1, 1]`, and
    include 1 (the constant shift). The update contracts mode :math:`\lambda` by
    :math:`1 - \theta(1 + \lambda)`: the averaged update :math:`\theta = 1/2` removes the shift
    at once and contracts the slowest mode by :math:`\rho = (1 - \lambda_{\min})/2`, fast
    unless the plan is nearly anti-diagonal (:math:`\lambda_{\min} \approx -1`, a token
    avoiding itself), where it is twice as slow as the alternating updates. Once the ratio of
    successive errors settles at a :math:`\rho > 1/2`, the relaxation becomes
    :math:`\theta = 1/(2 - \rho)`, which balances the two extreme modes and contracts them by
    :math:`\rho/(2 - \rho)`: as fast per matrix-vector product as the alternating updates, and
    never slower than the average. Should the error then grow for ``RELAX_WINDOW`` iterations
    running, or reach ``RELAX_GIVE_UP`` times its value when the relaxation began (a rate read
    outside the linear regime: errors that stall give ratios near 1, hence
    :math:`\theta \approx 1`, which can leave the error swinging over many orders of
    magnitude without growing steadily), it returns to 1/2 for good.
    """

    def __init__(self) -> None:
        self.theta = 0.5
        self.errors: list[float] = []
        self.start = math.inf  # the error when the relaxation began
        self.state = "averaged"  # then "relaxed", or "fixed" after a failed relaxation

    def update(self, err: float) -> float:
        e = self.errors
        e.append(err)
        if self.state == "relaxed" and not err < RELAX_GIVE_UP * self.start:
            self.theta, self.state = 0.5, "fixed"
        if len(e) <= RELAX_WINDOW or self.state == "fixed":
            return self.theta
        del e[0]  # the last RELAX_WINDOW + 1 errors (a few floats: no array overhead)
        if self.state == "averaged" and min(e) > 0:
            ratios = [y / x for x, y in pairwise(e)]
            rho = sorted(ratios)[len(ratios) // 2]
            if max(ratios) - min(ratios) <= RELAX_RATIO_SPREAD and 0.5 < rho < 1.0:
                self.theta, self.state = 1.0 / (2.0 - rho), "relaxed"
                self.errors, self.start = [err], err
        elif self.state == "relaxed" and all(x < y for x, y in pairwise(e)):
            self.theta, self.state = 0.5, "fixed"
        return self.theta


def symmetric_iterations(K, log_a, tol, max_iter):
    """Relaxed symmetric updates ``u <- u + theta (T(u) - u)`` (:class:`_Relaxation`) in
    log-sum-exp form, for a symmetric problem; an iteration is two updates (two products with
    the kernel, as an alternating iteration). Returns ``(u, n_iter, converged)``."""
    u = np.zeros(K.shape[0])
    a = np.exp(log_a)
    relax = _Relaxation()
    updates = 0
    while True:
        T = -logsumexp(K + (u + log_a)[None, :], axis=1)
        err = _marginal_error(a, u - T)  # row (= column) error
        if err <= tol or updates >= 2 * max_iter:
            return u, (updates + 1) // 2, err <= tol
        u = u + relax.update(err) * (T - u)
        updates += 1


def symmetric_scaling(K, row_max, log_a, tol, max_iter):
    """:func:`symmetric_iterations` as scalings of an absorbed symmetric kernel.

    With ``P = a_i a_j e^{K_ij + u_i + u_j}`` and the plan ``diag(alpha) P diag(alpha)``, the
    relaxed update of the potential ``w = u + log(alpha)`` reads
    ``alpha <- alpha (a / (alpha P alpha))^theta``: one matrix-vector product per update, two
    updates per iteration (the cost of an alternating iteration). The
    kernel is first built at ``u_i = -max_j K_ij / 2``, so that no entry exceeds ``a_i a_j``
    (``K_ij <= (m_i + m_j) / 2``). Returns ``(u, n_iter, converged, plan)``, the plan (exactly
    symmetric) ``None`` after a fallback.
    """
    a = np.exp(log_a)
    u = -row_max / 2
    kernel = _Kernel(K, log_a, log_a, u, u)
    alpha, r = np.ones(K.shape[0]), np.empty(K.shape[0])
    relax = _Relaxation()
    updates = 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        while True:
            for rows in kernel.blocks:
                np.dot(kernel.block(rows), alpha, out=r[rows])
            r *= alpha  # the row sums of the plan
            if not _usable(r):
                return (*symmetric_iterations(K, log_a, tol, max_iter), None)
            err = float(np.sum(np.abs(r - a)))
            if err <= tol or updates >= 2 * max_iter:
                u = kernel.u + np.log(alpha)
                return u, (updates + 1) // 2, err <= tol, kernel.symmetric_plan(alpha)
            theta = relax.update(err)
            alpha *= np.sqrt(a / r) if theta == 0.5 else (a / r) ** theta
            updates += 1
            if _out_of_range(alpha):
                w = kernel.u + np.log(alpha)
                kernel.absorb(w, w)
                alpha.fill(1.0)
