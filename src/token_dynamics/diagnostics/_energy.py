"""The interaction energy of a token cloud."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import logsumexp

from .._backend import has_float64, is_numpy, to_namespace
from .._guards import float_guard
from .._linalg import LOG_FLOAT_MAX, row_blocks
from .._typing import ArrayLike
from .._validation import as_matrix, as_tokens, as_tokens_xp, as_weights
from ._scaling import support_xp, unflushed_xp

__all__ = ["interaction_energy"]


@float_guard("the interaction energy", "scale `X`, `A` or `beta` down")
def interaction_energy(
    X: ArrayLike, *, beta: float = 1.0, weights: ArrayLike | None = None, A: ArrayLike | None = None
) -> float:
    r"""Interaction energy of the tokens' measure,

    .. math::

        E_\beta(\mu) = \frac{1}{2\beta} \iint e^{\beta\langle A x, y\rangle}\, d\mu(x)\, d\mu(y)
                     = \frac{1}{2\beta} \sum_{i,j} w_i w_j e^{\beta \langle A x_i, x_j\rangle},

    with :math:`A = I` by default. On the sphere with :math:`Q = K = V = I` it is
    non-decreasing along the SA and USA dynamics, and maximal (:math:`e^\beta/(2\beta)`) at a
    single cluster. Summed through log-sum-exp in row blocks; an energy beyond the float64 range
    raises ``FloatingPointError``.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Or an array of another library (torch, JAX, CuPy): the sum is then computed in its
        namespace, on its device and in its floating dtype (float32 input: float32 sums, a
        relative error of order ``(n + d beta |x|^2) eps_32``), in blocks of rows of bounded
        memory; the energy comes back as a Python float.
    beta : float
        Nonzero inverse temperature.
    weights : array_like, shape (n,), optional
    A : array_like, shape (d, d), optional

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals, `beta` is zero or not finite, `weights`
        are not probability weights or `A` is not ``(d, d)``.
    TypeError
        If an array argument is not real (complex, boolean, string or object).
    FloatingPointError
        If the energy overflows float64.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.diagnostics import interaction_energy
    >>> X = np.array([[1.0, 0.0], [1.0, 0.0]])
    >>> bool(np.isclose(interaction_energy(X, beta=2.0), np.exp(2.0) / 4.0))
    True
    """
    beta = _check_beta(beta)
    if type(X) is not np.ndarray and not is_numpy(X):
        return _energy(_log_sum_xp(X, beta, weights, A), beta)
    X = as_tokens(X)
    w = as_weights(weights, X.shape[0])
    d = X.shape[1]
    F = X if A is None else X @ as_matrix(A, "A", shape=(d, d)).T
    keep = w > 0
    Xk, Fk, wk = X[keep], F[keep], w[keep]
    log_w = np.log(wk)
    parts = []
    for rows in row_blocks(Fk.shape[0], Xk.shape[0]):
        S = beta * (Fk[rows] @ Xk.T) + log_w[rows, None] + log_w[None, :]
        parts.append(logsumexp(S))
    return _energy(float(logsumexp(parts)), beta)


def _check_beta(beta: object) -> float:
    if isinstance(beta, bool) or not isinstance(beta, int | float | np.floating | np.integer):
        raise ValueError(f"`beta` must be a finite nonzero real number; got {beta!r}.")
    if not np.isfinite(beta) or beta == 0:
        raise ValueError(f"`beta` must be a finite nonzero real number; got {beta!r}.")
    return float(beta)


def _log_sum_xp(X: Any, beta: float, weights: object, A: object) -> float:
    """``log sum_ij w_i w_j e^{beta <A x_i, x_j>}`` for tokens of another array library, in
    its namespace and on its device: blocks of query rows of bounded memory, each reduced by
    its own maximum; one host transfer per block (two scalars)."""
    from ..attention._array_api import query_blocks

    xp, Xc = as_tokens_xp(X)
    dt = Xc.dtype
    n, d = Xc.shape
    Am = None if A is None else as_matrix(A, "A", shape=(d, d))
    # rows of zero weight add nothing (as on the numpy path): dropped, so that a huge one
    # cannot overflow a score that has no weight
    Xc, w = support_xp(xp, Xc, as_weights(weights, n))
    # subnormal tokens that the device would flush: X = c0 U, scores beta c0^2 <A u_i, u_j>
    Xc, c0 = unflushed_xp(xp, Xc)
    beta = beta * c0 * c0
    F = Xc if Am is None else Xc @ to_namespace(xp, Am, Xc, dt).T
    log_w = to_namespace(xp, np.log(w), Xc, dt)
    parts = []
    for rows in query_blocks(xp, F, Xc):
        with np.errstate(over="ignore", invalid="ignore"):  # numpy-backed xp: named below
            S = beta * (F[rows, :] @ Xc.T) + log_w[rows][:, None] + log_w[None, :]
            top = float(xp.max(S))
        if not math.isfinite(top):
            fix = "lower `beta` or the token norms"
            if dt != xp.float64 and has_float64(xp, Xc):
                fix += ", or pass the tokens in float64"
            raise FloatingPointError(
                f"the interaction energy: a score beta <A x_i, x_j> leaves the {dt} range; {fix}."
            )
        parts.append(top + math.log(float(xp.sum(xp.exp(S - top)))))
    return float(logsumexp(parts))


def _energy(log_sum: float, beta: float) -> float:
    """``sign(beta) e^{log_sum} / (2 |beta|)``, or a FloatingPointError beyond float64."""
    log_total = log_sum - math.log(2 * abs(beta))
    if log_total > LOG_FLOAT_MAX:
        raise FloatingPointError(
            f"The interaction energy exceeds the float64 range (log E = {log_total:.4g}); "
            "lower `beta` or the token norms."
        )
    return float(np.sign(beta) * np.exp(log_total))
