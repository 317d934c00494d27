"""Solver of the Gaussian moment ODE with finite-time blow-up detection.

Vocabulary (shared with :func:`token_dynamics.integrators.integrate`): ``times``, ``dt`` (the
maximal step), ``method`` (``"solve_ivp"`` or a name in
:data:`token_dynamics.integrators.IVP_METHODS`), ``rtol``/``atol``, ``progress``; the result, a
:class:`GaussianPath`, has ``.times``, ``.status`` and ``.message``.

Failure policy (the library's, see the contributing guide): a finite-time blow-up is a result,
``status="blowup"`` with its estimated time; a numerical failure -- a run too stiff to follow,
or a covariance that grows (exponentially, without a pole) out of the float64 range -- returns
the path up to that point with ``status="failed"`` and a ``message`` naming the time, the
method and the quantity; a right-hand side that overflows or turns NaN nonetheless raises
``FloatingPointError`` with the same information. Stiffness is not growth: a covariance that
settles onto a rank-deficient stationary one (decaying exponentially across it) is stiff for an
explicit scheme, whose steps stay at its stability limit however long the run; the default
method then switches to the implicit ``STIFF_METHOD`` for the rest of the run, and a run
that still cannot be followed is described by its state (trace and its rate, eigenvalues, the
rank it collapses to), not by a guess. The blow-up tests depend on the state and on
the time elapsed since ``times[0]`` only, never on the requested horizon: a run on ``[0, T]``
is the beginning of the run on ``[0, T']`` for ``T' > T``.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from scipy.integrate import solve_ivp

from .._guards import float_guard, progress_bar
from .._linalg import psd_sqrt
from .._typing import ArrayLike, FloatArray, IVPMethod
from .._validation import (
    as_covariance,
    as_real_array,
    as_times,
    as_vector,
    check_bool,
    check_positive,
    check_rtol,
    time_text,
)
from ..attention import AttentionField
from ..integrators import IVP_METHODS
from ._equations import MomentEquations
from ._path import GaussianPath
from ._registry import _moment_equations

__all__ = ["cone_coordinates", "solve_moments"]

#: Blow-up test. With s = tr(Sigma) (or |alpha|^2, tested alike: the mean of linear attention
#: blows up on its own), a finite-time blow-up is a pole, s ~ c / (t* - t)^p, so the
#: time-to-pole s / s' = (t* - t) / p -> 0; exponential growth at rate r keeps s / s' = 1 / r.
#: The run stops when s / s' falls below BLOWUP_TAU times max(1, t - t0), t0 = times[0]: 1e-9
#: resolves t* far beyond the 1e-6 asked of blow-up times, and only growth rates above 1e9 per
#: unit of elapsed time could be mistaken for a pole. The threshold follows the elapsed time,
#: never the requested horizon, so the verdict at time t does not depend on how far the run was
#: asked to go. (A threshold on the size s alone cannot tell a pole from fast exponential
#: growth: l2 attention with Q = K = V = I reaches 1e16 at t = 20 and never blows up.)
BLOWUP_TAU = 1e-9
#: Second blow-up test, for runs that an explicit scheme cannot follow into the pole: near a
#: blow-up onto a direction u with u^T A u ~ 0 the covariance is huge along u and contracts at
#: rates ~ |Sigma| |A| across it, so the steps shrink to nothing (stiffness). Once s exceeds
#: BLOWUP_SIZE times max(1, s(0)) and s / s' < STALL_TAU (t - t0), the run is reported as a
#: blow-up whose time is known to within s / s' (said in the message). Exponential growth at any
#: rate r cannot pass it: s / s' = 1 / r < STALL_TAU (t - t0) needs r (t - t0) > 1000, i.e.
#: s > e^1000 s(0), far beyond OVERFLOW_SIZE where the run has already stopped.
BLOWUP_SIZE = 1e10
STALL_TAU = 1e-3
#: Size of tr(Sigma) at which a run without a detected pole stops as "failed": F F^T overflows
#: float64 (1.8e308) soon after, so beyond it the covariance is not representable. A variant
#: whose right-hand side is quadratic in Sigma (softmax, linear) overflows earlier only through a
#: pole, which the tests above catch, or raises FloatingPointError naming the time.
OVERFLOW_SIZE = 1e300
#: The same for the largest entry of the mean, which multiplies Sigma in the right-hand side:
#: 1e150 keeps Sigma alpha below the overflow while Sigma is below 1e150.
MEAN_OVERFLOW = 1e150
#: Budget of right-hand-side evaluations of one method. A regular run needs a few thousand; a
#: run that exhausts it is stiff: fast contraction across a direction u, either onto a settled
#: rank-deficient covariance (the second sign counterexample: Sigma -> s u u^T, contracting at
#: the rate 2 s, so DOP853 keeps steps ~ 5.5 / (2 s) and spends the budget at t ~ 1200 for
#: s = 19) or with the covariance huge along u (u^T A u ~ 0) near a blow-up. The default method
#: then goes on with STIFF_METHOD and a fresh budget; a run that exhausts that one too, or a
#: named method's, stops as ``"failed"`` with its state described, never left to hang.
MAX_RHS_EVALS = 100_000
#: Implicit method that ``method="solve_ivp"`` switches to, from the last accepted DOP853 step,
#: when DOP853 exhausts MAX_RHS_EVALS: its steps are limited by accuracy, not stability, so a
#: settled run costs nothing more however long it is asked to go (the second sign
#: counterexample on [0, 1e6] takes about a hundred evaluations after the switch).
STIFF_METHOD: IVPMethod = "Radau"
#: Relative size below which an eigenvalue of Sigma counts as collapsed in a failure message
#: (sqrt of the float64 epsilon: the factor F, Sigma = F F^T, then has singular values below
#: 1.2e-4 of its largest, and the integrator's step no longer follows them for accuracy).
COLLAPSED_EIG = 1.5e-8


def _stiff_state(Sigma: FloatArray, growth: float, elapsed: float) -> str:
    """Describe, in words, the state at which a run exhausted its evaluation budget."""
    lam = np.maximum(np.linalg.eigvalsh(Sigma), 0.0)  # Sigma = F F^T is PSD up to rounding
    top = float(lam[-1])
    rank = int(np.sum(lam > COLLAPSED_EIG * top)) if top > 0 else 0
    trace = float(np.sum(lam))
    facts = (
        f"tr(Sigma) = {trace:.3g} changing at the rate s'/s = {growth:.3g}, eigenvalues from "
        f"{float(lam[0]):.3g} to {top:.3g}"
    )
    if growth * max(1.0, elapsed) > 1.0:  # the trace more than e-folds over the elapsed time
        return (
            f"the covariance grows ({facts}) while it contracts across some directions, which "
            "no step size resolves cheaply"
        )
    if rank < lam.size:
        return (
            f"the covariance is not growing but collapsing to rank {rank} ({facts}): it "
            "contracts fast across the collapsing directions, which keeps the steps small "
            "however slowly the rest of it moves"
        )
    return f"the covariance is not growing ({facts}), yet the steps stay small"


def solve_moments(
    equations: MomentEquations | AttentionField,
    mean0: ArrayLike,
    cov0: ArrayLike,
    times: ArrayLike,
    *,
    method: str = "solve_ivp",
    dt: float | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    progress: bool = False,
    blowup_tau: float = BLOWUP_TAU,
) -> GaussianPath:
    r"""Integrate the mean and covariance ODE of a Gaussian-preserving attention variant.

    The covariance is carried as a factor :math:`\Sigma = FF^\top` with :math:`F' = MF`, so
    every returned covariance is symmetric positive semidefinite and keeps the rank of
    ``cov0`` (a Dirac, ``cov0 = 0``, stays a Dirac). With :math:`s = \operatorname{tr}\Sigma`,
    or :math:`s = |\alpha|^2` (the mean of linear attention, cubic in it, blows up on its own), a
    terminal event stops the run when the time-to-pole estimate :math:`s/s'` falls below
    ``blowup_tau`` times :math:`\max(1, t - t_0)`; the blow-up time is then the event time plus
    :math:`s/s'`, exact for a simple pole up to :math:`O((t^*-t)^2)`. No test depends on the
    requested horizon ``times[-1]``.

    A covariance that settles onto a singular stationary one (contracting exponentially across
    it) makes the run stiff: an explicit method's step then stays at its stability limit, and
    its evaluations grow with the horizon. With the default ``method="solve_ivp"``, a run whose
    DOP853 phase spends ``MAX_RHS_EVALS`` evaluations goes on with ``STIFF_METHOD``
    (Radau) from that step, with a fresh budget; ``message`` says where.

    Parameters
    ----------
    equations : MomentEquations or a Gaussian-preserving attention field
    mean0 : (d,) array
    cov0 : (d, d) symmetric positive semidefinite array
    times : (T,) strictly increasing array; ``times[0]`` is the initial time.
    method : ``"solve_ivp"`` (DOP853, 8th order, switching to ``STIFF_METHOD`` if the run
        turns stiff) or a name in :data:`token_dynamics.integrators.IVP_METHODS` (used
        throughout).
    dt : float, optional, the maximal step.
    rtol, atol : tolerances of the adaptive integrator. ``atol`` is absolute, on the entries of
        the mean and of the factor :math:`F`: for moments far below one, lower it with them (the
        scalar softmax Gaussian rescaled to :math:`\Sigma_0 = 10^{-12}` met its closed form to
        4e-8 with the default, against 3e-12 at :math:`\Sigma_0 = 1`).
    progress : bool, show a ``tqdm`` progress bar.
    blowup_tau : float, relative time-to-pole below which the run counts as blowing up.

    Returns
    -------
    GaussianPath
        ``status`` is ``"completed"``, ``"blowup"`` (with ``blowup_time``), or ``"failed"``
        when the run exhausted ``MAX_RHS_EVALS`` (a stiff run: after the switch to
        ``STIFF_METHOD`` for the default method; ``message`` then describes the state --
        the trace and its rate of change, the eigenvalues, the rank the covariance collapses
        to -- and the path is returned up to there) or its moments grew past
        ``OVERFLOW_SIZE`` (``MEAN_OVERFLOW`` for the mean) without a pole (explained
        in ``message``). A run far from time 0 (``t0 = 1e6``, a pole at ``t0 + 2``) can meet
        a pole closer than its steps can follow, the float64 spacing of :math:`t`: when the
        integrator stops there with :math:`s/s'` below ``STALL_TAU`` :math:`(t - t_0)` (a
        growth at a constant rate would have passed :math:`e^{1000}`), the result is a
        ``"blowup"`` whose time is known to within :math:`s/s'`, said in ``message``.

    Raises
    ------
    ValueError
        If `equations` has no moment ODE (see :func:`moment_equations`), `cov0` is not a
        covariance in the dimension of `mean0` and of the parameters, `times` are not strictly
        increasing, `method` is unknown, or `dt`, `rtol`, `atol` or `blowup_tau` is out of range.
    TypeError
        If an array argument is not real (complex, boolean, string or object).
    FloatingPointError
        If the right-hand side overflows or turns non-finite all the same, naming the time and
        the method.

    References
    ----------
    Castin et al. (2025), arXiv:2501.18322.

    Examples
    --------
    >>> from token_dynamics.gaussian import SoftmaxMoments
    >>> from token_dynamics.gaussian import solve_moments
    >>> sol = solve_moments(SoftmaxMoments([[0.9]], [[0.7]]), [0.0], [[0.4]], [0.0, 1.0, 3.0])
    >>> sol.status, round(sol.blowup_time, 6)  # 1 / (2 v a s0)
    ('blowup', 1.984127)
    >>> sol.times
    array([0., 1.])
    """
    eq = _moment_equations(equations, "equations")
    alpha0 = as_vector(mean0, "mean0")
    d = alpha0.shape[0]
    Sigma0 = as_covariance(cov0, "cov0", d=d)
    t = as_times(times)
    check_rtol(rtol)
    check_positive(atol, "atol")
    check_bool(progress, "progress")
    if method != "solve_ivp" and method not in IVP_METHODS:
        raise ValueError(f"`method` must be 'solve_ivp' or one of {IVP_METHODS}; got {method!r}.")
    ivp = cast(IVPMethod, "DOP853" if method == "solve_ivp" else method)  # checked above
    tau = check_positive(blowup_tau, "blowup_tau")
    max_step = np.inf if dt is None else check_positive(dt, "dt")
    eq.check_dimension(d)
    F0 = psd_sqrt(Sigma0)
    t0 = float(t[0])

    def unpack(y):
        return y[:d], y[d:].reshape(d, d)

    n_evals = [0]
    exhausted: list[float | None] = [None]  # time of the accepted step that spent the budget
    reached = [t0]
    bar = progress_bar(progress, float(t[-1] - t0), f"solve_moments ({method})")

    def fun(s, y):
        n_evals[0] += 1
        if s > reached[0]:
            if bar is not None:
                bar.update(s - reached[0])
            reached[0] = s
        alpha, F = unpack(y)
        g, N = eq._terms(s, alpha, F)
        out = np.concatenate([g, N.ravel()])
        if not np.all(np.isfinite(out)):
            raise FloatingPointError(f"non-finite right-hand side at t = {time_text(s)}")
        return out

    # the two sizes watched for a pole: tr(Sigma) = ||F||_F^2 and |alpha|^2. The mean moves
    # linearly given Sigma for softmax, l2 and Sinkhorn, so it blows up only with Sigma; the mean
    # of linear attention, cubic in it, blows up on its own (a Dirac's, or one outside the range
    # of Sigma). The other tests watch tr(Sigma).
    cov_part, mean_part = slice(d, None), slice(None, d)

    def size(y, part=cov_part):
        return float(np.dot(y[part], y[part]))

    def rate(s, y, part=cov_part, dy=None):
        dy = fun(s, y) if dy is None else dy
        return 2.0 * float(np.dot(y[part], dy[part]))  # d/dt of size(y, part)

    def elapsed(s):
        return max(0.0, s - t0)

    def positive_sizes(s, y):
        # (name, size, rate) of each size of y that is positive: a blow-up is read off these
        return [
            (name, size(y, part), rate(s, y, part))
            for name, part in (("tr(Sigma)", cov_part), ("|alpha|^2", mean_part))
            if size(y, part) > 0
        ]

    accepted: list[Any] = [t0, None]  # the end of the last accepted step (events see each)

    def pole(s, y):
        # crosses 0 upwards when size / rate = tau max(1, s - t0) for either size; a size 0
        # (a Dirac, a centred mean) stays below
        accepted[:] = [s, y.copy()]
        dy, window = fun(s, y), tau * max(1.0, elapsed(s))
        return max(
            window * rate(s, y, part, dy) - size(y, part) if size(y, part) > 0 else -1.0
            for part in (cov_part, mean_part)
        )

    big = BLOWUP_SIZE * max(1.0, float(np.trace(Sigma0)))

    def stall(s, y):
        # positive iff size > big and size / rate < STALL_TAU (s - t0); logs keep it scale-free
        sz, window = size(y), STALL_TAU * elapsed(s) * rate(s, y)
        if sz <= 0 or window <= 0:
            return -1.0
        return min(math.log(sz / big), math.log(window / sz))

    def overflow(s, y):
        # positive once tr(Sigma) passes OVERFLOW_SIZE or an entry of the mean MEAN_OVERFLOW
        top = max(size(y) / OVERFLOW_SIZE, float(np.max(np.abs(y[:d]))) / MEAN_OVERFLOW)
        return math.log(top) if top > 0 else -1.0

    def budget(s, y):
        # -1 until an accepted step ends with MAX_RHS_EVALS spent, then s - (that step's end):
        # solve_ivp evaluates the events at each accepted step's end first, so the root is
        # that end, and the run stops there with everything before it kept
        if exhausted[0] is None:
            if n_evals[0] <= MAX_RHS_EVALS:
                return -1.0
            exhausted[0] = s
        return s - exhausted[0]

    # solve_ivp reads the `terminal` and `direction` attributes set on each event function
    events: tuple[Any, ...] = (pole, stall, overflow, budget)
    for ev in events:
        ev.terminal = True
        ev.direction = 1

    y0 = np.concatenate([alpha0, F0.ravel()])
    if t.size == 1:
        return GaussianPath(
            t.copy(), alpha0[None], Sigma0[None], message="single time: initial data."
        )
    # DOP853 (or the named method), then for the default method STIFF_METHOD from where
    # DOP853 spent its budget, with a fresh one
    phases: list[IVPMethod] = [ivp] + ([STIFF_METHOD] if method == "solve_ivp" else [])
    t_start, y_start, phase = t0, y0, ivp
    pieces: list[FloatArray] = []
    switched: float | None = None
    try:
        with np.errstate(over="raise", invalid="raise"):
            for k, phase in enumerate(phases):
                n_evals[0], exhausted[0] = 0, None
                sol = solve_ivp(
                    fun,
                    (t_start, t[-1]),
                    y_start,
                    method=phase,
                    t_eval=t if k == 0 else t[t > t_start],
                    rtol=rtol,
                    atol=atol,
                    max_step=max_step,
                    events=events,
                )
                if len(sol.t):  # (sol.t and sol.y are empty lists when no output time is reached)
                    pieces.append(np.asarray(sol.y).T)
                # the budget event is recorded only if no other event stopped the run earlier
                spent = sol.status == 1 and cast(list[FloatArray], sol.t_events)[3].size > 0
                if not spent or k + 1 == len(phases):
                    break
                t_spent = float(cast(list[FloatArray], sol.t_events)[3][0])
                if t_spent >= t[-1]:
                    break
                t_start, y_start = t_spent, cast(list[FloatArray], sol.y_events)[3][0]
                switched = t_start
    except FloatingPointError as exc:
        raise FloatingPointError(
            f"the moment ODE overflowed near t = {time_text(reached[0])} with method={method!r} "
            f"({phase}) without meeting a finite-time blow-up ({exc}); shorten `times` or raise "
            "`blowup_tau`."
        ) from exc
    finally:
        if bar is not None:
            bar.close()
    Y = np.concatenate(pieces) if pieces else y0[None]  # no step accepted: the initial data
    means = Y[:, :d].copy()
    Fs = Y[:, d:].reshape(-1, d, d)
    covs = Fs @ np.swapaxes(Fs, 1, 2)
    covs = 0.5 * (covs + np.swapaxes(covs, 1, 2))
    times_out = t[: Y.shape[0]].copy()
    blowup = None
    after = (
        ""
        if switched is None
        else f" (DOP853 spent its {MAX_RHS_EVALS} evaluations at t = {time_text(switched)}, "
        f"where the run turned stiff; {STIFF_METHOD} went on from there)"
    )
    # both lists are set since `events` was given
    t_events = cast(list[FloatArray], sol.t_events)
    y_events = cast(list[FloatArray], sol.y_events)
    only_budget = sol.status == 1 and not any(e.size for e in t_events[:3])
    if sol.status == 0 or (only_budget and float(t_events[3][0]) >= t[-1]):
        # (the budget may run out on the very step that reaches the final time)
        status, message = "completed", f"reached the final time{after}."
    elif sol.status == 1:
        which = next(k for k in range(len(events)) if t_events[k].size)
        te, ye = float(t_events[which][0]), y_events[which][0]
        se, re = size(ye), rate(te, ye)
        if which == 3:
            F = ye[d:].reshape(d, d)
            remedy = (
                "shorten `times`, loosen `rtol`/`atol` or rescale the parameters"
                if phase in ("Radau", "BDF", "LSODA")
                else "pass method='solve_ivp' (which switches to "
                f"{STIFF_METHOD} when DOP853 turns stiff) or method={STIFF_METHOD!r}"
            )
            spending = (
                f"{MAX_RHS_EVALS} evaluations of the right-hand side"
                if switched is None
                else f"DOP853 spent its {MAX_RHS_EVALS} evaluations of the right-hand side by "
                f"t = {time_text(switched)}, and {STIFF_METHOD} its own by t = {time_text(te)}"
            )
            status = "failed"
            message = (
                f"the run became too stiff at t = {time_text(te)} with method={method!r} "
                f"({spending}): {_stiff_state(F @ F.T, re / se if se > 0 else 0.0, elapsed(te))}. "
                f"The path is returned up to t = {time_text(times_out[-1])}; {remedy}."
            )
        elif which == 2:
            status = "failed"
            message = (
                f"the moments are about to leave the float64 range at t = {time_text(te)} with "
                f"method={method!r}{after}: tr(Sigma) = {se:.3g} (growing at the rate s'/s = "
                f"{re / max(se, 1e-300):.3g}, without a finite-time pole) and |alpha| = "
                f"{float(np.linalg.norm(ye[:d])):.3g}. This is growth, not a blow-up; stop "
                "earlier (shorter `times`) or rescale the parameters."
            )
        else:
            status = "blowup"
            if which == 0:
                # the size that met the test: the one closer to its pole (the smaller size / rate)
                name, se, re = min(
                    positive_sizes(te, ye), key=lambda c: c[1] / c[2] if c[2] > 0 else np.inf
                )
                blowup = te + se / re
                message = (
                    f"finite-time blow-up: {name} = {se:.3g} grows like a pole "
                    f"at t = {time_text(te)}; estimated blow-up time {time_text(blowup)}{after}."
                )
            else:
                blowup = te + se / re
                message = (
                    f"finite-time blow-up: tr(Sigma) = {se:.3g} at t = {time_text(te)} "
                    f"and doubling within {se / re:.2g}; the run became too stiff "
                    f"to follow into the pole, so the blow-up time {time_text(blowup)} is known "
                    f"only to within {se / re:.2g}{after}."
                )
    else:
        status = "failed"
        message = (
            f"the integrator ({phase}) stopped at t = {time_text(reached[0])} with "
            f"method={method!r}{after}: {sol.message}"
        )
        ta, ya = accepted
        # a step below the float64 spacing of t: far from t0 (t0 = 1e6, a pole at t0 + 2) the
        # pole test's s / s' < tau max(1, t - t0) asks for steps finer than t can resolve. The
        # stall test's elapsed-time rule then tells a pole: s / s' < STALL_TAU (t - t0) would
        # mean a growth by e^1000 at a constant rate
        near = [
            c
            for c in (positive_sizes(ta, ya) if ya is not None else [])
            if c[1] < STALL_TAU * elapsed(ta) * c[2]
        ]
        if near:
            name, se, re = min(near, key=lambda c: c[1] / c[2])
            status, blowup = "blowup", ta + se / re
            message = (
                f"finite-time blow-up: {name} = {se:.3g} at t = {time_text(ta)} and doubling "
                f"within {se / re:.2g}, where {phase} could go no further ({sol.message} The "
                f"float64 spacing of t is {float(np.spacing(ta)):.2g} there); the blow-up time "
                f"{time_text(blowup)} is known only to within {se / re:.2g}{after}. Times nearer 0 "
                "resolve it further."
            )
    return GaussianPath(times_out, means, covs, status, message, blowup)


@float_guard("the cone coordinates", "rescale `covariances`")
def cone_coordinates(covariances: ArrayLike) -> FloatArray:
    r"""Coordinates ``(a - b, 2c, a + b)`` of 2x2 covariances in the PSD cone.

    :math:`\Sigma = \begin{psmallmatrix}a&c\\c&b\end{psmallmatrix}` is PSD iff
    :math:`\sqrt{(a-b)^2 + (2c)^2} \le a+b`, i.e. iff the point lies in the upright circular
    cone (the squared inequality alone also admits the downward cone, :math:`-I` for instance);
    rank-one covariances lie on its surface, whose apex is :math:`\Sigma = 0`.

    Parameters
    ----------
    covariances : (..., 2, 2) array

    Returns
    -------
    (..., 3) array

    Raises
    ------
    ValueError
        If `covariances` does not have shape ``(..., 2, 2)``.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> from token_dynamics.gaussian import cone_coordinates
    >>> cone_coordinates([[1.0, 0.0], [0.0, 0.0]])
    array([1., 0., 1.])
    """
    S = as_real_array(covariances, "covariances")
    if S.shape[-2:] != (2, 2):
        raise ValueError(f"`covariances` must have shape (..., 2, 2); got {S.shape}.")
    a, b, c = S[..., 0, 0], S[..., 1, 1], 0.5 * (S[..., 0, 1] + S[..., 1, 0])
    return np.stack([a - b, 2.0 * c, a + b], axis=-1)
