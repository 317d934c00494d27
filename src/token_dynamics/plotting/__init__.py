"""Plotting helpers: ax in, artist out; animations as self-contained HTML.

A leaf of the package: the mathematical modules never import it. One private file per
chapter, re-exported here.
"""

from ._gaussian import *  # noqa: F403
from ._gaussian import __all__ as _gaussian_all
from ._gradient_flow import *  # noqa: F403
from ._gradient_flow import __all__ as _gradient_flow_all
from ._interpolation import *  # noqa: F403
from ._interpolation import __all__ as _interpolation_all
from ._meanfield import *  # noqa: F403
from ._meanfield import __all__ as _meanfield_all
from ._stochastic import *  # noqa: F403
from ._stochastic import __all__ as _stochastic_all
from ._synchronization import *  # noqa: F403
from ._synchronization import __all__ as _synchronization_all
from ._tokens import *  # noqa: F403
from ._tokens import __all__ as _tokens_all

__all__ = [
    *_tokens_all,
    *_meanfield_all,
    *_gaussian_all,
    *_gradient_flow_all,
    *_stochastic_all,
    *_interpolation_all,
    *_synchronization_all,
]
