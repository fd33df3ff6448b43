"""llmcompass-hw: LLMCompass' real-hardware GEMM sweep CSVs (headerless `M, N, K, 0.19ms, 101.7Tflops`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, ReadContext, head_text, read_text
from xfid.schema import canonical_json

DEFAULT_WORKLOAD = "gemm-sweep"
_ROW = re.compile(
    r"^\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(ms|us|s)\s*,"
    r"\s*(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(Tflops|TFLOPS)\s*,?\s*$"
)


class LlmCompassHwAdapter(Adapter):
    name = "llmcompass-hw"
    fidelity = "measured"
    formats = "LLMCompass real-hardware GEMM sweep CSV (headerless M, N, K, <t>ms, <x>Tflops)"
    extensions: ClassVar[tuple[str, ...]] = (".csv",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        lines = [ln for ln in head_text(head).splitlines() if ln.strip()]
        if not lines:
            return False
        complete = lines if len(head) < 8192 else lines[:-1]  # the last line may be cut off
        return bool(complete) and all(_ROW.match(ln) for ln in complete[:20])

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        target = ctx.require("target", "an LLMCompass sweep does not say which GPU it was measured on")
        workload = ctx.workload or DEFAULT_WORKLOAD
        precision = str(ctx.options.get("precision", "fp16"))
        cols: dict[str, list[Any]] = {k: [] for k in ("target", "workload", "op", "metric", "stat", "value",
                                                      "unit", "n_samples", "source_loc", "config", "software")}
        for lineno, line in enumerate(read_text(ctx).splitlines(), 1):
            if not line.strip():
                continue
            m = _ROW.match(line)
            if not m:
                raise ctx.error(f"line {lineno}", f"expected `M, N, K, <time>ms, <throughput>Tflops`, got {line[:80]!r}",
                                "an LLMCompass real-hardware sweep row has five comma-separated fields")
            mm, nn, kk = (int(x) for x in m.group(1, 2, 3))
            if min(mm, nn, kk) < 1:
                raise ctx.error(f"line {lineno}", f"GEMM sizes must be positive, got {mm}, {nn}, {kk}")
            op = f"gemm[m={mm},n={nn},k={kk}]"
            cfg = canonical_json({"precision": precision, "m": mm, "n": nn, "k": kk, **ctx.meta})
            for metric, value, unit, field in (("latency", float(m[4]), m[5], "field 4"),
                                               ("flop_rate", float(m[6]), "TFLOP/s", "field 5")):
                cols["target"].append(target)
                cols["workload"].append(workload)
                cols["op"].append(op)
                cols["metric"].append(metric)
                cols["stat"].append("value")
                cols["value"].append(value)
                cols["unit"].append(unit)
                cols["n_samples"].append(None)
                cols["source_loc"].append(f"line {lineno}, {field}")
                cols["config"].append(cfg)
                cols["software"].append("LLMCompass real-hardware sweep")
        if not cols["op"]:
            raise ctx.error(None, "no GEMM rows found")
        return cols


__all__ = ["LlmCompassHwAdapter"]
