"""Energy: the least energy an op can take on a target, and RTL energy estimates from event counts.

Per op (one instance): E_op = flops x pj_per_flop[precision] + sum over levels of bytes_level x
pj_per_byte[level] (+ comm_bytes x pj_per_byte.interconnect when given), in joules. Per workload
step: E = sum of E_op x count + static_w x t_bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xfid.config import Target
from xfid.errors import ConfigError

PJ = 1e-12
PREFIX = "pj_per_"


def energy_table(target: Target) -> dict[str, Any] | None:
    """The target's validated [energy] table, or None (then no energy rows)."""
    e = target.extra.get("energy")
    return e if isinstance(e, dict) else None


def op_energy(target: Target, table: Mapping[str, Any], precision: str, flops: float,
              bytes_by_level: Mapping[str, float], comm_bytes: float = 0.0) -> tuple[float, dict[str, Any]]:
    """(joules, breakdown) of one op instance.

    Raises:
        ConfigError: the table has no pj_per_flop for `precision`, or no pj_per_byte for a level
            the op moves bytes from (the key to add is named).
    """
    per_flop = table.get("pj_per_flop", {})
    per_byte = table.get("pj_per_byte", {})
    if precision not in per_flop:
        raise ConfigError(f"target {target.name!r} has no energy pj_per_flop for precision {precision!r}; it has "
                          f"{', '.join(sorted(per_flop)) or 'none'} (add pj_per_flop.{precision} under "
                          f"[targets.{target.name}.energy])")
    compute_j = flops * per_flop[precision] * PJ
    memory_j: dict[str, float] = {}
    for lv, nbytes in bytes_by_level.items():
        if lv not in per_byte:
            raise ConfigError(f"target {target.name!r} moves bytes from memory level {lv!r} but its energy table "
                              f"has no pj_per_byte for it (it has {', '.join(sorted(per_byte)) or 'none'}); add "
                              f"pj_per_byte.{lv} under [targets.{target.name}.energy]")
        memory_j[lv] = nbytes * per_byte[lv] * PJ
    detail: dict[str, Any] = {"compute_j": compute_j, "memory_j": memory_j, "pj_per_flop": per_flop[precision],
                              "pj_per_byte": {lv: per_byte[lv] for lv in bytes_by_level}}
    total = compute_j + sum(memory_j.values())
    if comm_bytes and "interconnect" in per_byte:
        detail["interconnect_j"] = comm_bytes * per_byte["interconnect"] * PJ
        detail["pj_per_byte"]["interconnect"] = per_byte["interconnect"]
        total += detail["interconnect_j"]
    detail["j"] = total
    return total, detail


def block_events_energy(table: Mapping[str, float], events: Mapping[str, Any]) -> tuple[float | None, dict[str, Any]]:
    """Energy of one RTL op from its event counts: sum of count x pj_per_EVENT, in joules.

    Args:
        table: `[targets.NAME.blocks.BLOCK.energy]` (pj_per_EVENT = pJ per event).
        events: counts by event name (the probe's counters, and `cycles`).

    Returns:
        (joules, provenance with the counts and pJ used), or (None, provenance naming the
        events the table prices that the record did not count).
    """
    used: dict[str, Any] = {}
    missing: list[str] = []
    total = 0.0
    for key, pj in sorted(table.items()):
        event = key[len(PREFIX):]
        n = events.get(event)
        if n is None or isinstance(n, bool) or not isinstance(n, (int, float)):
            missing.append(event)
            continue
        used[event] = {"count": n, "pj_each": pj}
        total += float(n) * pj * PJ
    prov: dict[str, Any] = {"model": "xfid block energy", "formula": "sum of count x pj_per_EVENT", "events": used}
    if missing:
        prov["missing"] = missing
        return None, prov
    return total, prov
