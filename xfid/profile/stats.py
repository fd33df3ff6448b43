"""Robust summaries with a seeded bootstrap, and the caveats a summary must carry."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

SEED = 20
"""Fixed bootstrap seed: the same store gives the same intervals."""
RESAMPLES = 2000
MIN_N = 5
"""Fewer observations than this: the summary carries the caveat `n < 5`."""
CI_HALF_WIDTH = 0.20
"""A 95% interval wider than ±20% of the median is printed as a caveat."""


def summarize(values: Sequence[float], statistic: str = "median", seed: int = SEED) -> dict[str, Any]:
    """median, q1, q3 and a bootstrap 95% CI of `statistic` (median or mean); CI None below 2 values."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if not len(v):
        return {"median": None, "q1": None, "q3": None, "ci": None}
    q1, med, q3 = (float(x) for x in np.percentile(v, [25, 50, 75]))
    out: dict[str, Any] = {"median": med, "q1": q1, "q3": q3, "ci": None}
    if statistic == "mean":
        out["mean"] = float(v.mean())
    if len(v) >= 2:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(v), size=(RESAMPLES, len(v)))
        samples = v[idx]
        stat = samples.mean(axis=1) if statistic == "mean" else np.median(samples, axis=1)
        lo, hi = np.percentile(stat, [2.5, 97.5])
        out["ci"] = [float(lo), float(hi)]
    return out


def caveats(n: int, summary: dict[str, Any], center: str = "median", absolute: bool = False) -> list[str]:
    """`n < 5`, `no CI (n < 2)`, `CI wider than ±20%`: what the numbers cannot support.

    The width is judged against the center value (a fraction, a slowdown), or with `absolute`
    in the statistic's own units (an error: ±20 percentage points).
    """
    out = []
    if n < MIN_N:
        out.append(f"n < {MIN_N}")
    ci, c = summary.get("ci"), summary.get(center)
    if ci is None:
        out.append("no CI (n < 2)")
    elif c is not None and (ci[1] - ci[0]) / 2 > CI_HALF_WIDTH * (1.0 if absolute else abs(c)):
        out.append(f"CI wider than ±{CI_HALF_WIDTH:.0%}")
    return out


def relative_spread(values: Sequence[float]) -> float | None:
    """Sample standard deviation over mean of repeated measurements of one key; None below 2."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2 or not np.all(np.isfinite(v)) or v.mean() == 0:
        return None
    return float(v.std(ddof=1) / abs(v.mean()))


def spread(obs: Sequence[Any]) -> dict[str, Any] | None:
    """Run-to-run spread: the median relative std of keys measured two or more times."""
    by: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for o in obs:
        by[o.key].append(o.value)
    s = [x for v in by.values() if (x := relative_spread(v)) is not None]
    if not s:
        return None
    return {"median": float(np.median(s)), "keys": len(s), "max": float(max(s))}


def transfer_verdict(n: int, after: dict[str, Any], tol: float, sp: dict[str, Any] | None,
                     what: str = "cross-validated error after calibration") -> tuple[bool | None, str]:
    """(transfers: True/False/None, the verdict) of a calibrated model's error on `n` numbers."""
    err, ci = after["mean"], after["ci"]
    if n < 2 or ci is None:
        return None, "too few numbers to tell"
    if err > tol:
        return False, f"stops transferring: {what} {err:.1%} > tolerance {tol:.0%}"
    if (ci[1] - ci[0]) / 2 > 0.20:
        return None, f"CI too wide to tell ({ci[0]:.1%}–{ci[1]:.1%})"
    if sp is not None and sp["median"] >= err:
        return True, (f"transfers: {what} {err:.1%} is within the run-to-run spread "
                      f"{sp['median']:.1%}, so it cannot be told from measurement noise")
    return True, f"transfers: {what} {err:.1%} within tolerance {tol:.0%}"
