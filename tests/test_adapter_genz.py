"""genz adapter: GenZ per-op DataFrame CSV (index column, quoted Dimension lists, MB = 2**20)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.conftest import FIXTURES, store_snapshot
from xfid.adapters import sniff_all

DIR = FIXTURES / "models" / "genz"
CSV = DIR / "llama3-8b_decode_bs8.csv"
OLD = ("Op Type,Dimension,Bound,C/M ratio,Op Intensity,Latency (msec),Cycles,C Effcy,Num ops (MFLOP),"
       "Input_a (MB),Input_w (MB),Output (MB),Total Data (MB),Throughput (Tflops),Compute time (msec),"
       "Memory time (msec),Communication time (msec)\n")


def _records(xfid_cli, *paths, args=()):
    r = xfid_cli("ingest", *args, *paths)
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in xfid_cli("export").output.splitlines()]


def test_sniff():
    assert sniff_all(CSV) == ["genz"]


def test_fixture_values(xfid_cli):
    recs = _records(xfid_cli, CSV)
    qkv = {r["metric"]: r for r in recs if r["op"] == "QKV"}
    assert qkv["latency"]["value"] == pytest.approx(0.025247744e-3)
    assert qkv["cycles"]["value"] == pytest.approx(25247.744)
    assert qkv["flops"]["value"] == pytest.approx(402.653184e6)
    assert qkv["bytes"]["value"] == pytest.approx(48.15625 * 2**20)  # GenZ's MB is 2**20 bytes
    assert qkv["flop_rate"]["value"] == pytest.approx(15.948085658663206e12)
    assert qkv["genz:memory_time"]["value"] == pytest.approx(0.025247744e-3)
    cfg = json.loads(qkv["latency"]["config"])
    assert cfg["limiter"] == "memory" and cfg["Bound"] == "Memory" and cfg["Dimension"] == "[8, 6144, 4096]"
    assert cfg["Op Type"] == "FC" and cfg["mb_bytes"] == 2**20
    assert {r["op"] for r in recs} == {"QKV", "Logit", "Attend", "Out Proj", "up+gate", "down"}
    assert {r["workload"] for r in recs} == {"llama3-8b/decode/bs8/ctx2048/bf16"}


def test_real_golden_outputs(xfid_cli):
    # GenZ's tests/golden: no index column, no Layer Name (ops are `<row>:<Op Type>`), MB = 2**20
    recs = _records(xfid_cli, DIR / "mixtral_8x7b_decode_on_GH200.csv")
    assert len(recs) == 121 and {r["target"] for r in recs} == {"gh200"}  # 11 ops x 11 columns
    g = {r["metric"]: r for r in recs if r["op"] == "0:GEMM"}
    assert g["latency"]["value"] == float(Decimal("0.01195923271092698") / 1000)  # exact ms -> s
    assert g["latency"]["source_loc"] == "line 2, column 'Latency (msec)'"
    assert g["cycles"]["value"] == 11241.67874827136
    assert g["genz:compute_cycles"]["value"] == 29.569843199999998 and g["genz:memory_cycles"]["unit"] == "cycles"
    assert g["flops"]["value"] == 50331648  # 50.331648 MFLOP
    assert g["bytes"]["value"] == 48.01953125 * 2**20 and g["bytes"]["unit"] == "B"
    cfg = json.loads(g["latency"]["config"])
    assert cfg["Dimension"] == "[((1, 4096, 1), (6144, 4096), (1, 6144, 1))]" and cfg["limiter"] == "memory"
    zero = {r["metric"]: r["value"] for r in recs if r["op"] == "10:GEMM"}
    assert zero["latency"] == 0.0  # the last GEMM rows of the golden file are zero-cost
    assert {r["op"] for r in recs if r["metric"] == "latency"} >= {"1:Logit", "3:Attend", "9:GEMM"}
    old = _records(xfid_cli, DIR / "llama_7b_decode_on_TPU.csv")
    t = {r["metric"]: r for r in old if r["op"] == "0:GEMM" and r["target"] == "tpu"}
    assert t["flops"]["value"] == 100663296 and t["bytes"]["value"] == 96.03125 * 2**20
    assert t["latency"]["value"] == float(Decimal("0.09765836927625868") / 1000)


def test_older_layout_without_layer_name_and_decimal_mb(xfid_cli, tmp_path):
    f = tmp_path / "genz.csv"
    f.write_text(OLD + 'FC,"[1, 4096, 4096]",M,0.05,1.0,0.0168,16777.216,1.0,33.554432,0.008,33.55,0.008,'
                 "33.566,2.0,0.0008,0.0168,0.0\n")
    recs = _records(xfid_cli, f, args=("--target", "t100-a0", "--workload", "w", "--option", "mb_bytes=1000000"))
    by = {r["metric"]: r for r in recs}
    assert {r["op"] for r in recs} == {"0:FC"}
    assert by["bytes"]["value"] == pytest.approx(33.566e6)
    assert json.loads(by["latency"]["config"])["limiter"] == "memory"


@pytest.mark.parametrize("row,message", [
    ('FC,"[1, 4096, 4096]",M,0.05,1.0,slow,16777.216,1.0,33.5,0.008,33.55,0.008,33.566,2.0,0.0008,0.0168,0.0\n',
     "line 2, column 'Latency (msec)': not a number: 'slow'"),
    ('FC,"[1, 4096, 4096]",M,0.05\n', "line 2: expected 17 fields, got 4"),
])
def test_malformed(xfid_cli, tmp_path, row, message):
    _records(xfid_cli, DIR)
    snap = store_snapshot(xfid_cli.store)
    f = tmp_path / "genz.csv"
    f.write_text(OLD + row)
    r = xfid_cli("ingest", "--target", "t100-a0", "--workload", "w", f)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert store_snapshot(xfid_cli.store) == snap


def test_every_genz_column_is_read(xfid_cli):
    r = xfid_cli("ingest", CSV)
    assert r.exit_code == 0 and "keys not read" not in r.output, r.output
