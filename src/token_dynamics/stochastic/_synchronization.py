r"""Synchronization by a common noise, measured: Monte-Carlo rates (private module).

:func:`energy_decay_rate`, :func:`separation_exponent` and
:func:`two_point_lyapunov_exponent` -- Monte-Carlo estimators of the decay rate of the mean
energy (which Theorem 1.4 of Agazzi et al. (2026) bounds by :math:`\varepsilon + \bar\lambda'`)
and of the top Lyapunov exponent of the noise (their Remark 1.5).
"""

from __future__ import annotations

import numpy as np

from .. import geometry
from .._guards import float_guard
from .._linalg import power_of_two_scale
from .._typing import ArrayLike, SeedLike
from .._validation import as_real_array, as_rng, as_vector, check_int, check_positive
from ._estimates import MCEstimate, mc_estimate
from ._model import StochasticTransformer
from ._sde import simulate_sde

#: How far above the rounding of the log-separation (eps / separation) the diffusive change
#: sqrt(kappa(1) T) of two_point_lyapunov_exponent must be for the exponent to mean anything.
MIN_RESOLUTION = 1e3
#: Smallest separation of two tokens x, y whose log-separation is measured, in roundings of the
#: tokens, eps |max(|x|, |y|)| (each coordinate carries a rounding relative to itself, so the
#: floor scales with the tokens): below it the separation is the rounding (pairs of unit ReLU
#: tokens, d = 64, contracted to about 1e-18 by T = 70 gave -0.41 for lambda_1 = -0.48); at 10
#: roundings one path's log-separation is still known to about 0.1, a negligible part of the
#: mean over the paths.
MIN_FINAL_ROUNDINGS = 10
#: Smallest separation of two_point_lyapunov_exponent. The field's increment between the two
#: tokens is drawn from its exact law at any separation (the tree sampler of ``_mlp``); what
#: remains is the rounding of the tokens themselves, about eps per step on each, a relative
#: 1e-8 of the separation per step here.
MIN_SEPARATION = 1e-8

__all__ = ["energy_decay_rate", "separation_exponent", "two_point_lyapunov_exponent"]


def energy_decay_rate(times: ArrayLike, energies: ArrayLike) -> MCEstimate:
    r"""Exponential rate of the mean energy :math:`\mathbb E\,\mathcal S_\beta(\mu_t)` over paths.

    The slope of the least-squares line through :math:`(t_k, \log \bar E_k)`, where
    :math:`\bar E_k` is the mean over paths at time :math:`t_k`. Its standard error is the delta
    method with the full covariance across times: the slope is :math:`\sum_k c_k\log\bar E_k`, so
    its variance is :math:`\sum_{k,l} c_k c_l\,\mathrm{Cov}(E_k, E_l)/(P\,\bar E_k\bar E_l)`.

    Parameters
    ----------
    times : array_like, shape (T,)
        At least two distinct times.
    energies : array_like, shape (paths, T)
        Energy of each path at each time, positive means.

    Returns
    -------
    MCEstimate
        ``mean`` is the rate, ``stderr`` its standard error over the paths, ``samples`` the
        number of paths.

    .. math:: \hat r = \sum_k c_k\log\bar E_k,\qquad
              c_k = \frac{t_k - \bar t}{\sum_l (t_l - \bar t)^2}.

    Times and energies are divided by powers of two before the squares (exactly): the rate and
    its error are finite wherever they are representable.

    The delta method takes the mean energies as nearly Gaussian. For energies whose logarithm
    spreads over the paths by about 1 it holds (log-normal energies, 20 paths: standard error
    0.12 against a spread of 0.14 over 3000 repetitions, 2-SE intervals cover the rate 89 % of
    the time); by about 2 it does not: the rate is biased and the standard error too small
    (20 paths: 0.26 against 0.42, 67 % coverage; 100 paths: 0.18 against 0.26). Check the spread
    of ``log energies`` across the paths, and take more paths or an earlier final time where it
    is large.

    Raises
    ------
    ValueError
        If `times` does not hold two distinct times, `energies` is not finite of shape
        ``(paths, T)`` with two paths, or a mean is not positive.
    FloatingPointError
        If the rate exceeds the float64 range (times of order 1e-300).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Theorem 1.4 (the bound this rate is compared with).

    Examples
    --------
    >>> from token_dynamics.stochastic import energy_decay_rate
    >>> import numpy as np
    >>> t = np.linspace(0, 1, 5)
    >>> E = np.exp(-2 * t) * np.array([[1.0], [1.2], [0.8]])
    >>> round(energy_decay_rate(t, E).mean, 12)
    -2.0
    """
    t = as_real_array(times, "times")
    E = as_real_array(energies, "energies")
    if t.ndim != 1 or t.size < 2 or np.ptp(t) == 0:
        raise ValueError("`times` must be a 1-D array of at least two distinct times.")
    if E.ndim != 2 or E.shape[1] != t.size or E.shape[0] < 2:
        raise ValueError(
            f"`energies` must have shape (paths, {t.size}) with at least two paths; "
            f"got shape {E.shape}."
        )
    # times and energies divided by powers of two (exact): no square overflows or underflows;
    # log mean_k = log(scaled mean_k) + log(factor_k), and the rate scales as 1 / (the factor of
    # the times); the standard error does not depend on the factors of the energies
    t_scale = float(power_of_two_scale(t))
    ts = t / t_scale
    e_scale = power_of_two_scale(E, axis=0)[0]  # one factor per time: cov / (mean mean) keeps
    E = E / e_scale
    mean = E.mean(axis=0)
    if np.any(mean <= 0):
        raise ValueError("`energies` must have positive means over the paths.")
    c = (ts - ts.mean()) / np.sum((ts - ts.mean()) ** 2)
    cov = np.cov(E, rowvar=False) / E.shape[0]
    g = c / mean
    fix = "measure the rate in other units of time (rescale `times`)"
    with float_guard("the energy decay rate", fix):
        rate = float(c @ (np.log(mean) + np.log(e_scale))) / t_scale
        stderr = float(np.sqrt(max(g @ cov @ g, 0.0))) / t_scale
    return MCEstimate(rate, stderr, E.shape[0])


def _within_rounding(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Whether ``|x - y| <= MIN_FINAL_ROUNDINGS eps |max(|x|, |y|)|`` for the tokens of shape
    ``(..., d)``: the gap is then the tokens' rounding. Both sides are divided by one power of
    two (exact), so the test reads the same at every scale of the tokens and never overflows."""
    size = np.maximum(np.abs(X), np.abs(Y))
    c = power_of_two_scale(size, axis=-1)
    gap = np.linalg.norm((X - Y) / c, axis=-1)
    eps = np.finfo(np.float64).eps
    return gap <= MIN_FINAL_ROUNDINGS * eps * np.linalg.norm(size / c, axis=-1)


def separation_exponent(times: ArrayLike, states: ArrayLike) -> MCEstimate:
    r"""Top Lyapunov exponent from two nearby tokens sharing the noise.

    .. math:: \hat\lambda_1 = \frac1{t_{\rm last} - t_{\rm first}}\,\mathbb E\log
              \frac{|X_{t_{\rm last}} - Y_{t_{\rm last}}|}{|X_{t_{\rm first}} - Y_{t_{\rm first}}|},

    the mean over paths; the distances are computed from differences rescaled by powers of two
    (any scale of `states`).

    Parameters
    ----------
    times : array_like, shape (T,)
        Times of the saved states; the rate is measured between the first and the last.
    states : array_like, shape (paths, T, 2, d)
        Two tokens per path, started close (their separation must stay small for the exponent
        of the linearised flow to be measured).

    Returns
    -------
    MCEstimate
        ``mean`` is the rate, ``stderr`` its standard error over the paths, ``samples`` the
        number of paths.

    Raises
    ------
    ValueError
        If `times` is not 1-D increasing from first to last, or `states` is not finite of shape
        ``(paths, T, 2, d)`` with two paths.
    FloatingPointError
        If the two tokens are within ``MIN_FINAL_ROUNDINGS = 10`` roundings of their size,
        :math:`10\,\varepsilon\,|\max(|x|, |y|)|`, at the first or the last time on some path
        (coincident tokens included): their separation would be the rounding.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Remark 1.5 and Proposition 1.5.

    Examples
    --------
    >>> from token_dynamics.stochastic import separation_exponent
    >>> import numpy as np
    >>> x = np.array([1.0, 0.0]); y = np.array([np.cos(1e-6), np.sin(1e-6)])
    >>> z = np.array([np.cos(1e-7), np.sin(1e-7)])
    >>> S = np.array([[[x, y], [x, z]], [[x, y], [x, z]]])        # 2 paths, 2 times
    >>> round(float(separation_exponent([0.0, 1.0], S).mean), 6)
    -2.302585
    """
    t = as_vector(times, "times")
    S = as_real_array(states, "states")
    if S.ndim != 4 or S.shape[2] != 2 or S.shape[1] != t.size or S.shape[0] < 2:
        raise ValueError(
            "`states` must have shape (paths, T, 2, d) with two tokens and at least two paths; "
            f"got shape {S.shape}."
        )
    if t.size < 2 or t[-1] <= t[0]:
        raise ValueError("`times` must increase from its first to its last entry.")
    X, Y = S[:, [0, -1], 0], S[:, [0, -1], 1]
    if np.any(_within_rounding(X, Y)):
        raise FloatingPointError(
            f"the two tokens are within {MIN_FINAL_ROUNDINGS:g} roundings of their size "
            "(eps |x|) at the first or last time on some path, where the rounding would set the "
            "exponent; start them further apart (a relative 1e-6), or end `times` before they "
            "meet."
        )
    # log |x - y| from the difference divided by a power of two (exact): no overflow at any scale
    diff = X - Y
    scale = power_of_two_scale(diff, axis=-1)[..., 0]
    log_gap = np.log(scale) + np.log(np.linalg.norm(diff / scale[..., None], axis=-1))
    with float_guard("the separation exponent", "use a longer horizon (`times`)"):
        g = (log_gap[:, 1] - log_gap[:, 0]) / (t[-1] - t[0])
    return mc_estimate(g)


def two_point_lyapunov_exponent(
    model: StochasticTransformer,
    d: int,
    *,
    T: float,
    L: int,
    n_paths: int = 100,
    separation: float = 1e-3,
    rng: SeedLike = None,
) -> MCEstimate:
    r"""Top Lyapunov exponent of the limit SDE, from two nearby tokens sharing the noise.

    Each path starts from a uniform token :math:`x` and
    :math:`y = \mathrm{LN}(x + \text{separation}\cdot v)`, :math:`v` a uniform unit tangent
    vector at :math:`x`; the
    two tokens follow :func:`token_dynamics.stochastic.simulate_sde` and the exponent is
    :func:`separation_exponent` over ``[0, T]``. For the noise alone it estimates (Remark 1.5)

    .. math:: \lambda_1 = \frac{d-3}2\kappa'(1) - \frac{d-1}2\kappa(1).

    Parameters
    ----------
    model : StochasticTransformer
        Its noise (activation, biases) and attention; ``V = 0`` for the noise alone.
    d : int
    T : float
        Time horizon.
    L : int
        Euler-Maruyama steps.
    n_paths : int
    separation : float
        Initial distance; small enough for the pair to stay in the linear regime (the
        exponent has a relative bias of the order of the separation squared), at least
        ``1e-8`` (the tokens' own rounding, about ``eps`` per step, stays a relative ``1e-8`` of
        it); ``1e-3`` by default. The noise's increment between the two tokens has its exact
        law at every separation, so the pair may contract far below its start.
    rng : Generator, int or None

    Returns
    -------
    MCEstimate
        ``mean`` is the rate, ``stderr`` its standard error over the paths, ``samples`` the
        number of paths.

    Raises
    ------

    TypeError
        If `model` is not a :class:`StochasticTransformer`.
    ValueError
        If `separation` is outside ``[1e-8, 1]``, `T` is too short for the separation
        to change above its rounding, or an integer argument is out of range.
    FloatingPointError
        If a token becomes non-finite or zero (raise `L`), or the pair ends closer than
        ``MIN_FINAL_ROUNDINGS * eps`` (about 2e-15) on some path: its separation would then be
        the tokens' rounding (shorten `T` or raise `separation`).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Remark 1.5 and Proposition 1.5.

    Examples
    --------
    >>> from token_dynamics.stochastic import StochasticTransformer, two_point_lyapunov_exponent
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise
    >>> model = StochasticTransformer(MLPNoise("relu", width=None), V=np.zeros((5, 5)))
    >>> est = two_point_lyapunov_exponent(model, 5, T=1.0, L=50, n_paths=8, rng=0)
    >>> est.samples
    8
    """
    from ..sampling import uniform_sphere

    d = check_int(d, "d", minimum=2)
    separation = check_positive(separation, "separation")
    if not MIN_SEPARATION <= separation <= 1.0:
        raise ValueError(
            f"`separation` must lie in [{MIN_SEPARATION:g}, 1]; got {separation:g}. Below, the "
            "rounding of the tokens is a sizeable part of their separation; above, the pair is not "
            "in the linear regime."
        )
    n_paths = check_int(n_paths, "n_paths", minimum=2)
    T = check_positive(T, "T")
    # the log-separation is known to eps / separation; the noise moves it by about
    # sqrt(kappa(1) T) over [0, T]: below MIN_RESOLUTION times the former, nothing is measured
    kappa1 = float(model.noise.kappa(1.0, d=d)) if isinstance(model, StochasticTransformer) else 1.0
    floor = MIN_RESOLUTION * np.finfo(np.float64).eps / separation
    if kappa1 * T < floor**2:
        raise ValueError(
            f"`T` = {T:g} is too short: the separation changes by about sqrt(kappa(1) T) = "
            f"{np.sqrt(kappa1 * T):.2g} in log, below the rounding of its measurement "
            f"({floor:.2g}); pass T >= {floor**2 / kappa1:.2g}."
        )
    rng = as_rng(rng)
    x = uniform_sphere(n_paths, d, rng=rng)
    v = geometry.project_tangent(x, rng.standard_normal((n_paths, d)))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    y = geometry.normalize(x + separation * v)
    res = simulate_sde(
        model, np.stack([x, y], axis=1), T=T, L=L, n_paths=n_paths, rng=rng, save_every=L
    )
    # the tokens are unit vectors rounded to eps: a pair contracted to a few eps apart keeps
    # only the rounding as its separation, and the exponent would measure that instead
    if np.any(_within_rounding(res.X[:, -1, 0], res.X[:, -1, 1])):
        final = float(np.min(np.linalg.norm(res.X[:, -1, 0] - res.X[:, -1, 1], axis=-1)))
        top = MIN_FINAL_ROUNDINGS * np.finfo(np.float64).eps
        raise FloatingPointError(
            f"the pair contracted to {final:.2g} apart on some path by `T` = {T:g}, within "
            f"{MIN_FINAL_ROUNDINGS:g} roundings of the unit tokens ({top:.2g}), where the "
            "rounding would set the exponent; shorten `T` (the separation shrinks like "
            "e^(lambda_1 T)) or raise `separation`."
        )
    return separation_exponent(res.times, res.X)
