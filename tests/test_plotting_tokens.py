"""Tests of the token plotting helpers: the artists hold the data they were given.

Tolerances: 1e-14 relative is round-off (the artists store the data after at most a
multiplication); everything else is exact.
"""

import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

from token_dynamics.attention import Softmax
from token_dynamics.integrators import integrate
from token_dynamics.plotting import (
    MAX_ANIMATION_FRAMES,
    AnimationHTML,
    animate,
    plot_attention_matrix,
    plot_sphere,
    plot_tokens,
    plot_trajectories,
    plot_velocity_field,
)
from token_dynamics.sampling import uniform_sphere


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


@pytest.fixture
def ax3d():
    fig = plt.figure()
    yield fig.add_subplot(projection="3d")
    plt.close(fig)


def n_frames(html):
    return len(re.findall(r'frames\[\d+\] = "data:image/png;base64', html))


def test_plot_tokens_2d_and_3d(ax, ax3d):
    X = np.random.default_rng(0).standard_normal((6, 2))
    art = plot_tokens(ax, X, color="k")
    np.testing.assert_array_equal(art.get_offsets(), X)
    w = np.array([0.5, 0.1, 0.1, 0.1, 0.1, 0.1])
    sizes = plot_tokens(ax, X, weights=w, size=10.0).get_sizes()
    np.testing.assert_allclose(sizes, 10.0 * 6 * w, rtol=1e-14)
    Y = uniform_sphere(5, 3, rng=1)
    art3 = plot_tokens(ax3d, Y)
    np.testing.assert_allclose(np.column_stack(art3._offsets3d), Y, rtol=1e-14)
    with pytest.raises(ValueError, match="`ax`"):
        plot_tokens(ax, Y)
    with pytest.raises(ValueError, match="`X`"):
        plot_tokens(ax, np.ones((3, 4)))


def test_plot_sphere(ax, ax3d):
    line = plot_sphere(ax)
    np.testing.assert_allclose(np.linalg.norm(line.get_xydata(), axis=1), 1.0, rtol=1e-14)
    assert plot_sphere(ax3d, d=3) is not None
    with pytest.raises(ValueError, match="`d`"):
        plot_sphere(ax, d=4)


def test_plot_trajectories(ax, ax3d):
    X0 = uniform_sphere(4, 2, rng=2)
    traj = integrate(Softmax(np.eye(2), np.eye(2)), X0, np.linspace(0, 1, 6), geometry="sphere")
    lines = plot_trajectories(ax, traj)
    segments = lines.get_segments()
    assert len(segments) == 4
    for i, seg in enumerate(segments):
        np.testing.assert_array_equal(seg, traj.states[:, i])
    Y0 = uniform_sphere(3, 3, rng=3)
    states = integrate(Softmax(np.eye(3), np.eye(3)), Y0, [0.0, 0.5, 1.0]).states
    lines = plot_trajectories(ax3d, states)
    ax3d.figure.canvas.draw()  # 3D segments are projected at draw time
    assert len(lines.get_segments()) == 3
    with pytest.raises(ValueError, match="`trajectory`"):
        plot_trajectories(ax, np.ones((3, 2)))


def test_plot_attention_matrix(ax):
    P = Softmax(np.eye(2), np.eye(2)).attention_matrix(np.random.default_rng(4).random((5, 2)))
    image = plot_attention_matrix(ax, P)
    np.testing.assert_array_equal(image.get_array(), P)
    assert len(ax.figure.axes) == 2  # the colour bar
    with pytest.raises(ValueError, match="`P`"):
        plot_attention_matrix(ax, np.ones(3))


def test_plot_velocity_field(ax):
    X = np.random.default_rng(5).standard_normal((7, 2))
    field = Softmax(np.eye(2), -np.eye(2))
    q = plot_velocity_field(ax, field, X, grid=5, extent=(-1, 1, -2, 2))
    grid = np.column_stack([q.X, q.Y])
    U = field.velocity_at(grid, X)
    np.testing.assert_allclose(np.column_stack([q.U, q.V]), U, rtol=1e-14)
    with pytest.raises(ValueError, match="`X`"):
        plot_velocity_field(ax, field, np.ones((3, 3)))


def test_animate_is_self_contained_capped_and_closes_its_figure():
    before = plt.get_fignums()
    X0 = uniform_sphere(8, 2, rng=6)
    times = np.linspace(0, 3, 100)
    traj = integrate(Softmax(np.eye(2), np.eye(2), 3.0), X0, times, geometry="sphere")
    # small frames (120 pixels), twelve of which outweigh the 20 kB the size cap below counts
    # for the player's script: the test checks counts, not looks
    small = {"dpi": 60, "figsize": (2.0, 2.0)}
    html = animate(traj, sphere=True, title="t = {t}", **small)
    assert isinstance(html, AnimationHTML) and html._repr_html_() == html
    assert n_frames(html) == MAX_ANIMATION_FRAMES  # 100 states, capped
    assert "http" not in html and 'class="fa' not in html  # no outside request
    # the buttons' glyphs: none from the media-symbol block U+2300-U+23FF, which common fonts
    # (DejaVu) lack and browsers draw as empty boxes
    assert not any("\u2300" <= ch <= "\u23ff" for ch in html)
    assert plt.get_fignums() == before
    twelve = animate(traj, max_frames=12, **small)
    assert n_frames(twelve) == 12
    # size cap: drawn again with fewer frames until it fits
    cap = (len(twelve.encode()) + 20_000) // 2
    capped = animate(traj, max_frames=12, max_bytes=cap, **small)
    assert len(capped.encode()) <= cap and 2 <= n_frames(capped) < 12
    with pytest.raises(ValueError, match="`max_bytes`"):
        animate(traj, max_frames=12, max_bytes=1000, **small)
    assert plt.get_fignums() == before


def test_animate_shows_its_first_frame_without_its_script():
    """The player's image holds the first frame and its size in the markup: JupyterLab (its
    default windowing mode) left an image that only the script filled 0 px tall after "Run
    All" (measured: 0 px before, the frame's 800 px after, on the animations of tokens/particles
    and interpolation/phases, then drawn at 200 dpi)."""
    import base64

    html = animate(np.stack([uniform_sphere(5, 2, rng=k) for k in range(3)]))
    first = re.search(r'frames\[0\] = "(data:image/png;base64,[^"]+)"', html).group(1)
    img = re.search(r'<img id="_anim_img\w+"[^>]*>', html).group(0)
    png = base64.b64decode(first.split(",", 1)[1])
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert f'src="{first}"' in img
    assert f'width="{width}" height="{height}"' in img and width == height > 0  # a square figure


def test_animate_draws_its_frames_at_its_dpi():
    """The frames are figsize x dpi pixels. They were saved at the house style's savefig.dpi,
    200, whatever `dpi` said: the default 72 gave 800 x 800 frames for a 4-inch figure, and the
    book's dpi=60 frames of 240 pixels came out at 800, with 11 times the pixels."""
    import base64

    states = np.stack([uniform_sphere(5, 2, rng=k) for k in range(3)])
    for dpi, figsize in ((20.0, (2.0, 3.0)), (50.0, (4.0, 4.0))):
        html = animate(states, dpi=dpi, figsize=figsize)
        first = re.search(r'frames\[0\] = "data:image/png;base64,([^"]+)"', html).group(1)
        png = base64.b64decode(first)
        size = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert size == (round(figsize[0] * dpi), round(figsize[1] * dpi))


def test_animate_3d():
    states = np.stack([uniform_sphere(5, 3, rng=k) for k in range(4)])
    html = animate(states, sphere=True, max_frames=4)
    assert n_frames(html) == 4


def test_animate_parameter_sweep_with_labels():
    """Frames need not be times: final clouds over beta, one title each."""
    X0 = uniform_sphere(6, 2, rng=7)
    betas = [0.5, 2.0, 8.0]
    finals = [
        integrate(Softmax(np.eye(2), np.eye(2), b), X0, [0.0, 2.0], dt=0.1, geometry="sphere").final
        for b in betas
    ]
    html = animate(np.stack(finals), labels=[f"beta = {b}" for b in betas], dpi=20)
    assert n_frames(html) == 3
    with pytest.raises(ValueError, match="`labels`"):
        animate(np.stack(finals), labels=["one"])


def test_animate_bad_inputs():
    with pytest.raises(ValueError, match="`max_frames`"):
        animate(np.ones((3, 2, 2)), max_frames=1)
    with pytest.raises(ValueError, match="`trajectory`"):
        animate(np.ones((3, 2, 5)))
