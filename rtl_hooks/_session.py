"""The probe's session: everything it keeps between ops, in one object; `reset()` starts a new one.

A session holds the environment's context (read at its first probe), the setups and signal
readers resolved per DUT and handle, the running test's record part, the finished ops not yet
written, and the open output files. The simulation runs in one session; tests that change the
environment or fake the sim clock start a new one with `reset()`.

When lines reach the file. An op's exit only appends the finished probe to `pending`; the
session encodes and writes the buffer (rtl_hooks._records):

- when an op exits more than `flush_s` (FLUSH_S, 0.25 s) after the last flush, so in a steady
  run a line reaches the file about FLUSH_S after its op at most; the first op of a session
  flushes at once (and hooks cocotb's shutdown);
- at once when an op raised (so a failing op and everything before it is on disk before the
  exception propagates, even if the simulator dies next);
- after FLUSH_OPS buffered ops (bounds memory);
- when cocotb shuts down (end of the regression, also after a failing test), at interpreter
  exit, at `reset()`, and whenever `flush()` is called.

A simulator killed hard (SIGKILL, out of memory, a segfault, os._exit) loses the ops since the
last flush: in a steady run its last FLUSH_S seconds' worth, or all ops since the last one that
flushed if it hangs after them; every op before that is in the file.

Buffering is worth 1.5 us per op: 5.9 us against 7.5 us with a flush (one write) at every op's
exit (benchmarks/rtl_probe.py, "probe alone", median of per-run minima, 4 alternating runs; the
figures' setting is in the `Probe` docstring).
"""

from __future__ import annotations

import atexit
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rtl_hooks._cocotb import Reader, cocotb_modules, make_reader, make_sim_ps, test_name
from rtl_hooks._env import Context
from rtl_hooks._records import Part, part, write_batch
from rtl_hooks._setup import CYCLE_COUNT, Setup

FLUSH_S = 0.25
"""Records reach the file at most this long after their op (and always at exit)."""
FLUSH_OPS = 4096
"""... or after this many buffered ops, whichever comes first (bounds memory)."""
MAX_CACHED = 4096
"""A session's setups and readers are dropped when they grow past this (e.g. a new fake handle
per op in unit tests); they are made again on the next op."""


class Session:
    """The probe's state for one simulation (see the module docstring).

    Setups and readers are dicts keyed by the DUT and signal handles themselves (cocotb's
    handles hash and compare by their simulator object); the session holds them, and a new
    session drops them. A key holds its handle, so a handle's reader never serves another
    object. cocotb hashes a handle in Python, about 30 ns more per lookup than a key of `id()`
    (three lookups per op with two counters): the probe costs 6.11 us per op with these keys
    and cost 5.97 us with the `id()` keys it had before (benchmarks/rtl_probe.py, "probe alone",
    median of per-run minima, 16 alternating runs).

    Args:
        sim_ps: the sim time in ps (default: read from cocotb, through a reader made at the
            first call for the simulator's precision); tests pass a fake clock.
        flush_s: see FLUSH_S.
    """

    __slots__ = (
        "_cocotb",
        "_ctx",
        "_part",
        "_seed",
        "_test",
        "_test_parts",
        "default_setups",
        "files",
        "flush_s",
        "last_flush",
        "pending",
        "readers",
        "setups",
        "sim_ps",
    )

    def __init__(self, *, sim_ps: Callable[[], int] | None = None, flush_s: float = FLUSH_S):
        self.sim_ps: Callable[[], int] = sim_ps or self._first_sim_ps
        self.flush_s = flush_s
        self._ctx: Context | None = None
        self.setups: dict[tuple[Any, ...], Setup] = {}
        # DUT -> the setup of a probe given no optional arguments (the usual call: one lookup)
        self.default_setups: dict[Any, Setup] = {}
        self.readers: dict[Any, Reader] = {}
        self._cocotb: tuple[Any, Any] | None = None
        self._test: Any = None
        self._seed: Any = None
        self._part: Part | None = None
        self._test_parts: dict[tuple[Any, ...], Part] = {}
        self.pending: list[Any] = []
        self.last_flush = float("-inf")
        self.files: dict[str, Any] = {}

    def _first_sim_ps(self) -> int:
        self.sim_ps = make_sim_ps()
        return self.sim_ps()

    @property
    def context(self) -> Context:
        """The environment's context, read at the session's first probe."""
        if self._ctx is None:
            self._ctx = Context.from_environ()
        return self._ctx

    def setup(self, dut: Any, block: str | None, workload: str | None, cycle_counter: Any,
              clock_period_ns: float | None, params: Mapping[str, Any] | None, out: str | Path | None) -> Setup:
        """The setup for a probe's arguments, made once per distinct arguments."""
        key = (dut, block, workload, cycle_counter, clock_period_ns, out,
               None if params is None else json.dumps(dict(params), sort_keys=True, default=str))
        hit = self.setups.get(key)
        if hit is None:
            if len(self.setups) >= MAX_CACHED:
                self.setups.clear()
                self.default_setups.clear()
            hit = self.setups[key] = Setup(self.context, dut, block, workload, cycle_counter, clock_period_ns,
                                           params, out, self.reader)
        return hit

    def default_setup(self, dut: Any) -> Setup:
        """The setup of a probe given no optional arguments (the probe looks in `default_setups` first)."""
        s = self.default_setups[dut] = self.setup(dut, None, None, CYCLE_COUNT, None, None, None)
        return s

    def reader(self, handle: Any) -> Reader:
        """The reader of a signal handle, made once per handle."""
        r = self.readers.get(handle)
        if r is None:
            if len(self.readers) >= MAX_CACHED:
                self.readers.clear()
            r = self.readers[handle] = make_reader(handle)
        return r

    def test_part(self) -> Part:
        """The running test's name and seed: two attribute reads and an identity check per op."""
        mods = self._cocotb
        if mods is None:
            mods = self._cocotb = cocotb_modules()
        cocotb, regression = mods
        try:
            seed = cocotb.RANDOM_SEED
            test = regression._manager_inst._test
        except AttributeError:  # no regression running (unit tests), or cocotb internals moved
            seed = getattr(cocotb, "RANDOM_SEED", None)
            test = None
        if test is not None:
            if test is not self._test or seed is not self._seed or self._part is None:
                self._test, self._seed = test, seed
                self._part = part({"test": test_name(), "test_seed": seed})
            return self._part
        key = (test_name(), seed)
        hit = self._test_parts.get(key)
        if hit is None:
            hit = self._test_parts[key] = part({"test": key[0], "test_seed": seed})
        return hit

    def flush(self) -> None:
        """Encode the buffered ops and write them to their files (unbuffered: in the OS after this)."""
        if self.pending:
            batch = self.pending[:]
            self.pending.clear()
            write_batch(batch, self.files)

    def flush_at(self, now: float) -> None:
        """Flush for an op's exit that found a flush due (failed op, old or big buffer, first op)."""
        _hook_shutdown()
        self.flush()
        self.last_flush = now

    def close(self) -> None:
        """Flush and close the output files."""
        self.flush()
        for f in self.files.values():
            f.close()
        self.files.clear()


current = Session()
"""The session probes record into; `reset()` replaces it."""
_hooked = False


def flush() -> None:
    """Write the ops buffered so far to their files (they are also written at exit)."""
    current.flush()


def reset(*, sim_ps: Callable[[], int] | None = None, flush_s: float = FLUSH_S) -> Session:
    """Write what is buffered, close the files, and start a new session (for tests); returns it.

    The new session reads the environment again at its first probe. See `Session` for the arguments.
    """
    global current
    old, current = current, Session(sim_ps=sim_ps, flush_s=flush_s)
    old.close()
    return current


def _hook_shutdown() -> None:
    """Flush when cocotb shuts down (before the simulator finalizes), besides atexit; once per process."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    try:
        from cocotb import _shutdown

        _shutdown.register(flush)
    except (ImportError, AttributeError):  # cocotb internals moved: atexit still flushes
        pass


@atexit.register
def _close_current() -> None:
    current.close()
