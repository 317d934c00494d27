r"""Gradient-flow structure of attention dynamics: energies, twisted metrics, convexity.

For a measure :math:`\mu` and an attention matrix :math:`A` the *interaction energy* is

.. math::

    \mathcal E_A(\mu) = \frac12 \iint e^{\langle A x, y\rangle}\, d\mu(x)\, d\mu(y).

When :math:`A = A^\top` is invertible and :math:`P = V A^{-1}` is symmetric definite,
unnormalised attention :math:`\Gamma(x) = V\int e^{\langle Ax, y\rangle} y\, d\mu(y)` equals
:math:`P\nabla\frac{\delta\mathcal E}{\delta\mu}`: a gradient flow of :math:`\mathcal E` for the
*twisted* Wasserstein distance with ground cost :math:`(x-y)^\top (\pm P)^{-1}(x-y)`. Softmax
attention divides by :math:`Z_\mu(x) = \int e^{\langle Ax,y\rangle}d\mu(y)` and is a gradient
flow for the metric weighted by :math:`Z_\mu`. The exact definition of the twisted distance of
the paper was not available to us; this module implements the construction of the book, checked
numerically in its tests.

Conventions (``book/notation.md``): tokens ``X`` of shape ``(n, d)``, scores
``S = X @ A.T @ X.T`` so that ``S[i, j] = <A x_i, x_j>``, weights ``(n,)`` summing to one.

References
----------
Castin, Ablin, Carrillo, Peyré, *A Unified Perspective on the Dynamics of Deep Transformers*,
arXiv:2501.18322. Sander, Ablin, Blondel, Peyré, *Sinkformers*, AISTATS 2022. Geshkovski,
Letrouit, Polyanskiy, Rigollet, *A Mathematical Perspective on Transformers*, arXiv:2312.10794.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp

from ._validation import (
    as_matrix,
    as_rng,
    as_tokens,
    as_vector,
    as_weights,
    check_int,
    check_positive,
)

__all__ = [
    "BuresWassersteinCheck",
    "CircleMetastability",
    "GaussianEnergy",
    "GradientFlowCheck",
    "TwistedMetric",
    "TwistedMetricError",
    "bures_wasserstein_velocity",
    "circle_metastability",
    "energy_along",
    "energy_gradient",
    "energy_rate",
    "first_variation",
    "gaussian_energy",
    "gaussian_energy_along",
    "gaussian_translation_second_variation",
    "gradient_flow_check",
    "monotonicity_sign",
    "particle_energy",
    "sinkhorn_bures_wasserstein_check",
    "sinkhorn_gaussian_cost",
    "softmax_metric_density",
    "translation_second_variation",
    "twisted_metric",
    "twisted_wasserstein",
]

#: Relative tolerance for "symmetric" and for the sign of an eigenvalue: a few hundred ulps of
#: the matrix norm, the rounding of products such as ``V @ inv(A)``.
SYM_RTOL = 1e-10
#: log of the largest float64; an energy whose log exceeds it cannot be stored as a float.
LOG_FLOAT_MAX = float(np.log(np.finfo(np.float64).max))
#: Step of the central differences in :func:`bures_wasserstein_velocity`: the error is
#: O(h^2 F''') + O(eps_mach |F| / h), balanced near eps_mach^(1/3) ~ 6e-6 for O(1) data.
FD_STEP = 1e-5


class TwistedMetricError(ValueError):
    """``P = V A^{-1}`` is not symmetric definite, so no twisted metric exists."""


# --------------------------------------------------------------------------- validation helpers


def _symmetric(M: np.ndarray, name: str) -> np.ndarray:
    scale = max(1.0, float(np.abs(M).max()))
    if M.shape[0] != M.shape[1] or np.abs(M - M.T).max() > SYM_RTOL * scale:
        raise ValueError(
            f"`{name}` must be a symmetric (d, d) matrix here; pass (M + M.T) / 2 if the "
            "antisymmetric part is rounding."
        )
    return 0.5 * (M + M.T)


def _square(M: Any, name: str, d: int) -> np.ndarray:
    return as_matrix(M, name, shape=(d, d))


def _cov(cov: Any, d: int) -> np.ndarray:
    S = _symmetric(_square(cov, "cov", d), "cov")
    if np.linalg.eigvalsh(S).min() < -SYM_RTOL * max(1.0, np.abs(S).max()):
        raise ValueError("`cov` must be positive semidefinite; its smallest eigenvalue is < 0.")
    return S


def _psd_sqrt(S: np.ndarray) -> np.ndarray:
    lam, U = np.linalg.eigh(S)
    return (U * np.sqrt(np.clip(lam, 0.0, None))) @ U.T


# --------------------------------------------------------- switch points to the shared modules


def _attention_velocity(kind: str, X, A, V, w) -> np.ndarray:
    """Velocity of attention.Unnormalised or attention.Softmax (beta = 1)."""
    from .attention import Softmax, Unnormalised

    field = Unnormalised(A, V) if kind == "unnormalised" else Softmax(A, V)
    return field.velocity(X, weights=w)


def _wasserstein2(X, Y, wx, wy, metric):
    """Exact W2 with ground cost (x - y)^T metric (x - y), through the wasserstein module."""
    from .wasserstein import wasserstein2

    return float(wasserstein2(X, Y, weights_x=wx, weights_y=wy, metric=metric))


def _sphere_energy(X: np.ndarray, beta: float) -> float:
    """E_beta = sum_ij e^{beta <x_i, x_j>} / (2 beta n^2) (diagnostics.interaction_energy)."""
    from .diagnostics import interaction_energy

    return float(interaction_energy(X, beta=beta))


# ------------------------------------------------------------------------------ the energy


def _kernels(X, A, Y):
    """K1[k, j] = e^{<A y_k, x_j>}, K2[k, j] = e^{<A x_j, y_k>}, as exponents."""
    return Y @ A.T @ X.T, Y @ A @ X.T


def particle_energy(X: Any, A: Any, *, weights: Any = None) -> float:
    r"""Interaction energy :math:`\frac12\sum_{ij} w_i w_j e^{\langle A x_i, x_j\rangle}`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens, one per row.
    A : array_like, shape (d, d)
        Attention matrix (any, not necessarily symmetric).
    weights : array_like, shape (n,), optional
        Probability weights; uniform ``1/n`` by default.

    Returns
    -------
    float
        :math:`\mathcal E_A(\mu)` for :math:`\mu = \sum_i w_i \delta_{x_i}`.

    Raises
    ------
    FloatingPointError
        If the energy exceeds the float64 range (scale ``A`` or the tokens down).

    Notes
    -----
    The same quantity as :func:`token_dynamics.diagnostics.interaction_energy` with
    ``beta=1`` (which computes it, through log-sum-exp), named here as the energy of the
    gradient-flow chapter.

    References
    ----------
    Castin et al., arXiv:2501.18322, the interaction energy of the Transformer PDE.

    Examples
    --------
    >>> round(particle_energy([[1.0, 0.0]], -np.eye(2)), 12)  # one Dirac: e^{-|x|^2} / 2
    0.183939720586
    """
    from .diagnostics import interaction_energy

    X = as_tokens(X)
    A = _square(A, "A", X.shape[1])
    return interaction_energy(X, beta=1.0, weights=weights, A=A)


def first_variation(X: Any, A: Any, points: Any = None, *, weights: Any = None) -> np.ndarray:
    r"""First variation :math:`\frac{\delta\mathcal E}{\delta\mu}` evaluated at ``points``.

    .. math::

        \frac{\delta\mathcal E}{\delta\mu}(y) = \frac12\int \big(e^{\langle Ay,x\rangle}
        + e^{\langle Ax,y\rangle}\big)\, d\mu(x),

    which is :math:`Z_\mu(y)` when :math:`A` is symmetric.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens of :math:`\mu`.
    A : array_like, shape (d, d)
    points : array_like, shape (m, d), optional
        Where to evaluate; the tokens themselves by default.
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (m,)

    References
    ----------
    Castin et al., arXiv:2501.18322.

    Examples
    --------
    >>> first_variation([[0.0, 0.0]], np.eye(2), [[1.0, 1.0]])
    array([1.])
    """
    X = as_tokens(X)
    n, d = X.shape
    A = _square(A, "A", d)
    Y = X if points is None else as_tokens(points, "points", d=d)
    w = as_weights(weights, n)
    S1, S2 = _kernels(X, A, Y)
    return 0.5 * (np.exp(S1) + np.exp(S2)) @ w


def energy_gradient(X: Any, A: Any, points: Any = None, *, weights: Any = None) -> np.ndarray:
    r"""Gradient :math:`\nabla_y\frac{\delta\mathcal E}{\delta\mu}(y)` at ``points``.

    .. math::

        \nabla\frac{\delta\mathcal E}{\delta\mu}(y) = \frac12\int\big(e^{\langle Ay,x\rangle}
        A^\top x + e^{\langle Ax,y\rangle} A x\big)\, d\mu(x),

    equal to :math:`A\int e^{\langle Ay,x\rangle}x\,d\mu(x)` for symmetric :math:`A`. For the
    empirical measure, :math:`\partial\mathcal E/\partial x_i = w_i\nabla\frac{\delta\mathcal
    E}{\delta\mu}(x_i)`.

    Parameters
    ----------
    X : array_like, shape (n, d)
    A : array_like, shape (d, d)
    points : array_like, shape (m, d), optional
        The tokens by default.
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (m, d)

    References
    ----------
    Castin et al., arXiv:2501.18322.

    Examples
    --------
    >>> energy_gradient([[1.0, 0.0]], 2 * np.eye(2), [[0.0, 0.0]])
    array([[2., 0.]])
    """
    X = as_tokens(X)
    n, d = X.shape
    A = _square(A, "A", d)
    Y = X if points is None else as_tokens(points, "points", d=d)
    w = as_weights(weights, n)
    S1, S2 = _kernels(X, A, Y)
    return 0.5 * ((np.exp(S1) * w) @ X @ A + (np.exp(S2) * w) @ X @ A.T)


def energy_rate(X: Any, velocity: Any, A: Any, *, weights: Any = None) -> float:
    r"""Time derivative of :math:`\mathcal E_A` when token :math:`x_i` moves with :math:`v_i`.

    .. math:: \frac{d}{dt}\mathcal E = \sum_i w_i\,\nabla\tfrac{\delta\mathcal E}{\delta\mu}(x_i)
        \cdot v_i .

    Parameters
    ----------
    X, velocity : array_like, shape (n, d)
    A : array_like, shape (d, d)
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    Examples
    --------
    >>> energy_rate([[1.0, 0.0]], [[1.0, 0.0]], -np.eye(2))  # d/dt e^{-(1+t)^2}/2 at t=0
    -0.36787944117144233
    """
    X = as_tokens(X)
    n, d = X.shape
    v = as_tokens(velocity, "velocity", d=d)
    if v.shape != X.shape:
        raise ValueError(f"`velocity` must have the shape of `X` {X.shape}; got {v.shape}.")
    w = as_weights(weights, n)
    return float(np.einsum("i,ik,ik->", w, energy_gradient(X, A, weights=w), v))


def energy_along(states: Any, A: Any, *, weights: Any = None) -> np.ndarray:
    """Energy :func:`particle_energy` at each state of a trajectory.

    Parameters
    ----------
    states : array_like, shape (T, n, d)
    A : array_like, shape (d, d)
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (T,)

    Examples
    --------
    >>> energy_along(np.zeros((3, 2, 1)), [[1.0]])
    array([0.5, 0.5, 0.5])
    """
    arr = np.asarray(states, dtype=np.float64)
    if arr.ndim != 3:
        raise ValueError(f"`states` must have shape (T, n, d); got shape {arr.shape}.")
    return np.array([particle_energy(X, A, weights=weights) for X in arr])


def monotonicity_sign(A: Any, V: Any) -> int:
    r"""Predicted sign of :math:`d\mathcal E/dt` for softmax and unnormalised attention.

    For symmetric :math:`A`, :math:`\frac{d}{dt}\mathcal E = \sum_i w_i Z_i^k\, m_i^\top AV m_i`
    (:math:`k = 1` softmax, :math:`k = 2` unnormalised), so the sign is that of
    :math:`AV + V^\top A^\top` when it is semidefinite.

    Returns
    -------
    int
        ``+1`` (energy non-decreasing), ``-1`` (non-increasing) or ``0`` (indefinite, no
        prediction).

    Examples
    --------
    >>> monotonicity_sign(-np.eye(2), np.eye(2))
    -1
    """
    A = as_matrix(A, "A")
    A = _symmetric(A, "A")
    V = _square(V, "V", A.shape[0])
    lam = np.linalg.eigvalsh(A @ V + V.T @ A)
    tol = SYM_RTOL * max(1.0, np.abs(lam).max())
    if lam.min() >= -tol:
        return 1
    if lam.max() <= tol:
        return -1
    return 0


# ----------------------------------------------------------------------- Gaussian energy


@dataclass(frozen=True)
class GaussianEnergy:
    """Interaction energy of a Gaussian, with its finiteness status.

    Attributes
    ----------
    value : float
        The energy; ``inf`` when it is infinite or beyond float64.
    log_value : float
        Its logarithm (``inf`` when infinite); always finite when ``finite`` is True.
    finite : bool
        Whether the integral converges (spectral norm of ``Σ^{1/2} A Σ^{1/2}`` below one).
    reason : str
        Empty when ``value`` is an honest float; otherwise why it is ``inf``.
    """

    value: float
    log_value: float
    finite: bool
    reason: str


def _gaussian_quadratic(cov: np.ndarray, A: np.ndarray):
    """Pieces of E(N(alpha, cov)) = exp(-logdet/2 + alpha^T H alpha) / 2, or the norm if >= 1."""
    d = A.shape[0]
    R = _psd_sqrt(cov)
    B = R @ A @ R
    sigma = float(np.linalg.norm(B, 2))
    if sigma >= 1.0:
        return None, None, sigma
    M = np.block([[np.zeros((d, d)), B.T], [B, np.zeros((d, d))]])
    I_M = np.eye(2 * d) - M
    _, logdet = np.linalg.slogdet(I_M)
    L = np.vstack([R @ A.T, R @ A])
    H = A + 0.5 * L.T @ np.linalg.solve(I_M, L)
    return logdet, 0.5 * (H + H.T), sigma


def gaussian_energy(mean: Any, cov: Any, A: Any) -> GaussianEnergy:
    r"""Closed-form interaction energy of :math:`\mathcal N(\alpha, \Sigma)`.

    With :math:`R = \Sigma^{1/2}`, :math:`B = RAR` and
    :math:`M = \begin{psmallmatrix}0 & B^\top\\ B & 0\end{psmallmatrix}`, the energy is finite iff
    :math:`\|B\|_2 < 1` (for symmetric :math:`A` and invertible :math:`\Sigma`:
    :math:`\Sigma^{-1} - A\Sigma A \succ 0`), and then

    .. math::

        \mathcal E = \tfrac12\det(I - M)^{-1/2}\exp(\alpha^\top H\alpha),\quad
        H = A + \tfrac12 L^\top (I - M)^{-1} L,\quad L = \begin{pmatrix}RA^\top\\ RA\end{pmatrix}.

    Valid for singular :math:`\Sigma` (a Dirac gives :math:`\frac12 e^{\langle A\alpha,\alpha
    \rangle}`).

    Parameters
    ----------
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
        Symmetric positive semidefinite.
    A : array_like, shape (d, d)

    Returns
    -------
    GaussianEnergy
        ``value = inf`` with a ``reason`` when the integral diverges; never an overflow warning.

    References
    ----------
    Castin et al., arXiv:2501.18322 (energy on Gaussians; closed form derived in the book).

    Examples
    --------
    >>> gaussian_energy(np.zeros(1), [[0.5]], [[-1.0]]).value  # (1 - s^2)^(-1/2) / 2
    0.5773502691896258
    >>> gaussian_energy(np.zeros(1), [[2.0]], [[-1.0]]).finite
    False
    """
    alpha = as_vector(mean, "mean")
    d = alpha.shape[0]
    A = _square(A, "A", d)
    S = _cov(cov, d)
    logdet, H, sigma = _gaussian_quadratic(S, A)
    if H is None:
        return GaussianEnergy(
            np.inf,
            np.inf,
            False,
            f"infinite: the spectral norm of Σ^(1/2) A Σ^(1/2) is {sigma:.6g} >= 1, so "
            "e^{<Ax, y>} is not integrable (for symmetric A: Σ^-1 - A Σ A is not positive "
            "definite). Shrink the covariance.",
        )
    log_value = float(np.log(0.5) - 0.5 * logdet + alpha @ H @ alpha)
    if log_value > LOG_FLOAT_MAX:
        return GaussianEnergy(
            np.inf, log_value, True, "finite but beyond float64; use `log_value`."
        )
    return GaussianEnergy(float(np.exp(log_value)), log_value, True, "")


def gaussian_energy_along(means: Any, covariances: Any, A: Any) -> np.ndarray:
    """Closed-form energy :func:`gaussian_energy` along a path of Gaussians.

    Parameters
    ----------
    means : array_like, shape (T, d)
    covariances : array_like, shape (T, d, d)
        For instance ``MomentSolution.means`` and ``.covariances`` of
        :func:`token_dynamics.gaussian.solve_moments`.
    A : array_like, shape (d, d)

    Returns
    -------
    ndarray, shape (T,)
        ``inf`` where the energy is infinite (see :func:`gaussian_energy` for the reason).

    Examples
    --------
    >>> gaussian_energy_along(np.zeros((2, 1)), [[[0.0]], [[0.6]]], [[-1.0]])
    array([0.5  , 0.625])
    """
    m = np.asarray(means, dtype=np.float64)
    C = np.asarray(covariances, dtype=np.float64)
    if m.ndim != 2 or C.shape != (*m.shape, m.shape[1]):
        raise ValueError(
            f"`means` must have shape (T, d) and `covariances` (T, d, d); got {m.shape} and "
            f"{C.shape}."
        )
    return np.array([gaussian_energy(a, S, A).value for a, S in zip(m, C, strict=True)])


def gaussian_translation_second_variation(mean: Any, cov: Any, A: Any, direction: Any) -> float:
    r""":math:`\frac{d^2}{ds^2}\mathcal E(\mathcal N(\alpha + sb, \Sigma))` at :math:`s = 0`.

    Translations :math:`s\mapsto(x\mapsto x+sb)_\#\mu` are constant-speed geodesics of
    :math:`W_2` (and of every twisted distance). With :math:`\mathcal E = K e^{\alpha^\top
    H\alpha}` (see :func:`gaussian_energy`), the value is
    :math:`\mathcal E\,\big((2b^\top H\alpha)^2 + 2b^\top Hb\big)`.

    Returns
    -------
    float
        ``inf`` is never returned: a diverging energy raises ``ValueError``.

    Examples
    --------
    >>> s = 0.5; round(gaussian_translation_second_variation([0.0], [[s]], [[-1.0]], [1.0]), 10)
    -0.7698003589
    """
    alpha = as_vector(mean, "mean")
    d = alpha.shape[0]
    b = as_vector(direction, "direction", size=d)
    A = _square(A, "A", d)
    S = _cov(cov, d)
    E = gaussian_energy(alpha, S, A)
    if not E.finite or not np.isfinite(E.value):
        raise ValueError(f"the energy of this Gaussian is not a finite float: {E.reason}")
    _, H, _ = _gaussian_quadratic(S, A)
    return float(E.value * ((2 * b @ H @ alpha) ** 2 + 2 * b @ H @ b))


def translation_second_variation(X: Any, A: Any, direction: Any, *, weights: Any = None) -> float:
    r"""Exact :math:`\frac{d^2}{ds^2}\mathcal E_A\big((x\mapsto x + sb)_\#\mu\big)` at :math:`s=0`.

    With :math:`f_{ij} = \langle Ax_i, x_j\rangle`, :math:`f'_{ij} = b^\top Ax_i + x_j^\top Ab`,
    the value is :math:`\frac12\sum_{ij} w_iw_j e^{f_{ij}}(f_{ij}'^2 + 2b^\top Ab)`.

    Parameters
    ----------
    X : array_like, shape (n, d)
    A : array_like, shape (d, d)
    direction : array_like, shape (d,)
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    Examples
    --------
    >>> translation_second_variation([[0.0]], [[-1.0]], [1.0])  # e^{-s^2}/2 at 0
    -1.0
    """
    X = as_tokens(X)
    n, d = X.shape
    A = _square(A, "A", d)
    b = as_vector(direction, "direction", size=d)
    w = as_weights(weights, n)
    S = X @ A.T @ X.T
    fp = (X @ A.T @ b)[:, None] + (X @ A @ b)[None, :]
    return float(0.5 * w @ (np.exp(S) * (fp**2 + 2 * b @ A @ b)) @ w)


# ---------------------------------------------------------------------- twisted metric


@dataclass(frozen=True)
class TwistedMetric:
    """The twisted geometry of unnormalised attention.

    Attributes
    ----------
    P : ndarray, shape (d, d)
        ``V A^{-1}``, symmetric definite.
    sign : int
        ``+1`` if ``P`` is positive definite (gradient ascent of the energy), ``-1`` if negative
        definite (descent).
    metric : ndarray, shape (d, d)
        ``(sign P)^{-1}``: the ground cost is ``(x - y)^T metric (x - y)``.
    """

    P: np.ndarray
    sign: int
    metric: np.ndarray


def twisted_metric(A: Any, V: Any) -> TwistedMetric:
    r"""The matrix :math:`P = VA^{-1}` and the twisted ground metric :math:`(\pm P)^{-1}`.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric, invertible.
    V : array_like, shape (d, d)

    Returns
    -------
    TwistedMetric

    Raises
    ------
    TwistedMetricError
        If ``A`` is singular or ``P`` is not symmetric, or not definite.

    References
    ----------
    Castin et al., arXiv:2501.18322 (the twisted Wasserstein distance; this reconstruction is
    the book's).

    Examples
    --------
    >>> twisted_metric(2 * np.eye(2), np.eye(2)).metric
    array([[2., 0.],
           [0., 2.]])
    """
    A = _symmetric(as_matrix(A, "A"), "A")
    d = A.shape[0]
    V = _square(V, "V", d)
    if np.linalg.cond(A) > 1.0 / SYM_RTOL:
        raise TwistedMetricError("`A` is singular (to working precision): P = V A^-1 is undefined.")
    P = V @ np.linalg.inv(A)
    scale = max(1.0, float(np.abs(P).max()))
    if np.abs(P - P.T).max() > 1e3 * SYM_RTOL * scale * np.linalg.cond(A):
        raise TwistedMetricError(
            "P = V A^-1 is not symmetric (A V != V^T A): unnormalised attention is not a gradient "
            "flow for a twisted W2 metric; choose V = P A with P symmetric definite."
        )
    P = 0.5 * (P + P.T)
    lam = np.linalg.eigvalsh(P)
    if lam.min() > 0:
        sign = 1
    elif lam.max() < 0:
        sign = -1
    else:
        raise TwistedMetricError(
            f"P = V A^-1 is indefinite (eigenvalues from {lam.min():.3g} to {lam.max():.3g}): "
            "(x - y)^T P^-1 (x - y) is not a cost; choose V = P A with P definite."
        )
    return TwistedMetric(P, sign, np.linalg.inv(sign * P))


def twisted_wasserstein(
    X: Any, Y: Any, A: Any, V: Any, *, weights_x: Any = None, weights_y: Any = None
) -> float:
    r"""Twisted distance :math:`d_P(\mu,\nu) = W_2((P^{-1/2})_\#\mu, (P^{-1/2})_\#\nu)`.

    The ground cost is :math:`(x-y)^\top(\pm P)^{-1}(x-y)` with :math:`P = VA^{-1}`; computed
    exactly by :func:`token_dynamics.wasserstein.wasserstein2` with ``metric``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    Y : array_like, shape (m, d)
    A, V : array_like, shape (d, d)
    weights_x : array_like, shape (n,), optional
    weights_y : array_like, shape (m,), optional

    Returns
    -------
    float

    Raises
    ------
    TwistedMetricError
        If ``V A^{-1}`` is not symmetric definite.

    Examples
    --------
    >>> X = np.array([[0.0, 0.0], [1.0, 1.0]])
    >>> round(twisted_wasserstein(X, X + [1.0, 0.0], 4 * np.eye(2), np.eye(2)), 12)
    2.0
    """
    X = as_tokens(X)
    d = X.shape[1]
    Y = as_tokens(Y, "Y", d=d)
    tm = twisted_metric(A, V)
    wx = as_weights(weights_x, X.shape[0], "weights_x")
    wy = as_weights(weights_y, Y.shape[0], "weights_y")
    return _wasserstein2(X, Y, wx, wy, tm.metric)


def softmax_metric_density(
    X: Any, A: Any, points: Any = None, *, weights: Any = None
) -> np.ndarray:
    r"""Density :math:`Z_\mu(x) = \int e^{\langle Ax, y\rangle}d\mu(y)` of the softmax metric.

    Softmax attention is the gradient flow of :math:`\mathcal E_A` for
    :math:`g_\mu(v, v) = \int Z_\mu(x)\, v(x)^\top(\pm P)^{-1}v(x)\,d\mu(x)`.

    Returns
    -------
    ndarray, shape (m,)

    Examples
    --------
    >>> softmax_metric_density([[0.0], [1.0]], [[1.0]], [[1.0]])
    array([1.85914091])
    """
    X = as_tokens(X)
    n, d = X.shape
    A = _square(A, "A", d)
    Y = X if points is None else as_tokens(points, "points", d=d)
    w = as_weights(weights, n)
    return np.exp(Y @ A.T @ X.T) @ w


@dataclass(frozen=True)
class GradientFlowCheck:
    r"""Gradient-flow identity at one configuration.

    Attributes
    ----------
    velocity : ndarray, shape (n, d)
        Attention velocity, from :class:`token_dynamics.attention.Unnormalised` or
        :class:`token_dynamics.attention.Softmax`.
    steepest : ndarray, shape (n, d)
        ``sign`` times the gradient of the energy for the metric (``P ∇δE/δμ``, divided by
        ``Z`` for softmax).
    identity_error : float
        ``max|velocity - steepest| / max|steepest|``.
    energy_rate : float
        :math:`d\mathcal E/dt` along ``velocity``.
    metric_speed_squared : float
        :math:`\|velocity\|^2` in the metric; gradient flow means
        ``energy_rate = sign * metric_speed_squared``.
    sign : int
        ``+1`` ascent, ``-1`` descent.
    """

    velocity: np.ndarray
    steepest: np.ndarray
    identity_error: float
    energy_rate: float
    metric_speed_squared: float
    sign: int


def gradient_flow_check(
    X: Any, A: Any, V: Any, *, kind: str = "unnormalised", weights: Any = None
) -> GradientFlowCheck:
    r"""Check that attention is the gradient flow of :math:`\mathcal E_A` for its metric.

    ``kind="unnormalised"``: velocity :math:`V\int e^{\langle Ax,y\rangle}y\,d\mu` against
    :math:`P\nabla\frac{\delta\mathcal E}{\delta\mu}`, metric :math:`\int v^\top(\pm P)^{-1}v\,
    d\mu`. ``kind="softmax"``: velocity divided by :math:`Z_\mu`, metric weighted by
    :math:`Z_\mu` (:func:`softmax_metric_density`).

    Parameters
    ----------
    X : array_like, shape (n, d)
    A : array_like, shape (d, d)
        Symmetric, invertible.
    V : array_like, shape (d, d)
        With ``V A^{-1}`` symmetric definite.
    kind : {"unnormalised", "softmax"}
    weights : array_like, shape (n,), optional

    Returns
    -------
    GradientFlowCheck

    Examples
    --------
    >>> X = np.array([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.1]])
    >>> c = gradient_flow_check(X, -np.eye(2), np.eye(2))
    >>> c.identity_error < 1e-14, c.sign
    (True, -1)
    """
    if kind not in ("unnormalised", "softmax"):
        raise ValueError(f"`kind` must be 'unnormalised' or 'softmax'; got {kind!r}.")
    X = as_tokens(X)
    n, d = X.shape
    tm = twisted_metric(A, V)
    A = _symmetric(_square(A, "A", d), "A")
    V = _square(V, "V", d)
    w = as_weights(weights, n)
    vel = _attention_velocity(kind, X, A, V, w)
    steep = energy_gradient(X, A, weights=w) @ tm.P.T
    Z = np.ones(n)
    if kind == "softmax":
        Z = softmax_metric_density(X, A, weights=w)
        steep = steep / Z[:, None]
    err = float(np.abs(vel - steep).max() / max(np.abs(steep).max(), np.finfo(float).tiny))
    speed2 = float(np.einsum("i,i,ik,kl,il->", w, Z, vel, tm.metric, vel))
    return GradientFlowCheck(vel, steep, err, energy_rate(X, vel, A, weights=w), speed2, tm.sign)


# ------------------------------------------------------------ Sinkhorn and Bures-Wasserstein


def _sinkhorn_cross_covariance(cov: np.ndarray, A: np.ndarray, eps: float):
    """Cross-covariance C of the entropic self-plan of N(., cov), cost -<Ax, y> (A symmetric)."""
    R = _psd_sqrt(cov)
    Bt = R @ A @ R / eps
    lam, U = np.linalg.eigh(0.5 * (Bt + Bt.T))
    c = 2 * lam / (1 + np.sqrt(1 + 4 * lam**2))
    Ct = (U * c) @ U.T
    return R @ Ct @ R, c


def _sinkhorn_moment_rhs(mean, cov, A, V, eps):
    """Right-hand side (alpha', Sigma') of the Sinkhorn Gaussian ODE (the gaussian module)."""
    from .gaussian import SinkhornMoments

    return SinkhornMoments(A, V, eps=eps).rhs(0.0, mean, cov)


def sinkhorn_gaussian_cost(mean: Any, cov: Any, A: Any, *, eps: float = 1.0) -> float:
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
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
    A : array_like, shape (d, d)
        Symmetric.
    eps : float
        Entropic regularisation, > 0.

    Returns
    -------
    float

    References
    ----------
    Castin et al., arXiv:2501.18322; Sander et al., *Sinkformers*, AISTATS 2022.

    Examples
    --------
    >>> round(sinkhorn_gaussian_cost([0.0], [[1.0]], [[0.0]]), 12)  # independent coupling
    0.0
    """
    alpha = as_vector(mean, "mean")
    d = alpha.shape[0]
    A = _symmetric(_square(A, "A", d), "A")
    S = _cov(cov, d)
    eps = check_positive(eps, "eps")
    C, c = _sinkhorn_cross_covariance(S, A, eps)
    return float(-np.trace(A @ C) - alpha @ A @ alpha - 0.5 * eps * np.sum(np.log1p(-(c**2))))


def bures_wasserstein_velocity(
    functional: Callable[[np.ndarray, np.ndarray], float],
    mean: Any,
    cov: Any,
    *,
    h: float = FD_STEP,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Velocity of the Bures-Wasserstein gradient flow (descent) of ``functional``.

    On Gaussians :math:`\mathcal N(\alpha,\Sigma)`, the :math:`W_2` gradient flow of
    :math:`F(\alpha,\Sigma)` is :math:`\alpha' = -\nabla_\alpha F`,
    :math:`\Sigma' = -2(G\Sigma + \Sigma G)` with :math:`G = \nabla_\Sigma F` the symmetric
    gradient (:math:`dF = \operatorname{tr}(G\,d\Sigma)`). Both gradients are taken by central
    differences of step ``h`` (error :math:`O(h^2)`).

    Parameters
    ----------
    functional : callable ``(mean (d,), cov (d, d)) -> float``
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
        Positive definite (so that ``cov ± h E`` stays a covariance).
    h : float
        Finite-difference step.

    Returns
    -------
    (ndarray (d,), ndarray (d, d))
        ``(alpha', Sigma')``.

    Examples
    --------
    >>> F = lambda m, S: 0.5 * m @ m + np.trace(S)  # G = I: Sigma' = -4 Sigma
    >>> dm, dS = bures_wasserstein_velocity(F, [1.0, 0.0], np.eye(2))
    >>> np.round(dm, 8), np.round(dS, 8)
    (array([-1., -0.]), array([[-4., -0.],
           [-0., -4.]]))
    """
    alpha = as_vector(mean, "mean")
    d = alpha.shape[0]
    S = _cov(cov, d)
    h = check_positive(h, "h")
    if np.linalg.eigvalsh(S).min() <= 2 * h:
        raise ValueError("`cov` must be positive definite with eigenvalues above 2 h.")
    g_mean = np.empty(d)
    for k in range(d):
        e = np.zeros(d)
        e[k] = h
        g_mean[k] = (functional(alpha + e, S) - functional(alpha - e, S)) / (2 * h)
    G = np.empty((d, d))
    for k in range(d):
        for m in range(k, d):
            E = np.zeros((d, d))
            E[k, m] += 0.5 * h
            E[m, k] += 0.5 * h
            G[k, m] = G[m, k] = (functional(alpha, S + E) - functional(alpha, S - E)) / (2 * h)
    return -g_mean, -2 * (G @ S + S @ G)


@dataclass(frozen=True)
class BuresWassersteinCheck:
    """Sinkhorn Gaussian dynamics against the Bures-Wasserstein gradient flow.

    Attributes
    ----------
    mean_velocity, cov_velocity : ndarray, shapes (d,), (d, d)
        ``alpha'`` and ``Sigma'`` of the Sinkhorn moment ODE (``V = A``).
    bw_mean_velocity, bw_cov_velocity : ndarray, shapes (d,), (d, d)
        The Bures-Wasserstein descent velocity of ``OT_eps(mu, mu) / 2`` by finite differences.
    error : float
        Largest absolute difference of the two, relative to the largest velocity entry.
    """

    mean_velocity: np.ndarray
    cov_velocity: np.ndarray
    bw_mean_velocity: np.ndarray
    bw_cov_velocity: np.ndarray
    error: float


def sinkhorn_bures_wasserstein_check(
    mean: Any, cov: Any, A: Any, *, eps: float = 1.0, h: float = FD_STEP
) -> BuresWassersteinCheck:
    r"""Sinkhorn Gaussian ODE (``V = A``) against the BW flow of half the entropic self-cost.

    Parameters
    ----------
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
        Positive definite.
    A : array_like, shape (d, d)
        Symmetric.
    eps : float
    h : float
        Finite-difference step of :func:`bures_wasserstein_velocity`.

    Returns
    -------
    BuresWassersteinCheck

    References
    ----------
    Castin et al., arXiv:2501.18322; Sander et al., *Sinkformers*, AISTATS 2022.

    Examples
    --------
    >>> chk = sinkhorn_bures_wasserstein_check([0.3, -0.2], [[1.0, 0.2], [0.2, 0.5]], -np.eye(2))
    >>> chk.error < 1e-8
    True
    """
    alpha = as_vector(mean, "mean")
    d = alpha.shape[0]
    A = _symmetric(_square(A, "A", d), "A")
    S = _cov(cov, d)
    eps = check_positive(eps, "eps")
    dm, dS = _sinkhorn_moment_rhs(alpha, S, A, A, eps)
    bm, bS = bures_wasserstein_velocity(
        lambda m, C: 0.5 * sinkhorn_gaussian_cost(m, C, A, eps=eps), alpha, S, h=h
    )
    scale = max(np.abs(dm).max(), np.abs(dS).max(), np.finfo(float).tiny)
    err = max(np.abs(dm - bm).max(), np.abs(dS - bS).max()) / scale
    return BuresWassersteinCheck(dm, dS, bm, bS, float(err))


# ------------------------------------------------------------------ metastability on the circle


@dataclass(frozen=True)
class CircleMetastability:
    """Softmax attention on the circle from uniform tokens: slow merging of clusters.

    Attributes
    ----------
    times : ndarray, shape (T,)
    states : ndarray, shape (T, n, 2)
        Tokens on the unit circle.
    energies : ndarray, shape (T,)
        :math:`E_\\beta = \\frac{1}{2\\beta n^2}\\sum_{ij}e^{\\beta\\langle x_i,x_j\\rangle}`.
    cluster_counts : ndarray, shape (T,)
        Number of groups of tokens separated by arcs longer than ``cluster_tol``.
    beta : float
    """

    times: np.ndarray
    states: np.ndarray
    energies: np.ndarray
    cluster_counts: np.ndarray
    beta: float


def _circle_rhs(_t, theta, beta):
    D = theta[None, :] - theta[:, None]  # D[i, j] = theta_j - theta_i
    S = beta * np.cos(D)
    W = np.exp(S - S.max(axis=1, keepdims=True))
    return (W * np.sin(D)).sum(axis=1) / W.sum(axis=1)


def _circle_clusters(theta: np.ndarray, tol: float) -> int:
    x = np.sort(np.mod(theta, 2 * np.pi))
    gaps = np.diff(np.append(x, x[0] + 2 * np.pi))
    return max(1, int(np.sum(gaps > tol)))


def circle_metastability(
    n: int,
    beta: float,
    t_max: float,
    *,
    t_min: float = 1e-2,
    n_times: int = 200,
    cluster_tol: float = 1e-2,
    rng: Any = None,
) -> CircleMetastability:
    r"""Run softmax attention (:math:`A = \beta I`, :math:`V = I`) on the circle, in log time.

    The angles obey :math:`\dot\theta_i = \sum_j \mathrm{softmax}_j(\beta\cos(\theta_j -
    \theta_i))\sin(\theta_j-\theta_i)`, the exact reduction of the projected dynamics on
    :math:`\mathbb S^1`. Clusters form at times of order one and then merge after times that
    grow exponentially with :math:`\beta`; the energy climbs a staircase. The ODE is stiff
    inside clusters, hence the implicit LSODA integrator (``rtol=1e-8``).

    Parameters
    ----------
    n : int
        Number of tokens, drawn uniformly on the circle.
    beta : float
        Inverse temperature, > 0.
    t_max : float
        Final time.
    t_min : float
        First positive output time (outputs are log-spaced, plus ``t = 0``).
    n_times : int
        Number of log-spaced output times.
    cluster_tol : float
        Arc length above which two neighbouring tokens are in different clusters.
    rng : Generator, int or None

    Returns
    -------
    CircleMetastability

    Raises
    ------
    RuntimeError
        If the integrator fails.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794 (metastability); Castin et al., arXiv:2501.18322.

    Examples
    --------
    >>> res = circle_metastability(8, 4.0, 50.0, n_times=20, rng=0)
    >>> bool(np.all(np.diff(res.energies) >= -1e-9)), res.states.shape
    (True, (21, 8, 2))
    """
    n = check_int(n, "n", minimum=2)
    beta = check_positive(beta, "beta")
    t_max = check_positive(t_max, "t_max")
    t_min = check_positive(t_min, "t_min")
    if t_min >= t_max:
        raise ValueError(f"`t_min` must be below `t_max` = {t_max}; got {t_min}.")
    n_times = check_int(n_times, "n_times", minimum=2)
    cluster_tol = check_positive(cluster_tol, "cluster_tol")
    theta0 = as_rng(rng).uniform(0.0, 2 * np.pi, n)
    times = np.concatenate([[0.0], np.geomspace(t_min, t_max, n_times)])
    sol = solve_ivp(
        _circle_rhs, (0.0, t_max), theta0, method="LSODA", t_eval=times, args=(beta,),
        rtol=1e-8, atol=1e-10,
    )  # fmt: skip
    if sol.status != 0:
        raise RuntimeError(f"the circle dynamics failed to integrate: {sol.message}")
    theta = sol.y.T
    states = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    energies = np.array([_sphere_energy(X, beta) for X in states])
    counts = np.array([_circle_clusters(th, cluster_tol) for th in theta])
    return CircleMetastability(times, states, energies, counts, beta)
