r"""Remainders of one layer: Lemma A.1 (the layer norm) and Lemmas 2.6-2.7 (a layer after its
Euler-Maruyama part) of Agazzi et al. (2026) (private module)."""

from __future__ import annotations

import numpy as np

from .._guards import checked_finite, float_guard
from .._typing import ArrayLike, SeedLike
from .._validation import as_real_array, as_rng, as_vector, check_int
from ..diagnostics import fit_power_law
from ._estimates import ConvergenceStudy, _study
from ._mlp import _as_initial, _draw_weights, _mlp
from ._model import (
    StochasticTransformer,
    _attention_drift,
    _attention_step,
    _noise_step,
    _normalise,
)
from ._sde import _project

__all__ = ["layer_norm_remainder", "layer_remainder"]

#: A remainder is measured as the difference of a layer and its expansion, each rounded to
#: about eps times its size: one below RESOLUTION such roundings has fewer than three digits of
#: its own, and a slope fitted through it is rounding (layer_norm_remainder, order 2, at
#: scales 1e-5 and 1e-6 gave -1.4 instead of 3), so it is refused.
RESOLUTION = 1e3


def layer_norm_remainder(
    v: ArrayLike, w: ArrayLike, scales: ArrayLike, *, order: int = 2
) -> ConvergenceStudy:
    r"""Remainder of the Taylor expansion of :math:`\mathrm{LN}(v + \varepsilon w)` at ``v``.

    .. math:: \mathrm{LN}(v+w) = v + P_vw + R_1
              = v + P_vw - \langle v,w\rangle P_vw - \tfrac12|P_vw|^2v + R_2,

    with :math:`|R_1|\le 3|w|^2/\min_t|v+tw|^2` and :math:`|R_2|\le 6|w|^3/\min_t|v+tw|^3`
    (Agazzi et al. 2026, Lemma A.1). Returns :math:`|R_{\rm order}|` at ``eps * w`` for each
    ``eps`` in `scales` (``stderr`` zero: deterministic), whose log-log slope is
    ``order + 1``.

    Parameters
    ----------
    v : (d,) array_like
        A unit vector.
    w : (d,) array_like
        A direction (any norm).
    scales : sequence of float
        Positive factors ``eps``.
    order : {1, 2}

    Returns
    -------
    ConvergenceStudy

    Raises
    ------
    ValueError
        If `v` or `w` is not a finite vector of one size, `w` vanishes, `scales` does not hold
        two distinct positive factors, `order` is not 1 or 2, or the remainder vanishes to
        rounding at some scale (too small to measure).
    FloatingPointError
        If the remainder exceeds the float64 range (``|eps w|`` far above 1).

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Lemma A.1.

    Examples
    --------
    >>> from token_dynamics.stochastic import layer_norm_remainder
    >>> study = layer_norm_remainder([1.0, 0.0], [0.3, 0.4], [1e-2, 1e-3])
    >>> round(study.slope, 2)
    3.0
    """
    if order not in (1, 2):
        raise ValueError(f"`order` must be 1 or 2; got {order!r}.")
    v = np.asarray(_normalise(as_vector(v, "v")[None], "v")[0])
    w = as_vector(w, "w", size=v.shape[0])
    if not np.any(w):
        raise ValueError("`w` must be a non-zero direction; got all zeros.")
    scales = as_vector(scales, "scales")
    if np.any(scales <= 0) or np.unique(scales).size < 2:
        raise ValueError(
            f"`scales` must hold at least two distinct positive factors; got {scales!r}."
        )
    remainders, floors = [], []
    fix = "pass smaller `scales` or a shorter `w` (the expansion is one of small steps)"
    with float_guard("the remainder of the layer-norm expansion", fix):
        for eps in scales:
            x = eps * w
            exact = (v + x) / np.linalg.norm(v + x)
            Pw = x - (x @ v) * v
            approx = v + Pw
            if order == 2:
                approx = approx - (v @ x) * Pw - 0.5 * (Pw @ Pw) * v
            remainders.append(np.linalg.norm(exact - approx))
            size = max(1.0, float(np.linalg.norm(approx)))  # of the two vectors subtracted
            floors.append(RESOLUTION * np.finfo(np.float64).eps * size)
    # before numpy 2.3 `np.linalg.norm` overflows without a floating-point error, unseen above
    rem = checked_finite(np.array(remainders), "the remainder of the layer-norm expansion", fix)
    if np.any(rem <= np.array(floors)):
        raise ValueError(
            f"the remainder vanished to rounding at some `scales` (|eps w|^{order + 1} is below "
            f"{RESOLUTION:g} roundings of the unit vectors, about 2e-13); pass larger `scales` "
            "or a longer `w`."
        )
    return ConvergenceStudy(scales, rem, np.zeros_like(rem), fit_power_law(scales, rem).slope)


def layer_remainder(
    model: StochasticTransformer,
    X: ArrayLike,
    steps: ArrayLike,
    *,
    n_draws: int = 100,
    rng: SeedLike = None,
):
    r"""Remainder of one layer of the model (1.1) after its Euler-Maruyama part.

    With :math:`\Delta t` a step, :math:`Y = \mathrm{LN}(x + \Delta t\,\mathrm{Attn})`, one
    draw :math:`G` of the layer's MLP and :math:`g = G(x)`,

    .. math:: \mathrm{LN}\big(Y + \sqrt{\Delta t}\,G(Y)\big) = x + \Delta t\,P_x\mathrm{Attn}
              + \sqrt{\Delta t}\,P_xg - \tfrac{\Delta t}2|P_xg|^2x
              - \Delta t\,\langle x, g\rangle P_xg + \mathcal R

    (Agazzi et al. 2026, Lemma 2.6), and :math:`\mathbb E|\mathcal R|^2 = O(\Delta t^3)`
    (Lemma 2.7: the order its proof gives and Lemma 2.5 uses). Returns the mean over the tokens
    of :math:`|\mathcal R|^2` for each step, averaged over `n_draws` draws of the MLP (each draw
    kept for every step), whose log-log slope against the step is 3.

    Parameters
    ----------
    model : StochasticTransformer
        Attention and MLP, of finite width.
    X : (n, d) array_like
        Tokens on the unit sphere.
    steps : sequence of float
        Positive steps :math:`\Delta t = T / L`, at least two.
    n_draws : int
        Independent draws of the MLP, at least 2 (standard errors).
    rng : Generator, int or None

    Returns
    -------
    ConvergenceStudy
        ``values`` are the steps.

    Raises
    ------

    TypeError
        If `model` is not a :class:`StochasticTransformer`.
    ValueError
        If `steps` does not hold two positive steps, `n_draws` < 2, the model's width is
        infinite, `X` is not a cloud of unit vectors, or the remainder vanishes to rounding
        at some step (too small to measure, steps of order 1e-9).
    FloatingPointError
        If a token becomes non-finite or zero.

    References
    ----------
    Agazzi et al., arXiv:2604.26898, 2026, Lemma 2.6 and Lemma 2.7.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.stochastic import MLPNoise, StochasticTransformer, layer_remainder
    >>> model = StochasticTransformer(MLPNoise("tanh", width=16, sigma_U=0.1, sigma_W=0.1))
    >>> study = layer_remainder(model, np.eye(3), [1e-3, 1e-4], n_draws=4, rng=0)
    >>> round(study.slope)
    3
    """
    steps = np.atleast_1d(as_real_array(steps, "steps"))
    if steps.ndim != 1 or steps.size < 2 or not np.all(np.isfinite(steps) & (steps > 0)):
        raise ValueError(f"`steps` must hold at least two positive steps; got {steps!r}.")
    if not isinstance(model, StochasticTransformer):
        raise TypeError(f"`model` must be a StochasticTransformer; got {type(model).__name__}.")
    n_draws = check_int(n_draws, "n_draws", minimum=2)
    if model.noise.width is None:
        raise ValueError(
            "`model.noise.width` must be a finite width: the remainder is that of one drawn MLP, "
            "evaluated at x and at Y with the same weights."
        )
    rng = as_rng(rng)
    X = _as_initial(X, n_draws, "X")
    d = X.shape[-1]
    A, V = model.matrices(d)
    off = model.attention_off(d)
    Ys = [_attention_step(X, h, A, V, off, f"step {h:g} (attention)") for h in steps]
    noise = model.noise
    weights = _draw_weights(noise, n_draws, d, rng)
    GX = _mlp(noise.activation, X, *weights)
    GY = [_mlp(noise.activation, Y, *weights) for Y in Ys]
    drift = np.zeros_like(X) if off else _project(X, _attention_drift(X, A, V))
    Pg = _project(X, GX)
    along = np.einsum("...d,...d->...", X, GX)[..., None]
    tangent2 = np.einsum("...d,...d->...", Pg, Pg)[..., None]
    errors = []
    for h, Y, gY in zip(steps, Ys, GY, strict=True):
        exact = _noise_step(Y, h, gY, f"step {h:g} (MLP)")
        euler = X + h * drift + np.sqrt(h) * Pg - 0.5 * h * tangent2 * X - h * along * Pg
        errors.append(np.mean(np.sum((exact - euler) ** 2, axis=-1), axis=-1))
    table = np.stack(errors, axis=1)
    if np.any(table.mean(axis=0) <= (RESOLUTION * np.finfo(np.float64).eps) ** 2):
        raise ValueError(
            f"the remainder vanished to rounding at some `steps` (its size, about dt^(3/2), "
            f"is below {RESOLUTION:g} roundings of the unit tokens, about 2e-13); pass larger "
            "`steps`."
        )
    return _study(steps, table)
