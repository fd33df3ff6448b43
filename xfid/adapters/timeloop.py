"""timeloop: Timeloop / Sparseloop `*.stats.txt` Summary Stats (cycles, energy from its most precise figure, computes)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.schema import canonical_json

_NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_ENERGY_EXP = {"fJ": -15, "pJ": -12, "nJ": -9, "uJ": -6, "µJ": -6, "mJ": -3, "J": 0}
# Summary Stats line -> (metric, regex)
SUMMARY: dict[str, tuple[str, re.Pattern[str]]] = {
    "Utilization": ("utilization", re.compile(rf"^Utilization\s*:\s*{_NUM}\s*(%?)\s*$")),
    "Cycles": ("cycles", re.compile(rf"^Cycles\s*:\s*{_NUM}\s*$")),
    "Energy": ("energy", re.compile(rf"^Energy\s*:\s*{_NUM}\s*([a-zA-Zµ]+)\s*$")),
    "Area": ("area", re.compile(rf"^Area\s*:\s*{_NUM}\s*(mm\^2|mm2|um\^2)\s*$")),
}
# `Computes = N` (2024), `MACCs = N` (2020), `Algorithmic Computes = N` / `Actual Computes = N` (Sparseloop)
_COUNT = re.compile(rf"^(MACCs|Computes|Algorithmic Computes|Actual Computes)\s*=\s*{_NUM}\s*$")
_TOPO_ENERGY = re.compile(rf"^Total topology energy\s*:\s*{_NUM}\s*(fJ|pJ|nJ|uJ|mJ|J)\s*$")
# the per-compute energy table: `pJ/MACC`, `pJ/Compute`, `fJ/Compute`, `fJ/Algorithmic-Compute` ...
_PER = re.compile(r"^(fJ|pJ|nJ)/(MACC|Compute|Algorithmic-Compute|Algorithm-Compute)\s*$")
_ROW = re.compile(rf"^\s+(.+?)\s*=\s*{_NUM}\s*$")


@dataclass
class Figure:
    """A number as printed, with where it is: the exact decimal, its unit exponent, its line."""

    text: str
    exp: int
    line: int

    @property
    def value(self) -> Decimal:
        return Decimal(self.text).scaleb(self.exp)

    @property
    def half_ulp(self) -> Decimal:
        """Half a unit in the last printed digit, in the base unit: the display-rounding bound."""
        places = len(self.text.split(".", 1)[1]) if "." in self.text else 0
        return Decimal(5).scaleb(self.exp - places - 1)


def _energy(topo: Figure | None, summary: Figure | None,
            per: dict[str, Figure], counts: dict[str, Figure]) -> tuple[Decimal, Decimal, str, str] | None:
    """The most precise total energy the file gives: (J, rounding bound in J, where, how).

    Candidates: the topology total (pJ), per-compute energy x computes, the Summary `Energy:` line
    (uJ with two decimals: rounds a small design to 0.00). The one with the smallest display-rounding
    bound wins.
    """
    cands: list[tuple[Decimal, Decimal, str, str]] = []
    if topo is not None:
        cands.append((topo.value, topo.half_ulp, f"line {topo.line}", "Total topology energy"))
    for kind, count_key in (("Compute", "Actual Computes"), ("Compute", "Computes"), ("MACC", "MACCs"),
                            ("Algorithmic-Compute", "Algorithmic Computes")):
        if kind in per and count_key in counts:
            e, n = per[kind], counts[count_key]
            k = Decimal(n.text)
            cands.append((e.value * k, e.half_ulp * k, f"lines {n.line}, {e.line}",
                          f"{_unit(e.exp)}/{kind} Total x {count_key}"))
    if summary is not None:
        cands.append((summary.value, summary.half_ulp, f"line {summary.line}", "Summary Stats Energy"))
    if not cands:
        return None
    return min(cands, key=lambda c: c[1])


def _unit(exp: int) -> str:
    return next(u for u, e in _ENERGY_EXP.items() if e == exp)


class TimeloopAdapter(Adapter):
    name = "timeloop"
    fidelity = "archmodel"
    formats = ("Timeloop / Sparseloop timeloop-mapper.stats.txt / timeloop-model.stats.txt "
               "(Summary Stats: cycles, energy, computes, per-compute energy)")
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
        out = Columns()

        def add(metric: str, value: float | None, unit: str, loc: str, **kw: Any) -> None:
            out.add(metric, "value", value, unit, loc, op=op, software=kw.pop("software", "Timeloop"), **kw)

        topo = None
        for i, ln in enumerate(lines[:start]):
            m = _TOPO_ENERGY.match(ln.strip())
            if m:
                topo = Figure(m[1], _ENERGY_EXP[m[2]], i + 1)
        summary_energy: Figure | None = None
        counts: dict[str, Figure] = {}
        per: dict[str, Figure] = {}
        table: str | None = None
        seen: set[str] = set()
        for i in range(start + 1, len(lines)):
            raw = lines[i]
            ln = raw.strip()
            lineno = i + 1
            if not ln or set(ln) == {"-"}:
                table = None
                continue
            m = _PER.match(ln)
            if m:
                table = f"{m[1]}/{'Algorithmic-Compute' if 'Algorithm' in m[2] else m[2]}"
                continue
            if table is not None:
                row = _ROW.match(raw)
                if row:
                    if row[1] == "Total":
                        unit, kind = table.split("/", 1)
                        per[kind] = Figure(row[2], _ENERGY_EXP[unit], lineno)
                    continue
                table = None
            m = _COUNT.match(ln)
            if m:
                counts[m[1]] = Figure(m[2], 0, lineno)
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
            loc = f"line {lineno}"
            if key == "Utilization":
                add(metric, v, m[2] or "ratio", loc)
            elif key == "Cycles":
                add(metric, v, "cycles", loc)
            elif key == "Energy":
                if m[2] not in _ENERGY_EXP:
                    raise ctx.error(loc, f"unknown energy unit {m[2]!r} in {ln!r}", "Timeloop writes `Energy: 0.47 uJ`")
                summary_energy = Figure(m[1], _ENERGY_EXP[m[2]], lineno)
            elif key == "Area":
                if v == 0.0:
                    add(metric, None, "mm2", loc, null_reason="0.00 mm^2: area not modelled (no area estimator)")
                elif m[2].startswith("mm"):
                    add(metric, v, "mm2", loc)
                else:
                    add(metric, float(Decimal(m[1]).scaleb(-6)), "mm2", loc)
        if "Cycles" not in seen:
            raise ctx.error(f"line {start + 1}", "the Summary Stats section has no `Cycles:` line")
        self._computes(counts, per, add)
        best = _energy(topo, summary_energy, per, counts)
        if best is not None:
            joules, bound, loc, how = best
            cfg = canonical_json({"energy_from": how, "rounding_bound_j": float(bound)})
            if joules == 0:
                add("energy", None, "J", loc, config=cfg,
                    null_reason=f"{how} is printed as 0 (display-rounded, below {float(bound):.3g} J); "
                                "no more precise figure in the file")
            else:
                add("energy", float(joules), "J", loc, config=cfg)
        return out.cols

    @staticmethod
    def _computes(counts: dict[str, Figure], per: dict[str, Figure], add: Any) -> None:
        """`macs` = the workload's computes; Sparseloop's actual computes and per-compute energies beside it."""
        work = counts.get("Algorithmic Computes") or counts.get("Computes") or counts.get("MACCs")
        if work is not None:
            add("macs", float(work.text), "count", f"line {work.line}")
        if "Actual Computes" in counts:
            n = counts["Actual Computes"]
            add("timeloop:actual_computes", float(n.text), "count", f"line {n.line}")
        for kind, metric in (("Compute", "timeloop:energy_per_compute"), ("MACC", "timeloop:energy_per_compute"),
                             ("Algorithmic-Compute", "timeloop:energy_per_algorithmic_compute")):
            if kind in per:
                e = per[kind]
                add(metric, float(e.value), "J", f"line {e.line}",
                    config=canonical_json({"unit_in_file": f"{_unit(e.exp)}/{kind}"}))


__all__ = ["TimeloopAdapter"]
