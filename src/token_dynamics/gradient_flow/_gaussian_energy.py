"""Closed-form interaction energy of Gaussians and its second variation (private)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._linalg import LOG_FLOAT_MAX, psd_sqrt
from .._typing import ArrayLike, FloatArray
from .._validation import as_covariance, as_real_array, as_square, as_vector

__all__ = [
    "GaussianEnergy",
    "gaussian_energy",
    "gaussian_energy_along",
    "gaussian_translation_second_variation",
]


@dataclass(frozen=True)
class GaussianEnergy:
    r"""Interaction energy of a Gaussian, with its finiteness status.

    .. math:: \mathcal E(\mu) = \frac12\iint e^{\langle Ax, y\rangle}\,d\mu(x)\,d\mu(y),
              \qquad \mu = \mathcal N(\alpha, \Sigma).

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

    Examples
    --------
    Returned by :func:`gaussian_energy`:

    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import gaussian_energy
    >>> E = gaussian_energy([[-1.0]], [1.0], [[0.5]])
    >>> E.finite, bool(np.isclose(np.log(E.value), E.log_value)), E.reason
    (True, True, '')
    >>> gaussian_energy([[-1.0]], [0.0], [[2.0]]).value
    inf
    """

    value: float
    log_value: float
    finite: bool
    reason: str


def _gaussian_quadratic(cov: FloatArray, A: FloatArray):
    """Pieces of E(N(alpha, cov)) = exp(-logdet/2 + alpha^T H alpha) / 2, or the norm if >= 1."""
    d = A.shape[0]
    R = psd_sqrt(cov)
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


@float_guard("the Gaussian energy", "rescale `mean`, `cov` or `A`")
def gaussian_energy(A: ArrayLike, mean: ArrayLike, cov: ArrayLike) -> GaussianEnergy:
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
    A : array_like, shape (d, d)
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
        Symmetric positive semidefinite.

    Returns
    -------
    GaussianEnergy
        ``value = inf`` with a ``reason`` when the integral diverges; never an overflow warning.

    Raises
    ------
    ValueError
        If `cov` is not a covariance or `A` not a square matrix matching `mean` (a diverging energy
        is reported by ``finite``, not raised).
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    Castin et al., arXiv:2501.18322 (energy on Gaussians; closed form derived in the book).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import gaussian_energy
    >>> gaussian_energy([[-1.0]], np.zeros(1), [[0.5]]).value  # (1 - s^2)^(-1/2) / 2
    0.5773502691896258
    >>> gaussian_energy([[-1.0]], np.zeros(1), [[2.0]]).finite
    False
    """
    alpha = as_vector(mean, "mean")
    d = alpha.shape[0]
    A = as_square(A, "A", d=d)
    S = as_covariance(cov, "cov", d=d)
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


@float_guard("the Gaussian energy", "rescale `means`, `covariances` or `A`")
def gaussian_energy_along(A: ArrayLike, means: ArrayLike, covariances: ArrayLike) -> FloatArray:
    """Closed-form energy :func:`gaussian_energy` along a path of Gaussians.

    Parameters
    ----------
    A : array_like, shape (d, d)
    means : array_like, shape (T, d)
    covariances : array_like, shape (T, d, d)
        For instance ``GaussianPath.means`` and ``.covariances`` of
        :func:`token_dynamics.gaussian.solve_moments`.

    Returns
    -------
    ndarray, shape (T,)
        ``inf`` where the energy is infinite (see :func:`gaussian_energy` for the reason).

    Raises
    ------
    ValueError
        If `means` is not ``(T, d)`` and `covariances` not ``(T, d, d)``.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import gaussian_energy_along
    >>> gaussian_energy_along([[-1.0]], np.zeros((2, 1)), [[[0.0]], [[0.6]]])
    array([0.5  , 0.625])
    """
    m = as_real_array(means, "means")
    C = as_real_array(covariances, "covariances")
    if m.ndim != 2 or C.shape != (*m.shape, m.shape[1]):
        raise ValueError(
            f"`means` must have shape (T, d) and `covariances` (T, d, d); got {m.shape} and "
            f"{C.shape}."
        )
    for k, S in enumerate(C):
        as_covariance(S, f"covariances[{k}]")
    return np.array([gaussian_energy(A, a, S).value for a, S in zip(m, C, strict=True)])


@float_guard(
    "the second variation of the Gaussian energy", "rescale `mean`, `cov`, `A` or `direction`"
)
def gaussian_translation_second_variation(
    A: ArrayLike, mean: ArrayLike, cov: ArrayLike, direction: ArrayLike
) -> float:
    r""":math:`\frac{d^2}{ds^2}\mathcal E(\mathcal N(\alpha + sb, \Sigma))` at :math:`s = 0`.

    Translations :math:`s\mapsto(x\mapsto x+sb)_\#\mu` are constant-speed geodesics of
    :math:`W_2` (and of every twisted distance). With :math:`\mathcal E = K e^{\alpha^\top
    H\alpha}` (see :func:`gaussian_energy`), the value is
    :math:`\mathcal E\,\big((2b^\top H\alpha)^2 + 2b^\top Hb\big)`.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Attention matrix.
    mean : array_like, shape (d,)
        The mean :math:`\alpha`.
    cov : array_like, shape (d, d)
        The covariance :math:`\Sigma`, symmetric positive semi-definite.
    direction : array_like, shape (d,)
        The translation :math:`b`.

    Returns
    -------
    float
        The second derivative.

    Raises
    ------
    ValueError
        If the energy of :math:`\mathcal N(\alpha, \Sigma)` is infinite or beyond float64
        (``inf`` is never returned).

    Examples
    --------
    Against a central second difference of :func:`gaussian_energy` (error
    :math:`O(h^2)`, here about :math:`10^{-8}`):

    >>> from token_dynamics.gradient_flow import (
    ...     gaussian_energy, gaussian_translation_second_variation)
    >>> exact = gaussian_translation_second_variation([[-1.0]], [0.2], [[0.5]], [1.0])
    >>> h = 1e-4
    >>> E = [gaussian_energy([[-1.0]], [0.2 + k * h], [[0.5]]).value for k in (-1, 0, 1)]
    >>> bool(abs((E[0] - 2 * E[1] + E[2]) / h**2 - exact) < 1e-6)
    True
    """
    alpha = as_vector(mean, "mean")
    d = alpha.shape[0]
    b = as_vector(direction, "direction", size=d)
    A = as_square(A, "A", d=d)
    S = as_covariance(cov, "cov", d=d)
    E = gaussian_energy(A, alpha, S)
    if not E.finite or not np.isfinite(E.value):
        raise ValueError(
            f"the energy of the Gaussian (`mean`, `cov`) with `A` is not a finite float: {E.reason}"
        )
    _, H, _ = _gaussian_quadratic(S, A)
    return float(E.value * ((2 * b @ H @ alpha) ** 2 + 2 * b @ H @ b))
