r"""What a layer does to the tokens apart from a common translation: the points it moves
differently from the others (one for the hat layer of the construction)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike
from .._validation import check_positive
from ._blocks import as_sequences
from ._moves import _distinct

__all__ = ["count_moved_points"]


@float_guard("the displacement of the tokens", "rescale the token sets")
def count_moved_points(
    before: ArrayLike | Sequence[ArrayLike],
    after: ArrayLike | Sequence[ArrayLike],
    *,
    tol: float = 1e-9,
) -> int:
    r"""Number of distinct points that a layer moves differently from the common translation.

    With :math:`s_i = y_i - x_i` the move of token :math:`x_i` to :math:`y_i` and
    :math:`\bar s` the coordinate-wise median of the moves (the common translation, as long as
    fewer than half of the tokens move otherwise), the moved points are the distinct
    :math:`x_i` (up to `tol`) with

    .. math:: \|s_i - \bar s\|_2 > \mathrm{tol}.

    Parameters
    ----------
    before, after : list of array_like, shapes (n_j, d), or array_like, shape (N, n, d)
        The token sets before and after the layer (two consecutive entries of
        :meth:`Transformer.layer_states`), with the same shapes.
    tol : float
        Positive distance below which two moves, or two points, are the same.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If the sets are not ``(n_j, d)`` arrays of finite reals with the same shapes, or `tol`
        is not positive.
    TypeError
        If `before` or `after` is not a list of arrays.
    FloatingPointError
        If a move overflows float64.

    Examples
    --------
    Every token is translated by ``(1, 0)`` except the one at the origin, moved by ``(0, 1)``:

    >>> import numpy as np
    >>> from token_dynamics.interpolation import count_moved_points
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 1.0], [0.0, 0.0], [3.0, 3.0]])
    >>> Y = X + [1.0, 0.0]
    >>> Y[[0, 3]] = [0.0, 1.0]
    >>> count_moved_points([X], [Y])  # the origin, counted once
    1
    """
    tol = check_positive(tol, "tol")
    xs = as_sequences(before, "before")
    ys = as_sequences(after, "after", d=xs[0].shape[1])
    if [x.shape for x in xs] != [y.shape for y in ys]:
        raise ValueError(
            "`before` and `after` must hold the same token sets, with the same shapes; got "
            f"{[x.shape for x in xs]} and {[y.shape for y in ys]}."
        )
    X, Y = np.vstack(xs), np.vstack(ys)
    if X.shape[0] == 0:
        return 0
    shift = Y - X
    moved = np.linalg.norm(shift - np.median(shift, axis=0), axis=1) > tol
    return int(_distinct(X[moved], tol).shape[0]) if moved.any() else 0
