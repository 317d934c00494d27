r"""Lemma 4.1 of Agazzi et al. (2026): the functions G and F and the rate of Theorem 1.4
(private module).

- :func:`lemma_4_1_terms`, :func:`dissipation_function`, :func:`dissipation_rate` -- the
  functions :math:`G_0, G_1, G, F` of Lemma 4.1 and the rate :math:`\bar\lambda'`;
- :func:`noise_energy_drift` -- the Itô drift of :math:`\mathcal S_\beta` under the noise
  (terms (II)+(III)+(IV) of §4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from .._guards import float_guard
from .._linalg import LOG_FLOAT_MAX
from .._typing import ArrayLike
from .._validation import as_real_array, as_sphere_tokens, as_weights
from ._energy import _beta, _half_gaps
from ._exponents import NoiseExponents, check_assumption_1, noise_exponents
from ._kernels import _gap_function

__all__ = [
    "Lemma41Terms",
    "dissipation_function",
    "dissipation_rate",
    "lemma_4_1_terms",
    "noise_energy_drift",
    "sharp_rate_beta",
]

#: Grid points on [-1, 1] for the infimum of Lemma 4.1's F; the grid minimum is refined by a
#: bounded scalar search, so the grid only has to land in the right basin.
DISSIPATION_GRID = 801
#: Above this ``beta`` Lemma 4.1's quotient is computed in the log domain (``beta^2`` would
#: overflow beyond 1e154; any value far below that and far above the paper's beta works).
LARGE_BETA = 1e100


@dataclass(frozen=True)
class Lemma41Terms:
    r"""The functions of Agazzi et al. (2026), Lemma 4.1, on a grid of inner products.

    Attributes
    ----------
    u : ndarray, shape (k,)
    G0 : ndarray, shape (k,)
        :math:`\kappa(u)(d-2+u^2) - \kappa(1)(d-1)u`: the drift of :math:`u = \langle X, Y\rangle`
        for two tokens moved by the noise.
    G1 : ndarray, shape (k,)
        :math:`(1-u^2)(\kappa(1) - u\kappa(u))`: half the variance rate of :math:`u`.
    G : ndarray, shape (k,)
        :math:`G_0 + \beta G_1`.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import lemma_4_1_terms
    >>> t = lemma_4_1_terms([-1.0, 1.0], "sigmoid", d=5, beta=1.0)
    >>> bool(np.all(t.G1 >= 0)), bool(np.allclose(t.G, t.G0 + t.G1))
    (True, True)
    """

    u: np.ndarray
    G0: np.ndarray
    G1: np.ndarray
    G: np.ndarray


def _inner_products(u: ArrayLike) -> np.ndarray:
    arr = np.atleast_1d(as_real_array(u, "u"))
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > 1):
        raise ValueError("`u` must be a finite 1-D array of inner products in [-1, 1].")
    return arr


def _noise(activation: str, d: int, sigma_U: float, sigma_W: float):
    """The exponents of one noise and its gap ``s -> kappa(1) - kappa(1 - s)``, accurate to
    relative rounding as ``s -> 0`` (``_kernels._gap_function``)."""
    row = noise_exponents(activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W)
    return row, _gap_function(activation, row.d, row.sigma_U, row.sigma_W)[0]


def _terms(u: np.ndarray, row: NoiseExponents, phi, beta: float, r=None) -> Lemma41Terms:
    r"""``G0``, ``G1`` and ``G`` at ``u``, from ``r = 1 - u`` (computed if not given) and the gap
    :math:`\delta = \kappa(1) - \kappa(u)`, without cancellation near the diagonal:

    .. math:: G_0 = \kappa(1)\,r\,(d-2-u) - \delta\,(d-2+u^2),\qquad
              G_1 = r(2-r)\big(\kappa(1)\,r + u\,\delta\big).
    """
    r = 1.0 - u if r is None else r
    delta = phi(r)
    G0 = row.kappa_1 * r * (row.d - 2 - u) - delta * (row.d - 2 + u**2)
    G1 = r * (2 - r) * (row.kappa_1 * r + u * delta)
    return Lemma41Terms(u, G0, G1, G0 + beta * G1)


def _quotient(u: np.ndarray, row: NoiseExponents, phi, beta: float) -> np.ndarray:
    r"""``beta G(u) / expm1(beta (1 - u))`` for ``u < 1``, finite for every ``beta``.

    Directly while :math:`\beta(1-u)` and :math:`\beta` are moderate; otherwise in the log
    domain, :math:`\log|F| = 2\log\beta + \log|G_0/\beta + G_1| - \beta(1-u)
    - \log(1 - e^{-\beta(1-u)})`, where :math:`\beta^2 G_1` and :math:`e^{\beta(1-u)}` would
    overflow although their quotient (tiny) does not.
    """
    x = beta * (1 - u)
    out = np.empty_like(u)
    direct = (x <= LOG_FLOAT_MAX) & (beta <= LARGE_BETA)
    if np.any(direct):
        t = _terms(u[direct], row, phi, beta)
        out[direct] = beta * t.G / np.expm1(x[direct])
    if not np.all(direct):
        t = _terms(u[~direct], row, phi, 0.0)  # G0 and G1 without the product beta G1
        h = t.G0 / beta + t.G1
        xs = x[~direct]
        with np.errstate(divide="ignore"):  # h = 0 gives log 0 = -inf and F = 0, exactly
            log_F = 2 * np.log(beta) + np.log(np.abs(h)) - xs - np.log1p(-np.exp(-xs))
        out[~direct] = np.sign(h) * np.exp(log_F)
    return out


def _F(u: np.ndarray, row: NoiseExponents, phi, beta: float) -> np.ndarray:
    """Lemma 4.1's F: the quotient off the diagonal (``G`` from the gap keeps its digits as
    ``u -> 1``), its limit ``-lambda_bar`` at ``u = 1``."""
    off = u < 1
    out = np.full_like(u, -row.lambda_bar)
    out[off] = _quotient(u[off], row, phi, beta)
    return out


def lemma_4_1_terms(
    u: ArrayLike,
    activation: str,
    *,
    d: int,
    beta: float,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
) -> Lemma41Terms:
    r"""The functions :math:`G_0`, :math:`G_1` and :math:`G = G_0 + \beta G_1` of Lemma 4.1,

    .. math::

        G_0(u) = \kappa(u)(d-2+u^2) - \kappa(1)(d-1)u, \qquad
        G_1(u) = (1-u^2)\big(\kappa(1) - u\kappa(u)\big).

    Parameters
    ----------
    u : array_like, shape (k,)
        Inner products in ``[-1, 1]``.
    activation : str
    d : int
    beta : float
    sigma_U, sigma_W : float

    Returns
    -------
    Lemma41Terms

    Raises
    ------

    ValueError
        If `u` is not a finite 1-D array in ``[-1, 1]``, `beta` is not positive, or a noise
        argument is invalid (as in :func:`noise_exponents`).
    FloatingPointError
        If the kernel exceeds the float64 range.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Lemma 4.1.

    Examples
    --------
    >>> from token_dynamics.stochastic import lemma_4_1_terms
    >>> t = lemma_4_1_terms([1.0], "relu", d=5, beta=1.0)
    >>> abs(float(t.G[0])) < 1e-12          # G vanishes on the diagonal
    True
    """
    u = _inner_products(u)
    beta = _beta(beta)
    row, phi = _noise(activation, d, sigma_U, sigma_W)
    return _terms(u, row, phi, beta)


def dissipation_function(
    u: ArrayLike,
    activation: str,
    *,
    d: int,
    beta: float,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
) -> np.ndarray:
    r"""The function :math:`F` of Agazzi et al. (2026), Lemma 4.1, continuous on :math:`[-1, 1]`,

    .. math::

        F(u) = \frac{\beta e^{\beta u} G(u)}{e^\beta - e^{\beta u}}
             = \frac{\beta\, G(u)}{\operatorname{expm1}(\beta(1-u))}, \qquad
        F(1) = \lim_{u\to1} F(u) = -\bar\lambda .

    The limit follows from :math:`G(1) = 0` and :math:`G'(1) = G_0'(1) = \bar\lambda`
    (:math:`G_1` vanishes to second order at 1). :math:`G` is computed from
    :math:`\kappa(1) - \kappa(u)` and :math:`1 - u`, without cancellation, so the quotient
    keeps its digits up to the diagonal. For large ``beta`` the quotient is computed in the log
    domain: it is finite (and tends to 0 away from the diagonal) for every ``beta``.

    Parameters
    ----------
    u : array_like, shape (k,)
    activation : str
    d : int
    beta : float
    sigma_U, sigma_W : float

    Returns
    -------
    ndarray, shape (k,)

    Raises
    ------

    ValueError
        If `u` is not a finite 1-D array in ``[-1, 1]``, `beta` is not positive, or a noise
        argument is invalid (as in :func:`noise_exponents`).
    FloatingPointError
        If the kernel exceeds the float64 range.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Lemma 4.1.

    Examples
    --------
    >>> from token_dynamics.stochastic import dissipation_function
    >>> F = dissipation_function([1.0], "relu", d=64, beta=1.0, sigma_U=0.1, sigma_W=0.1)
    >>> float(F[0])                            # -lambda_bar
    0.899375
    """
    u = _inner_products(u)
    beta = _beta(beta)
    row, phi = _noise(activation, d, sigma_U, sigma_W)
    return _F(u, row, phi, beta)


def dissipation_rate(
    activation: str,
    *,
    d: int,
    beta: float,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
    strict: bool = True,
) -> float:
    r"""The rate :math:`\bar\lambda' = -\inf_{[-1,1]} F` of Agazzi et al. (2026), Lemma 4.1.

    Under Assumption 1 (which forces :math:`d > 3`) it is negative, and it bounds the noise
    terms of the Itô formula,
    :math:`-\frac12\beta e^{\beta u}G(u) \le \bar\lambda'\,\frac12(e^\beta - e^{\beta u})`
    (Lemma 4.1). Since :math:`\inf F \le F(1) = -\bar\lambda`, it also satisfies
    :math:`\bar\lambda \le \bar\lambda'` (derived in this book from the definition; the end of
    the paper's proof writes the comparison the other way, :math:`\bar\lambda' \le \bar\lambda`,
    which the definition excludes unless the two are equal).
    The infimum is taken on a grid of ``DISSIPATION_GRID`` points, refined by a bounded search.

    Parameters
    ----------
    activation : str
    d : int
    beta : float
    sigma_U, sigma_W : float
    strict : bool
        Raise :class:`AssumptionError` when Assumption 1 fails (the lemma's hypothesis). With
        ``False`` the number :math:`-\inf F` is returned anyway (it is then not negative).

    Returns
    -------
    float

    .. math:: \bar\lambda' = -\inf_{u\in[-1,1]} F(u),\qquad
              \bar\lambda \le \bar\lambda' < 0 \text{ under Assumption 1}.

    Raises
    ------
    AssumptionError
        If `strict` and Assumption 1 fails.
    ValueError
        If `beta` is not positive or a noise argument is invalid.
    FloatingPointError
        If the kernel exceeds the float64 range.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Lemma 4.1 and Theorem 1.4.

    Examples
    --------
    >>> from token_dynamics.stochastic import dissipation_rate
    >>> rate = dissipation_rate("relu", d=64, beta=1.0, sigma_U=0.1, sigma_W=0.1)
    >>> bool(-0.899375 <= rate < 0)
    True
    """
    if strict:
        check_assumption_1(activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W)
    beta = _beta(beta)
    row, phi = _noise(activation, d, sigma_U, sigma_W)
    grid = np.linspace(-1.0, 1.0, DISSIPATION_GRID)
    F = _F(grid, row, phi, beta)
    i = int(np.argmin(F))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(
        lambda s: float(_F(np.array([s]), row, phi, beta)[0]),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return -float(min(F[i], res.fun))


def sharp_rate_beta(
    activation: str, *, d: int, sigma_U: float = 0.0, sigma_W: float = 0.0
) -> float:
    r"""An inverse temperature below which the rate of Lemma 4.1 is exactly :math:`\bar\lambda`.

    With :math:`c = 2\kappa(1)/|\bar\lambda|`, every :math:`\beta` with
    :math:`\beta e^{2\beta} \le c` has :math:`\inf F = F(1)`, i.e.
    :math:`\bar\lambda'(\beta) = \bar\lambda` (derived in this book: the lower bound
    :math:`G(u) \ge -\bar\lambda r + \kappa(1) r^2`, :math:`r = 1 - u`, of the proof of Lemma 4.1
    beats :math:`(e^s - 1)/s \le 1 + \frac s2 e^s`). The largest such :math:`\beta` is returned:

    .. math:: \beta_* = \tfrac12 W_0(2c),

    with :math:`W_0` the principal branch of Lambert's function. The condition is sufficient,
    not necessary: :math:`\bar\lambda'(\beta) = \bar\lambda` may hold beyond :math:`\beta_*`.

    Parameters
    ----------
    activation : str
    d : int
    sigma_U, sigma_W : float

    Returns
    -------
    float

    Raises
    ------
    AssumptionError
        If Assumption 1 fails (:math:`\bar\lambda` is then not negative).
    ValueError
        If a noise argument is invalid.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Lemma 4.1 and Remark 1.6 (the choice of :math:`\beta`).

    Examples
    --------
    >>> from token_dynamics.stochastic import dissipation_rate, noise_exponents, sharp_rate_beta
    >>> b = sharp_rate_beta("sigmoid", d=5)
    >>> rate = dissipation_rate("sigmoid", d=5, beta=b)
    >>> bool(abs(rate - noise_exponents("sigmoid", d=5).lambda_bar) < 1e-12)
    True
    """
    row = check_assumption_1(activation, d=d, sigma_U=sigma_U, sigma_W=sigma_W)
    c = 2.0 * row.kappa_1 / abs(row.lambda_bar)
    return 0.5 * float(special.lambertw(2.0 * c).real)


def noise_energy_drift(
    X: ArrayLike,
    activation: str,
    *,
    beta: float,
    sigma_U: float = 0.0,
    sigma_W: float = 0.0,
    weights: ArrayLike | None = None,
) -> float:
    r"""Itô drift of :math:`\mathcal S_\beta(\mu^N_t)` due to the common noise, at the tokens ``X``,

    .. math::

        \text{(II)} + \text{(III)} + \text{(IV)}
        = -\frac12 \sum_{i,j} w_i w_j\, \beta e^{\beta u_{ij}} G(u_{ij}),
        \qquad u_{ij} = \langle x_i, x_j\rangle,

    so that, with the noise alone, :math:`\frac{d}{dt}\mathbb E\,\mathcal S_\beta(\mu^N_t)` is the
    mean of this quantity. Lemma 4.1 bounds it by :math:`\bar\lambda'\,\mathcal S_\beta`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere.
    activation : str
    beta : float
    sigma_U, sigma_W : float
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    Raises
    ------

    ValueError
        If `X` is not a finite real array of unit rows (tokens on the sphere), `beta` is not
        positive, or a noise argument is invalid.
    FloatingPointError
        If the drift, of the order of :math:`\beta e^\beta`, exceeds the float64 range (``beta``
        above about 700 for tokens not all equal).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, §4 (proof of Theorem 1.4).

    Examples
    --------
    >>> from token_dynamics.stochastic import noise_energy_drift
    >>> import numpy as np
    >>> X = np.array([[1.0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0]])
    >>> noise_energy_drift(X, "relu", beta=1.0) < 0      # ReLU noise brings them closer
    True
    """
    X = as_sphere_tokens(X)
    w = as_weights(weights, X.shape[0])
    beta = _beta(beta)
    gaps = np.clip(_half_gaps(X), 0.0, 2.0)  # 1 - u, exact near the diagonal
    u = 1 - gaps
    row, phi = _noise(activation, X.shape[1], sigma_U, sigma_W)
    fix = "lower `beta` (the drift is of the order of e^beta times the energy's scale)"
    with float_guard("the noise drift of the energy", fix):
        G = _terms(u.ravel(), row, phi, beta, gaps.ravel()).G.reshape(u.shape)
        G[gaps == 0] = 0.0  # G(1) = 0 (Lemma 4.1): coincident pairs do not drift, exactly
        live = G != 0
        if not np.any(live):
            return 0.0
        # -beta/2 e^(beta m) sum w_i w_j e^(beta (u_ij - m)) G(u_ij), m the largest u_ij of a
        # pair that drifts: no exponential overflows, and the largest term is not lost
        m = float(np.max(u[live]))
        total = float(np.einsum("ij,ij,i,j->", np.exp(beta * (u - m)), G, w, w))
        if total == 0.0:
            return 0.0
        log_size = np.log(0.5 * beta) + beta * m + np.log(abs(total))
        if log_size > LOG_FLOAT_MAX:
            raise FloatingPointError(
                f"the noise drift of the energy leaves the float64 range (about e^{log_size:.4g})"
                f" at `beta` = {beta:g}; {fix}."
            )
        return float(-np.sign(total) * np.exp(log_size))
