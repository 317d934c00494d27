"""The Hausdorff distance between finite token sets, the error measure of exact interpolation
(private; re-exported by :mod:`token_dynamics.interpolation`)."""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from .._guards import float_guard
from .._linalg import power_of_two_scale
from .._typing import ArrayLike, FloatArray
from .._validation import as_tokens
from ._blocks import as_sequences

__all__ = ["hausdorff_distance", "relative_hausdorff_errors"]


def hausdorff_distance(X: ArrayLike, Y: ArrayLike) -> float:
    r"""Hausdorff distance between the finite sets of rows of ``X`` and ``Y``.

    .. math:: d_H(X, Y) = \max\Big(\max_i \min_k |x_i - y_k|,\ \max_k \min_i |x_i - y_k|\Big).

    The distance of two sequences as sets: it ignores order and repetition, so a network that
    maps :math:`X^j` onto a sequence whose set of tokens is :math:`Y^j` interpolates exactly.

    Parameters
    ----------
    X : array_like, shape (n, d)
        The first set, one point per row.
    Y : array_like, shape (m, d)
        The second set, in the same dimension.

    Returns
    -------
    float
        :math:`d_H(X, Y) \ge 0`, zero exactly when the two sets of rows coincide.

    Raises
    ------
    ValueError
        If `X` and `Y` are not arrays of tokens in the same dimension.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> from token_dynamics.interpolation import hausdorff_distance
    >>> hausdorff_distance([[0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0]])
    0.0
    >>> hausdorff_distance([[0.0, 0.0]], [[0.0, 0.0], [3.0, 4.0]])
    5.0
    """
    X = as_tokens(X, "X")
    Y = as_tokens(Y, "Y", d=X.shape[1])
    with float_guard("the Hausdorff distance", "rescale `X` and `Y`"):
        return _unchecked_hausdorff(X, Y)


def _unchecked_hausdorff(X: FloatArray, Y: FloatArray) -> float:
    """The Hausdorff distance of two validated token arrays in one dimension."""
    # distances of the clouds divided by one power of two (exact, no overflow or underflow in
    # cdist), that of both together: an all-zero cloud must not impose its scale 1 on the other
    c = float(power_of_two_scale(np.vstack([X, Y])))
    D = cdist(X / c, Y / c)
    return float(max(D.min(axis=1).max(), D.min(axis=0).max()) * c)


def relative_hausdorff_errors(outputs: ArrayLike, targets: ArrayLike) -> FloatArray:
    r"""Per-sequence Hausdorff error, relative to the size of the target:

    .. math:: \mathrm{err}_j = \frac{d_H\big(\mathrm T(X^j), Y^j\big)}{\max(1, \max_k|y^j_k|)}.

    Parameters
    ----------
    outputs : list of array_like, shapes (n_j, d)
        The network's outputs :math:`\mathrm T(X^j)`, one per sequence.
    targets : list of array_like, shapes (m_j, d)
        The target sets :math:`Y^j`, in the same order and dimension.

    Returns
    -------
    ndarray, shape (N,)
        The relative error of each sequence (absolute for targets inside the unit ball).

    Raises
    ------
    ValueError
        If the lists have different lengths or a sequence is not ``(n_j, d)``.
    TypeError
        If `outputs` or `targets` is not a non-empty list of arrays.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import relative_hausdorff_errors
    >>> relative_hausdorff_errors([np.ones((3, 2))], [np.ones((1, 2))]).tolist()
    [0.0]
    """
    outs = as_sequences(outputs, "outputs")
    tgts = as_sequences(targets, "targets", d=outs[0].shape[1])
    if len(outs) != len(tgts):
        raise ValueError(f"got {len(outs)} `outputs` but {len(tgts)} `targets`; pair them.")
    with float_guard("the relative Hausdorff errors", "rescale `outputs` and `targets`"):
        return np.array(
            [
                _unchecked_hausdorff(O, Y) / max(1.0, float(np.max(np.abs(Y))) * _norm_factor(Y))
                for O, Y in zip(outs, tgts, strict=True)
            ]
        )


def _norm_factor(Y: np.ndarray) -> float:
    """``max_i |y_i| / max |y_ij|``, computed on the rescaled rows (no overflow)."""
    return float(np.linalg.norm(Y / np.max(np.abs(Y)), axis=1).max()) if np.any(Y) else 0.0


def _closest_pair(X: FloatArray) -> tuple[float, int, int]:
    """Smallest distance between two rows of ``X`` and the rows ``i < k`` at that distance
    (``(inf, -1, -1)`` for one row)."""
    if X.shape[0] < 2:
        return np.inf, -1, -1
    D = cdist(X, X)
    np.fill_diagonal(D, np.inf)
    i, k = sorted(int(a) for a in np.unravel_index(np.argmin(D), D.shape))
    return float(D[i, k]), i, k
