r"""Geometry of the token space: the unit sphere of layer normalisation.

Layer normalisation keeps tokens on :math:`\mathbb S^{d-1}`. Its continuous counterpart projects
each velocity on the tangent space, :math:`P_x = I - x x^\top`; a discrete layer renormalises
after each residual step. Both act row by row on tokens ``X`` of shape ``(n, d)``.

Both are invariant under rescaling a row, and compute on rows divided by a power of two near
their largest entry:
rows of norm 1e-200 or 1e200 give the same directions as rows of norm one, without overflow or
division by zero.
"""

from __future__ import annotations

import numpy as np

from ._linalg import power_of_two_scale
from ._typing import ArrayLike
from ._validation import as_tokens

__all__ = ["normalize", "project_tangent"]


def _rescaled_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows divided exactly by a power of two near their largest entry, and those powers."""
    scale = power_of_two_scale(X, axis=1)
    return X / scale, scale


def _normalize_rows(X: np.ndarray) -> np.ndarray:
    Xs, _ = _rescaled_rows(X)
    return Xs / np.linalg.norm(Xs, axis=1, keepdims=True)


def _project_rows(X: np.ndarray, dX: np.ndarray) -> np.ndarray:
    Xs, _ = _rescaled_rows(X)
    Vs, v_scale = _rescaled_rows(dX)
    coef = np.einsum("ij,ij->i", Vs, Xs) / np.einsum("ij,ij->i", Xs, Xs)
    with np.errstate(over="ignore"):
        out = v_scale * (Vs - coef[:, None] * Xs)
    if not np.all(np.isfinite(out)):
        raise FloatingPointError(
            "the tangent projection of `dX` overflows float64 (a row of `dX` is within a factor "
            "of two of the largest float); rescale `dX`."
        )
    return out


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
    zero = np.all(X == 0, axis=1)
    if np.any(zero):
        i = int(np.argmax(zero))
        raise ValueError(f"`X` row {i} is zero and has no direction; remove or perturb it.")
    return _normalize_rows(X)


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
        raise ValueError(
            "`X` has a zero row, where the tangent space is undefined; remove or perturb it."
        )
    return _project_rows(X, dX)
