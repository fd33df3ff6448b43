"""dcgm: `dcgmi dmon -e 155,156,1002,...` whitespace-aligned text (power, energy counter, activity)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.power import RELATIVE_TIME, Series, add_log_summary
from xfid.schema import canonical_json

# dmon column -> (DCGM field id, metric, unit when the units row leaves it blank)
FIELDS: dict[str, tuple[int, str, str]] = {
    "POWER": (155, "power", "W"),
    "TOTEC": (156, "dcgm:total_energy", "mJ"),
    "SMCLK": (100, "clock", "MHz"),
    "MMCLK": (101, "dcgm:mem_clock", "MHz"),
    "TXTPT": (200, "dcgm:pcie_tx_throughput", "KB/s"),
    "RXTPT": (201, "dcgm:pcie_rx_throughput", "KB/s"),
    "TMPTR": (150, "temperature", "C"),
    "GPUTL": (203, "utilization", "%"),
    "MCUTL": (204, "dcgm:mem_copy_util", "%"),
    "FBUSD": (252, "memory_used", "MiB"),
    "GRACT": (1001, "dcgm:gr_engine_active", "ratio"),
    "SMACT": (1002, "dcgm:sm_active", "ratio"),
    "SMOCC": (1003, "dcgm:sm_occupancy", "ratio"),
    "TENSO": (1004, "dcgm:tensor_active", "ratio"),
    "DRAMA": (1005, "dcgm:dram_active", "ratio"),
    "FP64A": (1006, "dcgm:fp64_active", "ratio"),
    "FP32A": (1007, "dcgm:fp32_active", "ratio"),
    "FP16A": (1008, "dcgm:fp16_active", "ratio"),
    "PCITX": (1009, "dcgm:pcie_tx_bytes", "B/s"),
    "PCIRX": (1010, "dcgm:pcie_rx_bytes", "B/s"),
    "NVLTX": (1011, "dcgm:nvlink_tx_bytes", "B/s"),
    "NVLRX": (1012, "dcgm:nvlink_rx_bytes", "B/s"),
}
SENTINEL_MIN = 2**47
"""DCGM's blank values (DCGM_INT32/64_BLANK, DCGM_FP64_BLANK ...) are all >= 2**47."""
_ENTITY = re.compile(r"^[A-Za-z][A-Za-z-]*$")
_NUM = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


class DcgmAdapter(Adapter):
    name = "dcgm"
    fidelity = "measured"
    formats = "dcgmi dmon text (#Entity header, units row, GPU/GPU-I rows; power, TOTEC, SM/tensor/DRAM active)"
    extensions: ClassVar[tuple[str, ...]] = (".txt", ".log", ".dmon")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head).lstrip()
        return t.startswith(("#Entity", "# Entity"))

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        lines = read_text(ctx).splitlines()
        start, interval = _timing(ctx)
        header: list[str] | None = None
        units: dict[str, str] = {}
        out = Columns()
        series: dict[str, Series] = {}
        counters: dict[str, list[tuple[float, str]]] = {}
        sample_no: dict[str, int] = {}
        expect_units = False
        for lineno, line in enumerate(lines, 1):
            loc = f"line {lineno}"
            if not line.strip():
                continue
            if line.lstrip().startswith("#"):
                cols = line.lstrip("# ").split()
                if not cols or cols[0] != "Entity":
                    raise ctx.error(loc, f"expected the '#Entity ...' header, got {line.strip()!r}")
                if header is None:
                    header = cols[1:]
                    units = self._units(lines, lineno, line)
                    self._cfg = canonical_json({
                        "tool": "dcgmi dmon", "interval_ms": interval,
                        "fields": {c: FIELDS[c][0] for c in header if c in FIELDS},
                        "time_base": (f"start option {start.isoformat()} + sample index x interval_ms" if start
                                      else "relative: sample index x interval_ms (dmon prints no times)"),
                        **ctx.meta})
                elif cols[1:] != header:
                    raise ctx.error(loc, f"header {line.strip()!r} differs from the first one",
                                    "one dmon run per file (the same -e fields throughout)")
                expect_units = True
                continue
            if header is None:
                raise ctx.error(loc, f"expected the '#Entity ...' header first, got {line.strip()[:60]!r}",
                                "pass the text printed by `dcgmi dmon -e ...`")
            if expect_units and line.split()[0] in ("ID", "Id"):
                expect_units = False
                continue
            expect_units = False
            tokens = line.split()
            if len(tokens) != len(header) + 2:
                raise ctx.error(loc, f"expected an entity (2 tokens) and {len(header)} values, got {len(tokens)} "
                                "tokens", "the file may be truncated")
            kind, ident = tokens[0], tokens[1]
            if not _ENTITY.match(kind) or not ident.isdigit():
                raise ctx.error(loc, f"entity {kind} {ident!r} is not like 'GPU 0' or 'GPU-I 3'")
            op = f"{kind.lower()}{ident}"
            k = sample_no.get(op, 0)
            sample_no[op] = k + 1
            t_s = k * interval / 1000.0
            ts = (start + timedelta(seconds=t_s)).isoformat() if start else None
            base = {"op": op, "timestamp": ts, "flags": None if start else RELATIVE_TIME, "config": self._cfg,
                    "software": "dcgmi dmon"}
            for col, cell in zip(header, tokens[2:], strict=True):
                field = FIELDS.get(col)
                metric = field[1] if field else f"dcgm:{col.lower()}"
                unit = _unit(units.get(col), field)
                where = f"{loc}, {col} (sample {k}, t={t_s:.3f} s)"
                if cell in ("N/A", "-"):
                    out.add(metric, "value", None, unit, where, null_reason=f"{cell} in file", **base)
                    continue
                if not _NUM.match(cell):
                    raise ctx.error(f"{loc}, {col}", f"{cell!r} is not a number")
                v = float(cell)
                if v >= SENTINEL_MIN:
                    out.add(metric, "value", None, unit, where, null_reason=f"DCGM blank sentinel {cell}", **base)
                    continue
                if col == "TOTEC":
                    counters.setdefault(op, []).append((v, loc))
                    continue  # a counter since driver load; its delta is the energy (below)
                out.add(metric, "value", v, unit, where, **base)
                if col == "POWER":
                    s = series.setdefault(op, Series(first_loc=loc))
                    s.t.append(t_s)
                    s.w.append(v if unit == "W" else v * {"mW": 1e-3, "kW": 1e3}.get(unit or "W", 1.0))
                    s.last_loc = loc
                    s.last_time = ts
        if header is None:
            raise ctx.error(None, "no '#Entity' header found", "pass the text printed by `dcgmi dmon -e ...`")
        if not sample_no:
            raise ctx.error(None, "no samples after the header", "the file is truncated or dmon never sampled")
        summary = {"config": self._cfg, "software": "dcgmi dmon", "flags": None if start else RELATIVE_TIME}
        add_log_summary(out, series, summary, "POWER")
        for op, vals in sorted(counters.items()):
            if len(vals) >= 2:
                loc = f"{vals[0][1]}..{vals[-1][1]}: TOTEC last - first"
                out.add("dcgm:totec_energy", "value", vals[-1][0] - vals[0][0], units.get("TOTEC") or "mJ", loc, op=op,
                        n_samples=len(vals), software="dcgmi dmon (TOTEC counter, field 156)",
                        config=self._cfg, flags=summary["flags"], timestamp=series[op].last_time
                        if op in series else None)
        return out.cols

    def _units(self, lines: list[str], lineno: int, header_line: str) -> dict[str, str]:
        """Units by column, matched by character position under the header (blank units are common)."""
        if lineno >= len(lines) or not lines[lineno].split() or lines[lineno].split()[0] not in ("ID", "Id"):
            return {}
        starts = [(m.start(), m.group()) for m in re.finditer(r"\S+", header_line)][1:]
        if starts and starts[0][1] == "Entity":
            starts = starts[1:]
        out: dict[str, str] = {}
        for m in list(re.finditer(r"\S+", lines[lineno]))[1:]:
            col = None
            for pos, name in starts:
                if pos <= m.start() + len(m.group()) - 1:
                    col = name
            if col:
                out[col] = m.group()
        return out

    def __init__(self) -> None:
        self._cfg: str | None = None


def _unit(printed: str | None, field: tuple[int, str, str] | None) -> str | None:
    """The unit of a column: the units row's cell, else DCGM's unit for the field.

    dcgmi cuts some units short: TXTPT/RXTPT, whose DCGM unit is DCGM_FIELD_UNIT_BW_KBPS
    ("KB/s"), print `KB/` in the units row of real dmon logs.
    A cell that is a strict prefix of the field's known unit is that unit."""
    if not printed:
        return field[2] if field else None
    if field and printed != field[2] and field[2].startswith(printed):
        return field[2]
    return printed


def _timing(ctx: ReadContext) -> tuple[datetime | None, float]:
    """dmon prints no times: sample k is at k * interval_ms (option, default 1000) after `start`."""
    try:
        interval = float(ctx.options.get("interval_ms", 1000))
    except ValueError:
        raise ctx.error("option interval_ms", f"{ctx.options['interval_ms']!r} is not a number of ms") from None
    if interval <= 0:
        raise ctx.error("option interval_ms", f"{interval} must be > 0 (the -d of dcgmi dmon)")
    raw = ctx.options.get("start")
    start = None
    if raw:
        try:
            start = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
        except ValueError:
            raise ctx.error("option start", f"{raw!r} is not an ISO 8601 time like 2026-03-01T00:00:00Z") from None
        start = start.replace(tzinfo=start.tzinfo or UTC).astimezone(UTC)
    return start, interval


__all__ = ["DcgmAdapter"]
