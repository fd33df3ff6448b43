"""The cocotb probe: one context manager per op; records exact RTL cycles as JSON lines."""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
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


@dataclass(frozen=True)
class _Context:
    """What the runner passes through the environment, parsed once per distinct environment."""

    block: str | None
    target: str | None
    clock_ns: float | None
    out: Path
    params_json: str
    sources_json: str

    @property
    def params(self) -> dict[str, Any]:
        return json.loads(self.params_json)

    @property
    def sources(self) -> dict[str, Any]:
        return json.loads(self.sources_json)


_GET_SIM_TIME: list[Any] = [None]
_CTX: list[_Context | None] = [None]


def _snapshot_context() -> _Context:
    """The environment's context, read once per process (the runner sets it before the sim starts)."""
    ctx = _CTX[0] = _context(*(os.environ.get(k) for k in _ENV_KEYS))
    return ctx


def reset() -> None:
    """Forget cached context, handles and static record parts (for tests that change the environment)."""
    _CTX[0] = None
    for cache in (_STATIC, _HANDLES, _WIDTHS, _PARAM_CACHE, _TEST_PART):
        cache.clear()
    _flush_all()
_ENV_KEYS = (ENV_BLOCK, ENV_TARGET, ENV_CLOCK_NS, ENV_OUT, ENV_PARAMS, ENV_SOURCES)
# Caches keyed by id(); each entry also holds the object itself, so an id is never reused
# while its entry lives.
_STATIC: dict[tuple[Any, ...], tuple[Any, dict[str, Any], str]] = {}
_FILES: dict[str, Any] = {}
_HANDLES: dict[tuple[int, str], tuple[Any, Any]] = {}
_WIDTHS: dict[int, tuple[Any, int]] = {}


@lru_cache(maxsize=64)
def _context(block: str | None, target: str | None, clock: str | None, out: str | None,
             params: str | None, sources: str | None) -> _Context:
    try:
        clock_ns = float(clock) if clock else None
    except ValueError:
        clock_ns = None
    return _Context(block or None, target or None, clock_ns, Path(out or DEFAULT_OUT),
                    json.dumps(_json_obj(params), sort_keys=True), json.dumps(_json_obj(sources), sort_keys=True))


def _json_obj(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        v = json.loads(raw)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


FLUSH_S = 0.25
"""Records reach the file at most this long after their op (and always at exit)."""
_last_flush = [0.0]


def _write(path: Path, line: str) -> None:
    f = _writer(path)
    f.write(line + "\n")
    now = time.monotonic()
    if now - _last_flush[0] > FLUSH_S:
        _flush_all()
        _last_flush[0] = now


def _flush_all() -> None:
    for f in _FILES.values():
        if not f.closed:
            f.flush()


def _writer(path: Path) -> Any:
    """An append-mode file kept open for the process (one open per output, not per op)."""
    key = str(path)
    f = _FILES.get(key)
    if f is None or f.closed:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = _FILES[key] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at exit
    return f


@atexit.register
def _close_all() -> None:
    for f in _FILES.values():
        f.close()
    _FILES.clear()


def _sub_handle(dut: Any, name: str) -> Any:
    key = (id(dut), name)
    if key not in _HANDLES:
        _HANDLES[key] = (dut, getattr(dut, name) if _has(dut, name) else None)
    return _HANDLES[key][1]


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


def _delta(start: int, end: int, handle: Any) -> int:
    hit = _WIDTHS.get(id(handle))
    if hit is not None:
        width = hit[1]
    else:
        try:
            width = len(handle)
        except TypeError:
            width = 64
        _WIDTHS[id(handle)] = (handle, width)
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


_TEST_PART: dict[str, tuple[dict[str, Any], str]] = {}


def _test_part() -> tuple[dict[str, Any], str]:
    """The running test's name and seed, serialized once per test."""
    import cocotb

    name = _test_name()
    seed = getattr(cocotb, "RANDOM_SEED", None)
    key = f"{name}\x00{seed}"
    hit = _TEST_PART.get(key)
    if hit is None:
        part = {"test": name, "test_seed": seed}
        hit = _TEST_PART[key] = (part, json.dumps(part))
    return hit


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

        name = str(current_task().get_name())
    except (ImportError, AttributeError, RuntimeError):
        return None
    return name[5:] if name.startswith("Test ") else name


_PARAM_CACHE: dict[tuple[int, str], tuple[Any, int | None]] = {}


def _check_params(dut: Any, params: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Parameters, each read back from the DUT handle where the simulator exposes it (cached)."""
    out = dict(params)
    seen = 0
    for k in params:
        key = (id(dut), k)
        if key not in _PARAM_CACHE:
            try:
                _PARAM_CACHE[key] = (dut, int(getattr(dut, k).value))
            except Exception:  # simulators that do not expose parameters: keep the runner's value
                _PARAM_CACHE[key] = (dut, None)
        v = _PARAM_CACHE[key][1]
        if v is not None:
            out[k] = v
            seen += 1
    how = "dut" if params and seen == len(params) else "runner" if not seen else "dut+runner"
    return out, how
