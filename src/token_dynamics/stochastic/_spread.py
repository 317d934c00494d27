r"""The spread of a token cloud, :math:`\iint |x - y|^2\,d\mu\,d\mu`, and the bound the
synchronization energy puts on it."""

from __future__ import annotations

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import as_real_array, as_weights
from ._energy import _beta, _half_gaps, synchronization_energy

__all__ = ["distance_bound", "pair_spread"]


def pair_spread(X: ArrayLike, *, weights: ArrayLike | None = None) -> FloatArray:
    r"""Mean squared distance between two tokens drawn from the cloud.

    .. math::

        \iint |x - y|^2\,d\mu(x)\,d\mu(y) = \sum_{i,j} w_i w_j\,|x_i - x_j|^2,

    computed from the differences, so it keeps its digits when the tokens nearly merge.

    Parameters
    ----------
    X : array_like, shape (..., n, d)
        Tokens, one per row; leading axes (paths, times) are kept.
    weights : array_like, shape (n,), optional, keyword-only
        Probability weights of the tokens (uniform by default).

    Returns
    -------
    ndarray, shape (...)
        A 0-d array for one cloud.

    Raises
    ------
    ValueError
        If `X` has fewer than two axes or `weights` is not a probability vector.
    FloatingPointError
        If the squared distances overflow.

    Examples
    --------
    On the sphere it is :math:`2(1 - |\bar x|^2)`; two antipodal tokens give 2:

    >>> import numpy as np
    >>> from token_dynamics.stochastic import pair_spread
    >>> float(pair_spread(np.array([[1.0, 0.0], [-1.0, 0.0]])))
    2.0
    """
    arr = as_real_array(X, "X")
    if arr.ndim < 2:
        raise ValueError(
            f"`X` must have shape (..., n, d) with one token per row; got shape {arr.shape}."
        )
    w = as_weights(weights, arr.shape[-2])
    with np.errstate(over="ignore", invalid="ignore"):  # checked below: einsum sets no flag
        spread = 2.0 * np.einsum("...ij,i,j->...", _half_gaps(arr), w, w)
    if not np.all(np.isfinite(spread)):
        raise FloatingPointError(
            "the pair spread leaves the float64 range (overflow); scale `X` down."
        )
    return spread


def distance_bound(X: ArrayLike, beta: float, *, weights: ArrayLike | None = None) -> FloatArray:
    r"""The bound :math:`\frac{4}{\sinh\beta}\mathcal S_\beta(\mu)` on the spread of a cloud.

    For tokens on the sphere (proposition ``sync-prop-distance``),

    .. math::

        \iint |x - y|^2\,d\mu\,d\mu \le \frac{4}{\sinh\beta}\,\mathcal S_\beta(\mu),

    with :math:`\mathcal S_\beta` the synchronization energy (:func:`synchronization_energy`);
    equality holds when every pair is equal or antipodal. Computed as
    :math:`8(1 - e^{-2\beta})^{-1}\,e^{-\beta}\mathcal S_\beta`, finite for every ``beta``.

    Parameters
    ----------
    X : array_like, shape (..., n, d)
        Tokens on the unit sphere; leading axes are kept.
    beta : float
        Positive inverse temperature.
    weights : array_like, shape (n,), optional, keyword-only
        Probability weights (uniform by default).

    Returns
    -------
    ndarray, shape (...)

    Raises
    ------
    ValueError
        If a token is off the sphere or ``beta`` is not positive.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, §1.3.1, after Theorem 1.4.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import distance_bound, pair_spread
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> bool(pair_spread(X) <= distance_bound(X, 2.0))
    True
    """
    b = _beta(beta)
    scaled = synchronization_energy(X, beta=b, weights=weights, scaled=True)  # e^-beta S_beta
    return 8.0 / -np.expm1(-2.0 * b) * scaled
