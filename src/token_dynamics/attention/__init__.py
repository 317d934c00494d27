r"""Self-attention as a velocity field on tokens.

Every variant is a frozen dataclass deriving from :class:`AttentionField`. Conventions (see the
book's notation page): tokens ``X`` of shape ``(n, d)``, one per row; :math:`A = K^\top Q/\sqrt k`;
the score of query :math:`x_i` on key :math:`x_j` is :math:`s_{ij} = \langle A x_i, x_j\rangle`
(``S = X @ A.T @ X.T``); normalised variants normalise over the key index ``j``; a head outputs
:math:`V \sum_j P_{ij} x_j`. Parameters may be constant arrays or callables ``t -> array``.
Score matrices are processed in row blocks of :data:`BLOCK_ELEMENTS` entries, so memory stays
bounded for large ``n``; every normalised variant takes its weights from the one softmax,
:func:`softmax_weights`.

Failure policy (the library's): bad arguments raise ``ValueError``/``TypeError`` naming them;
scores beyond the floating range (tokens of norm ~1e155 in float64) are computed on factors
rescaled by powers of two, so the normalised variants (softmax, hardmax, l2, causal, multi-head)
and the sigmoid return their finite values; an overflow that no rescaling avoids (unnormalised
and linear attention, whose values leave the range) raises ``FloatingPointError``; a
Sinkhorn iteration that does not converge warns (``SinkhornConvergenceWarning``) or, with
``strict=True``, raises ``SinkhornConvergenceError``, a ``FloatingPointError``.
"""

from ._base import AttentionField
from ._composite import VARIANTS, Causal, MultiHead, make_field, with_positions
from ._equivariance import MeasureSymmetry, measure_symmetry
from ._hardmax_limit import HardmaxLimit, hardmax_limit
from ._kernels import BLOCK_ELEMENTS
from ._l2 import L2
from ._sinkhorn import (
    SINKHORN_MAX_ITER,
    Sinkhorn,
    SinkhornConvergenceError,
    SinkhornConvergenceWarning,
    SinkhornPlan,
    sinkhorn_plan,
)
from ._softmax import softmax_weights
from ._variants import Hardmax, Linear, Sigmoid, Softmax, Unnormalised

__all__ = [
    "BLOCK_ELEMENTS",
    "L2",
    "SINKHORN_MAX_ITER",
    "VARIANTS",
    "AttentionField",
    "Causal",
    "Hardmax",
    "HardmaxLimit",
    "Linear",
    "MeasureSymmetry",
    "MultiHead",
    "Sigmoid",
    "Sinkhorn",
    "SinkhornConvergenceError",
    "SinkhornConvergenceWarning",
    "SinkhornPlan",
    "Softmax",
    "Unnormalised",
    "hardmax_limit",
    "make_field",
    "measure_symmetry",
    "sinkhorn_plan",
    "softmax_weights",
    "with_positions",
]
