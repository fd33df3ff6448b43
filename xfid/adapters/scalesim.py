"""scalesim: SCALE-Sim reports: v2/v3 (COMPUTE, BANDWIDTH, DETAILED_ACCESS, SPARSE; ", " separated)
and v1 (`<net>_cycles.csv`, `_avg_bw.csv`, `_max_bw.csv`, `_detail.csv`; ",\t" separated).

SCALE-Sim v1 names each layer (`Conv1`) where v2 numbers it, so a v1 record's op is the name as
written; its bandwidth reports carry the three SRAM sizes (words: the config's KB x 1024) on
every row, kept in config. Every version ends its lines with a comma (`,`, `, ` or `,\t`);
CRLF line ends are read as well.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
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



def _rows(ctx: ReadContext, lines: list[str], header: list[str]) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank data line; a row whose field count is not the
    header's is an error naming its line."""
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        row = _fields(line)
        if len(row) != len(header):
            raise ctx.error(f"line {lineno}", f"expected {len(header)} fields, got {len(row)}",
                            "every row needs one value per header column")
        yield lineno, row

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


# v1 header -> report kind; the cycles and detail reports start with `Layer`, the bandwidth ones
# with the SRAM sizes and `Conv Layer Num`
V1_SIZES = ("IFMAP SRAM Size", "Filter SRAM Size", "OFMAP SRAM Size")
V1_COLUMNS: dict[str, tuple[str, str]] = {"Cycles": ("cycles", "cycles"), "% Utilization": ("utilization", "%")}
V1_REPORTS = {"v1-cycles": "cycles", "v1-avg-bw": "avg_bw", "v1-max-bw": "max_bw", "v1-detail": "detail"}


def _v1_kind(header: list[str]) -> str | None:
    """Which SCALE-Sim v1 report a header belongs to (None: not a v1 report)."""
    if header[:3] == ["Layer", "Cycles", "% Utilization"]:
        return "v1-cycles"
    if len(header) > 1 and header[0] == "Layer" and all(
            re.match(r"^(DRAM|SRAM)_\w+_(start|stop|bytes)$", h) for h in header[1:]):
        return "v1-detail"
    if tuple(header[:3]) == V1_SIZES and len(header) > 4 and header[3] == "Conv Layer Num":
        rest = header[4:]
        if all(h.startswith("Max ") and h.endswith(" BW") for h in rest):
            return "v1-max-bw"
        if all(h.endswith(" BW") for h in rest):
            return "v1-avg-bw"
    return None


def _v1_column(kind: str, col: str) -> tuple[str, str, dict[str, str] | None]:
    """(metric, unit, config) of one v1 report column."""
    if kind == "v1-cycles" and col in V1_COLUMNS:
        metric, unit = V1_COLUMNS[col]
        return metric, unit, None
    if col.endswith(" BW"):
        return _slug(col), "count", _WORDS_PER_CYCLE
    if col.endswith(("_start", "_stop")):
        return _slug(col), "cycles", None
    if col.endswith("_bytes"):
        return _slug(col), "count", {"unit_in_file": "bytes"}
    return _slug(col), "count", None


REPORTS = {"compute": "COMPUTE_REPORT", "bandwidth": "BANDWIDTH_REPORT", "detail": "DETAILED_ACCESS_REPORT",
           "sparse": "SPARSE_REPORT"}


class ScalesimAdapter(Adapter):
    name = "scalesim"
    fidelity = "archmodel"
    formats = ("SCALE-Sim v1 <net>_cycles.csv, _avg_bw.csv, _max_bw.csv, _detail.csv (named layers); "
               "SCALE-Sim v2/v3 COMPUTE_REPORT.csv (cycles, stalls, utilization), BANDWIDTH_REPORT.csv "
               "(words/cycle), DETAILED_ACCESS_REPORT.csv (start/stop cycles, reads, writes), SPARSE_REPORT.csv")
    extensions: ClassVar[tuple[str, ...]] = (".csv",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        text = head_text(head)
        first = text.splitlines()[0] if text.strip() else ""
        return _kind(_fields(first)) is not None or _v1_kind(_fields(first)) is not None

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        lines = read_text(ctx).splitlines()
        header = _fields(lines[0])
        if _v1_kind(header) is not None:
            return self._read_v1(ctx, lines, header)
        kind = _kind(header)
        if kind is None:
            raise ctx.error("line 1", f"not a SCALE-Sim report header: {lines[0][:80]!r}",
                            "expected `LayerID, Total Cycles, ...` (COMPUTE_REPORT), `LayerID, Avg ... BW, ...` "
                            "(BANDWIDTH_REPORT) or `LayerID, SRAM IFMAP Start Cycle, ...` (DETAILED_ACCESS_REPORT)")
        software = f"SCALE-Sim{_version(kind, header)} ({REPORTS[kind]})"
        text_cols = {"Sparsity Representation"}
        out = Columns()
        for lineno, row in _rows(ctx, lines, header):
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

    def _read_v1(self, ctx: ReadContext, lines: list[str], header: list[str]) -> dict[str, list[Any]]:
        """A SCALE-Sim v1 report: one row per named layer."""
        kind = _v1_kind(header) or ""
        software = f"SCALE-Sim v1 ({V1_REPORTS[kind]})"
        name_col = header.index("Conv Layer Num") if "Conv Layer Num" in header else 0
        out = Columns()
        for lineno, row in _rows(ctx, lines, header):
            layer = row[name_col]
            if not layer:
                raise ctx.error(f"line {lineno}", f"no layer name in column {header[name_col]!r}")
            sizes = {_slug(c).split(":", 1)[1]: int(_v1_number(ctx, row[i], lineno, c))
                     for i, c in enumerate(header) if c in V1_SIZES}  # whole words
            for i, col in enumerate(header):
                if i == name_col or col in V1_SIZES:
                    continue
                metric, unit, config = _v1_column(kind, col)
                value = _v1_number(ctx, row[i], lineno, col)
                out.add(metric, "value", value, unit, f"line {lineno}, column {col!r}", op=layer,
                        config=canonical_json({**(config or {}), **sizes}), software=software)
        if not len(out):
            raise ctx.error(None, f"a SCALE-Sim v1 {V1_REPORTS[kind]} report with a header but no layer rows",
                            "SCALE-Sim v1 writes a row when a layer finishes: the run may have stopped "
                            "before the first layer ended; run it again")
        return out.cols


def _v1_number(ctx: ReadContext, cell: str, lineno: int, col: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise ctx.error(f"line {lineno}, column {col!r}", f"not a number: {cell!r}") from None


__all__ = ["ScalesimAdapter"]
