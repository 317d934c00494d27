r"""The conditional distances :math:`W_{1,\lambda}` and :math:`W_{2,\lambda}` between measures on
positions and tokens that share their position marginal (masked attention)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._guards import float_guard
from .._linalg import power_of_two_scale
from .._typing import ArrayLike, FloatArray, IntArray
from .._validation import WEIGHTS_TOL
from ._discrete import _pair, wasserstein1, wasserstein2

__all__ = ["conditional_w1", "conditional_w2"]

#: Positions are compared exactly up to this absolute tolerance when checking that two measures
#: share their position marginal (positions such as (i - 1) / n are reproducible to an ulp).
POSITION_TOL = 1e-12


def _blocks(Z: FloatArray, w: FloatArray) -> tuple[FloatArray, IntArray, FloatArray]:
    """Distinct positions (sorted), the block index of each token and the mass of each block."""
    pos, idx = np.unique(Z[:, 0], return_inverse=True)
    # float64 already (weighted counts); asarray only tells the type checker, copying nothing
    mass = np.asarray(np.bincount(idx, weights=w, minlength=pos.shape[0]), dtype=np.float64)
    return pos, idx, mass


def _block_distances(
    X: ArrayLike,
    Y: ArrayLike,
    weights_x: ArrayLike | None,
    weights_y: ArrayLike | None,
    distance: Callable[..., float],
) -> tuple[FloatArray, FloatArray]:
    """The mass of each position and the `distance` (W1 or W2) of the two laws of the contents
    there, after checking that `X` and `Y` share their position marginal."""
    X, Y, a, b = _pair(X, Y, weights_x, weights_y)
    if X.shape[1] < 2:
        raise ValueError(
            "`X` must have shape (n, 1 + d): positions in column 0, then d >= 1 coordinates."
        )
    # Zero-weight tokens carry no mass: drop them before comparing the marginals.
    X, a = X[a > 0], a[a > 0]
    Y, b = Y[b > 0], b[b > 0]
    pos_x, idx_x, mass_x = _blocks(X, a)
    pos_y, idx_y, mass_y = _blocks(Y, b)
    if (
        pos_x.shape != pos_y.shape
        or np.max(np.abs(pos_x - pos_y)) > POSITION_TOL
        or np.max(np.abs(mass_x - mass_y)) > WEIGHTS_TOL
    ):
        raise ValueError(
            "`Y` must have the same position marginal as `X` (same positions in column 0 with the "
            "same total weight at each); W_{p,lambda} is only defined for a shared marginal."
        )
    dist = np.empty(mass_x.shape[0])
    for k, lam in enumerate(mass_x):
        xa, xb = X[idx_x == k, 1:], Y[idx_y == k, 1:]
        wa, wb = a[idx_x == k] / lam, b[idx_y == k] / lam
        if xa.shape[0] == 1 and xb.shape[0] == 1:  # two Dirac masses: W1 = W2 = |x - y|
            diff = xa[0] - xb[0]
            c = float(power_of_two_scale(diff))
            dist[k] = c * float(np.linalg.norm(diff / c))
        else:
            dist[k] = distance(xa, xb, weights_x=wa / wa.sum(), weights_y=wb / wb.sum())
    return mass_x, dist


@float_guard("the conditional Wasserstein distance", "rescale `X` or `Y`")
def conditional_w2(
    X: ArrayLike,
    Y: ArrayLike,
    *,
    weights_x: ArrayLike | None = None,
    weights_y: ArrayLike | None = None,
) -> float:
    r"""Conditional distance :math:`W_{2,\lambda}` of two measures with a shared position marginal.

    Tokens live in :math:`[0, 1]\times\mathbb R^d`: column 0 of `X` and `Y` holds the positions
    (the convention of :class:`token_dynamics.attention.Causal`). If both measures have the
    same first marginal :math:`\lambda`,

    .. math::

        W_{2,\lambda}(\mu, \nu)^2 = \int W_2(\mu_s, \nu_s)^2 \, d\lambda(s),

    where :math:`\mu_s` is the law of the token at position :math:`s`. With one token per
    position this is the index-matched root mean square :math:`\big(\sum_i w_i |x_i -
    y_i|^2\big)^{1/2}`. Always :math:`W_2 \le W_{2,\lambda}` (glue the conditional couplings).

    Parameters
    ----------
    X : array_like, shape (n, 1 + d)
        Positions in column 0, token coordinates after.
    Y : array_like, shape (m, 1 + d)
        Same layout; its positions and their masses must match those of `X`.
    weights_x, weights_y : array_like, shape (n,) and (m,), optional
        Probability weights; uniform when ``None``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the position marginals differ (the distance is then undefined).

    References
    ----------
    Castin et al. (2025), the conditional Wasserstein framework for masked attention.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.wasserstein import conditional_w2, wasserstein2
    >>> X = np.array([[0.0, 0.0], [0.5, 1.0]])
    >>> Y = np.array([[0.0, 1.0], [0.5, 0.0]])
    >>> round(conditional_w2(X, Y), 12)  # index-matched: each token moved by 1
    1.0
    >>> round(wasserstein2(X[:, 1:], Y[:, 1:]), 12)  # as plain clouds they coincide
    0.0
    """
    mass, dist = _block_distances(X, Y, weights_x, weights_y, wasserstein2)
    # the mean square over a power of two near the largest distance (exact): squares of
    # distances of 1e-200 underflowed to a total of 0
    c = float(power_of_two_scale(dist))
    return c * float(np.sqrt(np.sum(mass * (dist / c) ** 2)))


@float_guard("the conditional Wasserstein distance", "rescale `X` or `Y`")
def conditional_w1(
    X: ArrayLike,
    Y: ArrayLike,
    *,
    weights_x: ArrayLike | None = None,
    weights_y: ArrayLike | None = None,
) -> float:
    r"""Conditional distance :math:`W_{1,\lambda}` of two measures with a shared position marginal.

    The counterpart of :func:`conditional_w2` for the Euclidean ground cost :math:`|x - y|`,
    with the same layout (positions in column 0). If both measures have the same first marginal
    :math:`\lambda`,

    .. math::

        W_{1,\lambda}(\mu, \nu) = \int W_1(\mu_s, \nu_s) \, d\lambda(s),

    each :math:`W_1(\mu_s, \nu_s)` exact (:func:`wasserstein1`). With one token per position
    this is the index-matched mean distance :math:`\sum_i w_i |x_i - y_i|`. Always
    :math:`W_1 \le W_{1,\lambda} \le W_{2,\lambda}` (glue the conditional couplings; Jensen).

    Parameters
    ----------
    X : array_like, shape (n, 1 + d)
        Positions in column 0, token coordinates after.
    Y : array_like, shape (m, 1 + d)
        Same layout; its positions and their masses must match those of `X`.
    weights_x, weights_y : array_like, shape (n,) and (m,), optional
        Probability weights; uniform when ``None``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the position marginals differ (the distance is then undefined).

    References
    ----------
    Castin et al. (2025), the conditional Wasserstein framework for masked attention.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.wasserstein import conditional_w1, conditional_w2
    >>> X = np.array([[0.0, 0.0], [0.5, 0.0]])
    >>> Y = np.array([[0.0, 1.0], [0.5, 3.0]])
    >>> round(conditional_w1(X, Y), 12)  # the mean of the moves 1 and 3
    2.0
    >>> round(conditional_w2(X, Y) ** 2, 12)  # the mean of their squares
    5.0
    """
    mass, dist = _block_distances(X, Y, weights_x, weights_y, wasserstein1)
    c = float(power_of_two_scale(dist))  # as in conditional_w2: no underflow of tiny distances
    return c * float(np.sum(mass * (dist / c)))
