"""The softmax of the library: its public form, its fast kernel form and its shifts (private).

:func:`softmax_weights` is the public softmax: it validates its arguments, then calls
:func:`fast_softmax`, the same computation without checks, which the kernels call on every
slab of scores (validation happens once per call, at the public entry of a field, never in the
tile loop). :func:`softmax_transform` and :func:`exp_transform` are the slab transforms of the
normalised and unnormalised exponential kernels; :func:`softmax_shift` gives each row's shift
for the tiled softmax path from O(n d) bounds.

Scores may reach the kernels scaled down by a power of two ``2**e`` (true scores
``S * 2**e``, see ``_scale.rescale_scores``), when the true ones would overflow: the
transforms take that exponent and shift each row by its maximum *before* restoring the scale,
so the shifted scores lie in ``[-inf, 0]`` and the exponentials stay finite.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._linalg import BLOCK_ELEMENTS, EXP_FLOOR
from .._typing import ArrayLike, FloatArray
from .._validation import as_real_array, check_bool

__all__ = ["softmax_weights"]

#: ``EXP_FLOOR`` (from ``_linalg``) is the lowest shifted score passed to ``np.exp`` on the
#: softmax velocity path in float64: a term clamped there was already below ``e^-700`` times the
#: row's largest term, so the result moves by less than ``n e^-700``, relative: far below
#: round-off for any n.

#: Largest gap allowed between the Cauchy-Schwarz bound on a row's scores and its shift ``L_i``
#: (the best score over the probe keys) on the softmax velocity path in float64: the
#: exponentials are then at most ``e^300`` (1e130), so a sum of ``n`` of them times the value
#: columns stays finite for any realistic ``n`` and values, and the largest term is at least 1
#: (no underflow). Rows with looser bounds (very large scores) get their exact maximum instead.
SHIFT_SLACK = 300.0

#: The same two limits in float32, whose exp overflows above 88.7 and turns subnormal below
#: -87.3: a clamped term is below ``e^-80`` (2e-35) of the row's largest, far under float32's
#: round-off (6e-8); exponentials up to ``e^40`` (2e17) leave a factor of 1e21 for the sums of
#: ``n`` terms times the values before overflow.
EXP_FLOOR_32, SHIFT_SLACK_32 = -80.0, 40.0

#: Margin, in ``e``-folds, between the exp floor and the smallest key weight (relative to the
#: sum of the weights) that the softmax paths multiply in after the exponential. A clamped term
#: weighs at most ``e^floor`` times the sum of the weights, and the row's largest term at least
#: the smallest weight (its shifted score is at least 0), so with every weight above
#: ``e^(floor + margin)`` times their sum the clamp moves the result by less than ``e^-margin``
#: of it: 3e-20 in float64 (margin 45, under its round-off 1.1e-16), 2e-9 in float32 (margin 20,
#: round-off 6e-8). Smaller weights (1e-285 of the sum in float64, 9e-27 in float32) enter as
#: their logarithms, added to the scores before the shift and the clamp (:func:`folds_weights`).
WEIGHT_MARGIN, WEIGHT_MARGIN_32 = 45.0, 20.0

#: Widest key points (coordinates of a key, plus its score bias when there is one) whose convex
#: hull gives the rows their exact maxima: a score ``<f_i, g_j> + b_j`` is a linear function of the
#: lifted key ``(g_j, b_j)``, so its maximum over the keys is reached at a vertex of their hull,
#: and the vertices are few (9 of 1024 Gaussian keys in the plane, 34 in space). Qhull finds them
#: in 0.2-0.3 ms at n = 1024 in two and three dimensions (1.1 ms in four, with 87 vertices).
HULL_MAX_DIM = 3

#: Fewest score entries for which the hull is computed (below, the exact rows' maxima are found in
#: the score slabs, which then cost less than a call to Qhull).
HULL_MIN_ENTRIES = 2**18

#: Relative bound on how far a key that Qhull leaves out of the vertices (a key on a facet, within
#: its precision) may stick out of their hull: about 1e5 float64 round-offs, far above Qhull's own
#: (a few round-offs of the largest coordinate). Rows whose maximum could move by more than 1 this
#: way, or by the rounding of their scores, keep the exact maximum of their scores.
HULL_TOLERANCE = 1e-11

#: Number of evenly spaced probe keys (besides the extreme ones) that give each row's shift;
#: their products cost ``n * PROBE_KEYS * d`` flops, negligible next to the ``n^2`` exponentials.
PROBE_KEYS = 32

#: A transform maps a slab of scores ``S`` (rows x keys, may be overwritten), the slice of query
#: rows it covers and the exponent ``e`` of the scores' scale (true scores ``S * 2**e``; 0 when
#: they were not rescaled) to the kernel slab ``E`` and an optional per-row log-scale ``c`` such
#: that the true kernel is ``exp(c)[:, None] * E``.
Transform = Callable[[np.ndarray, slice, int], tuple[np.ndarray, np.ndarray | None]]


def exp_limits(dtype: np.dtype) -> tuple[float, float]:
    """``(floor, slack)`` of the softmax path for ``dtype`` (float64 or float32)."""
    if np.dtype(dtype) == np.float32:
        return EXP_FLOOR_32, SHIFT_SLACK_32
    return EXP_FLOOR, SHIFT_SLACK


def folds_weights(w: np.ndarray) -> bool:
    """Whether the positive key weights ``w`` must enter the softmax paths as log-weights added
    to the scores (a score bias) rather than as factors after the clamped exponential: when the
    smallest is below ``e^(floor + margin)`` of their sum (:data:`WEIGHT_MARGIN`)."""
    floor, _ = exp_limits(w.dtype)
    margin = WEIGHT_MARGIN_32 if np.dtype(w.dtype) == np.float32 else WEIGHT_MARGIN
    return bool(w.size) and float(w.min()) < float(w.sum()) * float(np.exp(floor + margin))


def fast_softmax(
    logits: np.ndarray, *, axis: int = -1, normalise: bool = True, out: np.ndarray | None = None
) -> np.ndarray:
    """:func:`softmax_weights` of checked logits (no validation: the kernels' form).

    Each row along ``axis`` must hold a finite maximum; ``out=logits`` works in place.
    """
    shifted = np.subtract(logits, logits.max(axis=axis, keepdims=True), out=out)
    np.exp(shifted, out=shifted)
    if normalise:
        shifted /= shifted.sum(axis=axis, keepdims=True)
    return shifted


def _check_axis(axis: object, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(
            f"`axis` must be an integer (the key axis of `scores`); got {axis!r}. "
            "Pass e.g. axis=-1."
        )
    if not -ndim <= int(axis) < ndim:
        raise ValueError(
            f"`axis` = {axis} is out of range for `scores` with {ndim} dimension(s); "
            f"pass an axis in [{-ndim}, {ndim - 1}]."
        )
    return int(axis) % ndim


def softmax_weights(
    scores: ArrayLike,
    *,
    log_weights: ArrayLike | None = None,
    axis: int = -1,
    normalise: bool = True,
    out: np.ndarray | None = None,
) -> FloatArray:
    r"""Softmax weights :math:`P_{ij} = w_j e^{s_{ij}} / \sum_l w_l e^{s_{il}}` along `axis`.

    The one softmax of the library: every kernel that normalises exponentiated scores uses
    it. The largest logit of each row is subtracted before the exponential (the log-sum-exp
    shift), so no weight overflows whatever the scale of the scores:

    .. math::

        P_{ij} = \frac{e^{\ell_{ij} - m_i}}{\sum_l e^{\ell_{il} - m_i}},
        \qquad \ell_{ij} = s_{ij} + \log w_j,\quad m_i = \max_l \ell_{il}.

    Parameters
    ----------
    scores : array_like, at least 1-D
        Scores :math:`s_{ij}`, normalised along `axis` (the key index). Entries may be
        ``-inf`` (a masked key, weight zero); NaN and ``+inf`` are refused.
    log_weights : array_like broadcasting against `scores`, optional
        Logarithms of key weights :math:`\log w_j` (``-inf`` for a zero weight), added to the
        scores; broadcasting must not change the shape of `scores`.
    axis : int
        The key axis.
    normalise : bool
        ``False`` returns the shifted exponentials :math:`e^{\ell_{ij} - m_i}` (a kernel
        that normalises later, with its own key weights).
    out : ndarray, optional
        A float64 array of the shape of `scores` to write the result into (returned).

    Returns
    -------
    ndarray of the shape of `scores`, float64

    Raises
    ------
    TypeError
        If `scores` or `log_weights` is not a real array, or `axis` not an integer.
    ValueError
        If an argument holds NaN or ``+inf``, the shapes do not match, `axis` is out of range,
        `normalise` is not a bool, `out` is not a float64 array of the shape of `scores`, or a
        row along `axis` has no finite logit (every key masked).
    FloatingPointError
        If a logit :math:`s_{ij} + \log w_j` leaves the float64 range.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import softmax_weights
    >>> softmax_weights(np.array([[0.0, np.log(3.0)], [1000.0, 1000.0]])).round(12)
    array([[0.25, 0.75],
           [0.5 , 0.5 ]])
    """
    S = as_real_array(scores, "scores", neg_inf=True)
    if S.ndim == 0 or S.size == 0:
        raise ValueError(
            f"`scores` must be a non-empty array of at least one dimension; got shape {S.shape}."
        )
    ax = _check_axis(axis, S.ndim)
    normalise = check_bool(normalise, "normalise")
    logits = S
    if log_weights is not None:
        lw = as_real_array(log_weights, "log_weights", neg_inf=True)
        try:
            shape = np.broadcast_shapes(S.shape, lw.shape)
        except ValueError:
            shape = None
        if shape != S.shape:
            raise ValueError(
                f"`log_weights` of shape {lw.shape} must broadcast against `scores` of shape "
                f"{S.shape} without changing it; pass one log-weight per key, shaped to align "
                f"with the key axis {ax} (e.g. shape ({S.shape[ax]},) for the last axis)."
            )
        with np.errstate(over="ignore"):
            logits = S + lw
        if np.any(logits == np.inf):
            raise FloatingPointError(
                "the logits `scores + log_weights` leave the float64 range (overflow); "
                "shift the scores of each row down by their maximum first."
            )
    if not np.all(np.max(logits, axis=ax) > -np.inf):
        raise ValueError(
            f"every row of `scores` along axis {ax} needs a finite logit (a key of positive "
            "weight that is not masked); unmask a key or give it a positive weight."
        )
    if out is not None:
        if not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.shape != S.shape:
            raise ValueError(
                f"`out` must be a float64 ndarray of shape {S.shape}; got "
                f"{getattr(out, 'dtype', type(out).__name__)} of shape "
                f"{getattr(out, 'shape', None)}. Pass out=None for a new array."
            )
    with np.errstate(over="ignore"):  # a logit below the maximum by more than the range: -inf
        return fast_softmax(logits, axis=ax, normalise=normalise, out=out)


def softmax_transform(S: np.ndarray, rows: slice, e: int = 0) -> tuple[np.ndarray, None]:
    """Stable exponential of a slab: ``exp(S - max_j S)`` in place (log-sum-exp shift), the
    difference brought back to its true scale ``2**e`` before the exponential."""
    if e == 0:
        return fast_softmax(S, axis=1, normalise=False, out=S), None
    S -= S.max(axis=1, keepdims=True)
    with np.errstate(over="ignore"):  # differences beyond the range are -inf: weight 0
        np.ldexp(S, e, out=S)
    return np.exp(S, out=S), None


def exp_transform(S: np.ndarray, rows: slice, e: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised exponential, returned as ``exp(S - m)`` and the log-scale ``m`` (which is
    ``inf`` when the true scores ``S * 2**e`` overflow: the caller reports it)."""
    m = S.max(axis=1)
    S -= m[:, None]
    if e:
        with np.errstate(over="ignore"):
            np.ldexp(S, e, out=S)
            m = np.ldexp(m, e)
    np.exp(S, out=S)
    return S, m


def softmax_shift(
    F: np.ndarray, G: np.ndarray, bias: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Per-row shifts for the tiled softmax path, from O(n d) bounds on each row's scores.

    Returns ``L`` (the best score over a few probe keys, a lower bound on the row's maximum;
    0 for rows whose scores all lie within the slack of 0 and above the floor, which are not
    probed; the maximum itself where the keys' hull gives it, :func:`_hull_maxima`), ``exact``
    (rows whose bounds are too loose to use ``L``: the kernel finds their maximum in the scores),
    ``clamp`` (rows where a shifted score may fall below the exp floor of the dtype,
    :func:`exp_limits`) and ``unshifted`` (every score lies within the slack of 0 and above the
    floor: no shift is needed at all).
    """
    floor, slack = exp_limits(F.dtype)
    b_hi = b_lo = 0.0
    if bias is not None:
        b_hi, b_lo = float(bias.max()), float(bias.min())
    g_sq = np.einsum("ij,ij->i", G, G)
    g_norm = float(np.sqrt(g_sq.max()))
    f_norm = np.sqrt(np.einsum("ij,ij->i", F, F).astype(np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        upper = f_norm * g_norm + b_hi  # Cauchy-Schwarz: no score of the row is above it
        lower = -f_norm * g_norm + b_lo  # ... nor below this one
        # rows whose scores all lie within the slack of 0 and above the floor need no shift
        probed = np.flatnonzero(~((upper <= slack) & (lower >= floor)))
    L = np.zeros(F.shape[0], dtype=np.float64)
    if probed.size == 0:
        no_row = np.zeros(F.shape[0], dtype=bool)
        return L, no_row, no_row, True
    # probe keys: the extreme keys along each coordinate, the longest key, the key of largest
    # bias and an even sample; the best of them is within a few |f| |g| of the true maximum
    GT = np.ascontiguousarray(G.T)  # argmax along contiguous rows: 10x faster than axis=0
    probes = [GT.argmax(axis=1), GT.argmin(axis=1), [g_sq.argmax()]]
    if bias is not None:
        probes.append([bias.argmax()])
    probes.append(np.linspace(0, G.shape[0] - 1, min(G.shape[0], PROBE_KEYS)).astype(int))
    with np.errstate(over="ignore", invalid="ignore"):
        _best_scores(F, G, bias, probed, np.unique(np.concatenate(probes)), L)
        exact = ~(upper - L <= slack)  # also catches inf and nan
        if exact.any() and F.shape[0] * G.shape[0] >= HULL_MIN_ENTRIES:
            _hull_maxima(F, G, bias, f_norm, L, exact)
        clamp = ~(lower - L >= floor)
    return np.where(exact, 0.0, L), exact, clamp, False


def _best_scores(
    F: np.ndarray,
    G: np.ndarray,
    bias: np.ndarray | None,
    rows: np.ndarray,
    J: np.ndarray,
    L: np.ndarray,
) -> None:
    """``L[rows]`` = the best score of each of these rows over the keys ``J``: one product per
    slab of rows (not one per key), in slabs of at most ``BLOCK_ELEMENTS`` scores."""
    GJ = np.ascontiguousarray(G[J].T)
    step = max(1, BLOCK_ELEMENTS // J.size)
    for start in range(0, rows.size, step):
        R = rows[start : start + step]
        S = np.dot(F[R], GJ)
        if bias is not None:
            S += bias[J]
        L[R] = S.max(axis=1)


def _hull_maxima(
    F: np.ndarray,
    G: np.ndarray,
    bias: np.ndarray | None,
    f_norm: np.ndarray,
    L: np.ndarray,
    exact: np.ndarray,
) -> None:
    """Exact maxima of the ``exact`` rows from the vertices of the keys' convex hull (lifted by the
    bias), written into ``L``; those rows are then no longer ``exact``. Nothing changes when the
    keys are wider than :data:`HULL_MAX_DIM` or flat (Qhull refuses them: all on a line in the
    plane, say), or for rows whose maximum :data:`HULL_TOLERANCE` does not pin down to within 1.
    """
    if not 1 <= G.shape[1] + (bias is not None) <= HULL_MAX_DIM:
        return
    P = G if bias is None else np.column_stack([G, bias])
    if P.shape[1] == 1:  # on a line the hull is the two extreme keys
        J = np.unique([P[:, 0].argmin(), P[:, 0].argmax()])
    else:
        from scipy.spatial import ConvexHull, QhullError

        try:
            J = ConvexHull(P).vertices
        except (QhullError, ValueError):  # flat keys, too few of them, or not finite
            return
    p_norm = float(np.sqrt(np.einsum("ij,ij->i", P, P).max()))
    lifted = f_norm if bias is None else np.sqrt(f_norm**2 + 1.0)  # the query as (f_i, 1)
    # the vertices' maxima against the slab's own scores: Qhull's precision and the rounding of
    # the scores in the dtype (float32's round-off, 6e-8, is far above Qhull's)
    tol = HULL_TOLERANCE + 8 * float(np.finfo(F.dtype).eps)
    rows = np.flatnonzero(exact & (tol * lifted * p_norm <= 1.0))
    _best_scores(F, G, bias, rows, J, L)
    exact[rows] = False
