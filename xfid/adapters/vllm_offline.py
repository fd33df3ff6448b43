"""vllm-latency / vllm-throughput: `vllm bench latency` and `vllm bench throughput` --output-json.

`benchmark_latency.py` (later `vllm bench latency --output-json`) writes the seconds one
batch took to generate, once per iteration: `avg_latency`, the `latencies` list and
`percentiles` keyed by the percentile as a string (`"10"`, `"25"` ... `"99"`), all in seconds.
xfid keeps them as the `latency` metric (stats `mean`, `p10` ... `p99`, and `std`, `min`,
`max` computed from the list, numpy's population std as vLLM uses numpy), with the number of
iterations in `n_samples`; the given stats are checked against the list.

`benchmark_throughput.py` (`vllm bench throughput --output-json`) writes `elapsed_time` (s),
`num_requests`, `total_num_tokens` and `requests_per_second` / `tokens_per_second`. Its token
count and token rate cover the prompt *and* the generated tokens, so they are read as
`vllm:total_num_tokens` and `throughput_total_tokens`, never as output throughput.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xfid.adapters import jsonutil, serving
from xfid.adapters.base import Adapter, Columns, ReadContext, head_text
from xfid.schema import canonical_json

LATENCY_KEYS = ("avg_latency", "latencies", "percentiles")
# throughput key -> (metric, stat, unit)
THROUGHPUT: dict[str, tuple[str, str, str]] = {
    "elapsed_time": ("duration", "value", "s"),
    "num_requests": ("requests_completed", "value", "count"),
    "total_num_tokens": ("vllm:total_num_tokens", "value", "tokens"),
    "requests_per_second": ("throughput_requests", "mean", "requests/s"),
    "tokens_per_second": ("throughput_total_tokens", "mean", "tokens/s"),
}
_OPTIONAL_THROUGHPUT = {"total_num_tokens", "num_requests"}
_TOKENS = canonical_json({"tokens": "prompt + generated"})


def _object(ctx: ReadContext, what: str) -> dict[str, Any]:
    obj = jsonutil.loads(ctx, jsonutil.read_bounded(ctx).strip(), None)
    if not isinstance(obj, dict):
        raise ctx.error(None, f"expected one JSON object, got {type(obj).__name__}", f"pass the JSON {what} writes")
    return obj


def _one_object_head(head: bytes) -> str | None:
    t = head_text(head).lstrip()
    return t if t.startswith("{") else None


class VllmLatencyAdapter(Adapter):
    name = "vllm-latency"
    fidelity = "measured"
    formats = ("vllm bench latency / benchmark_latency.py --output-json (avg_latency, per-iteration "
               "latencies, percentiles \"10\"..\"99\"; seconds)")
    extensions: ClassVar[tuple[str, ...]] = (".json",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = _one_object_head(head)
        return t is not None and '"avg_latency"' in t and ('"percentiles"' in t or '"latencies"' in t)

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        obj = _object(ctx, "vllm bench latency --output-json")
        missing = [k for k in LATENCY_KEYS if k not in obj]
        if missing:
            raise ctx.error(None, f"not a vllm bench latency result: no {', '.join(repr(k) for k in missing)} key",
                            "pass the JSON written by `vllm bench latency --output-json`")
        ctx.skip_keys(k for k in obj if k not in LATENCY_KEYS)
        lat = obj["latencies"]
        if not isinstance(lat, list) or not lat:
            raise ctx.error("$.latencies", "must be a non-empty list of seconds, one per iteration")
        values = serving.numbers(ctx, lat, "$.latencies")
        pct = obj["percentiles"]
        if not isinstance(pct, dict):
            raise ctx.error("$.percentiles", f"must be an object of percentile -> seconds, got {type(pct).__name__}")
        n = int(values.size)
        out = Columns()
        base = {"software": "vllm bench latency", "n_samples": n}
        avg = jsonutil.number(ctx, obj, "avg_latency", "$.avg_latency")
        if avg is None:
            raise ctx.error("$.avg_latency", "is null; a latency run always writes it")
        out.add("latency", "mean", avg, "s", "$.avg_latency", **base)
        for key in pct:
            try:
                p = float(key)
            except ValueError:
                raise ctx.error(f"$.percentiles.{key}", "a percentile key must be a number like \"90\"") from None
            if not 0 <= p <= 100:
                raise ctx.error(f"$.percentiles.{key}", "a percentile is between 0 and 100")
            value = jsonutil.number(ctx, pct, key, f"$.percentiles.{key}")
            stat = f"p{key}"
            out.add("latency", stat, value, "s", f"$.percentiles.{key}", null_reason=None if value is not None
                    else "null in file", **base)
            if value is not None and not serving.agrees(value, float(np.percentile(values, p))):
                ctx.warn(f"$.percentiles.{key}: {value:.6g} s, but the {n} latencies give "
                         f"{float(np.percentile(values, p)):.6g} s; the file's value is kept")
        if not serving.agrees(avg, float(np.mean(values))):
            ctx.warn(f"$.avg_latency: {avg:.6g} s, but the mean of the {n} latencies is {float(np.mean(values)):.6g} s;"
                     " the file's value is kept")
        derived = serving.stats(values)
        for stat in ("std", "min", "max"):
            out.add("latency", stat, derived[stat], "s", f"$.latencies: {stat} of {n} iterations", **base)
        return out.cols


class VllmThroughputAdapter(Adapter):
    name = "vllm-throughput"
    fidelity = "measured"
    formats = ("vllm bench throughput / benchmark_throughput.py --output-json (requests/s, tokens/s counting "
               "prompt plus generated tokens, elapsed time)")
    extensions: ClassVar[tuple[str, ...]] = (".json",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = _one_object_head(head)
        return t is not None and '"requests_per_second"' in t and '"tokens_per_second"' in t \
            and '"elapsed_time"' in t

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        obj = _object(ctx, "vllm bench throughput --output-json")
        missing = [k for k in THROUGHPUT if k not in obj and k not in _OPTIONAL_THROUGHPUT]
        if missing:
            raise ctx.error(None, f"not a vllm bench throughput result: no {', '.join(repr(k) for k in missing)} "
                            "key", "pass the JSON written by `vllm bench throughput --output-json`")
        ctx.skip_keys(k for k in obj if k not in THROUGHPUT)
        out = Columns()
        for key, (metric, stat, unit) in THROUGHPUT.items():
            if key not in obj:
                continue
            v = jsonutil.number(ctx, obj, key, f"$.{key}")
            out.add(metric, stat, v, unit, f"$.{key}", software="vllm bench throughput",
                    null_reason=None if v is not None else "null in file",
                    config=_TOKENS if "tokens" in key else None)
        return out.cols


__all__ = ["VllmLatencyAdapter", "VllmThroughputAdapter"]
