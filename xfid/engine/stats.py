"""Grouped error statistics in numpy: every group at once, ranks from one sort per variable."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xfid.engine.keys import run_starts
from xfid.engine.schema import ESTIMATE_STATS

Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
BOOTSTRAP_EXACT_MAX_N = 200


def _sums(gid: np.ndarray, x: np.ndarray, ng: int) -> np.ndarray:
    return np.bincount(gid, weights=x, minlength=ng)


def _summer(gid: np.ndarray, ng: int,
            seg: tuple[np.ndarray, np.ndarray] | None) -> Callable[[np.ndarray], np.ndarray]:
    """Per-group sums: segment sums for grouped rows (see _segments), else a weighted bincount."""
    if seg is None:
        return lambda x: _sums(gid, x, ng)
    return lambda x: np.add.reduceat(x, seg[0])


def _segments(gid: np.ndarray, ng: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(starts, sizes) when the rows come grouped as 0, 0, 1, 1, 1, 2, ... (every group 0..ng-1
    present, in order), else None. Grouped rows allow segment sums and no group gathers."""
    m = len(gid)
    if not m or ng < 1 or gid[0] != 0 or gid[-1] != ng - 1:
        return None
    step = np.diff(gid)
    if len(step) and (step.min() < 0 or step.max() > 1):
        return None
    starts = np.r_[0, np.flatnonzero(step) + 1]
    if len(starts) != ng:
        return None
    return starts, np.diff(np.r_[starts, m])


def grouped_ranks(gid: np.ndarray, x: np.ndarray, order: np.ndarray | None = None,
                  seg: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Average ranks (1-based) of x within groups, plus per-position tie-run ids and run lengths.

    `order` may pass an order that sorts x globally (see global_order), reused across groupings;
    `seg` the (starts, sizes) of grouped rows (see _segments).
    Returns (ranks aligned with x, order used, run start flags in that order).
    """
    if seg is not None:
        return _ranks_grouped(gid, x, order, *seg)
    order = _group_sort(gid, x, order)
    xs, gs = x[order], gid[order]
    n = len(x)
    new_run = np.r_[True, (xs[1:] != xs[:-1]) | (gs[1:] != gs[:-1])] if n else np.zeros(0, bool)
    new_group = np.r_[True, gs[1:] != gs[:-1]] if n else np.zeros(0, bool)
    pos = np.arange(n)
    rs = np.flatnonzero(new_run)
    re_ = np.r_[rs[1:], n] - 1
    run_id = np.cumsum(new_run) - 1
    gstart = np.maximum.accumulate(np.where(new_group, pos, 0))
    avg = (rs[run_id] + re_[run_id]) / 2.0 - gstart + 1.0
    ranks = np.empty(n)
    ranks[order] = avg
    return ranks, order, new_run


def _ranks_grouped(gid: np.ndarray, x: np.ndarray, order: np.ndarray | None, starts: np.ndarray,
                   sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """grouped_ranks for grouped rows: tie runs from one comparison, ranks per run, then spread."""
    order = _group_sort(gid, x, order)
    xs = x[order]
    n = len(x)
    new_run = np.empty(n, bool)
    if n:
        new_run[0] = True
        np.not_equal(xs[1:], xs[:-1], out=new_run[1:])
        new_run[starts] = True  # a run never crosses a group (gid in sorted order is gid itself)
    rs = np.flatnonzero(new_run)
    rl = np.diff(np.r_[rs, n])
    avg = (2 * rs + rl - 1) / 2.0 - starts[gid[rs]] + 1.0
    ranks = np.empty(n)
    ranks[order] = np.repeat(avg, rl)
    return ranks, order, new_run


def global_order(x: np.ndarray) -> np.ndarray:
    """An order sorting x (equal values end up adjacent; their order among them is irrelevant)."""
    return np.argsort(x)


def _group_sort(gid: np.ndarray, x: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Order by (gid, x): a global order of x (one float sort, reusable), then a stable sort
    by group, a radix sort when the group ids fit 16 bits."""
    n = len(x)
    if n < 2:
        return np.arange(n)
    if order is None:
        order = global_order(x)
    g = gid[order]
    if int(g.max()) < 1 << 16:
        g = g.astype(np.uint16)
    return order[np.argsort(g, kind="stable")]


def _tie_pairs(gid_sorted: np.ndarray, new_run: np.ndarray, ng: int) -> np.ndarray:
    """Sum over tie runs of t(t-1)/2 per group, from a sorted order's run starts."""
    rs = np.flatnonzero(new_run)
    if not len(rs):
        return np.zeros(ng)
    t = np.diff(np.r_[rs, len(new_run)]).astype(np.float64)
    return np.bincount(gid_sorted[rs], weights=t * (t - 1) / 2, minlength=ng)


INVERSION_BLOCK = 16
"""Rows per first block of grouped_inversions: counted by direct comparison, then sorted at once."""


def grouped_inversions(gs: np.ndarray, y: np.ndarray, ng: int) -> np.ndarray:
    """Per group, the pairs i<j with y[i] > y[j] (strict), by a bottom-up merge count.

    Rows of a group are contiguous (`gs` sorted) and `y` are non-negative integers. Blocks are
    aligned at each group's start, so a group of size s takes ceil(log2 s) levels, whatever
    the other groups. The first blocks (INVERSION_BLOCK rows) count their inversions by direct
    comparison of each row with the next INVERSION_BLOCK - 1 rows and are sorted by one stable
    sort (the merge's first levels cost a sort each). Then at each level every block of 2w rows
    is two sorted halves; one stable sort by (block, y) merges them all (Timsort finds the
    runs), and a right-half element moved left by exactly the number of left-half elements
    greater than it.
    """
    n = len(y)
    inv = np.zeros(ng)
    if n < 2:
        return inv
    starts = run_starts(gs)
    sizes = np.diff(np.r_[starts, n])
    idx = np.arange(n)
    local = idx - np.repeat(starts, sizes)  # position within the group
    a = np.asarray(y, dtype=np.int64).copy()
    big = int(a.max()) + 1
    w = min(INVERSION_BLOCK, 1 << max(int(sizes.max()) - 1, 0).bit_length())
    block = np.cumsum((local & (w - 1)) == 0)
    within = np.zeros(n, np.int64)  # per row, the rows after it in its block that are smaller
    for d in range(1, w):
        within[:-d] += (block[d:] == block[:-d]) & (a[:-d] > a[d:])
    inv[gs[starts]] += np.add.reduceat(within, starts)
    a = a[np.argsort(block * big + a, kind="stable")]
    pos = np.empty(n, np.int64)
    while w < int(sizes.max()):
        m = local & (2 * w - 1)  # offset within the block of 2w
        right = m >= w
        block = np.cumsum(m == 0)
        order = np.argsort(block * big + a, kind="stable")
        pos[order] = idx
        moved = idx - pos
        moved *= right  # only right-half elements count
        inv[gs[starts]] += np.add.reduceat(moved, starts)
        a = a[order]
        w *= 2
    return inv


# ESTIMATE_STATS, BOUND_STATS: which statistics are an estimate's and which a bound's (declared
# with the fields in xfid.engine.schema).


def grouped_stats(gid: np.ndarray, ng: int, rel: np.ndarray, lr: np.ndarray, cand: np.ndarray,
                  ref: np.ndarray, within: np.ndarray, *, kendall: bool = True, bootstrap: bool = True,
                  resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                  exact_max_n: int = BOOTSTRAP_EXACT_MAX_N,
                  orders: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                  logs: tuple[np.ndarray, np.ndarray] | None = None,
                  achieved: np.ndarray | None = None, violated: np.ndarray | None = None) -> dict[str, Any]:
    """Aggregate errors of rows grouped by `gid` (0..ng-1). Rows must have finite rel and lr.

    Returns a dict of arrays (length ng): n, mape, median_ape, bias, log_rmse, pearson_log,
    spearman, kendall, within_tolerance, mape_ci_low/high, bias_ci_low/high, bound (bool) and
    BOUND_STATS. NaN where a statistic is undefined (n < 2, constant values; CIs need n >= 3).
    `orders` may pass orders that sort (|rel|, log cand, log ref) globally (global_order) when
    the same rows are grouped several ways; `logs` may pass (log cand, log ref).

    `achieved` (the fraction of the bound achieved per row, NaN for a row that is no bound) and
    `violated` (bool per row) make a group whose rows have an achieved fraction a bound group:
    its ESTIMATE_STATS are NaN and its BOUND_STATS are filled (see bound_stats).
    """
    out = _estimate_stats(gid, ng, rel, lr, cand, ref, within, kendall=kendall, bootstrap=bootstrap,
                          resamples=resamples, seed=seed, exact_max_n=exact_max_n, orders=orders, logs=logs)
    if achieved is None:
        achieved = np.full(len(gid), np.nan)
    if violated is None:
        violated = np.zeros(len(gid), bool)
    b = bound_stats(gid, ng, achieved, violated, resamples=resamples, seed=seed, exact_max_n=exact_max_n,
                    bootstrap=bootstrap)
    out.update(b)
    for k in ESTIMATE_STATS:
        out[k] = np.where(b["bound"], np.nan, out[k])
    return out


def bound_stats(gid: np.ndarray, ng: int, achieved: np.ndarray, violated: np.ndarray, *,
                resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                exact_max_n: int = BOOTSTRAP_EXACT_MAX_N, bootstrap: bool = True) -> dict[str, np.ndarray]:
    """Per group: whether it is a bound (some row has a finite achieved fraction), the violations
    (count, and the largest achieved fraction among them), the median and quartiles of the
    achieved fraction (numpy's linear interpolation) and a 95% CI of that median.

    The CI is a seeded percentile bootstrap of the median, the same resample index matrices as
    the MAPE/bias CIs (`_resample_index`), for groups of 3..`exact_max_n` rows; a larger group
    takes the distribution-free order-statistic interval of the median (the sorted values at
    ranks n/2 -+ 1.96*sqrt(n)/2), to which the bootstrap's converges.
    """
    fin = np.isfinite(achieved)
    cnt = np.bincount(gid[fin], minlength=ng)
    bound = cnt > 0
    nan = np.full(ng, np.nan)
    out: dict[str, np.ndarray] = {"bound": bound}
    out["violations"] = np.where(bound, np.bincount(gid, weights=(violated & fin).astype(np.float64),
                                                    minlength=ng), np.nan)
    worst = nan.copy()
    vi = np.flatnonzero(violated & fin)
    if len(vi):
        np.fmax.at(worst, gid[vi], achieved[vi])
    out["violation_worst"] = worst
    idx = np.flatnonzero(fin)
    g, a = gid[idx], achieved[idx]
    order = _group_sort(g, a)  # ties within a group in any order: only values and groups are read
    gs, xs = g[order], a[order]
    starts = run_starts(gs)
    sizes = np.diff(np.r_[starts, len(gs)])
    groups = gs[starts] if len(starts) else np.zeros(0, np.int64)
    for name, q in (("achieved_median", 0.5), ("achieved_q1", 0.25), ("achieved_q3", 0.75)):
        v = nan.copy()
        v[groups] = _sorted_quantile(xs, starts, sizes, q)
        out[name] = v
    lo, hi = nan.copy(), nan.copy()
    if bootstrap:
        _median_ci(xs, starts, sizes, groups, lo, hi, resamples, seed, exact_max_n)
    out["achieved_ci_low"], out["achieved_ci_high"] = lo, hi
    return out


def _sorted_quantile(xs: np.ndarray, starts: np.ndarray, sizes: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of each sorted segment (numpy's default linear interpolation)."""
    if not len(starts):
        return np.zeros(0)
    p = q * (sizes - 1)
    lo = np.floor(p).astype(np.int64)
    hi = np.minimum(lo + 1, sizes - 1)
    frac = p - lo
    a, b = xs[starts + lo], xs[starts + hi]
    return a + (b - a) * frac


def _resample_index(seed: int, size: int, resamples: int) -> np.ndarray:
    """The bootstrap's resample indices for groups of `size` rows: from seed and size alone, so
    a group's CI depends only on its own rows (and its order)."""
    rng = np.random.default_rng([seed, int(size)])
    return rng.integers(0, size, size=(resamples, size))


@dataclass(frozen=True)
class _Resamples:
    """What the bootstrap needs of one (seed, size, resamples) index matrix; no data in it.

    counts[r, j]: how often resample r draws row j (the mean of a resample is counts @ values /
    size). median_lo/median_hi[r]: the positions, in a group's sorted rows, of resample r's
    lower and upper middle element. For sorted values a resample's order statistics are the
    values at its sorted indices, so its median needs no sort of the resampled values and is
    exactly what np.median gives.
    """

    counts: np.ndarray
    median_lo: np.ndarray
    median_hi: np.ndarray


_PLAN_CACHE_ELEMENTS = 1 << 18
"""A resample plan of at most this many counts (size x resamples) is kept between calls, up to
_PLAN_CACHE_PLANS of them: at most ~0.5 MB a plan, ~24 MB for every size up to the default
exact_max_n at 1000 resamples. A larger one (resamples or exact_max_n raised) is built per call."""
_PLAN_CACHE_PLANS = 256


def _build_resamples(seed: int, size: int, resamples: int) -> _Resamples:
    idx = _resample_index(seed, size, resamples)
    counts = np.bincount((np.arange(resamples)[:, None] * size + idx).ravel(),
                         minlength=resamples * size).reshape(resamples, size)
    counts = counts.astype(np.uint8 if size <= 0xFF else np.uint16 if size <= 0xFFFF else np.int64)
    ranked = np.sort(idx, axis=1)
    plan = _Resamples(counts, ranked[:, (size - 1) // 2].copy(), ranked[:, size // 2].copy())
    for a in (plan.counts, plan.median_lo, plan.median_hi):
        a.setflags(write=False)  # shared through the cache
    return plan


_cached_resamples = functools.lru_cache(maxsize=_PLAN_CACHE_PLANS)(_build_resamples)


def _resamples(seed: int, size: int, resamples: int) -> _Resamples:
    """The plan of `_resample_index(seed, size, resamples)`, cached for small sizes: every call
    of one correlation (both levels, every pair) meets the same few sizes."""
    if size * resamples <= _PLAN_CACHE_ELEMENTS:
        return _cached_resamples(seed, size, resamples)
    return _build_resamples(seed, size, resamples)


def _resample_means(vals: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The (groups, resamples) means of each group's rows (vals: groups x size) per resample.

    einsum's own loop, not `vals @ counts.T`: these products are small, and BLAS starts its
    threads for each one; on a busy 2-core machine, inside the engine's two aggregate threads,
    the BLAS product took ~25x as long as this loop."""
    return np.einsum("ks,rs->kr", vals, counts.astype(np.float64)) / vals.shape[1]


def _median_ci(xs: np.ndarray, starts: np.ndarray, sizes: np.ndarray, groups: np.ndarray, lo: np.ndarray,
               hi: np.ndarray, resamples: int, seed: int, exact_max_n: int) -> None:
    """95% CI of the median per sorted segment of size >= 3 (see bound_stats), into lo/hi."""
    for size in np.unique(sizes[(sizes >= 3) & (sizes <= exact_max_n)]):
        sel = np.flatnonzero(sizes == size)
        plan = _resamples(seed, int(size), resamples)
        first = starts[sel][:, None]  # each segment is sorted: a resample's median by position
        a, b = xs[first + plan.median_lo], xs[first + plan.median_hi]
        med = a if size % 2 else (a + b) / 2
        q = np.percentile(med, [2.5, 97.5], axis=1)
        lo[groups[sel]], hi[groups[sel]] = q[0], q[1]
    for k in np.flatnonzero(sizes > exact_max_n):
        n = int(sizes[k])
        half = Z95 * np.sqrt(n) / 2
        a = max(int(np.floor(n / 2 - half)), 1)
        b = min(int(np.ceil(n / 2 + half)) + 1, n)
        lo[groups[k]], hi[groups[k]] = xs[starts[k] + a - 1], xs[starts[k] + b - 1]


def _estimate_stats(gid: np.ndarray, ng: int, rel: np.ndarray, lr: np.ndarray, cand: np.ndarray,
                    ref: np.ndarray, within: np.ndarray, *, kendall: bool, bootstrap: bool, resamples: int,
                    seed: int, exact_max_n: int, orders: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
                    logs: tuple[np.ndarray, np.ndarray] | None) -> dict[str, Any]:
    """grouped_stats without the bound statistics: every group as an estimate."""
    seg = _segments(gid, ng)
    n = np.bincount(gid, minlength=ng).astype(np.float64) if seg is None else seg[1].astype(np.float64)
    S = _summer(gid, ng, seg)
    with np.errstate(divide="ignore", invalid="ignore"):
        ape = np.abs(rel)
        out: dict[str, Any] = {"n": n.astype(np.int64)}
        out["mape"] = S(ape) / n
        mlr = S(lr) / n
        out["bias"] = np.exp(mlr)
        out["log_rmse"] = np.sqrt(S(lr * lr) / n)
        out["within_tolerance"] = S(within.astype(np.float64)) / n
        r_ape, r_x, r_y = orders if orders is not None else (None, None, None)
        order = _group_sort(gid, ape, r_ape)
        gs = gid[order] if seg is None else gid  # sorted groups: the order only moves rows within them
        starts = run_starts(gs) if seg is None else seg[0]
        cnt = np.diff(np.r_[starts, len(gs)])
        med = np.full(ng, np.nan)
        if len(starts):
            lo, hi = order[starts + (cnt - 1) // 2], order[starts + cnt // 2]
            med[gs[starts]] = (ape[lo] + ape[hi]) / 2
        out["median_ape"] = med
        lx, ly = logs if logs is not None else (np.log(cand), np.log(ref))
        out["pearson_log"] = _pearson(gid, lx, ly, n, ng, seg)
        rx, ox, nrx = grouped_ranks(gid, lx, r_x, seg)
        ry, oy, nry = grouped_ranks(gid, ly, r_y, seg)
        out["spearman"] = _pearson(gid, rx, ry, n, ng, seg, rank_means=True)
        gx, gy = (gid[ox], gid[oy]) if seg is None else (gid, gid)
        out["kendall"] = _kendall(gid, lx, ry, n, ng, gx, nrx, gy, nry, rx, ox) if kendall else np.full(ng, np.nan)
    small = n < 2
    for k in ("pearson_log", "spearman", "kendall"):
        out[k] = np.where(small, np.nan, out[k])
    lo_m, hi_m, lo_b, hi_b = _bootstrap(gid, ng, ape, lr, resamples, seed, exact_max_n) if bootstrap \
        else (np.full(ng, np.nan),) * 4
    out.update(mape_ci_low=lo_m, mape_ci_high=hi_m, bias_ci_low=lo_b, bias_ci_high=hi_b)
    return out


def _pearson(gid: np.ndarray, x: np.ndarray, y: np.ndarray, n: np.ndarray, ng: int,
             seg: tuple[np.ndarray, np.ndarray] | None = None, rank_means: bool = False) -> np.ndarray:
    """Pearson r per group (two passes: means, then centred sums). With `rank_means`, x and y
    are average ranks within the groups, whose mean is (n + 1) / 2 exactly."""
    S = _summer(gid, ng, seg)
    spread = (lambda v: v[gid]) if seg is None else (lambda v: np.repeat(v, seg[1]))
    if rank_means:
        mx = my = (n + 1) / 2
    else:
        mx, my = S(x) / n, S(y) / n
    dx, dy = x - spread(mx), y - spread(my)
    sxy, sxx, syy = S(dx * dy), S(dx * dx), S(dy * dy)
    tiny = 1e-24
    r = sxy / np.sqrt(sxx * syy)
    r = np.where((sxx <= tiny * np.maximum(n, 1)) | (syy <= tiny * np.maximum(n, 1)), np.nan, r)
    return np.clip(r, -1.0, 1.0)


def _kendall(gid: np.ndarray, x: np.ndarray, ry: np.ndarray, n: np.ndarray, ng: int, gx_sorted: np.ndarray,
             new_run_x: np.ndarray, gy_sorted: np.ndarray, new_run_y: np.ndarray,
             rx: np.ndarray | None = None, x_order: np.ndarray | None = None) -> np.ndarray:
    """Kendall tau-b per group (ties handled as scipy.stats.kendalltau does).

    `x_order` may pass an order by (group, x) (grouped_ranks' order): the rows are then in order
    but for ties in x, and a stable sort of their keys in that order (Timsort: nearly sorted
    runs) takes the place of a sort from scratch. Rows with equal keys are equal in every
    value read below, so either order gives the same result."""
    m = len(gid)
    # order by (group, x, y rank): one integer sort on (group, 2 * x rank, 2 * y rank) where it
    # fits in int64 (average ranks are half-integers: twice them are exact integers), else lexsort
    k = 2 * max(m, 1) + 2
    if rx is not None and max(ng, 1) * k * k < 1 << 62:
        key = (gid.astype(np.int64) * k + np.rint(2 * rx).astype(np.int64)) * k + np.rint(2 * ry).astype(np.int64)
        order = np.argsort(key) if x_order is None else x_order[np.argsort(key[x_order], kind="stable")]
    else:
        order = np.lexsort((ry, x, gid))
    gs = gid[order]
    xs, ys = x[order], ry[order]
    joint_new = np.r_[True, (xs[1:] != xs[:-1]) | (ys[1:] != ys[:-1]) | (gs[1:] != gs[:-1])] if m else np.zeros(0, bool)
    dis = grouped_inversions(gs, np.rint(2 * ys).astype(np.int64), ng)
    n0 = n * (n - 1) / 2
    n1 = _tie_pairs(gx_sorted, new_run_x, ng)
    n2 = _tie_pairs(gy_sorted, new_run_y, ng)
    n3 = _tie_pairs(gs, joint_new, ng)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = (n0 - n1 - n2 + n3 - 2 * dis) / np.sqrt((n0 - n1) * (n0 - n2))
    return np.clip(tau, -1.0, 1.0)


def _bootstrap(gid: np.ndarray, ng: int, ape: np.ndarray, lr: np.ndarray, resamples: int, seed: int,
               exact_max_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Seeded percentile bootstrap (95%) of MAPE and bias per group with n >= 3.

    Groups up to `exact_max_n` rows are resampled exactly: the same resample index matrix
    (from seed and n alone) for every group of that size, so a group's CI depends only on its
    own rows. Larger groups use the normal approximation of the bootstrap distribution of a
    mean (mean ± 1.96·sd/√n), to which the percentile bootstrap converges.
    """
    lo_m, hi_m, lo_b, hi_b = (np.full(ng, np.nan) for _ in range(4))
    order = np.argsort(gid, kind="stable")
    gs = gid[order]
    starts = run_starts(gs)
    if not len(starts):
        return lo_m, hi_m, lo_b, hi_b
    groups = gs[starts]
    sizes = np.diff(np.r_[starts, len(gs)])
    a, l_ = ape[order], lr[order]
    for size in np.unique(sizes[(sizes >= 3) & (sizes <= exact_max_n)]):
        sel = np.flatnonzero(sizes == size)
        counts = _resamples(seed, int(size), resamples).counts
        pos = starts[sel][:, None] + np.arange(size)
        for vals, lo, hi, f in ((a, lo_m, hi_m, None), (l_, lo_b, hi_b, np.exp)):
            means = _resample_means(vals[pos], counts)
            q = np.percentile(means, [2.5, 97.5], axis=1)
            if f is not None:
                q = f(q)
            lo[groups[sel]], hi[groups[sel]] = q[0], q[1]
    big = np.flatnonzero(sizes > exact_max_n)
    if len(big):
        g = groups[big]
        n = sizes[big].astype(np.float64)
        gid_s = np.repeat(np.arange(len(starts)), sizes)
        for vals, lo, hi, f in ((a, lo_m, hi_m, None), (l_, lo_b, hi_b, np.exp)):
            mean = np.bincount(gid_s, weights=vals)[big] / n
            var = np.bincount(gid_s, weights=vals * vals)[big] / n - mean * mean
            half = Z95 * np.sqrt(np.maximum(var, 0) / n)
            low, high = mean - half, mean + half
            if f is None:
                low = np.maximum(low, 0.0)
            else:
                low, high = f(low), f(high)
            lo[g], hi[g] = low, high
    return lo_m, hi_m, lo_b, hi_b
