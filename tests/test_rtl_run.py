"""Simulator tests: run the T100 blocks under cocotb + Verilator; cycles >= the agreed bounds.

Builds are cached under build/rtl-tests in the repo (ignored by git), keyed by sources,
parameters and simulator, so a second run only simulates (about 1-2 s per block).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from math import ceil
from pathlib import Path

import pytest

from rtl_hooks.runner import find_simulator, run_block
from xfid.errors import RTLError

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("XFID_TEST_BUILD_DIR", ROOT / "build" / "rtl-tests"))


def _have_sim() -> str | None:
    try:
        return find_simulator().name
    except RTLError as e:
        return str(e)


_SIM = _have_sim()
needs_sim = pytest.mark.skipif(_SIM not in ("verilator", "icarus"), reason=f"no HDL simulator: {_SIM}")
pytestmark = [pytest.mark.simulator, needs_sim]


def bound(block: str, p: dict[str, int], rec: dict) -> int:
    """The lower bounds agreed with the roofline's block mode (same formulas)."""
    x = rec["extra"]
    if block == "gemm_tile":
        return ceil(x["m"] / p["ROWS"]) * ceil(x["n"] / p["COLS"]) * x["k"]
    if block == "dma":
        b = rec["counters"]["bytes"]
        bursts = ceil(b / (p["BYTES_PER_CYCLE"] * p["BURST_LEN"]))
        return max(p["LATENCY"] + ceil(b / p["BYTES_PER_CYCLE"]), ceil(bursts / p["MAX_OUTSTANDING"]) * p["LATENCY"])
    return (p["ROWS"] * p["PROGRAM_CYCLES_PER_ROW"] + p["DAC_CYCLES"] + p["ADC_CYCLES"]
            + x["vectors"] * p["VECTOR_II"])


def shape_of(block: str, rec: dict) -> tuple[int, ...]:
    x = rec["extra"]
    if block == "gemm_tile":
        return (x["m"], x["n"], x["k"])
    return (rec["counters"]["bytes"],) if block == "dma" else (x["vectors"],)


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("block,params,cycles", [
    ("gemm_tile", {}, [15, 76, 56, 432, 92]),
    ("gemm_tile", {"ROWS": "2", "COLS": "8"}, [30, 76, 42, 432, 92]),
    ("dma", {}, [22, 25, 34, 112, 412]),
    ("dma", {"MAX_OUTSTANDING": "1", "LATENCY": "8"}, [10, 13, 49, 208, 832]),  # 13 = 8 + 1 + 4 per burst
    ("omvm", {}, [38, 41, 53, 69]),
])
def test_block_cycles_pinned_and_bounded(block, params, cycles, tmp_path):
    res = run_block(block, params, out=tmp_path / "p.jsonl", build_root=BUILD, seed=7)
    assert (res.tests, res.failed) == (1, 0), res.build_dir / "sim.log"
    recs = records(res.out)
    assert all(r["passed"] for r in recs)
    assert [r["cycles"] for r in recs] == cycles
    try:
        from xfid.models.blocks import BLOCKS  # the roofline's block mode: same bounds, its code
    except ImportError:
        BLOCKS = None
    for r in recs:
        assert r["cycles"] >= bound(block, res.params, r), r["op"]
        if BLOCKS is not None:
            shape = shape_of(block, r)
            assert BLOCKS[block].cycles(res.params, shape) == bound(block, res.params, r), r["op"]
            assert BLOCKS[block].op(shape) == r["op"]
        assert r["params"] == res.params and r["params_from"] == "dut"
        assert r["workload"] == f"block/{block}" and r["seed"] == 7 and r["test"].startswith("test_")
        assert r["sources"] == res.sources and r["simulator"].lower().startswith(res.simulator[:4])
    if block == "gemm_tile":  # the design's exact count: per tile 1 clear + K+R+C-2 feed + R drain cycles
        p, x = res.params, [r["extra"] for r in recs]
        assert cycles == [ceil(e["m"] / p["ROWS"]) * ceil(e["n"] / p["COLS"]) * (e["k"] + 2 * p["ROWS"] + p["COLS"] - 1)
                          for e in x]
    if block == "dma":
        assert [r["counters"]["bytes"] for r in recs] == [5, 64, 200, 1024, 4096]
    for k, v in params.items():
        assert res.params[k] == int(v)


def test_cli_run_ingest_and_cache(xfid_cli, tmp_path):
    args = ("rtl", "run", "omvm", "--build-dir", str(BUILD), "--seed", "3", "--out", str(tmp_path / "o.jsonl"))
    r = xfid_cli(*args, "--ingest", "--run", "ci-1")
    assert r.exit_code == 0, r.output
    assert "omvm[vectors=32]        69" in r.output and "1/1 cocotb tests passed" in r.output
    # 4 ops x (cycles, sim_time, energy from the bundled t100-a0 omvm energy table) + the test's sim_time
    assert "ingested 13 new rows" in r.output
    r2 = xfid_cli(*args, "--format", "json")
    d = json.loads(r2.output)
    assert d["rebuilt"] is False and [x["cycles"] for x in d["records"]] == [38, 41, 53, 69]
    from xfid.store import Store

    t = Store(xfid_cli.store, create=False).read().to_pylist()
    assert sorted({(x["metric"], x["op"]) for x in t})[:2] == [("cycles", "omvm[vectors=16]"), ("cycles", "omvm[vectors=1]")]
    assert {x["run"] for x in t} == {"ci-1"} and {x["target"] for x in t} == {"t100-a0"}
    assert Counter(x["metric"] for x in t) == {"cycles": 4, "sim_time": 5, "energy": 4}


def test_failed_test_exits_1_and_is_flagged(xfid_cli, tmp_path):
    block = tmp_path / "dma"
    shutil.copytree(ROOT / "fixtures" / "rtl" / "dma" / "hdl", block / "hdl")  # same sources: cached build
    (block / "tests").mkdir()
    src = (ROOT / "fixtures" / "rtl" / "dma" / "tests" / "test_dma.py").read_text()
    src = src.replace("err_msg=f\"SRAM mismatch, {nbytes} B\")", "err_msg=\"wrong on purpose\")\n        assert nbytes < 100")
    (block / "tests" / "test_dma.py").write_text(src)
    r = xfid_cli("rtl", "run", str(block), "--build-dir", str(BUILD), "--ingest", "--out", str(tmp_path / "f.jsonl"))
    assert r.exit_code == 1, r.output
    assert "FAIL (test test_dma_transfers failed)" in r.output and "0/1 cocotb tests passed" in r.output
    from xfid.store import Store

    t = Store(xfid_cli.store, create=False).read().to_pylist()
    cyc = [x for x in t if x["metric"] == "cycles"]
    assert len(cyc) == 3 and all(x["flags"] == "failed_test" for x in cyc)  # kept, flagged


def test_bad_param_and_block(xfid_cli):
    r = xfid_cli("rtl", "run", "dma", "--param", "LATENCYY=3", "--build-dir", str(BUILD))
    assert r.exit_code == 2
    assert "Error: module dma has no parameter 'LATENCYY'; its parameters are BYTES_PER_CYCLE" in r.output
    r = xfid_cli("rtl", "run", "nope")
    assert r.exit_code == 2 and "Error: unknown RTL block 'nope'; bundled blocks: dma, gemm_tile, omvm" in r.output
    r = xfid_cli("rtl", "run", "dma", "--param", "LATENCY")
    assert r.exit_code == 2 and "--param expects NAME=VALUE" in r.output


def test_python_m_rtl_hooks(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PATH"] = "/usr/bin:/bin"  # no activated venv: the runner must find verilator and python itself
    p = subprocess.run([sys.executable, "-m", "rtl_hooks", "run", "gemm_tile", "--build-dir", str(BUILD),
                        "--out", str(tmp_path / "g.jsonl"), "--format", "json"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert [r["cycles"] for r in json.loads(p.stdout)["records"]][:2] == [15, 76]
    assert not (tmp_path / "parser.out").exists()


def test_runs_of_one_build_at_once_keep_their_own_files(tmp_path):
    """Two runs of the same build at the same time (two users, two test workers): each reads its
    own results.xml and sim.log (a shared results.xml was deleted under the other run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    procs = [subprocess.Popen([sys.executable, "-m", "rtl_hooks", "run", "dma", "--build-dir", str(BUILD),
                               "--seed", str(seed), "--format", "json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
             for seed in (11, 12, 13)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e[-2000:] for _, e in outs]
    runs = [json.loads(o) for o, _ in outs]
    dirs = {Path(r["results_xml"]).parent for r in runs}
    assert len(dirs) == 3 and {d.parent.name for d in dirs} == {"runs"}
    assert {Path(r["out"]).parent for r in runs} == dirs  # the default probe file beside its results.xml
    for r in runs:
        xml = Path(r["results_xml"]).read_text()
        assert r["tests"] == 1 and r["failed"] == 0 and "test_dma_transfers" in xml
        assert (Path(r["results_xml"]).parent / "sim.log").is_file()
        assert len(Path(r["out"]).read_text().splitlines()) == len(r["records"]) == 5
    assert sorted({x["seed"] for r in runs for x in r["records"]}) == [11, 12, 13]


def test_old_run_folders_are_pruned(tmp_path):
    from rtl_hooks import runner

    build = tmp_path / "b"
    keep = runner._new_run_dir(build)
    old, fresh = runner._new_run_dir(build), runner._new_run_dir(build)
    (old / "results.xml").write_text("<x/>")
    stale = old.stat().st_mtime - runner.RUN_KEEP_S - 60
    os.utime(old, (stale, stale))
    os.utime(keep, (stale, stale))
    runner._prune_runs(build, keep=keep)
    assert sorted(p.name for p in (build / "runs").iterdir()) == sorted([keep.name, fresh.name])


def test_broken_testbench_is_an_error_not_a_traceback(xfid_cli, tmp_path):
    block = tmp_path / "dma"
    shutil.copytree(ROOT / "fixtures" / "rtl" / "dma" / "hdl", block / "hdl")  # same sources: cached build
    (block / "tests").mkdir()
    (block / "tests" / "test_dma.py").write_text("import cocotb\n\nthis is not python\n")
    r = xfid_cli("rtl", "run", str(block), "--build-dir", str(BUILD))
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Error: simulation of dma left no results.xml; see ")
    assert "NameError: name 'this' is not defined" in r.output
