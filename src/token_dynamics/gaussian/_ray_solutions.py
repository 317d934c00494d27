"""Closed form of the softmax covariance started on a ray ``eps u u^T`` of the value matrix."""

from __future__ import annotations

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, FloatArray
from .._validation import as_matrix, as_times, as_vector, check_positive
from ._path import _check_before

__all__ = ["ray_blowup_time", "ray_covariance"]

#: Tolerance on |V u - lambda u|, relative to |V| (Frobenius), for an eigenvector given by the
#: user: far above the rounding of V @ u (d eps |V|), far below a direction that is not one.
EIGVEC_TOL = 1e-10


def _ray_rate(A: ArrayLike, V: ArrayLike, u: ArrayLike, eps: float) -> tuple[FloatArray, float]:
    Vm = as_matrix(V, "V")
    w = as_vector(u, "u", size=Vm.shape[0])
    Am = as_matrix(A, "A", shape=Vm.shape)
    norm = float(np.linalg.norm(w))
    if norm == 0:
        raise ValueError("`u` must be a nonzero eigenvector of V.")
    w = w / norm
    lam = float(w @ Vm @ w)
    if np.linalg.norm(Vm @ w - lam * w) > EIGVEC_TOL * np.linalg.norm(Vm):  # scale-free
        raise ValueError(
            "`u` must be an eigenvector of `V` (V u = lambda u) with a real eigenvalue."
        )
    q = float(w @ Am @ w)
    e = check_positive(eps, "eps")
    return w, 2.0 * lam * q * e


@float_guard("the blow-up time on the ray", "rescale `A`, `V`, `u` or `eps`")
def ray_blowup_time(A: ArrayLike, V: ArrayLike, u: ArrayLike, eps: float) -> float:
    r"""Blow-up time :math:`1/(2\lambda q \varepsilon)` of the ray started at
    :math:`\varepsilon uu^\top` (``inf`` if :math:`\lambda q \le 0`).

    Here :math:`Vu = \lambda u`, :math:`|u| = 1` and :math:`q = u^\top A u`
    (see :func:`ray_covariance`).

    Parameters
    ----------
    A : array_like, shape (d, d)
        Attention matrix.
    V : array_like, shape (d, d)
        Value matrix.
    u : array_like, shape (d,)
        An eigenvector of `V` with a real eigenvalue (normalised here).
    eps : float
        Initial variance along the ray, positive.

    Returns
    -------
    float
        The blow-up time, or ``inf``.

    Raises
    ------
    ValueError
        If `u` is zero or not an eigenvector of `V`, or `eps` is not positive.

    Examples
    --------
    >>> from token_dynamics.gaussian import ray_blowup_time
    >>> ray_blowup_time([[1.0, 5.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 1.0]], [1.0, 0.0], 0.5)
    0.5
    """
    _, rate = _ray_rate(A, V, u, eps)
    return 1.0 / rate if rate > 0 else np.inf


@float_guard("the covariance on the ray", "rescale `A`, `V`, `u`, `eps` or `times`")
def ray_covariance(
    A: ArrayLike, V: ArrayLike, u: ArrayLike, eps: float, times: ArrayLike
) -> FloatArray:
    r"""Softmax covariance started on a ray: if :math:`Vu = \lambda u`, :math:`|u| = 1` and
    :math:`q = u^\top A u`, then :math:`\Sigma_0 = \varepsilon uu^\top` stays on the ray,

    .. math:: \Sigma(t) = \frac{\varepsilon}{1 - 2\lambda q\varepsilon t}\,uu^\top .

    Parameters
    ----------
    A : array_like, shape (d, d)
        Attention matrix.
    V : array_like, shape (d, d)
        Value matrix.
    u : array_like, shape (d,)
        An eigenvector of `V` with a real eigenvalue (normalised here).
    eps : float
        Initial variance along the ray, positive.
    times : array_like, shape (T,)
        Strictly increasing times, before :func:`ray_blowup_time`.

    Returns
    -------
    ndarray, shape (T, d, d)
        :math:`\Sigma(t)`, a multiple of :math:`uu^\top`.

    Raises
    ------
    ValueError
        If `u` is not an eigenvector of `V` or `times` reach the blow-up time.

    Examples
    --------
    Here :math:`\lambda = 2`, :math:`q = 1`, :math:`\varepsilon = 1/2`: the variance doubles
    at :math:`t = 1/4`, half the blow-up time.

    >>> from token_dynamics.gaussian import ray_covariance
    >>> ray_covariance([[1.0, 5.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 1.0]], [1.0, 0.0], 0.5, [0.25])
    array([[[1., 0.],
            [0., 0.]]])
    """
    t = as_times(times)
    u, rate = _ray_rate(A, V, u, eps)
    _check_before(t, 1.0 / rate if rate > 0 else np.inf)
    return (float(eps) / (1.0 - rate * t))[:, None, None] * np.outer(u, u)
