r"""Exact sequence interpolation with transformers (Part IV of the book).

Transformer blocks as data (:class:`FeedForward`, :class:`SelfAttention`,
:class:`TransformerBlock`, :class:`Transformer`), the constructive hardmax interpolator built
phase by phase (:func:`build_hardmax_interpolator`), its softmax version with a computed
temperature and an exact snapping layer (:func:`build_softmax_interpolator`), the Hausdorff
distance, block and parameter counts, and the Tikhonov-regularised training experiment.

Attention follows the package convention: the score of query :math:`x_i` on key
:math:`x_\ell` is :math:`\langle A x_i, x_\ell\rangle`, normalised over :math:`\ell` within one
sequence; a block is :math:`\mathrm{TB} = \mathrm{SA}\circ\mathrm{FF}` (feed-forward first).

References
----------
A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact sequence interpolation with transformers*,
arXiv:2502.02270.
"""

from ._blocks import *  # noqa: F403
from ._blocks import __all__ as _blocks_all
from ._data import *  # noqa: F403
from ._data import __all__ as _data_all
from ._displacement import *  # noqa: F403
from ._displacement import __all__ as _displacement_all
from ._hardmax import *  # noqa: F403
from ._hardmax import __all__ as _hardmax_all
from ._hausdorff import *  # noqa: F403
from ._hausdorff import __all__ as _hausdorff_all
from ._layers import *  # noqa: F403
from ._layers import __all__ as _layers_all
from ._moves import *  # noqa: F403
from ._moves import __all__ as _moves_all
from ._softmax import *  # noqa: F403
from ._softmax import __all__ as _softmax_all
from ._temperature import *  # noqa: F403
from ._temperature import __all__ as _temperature_all
from ._tikhonov import *  # noqa: F403
from ._tikhonov import __all__ as _tikhonov_all
from ._training import *  # noqa: F403
from ._training import __all__ as _training_all

__all__ = [
    *_layers_all,
    *_blocks_all,
    *_hausdorff_all,
    *_data_all,
    *_moves_all,
    *_displacement_all,
    *_hardmax_all,
    *_temperature_all,
    *_softmax_all,
    *_tikhonov_all,
    *_training_all,
]
