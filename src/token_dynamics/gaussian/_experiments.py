"""Batches of moment ODE runs behind the chapter's figures (cone portraits, rank counts)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._typing import ArrayLike, FloatArray, SeedLike
from .._validation import as_real_array, as_rng, check_int, check_positive
from ._equations import (
    L2Moments,
    MomentEquations,
    SinkhornMoments,
    SoftmaxMoments,
)
from ._multihead import MultiHeadMoments
from ._solve import solve_moments

__all__ = [
    "CONE_REGIMES",
    "SIGN_COUNTEREXAMPLE_NSD",
    "SIGN_COUNTEREXAMPLE_POS",
    "RankCounts",
    "cone_regime",
    "limiting_ranks",
    "trace_one_grid",
]

#: (V, A) with V A + A^T V^T <= 0 (eigenvalues -8 and 0) for which some Gaussians blow up in
#: finite time and others converge: found by a search over 2x2 integer matrices.
SIGN_COUNTEREXAMPLE_NSD = (
    np.array([[2.0, 1.0], [-2.0, -3.0]]),
    np.array([[-1.0, 1.0], [0.0, 0.0]]),
)
#: (V, A), both symmetric, V > 0, with V A + A V having the eigenvalue 1.12 > 0, for which no
#: Gaussian blows up: every run settles on a rank-one covariance s u u^T with u^T A u = 0.
SIGN_COUNTEREXAMPLE_POS = (
    np.array([[2.0, 1.0], [1.0, 1.0]]),
    np.array([[0.0, -1.0], [-1.0, -1.0]]),
)

#: Names of the regimes of the PSD-cone portraits (after the paper's 2x2 figures).
CONE_REGIMES = ("zero", "line", "plane", "two-lines", "blowup", "mixed")


def trace_one_grid(n_angles: int, *, radii: ArrayLike = (0.3, 0.6, 0.9)) -> FloatArray:
    r"""2x2 covariances of trace one on circles of the cone's cross-section.

    The point :math:`(r\cos\theta, r\sin\theta, 1)` in cone coordinates is
    :math:`\Sigma = \tfrac12\begin{psmallmatrix}1 + r\cos\theta & r\sin\theta\\
    r\sin\theta & 1 - r\cos\theta\end{psmallmatrix}`, PSD for :math:`r \le 1` (rank one at 1).

    Parameters
    ----------
    n_angles : int
        Number of angles :math:`\theta`, equally spaced on :math:`[0, 2\pi)`.
    radii : sequence of float, default (0.3, 0.6, 0.9)
        Radii :math:`r` in :math:`[0, 1]`.

    Returns
    -------
    ndarray, shape (len(radii) * n_angles, 2, 2)
        The covariances, radius by radius.

    Raises
    ------
    ValueError
        If `n_angles` is not a positive integer or a radius lies outside ``[0, 1]``.

    Examples
    --------
    Every matrix has trace one, and determinant :math:`(1 - r^2)/4`:

    >>> import numpy as np
    >>> from token_dynamics.gaussian import trace_one_grid
    >>> grid = trace_one_grid(4, radii=(1.0,))
    >>> grid[0]
    array([[1., 0.],
           [0., 0.]])
    >>> np.trace(grid, axis1=1, axis2=2)
    array([1., 1., 1., 1.])
    >>> np.linalg.det(trace_one_grid(3, radii=(0.6,))).round(12)
    array([0.16, 0.16, 0.16])
    """
    n_angles = check_int(n_angles, "n_angles")
    r = as_real_array(radii, "radii").ravel()
    if r.size == 0 or np.any(r < 0) or np.any(r > 1):
        raise ValueError("`radii` must be values in [0, 1] (1 is the cone's surface).")
    th = np.linspace(0.0, 2 * np.pi, n_angles, endpoint=False)
    R, TH = np.meshgrid(r, th, indexing="ij")
    x, y = (R * np.cos(TH)).ravel(), (R * np.sin(TH)).ravel()
    return 0.5 * np.stack([np.stack([1 + x, y], -1), np.stack([y, 1 - x], -1)], -2)


def _l2_from_qk(Q: FloatArray, K: FloatArray, V: FloatArray) -> L2Moments:
    # s = 2 sqrt(k) makes B = 2/s K^T Q = A, so l2 and softmax agree to first order in Sigma.
    return L2Moments(Q, K, V, s=2.0 * np.sqrt(Q.shape[0]))


def cone_regime(name: str, *, rng: SeedLike = None) -> dict[str, MomentEquations]:
    r"""Moment equations of softmax, l2 and Sinkhorn (and multi-head) in one regime, d = 2.

    ``A = K^T Q / sqrt(k)`` throughout; l2 uses ``Qbar = Q``, ``Kbar = K``, ``s = 2 sqrt(k)``
    (so that ``B = A``) and Sinkhorn ``eps = 1``.

    Regimes: ``"zero"`` (K = -Q random, V = W W^T + I/10: collapse to 0), ``"line"`` (Q = q, K = -q,
    V = I: collapse onto the line of u u^T with u orthogonal to q), ``"plane"`` (two heads,
    each moving one coordinate and attending along the other: the diagonal plane c = 0 is
    stationary), ``"two-lines"`` and ``"mixed"`` (the two counterexamples
    :data:`SIGN_COUNTEREXAMPLE_POS` and :data:`SIGN_COUNTEREXAMPLE_NSD`, softmax only),
    ``"blowup"``
    (A + A^T > 0, V = I: softmax blows up, l2 and Sinkhorn only grow).

    Parameters
    ----------
    name : str
        One of :data:`CONE_REGIMES`.
    rng : Generator, int or None, keyword-only
        Draws the random ``Q`` and ``W`` of the ``"zero"`` regime (the others are fixed).

    Returns
    -------
    dict of str to MomentEquations
        Keyed by ``"softmax"``, ``"l2"``, ``"sinkhorn"`` (``"softmax"`` only for the two
        counterexamples).

    Raises
    ------
    ValueError
        If `name` is not a regime.

    Examples
    --------
    In the ``"line"`` regime :math:`A = -qq^\top/\sqrt k` and a covariance
    :math:`uu^\top` with :math:`u \perp q` is stationary for all three variants:

    >>> import numpy as np
    >>> from token_dynamics.gaussian import cone_regime
    >>> eqs = cone_regime("line")
    >>> sorted(eqs)
    ['l2', 'sinkhorn', 'softmax']
    >>> u = np.array([-np.sin(0.4), np.cos(0.4)])
    >>> [float(np.abs(eq.rhs(0.0, [0.0, 0.0], np.outer(u, u))[1]).max()) < 1e-12
    ...  for eq in eqs.values()]
    [True, True, True]
    """
    gen = as_rng(rng)
    I2 = np.eye(2)
    if name == "zero":
        Q = gen.normal(size=(2, 2))
        W = gen.normal(size=(2, 2))
        K, V = -Q, W @ W.T + 0.1 * I2
    elif name == "line":
        q = np.array([[np.cos(0.4), np.sin(0.4)]])
        Q, K, V = q, -q, I2
    elif name == "plane":
        P = np.array([[0.0, 1.0], [1.0, 0.0]])
        heads = [(P[h : h + 1], -P[h : h + 1], np.outer(I2[h], I2[h])) for h in range(2)]
        return {
            "softmax": MultiHeadMoments(tuple(SoftmaxMoments(k.T @ q, v) for q, k, v in heads)),
            "l2": MultiHeadMoments(tuple(_l2_from_qk(q, k, v) for q, k, v in heads)),
            "sinkhorn": MultiHeadMoments(tuple(SinkhornMoments(k.T @ q, v) for q, k, v in heads)),
        }
    elif name in ("two-lines", "mixed"):
        V, A = SIGN_COUNTEREXAMPLE_POS if name == "two-lines" else SIGN_COUNTEREXAMPLE_NSD
        return {"softmax": SoftmaxMoments(A, V)}
    elif name == "blowup":
        Q = np.array([[1.0, 0.3], [0.0, 0.8]])
        K, V = Q, I2
    else:
        raise ValueError(f"`name` must be one of {CONE_REGIMES}; got {name!r}.")
    A = K.T @ Q / np.sqrt(Q.shape[0])
    return {
        "softmax": SoftmaxMoments(A, V),
        "l2": _l2_from_qk(Q, K, V),
        "sinkhorn": SinkhornMoments(A, V),
    }


@dataclass(frozen=True)
class RankCounts:
    """Ranks of the covariance reached at the final time, over random instances.

    Attributes
    ----------
    d : dimension.
    ranks : (n_runs,) int array, eigenvalues above ``threshold`` counted.
    bound : int, ``d - floor(d / 2)``, the dimension of ker(A + A^T).
    blowups : int, number of runs that met a blow-up (0 by the proposition).

    Examples
    --------
    Returned by :func:`limiting_ranks`:

    >>> from token_dynamics.gaussian import limiting_ranks
    >>> rc = limiting_ranks(4, 2, T=50.0, rng=1)
    >>> rc.d, rc.ranks.shape, rc.bound
    (4, (2,), 2)
    """

    d: int
    ranks: FloatArray
    bound: int
    blowups: int


def limiting_ranks(
    d: int,
    n_runs: int,
    *,
    value: str = "identity",
    T: float = 200.0,
    threshold: float = 0.1,
    rng: SeedLike = None,
) -> RankCounts:
    r"""Ranks of :math:`\Sigma(T)` for random softmax instances with :math:`A \preceq 0`.

    As in the paper's histograms: :math:`Q \in \mathbb R^{\lfloor d/2\rfloor\times d}` standard
    normal, :math:`K = -Q`, :math:`A = K^\top Q/\sqrt k` (rank :math:`\lfloor d/2\rfloor`),
    ``V = I`` or ``V = W^T W / d`` (``value="random"``), :math:`\Sigma_0 = LL^\top/d` with ``L``
    standard normal, zero mean; eigenvalues of :math:`\Sigma(T)` above ``threshold`` are counted.

    The counts are the ranks at the time ``T``, not yet the limit's in every run: an eigenvalue
    that decays slowly is still above ``threshold`` at ``T``. Counted again at ``100 T`` from
    the default ``T = 200`` (30 runs each), the rank of 4 runs changed at ``d = 3`` and 9 at
    ``d = 4`` with ``value="random"``, 1 at ``d = 4`` with ``V = I``. Take ``T`` larger (the
    book takes 2000) or compare two times when the limit matters.

    Parameters
    ----------
    d : int
        Dimension, at least 2.
    n_runs : int
        Number of random instances.
    value : {"identity", "random"}, keyword-only
        ``V = I`` or ``V = W^T W / d`` with ``W`` standard normal.
    T : float, keyword-only
        Final time, positive.
    threshold : float, keyword-only
        Eigenvalues above it count towards the rank.
    rng : Generator, int or None, keyword-only
        Source of ``Q``, ``W`` and ``L``.

    Returns
    -------
    RankCounts
        The ranks, their bound :math:`d - \lfloor d/2\rfloor` and the number of blow-ups.

    Raises
    ------
    ValueError
        If an argument is out of range or `value` is unknown.
    FloatingPointError
        If a moment run fails.

    Examples
    --------
    >>> from token_dynamics.gaussian import limiting_ranks
    >>> rc = limiting_ranks(3, 4, T=100.0, rng=0)
    >>> rc.bound, bool(rc.ranks.max() <= rc.bound), rc.blowups
    (2, True, 0)
    """
    d = check_int(d, "d", minimum=2)
    n_runs = check_int(n_runs, "n_runs")
    T = check_positive(T, "T")
    threshold = check_positive(threshold, "threshold")
    if value not in ("identity", "random"):
        raise ValueError(f"`value` must be 'identity' or 'random'; got {value!r}.")
    gen = as_rng(rng)
    k = d // 2
    ranks = np.empty(n_runs, dtype=int)
    blowups = 0
    for i in range(n_runs):
        Q = gen.normal(size=(k, d))
        A = -Q.T @ Q / np.sqrt(k)
        if value == "identity":
            V = np.eye(d)
        else:
            W = gen.normal(size=(d, d))
            V = W.T @ W / d
        L = gen.normal(size=(d, d))
        sol = solve_moments(
            SoftmaxMoments(A, V), np.zeros(d), L @ L.T / d, [0.0, T], rtol=1e-7, atol=1e-10
        )
        if sol.status == "failed":  # a rank read off a path that stopped early would be wrong
            raise FloatingPointError(f"run {i} of limiting_ranks failed: {sol.message}")
        blowups += sol.blew_up
        ranks[i] = int(np.sum(np.linalg.eigvalsh(sol.covariances[-1]) > threshold))
    return RankCounts(d, ranks, d - k, blowups)
