"""vllm: `vllm bench serve` result JSON (one object, or JSON lines from --append-result)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters import jsonutil
from xfid.adapters.base import Adapter, Columns, ReadContext, head_text
from xfid.schema import canonical_json

SERVING = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e_latency"}
_STAT_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")
# key -> (metric, stat, unit)
SCALARS: dict[str, tuple[str, str, str]] = {
    "duration": ("duration", "value", "s"),
    "completed": ("requests_completed", "value", "count"),
    "failed": ("requests_failed", "value", "count"),
    "total_input_tokens": ("input_tokens", "value", "tokens"),
    "total_output_tokens": ("output_tokens", "value", "tokens"),
    "request_throughput": ("throughput_requests", "mean", "requests/s"),
    "request_goodput": ("goodput_requests", "mean", "requests/s"),
    "output_throughput": ("throughput_tokens", "mean", "tokens/s"),
    "total_token_throughput": ("throughput_total_tokens", "mean", "tokens/s"),
    "max_output_tokens_per_s": ("throughput_tokens", "max", "tokens/s"),
    "max_concurrent_requests": ("concurrency", "max", "count"),
    "gpu_energy_j": ("energy", "value", "J"),
    "gpu_avg_power_w": ("power", "mean", "W"),
    "gpu_energy_per_output_token_j": ("energy_per_token", "value", "J/token"),
}
CONFIG_KEYS = ("endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
               "burstiness", "max_concurrency", "energy_gpu_ids", "gpu_energy_duration_s")
RESULT_KEYS = {*SCALARS, "date", "input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"}


class VllmAdapter(Adapter):
    name = "vllm"
    fidelity = "measured"
    formats = "vllm bench serve result JSON / JSON lines (TTFT, TPOT, ITL, E2EL, throughput, NVML energy)"
    extensions: ClassVar[tuple[str, ...]] = (".json", ".jsonl")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        return t.lstrip().startswith("{") and '"request_throughput"' in t and (
            '"e2el' in t or "_e2el_ms" in t or '"endpoint_type"' in t or '"median_ttft_ms"' in t
        ) and "_e2e_latency_ms" not in t and '"time_to_first_token"' not in t

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        out = Columns()
        for line, obj in jsonutil.objects(ctx):
            self._one(ctx, obj, line, out)
        return out.cols

    def _one(self, ctx: ReadContext, obj: dict[str, Any], line: str | None, out: Columns) -> None:
        def loc(key: str) -> str:
            return f"{line}: $.{key}" if line else f"$.{key}"

        if "request_throughput" not in obj and "completed" not in obj:
            raise ctx.error(line, "not a vllm bench serve result: no 'request_throughput' or 'completed' key",
                            "pass the JSON written by `vllm bench serve --save-result`")
        num = {k: jsonutil.number(ctx, obj, k, loc(k)) for k in SCALARS if k in obj}
        meta = {k: v for k, v in obj.items() if k not in RESULT_KEYS and not _STAT_KEY.match(k)}
        config = {k: obj[k] for k in CONFIG_KEYS if k in obj}
        config.update({k: v for k, v in meta.items() if k not in CONFIG_KEYS and isinstance(v, (str, int, float, bool))})
        jsonutil.check_request_rate(ctx, obj, loc("request_rate"))
        flags = []
        if "failed" not in obj or "completed" not in obj:
            flags.append("missing_counts")
        if (num.get("failed") or 0) > 0:
            flags.append("failed_requests")
        config.update(ctx.meta)
        ts = jsonutil.bench_date(ctx, obj, loc("date"))
        run = ctx.run or (f"{obj.get('label') or obj.get('backend', 'vllm')}-{obj['date']}" if obj.get("date") else None)
        base = {
            "config": canonical_json(config), "timestamp": ts, "run": run, "flags": ",".join(flags) or None,
            "software": "vllm bench serve" + (f" ({obj['backend']})" if obj.get("backend") else ""),
            "target": ctx.target or _str(meta.get("target")) or _str(meta.get("xfid_target")),
            "workload": ctx.workload or _str(meta.get("workload")) or _str(meta.get("xfid_workload")),
        }
        completed = num.get("completed")
        n_ttft = len(obj["ttfts"]) if isinstance(obj.get("ttfts"), list) else completed
        n_itl = sum(len(x) for x in obj["itls"] if isinstance(x, list)) if isinstance(obj.get("itls"), list) else None

        def add(metric: str, stat: str, value: float | None, unit: str, key: str, n: float | None = None,
                reason: str | None = None) -> None:
            out.add(metric, stat, value, unit, loc(key), n_samples=None if n is None else int(n), null_reason=reason,
                    **base)

        for key, (metric, stat, unit) in SCALARS.items():
            if key not in obj:
                continue
            v = num.get(key)
            if v is None:
                why = "null in file (run without --goodput)" if key == "request_goodput" else "null in file"
                add(metric, stat, None, unit, key, reason=why)
            else:
                add(metric, stat, v, unit, key)
        for key in obj:
            m = _STAT_KEY.match(key)
            if not m:
                continue
            stat, short = m.groups()
            v = jsonutil.number(ctx, obj, key, loc(key))
            metric = SERVING[short]
            n = n_itl if short == "itl" and n_itl else n_ttft
            if v is None:
                add(metric, stat, None, "ms", key, n, "null in file")
            elif v == 0 and short == "ttft" and stat != "std":
                add(metric, stat, None, "ms", key, n, "0 ms: no chunk arrived (vllm quirk)")
            else:
                add(metric, stat, v, "ms", key, n)
        energy = num.get("gpu_energy_j")
        out_tokens = num.get("total_output_tokens")
        if energy and out_tokens:
            add("tokens_per_joule", "value", out_tokens / energy, "tokens/J", "total_output_tokens / gpu_energy_j")
            if "gpu_energy_per_output_token_j" not in obj:
                add("energy_per_token", "value", energy / out_tokens, "J/token", "gpu_energy_j / total_output_tokens")


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


__all__ = ["VllmAdapter"]
