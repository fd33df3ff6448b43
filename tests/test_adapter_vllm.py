"""vllm adapter: every field of `vllm bench serve` results, quirks, flags, energy."""

from __future__ import annotations

import json

import pytest

from xfid.adapters import detect
from xfid.adapters.vllm import VllmAdapter

VLLM = "fixtures/measured/vllm"


def rows(xfid_cli, path, *args):
    return xfid_cli.ingest_export(path, *args)[0]


def pick(recs, metric, stat="value", run=None):
    hits = [r for r in recs if r["metric"] == metric and r["stat"] == stat and (run is None or r["run"] == run)]
    assert len(hits) == 1, (metric, stat, hits)
    return hits[0]


def test_single_result_fields_and_units(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / "measured/vllm/h100_llama3-8b_decode_bs8.json")
    assert {r["target"] for r in recs} == {"h100-sxm"}
    assert {r["workload"] for r in recs} == {"llama3-8b/decode/bs8/ctx2048/bf16"}
    assert pick(recs, "ttft", "mean")["value"] == pytest.approx(0.1427)
    assert pick(recs, "ttft", "p99")["value"] == pytest.approx(0.2614)
    assert pick(recs, "tpot", "median")["value"] == pytest.approx(0.00736)
    assert pick(recs, "itl", "std")["value"] == pytest.approx(0.00188)
    assert pick(recs, "e2e_latency", "mean")["value"] == pytest.approx(2.0315)
    assert pick(recs, "duration")["value"] == 61.42
    assert pick(recs, "throughput_tokens", "mean")["value"] == 1067.0
    assert pick(recs, "throughput_tokens", "max")["value"] == 1184.0
    assert pick(recs, "throughput_total_tokens", "mean")["value"] == pytest.approx(9603.1)
    assert pick(recs, "throughput_requests", "mean")["value"] == pytest.approx(4.168)
    assert pick(recs, "requests_completed")["value"] == 256
    assert pick(recs, "energy")["value"] == pytest.approx(36251.2)
    assert pick(recs, "power", "mean")["value"] == pytest.approx(590.2)
    assert pick(recs, "energy_per_token")["value"] == pytest.approx(0.5531)
    assert pick(recs, "tokens_per_joule")["value"] == pytest.approx(65536 / 36251.2)
    goodput = pick(recs, "goodput_requests", "mean")
    assert goodput["value"] is None and "--goodput" in goodput["null_reason"]
    ttft = pick(recs, "ttft", "mean")
    assert ttft["unit"] == "s" and ttft["n_samples"] == 256 and ttft["source_loc"] == "$.mean_ttft_ms"
    cfg = json.loads(ttft["config"])
    assert cfg["request_rate"] == "inf" and cfg["max_concurrency"] == 8 and cfg["gpu"] == "H100-SXM"
    assert ttft["timestamp"].startswith("2026-11-24T10:15:00")
    assert ttft["run"] == "nightly-2026-11-24-20261124-101500"
    assert ttft["flags"] is None


def test_json_lines_failed_and_old_versions(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / "measured/vllm/h100_llama3-8b_sweep.jsonl")
    runs = sorted({r["run"] for r in recs})
    assert runs == ["sweep-c16-20261125-091500", "sweep-c4-20261125-090000", "vllm-20260610-120000"]
    c16 = pick(recs, "requests_failed", run="sweep-c16-20261125-091500")
    assert c16["value"] == 3 and c16["flags"] == "failed_requests"
    assert c16["source_loc"] == "line 2: $.failed"
    old = [r for r in recs if r["run"] == "vllm-20260610-120000"]
    assert {r["flags"] for r in old} == {"missing_counts"}
    med = pick(old, "ttft", "median")
    assert med["value"] is None and "no chunk arrived" in med["null_reason"]


def test_sniff_picks_vllm(fixtures):
    assert detect(fixtures / "measured/vllm/h100_llama3-8b_decode_bs8.json") is VllmAdapter


def test_target_and_workload_required(xfid_cli, tmp_path, fixtures):
    f = tmp_path / "r.json"
    f.write_text((fixtures / "measured/vllm/h100_llama3-8b_decode_bs8.json").read_text())
    r = xfid_cli("ingest", f)
    assert r.exit_code == 2 and f"{f}: missing 'target' and 'workload' (pass --target and --workload " in r.output
    assert "$.duration" not in r.output  # the fields are missing from the file, not at the first value's key


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"request_throughput": 1.0, "completed": 3, "mean_ttft_ms": "fast"}', "$.mean_ttft_ms: 'mean_ttft_ms' must be a number"),
        ('{"request_throughput": 1.0, "completed": 3, "mean_ttft_ms": NaN}', "NaN is not a number"),
        ('{"request_throughput": 1.0, "completed": 3, "request_rate": "fast"}', 'request_rate must be a number or "inf"'),
        ('{"completed": 3, "request_throughput": 1.0, "date": "yesterday"}', "date 'yesterday' is not %Y%m%d-%H%M%S"),
        ('{"hello": 1}', "not a vllm bench serve result"),
        ('{"request_throughput": 1.0, "compl', "not valid JSON"),
    ],
)
def test_bad_vllm_input(xfid_cli, tmp_path, snapshot, fixtures, content, message):
    assert xfid_cli("ingest", fixtures / "measured/vllm/h100_llama3-8b_decode_bs8.json").exit_code == 0
    f = tmp_path / "bad.json"
    f.write_text(content)
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "vllm", "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and r.output.startswith("Error: ") and message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


# --- real files (fixtures/measured/vllm/README.md gives their origin) ------------------------
LAMBDA = "measured/vllm/lambdalabs_h100_llama3.1-8b-fp8_v0.5.4_detailed.json"
ER0080 = "measured/vllm/er0080_opt-125m_v0.25.1_bench_serve.json"
FAILED = "measured/vllm/er0080_opt-125m_v0.25.1_all_failed.json"


def test_real_2024_detailed_file_summary_keys(xfid_cli, fixtures):
    recs, out = xfid_cli.ingest_export(fixtures / LAMBDA)
    assert "summary key says" not in out  # the summary keys agree with the per-request arrays
    assert "keys not read (skipped): $.generated_texts" in out
    assert {r["target"] for r in recs} == {"h100-sxm"} and {r["run"] for r in recs} == {"vllm-20240907-082634"}
    ttft = pick(recs, "ttft", "mean")
    assert ttft["value"] == pytest.approx(0.04416175780061167, rel=1e-15) and ttft["n_samples"] == 10
    assert ttft["source_loc"] == "$.mean_ttft_ms"
    assert pick(recs, "ttft", "p99")["value"] == pytest.approx(0.06457043718444766, rel=1e-15)
    e2e = pick(recs, "e2e_latency", "mean")  # vLLM <= 0.6.0 spelled e2el `latency`
    assert e2e["value"] == pytest.approx(0.29035341650014743, rel=1e-15) and e2e["source_loc"] == "$.mean_latency_ms"
    assert pick(recs, "e2e_latency", "p99")["value"] == pytest.approx(1.0305146967872863, rel=1e-15)
    assert pick(recs, "throughput_input_tokens", "mean")["value"] == 1281.9486152410154
    assert pick(recs, "throughput_tokens", "mean")["value"] == 413.89429359863317
    assert pick(recs, "requests_completed")["value"] == 10
    failed = pick(recs, "requests_failed")  # no `failed` key in 2024: counted from `errors`
    assert failed["value"] == 0 and failed["source_loc"] == "$.errors: requests with an error"
    assert {r["flags"] for r in recs} == {None}
    cfg = json.loads(ttft["config"])
    assert cfg["best_of"] == 1 and cfg["use_beam_search"] is False and cfg["request_rate"] == "inf"
    assert "generated_texts" not in cfg and "ttfts" not in cfg


def test_real_2024_detailed_file_per_request_arrays(xfid_cli, fixtures):
    """Values read by hand from the file's arrays (seconds, 10 requests, all with an empty error)."""
    recs = rows(xfid_cli, fixtures / LAMBDA)
    mx = pick(recs, "ttft", "max")
    assert mx["value"] == 0.06464132100518327 and mx["unit"] == "s" and mx["n_samples"] == 10
    assert mx["source_loc"] == "$.ttfts: max of 10 successful requests"
    mn = pick(recs, "ttft", "min")  # three requests produced no token: TTFT 0.0
    assert mn["value"] is None and "no chunk arrived" in mn["null_reason"]
    itl_max = pick(recs, "itl", "max")
    assert itl_max["value"] == 0.0518856999988202 and itl_max["n_samples"] == 45  # 12+20+4+1+8 ITLs
    assert pick(recs, "itl", "mean")["n_samples"] == 45 and pick(recs, "itl", "mean")["source_loc"] == "$.mean_itl_ms"
    # input_lens 13 25 27 10 329 29 399 328 4 205; output_lens 120 1 1 194 0 40 0 0 6 80
    assert pick(recs, "input_tokens")["value"] == 1369  # total_input_tokens
    assert pick(recs, "input_tokens", "mean")["value"] == pytest.approx(136.9)
    assert pick(recs, "input_tokens", "median")["value"] == 28.0
    assert pick(recs, "input_tokens", "min")["value"] == 4 and pick(recs, "input_tokens", "max")["value"] == 399
    assert pick(recs, "input_tokens", "p90")["value"] == pytest.approx(336.0)  # 329 + 0.1 * (399 - 329)
    assert pick(recs, "output_tokens", "mean")["value"] == pytest.approx(44.2)
    assert pick(recs, "output_tokens", "max")["value"] == 194
    # a stat the summary keys give is not computed twice
    assert len([r for r in recs if r["metric"] == "ttft" and r["stat"] == "mean"]) == 1


def test_real_v0_25_file_and_unread_key(xfid_cli, fixtures):
    recs, out = xfid_cli.ingest_export(fixtures / ER0080)
    assert "keys not read (skipped): $.rtfx" in out
    assert {r["target"] for r in recs} == {"arm64-cpu"}
    assert pick(recs, "ttft", "median")["value"] == pytest.approx(0.05568139649994919, rel=1e-15)
    assert pick(recs, "itl", "p99")["value"] == pytest.approx(0.029815922519960626, rel=1e-15)
    assert pick(recs, "throughput_tokens", "max")["value"] == 85.0
    assert pick(recs, "concurrency", "max")["value"] == 6
    assert pick(recs, "throughput_total_tokens", "mean")["value"] == 248.6789122211242
    assert pick(recs, "requests_failed")["value"] == 0
    assert pick(recs, "ttft", "mean")["timestamp"].startswith("2026-08-16T16:08:53")
    assert not [r for r in recs if "rtfx" in r["source_loc"] or "rtfx" in (r["config"] or "")]


def test_real_all_requests_failed(xfid_cli, fixtures):
    """vLLM writes 0.0 for every latency when no request completed: not a measurement."""
    recs = rows(xfid_cli, fixtures / FAILED)
    assert pick(recs, "requests_completed")["value"] == 0
    failed = pick(recs, "requests_failed")
    assert failed["value"] == 8 and failed["flags"] == "failed_requests"
    lat = [r for r in recs if r["metric"] in ("ttft", "tpot", "itl")]
    assert len(lat) == 12 and {r["value"] for r in lat} == {None}
    assert {r["null_reason"] for r in lat} == {"no request completed (the file says 0)"}
    assert pick(recs, "throughput_tokens", "mean")["value"] == 0.0  # a throughput of 0 is measured


def test_typo_key_listed_as_skipped(xfid_cli, tmp_path):
    f = tmp_path / "r.json"
    f.write_text('{"request_throughput": 1.0, "completed": 3, "failed": 0, "mean_ttft_ms": 5.0, '
                 '"request_goodput:": null, "gpu": "H100"}')
    recs, out = xfid_cli.ingest_export(f, "--adapter", "vllm", "--target", "h100-sxm", "--workload", "w")
    assert "keys not read (skipped): $.request_goodput:" in out
    assert json.loads(pick(recs, "ttft", "mean")["config"]) == {"gpu": "H100"}  # text: a --metadata pair
    r = xfid_cli("ingest", f, "--adapter", "vllm", "--target", "h100-sxm", "--workload", "w2", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["files"][0]["skipped_keys"] == {"$.request_goodput:": 1}


def test_arrays_in_the_wrong_unit_warn(xfid_cli, tmp_path):
    """Per-request arrays are seconds; arrays written in ms disagree with the summary: a warning."""
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"request_throughput": 1.0, "completed": 2, "failed": 0, "mean_ttft_ms": 150.0,
                             "ttfts": [100.0, 200.0], "itls": [[5.0], [6.0]], "errors": ["", ""]}))
    recs, out = xfid_cli.ingest_export(f, "--adapter", "vllm", "--target", "h100-sxm", "--workload", "w")
    assert "warning: $.ttfts: ttft mean from the 2 successful requests is 150 s, but the summary key says 0.15 s" in out
    assert pick(recs, "ttft", "mean")["value"] == pytest.approx(0.15)  # the summary key is kept


def test_failed_requests_left_out_of_the_array_stats(xfid_cli, tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"request_throughput": 1.0, "completed": 2, "mean_ttft_ms": 150.0,
                             "input_lens": [10, 20, 30], "output_lens": [4, 5, 0],
                             "ttfts": [0.1, 0.2, 0.0], "itls": [[0.01], [0.02, 0.03], []],
                             "errors": ["", "", "Timeout"]}))
    recs, out = xfid_cli.ingest_export(f, "--adapter", "vllm", "--target", "h100-sxm", "--workload", "w")
    assert "summary key says" not in out
    assert pick(recs, "ttft", "max")["value"] == 0.2 and pick(recs, "ttft", "max")["n_samples"] == 2
    assert pick(recs, "itl", "median")["value"] == 0.02 and pick(recs, "itl", "median")["n_samples"] == 3
    assert pick(recs, "input_tokens", "max")["value"] == 20
    failed = pick(recs, "requests_failed")
    assert failed["value"] == 1 and failed["flags"] == "failed_requests"


def test_json_lines_without_date_are_one_run_per_line(xfid_cli, tmp_path):
    f = tmp_path / "sweep.jsonl"
    f.write_text('{"request_throughput": 1.0, "completed": 3, "failed": 0, "mean_ttft_ms": 5.0}\n'
                 '{"request_throughput": 2.0, "completed": 3, "failed": 0, "mean_ttft_ms": 7.0}\n')
    recs = rows(xfid_cli, f, "--adapter", "vllm", "--target", "h100-sxm", "--workload", "w")
    assert pick(recs, "ttft", "mean", run="sweep-line1")["value"] == pytest.approx(0.005)
    assert pick(recs, "ttft", "mean", run="sweep-line2")["value"] == pytest.approx(0.007)


def test_real_files_sniffed_as_vllm(fixtures):
    for name in (LAMBDA, ER0080, FAILED):
        assert detect(fixtures / name) is VllmAdapter, name


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"completed": 2, "ttfts": [0.1], "input_lens": [1, 2]}', "per-request arrays differ in length (input_lens 2, ttfts 1)"),
        ('{"completed": 1, "ttfts": [0.1], "itls": [0.2]}', "$.itls[0]: expected a list of inter-token latencies, got 0.2"),
        ('{"completed": 1, "ttfts": [-0.1]}', "$.ttfts: entry 0 is -0.1; per-request values are numbers >= 0"),
        ('{"completed": 1, "ttfts": ["x"]}', "$.ttfts: entry 0 is 'x'"),
        ('{"completed": 1, "ttfts": 0.1}', "'ttfts' must be a list (one entry per request), got float"),
        ('{"completed": 1, "ttfts": [0.1], "errors": [3]}', "$.errors[0]: expected the error text"),
    ],
)
def test_bad_per_request_arrays(xfid_cli, tmp_path, snapshot, fixtures, content, message):
    assert xfid_cli("ingest", fixtures / ER0080).exit_code == 0
    f = tmp_path / "bad.json"
    f.write_text(content)
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "vllm", "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


# --- JSON nested deeper than the guard (every JSON adapter, sniffing included) ---------------
@pytest.mark.parametrize("adapter", [None, "vllm", "sglang", "genai-perf", "xfid-records"])
@pytest.mark.parametrize("depth", [65, 100_000])
def test_deep_json_is_a_clear_error(xfid_cli, tmp_path, snapshot, fixtures, adapter, depth):
    assert xfid_cli("ingest", fixtures / ER0080).exit_code == 0
    f = tmp_path / "deep.json"
    f.write_text('{"request_throughput": 1, "completed": 1, "mean_ttft_ms": 1, "x": ' + "[" * depth + "]" * depth + "}")
    before = snapshot(xfid_cli.store)
    args = ["--adapter", adapter] if adapter else []
    r = xfid_cli("ingest", f, *args, "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and "Traceback" not in r.output, r.output
    assert "nested deeper than 64 levels" in r.output or "no adapter recognises" in r.output, r.output
    assert snapshot(xfid_cli.store) == before


def test_nesting_depth_ignores_brackets_in_strings():
    from xfid.adapters.jsonutil import nesting_depth

    assert nesting_depth('{"a": "[[[[{{", "b": [1, [2]], "c": "\\"[["}') == 3
    assert nesting_depth("[" * 1000 + "]" * 1000) > 64
    assert nesting_depth("") == 0


def test_v06_layout_arrays_before_the_stat_keys(xfid_cli, tmp_path):
    """vLLM 0.6.x wrote the per-request arrays before the stat keys (past the sniffed head) and
    spelled goodput `request_goodput:`; such a file is still recognised, the typo key listed."""
    n = 2000
    obj = {"date": "20241015-101010", "backend": "vllm", "model_id": "m", "tokenizer_id": "m", "best_of": 1,
           "num_prompts": n, "request_rate": "inf", "duration": 10.0, "completed": n, "total_input_tokens": 4 * n,
           "total_output_tokens": 2 * n, "request_throughput": n / 10.0, "request_goodput:": None,
           "output_throughput": 2 * n / 10.0, "total_token_throughput": 6 * n / 10.0,
           "input_lens": [4] * n, "output_lens": [2] * n, "ttfts": [0.05] * n, "itls": [[0.01]] * n,
           "generated_texts": ["ab"] * n, "errors": [""] * n,
           "mean_ttft_ms": 50.0, "median_ttft_ms": 50.0, "std_ttft_ms": 0.0, "p99_ttft_ms": 50.0}
    f = tmp_path / "vllm-infqps-m-20241015-101010.json"
    f.write_text(json.dumps(obj))
    assert f.read_text().index('"median_ttft_ms"') > 8192 and detect(f) is VllmAdapter
    recs, out = xfid_cli.ingest_export(f, "--target", "h100-sxm", "--workload", "w")
    assert "$.request_goodput:" in out and "summary key says" not in out
    assert pick(recs, "ttft", "p99")["value"] == pytest.approx(0.05) and pick(recs, "ttft", "p99")["n_samples"] == n
    assert pick(recs, "itl", "mean")["value"] == pytest.approx(0.01) and pick(recs, "itl", "mean")["n_samples"] == n


INFX = "measured/vllm/inferencex_gpt-oss-120b_pd-8p8g_c16.json"


def test_real_benchmark_serving_fork_with_typo_key(xfid_cli, fixtures):
    """InferenceX's copy of vLLM's benchmark_serving.py: p90/p99.9 stats and `request_goodput:`."""
    recs, out = xfid_cli.ingest_export(fixtures / INFX)
    assert "keys not read (skipped): $.request_goodput:" in out
    assert not [r for r in recs if r["metric"] == "goodput_requests"]
    assert {r["run"] for r in recs} == {"openai-20260428-110159"}
    assert pick(recs, "ttft", "p99.9")["value"] == pytest.approx(0.6982081180762034, rel=1e-15)
    assert pick(recs, "ttft", "p90")["n_samples"] == 160
    assert pick(recs, "e2e_latency", "p90")["value"] == pytest.approx(9.920965689211152, rel=1e-15)
    assert pick(recs, "itl", "p99.9")["value"] == pytest.approx(0.0115778636110482, rel=1e-15)
    assert pick(recs, "throughput_tokens", "mean")["value"] == 1725.5812148243967
    assert pick(recs, "output_tokens")["value"] == 163840
    assert {r["flags"] for r in recs} == {"missing_counts"}  # no `failed` key, no per-request errors
    assert json.loads(pick(recs, "duration")["config"])["burstiness"] == 1.0
