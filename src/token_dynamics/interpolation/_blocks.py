"""Transformer blocks and their composition, applied sequence by sequence (private;
re-exported by :mod:`token_dynamics.interpolation`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import as_tokens, check_int
from ._layers import FeedForward, SelfAttention

__all__ = ["Transformer", "TransformerBlock", "as_sequences"]


@dataclass(frozen=True, eq=False)
class TransformerBlock:
    r"""One block :math:`\mathrm{TB} = \mathrm{SA}\circ\mathrm{FF}` (feed-forward first).

    .. math:: \mathrm{TB}(X) = \mathrm{SA}\big(\mathrm{FF}(X)\big),

    applied to a sequence ``X`` of shape ``(n, d)``; its parameter count is that of its two
    layers.

    Parameters
    ----------
    ff : FeedForward
        The feed-forward layer, applied first.
    sa : SelfAttention
        The self-attention layer, in the same dimension.

    Raises
    ------
    TypeError
        If `ff` is not a :class:`FeedForward` or `sa` not a :class:`SelfAttention`.
    ValueError
        If the two layers act on different dimensions.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the block; the authors' code applies attention first, the book
    follows the paper's figures, feed-forward first).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import FeedForward, SelfAttention, TransformerBlock
    >>> ff = FeedForward(U=np.zeros((1, 2)), b=[1.0], W=[[1.0], [0.0]])  # translate by e_1
    >>> block = TransformerBlock(ff, SelfAttention())  # identity attention
    >>> block(np.zeros((1, 2))).tolist()
    [[1.0, 0.0]]
    """

    ff: FeedForward
    sa: SelfAttention

    def __post_init__(self) -> None:
        if not isinstance(self.ff, FeedForward) or not isinstance(self.sa, SelfAttention):
            raise TypeError("`ff` must be a FeedForward and `sa` a SelfAttention.")
        if self.sa.dim is not None and self.sa.dim != self.ff.dim:
            raise ValueError(
                f"`ff` acts on d = {self.ff.dim} but `sa` on d = {self.sa.dim}; use one dimension."
            )

    @property
    def n_params(self) -> int:
        return self.ff.n_params + self.sa.n_params

    def __call__(self, X: ArrayLike) -> np.ndarray:
        """Apply the block to one sequence ``X`` of shape ``(n, d)`` (returns a new array)."""
        return self._apply(as_tokens(X, "X", d=self.ff.dim))

    def _apply(self, X: FloatArray) -> np.ndarray:
        """The block on a validated sequence (the constructions' inner loops)."""
        return self.sa._apply(self.ff._apply(X))


def as_sequences(
    sequences: ArrayLike | Sequence[ArrayLike], name: str = "inputs", *, d: int | None = None
) -> list[FloatArray]:
    """Validate a list of sequences, each of shape ``(n_j, d)`` with one common ``d``.

    Parameters
    ----------
    sequences : list of array_like, shapes (n_j, d), or array_like, shape (N, n, d)
        The sequences; their lengths may differ, their dimension may not.
    name : str, default "inputs"
        The argument's name, for the error messages.
    d : int, optional, keyword-only
        The dimension the sequences must have.

    Returns
    -------
    list of ndarray, shapes (n_j, d)
        float64 copies, one per sequence.

    Raises
    ------
    TypeError
        If `sequences` is not a non-empty list of arrays.
    ValueError
        If a sequence is not ``(n_j, d)`` or the dimensions differ.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import as_sequences
    >>> [s.shape for s in as_sequences([np.zeros((3, 2)), np.ones((1, 2))])]
    [(3, 2), (1, 2)]
    """
    if isinstance(sequences, np.ndarray) and sequences.ndim == 3:
        sequences = list(sequences)
    if not isinstance(sequences, Sequence) or isinstance(sequences, str) or len(sequences) == 0:
        raise TypeError(
            f"`{name}` must be a non-empty list of arrays of shape (n_j, d), one per sequence."
        )
    if d is not None:
        d = check_int(d, "d")
    out = [as_tokens(X, f"{name}[{j}]", d=d) for j, X in enumerate(sequences)]
    dims = {X.shape[1] for X in out}
    if len(dims) > 1:
        raise ValueError(f"every sequence of `{name}` must have the same d; got {sorted(dims)}.")
    return out


def _magnitude(*groups: Iterable[FloatArray]) -> float:
    """Largest absolute entry of the given sequences, and at least 1: the scale against which the
    construction's relative tolerances are measured."""
    return max([1.0, *(float(np.abs(Z).max()) for group in groups for Z in group)])


#: Sizes (largest absolute entry) of the inputs, or of the targets, that the constructions take
#: as they are: their constants (margins of 1, leaders at ``2 + 10 sqrt(d)`` beyond the data)
#: are of unit size, and the rounding of a move is relative to the largest point it passes, so
#: data of another size is first brought into ``[1, 2)`` by a power of two (exact, see
#: :func:`_unit_exponent`). The range covers the book's data (inputs of standard normal
#: entries, targets of three times that).
UNIT_SIZES = (2.0**-3, 2.0**4)


def _unit_exponent(group: Iterable[FloatArray]) -> int:
    """``e`` such that the sequences divided by ``2**e`` have a size in :data:`UNIT_SIZES`: 0 when
    theirs already is (or is 0), else the one that brings it into ``[1, 2)``."""
    size = max(float(np.abs(Z).max()) for Z in group)
    if size == 0.0 or UNIT_SIZES[0] <= size <= UNIT_SIZES[1]:
        return 0
    return int(np.frexp(size)[1]) - 1


def _scaled_ends(ff: FeedForward, before: int, after: int) -> FeedForward:
    """``x -> 2**after * ff(2**before * x)``, one layer of the same width: the input weights and
    the skip weight take ``2**before``, the output weights and the skip weight ``2**after``
    (powers of two: the layer's values are those of ``ff`` exactly, rescaled)."""
    if before == 0 and after == 0:
        return ff
    return FeedForward(
        U=np.ldexp(ff.U, before),
        b=ff.b,
        W=np.ldexp(ff.W, after),
        eta=float(np.ldexp(ff.eta, before + after)),
    )


@dataclass(frozen=True, eq=False)
class Transformer:
    r"""A composition of transformer blocks, applied to each sequence separately:

    .. math:: \mathrm T = \mathrm{TB}^L\circ\cdots\circ\mathrm{TB}^1, \qquad
              \mathrm T(X^1, \dots, X^N) = \big(\mathrm T(X^1), \dots, \mathrm T(X^N)\big).

    Its parameter count is the sum of its blocks'; ``first + second`` composes two networks.

    Parameters
    ----------
    blocks : sequence of TransformerBlock
        The blocks, in the order they are applied; all in one dimension.

    Raises
    ------
    TypeError
        If an entry of `blocks` is not a :class:`TransformerBlock`.
    ValueError
        If the blocks act on different dimensions.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the hardmax and softmax networks of its abstract; the
    constructions here are derived in this book).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.interpolation import (
    ...     FeedForward, SelfAttention, Transformer, TransformerBlock)
    >>> ff = FeedForward(U=np.zeros((1, 2)), b=[1.0], W=[[1.0], [0.0]])
    >>> T = Transformer([TransformerBlock(ff, SelfAttention())] * 3)
    >>> T([np.zeros((2, 2))])[0].tolist()
    [[3.0, 0.0], [3.0, 0.0]]
    >>> T.n_blocks, T.n_params, T.max_width
    (3, 21, 1)
    """

    blocks: tuple[TransformerBlock, ...]

    def __post_init__(self) -> None:
        blocks = tuple(self.blocks)
        if not all(isinstance(b, TransformerBlock) for b in blocks):
            raise TypeError("`blocks` must be a sequence of TransformerBlock.")
        dims = {b.ff.dim for b in blocks}
        if len(dims) > 1:
            raise ValueError(f"all blocks must act on the same dimension; got {sorted(dims)}.")
        object.__setattr__(self, "blocks", blocks)

    @property
    def dim(self) -> int | None:
        return self.blocks[0].ff.dim if self.blocks else None

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    @property
    def n_params(self) -> int:
        return int(sum(b.n_params for b in self.blocks))

    @property
    def max_width(self) -> int:
        return max((b.ff.width for b in self.blocks), default=0)

    def __call__(self, sequences: ArrayLike | Sequence[ArrayLike]) -> list[FloatArray]:
        """Outputs ``T(X^j)``, one array ``(n_j, d)`` per input sequence."""
        out = as_sequences(sequences, d=self.dim)
        for block in self.blocks:
            out = [block._apply(X) for X in out]
        return out

    def layer_states(self, sequences: ArrayLike | Sequence[ArrayLike]) -> list[list[FloatArray]]:
        """Token sets after every layer: ``2 L + 1`` states (input, FF1, SA1, FF2, ...)."""
        state = as_sequences(sequences, d=self.dim)
        states = [state]
        for block in self.blocks:
            state = [block.ff._apply(X) for X in state]
            states.append(state)
            state = [block.sa._apply(X) for X in state]
            states.append(state)
        return states

    def with_attention(self, attention: str, tau: float | None = None) -> Transformer:
        """The same network with every attention layer switched to hardmax or softmax(tau)."""
        return Transformer(
            tuple(replace(b, sa=b.sa.with_attention(attention, tau)) for b in self.blocks)
        )

    def __add__(self, other: Transformer) -> Transformer:
        """Composition: ``first + second`` applies ``first`` and then ``second``."""
        return Transformer(self.blocks + other.blocks)
