"""Validation of the target tables the roofline reads beyond the flat numbers: memory levels and energy."""

from __future__ import annotations

import difflib
import math
import re
import sys
from typing import Any

from xfid.errors import ConfigError


def number(v: Any, key: str, where: str, positive: bool = False) -> float:
    """A finite number >= 0 (> 0 when `positive`): the one check of every configured number."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{where}: {key} must be a number, got {v!r}")
    if not math.isfinite(v):
        raise ConfigError(f"{where}: {key} must be a finite number, got {v!r}")
    if v < 0:
        raise ConfigError(f"{where}: {key} must not be negative, got {v!r}")
    if positive and v == 0:
        raise ConfigError(f"{where}: {key} must be greater than 0, got {v!r}")
    if positive and v < sys.float_info.min:  # a subnormal: dividing by it overflows to inf
        raise ConfigError(f"{where}: {key} = {v!r} is too small to divide by (the least usable value is "
                          f"{sys.float_info.min:g}); check its unit")
    return float(v)


def _nonneg(v: Any, key: str, where: str) -> float:
    return number(v, key, where)


def _positive(v: Any, key: str, where: str) -> float:
    return number(v, key, where, positive=True)


def _unknown(key: str, allowed: Any, what: str, where: str) -> ConfigError:
    close = difflib.get_close_matches(str(key), list(allowed), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ConfigError(f"{where}: {what} has unknown key {key!r}; {hint}allowed: {', '.join(allowed) or 'none'}")

MEMORY_LEVEL_KEYS = ("bw", "capacity", "latency_s")
ENERGY_KEYS = ("pj_per_flop", "pj_per_byte", "static_w")
_LEVEL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def memory_table(name: str, m: Any, mem_bw: Any, where: str) -> dict[str, Any]:
    """[targets.NAME.memory]: `overlap` and one [targets.NAME.memory.LEVEL] table (bw, capacity, latency_s) per level."""
    key = f"targets.{name}.memory"
    if not isinstance(m, dict):
        raise ConfigError(f"{where}: {key} must be a table of [{key}.LEVEL] tables (bw, capacity, latency_s)")
    overlap = m.get("overlap", True)
    if not isinstance(overlap, bool):
        raise ConfigError(f"{where}: {key}.overlap must be true or false, got {overlap!r}")
    levels: dict[str, dict[str, Any]] = {}
    for lv, spec in m.items():
        if lv == "overlap":
            continue
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: {key}.{lv} must be a table like {{ bw = 4.0e12, capacity = 96e9 }} "
                              "(the keys of [memory] are overlap and one table per level)")
        if not _LEVEL_NAME.match(lv) or lv == "interconnect":
            raise ConfigError(f"{where}: {key}.{lv}: a level name is a letter then letters, digits, _ or -, "
                              "and not 'interconnect'")
        for k in spec:
            if k not in MEMORY_LEVEL_KEYS:
                raise _unknown(k, MEMORY_LEVEL_KEYS, f"[{key}.{lv}]", where)
        if "bw" not in spec:
            raise ConfigError(f"{where}: {key}.{lv} needs bw (bytes/s, e.g. bw = 4.0e12)")
        levels[lv] = {"bw": _positive(spec["bw"], f"{key}.{lv}.bw", where),
                      "capacity": _positive(spec["capacity"], f"{key}.{lv}.capacity", where) if "capacity" in spec else None,
                      "latency_s": _nonneg(spec.get("latency_s", 0.0), f"{key}.{lv}.latency_s", where)}
    if not levels:
        raise ConfigError(f"{where}: {key} declares no level; add [{key}.hbm] bw = ... (or remove [{key}])")
    if "hbm" in levels and mem_bw is not None and isinstance(mem_bw, (int, float)) and float(mem_bw) != levels["hbm"]["bw"]:
        raise ConfigError(f"{where}: targets.{name}.mem_bw = {mem_bw!r} and {key}.hbm.bw = {levels['hbm']['bw']!r} "
                          "disagree; keep one (mem_bw is the hbm level's bw)")
    return {"levels": levels, "overlap": overlap}


def energy_table(name: str, e: Any, t: dict[str, Any], memory: dict[str, Any] | None, where: str) -> dict[str, Any]:
    """[targets.NAME.energy]: pj_per_flop by precision, pj_per_byte by memory level, static_w."""
    from xfid.models.llm import BYTES_PER_ELEMENT

    key = f"targets.{name}.energy"
    if not isinstance(e, dict):
        raise ConfigError(f"{where}: {key} must be a table: pj_per_flop = {{ bf16 = 0.35 }}, "
                          "pj_per_byte = { hbm = 6.0 }, static_w = 40.0")
    for k in e:
        if k not in ENERGY_KEYS:
            raise _unknown(k, ENERGY_KEYS, f"[{key}]", where)
    levels = list(memory["levels"]) if memory else []
    if "hbm" not in levels:
        levels.insert(0, "hbm")
    if "sram_bw" in t and "sram" not in levels:
        levels.append("sram")
    known = {"pj_per_flop": (list(BYTES_PER_ELEMENT), "precision", "peak_flops precisions"),
             "pj_per_byte": ([*levels, "interconnect"], "level",
                             f"declare [targets.{name}.memory.LEVEL] to add a level")}
    out: dict[str, Any] = {"static_w": _nonneg(e.get("static_w", 0.0), f"{key}.static_w", where)}
    for table, (allowed, what, hint) in known.items():
        vals = e.get(table, {})
        if not isinstance(vals, dict):
            raise ConfigError(f"{where}: {key}.{table} must be a table like {{ {allowed[0]} = 1.0 }} (pJ by {what})")
        for k in vals:
            if k not in allowed:
                close = difflib.get_close_matches(str(k), allowed, n=1)
                dym = f"did you mean {close[0]!r}? " if close else ""
                raise ConfigError(f"{where}: {key}.{table} has unknown {what} {k!r}; {dym}known: {', '.join(allowed)}"
                                  + (f" ({hint})" if table == "pj_per_byte" else ""))
        out[table] = {k: _nonneg(v, f"{key}.{table}.{k}", where) for k, v in vals.items()}
    return out


def block_energy(key: str, e: Any, where: str) -> dict[str, float]:
    """[targets.NAME.blocks.BLOCK.energy]: pj_per_EVENT = picojoules per counted event (EVENT a probe counter, or cycles)."""
    if not isinstance(e, dict):
        raise ConfigError(f"{where}: {key} must be a table like {{ pj_per_bytes = 1.2, pj_per_cycles = 0.5 }}")
    for k, v in e.items():
        if not k.startswith("pj_per_") or len(k) == len("pj_per_"):
            raise ConfigError(f"{where}: {key} has key {k!r}; every key is pj_per_EVENT, EVENT a counter the probe "
                              "records (e.g. pj_per_bytes) or cycles")
        _nonneg(v, f"{key}.{k}", where)
    return {k: float(v) for k, v in e.items()}

