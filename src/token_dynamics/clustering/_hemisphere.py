r"""Tokens in an open hemisphere: Wendel's probability, the test, and the cone-collapse rate."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from .._typing import ArrayLike, FloatArray
from .._validation import as_sphere_tokens, check_int, check_positive

__all__ = [
    "HEMISPHERE_TOL",
    "Hemisphere",
    "cone_collapse_rate",
    "open_hemisphere",
    "wendel_probability",
]

#: Margin below which :func:`open_hemisphere` does not certify an open hemisphere: the linear
#: program is solved to about 1e-9 (HiGHS's feasibility tolerance is 1e-7 on unscaled rows of
#: norm one, refined here by one exact evaluation of the margin), and points on a common great
#: sphere (margin exactly zero) have probability zero under any law with a density.
HEMISPHERE_TOL = 1e-9


@dataclass(frozen=True)
class Hemisphere:
    r"""Whether tokens lie in a common open hemisphere :math:`\{x : \langle x, w\rangle > 0\}`.

    Attributes
    ----------
    inside : bool
        ``margin > HEMISPHERE_TOL``.
    direction : ndarray, shape (d,)
        A unit pole :math:`w` that maximises the smallest :math:`\langle x_i, w\rangle` over the
        box :math:`|w_k| \le 1` (then normalised).
    margin : float
        :math:`\min_i \langle x_i, w\rangle` for that unit :math:`w`.

    Examples
    --------
    Returned by :func:`open_hemisphere`:

    >>> from token_dynamics.clustering import open_hemisphere
    >>> open_hemisphere([[1.0, 0.0], [0.0, 1.0]]).inside
    True
    """

    inside: bool
    direction: FloatArray
    margin: float


def wendel_probability(n: int, d: int) -> float:
    r"""Probability that :math:`n` i.i.d. uniform points of :math:`\mathbb S^{d-1}` lie in an open
    hemisphere (Wendel, 1962).

    .. math:: p(n, d) = 2^{-(n-1)}\sum_{k=0}^{d-1}\binom{n-1}{k},

    which is 1 when :math:`d \ge n`. The same holds for any law symmetric under :math:`x\mapsto -x`
    that puts no mass on a great sphere.

    Parameters
    ----------
    n : int
        Number of points, >= 1.
    d : int
        Ambient dimension, >= 1.

    Returns
    -------
    float

    References
    ----------
    J. G. Wendel, A problem in geometric probability, Math. Scand. 11 (1962); cited in Geshkovski
    et al., arXiv:2312.10794, §6.1.

    Examples
    --------
    >>> from token_dynamics.clustering import wendel_probability
    >>> wendel_probability(4, 2), wendel_probability(3, 3)
    (0.5, 1.0)
    """
    n = check_int(n, "n")
    d = check_int(d, "d")
    # exact in integers, then one rounding (Python's integer division rounds correctly at any
    # size: the terms overflowed a float from n ~ 1025); C(n-1, k+1) = C(n-1, k) (n-1-k)/(k+1)
    term, total = 1, 0
    for k in range(min(d, n)):
        total += term
        term = term * (n - 1 - k) // (k + 1)
    return total / 2 ** (n - 1)


def open_hemisphere(X: ArrayLike) -> Hemisphere:
    r"""Test whether tokens on the sphere lie in a common open hemisphere, and find a pole.

    Solves the linear program :math:`\max t` subject to :math:`\langle x_i, w\rangle \ge t` and
    :math:`-1 \le w_k \le 1`: the tokens lie in an open hemisphere iff its value is positive
    (Gordan's alternative: otherwise :math:`0` is a convex combination of the tokens). The pole
    is normalised and the margin recomputed exactly.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere.

    Returns
    -------
    Hemisphere

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of unit rows.
    FloatingPointError
        If the linear program fails (it is always feasible and bounded).

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, §6.1 (the hemisphere lemma).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.clustering import open_hemisphere
    >>> open_hemisphere([[1.0, 0.0], [-1.0, 0.0]]).inside  # an antipodal pair
    False
    >>> h = open_hemisphere([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> bool(h.inside and h.margin > 0.7)
    True
    """
    X = as_sphere_tokens(X)
    n, d = X.shape
    # variables (w, t): minimise -t subject to t - <x_i, w> <= 0, |w_k| <= 1, t free
    c = np.zeros(d + 1)
    c[-1] = -1.0
    A = np.hstack([-X, np.ones((n, 1))])
    bounds = [(-1.0, 1.0)] * d + [(None, None)]
    res = linprog(c, A_ub=A, b_ub=np.zeros(n), bounds=bounds, method="highs")
    if res.status != 0 or res.x is None:
        raise FloatingPointError(
            f"the hemisphere linear program failed ({res.message}); it is feasible and bounded "
            "for any tokens, so this is a solver failure: check `X` for extreme values."
        )
    w = np.asarray(res.x[:d], dtype=np.float64)
    norm = float(np.linalg.norm(w))
    if norm == 0.0:
        return Hemisphere(False, np.zeros(d), 0.0)
    w = w / norm
    margin = float(np.min(X @ w))
    return Hemisphere(margin > HEMISPHERE_TOL, w, margin)


def cone_collapse_rate(n: int, beta: float) -> float:
    r"""The rate :math:`\lambda = 1/(2ne^{2\beta})` of the hemisphere (cone-collapse) lemma.

    If the tokens of softmax self-attention on the sphere (:math:`Q = K = V = I`, inverse
    temperature :math:`\beta`) start in an open hemisphere, they converge to a point
    :math:`x^*`, and :math:`\alpha(t) = \min_i\langle x_i(t), x^*\rangle` satisfies
    :math:`\dot\alpha \ge \lambda(1 - \alpha)`, so :math:`1 - \alpha(t) \le
    (1 - \alpha(t_0))e^{-\lambda(t - t_0)}`.

    Parameters
    ----------
    n : int
        Number of tokens.
    beta : float
        Inverse temperature, >= 0.

    Returns
    -------
    float

    References
    ----------
    Geshkovski et al., arXiv:2312.10794, §6.1 (the hemisphere lemma).

    Examples
    --------
    >>> from token_dynamics.clustering import cone_collapse_rate
    >>> cone_collapse_rate(4, 0.0)
    0.125
    """
    n = check_int(n, "n")
    beta = check_positive(beta, "beta", allow_zero=True)
    return math.exp(-2.0 * beta) / (2.0 * n)  # underflows to 0 for huge beta, never overflows
