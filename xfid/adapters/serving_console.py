"""serving-console: the printed "Serving Benchmark Result" block of vLLM and SGLang serving benchmarks.

`vllm bench serve` / `benchmark_serving.py` and SGLang's `bench_serving` print, after their
progress bar, one block per run:

    ============ Serving Benchmark Result ============
    Successful requests:                     1000
    ...
    ---------------Time to First Token----------------
    Mean TTFT (ms):                          157.75
    P99 TTFT (ms):                           532.92
    ==================================================

A console log (INFO lines, progress bars, a `Namespace(...)` dump of the arguments) or a pasted
copy of it (a Markdown note, lines commented out with `# `) may hold several blocks: each is its
own run, named `<run or file stem>-block<N>`. Every row becomes a record whose `source_loc` is its
line; latency rows are in ms as printed (2 decimals). The block says which tool printed it: SGLang
writes `Backend:`, `E2E Latency` and `(retokenized)` rows, vLLM `E2EL`. Settings printed before a
block (`Traffic request rate:`, `Maximum request concurrency:`, simple values of the `Namespace(...)`
dump) go to `config`. A row xfid does not know is listed as not read, never dropped unseen.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, Columns, ReadContext, head_text
from xfid.adapters.jsonutil import read_bounded
from xfid.schema import canonical_json

MARKER = " Serving Benchmark Result "
_HEADER = re.compile(r"^(.*?)=+ Serving Benchmark Result =+\s*$")
_CLOSE = re.compile(r"^=+\s*$")
_SECTION = re.compile(r"^-+[^:]*-+\s*$")
_ROW = re.compile(r"^(?P<label>[^:]+?):\s+(?P<value>\S.*?)\s*$")
_STAT = re.compile(r"^(Mean|Median|Std|P\d+(?:\.\d+)?) (TTFT|TPOT|ITL|E2EL|E2E Latency) \(ms\)$")
LATENCY = {"TTFT": "ttft", "TPOT": "tpot", "ITL": "itl", "E2EL": "e2e_latency", "E2E Latency": "e2e_latency"}
# printed label -> (metric, stat, unit)
ROWS: dict[str, tuple[str, str, str]] = {
    "Successful requests": ("requests_completed", "value", "count"),
    "Failed requests": ("requests_failed", "value", "count"),
    "Benchmark duration (s)": ("duration", "value", "s"),
    "Total input tokens": ("input_tokens", "value", "tokens"),
    "Total input text tokens": ("sglang:input_text_tokens", "value", "tokens"),
    "Total input vision tokens": ("sglang:input_vision_tokens", "value", "tokens"),
    "Total generated tokens": ("output_tokens", "value", "tokens"),
    "Total generated tokens (retokenized)": ("sglang:output_tokens_retokenized", "value", "tokens"),
    "Request throughput (req/s)": ("throughput_requests", "mean", "requests/s"),
    "Request goodput (req/s)": ("goodput_requests", "mean", "requests/s"),
    "Input token throughput (tok/s)": ("throughput_input_tokens", "mean", "tokens/s"),
    "Output token throughput (tok/s)": ("throughput_tokens", "mean", "tokens/s"),
    "Peak output token throughput (tok/s)": ("throughput_tokens", "max", "tokens/s"),
    "Total Token throughput (tok/s)": ("throughput_total_tokens", "mean", "tokens/s"),
    "Total token throughput (tok/s)": ("throughput_total_tokens", "mean", "tokens/s"),
    "Total throughput (tok/s)": ("throughput_total_tokens", "mean", "tokens/s"),
    "Concurrency": ("concurrency", "mean", "count"),
    "Peak concurrent requests": ("concurrency", "max", "count"),
    "Accept length": ("sglang:accept_length", "mean", "count"),
}
# printed label -> config key (settings, not measurements)
SETTINGS = {"Backend": "backend", "Traffic request rate": "request_rate", "Request rate configured (RPS)":
            "request_rate", "Max request concurrency": "max_concurrency", "Max reqeuest concurrency":
            "max_concurrency", "Maximum request concurrency": "max_concurrency", "Burstiness factor": "burstiness"}
NAMESPACE_KEYS = ("backend", "model", "served_model_name", "dataset_name", "num_prompts", "request_rate",
                  "max_concurrency", "random_input_len", "random_output_len", "random_range_ratio", "seed",
                  "endpoint_type", "burstiness")
_NS_VALUE = re.compile(r"(?<![\w.])(\w+)=('(?:[^'\\]|\\.)*'|-?\d+(?:\.\d+)?(?:e-?\d+)?|inf|None|True|False)(?=[,)])")
_PRE = re.compile(r"^(Traffic request rate|Burstiness factor|Maximum request concurrency): (\S.*?)\s*$")
_HINTS = ("namespace(", "bench", "serving", "ttft")
SNIFF_LIMIT = 16 << 20
"""How far sniff looks for the marker in a file whose head looks like a benchmark log."""
NO_TIMING = ("ttft", "tpot", "itl")


class ServingConsoleAdapter(Adapter):
    name = "serving-console"
    fidelity = "measured"
    formats = ("the printed \"Serving Benchmark Result\" block(s) of vllm bench serve and SGLang bench_serving "
               "(console logs, pasted notes; P90/P95/P99 rows, peak throughput and concurrency)")
    extensions: ClassVar[tuple[str, ...]] = (".log", ".txt", ".md", ".out")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        if b"\x00" in head or not t.strip() or t.lstrip().startswith(("{", "[")):
            return False
        if MARKER in t:
            return any(_HEADER.match(line) for line in t.splitlines() if MARKER in line)
        if not any(h in t.lower() for h in _HINTS):
            return False
        # a long log (server output, Namespace dump) may print the block past the head
        with open(path, "rb") as f:
            seen, tail = 0, b""
            while seen < SNIFF_LIMIT:
                chunk = f.read(1 << 20)
                if not chunk:
                    return False
                if MARKER.encode() in tail + chunk:
                    return True
                seen, tail = seen + len(chunk), chunk[-64:]
        return False

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        lines = read_bounded(ctx, 1 << 20).splitlines()
        out = Columns()
        starts = [i for i, line in enumerate(lines) if MARKER in line and _HEADER.match(line)]
        if not starts:
            raise ctx.error(None, "no \"Serving Benchmark Result\" block found",
                            "pass the console output of vllm bench serve or SGLang bench_serving")
        prev_end = 0
        for n, start in enumerate(starts, 1):
            prefix = _HEADER.match(lines[start]).group(1)  # type: ignore[union-attr]
            pre = _settings_before(lines[prev_end:start], prefix)
            run = ctx.run or ctx.path.stem
            prev_end = self._block(ctx, lines, start, prefix, pre, f"{run}-block{n}" if len(starts) > 1 else
                                   ctx.run, out)
        return out.cols

    def _block(self, ctx: ReadContext, lines: list[str], start: int, prefix: str, pre: dict[str, Any],
               run: str | None, out: Columns) -> int:
        rows: list[tuple[int, str, str]] = []
        end = None
        for i in range(start + 1, len(lines)):
            raw = lines[i]
            if prefix and raw.startswith(prefix):
                raw = raw[len(prefix):]
            elif prefix and raw.startswith(prefix.rstrip()):
                raw = raw[len(prefix.rstrip()):]
            if _CLOSE.match(raw):
                end = i
                break
            if not raw.strip() or _SECTION.match(raw):
                continue
            m = _ROW.match(raw)
            if not m:
                raise ctx.error(f"line {i + 1}", f"not a 'label: value' row of the result block: {raw[:80]!r}",
                                "the block may be cut; copy it whole, up to the closing ===== line")
            rows.append((i + 1, m["label"], m["value"]))
        if end is None:
            raise ctx.error(f"line {start + 1}", "the result block has no closing ===== line",
                            "the log may be cut short; copy the block whole")
        labels = {label for _, label, _ in rows}
        sglang = "Backend" in labels or any("E2E Latency" in x or "retokenized" in x for x in labels)
        config = dict(pre)
        for _, label, value in rows:
            if label in SETTINGS:
                config[SETTINGS[label]] = _setting(value)
        config.update(ctx.meta)
        backend = config.get("backend")
        software = ("sglang bench_serving" if sglang else "vllm bench serve") + " (console)" + (
            f" ({backend})" if isinstance(backend, str) else "")
        base = {"config": canonical_json(config), "software": software, "run": run}
        completed = next((float(v) for _, lab, v in rows if lab == "Successful requests" and _number(v) is not None),
                         None)
        for lineno, label, value in rows:
            loc = f"line {lineno}"
            if label in SETTINGS:
                continue
            stat_m = _STAT.match(label)
            if stat_m:
                stat = stat_m[1].lower()
                metric, unit = LATENCY[stat_m[2]], "ms"
            elif label in ROWS:
                metric, stat, unit = ROWS[label]
            else:
                ctx.skip_keys([label], prefix="row ")
                continue
            v = _number(value)
            if v is None:
                raise ctx.error(f"{loc}, {label!r}", f"not a number: {value!r}")
            reason = None
            if metric in NO_TIMING and stat != "std" and v == 0:
                v, reason = None, f"printed as {value} ms: no token timing (requests not streamed)"
            n = int(completed) if completed is not None and unit == "ms" and metric != "itl" else None
            out.add(metric, stat, None if v is None else v + 0.0, unit, loc, n_samples=n, null_reason=reason, **base)
        return end + 1


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v == v and abs(v) != float("inf") else None


def _setting(text: str) -> Any:
    v = _number(text)
    if v is not None:
        return int(v) if v.is_integer() and "." not in text else v
    return text


def _settings_before(lines: list[str], prefix: str) -> dict[str, Any]:
    """Settings printed before a block: the last `Namespace(...)` dump and the lines vLLM prints."""
    config: dict[str, Any] = {}
    for raw in lines:
        line = raw[len(prefix):] if prefix and raw.startswith(prefix) else raw
        if "Namespace(" in line:
            config = {}
            for key, value in _NS_VALUE.findall(line[line.index("Namespace("):]):
                if key in NAMESPACE_KEYS:
                    config[key] = value[1:-1] if value.startswith("'") else _setting(value)
        m = _PRE.match(line.strip())
        if m:
            key = SETTINGS[m[1]]
            config[key] = _setting(m[2].split(" ")[0] if m[1] == "Burstiness factor" else m[2])
    return config


__all__ = ["ServingConsoleAdapter"]
