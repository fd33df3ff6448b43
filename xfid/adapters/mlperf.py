"""mlperf: MLPerf Inference loadgen `mlperf_log_summary.txt` and `mlperf_log_detail.txt`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.schema import canonical_json

_PCT = r"(\d+\.\d+)"
# summary key (regex, case-insensitive) -> (metric, stat or None = from the percentile group, unit)
SUMMARY: list[tuple[re.Pattern[str], str, str | None, str]] = [
    (re.compile(p, re.I), m, s, u) for p, m, s, u in [
        (r"^(?:completed )?samples per second$", "throughput_samples", "mean", "samples/s"),
        (r"^scheduled samples per second$", "mlperf:scheduled_samples_per_second", "mean", "samples/s"),
        (r"^(?:completed )?tokens per second$", "throughput_tokens", "mean", "tokens/s"),
        (r"^(min|max|mean) latency \(ns\)$", "e2e_latency", None, "ns"),
        (rf"^{_PCT} percentile latency \(ns\)$", "e2e_latency", None, "ns"),
        (r"^(min|max|mean) first token latency \(ns\)$", "ttft", None, "ns"),
        (rf"^{_PCT} percentile first token latency \(ns\)$", "ttft", None, "ns"),
        (r"^(min|max|mean) time to output token \(ns\)$", "tpot", None, "ns"),
        (rf"^{_PCT} percentile time to output token \(ns\)$", "tpot", None, "ns"),
    ]
]
# detail `result_*` key -> same scheme (loadgen results.cc names)
DETAIL: list[tuple[re.Pattern[str], str, str | None, str]] = [
    (re.compile(p), m, s, u) for p, m, s, u in [
        (r"^result_(?:completed_)?samples_per_sec(?:ond)?$", "throughput_samples", "mean", "samples/s"),
        (r"^result_scheduled_samples_per_sec$", "mlperf:scheduled_samples_per_second", "mean", "samples/s"),
        (r"^result_(?:completed_)?tokens_per_second$", "throughput_tokens", "mean", "tokens/s"),
        (r"^result_(min|max|mean)_latency_ns$", "e2e_latency", None, "ns"),
        (rf"^result_{_PCT}_percentile_latency_ns$", "e2e_latency", None, "ns"),
        (r"^result_first_token_(min|max|mean)_latency_ns$", "ttft", None, "ns"),
        (rf"^result_first_token_{_PCT}_percentile_latency_ns$", "ttft", None, "ns"),
        (r"^result_time_to_output_token_(min|max|mean)$", "tpot", None, "ns"),
        (rf"^result_time_per_output_token_{_PCT}_percentile_ns$", "tpot", None, "ns"),
    ]
]
SECTIONS = ("MLPerf Results Summary", "Additional Stats", "Test Parameters Used")
CONFIG_SUMMARY = {"sut name": "sut_name", "scenario": "scenario", "mode": "mode"}
CONFIG_DETAIL = {"effective_scenario": "scenario", "effective_test_mode": "mode", "loadgen_version": "loadgen_version",
                 "test_datetime": "test_datetime", "result_invalid_reason": "invalid_reason",
                 "result_query_count": "query_count", "effective_target_qps": "target_qps",
                 "effective_samples_per_query": "samples_per_query"}


def _stat(group: str | None, fixed: str | None) -> str:
    if fixed:
        return fixed
    assert group is not None
    if group.lower() in ("min", "max", "mean"):
        return group.lower()
    p = float(group)
    return f"p{p:g}"  # 50.00 -> p50, 99.90 -> p99.9


def _scalar(v: str) -> Any:
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


class MlperfAdapter(Adapter):
    name = "mlperf"
    fidelity = "measured"
    formats = "MLPerf Inference loadgen mlperf_log_summary.txt / mlperf_log_detail.txt (:::MLLOG lines)"
    extensions: ClassVar[tuple[str, ...]] = (".txt",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        return "MLPerf Results Summary" in t[:400] or t.lstrip().startswith(":::MLLOG")

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        text = read_text(ctx)
        if text.lstrip().startswith(":::MLLOG"):
            return self._detail(ctx, text)
        if "MLPerf Results Summary" not in text[:400]:
            raise ctx.error("line 1", "not an MLPerf loadgen summary: no 'MLPerf Results Summary' banner",
                            "pass mlperf_log_summary.txt or mlperf_log_detail.txt")
        return self._summary(ctx, text)

    def _summary(self, ctx: ReadContext, text: str) -> dict[str, list[Any]]:
        config: dict[str, Any] = {}
        params: dict[str, Any] = {}
        checks: dict[str, str] = {}
        found: list[tuple[str, str, float, str, str]] = []
        seen: dict[str, float] = {}
        section, result = "", None
        for lineno, line in enumerate(text.splitlines(), 1):
            s = line.strip()
            if not s or s.startswith("====="):
                continue
            if ":" not in s or s.startswith(("WARNING", "ERROR", "*")):
                section = s if s in SECTIONS else section
                continue
            key, _, val = (x.strip() for x in s.partition(":"))
            if not val:
                continue  # "TTFT Early Stopping Result:" heads a list of "* ..." lines
            loc = f"line {lineno}"
            if section == "Test Parameters Used":
                params[re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")] = _scalar(val)
                continue
            low = key.lower()
            if low in CONFIG_SUMMARY:
                config[CONFIG_SUMMARY[low]] = val
                continue
            if low == "result is":
                if val not in ("VALID", "INVALID"):
                    raise ctx.error(loc, f"'Result is' must be VALID or INVALID, got {val!r}")
                result = val
                continue
            if line.startswith("  ") and val in ("Yes", "NO", "No"):
                checks[key] = val
                continue
            for pat, metric, fixed, unit in SUMMARY:
                m = pat.match(key)
                if not m:
                    continue
                try:
                    v = float(val)
                except ValueError:
                    raise ctx.error(loc, f"{key!r} must be a number, got {val!r}") from None
                stat = _stat(m.group(1) if m.groups() else None, fixed)
                k = f"{metric}/{stat}"
                if k in seen:  # Server repeats "Completed tokens per second" under Additional Stats
                    if seen[k] != v:
                        raise ctx.error(loc, f"{key!r} = {val} contradicts the earlier value {seen[k]:g}")
                    break
                seen[k] = v
                found.append((metric, stat, v, unit, f"{loc}: {key}"))
                break
        if "scenario" not in config or result is None:
            raise ctx.error(None, "no 'Scenario' or 'Result is' line", "the summary is truncated or not from loadgen")
        config.update(result=result, test_parameters=params, checks=checks)
        return self._rows(ctx, found, config, result)

    def _detail(self, ctx: ReadContext, text: str) -> dict[str, list[Any]]:
        config: dict[str, Any] = {}
        found: list[tuple[str, str, float, str, str]] = []
        result = None
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            loc = f"line {lineno}"
            if not line.startswith(":::MLLOG "):
                raise ctx.error(loc, f"expected a ':::MLLOG {{...}}' line, got {line[:60]!r}")
            try:
                ev = json.loads(line[len(":::MLLOG "):])
            except ValueError as e:
                raise ctx.error(loc, f"not valid JSON after ':::MLLOG': {e}", "the file may be truncated") from None
            if not isinstance(ev, dict) or not isinstance(ev.get("key"), str) or "value" not in ev:
                raise ctx.error(loc, "an MLLOG event needs 'key' and 'value'")
            key, val = ev["key"], ev["value"]
            if key == "result_validity":
                if val not in ("VALID", "INVALID"):
                    raise ctx.error(loc, f"result_validity must be VALID or INVALID, got {val!r}")
                result = val
            elif key in CONFIG_DETAIL and isinstance(val, (str, int, float)):
                config[CONFIG_DETAIL[key]] = val
            for pat, metric, fixed, unit in DETAIL:
                m = pat.match(key)
                if m:
                    if isinstance(val, bool) or not isinstance(val, (int, float)):
                        raise ctx.error(loc, f"{key!r} must be a number, got {val!r}")
                    found.append((metric, _stat(m.group(1) if m.groups() else None, fixed), float(val), unit,
                                  f"{loc}: {key}"))
                    break
        if result is None:
            raise ctx.error(None, "no result_validity event", "the detail log is truncated or the run did not finish")
        config["result"] = result
        return self._rows(ctx, found, config, result)

    def _rows(self, ctx: ReadContext, found: list[tuple[str, str, float, str, str]], config: dict[str, Any],
              result: str) -> dict[str, list[Any]]:
        if not found:
            raise ctx.error(None, "no performance numbers (an AccuracyOnly run?)",
                            "ingest the performance/run_1 logs")
        system = ctx.options.get("system") or _system_from_path(ctx.path)
        if system:
            config["system"] = system
        config.update(ctx.meta)
        ts = config.get("test_datetime") if isinstance(config.get("test_datetime"), str) else None
        base = {"config": canonical_json(config), "hardware": system, "run": ctx.run, "timestamp": ts,
                "software": "mlperf loadgen" + (f" {config['loadgen_version']}" if "loadgen_version" in config else ""),
                "flags": "invalid" if result == "INVALID" else None}
        out = Columns()
        for metric, stat, v, unit, loc in found:
            out.add(metric, stat, v, unit, loc, **base)
        return out.cols


def _system_from_path(path: Path) -> str | None:
    """`results/<system>/<benchmark>/<scenario>/performance/run_1/` of a submission tree."""
    parts = path.resolve().parts
    if "results" in parts:
        i = len(parts) - 1 - parts[::-1].index("results")
        if i + 1 < len(parts) - 1:
            return parts[i + 1]
    return None


__all__ = ["MlperfAdapter"]
