r"""One driver to integrate token dynamics: depth is time.

:func:`integrate` solves :math:`\dot X = f(t, X)` for tokens ``X`` of shape ``(n, d)`` with

- ``"euler"``: :math:`X \leftarrow X + h f(t, X)`, exactly a residual layer with layer scale
  ``h`` (order 1);
- ``"rk4"``: the classical fourth-order Runge-Kutta scheme (order 4);
- ``"solve_ivp"``: :func:`scipy.integrate.solve_ivp` (DOP853 by default) for reference runs;

in :math:`\mathbb R^d` or on the unit sphere (``geometry="sphere"``: Euler renormalises after
each step, as a ResNet with LayerNorm; RK4 and ``solve_ivp`` integrate the tangent projection
of the field, and RK4 also renormalises after each step).

Vocabulary (shared with :func:`token_dynamics.gaussian.solve_moments`): ``times`` are the
output times, ``dt`` the step (the maximal step of an adaptive method), ``method`` the scheme
(``"euler"``, ``"rk4"``, ``"solve_ivp"`` or a :data:`IVP_METHODS` name, which runs
``solve_ivp`` with that method), ``rtol``/``atol`` the tolerances of the adaptive methods,
``progress`` a progress bar; the result has ``.times``, ``.status`` and ``.message``.

Accuracy: without `dt`, Euler and RK4 choose their step by step doubling until the estimated
global error meets `rtol`/`atol` (:data:`DEFAULT_TOLERANCES`), and the result carries that
estimate (``error_estimate``); a run that misses the tolerance within its step budget
(``2^12`` steps) returns ``status="tolerance_not_met"`` with a :class:`ToleranceWarning`. An
explicit `dt` is the caller's choice of step (a depth of residual layers), run as given.

Failure policy (the library's, see the contributing guide): bad arguments raise ``ValueError``
or ``TypeError`` naming the argument; a numerical failure -- the tokens or the velocity field
becoming non-finite (a finite-time blow-up, or a step too large), whatever the method, at the
initial state or at any stage of a step -- raises ``FloatingPointError`` naming the time, the
method and the quantity. Nothing returns NaN or inf silently, and no run hangs on a
non-finite field.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

import numpy as np
from numpy.typing import DTypeLike
from scipy.integrate import solve_ivp

from ._backend import all_finite, is_numpy
from ._guards import progress_bar
from ._richardson import MAX_DEFAULT_STEPS, refine
from ._typing import ArrayLike, FloatArray
from ._validation import (
    as_dtype,
    as_times,
    as_tokens,
    as_tokens_xp,
    check_bool,
    check_positive,
    check_rtol,
    time_text,
)
from .geometry import _normalize_rows, _project_rows

if TYPE_CHECKING:  # tqdm is imported only when a bar is asked for
    from tqdm import tqdm

__all__ = [
    "DEFAULT_TOLERANCES",
    "GEOMETRIES",
    "IVP_METHODS",
    "METHODS",
    "STATUSES",
    "ToleranceWarning",
    "Trajectory",
    "integrate",
]

#: Methods of :func:`scipy.integrate.solve_ivp`, accepted by name by :func:`integrate` and by
#: :func:`token_dynamics.gaussian.solve_moments` (``"solve_ivp"`` means DOP853).
IVP_METHODS = ("DOP853", "RK45", "RK23", "Radau", "BDF", "LSODA")
#: Integration methods accepted by :func:`integrate`.
METHODS = ("euler", "rk4", "solve_ivp", *IVP_METHODS)
#: Geometries accepted by :func:`integrate`.
GEOMETRIES = ("euclidean", "sphere")
#: Relative slack in ``ceil(interval / dt)``: an interval that is a whole number of steps up to
#: rounding (0.1 / 0.01 = 10.000000000000002) gets that number of steps, not one more.
DT_SLACK = 1e-9
#: Most steps a run may ask for through `dt` (fixed steps, or the maximal step of an adaptive
#: method): 10^7 steps of even a 2-token field take minutes; a smaller `dt` is a mistake.
MAX_STEPS = 10**7
#: Most steps of the coarsest run of the step doubling of ``dt=None`` (shared out over the
#: intervals by length): the budget ``_richardson.MAX_DEFAULT_STEPS``, which a coarsest run
#: within it leaves as it was; beyond, the doubling may go to four times the coarsest run.
COARSEST_STEPS = MAX_DEFAULT_STEPS
#: Order of the fixed-step methods, read by the step doubling of ``dt=None``.
ORDERS = {"euler": 1, "rk4": 4}
#: Default ``(rtol, atol)`` of each method when `rtol`/`atol` are not given. ``solve_ivp``:
#: tight enough for a reference run. The fixed-step methods with ``dt=None`` bound the
#: estimated global error of each token at every output time by ``atol + rtol |x_i|``: RK4
#: meets 1e-6 with tens of steps per unit time on the book's fields; Euler, of order one, needs
#: about C / 1e-2 steps per unit time for 1e-2, and a tighter default would ask for thousands.
DEFAULT_TOLERANCES = {
    "euler": (1e-2, 1e-5),
    "rk4": (1e-6, 1e-9),
    "solve_ivp": (1e-10, 1e-12),
}
#: Loosest default ``(rtol, atol)`` with ``dtype="float32"``: float32 rounds at 6e-8, and a run
#: of a few hundred steps accumulates 1e-5, which a step doubling cannot resolve below.
FLOAT32_TOLERANCES = (1e-4, 1e-6)
#: Values of ``Trajectory.status``.
STATUSES = ("completed", "tolerance_not_met")


class ToleranceWarning(RuntimeWarning):
    """A step of a numerical method missed the accuracy it states; the message gives the estimate.

    :func:`integrate` with ``dt=None`` did not meet `rtol`/`atol` within its step budget: the
    result is still returned, with ``status="tolerance_not_met"``, the estimated error in
    ``error_estimate`` and the remedy in ``message``. Other steps that estimate their error
    (the central differences of
    :func:`token_dynamics.gradient_flow.bures_wasserstein_velocity`) warn the same way.
    """


@dataclass(frozen=True, eq=False)
class Trajectory:
    """A solution of the token ODE sampled at the requested times.

    Attributes
    ----------
    times : ndarray, shape (T,)
    states : ndarray, shape (T, n, d)
        ``states[k]`` holds the tokens at ``times[k]``; ``states[0]`` is the initial condition.
    method : str
        One of ``METHODS``.
    geometry : str
        One of ``GEOMETRIES``.
    n_steps : int
        Number of steps (fixed-step methods), or of evaluations of the field (``solve_ivp``).
    status : str
        One of :data:`STATUSES`. ``"completed"``: every requested time was reached (and, with
        ``dt=None`` for Euler and RK4, the estimated error is within the tolerance);
        ``"tolerance_not_met"``: every requested time was reached, but the estimated error of
        the default step misses the tolerance (a :class:`ToleranceWarning` was raised). A
        numerical failure raises ``FloatingPointError`` instead of returning.
    message : str
        What happened, in words.
    error_estimate : float or None
        With ``dt=None`` for Euler and RK4: the estimated global error, the largest Euclidean
        norm of a token's row of :math:`(X_{h/2} - X_h)/(2^p - 1)` over the output times
        (Richardson, from the last two runs of the step doubling). ``None`` where no estimate
        is made: an explicit `dt` (the step is the caller's choice) and ``solve_ivp`` (which
        controls its local error by `rtol`/`atol` and reports no global estimate).

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025 (depth as time).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.integrators import integrate
    >>> traj = integrate(lambda t, X: -X, np.ones((1, 2)), [0.0, 1.0], method="euler", dt=0.5)
    >>> traj.states.shape, traj.n_steps
    ((2, 1, 2), 2)
    >>> traj.final                       # two residual layers x <- x - x/2
    array([[0.25, 0.25]])
    """

    times: np.ndarray
    states: np.ndarray
    method: str
    geometry: str
    n_steps: int = 0
    status: str = "completed"
    message: str = "reached the final time."
    error_estimate: float | None = None

    @property
    def final(self) -> np.ndarray:
        """Tokens at the last time, shape ``(n, d)``."""
        return self.states[-1, ...]  # the array API indexes every axis (array-api-strict)


def _choice(value: object, name: str, options: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"`{name}` must be one of {options}; got {value!r}.")
    return value


def _blow_up(
    t: float, method: str, what: str = "tokens", *, numpy: bool = True
) -> FloatingPointError:
    other = "use method='solve_ivp'" if numpy else "pass numpy tokens to use method='solve_ivp'"
    fix = (
        f"Reduce `dt` or the final time, or {other}."
        if method in ("euler", "rk4")
        else "Stop before that time, or check the field for a finite-time blow-up."
    )
    return FloatingPointError(
        f"The {what} became non-finite at t = {time_text(t)} with method={method!r}: the dynamics "
        f"may blow up in finite time, or the step is too large. {fix}"
    )


def integrate(
    field: Callable[[float, FloatArray], ArrayLike],
    X0: ArrayLike,
    times: ArrayLike,
    *,
    method: str = "rk4",
    dt: float | None = None,
    geometry: str = "euclidean",
    rtol: float | None = None,
    atol: float | None = None,
    progress: bool = False,
    ivp_method: str | None = None,
    dtype: DTypeLike | None = None,
) -> Trajectory:
    r"""Integrate :math:`\dot X(t) = f(t, X(t))` from ``X0`` and sample it at ``times``.

    With ``method="euler"`` one step is a residual layer,

    .. math::

        X^{\ell+1} = X^\ell + h\, f(t_\ell, X^\ell) ,

    followed on the sphere by the row normalisation :math:`x \mapsto x/|x|` (LayerNorm).

    Parameters
    ----------
    field : callable ``f(t, X) -> (n, d)``
        Velocity field, e.g. any :class:`~token_dynamics.attention.AttentionField`.
    X0 : array_like, shape (n, d)
        Initial tokens (of unit norm when ``geometry="sphere"``; they are normalised).
    times : array_like, shape (T,)
        Strictly increasing output times; ``times[0]`` is the initial time.
    method : {"euler", "rk4", "solve_ivp"} or a name in :data:`IVP_METHODS`
        A :data:`IVP_METHODS` name runs ``solve_ivp`` with that method.
    dt : float, optional
        Fixed-step methods: each interval between output times is split into
        ``ceil(interval / dt)`` equal steps. If ``None`` (the default), the step is chosen to
        meet `rtol`/`atol` by step doubling: every interval is split into equal steps, starting
        from about one step per :math:`|X_0|/|f(t_0, X_0)|` (at most ``2^12`` steps in all,
        so that tokens at the origin start somewhere), and all steps are halved until
        the Richardson estimate of the global error, :math:`(X_{h/2} - X_h)/(2^p - 1)`, is
        within ``atol + rtol |x_i|`` for every token (in the Euclidean norm of its row) at
        every output time, and has not grown since the halving before (so three runs at
        least: two coarse runs may agree by chance). At most ``2^12`` steps: beyond that the
        result says ``"tolerance_not_met"`` and a :class:`ToleranceWarning` is raised. A
        field that vanishes at every time the runs sample can still mislead the estimate, as
        it can any estimate read from samples of the field. ``solve_ivp``: the maximal step
        (no limit if ``None``).
    geometry : {"euclidean", "sphere"}
    rtol, atol : float, optional
        Tolerances: of ``solve_ivp``'s local error control, and of the estimated global error
        of the fixed-step methods with ``dt=None`` (ignored with an explicit `dt`). Defaults:
        :data:`DEFAULT_TOLERANCES` (loosened to ``FLOAT32_TOLERANCES`` for the fixed-step
        methods in float32).
    progress : bool
        Show a ``tqdm`` progress bar (off by default).
    ivp_method : str, optional
        Method passed to :func:`scipy.integrate.solve_ivp` with ``method="solve_ivp"``
        (DOP853 by default); the same as passing that name as `method`.
    dtype : {None, "float64", "float32"}
        Precision of the states and of the field's evaluations (an attention field computes in
        the dtype of the tokens it is given; another callable's values are rounded to it).
        ``None`` (the default) is float64 for numpy tokens (float32 ones included), and for the
        tokens of another library their own precision, float32 staying float32 (as a field's
        ``velocity`` does: a float32 tensor on a GPU is not run in float64). The
        ``solve_ivp`` methods integrate in float64 (scipy's) and return the states in `dtype`.
        With ``"float32"`` the fixed-step methods agree with float64 to about the number of
        steps times float32's round-off, 6e-8, times the growth of perturbations along the flow
        (checked by the library's test suite).

    Returns
    -------
    Trajectory
        ``times`` of shape ``(T,)`` and ``states`` of shape ``(T, n, d)``, ``status``,
        ``message`` and, with ``dt=None`` for Euler and RK4, ``error_estimate``.

    Raises
    ------
    ValueError
        If `field` is not callable or returns another shape, `method`, `ivp_method`,
        `geometry` or `dtype` is not one of its values, `times` are not strictly increasing,
        `X0` is not an ``(n, d)`` array of finite reals (or has a zero row on the sphere),
        `dt`, `rtol` or `atol` is out of range, or `dt` asks for more than ``MAX_STEPS`` steps.
    TypeError
        If an array argument or the field's value is not real, or `X0` of another array
        library comes without an explicit `dt` or with a ``solve_ivp`` method.
    FloatingPointError
        If the tokens or the field become non-finite (finite-time blow-up or a too large step),
        for every method alike, naming the time, the method and the quantity.

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer,
    1993. B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.linalg import expm
    >>> from token_dynamics.integrators import integrate
    >>> M = np.array([[0.0, 1.0], [-1.0, 0.0]])
    >>> X0 = np.array([[1.0, 0.0]])
    >>> traj = integrate(lambda t, X: X @ M.T, X0, [0.0, 1.0], dt=0.01)
    >>> np.allclose(traj.final, X0 @ expm(M).T, atol=1e-9)
    True

    Without `dt`, RK4 chooses its step for the default tolerance and says how close it got:

    >>> traj = integrate(lambda t, X: X @ M.T, X0, [0.0, 1.0])
    >>> traj.status, traj.error_estimate < 1e-6
    ('completed', True)
    >>> bool(np.abs(traj.final - X0 @ expm(M).T).max() < 1e-6)
    True
    """
    if not callable(field):
        raise ValueError(
            f"`field` must be a callable f(t, X) -> (n, d); got {type(field).__name__}."
        )
    method = name = _choice(method, "method", METHODS)
    if ivp_method is not None:
        if method != "solve_ivp":
            raise ValueError(
                f"`ivp_method` is only read with method='solve_ivp'; got method={method!r}. "
                f"Pass method={ivp_method!r} alone."
            )
        method = _choice(ivp_method, "ivp_method", IVP_METHODS)
    geometry = _choice(geometry, "geometry", GEOMETRIES)
    dtype = None if dtype is None and not is_numpy(X0) else as_dtype(dtype)
    if not is_numpy(X0):  # torch, JAX, ... (``_backend``): fixed steps in the caller's library
        return _integrate_xp(field, X0, as_times(times), method, dt, geometry, dtype, progress)
    X0 = as_tokens(X0, "X0")
    times = as_times(times)
    if dt is not None:
        dt = check_positive(dt, "dt")
        substeps = _step_counts(times, dt)
    default_rtol, default_atol = DEFAULT_TOLERANCES.get(method, DEFAULT_TOLERANCES["solve_ivp"])
    if method in ORDERS and dtype == np.float32:
        default_rtol = max(default_rtol, FLOAT32_TOLERANCES[0])
        default_atol = max(default_atol, FLOAT32_TOLERANCES[1])
    rtol = check_rtol(default_rtol if rtol is None else rtol)
    atol = check_positive(default_atol if atol is None else atol, "atol")
    check_bool(progress, "progress")
    sphere = geometry == "sphere"
    if sphere:
        if np.any(np.all(X0 == 0, axis=1)):
            raise ValueError("`X0` has a zero row, which has no point on the sphere.")
        X0 = _normalize_rows(X0)
    ivp = method not in ("euler", "rk4")
    X0 = X0.astype(np.float64 if ivp else dtype, copy=False)

    def rhs(t: float, X: np.ndarray, project: bool) -> np.ndarray:
        # Every evaluation checks its input and its output: a stage of RK4 or of solve_ivp
        # that turned non-finite is the same numerical failure as a non-finite step of Euler,
        # and a non-finite field would make solve_ivp shrink its step forever.
        if not np.all(np.isfinite(X)):
            raise _blow_up(t, name)
        try:
            V = np.asarray(field(t, X))
        except (ValueError, TypeError) as exc:
            raise type(exc)(
                f"`field` refused the state built from `X0` (shape {X.shape}) at "
                f"t = {time_text(t)}: {exc}"
            ) from exc
        if V.dtype.kind not in "fiu":  # a cast would drop an imaginary part silently
            raise TypeError(
                f"`field` must return real numbers; it returned dtype {V.dtype} at "
                f"t = {time_text(t)}."
            )
        V = V.astype(X.dtype, copy=False)
        if V.shape != X.shape:
            raise ValueError(f"`field` must return an array of shape {X.shape}; got {V.shape}.")
        if not np.all(np.isfinite(V)):
            raise _blow_up(t, name, "velocity field's values")
        return _project_rows(X, V) if project else V

    if ivp:
        ivp_name = "DOP853" if method == "solve_ivp" else method
        traj = _solve_ivp(rhs, X0, times, dt, sphere, rtol, atol, progress, ivp_name, name)
        return dataclasses.replace(traj, states=traj.states.astype(dtype, copy=False))

    step = _euler if method == "euler" else _rk4

    def run(substeps: list[int], bar: tqdm[NoReturn] | None = None) -> np.ndarray:
        return _fixed_steps(step, rhs, X0, times, substeps, sphere, dtype, method, bar)

    if dt is not None:
        bar = progress_bar(progress, sum(substeps), f"integrate ({method})")
        try:
            states = run(substeps, bar)
        finally:
            if bar is not None:
                bar.close()
        return Trajectory(times, states, method, geometry, int(sum(substeps)))
    return _default_step(run, rhs, X0, times, sphere, method, geometry, rtol, atol, progress)


def _fixed_steps(step, rhs, X0, times, substeps, sphere, dtype, method, bar):
    """States at `times` after ``substeps[k]`` equal steps on the k-th interval."""
    states = np.empty((times.size, *X0.shape), dtype=dtype)
    states[0] = X0
    X = X0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for k, m in enumerate(substeps):
            h = float(times[k + 1] - times[k]) / m  # a Python float keeps the dtype
            for s in range(m):
                t = times[k] + s * h
                X = step(rhs, t, X, h, sphere)
                if not np.all(np.isfinite(X)):
                    raise _blow_up(t + h, method)
                if bar is not None:
                    bar.update(1)
            states[k + 1] = X
    return states


def _default_step(run, rhs, X0, times, sphere, method, geometry, rtol, atol, progress):
    """``dt=None`` for Euler and RK4: step doubling from a step set by the field's scale."""
    if times.size == 1:
        return Trajectory(times, X0[None].copy(), method, geometry, 0, error_estimate=0.0)
    # The field's rate |f| / |X| at the start sets the coarsest step: one step per 1/rate (a
    # step that moves the tokens by about their size), the interval itself if the field is 0.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        V = np.abs(rhs(float(times[0]), X0, sphere).astype(np.float64)).max()
        rate = V / max(float(np.abs(X0).max()), np.finfo(np.float64).tiny)
    intervals = np.diff(times)
    coarsest = [max(1, math.ceil(float(L) * rate)) if np.isfinite(rate) else 1 for L in intervals]
    # at most COARSEST_STEPS in all (each interval its share, one step at least): tokens at or
    # near 0 under a nonzero field give a rate of |f| / tiny, and 1e307 steps never returned
    cap = [max(1, math.ceil(COARSEST_STEPS * float(L / intervals.sum()))) for L in intervals]
    coarsest = [min(m, c) for m, c in zip(coarsest, cap, strict=True)]
    bar = progress_bar(progress, 0, f"integrate ({method}, dt=None)")

    def counted(substeps: list[int]) -> np.ndarray:
        if bar is not None:
            bar.reset(total=sum(substeps))
        return run(substeps, bar)

    try:
        refined = refine(counted, coarsest, ORDERS[method], rtol, atol)
    finally:
        if bar is not None:
            bar.close()
    n_steps = int(sum(refined.substeps))
    h = float(np.min(intervals / np.asarray(refined.substeps)))
    if refined.met:
        status = "completed"
        message = (
            f"reached the final time; estimated error {refined.error:.2g} within rtol = "
            f"{rtol:g}, atol = {atol:g} ({n_steps} steps, step doubling)."
        )
    else:
        status = "tolerance_not_met"
        message = (
            f"reached the final time, but the estimated error {refined.error:.3g} misses "
            f"rtol = {rtol:g}, atol = {atol:g} at the finest step tried, h = {h:.3g} "
            f"({n_steps} steps): the field may be stiff or near a blow-up. Pass a smaller "
            "`dt`, loosen `rtol`/`atol`, or use method='solve_ivp'."
        )
        warnings.warn(f"integrate({method!r}): {message}", ToleranceWarning, stacklevel=3)
    return Trajectory(
        times, refined.states, method, geometry, n_steps, status, message, refined.error
    )


def _step_counts(times: FloatArray, dt: float) -> list[int]:
    """Steps of one interval of `times` each, of size at most `dt` (up to ``DT_SLACK``); a run
    of more than ``MAX_STEPS`` steps in all is refused by name (`integrate` and the
    phase diagram share it)."""
    with np.errstate(over="ignore"):
        n_steps = (times[-1] - times[0]) / dt
    if n_steps > MAX_STEPS:
        raise ValueError(
            f"`dt` = {dt:g} asks for about {n_steps:.3g} steps over [{times[0]:g}, "
            f"{times[-1]:g}], more than {MAX_STEPS:.0e}; pass a larger `dt` or shorter `times`."
        )
    return [max(1, math.ceil((b - a) / dt * (1 - DT_SLACK))) for a, b in itertools.pairwise(times)]


def _integrate_xp(field, X0, times, method, dt, geometry, dtype, progress):
    """Euler or RK4 with an explicit `dt` on tokens of another array library: the states stay
    in the caller's library and on its device (``states`` is an array of it, shape (T, n, d))."""
    kind = f"{type(X0).__module__}.{type(X0).__name__}"
    if method not in ("euler", "rk4") or dt is None:
        raise TypeError(
            f"`X0` is a {kind}: on arrays other than numpy's, `integrate` runs method='euler' "
            "or 'rk4' with an explicit `dt` (the step doubling of dt=None and solve_ivp need "
            "numpy); pass e.g. method='rk4', dt=0.01, or `np.asarray(X0)` (`X0.cpu().numpy()`)."
        )
    dt = check_positive(dt, "dt")
    check_bool(progress, "progress")
    xp, X = as_tokens_xp(X0, "X0", dtype)
    sphere = geometry == "sphere"

    def normalise(Z):
        return Z / xp.linalg.vector_norm(Z, axis=1, keepdims=True)

    if sphere:
        if not bool(xp.all(xp.any(X != 0, axis=1))):
            raise ValueError("`X0` has a zero row, which has no point on the sphere.")
        # each row over its largest entry first: the squares of rows of norm 1e-160 (1e-21 in
        # float32) are subnormal and those of 1e200 overflow; the steps stay near norm one
        X = normalise(X / xp.max(xp.abs(X), axis=1, keepdims=True))
        if not all_finite(xp, X):  # subnormal rows, which XLA on the CPU reads as zeros
            raise ValueError(
                "`X0` has rows too small to normalise on this array library (below the "
                "smallest normal float); scale `X0` up, or pass it as a numpy array."
            )

    def rhs(t, Z, project):
        V = field(t, Z)
        if is_numpy(V) or not hasattr(V, "shape"):  # a list, or numpy next to a tensor
            raise TypeError(
                f"`field` must return an array of the tokens' library ({type(Z).__name__}); got "
                f"{type(V).__name__}."
            )
        if tuple(V.shape) != tuple(Z.shape):
            raise ValueError(
                f"`field` must return an array of shape {tuple(Z.shape)}; got {tuple(V.shape)}."
            )
        if project:  # tangent part: V - <V, x> x / |x|^2, row by row
            coef = xp.sum(V * Z, axis=1, keepdims=True) / xp.sum(Z * Z, axis=1, keepdims=True)
            V = V - coef * Z
        return V

    def step(t, Z, h):
        if method == "euler":
            Z = Z + h * rhs(t, Z, False)
        else:
            k1 = rhs(t, Z, sphere)
            k2 = rhs(t + h / 2, Z + (h / 2) * k1, sphere)
            k3 = rhs(t + h / 2, Z + (h / 2) * k2, sphere)
            k4 = rhs(t + h, Z + h * k3, sphere)
            Z = Z + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
        return normalise(Z) if sphere else Z

    substeps = _step_counts(times, dt)
    states = [X]
    for k, m in enumerate(substeps):
        h = float(times[k + 1] - times[k]) / m
        for s in range(m):
            t = float(times[k] + s * h)
            X = step(t, X, h)
            if not all_finite(xp, X):
                raise _blow_up(t + h, method, numpy=False)
        states.append(X)
    return Trajectory(times, xp.stack(states), method, geometry, int(sum(substeps)))


def _euler(rhs, t, X, h, sphere):
    X = X + h * rhs(t, X, False)
    return _normalize_rows(X) if sphere else X


def _rk4(rhs, t, X, h, sphere):
    k1 = rhs(t, X, sphere)
    k2 = rhs(t + h / 2, X + (h / 2) * k1, sphere)
    k3 = rhs(t + h / 2, X + (h / 2) * k2, sphere)
    k4 = rhs(t + h, X + h * k3, sphere)
    X = X + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return _normalize_rows(X) if sphere else X


def _solve_ivp(rhs, X0, times, dt, sphere, rtol, atol, progress, ivp_method, name):
    shape = X0.shape
    t0, t1 = float(times[0]), float(times[-1])
    geometry = "sphere" if sphere else "euclidean"
    if times.size == 1:
        return Trajectory(times, X0[None].copy(), name, geometry, message="single time.")
    bar = progress_bar(progress, t1 - t0, f"integrate (solve_ivp/{ivp_method})")
    reached = [t0]

    def fun(t, y):
        if t > reached[0]:
            if bar is not None:
                bar.update(t - reached[0])
            reached[0] = t
        return rhs(t, y.reshape(shape), sphere).ravel()

    kwargs = {} if dt is None else {"max_step": dt}
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            sol = solve_ivp(
                fun, (t0, t1), X0.ravel(), method=ivp_method, t_eval=times, rtol=rtol,
                atol=atol, **kwargs,
            )  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    if sol.status < 0 or not np.all(np.isfinite(sol.y)):
        t_fail = reached[0]  # the latest time at which the field was evaluated
        if sol.y.size and not np.all(np.isfinite(sol.y)):
            raise _blow_up(t_fail, name)
        raise FloatingPointError(
            f"solve_ivp ({ivp_method}) stopped near t = {time_text(t_fail)} with method={name!r}: "
            f"{sol.message} The tokens blow up in finite time near t = {time_text(t_fail)}, or the "
            "field is too stiff for the method (try method='Radau' or loosen `rtol`/`atol`)."
        )
    states = sol.y.T.reshape(times.size, *shape)
    return Trajectory(times, states, name, geometry, int(sol.nfev))
