"""The constructive hardmax interpolator, phase by phase (private).

Separation, leader selection, collapse and interpolation: the four phases of the hardmax
construction of Alcalde, Fantuzzi and Zuazua (2025), in the detailed form derived in the book
(chapter "Exact sequence interpolation").
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import ClassVar, cast

import numpy as np
from scipy.spatial.distance import cdist

from .._typing import ArrayLike, FloatArray, IntArray, SeedLike
from .._validation import as_rng
from ._blocks import Transformer, TransformerBlock, _magnitude, _scaled_ends, _unit_exponent
from ._data import _InterpolatorCounts, check_dataset
from ._hausdorff import relative_hausdorff_errors
from ._layers import Factored, FeedForward, Identity, SelfAttention
from ._moves import COINCIDE_RTOL, _distinct, _generic_direction, hat_move

__all__ = ["HardmaxInterpolator", "PhaseState", "build_hardmax_interpolator"]

#: Redraws of the random leader positions before giving up (a collision has probability 0).
MAX_REDRAWS = 20


@dataclass(frozen=True, eq=False)
class PhaseState:
    """Token sets after one phase of the construction.

    Attributes
    ----------
    name : str
        ``"input"``, ``"separated"``, ``"leaders"``, ``"collapsed"`` or ``"interpolated"``.
    n_layers : int
        Number of layers (FF and SA counted separately) applied so far.
    sequences : tuple of ndarray, shapes (n_j, d)

    Examples
    --------
    Found in the ``phases`` of :class:`HardmaxInterpolator`; after the collapse each sequence
    has as many distinct points as targets:

    >>> import numpy as np
    >>> from token_dynamics.interpolation import build_hardmax_interpolator
    >>> X = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]])]
    >>> Y = [np.array([[5.0, 5.0]]), np.array([[-1.0, 2.0], [3.0, 0.0]])]
    >>> interp = build_hardmax_interpolator(X, Y, rng=0)
    >>> [p.name for p in interp.phases]
    ['input', 'separated', 'leaders', 'collapsed', 'interpolated']
    >>> [len(np.unique(S.round(9), axis=0)) for S in interp.phase("collapsed").sequences]
    [1, 2]
    """

    name: str
    n_layers: int
    sequences: tuple[np.ndarray, ...]


@dataclass(frozen=True, eq=False)
class HardmaxInterpolator(_InterpolatorCounts):
    r"""Result of :func:`build_hardmax_interpolator`.

    Attributes
    ----------
    transformer : Transformer
        The network; ``transformer(inputs)`` interpolates the data.
    phases : tuple of PhaseState
        Input, separated, leaders, collapsed and interpolated token sets.
    n_separation : int
        Number ``S`` of separation blocks (at most ``N - 1``).
    leader_points : tuple of ndarray, shapes (m_j, d)
        Positions of the leaders of each sequence after leader selection (the collapsed sets).
    errors : ndarray, shape (N,)
        Relative Hausdorff error of each sequence.
    m : ndarray of int, shape (N,)
        Output lengths ``m_j``.
    n_blocks, n_params : int
        Blocks and parameters of the network (properties).
    max_error : float
        Largest relative Hausdorff error (property).
    paper_bound : int
        The block count :math:`2\sum_j m_j + 2N + 1` reported for the paper's Theorem 1.6
        (property; see :func:`paper_block_count`).

    Examples
    --------
    Returned by :func:`build_hardmax_interpolator`; the network maps each input onto its
    target set, within the paper's block count:

    >>> import numpy as np
    >>> from token_dynamics.interpolation import build_hardmax_interpolator, hausdorff_distance
    >>> X = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]])]
    >>> Y = [np.array([[5.0, 5.0]]), np.array([[-1.0, 2.0], [3.0, 0.0]])]
    >>> interp = build_hardmax_interpolator(X, Y, rng=0)
    >>> out = interp.transformer(X)
    >>> [bool(hausdorff_distance(o, y) < 1e-9) for o, y in zip(out, Y)]
    [True, True]
    >>> interp.n_blocks <= interp.paper_bound, interp.m.tolist()
    (True, [1, 2])
    """

    attention: ClassVar[str] = "hardmax"
    transformer: Transformer
    phases: tuple[PhaseState, ...]
    n_separation: int
    leader_points: tuple[np.ndarray, ...]
    errors: FloatArray
    m: IntArray

    def phase(self, name: str) -> PhaseState:
        """The phase called ``name``."""
        for p in self.phases:
            if p.name == name:
                return p
        raise KeyError(f"no phase {name!r}; phases are {[p.name for p in self.phases]}.")


def _contains(S: np.ndarray, x: np.ndarray, tol: float) -> bool:
    return bool(np.linalg.norm(S - x, axis=1).min() <= tol)


def _identity_sa() -> SelfAttention:
    return SelfAttention(A=None, V=None, rho=1.0)


class _Builder:
    """Applies each layer as soon as it is chosen, so that decisions use actual positions."""

    def __init__(self, X: list[FloatArray], rng: np.random.Generator) -> None:
        self.state = [Z.copy() for Z in X]
        self.blocks: list[TransformerBlock] = []
        self.n_layers = 0
        self.rng = rng
        self.leaders_snapshot: PhaseState | None = None

    @property
    def scale(self) -> float:
        return _magnitude(self.state)

    @property
    def tol(self) -> float:
        return COINCIDE_RTOL * self.scale

    def points(self) -> np.ndarray:
        return _distinct(np.vstack(self.state), self.tol)

    def add(self, ff: FeedForward, sa: SelfAttention) -> None:
        self.blocks.append(TransformerBlock(ff, sa))
        self.state = [sa._apply(ff._apply(Z)) for Z in self.state]
        self.n_layers += 2

    def snapshot(
        self, name: str, state: list[FloatArray] | None = None, extra: int = 0
    ) -> PhaseState:
        state = self.state if state is None else state
        return PhaseState(name, self.n_layers + extra, tuple(Z.copy() for Z in state))


def _separate(b: _Builder) -> int:
    """Phase 1: make the token sets of different sequences pairwise disjoint."""
    N, d = len(b.state), b.state[0].shape[1]
    u, _ = _generic_direction(b.points(), b.rng)
    w = b.rng.normal(size=d)
    w -= (w @ u) * u
    w /= np.linalg.norm(w)
    groups = [list(range(N))]
    steps = 0
    while True:
        pair = None
        for g in groups:
            for a in range(len(g)):
                for c in range(a + 1, len(g)):
                    j, k = g[a], g[c]
                    if cdist(b.state[j], b.state[k]).min() <= b.tol:
                        pair = (j, k)
                        break
                if pair:
                    break
            if pair:
                break
        if pair is None:
            return steps
        if steps >= N - 1:  # pragma: no cover - impossible when the assumptions hold
            raise RuntimeError("separation did not terminate within N - 1 steps; report this bug.")
        j, k = pair
        private = [x for x in b.state[j] if not _contains(b.state[k], x, b.tol)]
        if not private:
            j, k = k, j
            private = [x for x in b.state[j] if not _contains(b.state[k], x, b.tol)]
        p = private[0]
        pts = b.points()
        proj = pts @ u
        t = max(0.0, 1.0 - proj.min()) * u if steps == 0 else np.zeros(d)
        top = float((proj + t @ u).max())
        q = p + t + (top + 1.0 + b.rng.uniform(0.5, 1.5) - (p + t) @ u) * u
        ff = hat_move(pts, p, q, translation=t if steps == 0 else None, rng=b.rng)
        moved = [ff._apply(Z) for Z in b.state]
        for _ in range(MAX_REDRAWS):
            gain = b.rng.uniform(1.0, 2.0)
            sa = SelfAttention(A=Factored(u, u), V=Factored(gain * w, u), rho=1.0)
            new = [sa._apply(Z) for Z in moved]
            shifts = [float((N_ - M_)[0] @ w) for N_, M_ in zip(new, moved, strict=True)]
            new_groups = [h for g in groups for h in _split(g, shifts, b.tol)]
            if _groups_disjoint(new, new_groups, b.tol):
                break
        else:  # pragma: no cover - a collision has probability zero
            raise RuntimeError("separation kept producing collisions; try another `rng`.")
        b.add(ff, sa)
        groups = new_groups
        steps += 1


def _split(group: list[int], values: list[float], tol: float) -> list[list[int]]:
    """Split ``group`` where the sorted ``values`` jump by more than ``tol``."""
    order = sorted(group, key=lambda i: values[i])
    out = [[order[0]]]
    for a, c in itertools.pairwise(order):
        if values[c] - values[a] > tol:
            out.append([])
        out[-1].append(c)
    return out


def _groups_disjoint(state: list[np.ndarray], groups: list[list[int]], tol: float) -> bool:
    for a in range(len(groups)):
        for c in range(a + 1, len(groups)):
            A = np.vstack([state[i] for i in groups[a]])
            B = np.vstack([state[i] for i in groups[c]])
            if cdist(A, B).min() <= tol:
                return False
    return True


def _spread_directions(K: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``K`` unit vectors of the open positive orthant, spread out (greedy max-min selection
    among ``20 K`` draws of ``v / |v|``, ``v ~ U[0.2, 1]^d``), in random order."""
    if K == 0:
        return np.zeros((0, d))
    pool = rng.uniform(0.2, 1.0, size=(20 * K, d))
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    chosen = [0]
    dist = np.linalg.norm(pool - pool[0], axis=1)
    for _ in range(K - 1):
        i = int(np.argmax(dist))
        chosen.append(i)
        dist = np.minimum(dist, np.linalg.norm(pool - pool[i], axis=1))
    return pool[rng.permutation(chosen)]


def _select_leaders(b: _Builder, m: list[int], Y: list[np.ndarray]) -> list[np.ndarray]:
    """Phase 2 (and the collapse layer, Phase 3): returns the leader positions."""
    N, d = len(b.state), b.state[0].shape[1]
    allpts = np.vstack(b.state)
    t = (1.0 - allpts.min()) * np.ones(d)
    b_hi = float((allpts + t).max())
    R_s = b_hi + 2.0 + 10.0 * np.sqrt(d)
    ytol = 1e3 * COINCIDE_RTOL * max(R_s, _magnitude(b.state, Y))
    targets = np.vstack(Y)
    for _ in range(MAX_REDRAWS):
        sphere = -R_s * _spread_directions(sum(m) - N, d, b.rng)
        leaders, used = [], 0
        for j in range(N):
            diag = (b_hi + 2.0 + j + b.rng.uniform(0.1, 0.9)) * np.ones((1, d))
            leaders.append(np.vstack([diag, sphere[used : used + m[j] - 1]]))
            used += m[j] - 1
        allL = np.vstack(leaders)
        sph = np.vstack([L_[1:] for L_ in leaders]) / R_s
        cos_gap = (
            1.0 - (sph @ sph.T)[~np.eye(sph.shape[0], dtype=bool)].max() if len(sph) > 1 else 1
        )
        if cdist(allL, targets).min() > ytol and cos_gap > 1e-7:
            break
    else:  # pragma: no cover - a collision has probability zero
        raise RuntimeError("leader positions kept colliding with targets; try another `rng`.")
    moves = [(j, k) for j in range(N) for k in range(m[j])]
    for idx, (j, k) in enumerate(moves):
        first = idx == 0
        p, q = b.state[j][k], leaders[j][k]  # actual current position of the k-th token
        ff = hat_move(b.points(), p, q, translation=t if first else None, rng=b.rng)
        if idx == len(moves) - 1:
            # Phase 3 lives in the SA of the last leader block; record the leaders state first.
            leaders_state = [ff._apply(Z) for Z in b.state]
            b.leaders_snapshot = b.snapshot("leaders", leaders_state, extra=1)
            sa = SelfAttention(A=Identity(d), V=Identity(d), rho=0.0)
        else:
            sa = _identity_sa()
        b.add(ff, sa)
    return leaders


def _interpolate(b: _Builder, leaders: list[np.ndarray], Y: list[np.ndarray]) -> None:
    """Phase 4: move the k-th leader of sequence j onto y^j_k, one hat per leader."""
    for j, L_ in enumerate(leaders):
        for k in range(L_.shape[0]):
            # the actual current position of this leader (bitwise drift-free)
            cur = b.state[j]
            p = cur[np.argmin(np.linalg.norm(cur - L_[k], axis=1))]
            ff = hat_move(b.points(), p, Y[j][k], rng=b.rng)
            b.add(ff, _identity_sa())


def build_hardmax_interpolator(
    inputs: ArrayLike, targets: ArrayLike, *, rng: SeedLike = None
) -> HardmaxInterpolator:
    r"""Build a hardmax transformer that maps each input sequence onto its target set.

    For every sequence :math:`j`, exactly (up to rounding),

    .. math:: \{\mathrm T_i(X^j)\}_{i\le n_j} = \{y^j_1, \dots, y^j_{m_j}\}, \qquad
              L = S + 2\sum_{j=1}^N m_j \le 2\sum_{j=1}^N m_j + N - 1 \text{ blocks},

    with :math:`S \le N - 1` separation blocks, feed-forward width at most 4 and rank-one or
    identity attention matrices: within the count :math:`2\sum_j m_j + 2N + 1` reported for
    the paper's hardmax theorem. The network is built phase by phase (separation, leader
    selection, collapse, interpolation), each layer applied as soon as it is chosen.

    Scale. The construction works on data of unit size: inputs, or targets, whose largest entry
    lies outside ``[2^-3, 2^4]`` are brought into ``[1, 2)`` by a power of two, which the first
    layer takes from the inputs (its input and skip weights) and the last gives to the targets
    (its output and skip weights), exactly. The result is then exact to rounding relative to the
    targets' size (about 1e-12, measured), whatever the sizes of inputs and targets within the
    accepted ``[2^-500, 2^500]`` (about 3e-151 to 3e150, see :func:`check_dataset`), and
    powers of two of the data give the same network up to those two scales. Each phase is the
    network's own state after its first ``n_layers`` layers
    (``transformer.layer_states(inputs)[n_layers]``): the input at its size, the interpolated
    sets at the targets', and in between the states of the data brought to unit size (a
    "separated" phase that needs no separation block is the input itself).

    Cost: each block is applied to every sequence and the current points are deduplicated with
    a k-d tree, about blocks x tokens x log(tokens) (0.5 s of CPU time for N = 40 sequences of
    16 tokens with 4 targets each in d = 4, 320 blocks).

    Parameters
    ----------
    inputs : list of array_like, shapes (n_j, d)
        Input sequences; tokens pairwise distinct within a sequence, sequences pairwise
        distinct as sets, ``d >= 2``.
    targets : list of array_like, shapes (m_j, d)
        Target sets, ``m_j <= n_j`` pairwise distinct points each.
    rng : Generator, int or None
        Draws the generic directions and positions.

    Returns
    -------
    HardmaxInterpolator
        The network, its phases, its leaders and its measured errors.

    Raises
    ------
    ValueError
        Naming the violated assumption of the data (see :func:`check_dataset`), among them
        inputs or targets whose largest entry lies outside ``[2^-500, 2^500]``.
    TypeError
        If an array argument is not real, or `rng` is not a Generator, a seed or None.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the hardmax result of its abstract and the phases its figures draw;
    the details are derived in this book).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import build_hardmax_interpolator
    >>> X = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]])]
    >>> Y = [np.array([[5.0, 5.0]]), np.array([[-1.0, 2.0], [3.0, 0.0]])]
    >>> interp = build_hardmax_interpolator(X, Y, rng=0)
    >>> bool(interp.max_error < 1e-10), interp.n_blocks, interp.n_separation
    (True, 7, 1)
    """
    X, Y = check_dataset(inputs, targets)
    rng = as_rng(rng)
    m = [Z.shape[0] for Z in Y]
    # built on data of unit size; the first layer takes the inputs' scale, the last the targets'
    e_in, e_out = _unit_exponent(X), _unit_exponent(Y)
    Xu, Yu = [np.ldexp(Z, -e_in) for Z in X], [np.ldexp(Z, -e_out) for Z in Y]
    b = _Builder(Xu, rng)
    phases = [PhaseState("input", 0, tuple(Z.copy() for Z in X))]
    S = _separate(b)
    phases.append(b.snapshot("separated") if S else replace(phases[0], name="separated"))
    leaders = _select_leaders(b, m, Yu)
    # set at the last leader move, and there is one: every target set has a point
    phases.append(cast(PhaseState, b.leaders_snapshot))
    phases.append(b.snapshot("collapsed"))
    for j, Z in enumerate(b.state):
        if _distinct(Z, b.tol).shape[0] != m[j]:  # pragma: no cover - the lemmas forbid it
            raise RuntimeError(f"collapse left sequence {j} with the wrong number of points.")
    _interpolate(b, leaders, Yu)
    blocks = b.blocks
    blocks[0] = replace(blocks[0], ff=_scaled_ends(blocks[0].ff, -e_in, 0))
    blocks[-1] = replace(blocks[-1], ff=_scaled_ends(blocks[-1].ff, 0, e_out))
    T = Transformer(tuple(blocks))
    out = T(X)
    phases.append(PhaseState("interpolated", b.n_layers, tuple(out)))
    errors = relative_hausdorff_errors(out, Y)
    return HardmaxInterpolator(
        transformer=T,
        phases=tuple(phases),
        n_separation=S,
        leader_points=tuple(np.array(L_) for L_ in leaders),
        errors=errors,
        m=np.array(m),
    )
