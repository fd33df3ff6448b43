"""aiperf: NVIDIA AIPerf `profile_export_aiperf.json` and `profile_export_aiperf.csv`.

AIPerf is GenAI-Perf's successor and writes files of a similar look, so the two adapters
split them by what only AIPerf writes (see `is_aiperf`): a JSON export with
`"aiperf_version"`, or AIPerf's first JSON layout (`{"records": {tag: {tag, unit, header,
avg, ...}}}`), or a CSV whose `Metric,...` header has a `std` or `sum` column (GenAI-Perf's
has neither); a file named `*_aiperf.json` / `*_aiperf.csv` is AIPerf's whatever its head
holds. Everything else of that look stays GenAI-Perf's.

The CSV has sections split by blank lines: per-request statistics (`Metric,avg,min,max,sum,
p1,...,std`), single values (`Metric,Value`) and GPU telemetry (`Endpoint,GPU_Index,GPU_Name,
GPU_UUID,[Platform,]Metric,avg,...`; AIPerf writes that header even when no GPU was
sampled). Units are only in the labels (`Time to First Token (ms)`, `HTTP Duration (excl.
conn) (ms)`); a label without one (`Request Count`, `HTTP Chunks Received`) is a count.
AIPerf's `KB`/`MB`/`GB` are binary (1024 bytes per KB in its `MetricSizeUnit`), so they are
read as KiB/MiB/GiB. Both files name the same metrics, so a CSV row and its JSON key become
the same xfid metric (`METRICS`); one xfid does not know becomes `aiperf:<json tag>`.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters import jsonutil
from xfid.adapters.aiperf_detect import is_aiperf  # the sniff, shared with genai-perf
from xfid.adapters.base import Adapter, Columns, ReadContext, read_text
from xfid.adapters.genai_perf import _csv_number, _flat
from xfid.schema import canonical_json

# json tag -> (CSV label without the unit, xfid metric)
METRICS: dict[str, tuple[str, str]] = {
    "time_to_first_token": ("Time to First Token", "ttft"),
    "time_to_second_token": ("Time to Second Token", "aiperf:time_to_second_token"),
    "time_to_first_output_token": ("Time to First Output Token", "aiperf:time_to_first_output_token"),
    "inter_token_latency": ("Inter Token Latency", "itl"),
    "inter_chunk_latency": ("Inter Chunk Latency", "aiperf:inter_chunk_latency"),
    "request_latency": ("Request Latency", "e2e_latency"),
    "request_throughput": ("Request Throughput", "throughput_requests"),
    "request_goodput": ("Request Goodput", "goodput_requests"),
    "output_token_throughput": ("Output Token Throughput", "throughput_tokens"),
    "total_token_throughput": ("Total Token Throughput", "throughput_total_tokens"),
    "output_token_throughput_per_user": ("Output Token Throughput Per User",
                                         "aiperf:output_token_throughput_per_user"),
    "prefill_throughput_per_user": ("Prefill Throughput Per User", "aiperf:prefill_throughput_per_user"),
    "e2e_output_token_throughput": ("E2E Output Token Throughput", "aiperf:e2e_output_token_throughput"),
    "request_count": ("Request Count", "requests_completed"),
    "error_request_count": ("Error Request Count", "requests_failed"),
    "input_sequence_length": ("Input Sequence Length", "input_tokens"),
    "output_sequence_length": ("Output Sequence Length", "output_tokens"),
    "benchmark_duration": ("Benchmark Duration", "duration"),
    "total_isl": ("Total Input Sequence Length", "aiperf:total_isl"),
    "total_osl": ("Total Output Sequence Length", "aiperf:total_osl"),
    "error_isl": ("Error Input Sequence Length", "aiperf:error_isl"),
    "total_error_isl": ("Total Error Input Sequence Length", "aiperf:total_error_isl"),
    "osl_mismatch_diff_pct": ("OSL Mismatch Diff %", "aiperf:osl_mismatch_diff_pct"),
    "http_req_blocked": ("HTTP Blocked", "aiperf:http_req_blocked"),
    "http_req_chunks_received": ("HTTP Chunks Received", "aiperf:http_req_chunks_received"),
    "http_req_chunks_sent": ("HTTP Chunks Sent", "aiperf:http_req_chunks_sent"),
    "http_req_connecting": ("HTTP Connecting", "aiperf:http_req_connecting"),
    "http_req_connection_overhead": ("HTTP Connection Overhead", "aiperf:http_req_connection_overhead"),
    "http_req_connection_reused": ("HTTP Connection Reused", "aiperf:http_req_connection_reused"),
    "http_req_data_received": ("HTTP Data Received", "aiperf:http_req_data_received"),
    "http_req_data_sent": ("HTTP Data Sent", "aiperf:http_req_data_sent"),
    "http_req_dns_lookup": ("HTTP DNS Lookup", "aiperf:http_req_dns_lookup"),
    "http_req_duration": ("HTTP Duration (excl. conn)", "aiperf:http_req_duration"),
    "http_req_receiving": ("HTTP Receiving", "aiperf:http_req_receiving"),
    "http_req_sending": ("HTTP Sending", "aiperf:http_req_sending"),
    "http_req_total": ("HTTP Total Time", "aiperf:http_req_total"),
    "http_req_waiting": ("HTTP Waiting (TTFB)", "aiperf:http_req_waiting"),
}
OLD_TAGS = {"ttft": "time_to_first_token", "ttst": "time_to_second_token"}
"""Tags of AIPerf's first JSON layout (`records`) that later versions spell out."""
TIMESTAMPS = {"min_request_timestamp": "Minimum Request Timestamp",
              "max_response_timestamp": "Maximum Response Timestamp"}
"""Nanoseconds since the epoch: not measurements; the first dates the records, both go to config."""
RUN_KEYS = frozenset({"records", "input_config", "schema_version", "aiperf_version", "benchmark_id",
                      "start_time", "end_time", "was_cancelled", "error_summary", "telemetry_data", "run_info"})
"""Top-level keys that are not metric objects and are read (into config, or the ingest notes)."""
_BY_LABEL = {label: tag for tag, (label, _) in METRICS.items()} | {v: k for k, v in TIMESTAMPS.items()}
RATES = {"throughput_requests", "goodput_requests", "throughput_tokens", "throughput_total_tokens"}
"""Single-value metrics kept as stat `mean`, as the genai-perf adapter keeps the same numbers."""
UNITS = {"KB": "KiB", "MB": "MiB", "GB": "GiB", "TB": "TiB", "requests": "count", "": "count"}
"""AIPerf unit -> xfid unit: its byte sizes are binary; a request count and a label without a
unit are counts. Every other unit is passed as written and converted by xfid.units."""
TELEMETRY: dict[str, str] = {
    "GPU Power Usage": "power", "Energy Consumption": "energy", "GPU Utilization": "utilization",
    "GPU Memory Used": "memory_used", "GPU Temperature": "temperature",
}
"""GPU telemetry label (a platform prefix such as `NVIDIA ` removed) -> xfid metric."""
_LABEL = re.compile(r"^(?P<name>.+?)(?: \((?P<unit>[^()]*)\))?$")
_STAT = {"avg": "mean", "min": "min", "max": "max", "std": "std", "sum": "sum"}
_TELEMETRY_KEYS = ("Endpoint", "GPU_Index", "GPU_Name", "GPU_UUID", "Platform")


def _stat(key: str) -> str | None:
    """The xfid stat of an AIPerf stat key (`avg`, `p99`, `sum`, ...); None for `count`, `unit`, ..."""
    if key in _STAT:
        return _STAT[key]
    return key if re.fullmatch(r"p\d+(\.\d+)?", key) else None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _metric(tag: str) -> str:
    return METRICS[tag][1] if tag in METRICS else f"aiperf:{tag}"


def _unit(unit: str) -> str:
    return UNITS.get(unit.strip(), unit.strip())


def _iso_ns(ns: float) -> str:
    """An epoch-nanosecond time as ISO text (UTC), to the microsecond."""
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat()


class AiperfAdapter(Adapter):
    name = "aiperf"
    fidelity = "measured"
    formats = ("AIPerf profile_export_aiperf.json / profile_export_aiperf.csv (TTFT, time to second token, "
               "ITL, request latency, throughput and per-user throughput, OSL mismatch, HTTP timings, "
               "GPU telemetry)")
    extensions: ClassVar[tuple[str, ...]] = (".json", ".csv")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return is_aiperf(path, head)

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        text = read_text(ctx)
        out = Columns()
        if text.lstrip().startswith("{"):
            self._json(ctx, out)
        else:
            self._csv(ctx, text, out)
        if not len(out):
            raise ctx.error(None, "no AIPerf metrics found",
                            "pass profile_export_aiperf.json or .csv written by `aiperf profile`")
        return out.cols

    # --- JSON ------------------------------------------------------------------------------
    def _json(self, ctx: ReadContext, out: Columns) -> None:
        obj = jsonutil.loads(ctx, jsonutil.read_bounded(ctx).strip(), None)
        if not isinstance(obj, dict):
            raise ctx.error(None, f"expected one JSON object (an AIPerf profile export), got {type(obj).__name__}")
        records = obj.get("records")
        layout = records if isinstance(records, dict) else obj
        cfg = obj.get("input_config")
        config: dict[str, Any] = _flat(cfg) if isinstance(cfg, dict) else {}
        run_info = obj.get("run_info")
        if isinstance(run_info, dict):
            config.update(_flat(run_info, "run_info."))
        for key in ("benchmark_id", "start_time", "end_time"):
            if isinstance(obj.get(key), (str, int, float)):
                config[key] = obj[key]
        version = obj.get("aiperf_version")
        software = f"aiperf {version}" if isinstance(version, str) else "aiperf"
        prefix = "$.records." if layout is records else "$."
        timestamp = self._json_times(ctx, layout, config, prefix)
        self._run_notes(ctx, obj)
        config.update(ctx.meta)
        base = {"config": canonical_json(config), "software": software, "run": ctx.run, "timestamp": timestamp}
        for key, m in layout.items():
            if key in TIMESTAMPS or (layout is obj and key in RUN_KEYS):
                continue
            if not isinstance(m, dict) or "unit" not in m:
                ctx.skip_keys([key], prefix=prefix)  # not a metric object (telemetry_data, run_info, ...)
                continue
            self._stats(ctx, out, OLD_TAGS.get(key) or str(key), m, f"{prefix}{key}", base)
        if layout is records:
            ctx.skip_keys((k for k in obj if k not in RUN_KEYS), prefix="$.")
        self._json_telemetry(ctx, obj)

    @staticmethod
    def _json_times(ctx: ReadContext, layout: dict[str, Any], config: dict[str, Any], prefix: str) -> str | None:
        """The first request's time (the records' timestamp); both epoch times go to config."""
        stamp = None
        for key in TIMESTAMPS:
            m = layout.get(key)
            if isinstance(m, dict):
                ns = jsonutil.number(ctx, m, "avg", f"{prefix}{key}.avg")
                if ns is not None:
                    config[f"{key}_ns"] = ns
                    if key == "min_request_timestamp":
                        stamp = _iso_ns(ns)
        return stamp

    @staticmethod
    def _run_notes(ctx: ReadContext, obj: dict[str, Any]) -> None:
        if obj.get("was_cancelled") is True:
            ctx.warn("the AIPerf run was cancelled (was_cancelled: true): its numbers cover part of the run")
        errors = obj.get("error_summary")
        if isinstance(errors, list) and errors:
            n = sum(e.get("count", 0) for e in errors if isinstance(e, dict) and isinstance(e.get("count"), int))
            ctx.warn(f"error_summary: {n} failed request(s) of {len(errors)} kind(s); the statistics cover "
                     "the successful ones")

    @staticmethod
    def _json_telemetry(ctx: ReadContext, obj: dict[str, Any]) -> None:
        tel = obj.get("telemetry_data")
        eps = tel.get("endpoints") if isinstance(tel, dict) else None
        if isinstance(eps, dict) and eps:
            ctx.skip_keys(eps, prefix="$.telemetry_data.endpoints.")
            ctx.warn("GPU telemetry in the JSON export is not read; ingest profile_export_aiperf.csv for it")

    def _stats(self, ctx: ReadContext, out: Columns, tag: str, m: dict[str, Any], loc: str,
               base: dict[str, Any]) -> None:
        unit = m["unit"]
        if not isinstance(unit, str):
            raise ctx.error(f"{loc}.unit", f"unit must be text, got {unit!r}")
        vals = {k: jsonutil.number(ctx, m, k, f"{loc}.{k}") for k in m if _stat(k)}
        count = m.get("count")
        n = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None
        ctx.skip_keys((k for k in m if k not in ("unit", "count", "tag", "header") and not _stat(k)),
                      prefix=f"{loc}.")
        _emit(out, tag, vals, unit, loc, {**base, "n_samples": n}, ".")

    # --- CSV -------------------------------------------------------------------------------
    def _csv(self, ctx: ReadContext, text: str, out: Columns) -> None:
        base = {"config": canonical_json(dict(ctx.meta)), "software": "aiperf (csv)", "run": ctx.run}
        header: list[str] | None = None
        for lineno, row in enumerate(csv.reader(io.StringIO(text)), 1):
            loc = f"line {lineno}"
            if not row or not any(c.strip() for c in row):
                header = None
                continue
            if row[0].strip() in ("Metric", "Endpoint") and header is None:
                header = self._header(ctx, row, loc)
                continue
            if header is None:
                raise ctx.error(loc, f"expected a 'Metric,...' header row, got {','.join(row)[:60]!r}",
                                "pass the CSV written by `aiperf profile`")
            if len(row) != len(header):
                raise ctx.error(loc, f"expected {len(header)} fields like the header, got {len(row)}",
                                "the file may be truncated")
            cells = dict(zip(header, (c.strip() for c in row), strict=True))
            self._csv_row(ctx, out, cells, header, loc, base)

    @staticmethod
    def _header(ctx: ReadContext, row: list[str], loc: str) -> list[str]:
        header = [c.strip() for c in row]
        if header[0] == "Endpoint" and "Metric" not in header:
            raise ctx.error(loc, "a GPU telemetry header without a 'Metric' column")
        fixed = set(_TELEMETRY_KEYS) | {"Metric", "Value"}
        bad = [c for c in header if c not in fixed and not _stat(c)]
        if bad:
            raise ctx.error(loc, f"unknown column {bad[0]!r} in an AIPerf header",
                            "expected Metric,avg,min,max,sum,p1,...,std, Metric,Value or "
                            "Endpoint,GPU_Index,GPU_Name,GPU_UUID,Metric,avg,...")
        return header

    def _csv_row(self, ctx: ReadContext, out: Columns, cells: dict[str, str], header: list[str], loc: str,
                 base: dict[str, Any]) -> None:
        label = cells["Metric"]
        m = _LABEL.match(label)
        if not m:
            raise ctx.error(loc, f"empty metric label {label!r}")
        name, unit = m["name"], m["unit"] or ""
        vals: dict[str, float | None] = {}
        for col in header:
            if col == "Value":
                vals["avg"] = _csv_number(ctx, cells[col], f"{loc}, {col}")
            elif _stat(col):
                vals[col] = _csv_number(ctx, cells[col], f"{loc}, {col}")
        where = f"{loc}, {label}"
        if "GPU_Index" in cells:
            self._telemetry_row(out, cells, name, unit, vals, where, base)
            return
        tag = _BY_LABEL.get(name) or _slug(name)
        if tag in TIMESTAMPS:
            return  # epoch times: the JSON export dates its records; the CSV row is not a measurement
        _emit(out, tag, vals, unit, where, base, ", ")

    @staticmethod
    def _telemetry_row(out: Columns, cells: dict[str, str], name: str, unit: str, vals: dict[str, float | None],
                       where: str, base: dict[str, Any]) -> None:
        platform = cells.get("Platform", "")
        plain = name[len(platform) + 1:] if platform and name.lower().startswith(platform.lower() + " ") else name
        metric = TELEMETRY.get(plain, f"aiperf:{_slug(plain)}")
        row = {**base, "op": f"gpu{cells['GPU_Index']}", "hardware": cells.get("GPU_Name") or None}
        if metric == "energy":  # a counter since driver load, sampled: max - min is the energy of the run
            hi, lo = vals.get("max"), vals.get("min")
            if hi is not None and lo is not None:
                out.add("energy", "value", hi - lo, _unit(unit), f"{where}: max - min", **row)
            return
        for k, v in vals.items():
            out.add(metric, _stat(k) or k, v, _unit(unit), f"{where}, {k}",
                    null_reason=None if v is not None else "empty in file", **row)


def _single(vals: dict[str, float | None]) -> bool:
    """A one-number metric: only `avg` holds a value (the others absent or null)."""
    return vals.get("avg") is not None and all(v is None for k, v in vals.items() if k != "avg")


def _emit(out: Columns, tag: str, vals: dict[str, float | None], unit: str, loc: str, base: dict[str, Any],
          sep: str) -> None:
    metric = _metric(tag)
    unit = _unit(unit)
    if _single(vals):
        stat = "mean" if metric in RATES else "value"
        out.add(metric, stat, vals["avg"], unit, f"{loc}{sep}avg" if sep == "." else loc,
                **{**base, "n_samples": None})
        return
    for k, v in vals.items():
        out.add(metric, _stat(k) or k, v, unit, f"{loc}{sep}{k}",
                null_reason=None if v is not None else "empty in file", **base)


__all__ = ["AiperfAdapter", "is_aiperf"]
