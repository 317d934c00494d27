r"""Two symmetries of an unmasked attention field: permuting the tokens permutes the velocity,
and repeating every token leaves it unchanged (it depends on the empirical measure only)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, SeedLike
from .._validation import as_rng, as_tokens, check_instance
from ._base import AttentionField

__all__ = ["MeasureSymmetry", "measure_symmetry"]


@dataclass(frozen=True)
class MeasureSymmetry:
    r"""How far a field is from depending on the tokens through their empirical measure only.

    Attributes
    ----------
    permutation_error : float
        :math:`\max_i |\Gamma(x_{\sigma(1)}, \dots, x_{\sigma(n)})_i - \Gamma(X)_{\sigma(i)}|`.
    duplication_error : float
        :math:`\max_{i \le n} |\Gamma(X, X)_i - \Gamma(X)_i|`: every token repeated once.

    Examples
    --------
    Returned by :func:`measure_symmetry`, whose example shows it.
    """

    permutation_error: float
    duplication_error: float


@float_guard("the velocities", "scale `X` down")
def measure_symmetry(
    field: AttentionField, X: ArrayLike, *, rng: SeedLike = None
) -> MeasureSymmetry:
    r"""Permutation and duplication errors of the velocity of an attention field.

    For an unmasked variant the velocity of token :math:`i` is :math:`G(x_i, \mu^n)`, a
    function of the token and of the empirical measure :math:`\mu^n`, so for every
    permutation :math:`\sigma`

    .. math::

        \Gamma(x_{\sigma(1)}, \dots, x_{\sigma(n)})_i = \Gamma(x_1, \dots, x_n)_{\sigma(i)},

    and repeating every token (which leaves :math:`\mu^n` unchanged) leaves the velocities
    unchanged. Both errors are rounding for the exact variants and the stopping tolerance for
    Sinkhorn.

    Parameters
    ----------
    field : AttentionField
        The velocity field.
    X : array_like, shape (n, d)
        Tokens.
    rng : Generator, int or None, keyword-only
        Draws the permutation :math:`\sigma`.

    Returns
    -------
    MeasureSymmetry

    Raises
    ------
    TypeError
        If `field` is not an attention field.
    ValueError
        If `X` has the wrong shape.
    FloatingPointError
        If a velocity leaves the float64 range.

    Examples
    --------
    >>> import numpy as np
    >>> import token_dynamics as td
    >>> from token_dynamics.attention import measure_symmetry
    >>> X = td.uniform_sphere(8, 2, rng=0)
    >>> sym = measure_symmetry(td.Softmax(np.eye(2), np.eye(2)), X, rng=1)
    >>> sym.permutation_error < 1e-14, sym.duplication_error < 1e-14
    (True, True)
    """
    check_instance(field, AttentionField, "field", "Build one with token_dynamics.Softmax(A, V).")
    Xa = as_tokens(X, "X")
    n = Xa.shape[0]
    perm = as_rng(rng).permutation(n)
    v = field.velocity(Xa)
    permuted = float(np.abs(field.velocity(Xa[perm]) - v[perm]).max())
    duplicated = float(np.abs(field.velocity(np.vstack([Xa, Xa]))[:n] - v).max())
    return MeasureSymmetry(permutation_error=permuted, duplication_error=duplicated)
