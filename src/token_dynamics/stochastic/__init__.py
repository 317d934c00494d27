r"""The deep transformer with random MLPs of Agazzi et al. (2026) and its stochastic limits.

Agazzi, Bruno, Mosig García, Saviozzi, Romito, *Stochastic scaling limits and synchronization
by noise in deep transformer models* (arXiv:2604.26898), on the paper's own model, eq. (1.1):
post-LN after each sub-layer, softmax attention with no temperature (``Q``, ``K``, ``V`` fixed
across layers), and a random MLP ``G(y) = W sigma(U y / sqrt(d) + b_U) / sqrt(m) + b_W`` drawn
afresh at every layer (chapters "Stochastic scaling limits" and "Synchronization by noise").

- :data:`ACTIVATIONS`, :func:`kappa`, :func:`kappa_prime` -- the covariance kernel of the MLP
  noise on the sphere and its derivative (Remark 1.1, Lemma 4.2);
- :class:`MLPNoise`, :class:`StochasticTransformer`, :func:`simulate` -- the discrete model;
- :func:`simulate_sde` -- the limit SDE (Itô, common noise);
- :class:`MCEstimate`, :class:`ConvergenceStudy`, :class:`ChaosStudy` -- Monte-Carlo results;
- :func:`synchronization_energy`, :func:`noise_exponents`, :func:`dissipation_rate`,
  :func:`energy_decay_rate` -- the energy, the exponents of the noise, the rate of Theorem 1.4
  and its Monte-Carlo estimate (chapter "Synchronization by noise").
"""

from ._chaos import *  # noqa: F403
from ._chaos import __all__ as _chaos_all
from ._deep_limit import *  # noqa: F403
from ._deep_limit import __all__ as _deep_limit_all
from ._dissipation import *  # noqa: F403
from ._dissipation import __all__ as _dissipation_all
from ._energy import *  # noqa: F403
from ._energy import __all__ as _energy_all
from ._estimates import *  # noqa: F403
from ._estimates import __all__ as _estimates_all
from ._experiments import *  # noqa: F403
from ._experiments import __all__ as _experiments_all
from ._exponents import *  # noqa: F403
from ._exponents import __all__ as _exponents_all
from ._kernels import *  # noqa: F403
from ._kernels import __all__ as _kernels_all
from ._mlp import *  # noqa: F403
from ._mlp import __all__ as _mlp_all
from ._model import *  # noqa: F403
from ._model import __all__ as _model_all
from ._one_point import *  # noqa: F403
from ._one_point import __all__ as _one_point_all
from ._remainders import *  # noqa: F403
from ._remainders import __all__ as _remainders_all
from ._sde import *  # noqa: F403
from ._sde import __all__ as _sde_all
from ._spread import *  # noqa: F403
from ._spread import __all__ as _spread_all
from ._synchronization import *  # noqa: F403
from ._synchronization import __all__ as _synchronization_all

__all__ = [
    *_kernels_all,
    *_mlp_all,
    *_model_all,
    *_one_point_all,
    *_sde_all,
    *_estimates_all,
    *_deep_limit_all,
    *_chaos_all,
    *_remainders_all,
    *_energy_all,
    *_spread_all,
    *_exponents_all,
    *_dissipation_all,
    *_synchronization_all,
    *_experiments_all,
]
