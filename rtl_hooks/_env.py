"""What the runner tells the probe through the environment: the variable names and their parsing."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
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
"""The `format` of every record the probe writes (what the cocotb adapter checks)."""


@dataclass(frozen=True)
class Context:
    """What the runner passes through the environment, parsed once per probe session.

    Malformed values are not the testbench's fault and never stop a simulation: a clock
    that is not a number is no clock, and JSON that is not an object is no parameters.
    """

    block: str | None
    target: str | None
    clock_ns: float | None
    out: Path
    params: Mapping[str, Any]
    sources: Mapping[str, Any]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> Context:
        """The context the environment holds now (the runner sets it before the simulator starts)."""
        clock = environ.get(ENV_CLOCK_NS)
        try:
            clock_ns = float(clock) if clock else None
        except ValueError:
            clock_ns = None
        return cls(environ.get(ENV_BLOCK) or None, environ.get(ENV_TARGET) or None, clock_ns,
                   Path(environ.get(ENV_OUT) or DEFAULT_OUT), _json_obj(environ.get(ENV_PARAMS)),
                   _json_obj(environ.get(ENV_SOURCES)))


def _json_obj(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        v = json.loads(raw)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}
