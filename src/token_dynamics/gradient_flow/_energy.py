"""The interaction energy of particles, its first variation, gradient and rate (private)."""

from __future__ import annotations

import numpy as np

from .._guards import checked_finite, float_guard
from .._typing import ArrayLike, FloatArray
from .._validation import (
    MATRIX_RTOL,
    as_matrix,
    as_real_array,
    as_square,
    as_symmetric,
    as_tokens,
    as_vector,
    as_weights,
)

__all__ = [
    "energy_along",
    "energy_gradient",
    "energy_rate",
    "first_variation",
    "monotonicity_sign",
    "particle_energy",
    "translation_second_variation",
]


#: How the chapter words its requirement on the interaction matrix ``A``: the energies are
#: gradient flows of attention only for a symmetric ``A``.
SYMMETRIC_A = "a symmetric (d, d) matrix here"


def _measure_args(
    X: ArrayLike, A: ArrayLike, points: ArrayLike | None, weights: ArrayLike | None
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Validate ``(X, A, points, weights)``; ``points`` default to the tokens."""
    X = as_tokens(X)
    n, d = X.shape
    A = as_square(A, "A", d=d)
    Y = X if points is None else as_tokens(points, "points", d=d)
    return X, A, Y, as_weights(weights, n)


def _kernels(X, A, Y):
    """K1[k, j] = e^{<A y_k, x_j>}, K2[k, j] = e^{<A x_j, y_k>}, as exponents."""
    with np.errstate(over="ignore", invalid="ignore"):
        S1, S2 = Y @ A.T @ X.T, Y @ A @ X.T
    _check_exponents(S1, S2)
    return S1, S2


def _check_exponents(*exponents: FloatArray) -> None:
    if not all(np.all(np.isfinite(S)) for S in exponents):
        raise FloatingPointError(
            "the exponents <A x_i, x_j> overflow float64, so e^<A x_i, x_j> has no float value; "
            "scale `A` or the tokens `X` down."
        )


def _exp_sum(S: FloatArray, w: FloatArray, values: FloatArray, quantity: str) -> FloatArray:
    """``sum_j w_j e^{S_kj} values_j`` for each row k, as e^{m_k} sum_j w_j e^{S_kj - m_k} ...

    with m_k the row maximum: the sum is formed without overflow, and only a result beyond the
    float64 range raises ``FloatingPointError`` (naming `quantity`). Where e^{m_k} overflows
    but small weights bring the sum back into range, it is e^{m_k + log|sum_j ...|} (exact to
    the rounding of that exponent, a few ulps of m_k).
    """
    top = S.max(axis=1, keepdims=True)
    inner = (np.exp(S - top) * w) @ values
    m = top if inner.ndim == 2 else top[:, 0]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = np.exp(m) * inner
        out = np.where(np.isfinite(out), out, np.sign(inner) * np.exp(m + np.log(np.abs(inner))))
    if not np.all(np.isfinite(out)):
        raise FloatingPointError(
            f"the {quantity} exceeds the float64 range (exponents up to {float(m.max()):.4g}); "
            "scale `A` or the tokens `X` down."
        )
    return out


@float_guard("the particle energy", "rescale `X` or `A`")
def particle_energy(A: ArrayLike, X: ArrayLike, *, weights: ArrayLike | None = None) -> float:
    r"""Interaction energy :math:`\frac12\sum_{ij} w_i w_j e^{\langle A x_i, x_j\rangle}`.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Attention matrix (any, not necessarily symmetric).
    X : array_like, shape (n, d)
        Tokens, one per row.
    weights : array_like, shape (n,), optional
        Probability weights; uniform ``1/n`` by default.

    Returns
    -------
    float
        :math:`\mathcal E_A(\mu)` for :math:`\mu = \sum_i w_i \delta_{x_i}`.

    Raises
    ------
    FloatingPointError
        If the energy exceeds the float64 range (scale ``A`` or the tokens down).

    Notes
    -----
    The same quantity as :func:`token_dynamics.diagnostics.interaction_energy` with
    ``beta=1`` (which computes it, through log-sum-exp), named here as the energy of the
    gradient-flow chapter.

    References
    ----------
    Castin et al., arXiv:2501.18322, the interaction energy of the Transformer PDE.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import particle_energy
    >>> round(particle_energy(-np.eye(2), [[1.0, 0.0]]), 12)  # one Dirac: e^{-|x|^2} / 2
    0.183939720586
    """
    from ..diagnostics import interaction_energy

    X = as_tokens(X)
    A = as_square(A, "A", d=X.shape[1])
    try:
        return interaction_energy(X, beta=1.0, weights=weights, A=A)
    except FloatingPointError:  # its message tells to lower `beta`, which is not an argument here
        raise FloatingPointError(
            "the particle energy exceeds the float64 range; rescale `X` or `A`."
        ) from None


@float_guard("the first variation", "scale `A`, `X` or `points` down")
def first_variation(
    A: ArrayLike, X: ArrayLike, points: ArrayLike | None = None, *, weights: ArrayLike | None = None
) -> FloatArray:
    r"""First variation :math:`\frac{\delta\mathcal E}{\delta\mu}` evaluated at ``points``.

    .. math::

        \frac{\delta\mathcal E}{\delta\mu}(y) = \frac12\int \big(e^{\langle Ay,x\rangle}
        + e^{\langle Ax,y\rangle}\big)\, d\mu(x),

    which is :math:`Z_\mu(y)` when :math:`A` is symmetric.

    Parameters
    ----------
    A : array_like, shape (d, d)
    X : array_like, shape (n, d)
        Tokens of :math:`\mu`.
    points : array_like, shape (m, d), optional
        Where to evaluate; the tokens themselves by default.
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (m,)

    Raises
    ------
    ValueError
        If `X` or `points` is not an array of tokens in the same dimension, `A` is not ``(d, d)`` or
        `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    Castin et al., arXiv:2501.18322.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import first_variation
    >>> first_variation(np.eye(2), [[0.0, 0.0]], [[1.0, 1.0]])
    array([1.])
    """
    X, A, Y, w = _measure_args(X, A, points, weights)
    S1, S2 = _kernels(X, A, Y)
    one = np.ones(X.shape[0])
    quantity = "first variation"
    return 0.5 * _exp_sum(S1, w, one, quantity) + 0.5 * _exp_sum(S2, w, one, quantity)


@float_guard("the energy gradient", "scale `A`, `X` or `points` down")
def energy_gradient(
    A: ArrayLike, X: ArrayLike, points: ArrayLike | None = None, *, weights: ArrayLike | None = None
) -> FloatArray:
    r"""Gradient :math:`\nabla_y\frac{\delta\mathcal E}{\delta\mu}(y)` at ``points``.

    .. math::

        \nabla\frac{\delta\mathcal E}{\delta\mu}(y) = \frac12\int\big(e^{\langle Ay,x\rangle}
        A^\top x + e^{\langle Ax,y\rangle} A x\big)\, d\mu(x),

    equal to :math:`A\int e^{\langle Ay,x\rangle}x\,d\mu(x)` for symmetric :math:`A`. For the
    empirical measure, :math:`\partial\mathcal E/\partial x_i = w_i\nabla\frac{\delta\mathcal
    E}{\delta\mu}(x_i)`.

    Parameters
    ----------
    A : array_like, shape (d, d)
    X : array_like, shape (n, d)
    points : array_like, shape (m, d), optional
        The tokens by default.
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (m, d)

    Raises
    ------
    ValueError
        If `X` or `points` is not an array of tokens in the same dimension, `A` is not ``(d, d)`` or
        `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    Castin et al., arXiv:2501.18322.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import energy_gradient
    >>> energy_gradient(2 * np.eye(2), [[1.0, 0.0]], [[0.0, 0.0]])
    array([[2., 0.]])
    """
    X, A, Y, w = _measure_args(X, A, points, weights)
    S1, S2 = _kernels(X, A, Y)
    quantity = "energy gradient"
    return 0.5 * (_exp_sum(S1, w, X @ A, quantity) + _exp_sum(S2, w, X @ A.T, quantity))


@float_guard("the energy rate", "rescale `X`, `velocity` or `A`")
def energy_rate(
    A: ArrayLike, X: ArrayLike, velocity: ArrayLike, *, weights: ArrayLike | None = None
) -> float:
    r"""Time derivative of :math:`\mathcal E_A` when token :math:`x_i` moves with :math:`v_i`.

    .. math:: \frac{d}{dt}\mathcal E = \sum_i w_i\,\nabla\tfrac{\delta\mathcal E}{\delta\mu}(x_i)
        \cdot v_i .

    Parameters
    ----------
    A : array_like, shape (d, d)
    X, velocity : array_like, shape (n, d)
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `velocity` does not have the shape of `X`, `A` is not ``(d, d)`` or `weights` are not
        probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).
    FloatingPointError
        If the rate leaves the float64 range.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import energy_rate
    >>> energy_rate(-np.eye(2), [[1.0, 0.0]], [[1.0, 0.0]])  # d/dt e^{-(1+t)^2}/2 at t=0
    -0.36787944117144233
    """
    X = as_tokens(X)
    n, d = X.shape
    v = as_tokens(velocity, "velocity", d=d)
    if v.shape != X.shape:
        raise ValueError(f"`velocity` must have the shape of `X` {X.shape}; got {v.shape}.")
    w = as_weights(weights, n)
    rate = float(np.einsum("i,ik,ik->", w, energy_gradient(A, X, weights=w), v))
    return checked_finite(rate, "the energy rate", "rescale `X`, `velocity` or `A`")


@float_guard("the energy along the trajectory", "rescale `states` or `A`")
def energy_along(
    A: ArrayLike, states: ArrayLike, *, weights: ArrayLike | None = None
) -> FloatArray:
    r"""Energy :func:`particle_energy` at each state of a trajectory.

    .. math:: \mathcal E(X_t) = \frac12\sum_{i,j} w_i w_j e^{\langle A x_i(t), x_j(t)\rangle},
              \qquad t = t_0, \dots, t_{T-1}.

    Parameters
    ----------
    A : array_like, shape (d, d)
    states : array_like, shape (T, n, d)
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (T,)

    Raises
    ------
    ValueError
        If `states` does not have shape ``(T, n, d)`` or `A`, `weights` do not match it.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import energy_along
    >>> energy_along([[1.0]], np.zeros((3, 2, 1)))
    array([0.5, 0.5, 0.5])
    """
    arr = as_real_array(states, "states")
    if arr.ndim != 3:
        raise ValueError(f"`states` must have shape (T, n, d); got shape {arr.shape}.")
    return np.array([particle_energy(A, X, weights=weights) for X in arr])


@float_guard("the monotonicity sign", "rescale `A` or `V`")
def monotonicity_sign(A: ArrayLike, V: ArrayLike) -> int:
    r"""Predicted sign of :math:`d\mathcal E/dt` for softmax and unnormalised attention.

    For symmetric :math:`A`, :math:`\frac{d}{dt}\mathcal E = \sum_i w_i Z_i^k\, m_i^\top AV m_i`
    (:math:`k = 1` softmax, :math:`k = 2` unnormalised), so the sign is that of
    :math:`AV + V^\top A^\top` when it is semidefinite.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric attention matrix.
    V : array_like, shape (d, d)
        Value matrix.

    Returns
    -------
    int
        ``+1`` (energy non-decreasing), ``-1`` (non-increasing) or ``0`` (indefinite, no
        prediction).

    Raises
    ------
    ValueError
        If `A` is not symmetric or `V` has another shape.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import monotonicity_sign
    >>> monotonicity_sign(-np.eye(2), np.eye(2))
    -1
    >>> monotonicity_sign(np.eye(2), np.diag([1.0, -1.0]))  # AV indefinite: no prediction
    0
    """
    A = as_matrix(A, "A")
    A = as_symmetric(A, "A", what=SYMMETRIC_A)
    V = as_square(V, "V", d=A.shape[0])
    lam = np.linalg.eigvalsh(A @ V + V.T @ A)
    # rounding relative to the sizes of A and V (no absolute floor: the sign is unchanged by
    # rescaling A or V, and so must the answer be)
    tol = MATRIX_RTOL * A.shape[0] * np.abs(A).max() * np.abs(V).max()
    if lam.min() >= -tol:
        return 1
    if lam.max() <= tol:
        return -1
    return 0


@float_guard("the second variation", "scale `A`, `X` or `direction` down")
def translation_second_variation(
    A: ArrayLike, X: ArrayLike, direction: ArrayLike, *, weights: ArrayLike | None = None
) -> float:
    r"""Exact :math:`\frac{d^2}{ds^2}\mathcal E_A\big((x\mapsto x + sb)_\#\mu\big)` at :math:`s=0`.

    With :math:`f_{ij} = \langle Ax_i, x_j\rangle`, :math:`f'_{ij} = b^\top Ax_i + x_j^\top Ab`,
    the value is :math:`\frac12\sum_{ij} w_iw_j e^{f_{ij}}(f_{ij}'^2 + 2b^\top Ab)`.

    Parameters
    ----------
    A : array_like, shape (d, d)
    X : array_like, shape (n, d)
    direction : array_like, shape (d,)
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `A` is not ``(d, d)``, `direction` not ``(d,)`` or `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> from token_dynamics.gradient_flow import translation_second_variation
    >>> translation_second_variation([[-1.0]], [[0.0]], [1.0])  # e^{-s^2}/2 at 0
    -1.0
    """
    X = as_tokens(X)
    n, d = X.shape
    A = as_square(A, "A", d=d)
    b = as_vector(direction, "direction", size=d)
    w = as_weights(weights, n)
    with np.errstate(over="ignore", invalid="ignore"):
        S = X @ A.T @ X.T
        fp = (X @ A.T @ b)[:, None] + (X @ A @ b)[None, :]
        factor = fp**2 + 2 * b @ A @ b
    _check_exponents(S, factor)
    m = float(S.max())
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.exp(m) * float(0.5 * w @ (np.exp(S - m) * factor) @ w)
    if not np.isfinite(out):
        raise FloatingPointError(
            f"the second variation exceeds the float64 range (exponents up to {m:.4g}); "
            "scale `A`, `direction` or the tokens `X` down."
        )
    return float(out)
