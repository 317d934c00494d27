"""Mean-field experiments: particle systems against exact solutions and each other (private)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, SeedLike
from .._validation import (
    as_counts,
    as_covariance,
    as_matrix,
    as_rng,
    as_times,
    as_tokens,
    as_vector,
    as_weights,
    check_bool,
    check_int,
    check_positive,
)
from ..attention import AttentionField, Softmax
from ..diagnostics import PowerLawFit, fit_power_law
from ..gaussian import softmax_gaussian_1d, softmax_gaussian_centred
from ..integrators import integrate
from ..wasserstein import (
    conditional_w1,
    conditional_w2,
    w2_gaussian_1d,
    wasserstein1,
    wasserstein2,
)
from ._lipschitz import _check_field

__all__ = ["MeanFieldErrors", "StabilityRun", "mean_field_errors", "stability_ratios"]

#: Default size of the reference sample in d >= 2, as a multiple of the largest n:
#: the reference's own error is then that of the particle system times 20^(-1/2) in d = 2 and
#: 20^(-1/d) in d >= 3 (0.55 in d = 5): measured, within the scatter over seeds (docstring).
REFERENCE_FACTOR = 20


@dataclass(frozen=True)
class MeanFieldErrors:
    """Distances between the particle system and the exact mean-field solution.

    Attributes
    ----------
    ns : ndarray, shape (k,)
        Numbers of tokens.
    initial, final : ndarray, shape (n_seeds, k)
        :math:`W_2(\\mu^n_0, \\mu_0)` and :math:`W_2(\\mu^n(T), \\mu(T))` for each seed and n.
    fit : PowerLawFit
        Fit of the seed-mean of ``final`` against ``ns``.
    step_error : float or None
        With the default ``dt=None``, the largest estimated global error of the particle runs
        (step doubling: the largest norm of a token's error, in the tokens' units, whose
        tolerance is relative to their norms; see
        :func:`token_dynamics.integrators.integrate`); ``None`` for an explicit `dt`.

    Examples
    --------
    Returned by :func:`mean_field_errors`; ``ratio`` compares the error at time ``T`` with
    the sampling error at time 0, seed by seed averaged:

    >>> import numpy as np
    >>> from token_dynamics.meanfield import mean_field_errors
    >>> err = mean_field_errors([20, 80], cov0=[[0.4]], A=[[-0.6]], v=0.8, T=0.5,
    ...                         n_seeds=2, rng=0)
    >>> err.initial.shape, err.ratio.shape
    ((2, 2), (2,))
    >>> bool(np.allclose(err.ratio, err.final.mean(axis=0) / err.initial.mean(axis=0)))
    True
    """

    ns: np.ndarray
    initial: np.ndarray
    final: np.ndarray
    fit: PowerLawFit
    step_error: float | None = None

    @property
    def ratio(self) -> np.ndarray:
        """Seed-mean of ``final`` over seed-mean of ``initial``, shape (k,)."""
        return self.final.mean(axis=0) / self.initial.mean(axis=0)


def _flow(
    field: AttentionField,
    X0: np.ndarray,
    times: np.ndarray,
    dt: float | None,
    weights: ArrayLike | None = None,
) -> tuple[np.ndarray, float | None]:
    """RK4 states at `times`, and the run's estimated global error (``None`` for a given `dt`)."""
    rhs = field if weights is None else (lambda t, X: field.velocity(X, t, weights=weights))
    traj = integrate(rhs, X0, times, method="rk4", dt=dt)
    return traj.states, traj.error_estimate


def _largest(errors: list[float | None]) -> float | None:
    """The largest error estimate of some runs, ``None`` if they ran with a given step."""
    known = [e for e in errors if e is not None]
    return max(known) if known else None


@float_guard("the mean-field errors", "lower `T`, `v`, `beta` or the scale of `cov0` and `A`")
def mean_field_errors(
    ns: ArrayLike,
    *,
    cov0: ArrayLike,
    A: ArrayLike,
    v: float,
    T: float,
    mean0: ArrayLike | None = None,
    beta: float = 1.0,
    n_seeds: int = 4,
    n_ref: int | None = None,
    dt: float | None = None,
    rng: SeedLike = None,
) -> MeanFieldErrors:
    r"""Mean-field error :math:`W_2(\mu^n(T), \mu(T))` of softmax tokens against an exact solution.

    The tokens are ``n`` i.i.d. draws of :math:`\mu_0 = \mathcal N(m_0, \Sigma_0)`, moved by
    softmax attention with :math:`V = vI` (RK4, step `dt`). The exact solution stays Gaussian
    (:func:`~token_dynamics.gaussian.softmax_gaussian_1d`,
    :func:`~token_dynamics.gaussian.softmax_gaussian_centred`). In ``d = 1`` the distance
    to it is exact (:func:`~token_dynamics.wasserstein.w2_gaussian_1d`); in ``d >= 2`` the
    mean must be zero and the distance is taken to an independent sample of :math:`\mu(T)` of
    size `n_ref` (exact optimal transport), which adds the error of an empirical measure of
    that size: of order :math:`n_{\rm ref}^{-1/2}` up to logarithms in ``d = 2``, but only
    :math:`n_{\rm ref}^{-1/d}` in ``d >= 3``, the same rate as the particle system's own error
    in ``n``. The default ``n_ref = 20 max(ns)`` moved the errors by less than their scatter
    over seeds (against a reference of ``100 max(ns)``: -0.5 %, +1.8 % and +0.3 % in
    ``d = 2, 3, 5``).

    Parameters
    ----------
    ns : array_like of int, shape (k,)
        Numbers of tokens, at least two distinct values (the points of the fit).
    cov0 : array_like, shape (d, d)
    A : array_like, shape (d, d)
    v : float
    T : float
        Final time, before any blow-up.
    mean0 : array_like, shape (d,), optional
        Initial mean; zero by default (must be zero when ``d >= 2``).
    beta : float
    n_seeds : int
    n_ref : int, optional
        Reference sample size in ``d >= 2``; ``20 * max(ns)`` by default.
    dt : float, optional
        RK4 step; by default the step is chosen to meet RK4's default tolerance
        (:data:`token_dynamics.integrators.DEFAULT_TOLERANCES`) and the error reached is
        reported as ``step_error``.
    rng : Generator, int or None

    Returns
    -------
    MeanFieldErrors

    Raises
    ------
    ValueError
        If an integer argument is not positive, `ns` does not hold two distinct values, `cov0`
        is not a covariance, `A` does not match it, `T` or `dt` is not positive, or `mean0` is
        nonzero with ``d >= 2``.
    TypeError
        If an array argument is not real, or `rng` is not a Generator, a seed or None.
    FloatingPointError
        If the particle flow overflows before `T`.

    Examples
    --------
    >>> from token_dynamics.meanfield import mean_field_errors
    >>> err = mean_field_errors([50, 200], cov0=[[0.4]], A=[[-0.6]], v=0.8, T=0.5,
    ...                         mean0=[0.5], n_seeds=2, rng=0)
    >>> err.final.shape
    (2, 2)
    """
    ns = as_counts(ns, "ns")
    S0 = as_covariance(cov0, "cov0")
    if not np.any(S0):
        raise ValueError(
            "`cov0` is zero: every sample is the mean, every error is 0 and no rate can be "
            "fitted; pass a nonzero covariance."
        )
    d = S0.shape[0]
    A = as_matrix(A, "A", shape=(d, d))
    m0 = np.zeros(d) if mean0 is None else as_vector(mean0, "mean0", size=d)
    T = check_positive(T, "T")
    n_seeds = check_int(n_seeds, "n_seeds")
    dt = None if dt is None else check_positive(dt, "dt")
    rng = as_rng(rng)
    if d >= 2 and np.any(m0 != 0):
        raise ValueError("`mean0` must be zero when d >= 2 (the exact reference is centred).")
    try:
        if d == 1:
            ref = softmax_gaussian_1d(A[0, 0], v, m0[0], S0[0, 0], [0.0, T], beta=beta)
        else:
            ref = softmax_gaussian_centred(A, v, S0, [0.0, T], beta=beta)
    except ValueError as exc:
        if "blow-up" not in str(exc):
            raise
        raise ValueError(
            f"`T` = {T:g} is past the finite-time blow-up of the Gaussian reference ({exc}); "
            "lower `T`, `v`, `beta` or the scale of `cov0` and `A`."
        ) from None
    if d >= 2:
        n_ref = check_int(REFERENCE_FACTOR * int(ns.max()) if n_ref is None else n_ref, "n_ref")
    field = Softmax(A, v * np.eye(d), beta=beta)
    initial = np.empty((n_seeds, ns.shape[0]))
    final = np.empty_like(initial)
    errors: list[float | None] = []
    for j, n in enumerate(ns):
        for k in range(n_seeds):
            X0 = rng.multivariate_normal(m0, S0, size=n)
            states, error = _flow(field, X0, np.array([0.0, T]), dt)
            XT = states[-1]
            errors.append(error)
            if d == 1:
                initial[k, j] = w2_gaussian_1d(X0[:, 0], m0[0], S0[0, 0])
                final[k, j] = w2_gaussian_1d(XT[:, 0], ref.means[1, 0], ref.covariances[1, 0, 0])
            else:
                Y0 = rng.multivariate_normal(m0, S0, size=n_ref)
                YT = rng.multivariate_normal(np.zeros(d), ref.covariances[1], size=n_ref)
                initial[k, j] = wasserstein2(X0, Y0)
                final[k, j] = wasserstein2(XT, YT)
    fit = fit_power_law(ns, final.mean(axis=0))
    return MeanFieldErrors(ns, initial, final, fit, _largest(errors))


@dataclass(frozen=True)
class StabilityRun:
    """Distance between two token flows over time.

    Attributes
    ----------
    times : ndarray, shape (T,)
    distance : ndarray, shape (T,)
        :math:`W_p(\\mu_t, \\nu_t)`, ``p`` = 1 or 2 (or :math:`W_{2,\\lambda}` for masked
        tokens).
    ratio : ndarray, shape (T,)
        ``distance / distance[0]``: the measured stability constant.
    step_error : float or None
        With the default ``dt=None``, the larger estimated global error of the two RK4 runs
        (the largest norm of a token's error, in the tokens' units); ``None`` for an explicit
        `dt`.

    Examples
    --------
    Returned by :func:`stability_ratios`. With :math:`A = 0` every token moves by the
    mean of the cloud (:math:`\\dot x_i = v\\bar x`), so two clouds stay translates and the
    distance between them grows like the difference of their means, :math:`e^{vt}`:

    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.meanfield import stability_ratios
    >>> X = np.linspace(-1, 1, 5)[:, None]
    >>> run = stability_ratios(Softmax([[0.0]], [[0.5]]), X, X + 0.01, [0.0, 1.0])
    >>> bool(np.isclose(run.ratio[-1], np.exp(0.5), rtol=1e-6)), round(float(run.distance[0]), 12)
    (True, 0.01)
    >>> run.step_error < 1e-6  # the RK4 step met the default tolerance
    True
    """

    times: np.ndarray
    distance: np.ndarray
    ratio: np.ndarray
    step_error: float | None = None


@float_guard("the stability ratios", "rescale `X0` and `Y0` or shorten `times`")
def stability_ratios(
    field: AttentionField,
    X0: ArrayLike,
    Y0: ArrayLike,
    times: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    conditional: bool = False,
    p: int = 2,
    dt: float | None = None,
) -> StabilityRun:
    r"""Flow two clouds with the same field and measure :math:`W_p(\mu_t,\nu_t)/W_p(\mu_0,\nu_0)`.

    Parameters
    ----------
    field : AttentionField
        A field with ``velocity(X, t, weights=...)``.
    X0, Y0 : array_like, shape (n, d)
        The two initial clouds (same weights).
    times : array_like, shape (T,)
        Output times, starting at the initial time.
    weights : array_like, shape (n,), optional
    conditional : bool
        Measure the conditional :math:`W_{p,\lambda}` (positions in column 0) instead of
        :math:`W_p`.
    p : {1, 2}
        Order of the Wasserstein distance.
    dt : float, optional
        RK4 step; by default the step is chosen to meet RK4's default tolerance
        (:data:`token_dynamics.integrators.DEFAULT_TOLERANCES`) and the error reached is
        reported as ``step_error``.

    Returns
    -------
    StabilityRun

    Raises
    ------
    ValueError
        If `Y0` does not have the shape of `X0` or defines the same measure, `p` is not 1 or 2,
        `dt` is not positive or `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.meanfield import stability_ratios
    >>> X = np.linspace(-1, 1, 5)[:, None]
    >>> run = stability_ratios(Softmax([[0.0]], [[1.0]]), X, X + 0.01, [0.0, 1.0])
    >>> run.ratio.round(6)  # A = 0: every token moves by v * mean, a rigid shift e^t
    array([1.      , 2.718282])
    """
    _check_field(field)
    X0 = as_tokens(X0, "X0")
    Y0 = as_tokens(Y0, "Y0", d=X0.shape[1])
    if Y0.shape != X0.shape:
        raise ValueError(f"`Y0` must have the shape of `X0` {X0.shape}; got {Y0.shape}.")
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    w = as_weights(weights, X0.shape[0])
    dt = None if dt is None else check_positive(dt, "dt")
    conditional = check_bool(conditional, "conditional")
    if p not in (1, 2):
        raise ValueError(f"`p` must be 1 or 2; got {p!r}.")
    Xs, error_x = _flow(field, X0, t, dt, None if weights is None else w)
    Ys, error_y = _flow(field, Y0, t, dt, None if weights is None else w)
    if conditional:
        distance = conditional_w1 if p == 1 else conditional_w2
    else:
        distance = wasserstein1 if p == 1 else wasserstein2
    dist = np.array([distance(x, y, weights_x=w, weights_y=w) for x, y in zip(Xs, Ys, strict=True)])
    if dist[0] == 0:
        raise ValueError("`X0` and `Y0` must define different measures (their distance is 0).")
    return StabilityRun(t, dist, dist / dist[0], _largest([error_x, error_y]))
