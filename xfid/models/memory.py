"""Memory levels and data placement: which level each op's bytes come from, and how long that takes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from xfid.config import Target
from xfid.models.llm import ModelError

CLASSES = ("weights", "kv", "act")
"""What a placement places: model weights, the KV cache, and activations (everything else an op moves)."""


@dataclass(frozen=True)
class Level:
    """One memory level: bandwidth (B/s), capacity (B, None: unlimited), access latency (s)."""

    name: str
    bw: float
    capacity: float | None = None
    latency_s: float = 0.0
    auto: bool = True
    """Filled by placement by capacity (the on-chip `sram` a target's sram_bw implies is not)."""


@dataclass(frozen=True)
class MemorySystem:
    """A target's memory levels. `named`: times and limiters name the level (`memory:hbm`);
    a target with only `mem_bw` keeps the plain `memory` of one level."""

    target: str
    levels: tuple[Level, ...]
    overlap: bool = True
    named: bool = False

    def level(self, name: str, what: str = "--placement") -> Level:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise ModelError(f"{what}: target {self.target!r} has no memory level {name!r}; its levels: "
                         f"{', '.join(lv.name for lv in self.levels)} "
                         f"(declare [targets.{self.target}.memory.{name}] bw = ... in xfid.toml)")

    @property
    def fill_order(self) -> list[Level]:
        """The levels placement by capacity fills: fastest first (declared order breaks ties)."""
        return sorted((lv for lv in self.levels if lv.auto), key=lambda lv: -lv.bw)


def memory_system(target: Target) -> MemorySystem:
    """The memory levels of `target`: its [memory.LEVEL] tables, else one `hbm` level of `mem_bw`;
    plus an on-chip `sram` level when it has `sram_bw` (used only when placed there explicitly).

    Raises:
        ConfigError: neither [memory] nor mem_bw.
    """
    mem = target.extra.get("memory")
    if mem is None:
        levels = [Level("hbm", float(target.need("mem_bw")))]
        named, overlap = False, True
    else:
        levels = [Level(n, s["bw"], s["capacity"], s["latency_s"]) for n, s in mem["levels"].items()]
        if "hbm" not in mem["levels"] and target.mem_bw is not None:
            levels.insert(0, Level("hbm", float(target.mem_bw)))
        named, overlap = True, bool(mem["overlap"])
    if target.sram_bw is not None and all(lv.name != "sram" for lv in levels):
        levels.append(Level("sram", float(target.sram_bw), auto=False))
    return MemorySystem(target.name, tuple(levels), overlap, named)


def parse_placement(text: str | None) -> dict[str, str]:
    """`weights=hbm,kv=cxl` -> {"weights": "hbm", "kv": "cxl"} (classes weights, kv, act).

    Raises:
        ModelError: not CLASS=LEVEL pairs, an unknown class or a class given twice.
    """
    out: dict[str, str] = {}
    if not text:
        return out
    for part in text.split(","):
        cls, sep, level = (x.strip() for x in part.partition("="))
        if not sep or not cls or not level:
            raise ModelError(f"--placement expects CLASS=LEVEL pairs like weights=hbm,kv=cxl, got {text!r}")
        if cls not in CLASSES:
            raise ModelError(f"--placement: unknown class {cls!r}; classes: {', '.join(CLASSES)}")
        if cls in out:
            raise ModelError(f"--placement names {cls!r} twice")
        out[cls] = level
    return out


def _gb(x: float) -> str:
    """Bytes with an SI prefix: 687.2 GB, 3 kB."""
    for f, p in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(x) >= f:
            return f"{x / f:.4g} {p}"
    return f"{x:.4g} B"


@dataclass(frozen=True)
class Placement:
    """Where each class lives: class -> {level: fraction of its bytes}, with the sizes placed."""

    fractions: dict[str, dict[str, float]]
    sizes: dict[str, float]
    explicit: dict[str, str]

    def provenance(self) -> dict[str, Any]:
        return {"fractions": self.fractions, "bytes": self.sizes,
                "how": {c: ("--placement" if c in self.explicit else "fastest level" if c == "act" else "by capacity")
                        for c in self.fractions}}


def place(ms: MemorySystem, sizes: dict[str, float], explicit: dict[str, str] | None = None) -> Placement:
    """Place weights then the KV cache (`sizes`, bytes per device) in the levels.

    Explicitly placed classes go whole to their level; the rest fill the levels fastest first,
    spilling to the next when one is full. Activations are transient and not counted against
    capacity: they sit in the fastest level unless placed (`act=sram`).

    Raises:
        ModelError: an unknown level, or what is placed does not fit (the capacities named).
    """
    explicit = dict(explicit or {})
    for name in explicit.values():
        ms.level(name)
    order = ms.fill_order
    if not order:
        raise ModelError(f"target {ms.target!r} has no memory level to place data in")
    free = {lv.name: (lv.capacity if lv.capacity is not None else math.inf) for lv in ms.levels}
    placed: dict[str, dict[str, float]] = {c: {} for c in sizes}
    for cls, name in explicit.items():
        if cls in sizes:
            free[name] -= sizes[cls]
            placed[cls][name] = sizes[cls]
    caps = ", ".join(f"{lv.name} {_gb(lv.capacity) if lv.capacity is not None else 'unlimited'}"
                     + ("" if lv.auto else " (only by --placement)") for lv in ms.levels)
    need = " + ".join(f"{c} {_gb(v)}" for c, v in sizes.items())
    for lv in ms.levels:
        if free[lv.name] < 0:
            held = " + ".join(f"{c} {_gb(v[lv.name])}" for c, v in placed.items() if lv.name in v)
            raise ModelError(f"placement does not fit on target {ms.target!r}: {held} placed in {lv.name}, whose "
                             f"capacity is {_gb(lv.capacity or 0.0)} (capacities: {caps}); place a class elsewhere "
                             "with --placement, or use tensor parallelism (/tpN), a smaller batch or context")
    for cls, size in sizes.items():
        if cls in explicit:
            continue
        left = size
        for lv in order:
            take = min(left, max(free[lv.name], 0.0))
            if take > 0:
                placed[cls][lv.name] = take
                free[lv.name] -= take
                left -= take
            if left <= 0:
                break
        if left > 0:
            raise ModelError(f"placement does not fit on target {ms.target!r}: {need} per device, and its "
                             f"capacities are {caps} ({_gb(left)} of {cls} left over); use tensor parallelism "
                             "(/tpN), a smaller batch or context, or declare more memory")
    fractions = {c: {lv: (b / sizes[c] if sizes[c] else 1.0) for lv, b in v.items()} or {order[0].name: 1.0}
                 for c, v in placed.items()}
    fractions["act"] = {explicit.get("act", order[0].name): 1.0}
    return Placement(fractions, sizes, explicit)


def default_placement(ms: MemorySystem) -> Placement:
    """Everything in the fastest level (GEMM mode, and targets without capacities)."""
    first = ms.fill_order[0].name
    return Placement({c: {first: 1.0} for c in CLASSES}, {}, {})


def split_bytes(op_bytes: float, detail: dict[str, Any], pl: Placement) -> dict[str, float]:
    """An op's bytes by level: its weights and KV-cache bytes where those classes live, the rest
    (activations, norm weights) where activations live."""
    w = float(detail.get("weights_bytes", 0.0))
    kv = float(detail.get("kv_read_bytes", 0.0)) + float(detail.get("kv_write_bytes", 0.0))
    parts = {"weights": w, "kv": kv, "act": max(op_bytes - w - kv, 0.0)}
    out: dict[str, float] = {}
    for cls, nbytes in parts.items():
        for lv, frac in pl.fractions.get(cls, pl.fractions["act"]).items():
            if nbytes * frac:
                out[lv] = out.get(lv, 0.0) + nbytes * frac
    if len(out) <= 1:  # one level: exactly the op's bytes (no rounding from the split)
        lv = next(iter(out), next(iter(pl.fractions["act"])))
        return {lv: op_bytes}
    return out
