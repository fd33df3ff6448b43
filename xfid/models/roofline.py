"""Roofline bounds: per-op latency = max(compute, memory, interconnect time) and the limiter."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfid.config import Target
from xfid.errors import InputError
from xfid.models.llm import (
    BYTES_PER_ELEMENT,
    ModelConfig,
    ModelError,
    OpCost,
    Workload,
    decompose,
    intensity,
)
from xfid.schema import canonical_json

FIDELITY = "roofline"
LIMITERS = ("compute", "memory", "interconnect")  # ties resolve in this order
DEFAULT_GEMM_WORKLOAD = "gemm-sweep"


@dataclass
class Bound:
    """The bound of one op instance on one target."""

    op: str
    count: int
    flops: float
    bytes: float
    comm_bytes: float
    latency: float
    limiter: str
    times: dict[str, float]
    provenance: dict[str, Any]

    @property
    def intensity(self) -> float:
        return intensity(self.flops, self.bytes)


@dataclass
class Result:
    """Every bound of one roofline run, plus workload-level totals; turns into records."""

    target: str
    workload: str
    bounds: list[Bound]
    totals: list[tuple[str, float, str, dict[str, Any]]] = field(default_factory=list)  # metric, value, unit, cfg

    def records(self) -> list[dict[str, Any]]:
        """Normalized records (fidelity roofline, stat value), in a stable order."""
        out: list[dict[str, Any]] = []
        for b in self.bounds:
            cfg = canonical_json(b.provenance)
            for metric, value, unit in (("latency", b.latency, "s"), ("flops", b.flops, "FLOP"),
                                        ("bytes", b.bytes, "B")):
                out.append(_rec(self.target, self.workload, b.op, metric, value, unit, cfg))
        for metric, value, unit, cfg in self.totals:
            out.append(_rec(self.target, self.workload, "", metric, value, unit, canonical_json(cfg)))
        return out


def _rec(target: str, workload: str, op: str, metric: str, value: float, unit: str, cfg: str | None) -> dict[str, Any]:
    return {"fidelity": FIDELITY, "target": target, "workload": workload, "op": op, "metric": metric,
            "stat": "value", "value": float(value), "unit": unit, "config": cfg}


def bound_op(cost: OpCost, target: Target, precision: str, extra: dict[str, Any] | None = None) -> Bound:
    """Bound one op instance: the slowest of compute, memory and interconnect time.

    Raises:
        ConfigError: the target lacks the peak for `precision`, `mem_bw`, or (for communicating
            ops) `interconnect_bw`.
    """
    peak = target.peak(precision)
    mem_bw = float(target.need("mem_bw"))
    times = {"compute": cost.flops / peak, "memory": cost.bytes / mem_bw}
    prov: dict[str, Any] = {"model": "xfid-roofline", "precision": precision, "peak_flops": peak,
                            "mem_bw": mem_bw, "flops": cost.flops, "bytes": cost.bytes,
                            "intensity": intensity(cost.flops, cost.bytes), "count": cost.count}
    if cost.comm_bytes:
        ic = float(target.need("interconnect_bw"))
        times["interconnect"] = cost.comm_bytes / ic
        prov.update(interconnect_bw=ic, comm_bytes=cost.comm_bytes)
    limiter = max(LIMITERS, key=lambda k: (times.get(k, -1.0), -LIMITERS.index(k)))
    prov.update(limiter=limiter, times=times, **(extra or {}), **cost.detail)
    return Bound(cost.op, cost.count, cost.flops, cost.bytes, cost.comm_bytes, times[limiter], limiter, times, prov)


def workload_bounds(model: ModelConfig, w: Workload, target: Target) -> Result:
    """Bounds for every op of an LLM workload, and the step-level ttft/tpot/itl/throughput."""
    extra = {"tp": w.tp, "phase": w.phase, "bs": w.bs, "ctx": w.ctx, "llm": model.name}
    bounds = [bound_op(c, target, w.precision, extra) for c in decompose(model, w)]
    step = sum(b.latency * b.count for b in bounds)
    by_limiter: dict[str, float] = {}
    for b in bounds:
        by_limiter[b.limiter] = by_limiter.get(b.limiter, 0.0) + b.latency * b.count
    cfg = {"model": "xfid-roofline", "precision": w.precision, "peak_flops": target.peak(w.precision),
           "mem_bw": float(target.need("mem_bw")), "time_by_limiter": by_limiter,
           "limiter": max(by_limiter, key=by_limiter.__getitem__), **extra}
    res = Result(target.name, w.id, bounds)
    if w.phase == "prefill":
        res.totals.append(("ttft", step, "s", {**cfg, "sum": "latency x count over ops"}))
        res.totals.append(("throughput_tokens", w.bs * w.ctx / step, "tokens/s", {**cfg, "upper_bound": True,
                                                                                  "formula": "bs*ctx/ttft"}))
    else:
        res.totals.append(("tpot", step, "s", {**cfg, "sum": "latency x count over ops"}))
        res.totals.append(("itl", step, "s", {**cfg, "sum": "latency x count over ops"}))
        res.totals.append(("throughput_tokens", w.bs / step, "tokens/s", {**cfg, "upper_bound": True,
                                                                          "formula": "bs/tpot"}))
    return res


def gemm_name(m: int, n: int, k: int) -> str:
    return f"gemm[m={m},n={n},k={k}]"


def gemm_cost(m: int, n: int, k: int, precision: str) -> OpCost:
    """A GEMM read once and written once: flops 2MNK, bytes (MK + KN + MN) x bytes/element."""
    if precision not in BYTES_PER_ELEMENT:
        raise ModelError(f"unknown precision {precision!r}; known: {', '.join(BYTES_PER_ELEMENT)}")
    b = BYTES_PER_ELEMENT[precision]
    return OpCost(gemm_name(m, n, k), 1, 2.0 * m * n * k, (m * k + k * n + m * n) * b, 0.0,
                  {"gemm": {"m": m, "n": n, "k": k}})


def gemm_bounds(shapes: list[tuple[int, int, int]], target: Target, precision: str,
                workload: str = DEFAULT_GEMM_WORKLOAD) -> Result:
    """Bounds for GEMM shapes (duplicates kept once, first order)."""
    seen: dict[tuple[int, int, int], None] = dict.fromkeys(shapes)
    return Result(target.name, workload, [bound_op(gemm_cost(*s, precision), target, precision) for s in seen])


def parse_triple(text: str, what: str = "--gemm") -> tuple[int, int, int]:
    """`M,N,K` -> (M, N, K), positive integers.

    Raises:
        ModelError: not three positive integers.
    """
    parts = [p.strip() for p in text.split(",")]
    try:
        vals = tuple(int(p) for p in parts)
    except ValueError:
        vals = ()
    if len(vals) != 3 or min(vals) < 1:
        raise ModelError(f"{what} expects M,N,K (three positive integers), got {text!r}")
    return vals  # type: ignore[return-value]


def read_gemm_file(path: str | Path) -> list[tuple[int, int, int]]:
    """GEMM shapes from a CSV whose first three fields are M, N, K (headerless, or a header row
    starting with M,N,K); further fields (e.g. LLMCompass' time and TFLOPS) are ignored.

    Raises:
        InputError: a row whose first three fields are not positive integers (file and line named).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(p, None, "no such file", "pass a CSV of M,N,K rows to --gemm-file") from None
    except UnicodeDecodeError:
        raise InputError(p, None, "not UTF-8 text") from None
    shapes: list[tuple[int, int, int]] = []
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), 1):
        fields = [f.strip() for f in row]
        if not any(fields):
            continue
        if lineno == 1 and [f.lower() for f in fields[:3]] == ["m", "n", "k"]:
            continue
        try:
            shapes.append(parse_triple(",".join(fields[:3]), "a row"))
        except ModelError:
            raise InputError(p, f"line {lineno}", f"expected M, N, K as the first three fields, got {row[:3]!r}",
                             "every row starts with three positive integers") from None
    if not shapes:
        raise InputError(p, None, "no GEMM shapes found", "write one M, N, K row per line")
    return shapes
