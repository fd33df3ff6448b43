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
    assert len(recs) == 50
    a, b = pick(recs, "ttft", "mean", line=1), pick(recs, "ttft", "mean", line=2)
    assert a["value"] == pytest.approx(0.6117) and b["value"] == pytest.approx(1.4902)
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
        ('{"request_throughput": 1.0, "mean_ttft_ms": 1.0, "request_rate": "often"}', 'request_rate must be a number'),
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
