r"""The interaction energy of a Gaussian estimated from samples, to check its closed form."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._guards import float_guard
from .._typing import ArrayLike, SeedLike
from .._validation import as_covariance, as_rng, as_square, as_vector, check_int

if TYPE_CHECKING:
    from ..stochastic import MCEstimate

__all__ = ["sampled_gaussian_energy"]


@float_guard("the sampled interaction energy", "scale `A` or `cov` down")
def sampled_gaussian_energy(
    A: ArrayLike, mean: ArrayLike, cov: ArrayLike, n: int, *, rng: SeedLike = None
) -> MCEstimate:
    r"""Monte-Carlo estimate of the interaction energy of :math:`\mathcal N(\alpha, \Sigma)`.

    .. math::

        \mathcal E = \tfrac12\,\mathbb E\, e^{\langle Ax, y\rangle}
        \approx \frac1{2n}\sum_{k=1}^n e^{\langle Ax_k, y_k\rangle},
        \qquad x_k, y_k \sim \mathcal N(\alpha, \Sigma) \text{ independent},

    with its standard error; it checks :func:`gaussian_energy` where that energy is finite
    with a finite variance (:math:`\tfrac14\mathbb E e^{2\langle Ax, y\rangle} < \infty`).

    Parameters
    ----------
    A : array_like, shape (d, d)
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
        Symmetric positive semidefinite.
    n : int
        Number of independent pairs, at least 2.
    rng : Generator, int or None, keyword-only
        Draws ``x`` (all ``n``), then ``y``.

    Returns
    -------
    token_dynamics.stochastic.MCEstimate
        ``mean`` (the estimate), ``stderr`` and ``samples`` (``n``).

    Raises
    ------
    ValueError
        If an argument is invalid.
    FloatingPointError
        If a sample overflows (the energy, or its variance, is infinite at this scale).

    References
    ----------
    Castin et al., arXiv:2501.18322 (energy on Gaussians).

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.gradient_flow import gaussian_energy, sampled_gaussian_energy
    >>> A = np.array([[0.3, -0.4], [0.1, 0.5]])
    >>> est = sampled_gaussian_energy(A, [0.4, -0.3], 0.3 * np.eye(2), 100_000, rng=0)
    >>> closed = gaussian_energy(A=A, mean=[0.4, -0.3], cov=0.3 * np.eye(2)).value
    >>> bool(abs(est.mean - closed) < 4 * est.stderr)
    True
    """
    from .. import sampling, stochastic

    m = as_vector(mean, "mean")
    S = as_covariance(cov, "cov", d=m.shape[0])
    A = as_square(A, "A", d=m.shape[0])
    n = check_int(n, "n", minimum=2)
    gen = as_rng(rng)
    x = sampling.gaussian_cloud(n, m, S, rng=gen)
    y = sampling.gaussian_cloud(n, m, S, rng=gen)
    samples = 0.5 * np.exp(np.einsum("ij,jk,ik->i", y, A, x))  # (1/2) e^{<A x_k, y_k>}
    if not np.all(np.isfinite(samples)):  # an overflow inside einsum sets no numpy flag
        raise FloatingPointError(
            "the sampled interaction energy leaves the float64 range (overflow); "
            "scale `A` or `cov` down."
        )
    return stochastic.mc_estimate(samples)
