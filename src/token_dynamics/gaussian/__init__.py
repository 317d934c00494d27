"""Gaussian preservation: the mean and covariance ODEs of attention.

For softmax, l2, Sinkhorn, linear and multi-head attention the velocity field of a Gaussian
law is affine in the token, so the Transformer PDE started from ``N(alpha0, Sigma0)`` stays
Gaussian and reduces to an ODE for ``(alpha, Sigma)``. This subpackage holds those ODEs, a
solver that reports finite-time blow-up, the closed-form solutions used as references, and the
particle-side estimator that checks the ODE against tokens.

Every Gaussian path -- solved, in closed form or estimated from particles -- is a
:class:`GaussianPath` (``times``, ``means``, ``covariances``, ``status``, ``message``); the moment
ODE of an attention field is found in the registry :data:`MOMENT_EQUATIONS`. Failure policy: a
finite-time blow-up is ``status="blowup"`` with its time; a run too stiff to follow or growing
out of the float64 range is ``status="failed"`` with a message naming time, method and
quantity; a closed form asked past its blow-up time raises ``ValueError``.

Conventions: scores ``s_ij = <A x_i, x_j>`` (softmax over the key ``j``), a head outputs
``V sum_j P_ij x_j``; tokens are rows.
"""

from ._equations import *  # noqa: F403
from ._equations import __all__ as _equations_all
from ._equations import sinkhorn_whitened_coupling
from ._experiments import *  # noqa: F403
from ._experiments import __all__ as _experiments_all
from ._identities import *  # noqa: F403
from ._identities import __all__ as _identities_all
from ._isotropic_solutions import *  # noqa: F403
from ._isotropic_solutions import __all__ as _isotropic_all
from ._moment_gap import *  # noqa: F403
from ._moment_gap import __all__ as _moment_gap_all
from ._multihead import *  # noqa: F403
from ._multihead import __all__ as _multihead_all
from ._particles import *  # noqa: F403
from ._particles import __all__ as _particles_all
from ._path import *  # noqa: F403
from ._path import __all__ as _path_all
from ._path_error import *  # noqa: F403
from ._path_error import __all__ as _path_error_all
from ._ray_solutions import *  # noqa: F403
from ._ray_solutions import __all__ as _ray_all
from ._registry import *  # noqa: F403
from ._registry import __all__ as _registry_all
from ._scalar_solutions import *  # noqa: F403
from ._scalar_solutions import __all__ as _scalar_all
from ._solve import *  # noqa: F403
from ._solve import __all__ as _solve_all

__all__ = [
    *_path_all,
    *_path_error_all,
    *_registry_all,
    *_equations_all,
    *_identities_all,
    *_multihead_all,
    *_solve_all,
    *_isotropic_all,
    *_ray_all,
    *_scalar_all,
    *_particles_all,
    *_moment_gap_all,
    *_experiments_all,
    "sinkhorn_whitened_coupling",
]
