"""Change points in a series across checks (a key's error, a pair's MAPE): E-divisive means.

The method of Matteson & James (2014), as Apache Otava (formerly Hunter) uses it for
performance series, in its recursive form:

1. For a segment x[lo..hi) and every split τ with at least `min_size` points on each side,
   the divergence of the two sides X = x[lo..τ), Y = x[τ..hi) is the energy statistic

       Q(τ) = m·n/(m+n) · ( 2/(m·n) Σ|xᵢ−yⱼ|^α − 1/C(m,2) Σ_{i<k}|xᵢ−xₖ|^α − 1/C(n,2) Σ_{j<l}|yⱼ−yₗ|^α )

   with m = |X|, n = |Y| and α = `exponent` in (0, 2) (1 by default). It is large when the
   two sides differ in distribution (level or spread), and it is estimated from all pairs,
   so one outlier moves it little.
2. The split with the largest Q is the candidate. Its significance is a permutation test:
   the segment's values are shuffled `permutations` times (a fixed seed, so the same series
   always gives the same answer), the largest Q over all splits is taken each time, and
   p = (1 + #{shuffles whose max Q ≥ the observed}) / (1 + permutations).
3. When p < `alpha`, τ is a change point and both sides are searched the same way.

Each segment's shuffles come from a generator seeded with (seed, lo, hi), so the result does
not depend on the order in which segments are searched. Q for every split of a segment is
computed at once from the 2-D prefix sums of the distance matrix (O(n²) per shuffle);
`change_points_reference` is the plain triple loop it is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

ALPHA = 0.01
"""Default significance of a change point (the permutation p-value must be below it; with 199
shuffles the smallest p is 0.005, so a clear change passes with room)."""
MIN_SIZE = 3
"""Fewest points on either side of a change point."""
PERMUTATIONS = 199
"""Shuffles per permutation test (p can be as small as 1/200)."""
EXPONENT = 1.0
"""α of the energy distance |x−y|^α; must lie in (0, 2)."""
SEED = 20141
"""Seed of the permutation tests (fixed: the same series always gives the same change points)."""


@dataclass(frozen=True)
class ChangePoint:
    """One split: where the new level starts, the means of the two sides, the statistic, its p-value."""

    index: int  # first point of the new regime
    before_mean: float
    after_mean: float
    p_value: float
    q: float = 0.0  # the energy statistic Q of the split

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "before_mean": self.before_mean, "after_mean": self.after_mean,
                "p_value": self.p_value, "q": self.q}


def _q_all(d: np.ndarray, min_size: int) -> np.ndarray:
    """Q(τ) for τ = min_size .. n-min_size of a segment whose distance matrix is `d` (n × n)."""
    n = d.shape[0]
    p = np.zeros((n + 1, n + 1))
    p[1:, 1:] = d.cumsum(0).cumsum(1)
    tau = np.arange(min_size, n - min_size + 1)
    m, k = tau.astype(float), (n - tau).astype(float)
    left = p[tau, tau]  # Σ over [0,τ)², each pair twice
    between = p[tau, n] - p[tau, tau]  # Σ over [0,τ) × [τ,n)
    right = p[n, n] - 2 * p[tau, n] + p[tau, tau]  # Σ over [τ,n)², each pair twice
    e = 2 * between / (m * k) - left / (m * (m - 1)) - right / (k * (k - 1))
    return m * k / (m + k) * e


def _distances(x: np.ndarray, exponent: float) -> np.ndarray:
    return np.abs(x[:, None] - x[None, :]) ** exponent


def change_points(series: list[float] | np.ndarray, *, alpha: float = ALPHA, min_size: int = MIN_SIZE,
                  permutations: int = PERMUTATIONS, exponent: float = EXPONENT,
                  seed: int = SEED) -> list[ChangePoint]:
    """Change points of `series`, sorted by index (empty for fewer than 2 * `min_size` points).

    `before_mean` / `after_mean` are the means of the two sides of the segment that was split.
    Non-finite values are not allowed (drop them first and map the indices back).
    """
    x = np.asarray(series, dtype=float)
    _check(x, exponent, min_size)
    found: list[ChangePoint] = []

    def split(lo: int, hi: int) -> None:
        n = hi - lo
        if n < 2 * min_size:
            return
        seg = x[lo:hi]
        d = _distances(seg, exponent)
        q = _q_all(d, min_size)
        best = int(np.argmax(q))
        q_obs = float(q[best])
        if not q_obs > 0:
            return
        rng = np.random.default_rng([seed, lo, hi])
        hits = 0
        for _ in range(permutations):
            perm = rng.permutation(n)
            if _q_all(d[np.ix_(perm, perm)], min_size).max() >= q_obs * (1 - 1e-12):
                hits += 1
        p = (1 + hits) / (1 + permutations)
        if p >= alpha:
            return
        tau = lo + min_size + best
        found.append(ChangePoint(tau, float(x[lo:tau].mean()), float(x[tau:hi].mean()), p, q_obs))
        split(lo, tau)
        split(tau, hi)

    split(0, len(x))
    return sorted(found, key=lambda c: c.index)


def _check(x: np.ndarray, exponent: float, min_size: int) -> None:
    if not 0 < exponent < 2:
        raise ValueError(f"exponent must lie in (0, 2), got {exponent}")
    if min_size < 2:
        raise ValueError(f"min_size must be at least 2 (a side's spread needs two points), got {min_size}")
    if x.size and not np.isfinite(x).all():
        raise ValueError("the series holds a non-finite value; drop it and map the indices back")


def change_points_reference(series: list[float], *, alpha: float = ALPHA, min_size: int = MIN_SIZE,
                            permutations: int = PERMUTATIONS, exponent: float = EXPONENT,
                            seed: int = SEED) -> list[ChangePoint]:
    """The same method written plainly (loops over pairs, no prefix sums): the test oracle."""
    x = [float(v) for v in series]

    def q_of(v: list[float], tau: int) -> float:
        a, b = v[:tau], v[tau:]
        m, n = len(a), len(b)
        between = sum(abs(i - j) ** exponent for i in a for j in b)
        within_a = sum(abs(a[i] - a[k]) ** exponent for i in range(m) for k in range(i + 1, m))
        within_b = sum(abs(b[i] - b[k]) ** exponent for i in range(n) for k in range(i + 1, n))
        e = 2 * between / (m * n) - within_a / (m * (m - 1) / 2) - within_b / (n * (n - 1) / 2)
        return m * n / (m + n) * e

    found: list[ChangePoint] = []

    def split(lo: int, hi: int) -> None:
        seg = x[lo:hi]
        n = len(seg)
        if n < 2 * min_size:
            return
        taus = range(min_size, n - min_size + 1)
        qs = [q_of(seg, t) for t in taus]
        best = max(range(len(qs)), key=lambda i: (qs[i], -i))
        q_obs = qs[best]
        if not q_obs > 0:
            return
        rng = np.random.default_rng([seed, lo, hi])
        hits = 0
        for _ in range(permutations):
            perm = rng.permutation(n)
            shuffled = [seg[i] for i in perm]
            if max(q_of(shuffled, t) for t in taus) >= q_obs * (1 - 1e-12):
                hits += 1
        p = (1 + hits) / (1 + permutations)
        if p >= alpha:
            return
        tau = lo + min_size + best
        found.append(ChangePoint(tau, sum(x[lo:tau]) / (tau - lo), sum(x[tau:hi]) / (hi - tau), p, q_obs))
        split(lo, tau)
        split(tau, hi)

    split(0, len(x))
    return sorted(found, key=lambda c: c.index)
