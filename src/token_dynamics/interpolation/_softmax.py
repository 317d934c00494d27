"""The softmax interpolator: the hardmax plan at the critical temperature, then an exact
snapping stage (private; re-exported by :mod:`token_dynamics.interpolation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, cast

import numpy as np

from .._typing import ArrayLike, FloatArray, IntArray, SeedLike
from .._validation import as_rng, check_positive
from ._blocks import Transformer, TransformerBlock, _scaled_ends, _unit_exponent
from ._data import _InterpolatorCounts, check_dataset
from ._hardmax import build_hardmax_interpolator
from ._hausdorff import relative_hausdorff_errors
from ._layers import FeedForward, SelfAttention
from ._moves import _generic_direction, snap_layer
from ._temperature import critical_temperature

__all__ = ["SoftmaxInterpolator", "build_softmax_interpolator"]

#: Fraction of the snapping plateau that the a-priori bound may use; the rest absorbs rounding.
SNAP_SAFETY = 0.5


@dataclass(frozen=True, eq=False)
class SoftmaxInterpolator(_InterpolatorCounts):
    r"""Result of :func:`build_softmax_interpolator`.

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
        Number ``S`` of separation blocks of the hardmax plan.
    m : ndarray of int, shape (N,)
        Output lengths ``m_j``.
    n_blocks, n_params : int
        Blocks and parameters of the network (properties).
    max_error : float
        Largest relative Hausdorff error (property).
    paper_bound : int
        The block count :math:`2\sum_j m_j + 3N` reported for the paper's Theorem 1.8
        (property; see :func:`paper_block_count`).

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

    attention: ClassVar[str] = "softmax"
    transformer: Transformer
    tau: float
    tau_star: float
    snap_radius: float
    collapse_radius: float
    plateau_fill: float
    exact_collapse: bool
    errors: FloatArray
    n_separation: int
    m: IntArray


def build_softmax_interpolator(
    inputs: ArrayLike, targets: ArrayLike, *, tau: float | None = None, rng: SeedLike = None
) -> SoftmaxInterpolator:
    r"""Build a softmax transformer that interpolates the data, with an exact collapse.

    Stages: the hardmax plan (separation, leader selection, collapse) with softmax attention
    at temperature ``tau``, which leaves every token within a small distance of its leader;
    one non-residual feed-forward layer (:math:`\eta = 0`, width 1) that maps every token onto
    a generic line; then, per leader, one width-4 residual layer that is *constant* on a
    neighbourhood of the leader's point of the line, so that the whole near-collapsed cluster
    lands exactly on its target. Blocks:

    .. math:: L = S + 2\sum_{j=1}^N m_j + 1 \le 2\sum_{j=1}^N m_j + N \le 2\sum_{j=1}^N m_j + 3N,

    the last count being the one reported for the paper's softmax theorem.

    Like the hardmax plan it starts from, it works at unit size: its first layer takes the
    inputs' scale and its last snapping layer gives the targets' (powers of two, exact), so
    the result is exact relative to the targets' size for inputs and targets of any sizes
    within ``[2^-500, 2^500]`` (see :func:`build_hardmax_interpolator`).

    Cost: 1.0 s of CPU time for N = 40 sequences of 16 tokens with 4 targets each in d = 4
    (321 blocks; measured, ``benchmarks/run.py interpolation``), about half in the hardmax
    plan and half in the critical temperature. Both grow like blocks x tokens (up to a log):
    the critical temperature computes each layer's norms and margins once, not at each of its
    bisection steps.

    Parameters
    ----------
    inputs : list of array_like, shapes (n_j, d)
        Input sequences, as for :func:`build_hardmax_interpolator`.
    targets : list of array_like, shapes (m_j, d)
        Target sets, as for :func:`build_hardmax_interpolator`.
    tau : float, optional
        Softmax temperature; the computed critical temperature ``tau_star`` by default.
    rng : Generator, int or None
        Draws the hardmax plan's directions and positions and the line of the snapping stage.

    Returns
    -------
    SoftmaxInterpolator
        The network, the temperatures, the measured collapse and the errors.

    Raises
    ------
    ValueError
        Naming the violated assumption of the data (see :func:`check_dataset`), or if `tau` is not
        positive.
    TypeError
        If an array argument is not real, or `rng` is not a Generator, a seed or None.
    FloatingPointError
        If the critical temperature's bound overflows (rescale the data).

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the softmax result of its abstract; the snapping stage here is
    this book's construction).

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
    S, K, d = plan.n_separation, int(plan.m.sum()), int(X[0].shape[1])
    head = Transformer(plan.transformer.blocks[: S + K])
    collapsed = plan.phase("collapsed").sequences
    centers = []  # (sequence, actual collapsed leader position) in move order
    for j, L_ in enumerate(plan.leader_points):
        for k in range(L_.shape[0]):
            Z = collapsed[j]
            centers.append(Z[np.argmin(np.linalg.norm(Z - L_[k], axis=1))])
    C = np.array(centers)
    # the plan works at unit size (its first block takes the inputs' scale): so do the snapping
    # layers, the last of which takes the targets' scale (``_blocks.UNIT_SIZES``)
    e_out = _unit_exponent(Y)
    targets_flat = np.ldexp(np.vstack(Y), -e_out)
    # Projection onto the line a -> a w (eta = 0, width 1); a = <e, x> + b0 >= 1 on the clusters.
    e0, gap = _generic_direction(C, rng) if K > 1 else (np.eye(d)[0], 1.0)
    a = C @ e0
    b0 = 1.0 + gap - a.min()
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    project = FeedForward(U=e0[None, :], b=np.array([b0]), W=w[:, None], eta=0.0)
    line = a + b0
    blocks = [TransformerBlock(project, SelfAttention())]
    deltas = []
    for k in range(K):
        best = None
        for trial in range(16):
            g = np.zeros(d) if trial == 0 else rng.normal(size=d)
            e = w + (g - (g @ w) * w)  # <e, w> = 1: line points keep their coordinate
            # the later leaders' points and the earlier targets must stay off this plateau
            others = np.concatenate([line[k + 1 :], targets_flat[:k] @ e])
            delta = 0.5 * float(np.abs(others - line[k]).min()) if others.size else 1.0
            if best is None or delta > best[0]:
                best = (delta, e)
        delta, e = cast(tuple[float, np.ndarray], best)  # set at trial 0
        deltas.append(delta)
        blocks.append(
            TransformerBlock(snap_layer(line[k], delta, w, e, targets_flat[k]), SelfAttention())
        )
    blocks[-1] = TransformerBlock(_scaled_ends(blocks[-1].ff, 0, e_out), blocks[-1].sa)
    snap_radius = 0.5 * min(deltas)
    # the bound on the head as built, at unit size: its first layer without the inputs' scale
    e_in = _unit_exponent(X)
    first = TransformerBlock(_scaled_ends(head.blocks[0].ff, e_in, 0), head.blocks[0].sa)
    unit_head = Transformer((first, *head.blocks[1:]))
    Xu = [np.ldexp(Z, -e_in) for Z in X]
    tau_star = critical_temperature(unit_head, Xu, SNAP_SAFETY * snap_radius)
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
