"""sglang adapter: bench_serving JSON lines onto the vllm adapter's canonical metrics, bad input."""

from __future__ import annotations

import json

import pytest

from xfid.adapters import detect
from xfid.adapters.sglang import SglangAdapter

DIR = "measured/sglang"


def rows(xfid_cli, path, *args):
    return xfid_cli.ingest_export(path, *args)[0]


def pick(recs, metric, stat="value", line=None):
    hits = [r for r in recs if r["metric"] == metric and r["stat"] == stat
            and (line is None or r["source_loc"].startswith(f"line {line}:"))]
    assert len(hits) == 1, (metric, stat, hits)
    return hits[0]


def test_fields_and_units(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "h200_llama3-70b_rate4.jsonl")
    assert {r["target"] for r in recs} == {"h200-sxm"} and {r["op"] for r in recs} == {""}
    assert {r["workload"] for r in recs} == {"llama3-70b/serve/in512/out256/fp8"}
    assert pick(recs, "duration")["value"] == 128.44
    assert pick(recs, "requests_completed")["value"] == 500
    assert pick(recs, "input_tokens")["value"] == 256000
    assert pick(recs, "output_tokens")["value"] == 128000
    assert pick(recs, "throughput_requests", "mean")["value"] == pytest.approx(500 / 128.44, abs=1e-6)
    assert pick(recs, "throughput_input_tokens", "mean")["value"] == pytest.approx(256000 / 128.44, abs=1e-6)
    assert pick(recs, "throughput_tokens", "mean")["value"] == pytest.approx(128000 / 128.44, abs=1e-6)
    assert pick(recs, "concurrency", "mean")["value"] == 11.72
    e2e = pick(recs, "e2e_latency", "mean")
    assert e2e["value"] == pytest.approx(3.0109) and e2e["unit"] == "s" and e2e["n_samples"] == 500
    assert e2e["source_loc"] == "line 1: $.mean_e2e_latency_ms"
    assert pick(recs, "e2e_latency", "p99")["value"] == pytest.approx(3.5715)
    assert pick(recs, "ttft", "median")["value"] == pytest.approx(0.1517)
    assert pick(recs, "ttft", "std")["value"] == pytest.approx(0.0449)
    assert pick(recs, "tpot", "p99")["value"] == pytest.approx(0.00644)
    assert pick(recs, "itl", "p95")["value"] == pytest.approx(0.0071)
    assert pick(recs, "itl", "p99")["value"] == pytest.approx(0.00983)
    assert e2e["software"] == "sglang bench_serving (sglang)" and e2e["run"] == "example-sglang-h200"
    cfg = json.loads(e2e["config"])
    assert cfg == {"backend": "sglang", "dataset_name": "random", "max_concurrency": 16, "random_input_len": 1024,
                   "random_output_len": 512, "random_range_ratio": 0.0, "request_rate": 4.0}
    assert not [r for r in recs if r["metric"] == "requests_failed"]  # SGLang writes no `failed`


def test_two_runs_and_infinity_rate(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "h100_llama3-8b_random_sweep.jsonl")
    assert len(recs) == 52
    a, b = pick(recs, "ttft", "mean", line=1), pick(recs, "ttft", "mean", line=2)
    assert a["value"] == pytest.approx(0.6117) and b["value"] == pytest.approx(1.4902)
    assert a["run"] == "example-sglang-2026-03-01-line1" and b["run"] == "example-sglang-2026-03-01-line2"
    assert pick(recs, "sglang:output_tokens_retokenized", line=1)["value"] == 262141
    assert json.loads(a["config"])["request_rate"] == "inf"
    assert json.loads(b["config"])["request_rate"] == 8.0 and json.loads(b["config"])["max_concurrency"] == 256


def test_sniff_separates_sglang_and_vllm(fixtures):
    assert detect(fixtures / DIR / "h200_llama3-70b_rate4.jsonl") is SglangAdapter
    assert detect(fixtures / DIR / "h100_llama3-8b_random_sweep.jsonl") is SglangAdapter
    assert detect(fixtures / "measured/vllm/h100_llama3-8b_decode_bs8.json").name == "vllm"


GOOD = '{"request_throughput": 1.0, "completed": 3, "mean_e2e_latency_ms": 10.0}'


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (GOOD + "\n" + GOOD[:30], "line 2: not valid JSON"),
        ('{"request_throughput": 1.0, "completed": 3}', "line 1: not an SGLang bench_serving result"),
        ('{"request_throughput": 1.0, "mean_e2e_latency_ms": "slow"}',
         "line 1: $.mean_e2e_latency_ms: 'mean_e2e_latency_ms' must be a number, got 'slow'"),
        ('{"request_throughput": "fast", "mean_ttft_ms": 1.0}', "line 1: $.request_throughput"),
        ('{"request_throughput": 1.0, "mean_ttft_ms": 1.0, "request_rate": "often"}',
         'request_rate must be a number, "inf" or "trace", got \'often\''),
        ("[1, 2]", "line 1: expected a JSON object, got list"),
        ("timestamp, index, power.draw [W]\n", "line 1: not valid JSON"),
    ],
)
def test_bad_input(xfid_cli, tmp_path, snapshot, fixtures, content, message):
    assert xfid_cli("ingest", fixtures / DIR / "h200_llama3-70b_rate4.jsonl").exit_code == 0
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "sglang", "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


# --- real files (fixtures/measured/sglang/README.md gives their origin) ------------------------
ONLINE = DIR + "/datacrunch_h200x4_llama3.3-70b_online.jsonl"
DEEPSEEK = DIR + "/datacrunch_h200x8_deepseek-v2_dp-mla.jsonl"


def test_real_2024_reduced_key_set_seven_runs(xfid_cli, fixtures):
    recs, out = xfid_cli.ingest_export(fixtures / ONLINE)
    assert "keys not read" not in out and "summary key says" not in out
    assert {r["target"] for r in recs} == {"h200-sxm"}
    assert sorted({r["run"] for r in recs}) == [f"datacrunch-h200x4-online-line{n}" for n in range(1, 8)]
    ttft = pick(recs, "ttft", "median", line=1)
    assert ttft["value"] == pytest.approx(0.08574514742940664, rel=1e-15) and ttft["unit"] == "s"
    assert ttft["n_samples"] == 300 and ttft["source_loc"] == "line 1: $.median_ttft_ms"
    assert pick(recs, "itl", "median", line=1)["value"] == pytest.approx(0.013638956006616354, rel=1e-15)
    assert pick(recs, "e2e_latency", "mean", line=1)["value"] == pytest.approx(7.840616212638561, rel=1e-15)
    assert pick(recs, "e2e_latency", "median", line=5)["value"] == pytest.approx(159.46904255752452, rel=1e-15)
    assert pick(recs, "throughput_tokens", "mean", line=5)["value"] == 4288.049348197696
    assert pick(recs, "requests_completed", line=5)["value"] == 3200
    assert pick(recs, "duration", line=1)["value"] == 298.3675805060193
    assert pick(recs, "output_tokens", line=7)["value"] == 461874
    assert pick(recs, "sglang:output_tokens_retokenized", line=7)["value"] == 460108
    assert not [r for r in recs if r["metric"] in ("throughput_requests", "tpot")]  # not in the 2024 key set
    assert {r["stat"] for r in recs if r["metric"] == "ttft"} == {"median"}
    cfg6 = json.loads(pick(recs, "ttft", "median", line=6)["config"])
    assert cfg6["dataset_name"] == "sharegpt" and cfg6["request_rate"] == 4.0
    assert {r["flags"] for r in recs} == {None}


def test_real_infinity_rate(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DEEPSEEK)
    assert {r["run"] for r in recs} == {"datacrunch-h200x8-deepseek-dp-mla"}  # one line: the run as given
    ttft = pick(recs, "ttft", "median")
    assert ttft["value"] == pytest.approx(10.014104524045251, rel=1e-15) and ttft["n_samples"] == 10000
    assert json.loads(ttft["config"])["request_rate"] == "inf"
    assert pick(recs, "throughput_tokens", "mean")["value"] == 12412.394674113431
    assert pick(recs, "input_tokens")["value"] == 10000


def test_real_files_sniffed_as_sglang(fixtures):
    assert detect(fixtures / ONLINE) is SglangAdapter
    assert detect(fixtures / DEEPSEEK) is SglangAdapter


def test_reduced_key_set_with_explicit_adapter(xfid_cli, tmp_path):
    """The 2024 key set read with --adapter sglang (the old error claimed the e2e keys were missing)."""
    f = tmp_path / "online.jsonl"
    f.write_text('{"backend": "sglang", "mean_e2e_latency_ms": 10.0, "median_e2e_latency_ms": 9.0, '
                 '"median_ttft_ms": 1.0, "median_itl_ms": 2.0, "output_throughput": 5.0, "duration": 3.0, '
                 '"completed": 2}\n')
    recs = rows(xfid_cli, f, "--adapter", "sglang", "--target", "h100-sxm", "--workload", "w")
    assert pick(recs, "e2e_latency", "median")["value"] == pytest.approx(0.009)
    assert pick(recs, "e2e_latency", "median")["run"] is not None


# --- the 0.5.x shape: written here from bench_serving.py's result dict (no public file found) ---
def _v05_line(**over):
    line = {"tag": "nightly", "backend": "sglang-oai", "dataset_name": "random", "request_rate": "trace",
            "max_concurrency": 4, "sharegpt_output_len": None, "random_input_len": 8, "random_output_len": 4,
            "random_range_ratio": 1.0, "server_info": {"version": "0.5.4", "tp_size": 1},
            "duration": 2.0, "completed": 3, "total_input_tokens": 24, "total_input_text_tokens": 24,
            "total_input_vision_tokens": 0, "total_output_tokens": 12, "total_output_tokens_retokenized": 12,
            "request_throughput": 1.5, "input_throughput": 12.0, "output_throughput": 6.0,
            "total_throughput": 18.0, "mean_e2e_latency_ms": 300.0, "median_e2e_latency_ms": 300.0,
            "std_e2e_latency_ms": 0.0, "p90_e2e_latency_ms": 300.0, "p99_e2e_latency_ms": 300.0,
            "mean_ttft_ms": 20.0, "median_ttft_ms": 20.0, "std_ttft_ms": 8.16496580927726,
            "p99_ttft_ms": 29.8, "mean_tpot_ms": 5.0, "median_tpot_ms": 5.0, "std_tpot_ms": 0.0,
            "p99_tpot_ms": 5.0, "mean_itl_ms": 5.0, "median_itl_ms": 5.0, "std_itl_ms": 0.0,
            "p95_itl_ms": 5.0, "p99_itl_ms": 5.0, "concurrency": 2.5, "accept_length": None,
            "max_output_tokens_per_s": 8.0, "max_concurrent_requests": 3,
            "input_lens": [8, 8, 8, 8], "output_lens": [4, 4, 4, 0], "ttfts": [0.01, 0.02, 0.03, 0.0],
            "itls": [[0.005] * 3, [0.005] * 3, [0.005] * 3, []], "generated_texts": ["a", "b", "c", ""],
            "errors": ["", "", "", "Connection reset"]}
    line.update(over)
    return json.dumps(line)


def test_v05_summary_keys_and_per_request_arrays(xfid_cli, tmp_path):
    f = tmp_path / "sglang_1201_4_8_4.jsonl"
    f.write_text(_v05_line() + "\n")
    assert detect(f) is SglangAdapter
    recs, out = xfid_cli.ingest_export(f, "--target", "h100-sxm", "--workload", "w")
    assert "summary key says" not in out  # the summary keys agree with the arrays of the 3 successful requests
    assert "keys not read (skipped): $.generated_texts" in out
    e2e = pick(recs, "e2e_latency", "p90")
    assert e2e["value"] == pytest.approx(0.3) and e2e["n_samples"] == 3 and e2e["run"] == "nightly"
    assert e2e["software"] == "sglang bench_serving (sglang-oai), sglang 0.5.4"
    assert pick(recs, "throughput_tokens", "max")["value"] == 8.0
    assert pick(recs, "concurrency", "max")["value"] == 3
    assert pick(recs, "sglang:input_vision_tokens")["value"] == 0
    assert not [r for r in recs if r["metric"] == "sglang:accept_length"]  # null: no speculative decoding
    # from the arrays: stats the summary keys lack, over the successful requests only
    mx = pick(recs, "ttft", "max")
    assert mx["value"] == pytest.approx(0.03) and mx["n_samples"] == 3
    assert mx["source_loc"] == "line 1: $.ttfts: max of 3 successful requests"
    assert pick(recs, "ttft", "p90")["value"] == pytest.approx(0.028)
    assert pick(recs, "itl", "min")["n_samples"] == 9
    assert pick(recs, "output_tokens", "mean")["value"] == 4.0
    failed = pick(recs, "requests_failed")
    assert failed["value"] == 1 and failed["source_loc"] == "line 1: $.errors: requests with an error"
    assert {r["flags"] for r in recs} == {"failed_requests"}
    assert json.loads(e2e["config"])["request_rate"] == "trace"


def test_v05_summary_disagreeing_with_arrays_warns(xfid_cli, tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(_v05_line(mean_ttft_ms=40.0) + "\n")
    _, out = xfid_cli.ingest_export(f, "--target", "h100-sxm", "--workload", "w")
    assert "warning: line 1: $.ttfts: ttft mean from the 3 successful requests is 0.02 s, but the summary key" in out


def test_zero_ttft_and_itl_are_not_measurements(xfid_cli, tmp_path):
    """bench_serving writes TTFT and ITL 0.0 when no streamed chunk was timed; E2E stays."""
    f = tmp_path / "pd.jsonl"
    f.write_text(_v05_line(mean_ttft_ms=0.0, median_ttft_ms=0.0, std_ttft_ms=0.0, p99_ttft_ms=0.0,
                           mean_itl_ms=0.0, median_itl_ms=0.0, std_itl_ms=0.0, p95_itl_ms=0.0, p99_itl_ms=0.0,
                           ttfts=[0.0] * 4, itls=[[], [], [], []]) + "\n")
    recs, out = xfid_cli.ingest_export(f, "--target", "h100-sxm", "--workload", "w")
    ttft = pick(recs, "ttft", "mean")
    assert ttft["value"] is None and ttft["null_reason"] == "0 ms: no chunk timing (sglang quirk)"
    assert pick(recs, "itl", "p95")["value"] is None
    assert pick(recs, "ttft", "std")["value"] == 0.0  # a spread of 0 is a number
    assert pick(recs, "e2e_latency", "mean")["value"] == pytest.approx(0.3)
    assert "summary key says" not in out


def test_v05_line_with_a_large_server_info_is_sniffed(tmp_path):
    """0.5.x puts `server_info` (every server argument) before the results: past the sniffed head."""
    f = tmp_path / "out.jsonl"
    f.write_text(_v05_line(server_info={"version": "0.5.4", **{f"arg_{i}": "x" * 40 for i in range(300)}}) + "\n")
    assert f.read_text().index("_e2e_latency_ms") > 8192
    assert detect(f) is SglangAdapter


AGG = DIR + "/tonyli15_gh200_qwen2.5-3b_v0.5.5_agg_c32.jsonl"
PD = DIR + "/tonyli15_gh200_qwen2.5-3b_pd-1p1d_c64.jsonl"


def test_real_v05_line_with_server_info(xfid_cli, fixtures):
    recs, out = xfid_cli.ingest_export(fixtures / AGG)
    assert "keys not read" not in out  # server_info is read for its version, accept_length is null
    e2e = pick(recs, "e2e_latency", "p99")
    assert e2e["value"] == pytest.approx(1.1812900166865443, rel=1e-15) and e2e["n_samples"] == 100
    assert e2e["software"] == "sglang bench_serving (sglang), sglang 0.5.5.post3"
    assert pick(recs, "ttft", "median")["value"] == pytest.approx(0.03713699756190181, rel=1e-15)
    assert pick(recs, "itl", "p95")["value"] == pytest.approx(0.02242972366511822, rel=1e-15)
    assert pick(recs, "throughput_total_tokens", "mean")["value"] == 16663.363794435983
    assert pick(recs, "concurrency", "mean")["value"] == 28.450295820896617
    assert pick(recs, "sglang:input_text_tokens")["value"] == 26497
    assert pick(recs, "sglang:output_tokens_retokenized")["value"] == 6179
    assert not [r for r in recs if r["metric"] == "sglang:accept_length"]
    cfg = json.loads(e2e["config"])
    assert cfg["tag"] == "agg_n100_in512_out128_c32" and cfg["request_rate"] == "inf" and "server_info" not in cfg


def test_real_v05_pd_line_sniffed_past_its_server_info(xfid_cli, fixtures):
    """The PD router's server_info (prefill and decode arguments) is 50 KB before the results."""
    assert (fixtures / PD).read_text().index("_e2e_latency_ms") > 8192
    assert detect(fixtures / PD) is SglangAdapter
    recs = rows(xfid_cli, fixtures / PD)
    ttft = pick(recs, "ttft", "mean")
    assert ttft["value"] == pytest.approx(5.398151867231354, rel=1e-15)
    assert ttft["software"] == "sglang bench_serving (sglang)"  # no top-level version in a PD server_info
    assert pick(recs, "tpot", "p99")["value"] == pytest.approx(0.008205045893873002, rel=1e-15)
    assert pick(recs, "throughput_requests", "mean")["value"] == 9.335204764526567


def test_arrays_count_the_requests_when_the_summary_does_not(xfid_cli, tmp_path):
    line = json.loads(_v05_line())
    for k in ("completed", "errors"):
        del line[k]
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps(line) + "\n")
    recs = rows(xfid_cli, f, "--target", "h100-sxm", "--workload", "w")
    done = pick(recs, "requests_completed")
    assert done["value"] == 4 and done["source_loc"] == "line 1: $.ttfts: entries"
    assert not [r for r in recs if r["metric"] == "requests_failed"]  # no errors array: not known


DETAILS = DIR + "/benchmaq_h100x8_qwen3-8b_v0.5.9_details_in1024_out128_c100.jsonl"


def test_real_v059_output_details(xfid_cli, fixtures):
    """A real `--output-details` line of SGLang 0.5.9 (100 requests on 8xH100): summary keys from the
    file, the stats they lack from its per-request arrays (values read and computed by hand)."""
    assert detect(fixtures / DETAILS) is SglangAdapter
    recs, out = xfid_cli.ingest_export(fixtures / DETAILS)
    assert len(recs) == 56
    assert "summary key says" not in out  # every summary key agrees with the arrays
    assert "keys not read (skipped): $.generated_texts" in out
    assert {r["software"] for r in recs} == {"sglang bench_serving (sglang), sglang 0.5.9"}
    assert {r["target"] for r in recs} == {"h100-sxm"} and {r["run"] for r in recs} == {
        "benchmaq-h100x8-qwen3-8b-tp8-in1024"}
    assert {r["flags"] for r in recs} == {None}  # no failed request
    # summary keys
    assert pick(recs, "requests_completed")["value"] == 100
    assert pick(recs, "duration")["value"] == 1.5543090358842164
    assert pick(recs, "throughput_requests", "mean")["value"] == 64.33726993236704
    assert pick(recs, "throughput_tokens", "max")["value"] == 6021.0
    assert pick(recs, "concurrency", "max")["value"] == 100
    assert pick(recs, "e2e_latency", "p90")["value"] == pytest.approx(1.4385160727659243, rel=1e-15)
    ttft = pick(recs, "ttft", "mean")
    assert ttft["value"] == pytest.approx(0.5784130509826355, rel=1e-15) and ttft["n_samples"] == 100
    itl = pick(recs, "itl", "p99")
    assert itl["value"] == pytest.approx(0.4608212916646153, rel=1e-15) and itl["n_samples"] == 6008
    assert pick(recs, "tpot", "median")["value"] == pytest.approx(0.011149914426108202, rel=1e-15)
    # from the arrays: 100 ttfts, 6008 inter-token latencies, 100 input/output lengths
    mx = pick(recs, "ttft", "max")
    assert mx["value"] == 0.970523945055902 and mx["source_loc"] == "line 1: $.ttfts: max of 100 successful requests"
    assert pick(recs, "ttft", "min")["value"] == 0.4711520920973271
    assert pick(recs, "ttft", "p90")["value"] == pytest.approx(0.9666540685342625, rel=1e-12)
    assert pick(recs, "itl", "max")["value"] == 0.5448690899647772
    assert pick(recs, "itl", "min")["n_samples"] == 6008
    assert pick(recs, "output_tokens", "mean")["value"] == pytest.approx(61.08)  # 6108 tokens / 100
    assert pick(recs, "output_tokens", "min")["value"] == 1 and pick(recs, "output_tokens", "max")["value"] == 126
    assert pick(recs, "input_tokens", "mean")["value"] == pytest.approx(505.61)  # 50561 tokens / 100
    assert pick(recs, "input_tokens", "max")["value"] == 1003
    failed = pick(recs, "requests_failed")
    assert failed["value"] == 0 and failed["source_loc"] == "line 1: $.errors: requests with an error"
    cfg = json.loads(ttft["config"])
    assert cfg["max_concurrency"] == 100 and cfg["random_input_len"] == 1024 and cfg["request_rate"] == "inf"
