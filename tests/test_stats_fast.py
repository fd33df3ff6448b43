"""The bootstrap's fast paths against the plain computations they replace, on seeded data.

`_median_ci` takes each resample's median by position in the sorted group (no sort of the
resampled values) and `_bootstrap` its means through einsum with cached resample counts; the
plain versions below are the ones they replaced (np.median of the resampled values, the BLAS
product with counts built per call).
"""

from __future__ import annotations

import numpy as np
import pytest

from xfid.engine import stats
from xfid.engine.keys import run_starts


def _plain_median_ci(xs, starts, sizes, groups, ng, resamples, seed, exact_max_n):
    lo, hi = np.full(ng, np.nan), np.full(ng, np.nan)
    for k in range(len(starts)):
        size = int(sizes[k])
        if not 3 <= size <= exact_max_n:
            continue
        idx = stats._resample_index(seed, size, resamples)
        vals = xs[starts[k]:starts[k] + size]
        med = np.median(vals[idx], axis=1)
        q = np.percentile(med, [2.5, 97.5])
        lo[groups[k]], hi[groups[k]] = q[0], q[1]
    return lo, hi


def _plain_bootstrap_exact(gid, ng, ape, lr, resamples, seed, exact_max_n):
    out = [np.full(ng, np.nan) for _ in range(4)]
    for g in range(ng):
        rows = np.flatnonzero(gid == g)
        size = len(rows)
        if not 3 <= size <= exact_max_n:
            continue
        idx = stats._resample_index(seed, size, resamples)
        counts = np.zeros((resamples, size))
        for r in range(resamples):
            np.add.at(counts[r], idx[r], 1.0)
        for vals, lo, hi, f in ((ape[rows], out[0], out[1], None), (lr[rows], out[2], out[3], np.exp)):
            q = np.percentile(vals @ counts.T / size, [2.5, 97.5])
            q = f(q) if f is not None else q
            lo[g], hi[g] = q[0], q[1]
    return out


def _segments_of(sizes, rng, ties: bool):
    gid = np.repeat(np.arange(len(sizes)), sizes)
    x = rng.integers(0, 4, len(gid)).astype(float) if ties else rng.lognormal(0, 1, len(gid))
    order = np.lexsort((x, gid))
    gs, xs = gid[order], x[order]
    starts = run_starts(gs)
    return xs, starts, np.diff(np.r_[starts, len(gs)]), gs[starts]


@pytest.mark.parametrize("ties", [False, True])
def test_median_ci_by_position_equals_np_median(ties):
    rng = np.random.default_rng(7)
    sizes = np.array([1, 2, 3, 4, 5, 8, 9, 3, 4, 50, 51, 200, 201, 300])  # odd, even, tiny, past exact
    xs, starts, sz, groups = _segments_of(sizes, rng, ties)
    lo, hi = np.full(len(sizes), np.nan), np.full(len(sizes), np.nan)
    stats._median_ci(xs, starts, sz, groups, lo, hi, 1000, 0, 200)
    plo, phi = _plain_median_ci(xs, starts, sz, groups, len(sizes), 1000, 0, 200)
    exact = sz <= 200
    assert np.array_equal(lo[exact], plo[exact], equal_nan=True)  # bit for bit
    assert np.array_equal(hi[exact], phi[exact], equal_nan=True)
    assert np.isnan(lo[sz < 3]).all()
    assert np.isfinite(lo[sz > 200]).all()  # the order-statistic interval, unchanged


@pytest.mark.parametrize("resamples", [300, 1100])  # cached (uint16 counts); too big to cache
def test_median_ci_plans_past_uint8_and_past_the_cache(resamples):
    rng = np.random.default_rng(3)
    sizes = np.array([260, 261])
    assert (sizes * resamples > stats._PLAN_CACHE_ELEMENTS).all() == (resamples == 1100)
    xs, starts, sz, groups = _segments_of(sizes, rng, False)
    lo, hi = np.full(2, np.nan), np.full(2, np.nan)
    stats._median_ci(xs, starts, sz, groups, lo, hi, resamples, 5, 400)
    plo, phi = _plain_median_ci(xs, starts, sz, groups, 2, resamples, 5, 400)
    assert np.array_equal(lo, plo) and np.array_equal(hi, phi)
    plan = stats._resamples(5, 260, resamples)
    assert plan.counts.dtype == np.uint16 and (plan.counts.sum(axis=1) == 260).all()


def test_bootstrap_einsum_equals_the_blas_product():
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 40, 60)
    sizes[:4] = [3, 3, 200, 201]  # same size twice (one plan), the largest exact, the first normal
    gid = np.repeat(np.arange(len(sizes)), sizes)
    perm = rng.permutation(len(gid))  # rows not grouped: _bootstrap sorts them (stable)
    gid = gid[perm]
    ape = np.abs(rng.normal(0, 0.2, len(gid)))
    ape[::17] = 0.0
    lr = rng.normal(0, 0.3, len(gid))
    got = stats._bootstrap(gid, len(sizes), ape, lr, 1000, 0, 200)
    want = _plain_bootstrap_exact(gid, len(sizes), ape, lr, 1000, 0, 200)
    exact = (sizes >= 3) & (sizes <= 200)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g[exact], w[exact], rtol=1e-12, atol=0)
        assert np.isnan(g[sizes < 3]).all()
        assert np.isfinite(g[sizes > 200]).all()


def test_bootstrap_empty_and_cached_plans_read_only():
    empty = np.zeros(0, np.int64)
    for a in stats._bootstrap(empty, 0, np.zeros(0), np.zeros(0), 1000, 0, 200):
        assert len(a) == 0
    plan = stats._resamples(0, 7, 1000)
    assert plan is stats._resamples(0, 7, 1000)  # one plan per (seed, size, resamples)
    assert (plan.counts.sum(axis=1) == 7).all()
    with pytest.raises(ValueError):
        plan.counts[0, 0] = 3  # shared through the cache: never written
    with pytest.raises(ValueError):
        plan.median_lo[0] = 0


def test_grouped_stats_bound_ci_with_nan_and_inf_rows():
    """bound_stats takes only finite achieved fractions; the fast CI agrees with the plain one."""
    rng = np.random.default_rng(2)
    gid = np.repeat(np.arange(5), [10, 3, 7, 2, 40])
    achieved = rng.random(len(gid))
    achieved[[0, 5, 30]] = np.nan
    achieved[[1, 31]] = np.inf
    out = stats.bound_stats(gid, 5, achieved, np.zeros(len(gid), bool))
    fin = np.isfinite(achieved)
    for g in range(5):
        vals = np.sort(achieved[(gid == g) & fin])
        if len(vals) < 3:
            assert np.isnan(out["achieved_ci_low"][g])
            continue
        idx = stats._resample_index(stats.BOOTSTRAP_SEED, len(vals), stats.BOOTSTRAP_RESAMPLES)
        q = np.percentile(np.median(vals[idx], axis=1), [2.5, 97.5])
        assert (out["achieved_ci_low"][g], out["achieved_ci_high"][g]) == (q[0], q[1])


def _plain_grouped_inversions(gs, y, ng):
    """The merge count grouped_inversions replaced: one stable sort per level from blocks of 1."""
    n = len(y)
    inv = np.zeros(ng)
    if n < 2:
        return inv
    starts = run_starts(gs)
    sizes = np.diff(np.r_[starts, n])
    idx = np.arange(n)
    local = idx - np.repeat(starts, sizes)
    a = np.asarray(y, dtype=np.int64).copy()
    big = int(a.max()) + 1
    pos = np.empty(n, np.int64)
    w = 1
    while w < int(sizes.max()):
        m = local & (2 * w - 1)
        right = m >= w
        block = np.cumsum(m == 0)
        order = np.argsort(block * big + a, kind="stable")
        pos[order] = idx
        moved = (idx - pos) * right
        inv[gs[starts]] += np.add.reduceat(moved, starts)
        a = a[order]
        w *= 2
    return inv


@pytest.mark.parametrize("seed", range(6))
def test_grouped_inversions_equal_the_plain_merge_and_a_direct_count(seed):
    """The first blocks counted by comparison give the plain merge's counts, bit for bit, for
    groups smaller than, equal to and larger than the block, with and without ties."""
    rng = np.random.default_rng(seed)
    sizes = np.r_[[1, 2, 3, 15, 16, 17, 31, 32, 33, 64, 100], rng.integers(1, 300, 40)]
    rng.shuffle(sizes)
    gs = np.repeat(np.arange(len(sizes)), sizes)
    top = [3, 40, 2 * len(gs)][seed % 3]  # many ties, some, almost none
    y = rng.integers(0, top, len(gs))
    got = stats.grouped_inversions(gs, y, len(sizes))
    assert np.array_equal(got, _plain_grouped_inversions(gs, y, len(sizes)))
    for g in rng.choice(len(sizes), 8, replace=False):
        v = y[gs == g]
        assert got[g] == sum(int((v[i] > v[i + 1:]).sum()) for i in range(len(v)))
    one = np.zeros(9, np.int64)  # only groups below the block size, and a single group
    assert np.array_equal(stats.grouped_inversions(one, y[:9], 1), _plain_grouped_inversions(one, y[:9], 1))


@pytest.mark.parametrize("ties", [False, True])
def test_kendall_from_the_x_order_equals_the_sort_from_scratch(ties):
    """_kendall given grouped_ranks' order by (group, x) gives the tau of the plain full sort of
    its keys, bit for bit (and scipy's tau-b)."""
    from scipy.stats import kendalltau

    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 120, 50)
    gid = np.repeat(np.arange(len(sizes)), sizes)
    x = rng.integers(0, 6, len(gid)).astype(float) if ties else rng.normal(0, 1, len(gid))
    y = np.round(x + rng.normal(0, 1, len(gid)), 0 if ties else 12)
    n = np.bincount(gid, minlength=len(sizes)).astype(float)
    rx, ox, nrx = stats.grouped_ranks(gid, x)
    ry, oy, nry = stats.grouped_ranks(gid, y)
    args = (gid, x, ry, n, len(sizes), gid[ox], nrx, gid[oy], nry, rx)
    got = stats._kendall(*args, x_order=ox)
    assert np.array_equal(got, stats._kendall(*args), equal_nan=True)
    for g in np.flatnonzero(sizes >= 2)[:20]:
        want = kendalltau(x[gid == g], y[gid == g]).statistic
        assert got[g] == pytest.approx(want, abs=1e-12) or (np.isnan(got[g]) and np.isnan(want))


@pytest.mark.parametrize("ties", [False, True])
def test_bound_stats_with_the_group_sort_equal_the_lexsort(ties, monkeypatch):
    """bound_stats orders its rows by (group, achieved) through _group_sort (a float sort, then
    a radix sort by group); with the plain lexsort it gives the same statistics, bit for bit."""
    rng = np.random.default_rng(9)
    sizes = rng.integers(1, 260, 40)
    gid = rng.permutation(np.repeat(np.arange(len(sizes)), sizes))
    achieved = rng.integers(1, 8, len(gid)) / 8 if ties else rng.random(len(gid))
    achieved[::13] = np.nan
    violated = rng.random(len(gid)) < 0.1
    got = stats.bound_stats(gid, len(sizes), achieved, violated)
    monkeypatch.setattr(stats, "_group_sort", lambda g, a, order=None: np.lexsort((a, g)))
    want = stats.bound_stats(gid, len(sizes), achieved, violated)
    for k in want:
        assert np.array_equal(got[k], want[k], equal_nan=True), k
