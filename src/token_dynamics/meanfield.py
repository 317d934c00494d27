r"""Well-posedness and the mean-field limit of the Transformer PDE.

The particle system :math:`\dot x_i = \Gamma_{\mu^n(t)}(x_i)` is the Transformer PDE
:math:`\partial_t\mu + \operatorname{div}(\mu\Gamma_\mu) = 0` started from the empirical measure
:math:`\mu^n_0`. Its well-posedness and its mean-field limit rest on three estimates for
softmax attention on measures supported in the ball :math:`B(0, R)`:

- the support radius grows at most like :math:`R_0 e^{\lVert V\rVert t}`
  (:func:`support_radius_bound`);
- :math:`x \mapsto \Gamma_\mu(x)` is Lipschitz with constant
  :math:`\beta\lVert V\rVert\lVert A\rVert R^2` (:func:`lipschitz_x`,
  :func:`softmax_jacobian`);
- :math:`\mu \mapsto \Gamma_\mu(x)` is Lipschitz in :math:`W_1` with constant
  :math:`\lVert V\rVert(1 + 2\beta\lVert A\rVert R^2)e^{2\beta\lVert A\rVert R^2}`
  (:func:`lipschitz_measure`),

and Gronwall's lemma turns them into the stability constant :func:`stability_constant`.
The module also gives the exact Gaussian solutions used as references
(:func:`softmax_gaussian_1d`, :func:`softmax_gaussian_centred`), the mean-field experiments
(:func:`mean_field_errors`, :func:`stability_ratios`) and the helpers of masked (causal)
attention with positions in column 0 (:func:`causal_cloud`, :func:`first_token_solution`,
:func:`conditional_sensitivity`, :func:`first_token_sensitivity`).

References
----------
.. [1] V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, "A Unified Perspective on the Dynamics of
   Deep Transformers", arXiv:2501.18322, 2025.
.. [2] N. Fournier and A. Guillin, "On the rate of convergence in Wasserstein distance of the
   empirical measure", Probab. Theory Relat. Fields 162, 2015.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.integrate import quad
from scipy.linalg import expm
from scipy.special import logsumexp

from ._validation import (
    as_matrix,
    as_rng,
    as_tokens,
    as_vector,
    as_weights,
    check_int,
    check_positive,
)
from .attention import Softmax, with_positions
from .integrators import integrate
from .wasserstein import conditional_w2, w2_gaussian_1d, wasserstein2

__all__ = [
    "GaussianPath",
    "MaskedCloud",
    "MeanFieldErrors",
    "PowerLawFit",
    "Sensitivity",
    "StabilityBound",
    "StabilityRun",
    "causal_cloud",
    "conditional_sensitivity",
    "first_token_sensitivity",
    "first_token_solution",
    "fit_power_law",
    "lipschitz_measure",
    "lipschitz_x",
    "mean_field_errors",
    "softmax_gaussian_1d",
    "softmax_gaussian_centred",
    "softmax_jacobian",
    "stability_constant",
    "stability_ratios",
    "support_radius",
    "support_radius_bound",
]

#: Default RK4 step of the particle experiments: the RK4 error h^4 ~ 6e-6 is far below the
#: 1/sqrt(n) ~ 1e-2 sampling error that the experiments measure.
DEFAULT_DT = 0.05
#: Default size of the reference sample in d >= 2, as a multiple of the largest n: the spec's
#: n_ref >= 20 n keeps the reference's own error well below that of the particle system.
REFERENCE_FACTOR = 20


def _times(times: Any) -> np.ndarray:
    t = as_vector(np.atleast_1d(np.asarray(times, dtype=float)), "times")
    if np.any(t < 0) or np.any(np.diff(t) < 0):
        raise ValueError("`times` must be nonnegative and nondecreasing.")
    return t


def _opnorm(M: np.ndarray) -> float:
    return float(np.linalg.norm(M, 2))


def _square(M: Any, name: str) -> np.ndarray:
    M = as_matrix(M, name)
    if M.shape[0] != M.shape[1]:
        raise ValueError(f"`{name}` must be a square (d, d) matrix; got shape {M.shape}.")
    return M


# --- a priori estimates -------------------------------------------------------------------------


def support_radius(X: Any, *, weights: Any = None) -> float:
    r"""Radius :math:`\max\{|x_i| : w_i > 0\}` of the smallest centred ball holding the support.

    Parameters
    ----------
    X : array_like, shape (n, d)
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    Examples
    --------
    >>> support_radius([[3.0, 4.0], [0.0, 1.0]])
    5.0
    """
    X = as_tokens(X)
    w = as_weights(weights, X.shape[0])
    return float(np.max(np.linalg.norm(X[w > 0], axis=1)))


def support_radius_bound(times: Any, R0: float, V: Any) -> np.ndarray:
    r"""Bound :math:`R(t) = R_0 e^{\lVert V\rVert t}` on the support radius under softmax.

    Softmax outputs :math:`V` times a convex combination of tokens, so
    :math:`|\dot x_i| \le \lVert V\rVert \max_j|x_j|` and Gronwall gives the bound.

    Parameters
    ----------
    times : array_like, shape (T,)
    R0 : float
        Initial support radius.
    V : array_like, shape (d, d)
        Value matrix (spectral norm used).

    Returns
    -------
    ndarray, shape (T,)

    References
    ----------
    Castin et al. (2025), well-posedness for compactly supported data.

    Examples
    --------
    >>> support_radius_bound([0.0, 1.0], 2.0, np.eye(2)).round(4)
    array([2.    , 5.4366])
    """
    t = _times(times)
    R0 = check_positive(R0, "R0", allow_zero=True)
    return R0 * np.exp(_opnorm(_square(V, "V")) * t)


def lipschitz_x(R: Any, A: Any, V: Any, *, beta: float = 1.0) -> np.ndarray:
    r"""Lipschitz constant :math:`\beta\lVert V\rVert\lVert A\rVert R^2` of :math:`\Gamma_\mu` in x.

    Valid for :math:`|x| \le R` and :math:`\operatorname{supp}\mu \subset B(0,R)`, because
    :math:`\nabla_x\Gamma_\mu(x) = \beta V\operatorname{Cov}_{\pi_x}(y) A` with
    :math:`\lVert\operatorname{Cov}_{\pi_x}\rVert \le R^2` (see :func:`softmax_jacobian`).

    Parameters
    ----------
    R : float or array_like
        Radius (or radii).
    A, V : array_like, shape (d, d)
    beta : float

    Returns
    -------
    ndarray, same shape as `R`

    Examples
    --------
    >>> float(lipschitz_x(2.0, 0.5 * np.eye(2), np.eye(2)))
    2.0
    """
    R = np.asarray(R, dtype=float)
    beta = check_positive(beta, "beta")
    return beta * _opnorm(_square(V, "V")) * _opnorm(_square(A, "A")) * R**2


def lipschitz_measure(R: Any, A: Any, V: Any, *, beta: float = 1.0) -> np.ndarray:
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
    R : float or array_like
    A, V : array_like, shape (d, d)
    beta : float

    Returns
    -------
    ndarray, same shape as `R`

    Examples
    --------
    >>> float(lipschitz_measure(0.0, np.eye(2), np.eye(2)))
    1.0
    """
    R = np.asarray(R, dtype=float)
    beta = check_positive(beta, "beta")
    k = beta * _opnorm(_square(A, "A"))
    with np.errstate(over="ignore"):
        return _opnorm(_square(V, "V")) * (1.0 + 2.0 * k * R**2) * np.exp(2.0 * k * R**2)


@dataclass(frozen=True)
class StabilityBound:
    """Gronwall stability bound along the support-radius bound.

    Attributes
    ----------
    times : ndarray, shape (T,)
    radius : ndarray, shape (T,)
        :math:`R(t) = R_0 e^{\\lVert V\\rVert t}`.
    lipschitz_x, lipschitz_measure : ndarray, shape (T,)
        The two Lipschitz constants evaluated at :math:`R(t)`.
    log_constant : ndarray, shape (T,)
        :math:`\\log C(t, R_0) = \\int_0^t (L_x + L_\\mu)(R(s))\\,ds`; the constant itself
        overflows quickly, its logarithm does not.
    """

    times: np.ndarray
    radius: np.ndarray
    lipschitz_x: np.ndarray
    lipschitz_measure: np.ndarray
    log_constant: np.ndarray


def stability_constant(
    times: Any, R0: float, A: Any, V: Any, *, beta: float = 1.0
) -> StabilityBound:
    r"""Stability constant :math:`C(t,R_0)` with :math:`W_p(\mu_t,\nu_t) \le C\,W_p(\mu_0,\nu_0)`.

    .. math:: \log C(t, R_0) = \int_0^t \big(L_x(R(s)) + L_\mu(R(s))\big)\,ds ,

    for :math:`p \in \{1, 2\}` and initial supports in :math:`B(0, R_0)`: couple the two
    Lagrangian flows optimally at time 0; the coupled distance grows at rate at most
    :math:`L_x + L_\mu` because :math:`W_1 \le W_p`.

    Parameters
    ----------
    times : array_like, shape (T,)
    R0 : float
    A, V : array_like, shape (d, d)
    beta : float

    Returns
    -------
    StabilityBound
        ``log_constant`` is ``inf`` from the time the integrand overflows float64 (the bound is
        then void, not wrong).

    Examples
    --------
    >>> b = stability_constant([0.0, 1.0], 0.0, np.eye(2), np.eye(2))
    >>> b.log_constant.round(6)  # R0 = 0: only the measure term ||V|| survives
    array([0., 1.])
    """
    t = _times(times)
    A, V = _square(A, "A"), _square(V, "V")
    radius = support_radius_bound(t, R0, V)

    def rate(s: float) -> float:
        r = float(support_radius_bound(s, R0, V)[0])
        return float(lipschitz_x(r, A, V, beta=beta) + lipschitz_measure(r, A, V, beta=beta))

    pieces = [0.0] + [quad(rate, a, b, limit=200)[0] for a, b in itertools.pairwise(t)]
    log_c = np.cumsum(pieces) + quad(rate, 0.0, t[0], limit=200)[0]
    return StabilityBound(
        times=t,
        radius=radius,
        lipschitz_x=lipschitz_x(radius, A, V, beta=beta),
        lipschitz_measure=lipschitz_measure(radius, A, V, beta=beta),
        log_constant=log_c,
    )


def softmax_jacobian(
    Y: Any, X: Any, A: Any, V: Any, *, beta: float = 1.0, weights: Any = None
) -> np.ndarray:
    r"""Jacobian :math:`\nabla_x\Gamma_\mu(x) = \beta V\operatorname{Cov}_{\pi_x}(y)A` at queries.

    Here :math:`\pi_x \propto e^{\beta\langle Ax, y\rangle}\mu(dy)` is the attention
    distribution of the query :math:`x` over the keys.

    Parameters
    ----------
    Y : array_like, shape (m, d)
        Query points.
    X : array_like, shape (n, d)
        Tokens of the measure :math:`\mu`.
    A, V : array_like, shape (d, d)
    beta : float
    weights : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (m, d, d)

    Examples
    --------
    >>> J = softmax_jacobian([[0.0]], [[-1.0], [1.0]], [[1.0]], [[1.0]])
    >>> J.round(12)  # Cov of (+-1 with prob 1/2) is 1
    array([[[1.]]])
    """
    X = as_tokens(X)
    d = X.shape[1]
    Y = as_tokens(Y, "Y", d=d)
    A = as_matrix(A, "A", shape=(d, d))
    V = as_matrix(V, "V", shape=(d, d))
    beta = check_positive(beta, "beta")
    w = as_weights(weights, X.shape[0])
    keep = w > 0
    X, w = X[keep], w[keep]
    logits = beta * (Y @ A.T @ X.T) + np.log(w)
    P = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))  # (m, n)
    mean = P @ X
    second = np.einsum("mn,ni,nj->mij", P, X, X)
    cov = second - np.einsum("mi,mj->mij", mean, mean)
    return beta * np.einsum("ij,mjk,kl->mil", V, cov, A)


# --- exact Gaussian references ------------------------------------------------------------------


@dataclass(frozen=True)
class GaussianPath:
    """A Gaussian solution :math:`\\mathcal N(m(t), \\Sigma(t))` of the Transformer PDE.

    Attributes
    ----------
    times : ndarray, shape (T,)
    mean : ndarray, shape (T, d)
    cov : ndarray, shape (T, d, d)
    """

    times: np.ndarray
    mean: np.ndarray
    cov: np.ndarray


def _check_blowup(t: np.ndarray, rate: float, what: str) -> None:
    if rate > 0 and t.max() >= 1.0 / rate:
        raise ValueError(
            f"`times` reach {t.max():g}, past the finite-time blow-up of {what} at t* = "
            f"{1.0 / rate:.6g}; stop before t*."
        )


def softmax_gaussian_1d(
    times: Any, mean0: float, var0: float, v: float, a: float, *, beta: float = 1.0
) -> GaussianPath:
    r"""Exact 1-D Gaussian solution of the softmax Transformer PDE.

    With :math:`\mu_0 = \mathcal N(m_0, s_0)`, scalar value :math:`v` and attention :math:`a`
    (score :math:`\beta a x y`), the solution stays Gaussian with

    .. math::

        s(t) = \frac{s_0}{1 - 2 v\beta a s_0 t}, \qquad
        m(t) = m_0 e^{vt}\,(1 - 2 v \beta a s_0 t)^{-1/2},

    which blows up at :math:`t^* = 1/(2v\beta a s_0)` when :math:`va > 0`.

    Parameters
    ----------
    times : array_like, shape (T,)
    mean0 : float
    var0 : float
        Initial variance :math:`s_0 > 0`.
    v, a : float
        Value and attention scalars.
    beta : float

    Returns
    -------
    GaussianPath
        With ``mean`` of shape ``(T, 1)`` and ``cov`` of shape ``(T, 1, 1)``.

    References
    ----------
    Castin et al. (2025), Gaussian preservation; the scalar closed form is derived here.

    Examples
    --------
    >>> sol = softmax_gaussian_1d([0.0, 1.0], 0.0, 0.4, 0.8, -0.6)
    >>> round(float(sol.cov[1, 0, 0]), 6)  # 0.4 / (1 + 2 * 0.8 * 0.6 * 0.4)
    0.289017
    """
    t = _times(times)
    m0 = float(as_vector([mean0], "mean0")[0])
    s0 = check_positive(var0, "var0")
    v = float(as_vector([v], "v")[0])
    a = float(as_vector([a], "a")[0]) * check_positive(beta, "beta")
    _check_blowup(t, 2.0 * v * a * s0, "the variance")
    den = 1.0 - 2.0 * v * a * s0 * t
    return GaussianPath(
        times=t,
        mean=(m0 * np.exp(v * t) / np.sqrt(den))[:, None],
        cov=(s0 / den)[:, None, None],
    )


def softmax_gaussian_centred(
    times: Any, cov0: Any, A: Any, v: float, *, beta: float = 1.0
) -> GaussianPath:
    r"""Exact centred Gaussian solution for :math:`V = vI` in any dimension.

    From :math:`\mathcal N(0, \Sigma_0)` the mean stays :math:`0` and

    .. math:: \Sigma(t) = \Sigma_0\big(I - v\beta t (A + A^\top)\Sigma_0\big)^{-1},

    until the first time the bracket becomes singular (finite-time blow-up).

    Parameters
    ----------
    times : array_like, shape (T,)
    cov0 : array_like, shape (d, d)
        Symmetric positive semi-definite.
    A : array_like, shape (d, d)
    v : float
    beta : float

    Returns
    -------
    GaussianPath

    Examples
    --------
    >>> sol = softmax_gaussian_centred([1.0], np.eye(2), -0.5 * np.eye(2), 1.0)
    >>> sol.cov[0].round(6)
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    t = _times(times)
    S0 = _square(cov0, "cov0")
    d = S0.shape[0]
    A = as_matrix(A, "A", shape=(d, d))
    v = float(as_vector([v], "v")[0]) * check_positive(beta, "beta")
    if np.max(np.abs(S0 - S0.T)) > 1e-10 * max(1.0, np.max(np.abs(S0))):
        raise ValueError("`cov0` must be symmetric.")
    vals, vecs = np.linalg.eigh(S0)
    if vals.min() < -1e-10 * max(1.0, vals.max()):
        raise ValueError("`cov0` must be positive semi-definite.")
    root = (vecs * np.sqrt(np.clip(vals, 0.0, None))) @ vecs.T
    B = A + A.T
    # I - v t B S0 is singular when v t lambda = 1 for an eigenvalue lambda of S0^{1/2} B S0^{1/2}.
    rate = float(np.max(v * np.linalg.eigvalsh(root @ B @ root)))
    _check_blowup(t, rate, "the covariance")
    cov = np.stack([S0 @ np.linalg.inv(np.eye(d) - v * s * B @ S0) for s in t])
    cov = (cov + np.swapaxes(cov, 1, 2)) / 2
    return GaussianPath(times=t, mean=np.zeros((t.shape[0], d)), cov=cov)


# --- experiments --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PowerLawFit:
    """Least-squares line :math:`\\log y = \\text{intercept} + \\text{slope}\\,\\log x`."""

    slope: float
    intercept: float

    def __call__(self, x: Any) -> np.ndarray:
        return np.exp(self.intercept) * np.asarray(x, dtype=float) ** self.slope


def fit_power_law(x: Any, y: Any) -> PowerLawFit:
    """Fit :math:`y \\approx C x^{p}` by least squares on a log-log scale.

    Parameters
    ----------
    x, y : array_like, shape (k,)
        Positive values, at least two distinct ``x``.

    Returns
    -------
    PowerLawFit

    Examples
    --------
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
    """

    ns: np.ndarray
    initial: np.ndarray
    final: np.ndarray
    fit: PowerLawFit

    @property
    def ratio(self) -> np.ndarray:
        """Seed-mean of ``final`` over seed-mean of ``initial``, shape (k,)."""
        return self.final.mean(axis=0) / self.initial.mean(axis=0)


def _flow(
    field: Any, X0: np.ndarray, times: np.ndarray, dt: float, weights: Any = None
) -> np.ndarray:
    rhs = field if weights is None else (lambda t, X: field.velocity(X, t, weights=weights))
    return integrate(rhs, X0, times, method="rk4", dt=dt).states


def mean_field_errors(
    ns: Any,
    *,
    cov0: Any,
    A: Any,
    v: float,
    T: float,
    mean0: Any = None,
    beta: float = 1.0,
    n_seeds: int = 4,
    n_ref: int | None = None,
    dt: float = DEFAULT_DT,
    rng: Any = None,
) -> MeanFieldErrors:
    r"""Mean-field error :math:`W_2(\mu^n(T), \mu(T))` of softmax tokens against an exact solution.

    The tokens are ``n`` i.i.d. draws of :math:`\mu_0 = \mathcal N(m_0, \Sigma_0)`, moved by
    softmax attention with :math:`V = vI` (RK4, step `dt`). The exact solution stays Gaussian
    (:func:`softmax_gaussian_1d`, :func:`softmax_gaussian_centred`). In ``d = 1`` the distance
    to it is exact (:func:`~token_dynamics.wasserstein.w2_gaussian_1d`); in ``d >= 2`` the
    mean must be zero and the distance is taken to an independent sample of :math:`\mu(T)` of
    size `n_ref` (exact optimal transport), which adds an error of order
    :math:`n_{\rm ref}^{-1/2}`.

    Parameters
    ----------
    ns : array_like of int, shape (k,)
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
    dt : float
    rng : Generator, int or None

    Returns
    -------
    MeanFieldErrors

    Examples
    --------
    >>> err = mean_field_errors([50, 200], cov0=[[0.4]], A=[[-0.6]], v=0.8, T=0.5,
    ...                         mean0=[0.5], n_seeds=2, rng=0)
    >>> err.final.shape
    (2, 2)
    """
    ns = np.array([check_int(n, "ns") for n in np.atleast_1d(ns)])
    S0 = _square(cov0, "cov0")
    d = S0.shape[0]
    A = as_matrix(A, "A", shape=(d, d))
    m0 = np.zeros(d) if mean0 is None else as_vector(mean0, "mean0", size=d)
    T = check_positive(T, "T")
    n_seeds = check_int(n_seeds, "n_seeds")
    dt = check_positive(dt, "dt")
    rng = as_rng(rng)
    if d == 1:
        ref = softmax_gaussian_1d([0.0, T], m0[0], S0[0, 0], v, A[0, 0], beta=beta)
    else:
        if np.any(m0 != 0):
            raise ValueError("`mean0` must be zero when d >= 2 (the exact reference is centred).")
        ref = softmax_gaussian_centred([0.0, T], S0, A, v, beta=beta)
        n_ref = check_int(REFERENCE_FACTOR * int(ns.max()) if n_ref is None else n_ref, "n_ref")
    field = Softmax(A, v * np.eye(d), beta=beta)
    initial = np.empty((n_seeds, ns.shape[0]))
    final = np.empty_like(initial)
    for j, n in enumerate(ns):
        for k in range(n_seeds):
            X0 = rng.multivariate_normal(m0, S0, size=n)
            XT = _flow(field, X0, np.array([0.0, T]), dt)[-1]
            if d == 1:
                initial[k, j] = w2_gaussian_1d(X0[:, 0], m0[0], S0[0, 0])
                final[k, j] = w2_gaussian_1d(XT[:, 0], ref.mean[1, 0], ref.cov[1, 0, 0])
            else:
                Y0 = rng.multivariate_normal(m0, S0, size=n_ref)
                YT = rng.multivariate_normal(np.zeros(d), ref.cov[1], size=n_ref)
                initial[k, j] = wasserstein2(X0, Y0)
                final[k, j] = wasserstein2(XT, YT)
    return MeanFieldErrors(ns, initial, final, fit_power_law(ns, final.mean(axis=0)))


@dataclass(frozen=True)
class StabilityRun:
    """Distance between two token flows over time.

    Attributes
    ----------
    times : ndarray, shape (T,)
    distance : ndarray, shape (T,)
        :math:`W_2(\\mu_t, \\nu_t)` (or :math:`W_{2,\\lambda}` for masked tokens).
    ratio : ndarray, shape (T,)
        ``distance / distance[0]``: the measured stability constant.
    """

    times: np.ndarray
    distance: np.ndarray
    ratio: np.ndarray


def stability_ratios(
    field: Any,
    X0: Any,
    Y0: Any,
    times: Any,
    *,
    weights: Any = None,
    conditional: bool = False,
    dt: float = DEFAULT_DT,
) -> StabilityRun:
    r"""Flow two clouds with the same field and measure :math:`W_2(\mu_t,\nu_t)/W_2(\mu_0,\nu_0)`.

    Parameters
    ----------
    field : AttentionField
        Any field with ``velocity(X, t, weights=...)``.
    X0, Y0 : array_like, shape (n, d)
        The two initial clouds (same weights).
    times : array_like, shape (T,)
        Output times, starting at the initial time.
    weights : array_like, shape (n,), optional
    conditional : bool
        Measure :math:`W_{2,\lambda}` (positions in column 0) instead of :math:`W_2`.
    dt : float
        RK4 step.

    Returns
    -------
    StabilityRun

    Examples
    --------
    >>> from token_dynamics.attention import Softmax
    >>> X = np.linspace(-1, 1, 5)[:, None]
    >>> run = stability_ratios(Softmax([[0.0]], [[1.0]]), X, X + 0.01, [0.0, 1.0])
    >>> run.ratio.round(6)  # A = 0: every token moves by v * mean, a rigid shift e^t
    array([1.      , 2.718282])
    """
    X0 = as_tokens(X0, "X0")
    Y0 = as_tokens(Y0, "Y0", d=X0.shape[1])
    if Y0.shape != X0.shape:
        raise ValueError(f"`Y0` must have the shape of `X0` {X0.shape}; got {Y0.shape}.")
    t = _times(times)
    w = as_weights(weights, X0.shape[0])
    dt = check_positive(dt, "dt")
    Xs = _flow(field, X0, t, dt, None if weights is None else w)
    Ys = _flow(field, Y0, t, dt, None if weights is None else w)
    if conditional:
        dist = np.array(
            [conditional_w2(x, y, weights_x=w, weights_y=w) for x, y in zip(Xs, Ys, strict=True)]
        )
    else:
        dist = np.array(
            [wasserstein2(x, y, weights_x=w, weights_y=w) for x, y in zip(Xs, Ys, strict=True)]
        )
    if dist[0] == 0:
        raise ValueError("`X0` and `Y0` must define different measures (their distance is 0).")
    return StabilityRun(times=t, distance=dist, ratio=dist / dist[0])


# --- masked (causal) attention -------------------------------------------------------------------


@dataclass(frozen=True)
class MaskedCloud:
    """Tokens on :math:`[0,1]\\times\\mathbb R^d` with their weights.

    Attributes
    ----------
    tokens : ndarray, shape (N, 1 + d)
        Positions in column 0 (the layout of ``attention.Causal``).
    weights : ndarray, shape (N,)
    n_sink : int
        Number of sink tokens (at position 0, first rows).
    """

    tokens: np.ndarray
    weights: np.ndarray
    n_sink: int


def causal_cloud(X: Any, *, sink: Any = None, sink_mass: float = 0.0) -> MaskedCloud:
    r"""Attach positions (and optionally an attention sink) to a sequence of tokens.

    Without a sink, token :math:`i = 1..n` sits at :math:`s_i = (i-1)/n` with weight
    :math:`1/n`: the position marginal is uniform on the grid and has no atom. With a sink,
    the ``m`` sink tokens sit at position 0 with total mass :math:`w_0` = `sink_mass`
    (:math:`\lambda = w_0\delta_0 + (1-w_0)\lambda'`) and token :math:`i` at :math:`i/n` with
    weight :math:`(1-w_0)/n`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        The sequence, in order.
    sink : array_like, shape (m, d), optional
        Sink tokens (e.g. a BOS token).
    sink_mass : float
        Mass :math:`w_0 \in (0, 1)` of the sink; required with `sink`.

    Returns
    -------
    MaskedCloud

    Examples
    --------
    >>> c = causal_cloud([[1.0], [2.0]], sink=[[0.0]], sink_mass=0.5)
    >>> c.tokens
    array([[0. , 0. ],
           [0.5, 1. ],
           [1. , 2. ]])
    >>> c.weights
    array([0.5 , 0.25, 0.25])
    """
    X = as_tokens(X)
    n, d = X.shape
    if sink is None:
        if sink_mass != 0.0:
            raise ValueError("`sink_mass` needs `sink` tokens; pass sink=... or sink_mass=0.")
        return MaskedCloud(with_positions(X), np.full(n, 1.0 / n), 0)
    S = as_tokens(sink, "sink", d=d)
    w0 = check_positive(sink_mass, "sink_mass")
    if w0 >= 1.0:
        raise ValueError(f"`sink_mass` must lie in (0, 1); got {w0!r}.")
    m = S.shape[0]
    pos = np.concatenate([np.zeros(m), np.arange(1, n + 1) / n])
    w = np.concatenate([np.full(m, w0 / m), np.full(n, (1.0 - w0) / n)])
    return MaskedCloud(with_positions(np.vstack([S, X]), pos), w, m)


def first_token_solution(x0: Any, V: Any, times: Any) -> np.ndarray:
    r"""Exact path :math:`x_1(t) = e^{tV}x_1(0)` of a token that attends only to itself.

    Under causal softmax attention the first token (alone at the smallest position) sees only
    itself, so :math:`\dot x_1 = Vx_1`.

    Parameters
    ----------
    x0 : array_like, shape (d,)
    V : array_like, shape (d, d)
    times : array_like, shape (T,)

    Returns
    -------
    ndarray, shape (T, d)

    Examples
    --------
    >>> first_token_solution([1.0, 0.0], [[0.0, -1.0], [1.0, 0.0]], [np.pi]).round(12)
    array([[-1.,  0.]])
    """
    x0 = as_vector(x0, "x0")
    V = as_matrix(V, "V", shape=(x0.shape[0], x0.shape[0]))
    t = _times(times)
    return np.stack([expm(s * V) @ x0 for s in t])


@dataclass(frozen=True)
class Sensitivity:
    """How much a perturbation of the measure moves the masked velocity field.

    Attributes
    ----------
    distance : float
        :math:`W_{2,\\lambda}(\\mu, \\nu)` of the perturbation.
    sup_ratio : float
        :math:`\\max_i |\\Gamma_\\mu(s_i,x_i) - \\Gamma_\\nu(s_i,x_i)| / W_{2,\\lambda}`.
    mean_ratio : float
        :math:`(\\sum_i w_i|\\Gamma_\\mu - \\Gamma_\\nu|^2(s_i,x_i))^{1/2} / W_{2,\\lambda}`.
    """

    distance: float
    sup_ratio: float
    mean_ratio: float


def conditional_sensitivity(
    field: Any, Z: Any, Z_perturbed: Any, *, weights: Any = None
) -> Sensitivity:
    r"""Lipschitz ratios of :math:`\mu\mapsto\Gamma_\mu` for masked tokens, queries held fixed.

    Both velocity fields are evaluated at the queries of `Z` (``field.velocity_at``), so the
    ratios measure the dependence on the measure only.

    Parameters
    ----------
    field : AttentionField
        Typically ``attention.Causal``.
    Z, Z_perturbed : array_like, shape (n, 1 + d)
        Same positions (column 0), different tokens.
    weights : array_like, shape (n,), optional

    Returns
    -------
    Sensitivity

    Examples
    --------
    >>> from token_dynamics.attention import Causal
    >>> cloud = causal_cloud(np.zeros((4, 1)))
    >>> moved = cloud.tokens.copy()
    >>> moved[0, 1] = 0.1  # move the first token, which sees only itself
    >>> sens = conditional_sensitivity(Causal([[0.0]], [[1.0]]), cloud.tokens, moved)
    >>> round(sens.sup_ratio, 6)  # |Delta Gamma| = 0.1 at token 1, W_{2,lambda} = 0.1 / sqrt(4)
    2.0
    """
    Z = as_tokens(Z, "Z")
    Zp = as_tokens(Z_perturbed, "Z_perturbed", d=Z.shape[1])
    w = as_weights(weights, Z.shape[0])
    dist = conditional_w2(Z, Zp, weights_x=w, weights_y=w)
    if dist == 0:
        raise ValueError("`Z_perturbed` must differ from `Z`.")
    diff = field.velocity_at(Z, Zp, weights=w) - field.velocity_at(Z, Z, weights=w)
    norms = np.linalg.norm(diff, axis=1)
    return Sensitivity(
        distance=dist,
        sup_ratio=float(norms[w > 0].max() / dist),
        mean_ratio=float(np.sqrt(np.sum(w * norms**2)) / dist),
    )


def first_token_sensitivity(
    field: Any, X: Any, *, sink: Any = None, sink_mass: float = 0.0, delta: float = 0.1
) -> Sensitivity:
    r"""Sensitivity of the masked field to a move of the first (non-sink) token.

    Builds :func:`causal_cloud` from `X` (and the optional sink), moves the content of the first
    token after the sink by `delta` along the first axis, and returns
    :func:`conditional_sensitivity`. Without a sink the sup ratio grows like :math:`\sqrt n`;
    with a sink of mass :math:`w_0` it stays below :math:`L_\mu(R)/w_0`.

    Parameters
    ----------
    field : AttentionField
        Typically ``attention.Causal``.
    X : array_like, shape (n, d)
    sink : array_like, shape (m, d), optional
    sink_mass : float
    delta : float
        Size of the move.

    Returns
    -------
    Sensitivity

    Examples
    --------
    >>> from token_dynamics.attention import Causal
    >>> field = Causal([[0.0]], [[1.0]])
    >>> round(first_token_sensitivity(field, np.zeros((16, 1))).sup_ratio, 6)  # sqrt(16)
    4.0
    """
    delta = check_positive(delta, "delta")
    cloud = causal_cloud(X, sink=sink, sink_mass=sink_mass)
    moved = cloud.tokens.copy()
    moved[cloud.n_sink, 1] += delta
    return conditional_sensitivity(field, cloud.tokens, moved, weights=cloud.weights)
