"""The cocotb probe: one context manager per op; records exact RTL cycles as JSON lines."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

ENV_OUT = "XFID_RTL_OUT"
ENV_BLOCK = "XFID_RTL_BLOCK"
ENV_PARAMS = "XFID_RTL_PARAMS"
ENV_SOURCES = "XFID_RTL_SOURCES"
ENV_TARGET = "XFID_RTL_TARGET"
ENV_CLOCK_NS = "XFID_RTL_CLOCK_NS"
DEFAULT_OUT = "xfid_rtl.jsonl"
"""Relative to the simulator's working directory (the build dir when run by `xfid rtl run`)."""
FORMAT = "xfid-rtl/1"


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _env_json(name: str) -> dict[str, Any]:
    raw = os.environ.get(name)
    if not raw:
        return {}
    try:
        v = json.loads(raw)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def _read(handle: Any) -> int:
    return int(handle.value)


def _sim_ps() -> int:
    from cocotb.simtime import get_sim_time

    return round(get_sim_time("ps"))


class Probe:
    """Record one op of a cocotb test: cycles, sim time, DUT counters, parameters, provenance.

    Use it around the awaits of one op; Python touches the simulator only at entry and exit::

        with rtl_hooks.probe(dut, op="dma[bytes=256]", counters={"bytes": dut.bytes_moved}):
            dut.start.value = 1
            await RisingEdge(dut.done)

    Cycles come from an RTL cycle counter (`cycle_counter`, default the DUT's `cycle_count`
    signal when it has one) as the difference between exit and entry, or else from the
    sim-time delta divided by `clock_period_ns`. Named counters are also exit-minus-entry
    deltas of cumulative RTL registers. An exception inside the block marks the op failed
    and propagates.

    Args:
        dut: the cocotb DUT handle.
        op: the canonical op name, e.g. `gemm_tile[m=8,n=8,k=16]`.
        workload: default `block/<block>`.
        block: default env XFID_RTL_BLOCK, else the DUT's module name.
        counters: metric name -> DUT signal handle (e.g. {"bytes": dut.bytes_moved}).
        cycle_counter: a handle, a signal name, or None to use sim time.
        clock_period_ns: clock period for the sim-time fallback (default env XFID_RTL_CLOCK_NS).
        params: the block's parameters (default: env XFID_RTL_PARAMS, checked against the DUT).
        out: the JSON-lines file (default env XFID_RTL_OUT, else ./xfid_rtl.jsonl).
        extra: free values stored in the record's `extra` (shape, salt ...).
    """

    def __init__(self, dut: Any, op: str, *, workload: str | None = None, block: str | None = None,
                 counters: Mapping[str, Any] | None = None, cycle_counter: Any = "cycle_count",
                 clock_period_ns: float | None = None, params: Mapping[str, Any] | None = None,
                 out: str | Path | None = None, extra: Mapping[str, Any] | None = None):
        self.dut = dut
        self.op = op
        self.block = block or os.environ.get(ENV_BLOCK) or _dut_name(dut)
        self.workload = workload or f"block/{self.block}"
        self.counters = dict(counters or {})
        self._cc_name = cycle_counter if isinstance(cycle_counter, str) else _name(cycle_counter)
        if isinstance(cycle_counter, str):
            cycle_counter = getattr(dut, cycle_counter, None) if _has(dut, cycle_counter) else None
        self.cycle_counter = cycle_counter
        env_clk = os.environ.get(ENV_CLOCK_NS)
        self.clock_period_ns = clock_period_ns if clock_period_ns is not None else (float(env_clk) if env_clk else None)
        self.params = dict(params) if params is not None else _env_json(ENV_PARAMS)
        self.out = Path(out or os.environ.get(ENV_OUT) or DEFAULT_OUT)
        self.extra = dict(extra or {})
        self.record: dict[str, Any] | None = None
        self._t0 = 0
        self._c0 = 0
        self._k0: dict[str, int] = {}
        self._wall0 = 0.0

    def __enter__(self) -> Probe:
        self._wall0 = time.perf_counter()
        self._t0 = _sim_ps()
        if self.cycle_counter is not None:
            self._c0 = _read(self.cycle_counter)
        self._k0 = {k: _read(h) for k, h in self.counters.items()}
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        t1 = _sim_ps()
        dt_ps = t1 - self._t0
        if self.cycle_counter is not None:
            cycles: int | None = _delta(self._c0, _read(self.cycle_counter), self.cycle_counter)
            how = f"rtl_counter:{self._cc_name}"
        elif self.clock_period_ns:
            cycles = round(dt_ps / (self.clock_period_ns * 1000.0))
            how = f"sim_time/{self.clock_period_ns}ns"
        else:
            cycles, how = None, "none (no cycle counter and no clock period)"
        counts = {k: _delta(self._k0[k], _read(h), h) for k, h in self.counters.items()}
        self.record = self._make(cycles, how, dt_ps, counts, exc)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        with open(self.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(self.record, sort_keys=True, default=str) + "\n")

    def _make(self, cycles: int | None, how: str, dt_ps: int, counts: dict[str, int],
              exc: BaseException | None) -> dict[str, Any]:
        import cocotb

        params, params_from = _check_params(self.dut, self.params)
        return {
            "format": FORMAT,
            "block": self.block,
            "toplevel": _dut_name(self.dut),
            "target": os.environ.get(ENV_TARGET) or None,
            "workload": self.workload,
            "op": self.op,
            "test": _test_name(),
            "passed": exc is None,
            "error": None if exc is None else f"{type(exc).__name__}: {exc}"[:500],
            "cycles": cycles,
            "cycles_from": how,
            "sim_time_ps": dt_ps,
            "counters": counts,
            "params": params,
            "params_from": params_from,
            "simulator": getattr(cocotb, "SIM_NAME", None),
            "simulator_version": getattr(cocotb, "SIM_VERSION", None),
            "cocotb_version": cocotb.__version__,
            "seed": _regression_seed(),
            "test_seed": getattr(cocotb, "RANDOM_SEED", None),
            "sources": _env_json(ENV_SOURCES),
            "extra": self.extra,
            "wall_s": round(time.perf_counter() - self._wall0, 6),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }


def probe(dut: Any, op: str, **kwargs: Any) -> Probe:
    """A `Probe` for one op (see `Probe` for the arguments)."""
    return Probe(dut, op, **kwargs)


def probed(op: str | Callable[..., str], **kwargs: Any) -> Callable[[Callable[..., Awaitable[Any]]],
                                                                   Callable[..., Awaitable[Any]]]:
    """Decorate an `async def f(dut, ...)` so each call is recorded as one op.

    `op` is a string, or a function of the call's arguments that returns the op name.
    """

    def deco(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(fn)
        async def wrapper(dut: Any, *a: Any, **kw: Any) -> Any:
            name = op(dut, *a, **kw) if callable(op) else op
            with Probe(dut, name, **kwargs):
                return await fn(dut, *a, **kw)

        return wrapper

    return deco


def _delta(start: int, end: int, handle: Any) -> int:
    try:
        width = len(handle)
    except TypeError:
        width = 64
    return (end - start) % (1 << width) if width else end - start


def _has(dut: Any, name: str) -> bool:
    try:
        getattr(dut, name)
    except AttributeError:
        return False
    return True


def _name(handle: Any) -> str:
    return str(getattr(handle, "_name", None) or getattr(handle, "name", "?"))


def _dut_name(dut: Any) -> str:
    return str(getattr(dut, "_name", None) or "dut")


def _regression_seed() -> int | None:
    """The seed that reproduces the run (COCOTB_RANDOM_SEED); cocotb reseeds each test from it."""
    try:
        from cocotb import regression

        return int(regression._manager_inst._regression_seed)
    except (ImportError, AttributeError, TypeError, ValueError):
        v = os.environ.get("COCOTB_RANDOM_SEED")
        return int(v) if v and v.lstrip("-").isdigit() else None


def _test_name() -> str | None:
    """The running cocotb test's name (as results.xml names it)."""
    try:
        from cocotb import regression

        return str(regression._manager_inst._test.name)
    except (ImportError, AttributeError):  # cocotb internals moved: fall back to the task name
        pass
    try:
        from cocotb.task import current_task

        name = str(current_task().name)
    except (ImportError, AttributeError, RuntimeError):
        return None
    return name[5:] if name.startswith("Test ") else name


_PARAM_CACHE: dict[tuple[int, str], int | None] = {}


def _check_params(dut: Any, params: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Parameters, each read back from the DUT handle where the simulator exposes it (cached)."""
    out = dict(params)
    seen = 0
    for k in params:
        key = (id(dut), k)
        if key not in _PARAM_CACHE:
            try:
                _PARAM_CACHE[key] = int(getattr(dut, k).value)
            except Exception:  # simulators that do not expose parameters: keep the runner's value
                _PARAM_CACHE[key] = None
        if _PARAM_CACHE[key] is not None:
            out[k] = _PARAM_CACHE[key]
            seen += 1
    how = "dut" if params and seen == len(params) else "runner" if not seen else "dut+runner"
    return out, how
