"""How spread or clustered a token cloud is: diameter, smallest inner product, clusters."""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from .._guards import float_guard
from .._linalg import power_of_two_scale, row_blocks
from .._typing import ArrayLike
from .._validation import as_tokens, check_positive

__all__ = ["cluster_count", "diameter", "min_inner_product"]


def diameter(X: ArrayLike) -> float:
    r"""Diameter :math:`\max_{i,j} |x_i - x_j|` of the cloud (0 for a single token).

    Distances are computed from coordinate differences (no cancellation for tight clusters),
    in row blocks.

    Parameters
    ----------
    X : array_like, shape (n, d)

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.diagnostics import diameter
    >>> diameter([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    5.0
    """
    X = as_tokens(X)
    # distances of X / c, c the power of two at max |x_ij| (exact, no overflow in cdist)
    c = float(power_of_two_scale(X))
    best = 0.0
    for rows in row_blocks(X.shape[0], X.shape[0]):
        best = max(best, float(cdist(X[rows] / c, X / c).max()))
    with np.errstate(over="ignore"):
        best *= c
    if not np.isfinite(best):
        raise FloatingPointError("the diameter of `X` overflows float64; rescale `X`.")
    return best


@float_guard("the smallest inner product", "rescale `X`")
def min_inner_product(X: ArrayLike) -> float:
    r"""Smallest pairwise inner product :math:`\min_{i,j}\langle x_i, x_j\rangle`.

    On the sphere, a value above :math:`1 - \delta` means every pair is within angle
    :math:`\arccos(1 - \delta)`: the cloud has clustered.

    Parameters
    ----------
    X : array_like, shape (n, d)

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.diagnostics import min_inner_product
    >>> min_inner_product([[1.0, 0.0], [0.0, 1.0]])
    0.0
    """
    X = as_tokens(X)
    return min(float((X[rows] @ X.T).min()) for rows in row_blocks(X.shape[0], X.shape[0]))


def cluster_count(X: ArrayLike, tol: float) -> int:
    r"""Number of clusters at scale ``tol``: connected components of the graph that links
    tokens at distance :math:`\le` ``tol`` (single-linkage clusters).

    Computed by min-label propagation with pointer jumping over row blocks of the distance
    matrix (memory bounded, exact).

    Parameters
    ----------
    X : array_like, shape (n, d)
    tol : float
        Linking distance, nonnegative (``0`` counts distinct tokens).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals or `tol` is negative.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.diagnostics import cluster_count
    >>> cluster_count([[0.0, 0.0], [0.0, 1e-3], [1.0, 0.0]], tol=1e-2)
    2
    """
    X = as_tokens(X)
    tol = check_positive(tol, "tol", allow_zero=True)
    n = X.shape[0]
    labels = np.arange(n)
    while True:
        new = labels.copy()
        for rows in row_blocks(n, n):
            near = cdist(X[rows], X) <= tol
            new[rows] = np.where(near, labels[None, :], n).min(axis=1)
        while True:  # pointer jumping: a label is a token of the same component
            jumped = new[new]
            if np.array_equal(jumped, new):
                break
            new = jumped
        if np.array_equal(new, labels):
            return int(np.unique(labels).size)
        labels = new
