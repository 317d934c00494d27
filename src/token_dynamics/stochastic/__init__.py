r"""The random-MLP transformer on the sphere, its common-noise limit, and synchronization by noise.

Paper 2 of the book, Agazzi et al., *Stochastic scaling limits and synchronization by noise in
deep transformer models* (arXiv:2604.26898). Its full text was not available: the discrete model
is reconstructed from a summary and the formulas here are derived and checked in the book
(chapters "Stochastic scaling limits" and "Synchronization by noise").

- :class:`StochasticTransformer`, :func:`simulate` -- ``L`` layers of attention (step ``T/L``),
  a random MLP of width ``m`` scaled by ``sqrt(T/L)``, and renormalisation, on many paths;
- :func:`noise_kernel`, :func:`noise_kernel_derivative`, :func:`kernel_constants` -- the
  covariance ``k(rho)`` of the MLP noise and ``k(1)``, ``k'(1)``;
- :func:`lyapunov_exponent`, :func:`sign_threshold`, :func:`moment_exponent`,
  :func:`two_point_drift`, :func:`two_point_diffusion`, :func:`two_point_rate` -- the derived
  rates of the limit;
- :func:`one_point_correlation`, :func:`two_point_step`, :func:`tangent_growth`,
  :func:`distance_energy`, :func:`attention_energy` -- Monte-Carlo observables;
- :func:`strong_error`, :func:`propagation_of_chaos` -- pathwise convergence on shared noise.
"""

from ._kernels import *  # noqa: F403
from ._kernels import __all__ as _kernels_all
from ._limits import *  # noqa: F403
from ._limits import __all__ as _limits_all
from ._model import *  # noqa: F403
from ._model import __all__ as _model_all
from ._observables import *  # noqa: F403
from ._observables import __all__ as _observables_all

__all__ = [*_model_all, *_kernels_all, *_observables_all, *_limits_all]
