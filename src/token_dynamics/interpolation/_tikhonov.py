"""The Tikhonov experiment's data set and objective: one softmax block trained to interpolate
sequence means, with its exact interpolant (private; re-exported by
:mod:`token_dynamics.interpolation`).

The experiment of the authors' code (``tikhonov/``), with numpy gradients, and with the
threshold computed from the correct norm of the exact interpolant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, FloatArray, SeedLike
from .._validation import as_rng, as_vector, check_instance, check_int, check_positive
from ..attention import softmax_weights

__all__ = ["TikhonovData", "tikhonov_dataset", "tikhonov_objective"]

#: Softmax temperature of the model, as in the authors' experiment.
TAU = 1.0


@dataclass(frozen=True, eq=False)
class TikhonovData:
    """Dataset of the Tikhonov experiment and its exact interpolant.

    Attributes
    ----------
    inputs : ndarray, shape (N, n, d)
        Tokens uniform on ``[0, 1]^d``.
    targets : ndarray, shape (N, d)
        ``y^j = xbar^j + W relu(U xbar^j + b)``: one block with ``q = k = 0``, ``V = I``,
        ``rho = 0`` (the sequence mean) then the feed-forward ``(U, b, W, eta = 1)``.
    exact : ndarray, shape (P,)
        Parameters of that exact interpolant (flattened as in :func:`tikhonov_objective`).
    exact_norm_sq : float
        Its squared norm ``d + 1 + |U|^2 + |W|^2 + |b|^2``.
    authors_norm_sq : float
        The value the authors' code uses: ``|X|_F^2`` in place of ``|I_d|_F^2 = d``.
    width : int

    Examples
    --------
    Returned by :func:`tikhonov_dataset`; the exact interpolant has zero loss and the norm
    recorded:

    >>> import numpy as np
    >>> from token_dynamics.interpolation import tikhonov_dataset, tikhonov_objective
    >>> data = tikhonov_dataset(3, 5, 2, 2, rng=0)
    >>> data.inputs.shape, data.targets.shape, data.exact.shape
    ((3, 5, 2), (3, 2), (20,))
    >>> bool(np.isclose(data.exact_norm_sq, data.exact @ data.exact))
    True
    >>> float(tikhonov_objective(data.exact, data, 0.0)[0])
    0.0
    """

    inputs: np.ndarray
    targets: np.ndarray
    exact: np.ndarray
    exact_norm_sq: float
    authors_norm_sq: float
    width: int


def _unpack(theta: FloatArray, d: int, w: int) -> list[FloatArray]:
    """Split ``theta`` into ``q, k, V, rho, U, b, W, eta`` (``rho`` and ``eta`` 0-d arrays)."""
    i = 0
    out = []
    for shape in ((d,), (d,), (d, d), (), (w, d), (w,), (d, w), ()):
        size = int(np.prod(shape))
        out.append(theta[i : i + size].reshape(shape))
        i += size
    return out


def _n_params(d: int, w: int) -> int:
    return 2 * d + d * d + 1 + 2 * w * d + w + 1


def tikhonov_dataset(
    n_sequences: int = 10, n_tokens: int = 100, d: int = 16, width: int = 4, *, rng: SeedLike = None
) -> TikhonovData:
    r"""Draw the dataset of the Tikhonov experiment (defaults: the authors' sizes).

    Tokens, :math:`U`, :math:`W` and :math:`b` are uniform on :math:`[0, 1]`; with
    :math:`\bar x^j` the mean of sequence :math:`j`, the targets are

    .. math:: y^j = \bar x^j + W\,\mathrm{relu}(U\bar x^j + b),

    which one block interpolates exactly (``TikhonovData.exact``).

    Parameters
    ----------
    n_sequences, n_tokens, d, width : int
    rng : Generator, int or None

    Returns
    -------
    TikhonovData

    Raises
    ------
    ValueError
        If a size is not a positive integer.
    TypeError
        If `rng` is not a Generator, a seed or None.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270, and the authors' repository ``DCN-FAU-AvH/exactInterpTF``.

    Examples
    --------
    >>> from token_dynamics.interpolation import tikhonov_dataset, tikhonov_objective
    >>> data = tikhonov_dataset(3, 5, 2, 2, rng=0)
    >>> float(tikhonov_objective(data.exact, data, 0.0)[0])
    0.0
    """
    N = check_int(n_sequences, "n_sequences")
    n = check_int(n_tokens, "n_tokens")
    d = check_int(d, "d")
    w = check_int(width, "width")
    rng = as_rng(rng)
    X = rng.uniform(size=(N, n, d))
    U = rng.uniform(size=(w, d))
    W = rng.uniform(size=(d, w))
    b = rng.uniform(size=w)
    xbar = X.mean(axis=1)
    Y = xbar + np.maximum(xbar @ U.T + b, 0.0) @ W.T
    exact = np.concatenate(
        [np.zeros(2 * d), np.eye(d).ravel(), [0.0], U.ravel(), b, W.ravel(), [1.0]]
    )
    rest = 1.0 + np.sum(U**2) + np.sum(W**2) + np.sum(b**2)
    return TikhonovData(
        inputs=X,
        targets=Y,
        exact=exact,
        exact_norm_sq=float(np.sum(exact**2)),
        authors_norm_sq=float(np.sum(X**2) + rest),
        width=w,
    )


def tikhonov_objective(
    theta: ArrayLike, data: TikhonovData, eps: float
) -> tuple[float, FloatArray]:
    r"""The Tikhonov-regularised objective and its gradient:

    .. math:: J_\varepsilon(\theta) = \mathcal L(\theta) + \varepsilon\lVert\theta\rVert^2,
              \qquad \mathcal L(\theta) = \frac1N\sum_{j=1}^N \max_i |\mathrm T_i(X^j) - y^j|^2,

    the loss being the mean squared Hausdorff distance of each output to its target point.

    The model is one block, softmax attention then feed-forward (the authors' order):
    :math:`z_i = \rho x_i + V\sum_\ell \mathrm{softmax}_\ell(\langle q, x_i\rangle\langle k,
    x_\ell\rangle/\tau)\, x_\ell`, :math:`\mathrm T_i = \eta z_i + W\sigma(U z_i + b)`.
    ``theta`` stacks ``q, k, V, rho, U, b, W, eta``. The gradient of the max is the gradient at
    the maximising token (a subgradient at ties).

    Parameters
    ----------
    theta : array_like, shape (P,)
        The stacked parameters, ``P = 2d + d^2 + 1 + 2 w d + w + 1`` for width ``w``.
    data : TikhonovData
        The data set, from :func:`tikhonov_dataset`.
    eps : float
        The Tikhonov parameter :math:`\varepsilon` (0 gives the loss alone).

    Returns
    -------
    (float, ndarray of shape (P,))
        :math:`J_\varepsilon(\theta)` and its gradient.

    Raises
    ------
    ValueError
        If `theta` contains NaN or infinite entries.
    TypeError
        If an array argument is not real, or `data` is not a :class:`TikhonovData`.
    FloatingPointError
        If the objective overflows (start from a smaller `theta`).

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (regularised training), and the authors' repository
    ``DCN-FAU-AvH/exactInterpTF`` (``tikhonov/``: the model and the loss).

    Examples
    --------
    At the exact interpolant the loss vanishes, so :math:`J_\varepsilon =
    \varepsilon\lVert\theta\rVert^2`; the gradient agrees with a central difference:

    >>> import numpy as np
    >>> from token_dynamics.interpolation import tikhonov_dataset, tikhonov_objective
    >>> data = tikhonov_dataset(2, 4, 2, 2, rng=1)
    >>> J, g = tikhonov_objective(data.exact, data, 0.5)
    >>> bool(np.isclose(J, 0.5 * data.exact_norm_sq)), g.shape
    (True, (20,))
    >>> theta = np.random.default_rng(0).normal(size=20)
    >>> e = np.zeros(20); e[3] = 1e-6
    >>> fd = (tikhonov_objective(theta + e, data, 0.5)[0]
    ...       - tikhonov_objective(theta - e, data, 0.5)[0]) / 2e-6
    >>> bool(abs(fd - tikhonov_objective(theta, data, 0.5)[1][3]) < 1e-6)
    True
    """
    _check_data(data)
    eps = check_positive(eps, "eps", allow_zero=True)
    X, Y = data.inputs, data.targets
    theta = as_vector(theta, "theta", size=_n_params(X.shape[2], data.width))
    with float_guard("the Tikhonov objective", "start from a smaller `theta`"):
        return _objective(theta, X, Y, data.width, eps)


def _check_data(data: object) -> None:
    check_instance(data, TikhonovData, "data", "Build one with tikhonov_dataset().")


def _objective(
    theta: FloatArray, X: FloatArray, Y: FloatArray, width: int, eps: float
) -> tuple[float, FloatArray]:
    N, _, d = X.shape
    q, k, V, rho, U, b, W, eta = _unpack(theta, d, width)
    a, c = X @ q, X @ k  # (N, n)
    S = a[:, :, None] * c[:, None, :] / TAU
    P = softmax_weights(S, axis=2)
    M = X @ V.T
    Z = rho * X + P @ M
    H = Z @ U.T + b
    R = np.maximum(H, 0.0)
    out = eta * Z + R @ W.T
    r = out - Y[:, None, :]
    sq = np.sum(r**2, axis=2)
    imax = np.argmax(sq, axis=1)
    loss = float(sq[np.arange(N), imax].mean())
    g_out = np.zeros_like(out)
    g_out[np.arange(N), imax] = 2.0 * r[np.arange(N), imax] / N
    d_eta = np.sum(g_out * Z)
    dW = np.einsum("nid,niw->dw", g_out, R)
    dH = (g_out @ W) * (H > 0)
    dU = np.einsum("niw,nid->wd", dH, Z)
    db = dH.sum(axis=(0, 1))
    dZ = eta * g_out + dH @ U
    d_rho = np.sum(dZ * X)
    dP = dZ @ np.swapaxes(M, 1, 2)
    dM = np.swapaxes(P, 1, 2) @ dZ
    dV = np.einsum("nij,nik->jk", dM, X)
    dS = P * (dP - np.sum(dP * P, axis=2, keepdims=True)) / TAU
    da = np.einsum("nij,nj->ni", dS, c)
    dc = np.einsum("nij,ni->nj", dS, a)
    dq = np.einsum("ni,nid->d", da, X)
    dk = np.einsum("nj,njd->d", dc, X)
    grad = np.concatenate([dq, dk, dV.ravel(), [d_rho], dU.ravel(), db, dW.ravel(), [d_eta]])
    return loss + eps * float(theta @ theta), grad + 2.0 * eps * theta
