"""Tests of the plotting package as a whole: every helper draws a readable figure.

For each public helper, one small figure: the helper returns its artist, every axis that shows
ticks carries a label, and no two tick labels of an axis overlap once the figure is drawn
(matplotlib's own bounding boxes of the rendered text, so the check is exact to a pixel).
"""

import functools
import itertools
import re
from types import SimpleNamespace as NS

import matplotlib.pyplot as plt
import numpy as np
import pytest

from token_dynamics import plotting
from token_dynamics.attention import Softmax
from token_dynamics.gaussian import cone_coordinates
from token_dynamics.integrators import integrate
from token_dynamics.sampling import uniform_sphere

RNG = np.random.default_rng(0)
X2 = uniform_sphere(12, 2, rng=1)
TRAJ = integrate(Softmax(np.eye(2), np.eye(2)), X2, np.linspace(0, 2, 11), geometry="sphere")
T = np.linspace(0.0, 3.0, 31)
COV_PATH = NS(
    times=T,
    covariances=np.array([np.diag([1 + t, 1 / (1 + t)]) + 0.1 * t * np.eye(2)[::-1] for t in T]),
    blew_up=False,
    blowup_time=None,
)
PHASES = NS(
    phases=[
        NS(name=name, n_layers=k, sequences=[RNG.normal(size=(3, 2)) for _ in range(3)])
        for k, name in enumerate(["input", "separated", "leaders", "collapsed", "interpolated"])
    ]
)
NOISE_ROW = NS(
    activation="relu",
    d=3,
    sigma_U=0.0,
    kappa_1=1.0,
    kappa_prime_1=0.5,
    lambda_1=0.2,
    lambda_bar=-0.1,
)

#: name -> (draw(ax) -> artist, projection). One entry per public drawing helper.
DRAWINGS = {
    "plot_tokens": (lambda ax: plotting.plot_tokens(ax, X2), None),
    "plot_sphere": (lambda ax: plotting.plot_sphere(ax, d=2), None),
    "plot_trajectories": (lambda ax: plotting.plot_trajectories(ax, TRAJ), None),
    "plot_velocity_field": (
        lambda ax: plotting.plot_velocity_field(ax, Softmax(np.eye(2), np.eye(2)), X2),
        None,
    ),
    "plot_token_sets": (
        lambda ax: plotting.plot_token_sets(ax, PHASES.phases[0].sequences, title="input"),
        None,
    ),
    "plot_moves": (lambda ax: plotting.plot_moves(ax, X2, 0.5 * X2), None),
    "plot_circle_snapshots": (
        lambda ax: plotting.plot_circle_snapshots(ax, TRAJ.states, [0, -1], labels=["0", "T"]),
        None,
    ),
    "plot_causal_paths": (
        lambda ax: plotting.plot_causal_paths(
            ax,
            np.concatenate(
                [np.ones((11, 12, 1)) * np.linspace(0, 1, 12)[:, None], TRAJ.states], axis=2
            ),
        ),
        None,
    ),
    "plot_disk_trajectories": (
        lambda ax: plotting.plot_disk_trajectories(ax, [COV_PATH]),
        None,
    ),
    "plot_cone_trajectories": (
        lambda ax: plotting.plot_cone_trajectories(ax, [COV_PATH]),
        "3d",
    ),
    "plot_loglog": (
        lambda ax: plotting.plot_loglog(
            ax,
            np.array([16, 32, 64, 128, 256, 512]),
            np.array([16, 32, 64, 128, 256, 512]) ** -0.5,
            yerr=np.full(6, 1e-3),
            fit=True,
            guides={"slope -1/2": -0.5},
            marks={"critical n": 100.0},
            xlabel="number of tokens $n$",
            ylabel="error",
            label="measured",
        ),
        None,
    ),
    "plot_loglog (less than a decade)": (
        lambda ax: plotting.plot_loglog(
            ax,
            np.geomspace(1.6e-2, 1.3e-1, 4),
            np.geomspace(2.5e-3, 1.7e-2, 4),
            yerr=np.full(4, 1e-4),
            fit=True,
            xlabel="$1/L$ ($L$ layers)",
            ylabel="error",
        ),
        None,
    ),
    "plot_tikhonov": (
        lambda ax: plotting.plot_tikhonov(
            ax,
            NS(
                eps=np.geomspace(1e-4, 1e-1, 5),
                loss=np.geomspace(1e-5, 1e-2, 5),
                threshold=np.geomspace(2e-5, 2e-2, 5),
            ),
        ),
        None,
    ),
    "plot_limit_grid": (
        lambda ax: plotting.plot_limit_grid(
            ax,
            NS(
                sup=np.abs(RNG.normal(size=(4, 3, 2))) / np.array([4, 8, 16])[:, None],
                grid=None,
                widths=[8, None],
                depths=np.array([4, 8, 16]),
            ),
        ),
        None,
    ),
    "plot_covariance_ellipse": (
        lambda ax: plotting.plot_covariance_ellipse(ax, [0, 0], [[1, 0.3], [0.3, 0.5]]),
        None,
    ),
    "plot_gaussian_cloud": (
        lambda ax: plotting.plot_gaussian_cloud(ax, RNG.normal(size=(50, 2)), [0, 0], np.eye(2)),
        None,
    ),
    "plot_attention_matrix": (
        lambda ax: plotting.plot_attention_matrix(
            ax, Softmax(np.eye(2), np.eye(2)).attention_matrix(X2)
        ),
        None,
    ),
    "plot_cosine_matrix": (lambda ax: plotting.plot_cosine_matrix(ax, X2), None),
    "plot_energy_landscape": (
        lambda ax: plotting.plot_energy_landscape(
            ax, np.linspace(-1, 1, 9), np.linspace(-1, 1, 9), np.add.outer(T[:9], T[:9])
        ),
        None,
    ),
    "plot_noise_exponent_table": (
        lambda ax: plotting.plot_noise_exponent_table(ax, [NOISE_ROW]),
        None,
    ),
    "plot_curves": (
        lambda ax: plotting.plot_curves(
            ax,
            T,
            {"E": np.exp(-T), "F": np.exp(-2 * T)},
            xlabel="time $t$",
            ylabel="energy",
            logy=True,
        ),
        None,
    ),
    "plot_mc_estimate": (
        lambda ax: plotting.plot_mc_estimate(
            ax,
            T,
            NS(mean=np.exp(-T), stderr=0.01 * np.ones_like(T)),
            predicted=np.exp(-T),
            xlabel="depth $t$",
            ylabel="mean",
        ),
        None,
    ),
    "plot_kernels": (lambda ax: plotting.plot_kernels(ax, d=3), None),
    "plot_energy_decay": (
        lambda ax: plotting.plot_energy_decay(
            ax, T, np.exp(-T)[None] * (1 + 0.1 * RNG.random((5, 31))), rate=1.0
        ),
        None,
    ),
    "plot_angle_histogram": (lambda ax: plotting.plot_angle_histogram(ax, X2), None),
    "plot_cosine_similarities": (
        lambda ax: plotting.plot_cosine_similarities(ax, T, RNG.uniform(-1, 1, (31, 10))),
        None,
    ),
    "plot_dissipation_function": (
        lambda ax: plotting.plot_dissipation_function(
            ax, np.linspace(-1, 1, 21), -(np.linspace(-1, 1, 21) ** 2), lambda_bar=1.0, rate=1.0
        ),
        None,
    ),
    "plot_energy_staircase": (
        lambda ax: plotting.plot_energy_staircase(
            ax, NS(times=T, energies=-np.log1p(T), cluster_counts=np.maximum(8 - T // 0.5, 1))
        ),
        None,
    ),
    "plot_stability_ratios": (
        lambda ax: plotting.plot_stability_ratios(
            ax,
            {"run": NS(times=T, ratio=np.exp(0.1 * T))},
            bound=NS(times=T, log_constant=T),
        ),
        None,
    ),
    "plot_sample_vs_gaussian": (
        lambda ax: plotting.plot_sample_vs_gaussian(ax, RNG.normal(size=200), 0.0, 1.0),
        None,
    ),
    "plot_growth": (
        lambda ax: plotting.plot_growth(ax, [COV_PATH], ["run"], t_star=2.0),
        None,
    ),
    "plot_rank_histogram": (
        lambda ax: plotting.plot_rank_histogram(ax, NS(ranks=np.array([1, 1, 2]), d=3, bound=2)),
        None,
    ),
}


def overlaps(labels, renderer):
    """Pairs of visible, non-empty tick labels whose rendered boxes intersect."""
    boxes = [
        t.get_window_extent(renderer) for t in labels if t.get_visible() and t.get_text().strip()
    ]
    return [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]


def test_every_drawing_helper_is_in_the_table():
    drawing = {n for n in plotting.__all__ if n.startswith("plot_") and n != "plot_phases"}
    assert drawing == {name.split(" ")[0] for name in DRAWINGS}


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_helper_draws_a_labelled_figure_without_tick_overlap(name):
    draw, projection = DRAWINGS[name]
    fig = plt.figure(figsize=(4.0, 3.2))
    try:
        ax = fig.add_subplot(projection=projection)
        assert draw(ax) is not None
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for a in fig.axes:
            if not a.axison or a.get_label() == "<colorbar>":
                continue
            axes = [a.xaxis, a.yaxis] + ([a.zaxis] if projection == "3d" else [])
            for axis in axes:
                ticks = axis.get_ticklabels(which="both")
                shown = axis.get_visible() and any(
                    t.get_visible() and t.get_text().strip() for t in ticks
                )
                if not shown:
                    continue  # no tick labels (an image), nothing to name
                assert axis.get_label_text().strip(), f"{name}: an axis without a label"
                assert not overlaps(ticks, renderer), f"{name}: tick labels overlap"
    finally:
        plt.close(fig)


def test_curves_take_a_style_per_curve_and_an_optional_legend():
    """A reference curve dashed over a measured one, markers only for a scatter of counts."""
    fig, axes = plt.subplots(1, 2)
    try:
        measured, reference = plotting.plot_curves(
            axes[0],
            T,
            {"measured": np.exp(-T), "reference": np.exp(-T / 2)},
            xlabel="time $t$",
            ylabel="energy",
            styles={"reference": {"linestyle": "--", "color": "k"}},
            marker="o",
        )
        assert (measured.get_linestyle(), reference.get_linestyle()) == ("-", "--")
        assert measured.get_marker() == reference.get_marker() == "o"  # shared style kept
        assert reference.get_color() == "k" and measured.get_color() != "k"
        assert axes[0].get_legend() is not None
        (line,) = plotting.plot_curves(
            axes[1], T, {"E": np.exp(-T)}, xlabel="t", ylabel="E", logy=True, legend=False
        )
        assert axes[1].get_legend() is None and axes[1].get_yscale() == "log"
        np.testing.assert_array_equal(line.get_ydata(), np.exp(-T))
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    "helper, projection",
    [
        (plotting.plot_disk_trajectories, None),
        # the cone drawn high enough to hold the ends (the trace reaches 4.25)
        (functools.partial(plotting.plot_cone_trajectories, height=5.0), "3d"),
    ],
    ids=["disk", "cone"],
)
def test_covariance_paths_end_with_a_dot_or_with_a_cross_at_a_blowup(helper, projection):
    """Where the paths go is read from their ends: in the disk and in the full cone alike."""
    blown = NS(**{**vars(COV_PATH), "blew_up": True, "blowup_time": float(T[-1])})
    fig = plt.figure()
    try:
        ax = fig.add_subplot(projection=projection)
        paths = helper(ax, [COV_PATH, blown])
        ends = [line for line in ax.lines if line not in paths]
        assert [line.get_marker() for line in ends] == ["o", "x"]
        last = cone_coordinates(COV_PATH.covariances[-1:])[0]
        if projection == "3d":
            np.testing.assert_allclose(np.ravel(ends[0].get_data_3d()), last)
        else:
            np.testing.assert_allclose(np.ravel(ends[0].get_xydata()), last[:2] / last[2])
    finally:
        plt.close(fig)


def test_staircase_counts_clusters_in_whole_numbers():
    """The twin axis of cluster counts (log scale, 45 down to 2 clusters) is labelled 2, 5, 10,
    20, not 2 x 10^0, 4 x 10^1: counts are read as numbers."""
    counts = np.maximum(45 - 15 * np.arange(T.size), 2)
    fig, ax = plt.subplots()
    try:
        plotting.plot_energy_staircase(ax, NS(times=T, energies=np.log1p(T), cluster_counts=counts))
        fig.canvas.draw()
        (twin,) = [other for other in fig.axes if other is not ax]
        low, high = twin.get_ylim()
        shown = [
            tick.get_text()
            for tick, value in zip(twin.get_yticklabels(), twin.get_yticks(), strict=True)
            if low <= value <= high
        ]
        assert shown == ["2", "5", "10", "20"]
        assert not any(tick.get_text() for tick in twin.get_yticklabels(minor=True))
    finally:
        plt.close(fig)


def test_limit_grid_draws_means_with_two_standard_error_bars_at_labelled_depths():
    """The bars are mean +- 2 SE over the paths, at the depths, each depth labelled."""
    sup = np.abs(RNG.normal(size=(5, 3, 2)))
    error = NS(sup=sup, grid=None, widths=[8, None], depths=np.array([4, 16, 64]))
    fig, ax = plt.subplots()
    try:
        bars = plotting.plot_limit_grid(ax, error)
        assert [b.get_label() for b in bars] == ["m = 8", "m = inf"]
        for j, container in enumerate(bars):
            line, _, (segments,) = container.lines
            mean = sup[:, :, j].mean(axis=0)
            np.testing.assert_array_equal(line.get_xdata(), error.depths)
            # a mean and a standard deviation over 5 paths: round-off only
            np.testing.assert_allclose(line.get_ydata(), mean, rtol=1e-14)
            se = sup[:, :, j].std(axis=0, ddof=1) / np.sqrt(5)
            spans = np.array([seg[1, 1] - seg[0, 1] for seg in segments.get_segments()])
            np.testing.assert_allclose(spans, 2 * plotting.BAND_SE * se, rtol=1e-12)
        fig.canvas.draw()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "16", "64"]
    finally:
        plt.close(fig)


def test_phases_panels_three_a_row():
    fig, axes = plt.subplots(2, 3, figsize=(9, 6))
    try:
        out = plotting.plot_phases(axes.flat, PHASES)
        assert len(out) == 5 and not axes.flat[-1].axison  # the sixth panel is switched off
    finally:
        plt.close(fig)


def test_loglog_fit_recovers_the_power_law():
    fig, ax = plt.subplots()
    try:
        x = np.geomspace(1e-3, 1e-1, 6)
        arts = plotting.plot_loglog(ax, x, 3 * x**1.5, xlabel="h", ylabel="e", fit=True)
        # exact power law: the least-squares slope is 1.5 up to round-off in the logs
        assert arts[1].get_label() == "fit: slope 1.50"
        np.testing.assert_allclose(arts[1].get_ydata(), 3 * x**1.5, rtol=1e-12)
        # an exact zero is drawn at the floor, not dropped
        (line, *_) = plotting.plot_loglog(ax, x, np.zeros(6), xlabel="h", ylabel="e")
        np.testing.assert_array_equal(line.get_ydata(), plotting.LOG_FLOOR)
        with pytest.raises(ValueError, match="`x` and `y`"):
            plotting.plot_loglog(ax, -x, x, xlabel="h", ylabel="e")
    finally:
        plt.close(fig)


def test_loglog_guides_pass_through_the_first_point_and_marks_sit_at_their_value():
    """A guide of slope p is y_0 (x / x_0)^p: through the first point, log-slope p (one division
    and one power per point: a few ulps, 1e-14 relative); a mark is a vertical line at its x.
    x_0 = 10, not 1, so that a guide through the origin of log x is told apart."""
    fig, ax = plt.subplots()
    try:
        x = np.array([10.0, 20.0, 40.0, 80.0])
        y = np.array([5.0, 2.0, 1.5, 0.5])
        guides = {"slope 2": 2.0, "slope -1/2": -0.5}
        plotting.plot_loglog(ax, x, y, xlabel="n", ylabel="e", guides=guides, marks={"m": 30.0})
        lines = {line.get_label(): line for line in ax.get_lines()}
        for name, p in guides.items():
            assert lines[name].get_ydata()[0] == pytest.approx(y[0], rel=1e-14)
            np.testing.assert_allclose(lines[name].get_xdata(), x, rtol=0)
            np.testing.assert_allclose(lines[name].get_ydata(), y[0] * (x / x[0]) ** p, rtol=1e-14)
        np.testing.assert_array_equal(lines["m"].get_xdata(), [30.0, 30.0])
    finally:
        plt.close(fig)


def test_relative_curves_are_divided_by_their_first_value():
    """relative=True draws v / v[0] (E(t) / E(0)): 1 at the first point, exact for the powers of
    two used here; a curve that is not constant tells v[0] from any other divisor."""
    fig, ax = plt.subplots()
    try:
        t = np.arange(4.0)
        v = np.array([8.0, 4.0, 2.0, 1.0])
        (line,) = plotting.plot_curves(ax, t, {"E": v}, xlabel="t", ylabel="E", relative=True)
        np.testing.assert_array_equal(line.get_ydata(), v / 8.0)
    finally:
        plt.close(fig)


def test_dissipation_function_marks_minus_lambda_bar_at_one_and_the_level_minus_rate():
    """Lemma 4.1's picture: F against u, the value -lambda_bar at u = 1 and the infimum level
    -lambda_bar' (both signs flipped from the positive constants passed); data stored as given."""
    fig, ax = plt.subplots()
    try:
        u = np.linspace(-1.0, 1.0, 5)
        F = -0.25 - 0.5 * u**2
        line = plotting.plot_dissipation_function(ax, u, F, lambda_bar=0.75, rate=0.5)
        np.testing.assert_array_equal(line.get_xdata(), u)
        np.testing.assert_array_equal(line.get_ydata(), F)
        others = [other for other in ax.get_lines() if other is not line]
        level = [
            o
            for o in others
            if np.ptp(np.asarray(o.get_ydata(), float)) == 0 and o.get_linestyle() == ":"
        ]
        assert [tuple(o.get_ydata()) for o in level] == [(-0.5, -0.5)]
        marks = [o for o in others if o.get_marker() == "o"]
        assert [(tuple(o.get_xdata()), tuple(o.get_ydata())) for o in marks] == [((1.0,), (-0.75,))]
    finally:
        plt.close(fig)


def _shown_labels(axis, at):
    """(position, text) of the visible, labelled ticks of `axis` inside its view, in order (`at`:
    0 for x)."""
    low, high = sorted(axis.get_view_interval())
    return [
        (t.get_position()[at], t.get_text())
        for t in axis.get_ticklabels(which="both")
        if t.get_visible() and t.get_text().strip() and low <= t.get_position()[at] <= high
    ]


def _shown_ticks(axis, at):
    """Positions of the visible, labelled ticks of `axis` inside its view (`at`: 0 for x)."""
    return {round(position, 6) for position, _ in _shown_labels(axis, at)}


def test_curves_on_log_axes_label_the_2_and_5_ticks_without_collisions():
    """plot_curves labels its log axes as plot_loglog does: 50, 100, 200, 500 over n = 50 to 800
    (matplotlib's default labels 300 and 400 too, and they collided on the stability page's
    6-inch figure), and 2, 5, 10 for values from 1 to 20."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    try:
        ns = [50, 100, 200, 400, 800]
        plotting.plot_curves(
            ax, ns, {"C": [1.0, 2.0, 5.0, 10.0, 20.0]}, xlabel="n", ylabel="C", logx=True, logy=True
        )
        fig.canvas.draw()
        assert _shown_ticks(ax.xaxis, 0) == {50, 100, 200, 500}
        assert _shown_ticks(ax.yaxis, 1) == {1, 2, 5, 10, 20}
        for axis in (ax.xaxis, ax.yaxis):
            assert not overlaps(axis.get_ticklabels(which="both"), fig.canvas.get_renderer())
        # within a factor 2 (one 1-2-5 mark or none) matplotlib's own labels stay: 0.3 and 0.4
        # over the masked page's distances 0.24 to 0.43, not eight labels every 0.025
        ax.clear()
        plotting.plot_curves(
            ax, [0, 1, 2], {"W": [0.24, 0.3, 0.43]}, xlabel="t", ylabel="W", logy=True
        )
        fig.canvas.draw()
        assert _shown_ticks(ax.yaxis, 1) == {0.3, 0.4}
    finally:
        plt.close(fig)


def test_loglog_labels_the_2_and_5_ticks_over_about_a_decade():
    """Over one to two decades powers of ten alone give one or two labels: the ticks at 2 and 5
    times them are labelled too, and still do not collide on a panel a third of a page wide
    (the chaos study's N = 8 to 64, whose 50 went unlabelled with matplotlib's defaults)."""
    fig, ax = plt.subplots(figsize=(3.8, 3.2))
    try:
        plotting.plot_loglog(
            ax, [8, 16, 32, 64], [0.8, 0.45, 0.3, 0.15], xlabel="N", ylabel="E", fit=True
        )
        fig.canvas.draw()
        for axis, at in ((ax.xaxis, 0), (ax.yaxis, 1)):
            shown = _shown_ticks(axis, at)
            assert shown == ({10, 20, 50} if at == 0 else {0.2, 0.5}), shown
            assert not overlaps(axis.get_ticklabels(which="both"), fig.canvas.get_renderer())
    finally:
        plt.close(fig)


def test_short_log_axes_read_as_round_decimals():
    """Where at most one 1-2-5 mark lies among the values (within a factor of 4), a log axis is
    labelled at round decimals, as a linear one: 1 and 1.5 over the sigmoid ratios 1 to 1.6, where
    matplotlib printed "1.5×10^0"; powers of ten stay for tiny values. The ticks are placed by
    the library, not by matplotlib's locators, whose choices changed between its releases."""
    fig, ax = plt.subplots(figsize=(4.0, 3.0))
    try:
        for values, expected in (
            ([1.0, 1.3, 1.6], {1.0: "1", 1.5: "1.5"}),
            (
                [2.4e-7, 3e-7, 4.3e-7],
                {3e-7: r"$\mathdefault{3\times10^{-7}}$", 4e-7: r"$\mathdefault{4\times10^{-7}}$"},
            ),
        ):
            ax.clear()
            plotting.plot_curves(ax, [0, 1, 2], {"r": values}, xlabel="t", ylabel="r", logy=True)
            fig.canvas.draw()
            shown = _shown_labels(ax.yaxis, 1)
            assert [text for _, text in shown] == list(expected.values())
            np.testing.assert_allclose([at for at, _ in shown], list(expected), rtol=1e-12)
            assert not overlaps(ax.yaxis.get_ticklabels(which="both"), fig.canvas.get_renderer())
    finally:
        plt.close(fig)


def test_log_ticks_count_the_curves_already_on_the_axes():
    """A second plot_loglog on the same axes, with errors at rounding (1e-14 to 3e-14), keeps the
    powers of ten of the first curve's twelve decades (the softmax interpolation page): labelled
    from its own values alone, its linear ticks every 5e-15 collided in one blot."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    try:
        taus = np.array([0.3, 0.2, 0.1, 0.01])
        plotting.plot_loglog(ax, taus, [1e2, 1.0, 1e-8, 1e-12], xlabel="t", ylabel="e", label="a")
        plotting.plot_loglog(
            ax, taus, [2e-14, 3e-14, 1e-14, 2.5e-14], xlabel="t", ylabel="e", label="b"
        )
        fig.canvas.draw()
        texts = [text for _, text in _shown_labels(ax.yaxis, 1)]
        assert len(texts) >= 4, texts
        assert all(re.fullmatch(r"\$\\mathdefault\{10\^\{-?\d+\}\}\$", t) for t in texts), texts
        assert not overlaps(ax.yaxis.get_ticklabels(which="both"), fig.canvas.get_renderer())
    finally:
        plt.close(fig)


def test_log_ticks_of_a_shared_axis_count_every_panel():
    """Panels that share their y axis share its ticks: they are chosen from every panel's data
    (0.15 to 0.9 here: 0.2 and 0.5), not from the panel drawn last (0.5 to 0.9 alone, which
    would be labelled at 0.2, 0.4, 0.6 and 0.8)."""
    fig, axes = plt.subplots(1, 2, figsize=(6.0, 3.0), sharey=True)
    try:
        for ax, ys in zip(axes, ([0.3, 0.22, 0.15], [0.9, 0.7, 0.5]), strict=True):
            plotting.plot_loglog(ax, [8, 16, 32], ys, xlabel="N", ylabel="E")
        fig.canvas.draw()
        assert _shown_ticks(axes[0].yaxis, 1) == {0.2, 0.5}
    finally:
        plt.close(fig)


def test_house_style_colours_survive_greyscale():
    """The first four colours of the cycle have distinct lightness (greyscale print)."""
    from matplotlib.colors import to_rgb

    grey = [np.dot(to_rgb(c), [0.299, 0.587, 0.114]) for c in plotting.OKABE_ITO[:4]]
    assert min(abs(a - b) for a, b in itertools.combinations(grey, 2)) > 0.04
    assert plt.rcParams["axes.prop_cycle"].by_key()["color"] == list(plotting.OKABE_ITO)


def test_the_overlap_check_sees_crowded_tick_labels():
    """The check above can fail: forty long labels on a 4-inch axis do collide."""
    fig, ax = plt.subplots(figsize=(4.0, 3.0))
    try:
        ax.set_xticks(range(40), [f"label {k}" for k in range(40)])
        fig.canvas.draw()
        assert overlaps(ax.xaxis.get_ticklabels(), fig.canvas.get_renderer())
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------------------------
# Arguments: each helper checks them at its entry, as the rest of the library does (a
# TypeError or ValueError naming the argument and the fix, never an error from inside
# matplotlib or numpy, nor a RuntimeWarning or ComplexWarning).


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_helper_refuses_an_axes_that_is_not_one(name):
    """None, a number or an array in place of the axes: a TypeError naming `ax`."""
    draw, _ = DRAWINGS[name]
    for bad in (None, 1.0, np.eye(2)):
        with pytest.raises(TypeError, match="`ax`"):
            draw(bad)


def _states_with_positions():
    positions = np.ones((11, 12, 1)) * np.linspace(0, 1, 12)[:, None]
    return np.concatenate([positions, TRAJ.states], axis=2)


#: name -> (call(ax), exception, the argument its message names). One entry per check added.
BAD_ARGUMENTS = {
    "tokens: negative size": (
        lambda ax: plotting.plot_tokens(ax, X2, size=-1.0),
        ValueError,
        "size",
    ),
    "tokens: beyond the drawable range": (
        lambda ax: plotting.plot_tokens(ax, 1e308 * X2),
        ValueError,
        "X",
    ),
    "sphere: unknown colour": (
        lambda ax: plotting.plot_sphere(ax, color="no-such-colour"),
        ValueError,
        "color",
    ),
    "velocity field: not a field": (
        lambda ax: plotting.plot_velocity_field(ax, None, X2),
        TypeError,
        "field",
    ),
    "circle snapshots: index out of range": (
        lambda ax: plotting.plot_circle_snapshots(ax, TRAJ.states, [0, 99]),
        ValueError,
        "indices",
    ),
    "circle snapshots: complex states": (
        lambda ax: plotting.plot_circle_snapshots(ax, TRAJ.states + 1j, [0]),
        TypeError,
        "states",
    ),
    "trajectories: no state": (
        lambda ax: plotting.plot_trajectories(ax, np.zeros((0, 3, 2))),
        ValueError,
        "trajectory",
    ),
    "trajectories: opacity above one": (
        lambda ax: plotting.plot_trajectories(ax, TRAJ, alpha=2.0),
        ValueError,
        "alpha",
    ),
    "causal paths: no position column": (
        lambda ax: plotting.plot_causal_paths(ax, TRAJ.states),
        ValueError,
        "states",
    ),
    "causal paths: unknown colour map": (
        lambda ax: plotting.plot_causal_paths(ax, _states_with_positions(), cmap="no-such-map"),
        ValueError,
        "cmap",
    ),
    "causal paths: negative sink count": (
        lambda ax: plotting.plot_causal_paths(ax, _states_with_positions(), n_sink=-1),
        ValueError,
        "n_sink",
    ),
    "moves: before and after differ": (
        lambda ax: plotting.plot_moves(ax, X2, X2[:3]),
        ValueError,
        "before",
    ),
    "token sets: not a list": (
        lambda ax: plotting.plot_token_sets(ax, None),
        TypeError,
        "sequences",
    ),
    "phases: not an interpolator": (
        lambda ax: plotting.plot_phases([ax], 1.0),
        TypeError,
        "interp",
    ),
    "covariance ellipse: indefinite": (
        lambda ax: plotting.plot_covariance_ellipse(ax, [0, 0], [[1.0, 0.0], [0.0, -1.0]]),
        ValueError,
        "cov",
    ),
    "covariance ellipse: mean of three": (
        lambda ax: plotting.plot_covariance_ellipse(ax, [0, 0, 0], np.eye(2)),
        ValueError,
        "mean",
    ),
    "gaussian cloud: infinite n_std": (
        lambda ax: plotting.plot_gaussian_cloud(ax, X2, [0, 0], np.eye(2), n_std=np.inf),
        ValueError,
        "n_std",
    ),
    "disk trajectories: no path": (
        lambda ax: plotting.plot_disk_trajectories(ax, None),
        TypeError,
        "solutions",
    ),
    "growth: a label short": (
        lambda ax: plotting.plot_growth(ax, [COV_PATH, COV_PATH], ["run"]),
        ValueError,
        "labels",
    ),
    "attention matrix: empty": (
        lambda ax: plotting.plot_attention_matrix(ax, np.zeros((0, 3))),
        ValueError,
        "P",
    ),
    "cosine matrix: tokens off the sphere": (
        lambda ax: plotting.plot_cosine_matrix(ax, 1e200 * X2),
        ValueError,
        "X",
    ),
    "cosine matrix: one token": (
        lambda ax: plotting.plot_cosine_matrix(ax, X2[:1]),
        ValueError,
        "X",
    ),
    "energy landscape: values off the grid": (
        lambda ax: plotting.plot_energy_landscape(ax, np.arange(3.0), np.arange(4.0), np.eye(3)),
        ValueError,
        "values",
    ),
    "energy landscape: fractional levels": (
        lambda ax: plotting.plot_energy_landscape(
            ax, np.arange(3.0), np.arange(3.0), np.eye(3), levels=2.5
        ),
        ValueError,
        "levels",
    ),
    "noise exponent table: no rows": (
        lambda ax: plotting.plot_noise_exponent_table(ax, None),
        TypeError,
        "rows",
    ),
    "angle histogram: complex tokens": (
        lambda ax: plotting.plot_angle_histogram(ax, X2 + 1j),
        TypeError,
        "X",
    ),
    "sample vs gaussian: zero variance": (
        lambda ax: plotting.plot_sample_vs_gaussian(ax, X2[:, 0], 0.0, 0.0),
        ValueError,
        "var",
    ),
    "sample vs gaussian: empty sample": (
        lambda ax: plotting.plot_sample_vs_gaussian(ax, np.array([]), 0.0, 1.0),
        ValueError,
        "x",
    ),
    "rank histogram: infinite width": (
        lambda ax: plotting.plot_rank_histogram(
            ax, NS(ranks=np.array([1, 2]), d=3, bound=2), width=np.inf
        ),
        ValueError,
        "width",
    ),
    "curves: not a mapping": (
        lambda ax: plotting.plot_curves(ax, T, np.exp(-T), xlabel="t", ylabel="E"),
        TypeError,
        "curves",
    ),
    "curves: a curve of another length": (
        lambda ax: plotting.plot_curves(ax, T, {"E": np.exp(-T[1:])}, xlabel="t", ylabel="E"),
        ValueError,
        "curves",
    ),
    "curves: relative to a zero": (
        lambda ax: plotting.plot_curves(ax, T, {"E": T}, xlabel="t", ylabel="E", relative=True),
        ValueError,
        "curves",
    ),
    "curves: log axis beyond its range": (
        lambda ax: plotting.plot_curves(
            ax, T, {"E": np.geomspace(1e-150, 1e100, T.size)}, xlabel="t", ylabel="E", logy=True
        ),
        ValueError,
        "curves",
    ),
    "dissipation function: F of another length": (
        lambda ax: plotting.plot_dissipation_function(
            ax, np.linspace(-1, 1, 5), np.zeros(4), lambda_bar=1.0, rate=1.0
        ),
        ValueError,
        "F",
    ),
    "energy staircase: not a result": (
        lambda ax: plotting.plot_energy_staircase(ax, 1.0),
        TypeError,
        "result",
    ),
    "stability ratios: unknown scale": (
        lambda ax: plotting.plot_stability_ratios(
            ax, {"run": NS(times=T, ratio=np.exp(T))}, yscale="no-such-scale"
        ),
        ValueError,
        "yscale",
    ),
    "mc estimate: x of another length": (
        lambda ax: plotting.plot_mc_estimate(
            ax, T[1:], NS(mean=np.exp(-T), stderr=0.01 * np.ones_like(T))
        ),
        ValueError,
        "x",
    ),
    "mc estimate: no legend entry": (
        lambda ax: plotting.plot_mc_estimate(
            ax, T, NS(mean=np.exp(-T), stderr=0.01 * np.ones_like(T)), label=None
        ),
        TypeError,
        "label",
    ),
    "energy decay: one path": (
        lambda ax: plotting.plot_energy_decay(ax, T, np.exp(-T)[None]),
        ValueError,
        "energies",
    ),
    "energy decay: an infinite energy": (
        lambda ax: plotting.plot_energy_decay(ax, T[:2], np.array([[1.0, np.inf], [1.0, 0.5]])),
        ValueError,
        "energies",
    ),
    "energy decay: depths not increasing": (
        lambda ax: plotting.plot_energy_decay(ax, T[::-1], np.exp(-T)[None].repeat(2, 0)),
        ValueError,
        "times",
    ),
    "cosine similarities: a time short": (
        lambda ax: plotting.plot_cosine_similarities(ax, T[1:], np.zeros((31, 3))),
        ValueError,
        "cosines",
    ),
    "loglog: fit as a string": (
        lambda ax: plotting.plot_loglog(ax, T[1:], T[1:], xlabel="x", ylabel="y", fit="yes"),
        ValueError,
        "fit",
    ),
    "loglog: complex data": (
        lambda ax: plotting.plot_loglog(ax, T[1:] + 1j, T[1:], xlabel="x", ylabel="y"),
        TypeError,
        "x",
    ),
    "loglog: beyond the range of a log axis": (
        lambda ax: plotting.plot_loglog(ax, np.array([1.0, 1e300]), T[1:3], xlabel="x", ylabel="y"),
        ValueError,
        "x",
    ),
    "tikhonov: not a sweep": (
        lambda ax: plotting.plot_tikhonov(ax, None),
        TypeError,
        "sweep",
    ),
    "limit grid: not an error study": (
        lambda ax: plotting.plot_limit_grid(ax, np.eye(2)),
        TypeError,
        "error",
    ),
    "figure png: not a figure": (
        lambda ax: plotting.figure_png(None),
        TypeError,
        "fig",
    ),
    "figure png: zero scale": (
        lambda ax: plotting.figure_png(ax.figure, scale=0.0),
        ValueError,
        "scale",
    ),
    "figure png: an image too large to render": (
        lambda ax: plotting.figure_png(ax.figure, scale=1e6),
        ValueError,
        "scale",
    ),
    # 6.4 x 4.8 inches at 100 dpi: 11 x 640 x 11 x 480 = 37 million pixels, each side far
    # below Agg's 65536 (at scale 16: 10 s and 0.9 GB; at 29 the fuzz's call passed 20 s)
    "figure png: an image of too many pixels for a screen": (
        lambda ax: plotting.figure_png(ax.figure, scale=11.0, dpi=100.0),
        ValueError,
        "scale",
    ),
    # drawn at its dpi, a frame of 4 x 4 inches at 0.1 dpi has no pixel (PIL: "cannot write
    # empty image", naming no argument)
    "animate: an image without a pixel": (
        lambda ax: plotting.animate(TRAJ, dpi=0.1),
        ValueError,
        "dpi",
    ),
    "figure png: an image without a pixel": (
        lambda ax: plotting.figure_png(ax.figure, scale=1e-3),
        ValueError,
        "scale",
    ),
    "animate: an image of too many pixels for a screen": (
        lambda ax: plotting.animate(TRAJ, figsize=(6.4, 4.8), dpi=1100.0),
        ValueError,
        "dpi",
    ),
    "animate: an image too large to render": (
        lambda ax: plotting.animate(TRAJ, dpi=1e6),
        ValueError,
        "dpi",
    ),
    "animate: unknown colour": (
        lambda ax: plotting.animate(TRAJ, color="no-such-colour"),
        ValueError,
        "color",
    ),
    "animate layers: not a transformer": (
        lambda ax: plotting.animate_layers(None, [X2]),
        TypeError,
        "transformer",
    ),
    "animation html: not a str": (
        lambda ax: plotting.AnimationHTML(1),
        TypeError,
        "html",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_helper_names_the_argument_it_refuses(case):
    call, exception, argument = BAD_ARGUMENTS[case]
    fig, ax = plt.subplots()
    try:
        with pytest.raises(exception, match=f"`{argument}"):
            call(ax)
    finally:
        plt.close(fig)


def test_data_up_to_the_drawable_bounds_renders_without_warning():
    """Data at MAX_DRAWABLE on a linear axis, and from 1e-100 to 1e100 on log axes (a reach of
    MAX_LOG_REACH = 300 decades), renders on a third of a figure (warnings are errors here);
    the bounds are where the checks refuse."""
    big, log_big = 1e300, 1e100  # MAX_DRAWABLE; 100 + (100 - (-100)) = MAX_LOG_REACH
    fig, axes = plt.subplots(1, 3)
    try:
        plotting.plot_tokens(axes[0], big * np.array([[1.0, -1.0], [-1.0, 1.0]]))
        span = np.array([1 / log_big, log_big])
        plotting.plot_loglog(axes[1], span, span, xlabel="x", ylabel="y")
        plotting.plot_energy_decay(axes[2], np.array([0.0, 1.0]), np.stack([span, span]))
        fig.canvas.draw()
        with pytest.raises(ValueError, match="`X`"):
            plotting.plot_tokens(axes[0], np.nextafter(big, np.inf) * np.eye(2))
        with pytest.raises(ValueError, match="`x`"):
            plotting.plot_loglog(axes[1], 1.01 * span, span, xlabel="x", ylabel="y")
    finally:
        plt.close(fig)


def test_energy_decay_bound_starts_at_the_first_depth():
    """The dashed bound is E(t0) exp(-rate (t - t0)): it meets the mean at the first depth,
    wherever the depths start, to round-off."""
    times = np.array([2.0, 3.0, 5.0])
    energies = np.array([[1.0, 0.5, 0.2], [0.8, 0.4, 0.1]])
    fig, ax = plt.subplots()
    try:
        plotting.plot_energy_decay(ax, times, energies, rate=0.5)
        bound = ax.get_lines()[-1]
        expected = energies.mean(axis=0)[0] * np.exp(-0.5 * (times - times[0]))
        np.testing.assert_allclose(bound.get_ydata(), expected, rtol=1e-15)
    finally:
        plt.close(fig)


def test_curves_leave_an_infinite_value_out_of_the_line():
    """+inf (a documented infinite energy) is a gap in its line, drawn without a warning;
    NaN is refused by name."""
    energy = np.where(T < 1.0, np.inf, np.exp(-T))
    fig, ax = plt.subplots()
    try:
        (line,) = plotting.plot_curves(ax, T, {"E": energy}, xlabel="t", ylabel="E", logy=True)
        fig.canvas.draw()
        drawn = np.asarray(line.get_ydata())
        assert np.all(np.isnan(drawn[T < 1.0]))
        np.testing.assert_array_equal(drawn[T >= 1.0], np.exp(-T[T >= 1.0]))
        with pytest.raises(ValueError, match="`curves"):
            plotting.plot_curves(ax, T, {"E": np.full(T.shape, np.nan)}, xlabel="t", ylabel="E")
    finally:
        plt.close(fig)
