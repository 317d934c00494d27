"""The twisted Wasserstein metric and the gradient-flow identity of attention (private)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import checked_finite, float_guard
from .._typing import ArrayLike, FloatArray
from .._validation import MATRIX_RTOL, as_square, as_symmetric, as_tokens, as_weights
from ._energy import (
    SYMMETRIC_A,
    _check_exponents,
    _exp_sum,
    _measure_args,
    energy_gradient,
    energy_rate,
)

__all__ = [
    "GradientFlowCheck",
    "TwistedMetric",
    "TwistedMetricError",
    "gradient_flow_check",
    "softmax_metric_density",
    "twisted_metric",
    "twisted_wasserstein",
]


class TwistedMetricError(ValueError):
    """``P = V A^{-1}`` is not symmetric definite, so no twisted metric exists."""


def _attention_velocity(kind: str, X, A, V, w) -> FloatArray:
    """Velocity of attention.Unnormalised or attention.Softmax (beta = 1)."""
    from ..attention import Softmax, Unnormalised

    field = Unnormalised(A, V) if kind == "unnormalised" else Softmax(A, V)
    return field.velocity(X, weights=w)


def _wasserstein2(X, Y, wx, wy, metric):
    """Exact W2 with ground cost (x - y)^T metric (x - y), through the wasserstein module."""
    from ..wasserstein import wasserstein2

    return float(wasserstein2(X, Y, weights_x=wx, weights_y=wy, metric=metric))


@dataclass(frozen=True)
class TwistedMetric:
    r"""The twisted geometry of unnormalised attention.

    .. math::

        P = VA^{-1},

        c(x, y) = (x - y)^\top(\operatorname{sign} P\cdot P)^{-1}(x - y).

    Attributes
    ----------
    P : ndarray, shape (d, d)
        ``V A^{-1}``, symmetric definite.
    sign : int
        ``+1`` if ``P`` is positive definite (gradient ascent of the energy), ``-1`` if negative
        definite (descent).
    metric : ndarray, shape (d, d)
        ``(sign P)^{-1}``: the ground cost is ``(x - y)^T metric (x - y)``.

    Examples
    --------
    Returned by :func:`twisted_metric`; ``metric`` inverts ``sign * P``:

    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import twisted_metric
    >>> tm = twisted_metric(-np.diag([1.0, 2.0]), np.eye(2))
    >>> tm.sign, np.diag(tm.P)  # P = V A^{-1}
    (-1, array([-1. , -0.5]))
    >>> bool(np.allclose(tm.metric @ (tm.sign * tm.P), np.eye(2)))
    True
    """

    P: FloatArray
    sign: int
    metric: FloatArray


@float_guard("the twisted metric", "rescale `A` or `V`")
def twisted_metric(A: ArrayLike, V: ArrayLike) -> TwistedMetric:
    r"""The matrix :math:`P = VA^{-1}` and the twisted ground metric :math:`(\pm P)^{-1}`.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric, invertible.
    V : array_like, shape (d, d)

    Returns
    -------
    TwistedMetric

    Raises
    ------
    TwistedMetricError
        If ``A`` is singular or ``P`` is not symmetric, or not definite.

    References
    ----------
    Castin et al., arXiv:2501.18322 (the twisted Wasserstein distance; this reconstruction is
    the book's).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import twisted_metric
    >>> twisted_metric(2 * np.eye(2), np.eye(2)).metric
    array([[2., 0.],
           [0., 2.]])
    """
    A = as_symmetric(A, "A", what=SYMMETRIC_A)
    d = A.shape[0]
    V = as_square(V, "V", d=d)
    if np.linalg.cond(A) > 1.0 / MATRIX_RTOL:
        raise TwistedMetricError("`A` is singular (to working precision): P = V A^-1 is undefined.")
    P = V @ np.linalg.inv(A)
    scale = float(np.abs(P).max())  # P's own size: symmetry does not change with V -> c V
    if np.abs(P - P.T).max() > 1e3 * MATRIX_RTOL * scale * np.linalg.cond(A):
        raise TwistedMetricError(
            "P = V A^-1 of `V` and `A` is not symmetric (A V != V^T A): unnormalised attention "
            "is not a gradient flow for a twisted W2 metric; choose `V` = P A with P symmetric "
            "definite."
        )
    P = 0.5 * (P + P.T)
    lam = np.linalg.eigvalsh(P)
    if lam.min() > 0:
        sign = 1
    elif lam.max() < 0:
        sign = -1
    else:
        raise TwistedMetricError(
            f"P = V A^-1 of `V` and `A` is indefinite (eigenvalues from {lam.min():.3g} to "
            f"{lam.max():.3g}): (x - y)^T P^-1 (x - y) is not a cost; choose `V` = P A with P "
            "definite."
        )
    return TwistedMetric(P, sign, np.linalg.inv(sign * P).astype(np.float64, copy=False))


@float_guard("the twisted Wasserstein distance", "rescale `X`, `Y`, `A` or `V`")
def twisted_wasserstein(
    A: ArrayLike,
    V: ArrayLike,
    X: ArrayLike,
    Y: ArrayLike,
    *,
    weights_x: ArrayLike | None = None,
    weights_y: ArrayLike | None = None,
) -> float:
    r"""Twisted distance :math:`d_P(\mu,\nu) = W_2((P^{-1/2})_\#\mu, (P^{-1/2})_\#\nu)`.

    The ground cost is :math:`(x-y)^\top(\pm P)^{-1}(x-y)` with :math:`P = VA^{-1}`; computed
    exactly by :func:`token_dynamics.wasserstein.wasserstein2` with ``metric``.

    Parameters
    ----------
    A, V : array_like, shape (d, d)
    X : array_like, shape (n, d)
    Y : array_like, shape (m, d)
    weights_x : array_like, shape (n,), optional
    weights_y : array_like, shape (m,), optional

    Returns
    -------
    float

    Raises
    ------
    TwistedMetricError
        If ``V A^{-1}`` is not symmetric definite.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import twisted_wasserstein
    >>> X = np.array([[0.0, 0.0], [1.0, 1.0]])
    >>> round(twisted_wasserstein(4 * np.eye(2), np.eye(2), X, X + [1.0, 0.0]), 12)
    2.0
    """
    X = as_tokens(X)
    d = X.shape[1]
    Y = as_tokens(Y, "Y", d=d)
    tm = twisted_metric(A, V)
    wx = as_weights(weights_x, X.shape[0], "weights_x")
    wy = as_weights(weights_y, Y.shape[0], "weights_y")
    return _wasserstein2(X, Y, wx, wy, tm.metric)


@float_guard("the softmax metric density", "rescale `X`, `A` or `points`")
def softmax_metric_density(
    A: ArrayLike, X: ArrayLike, points: ArrayLike | None = None, *, weights: ArrayLike | None = None
) -> FloatArray:
    r"""Density :math:`Z_\mu(x) = \int e^{\langle Ax, y\rangle}d\mu(y)` of the softmax metric.

    Softmax attention is the gradient flow of :math:`\mathcal E_A` for
    :math:`g_\mu(v, v) = \int Z_\mu(x)\, v(x)^\top(\pm P)^{-1}v(x)\,d\mu(x)`.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Attention matrix.
    X : array_like, shape (n, d)
        Tokens: :math:`\mu = \sum_j w_j\delta_{x_j}`.
    points : array_like, shape (m, d), optional
        Where to evaluate :math:`Z_\mu`; the tokens by default.
    weights : array_like, shape (n,), optional, keyword-only
        Probability weights; uniform ``1/n`` by default.

    Returns
    -------
    ndarray, shape (m,)
        :math:`Z_\mu` at each point, the normaliser of the softmax there.

    Raises
    ------
    ValueError
        If the shapes disagree or `weights` are not probability weights.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import softmax_metric_density
    >>> Z = softmax_metric_density([[1.0]], [[0.0], [1.0]], [[1.0]])
    >>> Z  # (e^0 + e^1) / 2
    array([1.85914091])
    >>> bool(np.isclose(Z[0], (1 + np.e) / 2))
    True
    """
    X, A, Y, w = _measure_args(X, A, points, weights)
    with np.errstate(over="ignore", invalid="ignore"):
        S = Y @ A.T @ X.T
    _check_exponents(S)
    # each row by its largest exponent: Z is computed wherever it is a float, e^S or not
    return _exp_sum(S, w, np.ones(X.shape[0]), "softmax metric density")


@dataclass(frozen=True)
class GradientFlowCheck:
    r"""Gradient-flow identity at one configuration.

    Attributes
    ----------
    velocity : ndarray, shape (n, d)
        Attention velocity, from :class:`token_dynamics.attention.Unnormalised` or
        :class:`token_dynamics.attention.Softmax`.
    steepest : ndarray, shape (n, d)
        ``sign`` times the gradient of the energy for the metric (``P ∇δE/δμ``, divided by
        ``Z`` for softmax).
    identity_error : float
        ``max|velocity - steepest| / max|steepest|``.
    energy_rate : float
        :math:`d\mathcal E/dt` along ``velocity``.
    metric_speed_squared : float
        :math:`\|velocity\|^2` in the metric; gradient flow means
        ``energy_rate = sign * metric_speed_squared``.
    sign : int
        ``+1`` ascent, ``-1`` descent.

    Examples
    --------
    Returned by :func:`gradient_flow_check`; along a gradient flow the energy changes at
    ``sign`` times the squared metric speed:

    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import gradient_flow_check
    >>> X = np.array([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.1]])
    >>> c = gradient_flow_check(-np.eye(2), np.eye(2), X, kind="softmax")
    >>> bool(np.isclose(c.energy_rate, c.sign * c.metric_speed_squared, rtol=1e-12))
    True
    >>> c.velocity.shape == c.steepest.shape == X.shape
    True
    """

    velocity: FloatArray
    steepest: FloatArray
    identity_error: float
    energy_rate: float
    metric_speed_squared: float
    sign: int


@float_guard("the gradient-flow check", "rescale `X`, `A` or `V`")
def gradient_flow_check(
    A: ArrayLike,
    V: ArrayLike,
    X: ArrayLike,
    *,
    kind: str = "unnormalised",
    weights: ArrayLike | None = None,
) -> GradientFlowCheck:
    r"""Check that attention is the gradient flow of :math:`\mathcal E_A` for its metric.

    ``kind="unnormalised"``: velocity :math:`V\int e^{\langle Ax,y\rangle}y\,d\mu` against
    :math:`P\nabla\frac{\delta\mathcal E}{\delta\mu}`, metric :math:`\int v^\top(\pm P)^{-1}v\,
    d\mu`. ``kind="softmax"``: velocity divided by :math:`Z_\mu`, metric weighted by
    :math:`Z_\mu` (:func:`softmax_metric_density`).

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric, invertible.
    V : array_like, shape (d, d)
        With ``V A^{-1}`` symmetric definite.
    X : array_like, shape (n, d)
    kind : {"unnormalised", "softmax"}
    weights : array_like, shape (n,), optional

    Returns
    -------
    GradientFlowCheck

    Raises
    ------
    ValueError
        If `kind` is unknown, `A` is not symmetric or `weights` are not probability weights.
    TwistedMetricError
        If ``V A^{-1}`` is not symmetric definite (no twisted metric).
    FloatingPointError
        If a quantity of the check leaves the float64 range.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import gradient_flow_check
    >>> X = np.array([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.1]])
    >>> c = gradient_flow_check(-np.eye(2), np.eye(2), X)
    >>> c.identity_error < 1e-14, c.sign
    (True, -1)
    """
    if kind not in ("unnormalised", "softmax"):
        raise ValueError(f"`kind` must be 'unnormalised' or 'softmax'; got {kind!r}.")
    X = as_tokens(X)
    n, d = X.shape
    tm = twisted_metric(A, V)
    A = as_symmetric(A, "A", d=d, what=SYMMETRIC_A)
    V = as_square(V, "V", d=d)
    w = as_weights(weights, n)
    vel = _attention_velocity(kind, X, A, V, w)
    steep = energy_gradient(A, X, weights=w) @ tm.P.T
    Z = np.ones(n)
    if kind == "softmax":
        Z = softmax_metric_density(A, X, weights=w)
        steep = steep / Z[:, None]
    err = float(np.abs(vel - steep).max() / max(np.abs(steep).max(), np.finfo(float).tiny))
    speed2 = checked_finite(
        float(np.einsum("i,i,ik,kl,il->", w, Z, vel, tm.metric, vel)),
        "the metric speed of the gradient-flow check",
        "rescale `X`, `A` or `V`",
    )
    return GradientFlowCheck(vel, steep, err, energy_rate(A, X, vel, weights=w), speed2, tm.sign)
