"""rtl_hooks.probe without a simulator: fake DUT handles and a fake sim clock."""

from __future__ import annotations

import asyncio
import importlib
import json

import pytest

import rtl_hooks

probe_mod = importlib.import_module("rtl_hooks.probe")  # the module; rtl_hooks.probe is also the function


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
def clock(monkeypatch):
    t = {"ps": 0}
    monkeypatch.setattr(probe_mod, "_sim_ps", lambda: t["ps"])
    probe_mod.reset()
    yield t
    probe_mod.reset()


def lines(path):
    probe_mod._flush_all()  # records are buffered up to FLUSH_S (and flushed at exit)
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
    probe_mod._flush_all()
    t = CocotbAdapter().read(ReadContext(path=out))
    got = dict(zip(t.column("metric").to_pylist(), t.column("value").to_pylist(), strict=True))
    assert got == {"cycles": 7.0, "sim_time": 0.0, "bytes": 4.0, "rtl:beats": 4.0}
