"""Plotting helpers: ax in, artist out; animations as self-contained HTML.

A leaf of the package: the mathematical modules never import it. One private file per visual
object (token clouds and trajectories, animations, convergence plots, covariance ellipses, heat
maps, curves), re-exported here. Importing it sets the house style (``_style``).
"""

from ._animation import *  # noqa: F403
from ._animation import __all__ as _animation_all
from ._clouds import *  # noqa: F403
from ._clouds import __all__ as _clouds_all
from ._convergence import *  # noqa: F403
from ._convergence import __all__ as _convergence_all
from ._curves import *  # noqa: F403
from ._curves import __all__ as _curves_all
from ._ellipses import *  # noqa: F403
from ._ellipses import __all__ as _ellipses_all
from ._heatmaps import *  # noqa: F403
from ._heatmaps import __all__ as _heatmaps_all
from ._style import *  # noqa: F403
from ._style import __all__ as _style_all

__all__ = [
    *_style_all,
    *_clouds_all,
    *_animation_all,
    *_convergence_all,
    *_ellipses_all,
    *_heatmaps_all,
    *_curves_all,
]

use_house_style()  # noqa: F405
