r"""Softmax tends to hardmax: the error at each inverse temperature and the bounds on it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, FloatArray
from .._validation import as_square, as_tokens, as_vector
from ._hardmax import tie_threshold
from ._variants import Hardmax, Softmax

__all__ = ["HardmaxLimit", "hardmax_limit"]


@dataclass(frozen=True)
class HardmaxLimit:
    r"""Distance between softmax and hardmax attention, query by query, and its bounds.

    Attributes
    ----------
    betas : (B,) array
        Inverse temperatures.
    error : (B, n) array
        :math:`|\mathrm{SA}_\beta(X)_i - \mathrm{HA}(X)_i|`.
    sharp_bound : (B, n) array
        The bound that weighs each key by its own gap and distance, capped by
        :math:`\lVert V\rVert\max_j |x_j - \bar x_{M_i}|`.
    crude_bound : (B, n) array
        :math:`2n\lVert V\rVert R\,e^{-\beta\,\mathrm{gap}_i}`.
    gap : (n,) array
        Margin between the best and the second-best distinct score of each query (``inf``
        when every score of the row ties). Scores tie as in :class:`Hardmax`, within its
        ``tol`` of the best, so that a tie that rounding splits stays a tie.
    radius : float
        :math:`R = \max_i |x_i|`.
    trivial_bound : float
        :math:`2\lVert V\rVert R`, a bound at every :math:`\beta`.

    Examples
    --------
    Returned by :func:`hardmax_limit`, whose example shows it.
    """

    betas: FloatArray
    error: FloatArray
    sharp_bound: FloatArray
    crude_bound: FloatArray
    gap: FloatArray
    radius: float
    trivial_bound: float


@float_guard("the softmax-hardmax error", "rescale `A` or `X`")
def hardmax_limit(A: ArrayLike, V: ArrayLike, X: ArrayLike, betas: ArrayLike) -> HardmaxLimit:
    r"""Error of softmax attention against hardmax at each ``beta``, with the two bounds.

    With scores :math:`s_{ij} = \langle Ax_i, x_j\rangle`, :math:`s_i^* = \max_j s_{ij}`,
    :math:`M_i` the :math:`c_i` maximisers (the keys that :class:`Hardmax` averages: scores
    within its relative ``tol`` of :math:`s_i^*`) and :math:`\bar x_{M_i}` their mean,

    .. math::

        |\mathrm{SA}_\beta(X)_i - \mathrm{HA}(X)_i|
        \le \frac{\lVert V\rVert}{c_i}\sum_{j\notin M_i} e^{-\beta(s_i^* - s_{ij})}
        |x_j - \bar x_{M_i}|
        \le 2n\lVert V\rVert R\,e^{-\beta\,\mathrm{gap}_i},

    and the error is at most :math:`\lVert V\rVert\max_j |x_j - \bar x_{M_i}|` at every
    :math:`\beta` (the sharp bound returned is the smaller of the two).

    Parameters
    ----------
    A : array_like, shape (d, d)
        Score matrix.
    V : array_like, shape (d, d)
        Value matrix.
    X : array_like, shape (n, d)
        Tokens, one per row.
    betas : array_like, shape (B,)
        Positive inverse temperatures.

    Returns
    -------
    HardmaxLimit
        Its ``gap`` is ``inf`` for a token whose scores all tie (every key is a maximiser):
        softmax and hardmax then agree exactly and both bounds are 0.

    Raises
    ------
    ValueError
        If the shapes disagree or a ``beta`` is not positive.
    FloatingPointError
        If the scores leave the float64 range.

    References
    ----------
    The bound is derived in this book: proposition ``tok-prop-hardmax-limit`` of the chapter
    on tokens as particles.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import hardmax_limit
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [-0.6, -0.8]])
    >>> limit = hardmax_limit(np.eye(2), np.eye(2), X, [1.0, 10.0, 100.0])
    >>> bool(np.all(limit.error <= limit.sharp_bound + 1e-13))
    True
    >>> bool(np.all(limit.sharp_bound <= limit.crude_bound))
    True
    >>> limit.gap  # each token scores 1 on itself, at most 0 on the others
    array([1. , 1. , 1.6])
    """
    A = as_square(A, "A")
    d = A.shape[0]
    Xa = as_tokens(X, "X", d=d)
    Va = as_square(V, "V", d=d)
    b = as_vector(betas, "betas")
    if np.any(b <= 0):
        raise ValueError(f"`betas` must be positive; got {betas!r}. Pass values such as [1, 10].")
    n = Xa.shape[0]
    hardmax = Hardmax(A, Va)
    S = Xa @ A.T @ Xa.T
    top = S.max(axis=1, keepdims=True)
    # the maximisers by the hardmax's own tie rule: rounding splits scores that tie exactly
    # (a query halfway between two keys), which would leave a gap of 1e-16 and one maximiser
    tied = S >= tie_threshold(top, hardmax.tol)
    c = tied.sum(axis=1)
    centre = (tied @ Xa) / c[:, None]
    dist = np.linalg.norm(Xa[None, :, :] - centre[:, None, :], axis=2)  # |x_j - mean(x_M)|
    second = np.where(tied, -np.inf, S).max(axis=1)
    gap = (top[:, 0] - second).astype(float)  # inf where every score ties
    drop = np.where(tied, 0.0, top - S)  # s_i* - s_ij >= gap_i off the maximisers
    norm_V = float(np.linalg.norm(Va, 2))
    radius = float(np.linalg.norm(Xa, axis=1).max())
    hard = hardmax.velocity(Xa)
    error = np.empty((b.size, n))
    sharp = np.empty((b.size, n))
    for k, beta in enumerate(b):
        error[k] = np.linalg.norm(Softmax(A, Va, beta=float(beta)).velocity(Xa) - hard, axis=1)
        weighted = np.where(tied, 0.0, np.exp(-beta * drop) * dist).sum(axis=1) / c
        sharp[k] = norm_V * np.minimum(weighted, dist.max(axis=1))
    crude = 2 * n * norm_V * radius * np.exp(-np.outer(b, gap))
    return HardmaxLimit(
        betas=b,
        error=error,
        sharp_bound=sharp,
        crude_bound=crude,
        gap=gap,
        radius=radius,
        trivial_bound=2 * norm_V * radius,
    )
