r"""A priori estimates of softmax attention on measures in a ball (private).

Support growth, the two Lipschitz constants of the velocity field (in x and in the measure),
the Gronwall stability constant, and the Jacobian :math:`\beta V\operatorname{Cov}_{\pi_x}A`.
"""

from __future__ import annotations

import numpy as np

from .._guards import checked_finite, float_guard
from .._typing import ArrayLike
from .._validation import (
    as_matrix,
    as_real_array,
    as_square,
    as_times,
    as_tokens,
    as_weights,
    check_positive,
)
from ..attention import softmax_weights
from ..diagnostics import empirical_covariance

__all__ = [
    "lipschitz_measure",
    "lipschitz_x",
    "softmax_jacobian",
    "support_radius",
    "support_radius_bound",
]


def _opnorm(M: np.ndarray) -> float:
    return float(np.linalg.norm(M, 2))


@float_guard("the support radius", "rescale `X`")
def support_radius(X: ArrayLike, *, weights: ArrayLike | None = None) -> float:
    r"""Radius :math:`\max\{|x_i| : w_i > 0\}` of the smallest centred ball holding the support.

    Parameters
    ----------
    X : array_like, shape (n, d)
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals or `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> from token_dynamics.meanfield import support_radius
    >>> support_radius([[3.0, 4.0], [0.0, 1.0]])
    5.0
    """
    X = as_tokens(X)
    w = as_weights(weights, X.shape[0])
    return float(np.max(np.linalg.norm(X[w > 0], axis=1)))


@float_guard("the support radius bound", "shorten `times` or scale `V` down")
def support_radius_bound(V: ArrayLike, R0: float, times: ArrayLike) -> np.ndarray:
    r"""Bound :math:`R(t) = R_0 e^{\lVert V\rVert t}` on the support radius under softmax.

    Softmax outputs :math:`V` times a convex combination of tokens, so
    :math:`|\dot x_i| \le \lVert V\rVert \max_j|x_j|` and Gronwall gives the bound.

    Parameters
    ----------
    V : array_like, shape (d, d)
        Value matrix (spectral norm used).
    R0 : float
        Initial support radius.
    times : array_like, shape (T,)

    Returns
    -------
    ndarray, shape (T,)

    Raises
    ------
    ValueError
        If `times` are negative or decreasing, `R0` is negative or `V` is not square.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    Castin et al. (2025), well-posedness for compactly supported data.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.meanfield import support_radius_bound
    >>> support_radius_bound(np.eye(2), 2.0, [0.0, 1.0]).round(4)
    array([2.    , 5.4366])
    """
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    R0 = check_positive(R0, "R0", allow_zero=True)
    return R0 * np.exp(_opnorm(as_square(V, "V")) * t)


def softmax_lipschitz(
    kappa: float, norm_V: float, R: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    r"""The softmax field's Lipschitz constants on :math:`B(0, R)`, elementwise in ``R``:
    :math:`L_x = \lVert V\rVert u` (:func:`lipschitz_x`) and
    :math:`L_\mu = \lVert V\rVert (1 + 2u) e^{2u}` (:func:`lipschitz_measure`), with
    :math:`u = \kappa R^2`, :math:`\kappa = |\beta| \lVert A\rVert`; the one formula of both
    and of ``field_constants``. ``inf`` where a constant leaves float64 or ``R`` is ``inf``; a zero
    factor (:math:`\kappa` or :math:`\lVert V\rVert`) keeps its value at every radius, so at
    ``R = inf`` too (the limit, where ``0 inf`` would be NaN)."""
    with np.errstate(over="ignore", invalid="ignore"):
        u = np.where(kappa == 0, 0.0, kappa * np.square(R))
        lip_x = np.where(norm_V == 0, 0.0, norm_V * u)
        lip_mu = np.where(norm_V == 0, 0.0, norm_V * (1.0 + 2.0 * u) * np.exp(2.0 * u))
    return lip_x, lip_mu


@float_guard("the Lipschitz constant in x", "lower `R`, `beta` or the norms of `A` and `V`")
def lipschitz_x(A: ArrayLike, V: ArrayLike, R: ArrayLike, *, beta: float = 1.0) -> np.ndarray:
    r"""Lipschitz constant :math:`\beta\lVert V\rVert\lVert A\rVert R^2` of :math:`\Gamma_\mu` in x.

    Valid for :math:`|x| \le R` and :math:`\operatorname{supp}\mu \subset B(0,R)`, because
    :math:`\nabla_x\Gamma_\mu(x) = \beta V\operatorname{Cov}_{\pi_x}(y) A` with
    :math:`\lVert\operatorname{Cov}_{\pi_x}\rVert \le R^2` (see :func:`softmax_jacobian`).

    Parameters
    ----------
    A, V : array_like, shape (d, d)
    R : float or array_like
        Radius (or radii).
    beta : float

    Returns
    -------
    ndarray, same shape as `R`

    Raises
    ------
    ValueError
        If `R` contains NaN, infinite or negative entries, `beta` is not positive or `A`, `V`
        are not square.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.meanfield import lipschitz_x
    >>> float(lipschitz_x(0.5 * np.eye(2), np.eye(2), 2.0))
    2.0
    """
    R = as_real_array(R, "R", nonnegative=True)
    beta = check_positive(beta, "beta")
    kappa = beta * _opnorm(as_square(A, "A"))
    lip_x = softmax_lipschitz(kappa, _opnorm(as_square(V, "V")), R)[0]
    return checked_finite(
        lip_x, "the Lipschitz constant in x", "lower `R`, `beta` or the norms of `A` and `V`"
    )


@float_guard(
    "the Lipschitz constant in the measure", "lower `R`, `beta` or the norms of `A` and `V`"
)
def lipschitz_measure(A: ArrayLike, V: ArrayLike, R: ArrayLike, *, beta: float = 1.0) -> np.ndarray:
    r"""Lipschitz constant of :math:`\mu\mapsto\Gamma_\mu(x)` in :math:`W_1` on :math:`B(0,R)`.

    .. math::

        |\Gamma_\mu(x) - \Gamma_\nu(x)| \le \lVert V\rVert\,(1 + 2\kappa R^2)\,e^{2\kappa R^2}
        \,W_1(\mu,\nu), \qquad \kappa = \beta\lVert A\rVert .

    Proof: :math:`\Gamma_\mu(x)-\Gamma_\nu(x) = V\int g\,d(\mu-\nu)/Z_\mu(x)` with
    :math:`g(y) = (y - \Gamma^0_\nu(x))e^{\beta\langle Ax,y\rangle}`, whose Lipschitz constant on
    the ball is at most :math:`(1+2\kappa R^2)e^{\kappa R^2}`, and :math:`Z_\mu \ge
    e^{-\kappa R^2}` (Kantorovich-Rubinstein duality).

    Parameters
    ----------
    A, V : array_like, shape (d, d)
    R : float or array_like
        Radius (or radii).
    beta : float

    Returns
    -------
    ndarray, same shape as `R`
        ``inf`` where :math:`e^{2\kappa R^2}` leaves float64 (the bound is void, not wrong).

    Raises
    ------
    ValueError
        If `R` contains NaN, infinite or negative entries, `beta` is not positive or `A`, `V`
        are not square.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.meanfield import lipschitz_measure
    >>> float(lipschitz_measure(np.eye(2), np.eye(2), 0.0))
    1.0
    """
    R = as_real_array(R, "R", nonnegative=True)
    beta = check_positive(beta, "beta")
    kappa = beta * _opnorm(as_square(A, "A"))
    return softmax_lipschitz(kappa, _opnorm(as_square(V, "V")), R)[1]


@float_guard("the softmax Jacobian", "scale `A`, `beta` or the tokens down")
def softmax_jacobian(
    A: ArrayLike,
    V: ArrayLike,
    X: ArrayLike,
    queries: ArrayLike,
    *,
    beta: float = 1.0,
    weights: ArrayLike | None = None,
) -> np.ndarray:
    r"""Jacobian :math:`\nabla_x\Gamma_\mu(x) = \beta V\operatorname{Cov}_{\pi_x}(y)A` at queries.

    Here :math:`\pi_x \propto e^{\beta\langle Ax, y\rangle}\mu(dy)` is the attention
    distribution of the query :math:`x` over the keys.

    Parameters
    ----------
    A, V : array_like, shape (d, d)
    X : array_like, shape (n, d)
        Tokens of the measure :math:`\mu`.
    queries : array_like, shape (m, d)
        Query points :math:`x`.
    beta : float
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (m, d, d)

    Raises
    ------
    ValueError
        If `X` and `queries` are not tokens in one dimension ``d``, `A` or `V` is not
        ``(d, d)``, `beta` is not positive or `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> from token_dynamics.meanfield import softmax_jacobian
    >>> J = softmax_jacobian([[1.0]], [[1.0]], [[-1.0], [1.0]], [[0.0]])
    >>> J.round(12)  # Cov of (+-1 with prob 1/2) is 1
    array([[[1.]]])
    """
    X = as_tokens(X)
    d = X.shape[1]
    Y = as_tokens(queries, "queries", d=d)
    A = as_matrix(A, "A", shape=(d, d))
    V = as_matrix(V, "V", shape=(d, d))
    beta = check_positive(beta, "beta")
    w = as_weights(weights, X.shape[0])
    keep = w > 0
    X, w = X[keep], w[keep]
    P = softmax_weights(beta * (Y @ A.T @ X.T), log_weights=np.log(w), axis=1)  # (m, n)
    # centred (E[y y^T] - m m^T lost the covariance of a cloud far from the origin: 15 % at 1e7)
    cov = np.stack([empirical_covariance(X, weights=p) for p in P])
    return beta * np.einsum("ij,mjk,kl->mil", V, cov, A)
