"""rtl_hooks: the cocotb probe that testbenches import, and the tools that run and inspect blocks.

The runtime (`rtl_hooks.probe` and the private modules it uses) runs inside the simulator and
imports only cocotb and the standard library, never xfid. The tools import xfid: the runner
(`rtl_hooks.runner`, with `rtl_hooks.simulators`), Verilog inspection (`rtl_hooks.inspect`) and
`python -m rtl_hooks`. Importing this package loads only the runtime.
"""

from __future__ import annotations

from rtl_hooks.probe import (
    DEFAULT_OUT,
    ENV_BLOCK,
    ENV_CLOCK_NS,
    ENV_OUT,
    ENV_PARAMS,
    ENV_SOURCES,
    ENV_TARGET,
    FLUSH_S,
    FORMAT,
    Probe,
    flush,
    probe,
    probed,
    reset,
)

__all__ = ["DEFAULT_OUT", "ENV_BLOCK", "ENV_CLOCK_NS", "ENV_OUT", "ENV_PARAMS", "ENV_SOURCES", "ENV_TARGET",
           "FLUSH_S", "FORMAT", "Probe", "flush", "probe", "probed", "reset"]
