"""How far softmax attention strays from hardmax along the constructed network: the a-priori
deviation bound, the critical temperature and the measured substitution errors (private;
re-exported by :mod:`token_dynamics.interpolation`)."""

from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, FloatArray
from .._validation import as_real_array, check_instance, check_positive
from ..attention._hardmax import tie_threshold
from ._blocks import Transformer, _magnitude, as_sequences
from ._hausdorff import relative_hausdorff_errors
from ._layers import HARDMAX_TOL, FeedForward, SelfAttention

__all__ = ["critical_temperature", "softmax_deviation_bound", "substitution_errors"]

#: Temperatures searched by :func:`critical_temperature`, relative to the largest score scale:
#: 1e-12 makes every softmax weight off the maximiser underflow, 1e6 makes softmax uniform.
TAU_RANGE = (1e-12, 1e6)
#: Bisection steps in log(tau): 60 halvings of a 40-decade bracket pin tau* to ~1e-16 relative.
N_BISECTION = 60


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
    uneven_tie: np.ndarray  # (N,) bool: ... whose scores differ (softmax separates them)
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
        return _SATerms(rho, 0.0, None, *(np.empty(0),) * 5)
    d = sequences[0].shape[1]
    A = sa._dense_A if sa._dense_A is not None else np.zeros((d, d))
    radius, margins, distinct, uneven = [], [], [], []
    for X in sequences:
        S = X @ A.T @ X.T
        top = S.max(axis=1, keepdims=True)
        tied = S >= tie_threshold(top, HARDMAX_TOL)  # the keys Hardmax averages
        # a tie between distinct points: some coordinate differs among a query's tied keys
        hi = np.where(tied[:, :, None], X[None, :, :], -np.inf).max(axis=1)
        lo = np.where(tied[:, :, None], X[None, :, :], np.inf).min(axis=1)
        distinct_q = np.any(hi > lo, axis=1)
        distinct.append(bool(np.any(distinct_q)))
        # hardmax averages keys tied within its tolerance; softmax weighs them by their scores
        spread = top[:, 0] - np.where(tied, S, np.inf).min(axis=1)
        uneven.append(bool(np.any(distinct_q & (spread > 0))))
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
        np.array(uneven),
        sizes,
    )


class _BoundTerms:
    """Everything of :func:`softmax_deviation_bound` that does not depend on tau, computed once
    per block; :meth:`bounds` then costs a few vector operations per layer."""

    def __init__(self, transformer: Transformer, states: list[list[FloatArray]]) -> None:
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
        lost = ~np.isfinite(E) | ((E > 0) & t.distinct_tie) | t.uneven_tie
        shift = 2.0 * t.norm_a * (2.0 * R * E + E * E)
        eff = t.margin - shift[self.seq]
        lost |= np.logical_or.reduceat(~(eff > 0), self.starts)
        leak = 2.0 * (t.size - 1) * t.norm_v * R[self.seq] * np.exp(-eff / tau)
        out = abs(t.rho) * e + t.norm_v * E[self.seq] + leak
        out[self._per_sequence(lost)] = np.inf
        return out


def softmax_deviation_bound(
    transformer: Transformer, inputs: ArrayLike, tau: float
) -> list[FloatArray]:
    r"""A-priori bound on how far the softmax network strays from the hardmax one.

    Each attention layer of ``transformer`` is switched from hardmax to softmax at temperature
    ``tau``. Along the hardmax trajectory, a token's deviation ``e_i`` is propagated layer by
    layer: a feed-forward layer multiplies it by its local Lipschitz constant on the ball of
    radius ``e_i`` (the global one when the ball meets a kink); an attention layer with margin
    :math:`\Delta_i` between the best and second-best score, on a sequence of radius :math:`R`
    whose largest deviation is :math:`E`, maps the deviations to

    .. math:: e_i \mapsto |\rho|\, e_i + \lVert V\rVert E
              + 2(n-1)\lVert V\rVert (R + E)\, e^{-\Delta_i^{\rm eff}/\tau},
              \qquad \Delta_i^{\rm eff} = \Delta_i - 2\lVert A\rVert\big(2(R + E)E + E^2\big),

    the margin reduced by the largest score change the deviations can cause; a sequence whose
    effective margin is not positive is lost (``inf``). So is a sequence where hardmax ties
    distinct keys (scores within its tolerance of the best), unless their deviations are zero
    and their scores exactly equal: softmax weighs such keys by their scores and, as
    :math:`\tau \to 0`, picks one of them instead of their mean.

    Parameters
    ----------
    transformer : Transformer
        A network with hardmax attention (for instance an interpolator).
    inputs : list of array_like, shapes (n_j, d)
        The input sequences, in the transformer's dimension.
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
    TypeError
        If `transformer` is not a :class:`Transformer` or `inputs` not a list of real arrays.
    FloatingPointError
        If the bound overflows (rescale `inputs`).

    References
    ----------
    Derived in this book for the softmax result of A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact
    sequence interpolation with transformers*, arXiv:2502.02270 (its abstract: the
    softmax network follows the hardmax one for every temperature below a threshold).

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


def _check_transformer(transformer: object) -> None:
    check_instance(
        transformer,
        Transformer,
        "transformer",
        "Pass e.g. build_hardmax_interpolator(...).transformer.",
    )


def critical_temperature(transformer: Transformer, inputs: ArrayLike, tolerance: float) -> float:
    r"""Largest temperature at which :func:`softmax_deviation_bound` stays below ``tolerance``:

    .. math:: \tau^* = \sup\big\{\tau > 0 : \max_{j, i}\, e^j_i(\tau) \le
              \varepsilon_{\rm tol}\big\},

    found by bisection in :math:`\log\tau` (the bound grows with :math:`\tau`) over 1e-12 to
    1e6 times the squared scale of the tokens. The temperature-free part of the bound (matrix
    norms, score margins, local Jacobians) is computed once per layer, so the cost is linear
    in the number of blocks; each bisection step costs a few vector operations per layer.

    Parameters
    ----------
    transformer : Transformer
        A network with hardmax attention (for instance an interpolator).
    inputs : list of array_like, shapes (n_j, d)
        The input sequences, in the transformer's dimension.
    tolerance : float
        Allowed deviation of every output token.

    Returns
    -------
    float
        :math:`\tau^*`, resolved to about 1e-16 relative (or the top of the searched range
        when even that temperature meets the tolerance).

    Raises
    ------
    ValueError
        If `tolerance` is not positive or no temperature meets it (a hardmax margin is already lost
        as ``tau -> 0``, see :func:`softmax_deviation_bound`).
    TypeError
        If `transformer` is not a :class:`Transformer` or `inputs` not a list of real arrays.
    FloatingPointError
        If the bound overflows (rescale `inputs`).

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the softmax result of its abstract): exact softmax interpolation for
    every temperature below a threshold :math:`\tau^*`, computed here from the book's bound.

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


def _critical_temperature(transformer: Transformer, inputs: ArrayLike, tolerance: float) -> float:
    states = transformer.layer_states(as_sequences(inputs, d=transformer.dim))
    scale = float(np.float64(_magnitude(*states)) ** 2)  # numpy: an overflow is guarded

    terms = _BoundTerms(transformer, states)  # once: each bisection step is then cheap

    def ok(tau: float) -> bool:
        return float(terms.bounds(tau).max()) <= tolerance

    lo, hi = np.log(TAU_RANGE[0] * scale), np.log(TAU_RANGE[1] * scale)
    if not ok(np.exp(lo)):
        raise ValueError(
            "no temperature meets `tolerance`: a hardmax margin is lost already at tau -> 0, "
            "to the deviations (increase `tolerance`) or to a hardmax tie of distinct tokens "
            "with different scores, which softmax separates (move those `inputs` apart)."
        )
    if ok(np.exp(hi)):
        return float(np.exp(hi))
    for _ in range(N_BISECTION):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(np.exp(mid)) else (lo, mid)
    return float(np.exp(lo))


def substitution_errors(
    transformer: Transformer, inputs: ArrayLike, targets: ArrayLike, taus: ArrayLike
) -> FloatArray:
    r"""Largest relative Hausdorff error when every attention layer is softmax at ``tau``:

    .. math:: \mathrm{err}(\tau) = \max_j \frac{d_H\big(\mathrm T_\tau(X^j), Y^j\big)}
              {\max(1, \max_k |y^j_k|)},

    with :math:`\mathrm T_\tau` the network with softmax attention at temperature
    :math:`\tau` in place of hardmax: the measured counterpart of the a-priori
    :func:`softmax_deviation_bound`.

    Parameters
    ----------
    transformer : Transformer
        A network with hardmax attention (for instance an interpolator).
    inputs : list of array_like, shapes (n_j, d)
        The input sequences, in the transformer's dimension.
    targets : list of array_like, shapes (m_j, d)
        The target sets, one per input.
    taus : array_like, shape (k,)
        The temperatures, positive.

    Returns
    -------
    ndarray, shape (k,)
        :math:`\mathrm{err}(\tau)` for each temperature.

    Raises
    ------
    ValueError
        If a temperature is not positive or `inputs` do not match the transformer's dimension.
    TypeError
        If `transformer` is not a :class:`Transformer` or an array argument is not real.
    FloatingPointError
        If the softmax network overflows (rescale `inputs` and `targets`).

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the softmax result of its abstract: softmax in place of hardmax).

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
