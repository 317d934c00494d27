r"""Initial token clouds: Gaussian clouds, uniform points on the sphere, Gaussian mixtures.

Every function takes a keyword-only ``rng`` (a :class:`numpy.random.Generator`, a seed or
``None``) and returns float64 tokens of shape ``(n, d)``.
"""

from __future__ import annotations

import numpy as np

from ._linalg import psd_factor
from ._typing import ArrayLike, SeedLike
from ._validation import (
    as_covariance,
    as_matrix,
    as_real_array,
    as_rng,
    as_vector,
    as_weights,
    check_int,
)

__all__ = ["gaussian_cloud", "gaussian_mixture", "uniform_sphere"]


def gaussian_cloud(n: int, mean: ArrayLike, cov: ArrayLike, *, rng: SeedLike = None) -> np.ndarray:
    r"""Draw ``n`` i.i.d. tokens from :math:`\mathcal N(m, \Sigma)`.

    Parameters
    ----------
    n : int
        Number of tokens.
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
        Symmetric positive semidefinite covariance (degenerate allowed).
    rng : Generator, int or None

    Returns
    -------
    ndarray, shape (n, d)

    Raises
    ------
    ValueError
        If `n` is not a positive integer or `cov` is not a ``(d, d)`` covariance matching `mean`.
    TypeError
        If an array argument is not real, or `rng` is not a Generator, a seed or None.

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025 (Gaussian initial
    measures).

    Examples
    --------
    >>> from token_dynamics.sampling import gaussian_cloud
    >>> X = gaussian_cloud(1000, [1.0, -1.0], [[1.0, 0.0], [0.0, 0.25]], rng=0)
    >>> X.shape, bool(abs(X[:, 0].mean() - 1.0) < 0.1)
    ((1000, 2), True)
    """
    n = check_int(n, "n")
    m = as_vector(mean, "mean")
    L = psd_factor(as_covariance(cov, "cov", d=m.size))
    return m + as_rng(rng).standard_normal((n, m.size)) @ L.T


def uniform_sphere(n: int, d: int, *, rng: SeedLike = None) -> np.ndarray:
    r"""Draw ``n`` tokens uniformly on the unit sphere :math:`\mathbb S^{d-1}\subset\mathbb R^d`.

    Normalised standard Gaussian vectors (the Gaussian is rotation invariant).

    Parameters
    ----------
    n : int
    d : int
        Ambient dimension (``d = 2``: the circle).
    rng : Generator, int or None

    Returns
    -------
    ndarray, shape (n, d)
        Rows of norm one.

    Raises
    ------
    ValueError
        If `n` or `d` is not a positive integer.
    TypeError
        If `rng` is not a Generator, a seed or None.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, arXiv:2312.10794, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from token_dynamics.sampling import uniform_sphere
    >>> X = uniform_sphere(5, 3, rng=1)
    >>> np.allclose(np.linalg.norm(X, axis=1), 1.0)
    True
    """
    n = check_int(n, "n")
    d = check_int(d, "d")
    gen = as_rng(rng)
    Z = gen.standard_normal((n, d))
    norms = np.linalg.norm(Z, axis=1)
    while np.any(norms == 0):  # probability zero; redraw to stay exact
        bad = norms == 0
        Z[bad] = gen.standard_normal((int(bad.sum()), d))
        norms = np.linalg.norm(Z, axis=1)
    return Z / norms[:, None]


def gaussian_mixture(
    n: int,
    means: ArrayLike,
    covs: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    rng: SeedLike = None,
) -> np.ndarray:
    r"""Draw ``n`` tokens from the mixture :math:`\sum_k p_k \mathcal N(m_k, \Sigma_k)`.

    Components are drawn i.i.d. with probabilities ``weights``, so the counts are multinomial;
    tokens are returned in random order.

    Parameters
    ----------
    n : int
    means : array_like, shape (K, d)
    covs : array_like, shape (K, d, d) or (d, d)
        One covariance per component, or one shared by all.
    weights : array_like, shape (K,), optional
        Mixture probabilities; uniform if ``None``.
    rng : Generator, int or None

    Returns
    -------
    ndarray, shape (n, d)

    Raises
    ------
    ValueError
        If `n` is not a positive integer, `covs` are not covariances matching `means` or `weights`
        are not probability weights over the components.
    TypeError
        If an array argument is not real, or `rng` is not a Generator, a seed or None.

    References
    ----------
    V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322, 2025.

    Examples
    --------
    >>> from token_dynamics.sampling import gaussian_mixture
    >>> X = gaussian_mixture(6, [[-5.0, 0.0], [5.0, 0.0]], [[0.01, 0.0], [0.0, 0.01]], rng=0)
    >>> X.shape
    (6, 2)
    """
    n = check_int(n, "n")
    M = as_matrix(means, "means")
    K, d = M.shape
    C = as_real_array(covs, "covs")
    if np.ndim(C) == 2:
        factors = [psd_factor(as_covariance(C, "covs", d=d))] * K
    elif np.ndim(C) == 3 and np.shape(C)[0] == K:
        factors = [psd_factor(as_covariance(C[k], f"covs[{k}]", d=d)) for k in range(K)]
    else:
        raise ValueError(
            f"`covs` must have shape ({K}, {d}, {d}) or ({d}, {d}); got {np.shape(C)}."
        )
    p = as_weights(weights, K)
    gen = as_rng(rng)
    labels = gen.choice(K, size=n, p=p)
    Z = gen.standard_normal((n, d))
    X = np.empty((n, d))
    for k in range(K):
        sel = labels == k
        X[sel] = M[k] + Z[sel] @ factors[k].T
    return X
