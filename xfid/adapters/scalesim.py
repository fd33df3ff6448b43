"""scalesim: SCALE-Sim v2/v3 reports (COMPUTE, BANDWIDTH, DETAILED_ACCESS, SPARSE; ", " separated)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.schema import canonical_json

# COMPUTE_REPORT column -> (metric, unit); v3 adds `Total Cycles (incl. prefetch)` before `Total Cycles`
COMPUTE: dict[str, tuple[str, str]] = {
    "Total Cycles": ("cycles", "cycles"),
    "Stall Cycles": ("stall_cycles", "cycles"),
    "Overall Util %": ("utilization", "%"),
    "Mapping Efficiency %": ("scalesim:mapping_efficiency", "%"),
    "Compute Util %": ("scalesim:compute_util", "%"),
}
V3_COLUMN = "Total Cycles (incl. prefetch)"
_WORDS = {"unit_in_file": "words"}
_WORDS_PER_CYCLE = {"unit_in_file": "words/cycle"}


def _fields(line: str) -> list[str]:
    parts = [p.strip() for p in line.split(",")]
    if parts and parts[-1] == "":
        parts.pop()  # SCALE-Sim ends every line with "," or ", "
    return parts


def _kind(header: list[str]) -> str | None:
    """Which report a header belongs to: compute, bandwidth, detail, sparse (None: not SCALE-Sim)."""
    if len(header) < 2 or header[0] != "LayerID":
        return None
    rest = header[1:]
    if "Total Cycles" in rest:
        return "compute"
    if "Sparsity Representation" in rest:
        return "sparse"
    if all(h.startswith("Avg ") and h.endswith(" BW") for h in rest):
        return "bandwidth"
    if all(re.match(r"^(SRAM|DRAM) \w+ (Start Cycle|Stop Cycle|Reads|Writes)$", h) for h in rest):
        return "detail"
    return None


def _slug(col: str) -> str:
    """`Avg IFMAP SRAM BW` -> `scalesim:avg_ifmap_sram_bw`; `Total Cycles (incl. prefetch)` -> `..._incl_prefetch`."""
    return "scalesim:" + re.sub(r"[^a-z0-9]+", "_", col.lower().replace("%", "pct")).strip("_")


def _column(kind: str, col: str) -> tuple[str, str, dict[str, str] | None]:
    """(metric, unit, config) of one report column."""
    if kind == "compute":
        if col in COMPUTE:
            metric, unit = COMPUTE[col]
            return metric, unit, None
        return _slug(col), "cycles" if "Cycles" in col else "%" if col.endswith("%") else "count", None
    if kind == "bandwidth" or col.endswith(" BW"):
        return _slug(col), "count", _WORDS_PER_CYCLE  # words/cycle: no xfid unit, said in config
    if col.endswith(("Start Cycle", "Stop Cycle")):
        return _slug(col), "cycles", None
    return _slug(col), "count", _WORDS  # reads, writes, storage sizes: counts of words


def _version(kind: str, header: list[str]) -> str:
    """` v3`/` v2` where the columns tell (v3 added the prefetch cycles and sparsity), else ``."""
    if V3_COLUMN in header or kind == "sparse" or any("Metadata" in h for h in header):
        return " v3"
    return " v2" if kind == "compute" else ""


REPORTS = {"compute": "COMPUTE_REPORT", "bandwidth": "BANDWIDTH_REPORT", "detail": "DETAILED_ACCESS_REPORT",
           "sparse": "SPARSE_REPORT"}


class ScalesimAdapter(Adapter):
    name = "scalesim"
    fidelity = "archmodel"
    formats = ("SCALE-Sim v2/v3 COMPUTE_REPORT.csv (cycles, stalls, utilization), BANDWIDTH_REPORT.csv "
               "(words/cycle), DETAILED_ACCESS_REPORT.csv (start/stop cycles, reads, writes), SPARSE_REPORT.csv")
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
                            "expected `LayerID, Total Cycles, ...` (COMPUTE_REPORT), `LayerID, Avg ... BW, ...` "
                            "(BANDWIDTH_REPORT) or `LayerID, SRAM IFMAP Start Cycle, ...` (DETAILED_ACCESS_REPORT)")
        software = f"SCALE-Sim{_version(kind, header)} ({REPORTS[kind]})"
        text_cols = {"Sparsity Representation"}
        out = Columns()
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
            texts = {c: row[i] for i, c in enumerate(header) if c in text_cols}
            for i, col in enumerate(header[1:], 1):
                if col in text_cols:
                    continue
                metric, unit, config = _column(kind, col)
                try:
                    value = float(row[i])
                except ValueError:
                    raise ctx.error(f"line {lineno}, column {col!r}", f"not a number: {row[i]!r}") from None
                cfg = {**(config or {}), **{_slug(c).split(":", 1)[1]: v for c, v in texts.items()}}
                out.add(metric, "value", value, unit, f"line {lineno}, column {col!r}", op=f"layer{layer}",
                        config=canonical_json(cfg), software=software)
        if not len(out):
            raise ctx.error(None, "no layer rows after the header")
        return out.cols


__all__ = ["ScalesimAdapter"]
