"""rtl_hooks.probe without a simulator: fake DUT handles and a fake sim clock."""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path

import pytest

import rtl_hooks


class Sig:
    """A stand-in for a cocotb signal handle: `.value` and a bit width."""

    def __init__(self, value: int, width: int = 32):
        self.value = value
        self.width = width

    def __len__(self) -> int:
        return self.width


class Dut:
    _name = "dma"

    def __init__(self):
        self.cycle_count = Sig(100)
        self.bytes_moved = Sig(0)
        self.LATENCY = Sig(20)


@pytest.fixture
def clock():
    t = {"ps": 0}
    rtl_hooks.reset(sim_ps=lambda: t["ps"])  # a new session with a fake sim clock
    yield t
    rtl_hooks.reset()


def lines(path):
    rtl_hooks.flush()  # records are buffered up to FLUSH_S (and flushed at exit)
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_counter_deltas_and_record(tmp_path, clock, monkeypatch):
    monkeypatch.setenv(rtl_hooks.ENV_PARAMS, json.dumps({"LATENCY": 99, "BURST_LEN": 4}))
    monkeypatch.setenv(rtl_hooks.ENV_SOURCES, json.dumps({"hdl/dma.v": "ab" * 32}))
    dut = Dut()
    out = tmp_path / "p.jsonl"
    with rtl_hooks.probe(dut, op="dma[bytes=64]", counters={"bytes": dut.bytes_moved}, out=out) as p:
        clock["ps"] += 250_000
        dut.cycle_count.value += 25
        dut.bytes_moved.value += 64
    (rec,) = lines(out)
    assert rec == p.record | {}  # what was written is what the probe holds
    assert (rec["cycles"], rec["counters"], rec["sim_time_ps"]) == (25, {"bytes": 64}, 250_000)
    assert rec["cycles_from"] == "rtl_counter:cycle_count"
    assert (rec["block"], rec["workload"], rec["op"], rec["passed"], rec["format"]) == (
        "dma", "block/dma", "dma[bytes=64]", True, "xfid-rtl/1")
    # LATENCY read back from the DUT wins over the runner's value; BURST_LEN is not exposed
    assert rec["params"] == {"LATENCY": 20, "BURST_LEN": 4} and rec["params_from"] == "dut+runner"
    assert rec["sources"] == {"hdl/dma.v": "ab" * 32}


def test_counter_wraps(tmp_path, clock):
    dut = Dut()
    dut.cycle_count = Sig(0xFFFF_FFF0)
    with rtl_hooks.probe(dut, op="x", out=tmp_path / "p.jsonl") as p:
        dut.cycle_count.value = 0x10
    assert p.record["cycles"] == 0x20


def test_sim_time_fallback_and_none(tmp_path, clock):
    class Bare:
        _name = "omvm"

    with rtl_hooks.probe(Bare(), op="omvm[vectors=4]", clock_period_ns=10, out=tmp_path / "p.jsonl") as p:
        clock["ps"] += 410_000
    assert (p.record["cycles"], p.record["cycles_from"]) == (41, "sim_time/10ns")
    with rtl_hooks.probe(Bare(), op="omvm[vectors=4]", out=tmp_path / "q.jsonl") as p:
        clock["ps"] += 10
    assert p.record["cycles"] is None and p.record["cycles_from"].startswith("none")


def test_exception_marks_failed_and_propagates(tmp_path, clock):
    out = tmp_path / "p.jsonl"
    with pytest.raises(AssertionError), rtl_hooks.probe(Dut(), op="dma[bytes=1]", out=out):
        raise AssertionError("boom")
    (rec,) = lines(out)
    assert rec["passed"] is False and rec["error"] == "AssertionError: boom"


def test_out_from_env_and_decorator(tmp_path, clock, monkeypatch):
    out = tmp_path / "sub" / "env.jsonl"
    monkeypatch.setenv(rtl_hooks.ENV_OUT, str(out))
    monkeypatch.setenv(rtl_hooks.ENV_BLOCK, "gemm_tile")

    @rtl_hooks.probed(op=lambda dut, m: f"gemm_tile[m={m},n={m},k={m}]")
    async def op(dut, m):
        dut.cycle_count.value += 3 * m
        return m

    dut = Dut()
    assert asyncio.run(op(dut, 4)) == 4
    (rec,) = lines(out)
    assert (rec["workload"], rec["op"], rec["cycles"]) == ("block/gemm_tile", "gemm_tile[m=4,n=4,k=4]", 12)


def test_adapter_reads_what_the_probe_writes(tmp_path, clock):
    from xfid.adapters.base import ReadContext
    from xfid.adapters.cocotb import CocotbAdapter

    out = tmp_path / "p.jsonl"
    dut = Dut()
    with rtl_hooks.probe(dut, op="dma[bytes=64]", counters={"bytes": dut.bytes_moved, "beats": dut.bytes_moved},
                         out=out):
        dut.cycle_count.value += 7
        dut.bytes_moved.value += 4
    rtl_hooks.flush()
    t = CocotbAdapter().read(ReadContext(path=out))
    got = dict(zip(t.column("metric").to_pylist(), t.column("value").to_pylist(), strict=True))
    assert got.pop("energy") > 0  # the adapter prices the counts by the bundled dma energy table
    assert got == {"cycles": 7.0, "sim_time": 0.0, "bytes": 4.0, "rtl:beats": 4.0}


def _reference_line(p) -> str:
    """The line as the probe wrote it before batching: json.dumps of the record's three parts."""
    rec = p.record
    static_keys = p._s.static_part().fields.keys()
    dynamic = {k: v for k, v in rec.items() if k not in static_keys and k not in ("test", "test_seed")}
    return (json.dumps(dynamic, default=str)[:-1] + ", " + json.dumps({"test": rec["test"], "test_seed": rec["test_seed"]})[1:-1]
            + ", " + json.dumps(p._s.static_part().fields, sort_keys=True, default=str)[1:])


@pytest.mark.parametrize("op,extra,exc", [
    ("dma[bytes=64]", {}, None),
    ("dma[bytes=64]", {"m": 4, "n": 8}, None),
    ("gemm 100% \u00b5\"q\"", {"shape": "4x4", "ok": True, "f": 0.5, "none": None}, None),
    ("x", {"lst": [1, 2], "path": Path("a/b")}, None),  # default=str, encoded at exit
    ("dma[bytes=1]", {"m": 1}, ValueError("bad % \"value\"")),
])
def test_batched_line_is_the_reference_json(tmp_path, clock, op, extra, exc):
    """The template/field-by-field encoders give byte for byte what json.dumps of the record gives."""
    records = importlib.import_module("rtl_hooks._records")
    dut = Dut()
    out = tmp_path / "p.jsonl"
    for _ in range(2):  # the second op fills the cached template
        try:
            with rtl_hooks.probe(dut, op=op, counters={"bytes": dut.bytes_moved, "b%s": dut.bytes_moved},
                                 extra=extra, out=out) as p:
                clock["ps"] += 1230
                dut.cycle_count.value += 9
                dut.bytes_moved.value += 3
                if exc is not None:
                    raise exc
        except ValueError:
            pass
        assert records.line(p) == records.line_general(p) == _reference_line(p)
    got = lines(out)
    assert got[-1] == json.loads(json.dumps(p.record, default=str)) and len(got) == 2


def test_extra_mutated_after_the_op_is_not_rewritten(tmp_path, clock):
    dut = Dut()
    out = tmp_path / "p.jsonl"
    extra = {"shape": [4, 4], "n": 1}
    with rtl_hooks.probe(dut, op="x", extra=extra, out=out):
        pass
    extra["shape"].append(99)
    extra["n"] = 2
    (rec,) = lines(out)
    assert rec["extra"] == {"shape": [4, 4], "n": 1}


def test_failed_op_is_on_disk_before_the_exception_propagates(tmp_path, clock):
    dut = Dut()
    out = tmp_path / "p.jsonl"
    for n in range(3):  # passed ops stay buffered (up to FLUSH_S)...
        with rtl_hooks.probe(dut, op=f"ok{n}", out=out):
            dut.cycle_count.value += 1
    with pytest.raises(RuntimeError), rtl_hooks.probe(dut, op="bad", out=out):
        raise RuntimeError("sim fell over")
    # ...until a failing op writes itself and everything before it: no flush() call here
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["op"] for r in recs] == ["ok0", "ok1", "ok2", "bad"]
    assert [r["passed"] for r in recs] == [True, True, True, False]


_CHILD = """
import sys, rtl_hooks
class Sig:
    def __init__(self, v): self.value = v
    def __len__(self): return 32
class Dut:
    _name = "dma"
    def __init__(self): self.cycle_count = Sig(0)
rtl_hooks.reset(sim_ps=lambda: 0, flush_s=3600.0)  # no time-based flush however slow this machine is
dut = Dut()
for n in range(5):
    with rtl_hooks.probe(dut, op=f"op{n}", out=sys.argv[1]):
        dut.cycle_count.value += n
if sys.argv[2] == "kill":
    import os
    os._exit(3)  # like SIGKILL: no atexit, no cocotb shutdown
raise SystemExit("testbench crashed after its ops")
"""


@pytest.mark.parametrize("how,kept", [("crash", 5), ("kill", 1)])
def test_buffered_records_at_exit_and_what_a_hard_kill_loses(tmp_path, how, kept):
    """An uncaught exception still writes every op (atexit); a hard kill loses the ops since the
    last flush (here all but the first, which flushes at once to set the shutdown hook)."""
    import os
    import subprocess
    import sys

    out = tmp_path / "p.jsonl"
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    p = subprocess.run([sys.executable, "-c", _CHILD, str(out), how], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["op"] for r in recs] == [f"op{n}" for n in range(kept)]
    assert [r["cycles"] for r in recs] == [n for n in range(kept)]


_READS_TB = '''
import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, Timer
import importlib

readers = importlib.import_module("rtl_hooks._cocotb")


@cocotb.test()
async def test_reads(dut):
    """The probe's fast readers give what int(handle.value) gives, for 1..128-bit signals."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst_n.value = 0
    dut.start.value = 0
    for length, salt, src in [(0xFFFFFFF0, 0xA5, 0xFFFF), (0x80000000, 0x80, 0x8000), (5, 1, 0)]:
        dut.length.value, dut.salt.value, dut.src_beat.value = length, salt, src
        await ClockCycles(dut.clk, 2)
        await Timer(3, unit="ns")
        for h in (dut.length, dut.salt, dut.src_beat, dut.rst_n, dut.rd_data, dut.cycle_count):
            assert readers.make_reader(h).read() == int(h.value), h._name
        assert readers.make_reader(dut.length).read() == length
        assert readers.make_sim_ps()() == round(get_sim_time("ps"))
'''


def test_fast_reads_match_cocotb_values_in_a_simulator(tmp_path):
    """Under a real simulator: masked 32-bit int reads (Verilator), binstr reads (wider), sim time."""
    import os
    from pathlib import Path

    from rtl_hooks.runner import find_simulator, run_block
    from xfid.errors import RTLError

    try:
        find_simulator()
    except RTLError as e:
        pytest.skip(f"no HDL simulator: {e}")
    root = Path(__file__).resolve().parent.parent
    build = Path(os.environ.get("XFID_TEST_BUILD_DIR", root / "build" / "rtl-tests"))
    (tmp_path / "tb_reads.py").write_text(_READS_TB)
    res = run_block("dma", {}, out=tmp_path / "p.jsonl", build_root=build, test_module="tb_reads",
                    tests_dir=tmp_path)
    assert (res.tests, res.failed) == (1, 0), (res.build_dir / "sim.log").read_text()[-3000:]
