r"""Geometry of the token space: the unit sphere of layer normalisation.

Layer normalisation keeps tokens on :math:`\mathbb S^{d-1}`. Its continuous counterpart projects
each velocity on the tangent space, :math:`P_x = I - x x^\top`; a discrete layer renormalises
after each residual step. Both act row by row on tokens ``X`` of shape ``(n, d)``.
"""

from __future__ import annotations

import numpy as np

from ._typing import ArrayLike
from ._validation import as_tokens

__all__ = ["normalize", "project_tangent"]


def _normalize_rows(X: np.ndarray) -> np.ndarray:
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _project_rows(X: np.ndarray, dX: np.ndarray) -> np.ndarray:
    coef = np.einsum("ij,ij->i", dX, X) / np.einsum("ij,ij->i", X, X)
    return dX - coef[:, None] * X


def normalize(X: ArrayLike) -> np.ndarray:
    r"""Scale every token to unit norm, :math:`x_i \mapsto x_i / |x_i|` (layer normalisation).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens; no row may be zero.

    Returns
    -------
    ndarray, shape (n, d)
        A new array with rows of norm one.

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals or has a zero row (no direction).
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A mathematical perspective on
    Transformers*, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.geometry import normalize
    >>> normalize([[3.0, 4.0], [0.0, -2.0]])
    array([[ 0.6,  0.8],
           [ 0. , -1. ]])
    """
    X = as_tokens(X)
    norms = np.linalg.norm(X, axis=1)
    if np.any(norms == 0):
        i = int(np.argmin(norms))
        raise ValueError(f"`X` row {i} is zero and has no direction; remove or perturb it.")
    return X / norms[:, None]


def project_tangent(X: ArrayLike, dX: ArrayLike) -> np.ndarray:
    r"""Project each row of ``dX`` on the tangent space of the sphere at the row of ``X``.

    .. math::

        P_{x_i}\, v_i = v_i - \frac{\langle v_i, x_i\rangle}{|x_i|^2}\, x_i ,

    which is :math:`v_i - \langle v_i, x_i\rangle x_i` for unit tokens. The result is orthogonal
    to each :math:`x_i`, so the flow of a projected field preserves every norm exactly.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Base points (nonzero rows; usually of norm one).
    dX : array_like, shape (n, d)
        Vectors to project, e.g. velocities.

    Returns
    -------
    ndarray, shape (n, d)

    Raises
    ------
    ValueError
        If `X` or `dX` is not an ``(n, d)`` array of finite reals, their shapes differ or `X` has a
        zero row.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.geometry import project_tangent
    >>> project_tangent([[1.0, 0.0]], [[2.0, 3.0]])
    array([[0., 3.]])
    """
    X = as_tokens(X)
    dX = as_tokens(dX, "dX")
    if dX.shape != X.shape:
        raise ValueError(f"`dX` must have the shape of `X`, {X.shape}; got {dX.shape}.")
    if np.any(np.all(X == 0, axis=1)):
        raise ValueError("`X` has a zero row, where the tangent space is undefined.")
    return _project_rows(X, dX)
