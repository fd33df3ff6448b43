"""sglang-one-batch: SGLang `bench_one_batch` / `bench_one_batch_server` results (JSON lines or console).

`bench_one_batch` runs one static batch through the model without a server and appends one JSON
line per (batch size, input length, output length) to `--result-filename` (default
`result.jsonl`): `prefill_latency` (s) and `prefill_throughput` (input tokens/s of the batch),
`median_decode_latency` (s per decode step) and `median_decode_throughput` (tokens/s),
`total_latency` and `overall_throughput` ((input + output) x batch / total latency). xfid keeps
the phase in `op` (`prefill`, `decode`, "" for the whole batch).

`bench_one_batch_server` sends the batch to a running server and writes `latency`,
`output_throughput`, `overall_throughput`, `last_gen_throughput` (the last decode log line's
rate) and, in newer versions, `input_throughput`, `last_ttft` (s), `acc_length` (-1 without
speculative decoding) and `cache_hit_rate`.

The console output of `bench_one_batch` (`Prefill. latency: 0.03012 s, throughput: 4250.29
token/s`, `Decode.  median latency: ...`, `Total. latency: ...`) is read too: every group of lines
from a `Prefill.` line to its `Total.` line is one run; groups printed before `Benchmark ...`
are the warmup and are skipped (said in the ingest summary).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters import jsonutil
from xfid.adapters.base import Adapter, Columns, ReadContext, head_text
from xfid.schema import canonical_json

# key -> (op, metric, stat, unit)
KEYS: dict[str, tuple[str, str, str, str]] = {
    "prefill_latency": ("prefill", "latency", "value", "s"),
    "prefill_throughput": ("prefill", "throughput_input_tokens", "mean", "tokens/s"),
    "median_decode_latency": ("decode", "latency", "median", "s"),
    "median_decode_throughput": ("decode", "throughput_tokens", "median", "tokens/s"),
    "total_latency": ("", "latency", "value", "s"),
    "latency": ("", "latency", "value", "s"),
    "input_throughput": ("", "throughput_input_tokens", "mean", "tokens/s"),
    "output_throughput": ("", "throughput_tokens", "mean", "tokens/s"),
    "overall_throughput": ("", "throughput_total_tokens", "mean", "tokens/s"),
    "last_gen_throughput": ("decode", "sglang:last_gen_throughput", "value", "tokens/s"),
    "last_ttft": ("", "sglang:last_ttft", "value", "s"),
    "acc_length": ("decode", "sglang:accept_length", "mean", "count"),
    "cache_hit_rate": ("", "sglang:cache_hit_rate", "value", "ratio"),
}
CONFIG_KEYS = ("run_name", "batch_size", "input_len", "output_len")
_SERVER_ONLY = {"latency", "output_throughput", "last_gen_throughput", "last_ttft", "acc_length", "cache_hit_rate"}
_NUM = r"(-?\d+(?:\.\d+)?)"
_CONSOLE = {
    "prefill": re.compile(rf"^Prefill\. latency: {_NUM} s, throughput:\s+{_NUM} token/s"),
    "median": re.compile(rf"^Decode\.\s+median latency: {_NUM} s, median throughput:\s+{_NUM} token/s"),
    "total": re.compile(rf"^Total\. latency:\s+{_NUM} s, throughput:\s+{_NUM} token/s"),
    "step": re.compile(rf"^Decode(?: \d+)?\.\s+(?:Batch size: (\d+), )?latency: {_NUM} s, throughput:\s+{_NUM} token/s"),
}
_LOG_PREFIX = re.compile(r"^\[[^\]]*\]\s*")


class SglangOneBatchAdapter(Adapter):
    name = "sglang-one-batch"
    fidelity = "measured"
    formats = ("SGLang bench_one_batch / bench_one_batch_server result JSON lines and bench_one_batch console "
               "output (prefill and median decode latency and throughput, overall throughput)")
    extensions: ClassVar[tuple[str, ...]] = (".jsonl", ".json", ".log", ".txt")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        if t.lstrip().startswith("{"):
            return '"run_name"' in t and '"batch_size"' in t and (
                '"prefill_latency"' in t or '"last_gen_throughput"' in t)
        return any(_CONSOLE["prefill"].match(_LOG_PREFIX.sub("", line)) for line in t.splitlines())

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        text = jsonutil.read_bounded(ctx)
        out = Columns()
        if text.lstrip().startswith("{"):
            lines = [(n, raw) for n, raw in enumerate(text.splitlines(), 1) if raw.strip()]
            for n, raw in lines:
                obj = jsonutil.loads(ctx, raw, f"line {n}")
                if not isinstance(obj, dict):
                    raise ctx.error(f"line {n}", f"expected a JSON object, got {type(obj).__name__}")
                self._line(ctx, obj, n, out)
        else:
            self._console(ctx, text.splitlines(), out)
        if not len(out):
            raise ctx.error(None, "no bench_one_batch result found",
                            "pass the --result-filename JSON lines or the console output of bench_one_batch")
        return out.cols

    def _line(self, ctx: ReadContext, obj: dict[str, Any], n: int, out: Columns) -> None:
        line = f"line {n}"
        if not any(k in obj for k in ("prefill_latency", "latency", "total_latency")):
            raise ctx.error(line, "not a bench_one_batch result: no 'prefill_latency', 'total_latency' or "
                            "'latency' key", "pass the JSON lines bench_one_batch(_server) writes")
        server = any(k in obj for k in _SERVER_ONLY)
        ctx.skip_keys(k for k in obj if k not in KEYS and k not in CONFIG_KEYS)
        config = {k: obj[k] for k in CONFIG_KEYS if isinstance(obj.get(k), (str, int, float))}
        config.update(ctx.meta)
        name = obj.get("run_name") if isinstance(obj.get("run_name"), str) else None
        base = {"config": canonical_json(config), "run": f"{ctx.run or name or ctx.path.stem}-line{n}",
                "software": "sglang bench_one_batch_server" if server else "sglang bench_one_batch"}
        for key, (op, metric, stat, unit) in KEYS.items():
            if key not in obj:
                continue
            v = jsonutil.number(ctx, obj, key, f"{line}: $.{key}")
            reason = None if v is not None else "null in file"
            if key == "acc_length" and v is not None and v < 0:
                v, reason = None, f"{obj[key]}: no speculative decoding"
            out.add(metric, stat, v, unit, f"{line}: $.{key}", op=op, null_reason=reason, **base)

    def _console(self, ctx: ReadContext, lines: list[str], out: Columns) -> None:
        warmup = any(line.strip().startswith("Warmup") for line in lines)
        benchmark = not warmup
        run: list[tuple[int, str, re.Match[str]]] = []
        n_run = 0
        for lineno, raw in enumerate(lines, 1):
            line = _LOG_PREFIX.sub("", raw).strip()
            if line.startswith("Benchmark ..."):
                benchmark = True
                continue
            kind = next((k for k, rx in _CONSOLE.items() if rx.match(line)), None)
            if kind is None:
                continue
            m = _CONSOLE[kind].match(line)
            if kind == "prefill":
                run = []
            run.append((lineno, kind, m))  # type: ignore[arg-type]
            if kind != "total":
                continue
            first = run[0][0]
            if not benchmark:
                ctx.skip(f"lines {first}-{lineno}", "warmup run (printed before 'Benchmark ...')")
                continue
            n_run += 1
            self._group(ctx, run, f"{ctx.run or ctx.path.stem}-run{n_run}", out)

    def _group(self, ctx: ReadContext, group: list[tuple[int, str, re.Match[str]]], run: str, out: Columns) -> None:
        sizes = {int(m[1]) for _, k, m in group if k == "step" and m[1]}
        config = {"batch_size": sizes.pop()} if len(sizes) == 1 else {}
        config.update(ctx.meta)
        base = {"config": canonical_json(config), "run": run, "software": "sglang bench_one_batch (console)"}
        for n, kind, m in group:
            loc = f"line {n}"
            if kind == "prefill":
                out.add("latency", "value", float(m[1]), "s", loc, op="prefill", **base)
                out.add("throughput_input_tokens", "mean", float(m[2]), "tokens/s", loc, op="prefill", **base)
            elif kind == "median":
                out.add("latency", "median", float(m[1]), "s", loc, op="decode", **base)
                out.add("throughput_tokens", "median", float(m[2]), "tokens/s", loc, op="decode", **base)
            elif kind == "total":
                out.add("latency", "value", float(m[1]), "s", loc, **base)
                out.add("throughput_total_tokens", "mean", float(m[2]), "tokens/s", loc, **base)


__all__ = ["SglangOneBatchAdapter"]
