"""Tests of token_dynamics.interpolation.count_moved_points: the points a layer moves apart
from the common translation."""

import numpy as np
import pytest

from token_dynamics.interpolation import (
    build_hardmax_interpolator,
    count_moved_points,
    hat_move,
    overlapping_dataset,
)


@pytest.mark.statement("interp-lem-hat")
@pytest.mark.parametrize("seed", range(4))
def test_a_hat_layer_moves_one_point(seed):
    """The hat layer moves p (wherever it occurs, here twice) and fixes every other point, with
    or without a common translation; rounding moves the others by ~1e-15, far below tol."""
    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(9, 3))
    layer = hat_move(pts, pts[2], rng.normal(size=3), rng=seed)
    seqs = [pts[:5], np.vstack([pts[5:], pts[2]])]  # p in both sequences
    assert count_moved_points(seqs, [layer(s) for s in seqs]) == 1
    shifted = hat_move(pts, pts[2], rng.normal(size=3), translation=[1.0, -2.0, 0.5], rng=seed)
    assert count_moved_points(seqs, [shifted(s) for s in seqs]) == 1


@pytest.mark.statement("interp-prop-phases")
def test_the_first_layer_of_the_construction_moves_one_point():
    """The first feed-forward layer of the hardmax construction is a hat layer after a common
    translation: one distinct point moves differently (the book's demo data)."""
    rng = np.random.default_rng(8)
    X, Y = overlapping_dataset(4, 2, pool_size=5, max_length=4, rng=rng)
    states = build_hardmax_interpolator(X, Y, rng=rng).transformer.layer_states(X)
    assert count_moved_points(states[0], states[1]) == 1


def test_translation_moves_nothing_and_inputs_are_kept():
    X = np.random.default_rng(1).normal(size=(6, 2))
    copy = X.copy()
    assert count_moved_points([X], [X + np.array([3.0, -1.0])]) == 0
    assert count_moved_points([X], [X]) == 0
    np.testing.assert_array_equal(X, copy)


def test_tol_separates_moves():
    """A move of 1e-6 counts at tol 1e-9 and not at tol 1e-3."""
    X = np.random.default_rng(2).normal(size=(5, 2))
    Y = X.copy()
    Y[0] += 1e-6
    assert count_moved_points([X], [Y]) == 1
    assert count_moved_points([X], [Y], tol=1e-3) == 0


@pytest.mark.parametrize(
    ("before", "after", "kwargs", "error", "match"),
    [
        ([np.zeros((3, 2))], [np.zeros((2, 2))], {}, ValueError, "same shapes"),
        ([np.zeros((3, 2))], [np.zeros((3, 3))], {}, ValueError, "after"),
        ([np.zeros((3, 2))], [np.zeros((3, 2))], {"tol": 0.0}, ValueError, "`tol`"),
        ([np.full((3, 2), np.nan)], [np.zeros((3, 2))], {}, ValueError, "before"),
    ],
)
def test_bad_arguments(before, after, kwargs, error, match):
    with pytest.raises(error, match=match):
        count_moved_points(before, after, **kwargs)
