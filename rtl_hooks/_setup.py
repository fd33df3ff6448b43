"""What a probe resolves once per (DUT, arguments) in a session: handles, readers, the static record part."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rtl_hooks._cocotb import Reader, dut_name, handle_name, read_params, simulator_facts
from rtl_hooks._env import Context
from rtl_hooks._records import Part, part

CYCLE_COUNT = "cycle_count"
"""The default cycle counter: the DUT's signal of this name, when it has one."""


class Setup:
    """The per-configuration part of a probe: everything but the op's own values.

    Made by the session (rtl_hooks._session) once per DUT and arguments; `templates` holds
    the encoder's %-templates of this setup's lines (rtl_hooks._records).
    """

    __slots__ = (
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
        "templates",
        "workload",
    )

    def __init__(self, ctx: Context, dut: Any, block: str | None, workload: str | None, cycle_counter: Any,
                 clock_period_ns: float | None, params: Any, out: str | Path | None,
                 reader: Callable[[Any], Reader]):
        self.ctx = ctx
        self.dut = dut
        self.block = block or ctx.block or dut_name(dut)
        self.workload = workload or f"block/{self.block}"
        if isinstance(cycle_counter, str):
            self.cc_name = cycle_counter
            cycle_counter = getattr(dut, cycle_counter, None)
        else:
            self.cc_name = handle_name(cycle_counter)
        self.cycle_counter = cycle_counter
        self.clock_period_ns = clock_period_ns if clock_period_ns is not None else ctx.clock_ns
        self.cc_read: Callable[[], int] | None
        if cycle_counter is not None:
            _, self.cc_read, _, self.cc_mod = reader(cycle_counter)
            self.how = f"rtl_counter:{self.cc_name}"
        else:
            self.cc_read, self.cc_mod = None, 0
            self.how = (f"sim_time/{self.clock_period_ns}ns" if self.clock_period_ns
                        else "none (no cycle counter and no clock period)")
        self.params_arg = params
        self.out = Path(out) if out else ctx.out
        self.out_key = str(self.out)
        self.static: Part | None = None
        self.templates: dict[tuple[Any, ...], tuple[str, str]] = {}

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.params_arg) if self.params_arg is not None else dict(self.ctx.params)

    def static_part(self) -> Part:
        """The fields that are the same for every op of this setup, serialized once (sorted keys)."""
        if self.static is None:
            params, params_from = read_params(self.dut, self.params)
            self.static = part({
                "block": self.block, "toplevel": dut_name(self.dut), "target": self.ctx.target,
                "workload": self.workload, "params": params, "params_from": params_from,
                **simulator_facts(), "sources": dict(self.ctx.sources),
            }, sort_keys=True)
        return self.static
