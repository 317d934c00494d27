r"""The rate of the interaction energy under softmax and unnormalised attention, and the sign a
run shows."""

from __future__ import annotations

import numpy as np

from .._guards import checked_finite, float_guard
from .._typing import ArrayLike
from .._validation import as_real_array, as_square, as_symmetric, as_tokens, as_weights
from ._energy import SYMMETRIC_A
from ._metric import softmax_metric_density

__all__ = ["energy_rate_formula", "observed_monotonicity"]


def energy_rate_formula(
    A: ArrayLike,
    V: ArrayLike,
    X: ArrayLike,
    *,
    normalised: bool = True,
    weights: ArrayLike | None = None,
) -> float:
    r"""Rate of the interaction energy along softmax (or unnormalised) attention, in closed form.

    For symmetric :math:`A`, with :math:`Z_i = \sum_j w_j e^{\langle Ax_i, x_j\rangle}` and
    :math:`m_i = Z_i^{-1}\sum_j w_j e^{\langle Ax_i, x_j\rangle}x_j`,

    .. math::

        \frac{d}{dt}\mathcal E_A = \sum_i w_i\, Z_i^k\, m_i^\top AV m_i,

    with :math:`k = 1` for softmax attention and :math:`k = 2` for unnormalised attention. Its
    sign is that of :math:`AV + V^\top A` when that matrix is semidefinite
    (:func:`monotonicity_sign`).

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric attention matrix.
    V : array_like, shape (d, d)
        Value matrix.
    X : array_like, shape (n, d)
        Tokens.
    normalised : bool, keyword-only
        Softmax attention (``True``, :math:`k = 1`) or unnormalised attention (:math:`k = 2`).
    weights : array_like, shape (n,), optional, keyword-only
        Probability weights of the tokens; uniform if None.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `A` is not symmetric or a shape disagrees.
    FloatingPointError
        If the scores or the rate leave the float64 range.

    References
    ----------
    Castin et al., arXiv:2501.18322 (the energy and its monotonicity).

    Examples
    --------
    The formula is the derivative of the energy along the field:

    >>> import numpy as np
    >>> import token_dynamics as td
    >>> from token_dynamics.gradient_flow import energy_rate, energy_rate_formula
    >>> X = td.uniform_sphere(6, 2, rng=0)
    >>> A, V = np.array([[0.8, 0.3], [0.3, -0.5]]), np.eye(2)
    >>> along = energy_rate(A=A, X=X, velocity=td.Softmax(A, V).velocity(X))
    >>> bool(np.isclose(energy_rate_formula(A, V, X), along, rtol=1e-12))
    True
    """
    from .. import attention

    Xa = as_tokens(X, "X")
    n, d = Xa.shape
    Aa = as_symmetric(as_square(A, "A", d=d), "A", what=SYMMETRIC_A)
    Va = as_square(V, "V", d=d)
    w = as_weights(weights, n)
    Z = softmax_metric_density(A=Aa, X=Xa, weights=w)
    m = attention.Softmax(Aa, np.eye(d)).velocity(Xa, weights=w)  # the weighted means m_i
    k = 1 if normalised else 2
    fix = "rescale `X`, `A` or `V`"
    with float_guard("the energy rate", fix):
        rate = float(np.sum(w * Z**k * np.einsum("ik,kl,il->i", m, Aa @ Va, m)))
    return checked_finite(rate, "the energy rate", fix)


def observed_monotonicity(values: ArrayLike) -> int:
    r"""Sign of the steps of a sequence: ``+1`` increasing, ``-1`` decreasing, ``0`` neither.

    .. math::

        \operatorname{sign}(e_{k+1} - e_k) \text{ when it is the same for every } k,
        \text{ else } 0.

    Parameters
    ----------
    values : array_like, shape (T,)
        A sequence, such as energies along a run (:func:`energy_along`), ``T >= 2``.

    Returns
    -------
    int
        ``+1`` if every step increases, ``-1`` if every step decreases, ``0`` otherwise (a
        flat step included).

    Raises
    ------
    ValueError
        If `values` is not a 1-d array of at least two finite values.

    Examples
    --------
    >>> from token_dynamics.gradient_flow import observed_monotonicity
    >>> observed_monotonicity([3.0, 2.0, 1.5]), observed_monotonicity([1.0, 2.0, 1.5])
    (-1, 0)
    """
    e = as_real_array(values, "values")
    if e.ndim != 1 or e.size < 2:
        raise ValueError(
            f"`values` must be a 1-d sequence of at least two values; got shape {e.shape}."
        )
    steps = np.sign(np.diff(e))
    return int(steps[0]) if np.all(steps == steps[0]) else 0
