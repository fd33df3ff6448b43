"""sglang: `python -m sglang.bench_serving` result JSON lines (one object per run, appended)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters import jsonutil, serving
from xfid.adapters.base import Adapter, Columns, ReadContext, head_text
from xfid.schema import canonical_json

# same canonical metrics/stats as the vllm adapter; SGLang spells e2el `e2e_latency`
SERVING = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e_latency": "e2e_latency"}
_STAT_KEY = re.compile(r"^(mean|median|std|min|max|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2e_latency)_ms$")
SCALARS: dict[str, tuple[str, str, str]] = {
    "duration": ("duration", "value", "s"),
    "completed": ("requests_completed", "value", "count"),
    "total_input_tokens": ("input_tokens", "value", "tokens"),
    "total_output_tokens": ("output_tokens", "value", "tokens"),
    "total_output_tokens_retokenized": ("sglang:output_tokens_retokenized", "value", "tokens"),
    "total_input_text_tokens": ("sglang:input_text_tokens", "value", "tokens"),
    "total_input_vision_tokens": ("sglang:input_vision_tokens", "value", "tokens"),
    "request_throughput": ("throughput_requests", "mean", "requests/s"),
    "input_throughput": ("throughput_input_tokens", "mean", "tokens/s"),
    "output_throughput": ("throughput_tokens", "mean", "tokens/s"),
    "total_throughput": ("throughput_total_tokens", "mean", "tokens/s"),
    "max_output_tokens_per_s": ("throughput_tokens", "max", "tokens/s"),
    "concurrency": ("concurrency", "mean", "count"),
    "max_concurrent_requests": ("concurrency", "max", "count"),
    "accept_length": ("sglang:accept_length", "mean", "count"),
}
OPTIONAL = {"accept_length"}
"""Keys written as null when they do not apply (no speculative decoding): no record then."""
CONFIG_KEYS = ("tag", "backend", "dataset_name", "request_rate", "max_concurrency", "random_input_len",
               "random_output_len", "random_range_ratio", "sharegpt_output_len", "num_prompts", "model_id",
               "tokenizer_id", "served_model_name", "disable_ignore_eos")
READ_KEYS = {*SCALARS, *CONFIG_KEYS, "date", "server_info", *serving.READ}
_INF_RATE = re.compile(r'("request_rate"\s*:\s*)(?:Infinity|inf)\b')


class SglangAdapter(Adapter):
    name = "sglang"
    fidelity = "measured"
    formats = ("SGLang bench_serving result JSON lines, 2024 to 0.5.x (TTFT, TPOT, ITL, E2E latency, throughput, "
               "concurrency; --output-details per-request arrays)")
    extensions: ClassVar[tuple[str, ...]] = (".jsonl", ".json")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        if not t.lstrip().startswith("{"):
            return False
        # 0.5.x lines put a large `server_info` object before the results: the arguments may be all
        # the head holds
        return "_e2e_latency_ms" in t or ('"dataset_name"' in t and '"random_range_ratio"' in t and
                                          '"backend"' in t and '"endpoint_type"' not in t)

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        out = Columns()
        text = jsonutil.read_bounded(ctx)  # 0.5.x lines with per-request arrays run to tens of MB
        lines = [(n, raw) for n, raw in enumerate(text.splitlines(), 1) if raw.strip()]
        if not lines:
            raise ctx.error(None, "no JSON object found")
        for lineno, raw in lines:
            # bench_serving json.dumps()es the default request_rate=float("inf") as a bare Infinity
            obj = jsonutil.loads(ctx, _INF_RATE.sub(r'\1"inf"', raw), f"line {lineno}")
            if not isinstance(obj, dict):
                raise ctx.error(f"line {lineno}", f"expected a JSON object, got {type(obj).__name__}",
                                "bench_serving writes one JSON object per line")
            self._one(ctx, obj, f"line {lineno}", len(lines) > 1, out)
        return out.cols

    def _one(self, ctx: ReadContext, obj: dict[str, Any], line: str, several: bool, out: Columns) -> None:
        def loc(key: str) -> str:
            return f"{line}: $.{key}"

        stat_keys = [k for k in obj if _STAT_KEY.match(k)]
        if not stat_keys and "output_throughput" not in obj:  # every version writes these
            raise ctx.error(line, "not an SGLang bench_serving result: no 'output_throughput' and no "
                            "'*_ttft_ms', '*_itl_ms' or '*_e2e_latency_ms' key",
                            "pass the JSON lines written by bench_serving --output-file")
        num = {k: jsonutil.number(ctx, obj, k, loc(k)) for k in SCALARS if k in obj}
        rate = obj.get("request_rate")
        if isinstance(rate, str) and rate not in ("inf", "trace"):
            raise ctx.error(loc("request_rate"), f"request_rate must be a number, \"inf\" or \"trace\", got {rate!r}")
        ctx.skip_keys(k for k in obj if k not in READ_KEYS and not _STAT_KEY.match(k))
        requests = serving.read_requests(ctx, obj, loc)
        config = {k: obj[k] for k in CONFIG_KEYS if k in obj and isinstance(obj[k], (str, int, float, bool))}
        config.update(ctx.meta)
        ts = jsonutil.bench_date(ctx, obj, loc("date"))  # not written by bench_serving itself; wrappers add it
        run = ctx.run or (_text(obj.get("tag")) if not several else None)
        if several:  # each appended line is its own run
            run = f"{ctx.run or _text(obj.get('tag')) or ctx.path.stem}-{line.replace(' ', '')}"
        info = obj.get("server_info")
        version = _text(info.get("version")) if isinstance(info, dict) else None
        software = "sglang bench_serving" + (f" ({obj['backend']})" if isinstance(obj.get("backend"), str) else "")
        flags = []
        if "completed" not in obj and requests is None:
            flags.append("missing_counts")
        if requests is not None and requests.failed:
            flags.append("failed_requests")
        base = {"config": canonical_json(config), "timestamp": ts, "run": run, "flags": ",".join(flags) or None,
                "software": software + (f", sglang {version}" if version else "")}
        completed = num.get("completed")
        n = requests.ok if requests else (None if completed is None else int(completed))
        n_itl = int(requests.values["itls"].size) if requests and "itls" in requests.values else None
        seen: dict[tuple[str, str], float] = {}

        def add(metric: str, stat: str, value: float | None, unit: str, where: str, count: int | None = None,
                reason: str | None = None) -> None:
            if value is None:
                reason = reason or "null in file"
            elif value == 0 and metric in ("ttft", "itl") and stat != "std":
                # no streamed chunk was timed (seen with long inputs and PD disaggregation): not 0 ms
                value, reason = None, "0 ms: no chunk timing (sglang quirk)"
            out.add(metric, stat, value, unit, where, n_samples=count, null_reason=reason, **base)

        for key, (metric, stat, unit) in SCALARS.items():
            if key not in obj or (key in OPTIONAL and num.get(key) is None):
                continue
            v = num.get(key)
            if v is not None:
                seen[(metric, stat)] = v
            add(metric, stat, v, unit, loc(key))
        for key in stat_keys:
            stat, short = _STAT_KEY.match(key).groups()  # type: ignore[union-attr]
            v = jsonutil.number(ctx, obj, key, loc(key))
            if v is not None:
                seen[(SERVING[short], stat)] = v / 1000
            add(SERVING[short], stat, v, "ms", loc(key), n_itl if short == "itl" and n_itl else n)
        if requests is not None:
            serving.emit(ctx, requests, seen, add, loc)


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


__all__ = ["SglangAdapter"]
