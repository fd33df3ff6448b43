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
    assert r.exit_code == 2 and "missing 'target' (pass --target" in r.output


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
