r"""A priori constants of every attention variant on a ball: growth and Lipschitz (private).

For a field :math:`\Gamma_{\mu,t}` and measures supported in :math:`B(0, R)`, three constants
carry the well-posedness and stability theory of the Transformer PDE:

- the growth rate :math:`b` with :math:`|\Gamma_{\mu,t}(x)| \le b\,R` for :math:`|x| \le R`;
- the Lipschitz constant :math:`L_x(R)` of :math:`x \mapsto \Gamma_{\mu,t}(x)` on the ball;
- the Lipschitz constant :math:`L_\mu(R)` of :math:`\mu \mapsto \Gamma_{\mu,t}(x)` in
  :math:`W_1`, hence in every :math:`W_p`, :math:`p \ge 1` (because :math:`W_1 \le W_p`).

:func:`field_constants` returns them for softmax, l2, sigmoid, Sinkhorn, multi-head and masked
attention, with constant or time-dependent parameters; :func:`gronwall_bound` (in ``_gronwall``)
integrates them along the support-radius bound into :math:`\log C(t, R_0)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, ParameterLike
from .._validation import (
    as_matrix,
    as_tokens,
    check_instance,
    check_positive,
    check_real,
    time_text,
)
from ..attention import L2, AttentionField, Causal, MultiHead, Sigmoid, Sinkhorn, Softmax
from ..attention._composite import check_fixed_positions, is_masked
from ..wasserstein import wasserstein1
from ._estimates import softmax_lipschitz, support_radius

__all__ = ["FieldConstants", "field_constants", "measured_constants"]


@dataclass(frozen=True)
class FieldConstants:
    r"""The three a priori constants of a field on the ball :math:`B(0, R)` at one time.

    Attributes
    ----------
    growth : float
        :math:`b` with :math:`|\Gamma_{\mu,t}(x)| \le b R` when :math:`|x| \le R` and
        :math:`\operatorname{supp}\mu \subset B(0, R)`.
    lipschitz_x : float
        :math:`L_x(R)`: Lipschitz constant of :math:`x \mapsto \Gamma_{\mu,t}(x)`.
    lipschitz_measure : float
        :math:`L_\mu(R)`: :math:`|\Gamma_{\mu,t}(x) - \Gamma_{\nu,t}(x)| \le L_\mu W_1(\mu,\nu)`
        for queries and measures in the ball (for masked attention: in :math:`W_{1,\lambda}`,
        with the sink mass dividing the softmax constant).

    Examples
    --------
    Returned by :func:`field_constants`; for softmax with :math:`A = I/2`, :math:`V = 2I`
    on the unit ball, :math:`b = \lVert V\rVert = 2`, :math:`L_x = \lVert V\rVert\kappa R^2 = 1`
    and :math:`L_\mu = \lVert V\rVert(1 + 2\kappa R^2)e^{2\kappa R^2} = 4e`:

    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.meanfield import field_constants
    >>> c = field_constants(Softmax(0.5 * np.eye(2), 2.0 * np.eye(2)), 1.0)
    >>> c.growth, c.lipschitz_x, bool(np.isclose(c.lipschitz_measure, 4 * np.e))
    (2.0, 1.0, True)
    """

    growth: float
    lipschitz_x: float
    lipschitz_measure: float


def _check_field(field: object) -> None:
    check_instance(field, AttentionField, "field", "Pass e.g. attention.Softmax(A, V).")


def _at(P: ParameterLike, name: str, t: float) -> np.ndarray:
    """Value of a constant or time-dependent parameter at time ``t``."""
    return as_matrix(
        P(t) if callable(P) else P, f"{name}(t={time_text(t)})" if callable(P) else name
    )


def _norm(M: np.ndarray) -> float:
    return float(np.linalg.norm(M, 2))


def _head_scale(field: MultiHead, h: int, t: float) -> float:
    r""":math:`\lVert W_h\rVert` at time ``t``; for masked heads the norm of the block
    ``W_h[1:, 1:]`` that moves the content (the positions stay fixed, checked here for a
    time-dependent ``W_h``)."""
    Wh = _at(field.W[h], f"W[{h}]", t)  # type: ignore[index]
    if not is_masked(field):
        return _norm(Wh)
    check_fixed_positions(Wh, h)
    return _norm(Wh[1:, 1:])


def _check_sink_mass(field: AttentionField, sink_mass: float | None) -> None:
    """Refuse a `sink_mass` that no head of `field` reads (house style for an argument without
    effect, as `hardy_p` off masked attention)."""
    if sink_mass is not None and not is_masked(field):
        raise ValueError(
            "`sink_mass` applies to masked attention (`Causal`, alone or in a `MultiHead`) "
            f"only; {type(field).__name__} has no masked head: omit it."
        )


def _times(c: float, x: float) -> float:
    """The product ``c x`` of nonnegative factors with ``0 inf = 0``.

    The radius bound :math:`R(t)` may exceed float64 (it is then ``inf``). Each constant is a
    nondecreasing function of :math:`R` with nonnegative coefficients, so its value there is its
    limit as :math:`R \\to \\infty`: ``inf`` for a term that grows, the term's exact value for one
    whose coefficient is zero (it vanishes at every finite radius).
    """
    if c == 0 or x == 0:
        return 0.0
    with np.errstate(over="ignore"):
        return float(c * x)


def _squared(c: float, R: float) -> float:
    """:math:`c R^2` with ``0 inf = 0`` and ``inf`` once it leaves float64."""
    return _times(_times(c, R), R)


def _exp(u: float) -> float:
    """:math:`e^u`, ``inf`` once it leaves float64 (a void constant, not a failure)."""
    with np.errstate(over="ignore"):
        return float(np.exp(u))


def _softmax(field: Softmax | Causal, R: float, t: float) -> FieldConstants:
    nV = _norm(_at(field.V, "V", t))
    lip_x, lip_mu = softmax_lipschitz(abs(field.beta) * _norm(_at(field.A, "A", t)), nV, R)
    return FieldConstants(nV, float(lip_x), float(lip_mu))


def _l2(field: L2, R: float, t: float) -> FieldConstants:
    Q, K = _at(field.Qbar, "Qbar", t), _at(field.Kbar, "Kbar", t)
    nV, q, k = _norm(_at(field.V, "V", t)), _norm(Q), _norm(K)
    s = field.s
    lip_x = _squared(2 * _norm(K.T @ Q) / s, R)
    lip_mu = (1 + _squared(4 * k * (q + k) / s, R)) * _exp(_squared((q + k) ** 2 / s, R))
    return FieldConstants(nV, _times(nV, lip_x), _times(nV, lip_mu))


def _sigmoid(field: Sigmoid, R: float, t: float) -> FieldConstants:
    nV, u = _norm(_at(field.V, "V", t)), _squared(_norm(_at(field.A, "A", t)) / 4, R)
    return FieldConstants(nV, _times(nV, u), _times(nV, 1 + u))


def _sinkhorn(field: Sinkhorn, R: float, t: float) -> FieldConstants:
    nV = _norm(_at(field.V, "V", t))
    u = _squared(_norm(_at(field.A, "A", t)) / field.eps, R)
    lip_mu = _exp(4 * u) * (1 + 5 * u + _times(u, _exp(2 * u)))
    return FieldConstants(nV, _times(nV, u), _times(nV, lip_mu))


@float_guard("the field constants", "lower `R` or the norms of the parameters")
def field_constants(
    field: AttentionField, R: float, *, t: float = 0.0, sink_mass: float | None = None
) -> FieldConstants:
    r"""Growth, Lipschitz-in-x and Lipschitz-in-measure constants of a field on :math:`B(0,R)`.

    With :math:`\kappa = \lVert A\rVert` (spectral norms throughout, parameters evaluated at
    time `t`):

    .. math::

        \begin{array}{llll}
        \text{variant} & b & L_x(R) & L_\mu(R) \\
        \text{softmax} & \lVert V\rVert & \lVert V\rVert\kappa R^2
            & \lVert V\rVert(1 + 2\kappa R^2)e^{2\kappa R^2} \\
        \ell^2 & \lVert V\rVert & 2\lVert V\rVert\lVert\bar K^\top\bar Q\rVert R^2/s
            & \lVert V\rVert\big(1 + 4k(q+k)R^2/s\big)e^{(q+k)^2R^2/s} \\
        \text{sigmoid} & \lVert V\rVert & \lVert V\rVert\kappa R^2/4
            & \lVert V\rVert(1 + \kappa R^2/4) \\
        \text{Sinkhorn} & \lVert V\rVert & \lVert V\rVert u
            & \lVert V\rVert e^{4u}(1 + 5u + ue^{2u}),\ u = \kappa R^2/\varepsilon \\
        \text{multi-head} & \sum_h \lVert W_h\rVert b_h & \sum_h \lVert W_h\rVert L_{x,h}
            & \sum_h \lVert W_h\rVert L_{\mu,h} \\
        \text{masked} & \lVert V\rVert & \lVert V\rVert\kappa R^2
            & \lVert V\rVert(1 + 2\kappa R^2)e^{2\kappa R^2}/w_0
        \end{array}

    with :math:`q = \lVert\bar Q\rVert`, :math:`k = \lVert\bar K\rVert` for l2, the inverse
    temperature folded into :math:`A` for softmax and masked attention, and :math:`w_0` the
    mass of the attention sink (the atom of the position marginal at 0). For a multi-head of
    masked heads, :math:`\lVert W_h\rVert` is the norm of the block ``W_h[1:, 1:]`` that acts
    on the content (a ``W_h`` that would move the positions is refused).

    Parameters
    ----------
    field : Softmax, L2, Sigmoid, Sinkhorn, MultiHead or Causal
        Parameters may be constant or functions of time.
    R : float
        Radius of the ball holding the queries and the supports.
    t : float
        Time at which time-dependent parameters are evaluated.
    sink_mass : float, optional
        Mass :math:`w_0 \in (0, 1]` of the position marginal at 0; required for ``Causal``
        and for a ``MultiHead`` with ``Causal`` heads (without an atom at 0 no pointwise
        constant uniform in the position exists; for a sink-free bound in
        :math:`W_{p,\lambda}`, see `hardy_p` of :func:`gronwall_bound`).

    Returns
    -------
    FieldConstants
        A constant that exceeds float64 is ``inf`` (the estimate is then void, not wrong).

    Raises
    ------
    TypeError
        For a variant without such estimates (hardmax is discontinuous; USA and linear
        attention are not covered here).
    ValueError
        If `R` is negative, `t` is not a finite real, or `sink_mass` is missing for masked
        heads, outside :math:`(0, 1]`, or given for a field without a masked head.

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025 (well-posedness of
    every variant for compactly supported data); the constants are derived in the book.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Sigmoid
    >>> from token_dynamics.meanfield import field_constants
    >>> c = field_constants(Sigmoid(np.eye(2), 2 * np.eye(2)), 1.0)
    >>> c.growth, c.lipschitz_x, c.lipschitz_measure
    (2.0, 0.5, 2.5)
    """
    _check_field(field)
    _check_sink_mass(field, sink_mass)
    return _constants(field, check_positive(R, "R", allow_zero=True), check_real(t, "t"), sink_mass)


def _constants(
    field: AttentionField, R: float, t: float, sink_mass: float | None
) -> FieldConstants:
    """:func:`field_constants` for a checked `R` (``inf`` allowed: the limit as R grows)."""
    if isinstance(field, Softmax):
        return _softmax(field, R, t)
    if isinstance(field, L2):
        return _l2(field, R, t)
    if isinstance(field, Sigmoid):
        return _sigmoid(field, R, t)
    if isinstance(field, Sinkhorn):
        return _sinkhorn(field, R, t)
    if isinstance(field, MultiHead):
        parts = [_constants(h, R, t, sink_mass) for h in field.heads]  # masked heads need it
        scales = (
            [1.0] * len(parts)
            if field.W is None
            else [_head_scale(field, h, t) for h in range(len(parts))]
        )
        return FieldConstants(
            *(
                float(sum(_times(c, getattr(p, name)) for c, p in zip(scales, parts, strict=True)))
                for name in ("growth", "lipschitz_x", "lipschitz_measure")
            )
        )
    if isinstance(field, Causal):
        if sink_mass is None:
            raise ValueError(
                "`sink_mass` is required for `Causal`: without an atom of the position "
                "marginal at 0 the masked field has no Lipschitz constant uniform in the "
                "position. Pass the sink's mass w0 in (0, 1] (or, for a bound without a sink, "
                "use `gronwall_bound(..., hardy_p=p)`)."
            )
        w0 = check_positive(sink_mass, "sink_mass")
        if w0 > 1:
            raise ValueError(f"`sink_mass` must lie in (0, 1]; got {w0!r}.")
        c = _softmax(field, R, t)
        return FieldConstants(c.growth, c.lipschitz_x, c.lipschitz_measure / w0)
    raise TypeError(
        "`field` must be Softmax, L2, Sigmoid, Sinkhorn, MultiHead or Causal; got "
        f"{type(field).__name__}, for which the book states no such estimates."
    )


@float_guard("the measured constants", "rescale the tokens and queries")
def measured_constants(
    field: AttentionField,
    X: ArrayLike,
    Y: ArrayLike,
    queries: ArrayLike,
    other_queries: ArrayLike,
    *,
    t: float = 0.0,
) -> FieldConstants:
    r"""The three constants as measured on tokens: the quantities the estimates bound.

    With :math:`\mu`, :math:`\nu` the uniform measures on `X`, `Y` and :math:`R` the radius
    of the smallest centred ball holding `X`, `Y` and both sets of queries:

    - ``growth`` is :math:`\max_i|\Gamma_\mu(q_i)| / R`;
    - ``lipschitz_x`` is :math:`\max_i|\Gamma_\mu(q_i) - \Gamma_\mu(q'_i)|/|q_i - q'_i|`;
    - ``lipschitz_measure`` is :math:`\max_i|\Gamma_\mu(q_i) - \Gamma_\nu(q_i)| /
      W_1(\mu, \nu)`.

    Each is at most the corresponding entry of :func:`field_constants` at radius :math:`R`.

    Parameters
    ----------
    field : AttentionField
        Not masked (positions are not handled here).
    X, Y : array_like, shape (n, d)
        Tokens of the two measures.
    queries, other_queries : array_like, shape (m, d)
        Query points, paired row by row for the chord slopes.
    t : float
        Time at which the field is evaluated.

    Returns
    -------
    FieldConstants

    Raises
    ------
    ValueError
        If the arrays do not match, `other_queries` equals `queries` in some row, or `X` and `Y`
        define the same measure.
    TypeError
        If an array argument is not real, or `field` is not a variant with stated estimates.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.attention import Softmax
    >>> from token_dynamics.meanfield import measured_constants
    >>> X = np.array([[1.0], [-1.0]])
    >>> m = measured_constants(Softmax([[0.0]], [[2.0]]), X, X + 0.5, [[0.0]], [[1.0]])
    >>> m.growth, m.lipschitz_x, m.lipschitz_measure  # A = 0: Gamma = 2 mean, rigid shift
    (0.0, 0.0, 2.0)
    """
    _check_field(field)
    X = as_tokens(X)
    d = X.shape[1]
    Y = as_tokens(Y, "Y", d=d)
    Q = as_tokens(queries, "queries", d=d)
    Q2 = as_tokens(other_queries, "other_queries", d=d)
    if Q2.shape != Q.shape:
        raise ValueError(f"`other_queries` must have the shape of `queries` {Q.shape}.")
    chords = np.linalg.norm(Q - Q2, axis=1)
    if np.any(chords == 0):
        raise ValueError("`other_queries` must differ from `queries` in every row.")
    w1 = wasserstein1(X, Y)
    if w1 == 0:
        raise ValueError("`X` and `Y` must define different measures (their distance is 0).")
    R = max(support_radius(Z) for Z in (X, Y, Q, Q2))
    GX = field.velocity_at(Q, X, t)
    return FieldConstants(
        growth=float(np.linalg.norm(GX, axis=1).max() / R) if R > 0 else 0.0,
        lipschitz_x=float(
            (np.linalg.norm(GX - field.velocity_at(Q2, X, t), axis=1) / chords).max()
        ),
        lipschitz_measure=float(np.linalg.norm(GX - field.velocity_at(Q, Y, t), axis=1).max() / w1),
    )
