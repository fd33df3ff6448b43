"""timeloop: `timeloop-mapper.stats.txt` / `timeloop-model.stats.txt` Summary Stats (cycles, energy, MACCs)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, ReadContext, head_text, read_text

_NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
# Summary Stats line -> (metric, regex, unit or None = from the line)
SUMMARY: dict[str, tuple[str, re.Pattern[str]]] = {
    "Utilization": ("utilization", re.compile(rf"^Utilization\s*:\s*{_NUM}\s*(%?)\s*$")),
    "Cycles": ("cycles", re.compile(rf"^Cycles\s*:\s*{_NUM}\s*$")),
    "Energy": ("energy", re.compile(rf"^Energy\s*:\s*{_NUM}\s*([a-zA-Zµ]+)\s*$")),
    "Area": ("area", re.compile(rf"^Area\s*:\s*{_NUM}\s*(mm\^2|mm2|um\^2)\s*$")),
}
_MACCS = re.compile(rf"^(MACCs|Computes)\s*=\s*{_NUM}\s*$")
_TOPO_ENERGY = re.compile(rf"^Total topology energy\s*:\s*{_NUM}\s*(pJ|nJ|uJ|mJ|J)\s*$")
_PER_MAC = re.compile(r"^pJ/(MACC|Compute)\s*$")
_TOTAL = re.compile(rf"^\s+Total\s*=\s*{_NUM}\s*$")


class TimeloopAdapter(Adapter):
    name = "timeloop"
    fidelity = "archmodel"
    formats = "Timeloop timeloop-mapper.stats.txt / timeloop-model.stats.txt (Summary Stats: cycles, energy, MACCs)"
    extensions: ClassVar[tuple[str, ...]] = (".txt",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head)
        if path.name.endswith(".stats.txt") and path.name.startswith("timeloop-"):
            return True
        return t.startswith("Buffer and Arithmetic Levels") and "=== " in t

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        lines = read_text(ctx).splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.strip() == "Summary Stats"), None)
        if start is None:
            raise ctx.error(None, "no `Summary Stats` section",
                            "pass the complete timeloop-mapper.stats.txt (the run may have found no mapping)")
        op = str(ctx.options.get("op", ""))
        cols: dict[str, list[Any]] = {k: [] for k in ("op", "metric", "stat", "value", "unit", "source_loc",
                                                      "null_reason", "software")}

        def add(metric: str, value: float | None, unit: str | None, lineno: int, reason: str | None = None) -> None:
            cols["op"].append(op)
            cols["metric"].append(metric)
            cols["stat"].append("value")
            cols["value"].append(value)
            cols["unit"].append(unit)
            cols["source_loc"].append(f"line {lineno}")
            cols["null_reason"].append(reason)
            cols["software"].append("Timeloop")

        topo = None
        for i, ln in enumerate(lines[:start]):
            m = _TOPO_ENERGY.match(ln.strip())
            if m:
                topo = (float(m[1]), m[2], i + 1)
        seen: set[str] = set()
        in_per_mac = False
        for i in range(start + 1, len(lines)):
            raw = lines[i]
            ln = raw.strip()
            lineno = i + 1
            if not ln or set(ln) == {"-"}:
                continue
            if _PER_MAC.match(ln):
                in_per_mac = True
                continue
            if in_per_mac:
                m = _TOTAL.match(raw)
                if m:
                    add("timeloop:energy_per_mac", float(m[1]), "pJ", lineno)
                    in_per_mac = False
                continue
            m = _MACCS.match(ln)
            if m:
                add("macs", float(m[2]), "count", lineno)
                seen.add("MACCs")
                continue
            key = ln.split(":", 1)[0].strip()
            if key not in SUMMARY:
                continue  # GFLOPs (@1GHz), EDP(J*cycle), ... are derived; not recorded
            metric, rx = SUMMARY[key]
            m = rx.match(ln)
            if not m:
                raise ctx.error(f"line {lineno}", f"cannot read {key!r} from {ln!r}",
                                f"Timeloop writes e.g. `{key}: 1536`" if key == "Cycles" else None)
            v = float(m[1])
            seen.add(key)
            if key == "Utilization":
                add(metric, v, m[2] or "ratio", lineno)
            elif key == "Cycles":
                add(metric, v, "cycles", lineno)
            elif key == "Energy":
                if topo is not None:  # the per-level total is printed with more digits
                    add(metric, topo[0], topo[1], topo[2])
                else:
                    add(metric, v, m[2], lineno)
            elif key == "Area":
                unit = "mm2" if m[2].startswith("mm") else None
                if v == 0.0:
                    add(metric, None, "mm2", lineno, "0.00 mm^2: area not modelled (no area estimator)")
                elif unit:
                    add(metric, v, unit, lineno)
                else:
                    add(metric, v / 1e6, "mm2", lineno)
        if "Cycles" not in seen:
            raise ctx.error(f"line {start + 1}", "the Summary Stats section has no `Cycles:` line")
        return cols


__all__ = ["TimeloopAdapter"]
