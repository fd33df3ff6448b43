"""What the probe reads from cocotb: signal readers, the sim time in ps, the running test, the seed.

Nothing here keeps state: the probe's session (rtl_hooks._session) caches what these return.
cocotb's private attributes are read where they save time per op; each has a fallback through
cocotb's public API for when they move.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple


class Reader(NamedTuple):
    """How to read one signal as an unsigned int, and the modulus its deltas wrap at."""

    handle: Any
    read: Callable[[], int]
    width: int
    modulus: int
    """2**width, or 0 for a signal of unknown width (deltas are then not wrapped)."""


def make_reader(handle: Any) -> Reader:
    """The fastest reader that gives what `int(handle.value)` gives.

    A cocotb logic signal is read as its binary string (what `int(handle.value)` parses, without
    building a LogicArray), or under Verilator, up to 32 bits wide, as an int; anything else
    through `int(handle.value)`. With a cycle counter and two counters (six reads per op) the
    probe costs 6.1 us per op; 7.3 us with binary-string reads only; 14.7 us with
    `int(handle.value)` for every read (benchmarks/rtl_probe.py, "probe alone", median of
    per-run minima, 4 alternating runs each; the figures' setting is in the `Probe` docstring).
    """
    try:
        width = len(handle)
    except TypeError:
        width = 64
    read: Callable[[], int] | None = None
    try:
        import cocotb
        from cocotb.handle import LogicObject, _LogicArrayObjectBase

        if isinstance(handle, (LogicObject, _LogicArrayObjectBase)):
            if 0 < width <= 32 and str(getattr(cocotb, "SIM_NAME", "")).lower().startswith("verilator"):
                # two-state: never x/z; vpiIntVal is a signed 32-bit int, the mask makes it unsigned
                as_int, mask = handle._handle.get_signal_val_long, (1 << width) - 1

                def read_long() -> int:
                    return as_int() & mask

                read = read_long
            else:
                binstr = handle._handle.get_signal_val_binstr

                def read_binstr() -> int:
                    return int(binstr(), 2)  # ValueError on x/z bits, as int(LogicArray) raises

                read = read_binstr
    except (ImportError, AttributeError):
        read = None
    if read is None:
        def read_value() -> int:
            return int(handle.value)

        read = read_value
    return Reader(handle, read, width, 1 << width if width else 0)


def make_sim_ps() -> Callable[[], int]:
    """A reader of the sim time in ps, for the running simulator's precision (same arithmetic as cocotb).

    It gives `round(cocotb.simtime.get_sim_time("ps"))` without cocotb's unit conversion per call.
    """
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


def cocotb_modules() -> tuple[Any, Any]:
    """(cocotb, cocotb.regression or None), imported once per session by the caller."""
    import cocotb

    regression: Any
    try:
        from cocotb import regression
    except ImportError:  # pragma: no cover - part of cocotb
        regression = None
    return cocotb, regression


def test_name() -> str | None:
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


def regression_seed() -> int | None:
    """The seed that reproduces the run (COCOTB_RANDOM_SEED); cocotb reseeds each test from it."""
    try:
        from cocotb import regression

        return int(regression._manager_inst._regression_seed)
    except (ImportError, AttributeError, TypeError, ValueError):
        v = os.environ.get("COCOTB_RANDOM_SEED")
        return int(v) if v and v.lstrip("-").isdigit() else None


def read_params(dut: Any, params: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Parameters, each read back from the DUT handle where the simulator exposes it.

    Returns the values and where they came from: "dut", "runner", or "dut+runner".
    """
    out = dict(params)
    seen = 0
    for k in params:
        try:
            out[k] = int(getattr(dut, k).value)
        except Exception:  # simulators that do not expose parameters: keep the runner's value
            continue
        seen += 1
    how = "dut" if params and seen == len(params) else "runner" if not seen else "dut+runner"
    return out, how


def simulator_facts() -> dict[str, Any]:
    """The simulator, its version, cocotb's version and the regression seed, for the record."""
    import cocotb

    return {"simulator": getattr(cocotb, "SIM_NAME", None), "simulator_version": getattr(cocotb, "SIM_VERSION", None),
            "cocotb_version": cocotb.__version__, "seed": regression_seed()}


def handle_name(handle: Any) -> str:
    """A signal handle's name, for `cycles_from`."""
    return str(getattr(handle, "_name", None) or getattr(handle, "name", "?"))


def dut_name(dut: Any) -> str:
    """The DUT's module name (the default block)."""
    return str(getattr(dut, "_name", None) or "dut")
