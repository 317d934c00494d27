"""Particle-side estimate of the moments: sample a Gaussian, move the tokens, read the moments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._linalg import psd_sqrt
from .._typing import ArrayLike, FloatArray, SeedLike
from .._validation import as_covariance, as_rng, as_times, as_vector, check_int
from ..attention import AttentionField
from ._path import GaussianPath

__all__ = ["JACKKNIFE_GROUPS", "ParticleMoments", "moment_matched_cloud", "particle_moments"]

#: Groups of initial tokens of the jackknife behind :func:`particle_moments`' standard errors:
#: one more run of the particles per group. The tokens interact, so the moments at time t are
#: a function of the whole initial sample, and the spread of the tokens at time t (the i.i.d.
#: formula std / sqrt(n)) is not their error: measured over 200 seeds (n = 200, softmax,
#: a = -1/2, v = 1, t = 2), +-2 such errors held the exact mean 22 % of the time. Deleting a
#: group and running again follows each group's influence through the interaction; 10 groups
#: give an error with 9 degrees of freedom (+-2 of it cover about 92 % of a Gaussian error,
#: +-3 about 98.5 %) for eleven runs.
JACKKNIFE_GROUPS = 10


@dataclass(frozen=True, kw_only=True)
class ParticleMoments(GaussianPath):
    """Empirical moments of a token cloud along a particle run, with Monte-Carlo errors.

    A :class:`GaussianPath` (so it compares field by field with the moment ODE's solution)
    with the standard errors of the estimate added.

    Attributes
    ----------
    times : (T,) array.
    means : (T, d) empirical means.
    covariances : (T, d, d) empirical covariances (normalised by ``n``: the covariance of the
        empirical measure).
    status, message, blowup_time : as for :class:`GaussianPath` (``"completed"`` and ``None``:
        the particle run raises ``FloatingPointError`` instead of returning a failed path).
    mean_stderr : (T, d) standard errors of the means against the mean-field moments: the
        grouped jackknife over the initial tokens (:data:`JACKKNIFE_GROUPS` runs, each
        without one group), which counts the initial tokens as the independent units.
    cov_stderr : (T, d, d) standard errors of the covariance entries, the same jackknife.
    n : int, number of tokens.

    Examples
    --------
    Returned by :func:`particle_moments`. Under softmax attention with :math:`v = 1`,
    :math:`a = -1/2` the variance is :math:`s_0/(1 + t)` (:func:`softmax_gaussian_1d`); the
    estimate from 400 tokens lies within three standard errors of it:

    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.gaussian import particle_moments, softmax_gaussian_1d
    >>> times = [0.0, 0.5]
    >>> pm = particle_moments(Softmax([[-0.5]], [[1.0]]), [0.0], [[1.0]], times, n=400, rng=0)
    >>> exact = softmax_gaussian_1d(-0.5, 1.0, 0.0, 1.0, times).covariances[-1, 0, 0]
    >>> bool(abs(pm.covariances[-1, 0, 0] - exact) < 3 * pm.cov_stderr[-1, 0, 0])
    True
    >>> pm.means.shape, pm.cov_stderr.shape
    ((2, 1), (2, 1, 1))
    """

    mean_stderr: FloatArray
    cov_stderr: FloatArray
    n: int


@float_guard("the moment-matched cloud", "rescale `mean` or `cov`")
def moment_matched_cloud(
    n: int, mean: ArrayLike, cov: ArrayLike, *, rng: SeedLike = None
) -> FloatArray:
    r"""Sample ``n`` Gaussian tokens, then map them affinely so that their empirical mean and
    covariance (normalised by ``n``) equal ``mean`` and ``cov`` exactly.

    Matching removes the O(n^-1/2) error of the first two moments at ``t = 0``; what remains
    is the sample's non-Gaussianity, also O(n^-1/2). With :math:`\bar Z`, :math:`W` the
    sample's mean and covariance and :math:`z_i` the draws, the tokens are

    .. math:: x_i = m + \Sigma^{1/2}\, W^{-1/2}(z_i - \bar Z).

    Parameters
    ----------
    n : int
        Number of tokens, at least ``d + 1``: a centred cloud of ``n`` points spans at most
        ``n - 1`` directions, so it can be whitened only when ``n >= d + 1``.
    mean : array_like, shape (d,)
        The mean :math:`m` the cloud must have.
    cov : array_like, shape (d, d)
        The covariance :math:`\Sigma` the cloud must have, symmetric positive semi-definite.
    rng : Generator, int or None, keyword-only
        Source of the Gaussian draws.

    Returns
    -------
    ndarray, shape (n, d)
        The tokens.

    Raises
    ------
    ValueError
        If `n` is below ``d + 1`` or `cov` is not a ``(d, d)`` covariance.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gaussian import moment_matched_cloud
    >>> X = moment_matched_cloud(50, [1.0, 0.0], [[2.0, 0.5], [0.5, 1.0]], rng=0)
    >>> np.round(X.mean(axis=0), 12), np.round(np.cov(X.T, bias=True), 12)[0, 1]
    (array([1., 0.]), np.float64(0.5))
    """
    n = check_int(n, "n", minimum=2)
    m = as_vector(mean, "mean")
    S = as_covariance(cov, "cov", d=m.shape[0])
    if n <= m.shape[0]:
        raise ValueError(
            f"`n` = {n} tokens cannot match a covariance in d = {m.shape[0]} dimensions: a centred "
            f"cloud of n points spans at most n - 1 directions. Pass n >= {m.shape[0] + 1}."
        )
    return _matched(as_rng(rng).standard_normal((n, m.shape[0])), m, S)


def _matched(Z: FloatArray, m: FloatArray, S: FloatArray) -> FloatArray:
    """The draws ``Z`` (n, d) mapped affinely onto the mean ``m`` and covariance ``S``."""
    Z = Z - Z.mean(axis=0)
    W = psd_sqrt(Z.T @ Z / Z.shape[0])
    Z = Z @ np.linalg.inv(W)  # white: Z^T Z / n = I (W is invertible a.s. once n > d)
    return m + Z @ psd_sqrt(S)


@float_guard("the particle moments", "rescale `mean0`, `cov0`, `times` or `dt`")
def particle_moments(
    field: AttentionField,
    mean0: ArrayLike,
    cov0: ArrayLike,
    times: ArrayLike,
    n: int,
    *,
    rng: SeedLike = None,
    method: str = "rk4",
    dt: float | None = None,
    moment_match: bool = True,
) -> ParticleMoments:
    r"""Run the particle system from a Gaussian sample and return its empirical moments.

    .. math::

        \hat\alpha(t) = \frac1n\sum_i x_i(t),

        \hat\Sigma(t) = \frac1n\sum_i \big(x_i(t) - \hat\alpha(t)\big)
        \big(x_i(t) - \hat\alpha(t)\big)^\top,

    each with its Monte-Carlo standard error, of order :math:`n^{-1/2}`: the grouped
    jackknife over the initial tokens. The run is repeated without each of
    :data:`JACKKNIFE_GROUPS` groups of ``G`` equal parts of the initial sample (moment matched
    again when `moment_match`), and

    .. math:: \mathrm{SE} = \Big(\frac{G-1}{G}\sum_{g=1}^G
              (\hat\theta_{(g)} - \bar\theta)^2\Big)^{1/2},

    :math:`\hat\theta_{(g)}` the moments of the run without group ``g``. The tokens interact,
    so the sampling error of the initial cloud propagates through the dynamics: the spread of
    the tokens at time ``t`` does not measure it. Near a blow-up of the moment ODE the
    particles' moments also carry a bias of order :math:`1/n` with a growing constant, which
    no standard error states.

    Parameters
    ----------
    field : AttentionField or callable
        The velocity field, e.g. ``attention.Softmax``; any callable ``f(t, X) -> (n, d)``.
    mean0 : array_like, shape (d,)
        Mean of the initial Gaussian.
    cov0 : array_like, shape (d, d)
        Covariance of the initial Gaussian, symmetric positive semi-definite.
    times : array_like, shape (T,)
        Increasing output times, ``times[0]`` the initial time.
    n : int
        Number of tokens, at least 2 (with `moment_match`, enough that a cloud without one
        jackknife group, matched again, holds ``d + 1``: ``d + 2`` up to ``d = 8``, 113 at
        ``d = 100``). The run is repeated ``min(n,``
        :data:`JACKKNIFE_GROUPS` ``)`` times for the standard errors.
    rng : Generator, int or None, keyword-only
        Source of the initial sample.
    method, dt : keyword-only
        Passed to :func:`token_dynamics.integrators.integrate`.
    moment_match : bool, keyword-only
        Sample with :func:`moment_matched_cloud` (default) or plain
        :func:`token_dynamics.sampling.gaussian_cloud`.

    Returns
    -------
    ParticleMoments

    Raises
    ------
    ValueError
        If `n` is too small for the jackknife with `moment_match` (see `n`).
    FloatingPointError
        From the integrator, if the tokens overflow (the Gaussian law blew up before the
        last time).

    References
    ----------
    Castin et al. (2025), arXiv:2501.18322 (the Gaussian ODE this estimates).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gaussian import particle_moments
    >>> class Linear1D:  # any callable f(t, X) works; here Gamma(x) = -E[y^2] x
    ...     def __call__(self, t, X):
    ...         return -np.mean(X**2) * X
    >>> pm = particle_moments(Linear1D(), [0.0], [[1.0]], [0.0, 0.5], n=200, rng=0)
    >>> float(np.round(pm.covariances[-1, 0, 0], 3))  # s' = -2 s^2, s(1/2) = 1/2
    0.5
    """
    from .. import diagnostics, integrators, sampling

    n = check_int(n, "n", minimum=2)
    m0 = as_vector(mean0, "mean0")
    S0 = as_covariance(cov0, "cov0", d=m0.shape[0])
    t = as_times(times)
    groups = np.array_split(np.arange(n), min(n, JACKKNIFE_GROUPS))
    if moment_match and n - groups[0].size <= m0.shape[0]:
        raise ValueError(
            f"`n` = {n} tokens leave {n - groups[0].size} without a jackknife group, too few to "
            f"match a covariance in d = {m0.shape[0]} dimensions; pass "
            f"n >= {_fewest_tokens(m0.shape[0])} or moment_match=False."
        )
    gen = as_rng(rng)
    if moment_match:  # the draws of moment_matched_cloud, kept to match each group's complement
        Z = gen.standard_normal((n, m0.shape[0]))
        X0 = _matched(Z, m0, S0)
    else:
        X0 = Z = sampling.gaussian_cloud(n, m0, S0, rng=gen)

    def moments(X0: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        traj = integrators.integrate(field, X0, t, method=method, dt=dt)
        means = np.stack([diagnostics.empirical_mean(X) for X in traj.states])
        covs = np.stack([diagnostics.empirical_covariance(X) for X in traj.states])
        return traj.times, means, covs

    times_out, means, covs = moments(X0)
    rep_means, rep_covs = [], []
    for g in groups:
        keep = np.ones(n, dtype=bool)
        keep[g] = False
        _, m_g, c_g = moments(_matched(Z[keep], m0, S0) if moment_match else Z[keep])
        rep_means.append(m_g)
        rep_covs.append(c_g)
    return ParticleMoments(
        times=times_out.copy(),
        means=means,
        covariances=covs,
        mean_stderr=_jackknife_stderr(np.stack(rep_means)),
        cov_stderr=_jackknife_stderr(np.stack(rep_covs)),
        n=n,
    )


def _fewest_tokens(d: int) -> int:
    """The fewest tokens whose cloud without its largest jackknife group still holds ``d + 1``
    (a covariance in ``d`` dimensions to match): ``d + 2`` up to ``d = 8``, 113 at 100."""
    n = d + 2
    while n - -(-n // min(n, JACKKNIFE_GROUPS)) <= d:  # minus the largest group, ceil(n / G)
        n += 1
    return n


def _jackknife_stderr(replicates: FloatArray) -> FloatArray:
    """Grouped jackknife standard error from the ``G`` delete-a-group replicates (axis 0)."""
    G = replicates.shape[0]
    dev = replicates - replicates.mean(axis=0)
    return np.sqrt((G - 1) / G * np.sum(dev * dev, axis=0))
