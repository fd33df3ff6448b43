"""Roofline bounds: per-op latency = max(compute, each memory level, interconnect time), the limiter, the least energy."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfid.config import Target
from xfid.errors import ConfigError, InputError
from xfid.models.energy import energy_table, op_energy
from xfid.models.llm import (
    BYTES_PER_ELEMENT,
    ModelConfig,
    ModelError,
    OpCost,
    Workload,
    decompose,
    footprint,
    intensity,
    tokens_per_step,
)
from xfid.models.memory import Placement, default_placement, memory_system, place, split_bytes
from xfid.schema import canonical_json

FIDELITY = "roofline"
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
    energy: float | None = None
    """Least energy of one instance (J); None when the target has no [energy] table."""

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
            rows = [("latency", b.latency, "s"), ("flops", b.flops, "FLOP"), ("bytes", b.bytes, "B")]
            if b.energy is not None:
                rows.append(("energy", b.energy, "J"))
            for metric, value, unit in rows:
                out.append(_rec(self.target, self.workload, b.op, metric, value, unit, cfg))
        for metric, value, unit, totals_cfg in self.totals:
            out.append(_rec(self.target, self.workload, "", metric, value, unit, canonical_json(totals_cfg)))
        return out


def _rec(target: str, workload: str, op: str, metric: str, value: float, unit: str, cfg: str | None) -> dict[str, Any]:
    return {"fidelity": FIDELITY, "target": target, "workload": workload, "op": op, "metric": metric,
            "stat": "value", "value": float(value), "unit": unit, "config": cfg}


def bound_op(cost: OpCost, target: Target, precision: str, extra: dict[str, Any] | None = None,
             placement: Placement | None = None) -> Bound:
    """Bound one op instance: the slowest of compute, each memory level's transfer and the
    interconnect (or compute plus the transfers, where the target's memory has overlap = false).

    Raises:
        ConfigError: the target lacks the peak for `precision`, a memory level, or (for
            communicating ops) `interconnect_bw`; its energy table lacks a precision or level used.
    """
    peak = target.peak(precision)
    ms = memory_system(target)
    pl = placement or default_placement(ms)
    by_level = split_bytes(cost.bytes, cost.detail, pl)
    named = ms.named or set(by_level) != {"hbm"}
    times = {"compute": cost.flops / peak}
    prov: dict[str, Any] = {"model": "xfid-roofline", "precision": precision, "peak_flops": peak}
    if named:
        for lv in ms.levels:
            if by_level.get(lv.name):
                times[f"memory:{lv.name}"] = lv.latency_s + by_level[lv.name] / lv.bw
        prov["levels"] = {lv.name: {"bw": lv.bw, "capacity": lv.capacity, "latency_s": lv.latency_s}
                          for lv in ms.levels if lv.name in by_level}
        prov["bytes_by_level"] = by_level
    else:
        prov["mem_bw"] = ms.levels[0].bw
        times["memory"] = cost.bytes / ms.levels[0].bw
    prov.update(flops=cost.flops, bytes=cost.bytes, intensity=intensity(cost.flops, cost.bytes), count=cost.count)
    if cost.comm_bytes:
        ic = float(target.need("interconnect_bw"))
        times["interconnect"] = cost.comm_bytes / ic
        prov.update(interconnect_bw=ic, comm_bytes=cost.comm_bytes)
        if target.interconnect_latency_s:
            times["interconnect"] += cost.comm_steps * target.interconnect_latency_s
            prov.update(interconnect_latency_s=target.interconnect_latency_s, comm_steps=cost.comm_steps)
    _check_finite(times, cost, target)
    order = list(times)  # compute, the memory levels in declared order, interconnect: ties go to the first
    if ms.overlap:
        limiter = max(order, key=lambda k: (times[k], -order.index(k)))
        latency = times[limiter]
    else:
        local = [k for k in order if k != "interconnect"]
        serial = sum(times[k] for k in local)
        limiter = max(local, key=lambda k: (times[k], -order.index(k)))
        if times.get("interconnect", -1.0) > serial:
            limiter = "interconnect"
        latency = max(serial, times.get("interconnect", 0.0))
        prov["overlap"] = False
    prov.update(limiter=limiter, times=times, **(extra or {}), **cost.detail)
    energy = None
    table = energy_table(target)
    if table is not None:
        energy, prov["energy"] = op_energy(target, table, precision, cost.flops, by_level, cost.comm_bytes)
    return Bound(cost.op, cost.count, cost.flops, cost.bytes, cost.comm_bytes, latency, limiter, times, prov, energy)


def workload_bounds(model: ModelConfig, w: Workload, target: Target, placement: dict[str, str] | None = None) -> Result:
    """Bounds for every op of an LLM workload, and the step-level ttft/tpot/itl/throughput (and,
    with an [energy] table, energy, energy_per_token, tokens_per_joule and power).

    `placement`: class -> level (`--placement weights=hbm,kv=cxl`); the rest by capacity.

    Raises:
        ModelError: the placement names an unknown level or does not fit.
    """
    extra: dict[str, Any] = {"tp": w.tp, "phase": w.phase, "bs": w.bs, "ctx": w.ctx, "llm": model.name}
    target.peak(w.precision)
    ms = memory_system(target)
    pl = None
    if ms.named or placement:
        pl = place(ms, footprint(model, w), placement)
        extra["placement"] = pl.provenance()
    bounds = [bound_op(c, target, w.precision, extra, pl) for c in decompose(model, w)]
    step = sum(b.latency * b.count for b in bounds)
    by_limiter: dict[str, float] = {}
    for b in bounds:
        by_limiter[b.limiter] = by_limiter.get(b.limiter, 0.0) + b.latency * b.count
    cfg: dict[str, Any] = {"model": "xfid-roofline", "precision": w.precision, "peak_flops": target.peak(w.precision)}
    if ms.named or pl is not None:
        cfg["memory"] = {lv.name: {"bw": lv.bw, "capacity": lv.capacity, "latency_s": lv.latency_s}
                         for lv in ms.levels}
    else:
        cfg["mem_bw"] = ms.levels[0].bw
    cfg.update(time_by_limiter=by_limiter, limiter=max(by_limiter, key=by_limiter.__getitem__), **extra)
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
    table = energy_table(target)
    if table is not None:
        res.totals.extend(_energy_totals(bounds, step, tokens_per_step(w), table, cfg))
    return res


def _energy_totals(bounds: list[Bound], step: float, tokens: int, table: dict[str, Any],
                   cfg: dict[str, Any]) -> list[tuple[str, float, str, dict[str, Any]]]:
    """energy = sum of E_op x count + static_w x t_bound; per token, tokens per joule and power."""
    dynamic = sum((b.energy or 0.0) * b.count for b in bounds)
    static = table["static_w"] * step
    total = dynamic + static
    by_op = {b.op: (b.energy or 0.0) * b.count for b in bounds}
    ecfg = {**cfg, "lower_bound": True, "dynamic_j": dynamic, "static_j": static, "static_w": table["static_w"],
            "t_bound_s": step, "tokens": tokens, "energy_by_op": by_op}
    out = [("energy", total, "J", {**ecfg, "formula": "sum(E_op x count) + static_w x t_bound"}),
           ("energy_per_token", total / tokens, "J/token", {**ecfg, "formula": "energy / tokens"})]
    if total > 0:
        out.append(("tokens_per_joule", tokens / total, "tokens/J",
                    {**ecfg, "lower_bound": False, "upper_bound": True, "formula": "tokens / energy"}))
    out.append(("power", total / step, "W", {**ecfg, "lower_bound": False, "bound": False,
                                             "formula": "energy / t_bound (the power at the bound, not a bound)"}))
    return out


def _check_finite(times: dict[str, float], cost: OpCost, target: Target) -> None:
    """A bound that overflowed (a rate so small, or a size so large, that the time is inf) is a
    configuration error, not a number to print as `inf s`."""
    for term, t in times.items():
        if not math.isfinite(t):
            rate = {"compute": "peak_flops", "interconnect": "interconnect_bw"}.get(term.split(":")[0], "mem_bw")
            if term.startswith("memory:"):
                rate = f"memory.{term.split(':', 1)[1]}.bw"
            raise ConfigError(f"target {target.name!r}: the {term} time of op {cost.op!r} is not a finite number "
                              f"({cost.flops:g} FLOP, {cost.bytes:g} B); [targets.{target.name}] {rate} is too small "
                              f"(or the op too large) for a time in seconds - check its value and unit")


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
                workload: str = DEFAULT_GEMM_WORKLOAD, placement: dict[str, str] | None = None) -> Result:
    """Bounds for GEMM shapes (duplicates kept once, first order). A GEMM's matrices are
    activations: `placement` may only say where those live (`act=sram`)."""
    pl = None
    if placement:
        if set(placement) - {"act"}:
            raise ModelError("GEMM mode moves only its matrices: --placement takes act=LEVEL here "
                             "(weights and kv are for --workload)")
        pl = place(memory_system(target), {}, placement)
    seen: dict[tuple[int, int, int], None] = dict.fromkeys(shapes)
    return Result(target.name, workload, [bound_op(gemm_cost(*s, precision), target, precision, None, pl)
                                          for s in seen])


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
