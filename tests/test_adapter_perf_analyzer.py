"""perf-analyzer adapter: Triton perf_client 1.8 and perf_analyzer 2.5+ CSVs, one run per row, µs columns."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, copy_fixture
from xfid.adapters import sniff_all

DIR = FIXTURES / "measured/perf-analyzer"
CTX = ("--target", "a100-sxm", "--workload", "resnet50/bs1")  # the files name neither; any will do here


def ingest(xfid_cli, tmp_path, name, *args):
    """Copy a fixture out of its folder (whose xfid-source.toml skips it) and ingest + export it."""
    return xfid_cli.ingest_export(copy_fixture(DIR / name, tmp_path), *CTX, *args)


def pick(recs, metric, stat, run):
    hits = [r for r in recs if r["metric"] == metric and r["stat"] == stat and r["run"] == run]
    assert len(hits) == 1, (metric, stat, run, hits)
    return hits[0]


def test_perf_analyzer_rows_are_runs(xfid_cli, tmp_path):
    recs, _ = ingest(xfid_cli, tmp_path, "resnet50_perf_analyzer_2.5.csv", "--run", "pa")
    assert sorted({r["run"] for r in recs}) == ["pa-c1", "pa-c2", "pa-c3", "pa-c4"]
    # rows are sorted by throughput: concurrency 4 is on line 4, concurrency 3 on line 5
    c3 = pick(recs, "throughput_samples", "mean", "pa-c3")
    assert c3["value"] == 210.2 and c3["source_loc"] == "line 5, Inferences/Second"
    assert json.loads(c3["config"]) == {"concurrency": 3, "row": 4}
    p99 = pick(recs, "e2e_latency", "p99", "pa-c3")
    assert p99["value"] == pytest.approx(0.014426) and p99["unit"] == "s"
    assert p99["source_loc"] == "line 5, p99 latency"
    assert pick(recs, "e2e_latency", "p50", "pa-c1")["value"] == pytest.approx(0.006133)
    assert pick(recs, "perf_analyzer:server_queue", "mean", "pa-c4")["value"] == pytest.approx(0.012835)
    assert pick(recs, "perf_analyzer:server_compute_infer", "mean", "pa-c2")["value"] == pytest.approx(0.00472)
    assert pick(recs, "perf_analyzer:client_recv", "mean", "pa-c2")["value"] == pytest.approx(0.000028)
    assert {r["software"] for r in recs} == {"perf_analyzer"}
    assert len(recs) == 4 * 12


def test_perf_client_layout(xfid_cli, tmp_path):
    recs, _ = ingest(xfid_cli, tmp_path, "resnet50_perf_client_1.8.csv")
    runs = sorted({r["run"] for r in recs})
    assert len(runs) == 4 and all(r.startswith("resnet50_perf_client_1.8-") for r in runs)
    c2 = [r for r in recs if r["run"].endswith("-c2")]
    assert {r["software"] for r in c2} == {"perf_client"}
    compute = [r for r in c2 if r["metric"] == "perf_analyzer:server_compute"]
    assert len(compute) == 1 and compute[0]["value"] == pytest.approx(0.004756)
    assert [r["value"] for r in c2 if r["metric"] == "throughput_samples"] == [209.2]
    assert not any(r["metric"] == "perf_analyzer:server_compute_infer" for r in recs)


def test_newest_docs_table(xfid_cli, tmp_path):
    recs, _ = ingest(xfid_cli, tmp_path, "inception_perf_analyzer_2025.csv", "--run", "inc")
    assert pick(recs, "e2e_latency", "p90", "inc-c4")["value"] == pytest.approx(0.056545)
    assert pick(recs, "throughput_samples", "mean", "inc-c2")["value"] == 87.2


def test_request_rate_and_unknown_columns(xfid_cli, tmp_path):
    f = tmp_path / "rate.csv"  # the request-rate header and two --verbose-csv columns (values invented)
    f.write_text("Request Rate,Inferences/Second,Client Send,p99 latency,Avg latency,Avg GPU Utilization\n"
                 "2.5,2.4,10,5000,4200,GPU-aa:0.8;\n")
    assert sniff_all(f) == ["perf-analyzer"]
    recs, out = xfid_cli.ingest_export(f, *CTX, "--run", "r")
    assert {r["run"] for r in recs} == {"r-r2.5"}
    assert pick(recs, "e2e_latency", "mean", "r-r2.5")["value"] == pytest.approx(0.0042)
    assert json.loads(recs[0]["config"])["request_rate"] == 2.5
    assert "skipped line 1, column 'Avg GPU Utilization': not read by xfid" in out


def test_needs_target_and_workload(xfid_cli, tmp_path):
    f = copy_fixture(DIR / "resnet50_perf_analyzer_2.5.csv", tmp_path)
    r = xfid_cli("ingest", f, "--target", "a100-sxm")
    assert r.exit_code == 2 and "no workload: perf_analyzer CSVs do not name the model" in r.output


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t[: t.rindex("\n", 0, len(t) - 1) + 8], "line 5: expected 13 fields like the header, got"),
        (lambda t: t.replace("4,209.8,", "4,n/a,"), "line 4, Inferences/Second: Inferences/Second must be a number"),
        (lambda t: t.replace("Concurrency,", "Batch,"), "line 1: expected a perf_analyzer header"),
        (lambda t: t.replace("\n3,", "\n2,"), "line 5: Concurrency 2 is measured twice (also on line 3)"),
        (lambda t: t.splitlines()[0] + "\n", "no rows under the header"),
    ],
)
def test_bad_input(xfid_cli, tmp_path, snapshot, edit, message):
    ingest(xfid_cli, tmp_path, "resnet50_perf_client_1.8.csv")  # a store with data in it
    f = tmp_path / "bad.csv"
    f.write_text(edit((DIR / "resnet50_perf_analyzer_2.5.csv").read_text()))
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "perf-analyzer", *CTX)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}"), r.output
    assert message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


def test_sniff_claims_only_its_files(tmp_path):
    for f in sorted(DIR.glob("*.csv")):
        assert sniff_all(f) == ["perf-analyzer"], f
    other = tmp_path / "x.csv"
    other.write_text("Metric,avg,min,max\nTime To First Token (ms),1,1,1\n")
    assert "perf-analyzer" not in sniff_all(other)
