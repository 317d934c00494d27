r"""How far a token cloud's moments are from a Gaussian's: the gap, and its :math:`n^{-1/2}`
decay with the number of tokens (the mean-field limit read on the first two moments)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import diagnostics, integrators
from .._linalg import power_of_two_scale
from .._typing import ArrayLike, FloatArray, SeedLike
from .._validation import (
    as_counts,
    as_covariance,
    as_rng,
    as_tokens,
    as_vector,
    check_instance,
    check_int,
    check_positive,
)
from ..attention import AttentionField
from ..diagnostics import PowerLawFit
from ._particles import moment_matched_cloud
from ._registry import moment_equations
from ._solve import solve_moments

__all__ = ["MomentGapStudy", "moment_gap", "moment_gap_study"]


def moment_gap(X: ArrayLike, mean: ArrayLike, cov: ArrayLike) -> float:
    r"""Largest entry-wise gap between the empirical moments of tokens and a Gaussian's.

    .. math::

        \max\Big(\max_k |\hat\alpha_k - \alpha_k|,\;
        \max_{k,l} |\hat\Sigma_{kl} - \Sigma_{kl}|\Big),

    with :math:`\hat\alpha`, :math:`\hat\Sigma` the mean and covariance of the empirical
    measure of ``X`` (normalised by ``n``).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens, one per row.
    mean : array_like, shape (d,)
        Mean of the Gaussian.
    cov : array_like, shape (d, d)
        Covariance of the Gaussian, symmetric positive semi-definite.

    Returns
    -------
    float
        The gap, zero exactly when both moments agree.

    Raises
    ------
    ValueError
        If the shapes disagree or `cov` is not a covariance.

    Examples
    --------
    A cloud drawn with its moments matched has gap zero to rounding; moving the Gaussian's
    mean by 0.1 makes the gap 0.1:

    >>> import numpy as np
    >>> from token_dynamics.gaussian import moment_gap, moment_matched_cloud
    >>> X = moment_matched_cloud(50, [0.0, 1.0], np.eye(2), rng=0)
    >>> moment_gap(X, [0.0, 1.0], np.eye(2)) < 1e-12
    True
    >>> round(moment_gap(X, [0.1, 1.0], np.eye(2)), 12)
    0.1
    """
    m = as_vector(mean, "mean")
    S = as_covariance(cov, "cov", d=m.shape[0])
    X = as_tokens(X, "X", d=m.shape[0])
    mean_gap = np.abs(diagnostics.empirical_mean(X) - m).max()
    cov_gap = np.abs(diagnostics.empirical_covariance(X) - S).max()
    return float(max(mean_gap, cov_gap))


@dataclass(frozen=True)
class MomentGapStudy:
    r"""The moment gap of particle runs against the moment ODE, as the number of tokens grows.

    Attributes
    ----------
    ns : (k,) int array
        Numbers of tokens.
    rms : (k,) array
        Root mean square, over the repeats, of :func:`moment_gap` at the final time.
    fit : PowerLawFit
        The log-log fit of ``rms`` against ``ns``; its ``slope`` is close to :math:`-1/2`.
    step_error : float or None
        With the default ``dt=None``, the largest estimated global error of the particle runs
        (step doubling: the largest norm of a token's error, in the tokens' units); ``None``
        for an explicit `dt`.

    Examples
    --------
    Returned by :func:`moment_gap_study`, whose example shows it.
    """

    ns: np.ndarray
    rms: FloatArray
    fit: PowerLawFit
    step_error: float | None = None


def moment_gap_study(
    field: AttentionField,
    mean: ArrayLike,
    cov: ArrayLike,
    T: float,
    ns: ArrayLike,
    *,
    repeats: int = 4,
    dt: float | None = None,
    rng: SeedLike = None,
) -> MomentGapStudy:
    r"""Moment gap between ``n`` tokens and the Gaussian moment ODE at time ``T``, for each ``n``.

    For each ``n`` of `ns`, `repeats` times: draw ``n`` tokens with the moments of
    :math:`\mathcal N(\alpha_0, \Sigma_0)` (:func:`moment_matched_cloud`), move them to time
    `T` with RK4 (:func:`token_dynamics.integrators.integrate`, step `dt`, or by default the
    step that meets RK4's default tolerance) and take their
    :func:`moment_gap` to the solution of the moment ODE (:func:`solve_moments`) at `T`. The
    root mean square over the repeats decays like the Monte-Carlo error,

    .. math::

        \Big(\tfrac1R \sum_{r=1}^R \mathrm{gap}_r(n)^2\Big)^{1/2} \approx C\,n^{-1/2},

    plus the step error :math:`O(dt^4)`, reported as ``step_error`` when the step is chosen.

    Parameters
    ----------
    field : AttentionField
        A field with a moment ODE (:func:`moment_equations`): softmax, l2, linear, Sinkhorn,
        multi-head.
    mean : array_like, shape (d,)
        Initial mean :math:`\alpha_0`.
    cov : array_like, shape (d, d)
        Initial covariance :math:`\Sigma_0`.
    T : float
        Final time, positive and before any blow-up of the moment ODE.
    ns : array_like of int, shape (k,)
        Numbers of tokens, each at least 2, at least two distinct values.
    repeats : int, keyword-only
        Independent clouds per ``n``.
    dt : float, optional, keyword-only
        RK4 step of the particle runs; by default chosen by step doubling to meet
        :data:`token_dynamics.integrators.DEFAULT_TOLERANCES` (the error reached is
        ``step_error``).
    rng : Generator, int or None, keyword-only
        Source of the clouds, drawn in the order of `ns`, then of the repeats.

    Returns
    -------
    MomentGapStudy

    Raises
    ------
    TypeError
        If `field` is not an attention field.
    ValueError
        If an argument is invalid, `field` has no moment ODE (sigmoid attention), or the
        moment ODE does not reach `T` (a blow-up).

    References
    ----------
    Castin et al. (2025), arXiv:2501.18322 (the Gaussian ODE the tokens follow as
    :math:`n\to\infty`).

    Examples
    --------
    >>> import numpy as np
    >>> import token_dynamics as td
    >>> from token_dynamics.gaussian import moment_gap_study
    >>> study = moment_gap_study(
    ...     td.Softmax(np.eye(2), -np.eye(2)), np.zeros(2), 0.5 * np.eye(2), 0.2,
    ...     [50, 200, 800], repeats=8, rng=0,
    ... )
    >>> study.rms.shape
    (3,)
    >>> bool(-0.8 < study.fit.slope < -0.2)  # n^(-1/2)
    True
    """

    check_instance(
        field,
        AttentionField,
        "field",
        "Build one with token_dynamics.Softmax(A, V) (or L2, Sinkhorn, Linear, MultiHead).",
    )
    try:
        equations = moment_equations(field)
    except ValueError as err:
        raise ValueError(f"`field` has no Gaussian moment ODE: {err}") from err
    m0 = as_vector(mean, "mean")
    S0 = as_covariance(cov, "cov", d=m0.shape[0])
    T = check_positive(T, "T")
    sizes = as_counts(ns, "ns", minimum=2)
    repeats = check_int(repeats, "repeats")
    dt = None if dt is None else check_positive(dt, "dt")
    gen = as_rng(rng)
    path = solve_moments(equations, m0, S0, [0.0, T])
    if path.status != "completed":
        raise ValueError(
            f"the moment ODE does not reach `T` = {T:g} ({path.message}); choose a smaller `T`."
        )
    rms = np.empty(sizes.size)
    errors = []
    for k, n in enumerate(sizes):
        gaps = []
        for _ in range(repeats):
            cloud = moment_matched_cloud(int(n), m0, S0, rng=gen)
            run = integrators.integrate(field, cloud, [0.0, T], dt=dt)
            gaps.append(moment_gap(run.final, path.means[-1], path.covariances[-1]))
            errors.append(run.error_estimate)
        # rescaled by a power of two (exact) so that the squares cannot overflow
        g = np.asarray(gaps)
        scale = power_of_two_scale(g)
        rms[k] = scale * np.sqrt(np.mean(np.square(g / scale)))
    fit = diagnostics.fit_power_law(sizes, rms)
    step_error = None if dt is not None else max(e for e in errors if e is not None)
    return MomentGapStudy(ns=sizes, rms=rms, fit=fit, step_error=step_error)
