"""Interpolation data sets: assumptions, random overlapping data, and block counts (private)."""

from __future__ import annotations

from math import comb
from typing import ClassVar

import numpy as np

from .._typing import ArrayLike, FloatArray, IntArray, SeedLike
from .._validation import as_real_array, as_rng, check_int, check_positive
from ._blocks import Transformer, as_sequences
from ._hausdorff import _closest_pair, _unchecked_hausdorff
from ._moves import COINCIDE_RTOL, DISTINCT_RTOL, _distinct

__all__ = [
    "block_count_bound",
    "check_dataset",
    "overlapping_dataset",
    "paper_block_count",
    "resnet_counts",
]


class _InterpolatorCounts:
    """Counts read off a constructed interpolator: blocks, parameters, largest error and the
    paper's block count for its attention (shared by the hardmax and softmax results)."""

    #: Which theorem's count ``paper_bound`` reports: "hardmax" or "softmax".
    attention: ClassVar[str]
    transformer: Transformer
    errors: FloatArray
    m: IntArray

    @property
    def n_blocks(self) -> int:
        """Number of blocks of the constructed network."""
        return self.transformer.n_blocks

    @property
    def n_params(self) -> int:
        """Number of parameters of the constructed network (the book's counting rule)."""
        return self.transformer.n_params

    @property
    def max_error(self) -> float:
        """Largest relative Hausdorff error over the sequences."""
        return float(self.errors.max())

    @property
    def paper_bound(self) -> int:
        """The block count reported for the paper's theorem (see :func:`paper_block_count`)."""
        return paper_block_count(self.m, attention=self.attention)


def paper_block_count(m: ArrayLike, *, attention: str = "hardmax") -> int:
    r"""The block counts reported for the paper's theorems, hardmax and softmax:

    .. math:: L_{\rm hardmax} = 2\sum_{j=1}^N m_j + 2N + 1, \qquad
              L_{\rm softmax} = 2\sum_{j=1}^N m_j + 3N.

    The paper's abstract gives only :math:`O(\sum_j m_j)`; these are the counts reported for its
    Theorem 1.6 (hardmax) and Theorem 1.8 (softmax), not checked against the full text.

    Parameters
    ----------
    m : array_like of int, shape (N,)
        Output lengths :math:`m_j`, one per sequence.
    attention : {"hardmax", "softmax"}
        Which theorem's count.

    Returns
    -------
    int
        :math:`2\sum_j m_j + 2N + 1` or :math:`2\sum_j m_j + 3N`.

    Raises
    ------
    ValueError
        If `m` is not a nonempty 1-D array of nonnegative integers below 2^52, or `attention` is
        neither name.
    TypeError
        If `m` is not real (complex, boolean, string or object).

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the hardmax and softmax results of its abstract).

    Examples
    --------
    Three sequences with :math:`\sum_j m_j = 6`:

    >>> from token_dynamics.interpolation import paper_block_count
    >>> paper_block_count([2, 1, 3]), paper_block_count([2, 1, 3], attention="softmax")
    (19, 21)
    """
    m = _as_lengths(m)
    if attention == "hardmax":
        return 2 * sum(m) + 2 * len(m) + 1
    if attention == "softmax":
        return 2 * sum(m) + 3 * len(m)
    raise ValueError(f"`attention` must be 'hardmax' or 'softmax'; got {attention!r}.")


def resnet_counts(n_tokens: int, d: int, n_sequences: int) -> tuple[int, int]:
    r"""Blocks and parameters of a ResNet interpolating ``N`` flattened sequences.

    A ResNet sees a sequence of ``n`` tokens as one vector of :math:`\mathbb R^{nd}`. Moving one
    data point per residual block with the width-3 hat layer of :func:`hat_move` takes ``N``
    blocks of ``2 * 3 * n d + 3 + 1`` parameters each: the count grows linearly with the input
    length ``n``, while the transformer's does not depend on it.

    .. math:: \text{blocks} = N, \qquad \text{parameters} = N\,(6nd + 4).

    Parameters
    ----------
    n_tokens : int
        Length ``n`` of each sequence.
    d : int
        Dimension of a token.
    n_sequences : int
        Number ``N`` of sequences to interpolate.

    Returns
    -------
    (int, int)
        Number of blocks and number of parameters.

    Raises
    ------
    ValueError
        If an argument is not a positive integer.

    Examples
    --------
    >>> from token_dynamics.interpolation import resnet_counts
    >>> resnet_counts(10, 2, 3)  # 3 * (6 * 20 + 4)
    (3, 372)
    >>> resnet_counts(20, 2, 3)  # twice the length: about twice the parameters
    (3, 732)
    """
    n_tokens, d = check_int(n_tokens, "n_tokens"), check_int(d, "d")
    n_sequences = check_int(n_sequences, "n_sequences")
    D = n_tokens * d
    return n_sequences, n_sequences * (6 * D + 4)


def overlapping_dataset(
    n_sequences: int,
    d: int,
    *,
    pool_size: int = 9,
    max_length: int = 7,
    target_scale: float = 3.0,
    rng: SeedLike = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    r"""Random data set whose sequences share tokens: each input draws ``n_j <= max_length``
    distinct tokens from one Gaussian pool of ``pool_size`` points (inputs distinct as sets);
    each target has ``m_j <= n_j`` Gaussian points of standard deviation ``target_scale``.

    Parameters
    ----------
    n_sequences : int
        Number ``N`` of sequences.
    d : int
        Dimension of the tokens.
    pool_size : int, keyword-only
        Number of distinct tokens the inputs draw from; with ``max_length`` it allows
        :math:`\sum_{k=1}^{\min(\text{max\_length}, \text{pool\_size})}
        \binom{\text{pool\_size}}{k}` distinct input sets.
    max_length : int, keyword-only
        Largest input length ``n_j``.
    target_scale : float, keyword-only
        Standard deviation of the target points.
    rng : Generator, int or None, keyword-only
        Source of the pool, the choices and the targets.

    Returns
    -------
    (list of ndarray (n_j, d), list of ndarray (m_j, d))
        Inputs and targets, which satisfy :func:`check_dataset` (almost surely).

    Raises
    ------
    ValueError
        If an integer argument is not positive, `target_scale` is not positive, or `pool_size`
        and `max_length` allow fewer distinct input sets than `n_sequences`.
    TypeError
        If `rng` is not a Generator, a seed or None.

    Examples
    --------
    >>> from token_dynamics.interpolation import check_dataset, overlapping_dataset
    >>> X, Y = overlapping_dataset(3, 2, rng=0)
    >>> len(X), all(y.shape[0] <= x.shape[0] for x, y in zip(X, Y))
    (3, True)
    >>> len(check_dataset(X, Y)[0])  # the assumptions of the construction hold
    3
    """
    N = check_int(n_sequences, "n_sequences")
    d = check_int(d, "d")
    pool_size = check_int(pool_size, "pool_size")
    max_length = check_int(max_length, "max_length")
    target_scale = check_positive(target_scale, "target_scale")
    # the distinct input sets: nonempty subsets of the pool of at most `max_length` tokens
    available = sum(comb(pool_size, k) for k in range(1, min(max_length, pool_size) + 1))
    if N > available:
        raise ValueError(
            f"`pool_size` = {pool_size} and `max_length` = {max_length} allow {available} "
            f"distinct input sets, fewer than `n_sequences` = {N}; raise `pool_size` or "
            "`max_length`."
        )
    rng = as_rng(rng)
    pool = rng.normal(size=(pool_size, d))
    X: list[np.ndarray] = []
    Y: list[np.ndarray] = []
    seen: set[frozenset[int]] = set()
    while len(X) < N:
        n = int(rng.integers(1, min(max_length, pool_size) + 1))
        idx = rng.choice(pool_size, size=n, replace=False)
        key = frozenset(idx.tolist())
        if key in seen:
            continue
        seen.add(key)
        X.append(pool[idx])
        Y.append(target_scale * rng.normal(size=(int(rng.integers(1, n + 1)), d)))
    return X, Y


#: Largest size (largest absolute entry) of the inputs or of the targets, and the inverse of the
#: smallest nonzero one: the constructions bring each to unit size by a power of two, in the
#: first and the last layer (``_blocks.UNIT_SIZES``), whose weights then carry that power times
#: weights of up to the inverse of the points' relative gaps (1e6 and more): 2^500 (3e150)
#: leaves them hundreds of orders of magnitude inside the float64 range, either way.
SIZE_LIMIT = 2.0**500


def check_dataset(
    inputs: ArrayLike, targets: ArrayLike
) -> tuple[list[FloatArray], list[FloatArray]]:
    """Validate an interpolation dataset and name the violated assumption if any.

    Assumptions: ``d >= 2``; tokens pairwise distinct within each input sequence; input
    sequences pairwise distinct as sets; targets pairwise distinct within each output sequence
    and ``m_j <= n_j``; distinct points at least ``1e-6`` apart relative to their own data (the
    largest entry of the inputs for input tokens, of the targets for targets); the largest
    entries of the inputs and of the targets, unless zero, within ``[2^-500, 2^500]`` (about
    3e-151 to 3e150; the two may differ by any factor in that range).

    Parameters
    ----------
    inputs : list of array_like, shapes (n_j, d)
        Input sequences.
    targets : list of array_like, shapes (m_j, d)
        Target sets, one per input.

    Returns
    -------
    (list of ndarray (n_j, d), list of ndarray (m_j, d))
        The validated float64 inputs and targets.

    Raises
    ------
    ValueError
        Naming the assumption violated and how to restore it.
    TypeError
        If `inputs` or `targets` is not a non-empty list of real arrays.

    References
    ----------
    A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
    arXiv:2502.02270 (the assumptions of its abstract: d >= 2, outputs no longer than the
    inputs; the distinctness hypotheses are those reported for its Theorem 1.6).

    Examples
    --------
    >>> from token_dynamics.interpolation import check_dataset
    >>> X, Y = check_dataset([[[0.0, 0.0], [1.0, 0.0]]], [[[1.0, 1.0]]])
    >>> X[0].shape, Y[0].shape
    ((2, 2), (1, 2))
    >>> check_dataset([[[0.0, 0.0], [0.0, 0.0]]], [[[1.0, 1.0]]])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: assumption violated: tokens 0 and 1 of `inputs[0]` coincide; ...
    """
    X = as_sequences(inputs, "inputs")
    Y = as_sequences(targets, "targets", d=X[0].shape[1])
    N, d = len(X), X[0].shape[1]
    if len(Y) != N:
        raise ValueError(f"got {N} `inputs` but {len(Y)} `targets`; give one target per input.")
    if d < 2:
        raise ValueError(
            "assumption violated: the construction needs tokens of dimension d >= 2; "
            f"got d = {d}. Embed the data in R^2 (append a zero coordinate)."
        )
    sizes = {}
    for name, seqs in (("inputs", X), ("targets", Y)):
        size = max(float(np.abs(Z).max()) for Z in seqs)
        if not (size == 0.0 or 1.0 / SIZE_LIMIT <= size <= SIZE_LIMIT):
            raise ValueError(
                f"the largest entry of `{name}` is {size:.3g}, outside [2^-500, 2^500] (about "
                "3e-151 to 3e150): the construction brings the data to unit size by a power of "
                "two, and its layers' weights (up to the inverse of the points' relative gaps, "
                f"1e6) must stay in the float64 range at the data's size. Rescale `{name}`."
            )
        sizes[name] = size
        tol = DISTINCT_RTOL * size  # each at its own size: inputs and targets are moved apart
        for j, Z in enumerate(seqs):
            dist, i, k = _closest_pair(Z)
            if dist <= tol:
                raise ValueError(
                    f"assumption violated: tokens {i} and {k} of `{name}[{j}]` coincide; "
                    "tokens must be pairwise distinct within a sequence (remove duplicates)."
                )
    for j in range(N):
        if Y[j].shape[0] > X[j].shape[0]:
            raise ValueError(
                f"assumption violated: `targets[{j}]` has {Y[j].shape[0]} outputs but "
                f"`inputs[{j}]` only {X[j].shape[0]} distinct tokens; need m_j <= n_j."
            )
    allpts = np.vstack(X)
    tol = DISTINCT_RTOL * sizes["inputs"]
    distinct = _distinct(allpts, COINCIDE_RTOL * sizes["inputs"])
    if _closest_pair(distinct)[0] <= tol:
        raise ValueError(
            "assumption violated: two input tokens of different sequences are distinct but "
            f"closer than {tol:.3g} (1e-6 relative); make them equal or further apart."
        )
    for j in range(N):
        for k in range(j):
            if X[j].shape[0] == X[k].shape[0] and _unchecked_hausdorff(X[j], X[k]) <= tol:
                raise ValueError(
                    f"assumption violated: `inputs[{k}]` and `inputs[{j}]` are the same set of "
                    "tokens; input sequences must be pairwise distinct as sets."
                )
    return X, Y


def block_count_bound(m: ArrayLike) -> int:
    r"""The book's bound on the blocks of the hardmax interpolator: ``2 sum(m) + N - 1``.

    The construction uses :math:`L = S + 2\sum_j m_j` blocks with :math:`S \le N - 1`
    separation blocks (proposition ``interp-prop-counts``), so

    .. math:: L \le 2\sum_{j=1}^N m_j + N - 1,

    below the count :func:`paper_block_count` reported for the paper's hardmax theorem.

    Parameters
    ----------
    m : array_like of int, shape (N,)
        Output lengths :math:`m_j`, one per sequence.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If `m` is not a 1-D array of nonnegative integers, or is empty.

    Examples
    --------
    >>> from token_dynamics.interpolation import block_count_bound, paper_block_count
    >>> block_count_bound([2, 1, 3]), paper_block_count([2, 1, 3])
    (14, 19)
    """
    m = _as_lengths(m)
    return 2 * sum(m) + len(m) - 1


def _as_lengths(m: ArrayLike) -> list[int]:
    """The output lengths ``m_j`` of the block counts, as Python integers (exact sums)."""
    m = as_real_array(m, "m")
    # lengths beyond 2^52 are not integers in float64 any more
    if m.ndim != 1 or m.size == 0 or np.any(m < 0) or np.any(m != np.round(m)) or np.any(m > 2**52):
        raise ValueError(
            f"`m` must be a nonempty 1-D array of nonnegative integers below 2^52; got {m!r}."
        )
    return [int(v) for v in m]
