r"""Diagnostics of token clouds: moments, diameter, interaction energy, clusters, rank, and the
log-log fit of a convergence rate.

Functions take tokens ``X`` of shape ``(n, d)`` and optional probability ``weights`` of shape
``(n,)`` (uniform if ``None``). Pairwise quantities are computed in row blocks, so memory stays
bounded for large ``n``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist
from scipy.special import logsumexp

from ._linalg import LOG_FLOAT_MAX, power_of_two_scale, row_blocks
from ._typing import ArrayLike
from ._validation import (
    as_matrix,
    as_real_array,
    as_tokens,
    as_vector,
    as_weights,
    check_positive,
    float_guard,
)

__all__ = [
    "PowerLawFit",
    "cluster_count",
    "diameter",
    "empirical_covariance",
    "empirical_mean",
    "excess_kurtosis",
    "fit_power_law",
    "interaction_energy",
    "min_inner_product",
    "numerical_rank",
]


def empirical_mean(X: ArrayLike, *, weights: ArrayLike | None = None) -> np.ndarray:
    r"""Mean :math:`\int x\, d\mu = \sum_i w_i x_i` of the tokens' measure.

    Parameters
    ----------
    X : array_like, shape (n, d)
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (d,)

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals or `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> from token_dynamics.diagnostics import empirical_mean
    >>> empirical_mean([[0.0, 0.0], [2.0, 4.0]])
    array([1., 2.])
    >>> empirical_mean([[0.0, 0.0], [2.0, 4.0]], weights=[0.75, 0.25])
    array([0.5, 1. ])
    """
    X = as_tokens(X)
    return as_weights(weights, X.shape[0]) @ X


def empirical_covariance(X: ArrayLike, *, weights: ArrayLike | None = None) -> np.ndarray:
    r"""Covariance of the tokens' measure (the measure's, not the unbiased estimator).

    .. math::

        \Sigma = \sum_i w_i (x_i - m)(x_i - m)^\top,\qquad m = \sum_i w_i x_i .

    Parameters
    ----------
    X : array_like, shape (n, d)
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (d, d)
        Symmetric positive semidefinite.

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals or `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> from token_dynamics.diagnostics import empirical_covariance
    >>> empirical_covariance([[-1.0, 0.0], [1.0, 0.0]])
    array([[1., 0.],
           [0., 0.]])
    """
    X = as_tokens(X)
    w = as_weights(weights, X.shape[0])
    # computed on X / c, c the power of two at max |x_ij| (exact, no overflow in the
    # products), then scaled by c^2
    c = float(power_of_two_scale(X))
    Xc = X / c - w @ (X / c)
    C = Xc.T @ (w[:, None] * Xc)
    with np.errstate(over="ignore"):
        C = c * (c * (C + C.T) / 2)
    if not np.all(np.isfinite(C)):
        raise FloatingPointError(
            f"the covariance of `X` overflows float64 (entries up to {c:.3g}, squared); "
            "rescale `X`."
        )
    return C


def diameter(X: ArrayLike) -> float:
    r"""Diameter :math:`\max_{i,j} |x_i - x_j|` of the cloud (0 for a single token).

    Distances are computed from coordinate differences (no cancellation for tight clusters),
    in row blocks.

    Parameters
    ----------
    X : array_like, shape (n, d)

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.diagnostics import diameter
    >>> diameter([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    5.0
    """
    X = as_tokens(X)
    # distances of X / c, c the power of two at max |x_ij| (exact, no overflow in cdist)
    c = float(power_of_two_scale(X))
    best = 0.0
    for rows in row_blocks(X.shape[0], X.shape[0]):
        best = max(best, float(cdist(X[rows] / c, X / c).max()))
    with np.errstate(over="ignore"):
        best *= c
    if not np.isfinite(best):
        raise FloatingPointError("the diameter of `X` overflows float64; rescale `X`.")
    return best


@float_guard("the smallest inner product", "rescale `X`")
def min_inner_product(X: ArrayLike) -> float:
    r"""Smallest pairwise inner product :math:`\min_{i,j}\langle x_i, x_j\rangle`.

    On the sphere, a value above :math:`1 - \delta` means every pair is within angle
    :math:`\arccos(1 - \delta)`: the cloud has clustered.

    Parameters
    ----------
    X : array_like, shape (n, d)

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.diagnostics import min_inner_product
    >>> min_inner_product([[1.0, 0.0], [0.0, 1.0]])
    0.0
    """
    X = as_tokens(X)
    return min(float((X[rows] @ X.T).min()) for rows in row_blocks(X.shape[0], X.shape[0]))


@float_guard("the interaction energy", "scale `X`, `A` or `beta` down")
def interaction_energy(
    X: ArrayLike, *, beta: float = 1.0, weights: ArrayLike | None = None, A: ArrayLike | None = None
) -> float:
    r"""Interaction energy of the tokens' measure,

    .. math::

        E_\beta(\mu) = \frac{1}{2\beta} \iint e^{\beta\langle A x, y\rangle}\, d\mu(x)\, d\mu(y)
                     = \frac{1}{2\beta} \sum_{i,j} w_i w_j e^{\beta \langle A x_i, x_j\rangle},

    with :math:`A = I` by default. On the sphere with :math:`Q = K = V = I` it is
    non-decreasing along the SA and USA dynamics, and maximal (:math:`e^\beta/(2\beta)`) at a
    single cluster. Summed through log-sum-exp in row blocks; an energy beyond the float64 range
    raises ``FloatingPointError``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    beta : float
        Nonzero inverse temperature.
    weights : array_like, shape (n,), optional
    A : array_like, shape (d, d), optional

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals, `beta` is zero or not finite, `weights`
        are not probability weights or `A` is not ``(d, d)``.
    TypeError
        If an array argument is not real (complex, boolean, string or object).
    FloatingPointError
        If the energy overflows float64.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.diagnostics import interaction_energy
    >>> X = np.array([[1.0, 0.0], [1.0, 0.0]])
    >>> bool(np.isclose(interaction_energy(X, beta=2.0), np.exp(2.0) / 4.0))
    True
    """
    X = as_tokens(X)
    if isinstance(beta, bool) or not isinstance(beta, int | float | np.floating | np.integer):
        raise ValueError(f"`beta` must be a finite nonzero real number; got {beta!r}.")
    if not np.isfinite(beta) or beta == 0:
        raise ValueError(f"`beta` must be a finite nonzero real number; got {beta!r}.")
    w = as_weights(weights, X.shape[0])
    d = X.shape[1]
    F = X if A is None else X @ as_matrix(A, "A", shape=(d, d)).T
    keep = w > 0
    Xk, Fk, wk = X[keep], F[keep], w[keep]
    log_w = np.log(wk)
    parts = []
    for rows in row_blocks(Fk.shape[0], Xk.shape[0]):
        S = beta * (Fk[rows] @ Xk.T) + log_w[rows, None] + log_w[None, :]
        parts.append(logsumexp(S))
    log_total = float(logsumexp(parts)) - np.log(2 * abs(beta))
    if log_total > LOG_FLOAT_MAX:
        raise FloatingPointError(
            f"The interaction energy exceeds the float64 range (log E = {log_total:.4g}); "
            "lower `beta` or the token norms."
        )
    return float(np.sign(beta) * np.exp(log_total))


def cluster_count(X: ArrayLike, tol: float) -> int:
    r"""Number of clusters at scale ``tol``: connected components of the graph that links
    tokens at distance :math:`\le` ``tol`` (single-linkage clusters).

    Computed by min-label propagation with pointer jumping over row blocks of the distance
    matrix (memory bounded, exact).

    Parameters
    ----------
    X : array_like, shape (n, d)
    tol : float
        Linking distance, nonnegative (``0`` counts distinct tokens).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals or `tol` is negative.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> from token_dynamics.diagnostics import cluster_count
    >>> cluster_count([[0.0, 0.0], [0.0, 1e-3], [1.0, 0.0]], tol=1e-2)
    2
    """
    X = as_tokens(X)
    tol = check_positive(tol, "tol", allow_zero=True)
    n = X.shape[0]
    labels = np.arange(n)
    while True:
        new = labels.copy()
        for rows in row_blocks(n, n):
            near = cdist(X[rows], X) <= tol
            new[rows] = np.where(near, labels[None, :], n).min(axis=1)
        while True:  # pointer jumping: a label is a token of the same component
            jumped = new[new]
            if np.array_equal(jumped, new):
                break
            new = jumped
        if np.array_equal(new, labels):
            return int(np.unique(labels).size)
        labels = new


def numerical_rank(M: ArrayLike, *, rtol: float | None = None) -> int:
    r"""Number of singular values of ``M`` above ``rtol`` times the largest one.

    .. math:: \operatorname{rank}_{\mathrm{rtol}}(M) = \#\{i : \sigma_i(M) >
              \mathrm{rtol}\cdot\sigma_1(M)\}.

    Parameters
    ----------
    M : array_like, shape (p, q)
        E.g. tokens ``X`` (the dimension of the span of a collapsed cloud) or a covariance.
    rtol : float, optional
        Relative threshold; default ``max(p, q) * eps`` (as :func:`numpy.linalg.matrix_rank`).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If `M` is not a 2-D array of finite reals or `rtol` is negative.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    References
    ----------
    G. H. Golub, C. F. Van Loan, *Matrix Computations*, 4th ed., 2013, §5.4.1.

    Examples
    --------
    >>> from token_dynamics.diagnostics import numerical_rank
    >>> numerical_rank([[1.0, 2.0], [2.0, 4.0 + 1e-12]], rtol=1e-9)
    1
    """
    M = as_matrix(M, "M")
    if rtol is None:
        rtol = max(M.shape) * np.finfo(np.float64).eps
    rtol = check_positive(rtol, "rtol", allow_zero=True)
    if M.size == 0:
        return 0
    s = np.linalg.svd(M, compute_uv=False)
    if s[0] == 0:
        return 0
    return int(np.sum(s > rtol * s[0]))


@dataclass(frozen=True)
class PowerLawFit:
    r"""Least-squares line :math:`\log y = \text{intercept} + \text{slope}\,\log x`.

    Calling it evaluates the power law :math:`y = e^{\text{intercept}}\,x^{\text{slope}}`.

    Attributes
    ----------
    slope : float
        The exponent :math:`p` of :math:`y \approx C x^p` (an observed convergence order).
    intercept : float
        :math:`\log C`.

    Examples
    --------
    Returned by :func:`fit_power_law`; on exact data :math:`y = 3x^{-1/2}` the fit recovers
    the exponent and the constant:

    >>> import numpy as np
    >>> from token_dynamics.diagnostics import fit_power_law
    >>> x = np.array([1.0, 4.0, 100.0])
    >>> fit = fit_power_law(x, 3.0 * x**-0.5)
    >>> round(fit.slope, 12), round(float(np.exp(fit.intercept)), 12)
    (-0.5, 3.0)
    >>> fit([16.0])
    array([0.75])
    """

    slope: float
    intercept: float

    def __call__(self, x: ArrayLike) -> np.ndarray:
        return np.exp(self.intercept) * as_real_array(x, "x") ** self.slope


def fit_power_law(x: ArrayLike, y: ArrayLike) -> PowerLawFit:
    """Fit :math:`y \\approx C x^{p}` by least squares on a log-log scale.

    Parameters
    ----------
    x, y : array_like, shape (k,)
        Positive values, at least two distinct ``x``.

    Returns
    -------
    PowerLawFit

    Raises
    ------
    ValueError
        If a value is not positive or all ``x`` are equal.

    Examples
    --------
    >>> from token_dynamics.diagnostics import fit_power_law
    >>> fit = fit_power_law([1, 4, 16], [1.0, 0.5, 0.25])
    >>> round(fit.slope, 12)
    -0.5
    """
    x = as_vector(x, "x")
    y = as_vector(y, "y", size=x.shape[0])
    if np.any(x <= 0) or np.any(y <= 0) or np.unique(x).shape[0] < 2:
        raise ValueError("`x` and `y` must be positive, with at least two distinct `x`.")
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return PowerLawFit(float(slope), float(intercept))


def excess_kurtosis(X: ArrayLike) -> np.ndarray:
    r"""Excess kurtosis of each coordinate of a token cloud: zero for a Gaussian.

    .. math::

        \kappa_k = \frac{\frac1n\sum_i (x_{ik} - \hat\alpha_k)^4}{\hat\Sigma_{kk}^2} - 3,

    with :math:`\hat\alpha`, :math:`\hat\Sigma` the empirical mean and covariance. For an
    i.i.d. Gaussian sample its standard error is about :math:`\sqrt{24/n}`; a value many
    standard errors away says the cloud is not Gaussian.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens, one per row, with no constant coordinate.

    Returns
    -------
    ndarray, shape (d,)

    Raises
    ------
    ValueError
        If a coordinate of `X` is constant (its kurtosis is undefined).

    Examples
    --------
    Two symmetric values per coordinate have the smallest possible kurtosis, :math:`1 - 3`:

    >>> import numpy as np
    >>> from token_dynamics.diagnostics import excess_kurtosis
    >>> X = np.array([[1.0, 5.0], [-1.0, 3.0]])
    >>> excess_kurtosis(X)
    array([-2., -2.])
    """
    Z = as_tokens(X, "X")
    if np.any(np.ptp(Z, axis=0) == 0):
        raise ValueError(
            "`X` has a constant coordinate, whose kurtosis is undefined; drop that coordinate."
        )
    # the kurtosis is scale-free: divide each coordinate by its largest value first, so that
    # neither the mean nor the fourth powers overflow
    Z = Z / np.abs(Z).max(axis=0)
    Y = Z - Z.mean(axis=0)
    Y = Y / np.abs(Y).max(axis=0)
    var = np.mean(Y**2, axis=0)
    return np.mean(Y**4, axis=0) / var**2 - 3.0
