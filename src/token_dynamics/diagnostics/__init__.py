r"""Diagnostics of token clouds: moments, diameter, interaction energy, clusters, rank, and the
log-log fit of a convergence rate.

Functions take tokens ``X`` of shape ``(n, d)`` and optional probability ``weights`` of shape
``(n,)`` (uniform if ``None``). Pairwise quantities are computed in row blocks, so memory stays
bounded for large ``n``.
"""

from __future__ import annotations

from ._energy import interaction_energy
from ._fits import PowerLawFit, fit_power_law, numerical_rank
from ._moments import empirical_covariance, empirical_mean, excess_kurtosis
from ._spread import cluster_count, diameter, min_inner_product

__all__ = [
    "PowerLawFit",
    "cluster_count",
    "diameter",
    "empirical_covariance",
    "empirical_mean",
    "excess_kurtosis",
    "fit_power_law",
    "interaction_energy",
    "min_inner_product",
    "numerical_rank",
]
