"""trtllm-bench adapter: real printed reports of 0.17 / 0.19+ / 1.1, the JSON report, the older [BENCHMARK] lines."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import FIXTURES, copy_fixture
from xfid.adapters import sniff_all

DIR = FIXTURES / "measured/trtllm-bench"
TARGET = ("--target", "h100-sxm")  # the files name no GPU; any target will do for reading them


def ingest(xfid_cli, tmp_path, name, *args):
    """Copy a fixture out of its folder (whose xfid-source.toml skips it) and ingest + export it."""
    return xfid_cli.ingest_export(copy_fixture(DIR / name, tmp_path), *args)


def pick(recs, metric, stat="value", run=None):
    hits = [r for r in recs if r["metric"] == metric and r["stat"] == stat and (run is None or r["run"] == run)]
    assert len(hits) == 1, (metric, stat, hits)
    return hits[0]


def test_pytorch_1_1_report(xfid_cli, tmp_path):
    recs, out = ingest(xfid_cli, tmp_path, "llama3.2-3b_pytorch_1.1.0rc2_throughput.txt", *TARGET)
    assert {r["workload"] for r in recs} == {"llama-3.2-3b-instruct/bs2816/in13/out256/bfloat16"}
    assert {r["software"] for r in recs} == {"trtllm-bench 1.1.0rc2"}
    assert pick(recs, "throughput_requests", "mean")["value"] == 4.7501
    assert pick(recs, "throughput_tokens", "mean")["value"] == 1216.0159
    assert pick(recs, "throughput_total_tokens", "mean")["value"] == 1277.7668
    assert pick(recs, "trtllm:output_throughput_per_user", "mean")["value"] == 152.1153
    assert pick(recs, "trtllm:output_throughput_per_gpu", "mean")["value"] == 1216.0159
    assert pick(recs, "duration")["value"] == pytest.approx(3.3683769)
    assert pick(recs, "duration")["unit"] == "s"
    assert pick(recs, "e2e_latency", "mean")["value"] == pytest.approx(1.6829355)
    assert pick(recs, "e2e_latency", "p99")["value"] == pytest.approx(1.6839602)
    assert pick(recs, "e2e_latency", "min")["value"] == pytest.approx(1.6781686)
    assert pick(recs, "requests_completed")["value"] == 16
    assert pick(recs, "concurrency", "mean")["value"] == 7.994
    p50 = pick(recs, "e2e_latency", "p50")
    assert p50["source_loc"] == "line 43: [Latency] P50" and p50["value"] == pytest.approx(1.6833179)
    cfg = json.loads(p50["config"])
    assert cfg["tp_size"] == 1 and cfg["max_num_tokens"] == 3072 and cfg["dataset_sequences"] == 16
    assert cfg["scheduling_policy"] == "GUARANTEED_NO_EVICT" and "model_path" not in cfg  # "None" in the file
    assert not any("issue" in r["metric"] for r in recs)
    assert "skipped line 28: Issue Rate (req/sec): the rate requests were handed to the runtime" in out
    assert "[Latency] AVERAGE: the same e2e_latency mean as line 37" in out


def test_0_17_engine_log_and_pytorch_header(xfid_cli, tmp_path):
    recs, out = ingest(xfid_cli, tmp_path, "llama3.1-8b_engine_0.17.0_throughput.log", *TARGET)
    assert {r["workload"] for r in recs} == {"llama-3.1-8b/bs4096/in128/out128/bfloat16"}
    tput = pick(recs, "throughput_tokens", "mean")
    assert tput["value"] == 28390.4265 and tput["source_loc"] == "line 57: Token Throughput (tokens/sec)"
    assert pick(recs, "throughput_requests", "mean")["value"] == 221.8002
    assert pick(recs, "duration")["value"] == pytest.approx(13.5256862)
    assert pick(recs, "requests_completed")["value"] == 3000
    assert json.loads(tput["config"])["engine_dir"] == "/tmp/meta-llama/Llama-3.1-8B/tp_1_pp_1"
    assert len(recs) == 6 and "Thread proxy_dispatch" not in out  # log lines after the report are not report lines
    recs, _ = ingest(xfid_cli, tmp_path, "llama3.1-8b_pytorch_0.17.0_throughput.txt", *TARGET)
    torch = [r for r in recs if r["workload"] == "llama-3.1-8b/bs2048/in128/out128/bfloat16"]
    assert pick(torch, "throughput_tokens", "mean")["value"] == 20685.5510
    assert pick(torch, "throughput_requests", "mean")["value"] == 161.6059
    assert json.loads(torch[0]["config"])["quantization"] == "FP8"


def test_tab_aligned_lines_as_the_tool_prints_them(xfid_cli, tmp_path):
    """trtllm-bench aligns its header lines with tabs (`f"Model:\\t\\t\\t{model}"`); the docs show spaces."""
    text = (DIR / "llama3.1-8b_pytorch_0.17.0_throughput.txt").read_text()
    tabbed = tmp_path / "tabs" / "report.txt"
    tabbed.parent.mkdir()
    tabbed.write_text(re.sub(r":  +", ":\t\t", text))
    assert "\t" in tabbed.read_text()
    spaced, _ = ingest(xfid_cli, tmp_path, "llama3.1-8b_pytorch_0.17.0_throughput.txt", *TARGET, "--run", "a")
    tabs, _ = xfid_cli.ingest_export(tabbed, *TARGET, "--run", "b")
    key = ("workload", "metric", "stat", "value", "unit", "config", "source_loc")
    assert sorted(tuple(r[k] for k in key) for r in tabs if r["run"] == "b") == sorted(
        tuple(r[k] for k in key) for r in spaced)


def test_two_reports_and_machine_details(xfid_cli, tmp_path):
    """Two runs appended to one log, each with the MACHINE DETAILS section newer versions print (its
    line built from reporting.py's f-string, the GPU name invented)."""
    text = (DIR / "llama3.2-3b_pytorch_1.1.0rc2_throughput.txt").read_text()
    machine = ("===========================================================\n= MACHINE DETAILS \n"
               "===========================================================\nNVIDIA H100 80GB HBM3, memory 79.19 GB, "
               "2.62 GHz\n\n")
    f = tmp_path / "runs" / "two.log"
    f.parent.mkdir()
    rule = "===========================================================\n"
    text = text.replace(f"{rule}= REQUEST DETAILS", f"{machine}{rule}= REQUEST DETAILS", 1)  # the tool's order
    f.write_text("[TensorRT-LLM] TensorRT-LLM version: 1.1.0rc2\n" + text + text.replace("4.7501", "4.8"))
    recs, _ = xfid_cli.ingest_export(f, "--run", "sweep")
    assert sorted({r["run"] for r in recs}) == ["sweep#1", "sweep#2"]
    assert pick(recs, "throughput_requests", "mean", "sweep#2")["value"] == 4.8
    second = [r for r in recs if r["run"] == "sweep#2"]
    assert {r["target"] for r in recs} == {"h100-80gb-hbm3"} and {r["hardware"] for r in recs} == {
        "NVIDIA H100 80GB HBM3"}
    assert json.loads(second[0]["config"])["report"] == 2
    first = pick(recs, "throughput_requests", "mean", "sweep#1")
    assert first["source_loc"] == "line 39: Request Throughput (req/sec)"
    r = xfid_cli("ingest", copy_fixture(DIR / "llama3.2-3b_pytorch_1.1.0rc2_throughput.txt", tmp_path))
    assert r.exit_code == 2 and "missing 'target' (pass --target" in r.output  # one without MACHINE DETAILS


def test_0_12_statistics_layout(xfid_cli, tmp_path):
    recs, out = ingest(xfid_cli, tmp_path, "llama2-7b_engine_0.12.0_throughput.txt", *TARGET)
    assert {r["workload"] for r in recs} == {"llama-2-7b-hf/bs4096/in128/out128/float16"}
    assert pick(recs, "throughput_tokens", "mean")["value"] == 23405.927228471104
    assert pick(recs, "throughput_requests", "mean")["value"] == 182.8588064724305
    duration = pick(recs, "duration")
    assert duration["value"] == 16.406100739 and duration["source_loc"] == "line 31: Total Latency (seconds)"
    assert {r["software"] for r in recs} == {"trtllm-bench 0.12.0"}
    assert "skipped line 22: Issue Rate (req/sec)" in out


def test_streaming_overview_alone_needs_workload(xfid_cli, tmp_path):
    f = copy_fixture(DIR / "perf-overview_streaming_throughput.txt", tmp_path)
    r = xfid_cli("ingest", f, *TARGET)
    assert r.exit_code == 2 and "missing 'workload'" in r.output
    recs, out = xfid_cli.ingest_export(f, *TARGET, "--workload", "llama3-70b/serve")
    assert pick(recs, "ttft", "mean")["value"] == pytest.approx(52.6670339)
    assert pick(recs, "ttft", "p99")["value"] == pytest.approx(106.5634497)
    assert pick(recs, "tpot", "mean")["value"] == pytest.approx(0.1829639)
    assert pick(recs, "tpot", "min")["value"] == pytest.approx(0.0328005)
    assert pick(recs, "trtllm:output_speed_per_user", "mean")["value"] == 5.4656
    assert pick(recs, "trtllm:output_throughput_per_user", "mean")["value"] == 2.0563
    assert pick(recs, "e2e_latency", "max")["value"] == pytest.approx(111.6680964)
    assert pick(recs, "throughput_total_tokens", "mean")["value"] == 94022.5497
    assert "3 more rows skipped" not in out and "skipped line 19: [TPOT] AVERAGE" in out


def test_benchmark_py_lines(xfid_cli, tmp_path):
    recs, _ = ingest(xfid_cli, tmp_path, "gpt350m_benchmark_py_readme.txt", *TARGET)
    assert sorted({r["workload"] for r in recs}) == [f"gpt_350m/bs{b}/in60/out20/float16" for b in (1, 64, 8)]
    bs64 = [r for r in recs if r["workload"] == "gpt_350m/bs64/in60/out20/float16"]
    assert pick(bs64, "throughput_tokens", "mean")["value"] == 19698.07
    assert pick(bs64, "e2e_latency", "p95")["value"] == pytest.approx(0.065739)
    assert json.loads(bs64[0]["config"])["compute_cap"] == "sm80"
    recs, _ = ingest(xfid_cli, tmp_path, "llama13b_benchmark_py_issue1410.txt", *TARGET)
    new = [r for r in recs if r["workload"] == "llama_13b/bs1/in710/out190/float16"]
    assert pick(new, "throughput_tokens", "mean")["value"] == 43.09
    assert pick(new, "e2e_latency", "mean")["value"] == pytest.approx(4.409816)
    assert pick(new, "trtllm:generation_throughput", "mean")["value"] == 50.379
    assert pick(new, "output_tokens")["value"] == 189
    assert json.loads(new[0]["config"])["world_size"] == 2


# Built from gptManagerBenchmark's printf formats (benchmarks/cpp/gptManagerBenchmark.cpp, report()), with
# keys the real block below lacks (TTFT, ITL, two blocks in one file); these are not measurements.
MANAGER = """[BENCHMARK] num_samples 500
[BENCHMARK] num_error_samples 2

[BENCHMARK] num_samples 500
[BENCHMARK] total_latency(ms) 52372.21
[BENCHMARK] seq_throughput(seq/sec) 9.55
[BENCHMARK] token_throughput(token/sec) 2870.80
[BENCHMARK] avg_acceptance_rate(tokens/decoding steps) 1.00

[BENCHMARK] avg_sequence_latency(ms) 2755.07
[BENCHMARK] p99_sequence_latency(ms) 3108.04
[BENCHMARK] avg_time_to_first_token(ms) 101.50
[BENCHMARK] p50_inter_token_latency(ms) 9.25
"""


def test_gpt_manager_benchmark_blocks(xfid_cli, tmp_path):
    f = tmp_path / "gptmanager.txt"
    f.write_text(MANAGER + "\n" + MANAGER.replace("9.55", "9.60"))
    assert sniff_all(f) == ["trtllm-bench"]
    recs, out = xfid_cli.ingest_export(f, *TARGET, "--workload", "llama2-7b/ifb", "--run", "gm")
    assert sorted({r["run"] for r in recs}) == ["gm#1", "gm#2"]
    assert pick(recs, "throughput_requests", "mean", "gm#2")["value"] == 9.60
    assert pick(recs, "requests_failed", run="gm#1")["value"] == 2
    assert pick(recs, "e2e_latency", "p99", "gm#1")["value"] == pytest.approx(3.10804)
    assert pick(recs, "ttft", "mean", "gm#1")["value"] == pytest.approx(0.1015)
    assert pick(recs, "itl", "p50", "gm#1")["value"] == pytest.approx(0.00925)
    assert pick(recs, "duration", run="gm#1")["source_loc"] == "line 5: total_latency(ms)"
    assert "the same requests_completed value as line 1" in out


def json_report() -> dict:
    """A --report_json document with the keys of reporting.py get_statistics_dict (values invented)."""
    pct = {"p50": 1683.3, "p90": 1683.9, "p95": 1684.0, "p99": 1684.0, "minimum": 1678.2, "maximum": 1684.0,
           "average": 1682.9}
    return {
        "engine": {"model": "meta-llama/Llama-3.1-8B", "model_path": "None", "engine_dir": "None",
                   "version": "1.0.0", "backend": "Pytorch", "dtype": "bfloat16", "kv_cache_dtype": None,
                   "quantization": "FP8"},
        "machine": {"name": "NVIDIA H100 80GB HBM3", "memory.total": 79.19, "clocks.mem": 2.62},
        "world_info": {"tp_size": 1, "pp_size": 1, "ep_size": None, "world_size": 1, "max_batch_size": 2048,
                       "max_num_tokens": 4096, "scheduling_policy": "GUARANTEED_NO_EVICT",
                       "kv_cache_percentage": 0.9, "issue_rate": 7.6e14},
        "request_info": {"num_requests": 16, "avg_num_concurrent_requests": 7.99, "avg_input_length": 128.0,
                         "avg_output_length": 128.0},
        "performance": {"total_latency_ms": 3368.4, "avg_request_latency_ms": 1682.9,
                        "request_throughput_req_s": 4.75, "system_output_throughput_tok_s": 1216.0,
                        "system_total_throughput_tok_s": 1277.8, "output_throughput_per_user_tok_s": 152.1,
                        "output_throughput_per_gpu_tok_s": 1216.0, "request_latency_percentiles_ms": pct},
        "streaming_metrics": {"token_output_speed_tok_s": 170.0, "avg_ttft_ms": 120.5, "avg_tpot_ms": 5.8,
                              "tpot_percentiles": pct, "ttft_percentiles": pct, "gen_tps_percentiles": pct},
        "dataset": {"num_requests": 16},
    }


def test_json_report(xfid_cli, tmp_path):
    f = tmp_path / "report.json"
    f.write_text(json.dumps(json_report(), indent=2))
    assert sniff_all(f) == ["trtllm-bench"]
    recs, out = xfid_cli.ingest_export(f)
    assert {r["target"] for r in recs} == {"h100-80gb-hbm3"} and {r["hardware"] for r in recs} == {
        "NVIDIA H100 80GB HBM3"}
    assert {r["workload"] for r in recs} == {"llama-3.1-8b/bs2048/in128/out128/bfloat16"}
    assert pick(recs, "throughput_requests", "mean")["value"] == 4.75
    assert pick(recs, "ttft", "mean")["value"] == pytest.approx(0.1205)
    assert pick(recs, "e2e_latency", "p90")["source_loc"] == "$.performance.request_latency_percentiles_ms.p90"
    assert pick(recs, "trtllm:generation_speed_per_user", "max")["value"] == 1684.0
    assert "skipped $.world_info.issue_rate: the rate requests were handed" in out
    assert "keys not read (skipped): " in out and "$.dataset" in out and "$.engine.engine_dir" not in out
    cfg = json.loads(recs[0]["config"])
    assert cfg["backend"] == "Pytorch" and cfg["tp_size"] == 1 and "engine_dir" not in cfg



# --- real --report_json files and a real gptManagerBenchmark block (README.md gives their origin) --
REPORT = "qwen2.5-0.5b_rtx-pro-6000_1.2.0_latency_in128_report.json"
REPORT_FP8 = "qwen2.5-0.5b_rtx-pro-6000_1.2.0_latency_fp8_in1024_report.json"
MANAGER_REAL = "llama3.1_gptManagerBenchmark_0.12.0.dev_latency_r1_i128_o128.txt"


def test_real_json_report_1_2_0_latency(xfid_cli):
    """trtllm-bench 1.2.0 `latency --report_json` on an RTX PRO 6000 (values read from the file by hand)."""
    f = DIR / REPORT
    assert sniff_all(f) == ["trtllm-bench"]
    recs, out = xfid_cli.ingest_export(f)
    assert len(recs) == 39
    assert {r["hardware"] for r in recs} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert {r["target"] for r in recs} == {"rtx-pro-6000-blackwell-server-edition"}
    assert {r["workload"] for r in recs} == {"qwen2.5-0.5b-instruct/bs1/in128/out40/bfloat16"}
    assert {r["software"] for r in recs} == {"trtllm-bench 1.2.0"}
    assert {r["run"] for r in recs} == {"masahiro-kubota-rtx6000-in128-bs1"}  # from the sidecar
    tput = pick(recs, "throughput_requests", "mean")
    assert tput["value"] == 13.909648508015806 and tput["source_loc"] == "$.performance.request_throughput_req_s"
    assert pick(recs, "throughput_tokens", "mean")["value"] == 556.3859403206322
    assert pick(recs, "throughput_total_tokens", "mean")["value"] == 2336.820949346655
    assert pick(recs, "trtllm:output_throughput_per_user", "mean")["value"] == 558.898819980835
    assert pick(recs, "duration")["value"] == pytest.approx(1.437850855, rel=1e-12)
    assert pick(recs, "requests_completed")["value"] == 20
    assert pick(recs, "concurrency", "mean")["value"] == 0.9996157946437358
    assert pick(recs, "e2e_latency", "mean")["value"] == pytest.approx(0.07186492125, rel=1e-12)
    assert pick(recs, "e2e_latency", "min")["value"] == pytest.approx(0.069964496, rel=1e-12)
    assert pick(recs, "e2e_latency", "p95")["value"] == pytest.approx(0.09396171799999999, rel=1e-12)
    assert pick(recs, "ttft", "mean")["value"] == pytest.approx(0.0051066203, rel=1e-12)
    assert pick(recs, "ttft", "p50")["value"] == pytest.approx(0.003676513, rel=1e-12)
    assert pick(recs, "ttft", "max")["value"] == pytest.approx(0.02713089, rel=1e-12)
    assert pick(recs, "tpot", "mean")["value"] == pytest.approx(0.0017117513064102563, rel=1e-12)
    assert pick(recs, "tpot", "p90")["value"] == pytest.approx(0.0017233715128205127, rel=1e-12)
    assert pick(recs, "trtllm:generation_speed_per_user", "max")["value"] == 590.3204698466574
    assert pick(recs, "trtllm:output_speed_per_user", "mean")["value"] == 584.2079874378304
    assert pick(recs, "trtllm:input_length", "mean")["value"] == 128 and pick(
        recs, "trtllm:output_length", "mean")["value"] == 40
    assert "skipped $.world_info.issue_rate: the rate requests were handed" in out
    assert "$.performance.request_latency_percentiles_ms.average: the same e2e_latency mean as" in out
    assert "$.dataset" in out
    cfg = json.loads(tput["config"])
    assert cfg["backend"] == "TRT" and cfg["version"] == "1.2.0" and cfg["max_num_tokens"] == 1065
    assert cfg["scheduling_policy"] == "GUARANTEED_NO_EVICT" and cfg["kv_cache_percentage"] == 0.9
    assert "model_path" not in cfg and "kv_cache_dtype" not in cfg  # "None" and null in the file


def test_real_json_report_fp8(xfid_cli):
    recs, _ = xfid_cli.ingest_export(DIR / REPORT_FP8)
    assert {r["workload"] for r in recs} == {"qwen2.5-0.5b-instruct/bs1/in1024/out40/fp8"}  # sidecar
    assert pick(recs, "requests_completed")["value"] == 100
    assert pick(recs, "throughput_total_tokens", "mean")["value"] == 15229.066130348958
    assert pick(recs, "e2e_latency", "p99")["value"] == pytest.approx(0.07222116799999999, rel=1e-12)
    assert pick(recs, "ttft", "min")["value"] == pytest.approx(0.0049067099999999995, rel=1e-12)
    assert pick(recs, "tpot", "p95")["value"] == pytest.approx(0.0016782334102564103, rel=1e-12)
    cfg = json.loads(recs[0]["config"])
    assert cfg["quantization"] == "FP8" and cfg["kv_cache_dtype"] == "FP8" and cfg["max_sequence_length"] == 9233


def test_real_gpt_manager_benchmark_block(xfid_cli, tmp_path):
    """gptManagerBenchmark of TensorRT-LLM 0.12.0.dev2024073000: one request, 128 in / 128 out."""
    recs, out = ingest(xfid_cli, tmp_path, MANAGER_REAL, *TARGET, "--workload", "llama3.1/bs1/in128/out128/fp8")
    assert len(recs) == 11 and {r["software"] for r in recs} == {"gptManagerBenchmark"}
    assert len({r["run"] for r in recs}) == 1 and not recs[0]["run"].endswith("#1")  # one block: one run
    done = pick(recs, "requests_completed")
    assert done["value"] == 1 and done["source_loc"] == "line 1: num_samples"
    assert pick(recs, "requests_failed")["value"] == 0
    assert pick(recs, "duration")["value"] == pytest.approx(2.23922, rel=1e-12)
    assert pick(recs, "throughput_requests", "mean")["value"] == 0.45
    assert pick(recs, "throughput_tokens", "mean")["value"] == 57.16
    for stat in ("mean", "max", "min", "p99", "p90", "p50"):
        assert pick(recs, "e2e_latency", stat)["value"] == pytest.approx(2.2392, rel=1e-12)
    assert "skipped line 4: num_samples: the same requests_completed value as line 1" in out


def test_directory_reads_only_the_reports_that_name_their_gpu(xfid_cli):
    r = xfid_cli("ingest", DIR)
    assert r.exit_code == 0, r.output
    assert "78 new rows from 2 file(s)" in r.output, r.output
    recs = [json.loads(x) for x in xfid_cli("export").output.splitlines()]
    assert sorted({r["run"] for r in recs}) == ["masahiro-kubota-rtx6000-fp8-in1024-bs1",
                                                "masahiro-kubota-rtx6000-in128-bs1"]

@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [
        ("llama3.2-3b_pytorch_1.1.0rc2_throughput.txt", lambda t: t.split("= PERFORMANCE OVERVIEW")[0],
         "line 2: report has no '= PERFORMANCE OVERVIEW' section (the file may be truncated"),
        ("llama3.2-3b_pytorch_1.1.0rc2_throughput.txt", lambda t: t.replace("Request Throughput (req/sec): ", "x"),
         "line 31: PERFORMANCE OVERVIEW has no 'Request Throughput (req/sec)' line"),
        ("llama3.1-8b_pytorch_0.17.0_throughput.txt", lambda t: t.replace("18563.6825", "18563.68ms"),
         "line 30: expected a number in 'Total Latency (ms):             18563.68ms', got '18563.68ms'"),
        ("gpt350m_benchmark_py_readme.txt", lambda t: t[:300], "line 1: [BENCHMARK] line ends with key"),
        ("gpt350m_benchmark_py_readme.txt", lambda t: "hello\n", "no '= PERFORMANCE OVERVIEW' section found"),
    ],
)
def test_bad_input(xfid_cli, tmp_path, snapshot, name, edit, message):
    ingest(xfid_cli, tmp_path, "gpt350m_benchmark_py_readme.txt", *TARGET)  # a store with data in it
    f = tmp_path / "bad" / name
    f.parent.mkdir()
    f.write_text(edit((DIR / name).read_text()))
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "trtllm-bench", *TARGET, "--workload", "w")
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}"), r.output
    assert message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


def test_json_missing_performance(xfid_cli, tmp_path):
    doc = json_report()
    del doc["performance"]["request_throughput_req_s"]
    f = tmp_path / "report.json"
    f.write_text(json.dumps(doc))
    r = xfid_cli("ingest", f, "--adapter", "trtllm-bench")
    assert r.exit_code == 2 and "$.performance: no 'performance.request_throughput_req_s'" in r.output


def test_sniff_claims_only_its_files(tmp_path):
    for f in sorted(DIR.glob("*")):
        if f.suffix in (".txt", ".log"):
            assert sniff_all(f) == ["trtllm-bench"], f
    plain = tmp_path / "notes.txt"
    plain.write_text("Request Throughput (req/sec): 3\n")
    assert "trtllm-bench" not in sniff_all(plain)
