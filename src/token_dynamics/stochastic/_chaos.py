r"""Proposition 1.2 of Agazzi et al. (2026): propagation of chaos under a common noise, and its
rate (private module)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import wasserstein
from .._typing import ArrayLike, SeedLike
from .._validation import (
    as_real_array,
    as_rng,
    check_int,
    check_positive,
)
from ..sampling import uniform_sphere
from ._deep_limit import _check_model, _joint_field
from ._estimates import ConvergenceStudy, MCEstimate, _estimate, _study
from ._model import StochasticTransformer, _normalise, _progress
from ._sde import _project, _sde_drift

__all__ = ["ChaosStudy", "chaos_rate", "propagation_of_chaos"]


@dataclass(frozen=True)
class ChaosStudy(ConvergenceStudy):
    r"""The propagation-of-chaos errors against ``N``, with their value at time 0.

    Attributes
    ----------
    values, mean, stderr, slope
        As in :class:`ConvergenceStudy`: the sizes ``N`` and
        :math:`\mathbb E\max_tW_2^2(\mu^N_t,\mu^{N_{\rm ref}}_t)`.
    initial : MCEstimate
        :math:`\mathbb E W_2^2(\mu^N_0,\mu^{N_{\rm ref}}_0)`, the sampling error of the i.i.d.
        initial tokens, per ``N``.
    ratio : MCEstimate
        The mean over paths of :math:`\max_tW_2^2(\mu^N_t,\mu^{N_{\rm ref}}_t) /
        W_2^2(\mu^N_0,\mu^{N_{\rm ref}}_0)` (at least 1), per ``N``: what the dynamics adds to
        the initial error. The stability estimate behind Proposition 1.2 bounds it by a constant
        independent of ``N``.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import ChaosStudy, MCEstimate
    >>> one = MCEstimate(np.ones(2), np.zeros(2), 2)
    >>> s = ChaosStudy(np.array([4.0, 8.0]), np.ones(2), np.zeros(2), 0.0, one, one)
    >>> s.ratio.mean.tolist()
    [1.0, 1.0]
    """

    initial: MCEstimate
    ratio: MCEstimate


def chaos_rate(N: ArrayLike, d: int) -> np.ndarray:
    r"""The rate :math:`r_d(N)` of Proposition 1.2 (``d`` the ambient dimension).

    .. math:: r_d(N) = N^{-1/2}\ (d < 4),\qquad N^{-1/2}\log(1 + N)\ (d = 4),\qquad
              N^{-2/d}\ (d > 4).

    Parameters
    ----------
    N : array_like
        Token numbers, at least 1.
    d : int
        Ambient dimension, at least 2.

    Returns
    -------
    ndarray
        Same shape as `N`.

    Raises
    ------

    ValueError
        If `d` < 2 or an entry of `N` is below 1.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Proposition 1.2 and Proposition 3.1.

    Examples
    --------
    >>> from token_dynamics.stochastic import chaos_rate
    >>> float(chaos_rate(100, 3)), float(chaos_rate(256, 8))
    (0.1, 0.25)
    """
    d = check_int(d, "d", minimum=2)
    N = as_real_array(N, "N")
    if np.any(N < 1):
        raise ValueError("`N` must hold token numbers, at least 1.")
    if d < 4:
        return N**-0.5
    if d == 4:
        return N**-0.5 * np.log1p(N)
    return N ** (-2.0 / d)


def propagation_of_chaos(
    model: StochasticTransformer,
    *,
    d: int,
    sizes: ArrayLike,
    N_ref: int,
    T: float,
    L: int,
    n_paths: int = 10,
    n_times: int = 4,
    rng: SeedLike = None,
    progress: bool = False,
) -> ChaosStudy:
    r"""Proposition 1.2's distance between ``N`` tokens and the SPDE, on the same noise.

    For each path, systems of ``N`` tokens (each ``N`` in `sizes`) and one of `N_ref` tokens
    (the proxy for the SPDE solution :math:`\mu`), all i.i.d. uniform on
    :math:`\mathbb S^{d-1}` at time 0, follow the limit SDE (``L`` projected Euler steps)
    driven by the **same** Brownian field: each step samples one Gaussian vector at the tokens
    of every system jointly. Attention acts inside each system. Returned, over `n_times`
    equally spaced times in ``(0, T]`` and ``t = 0``,

    .. math:: \mathbb E\max_{t}W_2^2\big(\mu^N_t,\mu^{N_{\rm ref}}_t\big),

    the proxy of :math:`\mathbb E\sup_{t\le T}W_2^2(\mu^N_t,\mu_t)`, which Proposition 1.2 bounds
    by :math:`c_T\,r_d(N)` (:func:`chaos_rate`) with :math:`c_T` independent of ``N``; and its
    value at ``t = 0``, the sampling error of the initial tokens, with the ratio of the two.

    Parameters
    ----------
    model : StochasticTransformer
    d : int
        Ambient dimension.
    sizes : sequence of int
        Token numbers ``N``, each below `N_ref`.
    N_ref : int
    T : float
    L : int
        Steps; a multiple of `n_times`.
    n_paths : int
    n_times : int
    rng : Generator, int or None
    progress : bool

    Returns
    -------
    ChaosStudy
        ``values`` are the sizes ``N``.

    Raises
    ------

    TypeError
        If `model` is not a :class:`StochasticTransformer`.
    ValueError
        If a size is not below `N_ref`, `L` is not a multiple of `n_times`, or an integer
        argument is out of range.
    FloatingPointError
        If a token becomes non-finite or zero (raise `L`).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Proposition 1.2 and Proposition 3.1.

    Examples
    --------
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer, propagation_of_chaos
    >>> study = propagation_of_chaos(StochasticTransformer(MLPNoise("relu", None)), d=3,
    ...                              sizes=[4, 8], N_ref=32, T=0.5, L=4, n_paths=3, rng=0)
    >>> study.values.tolist()
    [4.0, 8.0]
    """
    _check_model(model)
    d = check_int(d, "d", minimum=2)
    N_ref = check_int(N_ref, "N_ref", minimum=2)
    sizes = [check_int(n, "sizes", minimum=1) for n in np.atleast_1d(sizes).tolist()]
    if max(sizes) >= N_ref:
        raise ValueError(f"every entry of `sizes` must be below `N_ref` = {N_ref}.")
    L = check_int(L, "L", minimum=1)
    n_times = check_int(n_times, "n_times", minimum=1)
    if L % n_times:
        raise ValueError(f"`L` must be a multiple of `n_times` = {n_times}; got {L}.")
    n_paths = check_int(n_paths, "n_paths", minimum=2)
    T = check_positive(T, "T")
    rng = as_rng(rng)
    counts = [*sizes, N_ref]
    X = [uniform_sphere(n_paths * n, d, rng=rng).reshape(n_paths, n, d) for n in counts]
    A, V = model.matrices(d)
    off = model.attention_off(d)
    kappa1 = float(model.noise.kappa(1.0, d=d))
    h = T / L

    def distances():
        return np.array(
            [
                [wasserstein.wasserstein2(x[p], X[-1][p]) ** 2 for x in X[:-1]]
                for p in range(n_paths)
            ]
        )

    err0 = distances()
    err = err0
    for k in _progress(range(1, L + 1), progress, "steps"):
        dW = _joint_field(model.noise, X, rng)
        X = [
            _normalise(
                x + h * _sde_drift(x, A, V, off, kappa1) + np.sqrt(h) * _project(x, w), f"step {k}"
            )
            for x, w in zip(X, dW, strict=True)
        ]
        if k % (L // n_times) == 0:
            err = np.maximum(err, distances())
    study = _study(sizes, err)
    return ChaosStudy(
        study.values,
        study.mean,
        study.stderr,
        study.slope,
        _estimate(err0),
        _estimate(err / err0),
    )
