"""sglang: `python -m sglang.bench_serving` result JSON lines (one object per run)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters import jsonutil
from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.schema import canonical_json

# same canonical metrics/stats as the vllm adapter; SGLang spells e2el `e2e_latency`
SERVING = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e_latency": "e2e_latency"}
_STAT_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2e_latency)_ms$")
SCALARS: dict[str, tuple[str, str, str]] = {
    "duration": ("duration", "value", "s"),
    "completed": ("requests_completed", "value", "count"),
    "total_input_tokens": ("input_tokens", "value", "tokens"),
    "total_output_tokens": ("output_tokens", "value", "tokens"),
    "request_throughput": ("throughput_requests", "mean", "requests/s"),
    "input_throughput": ("throughput_input_tokens", "mean", "tokens/s"),
    "output_throughput": ("throughput_tokens", "mean", "tokens/s"),
    "total_throughput": ("throughput_total_tokens", "mean", "tokens/s"),
    "concurrency": ("concurrency", "mean", "count"),
}
CONFIG_KEYS = ("backend", "dataset_name", "request_rate", "max_concurrency", "random_input_len",
               "random_output_len", "random_range_ratio", "sharegpt_output_len", "num_prompts", "model_id",
               "tokenizer_id", "served_model_name", "disable_ignore_eos", "tag")
_INF_RATE = re.compile(r'("request_rate"\s*:\s*)(?:Infinity|inf)\b')


class SglangAdapter(Adapter):
    name = "sglang"
    fidelity = "measured"
    formats = "SGLang bench_serving result JSON lines (TTFT, TPOT, ITL, E2E latency, throughput, concurrency)"
    extensions: ClassVar[tuple[str, ...]] = (".jsonl", ".json")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        return t.lstrip().startswith("{") and '"request_throughput"' in t and "_e2e_latency_ms" in t

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        out = Columns()
        text = read_text(ctx)
        n = 0
        for lineno, raw in enumerate(text.splitlines(), 1):
            if not raw.strip():
                continue
            # bench_serving json.dumps()es the default request_rate=float("inf") as a bare Infinity
            obj = jsonutil.loads(ctx, _INF_RATE.sub(r'\1"inf"', raw), f"line {lineno}")
            if not isinstance(obj, dict):
                raise ctx.error(f"line {lineno}", f"expected a JSON object, got {type(obj).__name__}",
                                "bench_serving writes one JSON object per line")
            self._one(ctx, obj, f"line {lineno}", out)
            n += 1
        if n == 0:
            raise ctx.error(None, "no JSON object found")
        return out.cols

    def _one(self, ctx: ReadContext, obj: dict[str, Any], line: str | None, out: Columns) -> None:
        def loc(key: str) -> str:
            return f"{line}: $.{key}" if line else f"$.{key}"

        if "request_throughput" not in obj or not any(_STAT_KEY.match(k) for k in obj):
            raise ctx.error(line, "not an SGLang bench_serving result: no 'request_throughput' and "
                            "'*_e2e_latency_ms' keys", "pass the JSON lines written by bench_serving --output-file")
        num = {k: jsonutil.number(ctx, obj, k, loc(k)) for k in SCALARS if k in obj}
        jsonutil.check_request_rate(ctx, obj, loc("request_rate"))
        config = {k: obj[k] for k in CONFIG_KEYS if k in obj and isinstance(obj[k], (str, int, float, bool))}
        config.update(ctx.meta)
        ts = jsonutil.bench_date(ctx, obj, loc("date"))  # not written by bench_serving itself; wrappers add it
        base = {"config": canonical_json(config), "timestamp": ts, "run": ctx.run,
                "software": "sglang bench_serving" + (f" ({obj['backend']})" if obj.get("backend") else ""),
                "flags": "missing_counts" if "completed" not in obj else None}
        n = int(num["completed"]) if num.get("completed") is not None else None
        for key, (metric, stat, unit) in SCALARS.items():
            if key not in obj:
                continue
            v = num.get(key)
            out.add(metric, stat, v, unit, loc(key), null_reason=None if v is not None else "null in file", **base)
        for key in obj:
            m = _STAT_KEY.match(key)
            if not m:
                continue
            stat, short = m.groups()
            v = jsonutil.number(ctx, obj, key, loc(key))
            out.add(SERVING[short], stat, v, "ms", loc(key), n_samples=n,
                    null_reason=None if v is not None else "null in file", **base)


__all__ = ["SglangAdapter"]
