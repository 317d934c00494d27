r"""Critical points of the interaction energy on a product of spheres, and the large-beta argument.

The Riemannian gradient and Hessian of :math:`E_\beta` on :math:`(\mathbb S^{d-1})^n`, Newton's
method on the gradient, the kernel :math:`g_\beta` with its threshold angle, and the subset sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, FloatArray
from .._validation import as_real_array, as_sphere_tokens, as_square, check_int, check_positive
from ._orthogonal import MAX_BETA

__all__ = [
    "MAX_SUBSET_TOKENS",
    "CriticalPoint",
    "EnergyHessian",
    "SubsetSums",
    "find_critical_point",
    "polygon_clusters",
    "rotation_second_variation",
    "sphere_energy_gradient",
    "sphere_energy_hessian",
    "subset_kernel",
    "subset_sums",
    "threshold_angle",
]

#: Largest number of tokens for :func:`subset_sums`: it enumerates the :math:`2^{n-1} - 1`
#: proper subsets up to complement, about 33 000 subsets and 8 million pair terms at n = 16.
MAX_SUBSET_TOKENS = 16
#: Most tokens :func:`polygon_clusters` builds (a million rows of a few floats each).
MAX_POLYGON_TOKENS = 10**6
#: Eigenvalues of the Hessian below this fraction of the largest one in absolute value are
#: treated as zero by the Newton step (the directions of the rotation orbit, along which the
#: energy is constant): a few hundred ulps of the Hessian's scale.
NEWTON_RCOND = 1e-13


def _check_beta(beta: object) -> float:
    beta = check_positive(beta, "beta")
    if beta > MAX_BETA:
        raise ValueError(
            f"`beta` = {beta:g} makes e^beta overflow in double precision (the energy and its "
            f"derivatives are of order e^beta); use beta <= {MAX_BETA:g}."
        )
    return beta


def _tokens(X: object, name: str = "X") -> FloatArray:
    X = as_sphere_tokens(X, name)
    if X.shape[1] < 2:
        raise ValueError(
            f"`{name}` must have d >= 2 columns (tokens on the sphere S^(d-1) of dimension at "
            f"least one); got d = {X.shape[1]}."
        )
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _tangent_basis(X: FloatArray) -> FloatArray:
    """Orthonormal bases of the tangent spaces, shape (n, d-1, d): rows orthogonal to x_i."""
    _, _, vt = np.linalg.svd(X[:, None, :])
    return vt[:, 1:, :]


def _weights(X: FloatArray, beta: float) -> tuple[FloatArray, FloatArray, float]:
    """Inner products C = X X^T, scaled weights W = e^{beta (C - c)} <= 1 with a zero diagonal,
    and c, the largest inner product of two distinct tokens (1 for a single token).

    The gradient and Hessian below are computed in the unit e^{beta c} / n^2 (the largest pair
    weight of the configuration over n^2), so that no intermediate overflows for any
    beta <= MAX_BETA, and the largest weight is 1 however far apart the tokens are: in the unit
    e^beta, every weight of tokens at inner products below 1 - 745 / beta underflowed to zero
    (at beta = 700, tokens beyond 94 degrees of one another had an exact zero gradient).
    """
    C = np.clip(X @ X.T, -1.0, 1.0)
    D = C.copy()
    np.fill_diagonal(D, -np.inf)  # a token's interaction with itself is constant on the sphere
    c = float(np.max(D)) if D.shape[0] > 1 else 1.0
    return C, np.exp(beta * (D - c)), c


def _unit(beta: float, n: int, c: float) -> float:
    """The unit of the scaled gradient and Hessian, e^{beta c} / n^2."""
    return math.exp(beta * c) / n**2


def _gradient(X: FloatArray, C: FloatArray, W: FloatArray) -> FloatArray:
    # sum_j W_ij (x_j - C_ij x_i): the tangent part of each pull, without the self term
    return W @ X - np.sum(W * C, axis=1)[:, None] * X


def _hessian(X: FloatArray, U: FloatArray, C: FloatArray, W: FloatArray, beta: float) -> FloatArray:
    n, d = X.shape
    k = d - 1
    a = np.einsum("iad,jd->ija", U, X)  # a[i, j] = U_i x_j, shape (n, n, k)
    H = np.einsum("ij,iad,jbd->iajb", W, U, U)  # W_ij U_i U_j^T
    H += beta * np.einsum("ij,ija,jib->iajb", W, a, a)  # beta W_ij (U_i x_j)(U_j x_i)^T
    idx = np.arange(n)
    H[idx, :, idx, :] = beta * np.einsum("ij,ija,ijb->iab", W, a, a)
    H[idx, :, idx, :] -= np.sum(W * C, axis=1)[:, None, None] * np.eye(k)
    H = H.reshape(n * k, n * k)
    return 0.5 * (H + H.T)


@float_guard("the energy gradient on the sphere", "use a smaller `beta`")
def sphere_energy_gradient(X: ArrayLike, *, beta: float) -> FloatArray:
    r"""Riemannian gradient of :math:`E_\beta` on :math:`(\mathbb S^{d-1})^n`, round metric.

    .. math::

        E_\beta(X) = \frac{1}{2\beta n^2}\sum_{i,j=1}^n e^{\beta\langle x_i, x_j\rangle},
        \qquad
        \nabla_iE_\beta(X) = \frac{1}{n^2}\sum_{j\ne i}e^{\beta\langle x_i, x_j\rangle}
        \big(x_j - \langle x_i, x_j\rangle x_i\big).

    The unnormalised dynamics (USA) is :math:`\dot X = n\nabla E_\beta(X)`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere, :math:`d \ge 2`.
    beta : float
        Inverse temperature, :math:`0 < \beta \le 700`.

    Returns
    -------
    ndarray, shape (n, d)
        Row :math:`i` is :math:`\nabla_iE_\beta`, tangent at :math:`x_i`.

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of unit rows with ``d >= 2``, or `beta` is not in
        ``(0, 700]``.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, §3.3 (the particle energy and USA as its gradient
    ascent).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.clustering import sphere_energy_gradient
    >>> g = sphere_energy_gradient([[1.0, 0.0], [0.0, 1.0]], beta=1.0)
    >>> np.round(g * 4, 12).tolist()  # e^0 (x_j - 0 x_i) for each token, over n^2 = 4
    [[0.0, 1.0], [1.0, 0.0]]
    """
    X = _tokens(X)
    beta = _check_beta(beta)
    C, W, c = _weights(X, beta)
    return _gradient(X, C, W) * _unit(beta, X.shape[0], c)


@dataclass(frozen=True)
class EnergyHessian:
    r"""The Riemannian Hessian of :math:`E_\beta` at a configuration, in tangent coordinates.

    Attributes
    ----------
    matrix : ndarray, shape (n (d-1), n (d-1))
        Symmetric; block :math:`(i, j)` acts on the coordinates of :math:`\xi_j` in
        ``basis[j]`` and returns those of the :math:`i`-th component in ``basis[i]``.
    basis : ndarray, shape (n, d-1, d)
        ``basis[i]`` has orthonormal rows spanning the tangent space at :math:`x_i`.
    eigenvalues : ndarray, shape (n (d-1),)
        Ascending.
    gradient_norm : float
        :math:`\|\nabla E_\beta(X)\|` at the same point (zero at a critical point, where the
        Hessian is the second derivative along every curve).

    Examples
    --------
    Returned by :func:`sphere_energy_hessian`:

    >>> from token_dynamics.clustering import sphere_energy_hessian
    >>> sphere_energy_hessian([[1.0, 0.0], [1.0, 0.0]], beta=1.0).eigenvalues.shape
    (2,)
    """

    matrix: FloatArray
    basis: FloatArray
    eigenvalues: FloatArray
    gradient_norm: float

    @property
    def max_eigenvalue(self) -> float:
        """The largest eigenvalue, positive exactly when the point (if critical) is a strict
        saddle or a local minimum, that is, has an ascent direction of positive curvature."""
        return float(self.eigenvalues[-1])

    def quadratic_form(self, xi: ArrayLike) -> float:
        r""":math:`\operatorname{Hess}E_\beta(X)[\xi, \xi]` for tangent vectors ``xi``.

        Parameters
        ----------
        xi : array_like, shape (n, d)
            Row :math:`i` tangent at :math:`x_i` (its normal part is ignored).

        Returns
        -------
        float
        """
        n, k, d = self.basis.shape
        xi = as_real_array(xi, "xi")
        if xi.shape != (n, d):
            raise ValueError(f"`xi` must have shape ({n}, {d}), one row per token; got {xi.shape}.")
        c = np.einsum("iad,id->ia", self.basis, xi).reshape(n * k)
        return float(c @ self.matrix @ c)


@float_guard("the energy Hessian on the sphere", "use a smaller `beta`")
def sphere_energy_hessian(X: ArrayLike, *, beta: float) -> EnergyHessian:
    r"""Riemannian Hessian of :math:`E_\beta` on :math:`(\mathbb S^{d-1})^n`, round metric.

    For tangent vectors :math:`\xi_i \perp x_i`, with :math:`c_{ij} = \langle x_i, x_j\rangle`
    and :math:`P_i = I - x_ix_i^\top`,

    .. math::

        n^2\operatorname{Hess}E_\beta[\xi, \xi]
        = \sum_{i\ne j}e^{\beta c_{ij}}\Big(\langle\xi_i, \xi_j\rangle
        + \beta\langle\xi_i, x_j\rangle\langle x_i, \xi_j\rangle
        + \beta\langle\xi_i, x_j\rangle^2 - c_{ij}|\xi_i|^2\Big),

    the Euclidean Hessian projected on the tangent spaces, less the Weingarten term
    :math:`\langle x_i, \partial_iE_\beta\rangle|\xi_i|^2` (the self terms cancel). It is
    the second derivative of :math:`E_\beta` along every geodesic, and at a critical point
    along every curve.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere, :math:`d \ge 2`.
    beta : float
        Inverse temperature, :math:`0 < \beta \le 700`.

    Returns
    -------
    EnergyHessian

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of unit rows with ``d >= 2``, or `beta` is not in
        ``(0, 700]``.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, Appendix B (the Hessian at a critical point in the
    proof of Theorem 5.1); P.-A. Absil, R. Mahony, J. Trumpler, *An extrinsic look at the
    Riemannian Hessian* (2013), for the projection and Weingarten terms.

    Examples
    --------
    Two antipodal tokens on the circle: rotating one towards the other raises the energy, with
    curvature :math:`2\cdot e^{-\beta}/n^2` for the relative angle:

    >>> import numpy as np
    >>> from token_dynamics.clustering import sphere_energy_hessian
    >>> h = sphere_energy_hessian([[1.0, 0.0], [-1.0, 0.0]], beta=1.0)
    >>> bool(np.isclose(h.max_eigenvalue, np.exp(-1.0) / 2))
    True
    """
    X = _tokens(X)
    beta = _check_beta(beta)
    C, W, c = _weights(X, beta)
    U = _tangent_basis(X)
    H = _hessian(X, U, C, W, beta)
    unit = _unit(beta, X.shape[0], c)
    eigenvalues = np.asarray(np.linalg.eigvalsh(H), dtype=np.float64) * unit
    grad_norm = float(np.linalg.norm(_gradient(X, C, W))) * unit
    return EnergyHessian(H * unit, U, eigenvalues, grad_norm)


@dataclass(frozen=True)
class CriticalPoint:
    r"""The end of Newton's method on the Riemannian gradient of :math:`E_\beta`.

    Attributes
    ----------
    X : ndarray, shape (n, d)
        The last iterate, on the sphere.
    gradient_norm : float
        :math:`\|\nabla E_\beta(X)\|\,n^2e^{-\beta c}`, :math:`c = \max_{i\ne j}\langle x_i,
        x_j\rangle`: the gradient in units of the largest pair weight of the configuration, the
        quantity compared with ``tol``.
    iterations : int
        Newton steps taken.
    status : str
        ``"completed"`` if ``gradient_norm <= tol``, else ``"failed"``.
    message : str

    Examples
    --------
    Returned by :func:`find_critical_point`:

    >>> from token_dynamics.clustering import find_critical_point
    >>> find_critical_point([[1.0, 0.0], [0.6, 0.8]], beta=1.0).status
    'completed'
    """

    X: FloatArray
    gradient_norm: float
    iterations: int
    status: str
    message: str


@float_guard("Newton's method on the energy gradient", "use a smaller `beta`")
def find_critical_point(
    X0: ArrayLike,
    *,
    beta: float,
    tol: float = 1e-11,
    max_iter: int = 100,
    max_step: float = 0.5,
) -> CriticalPoint:
    r"""A critical point of :math:`E_\beta` on :math:`(\mathbb S^{d-1})^n`, by Newton's method.

    Each step solves :math:`\operatorname{Hess}E_\beta(X)[\eta] = -\nabla E_\beta(X)` in the
    tangent coordinates of :func:`sphere_energy_hessian`, by the pseudo-inverse (eigenvalues
    below ``1e-13`` times the largest are dropped: the rotation orbit, along which
    :math:`E_\beta` is constant, is a kernel at every critical point), shortens the step so that
    no token moves by more than ``max_step`` radians, and moves each token along its geodesic.
    Newton's method is attracted by critical points of every index (maxima, saddles, minima),
    which is what a census of critical points needs. It stops when

    .. math::

        \|\nabla E_\beta(X)\|\;n^2e^{-\beta c} \le \mathrm{tol}, \qquad
        c = \max_{i\ne j}\langle x_i, x_j\rangle,

    the gradient measured in units of the largest pair weight :math:`e^{\beta c}` of the
    configuration, the size of its largest term: the test reads the same at every
    :math:`\beta`. (In units of :math:`e^\beta`, the weight of a coincident pair, tokens whose
    inner products were all below :math:`1 - 25/\beta` passed ``tol = 1e-11`` anywhere, critical
    or not: at :math:`\beta = 20` a triangle on the circle at angles 2, 2 and 2.28 was
    returned unchanged as critical.)

    Parameters
    ----------
    X0 : array_like, shape (n, d)
        Start, tokens on the unit sphere, :math:`d \ge 2`.
    beta : float
        Inverse temperature, :math:`0 < \beta \le 700`.
    tol : float
        Tolerance on the scaled gradient norm; reachable down to about ``1e-14`` (the rounding
        of the gradient, :math:`n` terms of size one).
    max_iter : int
        Most Newton steps.
    max_step : float
        Largest geodesic move of a token in one step, radians.

    Returns
    -------
    CriticalPoint
        ``status == "completed"`` when the tolerance is met, ``"failed"`` (with the reached
        gradient norm in ``message``) after ``max_iter`` steps.

    Raises
    ------
    ValueError
        If `X0` is not an ``(n, d)`` array of unit rows with ``d >= 2``, `beta` is not in
        ``(0, 700]``, or `tol`, `max_iter` or `max_step` is not positive.

    References
    ----------
    P.-A. Absil, R. Mahony, R. Sepulchre, *Optimization Algorithms on Matrix Manifolds*
    (2008), §6.2 (Riemannian Newton method); Geshkovski et al., arXiv:2312.10794, Theorem 5.1
    (the critical points of :math:`E_\beta` at large :math:`\beta`).

    Examples
    --------
    Three tokens near the vertices of a triangle on the circle converge to the triangle:

    >>> import numpy as np
    >>> from token_dynamics.clustering import find_critical_point
    >>> angles = np.array([0.1, 2.0, 4.3])
    >>> cp = find_critical_point(np.column_stack([np.cos(angles), np.sin(angles)]), beta=2.0)
    >>> X = cp.X
    >>> cp.status, float(np.round(X @ X.T, 10).min())
    ('completed', -0.5)
    """
    X = _tokens(X0, "X0").copy()
    beta = _check_beta(beta)
    tol = check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter")
    max_step = check_positive(max_step, "max_step")
    n, d = X.shape
    for it in range(max_iter + 1):
        C, W, _ = _weights(X, beta)
        grad = _gradient(X, C, W)  # in the unit e^{beta c} / n^2, the one of `tol`
        gnorm = float(np.linalg.norm(grad))
        if gnorm <= tol:
            return CriticalPoint(
                X, gnorm, it, "completed", f"gradient norm {gnorm:.3g} <= tol after {it} steps"
            )
        if it == max_iter:
            break
        U = _tangent_basis(X)
        H = _hessian(X, U, C, W, beta)
        g = np.einsum("iad,id->ia", U, grad).reshape(-1)
        lam, V = np.linalg.eigh(H)
        keep = np.abs(lam) > NEWTON_RCOND * np.max(np.abs(lam))
        eta = -(V[:, keep] @ ((V[:, keep].T @ g) / lam[keep]))
        step = np.einsum("iad,ia->id", U, eta.reshape(n, d - 1))  # ambient tangent vectors
        lengths = np.linalg.norm(step, axis=1)
        longest = float(lengths.max())
        if longest > max_step:
            step *= max_step / longest
            lengths *= max_step / longest
        safe = np.where(lengths > 0, lengths, 1.0)
        X = np.cos(lengths)[:, None] * X + (np.sin(lengths) / safe)[:, None] * step
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    return CriticalPoint(
        X,
        gnorm,
        max_iter,
        "failed",
        f"Newton's method did not reach tol = {tol:g} in {max_iter} steps (gradient norm "
        f"{gnorm:.3g}); start closer to a critical point or raise `max_iter`.",
    )


@float_guard("the kernel g_beta", "use a smaller `beta`")
def subset_kernel(theta: ArrayLike, *, beta: float, d: int) -> FloatArray:
    r"""The kernel of the large-:math:`\beta` argument,

    .. math::

        g_\beta(\theta) = e^{\beta\cos\theta}\big((d-1)\cos\theta - \beta\sin^2\theta\big).

    Minus the sum over the coordinate rotations :math:`B = e_ke_l^\top - e_le_k^\top`,
    :math:`k < l`, of the second variation
    :math:`e^{\beta\cos\theta}(\beta\langle Bx, y\rangle^2 + \langle B^2x, y\rangle)` of a pair
    at angle :math:`\theta`; positive for :math:`\theta < \tau^*_\beta` and negative
    beyond (:func:`threshold_angle`).

    Parameters
    ----------
    theta : array_like
        Angles (geodesic distances), any shape.
    beta : float
        Inverse temperature, :math:`0 < \beta \le 700`.
    d : int
        Ambient dimension, >= 2.

    Returns
    -------
    ndarray
        The shape of `theta`.

    Raises
    ------
    ValueError
        If `theta` is not finite, `beta` is not in ``(0, 700]`` or `d` < 2.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, Appendix B (proof of Theorem 5.1).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.clustering import subset_kernel
    >>> g = subset_kernel([0.0, np.pi], beta=1.0, d=3)
    >>> bool(np.allclose(g, [2 * np.e, -2 / np.e]))
    True
    """
    theta = as_real_array(theta, "theta")
    beta = _check_beta(beta)
    d = check_int(d, "d", minimum=2)
    c = np.cos(theta)
    return np.exp(beta * c) * ((d - 1) * c - beta * np.sin(theta) ** 2)


def threshold_angle(beta: float, d: int) -> float:
    r"""The angle :math:`\tau^*_\beta \in (0, \pi/2)` where :math:`g_\beta` changes sign.

    It solves :math:`\beta\sin^2\tau = (d-1)\cos\tau`, so

    .. math::

        \cos\tau^*_\beta = \frac{2\beta}{(d-1) + \sqrt{(d-1)^2 + 4\beta^2}},
        \qquad \tau^*_\beta = \sqrt{\frac{d-1}{\beta}}\Big(1 - \frac{d-1}{12\beta}
        + O(\beta^{-2})\Big).

    Computed as :math:`\operatorname{atan2}(\sqrt{(d-1)\cos\tau/\beta}, \cos\tau)`, accurate
    to a few ulps for every :math:`\beta` (no cancellation near :math:`0` or :math:`\pi/2`).

    Parameters
    ----------
    beta : float
        Inverse temperature, > 0.
    d : int
        Ambient dimension, >= 2.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `beta` is not a finite positive number or `d` < 2.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, Appendix B (proof of Theorem 5.1).

    Examples
    --------
    >>> import math
    >>> from token_dynamics.clustering import threshold_angle
    >>> round(threshold_angle(1.0, 2), 12) == round(math.acos((math.sqrt(5) - 1) / 2), 12)
    True
    """
    beta = check_positive(beta, "beta")
    d = check_int(d, "d", minimum=2)
    m = float(d - 1)
    # cos tau = 2 beta / (m + sqrt(m^2 + 4 beta^2)), written with beta factored out where large
    if beta > m:
        c = 2.0 / (m / beta + math.sqrt((m / beta) ** 2 + 4.0))
    else:
        c = 2.0 * beta / (m + math.sqrt(m * m + 4.0 * beta * beta))
    s = math.sqrt(m * c / beta)  # sin tau, from beta sin^2 = (d-1) cos
    return math.atan2(s, c)


@dataclass(frozen=True)
class SubsetSums:
    r"""The subset sums :math:`G(\mathcal S) = \sum_{i\in\mathcal S}\sum_{j\notin\mathcal S}
    g_\beta(\theta_{ij})` of a configuration, over the proper subsets up to complement.

    Attributes
    ----------
    subsets : ndarray of bool, shape (2^(n-1) - 1, n)
        Row :math:`s` marks the tokens of :math:`\mathcal S`; the last token is never in it
        (each subset stands for itself and its complement).
    sums : ndarray, shape (2^(n-1) - 1,)
        :math:`G(\mathcal S)`.
    smallest : float
        The smallest sum: negative only if some :math:`G(\mathcal S) < 0`.
    eigenvalue_bound : float
        :math:`\max_{\mathcal S} -G(\mathcal S)/(n^2(d-1)\min(|\mathcal S|, n - |\mathcal S|))`,
        a lower bound on the largest Hessian eigenvalue of :math:`E_\beta` (at any configuration).

    Examples
    --------
    Returned by :func:`subset_sums`:

    >>> from token_dynamics.clustering import subset_sums
    >>> subset_sums([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], beta=1.0).subsets.shape
    (3, 3)
    """

    subsets: np.ndarray
    sums: FloatArray
    smallest: float
    eigenvalue_bound: float


@float_guard("the subset sums", "use a smaller `beta`")
def subset_sums(X: ArrayLike, *, beta: float) -> SubsetSums:
    r"""Every subset sum of the kernel :math:`g_\beta` across a cut of the tokens.

    For :math:`\mathcal S \subset \{1, \dots, n\}`, proper and non-empty,

    .. math:: G(\mathcal S) = \sum_{i\in\mathcal S}\sum_{j\notin\mathcal S}g_\beta(\theta_{ij}),
        \qquad \theta_{ij} = \arccos\langle x_i, x_j\rangle .

    At a critical point whose Hessian has no positive eigenvalue, every :math:`G(\mathcal S)`
    is non-negative (Geshkovski et al., Appendix B). The book derives the quantitative form
    behind it: rotating :math:`\mathcal S` by :math:`e^{tB}` and summing the second variation
    over the coordinate rotations :math:`B = e_ke_l^\top - e_le_k^\top` gives
    :math:`-G(\mathcal S)/n^2`, so that the largest eigenvalue is at least ``eigenvalue_bound``;
    the terms of the gradient cancel in that sum (:math:`\sum_{k<l}B_{kl}^2 = -(d-1)I`), so this
    holds at every configuration, not only at a critical point.
    :math:`G(\mathcal S) = G(\mathcal S^c)`, so only the :math:`2^{n-1} - 1` subsets without the
    last token are listed.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere, :math:`2 \le n \le 16`, :math:`d \ge 2`.
    beta : float
        Inverse temperature, :math:`0 < \beta \le 700`.

    Returns
    -------
    SubsetSums

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of unit rows with ``d >= 2``, has fewer than 2 or more
        than :data:`MAX_SUBSET_TOKENS` tokens, or `beta` is not in ``(0, 700]``.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, Appendix B (proof of Theorem 5.1).

    Examples
    --------
    Two antipodal pairs of tokens: the cut between them has the negative sum
    :math:`4g_\beta(\pi) = -4(d-1)e^{-\beta}`:

    >>> import numpy as np
    >>> from token_dynamics.clustering import subset_sums
    >>> X = [[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0]]
    >>> s = subset_sums(X, beta=1.0)
    >>> bool(np.isclose(s.smallest, -4 * np.exp(-1.0)))
    True
    """
    X = _tokens(X)
    beta = _check_beta(beta)
    n, d = X.shape
    if n < 2 or n > MAX_SUBSET_TOKENS:
        raise ValueError(
            f"`X` has n = {n} tokens; the subset sums enumerate 2^(n-1) - 1 subsets and need "
            f"2 <= n <= {MAX_SUBSET_TOKENS} (MAX_SUBSET_TOKENS). Pass fewer tokens."
        )
    C = np.clip(X @ X.T, -1.0, 1.0)
    # g from cos and sin^2 = (1 - c)(1 + c): no arccos, exact at theta = 0 and pi
    G = np.exp(beta * C) * ((d - 1) * C - beta * (1.0 - C) * (1.0 + C))
    codes = np.arange(1, 2 ** (n - 1))
    subsets = ((codes[:, None] >> np.arange(n)) & 1).astype(bool)
    S = subsets.astype(np.float64)
    sums = np.einsum("si,ij,sj->s", S, G, 1.0 - S)
    size = np.minimum(S.sum(axis=1), n - S.sum(axis=1))
    bound = float(np.max(-sums / (n**2 * (d - 1) * size)))
    return SubsetSums(subsets, sums, float(sums.min()), bound)


@float_guard("the second variation of the energy", "use a smaller `beta`")
def rotation_second_variation(
    X: ArrayLike, subset: ArrayLike, B: ArrayLike, *, beta: float
) -> float:
    r"""Second derivative of :math:`E_\beta` when the tokens of a subset rotate by :math:`e^{tB}`.

    With :math:`x_i(t) = e^{tB}x_i` for :math:`i \in \mathcal S` and the others fixed, only the
    pairs across the cut change, and

    .. math::

        \frac{d^2}{dt^2}E_\beta(X(t))\Big|_{t=0} = \frac{1}{n^2}
        \sum_{i\in\mathcal S}\sum_{j\notin\mathcal S}e^{\beta\langle x_i, x_j\rangle}
        \big(\beta\langle Bx_i, x_j\rangle^2 + \langle B^2x_i, x_j\rangle\big).

    At a critical point this is :math:`\operatorname{Hess}E_\beta[\xi, \xi]` with
    :math:`\xi_i = Bx_i` on :math:`\mathcal S` and :math:`0` elsewhere: if the Hessian has no
    positive eigenvalue, it is :math:`\le 0` for every :math:`\mathcal S` and :math:`B`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere, :math:`d \ge 2`.
    subset : array_like of bool, shape (n,)
        The tokens of :math:`\mathcal S`.
    B : array_like, shape (d, d)
        Skew-symmetric.
    beta : float
        Inverse temperature, :math:`0 < \beta \le 700`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of unit rows with ``d >= 2``, `subset` is not a
        boolean mask of length ``n``, `B` is not a skew-symmetric ``(d, d)`` matrix, or `beta`
        is not in ``(0, 700]``.
    TypeError
        If `subset` is not boolean.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, Appendix B (the skew-symmetric perturbation in the
    proof of Theorem 5.1).

    Examples
    --------
    Rotating one of two antipodal tokens: the relative angle moves off :math:`\pi`,
    :math:`\frac{d^2}{dt^2}\frac{2e^{-\beta\cos t}}{2\beta n^2} = e^{-\beta}/n^2` at
    :math:`t = 0`:

    >>> import numpy as np
    >>> from token_dynamics.clustering import rotation_second_variation
    >>> B = np.array([[0.0, -1.0], [1.0, 0.0]])
    >>> v = rotation_second_variation([[1.0, 0.0], [-1.0, 0.0]], [True, False], B, beta=2.0)
    >>> bool(np.isclose(v, np.exp(-2.0) / 4))
    True
    """
    X = _tokens(X)
    beta = _check_beta(beta)
    n, d = X.shape
    mask = np.asarray(subset)
    if mask.dtype != np.bool_:
        raise TypeError(f"`subset` must be a boolean mask of the tokens; got dtype {mask.dtype}.")
    if mask.shape != (n,):
        raise ValueError(f"`subset` must have shape ({n},), one flag per token; got {mask.shape}.")
    B = as_square(B, "B", d=d)
    if not np.allclose(B, -B.T, rtol=0.0, atol=1e-12 * float(np.abs(B).max())):
        raise ValueError("`B` must be skew-symmetric (B.T == -B); pass (M - M.T) / 2.")
    Xs, Xo = X[mask], X[~mask]
    C = np.clip(Xs @ Xo.T, -1.0, 1.0)
    BX = Xs @ B.T  # rows B x_i
    first = BX @ Xo.T  # <B x_i, x_j>
    second = (BX @ B.T) @ Xo.T  # <B^2 x_i, x_j>
    return float(np.sum(np.exp(beta * C) * (beta * first**2 + second)) / n**2)


def polygon_clusters(sizes: ArrayLike, d: int) -> FloatArray:
    r"""Clusters of coincident tokens at the vertices of a regular polygon on a great circle.

    Cluster :math:`m` (of ``sizes[m]`` tokens) sits at
    :math:`(\cos(2\pi m/k), \sin(2\pi m/k), 0, \dots, 0)`, :math:`k` the number of clusters.
    By symmetry the configuration is a critical point of :math:`E_\beta` for every
    :math:`\beta` when the sizes are equal, and when :math:`k = 2` (two antipodal clusters of
    any sizes).

    Parameters
    ----------
    sizes : array_like of int, shape (k,)
        Positive cluster sizes, :math:`k \ge 1`.
    d : int
        Ambient dimension, >= 2.

    Returns
    -------
    ndarray, shape (sum(sizes), d)

    Raises
    ------
    ValueError
        If a size is not a positive integer, the sizes add up to more than a million tokens,
        or `d` < 2.

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, §5 and §7 (clustered critical points and the circle).

    Examples
    --------
    >>> from token_dynamics.clustering import polygon_clusters
    >>> polygon_clusters([2, 1], 2).round(12).tolist()
    [[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]]
    """
    s = as_real_array(sizes, "sizes")
    if s.ndim != 1 or s.size < 1 or np.any(s < 1) or np.any(s != np.round(s)):
        raise ValueError(f"`sizes` must be a 1-D array of positive integers; got {sizes!r}.")
    if s.sum() > MAX_POLYGON_TOKENS:
        raise ValueError(
            f"`sizes` add up to {s.sum():g} tokens; pass at most {MAX_POLYGON_TOKENS} in all."
        )
    d = check_int(d, "d", minimum=2)
    k = s.size
    angles = np.repeat(2.0 * np.pi * np.arange(k) / k, s.astype(np.int64))
    X = np.zeros((angles.size, d))
    X[:, 0], X[:, 1] = np.cos(angles), np.sin(angles)
    return X
