r"""Discretisation error of the fixed-step integrators: the error at a time :math:`T` against the
step :math:`h = T/L`, and the order it shows (a ResNet of :math:`L` layers is Euler's method with
step :math:`T/L`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._guards import float_guard
from ._typing import ArrayLike, FloatArray
from ._validation import as_real_array, as_tokens, check_positive
from .diagnostics import fit_power_law
from .integrators import integrate

__all__ = ["StepErrors", "step_errors"]

#: The fixed-step methods whose error a step study measures (the adaptive ones choose their own).
FIXED_STEP_METHODS = ("euler", "rk4")


@dataclass(frozen=True)
class StepErrors:
    r"""Errors at time :math:`T` of one fixed-step method, one per number of steps.

    Attributes
    ----------
    method : str
        ``"euler"`` or ``"rk4"``.
    layers : ndarray of int, shape (k,)
        Numbers of steps :math:`L` (layers of the ResNet).
    steps : ndarray, shape (k,)
        The steps :math:`h = T/L`.
    errors : ndarray, shape (k,)
        Euclidean norm of the computed part minus the reference, at time :math:`T`.

    Examples
    --------
    Returned by :func:`step_errors`; Euler's method (the ResNet) has order one:

    >>> import numpy as np
    >>> import token_dynamics as td
    >>> from token_dynamics.discretisation import step_errors
    >>> field = td.Softmax(np.eye(2), -np.eye(2))
    >>> X0 = td.uniform_sphere(4, 2, rng=0)
    >>> ref = td.integrate(field, X0, [0.0, 1.0], method="solve_ivp", rtol=1e-13).final
    >>> study = step_errors(field, X0, 1.0, ref, [10, 20, 40])
    >>> study.steps
    array([0.1  , 0.05 , 0.025])
    >>> round(study.order)
    1
    """

    method: str
    layers: np.ndarray
    steps: FloatArray
    errors: FloatArray

    @property
    def order(self) -> float:
        r"""The observed order, the slope :math:`p` of the least-squares fit
        :math:`\text{error} \approx C h^p` on a log-log scale.

        Raises
        ------
        ValueError
            If an error is zero (the method is exact there: no order can be read off) or fewer
            than two distinct steps were taken.
        """
        if np.any(self.errors <= 0):
            raise ValueError(
                f"An error of {self.method} is zero at L = {self.layers[self.errors <= 0]}: the "
                "order cannot be fitted; take fewer layers (larger steps)."
            )
        if np.unique(self.steps).shape[0] < 2:
            raise ValueError("The order needs at least two distinct numbers of `layers`.")
        return fit_power_law(self.steps, self.errors).slope


def _layers(layers: object) -> np.ndarray:
    arr = np.asarray(layers, dtype=object).ravel()
    if arr.size == 0 or not all(
        isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= 1 for v in arr
    ):
        raise ValueError(
            f"`layers` must be a non-empty sequence of positive integers (numbers of steps); "
            f"got {layers!r}."
        )
    return arr.astype(np.int64)


@float_guard("the error at time T", "check that the run stays bounded up to `T`")
def step_errors(
    field: Callable[[float, FloatArray], ArrayLike],
    X0: ArrayLike,
    T: float,
    reference: ArrayLike,
    layers: ArrayLike,
    *,
    method: str = "euler",
    geometry: str = "euclidean",
    tokens: ArrayLike | None = None,
    coordinates: ArrayLike | None = None,
) -> StepErrors:
    r"""Error at time :math:`T` of a fixed-step integration against a reference, for several
    numbers of steps :math:`L`.

    .. math::

        e(h) = \big\| X^{(L)}_{\text{part}} - X_{\text{ref}} \big\|_2, \qquad h = T / L,

    where :math:`X^{(L)}` is :func:`~token_dynamics.integrators.integrate` with ``dt = T / L``,
    and the part compared is the rows `tokens` and the columns `coordinates` (all by default).
    For a method of order :math:`p`, :math:`e(h) \approx C h^p` once :math:`h` is small.

    Parameters
    ----------
    field : AttentionField or callable
        The velocity field ``(t, X) -> dX/dt``, as in :func:`~token_dynamics.integrators.integrate`.
    X0 : array_like, shape (n, d)
        Initial tokens.
    T : float
        Final time, positive.
    reference : array_like, shape (len(tokens), len(coordinates))
        The exact (or reference) value of the compared part at time `T`.
    layers : sequence of int
        Numbers of steps :math:`L`, each positive.
    method : {"euler", "rk4"}
        The fixed-step method (Euler is the ResNet).
    geometry : {"euclidean", "sphere"}
        As in :func:`~token_dynamics.integrators.integrate`.
    tokens, coordinates : sequence of int, optional
        Rows and columns of the state compared with `reference`.

    Returns
    -------
    StepErrors
        ``errors`` per number of layers, and the fitted ``order``.

    Raises
    ------
    ValueError
        If `T` is not positive, `layers` are not positive integers, `method` is not a
        fixed-step method, an index is out of range or `reference` does not have the shape of
        the compared part.
    TypeError
        If an array argument is not real.
    FloatingPointError
        If the integration leaves the float64 range before `T`.

    Examples
    --------
    RK4 against a tight adaptive run, on the second coordinate of the first token: order 4.

    >>> import numpy as np
    >>> import token_dynamics as td
    >>> from token_dynamics.discretisation import step_errors
    >>> field = td.Softmax(np.eye(2), -np.eye(2))
    >>> X0 = td.uniform_sphere(4, 2, rng=0)
    >>> ref = td.integrate(field, X0, [0.0, 1.0], method="solve_ivp", rtol=1e-13).final
    >>> study = step_errors(
    ...     field, X0, 1.0, ref[:1, 1:], [4, 8, 16], method="rk4", tokens=[0], coordinates=[1]
    ... )
    >>> round(study.order)
    4
    """
    X0 = as_tokens(X0, "X0")
    T = check_positive(T, "T")
    if method not in FIXED_STEP_METHODS:
        raise ValueError(
            f"`method` must be one of {FIXED_STEP_METHODS} (a fixed step h = T/L); got {method!r}."
        )
    L = _layers(layers)
    n, d = X0.shape
    rows = _indices(tokens, n, "tokens")
    cols = _indices(coordinates, d, "coordinates")
    ref = as_real_array(reference, "reference")
    if ref.shape != (rows.size, cols.size):
        raise ValueError(
            f"`reference` must have the shape {(rows.size, cols.size)} of the compared part "
            f"(`tokens` x `coordinates`); got {ref.shape}."
        )
    part = np.ix_(rows, cols)
    errors = np.empty(L.shape[0])
    for k, m in enumerate(L):
        final = integrate(field, X0, [0.0, T], method=method, dt=T / m, geometry=geometry).final
        diff = final[part] - ref
        scale = np.abs(diff).max()
        errors[k] = 0.0 if scale == 0 else scale * np.linalg.norm(diff / scale)
    return StepErrors(method=method, layers=L, steps=T / L, errors=errors)


def _indices(index: ArrayLike | None, size: int, name: str) -> np.ndarray:
    if index is None:
        return np.arange(size)
    arr = np.asarray(index, dtype=object).ravel()
    if arr.size == 0 or not all(
        isinstance(i, int | np.integer) and not isinstance(i, bool) and 0 <= i < size for i in arr
    ):
        raise ValueError(
            f"`{name}` must be a non-empty sequence of integers in [0, {size}); got {index!r}."
        )
    return arr.astype(np.int64)
