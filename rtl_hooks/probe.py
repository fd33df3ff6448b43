"""The cocotb probe: one context manager per op; records exact RTL cycles as JSON lines."""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from rtl_hooks._support import (  # noqa: F401 - re-exported: the probe's public constants
    _CTX,
    _GET_SIM_TIME,
    _STATIC,
    DEFAULT_OUT,
    ENV_BLOCK,
    ENV_CLOCK_NS,
    ENV_OUT,
    ENV_PARAMS,
    ENV_SOURCES,
    ENV_TARGET,
    FLUSH_S,
    FORMAT,
    _check_params,
    _delta,
    _dut_name,
    _flush_all,
    _name,
    _regression_seed,
    _snapshot_context,
    _sub_handle,
    _test_part,
    _write,
    reset,
)


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _read(handle: Any) -> int:
    return int(handle.value)


def _sim_ps() -> int:
    get_sim_time = _GET_SIM_TIME[0]
    if get_sim_time is None:
        from cocotb.simtime import get_sim_time

        _GET_SIM_TIME[0] = get_sim_time

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
        ctx = _CTX[0] or _snapshot_context()
        self.dut = dut
        self.op = op
        self.block = block or ctx.block or _dut_name(dut)
        self.workload = workload or f"block/{self.block}"
        self.counters = counters or {}
        if isinstance(cycle_counter, str):
            self._cc_name = cycle_counter
            cycle_counter = _sub_handle(dut, cycle_counter)
        else:
            self._cc_name = _name(cycle_counter)
        self.cycle_counter = cycle_counter
        self.clock_period_ns = clock_period_ns if clock_period_ns is not None else ctx.clock_ns
        self._params_arg = params
        self._ctx = ctx
        self.out = Path(out) if out else ctx.out
        self.extra = extra or {}
        self.record: dict[str, Any] | None = None
        self._t0 = 0
        self._c0 = 0
        self._k0: dict[str, int] = {}
        self._wall0 = 0.0

    @property
    def params(self) -> dict[str, Any]:
        return dict(self._params_arg) if self._params_arg is not None else dict(self._ctx.params)

    def __enter__(self) -> Probe:
        self._wall0 = time.perf_counter()
        self._t0 = _sim_ps()
        if self.cycle_counter is not None:
            self._c0 = _read(self.cycle_counter)
        self._k0 = {k: _read(h) for k, h in self.counters.items()}
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        dt_ps = _sim_ps() - self._t0
        if self.cycle_counter is not None:
            cycles: int | None = _delta(self._c0, _read(self.cycle_counter), self.cycle_counter)
            how = f"rtl_counter:{self._cc_name}"
        elif self.clock_period_ns:
            cycles = round(dt_ps / (self.clock_period_ns * 1000.0))
            how = f"sim_time/{self.clock_period_ns}ns"
        else:
            cycles, how = None, "none (no cycle counter and no clock period)"
        counts = {k: _delta(self._k0[k], _read(h), h) for k, h in self.counters.items()}
        static, static_json = self._static()
        dynamic = {
            "format": FORMAT, "op": self.op, "passed": exc is None,
            "error": None if exc is None else f"{type(exc).__name__}: {exc}"[:500],
            "cycles": cycles, "cycles_from": how, "sim_time_ps": dt_ps, "counters": counts,
            "extra": self.extra, "wall_s": round(time.perf_counter() - self._wall0, 6),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        test, test_json = _test_part()
        self.record = {**dynamic, **test, **static}
        line = json.dumps(dynamic, default=str)[:-1] + ", " + test_json[1:-1] + ", " + static_json[1:]
        _write(self.out, line)

    def _static(self) -> tuple[dict[str, Any], str]:
        """The fields that are the same for every op of this DUT and context, serialized once."""
        key = (id(self.dut), self.block, self.workload, self._ctx,
               None if self._params_arg is None else json.dumps(dict(self._params_arg), sort_keys=True, default=str))
        hit = _STATIC.get(key)
        if hit is None:
            import cocotb

            params, params_from = _check_params(self.dut, self.params)
            static = {
                "block": self.block, "toplevel": _dut_name(self.dut), "target": self._ctx.target,
                "workload": self.workload, "params": params, "params_from": params_from,
                "simulator": getattr(cocotb, "SIM_NAME", None),
                "simulator_version": getattr(cocotb, "SIM_VERSION", None),
                "cocotb_version": cocotb.__version__, "seed": _regression_seed(),
                "sources": dict(self._ctx.sources),
            }
            hit = _STATIC[key] = (self.dut, static, json.dumps(static, sort_keys=True, default=str))
        return hit[1], hit[2]


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
