"""Masked (causal) attention, positions in column 0: clouds, exact paths, sensitivity (private)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import expm

from .._guards import float_guard
from .._typing import ArrayLike
from .._validation import as_matrix, as_times, as_tokens, as_vector, as_weights, check_positive
from ..attention import AttentionField, with_positions
from ..attention._base import finite_result
from ..wasserstein import conditional_w2
from ._lipschitz import _check_field

__all__ = [
    "MaskedCloud",
    "Sensitivity",
    "causal_cloud",
    "conditional_sensitivity",
    "first_token_sensitivity",
    "first_token_solution",
]


@dataclass(frozen=True)
class MaskedCloud:
    """Tokens on :math:`[0,1]\\times\\mathbb R^d` with their weights.

    Attributes
    ----------
    tokens : ndarray, shape (N, 1 + d)
        Positions in column 0 (the layout of ``attention.Causal``).
    weights : ndarray, shape (N,)
    n_sink : int
        Number of sink tokens (at position 0, first rows).

    Examples
    --------
    Returned by :func:`causal_cloud`; without a sink, token :math:`i` sits at
    :math:`(i-1)/n` with weight :math:`1/n`:

    >>> from token_dynamics.meanfield import causal_cloud
    >>> c = causal_cloud([[3.0], [1.0], [2.0], [0.0]])
    >>> c.tokens[:, 0], c.weights, c.n_sink
    (array([0.  , 0.25, 0.5 , 0.75]), array([0.25, 0.25, 0.25, 0.25]), 0)
    """

    tokens: np.ndarray
    weights: np.ndarray
    n_sink: int


def causal_cloud(
    X: ArrayLike, *, sink: ArrayLike | None = None, sink_mass: float = 0.0
) -> MaskedCloud:
    r"""Attach positions (and optionally an attention sink) to a sequence of tokens.

    Without a sink, token :math:`i = 1..n` sits at :math:`s_i = (i-1)/n` with weight
    :math:`1/n`: the position marginal is uniform on the grid; its atom at 0 is the first
    token, of mass :math:`1/n`, so no sink of fixed mass protects the first positions as
    :math:`n` grows (``field_constants(Causal, R, sink_mass=1/n)`` is valid but grows like
    :math:`n`; ``gronwall_bound(..., hardy_p=p)`` gives a bound uniform in :math:`n`). With a sink,
    the ``m`` sink tokens sit at position 0 with total mass :math:`w_0` = `sink_mass`
    (:math:`\lambda = w_0\delta_0 + (1-w_0)\lambda'`) and token :math:`i` at :math:`i/n` with
    weight :math:`(1-w_0)/n`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        The sequence, in order.
    sink : array_like, shape (m, d), optional
        Sink tokens (e.g. a BOS token).
    sink_mass : float
        Mass :math:`w_0 \in (0, 1)` of the sink; required with `sink`.

    Returns
    -------
    MaskedCloud

    Raises
    ------
    ValueError
        If `X` is not an ``(n, d)`` array of finite reals, `sink` does not match it, or `sink_mass`
        is given without `sink` or outside ``(0, 1)``.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> from token_dynamics.meanfield import causal_cloud
    >>> c = causal_cloud([[1.0], [2.0]], sink=[[0.0]], sink_mass=0.5)
    >>> c.tokens
    array([[0. , 0. ],
           [0.5, 1. ],
           [1. , 2. ]])
    >>> c.weights
    array([0.5 , 0.25, 0.25])
    """
    X = as_tokens(X)
    n, d = X.shape
    if sink is None:
        if sink_mass != 0.0:
            raise ValueError("`sink_mass` needs `sink` tokens; pass sink=... or sink_mass=0.")
        return MaskedCloud(with_positions(X), np.full(n, 1.0 / n), 0)
    S = as_tokens(sink, "sink", d=d)
    w0 = check_positive(sink_mass, "sink_mass")
    if w0 >= 1.0:
        raise ValueError(f"`sink_mass` must lie in (0, 1); got {w0!r}.")
    m = S.shape[0]
    pos = np.concatenate([np.zeros(m), np.arange(1, n + 1) / n])
    w = np.concatenate([np.full(m, w0 / m), np.full(n, (1.0 - w0) / n)])
    return MaskedCloud(with_positions(np.vstack([S, X]), positions=pos), w, m)


@float_guard("the first token", "shorten `times` or scale `V` down")
def first_token_solution(V: ArrayLike, x0: ArrayLike, times: ArrayLike) -> np.ndarray:
    r"""Exact path :math:`x_1(t) = e^{tV}x_1(0)` of a token that attends only to itself.

    Under causal softmax attention the first token (alone at the smallest position) sees only
    itself, so :math:`\dot x_1 = Vx_1`.

    Parameters
    ----------
    V : array_like, shape (d, d)
    x0 : array_like, shape (d,)
    times : array_like, shape (T,)

    Returns
    -------
    ndarray, shape (T, d)

    Raises
    ------
    ValueError
        If `V` is not ``(d, d)`` for ``d = len(x0)`` or `times` are negative or decreasing.
    TypeError
        If an array argument is not real (complex, boolean, string or object).
    FloatingPointError
        If the path leaves the float64 range (a growing :math:`e^{tV}` at large times).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.meanfield import first_token_solution
    >>> first_token_solution([[0.0, -1.0], [1.0, 0.0]], [1.0, 0.0], [np.pi]).round(12)
    array([[-1.,  0.]])
    """
    x0 = as_vector(x0, "x0")
    V = as_matrix(V, "V", shape=(x0.shape[0], x0.shape[0]))
    t = as_times(times, strict=False, nonnegative=True, scalar=True)
    # scipy's expm overflows to inf without a floating-point error (scipy 1.18): check the result
    path = np.stack([expm(s * V) @ x0 for s in t])
    return finite_result(np, path, "the first token", "shorten `times` or scale `V` down")


@dataclass(frozen=True)
class Sensitivity:
    """How much a perturbation of the measure moves the masked velocity field.

    Attributes
    ----------
    distance : float
        :math:`W_{2,\\lambda}(\\mu, \\nu)` of the perturbation.
    sup_ratio : float
        :math:`\\max_i |\\Gamma_\\mu(s_i,x_i) - \\Gamma_\\nu(s_i,x_i)| / W_{2,\\lambda}`.
    mean_ratio : float
        :math:`(\\sum_i w_i|\\Gamma_\\mu - \\Gamma_\\nu|^2(s_i,x_i))^{1/2} / W_{2,\\lambda}`.

    Examples
    --------
    Returned by :func:`conditional_sensitivity` and :func:`first_token_sensitivity`; the sup
    ratio of a move of the first token grows with the number of tokens ``n`` when there is no
    sink:

    >>> import numpy as np
    >>> from token_dynamics.attention import Causal
    >>> from token_dynamics.meanfield import first_token_sensitivity
    >>> field = Causal([[0.0]], [[1.0]])
    >>> [first_token_sensitivity(field, np.zeros((n, 1))).sup_ratio for n in (4, 16)]
    [2.0, 4.0]
    >>> first_token_sensitivity(field, np.zeros((4, 1))).distance
    0.05
    """

    distance: float
    sup_ratio: float
    mean_ratio: float


@float_guard("the conditional sensitivity", "rescale `Z` and `Z_perturbed`")
def conditional_sensitivity(
    field: AttentionField, Z: ArrayLike, Z_perturbed: ArrayLike, *, weights: ArrayLike | None = None
) -> Sensitivity:
    r"""Lipschitz ratios of :math:`\mu\mapsto\Gamma_\mu` for masked tokens, queries held fixed.

    Both velocity fields are evaluated at the queries of `Z` (``field.velocity_at``), so the
    ratios measure the dependence on the measure only.

    Parameters
    ----------
    field : AttentionField
        Typically ``attention.Causal``.
    Z, Z_perturbed : array_like, shape (n, 1 + d)
        Same positions (column 0), different tokens.
    weights : array_like, shape (n,), optional

    Returns
    -------
    Sensitivity

    Raises
    ------
    ValueError
        If `Z_perturbed` does not match or equals `Z`, or `weights` are not probability weights.
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Causal
    >>> from token_dynamics.meanfield import causal_cloud, conditional_sensitivity
    >>> cloud = causal_cloud(np.zeros((4, 1)))
    >>> moved = cloud.tokens.copy()
    >>> moved[0, 1] = 0.1  # move the first token, which sees only itself
    >>> sens = conditional_sensitivity(Causal([[0.0]], [[1.0]]), cloud.tokens, moved)
    >>> round(sens.sup_ratio, 6)  # |Delta Gamma| = 0.1 at token 1, W_{2,lambda} = 0.1 / sqrt(4)
    2.0
    """
    _check_field(field)
    Z = as_tokens(Z, "Z")
    Zp = as_tokens(Z_perturbed, "Z_perturbed", d=Z.shape[1])
    if Zp.shape != Z.shape or np.any(Zp[:, 0] != Z[:, 0]):
        raise ValueError(
            f"`Z_perturbed` must have the shape of `Z`, {Z.shape}, and its positions (column 0); "
            "perturb the token columns only."
        )
    w = as_weights(weights, Z.shape[0])
    dist = conditional_w2(Z, Zp, weights_x=w, weights_y=w)
    if dist == 0:
        raise ValueError("`Z_perturbed` must differ from `Z`.")
    diff = field.velocity_at(Z, Zp, weights=w) - field.velocity_at(Z, Z, weights=w)
    norms = np.linalg.norm(diff, axis=1)
    return Sensitivity(
        distance=dist,
        sup_ratio=float(norms[w > 0].max() / dist),
        mean_ratio=float(np.sqrt(np.sum(w * norms**2)) / dist),
    )


@float_guard("the first-token sensitivity", "rescale `X` or lower `delta`")
def first_token_sensitivity(
    field: AttentionField,
    X: ArrayLike,
    *,
    sink: ArrayLike | None = None,
    sink_mass: float = 0.0,
    delta: float = 0.1,
) -> Sensitivity:
    r"""Sensitivity of the masked field to a move of the first (non-sink) token.

    Builds :func:`causal_cloud` from `X` (and the optional sink), moves the content of the first
    token after the sink by `delta` along the first axis, and returns
    :func:`conditional_sensitivity`. Without a sink the sup ratio grows like :math:`\sqrt n`;
    with a sink of mass :math:`w_0` it stays below :math:`L_\mu(R)/w_0`.

    Parameters
    ----------
    field : AttentionField
        Typically ``attention.Causal``.
    X : array_like, shape (n, d)
    sink : array_like, shape (m, d), optional
    sink_mass : float
    delta : float
        Size of the move.

    Returns
    -------
    Sensitivity

    Raises
    ------
    ValueError
        If `delta` is not positive, or `sink`, `sink_mass` are invalid (see :func:`causal_cloud`).
    TypeError
        If an array argument is not real (complex, boolean, string or object).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.meanfield import first_token_sensitivity
    >>> from token_dynamics.attention import Causal
    >>> field = Causal([[0.0]], [[1.0]])
    >>> round(first_token_sensitivity(field, np.zeros((16, 1))).sup_ratio, 6)  # sqrt(16)
    4.0
    """
    _check_field(field)
    delta = check_positive(delta, "delta")
    cloud = causal_cloud(X, sink=sink, sink_mass=sink_mass)
    moved = cloud.tokens.copy()
    moved[cloud.n_sink, 1] += delta
    if moved[cloud.n_sink, 1] == cloud.tokens[cloud.n_sink, 1]:
        raise ValueError(
            f"`delta` = {delta:g} is lost in rounding against the first token of `X`; pass a "
            "larger `delta`."
        )
    return conditional_sensitivity(field, cloud.tokens, moved, weights=cloud.weights)
