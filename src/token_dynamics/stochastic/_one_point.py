r"""One token of the limit SDE without attention: a Brownian motion on the sphere."""

from __future__ import annotations

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import as_times, check_instance, check_int
from ._model import MLPNoise

__all__ = ["one_point_correlation"]


def one_point_correlation(noise: MLPNoise, times: ArrayLike, *, d: int) -> FloatArray:
    r"""Mean correlation of one token with its start, :math:`\mathbb E\langle\bar X_t, x_0\rangle`.

    Without attention (:math:`V = 0`) a token of the limit SDE is a Brownian motion on
    :math:`\mathbb S^{d-1}` with generator :math:`\frac{\kappa(1)}2\Delta_{\mathbb S^{d-1}}`, so

    .. math::

        \mathbb E\langle\bar X_t, x_0\rangle = e^{-(d-1)\kappa(1)t/2},

    with :math:`\kappa` the covariance kernel of `noise` (the same at every width).

    Parameters
    ----------
    noise : MLPNoise
        The random MLP.
    times : array_like, shape (T,)
        Increasing times, the first being the start (correlation one).
    d : int, keyword-only
        Dimension of the tokens, at least 2.

    Returns
    -------
    ndarray, shape (T,)

    Raises
    ------
    TypeError
        If `noise` is not an :class:`MLPNoise`.
    ValueError
        If `times` or `d` is invalid.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026 (the limit SDE); the formula is derived in this
    book (proposition ``sto-prop-one-point``).

    Examples
    --------
    For ReLU without biases :math:`\kappa(1) = 1/(2d)`:

    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise, one_point_correlation
    >>> c = one_point_correlation(MLPNoise("relu"), [0.0, 1.0], d=4)
    >>> bool(np.allclose(c, np.exp(-3 * np.array([0.0, 1.0]) / 16)))
    True
    """
    check_instance(noise, MLPNoise, "noise", "Build one with stochastic.MLPNoise('relu').")
    d = check_int(d, "d", minimum=2)
    t = as_times(times)
    rate = (d - 1) * float(noise.kappa(1.0, d=d)) / 2
    return np.exp(-rate * (t - t[0]))
