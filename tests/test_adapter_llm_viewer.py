"""llm-viewer adapter: save_csv sections, K/M/G/T + B + ms/us/ns/s suffixes, appended runs, bad rows."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, store_snapshot
from xfid.adapters import sniff_all
from xfid.adapters.llm_viewer import HEADER, decode

DIR = FIXTURES / "models" / "llm-viewer"
DECODE = DIR / "Meta-Llama-3-8B_decode.csv"
REAL_DECODE = DIR / "Llama-2-7b-hf_decode.csv"  # real: akuhlken/llm-roofline @2bbf918 (README)
REAL_PREFILL = DIR / "Llama-2-7b-hf_prefill.csv"
REAL_RUN = "llm-viewer-akuhlken-2024-07-26"


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
    pre = {r["op"]: r["value"] for r in recs if r["metric"] == "latency" and r["workload"].startswith("llama3-8b/pre")}
    assert len(pre) == 14 and pre["qk_matmul"] == pytest.approx(108e-6)
    assert {r["run"] for r in recs if r["target"] == "h100-sxm"} == {"llm-viewer-example"}
    # the folder: 2 examples x 14 rows x 9 metrics + 2 real files x 5 sections x 16 rows x 9 metrics
    assert len(recs) == 2 * 14 * 9 + 2 * 5 * 16 * 9
    assert {r["run"] for r in recs if r["target"] == "a6000"} == {f"{REAL_RUN}#{k}" for k in range(1, 6)}


def _by(recs, workload_prefix, run, op):
    return {r["metric"]: r for r in recs if r["workload"].startswith(workload_prefix) and r["run"] == run
            and r["op"] == op}


def test_real_decode(xfid_cli):
    """Values read by hand from Llama-2-7b-hf_decode.csv (LLM-Viewer on nvidia_A6000, bs 1, seqlen 2048)."""
    assert sniff_all(REAL_DECODE) == ["llm-viewer"]
    recs = _records(xfid_cli, REAL_DECODE)
    assert len(recs) == 5 * 16 * 9 and {r["target"] for r in recs} == {"a6000"}
    assert {r["workload"] for r in recs} == {"llama2-7b/decode/bs1/ctx2048/fp16"}
    assert {r["software"] for r in recs} == {"LLM-Viewer"} and {r["fidelity"] for r in recs} == {"archmodel"}
    # line 5: q_proj,33.6M,33.6MB,1.00,768G,memory,33.6MB,8.2KB,8.2KB,0.00B,0.00B,43.7us
    q = _by(recs, "llama2-7b/decode", f"{REAL_RUN}#1", "q_proj")
    assert q["flops"]["value"] == 33.6e6 and q["flops"]["unit"] == "FLOP"
    assert q["bytes"]["value"] == 33.6e6 and q["bytes"]["unit"] == "B"
    assert q["flop_rate"]["value"] == 768e9 and q["flop_rate"]["unit"] == "FLOP/s"
    assert q["latency"]["value"] == float("43.7e-6") and q["latency"]["unit"] == "s"
    assert q["llmviewer:load_weight"]["value"] == 33.6e6 and q["llmviewer:load_act"]["value"] == 8200.0
    assert q["llmviewer:store_act"]["value"] == 8200.0 and q["llmviewer:load_kv_cache"]["value"] == 0.0
    assert q["latency"]["source_loc"] == "line 5, column 'inference_time'"
    cfg = json.loads(q["latency"]["config"])
    assert cfg == {"model_id": "meta-llama/Llama-2-7b-hf", "hardware": "nvidia_A6000", "w_bit": "16", "a_bit": "16",
                   "kv_bit": "16", "batchsize": "1", "seqlen": "2048", "bound": "memory",
                   "arithmetic_intensity": 1.0}
    # line 14: softmax,328K,262KB,1.2,960G,memory,0.00B,131KB,131KB,0.00B,0.00B,341.3ns
    sm = _by(recs, "llama2-7b/decode", f"{REAL_RUN}#1", "softmax")
    assert sm["flops"]["value"] == 328e3 and sm["bytes"]["value"] == 262e3 and sm["flop_rate"]["value"] == 960e9
    assert sm["latency"]["value"] == float("341.3e-9") and sm["llmviewer:load_act"]["value"] == 131e3
    # line 12: qk_matmul,16.8M,16.9MB,0.99,762G,memory,0.00B,8.2KB,131KB,16.8MB,0.00B,22.0us
    qk = _by(recs, "llama2-7b/decode", f"{REAL_RUN}#1", "qk_matmul")
    assert qk["llmviewer:load_kv_cache"]["value"] == 16.8e6 and qk["bytes"]["value"] == 16.9e6
    assert qk["latency"]["value"] == float("22.0e-6")
    assert json.loads(qk["latency"]["config"])["arithmetic_intensity"] == 0.99
    # the fifth appended section (lines 83-100) repeats the first: lm_head on line 100
    # lm_head,131M,262MB,0.50,384G,memory,262MB,8.2KB,64.0KB,0.00B,0.00B,341.4us
    lm = _by(recs, "llama2-7b/decode", f"{REAL_RUN}#5", "lm_head")
    assert lm["flops"]["value"] == 131e6 and lm["bytes"]["value"] == 262e6 and lm["flop_rate"]["value"] == 384e9
    assert lm["llmviewer:load_weight"]["value"] == 262e6 and lm["llmviewer:store_act"]["value"] == 64e3
    assert lm["latency"]["value"] == float("341.4e-6")
    assert lm["latency"]["source_loc"] == "line 100, column 'inference_time'"
    lat3 = [r for r in recs if r["run"] == f"{REAL_RUN}#3" and r["metric"] == "latency"]
    ops = [r["op"] for r in sorted(lat3, key=lambda r: int(r["source_loc"].split(",")[0].removeprefix("line ")))]
    assert ops == ["q_proj", "k_proj", "v_proj", "out_proj", "gate_proj", "up_proj", "down_proj", "qk_matmul",
                   "sv_matmul", "softmax", "attn_norm", "mlp_norm", "attn_add", "mlp_add", "mlp_act", "lm_head"]


def test_real_prefill(xfid_cli):
    """Values read by hand from Llama-2-7b-hf_prefill.csv (same run, prefill stage)."""
    recs = _records(xfid_cli, REAL_PREFILL)
    assert len(recs) == 5 * 16 * 9 and {r["workload"] for r in recs} == {"llama2-7b/prefill/bs1/ctx2048/fp16"}
    # line 5: q_proj,68.7G,67.1MB,1.0K,155T,compute,33.6MB,16.8MB,16.8MB,0.00B,0.00B,443.8us
    q = _by(recs, "llama2-7b/prefill", f"{REAL_RUN}#1", "q_proj")
    assert q["flops"]["value"] == 68.7e9 and q["bytes"]["value"] == 67.1e6 and q["flop_rate"]["value"] == 155e12
    assert q["latency"]["value"] == float("443.8e-6") and q["llmviewer:load_act"]["value"] == 16.8e6
    cfg = json.loads(q["latency"]["config"])
    assert cfg["bound"] == "compute" and cfg["arithmetic_intensity"] == 1000.0 and cfg["seqlen"] == "2048"
    # line 29 (the second section): gate_proj,185G,152MB,1.2K,155T,compute,90.2MB,16.8MB,45.1MB,0.00B,0.00B,1.2ms
    g = _by(recs, "llama2-7b/prefill", f"{REAL_RUN}#2", "gate_proj")
    assert g["flops"]["value"] == 185e9 and g["bytes"]["value"] == 152e6 and g["latency"]["value"] == float("1.2e-3")
    assert g["llmviewer:store_act"]["value"] == 45.1e6
    assert json.loads(g["latency"]["config"])["arithmetic_intensity"] == 1200.0
    assert g["latency"]["source_loc"] == "line 29, column 'inference_time'"
    # line 12: qk_matmul,34.4G,302MB,113.8,87.4T,memory,0.00B,16.8MB,268MB,16.8MB,0.00B,393.2us
    qk = _by(recs, "llama2-7b/prefill", f"{REAL_RUN}#1", "qk_matmul")
    assert qk["flops"]["value"] == 34.4e9 and qk["bytes"]["value"] == 302e6 and qk["flop_rate"]["value"] == 87.4e12
    assert qk["latency"]["value"] == float("393.2e-6") and qk["llmviewer:store_act"]["value"] == 268e6
    assert json.loads(qk["latency"]["config"])["bound"] == "memory"
    # line 14: softmax,671M,537MB,1.2,960G,memory,0.00B,268MB,268MB,0.00B,0.00B,699.1us
    sm = _by(recs, "llama2-7b/prefill", f"{REAL_RUN}#1", "softmax")
    assert sm["flops"]["value"] == 671e6 and sm["bytes"]["value"] == 537e6
    assert sm["latency"]["value"] == float("699.1e-6")


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
