"""Tikhonov-regularised training of a one-block transformer (private).

The experiment of the authors' code (``tikhonov/``), with numpy gradients and scipy's L-BFGS
instead of Adam, and with the threshold computed from the correct norm of the exact interpolant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._typing import ArrayLike, SeedLike
from .._validation import (
    as_real_array,
    as_rng,
    as_vector,
    check_instance,
    check_int,
    check_positive,
    float_guard,
    progress_bar,
)
from ..attention import softmax_weights
from ..diagnostics import fit_power_law

__all__ = [
    "TikhonovData",
    "TikhonovFit",
    "TikhonovSweep",
    "tikhonov_dataset",
    "tikhonov_objective",
    "tikhonov_sweep",
    "train_tikhonov",
]

#: Softmax temperature of the model, as in the authors' experiment.
TAU = 1.0
#: Adam's moment decay rates and denominator guard (the usual defaults, as in the authors' code).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
#: Scale of the random initialisation (rho and eta start at 0, as in the authors' code).
INIT_SCALE = 0.1


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


@dataclass(frozen=True, eq=False)
class TikhonovFit:
    r"""One regularised training run: ``theta`` minimises (locally) ``L + eps |theta|^2``.

    A global minimiser :math:`\theta_\varepsilon` of
    :math:`J_\varepsilon = \mathcal L + \varepsilon\lVert\theta\rVert^2` has
    :math:`\mathcal L(\theta_\varepsilon) \le J_\varepsilon(\theta_\varepsilon) \le
    J_\varepsilon(\theta^\star) = \varepsilon\lVert\theta^\star\rVert^2` for the exact
    interpolant :math:`\theta^\star`: that is ``threshold``.

    Attributes
    ----------
    eps : float
        The Tikhonov parameter :math:`\varepsilon`.
    theta : ndarray, shape (P,)
        The best iterate.
    loss : float
        Its loss :math:`\mathcal L(\theta)`.
    objective : float
        Its objective :math:`J_\varepsilon(\theta)`.
    threshold : float
        ``eps * data.exact_norm_sq``, the bound on the loss of a global minimiser.
    n_iter : int
        Number of optimiser steps taken.

    Examples
    --------
    Returned by :func:`train_tikhonov`:

    >>> import numpy as np
    >>> from token_dynamics.interpolation import tikhonov_dataset, train_tikhonov
    >>> data = tikhonov_dataset(2, 4, 2, 2, rng=0)
    >>> fit = train_tikhonov(data, 0.1, epochs=100, rng=0)
    >>> bool(np.isclose(fit.objective, fit.loss + 0.1 * fit.theta @ fit.theta))
    True
    >>> fit.n_iter, fit.theta.shape
    (100, (20,))
    """

    eps: float
    theta: np.ndarray
    loss: float
    objective: float
    threshold: float
    n_iter: int


@dataclass(frozen=True, eq=False)
class TikhonovSweep:
    r"""Runs over several ``eps`` and the fitted log-log slope of the loss against ``eps``.

    Attributes
    ----------
    eps : ndarray, shape (k,)
        The Tikhonov parameters, in the order trained.
    loss : ndarray, shape (k,)
        The loss of each run's best iterate.
    threshold : ndarray, shape (k,)
        ``eps * data.exact_norm_sq`` for each run (see :class:`TikhonovFit`).
    slope : float
        Least-squares slope of :math:`\log\mathcal L` against :math:`\log\varepsilon` (NaN for
        a single run).
    fits : tuple of TikhonovFit
        The runs themselves.

    Examples
    --------
    Returned by :func:`tikhonov_sweep`:

    >>> from token_dynamics.interpolation import tikhonov_dataset, tikhonov_sweep
    >>> data = tikhonov_dataset(2, 4, 2, 2, rng=0)
    >>> sweep = tikhonov_sweep(data, [1e-1, 1e-2], epochs=100, rng=0)
    >>> sweep.loss.shape, len(sweep.fits), [f.eps for f in sweep.fits]
    ((2,), 2, [0.1, 0.01])
    """

    eps: np.ndarray
    loss: np.ndarray
    threshold: np.ndarray
    slope: float
    fits: tuple[TikhonovFit, ...]


def _unpack(theta: np.ndarray, d: int, w: int):
    i = 0
    out = []
    for shape in ((d,), (d,), (d, d), (), (w, d), (w,), (d, w), ()):
        size = int(np.prod(shape))
        out.append(theta[i : i + size].reshape(shape) if shape else theta[i])
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


def tikhonov_objective(theta: Any, data: TikhonovData, eps: float) -> tuple[float, np.ndarray]:
    r"""Objective :math:`J_\varepsilon = \mathcal L + \varepsilon\lVert\theta\rVert^2` and its
    gradient, with :math:`\mathcal L = \frac1N\sum_j \max_i |\mathrm T_i(X^j) - y^j|^2`.

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
        If an array argument is not real (complex, boolean, string or object).

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


def _check_data(data: Any) -> None:
    check_instance(data, TikhonovData, "data", "Build one with tikhonov_dataset().")


def _objective(theta: np.ndarray, X: np.ndarray, Y: np.ndarray, width: int, eps: float):
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


def train_tikhonov(
    data: TikhonovData,
    eps: float,
    *,
    theta0: Any = None,
    epochs: int = 3000,
    lr: float = 1e-2,
    rng: SeedLike = None,
    progress: bool = False,
) -> TikhonovFit:
    """Minimise ``L + eps |theta|^2`` by full-batch Adam with a cosine-annealed step, from
    ``theta0`` (random, ``rho = eta = 0``, by default); returns the best iterate.

    Runs for seconds to minutes: each epoch is one objective and gradient evaluation over the
    whole data set (the authors' 50 000 epochs take minutes), hence ``progress``.

    Adam is the authors' optimiser. The loss is a maximum over tokens, hence not smooth, and a
    quasi-Newton method (L-BFGS) was measured here to stall at its kinks.

    Parameters
    ----------
    data : TikhonovData
    eps : float
        Weight decay (Tikhonov parameter), positive.
    theta0 : array_like, shape (P,), optional
    epochs : int
        Number of Adam steps.
    lr : float
        Initial step, annealed to 0 along a cosine.
    rng : Generator, int or None
        Draws the initialisation.
    progress : bool
        Show a ``tqdm`` progress bar over the epochs.

    Returns
    -------
    TikhonovFit
        ``threshold`` is ``eps * data.exact_norm_sq``, the bound on the loss of a global
        minimiser.

    Raises
    ------
    ValueError
        If `eps` or `lr` is not positive, `epochs` is not a positive integer or `theta0` has the
        wrong shape.
    FloatingPointError
        If the objective becomes non-finite (lower `lr`).

    Examples
    --------
    >>> from token_dynamics.interpolation import tikhonov_dataset, train_tikhonov
    >>> data = tikhonov_dataset(4, 6, 2, 2, rng=0)
    >>> fit = train_tikhonov(data, 1e-2, epochs=500, rng=0)
    >>> bool(fit.loss <= fit.threshold)
    True
    """
    _check_data(data)
    eps = check_positive(eps, "eps")
    epochs = check_int(epochs, "epochs")
    lr = check_positive(lr, "lr")
    with float_guard("the Tikhonov training", f"lower `lr` (now {lr:g}) or `eps` (now {eps:g})"):
        return _train(data, eps, theta0, epochs, lr, rng, progress)


def _train(data, eps, theta0, epochs, lr, rng, progress) -> TikhonovFit:
    d = data.inputs.shape[2]
    size = _n_params(d, data.width)
    if theta0 is None:
        theta0 = INIT_SCALE * as_rng(rng).normal(size=size)
        theta0[2 * d + d * d] = 0.0  # rho
        theta0[-1] = 0.0  # eta
    theta = as_real_array(theta0, "theta0")
    if theta.shape != (size,):
        raise ValueError(f"`theta0` must have shape ({size},); got {theta.shape}.")
    m1, m2 = np.zeros(size), np.zeros(size)
    best_J, best = np.inf, theta.copy()
    bar = progress_bar(progress, epochs, f"train_tikhonov (eps = {eps:g})")
    for t in range(1, epochs + 1):
        J, g = tikhonov_objective(theta, data, eps)
        if not np.isfinite(J):
            raise FloatingPointError(
                f"the objective became non-finite at step {t}; lower `lr` (now {lr:g})."
            )
        if J < best_J:
            best_J, best = J, theta.copy()
        step = lr * 0.5 * (1.0 + np.cos(np.pi * t / epochs))
        m1 = ADAM_BETAS[0] * m1 + (1 - ADAM_BETAS[0]) * g
        m2 = ADAM_BETAS[1] * m2 + (1 - ADAM_BETAS[1]) * g * g
        hat1 = m1 / (1 - ADAM_BETAS[0] ** t)
        hat2 = m2 / (1 - ADAM_BETAS[1] ** t)
        theta = theta - step * hat1 / (np.sqrt(hat2) + ADAM_EPS)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    J, _ = tikhonov_objective(theta, data, eps)
    if J < best_J:
        best_J, best = J, theta
    return TikhonovFit(
        eps=eps,
        theta=best,
        loss=float(tikhonov_objective(best, data, 0.0)[0]),
        objective=float(best_J),
        threshold=eps * data.exact_norm_sq,
        n_iter=epochs,
    )


def tikhonov_sweep(
    data: TikhonovData,
    eps_values: ArrayLike,
    *,
    epochs: Any = 3000,
    lr: float = 1e-2,
    rng: SeedLike = None,
    progress: bool = False,
) -> TikhonovSweep:
    """Train for each ``eps`` in the order given, warm-starting each run from the previous one
    (the authors do not re-initialise), and fit the slope of log(loss) against log(eps).

    ``epochs`` is one number or one per ``eps``: smaller ``eps`` needs longer runs (the authors
    use 5 000, 10 000 and 50 000 epochs for 1e-1, 1e-2 and 1e-3): the authors' sweep takes
    minutes. ``progress`` shows one ``tqdm`` bar per ``eps`` over its epochs.

    Parameters
    ----------
    data : TikhonovData
        The data set, from :func:`tikhonov_dataset`.
    eps_values : array_like, shape (k,)
        Tikhonov parameters, positive, trained in this order.
    epochs : int or array_like of int, shape (k,), keyword-only
        Adam steps, one number for all runs or one per ``eps``.
    lr : float, keyword-only
        Initial step of each run.
    rng : Generator, int or None, keyword-only
        Draws the initialisation of the first run.
    progress : bool, keyword-only
        Show a ``tqdm`` bar per run.

    Returns
    -------
    TikhonovSweep

    Raises
    ------
    ValueError
        If an ``eps`` is not positive or `epochs` does not match `eps_values`.
    FloatingPointError
        If a run's objective becomes non-finite.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import tikhonov_dataset, tikhonov_sweep
    >>> data = tikhonov_dataset(4, 6, 2, 2, rng=0)
    >>> sweep = tikhonov_sweep(data, [1e-1, 1e-2], epochs=200, rng=0)
    >>> bool(np.all(sweep.loss <= sweep.threshold))
    True
    """
    _check_data(data)
    eps_values = as_vector(eps_values, "eps_values")
    if eps_values.size < 2 or np.any(eps_values <= 0):
        raise ValueError(
            "`eps_values` must hold at least two positive values (the sweep fits a slope); got "
            f"{eps_values!r}."
        )
    if isinstance(epochs, (int, np.integer)) and not isinstance(epochs, bool):
        epochs = [epochs] * eps_values.size
    if not isinstance(epochs, (list, tuple, np.ndarray)) or len(epochs) != eps_values.size:
        raise ValueError(
            f"`epochs` must be one integer or one per `eps` ({eps_values.size}); got {epochs!r}."
        )
    epochs = [check_int(n, "epochs") for n in epochs]
    fits = []
    theta = None
    for eps, n_epochs in zip(eps_values, epochs, strict=True):
        fit = train_tikhonov(
            data, float(eps), theta0=theta, epochs=int(n_epochs), lr=lr, rng=rng, progress=progress
        )
        fits.append(fit)
        theta = fit.theta
    loss = np.array([f.loss for f in fits])
    slope = fit_power_law(eps_values, loss).slope
    return TikhonovSweep(
        eps=eps_values,
        loss=loss,
        threshold=np.array([f.threshold for f in fits]),
        slope=slope,
        fits=tuple(fits),
    )
