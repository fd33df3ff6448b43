"""The older TensorRT-LLM benchmark outputs: gptManagerBenchmark and benchmarks/python/benchmark.py [BENCHMARK] lines."""

from __future__ import annotations

import re
from typing import Any

from xfid.adapters.base import Columns, ReadContext
from xfid.schema import canonical_json

_LINE = re.compile(r"^\[BENCHMARK\]\s+(?P<rest>.*?)\s*$")
_SNIFF = re.compile(r"^\[BENCHMARK\] (model_name|num_samples|batch_size|total_latency\(ms\)) ", re.M)
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_STAT_KEY = re.compile(r"^(?P<stat>avg|max|min|p\d+)_(?P<name>[a-z_]+)\((?P<unit>ms)\)$")
PAIR_START = ("model_name", "batch_size")
"""benchmarks/python/benchmark.py and gptSessionBenchmark print one line of `key value` pairs per run."""

# gptManagerBenchmark: one `key value` per line
MANAGER: dict[str, tuple[str, str, str]] = {
    "num_samples": ("requests_completed", "value", "count"),
    "num_samples(ms)": ("requests_completed", "value", "count"),  # an old misprint of num_samples
    "num_error_samples": ("requests_failed", "value", "count"),
    "total_latency(ms)": ("duration", "value", "ms"),
    "seq_throughput(seq/sec)": ("throughput_requests", "mean", "requests/s"),
    "token_throughput(token/sec)": ("throughput_tokens", "mean", "tokens/s"),
    "avg_acceptance_rate(tokens/decoding steps)": ("trtllm:acceptance_length", "mean", "count"),
}
MANAGER_STATS: dict[str, str] = {
    "sequence_latency": "e2e_latency", "time_to_first_token": "ttft", "inter_token_latency": "itl",
    "request_queueing_latency": "trtllm:queueing_latency",
}
# benchmark.py pairs -> (metric, stat, unit); every other pair goes to config
PAIRS: dict[str, tuple[str, str, str]] = {
    "tokens_per_sec": ("throughput_tokens", "mean", "tokens/s"),
    "tokensPerSec": ("throughput_tokens", "mean", "tokens/s"),
    "latency(ms)": ("e2e_latency", "mean", "ms"),
    "percentile95(ms)": ("e2e_latency", "p95", "ms"),
    "percentile99(ms)": ("e2e_latency", "p99", "ms"),
    "generation_time(ms)": ("trtllm:generation_time", "mean", "ms"),
    "generation_tokens_per_second": ("trtllm:generation_throughput", "mean", "tokens/s"),
    "total_generated_tokens": ("output_tokens", "value", "tokens"),
}
_STAT = {"avg": "mean", "max": "max", "min": "min"}


def sniff(text: str) -> bool:
    return bool(_SNIFF.search(text))


def read(ctx: ReadContext, text: str, out: Columns) -> None:
    """Every [BENCHMARK] line of `text` into `out`: one run per pairs line or per gptManagerBenchmark block."""
    blocks: list[list[tuple[int, str, str]]] = []
    pair_lines: list[tuple[int, list[str]]] = []
    cur: list[tuple[int, str, str]] | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        m = _LINE.match(raw.strip())
        if not m or not m["rest"]:
            continue
        tokens = m["rest"].split()
        if tokens[0] in PAIR_START:
            pair_lines.append((lineno, tokens))
            continue
        if len(tokens) < 2:
            raise ctx.error(f"line {lineno}", f"[BENCHMARK] {tokens[0]!r} has no value", "the file may be truncated")
        key, value = " ".join(tokens[:-1]), tokens[-1]
        keys = {k for _, k, _ in cur} if cur is not None else set()
        if cur is None or (key in keys and not (key == "num_samples" and "total_latency(ms)" not in keys)):
            cur = []
            blocks.append(cur)
        cur.append((lineno, key, value))
    for i, block in enumerate(blocks, 1):
        run = ctx.run if len(blocks) == 1 else f"{ctx.run or 'gptManagerBenchmark'}#{i}"
        _manager(ctx, block, out, run, i if len(blocks) > 1 else None)
    seen: set[str] = set()
    for lineno, tokens in pair_lines:
        _pairs(ctx, lineno, tokens, out, seen)


def _manager(ctx: ReadContext, block: list[tuple[int, str, str]], out: Columns, run: str | None,
             index: int | None) -> None:
    keys = {k for _, k, _ in block}
    if "token_throughput(token/sec)" not in keys and "seq_throughput(seq/sec)" not in keys:
        raise ctx.error(f"line {block[0][0]}", "gptManagerBenchmark block has no 'token_throughput(token/sec)' line",
                        "the file may be truncated; pass the whole output")
    config: dict[str, Any] = {"report": index} if index is not None else {}
    config.update(ctx.meta)
    base = {"config": canonical_json(config), "run": run, "software": "gptManagerBenchmark",
            "target": ctx.target,
            "workload": ctx.require("workload", "gptManagerBenchmark prints no model or sequence lengths")}
    done: dict[tuple[str, str], int] = {}
    for lineno, key, value in block:
        loc = f"line {lineno}: {key}"
        m = _STAT_KEY.match(key)
        if key in MANAGER:
            metric, stat, unit = MANAGER[key]
        elif m and m["name"] in MANAGER_STATS:
            metric, stat, unit = MANAGER_STATS[m["name"]], _STAT.get(m["stat"], m["stat"]), m["unit"]
        else:
            ctx.skip(loc, "not read by xfid")
            continue
        if (metric, stat) in done:  # num_samples is printed twice per block
            ctx.skip(loc, f"the same {metric} {stat} as line {done[(metric, stat)]}")
            continue
        done[(metric, stat)] = lineno
        out.add(metric, stat, _number(ctx, value, f"line {lineno}", key), unit, loc, **base)


def _pairs(ctx: ReadContext, lineno: int, tokens: list[str], out: Columns, seen: set[str]) -> None:
    loc = f"line {lineno}"
    if len(tokens) % 2:
        raise ctx.error(loc, f"[BENCHMARK] line ends with key {tokens[-1]!r} and no value", "the file may be truncated")
    pairs = dict(zip(tokens[::2], tokens[1::2], strict=True))
    if not any(k in pairs for k in ("tokens_per_sec", "tokensPerSec", "latency(ms)")):
        raise ctx.error(loc, "[BENCHMARK] line has no 'tokens_per_sec' or 'latency(ms)'", "the file may be truncated")
    config: dict[str, Any] = {k: _scalar(v) for k, v in pairs.items() if k not in PAIRS}
    config.update(ctx.meta)
    workload = ctx.workload or _workload(pairs)
    run = ctx.run
    if workload in seen:  # the same configuration measured again in this file: its own run
        run = f"{ctx.run or 'benchmark.py'}#line{lineno}"
    seen.add(str(workload))
    base = {"config": canonical_json(config), "run": run, "target": ctx.target, "workload": workload,
            "software": "TensorRT-LLM benchmarks/python/benchmark.py" if "model_name" in pairs
            else "gptSessionBenchmark"}
    for key, value in pairs.items():
        if key in PAIRS:
            metric, stat, unit = PAIRS[key]
            out.add(metric, stat, _number(ctx, value, loc, key), unit, f"{loc}: {key}", **base)


def _workload(pairs: dict[str, str]) -> str | None:
    if not all(k in pairs for k in ("model_name", "batch_size", "input_length", "output_length")):
        return None
    parts = [pairs["model_name"].lower(), f"bs{pairs['batch_size']}", f"in{pairs['input_length']}",
             f"out{pairs['output_length']}"]
    if "precision" in pairs:
        parts.append(pairs["precision"].lower())
    return "/".join(parts)


def _number(ctx: ReadContext, text: str, loc: str, key: str) -> float | None:
    if not _NUMBER.match(text):
        raise ctx.error(loc, f"{key} must be a number, got {text!r}", "the file may be truncated or edited")
    return float(text)


def _scalar(text: str) -> Any:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return float(text) if _NUMBER.match(text) else text
