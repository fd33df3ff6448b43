"""rtl_hooks: cocotb probes, Verilator runner, pyverilog inspection."""

from __future__ import annotations

from rtl_hooks.probe import (
    DEFAULT_OUT,
    ENV_BLOCK,
    ENV_CLOCK_NS,
    ENV_OUT,
    ENV_PARAMS,
    ENV_SOURCES,
    ENV_TARGET,
    Probe,
    flush,
    probe,
    probed,
)

__all__ = ["DEFAULT_OUT", "ENV_BLOCK", "ENV_CLOCK_NS", "ENV_OUT", "ENV_PARAMS", "ENV_SOURCES", "ENV_TARGET",
           "Probe", "flush", "probe", "probed"]
