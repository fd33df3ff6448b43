"""dcgm-exporter: a Prometheus text dump of `curl <host>:9400/metrics` (DCGM_FI_* gauges and counters).

A separate adapter from `dcgm` (which reads `dcgmi dmon` text): the syntax (Prometheus
exposition lines with labels), the identity of a GPU (labels `gpu`, `UUID`, `GPU_I_ID`,
`Hostname`) and the time model differ, but the metric names are the same where the DCGM field
is (`power`, `clock`, `dcgm:sm_active` ...), so the two tools' numbers compare.

What a dump is and is not:

* one scrape: every series is **one sample** per GPU. A dump carries no time (dcgm-exporter
  does not write Prometheus sample timestamps); the sample time comes from `--option
  timestamp=ISO-TIME` (or `options.timestamp` in xfid-source.toml), or the `Date:` of a dump
  saved with `curl -i` (response headers first), else the records are one
  sample without a time (flag `no_sample_time`, said in the ingest summary) and are never
  placed in a benchmark window;
* profiling fields (`DCGM_FI_PROF_*`) are 0-1 ratios even where the help text says "(in %)";
* `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` is a counter in mJ since boot (driver load): one
  reading says nothing about a run. It is kept as `dcgm:total_energy` with scope `counter`;
  several timestamped dumps of one host make a series, and the energy over a benchmark window
  is the *difference* of the readings (`xfid.power`), never a sum;
* other `TYPE counter` series (throttle times, error counts) are kept with scope `counter`.

op: `gpu<gpu>`, `gpu<gpu>/gi<GPU_I_ID>` for a MIG GPU instance, prefixed `<Hostname>/` when one
file holds several hosts. Series without a `gpu` label (not tied to a GPU) and non-DCGM series
(`go_*`, `process_*`) are listed as skipped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.adapters.dcgm import SENTINEL_MIN
from xfid.power import NO_SAMPLE_TIME
from xfid.schema import canonical_json

# DCGM field (after DCGM_FI_) -> (metric, unit). Same metric names as the dmon adapter.
FIELDS: dict[str, tuple[str, str | None]] = {
    "DEV_POWER_USAGE": ("power", "W"),
    "DEV_TOTAL_ENERGY_CONSUMPTION": ("dcgm:total_energy", "mJ"),
    "DEV_SM_CLOCK": ("clock", "MHz"),
    "DEV_MEM_CLOCK": ("dcgm:mem_clock", "MHz"),
    "DEV_GPU_TEMP": ("temperature", "C"),
    "DEV_MEMORY_TEMP": ("dcgm:memory_temp", "C"),
    "DEV_SLOWDOWN_TEMP": ("dcgm:slowdown_temp", "C"),
    "DEV_GPU_UTIL": ("utilization", "%"),
    "DEV_MEM_COPY_UTIL": ("dcgm:mem_copy_util", "%"),
    "DEV_ENC_UTIL": ("dcgm:enc_util", "%"),
    "DEV_DEC_UTIL": ("dcgm:dec_util", "%"),
    "DEV_FB_USED": ("memory_used", "MiB"),
    "DEV_FB_FREE": ("dcgm:fb_free", "MiB"),
    "DEV_FB_TOTAL": ("dcgm:fb_total", "MiB"),
    "DEV_FB_RESERVED": ("dcgm:fb_reserved", "MiB"),
    "DEV_FB_USED_PERCENT": ("dcgm:fb_used_percent", "ratio"),  # DCGM: Used/(Total-Reserved), 0.0-1.0
    "DEV_POWER_MGMT_LIMIT": ("dcgm:power_mgmt_limit", "W"),
    "DEV_PCIE_TX_THROUGHPUT": ("dcgm:pcie_tx_throughput", "KB/s"),  # field 200, DCGM unit KB/s
    "DEV_PCIE_RX_THROUGHPUT": ("dcgm:pcie_rx_throughput", "KB/s"),
    "PROF_PCIE_TX_BYTES": ("dcgm:pcie_tx_bytes", "B/s"),  # field 1009: a rate, whatever TYPE says
    "PROF_PCIE_RX_BYTES": ("dcgm:pcie_rx_bytes", "B/s"),
    "PROF_NVLINK_TX_BYTES": ("dcgm:nvlink_tx_bytes", "B/s"),
    "PROF_NVLINK_RX_BYTES": ("dcgm:nvlink_rx_bytes", "B/s"),
    "PROF_GR_ENGINE_ACTIVE": ("dcgm:gr_engine_active", "ratio"),
    "PROF_SM_ACTIVE": ("dcgm:sm_active", "ratio"),
    "PROF_SM_OCCUPANCY": ("dcgm:sm_occupancy", "ratio"),
    "PROF_PIPE_TENSOR_ACTIVE": ("dcgm:tensor_active", "ratio"),
    "PROF_DRAM_ACTIVE": ("dcgm:dram_active", "ratio"),
    "PROF_PIPE_FP64_ACTIVE": ("dcgm:fp64_active", "ratio"),
    "PROF_PIPE_FP32_ACTIVE": ("dcgm:fp32_active", "ratio"),
    "PROF_PIPE_FP16_ACTIVE": ("dcgm:fp16_active", "ratio"),
}
RATE_FIELDS = frozenset(k for k, (_, u) in FIELDS.items() if u and u.endswith("/s"))
"""Fields that are rates although some dcgm-exporter versions declare them `counter`."""
COUNTER_SCOPE = "counter"
# label -> config key; the rest of the labels (pod, namespace, DCGM_FI_* info ...) are kept as they are
_LABEL_KEYS = {"UUID": "uuid", "modelName": "name", "Hostname": "hostname", "pci_bus_id": "pci_bus_id",
               "device": "device", "GPU_I_PROFILE": "mig_profile", "GPU_I_ID": "mig_instance",
               "DCGM_FI_DRIVER_VERSION": "driver_version"}
_POD_LABELS = frozenset({"pod", "namespace", "container"})
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|\})')
_META = re.compile(r"^#\s*(HELP|TYPE)\s+(\S+)\s*(.*)$")
_IN_UNIT = re.compile(r"\(in ([^()]+)\)")
_UNIT_WORDS = {"%", "W", "mJ", "MHz", "C", "MiB", "KB", "us", "ms", "s", "B"}


class DcgmExporterAdapter(Adapter):
    name = "dcgm-exporter"
    fidelity = "measured"
    formats = ("dcgm-exporter /metrics dump (Prometheus text: DCGM_FI_* gauges and counters, labels gpu/UUID/"
               "modelName/Hostname/pod; one sample per dump, time from --option timestamp)")
    extensions: ClassVar[tuple[str, ...]] = (".txt", ".prom", ".metrics", "")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        lines = head_text(head).splitlines()
        if lines and lines[0].startswith("HTTP/"):  # `curl -i`: the response headers first
            lines = lines[next((i for i, x in enumerate(lines) if not x.strip()), len(lines)):]
        for line in lines[:50]:
            s = line.strip()
            if s.startswith(("# HELP DCGM_", "# TYPE DCGM_", "DCGM_FI_", "DCGM_EXP_")):
                return True
            if s and not s.startswith("#"):
                return False
        return False

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        lines = read_text(ctx).splitlines()
        when = _timestamp(ctx)
        body = _skip_http_headers(ctx, lines)
        self._time_base = "prometheus sample timestamp"
        if when is None and body.date is not None:
            when = body.date
            self._time_base = "HTTP Date header (curl -i)"
            ctx.warn(f"the sample time {when.isoformat()} is the HTTP Date header (line {body.date_line})")
        helps: dict[str, str] = {}
        types: dict[str, str] = {}
        samples: list[tuple[int, str, dict[str, str], str, int | None]] = []
        for lineno, line in enumerate(lines, 1):
            s = line.strip()
            if not s or lineno <= body.first_line:
                continue
            if s.startswith("#"):
                m = _META.match(s)
                if m:
                    (helps if m[1] == "HELP" else types)[m[2]] = m[3].strip()
                continue  # other comments (# NOTE ...) say nothing about a sample
            samples.append((lineno, *_sample(ctx, lineno, s)))
        if not samples:
            raise ctx.error(None, "no samples: only comments or blank lines",
                            "pass the text of `curl <host>:9400/metrics` taken while dcgm-exporter runs")
        hosts = {lab.get("Hostname", "") for _, name, lab, _, _ in samples if "gpu" in lab}
        if len(hosts) > 1:
            ctx.warn(f"{len(hosts)} hosts in one dump ({', '.join(sorted(h or '(none)' for h in hosts))}): "
                     "ops are named <Hostname>/gpu<N>")
        out = Columns()
        seen: dict[tuple[str, str], tuple[int, dict[str, str]]] = {}
        for lineno, name, labels, cell, ts_ms in samples:
            loc = f"line {lineno}, {name}"
            if not name.startswith(("DCGM_FI_", "DCGM_EXP_")):
                ctx.skip_keys([name], prefix="series ")
                continue
            if "gpu" not in labels:
                ctx.skip(loc, "no gpu label: the series is not tied to a GPU")
                continue
            op = _op(labels, len(hosts) > 1)
            if (op, name) in seen:
                first, first_labels = seen[op, name]
                if _without_pods(first_labels) == _without_pods(labels) and first_labels != labels:
                    ctx.skip(loc, f"the same GPU series as line {first}, for another pod (a shared GPU): kept once")
                    continue
                raise ctx.error(f"line {lineno}", f"{name} of {op} already appeared on line {first}",
                                "one scrape per file: write each dump to its own file "
                                "(curl -s host:9400/metrics > dump-$(date +%s).txt) and give each its time")
            seen[op, name] = (lineno, labels)
            self._add(ctx, out, loc, name, labels, cell, op, _sample_time(when, ts_ms), helps, types)
        if not out:
            raise ctx.error(None, "no DCGM series with a gpu label", "pass a dcgm-exporter /metrics dump")
        if when is None and not any(ts for *_, ts in samples):
            ctx.warn("one sample: the dump has no time, so its records carry no sample time (flag "
                     f"{NO_SAMPLE_TIME}); pass --option timestamp=ISO-TIME (or set options.timestamp in "
                     "xfid-source.toml) to place it in time, e.g. to use several dumps as a series")
        return out.cols

    def _add(self, ctx: ReadContext, out: Columns, loc: str, name: str, labels: dict[str, str], cell: str,
             op: str, ts: str | None, helps: dict[str, str], types: dict[str, str]) -> None:
        field = name.removeprefix("DCGM_FI_")
        metric, unit = FIELDS.get(field) or _generic(name, helps.get(name, ""))
        cfg: dict[str, Any] = {_LABEL_KEYS.get(k, k): v for k, v in labels.items() if k != "gpu"}
        cfg.update({"tool": "dcgm-exporter", "gpu": labels["gpu"], "prometheus_type": types.get(name, "untyped")})
        if types.get(name) == "counter" and field not in RATE_FIELDS:
            cfg["scope"] = COUNTER_SCOPE
        cfg["time_base"] = ("option timestamp" if ctx.options.get("timestamp") else self._time_base) if ts else \
            "none: one sample without a time"
        driver = labels.get("DCGM_FI_DRIVER_VERSION")
        base = {"op": op, "timestamp": ts, "flags": None if ts else NO_SAMPLE_TIME, "config": canonical_json(cfg),
                "hardware": labels.get("modelName") or None, "n_samples": 1,
                "software": "dcgm-exporter" + (f" (driver {driver})" if driver else "")}
        v = _value(ctx, loc, cell)
        if v is None or math.isnan(v):
            out.add(metric, "value", None, unit, loc, null_reason=f"{cell} in file", **base)
        elif abs(v) >= SENTINEL_MIN:
            out.add(metric, "value", None, unit, loc, null_reason=f"DCGM blank sentinel {cell}", **base)
        else:
            out.add(metric, "value", v, unit, loc, **base)


@dataclass
class _Body:
    """Where the exposition text starts (after `curl -i` response headers), and their Date."""

    first_line: int = 0
    date: datetime | None = None
    date_line: int = 0


def _skip_http_headers(ctx: ReadContext, lines: list[str]) -> _Body:
    """`curl -i host:9400/metrics` writes the response headers first; their `Date:` is when the
    exporter answered, to the second: the dump's sample time when no option gives one."""
    if not lines or not lines[0].startswith("HTTP/"):
        return _Body()
    body = _Body()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            body.first_line = lineno
            return body
        key, _, value = line.partition(":")
        if key.strip().lower() == "date":
            try:
                body.date = parsedate_to_datetime(value.strip()).astimezone(UTC)
                body.date_line = lineno
            except (TypeError, ValueError):
                raise ctx.error(f"line {lineno}", f"HTTP Date header {value.strip()!r} is not a date",
                                "pass --option timestamp=ISO-TIME, or save the dump without -i") from None
    raise ctx.error(None, "HTTP response headers without the metrics after them (no blank line)",
                    "save the whole response: curl -si host:9400/metrics > dump.txt")


def _sample(ctx: ReadContext, lineno: int, s: str) -> tuple[str, dict[str, str], str, int | None]:
    """(name, labels, value text, timestamp ms or None) of one exposition line."""
    m = _NAME.match(s)
    if not m:
        raise ctx.error(f"line {lineno}", f"not a Prometheus sample line: {s[:80]!r}",
                        "expected e.g. DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-...\"} 61.5")
    name, rest = m.group(), s[m.end():]
    labels: dict[str, str] = {}
    if rest.startswith("{"):
        pos = 1
        while True:
            while pos < len(rest) and rest[pos].isspace():
                pos += 1
            if rest[pos:pos + 1] == "}":  # `{}` or a trailing comma
                pos += 1
                break
            lm = _LABEL.match(rest, pos)
            if not lm:
                raise ctx.error(f"line {lineno}", f"{name}: bad label set {rest[:80]!r}",
                                "labels look like {gpu=\"0\",UUID=\"GPU-...\"}; the line may be cut short")
            labels[lm[1]] = _unescape(lm[2])
            pos = lm.end()
            if lm[3] == "}":
                break
        rest = rest[pos:]
    parts = rest.split()
    if len(parts) not in (1, 2):
        raise ctx.error(f"line {lineno}", f"{name}: expected a value (and an optional timestamp), got {rest!r}")
    ts = None
    if len(parts) == 2:
        if not re.fullmatch(r"-?\d+", parts[1]):
            raise ctx.error(f"line {lineno}", f"{name}: sample timestamp {parts[1]!r} is not whole milliseconds")
        ts = int(parts[1])
    return name, labels, parts[0], ts


def _without_pods(labels: dict[str, str]) -> dict[str, str]:
    """The labels that name the GPU: a GPU shared by pods is exported once per pod."""
    return {k: v for k, v in labels.items() if k not in _POD_LABELS}


def _unescape(v: str) -> str:
    return v.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


def _value(ctx: ReadContext, loc: str, cell: str) -> float | None:
    if cell in ("NaN", "+Inf", "-Inf", "Inf"):
        return None
    try:
        return float(cell)
    except ValueError:
        raise ctx.error(loc, f"value {cell!r} is not a number") from None


def _op(labels: dict[str, str], with_host: bool) -> str:
    op = f"gpu{labels['gpu']}"
    if labels.get("GPU_I_ID"):
        op += f"/gi{labels['GPU_I_ID']}"
    return f"{labels.get('Hostname') or 'unknown-host'}/{op}" if with_host else op


def _generic(name: str, help_text: str) -> tuple[str, str | None]:
    """A DCGM series xfid has no entry for: `dcgm:<field>`, unit from the help's "(in X)".

    Profiling fields are ratios whatever the help says; "(in %)" elsewhere is a percentage."""
    field = name.removeprefix("DCGM_FI_").removeprefix("DEV_").lower()
    metric = f"dcgm:{field}" if not name.startswith("DCGM_EXP_") else f"dcgm:{name.removeprefix('DCGM_').lower()}"
    if name.startswith("DCGM_FI_PROF_") and name.endswith(("_ACTIVE", "_OCCUPANCY")):
        return metric, "ratio"
    m = _IN_UNIT.search(help_text)
    unit = m.group(1).strip() if m else None
    return metric, unit if unit in _UNIT_WORDS else None


def _timestamp(ctx: ReadContext) -> datetime | None:
    raw = ctx.options.get("timestamp")
    if not raw:
        return None
    try:
        t = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        raise ctx.error("option timestamp", f"{raw!r} is not an ISO 8601 time like 2026-03-01T00:00:00Z",
                        "the time the dump was taken (curl's run time)") from None
    return t.replace(tzinfo=t.tzinfo or UTC).astimezone(UTC)


def _sample_time(when: datetime | None, ts_ms: int | None) -> str | None:
    if when is not None:
        return when.isoformat()
    if ts_ms is not None:
        return datetime.fromtimestamp(ts_ms / 1000, UTC).isoformat()
    return None


__all__ = ["DcgmExporterAdapter"]
