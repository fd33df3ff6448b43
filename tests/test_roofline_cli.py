"""`xfid roofline` through the CLI: output files, idempotent ingest, errors, the A100 sanity check."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import FIXTURES, store_snapshot

A100 = FIXTURES / "measured" / "llmcompass" / "matmul_A100.csv"
MI210 = FIXTURES / "measured" / "llmcompass" / "matmul_MI210.csv"


def test_table_output(xfid_cli):
    r = xfid_cli("roofline", "--target", "h100-sxm", "--workload", "llama3-8b/decode/bs8/ctx2048/bf16")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "target h100-sxm  workload llama3-8b/decode/bs8/ctx2048/bf16  fidelity roofline"
    assert lines[1].split() == ["op", "count", "flops", "bytes", "intensity", "time", "energy", "limiter"]
    assert lines[2].split()[:2] == ["attn.qkv_proj", "32"] and lines[2].endswith("memory")
    assert "tpot (bound):" in r.output and "throughput_tokens (bound):" in r.output
    for line in ("energy (bound):", "energy_per_token (bound):", "tokens_per_joule (bound):", "power (at the bound):"):
        assert line in r.output


def test_json_records(xfid_cli):
    r = xfid_cli("roofline", "--target", "h100-sxm", "--workload", "llama3-8b/prefill/bs1/ctx2048/bf16",
                 "--format", "json")
    recs = json.loads(r.output)
    ops = {x["op"] for x in recs}
    assert ops == {"attn.qkv_proj", "attn.sdpa", "attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj", "norm",
                   "lm_head", ""}
    assert {x["fidelity"] for x in recs} == {"roofline"} and {x["stat"] for x in recs} == {"value"}
    qkv = next(x for x in recs if x["op"] == "attn.qkv_proj" and x["metric"] == "latency")
    cfg = json.loads(qkv["config"])
    assert cfg["limiter"] == "compute" and cfg["count"] == 32 and cfg["peak_flops"] == 989e12
    assert cfg["precision"] == "bf16" and cfg["mem_bw"] == 3.35e12 and cfg["intensity"] > 900
    assert {x["metric"] for x in recs if x["op"] == ""} == {"ttft", "throughput_tokens", "energy", "energy_per_token",
                                                            "tokens_per_joule", "power"}


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_output_file_ingests_idempotently(xfid_cli, tmp_path, ext):
    out = tmp_path / f"bounds.{ext}"
    args = ("roofline", "--target", "a100-sxm", "--gemm", "1024,1024,1024", "--gemm", "8192,64,64", "-o", out)
    assert xfid_cli(*args).exit_code == 0
    if ext == "parquet":
        assert pq.read_table(out).num_rows == 8  # latency, flops, bytes, energy per shape
    r = xfid_cli("ingest", out)
    assert r.exit_code == 0, r.output
    assert "8 new rows" in r.output
    assert "already ingested" in xfid_cli("ingest", out).output


def test_ingest_flag_is_idempotent(xfid_cli):
    args = ("roofline", "--target", "t100-a0", "--block", "gemm_tile", "--shape", "8,8,16", "--ingest")
    r1 = xfid_cli(*args)
    assert r1.exit_code == 0, r1.output
    assert "ingested 2 records" in r1.output  # cycles and energy
    snap = store_snapshot(xfid_cli.store)
    r2 = xfid_cli(*args)
    assert "already ingested (same bounds)" in r2.output
    assert store_snapshot(xfid_cli.store).keys() == snap.keys()
    exp = xfid_cli("export", "--format", "jsonl")
    rec, energy = sorted((json.loads(line) for line in exp.output.splitlines()), key=lambda r: r["metric"])
    assert energy["metric"] == "energy" and energy["value"] == pytest.approx(64 * 8.0e-12)  # 64 cycles x 8 pJ
    assert rec["fidelity"] == "roofline" and rec["workload"] == "block/gemm_tile"
    assert rec["op"] == "gemm_tile[m=8,n=8,k=16]" and rec["metric"] == "cycles" and rec["value"] == 64
    assert json.loads(rec["config"])["params"] == {"ROWS": 4, "COLS": 4, "DATA_W": 8, "ACC_W": 32}
    assert rec["source"] == "xfid-records"


@pytest.mark.parametrize("args,message", [
    (("--workload", "llama3-8b/decode/bs8"), "expected MODEL/PHASE/bsB/ctxC/PRECISION[/tpN]"),
    (("--workload", "gpt5/decode/bs8/ctx2/bf16"), "unknown model 'gpt5'; built-in models: llama3-8b"),
    (("--workload", "llama3-8b/decode/bs8/ctx2/fp32"), "target 't100-a0' has no peak_flops for precision 'fp32'"),
    (("--workload", "llama3-8b/decode/bs8/ctx2/bf16/tp2", "--config", "NOLINK"), "has no 'interconnect_bw'"),
    (("--block", "sram", "--shape", "1"), "valid blocks: gemm_tile, dma, omvm"),
    (("--block", "omvm", "--shape", "4", "--param", "II=2"), "valid parameters: ROWS, COLS, DAC_CYCLES"),
    (("--gemm", "1,2"), "--gemm expects M,N,K"),
    (("--gemm-file", "BADCSV"), "line 2: expected M, N, K"),
])
def test_errors_exit_2_and_store_unchanged(xfid_cli, tmp_path, args, message):
    cfg = tmp_path / "nolink.toml"
    cfg.write_text('[targets.t100-a0]\nmem_bw = 1e12\npeak_flops = { bf16 = 1e12 }\n')
    bad = tmp_path / "bad.csv"
    bad.write_text("64, 64, 64\n64, x, 64\n")
    args = tuple(str(cfg) if a == "NOLINK" else str(bad) if a == "BADCSV" else a for a in args)
    pre = ()
    if "--config" in args:
        i = args.index("--config")
        pre, args = args[i:i + 2], args[:i] + args[i + 2:]
    xfid_cli("roofline", "--target", "t100-a0", "--block", "omvm", "--shape", "1", "--ingest")
    snap = store_snapshot(xfid_cli.store)
    r = xfid_cli(*pre, "roofline", "--target", "t100-a0", *args, "--ingest")
    assert r.exit_code == 2
    assert r.output.startswith("Error: ") and message in r.output, r.output
    assert "Traceback" not in r.output
    assert store_snapshot(xfid_cli.store) == snap


def _measured(path: Path) -> dict[str, float]:
    out = {}
    for row in csv.reader(path.read_text().splitlines()):
        m, n, k = (int(x) for x in row[:3])
        out[f"gemm[m={m},n={n},k={k}]"] = float(row[3].strip().removesuffix("ms")) * 1e-3
    return out


@pytest.mark.parametrize("path,target", [(A100, "a100-sxm"), (MI210, "mi210")])
def test_real_llmcompass_sweep_never_beats_roofline(xfid_cli, path, target):
    """Real LLMCompass fp16 GEMM timings vs. the bundled data-sheet peaks: all at or above the bound."""
    r = xfid_cli("roofline", "--target", target, "--gemm-file", path, "--format", "json")
    assert r.exit_code == 0, r.output
    bounds = {x["op"]: x["value"] for x in json.loads(r.output) if x["metric"] == "latency"}
    measured = _measured(path)
    assert set(bounds) == set(measured) and len(bounds) == (20 if target == "a100-sxm" else 22)
    ratios = {op: measured[op] / bounds[op] for op in bounds}
    assert min(ratios.values()) >= 1.0, {op: r for op, r in ratios.items() if r < 1}
    if target == "a100-sxm":
        # closest to the roof: the 8192x16384x16384 GEMM at 293 TFLOP/s of 312 (ratio 1.065)
        best = min(ratios, key=ratios.get)
        assert best == "gemm[m=8192,n=16384,k=16384]"
        assert ratios[best] == pytest.approx(1.0647, abs=1e-3)


def test_help_and_model_config(xfid_cli, tmp_path):
    assert "--gemm-file" in xfid_cli("roofline", "--help").output
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32,
                               "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256}))
    r = xfid_cli("roofline", "--target", "h100-sxm", "--workload", "llama3.2-1b/decode/bs1/ctx1024/bf16",
                 "--model-config", cfg, "--format", "json")
    assert r.exit_code == 0, r.output
    qkv = next(x for x in json.loads(r.output) if x["op"] == "attn.qkv_proj" and x["metric"] == "bytes")
    assert qkv["value"] == 2048 * (2048 + 2 * 512) * 2 + 2048 * 2 + 3072 * 2
    assert json.loads(qkv["config"])["count"] == 16
    cfg.write_text("{not json")
    r = xfid_cli("roofline", "--target", "h100-sxm", "--workload", "x/decode/bs1/ctx8/bf16", "--model-config", cfg)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {cfg}: not valid JSON")
