"""Softmax attention in the constructive interpolator: error bounds, the critical temperature
and an exact snapping stage (private)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np

from .._validation import (
    as_real_array,
    as_rng,
    as_vector,
    check_instance,
    check_positive,
    check_real,
    float_guard,
)
from ._blocks import (
    HARDMAX_TOL,
    FeedForward,
    SelfAttention,
    Transformer,
    TransformerBlock,
    as_sequences,
    relative_hausdorff_errors,
)
from ._data import check_dataset, paper_block_count
from ._hardmax import build_hardmax_interpolator
from ._moves import _generic_direction

__all__ = [
    "SoftmaxInterpolator",
    "build_softmax_interpolator",
    "critical_temperature",
    "snap_layer",
    "softmax_deviation_bound",
    "substitution_errors",
]

#: Temperatures searched by :func:`critical_temperature`, relative to the largest score scale:
#: 1e-12 makes every softmax weight off the maximiser underflow, 1e6 makes softmax uniform.
TAU_RANGE = (1e-12, 1e6)
#: Bisection steps in log(tau): 60 halvings of a 40-decade bracket pin tau* to ~1e-16 relative.
N_BISECTION = 60
#: Fraction of the snapping plateau that the a-priori bound may use; the rest absorbs rounding.
SNAP_SAFETY = 0.5


class _FFTerms(NamedTuple):
    """What the deviation bound needs from a feed-forward layer, for all tokens at once."""

    abs_h: np.ndarray  # (n_tokens, w): |U x_i + b|, distance of each unit from its kink
    unorm: np.ndarray  # (w,): |U_k|, so that |H_ik| <= e_i |U_k| means the ball meets a kink
    glob: float  # global Lipschitz constant |eta| + |W| |U|
    local: np.ndarray  # (n_tokens,): norm of the local Jacobian at each token's pattern


class _SATerms(NamedTuple):
    """What the deviation bound needs from an attention layer (``norm_v`` None: no head)."""

    rho: float
    norm_a: float
    norm_v: float | None
    radius: np.ndarray  # (N,): largest token norm of each sequence
    margin: np.ndarray  # (n_tokens,): best minus second-best score (inf when all keys tie)
    distinct_tie: np.ndarray  # (N,) bool: some query ties two distinct keys
    size: np.ndarray  # (n_tokens,): length of the token's sequence


def _ff_terms(ff: FeedForward, X: np.ndarray) -> _FFTerms:
    """Per-token quantities of ``ff`` on stacked tokens ``X`` that do not depend on tau."""
    H = X @ ff.U.T + ff.b
    d = X.shape[1]
    local = np.empty(X.shape[0])
    patterns, inverse = np.unique(H > 0, axis=0, return_inverse=True)
    for p, pattern in enumerate(patterns):  # one local Jacobian per activation pattern
        J = ff.eta * np.eye(d) + (ff.W * pattern) @ ff.U
        local[inverse.ravel() == p] = np.linalg.norm(J, 2)
    glob = abs(ff.eta) + np.linalg.norm(ff.W, 2) * np.linalg.norm(ff.U, 2)
    return _FFTerms(np.abs(H), np.linalg.norm(ff.U, axis=1), float(glob), local)


def _sa_terms(sa: SelfAttention, sequences: list[np.ndarray]) -> _SATerms:
    """Per-sequence and per-token quantities of ``sa`` that do not depend on tau."""
    rho = float(sa.rho)
    if sa.V is None:
        return _SATerms(rho, 0.0, None, *(np.empty(0),) * 4)
    d = sequences[0].shape[1]
    A = sa._dense_A if sa._dense_A is not None else np.zeros((d, d))
    radius, margins, distinct = [], [], []
    for X in sequences:
        S = X @ A.T @ X.T
        top = S.max(axis=1, keepdims=True)
        tied = S >= top - HARDMAX_TOL * np.maximum(1.0, np.abs(top))
        # a tie between distinct points: some coordinate differs among a query's tied keys
        hi = np.where(tied[:, :, None], X[None, :, :], -np.inf).max(axis=1)
        lo = np.where(tied[:, :, None], X[None, :, :], np.inf).min(axis=1)
        distinct.append(bool(np.any(hi > lo)))
        margins.append(top[:, 0] - np.where(tied, -np.inf, S).max(axis=1))
        radius.append(float(np.linalg.norm(X, axis=1).max()))
    sizes = np.repeat([X.shape[0] for X in sequences], [X.shape[0] for X in sequences])
    return _SATerms(
        rho,
        float(np.linalg.norm(A, 2)),
        float(np.linalg.norm(cast(np.ndarray, sa._dense_V), 2)),
        np.array(radius),
        np.concatenate(margins),
        np.array(distinct),
        sizes,
    )


class _BoundTerms:
    """Everything of :func:`softmax_deviation_bound` that does not depend on tau, computed once
    per block; :meth:`bounds` then costs a few vector operations per layer."""

    def __init__(self, transformer: Transformer, states: list) -> None:
        sizes = [Z.shape[0] for Z in states[0]]
        self.starts = np.cumsum([0, *sizes[:-1]])
        self.seq = np.repeat(np.arange(len(sizes)), sizes)
        self.split = np.cumsum(sizes[:-1])
        self.layers: list[_FFTerms | _SATerms] = []
        for k, block in enumerate(transformer.blocks):
            self.layers.append(_ff_terms(block.ff, np.vstack(states[2 * k])))
            self.layers.append(_sa_terms(block.sa, states[2 * k + 1]))

    def _per_sequence(self, flags: np.ndarray) -> np.ndarray:
        """Spread a per-sequence flag (N,) to the tokens (n_tokens,)."""
        return flags[self.seq]

    def bounds(self, tau: float) -> np.ndarray:
        """Bound on the deviation of every output token, stacked, shape (n_tokens,)."""
        e = np.zeros(self.seq.shape[0])
        with np.errstate(invalid="ignore", over="ignore"):  # lost sequences are set to inf
            for layer in self.layers:
                e = self._ff(layer, e) if isinstance(layer, _FFTerms) else self._sa(layer, e, tau)
        return e

    def _ff(self, t: _FFTerms, e: np.ndarray) -> np.ndarray:
        near_kink = np.any(t.abs_h <= e[:, None] * t.unorm[None, :], axis=1)
        factor = np.where(near_kink, t.glob, t.local)
        lost = ~np.isfinite(e)
        if lost.any():  # a lost sequence stays lost
            factor[self._per_sequence(np.logical_or.reduceat(lost, self.starts))] = np.inf
        return factor * e

    def _sa(self, t: _SATerms, e: np.ndarray, tau: float) -> np.ndarray:
        if t.norm_v is None:
            return abs(t.rho) * e
        E = np.maximum.reduceat(e, self.starts)
        R = t.radius + E
        lost = ~np.isfinite(E) | ((E > 0) & t.distinct_tie)
        shift = 2.0 * t.norm_a * (2.0 * R * E + E * E)
        eff = t.margin - shift[self.seq]
        lost |= np.logical_or.reduceat(~(eff > 0), self.starts)
        leak = 2.0 * (t.size - 1) * t.norm_v * R[self.seq] * np.exp(-eff / tau)
        out = abs(t.rho) * e + t.norm_v * E[self.seq] + leak
        out[self._per_sequence(lost)] = np.inf
        return out


def softmax_deviation_bound(transformer: Transformer, inputs: Any, tau: float) -> list[np.ndarray]:
    r"""A-priori bound on how far the softmax network strays from the hardmax one.

    Each attention layer of ``transformer`` is switched from hardmax to softmax at temperature
    ``tau``. Along the hardmax trajectory, a token's deviation ``e_i`` is propagated layer by
    layer: a feed-forward layer multiplies it by its local Lipschitz constant on the ball of
    radius ``e_i`` (the global one when the ball meets a kink); an attention layer with margin
    :math:`\Delta_i` between the best and second-best score adds at most
    :math:`2(n-1)\lVert V\rVert R e^{-\Delta_i^{\rm eff}/\tau}`, with the margin reduced by the
    largest score change the deviations can cause.

    Parameters
    ----------
    transformer : Transformer
        A network with hardmax attention (for instance an interpolator).
    inputs : list of array_like, shapes (n_j, d)
    tau : float
        Softmax temperature.

    Returns
    -------
    list of ndarray, shapes (n_j,)
        Bound on the deviation of each output token (``inf`` if a margin is lost).

    Raises
    ------
    ValueError
        If `tau` is not positive or `inputs` do not match the transformer's dimension.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import softmax_deviation_bound
    >>> from token_dynamics.interpolation import build_hardmax_interpolator
    >>> X = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]])]
    >>> interp = build_hardmax_interpolator(X, [X[0][:1], X[1]], rng=0)
    >>> bool(softmax_deviation_bound(interp.transformer, X, 1e-3)[0].max() < 1e-12)
    True
    """
    tau = check_positive(tau, "tau")
    _check_transformer(transformer)
    with float_guard("the softmax deviation bound", "rescale `inputs`"):
        terms = _BoundTerms(transformer, transformer.layer_states(inputs))
        return np.split(terms.bounds(tau), terms.split)


def _check_transformer(transformer: Any) -> None:
    check_instance(
        transformer,
        Transformer,
        "transformer",
        "Pass e.g. build_hardmax_interpolator(...).transformer.",
    )


def critical_temperature(transformer: Transformer, inputs: Any, tolerance: float) -> float:
    r"""Largest temperature :math:`\tau^*` at which :func:`softmax_deviation_bound` stays below
    ``tolerance`` for every token (bisection in :math:`\log\tau`; the bound grows with
    :math:`\tau`).

    Parameters
    ----------
    transformer : Transformer
    inputs : list of array_like, shapes (n_j, d)
    tolerance : float
        Allowed deviation of every output token.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `tolerance` is not positive or no temperature meets it (a hardmax margin is already lost
        as ``tau -> 0``).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import (
    ...     critical_temperature, softmax_deviation_bound)
    >>> from token_dynamics.interpolation import build_hardmax_interpolator
    >>> X = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]])]
    >>> interp = build_hardmax_interpolator(X, [X[0][:1], X[1]], rng=0)
    >>> tau = critical_temperature(interp.transformer, X, 1e-6)
    >>> bool(softmax_deviation_bound(interp.transformer, X, tau)[0].max() <= 1e-6)
    True
    """
    tolerance = check_positive(tolerance, "tolerance")
    _check_transformer(transformer)
    with float_guard("the critical temperature", "rescale `inputs`"):
        return _critical_temperature(transformer, inputs, tolerance)


def _critical_temperature(transformer: Transformer, inputs: Any, tolerance: float) -> float:
    states = transformer.layer_states(as_sequences(inputs, d=transformer.dim))
    scale = max(1.0, max(float(np.abs(Z).max()) for st in states for Z in st)) ** 2

    terms = _BoundTerms(transformer, states)  # once: each bisection step is then cheap

    def ok(tau: float) -> bool:
        return float(terms.bounds(tau).max()) <= tolerance

    lo, hi = np.log(TAU_RANGE[0] * scale), np.log(TAU_RANGE[1] * scale)
    if not ok(np.exp(lo)):
        raise ValueError(
            "no temperature meets `tolerance`: a hardmax margin is lost to the deviations "
            "already at tau -> 0; increase `tolerance`."
        )
    if ok(np.exp(hi)):
        return float(np.exp(hi))
    for _ in range(N_BISECTION):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(np.exp(mid)) else (lo, mid)
    return float(np.exp(lo))


def substitution_errors(
    transformer: Transformer, inputs: Any, targets: Any, taus: Any
) -> np.ndarray:
    """Largest relative Hausdorff error when every attention layer is softmax at ``tau``.

    Parameters
    ----------
    transformer : Transformer
    inputs, targets : lists of arrays, shapes (n_j, d) and (m_j, d)
    taus : array_like, shape (k,)

    Returns
    -------
    ndarray, shape (k,)

    Raises
    ------
    ValueError
        If a temperature is not positive or `inputs` do not match the transformer's dimension.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import substitution_errors
    >>> from token_dynamics.interpolation import build_hardmax_interpolator
    >>> X = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]])]
    >>> Y = [X[0][:1], X[1]]
    >>> interp = build_hardmax_interpolator(X, Y, rng=0)
    >>> err = substitution_errors(interp.transformer, X, Y, [10.0, 1e-3])
    >>> bool(err[0] > 1e-3 and err[1] < 1e-10)
    True
    """
    _check_transformer(transformer)
    taus = np.atleast_1d(as_real_array(taus, "taus"))
    if taus.ndim != 1 or np.any(taus <= 0):
        raise ValueError(f"`taus` must be a 1-D array of positive temperatures; got {taus!r}.")
    X = as_sequences(inputs, d=transformer.dim)
    out = []
    with float_guard("the substitution errors", "rescale `inputs` and `targets`"):
        for tau in taus:
            T = transformer.with_attention("softmax", float(tau))
            out.append(relative_hausdorff_errors(T(X), targets).max())
    return np.array(out)


@dataclass(frozen=True, eq=False)
class SoftmaxInterpolator:
    """Result of :func:`build_softmax_interpolator`.

    Attributes
    ----------
    transformer : Transformer
        Softmax network: the hardmax plan through the collapse with softmax at ``tau``, one
        non-residual projection block, then one snap-and-move block per leader.
    tau, tau_star : float
        Temperature used, and the critical temperature below which the a-priori bound
        guarantees that every near-collapsed token lies on a snapping plateau.
    snap_radius : float
        Half-width of the narrowest snapping plateau (line coordinate).
    collapse_radius : float
        Largest measured distance (line coordinate) of a token from its leader after the
        softmax collapse.
    plateau_fill : float
        Largest ratio of a token's distance to its leader over the half-width of that
        leader's plateau (measured).
    exact_collapse : bool
        ``plateau_fill < 1``: every token lies on its plateau and is snapped exactly onto its
        target.
    errors : ndarray, shape (N,)
        Relative Hausdorff error of each sequence.
    n_separation : int
    m : ndarray of int, shape (N,)

    Examples
    --------
    Returned by :func:`build_softmax_interpolator`; at the critical temperature the collapse
    fills less than each snapping plateau, so the interpolation is exact:

    >>> import numpy as np
    >>> from token_dynamics.interpolation import build_softmax_interpolator
    >>> X = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]])]
    >>> Y = [np.array([[5.0, 5.0]]), np.array([[-1.0, 2.0], [3.0, 0.0]])]
    >>> interp = build_softmax_interpolator(X, Y, rng=0)
    >>> bool(interp.plateau_fill < 1), interp.exact_collapse, interp.tau == interp.tau_star
    (True, True, True)
    >>> bool(interp.max_error < 1e-10), interp.n_blocks <= interp.paper_bound
    (True, True)
    """

    transformer: Transformer
    tau: float
    tau_star: float
    snap_radius: float
    collapse_radius: float
    plateau_fill: float
    exact_collapse: bool
    errors: np.ndarray
    n_separation: int
    m: np.ndarray

    @property
    def n_blocks(self) -> int:
        return self.transformer.n_blocks

    @property
    def max_error(self) -> float:
        return float(self.errors.max())

    @property
    def paper_bound(self) -> int:
        """The block count reported for the paper's softmax theorem, ``2 sum(m) + 3 N``."""
        return paper_block_count(self.m, "softmax")


def snap_layer(c: float, delta: float, w: Any, e: Any, y: Any) -> FeedForward:
    r"""Width-4 residual layer that snaps a segment of the line :math:`\{a w\}` onto ``y``.

    With :math:`t = \langle e, x\rangle` and breakpoints :math:`c \mp \delta`,
    :math:`c \mp \delta/2`, the layer :math:`x \mapsto x + \sum_k W_k \sigma(t - b_k)` equals
    ``y`` for every ``a w`` with :math:`|a - c| \le \delta/2` and is the identity where
    :math:`|t - c| \ge \delta`. Requires :math:`\langle e, w\rangle = 1`.

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
        If `delta` is not positive or :math:`\langle e, w\rangle \ne 1`.

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


def _snap_layer(c: float, delta: float, w: np.ndarray, e: np.ndarray, y: np.ndarray):
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


def build_softmax_interpolator(
    inputs: Any, targets: Any, *, tau: float | None = None, rng: Any = None
) -> SoftmaxInterpolator:
    r"""Build a softmax transformer that interpolates the data, with an exact collapse.

    Stages: the hardmax plan (separation, leader selection, collapse) with softmax attention
    at temperature ``tau``, which leaves every token within a small distance of its leader;
    one non-residual feed-forward layer (:math:`\eta = 0`, width 1) that maps every token onto
    a generic line; then, per leader, one width-4 residual layer that is *constant* on a
    neighbourhood of the leader's point of the line, so that the whole near-collapsed cluster
    lands exactly on its target. Blocks: ``S + 2 sum(m) + 1 <= 2 sum(m) + N``.

    Cost: 1.4 s of CPU time for N = 40 sequences of 16 tokens with 4 targets each in d = 4
    (321 blocks; measured, ``benchmarks/run.py interpolation``). The critical temperature is
    linear in blocks x tokens; the hardmax plan deduplicates all tokens at each of its blocks,
    which grows like blocks x tokens^2 and dominates for hundreds of sequences.

    Parameters
    ----------
    inputs, targets : lists of array_like, shapes (n_j, d) and (m_j, d)
        As for :func:`build_hardmax_interpolator`.
    tau : float, optional
        Softmax temperature; the computed critical temperature ``tau_star`` by default.
    rng : Generator, int or None

    Returns
    -------
    SoftmaxInterpolator

    Raises
    ------
    ValueError
        Naming the violated assumption of the data (see :func:`check_dataset`), or if `tau` is not
        positive.
    TypeError
        If an array argument is not real, or `rng` is not a Generator, a seed or None.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the snapping stage here is our construction).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import build_softmax_interpolator
    >>> X = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]])]
    >>> Y = [np.array([[5.0, 5.0]]), np.array([[-1.0, 2.0], [3.0, 0.0]])]
    >>> interp = build_softmax_interpolator(X, Y, rng=0)
    >>> interp.exact_collapse, bool(interp.max_error < 1e-10), interp.n_blocks
    (True, True, 8)
    """
    X, Y = check_dataset(inputs, targets)
    rng = as_rng(rng)
    plan = build_hardmax_interpolator(X, Y, rng=rng)
    S, K, d = plan.n_separation, int(plan.m.sum()), X[0].shape[1]
    head = Transformer(plan.transformer.blocks[: S + K])
    collapsed = plan.phase("collapsed").sequences
    centers = []  # (sequence, actual collapsed leader position) in move order
    for j, L_ in enumerate(plan.leader_points):
        for k in range(L_.shape[0]):
            Z = collapsed[j]
            centers.append(Z[np.argmin(np.linalg.norm(Z - L_[k], axis=1))])
    C = np.array(centers)
    targets_flat = np.vstack(Y)
    # Projection onto the line a -> a w (eta = 0, width 1); a = <e, x> + b0 >= 1 on the clusters.
    e0, gap = _generic_direction(C, rng) if K > 1 else (np.eye(d)[0], 1.0)
    a = C @ e0
    b0 = 1.0 + gap - a.min()
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    project = FeedForward(U=e0[None, :], b=np.array([b0]), W=w[:, None], eta=0.0)
    line = list(a + b0)
    blocks = [TransformerBlock(project, SelfAttention())]
    deltas = []
    for k in range(K):
        best = None
        for trial in range(16):
            g = np.zeros(d) if trial == 0 else rng.normal(size=d)
            e = w + (g - (g @ w) * w)  # <e, w> = 1: line points keep their coordinate
            others = [line[i] for i in range(k + 1, K)] + [targets_flat[i] @ e for i in range(k)]
            delta = 0.5 * min((abs(t - line[k]) for t in others), default=2.0)
            if best is None or delta > best[0]:
                best = (delta, e)
        delta, e = cast(tuple[float, np.ndarray], best)  # set at trial 0
        deltas.append(delta)
        blocks.append(
            TransformerBlock(snap_layer(line[k], delta, w, e, targets_flat[k]), SelfAttention())
        )
    snap_radius = 0.5 * min(deltas)
    tau_star = critical_temperature(head, X, SNAP_SAFETY * snap_radius)
    tau = tau_star if tau is None else check_positive(tau, "tau")
    soft_head = head.with_attention("softmax", tau)
    with np.errstate(under="ignore"):
        near = soft_head(X)
        centres = np.array(line)
        half = 0.5 * np.array(deltas)  # plateau half-width of each leader's snapping layer
        radius, fill = 0.0, 0.0
        for Z in near:
            a_ = Z @ e0 + b0
            k = np.argmin(np.abs(a_[:, None] - centres[None, :]), axis=1)
            dist = np.abs(a_ - centres[k])
            radius = max(radius, float(dist.max()))
            fill = max(fill, float((dist / half[k]).max()))
        T = soft_head + Transformer(tuple(blocks))
        errors = relative_hausdorff_errors(T(X), Y)
    return SoftmaxInterpolator(
        transformer=T,
        tau=float(tau),
        tau_star=float(tau_star),
        snap_radius=float(snap_radius),
        collapse_radius=radius,
        plateau_fill=fill,
        exact_collapse=bool(fill < 1.0),
        errors=errors,
        n_separation=S,
        m=plan.m,
    )
