"""aiperf, llmperf, SCALE-Sim v1 and the GuideLLM refusal on real files (issue 29, round 3).

Values are read by hand from the fixtures and pinned exactly; the export gives them in xfid's
canonical units, so an expected value is the file's decimal converted exactly
(`_conv("11205.91161602855", 1, 1000)` for milliseconds). Where no licensed real file shows a
layout, a clearly labelled HAND-MADE input is written here in the test (NEWER_JSON, HTTP_CSV,
TELEMETRY_ROWS), never as a fixture.
"""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from xfid.adapters import sniff_all
from xfid.adapters.aiperf import AiperfAdapter
from xfid.adapters.base import ReadContext
from xfid.adapters.genai_perf import GenaiPerfAdapter

M = FIXTURES / "measured"
AIPERF = M / "aiperf"
LLMPERF = M / "llmperf"
GUIDELLM = M / "guidellm"
V1 = FIXTURES / "models" / "scalesim"
EYERISS = V1 / "v1_eyeriss_alexnet"
KANGSK = V1 / "v1_kangsk_alexnet"


def _conv(decimal: str, num: int, den: int = 1) -> float:
    """The file's decimal times num/den, correctly rounded (what xfid's exact conversion gives)."""
    return float(Fraction(decimal) * num / den)


def _one(recs, **kw):
    hits = [r for r in recs if all(r[k] == v for k, v in kw.items())]
    assert len(hits) == 1, (kw, hits)
    return hits[0]


INDIVIDUAL = LLMPERF / "leaderboard_groq_70b_individual.json"
"""llmperf's per-request file: recognised and refused by name, not read."""


def _data_files(folder: Path) -> list[Path]:
    return sorted(f for f in folder.iterdir() if f.name not in ("README.md", "xfid-source.toml") and f != INDIVIDUAL)


# --- detection -------------------------------------------------------------------------------
@pytest.mark.parametrize(("folder", "want"), [(AIPERF, "aiperf"), (LLMPERF, "llmperf"), (EYERISS, "scalesim"),
                                              (KANGSK, "scalesim")])
def test_each_real_file_is_claimed_by_one_adapter(folder, want):
    for f in _data_files(folder):
        assert sniff_all(f) == [want], f


def test_genai_perf_declines_aiperf_and_keeps_its_own():
    for f in _data_files(AIPERF):
        assert not GenaiPerfAdapter.sniff(f, f.read_bytes()[:8192]), f
    for f in _data_files(M / "genai-perf"):
        assert sniff_all(f) == ["genai-perf"], f


def test_a_genai_perf_looking_csv_named_aiperf_is_aiperf(tmp_path):
    f = tmp_path / "profile_export_aiperf.csv"
    f.write_text("Metric,avg,min,max,p99\r\nRequest Latency (ms),1.0,1.0,1.0,1.0\r\n", newline="")
    assert sniff_all(f) == ["aiperf"]
    g = tmp_path / "profile_export_genai_perf.csv"
    g.write_text("Metric,avg,min,max,p99\r\nRequest Latency (ms),1.0,1.0,1.0,1.0\r\n", newline="")
    assert sniff_all(g) == ["genai-perf"]


# --- AIPerf JSON -----------------------------------------------------------------------------
SMOKE_JSON = AIPERF / "aidynamo-smoke-100k-conc_profile_export_aiperf.json"
SMOKE_CSV = AIPERF / "aidynamo-smoke-100k-conc_profile_export_aiperf.csv"
"""One AIPerf 0.8.0 run (ai-dynamo/aiperf dev/results, against its mock server) exported twice."""


def test_aiperf_json_top_level_layout(xfid_cli):
    recs, out = xfid_cli.ingest_export(SMOKE_JSON)
    assert {r["source"] for r in recs} == {"aiperf"} and {r["software"] for r in recs} == {"aiperf 0.8.0"}
    ttft = _one(recs, metric="ttft", stat="mean")
    assert ttft["value"] == _conv("11205.91161602855", 1, 1000) and ttft["unit"] == "s"
    assert ttft["n_samples"] is None and ttft["source_loc"] == "$.time_to_first_token.avg"  # no `count` here
    assert _one(recs, metric="ttft", stat="p90")["value"] == _conv("21587.5757342", 1, 1000)
    assert _one(recs, metric="aiperf:time_to_second_token", stat="p99")["value"] == 0.0
    assert _one(recs, metric="aiperf:time_to_first_output_token", stat="min")["value"] == _conv("1.246696", 1, 1000)
    osl = _one(recs, metric="aiperf:osl_mismatch_diff_pct", stat="mean")
    assert osl["value"] == _conv("-21.09375", 1, 100) and osl["unit"] == "ratio"
    assert _one(recs, metric="aiperf:osl_mismatch_count")["value"] == 481414  # avg with null stats: one value
    per_user = _one(recs, metric="aiperf:output_token_throughput_per_user", stat="p50")
    assert per_user["value"] == 17.480369047369283 and per_user["unit"] == "tokens/s"
    tput = _one(recs, metric="throughput_requests")
    assert tput["stat"] == "mean" and tput["value"] == 3400.2168222410205 and tput["unit"] == "requests/s"
    assert _one(recs, metric="throughput_total_tokens")["value"] == 778649.6522931937
    assert _one(recs, metric="requests_completed")["value"] == 481414
    assert _one(recs, metric="requests_failed")["value"] == 18586
    assert _one(recs, metric="aiperf:total_error_isl")["value"] == 2379008
    assert _one(recs, metric="duration")["value"] == 141.58332399600002
    assert _one(recs, metric="aiperf:total_isl")["value"] == 61620992
    assert not [r for r in recs if r["stat"] == "sum"]  # this export has no `sum` (see the hand-made one below)
    cfg = json.loads(ttft["config"])
    assert cfg["endpoint.type"] == "chat" and cfg["benchmark_id"] == "6478f6aac7c34ceb8b9fd97abd63d5b3"
    assert cfg["start_time"] == "2026-05-01T05:29:24.409521"
    assert "18586 failed request(s) of 1 kind(s)" in out


NEWER_JSON = {
    "schema_version": "1.3", "aiperf_version": "0.10.0", "benchmark_id": "handmade01",
    "time_to_first_token": {"unit": "ms", "avg": 150.5, "min": 70.25, "max": 340.0, "p50": 136.5, "p99": 292.5,
                            "std": 54.0, "count": 8, "sum": 1204.0},
    "http_req_data_sent": {"unit": "KB", "avg": 11.5, "min": 1.5, "max": 40.8115234375, "count": 8, "sum": 92.0},
    "http_req_connection_reused": {"unit": "ratio", "avg": 1.0, "min": 1.0, "max": 1.0, "count": 8, "sum": 8.0},
    "http_req_chunks_received": {"unit": "count", "avg": 435.5, "min": 38.0, "max": 900.0, "count": 8,
                                 "sum": 3484.0},
    "osl_mismatch_diff_pct": {"unit": "%", "avg": -78.75, "min": -98.25, "max": -9.5, "count": 8, "sum": -630.0},
    "request_count": {"unit": "requests", "avg": 8.0},
    "telemetry_data": {"summary": {"endpoints_configured": ["http://localhost:9401/metrics"]}, "endpoints": {}},
    "run_info": {"benchmark_id": "handmade01", "cli_command": "aiperf profile --model 'm' --streaming"},
    "was_cancelled": False, "error_summary": [],
}
"""HAND-MADE test input, written for xfid (not a real export; numbers invented): the layout of
AIPerf 0.10 / schema 1.3 (`sum` and `count` per metric, `http_req_*` metrics, `KB` sizes, an
empty `telemetry_data.endpoints`, `run_info.cli_command`), which no licensed real file shows."""


def test_aiperf_json_newer_layout_handmade(xfid_cli, tmp_path):
    f = tmp_path / "profile_export_aiperf.json"
    f.write_text(json.dumps(NEWER_JSON, indent=2))
    recs, out = xfid_cli.ingest_export(f, "--target", "t", "--workload", "w")
    assert {r["software"] for r in recs} == {"aiperf 0.10.0"}
    total = _one(recs, metric="ttft", stat="sum")
    assert total["value"] == _conv("1204.0", 1, 1000) and total["unit"] == "s" and total["n_samples"] == 8
    assert total["source_loc"] == "$.time_to_first_token.sum"
    sent = _one(recs, metric="aiperf:http_req_data_sent", stat="max")  # AIPerf's KB is 1024 bytes
    assert sent["value"] == 40.8115234375 * 1024 == 41791.0 and sent["unit"] == "B"
    assert _one(recs, metric="aiperf:http_req_data_sent", stat="sum")["value"] == 92 * 1024
    reused = _one(recs, metric="aiperf:http_req_connection_reused", stat="mean")
    assert reused["value"] == 1.0 and reused["unit"] == "ratio"
    assert _one(recs, metric="aiperf:http_req_chunks_received", stat="sum")["unit"] == "count"
    assert _one(recs, metric="aiperf:osl_mismatch_diff_pct", stat="sum")["value"] == _conv("-630.0", 1, 100)
    cfg = json.loads(total["config"])
    assert cfg["run_info.cli_command"] == "aiperf profile --model 'm' --streaming"
    assert "GPU telemetry in the JSON export is not read" not in out  # endpoints is empty


def test_aiperf_json_telemetry_is_listed_as_not_read(xfid_cli, tmp_path):
    f = tmp_path / "profile_export_aiperf.json"
    with_gpu = {**NEWER_JSON, "telemetry_data": {"endpoints": {"localhost:9401": {"gpus": {}}}}}
    f.write_text(json.dumps(with_gpu))
    recs, out = xfid_cli.ingest_export(f, "--target", "t", "--workload", "w")
    assert "GPU telemetry in the JSON export is not read" in out and not [r for r in recs if r["op"]]


def test_aiperf_json_first_layout_records(xfid_cli):
    recs, out = xfid_cli.ingest_export(AIPERF / "aidynamo-example-run1_profile_export_aiperf.json")
    ttft = _one(recs, metric="ttft", stat="p99")  # tag `ttft`
    assert ttft["value"] == _conv("3833.3894000399996", 1, 1000) and ttft["source_loc"] == "$.records.ttft.p99"
    assert _one(recs, metric="aiperf:time_to_second_token", stat="mean")["value"] == _conv("120.16625153932584", 1, 1000)
    assert _one(recs, metric="requests_failed")["value"] == 11
    assert _one(recs, metric="aiperf:reasoning_token_count", stat="max")["value"] == 247
    icl = _one(recs, metric="aiperf:inter_chunk_latency", stat="mean")
    assert icl["n_samples"] == 21537
    assert _one(recs, metric="throughput_tokens")["value"] == 2320.7222350404572
    assert not [r for r in recs if r["metric"] == "requests_completed" and r["stat"] != "value"]  # nulls dropped
    assert ttft["timestamp"].startswith("2025-10-03T20:13:39.154")  # the first request, epoch ns (UTC)
    assert "11 failed request(s)" in out


# --- AIPerf CSV ------------------------------------------------------------------------------
def test_aiperf_csv_newer_metrics(xfid_cli):
    assert b"\r\n" in SMOKE_CSV.read_bytes()
    recs, _ = xfid_cli.ingest_export(SMOKE_CSV)
    assert {r["software"] for r in recs} == {"aiperf (csv)"} and not [r for r in recs if r["op"]]
    ttft = _one(recs, metric="ttft", stat="sum")  # the `sum` column
    assert ttft["value"] == _conv("5394682734.72", 1, 1000) and ttft["source_loc"] == "line 14, Time to First Token (ms), sum"
    assert _one(recs, metric="aiperf:time_to_first_output_token", stat="p90")["value"] == _conv("21587.58", 1, 1000)
    assert _one(recs, metric="aiperf:osl_mismatch_diff_pct", stat="sum")["value"] == _conv("-10154826.56", 1, 100)
    assert _one(recs, metric="aiperf:osl_mismatch_diff_pct", stat="min")["value"] == _conv("-21.09", 1, 100)
    assert _one(recs, metric="aiperf:osl_mismatch_count")["value"] == 481414
    failed = _one(recs, metric="requests_failed")  # `Error Request Count`: no unit in the label, a count
    assert failed["value"] == 18586 and failed["unit"] == "count"
    assert _one(recs, metric="duration")["value"] == 141.58
    assert _one(recs, metric="throughput_tokens")["value"] == 343421.90
    assert _one(recs, metric="throughput_total_tokens")["value"] == 778649.65
    assert _one(recs, metric="aiperf:prefill_throughput_per_user", stat="max")["value"] == 102671.38
    assert _one(recs, metric="aiperf:output_token_throughput_per_user", stat="p99")["value"] == 6490.12
    assert _one(recs, metric="aiperf:error_isl", stat="sum")["value"] == 2379008
    assert _one(recs, metric="aiperf:total_error_isl")["value"] == 2379008
    assert _one(recs, metric="requests_completed")["value"] == 481414


def test_aiperf_csv_and_json_name_the_same_metrics(xfid_cli):
    csv_recs, _ = xfid_cli.ingest_export(SMOKE_CSV)
    both, _ = xfid_cli.ingest_export(SMOKE_JSON)
    json_recs = [r for r in both if r["software"] != "aiperf (csv)"]
    assert {r["metric"] for r in csv_recs} == {r["metric"] for r in json_recs}
    c = _one(csv_recs, metric="ttft", stat="mean")["value"]
    j = _one(json_recs, metric="ttft", stat="mean")["value"]
    assert c == _conv("11205.91", 1, 1000) and round(j, 5) == c  # the CSV rounds to two decimals of ms
    assert {r["run"] for r in csv_recs} == {"aiperf-smoke-100k-conc-csv"}
    assert {r["run"] for r in json_recs} == {"aiperf-smoke-100k-conc"}


def test_aiperf_example_csv_without_sum(xfid_cli):
    recs, _ = xfid_cli.ingest_export(AIPERF / "aidynamo-example-run1_profile_export_aiperf.csv")
    assert _one(recs, metric="aiperf:output_token_throughput_per_user", stat="mean")["value"] == 36.68
    assert _one(recs, metric="aiperf:total_reasoning_tokens")["value"] == 19792
    assert not [r for r in recs if "timestamp" in r["metric"]]  # epoch times are not measurements
    assert not [r for r in recs if r["stat"] == "sum"]


def test_aiperf_csv_lf_reads_like_crlf(xfid_cli, tmp_path):
    lf = tmp_path / "lf_profile_export_aiperf.csv"
    lf.write_bytes(SMOKE_CSV.read_bytes().replace(b"\r\n", b"\n"))
    recs, _ = xfid_cli.ingest_export(lf, "--target", "t", "--workload", "w")
    lat = _one(recs, metric="e2e_latency", stat="p50")
    assert lat["value"] == _conv("16428.07", 1, 1000) and lat["source_loc"] == "line 12, Request Latency (ms), p50"
    crlf = AiperfAdapter().read(ReadContext(path=SMOKE_CSV))
    assert len(recs) == len(crlf["metric"]) == 14 * 14 + 11  # 14 rows of 14 stats, 11 single values


HTTP_CSV = (
    "Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\n"
    "HTTP Chunks Received,40.00,10.00,90.00,320.00,10.50,12.50,15.00,20.00,35.00,55.00,80.00,85.00,89.00,25.00\r\n"
    "HTTP Connection Reused (ratio),0.75,0.00,1.00,6.00,0.00,0.00,0.00,1.00,1.00,1.00,1.00,1.00,1.00,0.46\r\n"
    "HTTP Data Received (KB),12.50,2.00,30.00,100.00,2.10,2.50,3.00,6.00,11.00,18.00,25.00,28.00,29.80,9.00\r\n"
    "HTTP Duration (excl. conn) (ms),812.34,201.00,1999.99,6498.72,205.00,230.00,260.00,400.00,700.25,1100.00,"
    "1600.00,1800.00,1980.00,560.00\r\n"
    "HTTP Waiting (TTFB) (ms),95.50,40.00,180.00,764.00,41.00,45.00,50.00,70.00,90.00,120.00,150.00,165.00,"
    "178.00,40.00\r\n"
    "\r\n"
    "Metric,Value\r\n"
    "Request Count,8.00\r\n"
    "Benchmark Duration (sec),12.00\r\n"
    "\r\n"
    "\r\n"
    "Endpoint,GPU_Index,GPU_Name,GPU_UUID,Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\n"
)
"""HAND-MADE test input, written for xfid (not a real export; numbers invented): the CSV of
AIPerf 0.10 with HTTP trace metrics (labels as AIPerf's metric headers spell them, two
parentheses in `HTTP Duration (excl. conn) (ms)`, `(ratio)`, `HTTP Chunks Received` without a
unit, `Metric,avg,min,max,sum,...` order) and the GPU-telemetry header it writes with no rows
when no GPU was sampled. No licensed real AIPerf CSV with these rows was found."""


def test_aiperf_csv_http_rows_and_empty_telemetry_header_handmade(xfid_cli, tmp_path):
    f = tmp_path / "http_profile_export_aiperf.csv"
    f.write_text(HTTP_CSV, newline="")
    recs, _ = xfid_cli.ingest_export(f, "--target", "t", "--workload", "w")
    assert not [r for r in recs if r["op"]] and len(recs) == 5 * 14 + 2  # the telemetry header adds nothing
    dur = _one(recs, metric="aiperf:http_req_duration", stat="p50")  # `HTTP Duration (excl. conn) (ms)`
    assert dur["value"] == _conv("700.25", 1, 1000) and dur["source_loc"] == "line 5, HTTP Duration (excl. conn) (ms), p50"
    assert _one(recs, metric="aiperf:http_req_waiting", stat="mean")["value"] == _conv("95.50", 1, 1000)
    chunks = _one(recs, metric="aiperf:http_req_chunks_received", stat="sum")  # no unit in the label: a count
    assert chunks["value"] == 320 and chunks["unit"] == "count"
    received = _one(recs, metric="aiperf:http_req_data_received", stat="mean")
    assert received["value"] == _conv("12.50", 1024) and received["unit"] == "B"
    reused = _one(recs, metric="aiperf:http_req_connection_reused", stat="sum")
    assert reused["value"] == 6 and reused["unit"] == "ratio"
    assert _one(recs, metric="requests_completed")["value"] == 8


TELEMETRY_ROWS = (
    "Endpoint,GPU_Index,GPU_Name,GPU_UUID,Platform,Metric,avg,min,max,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\n"
    "localhost:9401,0,NVIDIA H100 80GB HBM3,GPU-afc3c15a-48a5-d669-0634-191c629f95fa,nvidia,"
    "NVIDIA GPU Power Usage (W),348.69,120.57,386.02,120.57,120.57,,378.34,378.34,386.02,386.02,386.02,386.02,85.97\r\n"
    "localhost:9401,0,NVIDIA H100 80GB HBM3,GPU-afc3c15a-48a5-d669-0634-191c629f95fa,nvidia,"
    "NVIDIA Energy Consumption (MJ),0.24,0.23,0.25,0.23,0.23,,0.23,0.23,0.25,0.25,0.25,0.25,0.01\r\n"
)
"""Rows as AIPerf's GPU-telemetry docs show them (docs/tutorials/gpu-telemetry.md): empty p10 cells."""


def test_aiperf_csv_telemetry_rows(xfid_cli, tmp_path):
    body = (AIPERF / "aidynamo-example-run1_profile_export_aiperf.csv").read_bytes().decode()
    f = tmp_path / "tel_profile_export_aiperf.csv"
    f.write_text(body + "\r\n" + TELEMETRY_ROWS, newline="")
    recs, _ = xfid_cli.ingest_export(f, "--target", "t", "--workload", "w")
    power = _one(recs, metric="power", stat="mean")
    assert power["value"] == 348.69 and power["unit"] == "W" and power["op"] == "gpu0"
    assert power["hardware"] == "NVIDIA H100 80GB HBM3"
    p10 = _one(recs, metric="power", stat="p10")
    assert p10["value"] is None and p10["null_reason"] == "empty in file"
    energy = _one(recs, metric="energy")
    assert energy["value"] == pytest.approx(20000.0) and energy["unit"] == "J"  # (0.25 - 0.23) MJ
    assert energy["source_loc"].endswith(": max - min")


@pytest.mark.parametrize(("text", "message"), [
    ("Metric,avg,sum,median\r\nRequest Latency (ms),1,2,3\r\n", "unknown column 'median' in an AIPerf header"),
    ("Metric,avg,sum,std\r\nRequest Latency (ms),1,2\r\n", "expected 4 fields like the header, got 3"),
    ("Metric,avg,sum,std\r\nRequest Latency (ms),1,x,3\r\n", "'x' is not a number"),
])
def test_aiperf_bad_csv_is_a_clear_error(xfid_cli, tmp_path, text, message):
    f = tmp_path / "bad_profile_export_aiperf.csv"
    f.write_text(text, newline="")
    r = xfid_cli("ingest", f, "--target", "t", "--workload", "w")
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize(("text", "message"), [
    ('{"aiperf_version": "0.10.0", "request_latency": {"unit": "ms", "avg": "slow"}}',
     "$.request_latency.avg: 'avg' must be a number"),
    ('{"aiperf_version": "0.10.0", "request_latency": {"unit": 3, "avg": 1.0}}', "unit must be text"),
    ('{"aiperf_version": "0.10.0", "request_latency": {"unit": "ms", "avg": NaN}}', "NaN/Infinity are not JSON"),
    ('{"aiperf_version": "0.10.0", "benchmark_id": "x"}', "no AIPerf metrics found"),
])
def test_aiperf_bad_json_is_a_clear_error(xfid_cli, tmp_path, text, message):
    f = tmp_path / "profile_export_aiperf.json"
    f.write_text(text)
    r = xfid_cli("ingest", f, "--target", "t", "--workload", "w")
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


# --- llmperf ---------------------------------------------------------------------------------
def test_llmperf_groq_summary(xfid_cli):
    recs, out = xfid_cli.ingest_export(LLMPERF / "leaderboard_groq_70b.json")
    ttft = _one(recs, metric="ttft", stat="p99")
    assert ttft["value"] == 0.3500269545800982 and ttft["unit"] == "s" and ttft["source"] == "llmperf"
    assert ttft["source_loc"] == "$.results_ttft_s_quantiles_p99"
    assert _one(recs, metric="ttft", stat="std")["value"] == 0.04545771907205833
    assert _one(recs, metric="itl", stat="mean")["value"] == 0.005384122478382455
    assert _one(recs, metric="e2e_latency", stat="max")["value"] == 1.0057721510529518
    assert _one(recs, metric="input_tokens", stat="min")["value"] == 550  # written as the string "550"
    assert _one(recs, metric="throughput_tokens")["value"] == 441.84737788500206
    rate = _one(recs, metric="throughput_requests")
    assert rate["value"] == _conv("176.73895115400083", 1, 60) and rate["unit"] == "requests/s"
    assert _one(recs, metric="requests_completed")["value"] == 150
    assert _one(recs, metric="llmperf:error_rate")["value"] == 0
    assert ttft["timestamp"].startswith("2024-01-10T01:55:04")
    cfg = json.loads(ttft["config"])
    assert cfg["model"] == "llama2-70b-4096" and cfg["num_concurrent_requests"] == 5
    assert "results_error_code_frequency" in out


def test_llmperf_anyscale_summary(xfid_cli):
    recs, _ = xfid_cli.ingest_export(LLMPERF / "leaderboard_anyscale_7b.json")
    assert _one(recs, metric="ttft", stat="mean")["value"] == 0.22518338954666584
    assert _one(recs, metric="output_tokens", stat="p99")["value"] == 151
    per_req = _one(recs, metric="llmperf:request_output_throughput", stat="mean")
    assert per_req["value"] == 51.726368047692425 and per_req["unit"] == "tokens/s"
    assert json.loads(per_req["config"])["api"] == "https://console.endpoints.anyscale.com/m/v1"


# --- GuideLLM: refused by name ---------------------------------------------------------------
@pytest.mark.parametrize("name", [f.name for f in _data_files(GUIDELLM)])
def test_guidellm_report_is_refused_by_name(xfid_cli, name):
    r = xfid_cli("ingest", GUIDELLM / name, "--target", "t", "--workload", "w")
    assert r.exit_code == 2, r.output
    assert "this is a GuideLLM report; xfid does not read it yet" in r.output
    assert "no adapter recognises" not in r.output and "Traceback" not in r.output


def test_llmperf_individual_responses_are_refused_by_name(xfid_cli):
    r = xfid_cli("ingest", INDIVIDUAL)
    assert r.exit_code == 2, r.output
    assert "this is an llmperf per-request file (individual responses); xfid does not read it yet" in r.output
    assert "*_summary.json" in r.output


def test_newer_guidellm_report_head_is_recognised(xfid_cli, tmp_path):
    """GuideLLM 0.5 starts with a metadata block (the head as guidellm writes it; written for xfid)."""
    f = tmp_path / "benchmarks.json"
    f.write_text('{"metadata": {"version": 1, "guidellm_version": "0.5.0.dev0"}, "args": {}, "benchmarks": []}')
    r = xfid_cli("ingest", f, "--target", "t", "--workload", "w")
    assert r.exit_code == 2 and "this is a GuideLLM report" in r.output, r.output


def test_guidellm_report_in_a_folder_is_skipped_by_name(xfid_cli, tmp_path):
    d = tmp_path / "results"
    d.mkdir()
    shutil.copy(GUIDELLM / "guidellm-tests_f1dfdc6_benchmarks_stripped.json", d / "benchmarks.json")
    shutil.copy(LLMPERF / "leaderboard_groq_70b.json", d / "groq_summary.json")
    r = xfid_cli("ingest", d, "--target", "t", "--workload", "w")
    assert r.exit_code == 0, r.output
    assert "this is a GuideLLM report" in r.output and "no adapter recognises" not in r.output


# --- SCALE-Sim v1 ----------------------------------------------------------------------------
def test_scalesim_v1_cycles(xfid_cli):
    recs, _ = xfid_cli.ingest_export(EYERISS / "alexnet_cycles.csv")
    c2 = _one(recs, metric="cycles", op="Conv2")
    assert c2["value"] == 156636004 and c2["unit"] == "cycles" and c2["source_loc"] == "line 3, column 'Cycles'"
    assert c2["software"] == "SCALE-Sim v1 (cycles)" and c2["fidelity"] == "archmodel"
    util = _one(recs, metric="utilization", op="Conv5")
    assert util["value"] == _conv("88.22017672589514", 1, 100) and util["unit"] == "ratio"
    assert {r["op"] for r in recs} == {"Conv1", "Conv2", "Conv3", "Conv4", "Conv5"}


def test_scalesim_v1_bandwidth_and_detail(xfid_cli):
    recs, _ = xfid_cli.ingest_export(EYERISS / "alexnet_avg_bw.csv")
    bw = _one(recs, metric="scalesim:dram_filter_read_bw", op="Conv3")
    assert bw["value"] == 1.3722151144836106
    assert json.loads(bw["config"]) == {"filter_sram_size": 110592, "ifmap_sram_size": 110592,
                                        "ofmap_sram_size": 110592, "unit_in_file": "words/cycle"}
    recs, _ = xfid_cli.ingest_export(EYERISS / "alexnet_max_bw.csv")
    assert _one(recs, metric="scalesim:max_sram_ofmap_write_bw", op="Conv4")["value"] == 14
    recs, _ = xfid_cli.ingest_export(EYERISS / "alexnet_detail.csv")
    start = _one(recs, metric="scalesim:dram_ifmap_start", op="Conv2")
    assert start["value"] == -11060 and start["unit"] == "cycles"  # prefetched before cycle 0
    assert _one(recs, metric="scalesim:dram_filter_stop", op="Conv1")["value"] == -1
    written = _one(recs, metric="scalesim:sram_write_bytes", op="Conv2")
    assert written["value"] == 4146230403 and json.loads(written["config"]) == {"unit_in_file": "bytes"}


def test_scalesim_v1_second_source(xfid_cli):
    recs, _ = xfid_cli.ingest_export(KANGSK / "alexnet_avg_bw.csv")
    bw = _one(recs, metric="scalesim:sram_ofmap_write_bw")
    assert bw["op"] == "Conv1" and bw["value"] == 26.965971759530557
    assert json.loads(bw["config"])["ofmap_sram_size"] == 262144
    recs, _ = xfid_cli.ingest_export(KANGSK / "alexnet_detail.csv")
    assert _one(recs, metric="scalesim:sram_read_bytes")["value"] == 3359232


@pytest.mark.parametrize("name", ["alexnet_cycles.csv", "alexnet_max_bw.csv"])
def test_scalesim_v1_header_only_report_is_refused(xfid_cli, tmp_path, name):
    f = tmp_path / name  # the fixture folder's sidecar skips them, so that a folder ingest leaves them out
    shutil.copy(KANGSK / name, f)
    r = xfid_cli("ingest", f, "--target", "t", "--workload", "w")
    assert r.exit_code == 2 and "with a header but no layer rows" in r.output, r.output


def test_scalesim_v1_crlf_reads_the_same(xfid_cli, tmp_path):
    f = tmp_path / "alexnet_cycles.csv"
    f.write_bytes((EYERISS / "alexnet_cycles.csv").read_bytes().replace(b"\n", b"\r\n"))
    recs, _ = xfid_cli.ingest_export(f, "--target", "t", "--workload", "w")
    assert _one(recs, metric="cycles", op="Conv1")["value"] == 625097
    assert len(recs) == 10


def test_scalesim_v1_bad_row_is_a_clear_error(xfid_cli, tmp_path):
    f = tmp_path / "net_cycles.csv"
    f.write_text("Layer,\tCycles,\t% Utilization,\nConv1,\tmany,\t50.0,\n")
    r = xfid_cli("ingest", f, "--target", "t", "--workload", "w")
    assert r.exit_code == 2 and "line 2, column 'Cycles'" in r.output and "not a number: 'many'" in r.output


# --- every real fixture through `xfid ingest` ------------------------------------------------
READABLE = [*_data_files(AIPERF), *_data_files(LLMPERF), *_data_files(EYERISS),
            KANGSK / "alexnet_avg_bw.csv", KANGSK / "alexnet_detail.csv"]


def test_folder_ingest_of_the_new_fixtures(xfid_cli):
    """The demo ingests fixtures/measured and fixtures/models whole: these folders go in, the
    GuideLLM reports and the header-only v1 reports left out with their reason."""
    r = xfid_cli("ingest", AIPERF, LLMPERF, GUIDELLM, EYERISS, KANGSK)
    assert r.exit_code == 0, r.output
    assert "this is a GuideLLM report" in r.output and "skipped by xfid-source.toml" in r.output


@pytest.mark.parametrize("path", READABLE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_ingest_each_real_fixture(xfid_cli, path):
    r = xfid_cli("ingest", path)
    assert r.exit_code == 0, r.output
    recs = [json.loads(x) for x in xfid_cli("export").output.splitlines()]
    assert recs and all(r["source_path"].endswith(path.name) for r in recs)
