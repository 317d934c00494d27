r"""Phase diagrams in the (t, beta) plane: how many pairs of tokens have clustered, and when."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, FloatArray, SeedLike
from .._validation import (
    as_real_array,
    as_rng,
    as_sphere_tokens,
    as_times,
    check_int,
    check_positive,
    check_real,
)
from ..attention import softmax_weights
from ..integrators import _step_counts
from ._orthogonal import DYNAMICS

__all__ = ["PhaseDiagram", "clustered_fraction", "phase_diagram"]


@dataclass(frozen=True)
class PhaseDiagram:
    r"""Fraction of clustered pairs of tokens against time and inverse temperature.

    Attributes
    ----------
    betas : ndarray, shape (B,)
    times : ndarray, shape (T,)
    fraction : ndarray, shape (B, T)
        Mean over the systems of the fraction of pairs :math:`i < j` with
        :math:`\langle x_i, x_j\rangle >` `threshold`: the probability that two tokens have
        clustered.
    stderr : ndarray, shape (B, T)
        Standard error of that mean over the systems, ``std / sqrt(n_systems)`` (``ddof=1``):
        ``nan`` when ``n_systems = 1``, which gives no spread to estimate it from, and 0 where
        every system gives the same fraction (all pairs clustered, or none), where this normal
        approximation understates the uncertainty of a fraction near 0 or 1.
    n, d, n_systems : int
    threshold : float
    dynamics : str

    Examples
    --------
    Returned by :func:`phase_diagram`:

    >>> import numpy as np
    >>> from token_dynamics.clustering import phase_diagram
    >>> pd = phase_diagram(4, 2, [1.0], [0.0, 5.0], n_systems=8, dt=0.1, rng=0)
    >>> pd.fraction.shape
    (1, 2)
    """

    betas: FloatArray
    times: FloatArray
    fraction: FloatArray
    stderr: FloatArray
    n: int
    d: int
    n_systems: int
    threshold: float
    dynamics: str


def clustered_fraction(X: ArrayLike, *, threshold: float = 0.999) -> FloatArray:
    r"""Fraction of pairs :math:`i < j` with :math:`\langle x_i, x_j\rangle >` `threshold`.

    Parameters
    ----------
    X : array_like, shape (..., n, d)
        Tokens on the sphere; leading axes are independent systems.
    threshold : float
        In (-1, 1); the survey's figures use 0.999.

    Returns
    -------
    ndarray, shape (...)

    Raises
    ------
    ValueError
        If `X` has fewer than two tokens, a row off the unit sphere, or `threshold` is not in
        (-1, 1).

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, §6.3 (the phase diagrams).

    Examples
    --------
    >>> from token_dynamics.clustering import clustered_fraction
    >>> float(clustered_fraction([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    0.3333333333333333
    """
    X = as_sphere_tokens(X, "X", batched=True)
    if X.shape[-2] < 2:
        raise ValueError(f"`X` must have shape (..., n, d) with n >= 2; got {X.shape}.")
    threshold = check_real(threshold, "threshold")
    if not -1.0 < threshold < 1.0:
        raise ValueError(f"`threshold` must be in (-1, 1); got {threshold!r}.")
    n = X.shape[-2]
    G = X @ np.swapaxes(X, -1, -2)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    return np.asarray((G[..., upper] > threshold).mean(axis=-1), dtype=np.float64)


def _velocity(X: FloatArray, beta: float, dynamics: str) -> FloatArray:
    S = beta * (X @ np.swapaxes(X, -1, -2))
    if dynamics == "SA":
        M = softmax_weights(S, axis=-1) @ X
    else:
        M = np.exp(S) @ X / X.shape[-2]
    return M - np.sum(M * X, axis=-1, keepdims=True) * X


def _step(X: FloatArray, h: float, beta: float, dynamics: str) -> FloatArray:
    k1 = _velocity(X, beta, dynamics)
    k2 = _velocity(X + 0.5 * h * k1, beta, dynamics)
    k3 = _velocity(X + 0.5 * h * k2, beta, dynamics)
    k4 = _velocity(X + h * k3, beta, dynamics)
    X = X + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def phase_diagram(
    n: int,
    d: int,
    betas: ArrayLike,
    times: ArrayLike,
    *,
    n_systems: int,
    dt: float,
    threshold: float = 0.999,
    dynamics: str = "SA",
    rng: SeedLike = None,
) -> PhaseDiagram:
    r"""The probability that two tokens have clustered, on a grid of times and temperatures.

    For each :math:`\beta`, `n_systems` independent systems of `n` tokens drawn uniformly on
    :math:`\mathbb S^{d-1}` follow self-attention with :math:`Q = K = V = I` (softmax, "SA", or
    unnormalised, "USA"), integrated by RK4 with step `dt` on the tangent field and
    renormalised after each step (the tangent field keeps the sphere; the renormalisation only
    removes the :math:`O(dt^5)` drift of a step). The same initial tokens serve every
    :math:`\beta`. The result is the survey's phase diagram: the mean fraction of clustered
    pairs, with its standard error over the systems.

    Parameters
    ----------
    n : int
        Tokens per system, >= 2.
    d : int
        Dimension, >= 2.
    betas : array_like, shape (B,)
        Inverse temperatures, >= 0.
    times : array_like, shape (T,)
        Output times, increasing from 0; each interval is cut into steps of at most `dt`.
    n_systems : int
        Independent systems per temperature.
    dt : float
        Step of RK4 (no default: the step decides the accuracy; 0.1 is the authors' choice).
    threshold : float
        A pair is clustered when its inner product exceeds this.
    dynamics : {"SA", "USA"}
    rng : Generator, int or None

    Returns
    -------
    PhaseDiagram

    Raises
    ------
    ValueError
        If an argument is out of range, or `dt` asks for more steps than `integrate` allows
        (``token_dynamics.integrators.MAX_STEPS``, 10^7).
    FloatingPointError
        If the USA weights overflow (large `betas`).

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, §6.3, and the authors' code for its figures (n = 32,
    d = 2, beta in [0.1, 9], step 0.1, threshold 0.999).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.clustering import phase_diagram
    >>> pd = phase_diagram(8, 2, [0.5, 4.0], [0.0, 20.0], n_systems=16, dt=0.1, rng=1)
    >>> bool(pd.fraction[0, -1] >= pd.fraction[1, -1])  # hotter clusters sooner
    True
    """
    n = check_int(n, "n", minimum=2)
    d = check_int(d, "d", minimum=2)
    n_systems = check_int(n_systems, "n_systems")
    dt = check_positive(dt, "dt")
    betas = as_real_array(betas, "betas").ravel()
    if betas.size == 0 or np.any(betas < 0):
        raise ValueError("`betas` must be a nonempty array of nonnegative numbers.")
    times = as_times(times, nonnegative=True)
    if times[0] != 0.0:
        raise ValueError(f"`times` must start at 0; got times[0] = {times[0]:g}.")
    if dynamics not in DYNAMICS:
        raise ValueError(f"`dynamics` must be one of {DYNAMICS}; got {dynamics!r}.")
    threshold = check_real(threshold, "threshold")
    if not -1.0 < threshold < 1.0:
        raise ValueError(f"`threshold` must be in (-1, 1); got {threshold!r}.")
    substeps = _step_counts(times, dt)
    G = as_rng(rng).standard_normal((n_systems, n, d))
    X0 = G / np.linalg.norm(G, axis=-1, keepdims=True)
    fraction = np.empty((betas.size, times.size))
    stderr = np.empty_like(fraction)
    for b, beta in enumerate(betas):
        X = X0
        with float_guard("the attention weights", "lower `betas` or use dynamics='SA'"):
            for k in range(times.size):
                if k:
                    steps = substeps[k - 1]
                    h = float(times[k] - times[k - 1]) / steps
                    for _ in range(steps):
                        X = _step(X, h, float(beta), dynamics)
                f = clustered_fraction(X, threshold=threshold)
                fraction[b, k] = f.mean()
                stderr[b, k] = f.std(ddof=1) / np.sqrt(n_systems) if n_systems > 1 else np.nan
    return PhaseDiagram(
        betas, times, fraction, stderr, n, d, n_systems, float(threshold), str(dynamics)
    )
