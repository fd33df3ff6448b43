"""trtllm-bench: TensorRT-LLM benchmark reports (printed text, --report_json) and the older [BENCHMARK] lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters import jsonutil, trtllm_legacy
from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.schema import canonical_json

# summary line label (lower-case, spaces collapsed) -> (metric, stat, unit)
LABELS: dict[str, tuple[str, str, str]] = {
    "request throughput (req/sec)": ("throughput_requests", "mean", "requests/s"),
    "total output throughput (tokens/sec)": ("throughput_tokens", "mean", "tokens/s"),
    "token throughput (tokens/sec)": ("throughput_tokens", "mean", "tokens/s"),  # <= 0.17: output tokens / total time
    "total token throughput (tokens/sec)": ("throughput_total_tokens", "mean", "tokens/s"),
    "total latency (ms)": ("duration", "value", "ms"),
    "total latency (seconds)": ("duration", "value", "s"),
    "average request latency (ms)": ("e2e_latency", "mean", "ms"),
    "per user output throughput [w/ ctx] (tps/user)": ("trtllm:output_throughput_per_user", "mean", "tokens/s"),
    "per user output throughput (tokens/sec/user)": ("trtllm:output_throughput_per_user", "mean", "tokens/s"),
    "per user output throughput (tps/user)": ("trtllm:output_throughput_per_user", "mean", "tokens/s"),
    "per gpu output throughput (tps/gpu)": ("trtllm:output_throughput_per_gpu", "mean", "tokens/s"),
    "per gpu output throughput (tokens/sec/gpu)": ("trtllm:output_throughput_per_gpu", "mean", "tokens/s"),
    "per user output speed (tps/user)": ("trtllm:output_speed_per_user", "mean", "tokens/s"),
    "per user output speed [1/tpot] (tokens/sec/user)": ("trtllm:output_speed_per_user", "mean", "tokens/s"),
    "average time-to-first-token [ttft] (ms)": ("ttft", "mean", "ms"),
    "average time-to-first-token (ms)": ("ttft", "mean", "ms"),
    "average time-per-output-token [tpot] (ms)": ("tpot", "mean", "ms"),
    "average inter-token latency (ms)": ("itl", "mean", "ms"),
    "number of requests": ("requests_completed", "value", "count"),
    "number of concurrent requests": ("concurrency", "mean", "count"),
    "average input length (tokens)": ("trtllm:input_length", "mean", "tokens"),
    "average output length (tokens)": ("trtllm:output_length", "mean", "tokens"),
}
# per-request breakdown tag -> (metric, unit)
BREAKDOWN: dict[str, tuple[str, str]] = {
    "TPOT": ("tpot", "ms"), "TTFT": ("ttft", "ms"), "Latency": ("e2e_latency", "ms"),
    "GTPS": ("trtllm:generation_speed_per_user", "tokens/s"), "DT": ("trtllm:draft_tokens", "count"),
    "ADT": ("trtllm:accepted_draft_tokens", "count"), "DAR": ("trtllm:draft_acceptance_rate", "ratio"),
    "AL": ("trtllm:acceptance_length", "count"),
}
STATS = {"MINIMUM": "min", "MAXIMUM": "max", "AVERAGE": "mean", "MEAN": "mean"}
# header label -> config key
CONFIG: dict[str, str] = {
    "model": "model", "model path": "model_path", "engine directory": "engine_dir", "revision": "revision",
    "tensorrt-llm version": "version", "tensorrt llm version": "version", "dtype": "dtype",
    "kv cache dtype": "kv_cache_dtype", "quantization": "quantization", "max input length": "max_input_length",
    "max sequence length": "max_sequence_length", "tp size": "tp_size", "pp size": "pp_size", "ep size": "ep_size",
    "max runtime batch size": "max_batch_size", "max runtime tokens": "max_num_tokens",
    "scheduling policy": "scheduling_policy", "kv memory percentage": "kv_cache_percentage",
    "dataset path": "dataset_path", "number of sequences": "dataset_sequences",
}
ISSUE_RATE = ("the rate requests were handed to the runtime (requests / submission time), "
              "not a throughput; not stored")
_PREFIX = re.compile(r"^(?:\[\d\d/\d\d/\d{4}-[\d:]+\]\s*)?(?:\[TRT-LLM\]\s*\[[A-Z]\]\s*)?")
_SECTION = re.compile(r"^=\s+(?P<name>[A-Za-z][^=]*?)\s*$")
_BREAK = re.compile(r"^\[(?P<tag>[A-Za-z]+)\]\s+(?P<stat>[A-Z]+|P\d+(?:\.\d+)?)\s*:\s*(?P<value>\S*)\s*$")
_LABEL = re.compile(r"^(?P<label>[A-Za-z][^:]*?)\s*:\s*(?P<value>.*?)\s*$")
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
OVERVIEW = "PERFORMANCE OVERVIEW"
OLD_OVERVIEW = "STATISTICS"
"""0.12's name of the overview section (then ending with `Total Latency (seconds)`)."""
HEADERS = ("PYTORCH BACKEND", "ENGINE DETAILS", "_AUTODEPLOY BACKEND")


class TrtllmBenchAdapter(Adapter):
    name = "trtllm-bench"
    fidelity = "measured"
    formats = ("TensorRT-LLM trtllm-bench throughput/latency reports (printed PERFORMANCE OVERVIEW text or "
               "--report_json), gptManagerBenchmark and benchmarks/python/benchmark.py [BENCHMARK] lines")
    extensions: ClassVar[tuple[str, ...]] = (".txt", ".log", ".out", ".json")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        if t.lstrip().startswith("{"):
            return '"request_throughput_req_s"' in t or ('"world_info"' in t and '"request_info"' in t)
        if trtllm_legacy.sniff(t) or "[TensorRT-LLM] TensorRT-LLM version:" in t:
            return True
        up = t.upper()
        return any(f"= {s}" in up for s in (OVERVIEW, *HEADERS, "REQUEST DETAILS", "WORLD + RUNTIME INFORMATION"))

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        text = read_text(ctx)
        out = Columns()
        if text.lstrip().startswith("{"):
            self._json(ctx, out)
        elif not re.search(rf"^=\s+({OVERVIEW}|{OLD_OVERVIEW})\s*$", text, re.I | re.M) and trtllm_legacy.sniff(text):
            trtllm_legacy.read(ctx, text, out)
        else:
            self._text(ctx, text, out)
        if not len(out):
            raise ctx.error(None, "no trtllm-bench results found",
                            "pass the report printed by `trtllm-bench ... throughput|latency` or its --report_json")
        return out.cols

    # --- printed report ----------------------------------------------------------------------
    def _text(self, ctx: ReadContext, text: str, out: Columns) -> None:
        reports: list[_Report] = []
        cur: _Report | None = None
        section: str | None = None
        named = False  # the last line named a section: the next ==== closes its header
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = _PREFIX.sub("", raw).strip()
            m = _SECTION.match(line)
            if m and not line.startswith("=="):
                section = re.sub(r"\s+", " ", m["name"]).upper()
                key = section.split(" (")[0]
                if key == OLD_OVERVIEW:
                    key = section = OVERVIEW
                if cur is None or key in cur.sections or (key in HEADERS and cur.has_overview):
                    cur = _Report(lineno)
                    reports.append(cur)
                cur.sections[key] = lineno
                named = True
                continue
            if line.startswith("=="):
                if not named:  # a rule that is not a header's: the section ends here
                    section = None
                named = False
                continue
            named = False
            if cur is None or section is None or not line or line.startswith("--"):
                continue
            cur.line(ctx, section, line, lineno)
        if not reports:
            raise ctx.error(None, f"no '= {OVERVIEW}' section found",
                            "pass the text trtllm-bench prints at the end of a run (or --report_json)")
        for i, rep in enumerate(reports, 1):
            rep.check(ctx)
            run = ctx.run if len(reports) == 1 else f"{ctx.run or 'trtllm-bench'}#{i}"
            rep.emit(ctx, out, run, i if len(reports) > 1 else None)

    # --- --report_json ----------------------------------------------------------------------
    def _json(self, ctx: ReadContext, out: Columns) -> None:
        objs = list(jsonutil.objects(ctx))
        for n, (line, obj) in enumerate(objs, 1):
            rep = _Report(0)
            pre = f"{line}: $" if line else "$"
            for sec, keys in JSON_CONFIG.items():
                d = obj.get(sec)
                if isinstance(d, dict):
                    for k, v in d.items():
                        loc = f"{pre}.{sec}.{k}"
                        if k == "issue_rate":
                            ctx.skip(loc, ISSUE_RATE)
                        elif k in keys and isinstance(v, (str, int, float, bool)):
                            if v not in ("None", ""):  # str(None) for a path the run did not use
                                rep.config[keys[k]] = v
                        elif k not in JSON_METRICS.get(sec, {}):
                            ctx.skip_keys([f"{sec}.{k}"], f"{pre}.")
            for k in obj:
                if k not in JSON_CONFIG and k != "machine":
                    ctx.skip_keys([k], f"{pre}.")
            machine = obj.get("machine")
            if isinstance(machine, dict) and isinstance(machine.get("name"), str):
                rep.hardware = machine["name"]
            for sec, specs in JSON_METRICS.items():
                d = obj.get(sec)
                if not isinstance(d, dict):
                    continue
                for k, spec in specs.items():
                    if k not in d:
                        continue
                    loc = f"{pre}.{sec}.{k}"
                    if len(spec) == 3:
                        rep.add(spec[0], spec[1], jsonutil.number(ctx, d, k, loc), spec[2], loc)
                    elif isinstance(d[k], dict):
                        metric, unit = spec
                        for sk in d[k]:
                            stat = _json_stat(sk)
                            if stat is None:
                                ctx.skip_keys([f"{sec}.{k}.{sk}"], f"{pre}.")
                                continue
                            rep.add(metric, stat, jsonutil.number(ctx, d[k], sk, f"{loc}.{sk}"), unit,
                                    f"{loc}.{sk}")
            perf = obj.get("performance")
            if not isinstance(perf, dict) or "request_throughput_req_s" not in perf:
                raise ctx.error(f"{pre}.performance", "no 'performance.request_throughput_req_s'",
                                "pass the file written by `trtllm-bench ... --report_json FILE`")
            run = ctx.run if len(objs) == 1 else f"{ctx.run or 'trtllm-bench'}#{n}"
            rep.emit(ctx, out, run, n if len(objs) > 1 else None)


def _json_stat(key: str) -> str | None:
    k = key.lower()
    if k in ("minimum", "maximum", "average", "mean"):
        return STATS[k.upper()]
    return k if re.fullmatch(r"p\d+(\.\d+)?", k) else None


_TOKS = "tokens/s"
JSON_METRICS: dict[str, dict[str, tuple[str, ...]]] = {
    "request_info": {"num_requests": ("requests_completed", "value", "count"),
                     "avg_num_concurrent_requests": ("concurrency", "mean", "count"),
                     "avg_input_length": ("trtllm:input_length", "mean", "tokens"),
                     "avg_output_length": ("trtllm:output_length", "mean", "tokens")},
    "performance": {"total_latency_ms": ("duration", "value", "ms"),
                    "avg_request_latency_ms": ("e2e_latency", "mean", "ms"),
                    "request_throughput_req_s": ("throughput_requests", "mean", "requests/s"),
                    "system_output_throughput_tok_s": ("throughput_tokens", "mean", _TOKS),
                    "system_total_throughput_tok_s": ("throughput_total_tokens", "mean", _TOKS),
                    "output_throughput_per_user_tok_s": ("trtllm:output_throughput_per_user", "mean", _TOKS),
                    "output_throughput_per_gpu_tok_s": ("trtllm:output_throughput_per_gpu", "mean", _TOKS),
                    "request_latency_percentiles_ms": ("e2e_latency", "ms")},
    "streaming_metrics": {"token_output_speed_tok_s": ("trtllm:output_speed_per_user", "mean", _TOKS),
                          "avg_ttft_ms": ("ttft", "mean", "ms"), "avg_tpot_ms": ("tpot", "mean", "ms"),
                          "tpot_percentiles": ("tpot", "ms"), "ttft_percentiles": ("ttft", "ms"),
                          "gen_tps_percentiles": ("trtllm:generation_speed_per_user", _TOKS)},
}
JSON_CONFIG: dict[str, dict[str, str]] = {
    "engine": {"model": "model", "model_path": "model_path", "engine_dir": "engine_dir", "version": "version",
               "backend": "backend", "dtype": "dtype", "kv_cache_dtype": "kv_cache_dtype",
               "quantization": "quantization", "max_input_length": "max_input_length",
               "max_sequence_length": "max_sequence_length"},
    "world_info": {k: k for k in ("tp_size", "pp_size", "ep_size", "world_size", "max_batch_size", "max_num_tokens",
                                  "scheduling_policy", "kv_cache_percentage")},
    "request_info": {}, "performance": {}, "streaming_metrics": {},
}


class _Report:
    """One report in a file: header config, and metric records in file order (first of a key wins)."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.sections: dict[str, int] = {}
        self.config: dict[str, Any] = {}
        self.hardware: str | None = None
        self.rows: list[tuple[str, str, float | None, str, str]] = []
        self._seen: dict[tuple[str, str], str] = {}
        self._skips: list[tuple[str, str]] = []

    @property
    def has_overview(self) -> bool:
        return OVERVIEW in self.sections

    def add(self, metric: str, stat: str, value: float | None, unit: str, loc: str) -> None:
        first = self._seen.get((metric, stat))
        if first is not None:
            self._skips.append((loc, f"the same {metric} {stat} as {first}"))
            return
        self._seen[(metric, stat)] = loc
        self.rows.append((metric, stat, value, unit, loc))

    def line(self, ctx: ReadContext, section: str, line: str, lineno: int) -> None:
        loc = f"line {lineno}"
        if section == "MACHINE DETAILS":
            if "," in line:
                self.hardware = line.split(",", 1)[0].strip()
            return
        b = _BREAK.match(line)
        if b and b["tag"] in BREAKDOWN:
            metric, unit = BREAKDOWN[b["tag"]]
            stat = STATS.get(b["stat"]) or b["stat"].lower()
            self.add(metric, stat, _number(ctx, b["value"], loc, line), unit, f"{loc}: [{b['tag']}] {b['stat']}")
            return
        m = _LABEL.match(line)
        if not m:
            self._skips.append((loc, f"{line[:60]!r}: not read by xfid"))
            return
        label = re.sub(r"\s+", " ", m["label"]).lower()
        value = m["value"]
        if label in LABELS:
            metric, stat, unit = LABELS[label]
            self.add(metric, stat, _number(ctx, value, loc, line), unit, f"{loc}: {m['label'].strip()}")
        elif label == "issue rate (req/sec)":
            self._skips.append((f"{loc}: Issue Rate (req/sec)", ISSUE_RATE))
        elif label in CONFIG:
            if value not in ("", "None", "N/A"):
                self.config[CONFIG[label]] = _scalar(value)
        else:
            self._skips.append((f"{loc}: {m['label'].strip()}", "not read by xfid"))

    def check(self, ctx: ReadContext) -> None:
        at = self.sections.get(OVERVIEW)
        if at is None:
            raise ctx.error(f"line {self.start}", f"report has no '= {OVERVIEW}' section",
                            "the file may be truncated; pass the whole trtllm-bench output")
        if ("throughput_requests", "mean") not in self._seen:
            raise ctx.error(f"line {at}", f"{OVERVIEW} has no 'Request Throughput (req/sec)' line",
                            "the file may be truncated; pass the whole trtllm-bench output")

    def emit(self, ctx: ReadContext, out: Columns, run: str | None, index: int | None) -> None:
        for loc, why in self._skips:
            ctx.skip(loc, why)
        config = dict(self.config)
        if index is not None:
            config["report"] = index
        config.update(ctx.meta)
        version = self.config.get("version")
        base = {
            "config": canonical_json(config), "run": run, "hardware": self.hardware,
            "software": "trtllm-bench" + (f" {version}" if version else ""),
            "target": ctx.target or _gpu_target(self.hardware),
            "workload": ctx.workload or self._workload(),
        }
        for metric, stat, value, unit, loc in self.rows:
            out.add(metric, stat, value, unit, loc, null_reason=None if value is not None else "null in file", **base)

    def _workload(self) -> str | None:
        """`model/bsN/inISL/outOSL/dtype` from what the report carries; None without model and lengths."""
        vals = {m: v for m, s, v, _, _ in self.rows if s == "mean"}
        model, isl, osl = self.config.get("model"), vals.get("trtllm:input_length"), vals.get("trtllm:output_length")
        if not isinstance(model, str) or model in ("", "None") or isl is None or osl is None:
            return None
        parts = [model.rstrip("/").rsplit("/", 1)[-1].lower()]
        if self.config.get("max_batch_size") not in (None, "None"):
            parts.append(f"bs{self.config['max_batch_size']}")
        parts += [f"in{_short(isl)}", f"out{_short(osl)}"]
        if isinstance(self.config.get("dtype"), str):
            parts.append(str(self.config["dtype"]).lower())
        return "/".join(parts)


def _short(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _gpu_target(name: str | None) -> str | None:
    """A target slug from the GPU name the report prints ("NVIDIA H100 80GB HBM3" -> "h100-80gb-hbm3")."""
    if not name or name.lower().startswith(("unknown", "no gpu")):
        return None
    slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^nvidia\s+", "", name.strip().lower())).strip("-")
    return slug or None


def _number(ctx: ReadContext, text: str, loc: str, line: str) -> float | None:
    t = text.strip()
    if t in ("N/A", "None", "nan"):
        return None
    if not _NUMBER.match(t):
        raise ctx.error(loc, f"expected a number in {line[:80]!r}, got {t!r}",
                        "the file may be truncated or edited; pass the output as trtllm-bench printed it")
    return float(t)


def _scalar(text: str) -> Any:
    t = text.strip()
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    return float(t) if _NUMBER.match(t) else t

__all__ = ["TrtllmBenchAdapter"]
