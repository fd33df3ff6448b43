"""Hand-built Correlation objects with the contract columns, for tracker tests (and tests of them)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from xfid.engine.contract import COMPARISON_COLUMNS, COVERAGE_COLUMNS, ROW_COLUMNS, Correlation
from xfid.engine.fingerprints import fingerprint

KEY = {"target": "t100-a0", "workload": "llama3-8b/decode/bs8/ctx2048/bf16", "op": "layer0.attn.qkv_proj",
       "metric": "latency", "stat": "value", "candidate": "archmodel", "reference": "rtl"}


def row(cand: float | None, ref: float | None = 1.0, *, tol: float = 0.10, kind: str | None = None,
        **key: str) -> dict[str, Any]:
    """One aligned row: errors, tolerance verdict, kind and severity computed like the engine does."""
    k = {**KEY, **key}
    if ref is None:
        rel = lr = None
        kind = kind or "missing_reference"
    else:
        rel = (cand - ref) / ref
        lr = math.log(cand / ref)
    within = rel is not None and abs(rel) <= tol
    if kind is None:
        kind = "ok" if within else "over_tolerance"
    sev = None if rel is None else abs(rel) / tol + (1000.0 if kind == "bound_violation" else 0.0)
    return {
        "fingerprint": fingerprint(*(k[f] for f in ("target", "workload", "op", "metric", "stat",
                                                      "candidate", "reference"))),
        **k, "candidate_value": cand, "reference_value": ref, "unit": "s", "rel_error": rel, "log_ratio": lr,
        "tolerance": tol, "tolerance_abs": 0.0, "within": within, "kind": kind,
        "severity": sev if kind != "ok" else (None if rel is None else abs(rel) / tol),
        "candidate_n": 1, "reference_n": 3, "candidate_run": "model-v7", "reference_run": "rtl-abc123",
        "candidate_source_path": "fixtures/records/archmodel.csv", "candidate_source_loc": "line 4",
        "reference_source_path": "fixtures/records/rtl.csv", "reference_source_loc": "line 9",
        "candidate_config": '{"precision":"bf16"}', "reference_config": '{"params":{"M":128}}', "note": None,
    }


def corr(*rows: dict[str, Any], config_hash: str = "cfg0123456789abc") -> Correlation:
    """A Correlation of these rows: discrepancies = kind != ok; one target-level comparison row."""
    df = pd.DataFrame(list(rows), columns=list(ROW_COLUMNS))
    disc = df[df["kind"] != "ok"].reset_index(drop=True)
    comp = pd.DataFrame([{
        "target": "t100-a0", "workload": None, "candidate": "archmodel", "reference": "rtl",
        "metric": "latency", "stat": "value", "n": len(df), "mape": 0.12, "median_ape": 0.1, "bias": 1.05,
        "log_rmse": 0.11, "pearson_log": 0.98, "spearman": 0.9, "kendall": 0.8, "within_tolerance": 0.5,
        "mape_ci": [0.05, 0.2], "bias_ci": [1.0, 1.1]}, {
        "target": "t100-a0", "workload": KEY["workload"], "candidate": "archmodel", "reference": "rtl",
        "metric": "latency", "stat": "value", "n": len(df), "mape": 0.12, "median_ape": 0.1, "bias": 1.05,
        "log_rmse": 0.11, "pearson_log": float("nan"), "spearman": None, "kendall": None,
        "within_tolerance": 0.5, "mape_ci": None, "bias_ci": None}], columns=list(COMPARISON_COLUMNS))
    return Correlation(rows=df, comparisons=comp, discrepancies=disc,
                       coverage=pd.DataFrame(columns=list(COVERAGE_COLUMNS)),
                       sources=[{"source_id": "a1b2", "path": "fixtures/records/rtl.csv",
                                 "adapter": "xfid-records", "content_hash": "sha256:feed"}],
                       config_hash=config_hash)


def test_row_helper_matches_the_contract():
    r = row(1.25, 1.0)
    assert set(r) == set(ROW_COLUMNS)
    assert r["kind"] == "over_tolerance" and r["rel_error"] == 0.25 and math.isclose(r["severity"], 2.5)
    assert row(1.05)["kind"] == "ok"
    assert row(1.0, None)["kind"] == "missing_reference"
    assert len(r["fingerprint"]) == 16 and row(9.0)["fingerprint"] == r["fingerprint"]


def test_corr_helper_splits_discrepancies():
    c = corr(row(1.25), row(1.0, op="b"), row(2.0, None, op="c"))
    assert list(c.rows.columns) == list(ROW_COLUMNS)
    assert sorted(c.discrepancies["kind"]) == ["missing_reference", "over_tolerance"]
