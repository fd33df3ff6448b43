"""Grouped statistics: pinned hand-computed cases, scipy agreement on seeded data, bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as ss

from xfid.engine.stats import grouped_inversions, grouped_ranks, grouped_stats


def _one(cand, ref, tol=0.1, **kw):
    cand, ref = np.asarray(cand, float), np.asarray(ref, float)
    rel = (cand - ref) / ref
    lr = np.log(cand / ref)
    out = grouped_stats(np.zeros(len(cand), np.int64), 1, rel, lr, cand, ref, np.abs(rel) <= tol, **kw)
    return {k: (v[0] if hasattr(v, "__len__") else v) for k, v in out.items()}


def test_hand_computed_four_points():
    # rel = +0.1, -0.1, 0, -0.625 ; ranks of cand 1,2,4,3 vs ref 1,2,3,4
    s = _one([11, 18, 40, 30], [10, 20, 40, 80])
    assert s["n"] == 4
    assert s["mape"] == pytest.approx((0.1 + 0.1 + 0 + 0.625) / 4)
    assert s["median_ape"] == pytest.approx(0.1)
    lrs = [math.log(1.1), math.log(0.9), 0.0, math.log(30 / 80)]
    assert s["bias"] == pytest.approx(math.exp(sum(lrs) / 4))
    assert s["log_rmse"] == pytest.approx(math.sqrt(sum(x * x for x in lrs) / 4))
    # Spearman: d = 0,0,1,-1 -> 1 - 6*2/(4*15) = 0.8 ; Kendall: 5 concordant, 1 discordant -> 4/6
    assert s["spearman"] == pytest.approx(0.8)
    assert s["kendall"] == pytest.approx(4 / 6)
    assert s["within_tolerance"] == pytest.approx(0.75)
    assert s["mape_ci_low"] <= s["mape"] <= s["mape_ci_high"]
    assert s["bias_ci_low"] <= s["bias"] <= s["bias_ci_high"]


def test_undefined_is_nan():
    s = _one([2.0], [1.0])
    assert s["n"] == 1 and s["mape"] == pytest.approx(1.0)
    for k in ("pearson_log", "spearman", "kendall", "mape_ci_low", "bias_ci_high"):
        assert math.isnan(s[k]), k
    c = _one([2.0, 2.0, 2.0], [1.0, 2.0, 3.0])  # constant candidate
    assert math.isnan(c["pearson_log"]) and math.isnan(c["spearman"]) and math.isnan(c["kendall"])


@pytest.mark.parametrize("grouped", [False, True], ids=["shuffled", "grouped"])
def test_matches_scipy_on_seeded_groups_with_ties(grouped):
    # grouped rows (gid 0,0,1,1,1,...) take the segment path, shuffled ones the general path
    rng = np.random.default_rng(7)
    ng = 40
    gid = np.repeat(np.arange(ng), rng.integers(2, 60, ng))
    if not grouped:
        rng.shuffle(gid)
    m = len(gid)
    ref = np.round(np.exp(rng.normal(0, 1, m)), 1) + 0.1  # rounding makes ties
    cand = np.round(ref * np.exp(rng.normal(0, 0.3, m)), 1) + 0.1
    rel, lr = (cand - ref) / ref, np.log(cand / ref)
    out = grouped_stats(gid, ng, rel, lr, cand, ref, np.abs(rel) <= 0.1)
    checked = 0
    for g in range(ng):
        mk = gid == g
        if len(np.unique(cand[mk])) < 2 or len(np.unique(ref[mk])) < 2:
            continue
        assert out["kendall"][g] == pytest.approx(ss.kendalltau(cand[mk], ref[mk]).statistic, abs=1e-12)
        assert out["spearman"][g] == pytest.approx(ss.spearmanr(cand[mk], ref[mk]).statistic, abs=1e-12)
        assert out["pearson_log"][g] == pytest.approx(ss.pearsonr(np.log(cand[mk]), np.log(ref[mk])).statistic, abs=1e-12)
        assert out["median_ape"][g] == pytest.approx(np.median(np.abs(rel[mk])))
        assert out["mape"][g] == pytest.approx(np.mean(np.abs(rel[mk])))
        checked += 1
    assert checked >= 35


def test_ranks_and_inversions():
    gid = np.array([0, 0, 0, 1, 1, 1, 1])
    x = np.array([3.0, 1.0, 3.0, 5.0, 4.0, 4.0, 4.0])
    r, _, _ = grouped_ranks(gid, x)
    assert r.tolist() == [2.5, 1.0, 2.5, 4.0, 2.0, 2.0, 2.0]
    gs = np.array([0, 0, 0, 1, 1])
    y = np.array([3, 1, 2, 1, 0])  # group 0: 3,1,2 -> 2 inversions; group 1: 1,0 -> 1
    assert grouped_inversions(gs, y, 2).tolist() == [2.0, 1.0]


def test_inversions_match_a_direct_count():
    rng = np.random.default_rng(4)
    sizes = rng.integers(1, 70, 30)
    gs = np.repeat(np.arange(30), sizes)
    y = rng.integers(0, 12, len(gs))  # many ties: only strict inversions count
    want = np.zeros(30)
    for g in range(30):
        v = y[gs == g]
        want[g] = sum(int(v[i] > v[j]) for i in range(len(v)) for j in range(i + 1, len(v)))
    np.testing.assert_array_equal(grouped_inversions(gs, y, 30), want)


def test_bootstrap_is_seeded_and_per_group():
    rng = np.random.default_rng(3)
    cand, ref = np.exp(rng.normal(0, 0.2, 30)), np.ones(30)
    a, b = _one(cand, ref), _one(cand, ref)
    assert (a["mape_ci_low"], a["mape_ci_high"]) == (b["mape_ci_low"], b["mape_ci_high"])
    # a group's CI does not depend on other groups in the same call
    rel, lr = cand - 1, np.log(cand)
    gid = np.r_[np.zeros(30, np.int64), np.ones(30, np.int64)]
    two = grouped_stats(gid, 2, np.r_[rel, rel * 3], np.r_[lr, lr * 3], np.r_[cand, cand], np.r_[ref, ref],
                        np.ones(60, bool))
    assert two["mape_ci_low"][0] == a["mape_ci_low"] and two["bias_ci_high"][0] == a["bias_ci_high"]
    # pinned values (seed 0, 1000 resamples)
    assert a["mape_ci_low"] == pytest.approx(0.11009300247486381, rel=1e-9)
    assert a["mape_ci_high"] == pytest.approx(0.25285211926741047, rel=1e-9)
    assert a["bias_ci_low"] == pytest.approx(0.9392921355785445, rel=1e-9)
    assert a["bias_ci_high"] == pytest.approx(1.0971680915027426, rel=1e-9)
    assert a["mape_ci_low"] < a["mape"] < a["mape_ci_high"]


def test_large_groups_use_normal_approximation():
    rng = np.random.default_rng(5)
    cand, ref = np.exp(rng.normal(0.1, 0.2, 2000)), np.ones(2000)
    s = _one(cand, ref, exact_max_n=200)
    ape = np.abs(cand - 1)
    half = 1.959963984540054 * ape.std() / math.sqrt(2000)
    assert s["mape_ci_low"] == pytest.approx(ape.mean() - half)
    assert s["mape_ci_high"] == pytest.approx(ape.mean() + half)
    exact = _one(cand, ref, exact_max_n=5000)  # the exact bootstrap agrees closely at this n
    assert exact["mape_ci_low"] == pytest.approx(s["mape_ci_low"], rel=0.03)


def test_grouped_and_shuffled_rows_give_the_same_statistics():
    rng = np.random.default_rng(11)
    ng = 25
    gid = np.repeat(np.arange(ng), rng.integers(1, 40, ng))
    m = len(gid)
    ref = np.round(np.exp(rng.normal(0, 1, m)), 2) + 0.01
    cand = np.round(ref * np.exp(rng.normal(0, 0.3, m)), 2) + 0.01
    rel, lr = (cand - ref) / ref, np.log(cand / ref)
    # (bootstrap CIs resample by position within a group: row order matters there by design,
    # and correlate() always passes rows in key order)
    a = grouped_stats(gid, ng, rel, lr, cand, ref, np.abs(rel) <= 0.1, bootstrap=False)
    p = rng.permutation(m)
    b = grouped_stats(gid[p], ng, rel[p], lr[p], cand[p], ref[p], np.abs(rel[p]) <= 0.1, bootstrap=False)
    assert np.isfinite(a["kendall"]).sum() >= 20
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=k)
