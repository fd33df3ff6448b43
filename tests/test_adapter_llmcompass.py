"""llmcompass-hw adapter: the real LLMCompass A100/MI210 GEMM sweeps, sniffing, bad rows."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, store_snapshot
from xfid.adapters import sniff_all

DIR = FIXTURES / "measured" / "llmcompass"


def _records(xfid_cli, *paths, args=()):
    r = xfid_cli("ingest", *args, *paths)
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in xfid_cli("export").output.splitlines()]


def test_sniff_only_llmcompass(tmp_path):
    assert sniff_all(DIR / "matmul_A100.csv") == ["llmcompass-hw"]
    plain = tmp_path / "plain.csv"
    plain.write_text("64, 12288, 12288, 0.19, 101.7\n")
    assert "llmcompass-hw" not in sniff_all(plain)


def test_real_sweeps_with_sidecar(xfid_cli):
    recs = _records(xfid_cli, DIR)
    lat = {(r["target"], r["op"]): r["value"] for r in recs if r["metric"] == "latency"}
    assert len([k for k in lat if k[0] == "a100-sxm"]) == 20 and len([k for k in lat if k[0] == "mi210"]) == 22
    assert lat[("a100-sxm", "gemm[m=64,n=12288,k=12288]")] == pytest.approx(0.1900e-3)
    assert lat[("a100-sxm", "gemm[m=8192,n=32768,k=32768]")] == pytest.approx(61.1346e-3)
    assert lat[("mi210", "gemm[m=8192,n=32,k=32]")] == pytest.approx(0.0333e-3)  # last line, no newline
    assert lat[("mi210", "gemm[m=8192,n=32768,k=32768]")] == pytest.approx(146.2553e-3)
    rate = next(r for r in recs if r["metric"] == "flop_rate" and r["op"] == "gemm[m=64,n=12288,k=12288]"
                and r["target"] == "a100-sxm")
    assert rate["value"] == pytest.approx(101.7124e12) and rate["unit"] == "FLOP/s"
    r = recs[0]
    assert r["fidelity"] == "measured" and r["workload"] == "gemm-sweep" and r["stat"] == "value"
    assert json.loads(r["config"])["precision"] == "fp16"
    assert {x["source_loc"].split(",")[1].strip() for x in recs} == {"field 4", "field 5"}


def test_target_required(xfid_cli, tmp_path):
    f = tmp_path / "sweep.csv"
    f.write_bytes((DIR / "matmul_A100.csv").read_bytes())
    r = xfid_cli("ingest", f)
    assert r.exit_code == 2 and "no target" in r.output and "--target" in r.output
    recs = _records(xfid_cli, f, args=("--target", "a100-sxm", "--workload", "sweep-2"))
    assert {x["workload"] for x in recs} == {"sweep-2"}


def test_bad_row(xfid_cli, tmp_path):
    f = tmp_path / "sweep.csv"
    f.write_text("64, 12288, 12288, 0.1900ms, 101.7124Tflops\n128, 12288, 12288, fast, 193.0114Tflops\n")
    _records(xfid_cli, DIR)
    snap = store_snapshot(xfid_cli.store)
    r = xfid_cli("ingest", "--adapter", "llmcompass-hw", "--target", "a100-sxm", f)
    assert r.exit_code == 2
    assert r.output.startswith(f"Error: {f}, line 2: expected `M, N, K, <time>ms, <throughput>Tflops`")
    assert store_snapshot(xfid_cli.store) == snap
