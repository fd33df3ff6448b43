"""The cocotb probe: one context manager per op; records exact RTL cycles as JSON lines."""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from time import perf_counter
from time import time as _time_s
from types import TracebackType
from typing import Any

from rtl_hooks._records import (
    _HOOKED,
    _LAST_FLUSH,
    _PENDING,
    FLUSH_OPS,
    FLUSH_S,
    _add,
    flush,
    frozen_extra,
)
from rtl_hooks._setup import _DEFAULT_SETUPS
from rtl_hooks._setup import setup as _setup
from rtl_hooks._support import (  # noqa: F401 - re-exported: the probe's public constants
    _CTX,
    _GET_SIM_TIME,
    _READERS,
    DEFAULT_OUT,
    ENV_BLOCK,
    ENV_CLOCK_NS,
    ENV_OUT,
    ENV_PARAMS,
    ENV_SOURCES,
    ENV_TARGET,
    FORMAT,
    _reader,
    _snapshot_context,
    _test_part,
    reset,
)

_flush_all = flush  # the name tests and older callers use


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _read(handle: Any) -> int:
    """The signal's value as an unsigned int (what `int(handle.value)` gives)."""
    return _reader(handle)[1]()


def _sim_ps() -> int:
    """`round(cocotb.simtime.get_sim_time("ps"))`; the first call puts a faster reader in its place."""
    global _sim_ps
    f = _GET_SIM_TIME[0]
    if f is None:
        f = _GET_SIM_TIME[0] = _make_sim_ps()
    if _sim_ps is _sim_ps_first:  # not monkeypatched: later calls go straight to the reader
        _sim_ps = f
    return f()


_sim_ps_first = _sim_ps


def _make_sim_ps() -> Callable[[], int]:
    """A reader of the sim time in ps, for the running simulator's precision (same arithmetic as cocotb)."""
    try:
        import cocotb.simulator
        from cocotb import simtime

        raw, exp = cocotb.simulator.get_sim_time, int(simtime.time_precision) + 12
    except (ImportError, AttributeError, TypeError, ValueError):  # cocotb internals moved
        from cocotb.simtime import get_sim_time

        return lambda: round(get_sim_time("ps"))
    if exp > 0:
        mul = 10**exp

        def sim_ps() -> int:
            hi, lo = raw()
            return (hi << 32 | lo) * mul
    else:
        div = 10**-exp

        def sim_ps() -> int:
            hi, lo = raw()
            return round((hi << 32 | lo) / div)
    return sim_ps


_CYCLE_COUNT = "cycle_count"


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

    Per op, Python reads the counters and the sim time at entry and exit and keeps the raw
    values; `record` is built when first read. JSON lines are encoded and written in batches
    (see rtl_hooks._records): at most FLUSH_S (0.25 s) after the op, at once for a failed op,
    at cocotb shutdown and interpreter exit, or on `rtl_hooks.flush()`. A simulator killed
    hard loses at most the ops of its last FLUSH_S seconds.

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

    __slots__ = (
        "_c0",
        "_counts",
        "_cycles",
        "_done",
        "_dt_ps",
        "_error",
        "_extra",
        "_ks",
        "_now",
        "_record",
        "_s",
        "_t0",
        "_test",
        "_time",
        "_wall0",
        "counters",
        "extra",
        "op",
    )

    def __init__(self, dut: Any, op: str, *, workload: str | None = None, block: str | None = None,
                 counters: Mapping[str, Any] | None = None, cycle_counter: Any = _CYCLE_COUNT,
                 clock_period_ns: float | None = None, params: Mapping[str, Any] | None = None,
                 out: str | Path | None = None, extra: Mapping[str, Any] | None = None):
        ctx = _CTX[0] or _snapshot_context()
        if (cycle_counter is _CYCLE_COUNT and block is None and workload is None and clock_period_ns is None
                and params is None and out is None):  # the usual call: one lookup by DUT
            s = _DEFAULT_SETUPS.get(id(dut))
            if s is None or s.ctx is not ctx or s.dut is not dut:
                s = _DEFAULT_SETUPS[id(dut)] = _setup(ctx, dut, None, None, cycle_counter, None, None, None)
            self._s = s
        else:
            self._s = _setup(ctx, dut, block, workload, cycle_counter, clock_period_ns, params, out)
        self.op = op
        self.counters = counters or {}
        self.extra = extra or {}
        self._record: dict[str, Any] | None = None
        self._done = False

    dut = property(lambda self: self._s.dut, doc="The DUT handle.")
    block = property(lambda self: self._s.block, doc="The block name recorded.")
    workload = property(lambda self: self._s.workload, doc="The workload recorded.")
    cycle_counter = property(lambda self: self._s.cycle_counter, doc="The cycle counter handle, or None.")
    clock_period_ns = property(lambda self: self._s.clock_period_ns, doc="The sim-time fallback's period.")
    out = property(lambda self: self._s.out, doc="The JSON-lines file this op goes to.")

    @property
    def params(self) -> dict[str, Any]:
        return self._s.params

    @property
    def _out_key(self) -> str:
        return self._s.out_key

    @property
    def record(self) -> dict[str, Any] | None:
        """The op's record (what its JSON line holds), once the block has exited; else None."""
        if not self._done:
            return None
        if self._record is None:
            err = self._error
            dynamic = {
                "format": FORMAT, "op": self.op, "passed": err is None, "error": err,
                "cycles": self._cycles, "cycles_from": self._s.how, "sim_time_ps": self._dt_ps,
                "counters": self._counts, "extra": self.extra, "wall_s": round(self._now - self._wall0, 6),
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._time)),
            }
            self._record = {**dynamic, **self._test[0], **self._s.static_part()[0]}
        return self._record

    def __enter__(self) -> Probe:
        s = self._s
        self._wall0 = perf_counter()
        self._t0 = _sim_ps()
        if s.cc_read is not None:
            self._c0 = s.cc_read()
        if self.counters:
            readers = _READERS
            ks = self._ks = []
            for k, h in self.counters.items():
                r = readers.get(id(h)) or _reader(h)
                ks.append((k, r[1], r[3], r[1]()))
        else:
            self._ks = ()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Read the counters and keep the raw values; the line is encoded and written in a batch."""
        s = self._s
        dt_ps = _sim_ps() - self._t0
        if s.cc_read is not None:
            cycles: int | None = s.cc_read() - self._c0
            if s.cc_mod:
                cycles %= s.cc_mod
        elif s.clock_period_ns:
            cycles = round(dt_ps / (s.clock_period_ns * 1000.0))
        else:
            cycles = None
        counts = {}
        for k, read, mod, k0 in self._ks:
            counts[k] = (read() - k0) % mod if mod else read() - k0
        if s.static is None:
            s.static_part()
        self._now = now = perf_counter()
        self._time = _time_s()
        self._dt_ps, self._cycles, self._counts = dt_ps, cycles, counts
        self._error = None if exc is None else f"{type(exc).__name__}: {exc}"[:500]
        self._test = _test_part()
        self._extra = frozen_extra(self.extra) if self.extra else None
        self._done = True
        _PENDING.append(self)
        if exc is not None or now - _LAST_FLUSH[0] > FLUSH_S or not _HOOKED[0] or len(_PENDING) >= FLUSH_OPS:
            _add(now)


def probe(dut: Any, op: str, *, workload: str | None = None, block: str | None = None,
          counters: Mapping[str, Any] | None = None, cycle_counter: Any = _CYCLE_COUNT,
          clock_period_ns: float | None = None, params: Mapping[str, Any] | None = None,
          out: str | Path | None = None, extra: Mapping[str, Any] | None = None) -> Probe:
    """A `Probe` for one op (see `Probe` for the arguments; spelled out: no kwargs dict per op)."""
    return Probe(dut, op, workload=workload, block=block, counters=counters, cycle_counter=cycle_counter,
                 clock_period_ns=clock_period_ns, params=params, out=out, extra=extra)


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
