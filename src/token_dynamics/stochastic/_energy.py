r"""The energy of Agazzi et al. (2026) that a common noise dissipates (private module).

- :func:`synchronization_energy` -- :math:`\mathcal S_\beta(\mu) = \frac12\iint(e^\beta -
  e^{\beta\langle x, y\rangle})\,d\mu\,d\mu`, zero exactly at a Dirac mass;
- :func:`energy_derivative`, :func:`attention_forcing` -- its derivative along a deterministic
  velocity (term (I) of the proof of Theorem 1.4) and the ratio of Assumption 2 along attention.
"""

from __future__ import annotations

import numpy as np

from .. import geometry
from .._linalg import LOG_FLOAT_MAX
from .._typing import ArrayLike
from .._validation import as_real_array, as_sphere_tokens, as_square, as_weights, check_positive

__all__ = ["attention_forcing", "energy_derivative", "synchronization_energy"]


def _sphere_stack(X: ArrayLike, name: str = "X") -> np.ndarray:
    """Tokens of shape ``(..., n, d)`` on the unit sphere, as a fresh float64 array."""
    arr = as_real_array(X, name)
    if arr.ndim < 2:
        raise ValueError(
            f"`{name}` must have shape (..., n, d) with one token per row; got shape {arr.shape}."
        )
    flat = as_sphere_tokens(arr.reshape(-1, arr.shape[-1]), name)
    return flat.reshape(arr.shape)


def _half_gaps(X: np.ndarray) -> np.ndarray:
    r"""``1 - <x_i, x_j>`` as ``|x_i - x_j|^2 / 2``, exact near the diagonal; shape (..., n, n)."""
    diff = X[..., :, None, :] - X[..., None, :, :]
    return 0.5 * np.einsum("...ijk,...ijk->...ij", diff, diff)


def _beta(beta: object) -> float:
    return check_positive(beta, "beta")


def synchronization_energy(
    X: ArrayLike, *, beta: float, weights: ArrayLike | None = None, scaled: bool = False
) -> np.ndarray:
    r"""The energy of Agazzi et al. (2026) that a common noise dissipates,

    .. math::

        \mathcal S_\beta(\mu) = \frac12 \iint \big(e^\beta - e^{\beta\langle x, y\rangle}\big)
        \, d\mu(x)\, d\mu(y)
        = \frac{e^\beta}2 \sum_{i,j} w_i w_j \big(1 - e^{-\beta(1 - \langle x_i, x_j\rangle)}\big).

    The paper writes it :math:`\mathcal E_\beta` (§1.1, the energy of Theorem 1.4); this library
    and the book write :math:`\mathcal S_\beta`, to keep it apart from the interaction energy
    :math:`E_\beta = \frac1{2\beta}\iint e^{\beta\langle x,y\rangle}`
    (:func:`token_dynamics.diagnostics.interaction_energy`), which attention increases. It is
    nonnegative on the sphere and vanishes exactly at a Dirac mass; the two are related by
    :math:`\mathcal S_\beta = e^\beta/2 - \beta\,E_\beta`. Computed with
    ``expm1`` of ``beta |x_i - x_j|^2 / 2``, without cancellation for nearby tokens.

    Parameters
    ----------
    X : array_like, shape (..., n, d)
        Tokens on the unit sphere; leading axes (paths, times) are kept.
    beta : float
        Positive inverse temperature.
    weights : array_like, shape (n,), optional
        Weights of the tokens (uniform by default).
    scaled : bool
        Return :math:`e^{-\beta}\mathcal S_\beta`, finite for every ``beta``.

    Returns
    -------
    ndarray, shape (...)
        A 0-d array for one cloud.

    Raises
    ------
    ValueError
        If `X` is not of shape ``(..., n, d)`` with unit rows, `beta` is not positive, or
        `weights` is not a probability vector of length ``n``.
    TypeError
        If `X` is ragged or holds complex numbers, booleans or strings.
    FloatingPointError
        If :math:`e^\beta` overflows (``beta`` above about 709) and ``scaled`` is false.

    References
    ----------
    A. Agazzi, G. Bruno, E. Mosig García, S. Saviozzi, M. Romito, *Stochastic scaling limits and
    synchronization by noise in deep transformer models*, arXiv:2604.26898, 2026, §1.1 and
    Theorem 1.4.

    Examples
    --------
    >>> from token_dynamics.stochastic import synchronization_energy
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> round(float(synchronization_energy(X, beta=1.0)), 12)       # (e - 1) / 4
    0.429570457115
    >>> float(synchronization_energy(X[:1], beta=1.0))   # a Dirac mass
    0.0
    """
    X = _sphere_stack(X)
    beta = _beta(beta)
    w = as_weights(weights, X.shape[-2])
    pairs = -np.expm1(-beta * _half_gaps(X))
    value = 0.5 * np.einsum("...ij,i,j->...", pairs, w, w)
    if scaled:
        return value
    if beta > LOG_FLOAT_MAX:
        raise FloatingPointError(
            f"e^beta overflows float64 at `beta` = {beta:g}; pass `scaled=True` for "
            "e^-beta times the energy."
        )
    return np.exp(beta) * value


def energy_derivative(
    X: ArrayLike, velocity: ArrayLike, *, beta: float, weights: ArrayLike | None = None
) -> float:
    r"""Time derivative of :math:`\mathcal S_\beta(\mu)` when the tokens move with ``velocity``,

    .. math::

        \frac{d}{dt}\mathcal S_\beta = -\beta \sum_{i,j} w_i w_j\, e^{\beta\langle x_i, x_j\rangle}
        \langle v_i, x_j\rangle
        = -\beta \sum_{i,j} w_i w_j\, e^{\beta\langle x_i, x_j\rangle}
        \langle v_i, x_j - x_i\rangle,

    computed in the second form (equal for tangent :math:`v_i`), which keeps its digits when the
    tokens nearly merge.

    With ``velocity = P_x Attn(mu, x)`` this is the term (I) of the proof of Agazzi et al.
    (2026), Theorem 1.4, and its sign for :math:`Q^\top K = \beta I`, :math:`V = I` is their
    Remark 1.6 (:math:`\varepsilon = 0` in Assumption 2).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere.
    velocity : array_like, shape (n, d)
        Velocity of each token, tangent to the sphere (a radial part would change the norms;
        the formula is then the derivative of the energy written with the distances
        :math:`|x_i - x_j|^2`, as :func:`synchronization_energy` computes it).
    beta : float
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    Raises
    ------

    ValueError
        If `X` is not a finite real array of unit rows (tokens on the sphere), `velocity` is
        not finite of the shape of `X`, or `beta` is not positive.
    FloatingPointError
        If :math:`e^\beta` overflows (``beta`` above about 709).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, §4 (term (I)) and Remark 1.6.

    Examples
    --------
    >>> from token_dynamics.stochastic import energy_derivative
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> V = np.array([[0.0, 1.0], [1.0, 0.0]])   # both tokens turn towards each other
    >>> energy_derivative(X, V, beta=1.0) < 0
    True
    """
    X = as_sphere_tokens(X)
    v = as_real_array(velocity, "velocity")
    if v.shape != X.shape or not np.all(np.isfinite(v)):
        raise ValueError(
            f"`velocity` must be finite with the shape {X.shape} of `X`; got shape {v.shape}."
        )
    beta = _beta(beta)
    w = as_weights(weights, X.shape[0])
    if beta > LOG_FLOAT_MAX:
        raise FloatingPointError(f"e^beta overflows float64 at `beta` = {beta:g}; lower `beta`.")
    # <v_i, x_j> as <v_i, x_j - x_i> (v_i is tangent): the rounding of v_i's radial part, about
    # eps, would otherwise swamp the O(|x_i - x_j|^2) terms of nearly merged tokens
    diff = X[None, :, :] - X[:, None, :]  # x_j - x_i
    kernel = np.exp(-0.5 * beta * np.einsum("ijk,ijk->ij", diff, diff))  # e^{beta (u - 1)}
    return float(-beta * np.exp(beta) * np.einsum("ij,ijk,ik,i,j->", kernel, diff, v, w, w))


def attention_forcing(
    X: ArrayLike,
    *,
    beta: float,
    Q: ArrayLike | None = None,
    K: ArrayLike | None = None,
    V: ArrayLike | None = None,
    weights: ArrayLike | None = None,
) -> float:
    r"""The ratio :math:`\frac{d}{dt}\mathcal S_\beta / \mathcal S_\beta` along the noiseless
    attention flow of the model (1.1), at the tokens ``X``.

    The flow is :math:`\dot x_i = P_{x_i}\mathrm{Attn}(\mu, x_i)` with weights
    :math:`\mathrm{softmax}_j\langle Qx_i, Kx_j\rangle` and values :math:`Vx_j` (no
    temperature). Assumption 2 of Agazzi et al. (2026) asks for an :math:`\varepsilon` above
    this ratio at every cloud; by their Remark 1.6 it is :math:`\le 0` for
    :math:`Q^\top K = \beta I`, :math:`V = I`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Tokens on the unit sphere, not all equal (else the energy vanishes).
    beta : float
        Inverse temperature of the energy.
    Q, K, V : array_like, shape (d, d), optional
        ``None`` is the identity.
    weights : array_like, shape (n,), optional

    Returns
    -------
    float

    .. math:: \frac{\tfrac{d}{dt}\mathcal S_\beta(\mu)}{\mathcal S_\beta(\mu)},\qquad
              \dot x_i = P_{x_i}\sum_j \mathrm{softmax}_j\langle Qx_i, Kx_j\rangle\,Vx_j .

    Raises
    ------
    ValueError
        If `X` is not a finite real array of unit rows (tokens on the sphere), a matrix is
        not finite ``(d, d)``, or all tokens coincide (zero energy).
    FloatingPointError
        If :math:`e^\beta` overflows (``beta`` above about 709).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, Assumption 2 and Remark 1.6.

    Examples
    --------
    >>> from token_dynamics.stochastic import attention_forcing
    >>> import numpy as np
    >>> X = np.eye(3)
    >>> attention_forcing(X, beta=1.0) <= 0                 # Q = K = V = I, beta = 1
    True
    >>> attention_forcing(X, beta=1.0, V=-np.eye(3)) > 0    # repulsive values
    True
    """
    from ..attention import Softmax

    X = as_sphere_tokens(X)
    d = X.shape[1]
    Q, K, V = (
        np.eye(d) if M is None else as_square(M, name, d=d)
        for M, name in ((Q, "Q"), (K, "K"), (V, "V"))
    )
    field = Softmax(K.T @ Q, V)
    v = geometry.project_tangent(X, field.velocity(X, weights=weights))
    energy = float(synchronization_energy(X, beta=beta, weights=weights))
    if energy == 0:
        raise ValueError("`X` is a single point (zero energy); the ratio is undefined there.")
    return energy_derivative(X, v, beta=beta, weights=weights) / energy
