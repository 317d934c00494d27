"""Tikhonov-regularised training of the one-block transformer: Adam runs and the sweep over
the regularisation parameter (private; re-exported by :mod:`token_dynamics.interpolation`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard, progress_bar
from .._typing import ArrayLike, SeedLike
from .._validation import as_real_array, as_rng, as_vector, check_int, check_positive
from ..diagnostics import fit_power_law
from ._tikhonov import TikhonovData, _check_data, _n_params, tikhonov_objective

__all__ = ["TikhonovFit", "TikhonovSweep", "tikhonov_sweep", "train_tikhonov"]

#: Adam's moment decay rates and denominator guard (the usual defaults, as in the authors' code).
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
#: Scale of the random initialisation (rho and eta start at 0, as in the authors' code).
INIT_SCALE = 0.1


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
        Least-squares slope of :math:`\log\mathcal L` against :math:`\log\varepsilon`.
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


def train_tikhonov(
    data: TikhonovData,
    eps: float,
    *,
    theta0: ArrayLike | None = None,
    epochs: int = 3000,
    lr: float = 1e-2,
    rng: SeedLike = None,
    progress: bool = False,
) -> TikhonovFit:
    r"""Minimise :math:`J_\varepsilon = \mathcal L + \varepsilon\lVert\theta\rVert^2` by
    full-batch Adam with a cosine-annealed step, from ``theta0`` (random, ``rho = eta = 0``, by
    default); returns the best iterate. At epoch :math:`t` of :math:`T` the step is

    .. math:: \theta_{t} = \theta_{t-1} - \frac{\alpha}{2}\Big(1 + \cos\frac{\pi (t-1)}{T}\Big)
              \frac{\hat m_t}{\sqrt{\hat v_t} + 10^{-8}},

    with :math:`\hat m_t, \hat v_t` Adam's bias-corrected moments of the gradient (decay rates
    0.9 and 0.999) and :math:`\alpha` = ``lr``: the first step is ``lr`` and every step moves,
    the schedule of PyTorch's ``CosineAnnealingLR(T_max=T)`` stepped once per epoch, which the
    authors use.

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
    TypeError
        If `data` is not a :class:`TikhonovData`, `theta0` is not real, `rng` is not a
        Generator, a seed or None, or `progress` is not a bool.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (convergence to a global minimiser under regularised training),
    and the authors' repository ``DCN-FAU-AvH/exactInterpTF`` (``tikhonov/``: Adam, cosine
    annealing, full batch).

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


def _train(
    data: TikhonovData,
    eps: float,
    theta0: ArrayLike | None,
    epochs: int,
    lr: float,
    rng: SeedLike,
    progress: bool,
) -> TikhonovFit:
    d = int(data.inputs.shape[2])
    size = _n_params(d, data.width)
    if theta0 is None:
        start = INIT_SCALE * as_rng(rng).normal(size=size)
        start[2 * d + d * d] = 0.0  # rho
        start[-1] = 0.0  # eta
        theta0 = start
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
        step = lr * 0.5 * (1.0 + np.cos(np.pi * (t - 1) / epochs))  # torch's step t - 1
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
    epochs: ArrayLike = 3000,
    lr: float = 1e-2,
    rng: SeedLike = None,
    progress: bool = False,
) -> TikhonovSweep:
    r"""Train for each ``eps`` in the order given, warm-starting each run from the previous one
    (the authors do not re-initialise), and fit the slope of the loss against ``eps``:

    .. math:: \log\mathcal L(\theta_{\varepsilon_k}) \approx s \log\varepsilon_k + c,

    by least squares over the runs. The threshold :math:`\varepsilon\lVert\theta^\star\rVert^2`
    of each run bounds the loss of a global minimiser (see :class:`TikhonovFit`); a slope near 1
    is an observation about this experiment, not a statement of the paper.

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
        The runs, their losses and thresholds, and the fitted slope :math:`s`.

    Raises
    ------
    ValueError
        If fewer than two distinct ``eps`` are given, an ``eps`` is not positive or `epochs` does
        not match `eps_values`.
    FloatingPointError
        If a run's objective becomes non-finite.
    TypeError
        If `data` is not a :class:`TikhonovData` or `rng` is not a Generator, a seed or None.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270, and the authors' repository ``DCN-FAU-AvH/exactInterpTF``
    (``tikhonov/``, the sweep of their Figure 1b).

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
    if np.unique(eps_values).size < 2 or np.any(eps_values <= 0):
        raise ValueError(
            "`eps_values` must hold at least two distinct positive values (the sweep fits a "
            f"slope); got {eps_values!r}."
        )
    runs = [epochs] * eps_values.size if isinstance(epochs, int | np.integer) else epochs
    if (
        isinstance(epochs, bool)
        or not isinstance(runs, list | tuple | np.ndarray)
        or len(runs) != eps_values.size
    ):
        raise ValueError(
            f"`epochs` must be one integer or one per `eps` ({eps_values.size}); got {epochs!r}."
        )
    n_epochs_per_run = [check_int(n, "epochs") for n in runs]
    fits = []
    theta = None
    for eps, n_epochs in zip(eps_values, n_epochs_per_run, strict=True):
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
