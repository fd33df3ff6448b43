"""vllm: `vllm bench serve` / `benchmark_serving.py` result JSON (one object, or JSON lines)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters import jsonutil, serving
from xfid.adapters.base import Adapter, Columns, ReadContext, head_text
from xfid.schema import canonical_json

# vLLM <= 0.6.0 wrote the end-to-end latency as `*_latency_ms`, later versions as `*_e2el_ms`
SERVING = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e_latency", "latency": "e2e_latency"}
LATENCIES = set(SERVING.values())
_STAT_KEY = re.compile(r"^(mean|median|std|min|max|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|latency)_ms$")
# key -> (metric, stat, unit)
SCALARS: dict[str, tuple[str, str, str]] = {
    "duration": ("duration", "value", "s"),
    "completed": ("requests_completed", "value", "count"),
    "failed": ("requests_failed", "value", "count"),
    "total_input_tokens": ("input_tokens", "value", "tokens"),
    "total_output_tokens": ("output_tokens", "value", "tokens"),
    "request_throughput": ("throughput_requests", "mean", "requests/s"),
    "request_goodput": ("goodput_requests", "mean", "requests/s"),
    "input_throughput": ("throughput_input_tokens", "mean", "tokens/s"),
    "output_throughput": ("throughput_tokens", "mean", "tokens/s"),
    "total_token_throughput": ("throughput_total_tokens", "mean", "tokens/s"),
    "max_output_tokens_per_s": ("throughput_tokens", "max", "tokens/s"),
    "max_concurrent_requests": ("concurrency", "max", "count"),
    "gpu_energy_j": ("energy", "value", "J"),
    "gpu_avg_power_w": ("power", "mean", "W"),
    "gpu_energy_per_output_token_j": ("energy_per_token", "value", "J/token"),
}
CONFIG_KEYS = ("endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
               "burstiness", "max_concurrency", "energy_gpu_ids", "gpu_energy_duration_s", "best_of",
               "use_beam_search")
"""Load settings kept in `config`. Other text values are `--metadata k=v` pairs (config too); any
other key (a number, list or null xfid does not know, e.g. `rtfx`) is listed as not read."""
READ_KEYS = {*SCALARS, *CONFIG_KEYS, "date", *serving.READ}
_VLLM = ('"e2el', "_e2el_ms", '"endpoint_type"', '"median_ttft_ms"', '"ttfts"', '"input_lens"', '"request_goodput')
_NOT_VLLM = ("_e2e_latency_ms", '"time_to_first_token"', '"total_output_tokens_retokenized"', '"random_range_ratio"')
"""Keys of SGLang bench_serving and GenAI-Perf files, which also write `request_throughput`."""
_REDUCED = ('"backend"', '"date"', '"median_ttft_ms"', '"mean_tpot_ms"')
"""A serving result reduced by nightly-benchmark scripts to the run settings and latency stats."""


class VllmAdapter(Adapter):
    name = "vllm"
    fidelity = "measured"
    formats = ("vllm bench serve / benchmark_serving.py result JSON or JSON lines (TTFT, TPOT, ITL, E2EL, "
               "throughput, NVML energy; --save-detailed per-request arrays; results reduced to latency stats)")
    extensions: ClassVar[tuple[str, ...]] = (".json", ".jsonl")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        if not t.lstrip().startswith("{") or any(m in t for m in _NOT_VLLM):
            return False
        if '"request_throughput"' not in t:  # a result reduced to its latency keys (nightly scripts)
            return all(m in t for m in _REDUCED)
        # with per-request arrays (--save-detailed; always in 0.6.x) the stat keys come after them,
        # often beyond the head
        return any(m in t for m in _VLLM)

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        out = Columns()
        objs = list(jsonutil.objects(ctx))
        for line, obj in objs:
            self._one(ctx, obj, line, len(objs) > 1, out)
        return out.cols

    def _one(self, ctx: ReadContext, obj: dict[str, Any], line: str | None, several: bool, out: Columns) -> None:
        def loc(key: str) -> str:
            return f"{line}: $.{key}" if line else f"$.{key}"

        num = {k: jsonutil.number(ctx, obj, k, loc(k)) for k in SCALARS if k in obj}
        stat_keys = [k for k in obj if _STAT_KEY.match(k)]
        if "request_throughput" not in obj and "completed" not in obj:
            if not stat_keys:
                raise ctx.error(line, "not a vllm bench serve result: no 'request_throughput' or 'completed' "
                                "key and no '*_ttft_ms'-like stat", "pass the JSON written by `vllm bench serve "
                                "--save-result`")
            ctx.warn(f"{line + ': ' if line else ''}a reduced serving result (latency stats only, as nightly-"
                     "benchmark scripts keep them): no request counts or throughput to read")
        meta = {k: v for k, v in obj.items() if k not in READ_KEYS and not _STAT_KEY.match(k) and isinstance(v, str)}
        ctx.skip_keys(k for k in obj if k not in READ_KEYS and k not in meta and not _STAT_KEY.match(k))
        config = {k: obj[k] for k in CONFIG_KEYS if k in obj}
        config.update(meta)
        jsonutil.check_request_rate(ctx, obj, loc("request_rate"))
        requests = serving.read_requests(ctx, obj, loc)
        flags = []
        if ("failed" not in obj and (requests is None or requests.failed is None)) or (
                "completed" not in obj and requests is None):
            flags.append("missing_counts")
        failed = num.get("failed") if "failed" in obj else (requests.failed if requests else None)
        if (failed or 0) > 0:
            flags.append("failed_requests")
        config.update(ctx.meta)
        ts = jsonutil.bench_date(ctx, obj, loc("date"))
        run = ctx.run or (f"{obj.get('label') or obj.get('backend', 'vllm')}-{obj['date']}" if obj.get("date") else None)
        if several and not obj.get("date"):  # each line is its own run
            run = f"{run or ctx.path.stem}-{(line or '').replace(' ', '')}"
        base = {
            "config": canonical_json(config), "timestamp": ts, "run": run, "flags": ",".join(flags) or None,
            "software": "vllm bench serve" + (f" ({obj['backend']})" if obj.get("backend") else ""),
            "target": ctx.target or _str(meta.get("target")) or _str(meta.get("xfid_target")),
            "workload": ctx.workload or _str(meta.get("workload")) or _str(meta.get("xfid_workload")),
        }
        completed = num.get("completed")
        n_req = requests.ok if requests else completed
        n_itl = int(requests.values["itls"].size) if requests and "itls" in requests.values else None
        seen: dict[tuple[str, str], float] = {}

        def add(metric: str, stat: str, value: float | None, unit: str, key: str, n: float | None = None,
                reason: str | None = None) -> None:
            if value is not None and completed == 0 and metric in LATENCIES:
                value, reason = None, "no request completed (the file says 0)"
            elif value == 0 and metric == "ttft" and stat != "std" and reason is None:
                value, reason = None, "0 ms: no chunk arrived (vllm quirk)"
            out.add(metric, stat, value, unit, key, n_samples=None if n is None else int(n), null_reason=reason,
                    **base)

        for key, (metric, stat, unit) in SCALARS.items():
            if key not in obj:
                continue
            v = num.get(key)
            if v is None:
                why = "null in file (run without --goodput)" if key == "request_goodput" else "null in file"
                add(metric, stat, None, unit, loc(key), reason=why)
            else:
                seen[(metric, stat)] = v
                add(metric, stat, v, unit, loc(key))
        for key in stat_keys:
            stat, short = _STAT_KEY.match(key).groups()  # type: ignore[union-attr]
            metric = SERVING[short]
            if (metric, stat) in seen or (short == "latency" and any(k.endswith("_e2el_ms") for k in stat_keys)):
                ctx.skip_keys([key])  # a second spelling of a stat already read
                continue
            v = jsonutil.number(ctx, obj, key, loc(key))
            n = n_itl if short == "itl" and n_itl else n_req
            if v is None:
                add(metric, stat, None, "ms", loc(key), n, "null in file")
            else:
                seen[(metric, stat)] = v / 1000
                add(metric, stat, v, "ms", loc(key), n)
        if requests is not None:
            serving.emit(ctx, requests, seen, add, loc)
        energy = num.get("gpu_energy_j")
        out_tokens = num.get("total_output_tokens")
        if energy and out_tokens:
            add("tokens_per_joule", "value", out_tokens / energy, "tokens/J", loc("total_output_tokens / gpu_energy_j"))
            if "gpu_energy_per_output_token_j" not in obj:
                add("energy_per_token", "value", energy / out_tokens, "J/token", loc("gpu_energy_j / total_output_tokens"))


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


__all__ = ["VllmAdapter"]
