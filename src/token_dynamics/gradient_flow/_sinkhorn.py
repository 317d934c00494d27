"""Sinkhorn attention on Gaussians as a Bures-Wasserstein gradient flow (private)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._linalg import psd_sqrt
from .._typing import ArrayLike, FloatArray
from .._validation import as_covariance, as_symmetric, as_vector, check_positive
from ..integrators import ToleranceWarning
from ._energy import SYMMETRIC_A

__all__ = [
    "BuresWassersteinCheck",
    "bures_wasserstein_velocity",
    "sinkhorn_bures_wasserstein_check",
    "sinkhorn_gaussian_cost",
]

#: Step of the central differences in :func:`bures_wasserstein_velocity`: the error is
#: O(h^2 F''') + O(eps_mach |F| / h), balanced near eps_mach^(1/3) ~ 6e-6 for O(1) data.
FD_STEP = 1e-5
#: Largest estimated error of :func:`bures_wasserstein_velocity`, relative to its largest entry,
#: that passes without a warning: at ``FD_STEP`` the error is near 1e-10 for data of unit scale,
#: so an estimate above 1e-6 means the step does not suit the scale of the data (a covariance
#: eigenvalue near ``h``, a mean far from unit size), not that the functional is rough.
FD_RTOL = 1e-6

#: A functional of a Gaussian, ``(mean (d,), cov (d, d)) -> float``.
Functional = Callable[[FloatArray, FloatArray], float]


def _sinkhorn_args(
    mean: ArrayLike, cov: ArrayLike, A: ArrayLike, eps: float
) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """Validate a Gaussian ``(mean, cov)``, a symmetric ``A`` and ``eps > 0``."""
    alpha = as_vector(mean, "mean")
    d = alpha.shape[0]
    Asym = as_symmetric(A, "A", d=d, what=SYMMETRIC_A)
    S = as_covariance(cov, "cov", d=d)
    return alpha, S, Asym, check_positive(eps, "eps")


def _sinkhorn_cross_covariance(cov: FloatArray, A: FloatArray, eps: float):
    """Cross-covariance C of the entropic self-plan of N(., cov), cost -<Ax, y> (A symmetric),
    and ``log(1 - c^2)`` for the singular values ``c = f(b)`` of its whitened form (the
    coupling of the gaussian module), ``b`` those of ``B = R A R / eps``."""
    from ..gaussian import sinkhorn_whitened_coupling

    R = psd_sqrt(cov)
    B = R @ A @ R / eps
    b = np.linalg.svd(B, compute_uv=False)
    # 1 - f(b)^2 = 2 / (1 + s) = 1 / (1 + 2 b^2 / (1 + s)), s = sqrt(1 + 4 b^2): no cancellation
    # as c -> 1 (small eps) nor as c -> 0, and b / (1 + s) < 1/2 does not overflow
    gaps = -np.log1p(2.0 * b * (b / (1.0 + np.hypot(1.0, 2.0 * b))))
    return R @ sinkhorn_whitened_coupling(B) @ R, gaps


def _sinkhorn_moment_rhs(mean, cov, A, V, eps):
    """Right-hand side (alpha', Sigma') of the Sinkhorn Gaussian ODE (the gaussian module)."""
    from ..gaussian import SinkhornMoments

    return SinkhornMoments(A, V, eps=eps).rhs(0.0, mean, cov)


@float_guard("the Sinkhorn Gaussian cost", "rescale `mean`, `cov`, `A` or `eps`")
def sinkhorn_gaussian_cost(
    A: ArrayLike, mean: ArrayLike, cov: ArrayLike, *, eps: float = 1.0
) -> float:
    r"""Entropic self-transport cost :math:`\mathrm{OT}_\varepsilon(\mu,\mu)` of a Gaussian.

    For the cost :math:`c(x,y) = -\langle Ax, y\rangle` (symmetric :math:`A`) and
    :math:`\mathrm{OT}_\varepsilon = \min_\pi \int c\,d\pi + \varepsilon\,\mathrm{KL}(\pi\,|\,
    \mu\otimes\mu)`, the optimal plan of :math:`\mu = \mathcal N(\alpha,\Sigma)` is Gaussian
    with cross-covariance :math:`C = R\tilde CR`, :math:`R = \Sigma^{1/2}`,
    :math:`\tilde C = f(RAR/\varepsilon)`, :math:`f(b) = 2b/(1+\sqrt{1+4b^2})`, and

    .. math::

        \mathrm{OT}_\varepsilon(\mu,\mu) = -\operatorname{tr}(AC) - \alpha^\top A\alpha
        - \tfrac\varepsilon2\log\det(I - \tilde C^2).

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric.
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
    eps : float
        Entropic regularisation, > 0.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `cov` is not a covariance matching `mean`, `A` is not symmetric or `eps` is not positive.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    Castin et al., arXiv:2501.18322; Sander et al., *Sinkformers*, AISTATS 2022.

    Examples
    --------
    >>> from token_dynamics.gradient_flow import sinkhorn_gaussian_cost
    >>> round(sinkhorn_gaussian_cost([[0.0]], [0.0], [[1.0]]), 12)  # independent coupling
    0.0
    """
    alpha, S, A, eps = _sinkhorn_args(mean, cov, A, eps)
    C, log_gaps = _sinkhorn_cross_covariance(S, A, eps)
    # log det(I - Ct Ct^T) = sum log(1 - c_i^2) over the singular values c_i < 1 of Ct
    return float(-np.trace(A @ C) - alpha @ A @ alpha - 0.5 * eps * np.sum(log_gaps))


@float_guard("the Bures-Wasserstein velocity", "rescale `mean` or `cov`")
def bures_wasserstein_velocity(
    functional: Callable[[FloatArray, FloatArray], float],
    mean: ArrayLike,
    cov: ArrayLike,
    *,
    h: float = FD_STEP,
) -> tuple[FloatArray, FloatArray]:
    r"""Velocity of the Bures-Wasserstein gradient flow (descent) of ``functional``.

    On Gaussians :math:`\mathcal N(\alpha,\Sigma)`, the :math:`W_2` gradient flow of
    :math:`F(\alpha,\Sigma)` is :math:`\alpha' = -\nabla_\alpha F`,
    :math:`\Sigma' = -2(G\Sigma + \Sigma G)` with :math:`G = \nabla_\Sigma F` the symmetric
    gradient (:math:`dF = \operatorname{tr}(G\,d\Sigma)`). Both gradients are taken by central
    differences of step ``h`` (error :math:`O(h^2)` plus rounding, :math:`O(\epsilon_{\rm mach}
    |F| / h)`). The error is estimated by Richardson from a second run at ``h / 2`` (4/3 of the
    difference of the two); when it exceeds ``FD_RTOL`` (``1e-6``) of the velocity's largest
    entry, a :class:`~token_dynamics.integrators.ToleranceWarning` names it. The default
    ``h = 1e-5`` meets that for data of unit scale (error near ``1e-10``); it misses it when an
    eigenvalue of `cov` is within a few hundred ``h`` (``1e-2`` relative at ``5e-5``) or the
    mean is large (``1e-2`` at ``|mean| = 1e10``).

    Parameters
    ----------
    functional : callable ``(mean (d,), cov (d, d)) -> float``
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
        Positive definite (so that ``cov ± h E`` stays a covariance).
    h : float
        Finite-difference step, in the units of `mean` and `cov` (an absolute step).

    Returns
    -------
    (ndarray (d,), ndarray (d, d))
        ``(alpha', Sigma')``.

    Warns
    -----
    ToleranceWarning
        If the estimated error exceeds ``FD_RTOL`` of the velocity's largest entry (the
        message gives the estimate).

    Raises
    ------
    ValueError
        If `cov` is not a covariance matching `mean`, with eigenvalues above ``2 h``, or `h` is not
        positive.
    TypeError
        If an array argument is not real (complex, boolean, string or object).
    FloatingPointError
        If `functional` returns a value that is not finite.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import bures_wasserstein_velocity
    >>> F = lambda m, S: 0.5 * m @ m + np.trace(S)  # G = I: Sigma' = -4 Sigma
    >>> dm, dS = bures_wasserstein_velocity(F, [1.0, 0.0], np.eye(2))
    >>> np.round(dm, 8), np.round(dS, 8)
    (array([-1., -0.]), array([[-4., -0.],
           [-0., -4.]]))
    """
    if not callable(functional):
        raise TypeError(
            "`functional` must be a callable (mean, cov) -> float; got "
            f"{type(functional).__name__}."
        )
    alpha = as_vector(mean, "mean")
    d = alpha.shape[0]
    S = as_covariance(cov, "cov", d=d)
    h = _fd_step(S, h)
    dm, dS, error = _bw_velocity(functional, alpha, S, h)
    if error > FD_RTOL:
        warnings.warn(
            f"bures_wasserstein_velocity: the estimated error of the central differences is "
            f"{error:.2g} of the velocity's largest entry, above {FD_RTOL:g}, at h = {h:g}: the "
            "step does not suit the scale of `mean` or `cov` (an eigenvalue of `cov` near h, "
            "or a large mean). Pass a step `h` small against the eigenvalues of `cov` and the "
            "scale of the functional, or rescale the data.",
            ToleranceWarning,
            stacklevel=3,
        )
    return dm, dS


def _fd_step(S: FloatArray, h: float) -> float:
    """The step ``h`` of the central differences, checked: positive, and below half of every
    eigenvalue of the covariance ``S`` (so that ``S +- h E`` stays a covariance)."""
    h = check_positive(h, "h")
    if np.linalg.eigvalsh(S).min() <= 2 * h:
        raise ValueError(
            "`cov` must be positive definite with eigenvalues above 2 h; pass a smaller `h`."
        )
    return h


def _bw_velocity(
    functional: Functional, alpha: FloatArray, S: FloatArray, h: float
) -> tuple[FloatArray, FloatArray, float]:
    """The velocity by central differences of step ``h`` and its estimated error.

    Richardson: a central difference of step h errs by C h^2 (plus rounding), so the runs at h
    and h/2 estimate the error at h as 4/3 of their difference; relative to the largest entry.
    """
    dm, dS = _central_velocity(functional, alpha, S, h)
    dm2, dS2 = _central_velocity(functional, alpha, S, h / 2)
    diff = max(np.abs(dm - dm2).max(), np.abs(dS - dS2).max()) * 4 / 3
    scale = max(np.abs(dm).max(), np.abs(dS).max(), np.finfo(float).tiny)
    return dm, dS, float(diff / scale)


def _central_velocity(
    functional: Functional, alpha: FloatArray, S: FloatArray, h: float
) -> tuple[FloatArray, FloatArray]:
    """``(-grad_alpha F, -2 (G S + S G))`` by central differences of step ``h``."""
    d = alpha.shape[0]
    g_mean = np.empty(d)
    for k in range(d):
        e = np.zeros(d)
        e[k] = h
        g_mean[k] = (_value(functional, alpha + e, S) - _value(functional, alpha - e, S)) / (2 * h)
    G = np.empty((d, d))
    for k in range(d):
        for m in range(k, d):
            E = np.zeros((d, d))
            E[k, m] += 0.5 * h
            E[m, k] += 0.5 * h
            G[k, m] = G[m, k] = (
                _value(functional, alpha, S + E) - _value(functional, alpha, S - E)
            ) / (2 * h)
    return -g_mean, -2 * (G @ S + S @ G)


def _value(functional: Functional, mean: FloatArray, cov: FloatArray) -> float:
    """``functional(mean, cov)``, which must be a finite number (a NaN would pass silently
    through the differences)."""
    value = float(functional(mean, cov))
    if not np.isfinite(value):
        raise FloatingPointError(
            f"`functional` returned {value!r} at a Gaussian of the central differences (within "
            "the step h of `mean` and `cov`); it must be finite there."
        )
    return value


@dataclass(frozen=True)
class BuresWassersteinCheck:
    r"""Sinkhorn Gaussian dynamics against the Bures-Wasserstein gradient flow.

    With :math:`F(\alpha, \Sigma) = \tfrac12\mathrm{OT}_\varepsilon(\mu, \mu)` and
    :math:`G = \nabla_\Sigma F`, the flow's velocity is

    .. math:: \alpha' = -\nabla_\alpha F, \qquad \Sigma' = -2(G\Sigma + \Sigma G),

    and ``error`` compares it with the Sinkhorn moment ODE.

    Attributes
    ----------
    mean_velocity, cov_velocity : ndarray, shapes (d,), (d, d)
        ``alpha'`` and ``Sigma'`` of the Sinkhorn moment ODE (``V = A``).
    bw_mean_velocity, bw_cov_velocity : ndarray, shapes (d,), (d, d)
        The Bures-Wasserstein descent velocity of ``OT_eps(mu, mu) / 2`` by finite differences.
    error : float
        Largest absolute difference of the two, relative to the largest velocity entry.

    Examples
    --------
    Returned by :func:`sinkhorn_bures_wasserstein_check`:

    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import sinkhorn_bures_wasserstein_check
    >>> chk = sinkhorn_bures_wasserstein_check(-0.5 * np.eye(2), [0.0, 0.1], np.eye(2))
    >>> chk.mean_velocity.shape, chk.cov_velocity.shape, bool(chk.error < 1e-8)
    ((2,), (2, 2), True)
    """

    mean_velocity: FloatArray
    cov_velocity: FloatArray
    bw_mean_velocity: FloatArray
    bw_cov_velocity: FloatArray
    error: float


@float_guard("the Bures-Wasserstein check", "rescale `mean`, `cov`, `A`, `eps` or `h`")
def sinkhorn_bures_wasserstein_check(
    A: ArrayLike, mean: ArrayLike, cov: ArrayLike, *, eps: float = 1.0, h: float = FD_STEP
) -> BuresWassersteinCheck:
    r"""Sinkhorn Gaussian ODE (``V = A``) against the BW flow of half the entropic self-cost.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric.
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
        Positive definite.
    eps : float
    h : float
        Finite-difference step of :func:`bures_wasserstein_velocity`.

    Returns
    -------
    BuresWassersteinCheck

    Raises
    ------
    ValueError
        If `cov` is not a covariance matching `mean`, `A` is not symmetric or `eps`, `h` are not
        positive.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    Castin et al., arXiv:2501.18322; Sander et al., *Sinkformers*, AISTATS 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import sinkhorn_bures_wasserstein_check
    >>> chk = sinkhorn_bures_wasserstein_check(-np.eye(2), [0.3, -0.2], [[1.0, 0.2], [0.2, 0.5]])
    >>> chk.error < 1e-8
    True
    """
    alpha, S, A, eps = _sinkhorn_args(mean, cov, A, eps)
    dm, dS = _sinkhorn_moment_rhs(alpha, S, A, A, eps)
    h = _fd_step(S, h)
    # no warning: `error` below measures the finite differences against the exact velocity
    bm, bS = _central_velocity(
        lambda m, C: 0.5 * sinkhorn_gaussian_cost(A, m, C, eps=eps), alpha, S, h
    )
    scale = max(np.abs(dm).max(), np.abs(dS).max(), np.finfo(float).tiny)
    err = max(np.abs(dm - bm).max(), np.abs(dS - bS).max()) / scale
    return BuresWassersteinCheck(dm, dS, bm, bS, float(err))
