"""Bounds read as bounds (issue 24): a roofline pair's aggregates are rows checked, violations and
the achieved fraction of the bound (median, IQR, CI), never MAPE or bias; estimates keep MAPE and
bias. On the demo (CLI text, JSON, report HTML), on hand-made cases against plain numpy, and the
scope conversions (run energy ÷ output tokens, run energy ÷ duration) on hand-made records."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import FIXTURES, Cli
from tests.demo_run import copy_demo
from tests.test_engine_helpers import config, make_store, rec
from xfid.drift.drift import Thresholds, compare_snapshots
from xfid.drift.snapshot import make_snapshot, validate
from xfid.engine import correlate
from xfid.engine.contract import BOUND_COLUMNS, ESTIMATE_COLUMNS
from xfid.engine.output import to_table
from xfid.engine.stats import bound_stats, grouped_stats
from xfid.report.views import build_pairs

DEMO_CONFIG = FIXTURES / "demo" / "xfid.toml"


# -- the demo --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Cli, Path]:
    """The demo's store and report folder (a copy of the run's one demo: tests/demo_run.py)."""
    d = copy_demo(tmp_path_factory).cwd
    return Cli(d / "store", d), d / "reports"


def _correlate(cli: Cli, *args: str):
    from xfid.cli import cli as root

    return cli.runner.invoke(root, ["--config", str(DEMO_CONFIG), "--store", str(cli.store), "correlate", *args],
                             catch_exceptions=False)


@pytest.mark.slow
def test_demo_no_ok_row_compares_numbers_of_different_sizes(demo):
    """Like with like: an aligned `ok` row whose candidate/reference is beyond [1e-3, 1e3] compares
    two different things (a run's energy with a step's)."""
    cli, _ = demo
    r = _correlate(cli, "--format", "csv")
    assert r.exit_code == 0, r.output
    import io

    rows = pd.read_csv(io.StringIO(r.output))
    ok = rows[(rows["kind"] == "ok") & rows["reference_value"].notna() & (rows["reference_value"] != 0)]
    assert len(ok) > 100
    ratio = ok["candidate_value"] / ok["reference_value"]
    bad = ok[(ratio < 1e-3) | (ratio > 1e3)]
    assert bad.empty, bad[["target", "workload", "op", "metric", "candidate", "reference", "candidate_value",
                           "reference_value", "scope"]].to_string()


@pytest.mark.slow
def test_demo_cli_and_json_show_bounds_as_bounds(demo):
    cli, _ = demo
    doc = json.loads(_correlate(cli, "--format", "json").output)
    top = [c for c in doc["comparisons"] if c["workload"] is None]
    bounds = [c for c in top if c["compared_as"] == "bound"]
    estimates = [c for c in top if c["compared_as"] == "estimate"]
    assert bounds and estimates
    for c in bounds:
        assert c["candidate"] == "roofline"
        assert all(c[k] is None for k in ESTIMATE_COLUMNS), c
        assert isinstance(c["violations"], int) and 0 <= c["violations"] <= c["n"]
        assert c["achieved_median"] > 0 and c["achieved_q1"] <= c["achieved_median"] <= c["achieved_q3"]
        assert len(c["violation_ids"]) == c["violations"]
        if c["violations"]:
            assert c["violation_worst"] > 1  # a violation: beyond the bound
        if c["n"] >= 3:
            lo, hi = c["achieved_ci"]
            assert lo <= c["achieved_median"] <= hi
    for c in estimates:
        assert c["mape"] is not None and c["bias"] is not None
        assert all(c[k] is None for k in BOUND_COLUMNS) and c["violation_ids"] is None
    # the demo's check filed its bound violations: they are named by their XF ids
    viol = [i for c in bounds for i in c["violation_ids"]]
    assert viol and all(re.fullmatch(r"XF-\d+", i) for i in viol), viol
    # every bound violation among the discrepancies is counted in its aggregate
    n_viol = sum(1 for d in doc["discrepancies"] if d["kind"] == "bound_violation")
    assert sum(c["violations"] for c in bounds) == n_viol
    # roofline latency on a measured target: a bound, achieved < 1 in the median (the bound holds)
    lat = [c for c in bounds if c["metric"] == "latency" and c["reference"] == "measured"]
    assert lat and all(c["achieved_median"] < 1 for c in lat)

    text = _correlate(cli).output
    est, rest = text.split("\nbounds (", 1)
    bnd, disc = rest.split("\ndiscrepancies:", 1)
    assert "MAPE" in est.splitlines()[1] and "violations" not in est
    head = bnd.splitlines()[1]
    for col in ("checked", "violations", "achieved (median)", "IQR", "achieved 95% CI"):
        assert col in head
    assert "MAPE" not in bnd and "bias" not in bnd
    assert "roofline->measured" not in "\n".join(x for x in est.splitlines() if " latency " in x)
    assert re.search(r"1 \(worst 1\d\d\.\d%: XF-\d+\)", bnd)
    # discrepancies: kind and factor, never a ranked severity like 1007.8
    dhead = disc.splitlines()[1]
    assert dhead.split()[:2] == ["kind", "factor"] and "severity" not in dhead
    assert not re.search(r"\b10\d\d\.\d\b", disc.split("  factor =")[0])


@pytest.mark.slow
def test_demo_report_pairs_table_and_plots_of_bounds(demo):
    _, reports = demo
    html = (reports / "xfid-demo.html").read_text(encoding="utf-8")
    est = html[html.index("<h3>Estimates</h3>"):html.index("<h3>Bounds</h3>")]
    bnd = html[html.index("<h3>Bounds</h3>"):html.index("</table>", html.index("<h3>Bounds</h3>"))]
    assert "<th>MAPE</th>" in est and "<th>violations</th>" not in est
    for th in ("<th>checked</th>", "<th>violations</th>", "<th>achieved (median)</th>", "<th>IQR</th>",
               "<th>achieved 95% CI</th>"):
        assert th in bnd
    assert "MAPE" not in bnd and "within tol." not in bnd
    assert re.search(r'data-v="1">1</td><td><a href="#key-[0-9a-f]+">(XF-\d+|[0-9a-f]{8})</a>', bnd)
    # a bound pair's distribution plot shows the achieved fraction, an estimate's the error
    assert 'alt="achieved fraction CDF"' in html and 'alt="error CDF"' in html
    # the worst-five table shows the factor, and says what the tracker's severity is
    worst = html[html.index("Worst five"):html.index("<h2>Comparison pairs</h2>")]
    assert "<th>factor</th>" in worst and "severity is that factor plus a rank" in worst
    assert not re.search(r">10\d\d\.\d+<", worst)


# -- the statistics against plain numpy ------------------------------------------------------


def test_achieved_fraction_statistics_equal_plain_numpy():
    achieved = np.array([0.91, 0.42, 0.77, 1.08, 0.66, 0.99, 0.55, 1.21])
    violated = achieved > 1.02
    gid = np.zeros(len(achieved), np.int64)
    st = bound_stats(gid, 1, achieved, violated, resamples=500, seed=7, exact_max_n=200)
    assert bool(st["bound"][0])
    assert st["violations"][0] == 2 and st["violation_worst"][0] == pytest.approx(1.21)
    assert st["achieved_median"][0] == pytest.approx(np.median(achieved))
    assert st["achieved_q1"][0] == pytest.approx(np.percentile(achieved, 25))
    assert st["achieved_q3"][0] == pytest.approx(np.percentile(achieved, 75))
    # the seeded bootstrap of the median, by hand: resample the sorted values, median, percentiles
    xs = np.sort(achieved)
    idx = np.random.default_rng([7, len(xs)]).integers(0, len(xs), size=(500, len(xs)))
    lo, hi = np.percentile(np.median(xs[idx], axis=1), [2.5, 97.5])
    assert (st["achieved_ci_low"][0], st["achieved_ci_high"][0]) == pytest.approx((lo, hi))
    # above exact_max_n: the order-statistic interval of the median
    big = np.random.default_rng(3).uniform(0.2, 1.0, 401)
    st = bound_stats(np.zeros(401, np.int64), 1, big, np.zeros(401, bool), exact_max_n=50)
    s, n, half = np.sort(big), 401, 1.959963984540054 * math.sqrt(401) / 2
    assert st["achieved_ci_low"][0] == s[math.floor(n / 2 - half) - 1]
    assert st["achieved_ci_high"][0] == s[math.ceil(n / 2 + half) + 1 - 1]


def test_grouped_stats_bound_group_has_no_error_statistics_and_estimate_no_bound_ones():
    gid = np.array([0, 0, 0, 1, 1, 1])
    cand = np.array([1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
    ref = np.array([2.0, 2.5, 3.5, 1.1, 1.9, 3.3])
    rel, lr = (cand - ref) / ref, np.log(cand / ref)
    achieved = np.where(gid == 0, cand / ref, np.nan)  # group 0: a lower bound; group 1: an estimate
    st = grouped_stats(gid, 2, rel, lr, cand, ref, np.abs(rel) <= 0.1, achieved=achieved,
                       violated=np.zeros(6, bool))
    assert list(st["bound"]) == [True, False]
    for k in ("mape", "bias", "median_ape", "log_rmse", "within_tolerance", "mape_ci_low", "bias_ci_high"):
        assert math.isnan(st[k][0]) and not math.isnan(st[k][1]), k
    assert st["mape"][1] == pytest.approx(np.mean(np.abs(rel[3:])))
    assert st["achieved_median"][0] == pytest.approx(np.median(cand[:3] / ref[:3]))
    assert math.isnan(st["achieved_median"][1]) and math.isnan(st["violations"][1])
    assert st["violations"][0] == 0 and st["spearman"][0] == pytest.approx(1.0)


def _bound_store(tmp_path):
    """Roofline latency bounds on 5 measured ops, one beaten by 10% (a violation), and a
    roofline->measured estimate metric (bytes) for comparison."""
    measured = [2.0, 4.0, 5.0, 8.0, 0.9]
    bound = [1.0, 3.0, 4.5, 4.0, 1.0]  # op4: measured 0.9 below the bound 1.0
    files = {
        "roofline.csv": [rec("roofline", f"op{i}", b) for i, b in enumerate(bound)]
        + [rec("roofline", f"op{i}", 100.0 * (i + 1), metric="bytes", unit="B") for i in range(3)],
        "measured.csv": [rec("measured", f"op{i}", m) for i, m in enumerate(measured)]
        + [rec("measured", f"op{i}", 110.0 * (i + 1), metric="bytes", unit="B") for i in range(3)],
    }
    return make_store(tmp_path, files), np.array(bound) / np.array(measured)


def test_engine_aggregates_a_roofline_pair_as_a_bound(tmp_path):
    store, achieved = _bound_store(tmp_path)
    corr = correlate(store, config(), pairs=["roofline->measured"])
    c = corr.comparisons[corr.comparisons["workload"].isna()].set_index("metric")
    lat, byt = c.loc["latency"], c.loc["bytes"]
    assert lat["compared_as"] == "bound" and byt["compared_as"] == "estimate"
    assert lat["n"] == 5 and lat["violations"] == 1
    assert lat["violation_worst"] == pytest.approx(1.0 / 0.9)
    assert lat["achieved_median"] == pytest.approx(np.median(achieved))
    assert lat["achieved_q1"] == pytest.approx(np.percentile(achieved, 25))
    assert lat["achieved_q3"] == pytest.approx(np.percentile(achieved, 75))
    assert lat["achieved_ci"][0] <= lat["achieved_median"] <= lat["achieved_ci"][1]
    assert all(pd.isna(lat[k]) for k in ("mape", "bias", "within_tolerance")) and lat["mape_ci"] is None
    assert byt["mape"] == pytest.approx(1 - 1 / 1.1) and pd.isna(byt["violations"]) and byt["achieved_ci"] is None
    text = to_table(corr, ids={corr.discrepancies["fingerprint"].iloc[0]: "XF-9"})
    assert "1 (worst 111.1%: XF-9)" in text
    # tolerance mode: the roofline is read as an estimate again (MAPE, no bound statistics)
    tol = correlate(store, config({"settings": {"roofline_tolerance": "tolerance"}}), pairs=["roofline->measured"])
    t = tol.comparisons[tol.comparisons["workload"].isna()].set_index("metric").loc["latency"]
    assert t["compared_as"] == "estimate" and t["mape"] > 0 and pd.isna(t["achieved_median"])


def test_snapshots_before_and_after_bound_statistics_compare(tmp_path):
    store, _ = _bound_store(tmp_path)
    corr = correlate(store, config(), pairs=["roofline->measured"])
    new = json.loads(json.dumps(make_snapshot(corr)))
    validate(new, "new.json")
    lat = next(c for c in new["comparisons"] if c["metric"] == "latency")
    assert lat["compared_as"] == "bound" and lat["violations"] == 1 and lat["mape"] is None
    old = json.loads(json.dumps(new))  # as written before: no bound fields, MAPE for every pair
    for c in old["comparisons"]:
        for k in ("compared_as", "violations", "violation_worst", "achieved_median", "achieved_q1", "achieved_q3"):
            c.pop(k)
        c["mape"] = c["mape"] if c["mape"] is not None else 0.4
    validate(old, "old.json")
    for base, cur in ((old, new), (new, old), (new, new)):
        rep = compare_snapshots(base, cur, Thresholds())
        assert not [f for f in rep.findings if f.category == "aggregate"]
    moved = json.loads(json.dumps(new))
    next(c for c in moved["comparisons"] if c["metric"] == "latency")["achieved_median"] -= 0.2
    rep = compare_snapshots(new, moved, Thresholds())
    assert next(f.message for f in rep.findings if f.category == "aggregate").startswith("achieved fraction")


def test_report_reads_a_check_recorded_before_as_a_bound(tmp_path):
    store, achieved = _bound_store(tmp_path)
    corr = correlate(store, config(), pairs=["roofline->measured"])
    comps = corr.comparisons[corr.comparisons["workload"].isna()].astype(object)
    comps = comps.where(comps.notna(), None).to_dict("records")
    for c in comps:  # a check recorded before: MAPE for every pair, no bound fields
        for k in ("compared_as", "violations", "violation_worst", "achieved_median", "achieved_q1",
                  "achieved_q3", "achieved_ci"):
            c.pop(k)
    (lat,) = [p for p in build_pairs([{"time": "t", "comparisons": comps}], corr.rows, []) if p.metric == "latency"]
    assert lat.is_bound and lat.violations == 1 and lat.mape is None
    assert lat.achieved_median == pytest.approx(np.median(achieved))
    fp = corr.discrepancies["fingerprint"].iloc[0]
    assert lat.violation_names({fp: "XF-3"}) == ["XF-3"] and lat.violation_names({}) == [fp[:8]]


# -- scope conversions on hand-made records --------------------------------------------------

RUN = '{"scope":"run"}'


def _run_totals(fid: str, energy: float, tokens: float, seconds: float) -> list[dict]:
    return [rec(fid, "", energy, metric="energy", unit="J", config=RUN),
            rec(fid, "", tokens, metric="output_tokens", unit="tokens", config=RUN),
            rec(fid, "", seconds, metric="duration", unit="s", config=RUN)]


def test_run_energy_over_output_tokens_is_joules_per_token(tmp_path):
    files = {"arch.csv": [rec("archmodel", "", 0.5, metric="energy_per_token", unit="J/token"),
                          rec("archmodel", "", 90.0, metric="energy", unit="J")],  # a step's energy
             "meas.csv": _run_totals("measured", 36000.0, 60000.0, 400.0)}
    corr = correlate(make_store(tmp_path, files), config(), pairs=["archmodel->measured"])
    rows = corr.rows.set_index("metric")
    jpt = rows.loc["energy_per_token"]
    assert jpt["reference_value"] == pytest.approx(36000.0 / 60000.0) and jpt["unit"] == "J/token"
    assert jpt["kind"] in ("ok", "over_tolerance")
    assert "energy_per_token derived: run energy / run output_tokens (output_tokens 60000 tokens, same run)" \
        in jpt["note"]
    # the run's energy itself is never compared with a step's
    e = rows.loc["energy"]
    assert e["kind"] == "missing_reference" and "not comparable" in e["note"]


def test_run_energy_over_duration_is_watts(tmp_path):
    files = {"arch.csv": [rec("archmodel", "", 95.0, metric="power", unit="W")],
             "meas.csv": _run_totals("measured", 36000.0, 60000.0, 400.0)}
    corr = correlate(make_store(tmp_path, files), config(), pairs=["archmodel->measured"])
    (w,) = corr.rows[corr.rows["metric"] == "power"].to_dict("records")
    assert w["reference_value"] == pytest.approx(36000.0 / 400.0) and w["unit"] == "W"
    assert w["rel_error"] == pytest.approx(95.0 / 90.0 - 1)
    assert "power derived: run energy / run duration (duration 400 s, same run)" in w["note"]


def test_serve_health_counts_a_bound_by_the_rows_that_hold_it():
    from xfid.serve.views import health

    checks = [{"id": 1, "comparisons": [
        {"candidate": "roofline", "reference": "measured", "compared_as": "bound", "n": 4, "violations": 1,
         "within_tolerance": None},
        {"candidate": "archmodel", "reference": "measured", "compared_as": "estimate", "n": 4, "violations": None,
         "within_tolerance": 0.5}]}]
    assert health(checks) == {"archmodel->measured": [(1, 0.5)], "roofline->measured": [(1, 0.75)]}


def test_a_bound_pairs_power_is_shown_without_a_within_share(tmp_path):
    """A roofline's power bounds nothing: never checked, so no "within 100%" beside its MAPE."""
    files = {"roofline.csv": [rec("roofline", "", 150.0, metric="power", unit="W"), rec("roofline", "op0", 1.0)],
             "measured.csv": [rec("measured", "", 600.0, metric="power", unit="W"), rec("measured", "op0", 2.0)]}
    corr = correlate(make_store(tmp_path, files), config(), pairs=["roofline->measured"])
    c = corr.comparisons[corr.comparisons["workload"].isna()].set_index("metric")
    assert c.loc["power", "compared_as"] == "estimate" and c.loc["power", "mape"] == pytest.approx(0.75)
    assert pd.isna(c.loc["power", "within_tolerance"])
