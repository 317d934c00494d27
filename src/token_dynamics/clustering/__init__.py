r"""Long-time clustering of self-attention on the sphere (Part V of the book).

After Geshkovski, Letrouit, Polyanskiy and Rigollet, *A mathematical perspective on
Transformers* (arXiv:2312.10794): tokens on :math:`\mathbb S^{d-1}` moved by self-attention
with :math:`Q = K = V = I` (softmax, "SA", or unnormalised, "USA") and inverse temperature
:math:`\beta`.

- :func:`wendel_probability`, :func:`open_hemisphere`, :func:`cone_collapse_rate` -- when the
  tokens lie in an open hemisphere, and how fast they then collapse;
- :func:`orthogonal_overlap`, :func:`clustering_time`, :func:`overlap_deviation` -- the scalar
  ODE of pairwise inner products from orthogonal tokens, the curve on which it reaches
  :math:`1 - \delta`, and how far the inner products of other tokens are from it;
- :func:`clustered_fraction`, :func:`phase_diagram` -- the probability that two tokens have
  clustered, on a grid of times and temperatures;
- :func:`cluster_staircase` -- the plateaus of a cluster count and their waiting times;
- :func:`sphere_energy_gradient`, :func:`sphere_energy_hessian`, :func:`find_critical_point`,
  :func:`polygon_clusters` -- the critical points of the energy and their Hessians;
- :func:`subset_kernel`, :func:`threshold_angle`, :func:`subset_sums`,
  :func:`rotation_second_variation` -- the steps of the large-beta clustering theorem;
- :func:`funk_hecke_eigenvalues`, :func:`zonal_polynomials`, :func:`energy_spectrum` -- the
  interaction energy in spherical harmonics, whose positive coefficients make the uniform
  measure its minimiser.
"""

from ._critical import *  # noqa: F403
from ._critical import __all__ as _critical_all
from ._harmonics import *  # noqa: F403
from ._harmonics import __all__ as _harmonics_all
from ._hemisphere import *  # noqa: F403
from ._hemisphere import __all__ as _hemisphere_all
from ._orthogonal import *  # noqa: F403
from ._orthogonal import __all__ as _orthogonal_all
from ._phase import *  # noqa: F403
from ._phase import __all__ as _phase_all
from ._staircase import *  # noqa: F403
from ._staircase import __all__ as _staircase_all

__all__ = [
    *_critical_all,
    *_harmonics_all,
    *_hemisphere_all,
    *_orthogonal_all,
    *_phase_all,
    *_staircase_all,
]
