"""The Python API used directly: open_store -> ingest -> correlate -> check -> issues -> report, columns pinned."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

import xfid
from tests.conftest import FIXTURES, ROOT
from xfid.errors import StoreError, TrackerError, XfidError

CONFIG = FIXTURES / "demo" / "xfid.toml"
INPUTS = [FIXTURES / "records" / "archmodel.csv", FIXTURES / "records" / "measured.csv",
          FIXTURES / "demo" / "t100_block_model.csv"]

ROW_COLUMNS = [
    "fingerprint", "target", "workload", "op", "metric", "stat", "candidate", "reference", "candidate_value",
    "reference_value", "unit", "rel_error", "log_ratio", "tolerance", "tolerance_abs", "within", "kind", "severity",
    "candidate_n", "reference_n", "candidate_run", "reference_run", "candidate_source_path", "candidate_source_loc",
    "reference_source_path", "reference_source_loc", "candidate_config", "reference_config", "note", "efficiency",
    "factor", "scope"]
COMPARISON_COLUMNS = [
    "target", "workload", "candidate", "reference", "metric", "stat", "n", "mape", "median_ape", "bias", "log_rmse",
    "pearson_log", "spearman", "kendall", "within_tolerance", "mape_ci", "bias_ci", "compared_as", "violations",
    "violation_worst", "achieved_median", "achieved_q1", "achieved_q3", "achieved_ci", "violation_ids"]
COVERAGE_COLUMNS = ["source", "raw_op", "op", "matched", "records", "has_rules", "rule"]
ISSUE_COLUMNS = [
    "id", "fingerprint", "state", "kind", "severity", "target", "workload", "op", "metric", "stat", "candidate",
    "reference", "candidate_value", "reference_value", "rel_error", "owner", "first_seen", "last_seen", "unit",
    "tolerance", "waiver_reason", "waiver_until", "waiver_max_error", "triage_reason", "related_to", "clean_streak",
    "first_check", "last_check",
    "updated_at", "triage_by", "overdue"]
RECORD_COLUMNS = [
    "fidelity", "target", "workload", "op", "metric", "stat", "value", "unit", "n_samples", "source", "source_id",
    "source_path", "source_loc", "run", "timestamp", "hardware", "software", "config", "null_reason", "flags"]


@pytest.fixture
def store(tmp_path):
    with xfid.open_store(tmp_path / "store", config=CONFIG) as s:
        s.ingest(INPUTS)
        s.ingest(FIXTURES / "rtl" / "probe_output", adapter="cocotb")
        yield s


def test_open_store_resolves_like_the_cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XFID_STORE", raising=False)
    monkeypatch.delenv("XFID_CONFIG", raising=False)
    assert xfid.open_store().path == Path(".xfid")
    monkeypatch.setenv("XFID_STORE", str(tmp_path / "env"))
    assert xfid.open_store().path == tmp_path / "env"
    assert xfid.open_store(tmp_path / "arg").path == tmp_path / "arg"
    monkeypatch.delenv("XFID_STORE")
    (tmp_path / "xfid.toml").write_text('[store]\npath = "from-config"\n')
    assert xfid.open_store().path == Path("from-config")


def test_reads_of_a_missing_store_are_an_error_and_create_nothing(tmp_path):
    with xfid.open_store(tmp_path / "none", config=CONFIG) as s:
        for call in (s.correlate, s.issues, s.sources, lambda: s.records(target="x")):
            with pytest.raises(StoreError, match="no store at"):
                call()
    assert not (tmp_path / "none").exists()


def test_ingest_returns_the_summary_and_is_idempotent(tmp_path):
    with xfid.open_store(tmp_path / "s", config=CONFIG) as s:
        first = s.ingest([str(p) for p in INPUTS], run="r1")
        again = s.ingest(INPUTS, run="r1")
    assert (first.rows, len(first.files), [f.already for f in first.files]) == (49, 3, [False] * 3)
    assert (again.rows, [f.already for f in again.files]) == (0, [True] * 3)
    assert first.to_dict()["rows"] == 49


def test_records_dataframe_in_the_normalized_schema(store):
    df = store.records(target="t100-a0", fidelity="rtl", metric="cycles")
    assert list(df.columns) == RECORD_COLUMNS
    assert set(df["fidelity"]) == {"rtl"} and set(df["metric"]) == {"cycles"} and len(df) == 6
    assert set(store.records(columns=["target"], target=["t100-a0", "h100-sxm"])["target"]) == {"t100-a0", "h100-sxm"}
    with pytest.raises(XfidError, match="unknown column 'tragets'"):
        store.records(tragets="t100-a0")


def test_correlate_frames_have_the_json_columns(store):
    corr = store.correlate(targets=["t100-a0"])
    assert list(corr.rows.columns) == ROW_COLUMNS
    assert list(corr.discrepancies.columns) == ROW_COLUMNS
    assert list(corr.comparisons.columns) == COMPARISON_COLUMNS
    assert list(corr.coverage.columns) == COVERAGE_COLUMNS
    doc = json.loads(corr.to_json())
    assert doc == json.loads(json.dumps(corr.to_dict()))
    for name in ("comparisons", "discrepancies", "coverage"):
        assert doc[name], name
        assert set(doc[name][0]) <= set(getattr(corr, name).columns), name  # same names as the DataFrames
    assert sorted(corr.discrepancies["op"]) == ["dma[bytes=1024]", "dma[bytes=4096]"]
    assert set(corr.rows["target"]) == {"t100-a0"}


def test_correlate_json_is_what_the_cli_prints(store, xfid_cli):
    xfid_cli.store = store.path
    out = xfid_cli("--config", CONFIG, "correlate", "--format", "json", "--target", "t100-a0").output
    api = json.loads(store.correlate(targets=["t100-a0"], fingerprints="discrepancies").to_json())
    assert json.loads(out)["comparisons"] == api["comparisons"]
    assert json.loads(out)["discrepancies"] == api["discrepancies"]


def test_check_issues_act_history_report(store, tmp_path):
    s = store.check(actor="nb", label="api")
    assert (s.new, s.total_open, s.rows) == (["XF-1", "XF-2"], 2, 12)
    issues = store.issues(state="open")
    assert list(issues.columns) == ISSUE_COLUMNS
    assert list(issues["id"]) == ["XF-1", "XF-2"] and set(issues["kind"]) == {"over_tolerance"}
    assert issues["owner"].isna().all() and issues["fingerprint"].str.fullmatch(r"[0-9a-f]{16}").all()
    assert store.act("XF-1", "ack", owner="dana", actor="nb")["state"] == "acknowledged"
    assert list(store.issues(state="acknowledged")["owner"]) == ["dana"]
    assert store.issue("XF-1")["history"][-1]["actor"] == "nb"
    assert list(store.issues(target=["t100-a0", "h100-sxm"])["id"]) == ["XF-1", "XF-2"]
    assert store.issues(target="h100-sxm").empty and list(store.issues(target="h100-sxm").columns) == ISSUE_COLUMNS
    with pytest.raises(TrackerError, match="XF-1 is acknowledged: cannot reopen it"):
        store.act("XF-1", "reopen", actor="nb")
    again = store.check(actor="nb")
    assert (again.new, again.still_open) == ([], ["XF-1", "XF-2"])
    assert [p["check_id"] for p in store.history("XF-2").series] == [1, 2]
    rep = store.report(date.today().isoformat(), tmp_path / "r.html", html=True)
    assert (rep.path, rep.html, rep.pages, rep.active_issues) == (tmp_path / "r.html", True, None, 2)
    assert "XF-1" in rep.path.read_text(encoding="utf-8")


def test_check_validates_resolve_after_and_records_a_given_correlation(store):
    with pytest.raises(TrackerError, match="resolve_after must be an integer >= 1, got 0"):
        store.check(resolve_after=0)
    corr = store.correlate(targets=["t100-a0"])
    s = store.check(correlation=corr, actor="nb", resolve_after=2)
    assert (s.new, s.rows) == (["XF-1", "XF-2"], len(corr.rows))
    assert store.tracker.check_coverage(s.check_id)["raw_op"].tolist() == corr.coverage["raw_op"].tolist()


def test_snapshot_and_compare(store, tmp_path):
    snap = store.snapshot(tmp_path / "base.json", label="v1")
    assert snap["label"] == "v1" and (tmp_path / "base.json").is_file()
    same = xfid.compare(tmp_path / "base.json", store)
    assert (same.exit_code, same.failing) == (0, [])
    assert xfid.compare(snap, store.correlate()).exit_code == 0
    store.ingest(FIXTURES / "records" / "archmodel.csv", workload="other/wl", run="drifted")  # new keys, new issues
    drifted = xfid.compare(tmp_path / "base.json", store, fail_on="any")
    assert drifted.exit_code == xfid.compare(snap, store, fail_on=["any"]).exit_code


def test_import_xfid_is_light():
    code = ("import sys, xfid; xfid.open_store; "
            "print(','.join(m for m in ('pandas', 'pyarrow', 'scipy', 'matplotlib', 'weasyprint') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def _example() -> str:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## Worked example", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return blocks[0]


@pytest.mark.slow
def test_the_worked_example_in_docs_api_runs_as_written(tmp_path):
    """The example of docs/api.md, byte for byte, in a new folder that holds only the bundled fixtures."""
    (tmp_path / "fixtures").symlink_to(FIXTURES, target_is_directory=True)
    (tmp_path / "example").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XFID_")}
    r = subprocess.run([sys.executable, "-c", _example()], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "new issues: ['XF-1', 'XF-2']" in r.stdout
    assert "drift exit code: 0" in r.stdout
    assert re.search(r"example/report\.pdf \d+ pages, 2 active issues", r.stdout), r.stdout
    assert (tmp_path / "example" / "report.pdf").read_bytes().startswith(b"%PDF")
    assert json.loads((tmp_path / "example" / "correlation.json").read_text())["discrepancies"]
