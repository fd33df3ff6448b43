"""llmviewer: LLM-Viewer `save_csv` output (`=== model hw ... ===` sections, suffixed values like 4.2G, 33.6MB, 2.1ms)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, ReadContext, head_text, read_text
from xfid.schema import canonical_json

HEADER = ("layer_name,OPs,Access,arithmetic_intensity,performance,bound,load_weight,load_act,store_act,"
          "load_kv_cache,store_kv_cache,inference_time")
FIELDS = HEADER.split(",")
_LEGEND = HEADER.lower()  # forks write `ops` for `OPs`: the legend is matched without case
_SECTION = re.compile(r"^(?:===|#)\s*(?:\[(?P<ts>[\d-]+ [\d:]+)\]\s*)?(?P<body>.*?)\s*(?:===)?\s*$")
_SCALE = {"": 0, "K": 3, "M": 6, "G": 9, "T": 12}  # decimal exponents: parsed exactly, no float scaling
_TIME = {"s": 0, "ms": -3, "us": -6, "ns": -9}
_NUMBER = re.compile(r"^([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)([KMGT]?)$")
_BYTES = re.compile(r"^([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)([KMGT]?)B$")
_SECONDS = re.compile(r"^([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(m|u|n)?s$")
# column -> (metric, kind); bytes columns become `bytes` records with the column in config
METRICS: dict[str, tuple[str, str]] = {
    "OPs": ("flops", "number"),
    "Access": ("bytes", "bytes"),
    "performance": ("flop_rate", "number"),
    "load_weight": ("llmviewer:load_weight", "bytes"),
    "load_act": ("llmviewer:load_act", "bytes"),
    "store_act": ("llmviewer:store_act", "bytes"),
    "load_kv_cache": ("llmviewer:load_kv_cache", "bytes"),
    "store_kv_cache": ("llmviewer:store_kv_cache", "bytes"),
    "inference_time": ("latency", "time"),
}
UNITS = {"number": None, "bytes": "B", "time": "s"}


def decode(raw: str, kind: str) -> float | None:
    """`4.2G` -> 4.2e9; `33.6MB` -> 33.6e6 (bytes); `2.1ms` -> 0.0021 (seconds). None if malformed."""
    s = raw.strip()
    if kind == "time":
        m = _SECONDS.match(s)
        return None if not m else float(f"{m[1]}e{_TIME[(m[2] or '') + 's']}")
    m = (_BYTES if kind == "bytes" else _NUMBER).match(s)
    return None if not m else float(f"{m[1]}e{_SCALE[m[2]]}")


def _section_config(line: str) -> dict[str, Any]:
    m = _SECTION.match(line.strip())
    body = (m["body"] if m else line).strip("= ").strip()
    words = body.split()
    cfg: dict[str, Any] = {k: v for k, _, v in (w.partition("=") for w in words if "=" in w)}
    plain = [w for w in words if "=" not in w]
    if plain:
        cfg["model_id"] = plain[0]
    if len(plain) > 1:
        cfg["hardware"] = plain[1]
    if m and m["ts"]:
        cfg["_ts"] = m["ts"]
    return cfg


class LlmViewerAdapter(Adapter):
    name = "llm-viewer"
    fidelity = "archmodel"
    formats = "LLM-Viewer per-layer CSV (layer_name,OPs,Access,...,inference_time; K/M/G/T, B, ms/us/ns suffixes)"
    extensions: ClassVar[tuple[str, ...]] = (".csv",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return any(_is_legend(ln) for ln in head_text(head).splitlines())

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        lines = read_text(ctx).splitlines()
        cols: dict[str, list[Any]] = {k: [] for k in ("op", "metric", "stat", "value", "unit", "source_loc", "config",
                                                      "software", "run", "timestamp")}
        sections = sum(1 for ln in lines if _is_legend(ln))
        section_cfg: dict[str, Any] = {}
        in_table = False
        k = 0
        for lineno, line in enumerate(lines, 1):
            s = line.strip()
            if not s:
                continue
            if s.startswith(("===", "#")):
                section_cfg = _section_config(s)
                in_table = False
                continue
            if _is_legend(s):
                in_table, k = True, k + 1
                continue
            if not in_table:
                raise ctx.error(f"line {lineno}", f"expected the LLM-Viewer header `{HEADER[:40]}...`, got {s[:60]!r}")
            row = s.split(",")
            if len(row) != len(FIELDS):
                raise ctx.error(f"line {lineno}", f"expected {len(FIELDS)} fields, got {len(row)}",
                                "an LLM-Viewer row has one value per header column")
            cfg = {key: v for key, v in section_cfg.items() if key != "_ts"}
            cfg.update(bound=row[5].strip(), arithmetic_intensity=decode(row[3], "number"), **ctx.meta)
            cfg_json = canonical_json(cfg)
            ts = _iso(section_cfg.get("_ts"))
            run = (ctx.run or "llm-viewer") + f"#{k}" if sections > 1 else ctx.run
            for i, name in enumerate(FIELDS):
                if name not in METRICS:
                    continue
                metric, kind = METRICS[name]
                v = decode(row[i], kind)
                if v is None:
                    want = {"number": "a number with an optional K/M/G/T suffix", "bytes": "e.g. 33.6MB",
                            "time": "e.g. 2.1ms, 21.0us or 0s"}[kind]
                    raise ctx.error(f"line {lineno}, column {name!r}", f"cannot decode {row[i]!r}", f"expected {want}")
                cols["op"].append(row[0].strip())
                cols["metric"].append(metric)
                cols["stat"].append("value")
                cols["value"].append(v)
                cols["unit"].append(UNITS[kind] if metric != "flop_rate" else "FLOP/s")
                cols["source_loc"].append(f"line {lineno}, column {name!r}")
                cols["config"].append(cfg_json)
                cols["software"].append("LLM-Viewer")
                cols["run"].append(run)
                cols["timestamp"].append(ts)
        if not cols["op"]:
            raise ctx.error(None, "no layer rows found", f"an LLM-Viewer CSV has a `{HEADER[:30]}...` header and rows")
        return cols


def _is_legend(line: str) -> bool:
    return line.strip().replace(" ", "").lower() == _LEGEND


def _iso(ts: str | None) -> str | None:
    if not ts:
        return None
    try:
        return datetime.strptime(ts, "%Y-%m-%d %H:%M:%S").isoformat() + "+00:00"
    except ValueError:
        return None


__all__ = ["LlmViewerAdapter"]
