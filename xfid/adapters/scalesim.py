"""scalesim: SCALE-Sim v2 COMPUTE_REPORT.csv and BANDWIDTH_REPORT.csv (", " separated, trailing comma)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, ReadContext, head_text, read_text

# COMPUTE_REPORT column -> (metric, unit)
COMPUTE: dict[str, tuple[str, str]] = {
    "Total Cycles": ("cycles", "cycles"),
    "Stall Cycles": ("stall_cycles", "cycles"),
    "Overall Util %": ("utilization", "%"),
    "Mapping Efficiency %": ("scalesim:mapping_efficiency", "%"),
    "Compute Util %": ("scalesim:compute_util", "%"),
}
BANDWIDTH_PREFIX = "Avg "


def _fields(line: str) -> list[str]:
    parts = [p.strip() for p in line.split(",")]
    if parts and parts[-1] == "":
        parts.pop()  # SCALE-Sim ends every line with ", "
    return parts


def _kind(header: list[str]) -> str | None:
    if not header or header[0] != "LayerID":
        return None
    if "Total Cycles" in header:
        return "compute"
    if any(h.startswith(BANDWIDTH_PREFIX) and h.endswith(" BW") for h in header[1:]):
        return "bandwidth"
    return None


def _metric_name(col: str) -> str:
    # "Avg IFMAP SRAM BW" -> "scalesim:avg_ifmap_sram_bw"
    return "scalesim:" + "_".join(col.lower().replace("%", "pct").split())


class ScalesimAdapter(Adapter):
    name = "scalesim"
    fidelity = "archmodel"
    formats = "SCALE-Sim v2 COMPUTE_REPORT.csv (cycles, stalls, utilization) / BANDWIDTH_REPORT.csv (words/cycle)"
    extensions: ClassVar[tuple[str, ...]] = (".csv",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        text = head_text(head)
        first = text.splitlines()[0] if text.strip() else ""
        return _kind(_fields(first)) is not None

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        lines = read_text(ctx).splitlines()
        header = _fields(lines[0])
        kind = _kind(header)
        if kind is None:
            raise ctx.error("line 1", f"not a SCALE-Sim report header: {lines[0][:80]!r}",
                            "expected `LayerID, Total Cycles, ...` (COMPUTE_REPORT) or `LayerID, Avg ... BW, ...`")
        if kind == "compute":
            missing = [c for c in ("Total Cycles",) if c not in header]
            if missing:
                raise ctx.error("line 1", f"missing column {missing[0]!r}")
            wanted = {c: COMPUTE[c] for c in header if c in COMPUTE}
        else:
            wanted = {c: (_metric_name(c), None) for c in header[1:]}
        cols: dict[str, list[Any]] = {k: [] for k in ("op", "metric", "stat", "value", "unit", "source_loc",
                                                      "config", "software")}
        report = "COMPUTE_REPORT" if kind == "compute" else "BANDWIDTH_REPORT"
        for lineno, line in enumerate(lines[1:], 2):
            if not line.strip():
                continue
            row = _fields(line)
            if len(row) != len(header):
                raise ctx.error(f"line {lineno}", f"expected {len(header)} fields, got {len(row)}",
                                "every row needs one value per header column")
            layer = row[0]
            if not layer.isdigit():
                raise ctx.error(f"line {lineno}", f"LayerID must be a whole number, got {layer!r}")
            for i, col in enumerate(header):
                if col not in wanted:
                    continue
                metric, unit = wanted[col]
                try:
                    value = float(row[i])
                except ValueError:
                    raise ctx.error(f"line {lineno}, column {col!r}", f"not a number: {row[i]!r}") from None
                cols["op"].append(f"layer{layer}")
                cols["metric"].append(metric)
                cols["stat"].append("value")
                cols["value"].append(value)
                cols["unit"].append(unit)
                cols["source_loc"].append(f"line {lineno}, column {col!r}")
                cols["config"].append(None if unit else '{"unit_in_file":"words/cycle"}')
                cols["software"].append(f"SCALE-Sim v2 ({report})")
        if not cols["op"]:
            raise ctx.error(None, "no layer rows after the header")
        return cols


__all__ = ["ScalesimAdapter"]
