"""Mean and covariance right-hand sides of the Gaussian-preserving attention variants.

Every variant maps a Gaussian ``N(alpha, Sigma)`` to a velocity field that is affine in the
token, ``Gamma(x) = c + M x``; the law stays Gaussian and its moments solve
``alpha' = c + M alpha`` and ``Sigma' = M Sigma + Sigma M^T``. Internally the covariance is
carried as a factor ``Sigma = F F^T`` that moves by ``F' = M F`` (the flow map acting on a
square root), so the covariance is positive semidefinite by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._guards import float_guard
from .._linalg import psd_sqrt
from .._typing import ArrayLike, FloatArray, ParameterLike
from .._validation import (
    as_covariance,
    as_matrix,
    as_parameter,
    as_square,
    as_vector,
    check_positive,
    check_real,
)

__all__ = [
    "L2Moments",
    "LinearMoments",
    "MomentEquations",
    "SinkhornMoments",
    "SoftmaxMoments",
]


def _square_parameter(P: ParameterLike, name: str) -> Callable[[float], FloatArray]:
    fn = as_parameter(P, name, shape=(None, None))
    if not callable(P):
        shape = fn(0.0).shape
        if shape[0] != shape[1]:
            raise ValueError(f"`{name}` must be a square (d, d) matrix; got shape {shape}.")
    return fn


@dataclass(frozen=True)
class MomentEquations:
    r"""Base class: the moment ODE of an attention variant that preserves Gaussians.

    On a Gaussian :math:`\mathcal N(\alpha, \Sigma)` the velocity of a Gaussian-preserving
    variant is affine, :math:`\Gamma(x) = c + Mx`, and the moments follow

    .. math::
        \alpha' = c + M\alpha, \qquad \Sigma' = M\Sigma + \Sigma M^\top .

    Subclasses implement ``affine(mean, cov, t)``; the factor form ``_terms`` is derived from
    it unless a variant has a better-conditioned one (Sinkhorn). The parameters are those of
    the subclass; :func:`moment_equations` builds the right one from an attention field.

    References
    ----------
    Castin et al. (2025), arXiv:2501.18322: the moment ODEs of each variant.

    Examples
    --------
    The moment ODE of softmax attention, built from the field; ``rhs`` is
    :math:`(c + M\alpha, M\Sigma + \Sigma M^\top)` of ``affine``:

    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.gaussian import moment_equations
    >>> eq = moment_equations(Softmax([[0.9]], [[0.7]]))
    >>> c, M = eq.affine([1.0], [[0.4]])
    >>> dmean, dcov = eq.rhs(0.0, [1.0], [[0.4]])
    >>> bool(np.allclose(dmean, c + M @ [1.0]) and np.allclose(dcov, 2 * M * 0.4))
    True
    """

    def affine(
        self, mean: ArrayLike, cov: ArrayLike, t: float = 0.0
    ) -> tuple[FloatArray, FloatArray]:
        """Return ``(c, M)`` with ``Gamma_{N(mean, cov)}(x) = c + M x``, shapes (d,), (d, d)."""
        alpha, Sigma = self._validate(mean, cov)
        return self._affine(float(t), alpha, Sigma)

    def velocity(self, X: ArrayLike, mean: ArrayLike, cov: ArrayLike, t: float = 0.0) -> FloatArray:
        """Mean-field velocity ``Gamma_{N(mean, cov)}`` at the tokens ``X`` of shape ``(n, d)``."""
        c, M = self.affine(mean, cov, t)
        X = as_matrix(X, "X", shape=(None, c.shape[0]))
        return c + X @ M.T

    def rhs(self, t: float, mean: ArrayLike, cov: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Right-hand side ``(alpha', Sigma')`` of the moment ODE at ``(mean, cov)``."""
        alpha, Sigma = self._validate(mean, cov)
        F = psd_sqrt(Sigma)
        g, N = self._terms(float(t), alpha, F)
        dS = N @ F.T
        return g, dS + dS.T

    def check_dimension(self, d: int) -> None:
        """Raise ValueError if the parameters at ``t = 0`` do not act on ``R^d``."""
        for name, value in self._parameters(0.0).items():
            if value.shape[1] != d:
                raise ValueError(
                    f"`{name}` has {value.shape[1]} columns but the Gaussian lives in d = {d}; "
                    "give the mean and covariance in the same dimension as the parameters."
                )

    # -- to be provided by the variants ------------------------------------------------------
    def _parameters(self, t: float) -> dict[str, FloatArray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _affine(self, t: float, alpha: FloatArray, Sigma: FloatArray):  # pragma: no cover
        raise NotImplementedError

    def _terms(self, t: float, alpha: FloatArray, F: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return ``(alpha', F')`` for the factor ``Sigma = F F^T``."""
        c, M = self._affine(t, alpha, F @ F.T)
        return c + M @ alpha, M @ F

    def _validate(self, mean: ArrayLike, cov: ArrayLike) -> tuple[FloatArray, FloatArray]:
        alpha = as_vector(mean, "mean")
        Sigma = as_covariance(cov, "cov", d=alpha.shape[0])
        self.check_dimension(alpha.shape[0])
        return alpha, Sigma


@dataclass(frozen=True)
class _BilinearMoments(MomentEquations):
    """The parameters ``A`` and ``V`` (constant or ``t -> (d, d)``) of softmax, Sinkhorn and
    linear attention, validated once."""

    A: ParameterLike
    V: ParameterLike
    _A: Callable = field(init=False, repr=False, compare=False)
    _V: Callable = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_A", _square_parameter(self.A, "A"))
        object.__setattr__(self, "_V", _square_parameter(self.V, "V"))

    def _parameters(self, t):
        return {"A": self._A(t), "V": self._V(t)}


@dataclass(frozen=True)
class SoftmaxMoments(_BilinearMoments):
    r"""Moment ODE of softmax attention, scores ``beta <A x, y>``.

    .. math::
        \alpha' = V(\alpha + \Sigma A \alpha),\qquad
        \Sigma' = V\Sigma A\Sigma + \Sigma A^\top \Sigma V^\top

    (``A`` stands for ``beta * A``). By the tilting lemma the key law seen by the query ``x`` is
    ``N(alpha + Sigma A x, Sigma)``, so ``Gamma(x) = V(alpha + Sigma A x)``.

    Parameters
    ----------
    A, V : (d, d) arrays or callables ``t -> (d, d)``
    beta : float, inverse temperature multiplying the scores (any finite real, as for
        :class:`~token_dynamics.attention.Softmax`; a negative one repels).

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, *A unified perspective on the dynamics of deep
    transformers*, arXiv:2501.18322 (2025).

    Examples
    --------
    >>> from token_dynamics.gaussian import SoftmaxMoments
    >>> eq = SoftmaxMoments(A=[[0.9]], V=[[0.7]])
    >>> dmean, dcov = eq.rhs(0.0, [1.0], [[0.4]])
    >>> float(dcov[0, 0])  # 2 v a s^2 = 2 * 0.7 * 0.9 * 0.16
    0.2016
    """

    beta: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        check_real(self.beta, "beta")

    def _affine(self, t, alpha, Sigma):
        A, V = self.beta * self._A(t), self._V(t)
        return V @ alpha, V @ Sigma @ A


@dataclass(frozen=True)
class L2Moments(MomentEquations):
    r"""Moment ODE of l2 attention, kernel ``exp(-|Qbar x - Kbar y|^2 / s)``.

    With :math:`G = \tfrac2s \bar K^\top\bar K` and :math:`B = \tfrac2s\bar K^\top\bar Q`,

    .. math::
        \Gamma(x) = V (I + \Sigma G)^{-1}(\alpha + \Sigma B x).

    The factor :math:`(I+\Sigma G)^{-1}\Sigma` stays bounded by :math:`\|G^{-1}\|` when
    :math:`\bar K^\top \bar K \succ 0`, so the covariance cannot blow up in finite time.

    Parameters
    ----------
    Qbar, Kbar : (k, d) arrays or callables
    V : (d, d) array or callable
    s : float > 0, the kernel width.

    References
    ----------
    Castin et al. (2025), arXiv:2501.18322; Kim, Papamakarios, Mnih, *The Lipschitz constant
    of self-attention*, ICML (2021).

    Examples
    --------
    >>> from token_dynamics.gaussian import L2Moments
    >>> eq = L2Moments(Qbar=[[1.0]], Kbar=[[1.0]], V=[[1.0]])
    >>> c, M = eq.affine([0.0], [[1.0]])
    >>> float(M[0, 0])  # V (1 + 2 s)^-1 s B = 2 / 3
    0.6666666666666666
    """

    Qbar: ParameterLike
    Kbar: ParameterLike
    V: ParameterLike
    s: float = 1.0
    _Q: Callable = field(init=False, repr=False, compare=False)
    _K: Callable = field(init=False, repr=False, compare=False)
    _V: Callable = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_Q", as_parameter(self.Qbar, "Qbar", shape=(None, None)))
        object.__setattr__(self, "_K", as_parameter(self.Kbar, "Kbar", shape=(None, None)))
        object.__setattr__(self, "_V", _square_parameter(self.V, "V"))
        check_positive(self.s, "s")

    def _parameters(self, t):
        Q, K = self._Q(t), self._K(t)
        if Q.shape != K.shape:
            raise ValueError(
                f"`Qbar` and `Kbar` must have the same shape (k, d); got {Q.shape} and {K.shape}."
            )
        return {"Qbar": Q, "Kbar": K, "V": self._V(t)}

    def _affine(self, t, alpha, Sigma):
        Q, K, V = self._Q(t), self._K(t), self._V(t)
        G = (2.0 / self.s) * K.T @ K
        B = (2.0 / self.s) * K.T @ Q
        R = np.linalg.solve(np.eye(alpha.shape[0]) + Sigma @ G, np.column_stack([alpha, Sigma @ B]))
        return V @ R[:, 0], V @ R[:, 1:]


@float_guard("the whitened Sinkhorn coupling", "rescale `B`")
def sinkhorn_whitened_coupling(B: FloatArray) -> FloatArray:
    r"""Cross-covariance :math:`\tilde C = 2\tilde B(I + (I + 4\tilde B^\top\tilde B)^{1/2})^{-1}`.

    It is the unique :math:`\tilde C` with
    :math:`\tilde B = (I - \tilde C\tilde C^\top)^{-1}\tilde C`,
    i.e. the coupling of two standard Gaussians whose density is proportional to
    :math:`e^{u^\top \tilde B w}` times a product of functions of ``u`` and ``w``. For a
    symmetric :math:`\tilde B` it acts on the spectrum, and in general on the singular values,
    by :math:`f(b) = 2b/(1+\sqrt{1+4b^2})`.
    This is the one home of the entropic Gaussian coupling: the Sinkhorn moment ODE and the
    Bures-Wasserstein gradient flow of ``gradient_flow`` both use it.

    Parameters
    ----------
    B : (d, d) array, the whitened score matrix :math:`F^\top A^\top F/\varepsilon`.

    Returns
    -------
    (d, d) array, of operator norm < 1.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gaussian import sinkhorn_whitened_coupling
    >>> c = sinkhorn_whitened_coupling(np.array([[1.5]]))
    >>> round(float(c[0, 0]), 12)  # f(3/2) = 3 / (1 + sqrt 10)
    0.720759220056
    """
    # On the singular values b of B = U diag(b) W^T the formula is f(b) = 2b / (1 + sqrt(1 + 4b^2)),
    # C = U diag(f(b)) W^T; hypot keeps sqrt(1 + 4 b^2) finite for any representable B.
    U, b, Wt = np.linalg.svd(as_square(B, "B"))
    return (U * (2.0 * b / (1.0 + np.hypot(1.0, 2.0 * b)))) @ Wt


@dataclass(frozen=True)
class SinkhornMoments(_BilinearMoments):
    r"""Moment ODE of Sinkhorn attention (entropic plan of the law with itself, cost ``-<Ax, y>``).

    With :math:`\Sigma = FF^\top` and :math:`\tilde B = F^\top A^\top F/\varepsilon`, the plan is
    Gaussian with cross-covariance :math:`C = F\tilde C F^\top`, and

    .. math::
        \alpha' = V\alpha,\qquad \Sigma' = VC^\top + CV^\top .

    The mean and the covariance decouple; :math:`\|\tilde C\| < 1` excludes blow-up.

    Parameters
    ----------
    A, V : (d, d) arrays or callables
    eps : float > 0, entropic regularisation.

    References
    ----------
    Sander, Ablin, Blondel, Peyré, *Sinkformers*, AISTATS (2022); Castin et al. (2025).

    Examples
    --------
    >>> from token_dynamics.gaussian import SinkhornMoments
    >>> eq = SinkhornMoments(A=[[-1.3]], V=[[0.7]])
    >>> dmean, dcov = eq.rhs(0.0, [2.0], [[0.8]])
    >>> float(dmean[0])  # V alpha
    1.4
    """

    eps: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        check_positive(self.eps, "eps")

    def cross_covariance(self, cov: ArrayLike, t: float = 0.0) -> FloatArray:
        """Cross-covariance ``Cov(x, y)`` (query, key) of the plan of ``N(., cov)`` with itself."""
        Sigma = as_covariance(cov, "cov")
        self.check_dimension(Sigma.shape[0])
        F = psd_sqrt(Sigma)
        return F @ self._whitened(t, F) @ F.T

    def _whitened(self, t: float, F: FloatArray) -> FloatArray:
        """The whitened coupling of the plan for the covariance factor ``F`` (``Sigma = F F^T``)."""
        return sinkhorn_whitened_coupling(F.T @ self._A(t).T @ F / self.eps)

    def _terms(self, t, alpha, F):
        V = self._V(t)
        return V @ alpha, V @ F @ self._whitened(t, F).T

    def _affine(self, t, alpha, Sigma):
        # Gamma(x) = V (alpha + C^T Sigma^+ (x - alpha)); the pseudo-inverse acts on range(Sigma).
        F = psd_sqrt(Sigma)
        V = self._V(t)
        M = V @ F @ self._whitened(t, F).T @ np.linalg.pinv(F)
        return V @ alpha - M @ alpha, M


@dataclass(frozen=True)
class LinearMoments(_BilinearMoments):
    r"""Moment ODE of linear attention, ``Gamma(x) = V M_2 A x``, ``M_2 = Sigma + alpha alpha^T``.

    .. math::
        \alpha' = V(\Sigma + \alpha\alpha^\top)A\alpha,\qquad \Sigma' = M\Sigma + \Sigma M^\top,
        \quad M = V(\Sigma+\alpha\alpha^\top)A .

    Parameters
    ----------
    A, V : (d, d) arrays or callables ``t -> (d, d)``
        Attention and value matrices, constant or time-dependent.

    References
    ----------
    Castin et al. (2025), arXiv:2501.18322.

    Examples
    --------
    >>> from token_dynamics.gaussian import LinearMoments
    >>> eq = LinearMoments(A=[[1.0]], V=[[1.0]])
    >>> dmean, dcov = eq.rhs(0.0, [0.0], [[0.5]])
    >>> float(dcov[0, 0])  # 2 s^2
    0.5
    """

    def _affine(self, t, alpha, Sigma):
        M = self._V(t) @ (Sigma + np.outer(alpha, alpha)) @ self._A(t)
        return np.zeros_like(alpha), M
