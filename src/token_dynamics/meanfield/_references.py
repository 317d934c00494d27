"""Exact Gaussian solutions of the softmax Transformer PDE, the references (private)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._linalg import psd_sqrt
from .._validation import as_covariance, as_matrix, as_times, as_vector, check_positive

__all__ = ["GaussianPath", "softmax_gaussian_1d", "softmax_gaussian_centred"]


@dataclass(frozen=True)
class GaussianPath:
    """A Gaussian solution :math:`\\mathcal N(m(t), \\Sigma(t))` of the Transformer PDE.

    Attributes
    ----------
    times : ndarray, shape (T,)
    mean : ndarray, shape (T, d)
    cov : ndarray, shape (T, d, d)
    """

    times: np.ndarray
    mean: np.ndarray
    cov: np.ndarray


def _check_blowup(t: np.ndarray, rate: float, what: str) -> None:
    if rate > 0 and t.max() >= 1.0 / rate:
        raise ValueError(
            f"`times` reach {t.max():g}, past the finite-time blow-up of {what} at t* = "
            f"{1.0 / rate:.6g}; stop before t*."
        )


def softmax_gaussian_1d(
    times: Any, mean0: float, var0: float, v: float, a: float, *, beta: float = 1.0
) -> GaussianPath:
    r"""Exact 1-D Gaussian solution of the softmax Transformer PDE.

    With :math:`\mu_0 = \mathcal N(m_0, s_0)`, scalar value :math:`v` and attention :math:`a`
    (score :math:`\beta a x y`), the solution stays Gaussian with

    .. math::

        s(t) = \frac{s_0}{1 - 2 v\beta a s_0 t}, \qquad
        m(t) = m_0 e^{vt}\,(1 - 2 v \beta a s_0 t)^{-1/2},

    which blows up at :math:`t^* = 1/(2v\beta a s_0)` when :math:`va > 0`.

    Parameters
    ----------
    times : array_like, shape (T,)
    mean0 : float
    var0 : float
        Initial variance :math:`s_0 > 0`.
    v, a : float
        Value and attention scalars.
    beta : float

    Returns
    -------
    GaussianPath
        With ``mean`` of shape ``(T, 1)`` and ``cov`` of shape ``(T, 1, 1)``.

    References
    ----------
    Castin et al. (2025), Gaussian preservation; the scalar closed form is derived here.

    Examples
    --------
    >>> sol = softmax_gaussian_1d([0.0, 1.0], 0.0, 0.4, 0.8, -0.6)
    >>> round(float(sol.cov[1, 0, 0]), 6)  # 0.4 / (1 + 2 * 0.8 * 0.6 * 0.4)
    0.289017
    """
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    m0 = float(as_vector([mean0], "mean0")[0])
    s0 = check_positive(var0, "var0")
    v = float(as_vector([v], "v")[0])
    a = float(as_vector([a], "a")[0]) * check_positive(beta, "beta")
    _check_blowup(t, 2.0 * v * a * s0, "the variance")
    den = 1.0 - 2.0 * v * a * s0 * t
    return GaussianPath(
        times=t,
        mean=(m0 * np.exp(v * t) / np.sqrt(den))[:, None],
        cov=(s0 / den)[:, None, None],
    )


def softmax_gaussian_centred(
    times: Any, cov0: Any, A: Any, v: float, *, beta: float = 1.0
) -> GaussianPath:
    r"""Exact centred Gaussian solution for :math:`V = vI` in any dimension.

    From :math:`\mathcal N(0, \Sigma_0)` the mean stays :math:`0` and

    .. math:: \Sigma(t) = \Sigma_0\big(I - v\beta t (A + A^\top)\Sigma_0\big)^{-1},

    until the first time the bracket becomes singular (finite-time blow-up).

    Parameters
    ----------
    times : array_like, shape (T,)
    cov0 : array_like, shape (d, d)
        Symmetric positive semi-definite.
    A : array_like, shape (d, d)
    v : float
    beta : float

    Returns
    -------
    GaussianPath

    Examples
    --------
    >>> sol = softmax_gaussian_centred([1.0], np.eye(2), -0.5 * np.eye(2), 1.0)
    >>> sol.cov[0].round(6)
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    S0 = as_covariance(cov0, "cov0")
    d = S0.shape[0]
    A = as_matrix(A, "A", shape=(d, d))
    v = float(as_vector([v], "v")[0]) * check_positive(beta, "beta")
    if np.max(np.abs(S0 - S0.T)) > 1e-10 * max(1.0, np.max(np.abs(S0))):
        raise ValueError("`cov0` must be symmetric.")
    vals, _ = np.linalg.eigh(S0)
    if vals.min() < -1e-10 * max(1.0, vals.max()):
        raise ValueError("`cov0` must be positive semi-definite.")
    root = psd_sqrt(S0)
    B = A + A.T
    # I - v t B S0 is singular when v t lambda = 1 for an eigenvalue lambda of S0^{1/2} B S0^{1/2}.
    rate = float(np.max(v * np.linalg.eigvalsh(root @ B @ root)))
    _check_blowup(t, rate, "the covariance")
    cov = np.stack([S0 @ np.linalg.inv(np.eye(d) - v * s * B @ S0) for s in t])
    cov = (cov + np.swapaxes(cov, 1, 2)) / 2
    return GaussianPath(times=t, mean=np.zeros((t.shape[0], d)), cov=cov)
