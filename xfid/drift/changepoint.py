"""Change points in a key's error series across checks: binary segmentation with Welch's t-test.

For a segment x[lo..hi), every split i with at least `min_size` points on each side is scored
by Welch's t-test between the (up to) `window` points before i and the `window` points from i
on, both inside the segment. Among the splits whose p-value is below `alpha`, the one with the
largest |t| is a change point; both halves are then searched the same way. Two constant sides
count as t = inf, p = 0 when they differ and t = 0, p = 1 when equal. The p-values are not
corrected for the number of splits tried. Many small steps in one direction add up to a
significant split, so slow drift is found as well as a jump; a single outlier rarely is (it
raises the variance of its side as much as its mean: tests/test_changepoint.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ChangePoint:
    """One split: where the new level starts, the means of the two halves, its p-value."""

    index: int  # first point of the new regime
    before_mean: float
    after_mean: float
    p_value: float

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "before_mean": self.before_mean, "after_mean": self.after_mean,
                "p_value": self.p_value}


def _welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(|t|, p) of Welch's unequal-variance t-test of a against b."""
    from scipy import stats

    if np.allclose(a, a[0]) and np.allclose(b, b[0]):
        return (math.inf, 0.0) if not math.isclose(a[0], b[0], rel_tol=1e-12, abs_tol=1e-15) else (0.0, 1.0)
    res = stats.ttest_ind(a, b, equal_var=False)
    t, p = float(res.statistic), float(res.pvalue)
    return (0.0, 1.0) if math.isnan(t) else (abs(t), p)


def change_points(series: list[float] | np.ndarray, *, alpha: float = 0.01, min_size: int = 3,
                  window: int = 30) -> list[ChangePoint]:
    """Change points of `series`, sorted by index (empty for fewer than 2 * `min_size` points).

    `before_mean` / `after_mean` are the means of the whole halves of the segment that was
    split, not only of the `window` points the test compared.
    """
    x = np.asarray(series, dtype=float)
    found: list[ChangePoint] = []

    def split(lo: int, hi: int) -> None:
        best: tuple[float, int, float] | None = None
        for i in range(lo + min_size, hi - min_size + 1):
            a, b = x[max(lo, i - window):i], x[i:min(hi, i + window)]
            t, p = _welch(a, b)
            if p < alpha and (best is None or t > best[0]):
                best = (t, i, p)
        if best is None:
            return
        _, i, p = best
        found.append(ChangePoint(i, float(x[lo:i].mean()), float(x[i:hi].mean()), p))
        split(lo, i)
        split(i, hi)

    split(0, len(x))
    return sorted(found, key=lambda c: c.index)
