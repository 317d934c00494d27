"""Moving points with ReLU layers: generic directions, the hat layer that moves one point and
the snapping layer that sends a segment of a line onto one point (private)."""

from __future__ import annotations

from typing import cast

import numpy as np
from scipy.spatial import cKDTree

from .._guards import float_guard
from .._typing import ArrayLike, FloatArray, SeedLike
from .._validation import as_rng, as_tokens, as_vector, check_positive, check_real
from ._layers import FeedForward

__all__ = ["hat_move", "snap_layer"]

#: Two current tokens closer than ``COINCIDE_RTOL * scale`` are the same point. Rounding in the
#: construction moves a point by ~1e-13 relative, far below; distinct data points must be at
#: least ``DISTINCT_RTOL * scale`` apart, far above, so the two never get confused.
COINCIDE_RTOL = 1e-9
DISTINCT_RTOL = 1e-6
#: Random directions tried when a generic direction is needed (the best is kept): the smallest
#: gap of a random projection of M points is ~1/M^2 of their spread, and 16 draws make a tiny
#: gap unlikely at no real cost.
N_DIRECTION_TRIALS = 16


def _distinct(points: FloatArray, tol: float) -> FloatArray:
    """Representatives of the rows of ``points`` up to coincidence within ``tol``: scanning the
    rows in order, a row is kept unless an earlier kept row lies within ``tol`` of it.

    The pairs within ``tol`` come from a k-d tree, so the cost grows like ``M log M`` for ``M``
    rows (plus one step per row that has a later neighbour), not like the ``M^2`` distances.
    """
    n = points.shape[0]
    keep = np.ones(n, dtype=bool)
    pairs = cKDTree(points).query_pairs(tol, output_type="ndarray")  # i < j, |p_i - p_j| <= tol
    if pairs.size:
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
        firsts, starts = np.unique(pairs[:, 0], return_index=True)
        ends = np.append(starts[1:], pairs.shape[0])
        taken = np.zeros(n, dtype=bool)
        for i, a, b in zip(firsts, starts, ends, strict=True):
            if not taken[i]:  # kept: its later neighbours are represented by it
                taken[pairs[a:b, 1]] = True
        keep &= ~taken
    return points[keep]


def _generic_direction(
    points: np.ndarray, rng: np.random.Generator, anchor: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """A unit direction whose projection separates the points (or ``anchor`` from the others)
    best among random draws; returns it with the smallest projected gap."""
    d: int = points.shape[1]
    best, best_gap = None, -1.0
    for _ in range(N_DIRECTION_TRIALS):
        e: np.ndarray = rng.normal(size=d)
        e /= np.linalg.norm(e)
        s = points @ e
        if anchor is not None:
            gaps = np.abs(s - anchor @ e)
            gap = float(gaps.min()) if gaps.size else np.inf
        else:
            gap = float(np.diff(np.sort(s)).min()) if s.size > 1 else np.inf
        if gap > best_gap:
            best, best_gap = e, gap
    return cast(np.ndarray, best), best_gap  # set at the first trial: every gap exceeds -1


def hat_move(
    points: ArrayLike,
    p: ArrayLike,
    q: ArrayLike,
    *,
    translation: ArrayLike | None = None,
    rng: SeedLike = None,
) -> FeedForward:
    r"""A residual ReLU layer that moves the point ``p`` to ``q`` and fixes the other points.

    With a unit direction :math:`e` whose projection isolates :math:`p`, :math:`s_0 = \langle
    e, p\rangle` and :math:`\delta` half the smallest projected gap, the layer is

    .. math:: x \mapsto x + t + \frac{q - p - t}{\delta}\big(\sigma(s - s_0 + \delta)
              - 2\sigma(s - s_0) + \sigma(s - s_0 - \delta)\big), \qquad s = \langle e, x\rangle,

    a hat of height 1 at :math:`p` that vanishes outside :math:`|s - s_0| < \delta`; width 3, or
    4 with the optional translation :math:`t` (a unit with zero input weights).

    Parameters
    ----------
    points : array_like, shape (M, d)
        The other current points that must stay fixed (``p`` itself may be among them).
    p, q : array_like, shape (d,)
        Point to move and its destination.
    translation : array_like, shape (d,), optional
        A translation applied to every point in the same layer.
    rng : Generator, int or None
        Draws the direction (best of a few random ones).

    Returns
    -------
    FeedForward

    Raises
    ------
    ValueError
        If `p`, `q` or `translation` do not match the dimension of `points`, or `p` cannot be
        isolated from the other points (they must be pairwise distinct).
    TypeError
        If an array argument is not real, or `rng` is not a Generator, a seed or None.

    References
    ----------
    The one-point move of the phases of A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence
    interpolation with transformers*, arXiv:2502.02270, in the form derived in this book.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import hat_move
    >>> pts = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> ff = hat_move(pts, pts[1], [5.0, 5.0], rng=0)
    >>> np.round(ff(pts), 12).tolist()
    [[0.0, 0.0], [5.0, 5.0], [0.0, 1.0]]
    """
    pts = as_tokens(points, "points")
    d = pts.shape[1]
    p = as_vector(p, "p", size=d)
    q = as_vector(q, "q", size=d)
    t = np.zeros(d) if translation is None else as_vector(translation, "translation", size=d)
    rng = as_rng(rng)
    with float_guard("the hat move", "rescale `points`, `p` and `q`"):
        return _hat_move(pts, p, q, t, translation is not None, rng)


def _hat_move(
    pts: FloatArray,
    p: FloatArray,
    q: FloatArray,
    t: FloatArray,
    translated: bool,
    rng: np.random.Generator,
) -> FeedForward:
    d = pts.shape[1]
    # coincidence relative to the points' own size, in the max-norm (no squares to underflow),
    # so that tiny data is not one point
    scale = max(float(np.abs(pts).max()), float(np.abs(p).max()))
    others = pts[np.abs(pts - p).max(axis=1) > COINCIDE_RTOL * scale]
    if others.shape[0]:
        e, gap = _generic_direction(others, rng, anchor=p)
        if gap <= COINCIDE_RTOL * scale:
            raise ValueError(
                "`p` cannot be isolated by a projection from the other points; they must be "
                "pairwise distinct."
            )
        delta = 0.5 * gap
    else:
        e, delta = np.eye(d)[0], 1.0
    s0 = float(p @ e)
    D = q - p - t
    U = np.tile(e, (3, 1))
    b = np.array([-(s0 - delta), -s0, -(s0 + delta)])
    W = np.outer(D, [1.0, -2.0, 1.0]) / delta
    if translated and np.any(t != 0):
        U = np.vstack([U, np.zeros(d)])
        b = np.append(b, 1.0)
        W = np.column_stack([W, t])
    return FeedForward(U=U, b=b, W=W, eta=1.0)


def snap_layer(c: float, delta: float, w: ArrayLike, e: ArrayLike, y: ArrayLike) -> FeedForward:
    r"""Width-4 residual layer that snaps a segment of the line :math:`\{a w\}` onto ``y``.

    With :math:`t = \langle e, x\rangle` and breakpoints
    :math:`b_1, b_2, b_3, b_4 = c - \delta, c - \delta/2, c + \delta/2, c + \delta`, the layer

    .. math:: x \mapsto x + \sum_{k=1}^4 W_k\, \sigma(t - b_k)

    equals ``y`` for every ``a w`` with :math:`|a - c| \le \delta/2` (a plateau) and is the
    identity where :math:`|t - c| \ge \delta`; in between it interpolates linearly. Requires
    :math:`\langle e, w\rangle = 1`, so that :math:`t = a` on the line. A whole cluster of
    nearly collapsed tokens on the plateau lands exactly on ``y``: this is what makes the
    softmax interpolator exact.

    Parameters
    ----------
    c, delta : float
        Centre of the segment (line coordinate) and half-width of the window.
    w : array_like, shape (d,)
        Direction of the line.
    e : array_like, shape (d,)
        Projection direction, with ``<e, w> = 1``.
    y : array_like, shape (d,)
        Destination.

    Returns
    -------
    FeedForward

    Raises
    ------
    ValueError
        If `delta` is not positive, the vectors differ in length, or
        :math:`\langle e, w\rangle \ne 1`.
    TypeError
        If an argument is not real (complex, boolean, string or object).

    References
    ----------
    The snapping stage is this book's construction, in place of the softmax argument of
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the softmax result of its abstract).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import snap_layer
    >>> ff = snap_layer(2.0, 0.4, [1.0, 0.0], [1.0, 0.0], [5.0, 5.0])
    >>> ff(np.array([[1.9, 0.0], [2.1, 0.0], [0.0, 0.0], [9.0, 0.0]])).round(12).tolist()
    [[5.0, 5.0], [5.0, 5.0], [0.0, 0.0], [9.0, 0.0]]
    """
    c = check_real(c, "c")
    w = as_vector(w, "w")
    e, y = as_vector(e, "e", size=w.size), as_vector(y, "y", size=w.size)
    delta = check_positive(delta, "delta")
    with float_guard("the snap layer", "rescale `c`, `delta` and `y`"):
        return _snap_layer(c, delta, w, e, y)


def _snap_layer(c: float, delta: float, w: FloatArray, e: FloatArray, y: FloatArray) -> FeedForward:
    if abs(float(e @ w) - 1.0) > 1e-12:
        raise ValueError(f"`e` must satisfy <e, w> = 1; got {float(e @ w)!r}.")
    b1, b2, b3, b4 = c - delta, c - delta / 2, c + delta / 2, c + delta
    W2 = (b1 * w - y) / (b2 - b1)
    W1 = -w - W2
    W4 = (y - b3 * w) / (b4 - b3)
    W3 = w - W4
    return FeedForward(
        U=np.tile(e, (4, 1)),
        b=-np.array([b1, b2, b3, b4]),
        W=np.column_stack([W1, W2, W3, W4]),
        eta=1.0,
    )
