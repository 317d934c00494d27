r"""The trace and log-determinant identities of the softmax covariance equation, checked on its
right-hand side: how far each side is from the other at one covariance."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import checked_finite, float_guard
from .._typing import ArrayLike, FloatArray
from .._validation import as_covariance, as_real_array, as_symmetric, check_instance, check_real
from ._equations import SoftmaxMoments
from ._path import GaussianPath

__all__ = ["IdentityGaps", "covariance_identity_gaps", "lyapunov_trace"]


@dataclass(frozen=True)
class IdentityGaps:
    r"""Gaps of the two identities of the softmax covariance equation at one covariance.

    Attributes
    ----------
    trace : float
        :math:`|\operatorname{tr}(V^{-1}\Sigma') - \operatorname{tr}(\Sigma(A+A^\top)\Sigma)|`.
    logdet : float
        :math:`|\operatorname{tr}(\Sigma^{-1}\Sigma') - \operatorname{tr}(\Sigma(AV +
        V^\top A^\top))|`, the derivative of :math:`\log\det\Sigma` on each side.

    Examples
    --------
    Returned by :func:`covariance_identity_gaps`:

    >>> import numpy as np
    >>> from token_dynamics.gaussian import SoftmaxMoments, covariance_identity_gaps
    >>> gaps = covariance_identity_gaps(SoftmaxMoments(-np.eye(2), np.eye(2)), np.eye(2))
    >>> gaps.trace, gaps.logdet
    (0.0, 0.0)
    """

    trace: float
    logdet: float


@float_guard("the identity gaps", "rescale `cov` or the matrices of `equations`")
def covariance_identity_gaps(
    equations: SoftmaxMoments, cov: ArrayLike, *, t: float = 0.0
) -> IdentityGaps:
    r"""How far the softmax covariance equation is from its trace and log-determinant
    identities at one covariance.

    With :math:`\Sigma' = V\Sigma A\Sigma + \Sigma A^\top\Sigma V^\top` (:math:`A` standing for
    :math:`\beta A`), the identities are

    .. math::

        \operatorname{tr}(V^{-1}\Sigma') = \operatorname{tr}\big(\Sigma(A+A^\top)\Sigma\big),
        \qquad
        \operatorname{tr}(\Sigma^{-1}\Sigma') = \operatorname{tr}\big(\Sigma(AV+V^\top A^\top)
        \big),

    the first for symmetric invertible :math:`V`, the second for :math:`\Sigma\succ0`. Both
    gaps are rounding, of the order of machine precision times :math:`\|V^{-1}\|\,\|V\|\,
    \|A\|\,\|\Sigma\|^2` and :math:`\|\Sigma^{-1}\|\,\|V\|\,\|A\|\,\|\Sigma\|^2`.

    Parameters
    ----------
    equations : SoftmaxMoments
        The moment equation, with a symmetric invertible :math:`V`.
    cov : array_like, shape (d, d)
        A positive definite covariance.
    t : float
        Time at which time-dependent ``A`` and ``V`` are read.

    Returns
    -------
    IdentityGaps

    Raises
    ------
    TypeError
        If `equations` is not a :class:`SoftmaxMoments`, or an array argument is not real.
    ValueError
        If `cov` is not a positive definite ``(d, d)`` matrix or :math:`V` is not symmetric
        and invertible.
    FloatingPointError
        If a trace overflows float64.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gaussian import SoftmaxMoments, covariance_identity_gaps
    >>> eq = SoftmaxMoments([[0.5, 1.0], [-0.3, -1.0]], [[2.0, 0.5], [0.5, 1.0]])
    >>> gaps = covariance_identity_gaps(eq, [[1.0, 0.2], [0.2, 0.5]])
    >>> bool(gaps.trace < 1e-14 and gaps.logdet < 1e-14)
    True
    """
    check_instance(
        equations,
        SoftmaxMoments,
        "equations",
        "Build one with gaussian.SoftmaxMoments(A, V); the identities are those of softmax.",
    )
    t = check_real(t, "t")
    A = equations.beta * equations._A(t)
    d = A.shape[0]
    Sigma = as_covariance(cov, "cov", d=d)
    V = as_symmetric(equations._V(t), "V", what="symmetric for the trace identity")
    _, dS = equations.rhs(t, np.zeros(d), Sigma)
    try:
        trace_lhs = np.trace(np.linalg.solve(V, dS))
    except np.linalg.LinAlgError:
        raise ValueError("`V` of `equations` must be invertible for the trace identity.") from None
    try:
        logdet_lhs = np.trace(np.linalg.solve(Sigma, dS))
    except np.linalg.LinAlgError:
        raise ValueError(
            "`cov` must be positive definite for the log-determinant identity; it is singular."
        ) from None
    trace_gap = abs(trace_lhs - np.trace(Sigma @ (A + A.T) @ Sigma))
    logdet_gap = abs(logdet_lhs - np.trace(Sigma @ (A @ V + V.T @ A.T)))
    return IdentityGaps(trace=float(trace_gap), logdet=float(logdet_gap))


@float_guard("the trace tr(V^-1 Sigma)", "rescale `covariances` or `V`")
def lyapunov_trace(V: ArrayLike, covariances: GaussianPath | ArrayLike) -> FloatArray:
    r"""The trace :math:`\operatorname{tr}(V^{-1}\Sigma(t))` at each time of a covariance path.

    .. math::

        \frac{d}{dt}\operatorname{tr}(V^{-1}\Sigma)
        = \operatorname{tr}\big(\Sigma(A+A^\top)\Sigma\big),

    so along softmax attention with :math:`V = V^\top \succ 0` and :math:`A + A^\top \preceq 0`
    it never increases.

    Parameters
    ----------
    V : array_like, shape (d, d)
        Symmetric invertible value matrix.
    covariances : GaussianPath or array_like, shape (T, d, d)
        The path (its ``covariances`` when a :class:`GaussianPath`).

    Returns
    -------
    ndarray, shape (T,)

    Raises
    ------
    ValueError
        If `V` is not symmetric and invertible or `covariances` is not ``(T, d, d)``.
    TypeError
        If an array argument is not real.
    FloatingPointError
        If a trace overflows float64.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gaussian import lyapunov_trace
    >>> lyapunov_trace(2.0 * np.eye(2), np.stack([np.eye(2), 0.5 * np.eye(2)]))
    array([1. , 0.5])
    """
    Vs = as_symmetric(V, "V", what="symmetric (the trace functional needs V = V^T)")
    d = Vs.shape[0]
    if isinstance(covariances, GaussianPath):
        covariances = covariances.covariances
    S = as_real_array(covariances, "covariances")
    if S.ndim != 3 or S.shape[1:] != (d, d):
        raise ValueError(
            f"`covariances` must have shape (T, {d}, {d}) to match `V`; got {S.shape}."
        )
    try:
        Vinv = np.linalg.inv(Vs)
    except np.linalg.LinAlgError:
        raise ValueError("`V` must be invertible; it is singular.") from None
    traces = np.einsum("ij,tji->t", Vinv, S)
    return checked_finite(traces, "the trace tr(V^-1 Sigma)", "rescale `covariances` or `V`")
