"""Roofline bounds for everything in a store that has a model: LLM workloads, GEMM sweeps, T100 blocks."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

import pyarrow as pa

from xfid.config import UNKNOWN_TARGET, Config, is_unknown_target
from xfid.errors import XfidError
from xfid.textsafe import terminal

_GEMM = re.compile(r"^gemm\[m=(\d+),n=(\d+),k=(\d+)\]$")
_BLOCK_OPS = {
    "gemm_tile": re.compile(r"^gemm_tile\[m=(\d+),n=(\d+),k=(\d+)\]$"),
    "dma": re.compile(r"^dma\[bytes=(\d+)\]$"),
    "omvm": re.compile(r"^omvm\[vectors=(\d+)\]$"),
}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def first_token_workload(workload: str) -> str | None:
    """`M/decode/bsB/ctxC/P[/tpN]` -> `M/prefill/bs1/ctxC/P[/tpN]`: one request's prompt alone, whose
    ttft is a lower bound on the TTFT of every request of the decode workload; else None."""
    from xfid.models.llm import WORKLOAD_RE

    m = WORKLOAD_RE.match(workload)
    if not m or m["phase"] != "decode":
        return None
    return f"{m['model']}/prefill/bs1/ctx{m['ctx']}/{m['precision']}" + (f"/tp{m['tp']}" if m["tp"] else "")


def unconfigured_note(targets: set[str] | list[str]) -> str:
    """One note for every target that has records but no [targets.NAME] table: names sorted, once each,
    escaped for a terminal (they come from the ingested files). Targets of unknown hardware
    (`unknown-…`) are counted, not listed: no [targets] table could describe them."""
    unknown = sorted(t for t in set(targets) if is_unknown_target(t))
    names = [terminal(t) for t in sorted(set(targets) - set(unknown))]
    tail = ""
    if unknown:
        tail = (f"{len(unknown)} target(s) of unknown hardware ({UNKNOWN_TARGET}-…) have no roofline" if not names
                else f"; and {len(unknown)} target(s) of unknown hardware ({UNKNOWN_TARGET}-…) have none")
    if not names:
        return tail
    return _configurable_note(names) + tail


def _configurable_note(names: list[str]) -> str:
    if len(names) == 1:
        return (f"{names[0]} is not a configured target, so it has no roofline "
                f"(add [targets.{names[0]}] to xfid.toml to model it)")
    return (f"{len(names)} targets are not configured, so they have no roofline: {', '.join(names)} "
            f"(add [targets.NAME] to xfid.toml to model one)")


def plan_bounds(records: pa.Table, config: Config) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[str]]:
    """Bounds to compute for the (target, workload, op) keys of the higher fidelities in `records`.

    Returns ([(file name, roofline records)], notes about what had no model). Targets missing
    from the config are skipped and named together in one note (the first), each once however
    many workloads it has; a workload whose bound fails (e.g. an unknown model) gets a note of
    its own; a workload id of another shape is skipped.
    A decode workload also gets the prefill of one of its prompts (`M/prefill/bs1/ctxC/P`): its
    ttft is the least time to any request's first token (the competitive view's TTFT).
    """
    from xfid.models import blocks, llm, roofline

    t = records.select(["fidelity", "target", "workload", "op", "config"]).to_pylist()
    keys: dict[tuple[str, str], set[str]] = defaultdict(set)
    precision: dict[tuple[str, str], str] = {}
    for r in t:
        if r["fidelity"].startswith("roofline"):
            continue
        keys[(r["target"], r["workload"])].add(r["op"])
        if r["config"] and (r["target"], r["workload"]) not in precision:
            try:
                p = json.loads(r["config"]).get("precision")
            except ValueError:
                p = None
            if isinstance(p, str):
                precision[(r["target"], r["workload"])] = p
    for (target, workload) in list(keys):
        first = first_token_workload(workload)
        if first and (target, first) not in keys:
            keys[(target, first)] = set()  # its ttft bounds the TTFT of every request of `workload`
    out: list[tuple[str, list[dict[str, Any]]]] = []
    notes: list[str] = []
    unconfigured: set[str] = set()
    for (target, workload), ops in sorted(keys.items()):
        if target not in config.targets:
            unconfigured.add(target)
            continue
        tgt = config.targets[target]
        name = f"roofline-{_slug(target)}-{_slug(workload)}.csv"
        try:
            if workload.startswith("block/"):
                block = workload.split("/", 1)[1]
                rx = _BLOCK_OPS.get(block)
                shapes = [",".join(m.groups()) for op in sorted(ops) if rx and (m := rx.match(op))]
                if shapes:
                    out.append((name, blocks.block_bounds(block, tgt, {}, shapes)))
                continue
            gemms = sorted({(int(m[1]), int(m[2]), int(m[3])) for op in ops if (m := _GEMM.match(op))})
            if gemms:
                prec = precision.get((target, workload), "fp16")
                out.append((name, roofline.gemm_bounds(gemms, tgt, prec, workload).records()))
                continue
            try:
                w = llm.parse_workload(workload)
            except XfidError:
                continue  # not an LLM workload id: nothing to bound
            out.append((name, roofline.workload_bounds(llm.resolve_model(w.model), w, tgt).records()))
        except XfidError as e:
            notes.append(f"{target} {workload}: no roofline ({e})")
    if unconfigured:
        notes.insert(0, unconfigured_note(unconfigured))
    return out, notes
