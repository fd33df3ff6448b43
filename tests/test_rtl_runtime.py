"""The probe runtime apart from the tools: it imports no xfid; its state is one session per reset."""

from __future__ import annotations

import ast
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rtl_hooks
from rtl_hooks import _session

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {"runner", "simulators", "inspect", "__main__"}
"""The rtl_hooks modules that run and inspect blocks, outside the simulator: they may import xfid."""


def _imported(path: Path) -> set[str]:
    """Every module an rtl_hooks file imports, anywhere in it (lazy imports too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: inside rtl_hooks
                base = "rtl_hooks" + ("." + base if base else "")
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return out


def test_runtime_imports_neither_xfid_nor_the_tools():
    runtime = [p for p in sorted((ROOT / "rtl_hooks").glob("*.py")) if p.stem not in TOOLS]
    assert {p.stem for p in runtime} >= {"__init__", "probe", "_session", "_records", "_setup", "_env", "_cocotb"}
    for path in runtime:
        bad = {m for m in _imported(path)
               if m == "xfid" or m.startswith("xfid.") or (m.split(".")[-1] in TOOLS and m.startswith("rtl_hooks"))}
        assert not bad, f"{path.name} (runtime) imports {sorted(bad)}"
    assert any(m.startswith("xfid") for m in _imported(ROOT / "rtl_hooks" / "runner.py"))  # the tools may


_NO_XFID = """
import json, sys

class NoXfid:
    def find_spec(self, name, path=None, target=None):
        if name == "xfid" or name.startswith("xfid."):
            raise ImportError(f"the probe runtime imported {name}")
        return None

sys.meta_path.insert(0, NoXfid())
import rtl_hooks

class Sig:
    def __init__(self, v): self.value = v
    def __len__(self): return 32

class Dut:
    _name = "dma"
    def __init__(self): self.cycle_count, self.bytes_moved = Sig(10), Sig(0)

rtl_hooks.reset(sim_ps=lambda: 0)
dut = Dut()
with rtl_hooks.probe(dut, op="dma[bytes=4]", counters={"bytes": dut.bytes_moved}, out=sys.argv[1]):
    dut.cycle_count.value += 5
    dut.bytes_moved.value += 4
rtl_hooks.flush()
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("xfid", "rtl_hooks"))))
"""


def test_a_testbench_runs_the_probe_without_xfid(tmp_path):
    out = tmp_path / "p.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", _NO_XFID, str(out)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    loaded = json.loads(p.stdout)
    assert not [m for m in loaded if m.startswith("xfid")]
    assert not [m for m in loaded if m.split(".")[-1] in TOOLS]
    (rec,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert (rec["cycles"], rec["counters"], rec["passed"]) == (5, {"bytes": 4}, True)


class Sig:
    def __init__(self, value: int, width: int = 32):
        self.value = value
        self.width = width

    def __len__(self) -> int:
        return self.width


class Dut:
    _name = "dma"

    def __init__(self):
        self.cycle_count = Sig(0)


@pytest.fixture
def fresh():
    ses = rtl_hooks.reset(sim_ps=lambda: 0)
    yield ses
    rtl_hooks.reset()


def test_reset_is_a_new_session_that_reads_the_environment_again(tmp_path, fresh, monkeypatch):
    monkeypatch.setenv(rtl_hooks.ENV_OUT, str(tmp_path / "a.jsonl"))
    monkeypatch.setenv(rtl_hooks.ENV_TARGET, "t100-a0")
    dut = Dut()
    with rtl_hooks.probe(dut, op="one"):
        dut.cycle_count.value += 1
    assert fresh is _session.current and fresh.default_setups[dut].out == tmp_path / "a.jsonl"
    monkeypatch.setenv(rtl_hooks.ENV_OUT, str(tmp_path / "b.jsonl"))
    monkeypatch.setenv(rtl_hooks.ENV_TARGET, "t100-b0")
    with rtl_hooks.probe(dut, op="two"):  # same session: the environment was read at its first probe
        pass
    new = rtl_hooks.reset(sim_ps=lambda: 0)
    assert new is _session.current and new is not fresh
    assert not fresh.files and not fresh.pending  # the old session wrote its ops and closed its files
    with rtl_hooks.probe(dut, op="three"):
        pass
    rtl_hooks.flush()
    a = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert [(r["op"], r["target"]) for r in a] == [("one", "t100-a0"), ("two", "t100-a0")]
    assert [(r["op"], r["target"]) for r in b] == [("three", "t100-b0")]


def test_readers_belong_to_their_handle_even_when_ids_are_reused(tmp_path, fresh):
    """New handle objects each op, freed after it (ids get reused): each op wraps at its own width."""
    out = tmp_path / "p.jsonl"
    dut = Dut()
    expect = []
    for n in range(40):
        width = 8 if n % 2 else 16
        h = Sig((1 << width) - 2, width)  # 2 below the wrap: +5 gives 3 after wrapping
        with rtl_hooks.probe(dut, op=f"op{n}", counters={"c": h}, out=out):
            h.value = 3
        expect.append(5)
        del h
        gc.collect()
    rtl_hooks.flush()
    assert [json.loads(x)["counters"]["c"] for x in out.read_text().splitlines()] == expect


def test_caches_are_bounded(tmp_path, fresh, monkeypatch):
    monkeypatch.setattr(_session, "MAX_CACHED", 8)
    out = tmp_path / "p.jsonl"
    for n in range(30):  # a new fake DUT and counter per op: setups and readers stay bounded
        dut = Dut()
        with rtl_hooks.probe(dut, op=f"op{n}", counters={"c": Sig(0)}, out=out):
            dut.cycle_count.value += n
    assert len(fresh.setups) <= 8 and len(fresh.default_setups) <= 8 and len(fresh.readers) <= 8
    rtl_hooks.flush()
    assert [json.loads(x)["cycles"] for x in out.read_text().splitlines()] == list(range(30))
