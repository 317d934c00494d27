"""Moment ODE of multi-head attention: the heads' moment ODEs, each through its output matrix."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._typing import ArrayLike, FloatArray, ParameterLike
from .._validation import as_matrix
from ._equations import MomentEquations, _square_parameter

__all__ = ["MultiHeadMoments"]


@dataclass(frozen=True)
class MultiHeadMoments(MomentEquations):
    r"""Moment ODE of a sum of heads, ``Gamma = sum_h W_h Gamma^(h)``.

    Each head is affine on Gaussians, so the sum is: its ``(c, M)`` and the factor drift add,

    .. math:: \Gamma(x) = \sum_h W_h\big(c_h + M_h x\big).

    Parameters
    ----------
    heads : sequence of MomentEquations
    W : None or sequence of (d, d) arrays, one output projection per head (identity if None).

    Examples
    --------
    >>> from token_dynamics.gaussian import MultiHeadMoments, SoftmaxMoments
    >>> h = SoftmaxMoments(A=[[0.5]], V=[[1.0]])
    >>> two = MultiHeadMoments(heads=(h, h))
    >>> float(two.rhs(0.0, [0.0], [[1.0]])[1][0, 0])  # twice 2 v a s^2
    2.0
    """

    heads: Sequence[MomentEquations]
    W: Sequence[ParameterLike] | None = None
    _W: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        heads = tuple(self.heads)
        if not heads:
            raise ValueError("`heads` must contain at least one head.")
        for i, h in enumerate(heads):
            if not isinstance(h, MomentEquations):
                raise ValueError(
                    f"`heads[{i}]` must be a moment-equation object (SoftmaxMoments, ...); got "
                    f"{type(h).__name__}. Convert an attention field with moment_equations()."
                )
        object.__setattr__(self, "heads", heads)
        # the heads' output matrices, as callables t -> (d, d), or None for no projection
        Ws: tuple[Callable[[float], FloatArray] | None, ...]
        if self.W is None:
            Ws = (None,) * len(heads)
        else:
            given = tuple(self.W)
            if len(given) != len(heads):
                raise ValueError(
                    f"`W` must hold one matrix per head ({len(heads)}); got {len(given)}."
                )
            Ws = tuple(_square_parameter(w, f"W[{i}]") for i, w in enumerate(given))
        object.__setattr__(self, "_W", Ws)

    def _parameters(self, t):
        out = {}
        for i, h in enumerate(self.heads):
            out.update({f"heads[{i}].{k}": v for k, v in h._parameters(t).items()})
            if self._W[i] is not None:
                out[f"W[{i}]"] = self._W[i](t)
        return out

    def _combine(self, t, parts):
        total0 = total1 = 0.0
        for Wf, (a, b) in zip(self._W, parts, strict=True):
            if Wf is not None:
                W = Wf(t)
                a, b = W @ a, W @ b
            total0, total1 = total0 + a, total1 + b
        return total0, total1

    def _affine(self, t, alpha, Sigma):
        return self._combine(t, [h._affine(t, alpha, Sigma) for h in self.heads])

    def _terms(self, t, alpha, F):
        return self._combine(t, [h._terms(t, alpha, F) for h in self.heads])


def _split_output_projection(
    W: Sequence[ParameterLike] | ArrayLike | None, H: int
) -> tuple[ParameterLike, ...] | None:
    """Accept ``None``, a sequence of ``H`` square matrices, or one ``(d, H d)`` block matrix."""
    if W is None:
        return None
    if isinstance(W, list | tuple):
        return tuple(W)
    W = as_matrix(W, "W")
    d = W.shape[0]
    if W.shape[1] == d:  # one shared projection applied to every head
        return (W,) * H
    if W.shape[1] != H * d:
        raise ValueError(f"`W` must be (d, H d) = ({d}, {H * d}); got {W.shape}.")
    return tuple(W[:, h * d : (h + 1) * d] for h in range(H))
