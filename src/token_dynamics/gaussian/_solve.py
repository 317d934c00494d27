"""Solver of the Gaussian moment ODE with finite-time blow-up detection."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.integrate import solve_ivp

from .._linalg import psd_sqrt
from .._validation import as_covariance, as_times, as_vector, check_positive
from ._equations import moment_equations
from ._path import GaussianPath

__all__ = ["cone_coordinates", "solve_moments"]

#: Blow-up test. With s = tr(Sigma), a finite-time blow-up is a pole,
#: s ~ c / (t* - t), so s / s' = t* - t -> 0; exponential growth keeps s / s' >= 1 / rate. The run
#: stops when s / s' falls below BLOWUP_TAU times the length of the time span: 1e-9 resolves t*
#: far beyond the 1e-6 asked of blow-up times, and only growth rates above 1e9 per unit of the
#: span could be mistaken for a pole. (A threshold on the size s alone cannot tell a pole from
#: fast exponential growth: l2 attention with Q = K = V = I reaches 1e16 at t = 20 and never
#: blows up.)
BLOWUP_TAU = 1e-9
#: Second blow-up test, for runs that an explicit scheme cannot follow into the pole: near a
#: blow-up onto a direction u with u^T A u ~ 0 the covariance is huge along u and contracts at
#: rates ~ |Sigma| |A| across it, so the steps shrink to nothing (stiffness). Once s exceeds
#: BLOWUP_SIZE times max(1, s(0)) and s / s' < STALL_TAU times the span, the run is reported as
#: a blow-up whose time is known to within s / s' (said in the message).
BLOWUP_SIZE = 1e10
STALL_TAU = 1e-3
#: Budget of right-hand-side evaluations. A regular run needs a few thousand; a run that
#: exhausts the budget is stiff (e.g. huge covariance along a direction u with u^T A u ~ 0 and
#: fast contraction across it) and is reported as ``"failed"`` with a remedy, never left to hang.
MAX_RHS_EVALS = 100_000


class _TooStiff(Exception):
    def __init__(self, t: float, y: np.ndarray):
        self.t, self.y = t, y


def solve_moments(
    equations: Any,
    mean0: Any,
    cov0: Any,
    times: Any,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    blowup_tau: float = BLOWUP_TAU,
    method: str = "DOP853",
) -> GaussianPath:
    r"""Integrate the mean and covariance ODE of a Gaussian-preserving attention variant.

    The covariance is carried as a factor :math:`\Sigma = FF^\top` with :math:`F' = MF`, so
    every returned covariance is symmetric positive semidefinite and keeps the rank of
    ``cov0``. With :math:`s = \operatorname{tr}\Sigma`, a terminal event stops
    the run when the time-to-pole estimate :math:`s/s'` falls below ``blowup_tau`` times the
    length of the time span; the blow-up time is then the event time plus :math:`s/s'`, exact
    for a simple pole up to :math:`O((t^*-t)^2)`.

    Parameters
    ----------
    equations : MomentEquations or a Gaussian-preserving attention field
    mean0 : (d,) array
    cov0 : (d, d) symmetric positive semidefinite array
    times : (T,) strictly increasing array; ``times[0]`` is the initial time.
    rtol, atol : tolerances of the adaptive integrator.
    method : a ``scipy.integrate.solve_ivp`` method (default DOP853, 8th order).
    blowup_tau : float, relative time-to-pole below which the run counts as blowing up.

    Returns
    -------
    GaussianPath
        ``status`` is ``"completed"``, ``"blowup"`` (with ``blowup_time``), or ``"failed"``
        when the run exhausted ``MAX_RHS_EVALS`` (a stiff run, explained in ``message``).

    Raises
    ------
    FloatingPointError
        If the right-hand side overflows without a detected blow-up.

    References
    ----------
    Castin et al. (2025), arXiv:2501.18322.

    Examples
    --------
    >>> from token_dynamics.gaussian import SoftmaxMoments
    >>> sol = solve_moments(SoftmaxMoments([[0.9]], [[0.7]]), [0.0], [[0.4]], [0.0, 1.0, 3.0])
    >>> sol.status, round(sol.blowup_time, 6)  # 1 / (2 v a s0)
    ('blowup', 1.984127)
    >>> sol.times
    array([0., 1.])
    """
    eq = moment_equations(equations)
    alpha0 = as_vector(mean0, "mean0")
    d = alpha0.shape[0]
    Sigma0 = as_covariance(cov0, "cov0", d=d)
    t = as_times(times)
    check_positive(rtol, "rtol")
    check_positive(atol, "atol")
    if method not in ("LSODA", "DOP853", "RK45", "Radau", "BDF"):
        raise ValueError(
            f"`method` must be one of 'LSODA', 'DOP853', 'RK45', 'Radau', 'BDF'; got {method!r}."
        )
    tau = check_positive(blowup_tau, "blowup_tau") * max(1.0, float(t[-1] - t[0]))
    eq.check_dimension(d)
    F0 = psd_sqrt(Sigma0)

    def unpack(y):
        return y[:d], y[d:].reshape(d, d)

    n_evals = [0]

    def fun(s, y):
        n_evals[0] += 1
        if n_evals[0] > MAX_RHS_EVALS:
            raise _TooStiff(s, y)
        alpha, F = unpack(y)
        g, N = eq._terms(s, alpha, F)
        return np.concatenate([g, N.ravel()])

    def size(y):
        # tr(Sigma) = ||F||_F^2. The mean is left out: it moves linearly given Sigma for softmax,
        # l2 and Sinkhorn, so it can grow fast but cannot blow up unless Sigma does.
        return float(np.dot(y[d:], y[d:]))

    def rate(s, y):
        return 2.0 * float(np.dot(y[d:], fun(s, y)[d:]))  # d/dt of size(y)

    def event(s, y):
        return tau * rate(s, y) - size(y)  # crosses 0 upwards when size / rate = tau

    big = BLOWUP_SIZE * max(1.0, float(np.trace(Sigma0)))
    stall_tau = STALL_TAU * max(1.0, float(t[-1] - t[0]))

    def stall(s, y):
        # positive iff size > big and size / rate < stall_tau
        return min(np.log(size(y) / big), np.log(stall_tau * max(rate(s, y), 1e-300) / size(y)))

    for ev in (event, stall):
        ev.terminal = True
        ev.direction = 1

    y0 = np.concatenate([alpha0, F0.ravel()])
    if t.size == 1:
        return GaussianPath(
            t.copy(), alpha0[None], Sigma0[None], message="single time: initial data."
        )
    with np.errstate(over="raise", invalid="raise"):
        try:
            sol = solve_ivp(
                fun,
                (t[0], t[-1]),
                y0,
                method=method,
                t_eval=t,
                rtol=rtol,
                atol=atol,
                events=(event, stall),
            )
        except _TooStiff as exc:
            trace = float(np.dot(exc.y[d:], exc.y[d:]))
            return GaussianPath(
                t[:1].copy(),
                alpha0[None],
                Sigma0[None],
                "failed",
                f"the run became too stiff at t = {exc.t:.6g} ({MAX_RHS_EVALS} evaluations of the "
                f"right-hand side) with tr(Sigma) = {trace:.3g}: the covariance grows fast along "
                "some directions while it collapses along others, which no step size resolves "
                "cheaply. Stop earlier (shorter `times`) or rescale the parameters.",
            )
        except FloatingPointError as exc:
            raise FloatingPointError(
                "the moment ODE overflowed without meeting a finite-time blow-up (growth faster "
                "than exponential at a rate the blow-up test does not flag?); shorten `times` or "
                "raise `blowup_tau`."
            ) from exc
    Y = sol.y.T
    means = Y[:, :d].copy()
    Fs = Y[:, d:].reshape(-1, d, d)
    covs = Fs @ np.swapaxes(Fs, 1, 2)
    covs = 0.5 * (covs + np.swapaxes(covs, 1, 2))
    times_out = sol.t.copy()
    blowup = None
    if sol.status == 1:
        which = 0 if sol.t_events[0].size else 1
        te, ye = float(sol.t_events[which][0]), sol.y_events[which][0]
        blowup = te + size(ye) / rate(te, ye)
        status = "blowup"
        if which == 0:
            message = (
                f"finite-time blow-up: tr(Sigma) = {size(ye):.3g} grows like a pole "
                f"at t = {te:.10g}; estimated blow-up time {blowup:.10g}."
            )
        else:
            message = (
                f"finite-time blow-up: tr(Sigma) = {size(ye):.3g} at t = {te:.10g} "
                f"and doubling within {size(ye) / rate(te, ye):.2g}; the run became too stiff "
                f"to follow into the pole, so the blow-up time {blowup:.6g} is known only to "
                f"within {size(ye) / rate(te, ye):.2g}."
            )
    elif sol.status == 0:
        status, message = "completed", "reached the final time."
    else:
        status = "failed"
        message = (
            f"the integrator stopped at t = {sol.t[-1] if sol.t.size else t[0]:g}: {sol.message}"
        )
    return GaussianPath(times_out, means, covs, status, message, blowup)


def cone_coordinates(covariances: Any) -> np.ndarray:
    r"""Coordinates ``(a - b, 2c, a + b)`` of 2x2 covariances in the PSD cone.

    :math:`\Sigma = \begin{psmallmatrix}a&c\\c&b\end{psmallmatrix}` is PSD iff
    :math:`(a-b)^2 + (2c)^2 \le (a+b)^2`, i.e. iff the point lies in the upright circular
    cone; rank-one covariances lie on its surface.

    Parameters
    ----------
    covariances : (..., 2, 2) array

    Returns
    -------
    (..., 3) array

    Examples
    --------
    >>> cone_coordinates([[1.0, 0.0], [0.0, 0.0]])
    array([1., 0., 1.])
    """
    S = np.asarray(covariances, dtype=np.float64)
    if S.shape[-2:] != (2, 2):
        raise ValueError(f"`covariances` must have shape (..., 2, 2); got {S.shape}.")
    a, b, c = S[..., 0, 0], S[..., 1, 1], 0.5 * (S[..., 0, 1] + S[..., 1, 0])
    return np.stack([a - b, 2.0 * c, a + b], axis=-1)
