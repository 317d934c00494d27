"""Plotting helpers: ax in, artist out; animations as self-contained HTML.

A leaf of the package: the mathematical modules never import it. One private file per visual
object, re-exported here: token clouds (``_clouds``), token trajectories (``_trajectories``),
several sequences at once (``_sequences``), animations (``_animation``), convergence on log-log
axes (``_convergence``), covariances (``_covariances``), heat maps and tables (``_heatmaps``),
histograms (``_histograms``), curves (``_curves``) and means with their bands (``_bands``).
Every helper takes the axes to draw on first and returns what it drew, and checks its arguments
as the rest of the library does (``_checks``): an axes that is not a matplotlib ``Axes`` is a
``TypeError`` naming it; data that is not real, finite and drawable, a colour matplotlib does not
know, a result without the fields drawn, are a ``ValueError`` or ``TypeError`` naming the
argument and the fix. Importing the package sets the house style (``_style``).
"""

from ._animation import *  # noqa: F403
from ._animation import __all__ as _animation_all
from ._bands import *  # noqa: F403
from ._bands import __all__ as _bands_all
from ._checks import *  # noqa: F403
from ._checks import __all__ as _checks_all
from ._clouds import *  # noqa: F403
from ._clouds import __all__ as _clouds_all
from ._convergence import *  # noqa: F403
from ._convergence import __all__ as _convergence_all
from ._covariances import *  # noqa: F403
from ._covariances import __all__ as _covariances_all
from ._curves import *  # noqa: F403
from ._curves import __all__ as _curves_all
from ._heatmaps import *  # noqa: F403
from ._heatmaps import __all__ as _heatmaps_all
from ._histograms import *  # noqa: F403
from ._histograms import __all__ as _histograms_all
from ._sequences import *  # noqa: F403
from ._sequences import __all__ as _sequences_all
from ._style import *  # noqa: F403
from ._style import __all__ as _style_all
from ._trajectories import *  # noqa: F403
from ._trajectories import __all__ as _trajectories_all

__all__ = [
    *_style_all,
    *_checks_all,
    *_clouds_all,
    *_trajectories_all,
    *_sequences_all,
    *_animation_all,
    *_convergence_all,
    *_covariances_all,
    *_heatmaps_all,
    *_histograms_all,
    *_curves_all,
    *_bands_all,
]

use_house_style()  # noqa: F405
