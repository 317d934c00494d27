"""The house style of the book's figures, set once when the plotting package is imported.

Colours: the Okabe-Ito palette, told apart under the common colour-vision deficiencies and, by
its spread of lightness, in greyscale; ordered so that the cycle's names keep their usual
meaning (``C0`` blue, ``C1`` orange, ``C2`` green, ``C3`` red). Font sizes readable at the page
width. Figures shown in a notebook are rendered at twice the screen resolution (``retina``), so
that they stay sharp on a high-density screen, and stored with a palette of ``PNG_COLORS``
colours, which keeps them small.
"""

from __future__ import annotations

import io
from typing import Any, cast

from matplotlib.figure import Figure

from .._validation import check_instance, check_positive

__all__ = ["OKABE_ITO", "PNG_COLORS", "STYLE", "figure_png", "use_house_style"]

#: Okabe & Ito (2002), "Color Universal Design": blue, orange, bluish green, vermillion,
#: reddish purple, sky blue, yellow, black.
OKABE_ITO = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
)

#: Matplotlib settings of the house style. 10 pt text and 9 pt ticks read at the page width of
#: a 6-inch figure; legends without a frame cover less of the data.
STYLE: dict[str, Any] = {
    "font.size": 10.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 10.0,
    "xtick.labelsize": 9.0,
    "ytick.labelsize": 9.0,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "savefig.dpi": 200.0,
}


#: Colours kept in the book's PNG images: the palette, its tints and the grey of antialiased edges
#: fit in 128 with no visible change, and the file shrinks to about a third (measured on the
#: book's line plots and token clouds).
PNG_COLORS = 128
#: Largest side of a rendered image, in pixels: the limit of matplotlib's Agg renderer (2^16).
MAX_PIXELS = 2**16
#: Most pixels of a rendered image: 2^25, a 5800 x 5800 image, 128 MiB as the RGBA buffer
#: matplotlib draws into (a default 6.4 x 4.8 inch figure at 100 dpi up to a scale of 10.4).
#: Screen images need a scale of 2 or 3; beyond, time and memory grow with the pixels on the
#: way to the square of Agg's limit: figure_png at scale 16 (79 million pixels) took 10 s and
#: 0.9 GB more memory than at scale 2 on the project's 2-core VM, and at scale 29 it passed
#: the fuzz's 20 s limit; a few such images stop a Binder kernel (2 GB).
MAX_IMAGE_PIXELS = 2**25


def _compress_png(png: bytes, *, colors: int = PNG_COLORS) -> bytes:
    """Re-encode a PNG with a palette of at most ``colors`` colours (no dithering).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.plotting import figure_png
    >>> fig, ax = plt.subplots()
    >>> _ = ax.plot([0, 1], [0, 1])
    >>> png, width, height = figure_png(fig)
    >>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n" and len(_compress_png(png)) <= len(png)
    True
    >>> plt.close(fig)
    """
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    image = image.quantize(colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="png", optimize=True)
    return out.getvalue()


def _check_pixels(size_inches: Any, dpi: float, name: str) -> None:
    """Refuse a figure whose image would exceed :data:`MAX_PIXELS` on a side or
    :data:`MAX_IMAGE_PIXELS` in all at `dpi`, or have less than a pixel on a side."""
    width, height = (float(side) * dpi for side in size_inches)
    if min(width, height) < 1.0:
        raise ValueError(
            f"`{name}` give an image of {width:.3g} x {height:.3g} pixels, less than one pixel "
            "on a side; raise them."
        )
    if max(width, height) >= MAX_PIXELS:
        raise ValueError(
            f"`{name}` give an image of {max(width, height):.3g} pixels on a side, beyond "
            f"the {MAX_PIXELS} matplotlib can render; lower them."
        )
    if width * height > MAX_IMAGE_PIXELS:
        raise ValueError(
            f"`{name}` give an image of {width:.0f} x {height:.0f} pixels, beyond the "
            f"{MAX_IMAGE_PIXELS} pixels of a screen image (2^25); lower them."
        )


def figure_png(
    fig: Figure, *, scale: float = 2.0, dpi: float | None = None
) -> tuple[bytes, int, int]:
    """The figure as a compressed PNG with ``scale`` pixels per screen pixel.

    Drawn at ``scale`` times ``dpi``, the image stays sharp on a high-density screen when shown
    at the returned size; its palette holds at most :data:`PNG_COLORS` colours.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure (left open).
    scale : float
        Pixels of the PNG per CSS pixel (2: a "retina" image).
    dpi : float, optional
        Screen resolution of the figure; default: the figure's own.

    Returns
    -------
    png : bytes
        The PNG file.
    width, height : int
        The size at which to show it, in CSS pixels.

    Raises
    ------
    ValueError
        If the image drawn would have more than 2^16 pixels on a side (matplotlib's limit)
        or 2^25 pixels in all (a screen image's: a scale of 10 for a default figure).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from token_dynamics.plotting import figure_png
    >>> fig, ax = plt.subplots(figsize=(2, 1), dpi=100)
    >>> _ = ax.plot([0, 1], [0, 1])
    >>> png, width, height = figure_png(fig)
    >>> import io
    >>> from PIL import Image
    >>> pixels = Image.open(io.BytesIO(png)).size  # twice the size shown, up to rounding
    >>> abs(pixels[0] - 2 * width) <= 1 and abs(pixels[1] - 2 * height) <= 1
    True
    >>> plt.close(fig)
    """
    fix = "Pass a matplotlib Figure, e.g. `ax.figure`."
    fig = check_instance(fig, Figure, "fig", fix)
    scale = check_positive(scale, "scale")
    dpi = fig.dpi if dpi is None else check_positive(dpi, "dpi")
    _check_pixels(fig.get_size_inches(), scale * dpi, "scale` and `dpi")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=scale * dpi, bbox_inches="tight")
    png = _compress_png(buffer.getvalue())
    from PIL import Image

    width, height = Image.open(io.BytesIO(png)).size
    return png, round(width / scale), round(height / scale)


def _notebook_png(fig: Figure) -> tuple[bytes, dict[str, int]] | None:
    """IPython's ``image/png`` of a figure: 2x pixels, shown at 1x (``retina``), compressed."""
    if not fig.axes and not fig.lines:  # an empty figure shows nothing, as in matplotlib_inline
        return None
    png, width, height = figure_png(fig)
    return png, {"width": width, "height": height}


def use_house_style() -> None:
    """Apply :data:`STYLE` and the Okabe-Ito colour cycle; in a notebook, render at 2x.

    Importing :mod:`token_dynamics.plotting` calls it; call it again after changing
    ``matplotlib.rcParams``.

    Examples
    --------
    >>> import matplotlib as mpl
    >>> from token_dynamics.plotting import use_house_style
    >>> use_house_style()
    >>> mpl.rcParams["axes.prop_cycle"].by_key()["color"][1]
    '#E69F00'
    """
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams.update(cast(Any, STYLE))  # rcParams' stubs list every key as a literal
    mpl.rcParams["axes.prop_cycle"] = cycler(color=list(OKABE_ITO))
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is in the pinned environment
        return
    shell = get_ipython()
    if getattr(shell, "kernel", None) is not None:  # a notebook: 2x compressed PNG
        import matplotlib.pyplot as plt
        from matplotlib.figure import Figure

        # pyplot loads its backend at the first figure, and the inline backend then registers
        # its own PNG formatter: load it now, so that ours comes after and stays
        plt.switch_backend(mpl.get_backend())
        shell.display_formatter.formatters["image/png"].for_type(Figure, _notebook_png)
