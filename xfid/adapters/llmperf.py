"""llmperf: ray-project llmperf `*_summary.json` (token_benchmark_ray.py --results-dir).

One flat JSON object: run settings (`model`, `mean_input_tokens`, `num_concurrent_requests`,
...) and `results_<metric>_<stat>` keys, where the metric names its unit (`ttft_s`,
`inter_token_latency_s`, `end_to_end_latency_s` are seconds; `request_output_throughput_
token_per_s` is one request's tokens/s) and the stat is `quantiles_pNN`, `mean`, `min`, `max`
or `stddev`. llmperf writes the min and max of the token counts as strings (`"550"`); they are
read as the numbers they spell. `results_num_completed_requests_per_min` is a request rate
per minute, kept as requests/s (divided by 60 exactly, from the decimal in the file).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from xfid import units
from xfid.adapters import jsonutil
from xfid.adapters.base import Adapter, Columns, ReadContext, head_text
from xfid.schema import canonical_json

# results_<name>_<stat> name -> (xfid metric, unit)
DISTRIBUTIONS: dict[str, tuple[str, str]] = {
    "ttft_s": ("ttft", "s"),
    "inter_token_latency_s": ("itl", "s"),
    "end_to_end_latency_s": ("e2e_latency", "s"),
    "request_output_throughput_token_per_s": ("llmperf:request_output_throughput", "tokens/s"),
    "number_input_tokens": ("input_tokens", "tokens"),
    "number_output_tokens": ("output_tokens", "tokens"),
}
# results_<key> -> (xfid metric, stat, unit)
TOTALS: dict[str, tuple[str, str, str]] = {
    "num_requests_started": ("llmperf:requests_started", "value", "count"),
    "num_completed_requests": ("requests_completed", "value", "count"),
    "number_errors": ("requests_failed", "value", "count"),
    "error_rate": ("llmperf:error_rate", "value", "ratio"),
    "mean_output_throughput_token_per_s": ("throughput_tokens", "mean", "tokens/s"),
}
PER_MINUTE = "num_completed_requests_per_min"
SETTINGS = ("version", "name", "model", "framework", "model_size", "api", "mean_input_tokens",
            "stddev_input_tokens", "mean_output_tokens", "stddev_output_tokens", "num_concurrent_requests")
"""Run settings, kept in config."""
_KEY = re.compile(r"^results_(?P<name>.+)_(?P<stat>quantiles_p\d+(?:\.\d+)?|mean|min|max|stddev)$")


def _stat(stat: str) -> str:
    return "std" if stat == "stddev" else stat.removeprefix("quantiles_")


def _number(ctx: ReadContext, obj: dict[str, Any], key: str) -> float | None:
    """A number, or a string that spells one (llmperf writes token-count min/max as "550")."""
    v = obj.get(key)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            raise ctx.error(f"$.{key}", f"must be a number, got {v!r}") from None
    return jsonutil.number(ctx, obj, key, f"$.{key}")


class LlmperfAdapter(Adapter):
    name = "llmperf"
    fidelity = "measured"
    formats = ("ray-project llmperf *_summary.json (TTFT, inter-token and end-to-end latency in seconds, "
               "per-request and overall output throughput, request counts)")
    extensions: ClassVar[tuple[str, ...]] = (".json",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head).lstrip()
        return t.startswith("{") and ('"results_ttft_s_' in t or '"results_end_to_end_latency_s_' in t)

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        obj = jsonutil.loads(ctx, jsonutil.read_bounded(ctx).strip(), None)
        if not isinstance(obj, dict):
            raise ctx.error(None, f"expected one JSON object (an llmperf summary), got {type(obj).__name__}")
        config = {k: obj[k] for k in SETTINGS if isinstance(obj.get(k), (str, int, float))}
        config.update(ctx.meta)
        base = {"config": canonical_json(config), "software": "llmperf", "run": ctx.run,
                "timestamp": self._timestamp(ctx, obj)}
        out = Columns()
        skipped = []
        for key in obj:
            if key in SETTINGS or key == "timestamp":
                continue
            m = _KEY.match(key)
            short = key.removeprefix("results_")
            if m and m["name"] in DISTRIBUTIONS:
                metric, unit = DISTRIBUTIONS[m["name"]]
                self._add(ctx, out, obj, key, metric, _stat(m["stat"]), unit, base)
            elif key.startswith("results_") and short in TOTALS:
                metric, stat, unit = TOTALS[short]
                self._add(ctx, out, obj, key, metric, stat, unit, base)
            elif short == PER_MINUTE:
                v = _number(ctx, obj, key)
                rate = None if v is None else float(units.decimal_of(obj[key]) / 60)
                out.add("throughput_requests", "mean", rate, "requests/s", f"$.{key} / 60", **base,
                        null_reason=None if rate is not None else "null in file")
            else:
                skipped.append(key)  # results_error_code_frequency, a newer key, ...
        ctx.skip_keys(skipped)
        if not len(out):
            raise ctx.error(None, "no llmperf results_* keys found",
                            "pass the *_summary.json written by llmperf's token_benchmark_ray.py")
        return out.cols

    @staticmethod
    def _add(ctx: ReadContext, out: Columns, obj: dict[str, Any], key: str, metric: str, stat: str, unit: str,
             base: dict[str, Any]) -> None:
        v = _number(ctx, obj, key)
        out.add(metric, stat, v, unit, f"$.{key}", null_reason=None if v is not None else "null in file", **base)

    @staticmethod
    def _timestamp(ctx: ReadContext, obj: dict[str, Any]) -> str | None:
        """`timestamp`: epoch seconds (UTC) when the summary was written."""
        ts = jsonutil.number(ctx, obj, "timestamp", "$.timestamp")
        return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


__all__ = ["LlmperfAdapter"]
