"""nvidia-smi: `--query-gpu=... --format=csv[,nounits]` power/clock/utilization logs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

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
    formats = ("nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv[,nounits] -l/-lms logs (per-GPU "
               "samples; a log without index/pci.bus_id/uuid is one GPU's, read as gpu0)")
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
        # the GPU of a row: `index`; older queries often name it by `pci.bus_id` (or `uuid`) alone
        gpu_field = next((f for f in ("index", "pci.bus_id", "uuid", "gpu_uuid") if f in names), None)
        tz = _offset(ctx)
        rows = list(_rows(ctx, lines, names, tz))
        one_uuid = None
        if gpu_field in ("uuid", "gpu_uuid") and len({r[2][gpu_field] for r in rows}) <= 1:
            one_uuid, gpu_field = rows[0][2][gpu_field], None  # one uuid throughout: one GPU
        single = _single_gpu(ctx, rows, names, one_uuid) if gpu_field is None else None
        if gpu_field not in (None, "index"):
            ctx.warn(f"no 'index' field: GPUs are named by {gpu_field} (op gpu@<{gpu_field}>)")
        # fields printed without a unit that are not known samples (text, PCIe/ECC counters ...)
        ctx.skip_keys([f for f, u in fields if not u and f not in ("timestamp", "index")
                       and f not in CONFIG_FIELDS and f not in METRICS], prefix="column ")
        power_field = next((f for f in POWER_FIELDS if f in names), None)
        out = Columns()
        series: dict[str, Series] = {}
        devices: dict[str, dict[str, Any]] = {}
        nounits = None
        for lineno, cells, row, ts in rows:
            loc = f"line {lineno}"
            if single is not None or gpu_field is None:
                op = f"gpu{single}"
            elif gpu_field == "index":
                if not row["index"].isdigit():
                    raise ctx.error(f"{loc}, index", f"GPU index {row['index']!r} is not a whole number")
                op = f"gpu{row['index']}"
            elif row[gpu_field] and not _SENTINEL.match(row[gpu_field]):
                op = f"gpu@{row[gpu_field]}"
            else:
                what = "PCI bus id" if gpu_field == "pci.bus_id" else gpu_field
                raise ctx.error(f"{loc}, {gpu_field}", f"no {what} in {row[gpu_field]!r} to name the GPU by")
            dev: dict[str, Any] = {}
            for (name, unit), cell in zip(fields, cells, strict=True):
                key = CONFIG_FIELDS.get(name)
                if key is None or _SENTINEL.match(cell):
                    continue
                dev[key] = _number(ctx, cell, unit, f"{loc}, {name}")[0] if key.endswith(("_w", "_mhz", "_mib")) \
                    else cell
            if single is not None:
                dev["gpu_index"] = single
                dev["gpu_index_from"] = ("assumed: the log has no index, pci.bus_id or uuid column" if one_uuid is None
                                         else "assumed: no index or pci.bus_id column, one uuid throughout")
            elif gpu_field == "index":
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
        _note_held_values(ctx, series)
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


def _rows(ctx: ReadContext, lines: list[str], names: list[str],
          tz: timezone) -> Iterator[tuple[int, list[str], dict[str, str], datetime]]:
    """(line, cells, cells by field, time) of every sample row, checked for shape and time.

    Raises:
        InputError: a row with the wrong number of fields or a bad timestamp; no rows at all."""
    n = 0
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        loc = f"line {lineno}"
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(names):
            raise ctx.error(loc, f"expected {len(names)} fields like the header, got {len(cells)}",
                            "the file may be truncated; every row needs one value per header field")
        row = dict(zip(names, cells, strict=True))
        try:
            ts = datetime.strptime(row["timestamp"], _TIME_FMT).replace(tzinfo=tz)
        except ValueError:
            raise ctx.error(f"{loc}, timestamp", f"{row['timestamp']!r} is not a time like "
                            "2026/03/01 00:00:00.000") from None
        n += 1
        yield lineno, cells, row, ts
    if n == 0:
        raise ctx.error(None, "no samples after the header", "the file is truncated or the query never ran")


def _single_gpu(ctx: ReadContext, rows: list[tuple[int, list[str], dict[str, str], datetime]],
                names: list[str], one_uuid: str | None) -> int:
    """The GPU index of a log whose header names no GPU (no index, pci.bus_id or uuid field),
    or whose uuid field holds `one_uuid` throughout (then it is one GPU; nothing is checked).

    Such a log is one GPU's samples (`nvidia-smi -i N --query-gpu=timestamp,power.draw,...`),
    unless the rows show several GPUs printed in turn, which nothing in them could then tell
    apart. That is refused when
    * a `name` field changes between rows (two GPU models in one log), or
    * the times go round-robin (`interleaved_gpus`): nvidia-smi prints one row per GPU per
      loop, a few ms apart, so k GPUs give k-1 tiny steps then one loop-sized step, again
      and again. One GPU's log steps by its loop interval (with jitter and gaps), never so.

    Returns:
        `--option gpu_index` (default 0), the index the log is read as.

    Raises:
        InputError: the rows are demonstrably interleaved GPUs; a bad gpu_index option.
    """
    name_field = next((f for f in ("name", "gpu_name") if f in names), None)
    if one_uuid is None and name_field:
        models = list(dict.fromkeys(r[2][name_field] for r in rows))
        if len(models) > 1:
            first = next(r[0] for r in rows if r[2][name_field] == models[1])
            raise ctx.error(f"line {first}, {name_field}", f"the rows name {len(models)} GPU models "
                            f"({', '.join(models[:4])}) but no field tells the GPUs apart",
                            "log one GPU per file (nvidia-smi -i N ...) or query the index: "
                            "nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv")
    t = np.array([r[3].timestamp() for r in rows])
    k = interleaved_gpus(t) if one_uuid is None else None
    if k:
        raise ctx.error("line 2", f"the rows look like {k} GPUs printed in turn (their times step in groups of "
                        f"{k}: {k - 1} steps of a few ms, then one loop interval), and no field tells the GPUs apart",
                        "query the index: nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv "
                        "(or log one GPU per file with nvidia-smi -i N)")
    raw = ctx.options.get("gpu_index", 0)
    if not str(raw).isdigit():
        raise ctx.error("option gpu_index", f"{raw!r} is not a GPU index", "the N of `nvidia-smi -i N`")
    idx = int(raw)
    why = "no index, pci.bus_id or uuid field" if one_uuid is None else f"no index field and one uuid ({one_uuid})"
    ctx.warn(f"{why}: every row is read as one GPU's sample, op gpu{idx}"
             + ("" if "gpu_index" in ctx.options else " (pass --option gpu_index=N if `nvidia-smi -i N` "
                "logged another GPU)"))
    return idx


def interleaved_gpus(t: np.ndarray, max_gpus: int = 16, share: float = 0.9) -> int | None:
    """k when sample times go round-robin over k >= 2 GPUs, else None.

    Steps between consecutive rows are cut into groups of k (at every offset); the log is
    interleaved when, in at least `share` of at least 3 groups, the k-1 first steps are each at
    most a quarter of the group's last, positive step (the loop interval). Repeated identical
    times count as tiny steps."""
    d = np.diff(t)
    for k in range(2, max_gpus + 1):
        groups = len(d) // k
        if groups < 3:
            break
        for off in range(k):
            g = (len(d) - off) // k
            if g < 3:
                continue
            block = d[off:off + g * k].reshape(g, k)
            last = block[:, -1]
            ok = (last > 0) & (block[:, :-1].max(axis=1) <= 0.25 * last)
            if ok.mean() >= share:
                return k
    return None


def _note_held_values(ctx: ReadContext, series: dict[str, Series]) -> None:
    """Say when a fast log (`-lms`) repeats the driver's last reading between its updates.

    Every sample is kept. The log energy is the trapezoid over all of them, in which a run of
    equal values is a flat segment: each held reading counts once, over the time it holds,
    however many times it was printed."""
    for op, s in sorted(series.items()):
        w = np.asarray(s.w)
        if len(w) < 2:
            continue
        readings = 1 + int(np.count_nonzero(w[1:] != w[:-1]))
        if len(w) >= 2 * readings:
            ctx.warn(f"{op}: {len(w)} power samples hold {readings} distinct readings (nvidia-smi repeats the "
                     "driver's last reading between its updates); all are kept, and each held value is "
                     "integrated once over the time it holds")


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
