"""`xfid rtl inspect` and rtl_hooks.inspect: modules, parameters, ports, and clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rtl_hooks.inspect import get_module, parse_int, resolve_params
from xfid.errors import RTLError

RTL = Path(__file__).resolve().parent.parent / "fixtures" / "rtl"


def test_gemm_tile_params_and_ports():
    m = get_module(RTL / "gemm_tile" / "hdl" / "gemm_tile.v")
    assert m.name == "gemm_tile"
    assert m.defaults() == {"ROWS": 4, "COLS": 4, "DATA_W": 8, "ACC_W": 32, "MAX_DIM": 16}
    depth = next(p for p in m.params if p.name == "DEPTH")
    assert (depth.default, depth.value, depth.local) == ("MAX_DIM * MAX_DIM", 256, True)
    ports = {p.name: (p.direction, p.width) for p in m.ports}
    assert ports["rd_data"] == ("output", 32) and ports["wr_data"] == ("input", 8) and ports["clk"] == ("input", 1)
    pe = get_module(RTL / "gemm_tile" / "hdl" / "gemm_tile.v", "gemm_pe")
    assert {p.name: p.signed for p in pe.ports}["a_in"] is True


def test_dma_and_omvm_match_the_target_defaults():
    from xfid.config import load_config  # the bundled t100-a0 block parameters

    cfg = load_config(None)
    target = cfg.targets["t100-a0"] if hasattr(cfg, "targets") else None
    for block in ("gemm_tile", "dma", "omvm"):
        d = get_module(RTL / block / "hdl" / f"{block}.v").defaults()
        want = (target.extra.get("blocks", {}) if target is not None else {}).get(block)
        if want is None:
            pytest.skip("bundled config exposes no [targets.t100-a0.blocks] table through Target.extra")
        want = {k: v for k, v in want.items() if not isinstance(v, dict)}  # parameters; not [...energy]
        assert want and {k: d[k] for k in want} == want, block
    assert get_module(RTL / "dma" / "hdl" / "dma.v").ports[-1].name == "stall_cycles"


def test_resolve_params():
    m = get_module(RTL / "dma" / "hdl" / "dma.v")
    assert resolve_params(m, {"LATENCY": "8'd40"})["LATENCY"] == 40
    with pytest.raises(RTLError, match=r"module dma has no parameter 'LATENCYY'; its parameters are BYTES_PER_CYCLE"):
        resolve_params(m, {"LATENCYY": "3"})
    with pytest.raises(RTLError, match=r"'WORDS' \(a localparam"):
        resolve_params(m, {"WORDS": "3"})
    with pytest.raises(RTLError, match=r"LATENCY='fast' of dma is not an integer"):
        resolve_params(m, {"LATENCY": "fast"})


@pytest.mark.parametrize("text,value", [("8", 8), ("8'd4", 4), ("'h1F", 31), ("4'b1010", 10), ("-3", -3),
                                        ("1_000", 1000), ("8'bx", None), ("abc", None)])
def test_parse_int(text, value):
    assert parse_int(text) == value


def test_cli_table_and_json(xfid_cli):
    r = xfid_cli("rtl", "inspect", str(RTL / "omvm" / "hdl" / "omvm.v"))
    assert r.exit_code == 0, r.output
    assert "module omvm" in r.output and "PROGRAM_CYCLES_PER_ROW" in r.output
    assert "  output  cycle_count    32 bits  [31:0]" in r.output
    r = xfid_cli("rtl", "inspect", str(RTL / "omvm" / "hdl" / "omvm.v"), "--format", "json")
    d = json.loads(r.output)
    assert {p["name"]: p["value"] for p in d["params"] if not p["local"]} == {
        "ROWS": 8, "COLS": 8, "DAC_CYCLES": 2, "ADC_CYCLES": 3, "PROGRAM_CYCLES_PER_ROW": 4, "VECTOR_II": 1,
        "DATA_W": 8, "OUT_W": 32, "MAX_VECTORS": 32}
    assert {p["name"]: p["value"] for p in d["params"]}["LAT"] == 6


def test_cli_errors(xfid_cli, tmp_path):
    bad = tmp_path / "bad.v"
    bad.write_text("module bad (input wire a);\n  wire b\n  assign b = a;\nendmodule\n")
    r = xfid_cli("rtl", "inspect", str(bad))
    assert r.exit_code == 2
    assert f"Error: {bad}, line 3: Verilog syntax error" in r.output
    r = xfid_cli("rtl", "inspect", str(RTL / "dma" / "hdl" / "dma.v"), "--top", "nope")
    assert r.exit_code == 2 and "Error: " in r.output and "no module 'nope'; the file defines dma" in r.output
    r = xfid_cli("rtl", "inspect", str(tmp_path / "missing.v"))
    assert r.exit_code == 2 and "no such Verilog file" in r.output


def test_parser_writes_nothing_into_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    get_module(RTL / "dma" / "hdl" / "dma.v")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args", [("rtl", "--help"), ("rtl", "run", "--help"), ("rtl", "inspect", "--help")])
def test_rtl_commands_have_help(xfid_cli, args):
    r = xfid_cli(*args)
    assert r.exit_code == 0 and "Usage: " in r.output and len(r.output.splitlines()) > 3
