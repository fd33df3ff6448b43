"""genz: GenZ (GenZ-LLM-Analyzer) per-op DataFrame CSV: latency, cycles, bound, FLOPs, bytes."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, ReadContext, head_text, read_text
from xfid.schema import canonical_json

REQUIRED = ("Op Type", "Bound", "Latency (msec)", "Cycles", "Num ops (MFLOP)", "Total Data (MB)")
# column -> (metric, unit); "MB" is resolved by the mb_bytes option (GenZ's Unit uses 2**20)
METRICS: dict[str, tuple[str, str]] = {
    "Latency (msec)": ("latency", "ms"),
    "Cycles": ("cycles", "cycles"),
    "Num ops (MFLOP)": ("flops", "MFLOP"),
    "Total Data (MB)": ("bytes", "MB"),
    "Throughput (Tflops)": ("flop_rate", "TFLOP/s"),
    "Compute time (msec)": ("genz:compute_time", "ms"),
    "Memory time (msec)": ("genz:memory_time", "ms"),
    "Communication time (msec)": ("genz:communication_time", "ms"),
    "Compute cycle": ("genz:compute_cycles", "cycles"),
    "Memory cycle": ("genz:memory_cycles", "cycles"),
    "Communication cycle": ("genz:communication_cycles", "cycles"),
    "Compute Utilization": ("genz:compute_utilization", "ratio"),
    "Memory Utilization": ("genz:memory_utilization", "ratio"),
    "Communication Utilization": ("genz:communication_utilization", "ratio"),
}
CONFIG_COLUMNS = ("Op Type", "Dimension", "Bound", "C/M ratio", "Op Intensity", "C Effcy", "Input_a (MB)",
                  "Input_w (MB)", "Output (MB)")
_BOUND = {"C": "compute", "M": "memory", "Compute": "compute", "Memory": "memory",
          "Collective": "interconnect", "Communication": "interconnect"}


def _header(text: str) -> list[str]:
    first = text.splitlines()[0] if text.strip() else ""
    try:
        return next(csv.reader([first]))
    except (csv.Error, StopIteration):
        return []


class GenzAdapter(Adapter):
    name = "genz"
    fidelity = "archmodel"
    formats = "GenZ per-op CSV (Op Type, Dimension, Bound, ..., Latency (msec), Cycles, Num ops (MFLOP), ...)"
    extensions: ClassVar[tuple[str, ...]] = (".csv",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        cols = set(_header(head_text(head)))
        return {"Op Type", "Bound", "Latency (msec)", "C/M ratio"} <= cols

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        text = read_text(ctx)
        rows = list(csv.reader(io.StringIO(text)))
        header = rows[0]
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise ctx.error("line 1", f"missing column {missing[0]!r}", f"a GenZ per-op CSV has {', '.join(REQUIRED)}")
        idx_col = 0 if header[0] == "" else None  # DataFrame.to_csv writes the index first
        mb = float(ctx.options.get("mb_bytes", 2**20))
        mb_unit = {2**20: "MiB", 1e6: "MB"}.get(mb)
        if mb_unit is None:
            raise ctx.error(None, f"option mb_bytes must be 1048576 (GenZ's default) or 1000000, got {mb!r}")
        pos = {c: i for i, c in enumerate(header)}
        ctx.skip_keys([c for i, c in enumerate(header) if c and i != idx_col and c not in METRICS
                       and c not in CONFIG_COLUMNS and c != "Layer Name"], prefix="column ")
        cols: dict[str, list[Any]] = {k: [] for k in ("op", "metric", "stat", "value", "unit", "source_loc",
                                                      "config", "software")}
        for lineno, row in enumerate(rows[1:], 2):
            if not any(f.strip() for f in row):
                continue
            if len(row) != len(header):
                raise ctx.error(f"line {lineno}", f"expected {len(header)} fields, got {len(row)}",
                                "every row needs one value per header column")
            rid = row[idx_col] if idx_col is not None else str(lineno - 2)
            name = row[pos["Layer Name"]].strip() if "Layer Name" in pos else ""
            op = name or f"{rid}:{row[pos['Op Type']].strip()}"
            cfg: dict[str, Any] = {c: _num_or_text(row[pos[c]]) for c in CONFIG_COLUMNS if c in pos}
            bound = row[pos["Bound"]].strip()
            cfg["limiter"] = _BOUND.get(bound, bound.lower())
            cfg["mb_bytes"] = mb
            cfg.update(ctx.meta)
            cfg_json = canonical_json(cfg)
            for col, (metric, unit) in METRICS.items():
                if col not in pos:
                    continue
                raw = row[pos[col]].strip()
                try:
                    v = float(raw)
                except ValueError:
                    raise ctx.error(f"line {lineno}, column {col!r}", f"not a number: {raw!r}") from None
                if not math.isfinite(v):
                    raise ctx.error(f"line {lineno}, column {col!r}", f"not a finite number: {raw!r}")
                cols["op"].append(op)
                cols["metric"].append(metric)
                cols["stat"].append("value")
                cols["value"].append(v)
                cols["unit"].append(mb_unit if unit == "MB" else unit)
                cols["source_loc"].append(f"line {lineno}, column {col!r}")
                cols["config"].append(cfg_json)
                cols["software"].append("GenZ")
        if not cols["op"]:
            raise ctx.error(None, "no op rows after the header")
        return cols


def _num_or_text(s: str) -> Any:
    try:
        v = float(s)
    except ValueError:
        return s.strip()
    return v if math.isfinite(v) else s.strip()


__all__ = ["GenzAdapter"]
