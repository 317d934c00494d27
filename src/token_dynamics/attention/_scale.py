"""Scores beyond the floating range: their factors rescaled by powers of two (private).

Tokens of norm ~1e155 have scores ~1e310, beyond float64 (~3e38 in float32 for norms ~1e19),
although the softmax and hardmax weights of those scores, and the sigmoid's, are finite. The
kernels compute such scores on factors divided by powers of two (exact) and carry the exponent
of the scale to their transforms, which restore it after their row shift
(``_softmax.softmax_transform``, ``_hardmax.tie_threshold``, ``_sigmoid.sigmoid_transform``).
"""

from __future__ import annotations

import numpy as np

from .._linalg import power_of_two_scale

__all__ = [
    "SCORE_HEADROOM",
    "rescale_scores",
]

#: Headroom kept below the largest float of the dtype by the scores, in powers of two: a score
#: bound within ``max / 2**SCORE_HEADROOM`` leaves room for the sums of a few thousand terms of
#: that size and for the squared row norms of the shift bounds; beyond it the factors are
#: rescaled (:func:`rescale_scores`).
SCORE_HEADROOM = 16


def _max_abs(M: np.ndarray) -> float:
    """``max |M|`` (0 for an empty array, nan if any entry is) without an array of ``|M|``."""
    return float(np.maximum(np.max(M, initial=0.0), -np.min(M, initial=0.0)))


def rescale_scores(
    F: np.ndarray, G: np.ndarray, bias: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    """Factors of the scores ``F G^T + bias``, rescaled by powers of two when those could
    overflow: ``(F / 2**a, G / 2**b, bias / 2**(a + b), a + b)``, so that the true scores are
    the rescaled ones times ``2**e``, ``e = a + b``; unchanged with ``e = 0`` otherwise.

    The test costs O(n d): the Cauchy-Schwarz bound ``k max|F| max|G| + max|bias|`` on the
    scores and ``k max|F|^2``, ``k max|G|^2`` on the squared row norms, against the largest
    float over ``2**SCORE_HEADROOM``. Division by a power of two is exact.
    """
    k = max(F.shape[1], 1)
    limit = float(np.finfo(F.dtype).max) * 2.0**-SCORE_HEADROOM
    f, g = _max_abs(F), _max_abs(G)
    b = 0.0 if bias is None else _max_abs(bias)
    with np.errstate(over="ignore"):
        fits = k * f * g + b <= limit and k * f * f <= limit and k * g * g <= limit
    if fits:
        return F, G, bias, 0
    a = int(np.frexp(float(power_of_two_scale(F)))[1]) - 1
    c = int(np.frexp(float(power_of_two_scale(G)))[1]) - 1
    F, G = np.ldexp(F, -a).astype(F.dtype, copy=False), np.ldexp(G, -c).astype(G.dtype, copy=False)
    if bias is not None:
        bias = np.ldexp(bias, -(a + c)).astype(bias.dtype, copy=False)
    return F, G, bias, a + c
