"""genai-perf: `*_genai_perf.json` profile exports and the `*_genai_perf.csv` table export."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any, ClassVar

from xfid import units
from xfid.adapters import jsonutil
from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.schema import canonical_json

# metric name (JSON key, or the CSV label lower-cased with spaces -> _) -> canonical metric
METRICS: dict[str, str] = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "itl",
    "request_latency": "e2e_latency",
    "output_token_throughput": "throughput_tokens",
    "total_token_throughput": "throughput_total_tokens",
    "request_throughput": "throughput_requests",
    "request_goodput": "goodput_requests",
    "request_count": "requests_completed",
    "output_sequence_length": "output_tokens",  # per request: mean, pNN, ... (no `value` total)
    "input_sequence_length": "input_tokens",
    "num_output_token": "output_tokens",  # the same rows in genai-perf <= 0.0.3
    "num_input_token": "input_tokens",
    "gpu_power_usage": "power",
    "gpu_utilization": "utilization",
    "gpu_memory_used": "memory_used",
    "energy_consumption": "energy",
}
COUNTS = {"request_count"}
"""Metrics that are one number (stat `value`), whatever the stat key says."""
IMPLIED_UNIT = {"requests_completed": "count", "output_tokens": "tokens", "input_tokens": "tokens"}
"""Metrics whose CSV label may carry no `(unit)` (older versions: `Output Sequence Length`, `Request Count`)."""
GENERIC_RATE = {"per sec", "per second", "/sec", "/s", "1/s"}
"""Rate units that say nothing of what is counted: `Output Token Throughput (per sec)` is tokens/s."""
_LABEL = re.compile(r"^(?P<name>.+?)(?: \((?P<unit>[^)]*)\))?$")
_STAT = {"avg": "mean", "min": "min", "max": "max", "std": "std"}


def _stat(key: str) -> str | None:
    if key in _STAT:
        return _STAT[key]
    return key if re.fullmatch(r"p\d+(\.\d+)?", key) else None


def _metric(name: str) -> str:
    """The canonical metric of a genai-perf metric name; one xfid does not know is `genai_perf:<name>`."""
    return METRICS.get(name) or f"genai_perf:{name}"


def _unit(metric: str, unit: str) -> str:
    """The unit of a value: as written, except a bare rate (`per sec`) takes the metric's own unit."""
    if unit.strip().lower() in GENERIC_RATE and units.METRICS.get(metric) in ("token_rate", "request_rate"):
        return units.canonical_unit(metric)
    return unit


class GenaiPerfAdapter(Adapter):
    name = "genai-perf"
    fidelity = "measured"
    formats = "GenAI-Perf *_genai_perf.json / *_genai_perf.csv (TTFT, ITL, request latency, throughput, GPU telemetry)"
    extensions: ClassVar[tuple[str, ...]] = (".json", ".csv")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        from xfid.adapters.aiperf_detect import is_aiperf

        if is_aiperf(path, head):  # AIPerf's exports look alike; that adapter claims them
            return False
        t = head_text(head)
        s = t.lstrip()
        if s.startswith("{"):
            return '"avg"' in t and ('"time_to_first_token"' in t or '"request_latency"' in t)
        first = s.splitlines()[0] if s else ""
        return first.startswith("Metric,") and ("avg" in first or first.strip() == "Metric,Value")

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        text = read_text(ctx)
        out = Columns()
        if text.lstrip().startswith("{"):
            self._json(ctx, out)
        else:
            self._csv(ctx, text, out)
        if not len(out):
            raise ctx.error(None, "no GenAI-Perf metrics found",
                            "pass profile_export_genai_perf.json or .csv written by `genai-perf profile`")
        return out.cols

    # --- JSON ------------------------------------------------------------------------------
    def _json(self, ctx: ReadContext, out: Columns) -> None:
        objs = list(jsonutil.objects(ctx))
        if len(objs) != 1:
            raise ctx.error(objs[1][0], "expected one JSON object (a genai-perf profile export)")
        obj = objs[0][1]
        cfg = obj.get("input_config")
        config = _flat(cfg) if isinstance(cfg, dict) else {}
        config.update(ctx.meta)
        base = {"config": canonical_json(config), "software": "genai-perf", "run": ctx.run}
        for key, m in obj.items():
            if key in ("telemetry_stats", "input_config"):
                continue
            if not isinstance(m, dict) or ("unit" not in m and not any(_stat(k) for k in m)):
                ctx.skip_keys([key])  # not a metric object (a version string, a status, ...)
                continue
            if "unit" not in m:
                raise ctx.error(f"$.{key}", "metric object has no 'unit'", "genai-perf writes {unit, avg, ...}")
            self._stats(ctx, out, key, m, m["unit"], f"$.{key}", base)
        tel = obj.get("telemetry_stats")
        if isinstance(tel, dict):
            for key, m in tel.items():
                if not isinstance(m, dict):
                    raise ctx.error(f"$.telemetry_stats.{key}", f"expected an object, got {m!r}")
                unit = m.get("unit")
                for gpu, stats in m.items():
                    if gpu == "unit":
                        continue
                    if not isinstance(stats, dict):
                        raise ctx.error(f"$.telemetry_stats.{key}.{gpu}", f"expected stats, got {stats!r}")
                    self._stats(ctx, out, key, stats, unit, f"$.telemetry_stats.{key}.{gpu}", {**base, "op": gpu})
        _per_joule(out, base)

    def _stats(self, ctx: ReadContext, out: Columns, key: str, m: dict[str, Any], unit: Any, loc: str,
               base: dict[str, Any]) -> None:
        if not isinstance(unit, str):
            raise ctx.error(f"{loc}.unit", f"unit must be text, got {unit!r}")
        vals = {k: jsonutil.number(ctx, m, k, f"{loc}.{k}") for k in m if _stat(k)}
        ctx.skip_keys((k for k in m if k != "unit" and not _stat(k)), prefix=f"{loc}.")
        self._emit(out, key, vals, unit, loc, base)

    @staticmethod
    def _emit(out: Columns, key: str, vals: dict[str, float | None], unit: str, loc: str,
              base: dict[str, Any], sep: str = ".") -> None:
        metric = _metric(key)
        unit = _unit(metric, unit) if unit.strip() else IMPLIED_UNIT.get(metric, unit)
        if key == "energy_consumption":  # a counter since driver load, sampled: max - min is the energy
            hi, lo = vals.get("max"), vals.get("min")
            if hi is not None and lo is not None:
                out.add("energy", "value", hi - lo, unit, f"{loc}: max - min", **base)
            return
        for k, v in vals.items():
            stat = "value" if key in COUNTS else _stat(k) or k  # vals holds stat columns only
            out.add(metric, stat, v, unit, f"{loc}{sep}{k}", null_reason=None if v is not None else "null in file",
                    **base)

    # --- CSV -------------------------------------------------------------------------------
    def _csv(self, ctx: ReadContext, text: str, out: Columns) -> None:
        base = {"config": canonical_json(dict(ctx.meta)), "software": "genai-perf (csv)", "run": ctx.run}
        header: list[str] | None = None
        for lineno, row in enumerate(csv.reader(io.StringIO(text)), 1):
            loc = f"line {lineno}"
            if not row or not any(c.strip() for c in row):
                header = None
                continue
            if row[0] == "Metric":
                header = [c.strip() for c in row]
                bad = [c for c in header[1:] if c not in ("GPU", "Value") and not _stat(c)]
                if bad:
                    raise ctx.error(loc, f"unknown column {bad[0]!r} in a Metric header",
                                    "expected Metric,avg,min,max,p99,..., Metric,Value or Metric,GPU,avg,...")
                continue
            if header is None:
                raise ctx.error(loc, f"expected a 'Metric,...' header row, got {','.join(row)[:60]!r}",
                                "pass the CSV written by `genai-perf profile`")
            if len(row) != len(header):
                raise ctx.error(loc, f"expected {len(header)} fields like the header, got {len(row)}",
                                "the file may be truncated")
            m = _LABEL.match(row[0].strip())
            key = re.sub(r"[^a-z0-9]+", "_", m["name"].lower()).strip("_") if m else ""
            if not m or not key or (m["unit"] is None and _metric(key) not in IMPLIED_UNIT):
                raise ctx.error(loc, f"metric label {row[0]!r} has no '(unit)'", "e.g. 'Time To First Token (ms)'")
            unit = m["unit"] or ""
            rowbase = dict(base)
            vals: dict[str, float | None] = {}
            for col, cell in zip(header[1:], row[1:], strict=True):
                if col == "GPU":
                    rowbase["op"] = cell.strip()
                    continue
                vals["avg" if col == "Value" else col] = _csv_number(ctx, cell, f"{loc}, {col}")
            self._emit(out, key, vals, unit, f"{loc}, {row[0].strip()}", rowbase, sep=", ")
        _per_joule(out, base)


def _csv_number(ctx: ReadContext, cell: str, loc: str) -> float | None:
    c = cell.strip()
    if c in ("", "N/A", "n/a"):
        return None
    try:
        return float(c.replace(",", ""))  # genai-perf writes "1,234.56"
    except ValueError:
        raise ctx.error(loc, f"{cell!r} is not a number") from None


def _per_joule(out: Columns, base: dict[str, Any]) -> None:
    """tokens/J = output tokens/s over the summed mean GPU power of the same profile."""
    c = out.cols
    rows = range(len(out))
    tput = [c["value"][i] for i in rows if c["metric"][i] == "throughput_tokens" and c["stat"][i] == "mean"]
    power = [(c["op"][i], c["value"][i]) for i in rows if c["metric"][i] == "power" and c["stat"][i] == "mean"]
    if len(tput) == 1 and tput[0] and power and all(p is not None for _, p in power) and sum(p for _, p in power):
        total = sum(p for _, p in power)
        gpus = ", ".join(op for op, _ in power)
        out.add("tokens_per_joule", "value", tput[0] / total, "tokens/J",
                f"output_token_throughput.avg / sum(gpu_power_usage avg over {gpus})", **base)


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalars of input_config (lists of scalars joined), nested keys as a.b."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict) and len(prefix.split(".")) < 4:
            out.update(_flat(v, name + "."))
        elif isinstance(v, list) and all(isinstance(x, (str, int, float)) for x in v):
            out[name] = ",".join(map(str, v))
        elif isinstance(v, (str, int, float, bool)):
            out[name] = v
    return out


__all__ = ["GenaiPerfAdapter"]
