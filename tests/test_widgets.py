"""Tests of token_dynamics.widgets: built over the same pure functions, lazily imported."""

import base64
import io
import json
import re
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from token_dynamics import widgets as td_widgets
from token_dynamics.attention import make_field
from token_dynamics.integrators import integrate
from token_dynamics.sampling import uniform_sphere
from token_dynamics.widgets import attention_explorer, draw_variant, figure_sliders


def test_draw_variant_is_the_library_computation():
    X0 = np.random.default_rng(0).standard_normal((5, 2))
    times = np.linspace(0, 1, 5)
    fig, ax = plt.subplots()
    try:
        traj = draw_variant(ax, X0, "l2", 3.0, times=times)
    finally:
        plt.close(fig)
    ref = integrate(make_field("l2", 2, beta=3.0), X0, times, dt=0.05)
    np.testing.assert_array_equal(traj.states, ref.states)


def test_explorer_redraws_on_each_change():
    X0 = uniform_sphere(6, 2, rng=1)
    kw = {"times": [0.0, 0.5, 1.0], "geometry": "sphere"}
    box = attention_explorer(X0, variants=("softmax", "sinkhorn"), **kw)
    first = box.trajectory
    box.slider.value = 10.0
    after_beta = box.trajectory
    assert after_beta is not first
    box.slider.value = 1.0  # Sinkhorn at eps = 1 / beta = 1 on unit tokens converges fast
    box.menu.value = "sinkhorn"
    ax = box.figure.axes[0]
    assert ax.get_title().startswith("sinkhorn")
    field = make_field("sinkhorn", 2, beta=box.slider.value)
    expected = integrate(field, X0, kw["times"], geometry="sphere", dt=0.05)
    np.testing.assert_array_equal(box.trajectory.states, expected.states)
    assert len(box.children) == 3


def test_explorer_3d_on_the_sphere():
    X0 = np.random.default_rng(2).standard_normal((5, 3))
    box = attention_explorer(X0, times=[0.0, 0.5], geometry="sphere")
    assert box.figure.axes[0].name == "3d"
    np.testing.assert_allclose(np.linalg.norm(box.trajectory.final, axis=1), 1.0, rtol=1e-14)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"variants": ("softmax", "cosine")}, "`variants`"),
        ({"beta": 100.0}, "`beta`"),
        ({"beta_range": (0.0, 1.0)}, "`beta_range`"),
        ({"geometry": "torus"}, "`geometry`"),
    ],
)
def test_explorer_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        attention_explorer(np.eye(2), **kwargs)
    with pytest.raises(ValueError, match="`X0`"):
        attention_explorer(np.ones((3, 4)))


def test_figure_sliders_redraw_with_the_slider_values():
    seen = []

    def draw(ax, a, b):
        seen.append((a, b))
        ax.plot([0, 1], [a, b])

    box = figure_sliders(
        draw, static={"a": [0.0, 1.0]}, a=(0.0, 1.0, 0.1, 0.2), b=(-1.0, 1.0, 0.5, 0.0)
    )
    box.sliders["b"].value = 0.5
    # the live drawing, the static view's two frames (b at its initial value), the new value
    assert seen == [(0.2, 0.0), (0.0, 0.0), (1.0, 0.0), (0.2, 0.5)]
    assert len(box.figure.axes[0].lines) == 1  # the axes are cleared before each drawing
    assert [c.description for c in box.children[:2]] == ["a", "b"]


@pytest.mark.parametrize(
    ("ranges", "match"),
    [
        ({}, "at least one slider"),
        ({"a": (1.0, 0.0, 0.1, 0.5)}, "`a` must be"),
        ({"a": (0.0, 1.0, 0.0, 0.5)}, "`a` must be"),
        ({"a": (0.0, 1.0, 0.1, 2.0)}, "`a` must be"),
        ({"a": (0.0, 1.0)}, "`a` must be"),
        ({"a": (0.0, 1.0, "fine", 0.5)}, "`a` must be"),
        ({"a": 0.5}, "`a` must be"),
    ],
)
def test_figure_sliders_bad_ranges(ranges, match):
    with pytest.raises(ValueError, match=match):
        figure_sliders(lambda ax, **kw: None, **ranges)
    with pytest.raises(ValueError, match="`draw`"):
        figure_sliders("plot", a=(0.0, 1.0, 0.1, 0.5))


def test_figures_reach_the_output_widget_from_the_kernel_side(monkeypatch):
    """In a kernel the figure becomes the Output widget's only output, set on the model (no
    output capture, which makes nbclient miss cell replies: jupyter/nbclient#312)."""
    monkeypatch.setattr("token_dynamics.widgets._static._in_kernel", lambda: True)
    box = figure_sliders(lambda ax, a: ax.plot([0, a]), a=(0.0, 1.0, 0.1, 0.5))
    box.sliders["a"].value = 0.7
    (output,) = box.children[-1].outputs
    assert output["output_type"] == "display_data" and "image/png" in output["data"]


def test_the_redrawn_figure_is_shown_at_the_size_of_the_notebooks_figures(monkeypatch):
    """A notebook shows a figure of the house style at its own dpi, drawn at twice the pixels
    (``plotting.figure_png``). The explorer's figure must be shown at that size too: saved at
    the house style's ``savefig.dpi`` (200, twice the figure's 100) with no size, JupyterLab
    showed it twice as large as the figures around it (seen in JupyterLab 4.6.6)."""
    monkeypatch.setattr("token_dynamics.widgets._static._in_kernel", lambda: True)
    box = attention_explorer(np.eye(2), times=[0.0, 0.5], variants=("softmax",))
    (output,) = box.children[-1].outputs
    pixels = Image.open(io.BytesIO(base64.b64decode(output["data"]["image/png"]))).size
    shown = output["metadata"].get("image/png", {})
    width, height = shown.get("width", pixels[0]), shown.get("height", pixels[1])
    inches = box.figure.get_size_inches()
    # at most the figure's size at its dpi (bbox_inches="tight" trims the margins, by less than
    # a fifth of a side for this square figure)
    for side, size in ((width, inches[0]), (height, inches[1])):
        assert 0.8 * size * box.figure.dpi <= side <= size * box.figure.dpi
    # sharp on a high-density screen: two pixels per pixel shown, up to rounding
    assert abs(pixels[0] - 2 * width) <= 1 and abs(pixels[1] - 2 * height) <= 1
    plt.close(box.figure)


def test_maths_modules_never_import_widgets_or_matplotlib():
    code = (
        "import sys, token_dynamics\n"
        "had = 'matplotlib' in sys.modules\n"
        "import token_dynamics.attention, token_dynamics.geometry, token_dynamics.integrators\n"
        "import token_dynamics.sampling, token_dynamics.diagnostics\n"
        "assert 'ipywidgets' not in sys.modules\n"
        "assert had or 'matplotlib' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def frames_of(html):
    """The precomputed frames of a static view, in the order of its JavaScript array."""
    return json.loads(re.search(r"var frames = (\[.*?\]), labels", html).group(1))


def test_static_view_holds_one_frame_per_combination():
    X0 = uniform_sphere(5, 2, rng=4)
    box = attention_explorer(X0, times=[0.0, 1.0], variants=("softmax", "l2"), geometry="sphere")
    html = box.static_html
    frames = frames_of(html)
    assert len(frames) == td_widgets.STATIC_STEPS * 2
    # beta changes the picture: different values give different frames
    assert len(set(frames)) == len(frames)
    assert html.count('type="range"') == 1 and html.count("<option") == 2
    assert "http" not in html.replace("http://www.w3.org", "")  # no outside request
    if hasattr(box, "_repr_mimebundle_"):  # ipywidgets 8: the live widget and the static view
        bundle = box._repr_mimebundle_()
        assert bundle["text/html"] == html
        assert "application/vnd.jupyter.widget-view+json" in bundle
    else:  # ipywidgets 7 (Colab's; `make test-oldest`): the widget displays itself, unchanged
        assert "_ipython_display_" not in vars(box) and callable(box._ipython_display_)


def test_static_view_without_its_script_says_so_and_offers_no_dead_control():
    """A viewer that strips scripts (JupyterLab, for an untrusted notebook, such as one just
    downloaded or opened on Binder) shows the static view's HTML without its player: its
    controls must then be disabled, and a line must say why, rather than sliders that move and
    change nothing. The player enables the controls and removes that line (the browser tests
    check it does on the site)."""
    from html.parser import HTMLParser

    class WithoutScripts(HTMLParser):
        def __init__(self):
            super().__init__()
            self.controls, self.text, self.in_script = [], [], False

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            self.in_script = tag == "script"
            if "data-control" in attrs:
                self.controls.append((tag, "disabled" in attrs))

        def handle_endtag(self, tag):
            self.in_script = False

        def handle_data(self, data):
            if not self.in_script:
                self.text.append(data)

    X0 = uniform_sphere(4, 2, rng=2)
    box = attention_explorer(X0, times=[0.0, 1.0], variants=("softmax", "l2"), geometry="sphere")
    parsed = WithoutScripts()
    parsed.feed(box.static_html)
    assert parsed.controls == [("input", True), ("select", True)]  # beta, then the variant
    assert td_widgets._static.INERT_NOTE in " ".join(parsed.text)
    player = box.static_html.split("<script>")[1]
    assert "c.disabled = false" in player and ".td-explorer-inert" in player


def test_a_widget_of_ipywidgets_7_is_left_to_display_itself():
    """ipywidgets 7 (Colab's) displays a widget through ``_ipython_display_`` and has no
    ``_repr_mimebundle_`` to extend: the explorers return such a widget unchanged, with its
    static view as ``static_html`` (they raised AttributeError there; `make test-oldest` runs
    them on ipywidgets 7.7.1 itself)."""
    from token_dynamics.widgets._static import _with_static_view

    class Widget7:  # the display protocol of ipywidgets 7's Widget, and nothing else
        def _ipython_display_(self, **kwargs):
            raise AssertionError("not called here")

    box = Widget7()
    assert _with_static_view(box, "<div>frames</div>") is box
    assert box.static_html == "<div>frames</div>"
    assert not hasattr(box, "_repr_mimebundle_") and set(vars(box)) == {"static_html"}


def test_static_view_of_sliders_keeps_the_others_fixed():
    seen = []
    box = figure_sliders(
        lambda ax, a, b: seen.append((a, b)) or ax.plot([0, 1], [a, b]),
        static={"b": [-1.0, 0.0, 1.0]},
        a=(0.0, 1.0, 0.1, 0.3),
        b=(-1.0, 1.0, 0.5, 0.0),
    )
    assert seen[1:] == [(0.3, -1.0), (0.3, 0.0), (0.3, 1.0)]
    assert len(frames_of(box.static_html)) == 3
    assert "a = 0.3" in box.static_html  # the view says which value is held fixed


def test_static_view_reports_a_numerical_failure_in_its_frame():
    # unnormalised attention overflows at large beta on these tokens (score ~ 100)
    X0 = 10.0 * np.eye(2)
    box = attention_explorer(
        X0, times=[0.0, 0.1], variants=("unnormalised",), beta=0.01, beta_range=(0.01, 30.0)
    )
    assert len(frames_of(box.static_html)) == td_widgets.STATIC_STEPS
    with pytest.raises(FloatingPointError, match="overflowed"):  # the live widget still raises
        box.slider.value = 30.0


@pytest.mark.parametrize(
    ("static", "match"),
    [
        ({"c": [0.0]}, "`static`"),
        ({}, "`static`"),
        ({"a": np.linspace(0, 1, 9), "b": np.linspace(-1, 1, 9)}, "`static` gives 81"),
    ],
)
def test_static_view_bad_values(static, match):
    with pytest.raises(ValueError, match=match):
        figure_sliders(
            lambda ax, a, b: None, static=static, a=(0.0, 1.0, 0.1, 0.5), b=(-1, 1, 0.5, 0)
        )


def test_draw_variant_names_a_wrong_axes_and_tokens_it_cannot_draw():
    """Not an axes: a TypeError naming `ax`; tokens in d = 1: a ValueError naming `X0`."""
    times = np.linspace(0, 1, 3)
    with pytest.raises(TypeError, match="`ax`"):
        draw_variant(None, np.eye(2), "softmax", 1.0, times=times)
    fig, ax = plt.subplots()
    try:
        with pytest.raises(ValueError, match="`X0`"):
            draw_variant(ax, np.ones((3, 1)), "softmax", 1.0, times=times)
    finally:
        plt.close(fig)


def test_draw_variant_refuses_a_trajectory_beyond_the_drawable_range():
    """Tokens near the drawable bound that grow under the flow: a FloatingPointError naming
    `X0` (the explorer's static view shows it as text), not a message about another argument."""
    from token_dynamics.plotting import MAX_DRAWABLE

    X0 = 0.5 * MAX_DRAWABLE * np.array([[1.0, 0.0], [0.0, 1.0]])
    fig, ax = plt.subplots()
    try:
        with pytest.raises(FloatingPointError, match="`X0`"):
            draw_variant(ax, X0, "softmax", 1.0, times=[0.0, 5.0])
    finally:
        plt.close(fig)
