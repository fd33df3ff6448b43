"""nvidia-smi: `--query-gpu=... --format=csv[,nounits]` power/clock/utilization logs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.power import Series, add_log_summary
from xfid.schema import canonical_json

# query field -> (metric, stat). Each sample is one record: op `gpu<index>`, stat `value`,
# timestamp = the sample's time. Other numeric fields become `nvidia_smi:<field>` metrics.
METRICS: dict[str, str] = {
    "power.draw": "power",
    "power.draw.instant": "power",
    "power.draw.average": "nvidia_smi:power.draw.average",
    "clocks.current.sm": "clock",
    "clocks.sm": "clock",
    "utilization.gpu": "utilization",
    "memory.used": "memory_used",
    "temperature.gpu": "temperature",
    "temperature.memory": "nvidia_smi:temperature.memory",  # HBM temperature, printed without unit
}
POWER_FIELDS = ("power.draw", "power.draw.instant")
# fields that describe the device (provenance, into config/hardware), not samples
CONFIG_FIELDS = {
    "name": "name", "gpu_name": "name", "pci.bus_id": "pci_bus_id", "uuid": "uuid", "gpu_uuid": "uuid",
    "driver_version": "driver_version", "vbios_version": "vbios_version", "pstate": "pstate",
    "serial": "serial", "compute_mode": "compute_mode",
    "power.limit": "power_limit_w", "enforced.power.limit": "power_limit_w",
    "power.default_limit": "power_default_limit_w", "power.max_limit": "power_max_limit_w",
    "clocks.max.sm": "max_sm_clock_mhz", "clocks.max.memory": "max_memory_clock_mhz",
    "clocks.applications.graphics": "app_graphics_clock_mhz", "memory.total": "memory_total_mib",
}
_FIELD = re.compile(r"^(?P<name>[a-z_][a-z0-9_.]*)(?: \[(?P<unit>[^\]]+)\])?$")
_VALUE = re.compile(r"^(?P<num>[-+]?\d+(?:\.\d+)?)(?: (?P<unit>\S+))?$")
_SENTINEL = re.compile(r"^\[[^\]]+\]$|^N/A$")
_TIME_FMT = "%Y/%m/%d %H:%M:%S.%f"


class NvidiaSmiAdapter(Adapter):
    name = "nvidia-smi"
    fidelity = "measured"
    formats = "nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv[,nounits] logs (per-GPU samples)"
    extensions: ClassVar[tuple[str, ...]] = (".csv", ".log", ".txt")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        first = t.splitlines()[0] if t.strip() else ""
        return ", " in first and first.split(", ")[0].strip() in ("timestamp", "index") and bool(
            re.search(r"(power\.draw|utilization\.gpu|clocks\.|memory\.used|temperature\.gpu)", first))

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        lines = read_text(ctx).splitlines()
        fields = self._header(ctx, lines[0])
        names = [f[0] for f in fields]
        if "timestamp" not in names:
            raise ctx.error("line 1", "header has no 'timestamp' field",
                            "query it: nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv")
        # the GPU of a row: `index`; older queries often name it by `pci.bus_id` alone
        gpu_field = "index" if "index" in names else "pci.bus_id" if "pci.bus_id" in names else None
        if gpu_field is None:
            raise ctx.error("line 1", "header has no 'index' (or 'pci.bus_id') field to tell the GPUs apart",
                            "query it: nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv")
        if gpu_field != "index":
            ctx.warn("no 'index' field: GPUs are named by pci.bus_id (op gpu@<bus id>)")
        # fields printed without a unit that are not known samples (text, PCIe/ECC counters ...)
        ctx.skip_keys([f for f, u in fields if not u and f not in ("timestamp", "index")
                       and f not in CONFIG_FIELDS and f not in METRICS], prefix="column ")
        tz = _offset(ctx)
        power_field = next((f for f in POWER_FIELDS if f in names), None)
        out = Columns()
        series: dict[str, Series] = {}
        devices: dict[str, dict[str, Any]] = {}
        nounits = None
        n = 0
        for lineno, line in enumerate(lines[1:], 2):
            if not line.strip():
                continue
            loc = f"line {lineno}"
            cells = [c.strip() for c in line.split(",")]
            if len(cells) != len(fields):
                raise ctx.error(loc, f"expected {len(fields)} fields like the header, got {len(cells)}",
                                "the file may be truncated; every row needs one value per header field")
            row = dict(zip(names, cells, strict=True))
            try:
                ts = datetime.strptime(row["timestamp"], _TIME_FMT).replace(tzinfo=tz)
            except ValueError:
                raise ctx.error(f"{loc}, timestamp", f"{row['timestamp']!r} is not a time like "
                                "2026/03/01 00:00:00.000") from None
            if gpu_field == "index":
                if not row["index"].isdigit():
                    raise ctx.error(f"{loc}, index", f"GPU index {row['index']!r} is not a whole number")
                op = f"gpu{row['index']}"
            elif row["pci.bus_id"] and not _SENTINEL.match(row["pci.bus_id"]):
                op = f"gpu@{row['pci.bus_id']}"
            else:
                raise ctx.error(f"{loc}, pci.bus_id", f"no PCI bus id in {row['pci.bus_id']!r} to name the GPU by")
            dev: dict[str, Any] = {}
            for (name, unit), cell in zip(fields, cells, strict=True):
                key = CONFIG_FIELDS.get(name)
                if key is None or _SENTINEL.match(cell):
                    continue
                dev[key] = _number(ctx, cell, unit, f"{loc}, {name}")[0] if key.endswith(("_w", "_mhz", "_mib")) \
                    else cell
            if gpu_field == "index":
                dev["gpu_index"] = int(row["index"])
            dev["tool"] = "nvidia-smi --query-gpu"
            devices.setdefault(op, dev)
            base = {"op": op, "timestamp": ts.astimezone(UTC).isoformat(), "config": canonical_json(dev),
                    "hardware": dev.get("name"), "software": _software(dev)}
            for (name, unit), cell in zip(fields, cells, strict=True):
                if name in ("timestamp", "index") or name in CONFIG_FIELDS:
                    continue
                if name not in METRICS and not unit:
                    continue  # a text field nvidia-smi prints without unit (e.g. display_mode)
                metric = METRICS.get(name) or f"nvidia_smi:{name}"
                if metric == "power" and name != power_field:  # both power.draw and .instant queried
                    metric = f"nvidia_smi:{name}"
                where = f"{loc}, {name}" + (f" [{unit}]" if unit else "")
                if _SENTINEL.match(cell):
                    out.add(metric, "value", None, _unit(metric, unit), where, null_reason=f"{cell} in file", **base)
                    continue
                v, had_unit = _number(ctx, cell, unit, where)
                if nounits is None:
                    nounits = not had_unit
                out.add(metric, "value", v, _unit(metric, unit), where, **base)
                if name == power_field:
                    s = series.setdefault(op, Series(first_loc=loc))
                    s.t.append(ts.timestamp())
                    s.w.append(v)
                    s.last_loc = loc
                    s.last_time = base["timestamp"]
            n += 1
        if n == 0:
            raise ctx.error(None, "no samples after the header", "the file is truncated or the query never ran")
        for op, dev in devices.items():
            cfg = canonical_json({**dev, "csv_nounits": bool(nounits)})
            add_log_summary(out, {op: series[op]} if op in series else {},
                            {"config": cfg, "hardware": dev.get("name"), "software": _software(dev)},
                            power_field or "power.draw")
        return out.cols

    @staticmethod
    def _header(ctx: ReadContext, line: str) -> list[tuple[str, str | None]]:
        fields = []
        for i, raw in enumerate(line.split(","), 1):
            m = _FIELD.match(raw.strip())
            if not m:
                raise ctx.error("line 1", f"header field {i} {raw.strip()!r} is not an nvidia-smi query field",
                                "expected e.g. 'timestamp, index, power.draw [W], utilization.gpu [%]'")
            fields.append((m["name"], m["unit"]))
        return fields


def _number(ctx: ReadContext, cell: str, unit: str | None, where: str) -> tuple[float, bool]:
    """The value of `24.80 W` or `24.80`; its suffix must match the header's unit."""
    m = _VALUE.match(cell)
    if not m:
        raise ctx.error(where, f"{cell!r} is not a number", "nvidia-smi writes numbers like '24.80 W' or '24.80'")
    if m["unit"] is not None and m["unit"] != unit:
        raise ctx.error(where, f"value {cell!r} has unit {m['unit']!r} but the header says [{unit}]",
                        "do not mix logs of different queries in one file")
    return float(m["num"]), m["unit"] is not None


def _unit(metric: str, unit: str | None) -> str | None:
    if unit is None:
        return "C" if metric in ("temperature", "nvidia_smi:temperature.memory") else None
    return unit


def _software(dev: dict[str, Any]) -> str:
    return "nvidia-smi" + (f" (driver {dev['driver_version']})" if dev.get("driver_version") else "")


def _offset(ctx: ReadContext) -> timezone:
    """nvidia-smi writes local time without a zone; option `utc_offset` (e.g. +02:00), default UTC."""
    raw = str(ctx.options.get("utc_offset", "+00:00")).strip()
    m = re.match(r"^([+-])(\d{1,2}):?(\d{2})?$", raw)
    if not m:
        raise ctx.error("option utc_offset", f"{raw!r} is not an offset like +02:00 or -0500")
    sign = 1 if m[1] == "+" else -1
    return timezone(sign * timedelta(hours=int(m[2]), minutes=int(m[3] or 0)))


__all__ = ["NvidiaSmiAdapter"]
