r"""Wasserstein distances between token distributions (the only module that calls POT).

A cloud of tokens ``X`` of shape ``(n, d)`` with weights ``(n,)`` is the discrete measure
:math:`\mu = \sum_i w_i \delta_{x_i}`. This module measures how far apart two such measures
are:

- :func:`wasserstein2` -- :math:`W_2`, exact (network simplex, ``ot.emd2``; sorting in 1-D) or
  entropic (log-stabilised Sinkhorn with epsilon scaling), optionally for a twisted ground cost
  :math:`(x-y)^\top M (x-y)`;
- :func:`wasserstein1` -- :math:`W_1` for the Euclidean ground cost;
- :func:`w2_gaussian_1d` -- the exact :math:`W_2` from a 1-D discrete measure to a Gaussian,
  through quantile functions;
- :func:`bures_wasserstein` -- the closed-form :math:`W_2` between two Gaussians;
- :func:`conditional_w2` and :func:`conditional_w1` -- :math:`W_{2,\lambda}` and
  :math:`W_{1,\lambda}` between two measures on :math:`[0, 1]\times\mathbb R^d` that share their
  position marginal :math:`\lambda`.

Failures of the optimal-transport solver (iteration cap reached, Sinkhorn not converged) raise
:class:`OptimalTransportError` with a remedy instead of a warning and a wrong number.

References
----------
.. [1] R. Flamary et al., "POT: Python Optimal Transport", JMLR 22(78), 2021.
.. [2] G. Peyré and M. Cuturi, "Computational Optimal Transport", 2019.
.. [3] V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, "A Unified Perspective on the Dynamics of
   Deep Transformers", arXiv:2501.18322, 2025 (the conditional distance for masked attention).
"""

from ._conditional import conditional_w1, conditional_w2
from ._discrete import wasserstein1, wasserstein2
from ._gaussian import bures_wasserstein, w2_gaussian_1d
from ._solvers import OptimalTransportError

__all__ = [
    "OptimalTransportError",
    "bures_wasserstein",
    "conditional_w1",
    "conditional_w2",
    "w2_gaussian_1d",
    "wasserstein1",
    "wasserstein2",
]
