"""Change-point detection on seeded synthetic series."""

from __future__ import annotations

import numpy as np

from xfid.drift.changepoint import change_points


def test_a_jump_is_found_where_it_happens():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0.02, 0.005, 20), rng.normal(0.10, 0.005, 20)]
    cps = change_points(x)
    assert [c.index for c in cps] == [20]
    assert abs(cps[0].before_mean - 0.02) < 0.003 and abs(cps[0].after_mean - 0.10) < 0.003


def test_slow_drift_of_many_small_steps_is_found():
    rng = np.random.default_rng(1)
    # 40 checks, each 0.25 pp worse than the last: no single step exceeds a 5 pp threshold
    x = 0.02 + 0.0025 * np.arange(40) + rng.normal(0, 0.002, 40)
    assert np.max(np.diff(x)) < 0.05
    assert len(change_points(x)) >= 1


def test_noise_and_a_single_outlier_are_not_change_points():
    rng = np.random.default_rng(2)
    x = rng.normal(0.05, 0.01, 40)
    x[17] = 0.5
    assert change_points(x) == []


def test_short_series_has_no_change_points():
    assert change_points([0.1, 0.5]) == []
    assert change_points([]) == []
