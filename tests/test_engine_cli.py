"""`xfid correlate` through the CLI: formats, options, bad input (Error: + exit 2)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.conftest import store_snapshot
from tests.test_engine_helpers import rec, write_csv


@pytest.fixture
def loaded(xfid_cli, fixtures):
    r = xfid_cli("ingest", fixtures / "records")
    assert r.exit_code == 0, r.output
    return xfid_cli


def test_table_markdown_csv_json(loaded, tmp_path):
    t = loaded("correlate")
    assert t.exit_code == 0, t.output
    assert "roofline->measured" in t.output and "bound_violation" in t.output
    md = loaded("correlate", "--format", "markdown")
    assert md.exit_code == 0 and md.output.startswith("# xfid correlation")
    assert "gemm\\_tile\\[m=64,n=64,k=128\\]" in md.output  # untrusted names are escaped
    rows = list(csv.DictReader(io.StringIO(loaded("correlate", "--format", "csv").output)))
    assert {"fingerprint", "rel_error", "kind", "candidate_source_loc"} <= set(rows[0])
    assert all(len(r["fingerprint"]) == 16 for r in rows)  # the CSV lists every row, ok ones too
    out = tmp_path / "c.json"
    j = loaded("correlate", "--format", "json", "-o", out)
    assert j.exit_code == 0 and out.exists()
    doc = json.loads(out.read_text())
    assert set(doc) >= {"comparisons", "discrepancies", "coverage", "settings", "sources", "config_hash"}
    d = doc["discrepancies"][0]
    for k in ("fingerprint", "target", "workload", "op", "metric", "stat", "candidate", "reference",
              "candidate_value", "reference_value", "unit", "rel_error", "log_ratio", "tolerance", "kind",
              "severity", "candidate_source_path", "candidate_source_loc", "reference_source_path",
              "reference_source_loc"):
        assert k in d, k
    assert d["kind"] == "bound_violation"
    assert all(len(x["fingerprint"]) == 16 for x in doc["discrepancies"])


def test_options_pair_target_run_asof_missing(loaded):
    j = json.loads(loaded("correlate", "--format", "json", "--pair", "archmodel->measured").output)
    assert {(c["candidate"], c["reference"]) for c in j["comparisons"]} == {("archmodel", "measured")}
    j = json.loads(loaded("correlate", "--format", "json", "--target", "t100-a0").output)
    assert {c["target"] for c in j["comparisons"]} == {"t100-a0"}
    j = json.loads(loaded("correlate", "--format", "json", "--include-missing").output)
    assert any(d["kind"] == "missing_reference" for d in j["discrepancies"])
    old = json.loads(loaded("correlate", "--format", "json", "--pair", "archmodel->measured", "--run",
                            "archmodel=arch-v1").output)
    top = next(c for c in old["comparisons"] if c["workload"] is None and c["metric"] == "latency")
    assert top["n"] == 6 and top["mape"] != pytest.approx(0.052796520, rel=1e-6)
    early = json.loads(loaded("correlate", "--format", "json", "--as-of", "2026-11-19").output)
    assert early["settings"]["as_of"].startswith("2026-11-19T23:59:59")


@pytest.mark.parametrize("args, message", [
    (("--pair", "roofline"), "Error: --pair expects CANDIDATE->REFERENCE"),
    (("--pair", "roofline->bogus"), "unknown fidelity 'bogus'"),
    (("--target", "nope"), "Error: unknown target 'nope'"),
    (("--as-of", "soon"), "Error: --as-of expects a date"),
    (("--run", "bogus=r1"), "Error: --run 'bogus=r1'"),
])
def test_bad_input_exit_2(loaded, args, message):
    before = store_snapshot(loaded.store)
    r = loaded("correlate", *args)
    assert r.exit_code == 2 and message in r.output, r.output
    assert "Traceback" not in r.output
    assert store_snapshot(loaded.store) == before


def test_no_store_is_an_error(xfid_cli):
    r = xfid_cli("correlate")
    assert r.exit_code == 2 and "Error: no store at" in r.output


def test_empty_store_prints_none(xfid_cli, tmp_path):
    write_csv(tmp_path / "a.csv", [rec("archmodel", "x", 1.0)])
    assert xfid_cli("ingest", tmp_path / "a.csv").exit_code == 0
    r = xfid_cli("correlate")
    assert r.exit_code == 0 and "none: no two fidelities share a key" in r.output
    j = json.loads(xfid_cli("correlate", "--format", "json").output)
    assert j["comparisons"] == [] and j["discrepancies"] == []


def test_help_lists_options(xfid_cli):
    r = xfid_cli("correlate", "--help")
    for opt in ("--format", "--pair", "--run", "--as-of", "--include-missing", "--target", "-o"):
        assert opt in r.output
