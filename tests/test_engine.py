"""The correlation engine on real stores: which numbers, alignment, bounds, mismatches, op maps."""

from __future__ import annotations

import math

import pytest

from tests.test_engine_helpers import config, make_store, rec
from xfid.engine import correlate
from xfid.engine.contract import COMPARISON_COLUMNS, COVERAGE_COLUMNS, ROW_COLUMNS
from xfid.engine.fingerprints import fingerprint
from xfid.errors import ConfigError, EngineError

AM = "archmodel"
ME = "measured"


def _row(corr, op, cand, ref, metric=None):
    r = corr.rows
    sel = (r["op"] == op) & (r["candidate"] == cand) & (r["reference"] == ref)
    if metric:
        sel &= r["metric"] == metric
    out = r[sel]
    assert len(out) == 1, out
    return out.iloc[0]


def test_contract_columns_and_hand_computed_errors(tmp_path):
    store = make_store(tmp_path, {
        "a.csv": [rec(AM, "x", 11), rec(AM, "y", 18), rec(AM, "z", 40), rec(AM, "u", 30)],
        "m.csv": [rec(ME, "x", 10), rec(ME, "y", 20), rec(ME, "z", 40), rec(ME, "u", 80)],
    })
    c = correlate(store, config())
    assert list(c.rows.columns)[: len(ROW_COLUMNS)] == list(ROW_COLUMNS)
    assert list(c.comparisons.columns) == list(COMPARISON_COLUMNS)
    assert list(c.coverage.columns)[: len(COVERAGE_COLUMNS)] == list(COVERAGE_COLUMNS)
    x = _row(c, "x", AM, ME)
    assert x["rel_error"] == pytest.approx(0.1) and x["log_ratio"] == pytest.approx(math.log(1.1))
    assert x["fingerprint"] == fingerprint("h100-sxm", "w1", "x", "latency", "value", AM, ME)
    assert x["tolerance"] == pytest.approx(0.10) and bool(x["within"]) and x["kind"] == "ok"
    u = _row(c, "u", AM, ME)
    assert u["kind"] == "over_tolerance" and u["severity"] == pytest.approx(0.625 / 0.10)
    assert u["candidate_source_path"].endswith("a.csv") and u["candidate_source_loc"] == "line 5"
    assert u["reference_source_loc"] == "line 5" and u["candidate_run"] == "r1"
    top = c.comparisons[c.comparisons["workload"].isna()].iloc[0]
    assert (top["candidate"], top["reference"], top["n"]) == (AM, ME, 4)
    assert top["mape"] == pytest.approx(0.20625) and top["median_ape"] == pytest.approx(0.1)
    assert top["spearman"] == pytest.approx(0.8) and top["kendall"] == pytest.approx(4 / 6)
    assert top["within_tolerance"] == pytest.approx(0.75)
    wl = c.comparisons[c.comparisons["workload"] == "w1"]
    assert len(wl) == 1 and wl.iloc[0]["mape"] == pytest.approx(0.20625)
    assert list(c.discrepancies["op"]) == ["u"]


def test_latest_run_wins_and_duplicates_take_the_median(tmp_path):
    store = make_store(tmp_path, {
        "a.csv": [rec(AM, "x", 1.0, run="old", timestamp="2026-11-01T00:00:00Z"),
                  rec(AM, "x", 2.0, run="new", timestamp="2026-11-05T00:00:00Z"),
                  rec(AM, "y", 3.0, run="old", timestamp="2026-11-01T00:00:00Z")],
        "m.csv": [rec(ME, "x", 1.9), rec(ME, "x", 2.1), rec(ME, "x", 2.6), rec(ME, "y", 3.0)],
    })
    c = correlate(store, config())
    x = _row(c, "x", AM, ME)
    assert x["candidate_value"] == 2.0 and x["candidate_run"] == "new"
    assert x["reference_value"] == pytest.approx(2.1) and x["reference_n"] == 3 and x["candidate_n"] == 1
    assert "median of 3 records" in x["note"]
    assert _row(c, "y", AM, ME)["candidate_run"] == "old"  # the latest run *that has the key*
    assert c.settings["counts"]["history_records"] == 1
    # --run prefers an older run; --as-of hides newer records
    assert _row(correlate(store, config(), runs="old"), "x", AM, ME)["candidate_value"] == 1.0
    assert _row(correlate(store, config(), runs=["archmodel=old"]), "x", AM, ME)["candidate_value"] == 1.0
    assert _row(correlate(store, config(), as_of="2026-11-02"), "x", AM, ME)["candidate_value"] == 1.0
    assert _row(correlate(store, config(), as_of="2026-11-05"), "x", AM, ME)["candidate_value"] == 2.0
    with pytest.raises(EngineError, match="as_of"):
        correlate(store, config(), as_of="yesterday-ish")


def test_null_values_and_flagged_references(tmp_path):
    store = make_store(tmp_path, {
        "a.csv": [rec(AM, "x", 1.0), rec(AM, "y", 1.0), rec(AM, "z", 1.0)],
        "m.csv": [rec(ME, "x", None, null_reason="n/a in file"), rec(ME, "y", 1.5, flags="invalid"),
                  rec(ME, "z", 1.02)],
        "m2.csv": [rec(ME, "w", 1.0, flags="failed_test"), ],
        "a2.csv": [rec(AM, "w", 2.0, flags="invalid")],
    })
    c = correlate(store, config())
    assert c.settings["counts"]["null_records"] == 1 and c.settings["counts"]["null_keys"] == 1
    x = _row(c, "x", AM, ME)
    assert x["kind"] == "missing_reference" and math.isnan(x["reference_value"])
    y = _row(c, "y", AM, ME)
    assert y["kind"] == "missing_reference" and "flagged" in y["note"]
    assert not (c.discrepancies["kind"] == "missing_reference").any()
    with_missing = correlate(store, config(), include_missing=True)
    assert set(with_missing.discrepancies["op"]) == {"x", "y", "w"}
    # a flagged number may still be a candidate (noted)
    w = _row(c, "w", AM, ME)
    assert w["kind"] == "missing_reference"  # its reference is flagged failed_test
    assert "candidate flagged" in w["note"]


def test_bound_violation_and_roofline_tolerance_modes(tmp_path):
    store = make_store(tmp_path, {
        "r.csv": [rec("roofline", "a", 10.0), rec("roofline", "b", 10.0), rec("roofline", "c", 10.0),
                  rec("roofline", "", 100.0, metric="throughput_tokens", unit="tokens/s")],
        "m.csv": [rec(ME, "a", 9.9), rec(ME, "b", 9.0), rec(ME, "c", 30.0),
                  rec(ME, "", 110.0, metric="throughput_tokens", unit="tokens/s")],
    })
    c = correlate(store, config())
    a, b, cc = (_row(c, op, "roofline", ME) for op in "abc")
    assert a["kind"] == "ok" and a["tolerance"] == 0.02  # 1% below the bound: within bound_tolerance
    assert b["kind"] == "bound_violation" and b["severity"] == pytest.approx(1000 + (1 / 9) / 0.02)
    assert cc["kind"] == "ok" and cc["efficiency"] == pytest.approx(1 / 3)  # far above: not a discrepancy
    t = _row(c, "", "roofline", ME, metric="throughput_tokens")
    assert t["kind"] == "bound_violation"  # a measured rate above the roofline rate
    assert list(c.discrepancies["kind"]) == ["bound_violation", "bound_violation"]
    strict = correlate(store, config({"settings": {"roofline_tolerance": "tolerance"}}))
    assert _row(strict, "c", "roofline", ME)["kind"] == "over_tolerance"
    eff = correlate(store, config({"settings": {"roofline_min_efficiency": 0.5}}))
    assert _row(eff, "c", "roofline", ME)["kind"] == "over_tolerance"
    assert _row(eff, "a", "roofline", ME)["kind"] == "ok"


def test_config_mismatch_rtl_params_and_precision(tmp_path):
    good = {"block": "gemm_tile", "params": {"ROWS": 4, "COLS": 4}}
    bad = {"block": "gemm_tile", "params": {"ROWS": 8, "COLS": 4}}
    store = make_store(tmp_path, {
        "a.csv": [rec(AM, "t1", 100, metric="cycles", unit="cycles", target="t100-a0", workload="block/gemm_tile", config=good),
                  rec(AM, "t2", 100, metric="cycles", unit="cycles", target="t100-a0", workload="block/gemm_tile", config=good),
                  rec(AM, "g", 1.0, config={"precision": "bf16"}), rec(AM, "h", 1.0, config={"precision": "bf16"})],
        "r.csv": [rec("rtl", "t1", 101, metric="cycles", unit="cycles", target="t100-a0", workload="block/gemm_tile", config=good),
                  rec("rtl", "t2", 100, metric="cycles", unit="cycles", target="t100-a0", workload="block/gemm_tile", config=bad)],
        "m.csv": [rec(ME, "g", 1.0, config={"precision": "fp8"}), rec(ME, "h", 1.0, config={"precision": "bf16"})],
    })
    c = correlate(store, config())
    assert _row(c, "t1", AM, "rtl")["kind"] == "ok"
    t2 = _row(c, "t2", AM, "rtl")
    assert t2["kind"] == "config_mismatch" and "ROWS: archmodel=4 vs rtl=8" in t2["note"]
    assert "ROWS: rtl=8 vs targets.t100-a0.blocks.gemm_tile=4" in t2["note"]
    g = _row(c, "g", AM, ME)
    assert g["kind"] == "config_mismatch" and "precision: archmodel=bf16 vs measured=fp8" in g["note"]
    assert _row(c, "h", AM, ME)["kind"] == "ok"
    assert 100 <= g["severity"] < 1000


def test_op_maps_sum_raw_ops_and_list_coverage(tmp_path):
    store = make_store(tmp_path, {
        "a.csv": [rec(AM, "attn.qkv_proj", 3e-5), rec(AM, "mlp.down_proj", 2e-5)],
        "m.csv": [rec(ME, "ampere_bf16_s16816gemm_qkv", 2e-5), rec(ME, "flash_fwd_qkv_rope", 1e-5),
                  rec(ME, "void mystery_kernel<128>(Params)", 5e-6), rec(ME, "cutlass_down_gemm", 2.1e-5)],
    })
    cfg = config({"op_map": [{"source": "xfid-records", "match": "qkv", "op": "attn.qkv_proj"},
                             {"source": "xfid-records", "match": "^cutlass_down", "op": "mlp.down_proj"}]})
    c = correlate(store, cfg)
    q = _row(c, "attn.qkv_proj", AM, ME)
    assert q["reference_value"] == pytest.approx(3e-5) and q["kind"] == "ok"  # 2e-5 + 1e-5, summed
    assert "sum of 2 raw ops" in q["note"]
    assert _row(c, "mlp.down_proj", AM, ME)["reference_value"] == pytest.approx(2.1e-5)
    cov = c.coverage.set_index("raw_op")
    assert not cov.loc["void mystery_kernel<128>(Params)", "matched"]
    assert cov.loc["flash_fwd_qkv_rope", "op"] == "attn.qkv_proj" and cov.loc["flash_fwd_qkv_rope", "matched"]
    assert bool(cov.loc["attn.qkv_proj", "matched"]) and cov.loc["attn.qkv_proj", "op"] == "attn.qkv_proj"
    assert not cov.loc["mlp.down_proj", "matched"]  # no rule: listed, kept as it is
    assert int(cov["records"].sum()) == 6


def test_cycles_to_latency_only_where_configured(tmp_path):
    store = make_store(tmp_path, {
        "a.csv": [rec(AM, "k", 1.755e6, metric="cycles", unit="cycles")],
        "m.csv": [rec(ME, "k", 1.0e-3)],
    })
    plain = correlate(store, config())
    assert not len(plain.rows[plain.rows["reference_value"].notna()])  # cycles never meet seconds
    cfg = config({"compare": [{"candidate": AM, "reference": ME, "convert": "cycles->latency"}]})
    c = correlate(store, cfg)
    k = _row(c, "k", AM, ME)
    assert k["metric"] == "latency" and k["unit"] == "s"
    assert k["candidate_value"] == pytest.approx(1.0e-3)  # 1.755e6 cycles at 1.755 GHz
    assert "converted cycles->latency" in k["note"] and c.settings["clock_hz"]["h100-sxm"] == 1.755e9
    with pytest.raises(ConfigError, match="convert"):
        correlate(store, config({"compare": [{"candidate": AM, "reference": ME, "convert": "bytes->joules"}]}))


def test_pairs_targets_and_bad_input(tmp_path):
    store = make_store(tmp_path, {"a.csv": [rec(AM, "x", 1.0)], "m.csv": [rec(ME, "x", 1.0)],
                                  "r.csv": [rec("roofline", "x", 0.5)]})
    c = correlate(store, config(), pairs=["roofline->measured"])
    assert set(zip(c.rows["candidate"], c.rows["reference"], strict=True)) == {("roofline", ME)}
    for bad in ("roofline", "a->a", "roofline->nope"):
        with pytest.raises(EngineError):
            correlate(store, config(), pairs=[bad])
    with pytest.raises(ConfigError, match="unknown target 'nope'"):
        correlate(store, config(), targets=["nope"])
    assert len(correlate(store, config(), targets=["h200-sxm"]).rows) == 0


def test_missing_reference_only_inside_shared_workloads(tmp_path):
    store = make_store(tmp_path, {
        "a.csv": [rec(AM, "x", 1.0), rec(AM, "y", 1.0), rec(AM, "x", 1.0, workload="w2")],
        "m.csv": [rec(ME, "x", 1.0)],
    })
    c = correlate(store, config())
    assert set(c.rows["op"]) == {"x", "y"} and set(c.rows["workload"]) == {"w1"}
    info = next(p for p in c.settings["pairs"] if p["candidate"] == AM and p["reference"] == ME)
    assert info["missing_reference"] == 1 and info["outside_reference_workloads"] == 1


def test_fixture_set_end_to_end(xfid_cli, fixtures):
    r = xfid_cli("ingest", fixtures / "records")
    assert r.exit_code == 0, r.output
    import json

    out = xfid_cli("correlate", "--format", "json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    kinds = sorted((d["kind"], d["op"], d["candidate"], d["reference"]) for d in doc["discrepancies"])
    assert kinds == [("bound_violation", "lm_head", "roofline", "measured"),
                     ("config_mismatch", "gemm_tile[m=64,n=64,k=128]", "archmodel", "rtl"),
                     ("config_mismatch", "gemm_tile[m=64,n=64,k=128]", "roofline", "rtl")]
    top = {(c["target"], c["candidate"], c["reference"], c["metric"]): c for c in doc["comparisons"] if c["workload"] is None}
    am = top[("h100-sxm", "archmodel", "measured", "latency")]
    assert am["n"] == 6 and am["mape"] == pytest.approx(0.052796520, rel=1e-6)
    assert am["bias"] == pytest.approx(0.977712965, rel=1e-6)
    bv = next(d for d in doc["discrepancies"] if d["kind"] == "bound_violation")
    assert bv["reference_source_path"].endswith("measured.csv") and bv["reference_source_loc"] == "line 9"
    assert bv["rel_error"] == pytest.approx(313.7 / 301.2 - 1)
