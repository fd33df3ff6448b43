"""llm-viewer adapter: save_csv sections, K/M/G/T + B + ms/us/ns/s suffixes, appended runs, bad rows."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, store_snapshot
from xfid.adapters import sniff_all
from xfid.adapters.llm_viewer import HEADER, decode

DIR = FIXTURES / "models" / "llm-viewer"
DECODE = DIR / "Meta-Llama-3-8B_decode.csv"


def _records(xfid_cli, *paths, args=()):
    r = xfid_cli("ingest", *args, *paths)
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in xfid_cli("export").output.splitlines()]


@pytest.mark.parametrize("raw,kind,value", [
    ("4.2G", "number", 4.2e9), ("131K", "number", 131e3), ("0.00", "number", 0.0), ("2T", "number", 2e12),
    ("33.6MB", "bytes", 33.6e6), ("8.2KB", "bytes", 8200.0), ("0.00B", "bytes", 0.0),
    ("12.5us", "time", 12.5e-6), ("2.1ms", "time", 2.1e-3), ("6.1ns", "time", 6.1e-9), ("0s", "time", 0.0),
    ("1.0s", "time", 1.0), ("12.5u", "time", None), ("33.6M", "bytes", None),
    # str_number / str_number_time forms: exact, the correctly rounded double of the decimal
    ("10.9us", "time", float("10.9e-6")), ("990T", "number", 990e12), ("1.0K", "number", 1000.0),
    ("105G", "number", 105e9), ("0.29", "number", 0.29), ("123TB", "bytes", 123e12), ("1.2ns", "time", 1.2e-9),
])
def test_decode(raw, kind, value):
    assert decode(raw, kind) == value


def test_sniff():
    assert sniff_all(DECODE) == ["llm-viewer"]


def test_fixtures(xfid_cli):
    recs = _records(xfid_cli, DIR)
    q = {r["metric"]: r for r in recs if r["op"] == "q_proj" and r["workload"].startswith("llama3-8b/decode")}
    assert q["flops"]["value"] == 33.6e6 and q["bytes"]["value"] == 33.6e6
    assert q["latency"]["value"] == pytest.approx(12.5e-6) and q["latency"]["unit"] == "s"
    assert q["flop_rate"]["value"] == 2.7e12
    assert q["llmviewer:load_weight"]["value"] == 33.6e6 and q["llmviewer:load_weight"]["unit"] == "B"
    cfg = json.loads(q["latency"]["config"])
    assert cfg["bound"] == "memory" and cfg["batchsize"] == "1" and cfg["hardware"] == "nvidia_H100"
    assert cfg["model_id"] == "meta-llama/Meta-Llama-3-8B" and cfg["arithmetic_intensity"] == 1.0
    assert q["latency"]["source_loc"] == "line 5, column 'inference_time'"
    pre = {r["op"]: r["value"] for r in recs if r["metric"] == "latency" and "prefill" in r["workload"]}
    assert len(pre) == 14 and pre["qk_matmul"] == pytest.approx(108e-6)
    assert {r["run"] for r in recs} == {"llm-viewer-example"}


def test_appended_sections_get_their_own_runs(xfid_cli, tmp_path):
    row = "q_proj,33.6M,33.6MB,1.00,2.7T,memory,33.6MB,8.2KB,8.2KB,0.00B,0.00B,12.5us\n"
    f = tmp_path / "llama_decode.csv"
    f.write_text(f"\n\n=== [2026-11-30 10:00:00] m hw w_bit=16 batchsize=1 ===\n{HEADER}\n{row}"
                 f"\n\n=== [2026-11-30 11:00:00] m hw w_bit=16 batchsize=2 ===\n{HEADER}\n{row}")
    recs = _records(xfid_cli, f, args=("--target", "h100-sxm", "--workload", "w", "--run", "r"))
    lat = sorted((r["run"], r["timestamp"], json.loads(r["config"])["batchsize"]) for r in recs
                 if r["metric"] == "latency")
    assert lat == [("r#1", "2026-11-30T10:00:00Z", "1"), ("r#2", "2026-11-30T11:00:00Z", "2")]


def test_fork_legend_with_lowercase_ops(xfid_cli, tmp_path):
    row = "q_proj,990T,1.0KB,1.0K,10.9T,compute,1.0KB,0.00B,0.00B,0.00B,0.00B,10.9us\n"
    f = tmp_path / "m_decode.csv"
    f.write_text("\n\n=== m hw w_bit=16 a_bit=16 kv_bit=16 batch_size=8 seqlen=1024 tp_size=1 ===\n"
                 + HEADER.replace(",OPs,", ",ops,") + "\n" + row)
    assert sniff_all(f) == ["llm-viewer"]
    recs = _records(xfid_cli, f, args=("--target", "h100-sxm", "--workload", "w"))
    by = {r["metric"]: r for r in recs}
    assert by["flops"]["value"] == 990e12 and by["bytes"]["value"] == 1000.0
    assert by["latency"]["value"] == float("10.9e-6") and by["flop_rate"]["value"] == 10.9e12
    assert json.loads(by["latency"]["config"])["arithmetic_intensity"] == 1000.0
    assert json.loads(by["latency"]["config"])["batch_size"] == "8"


@pytest.mark.parametrize("row,message", [
    ("q_proj,33.6M,33.6MB,1.00,2.7T,memory,33.6MB,8.2KB,8.2KB,0.00B,0.00B,12.5\n",
     "line 3, column 'inference_time': cannot decode '12.5'"),
    ("q_proj,33.6M,33.6MB\n", "line 3: expected 12 fields, got 3"),
])
def test_malformed(xfid_cli, tmp_path, row, message):
    _records(xfid_cli, DECODE, args=("--target", "h100-sxm", "--workload", "w"))
    snap = store_snapshot(xfid_cli.store)
    f = tmp_path / "bad.csv"
    f.write_text(f"=== m hw ===\n{HEADER}\n{row}")
    r = xfid_cli("ingest", "--target", "h100-sxm", "--workload", "w", f)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert store_snapshot(xfid_cli.store) == snap
