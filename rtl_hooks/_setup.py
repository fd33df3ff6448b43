"""What a probe resolves once per (DUT, arguments, context): handles, readers, the static record part."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rtl_hooks._support import (
    _STATIC,
    _check_params,
    _Context,
    _dut_name,
    _name,
    _reader,
    _regression_seed,
    _sub_handle,
)

_SETUPS: dict[tuple[Any, ...], Setup] = {}
_DEFAULT_SETUPS: dict[int, Setup] = {}
"""DUT id -> the Setup of a probe given no optional arguments (checked against the DUT and context)."""
MAX_SETUPS = 4096
"""The cache is cleared when it grows past this (e.g. a new fake handle per op in unit tests)."""


class Setup:
    """The per-configuration part of a probe: everything but the op's own values."""

    __slots__ = (
        "__weakref__",
        "block",
        "cc_mod",
        "cc_name",
        "cc_read",
        "clock_period_ns",
        "ctx",
        "cycle_counter",
        "dut",
        "how",
        "out",
        "out_key",
        "params_arg",
        "static",
        "workload",
    )

    def __init__(self, ctx: _Context, dut: Any, block: str | None, workload: str | None, cycle_counter: Any,
                 clock_period_ns: float | None, params: Any, out: str | Path | None):
        self.ctx = ctx
        self.dut = dut
        self.block = block or ctx.block or _dut_name(dut)
        self.workload = workload or f"block/{self.block}"
        if isinstance(cycle_counter, str):
            self.cc_name = cycle_counter
            cycle_counter = _sub_handle(dut, cycle_counter)
        else:
            self.cc_name = _name(cycle_counter)
        self.cycle_counter = cycle_counter
        self.clock_period_ns = clock_period_ns if clock_period_ns is not None else ctx.clock_ns
        if cycle_counter is not None:
            _, self.cc_read, _, self.cc_mod = _reader(cycle_counter)
            self.how = f"rtl_counter:{self.cc_name}"
        else:
            self.cc_read, self.cc_mod = None, 0
            self.how = (f"sim_time/{self.clock_period_ns}ns" if self.clock_period_ns
                        else "none (no cycle counter and no clock period)")
        self.params_arg = params
        self.out = Path(out) if out else ctx.out
        self.out_key = str(self.out)
        self.static: tuple[dict[str, Any], str] | None = None

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.params_arg) if self.params_arg is not None else dict(self.ctx.params)

    def static_part(self) -> tuple[dict[str, Any], str]:
        """The fields that are the same for every op of this DUT and context, serialized once."""
        if self.static is not None:
            return self.static
        key = (id(self.dut), self.block, self.workload, self.ctx,
               None if self.params_arg is None else json.dumps(dict(self.params_arg), sort_keys=True, default=str))
        hit = _STATIC.get(key)
        if hit is None:
            import cocotb

            params, params_from = _check_params(self.dut, self.params)
            static = {
                "block": self.block, "toplevel": _dut_name(self.dut), "target": self.ctx.target,
                "workload": self.workload, "params": params, "params_from": params_from,
                "simulator": getattr(cocotb, "SIM_NAME", None),
                "simulator_version": getattr(cocotb, "SIM_VERSION", None),
                "cocotb_version": cocotb.__version__, "seed": _regression_seed(),
                "sources": dict(self.ctx.sources),
            }
            hit = _STATIC[key] = (self.dut, static, json.dumps(static, sort_keys=True, default=str))
        self.static = (hit[1], hit[2])
        return self.static


def setup(ctx: _Context, dut: Any, block: str | None, workload: str | None, cycle_counter: Any,
          clock_period_ns: float | None, params: Any, out: str | Path | None) -> Setup:
    """The cached `Setup` for these arguments (one dict lookup per op once warm)."""
    key = (id(dut), block, workload, cycle_counter if type(cycle_counter) is str else id(cycle_counter),
           clock_period_ns, out, id(ctx),
           None if params is None else json.dumps(dict(params), sort_keys=True, default=str))
    hit = _SETUPS.get(key)
    if hit is None:
        if len(_SETUPS) >= MAX_SETUPS:
            _SETUPS.clear()
            _DEFAULT_SETUPS.clear()
        hit = _SETUPS[key] = Setup(ctx, dut, block, workload, cycle_counter, clock_period_ns, params, out)
    return hit
