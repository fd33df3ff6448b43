"""vllm-latency, vllm-throughput, reduced vllm serving results, serving-console and sglang-one-batch on real files."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES
from xfid.adapters import sniff_all

M = FIXTURES / "measured"


def _recs(xfid_cli, path):
    recs, out = xfid_cli.ingest_export(path)
    return recs, out


def _one(recs, **kw):
    hits = [r for r in recs if all(r[k] == v for k, v in kw.items())]
    assert len(hits) == 1, (kw, hits)
    return hits[0]


def test_sniff_each_real_file_once():
    for d, name in (("vllm-offline", None), ("serving-console", "serving-console"),
                    ("sglang-one-batch", "sglang-one-batch")):
        for f in sorted((M / d).iterdir()):
            if f.name in ("README.md", "xfid-source.toml"):
                continue
            want = name or ("vllm-latency" if "latency" in f.name else
                            "vllm-throughput" if "throughput" in f.name else "vllm")
            assert sniff_all(f) == [want], f


def test_vllm_latency_real(xfid_cli):
    recs, _ = _recs(xfid_cli, M / "vllm-offline" / "ascend_llama3-8b_tp1_latency_20250227.json")
    mean = _one(recs, metric="latency", stat="mean")
    assert mean["value"] == 7.419569773475329 and mean["unit"] == "s" and mean["n_samples"] == 15
    assert _one(recs, metric="latency", stat="p99")["value"] == 7.734547998122871
    assert _one(recs, metric="latency", stat="p10")["source_loc"] == "$.percentiles.10"
    assert _one(recs, metric="latency", stat="max")["value"] == 7.7653736267238855
    assert _one(recs, metric="latency", stat="min")["value"] == 7.140739871188998


def test_vllm_throughput_real_counts_prompt_and_output(xfid_cli):
    recs, _ = _recs(xfid_cli, M / "vllm-offline" / "ascend_llama3-8b_tp1_throughput_20250217.json")
    tps = _one(recs, metric="throughput_total_tokens")
    assert tps["value"] == 1198.996134490826 and tps["unit"] == "tokens/s"
    assert json.loads(tps["config"]) == {"tokens": "prompt + generated"}
    assert not [r for r in recs if r["metric"] == "throughput_tokens"]
    assert _one(recs, metric="throughput_requests")["value"] == 2.781764499305893
    assert _one(recs, metric="duration")["value"] == 71.89681227505207
    assert _one(recs, metric="requests_completed")["value"] == 200


def test_vllm_reduced_serving_result(xfid_cli):
    recs, out = _recs(xfid_cli, M / "vllm-offline" / "nvaction_ascend_llama3-8b_tp1_serving_qps_1_20250304.json")
    assert "a reduced serving result" in out
    ttft = _one(recs, metric="ttft", stat="p99")
    assert ttft["value"] == pytest.approx(0.16547399744391114) and ttft["unit"] == "s"
    assert _one(recs, metric="itl", stat="median")["value"] == pytest.approx(0.0384669154882431)
    assert {r["flags"] for r in recs} == {"missing_counts"}


def test_vllm_console_blocks(xfid_cli):
    recs, _ = _recs(xfid_cli, M / "serving-console" / "infbench_tpu-v4-8_llama3.1-8b_vllm-bench_README.md")
    b2 = [r for r in recs if r["run"].endswith("-block2")]
    assert _one(b2, metric="throughput_tokens", stat="max")["value"] == 309.0
    assert _one(b2, metric="concurrency", stat="max")["value"] == 1000.0
    p25 = _one(b2, metric="e2e_latency", stat="p25")
    assert p25["value"] == pytest.approx(152.70974) and p25["unit"] == "s"
    assert p25["source_loc"] == "line 109" and p25["software"] == "vllm bench serve (console)"


def test_commented_vllm_console_and_settings(xfid_cli):
    recs, _ = _recs(xfid_cli, M / "serving-console" / "yiliu30_vllm-fork_pp_local_test_res.sh")
    b1 = [r for r in recs if r["run"].endswith("-block1")]
    assert _one(b1, metric="ttft", stat="p99")["value"] == pytest.approx(10.99946)
    assert json.loads(b1[0]["config"]) == {"burstiness": 1.0, "max_concurrency": 32, "request_rate": "inf"}


def test_sglang_console_log_with_namespace(xfid_cli):
    recs, _out = _recs(xfid_cli, M / "serving-console" / "dlora_sglang_lora_bench_console.md")
    b1 = [r for r in recs if r["run"].endswith("-block1")]
    assert _one(b1, metric="duration")["value"] == 262.38
    assert _one(b1, metric="sglang:output_tokens_retokenized")["value"] == 100838
    assert _one(b1, metric="e2e_latency", stat="median")["value"] == pytest.approx(0.57603)
    itl = _one(b1, metric="itl", stat="mean")
    assert itl["value"] is None and "no token timing" in itl["null_reason"]
    cfg = json.loads(b1[0]["config"])
    assert cfg["num_prompts"] == 1000 and cfg["random_input_len"] == 1024 and cfg["request_rate"] == 2.0
    assert len({r["run"] for r in recs}) == 6


def test_sglang_one_batch_jsonl_and_server(xfid_cli):
    recs, _ = _recs(xfid_cli, M / "sglang-one-batch" / "deepseek-simulator_bench_one_batch_result.jsonl")
    l2 = [r for r in recs if r["run"].endswith("-line2")]
    assert _one(l2, metric="latency", op="decode", stat="median")["value"] == 0.023305416107177734
    assert _one(l2, metric="throughput_input_tokens", op="prefill")["value"] == 1328.3833473214145
    assert _one(l2, metric="latency", op="", stat="value")["value"] == 2.3827123641967773


def test_sglang_one_batch_server(xfid_cli):
    recs, _ = _recs(xfid_cli, M / "sglang-one-batch" / "sglang-reproduce_bench_one_batch_server_result.jsonl")
    l1 = [r for r in recs if r["run"].endswith("-line1")]
    assert _one(l1, metric="throughput_tokens")["value"] == 2103963.11
    assert _one(l1, metric="latency")["software"] == "sglang bench_one_batch_server"
    assert json.loads(l1[0]["config"]) == {"run_name": "default", "batch_size": 8192, "input_len": 32,
                                           "output_len": 100}


def test_sglang_one_batch_console_skips_warmup(xfid_cli):
    recs, out = _recs(xfid_cli, M / "sglang-one-batch" / "example_h100_llama3-8b_bench_one_batch_console.log")
    assert "warmup run" in out
    assert {r["run"].rsplit("-", 1)[1] for r in recs} == {"run1", "run2"}
    r2 = [r for r in recs if r["run"].endswith("-run2")]
    assert _one(r2, metric="throughput_tokens", op="decode")["value"] == 1006.29
    assert json.loads(r2[0]["config"]) == {"batch_size": 8}


@pytest.mark.parametrize(("name", "content", "message"), [
    ("l.json", '{"avg_latency": 1.0, "percentiles": {"50": 1.0}}', "no 'latencies' key"),
    ("c.log", "x Namespace(a=1)\n============ Serving Benchmark Result ============\nSuccessful requests: 3\n",
     "no closing ===== line"),
])
def test_bad_input_is_a_clear_error(xfid_cli, tmp_path, name, content, message):
    f = tmp_path / name
    f.write_text(content)
    r = xfid_cli("ingest", f, "--target", "t", "--workload", "w")
    assert r.exit_code == 2 and message in r.output, r.output
