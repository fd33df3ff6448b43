"""aiperf, llmperf, SCALE-Sim v1 and the GuideLLM refusal on real files (issue 29, round 3).

Values are read by hand from the fixtures and pinned exactly; the export gives them in xfid's
canonical units, so an expected value is the file's decimal converted exactly
(`_conv("154.26432382291665", 1, 1000)` for milliseconds).
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
def test_aiperf_json_top_level_layout(xfid_cli):
    recs, _ = xfid_cli.ingest_export(AIPERF / "qwen36-5090-agent-c2_profile_export_aiperf.json")
    assert {r["source"] for r in recs} == {"aiperf"} and {r["software"] for r in recs} == {"aiperf 0.10.0"}
    ttft = _one(recs, metric="ttft", stat="mean")
    assert ttft["value"] == _conv("154.26432382291665", 1, 1000) and ttft["unit"] == "s"
    assert ttft["n_samples"] == 96 and ttft["source_loc"] == "$.time_to_first_token.avg"
    assert _one(recs, metric="ttft", stat="sum")["value"] == _conv("14809.375086999999", 1, 1000)
    assert _one(recs, metric="aiperf:time_to_second_token", stat="p99")["value"] == _conv("17.637750949999813", 1, 1000)
    assert _one(recs, metric="aiperf:time_to_first_output_token", stat="min")["value"] == _conv("74.400987", 1, 1000)
    osl = _one(recs, metric="aiperf:osl_mismatch_diff_pct", stat="mean")
    assert osl["value"] == _conv("-78.77400716145833", 1, 100) and osl["unit"] == "ratio"
    assert _one(recs, metric="aiperf:osl_mismatch_count")["value"] == 96
    sent = _one(recs, metric="aiperf:http_req_data_sent", stat="max")  # AIPerf's KB is 1024 bytes
    assert sent["value"] == 40.8115234375 * 1024 == 41791.0 and sent["unit"] == "B"
    per_user = _one(recs, metric="aiperf:output_token_throughput_per_user", stat="p50")
    assert per_user["value"] == 179.65045750611534 and per_user["unit"] == "tokens/s"
    tput = _one(recs, metric="throughput_requests")
    assert tput["stat"] == "mean" and tput["value"] == 0.7460502167796494 and tput["unit"] == "requests/s"
    assert _one(recs, metric="throughput_total_tokens")["value"] == 2454.2643011558785
    assert _one(recs, metric="requests_completed")["value"] == 96
    assert _one(recs, metric="duration")["value"] == 128.677665177
    assert _one(recs, metric="aiperf:total_isl")["value"] == 274077
    cfg = json.loads(ttft["config"])
    assert cfg["endpoint.type"] == "chat" and cfg["benchmark_id"] == "f7db269e44e9"
    assert cfg["run_info.cli_command"].startswith("aiperf profile --model 'qwen3.6-nvfp4'")


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
def test_aiperf_csv_sum_column_crlf_and_empty_telemetry_header(xfid_cli):
    f = AIPERF / "qwen36-5090-agent-c2_profile_export_aiperf.csv"
    assert b"\r\n" in f.read_bytes() and f.read_bytes().rstrip().endswith(b"p99,std")
    recs, _ = xfid_cli.ingest_export(f)
    assert {r["software"] for r in recs} == {"aiperf (csv)"} and not [r for r in recs if r["op"]]
    dur = _one(recs, metric="aiperf:http_req_duration", stat="p50")  # `HTTP Duration (excl. conn) (ms)`
    assert dur["value"] == _conv("1565.86", 1, 1000) and dur["source_loc"] == "line 12, HTTP Duration (excl. conn) (ms), p50"
    assert _one(recs, metric="aiperf:http_req_waiting", stat="mean")["value"] == _conv("153.93", 1, 1000)
    chunks = _one(recs, metric="aiperf:http_req_chunks_received", stat="sum")  # no unit in the label: a count
    assert chunks["value"] == 41805 and chunks["unit"] == "count"
    assert _one(recs, metric="aiperf:http_req_data_received", stat="mean")["value"] == _conv("104.66", 1024)
    assert _one(recs, metric="aiperf:http_req_connection_reused", stat="sum")["value"] == 96
    osl = _one(recs, metric="aiperf:osl_mismatch_diff_pct", stat="min")
    assert osl["value"] == _conv("-98.19", 1, 100)
    assert _one(recs, metric="aiperf:output_token_throughput_per_user", stat="p99")["value"] == 189.05
    assert _one(recs, metric="throughput_tokens")["value"] == 324.31
    assert _one(recs, metric="requests_completed")["value"] == 96


def test_aiperf_csv_and_json_name_the_same_metrics(xfid_cli):
    csv_recs, _ = xfid_cli.ingest_export(AIPERF / "qwen36-5090-agent-c2_profile_export_aiperf.csv")
    both, _ = xfid_cli.ingest_export(AIPERF / "qwen36-5090-agent-c2_profile_export_aiperf.json")
    json_recs = [r for r in both if r["software"] != "aiperf (csv)"]
    assert {r["metric"] for r in csv_recs} == {r["metric"] for r in json_recs}
    c = _one(csv_recs, metric="ttft", stat="mean")["value"]
    j = _one(json_recs, metric="ttft", stat="mean")["value"]
    assert c == _conv("154.26", 1, 1000) and round(j, 5) == c  # the CSV rounds to two decimals of ms


def test_aiperf_csv_newer_metrics(xfid_cli):
    recs, _ = xfid_cli.ingest_export(AIPERF / "aidynamo-smoke-100k-conc_profile_export_aiperf.csv")
    assert _one(recs, metric="ttft", stat="sum")["value"] == _conv("5394682734.72", 1, 1000)
    assert _one(recs, metric="aiperf:time_to_first_output_token", stat="p90")["value"] == _conv("21587.58", 1, 1000)
    assert _one(recs, metric="aiperf:osl_mismatch_diff_pct", stat="sum")["value"] == _conv("-10154826.56", 1, 100)
    assert _one(recs, metric="aiperf:osl_mismatch_count")["value"] == 481414
    assert _one(recs, metric="requests_failed")["value"] == 18586
    assert _one(recs, metric="duration")["value"] == 141.58
    assert _one(recs, metric="throughput_total_tokens")["value"] == 778649.65
    assert _one(recs, metric="aiperf:prefill_throughput_per_user", stat="max")["value"] == 102671.38
    assert _one(recs, metric="aiperf:total_error_input_sequence_length")["value"] == 2379008


def test_aiperf_example_csv_without_sum(xfid_cli):
    recs, _ = xfid_cli.ingest_export(AIPERF / "aidynamo-example-run1_profile_export_aiperf.csv")
    assert _one(recs, metric="aiperf:output_token_throughput_per_user", stat="mean")["value"] == 36.68
    assert _one(recs, metric="aiperf:total_reasoning_tokens")["value"] == 19792
    assert not [r for r in recs if "timestamp" in r["metric"]]  # epoch times are not measurements
    assert not [r for r in recs if r["stat"] == "sum"]


def test_aiperf_csv_lf_reads_like_crlf(xfid_cli, tmp_path):
    src = AIPERF / "qwen36-5090-agent-c2_profile_export_aiperf.csv"
    lf = tmp_path / "lf_profile_export_aiperf.csv"
    lf.write_bytes(src.read_bytes().replace(b"\r\n", b"\n"))
    recs, _ = xfid_cli.ingest_export(lf, "--target", "t", "--workload", "w")
    assert _one(recs, metric="aiperf:http_req_duration", stat="p50")["value"] == _conv("1565.86", 1, 1000)
    crlf = AiperfAdapter().read(ReadContext(path=src))
    assert len(recs) == len(crlf["metric"]) == 27 * 14 + 9  # 27 rows of 14 stats, 9 single values


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
