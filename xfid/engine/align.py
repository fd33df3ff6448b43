"""Alignment of one comparison pair: per-row errors, tolerances, bounds, kinds and severities."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from xfid.config import Config
from xfid.engine.keys import combine, dense_unique
from xfid.engine.mismatch import MismatchChecker
from xfid.engine.pairrows import (
    BOUND,
    MISMATCH,
    MISSING,
    OK,
    OVER,
    Notes,
    Pair,
    PairRows,
)
from xfid.engine.pairs import conversion
from xfid.engine.scopes import SCOPE_NAMES, EntryScope, derive, derived_note
from xfid.engine.selection import AlignKeys, Selected
from xfid.scope import describe

LOWER_BOUND = frozenset({"latency", "cycles", "ttft", "tpot", "itl", "e2e_latency", "duration", "energy",
                         "energy_per_token"})
"""Metrics for which a roofline number is a lower bound (time-like, and the least energy)."""
UPPER_BOUND = frozenset({"throughput_tokens", "throughput_total_tokens", "throughput_requests",
                         "throughput_samples", "tokens_per_joule"})
"""Metrics for which a roofline number is an upper bound (rate-like)."""
BOUND_RANK, MISMATCH_RANK = 1000.0, 100.0
"""What `severity` adds to the factor so that discrepancies sort bound violations first, then
config mismatches, then the rest (the factor is its own column; severity is only the sort key)."""
NOT_BOUNDS = frozenset({"power"})
"""Metrics a roofline emits that bound nothing (power at the bound = least energy / least time): in
"bound" mode they are shown, never flagged."""


class Side(NamedTuple):
    """One fidelity's entries as one side of a pair, in key order."""

    entries: np.ndarray  # entry index into Selected
    key: np.ndarray  # combined (target, metric, stat, workload, op), sorted
    metric: np.ndarray  # metric code (after a conversion)
    value: np.ndarray
    ref_value: np.ndarray  # the value as a reference (NaN when every record is flagged)
    unit: np.ndarray  # code into the unit names
    converted: np.ndarray  # bool: converted cycles<->latency
    scope: np.ndarray  # scope code (xfid.engine.scopes.SCOPE_NAMES)
    derived: np.ndarray  # index into scopes.DERIVED of a number derived from run totals, -1 native
    divisor: np.ndarray  # the divisor of a derived number (NaN for a native one)


class PairSides(NamedTuple):
    """Both sides of a pair, and which candidate entries lie in workloads the reference has."""

    pair: Pair
    cand: Side
    ref: Side
    active: np.ndarray  # bool per candidate entry
    cards: list[int]  # key radices (target, metric, stat, workload, op)
    dropped: int = 0  # derived candidate numbers the reference has no counterpart for

    @property
    def size(self) -> int:
        """How many rows the pair aligns."""
        return int(np.count_nonzero(self.active))


class Compared(NamedTuple):
    """What the verdicts of a pair's rows are computed from (one element per row)."""

    metric: np.ndarray
    cand_value: np.ndarray
    ref_value: np.ndarray
    rel: np.ndarray
    missing: np.ndarray


@dataclass
class Verdict:
    """Per row: tolerance used, within, kind, severity, efficiency and notes (filled in place)."""

    tol: np.ndarray
    within: np.ndarray
    kind: np.ndarray
    severity: np.ndarray  # sort key: the kind's rank (bound 1000, mismatch 100) + the factor
    efficiency: np.ndarray
    notes: Notes
    factor: np.ndarray  # how far off, without the rank: |rel_error| / tolerance (see docs/engine.md)


class Matched(NamedTuple):
    """How a pair's candidate rows found their references."""

    cand: np.ndarray  # candidate entry per row
    ref: np.ndarray  # reference entry per row, -1 when none
    hit: np.ndarray  # a reference entry was found
    flagged_ref: np.ndarray  # ... but all its records are flagged
    cand_converted: np.ndarray
    ref_converted: np.ndarray


class Aligner:
    """Aligns the pairs of one selection. Holds what only the alignment needs (the entries' keys
    and reference values, their units, the unconverted side of each fidelity, shared by every
    pair): drop it once the pairs are aligned."""

    def __init__(self, sel: Selected, keys: AlignKeys, config: Config, settings: dict[str, Any],
                 units: np.ndarray, unit_names: list[str], mismatch: MismatchChecker, scopes: EntryScope):
        """`units` holds a code per entry into `unit_names` (which must contain "s", "cycles" and
        scopes.DERIVED_UNITS); `scopes` the scope and run code of every entry."""
        self.sel, self.keys, self.config, self.settings, self.scopes = sel, keys, config, settings, scopes
        self.units, self.unit_names, self.mismatch = units, unit_names, mismatch
        tn = sel.dims["target"]
        self.clocks = np.array([config.targets[t].clock_hz if t in config.targets and config.targets[t].clock_hz
                                else np.nan for t in tn], dtype=np.float64)
        self.cards = [len(tn), len(sel.dims["metric"]), len(sel.dims["stat"]), len(sel.dims["workload"]),
                      len(sel.dims["op"])]
        self._native: dict[int, Side] = {}  # unconverted side per fidelity code

    def _side(self, fid: int, conv: tuple[str, str, str] | None) -> Side:
        """The entries of one fidelity, with the numbers derived from its run totals
        (`engine.scopes.derive`). Without a conversion the side only depends on the fidelity: it
        is computed once and shared by every pair (callers never write into it)."""
        if conv is None and fid in self._native:
            return self._native[fid]
        sel, cards = self.sel, self.cards
        e = np.flatnonzero(sel.codes["fid"] == fid)
        c = sel.codes
        m = c["metric"][e].copy()
        val = sel.value[e].copy()
        okv = self.keys.ref_value[e].copy()
        unit = self.units[e].copy()
        scope = self.scopes.scope[e].copy()
        derived = np.full(len(e), -1, np.int8)
        divisor = np.full(len(e), np.nan)
        d = derive(e, c, sel.dims, sel.value, self.keys.ref_value, self.scopes, self.unit_names)
        if d is not None:
            e, m, val, okv = (np.concatenate(x) for x in ((e, d.entries), (m, d.metric), (val, d.value),
                                                             (okv, d.ref_value)))
            unit, scope = np.concatenate((unit, d.unit)), np.concatenate((scope, d.scope))
            derived, divisor = np.concatenate((derived, d.kind)), np.concatenate((divisor, d.divisor))
        conv_mask = np.zeros(len(e), bool)
        if conv is not None:
            src_m, dst_m = sel.dims["metric"].index(conv[0]), sel.dims["metric"].index(conv[1])
            dst_unit = self.unit_names.index(conv[2])
            clk = self.clocks[c["target"][e]]
            conv_mask = (m == src_m) & ~np.isnan(clk)
            factor = 1.0 / clk if conv[0] == "cycles" else clk
            val = np.where(conv_mask, val * factor, val)
            okv = np.where(conv_mask, okv * factor, okv)
            m[conv_mask] = dst_m
            unit[conv_mask] = dst_unit
        radix = int(np.prod([max(int(x), 1) for x in cards], dtype=object)) * max(len(sel.fidelities), 1)
        if conv is None and d is None and radix < 1 << 62:
            key = self.keys.key[e]  # AlignKeys.key is this very combination (not densified below 2**62)
        else:
            key, _ = combine([c["target"][e], m, c["stat"][e], c["workload"][e], c["op"][e]], cards)
        side = Side(e, key, m, val, okv, unit, conv_mask, scope, derived, divisor)
        if d is not None and not conv_mask.any():
            side = Side(*(a[np.argsort(side.key, kind="stable")] for a in side))
        if conv is not None and conv_mask.any():
            # a native number of the converted metric wins over a converted one
            order = np.lexsort((conv_mask, key))
            side = Side(*(a[order] for a in side))
            first = np.r_[True, side.key[1:] != side.key[:-1]]
            side = Side(*(a[first] for a in side))
        if conv is None:
            self._native[fid] = side
        return side

    def sides(self, pair: Pair) -> PairSides | None:
        """Both sides of `pair`; None when a fidelity of the pair has no records."""
        sel = self.sel
        if pair.candidate not in sel.fidelities or pair.reference not in sel.fidelities:
            return None
        conv = conversion(pair)
        cand = self._side(sel.fidelities.index(pair.candidate), conv)
        ref = self._side(sel.fidelities.index(pair.reference), conv)
        tc, wc = sel.codes["target"], sel.codes["workload"]
        W = len(sel.dims["workload"])
        present = np.zeros(len(sel.dims["target"]) * W, bool)
        present[tc[ref.entries].astype(np.int64) * W + wc[ref.entries]] = True
        active = present[tc[cand.entries].astype(np.int64) * W + wc[cand.entries]]
        der = np.flatnonzero(active & (cand.derived >= 0))
        dropped = 0
        if len(der):  # a derived number is only a row where the reference has that very number
            pos, hit = _lookup(ref.key, cand.key[der])
            lost = der[~(hit & (ref.scope[pos] == cand.scope[der]))] if len(ref.key) else der
            active[lost] = False
            dropped = len(lost)
        return PairSides(pair, cand, ref, active, self.cards, dropped)

    def plan(self, pairs: list[Pair]) -> dict[int, PairSides]:
        """The sides of every pair whose fidelities both have records, by position in `pairs`."""
        out = {}
        for i, pair in enumerate(pairs):
            sides = self.sides(pair)
            if sides is not None:
                out[i] = sides
        return out

    def align(self, sides: PairSides) -> PairRows:
        """Align the candidate entries of a pair with its reference entries."""
        sel, settings, pair = self.sel, self.settings, sides.pair
        ref_side, active, cards = sides.ref, sides.active, sides.cards
        counts = {"candidate_keys": len(sides.cand.entries) - sides.dropped,
                  "outside_reference_workloads": int((~active).sum()) - sides.dropped}
        cs = sides.cand
        ce, ck, cm, cv, cu, cconv, csc, cder, cdiv = (
            a[active] for a in (cs.entries, cs.key, cs.metric, cs.value, cs.unit, cs.converted, cs.scope,
                                cs.derived, cs.divisor))
        rk = ref_side.key
        pos_c, hit = _lookup(rk, ck)
        alt_stat = np.full(len(ck), -1, np.int64)
        sn = sel.dims["stat"]
        if "value" in sn and len(rk):
            for alt in settings["value_matches"]:
                if alt not in sn:
                    continue
                todo = np.flatnonzero(~hit & (sel.codes["stat"][ce] == sn.index("value")))
                if not len(todo):
                    break
                e = ce[todo]
                k2, _ = combine([sel.codes["target"][e], cm[todo], np.full(len(e), sn.index(alt)),
                                 sel.codes["workload"][e], sel.codes["op"][e]], cards)
                p2, h2 = _lookup(rk, k2)
                pos_c[todo[h2]] = p2[h2]
                hit[todo[h2]] = True
                alt_stat[todo[h2]] = sn.index(alt)
        re_, rok, rconv = ref_side.entries, ref_side.ref_value, ref_side.converted
        ref = np.where(hit, re_[pos_c] if len(re_) else -1, -1)
        counts["value_stat_fallback"] = int((alt_stat >= 0).sum())
        refv = np.where(hit, rok[pos_c] if len(rok) else np.nan, np.nan)
        ref_conv = np.where(hit, rconv[pos_c] if len(rconv) else False, False)
        rsc = np.where(hit, ref_side.scope[pos_c] if len(rk) else -1, -1)
        apart = hit & (rsc != csc)  # never two scopes: kept apart, counted as not comparable
        refv[apart] = np.nan
        flagged_ref = hit & ~apart & np.isnan(refv)
        missing = ~hit | flagged_ref | apart
        used = np.zeros(len(rk), bool)
        used[pos_c[hit]] = True
        counts["reference_only_keys"] = int(np.count_nonzero(~used & (ref_side.derived < 0)))
        n = len(ce)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(refv != 0, (cv - refv) / refv, np.nan)
            lr = np.where((cv > 0) & (refv > 0), np.log(cv) - np.log(refv), np.nan)
        tol, tol_abs = _tolerances(sel, pair, self.config, cm, sel.codes["op"][ce], sel.codes["stat"][ce])
        diff = np.abs(cv - refv)
        within = ~missing & ((np.abs(rel) <= tol) | (diff <= tol_abs))
        kind = np.where(missing, MISSING, np.where(within, OK, OVER)).astype(np.int8)
        with np.errstate(divide="ignore", invalid="ignore"):
            severity = np.where(missing, 0.0, np.abs(rel) / np.maximum(tol, 1e-12))
        out = Verdict(tol, within, kind, severity, np.full(n, np.nan), Notes(n), severity.copy())
        if pair.candidate in settings["bound_fidelities"]:
            _apply_bounds(sel.dims["metric"], pair.bounds or settings["roofline_tolerance"], settings,
                          Compared(cm, cv, refv, rel, missing), out)
        mm_idx, mm_text = self.mismatch.check(sel, ce, ref, missing)
        if len(mm_idx):
            kind[mm_idx] = MISMATCH
            within[mm_idx] = False
            severity[mm_idx] = MISMATCH_RANK + np.minimum(np.nan_to_num(out.factor[mm_idx], nan=0.0), 899.0)
            out.notes.add(mm_idx, mm_text)
        _notes(sel, pair, Matched(ce, ref, hit, flagged_ref, cconv, ref_conv), out.notes)
        for code in np.unique(alt_stat[alt_stat >= 0]):
            out.notes.add(np.flatnonzero(alt_stat == code), f"stat value compared with the reference {sn[code]}")
        rder = np.where(hit & ~apart, ref_side.derived[pos_c] if len(rk) else -1, -1)
        rdiv = np.where(hit, ref_side.divisor[pos_c] if len(rk) else np.nan, np.nan)
        _scope_notes(Scoped(csc, rsc, apart, cder, cdiv, rder, rdiv), out.notes)
        counts.update(aligned=int((~missing).sum()), missing_reference=int(missing.sum()),
                      flagged_reference=int(flagged_ref.sum()), not_comparable=int(apart.sum()),
                      derived=int(np.count_nonzero(~missing & ((cder >= 0) | (rder >= 0)))))
        return PairRows(pair, ce, ref, cm, cu, cv, refv, rel, lr, out.tol, tol_abs, out.within, out.kind,
                        out.severity, out.efficiency, out.notes, counts, csc, out.factor)


class Scoped(NamedTuple):
    """Per row: both scopes, whether they differ, and what was derived from run totals."""

    cand: np.ndarray
    ref: np.ndarray  # -1 without a reference
    apart: np.ndarray
    cand_derived: np.ndarray
    cand_divisor: np.ndarray
    ref_derived: np.ndarray
    ref_divisor: np.ndarray


def _scope_notes(sc: Scoped, notes: Notes) -> None:
    """Not comparable rows (which scopes), and the conversion behind a derived number."""
    rows = np.flatnonzero(sc.apart)
    if len(rows):
        notes.add(rows, [f"not comparable: candidate {describe(SCOPE_NAMES[sc.cand[i]])}, reference "
                         f"{describe(SCOPE_NAMES[sc.ref[i]])} (no reference value used)" for i in rows])
    for side, kinds, div in (("candidate", sc.cand_derived, sc.cand_divisor),
                             ("reference", sc.ref_derived, sc.ref_divisor)):
        rows = np.flatnonzero(kinds >= 0)
        if len(rows):
            notes.add(rows, [f"{side} {derived_note(int(kinds[i]), float(div[i]))}" for i in rows])


def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of keys in sorted_keys (clipped) and whether they were found."""
    if not len(sorted_keys):
        return np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return pos, sorted_keys[pos] == keys


def _tolerances(sel: Selected, pair: Pair, config: Config, m: np.ndarray, o: np.ndarray,
                s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Relative and absolute tolerance per row (first matching [[tolerance]] rule, then default)."""
    if all(t.op == "*" for t in config.tolerances):
        o = np.zeros_like(o)  # no rule looks at the op: one lookup per (metric, stat)
    mos, _ = combine([m, o, s], [len(sel.dims["metric"]), len(sel.dims["op"]), len(sel.dims["stat"])])
    uniq, inv = dense_unique(mos)
    rel = np.empty(len(uniq))
    ab = np.empty(len(uniq))
    mn, on, sn = sel.dims["metric"], sel.dims["op"], sel.dims["stat"]
    first = np.zeros(len(uniq), np.int64)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    for j, i in enumerate(first):
        t = config.tolerance_for(pair.candidate, pair.reference, mn[m[i]], on[o[i]], sn[s[i]])
        rel[j], ab[j] = t.rel, t.abs
    return rel[inv], ab[inv]


def _apply_bounds(metric_names: list[str], mode: str, settings: dict[str, Any], row: Compared,
                  out: Verdict) -> None:
    """Roofline candidates are bounds: flag violations; in "bound" mode only violations count."""
    cv, refv, rel, missing = row.cand_value, row.ref_value, row.rel, row.missing
    lower = np.array([x in LOWER_BOUND for x in metric_names], bool)[row.metric]
    upper = np.array([x in UPPER_BOUND for x in metric_names], bool)[row.metric]
    bt = float(settings["bound_tolerance"])
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.where(lower, cv / refv, np.where(upper, refv / cv, np.nan))
        viol = ~missing & ((lower & (refv < cv * (1 - bt))) | (upper & (refv > cv * (1 + bt))))
    bound_rows = (lower | upper) & ~missing
    out.efficiency[:] = np.where(lower | upper, eff, np.nan)
    if mode == "bound":
        out.tol[bound_rows] = bt
        out.within[bound_rows] = ~viol[bound_rows]
        out.kind[bound_rows] = OK
        minimum = settings.get("roofline_min_efficiency")
        if minimum is not None:
            low = bound_rows & ~viol & (eff < float(minimum))
            out.kind[low] = OVER
            out.within[low] = False
            out.severity[low] = out.factor[low] = float(minimum) / np.maximum(eff[low], 1e-12)
            out.notes.add(np.flatnonzero(low), f"efficiency below roofline_min_efficiency {minimum}")
        quiet = bound_rows & ~viol & ~(out.kind == OVER)
        out.severity[quiet] = out.factor[quiet] = 0.0
        info = np.array([x in NOT_BOUNDS for x in metric_names], bool)[row.metric] & ~missing
        out.kind[info], out.within[info], out.severity[info], out.factor[info] = OK, True, 0.0, 0.0
        out.notes.add(np.flatnonzero(info), "not a bound (the power at the roofline bound): shown, not checked")
    out.kind[viol] = BOUND
    out.within[viol] = False
    out.factor[viol] = np.abs(rel[viol]) / max(bt, 1e-12)
    out.severity[viol] = BOUND_RANK + out.factor[viol]
    out.notes.add(np.flatnonzero(viol), "reference beyond the roofline bound")


def _notes(sel: Selected, pair: Pair, m: Matched, notes: Notes) -> None:
    """Conversions, flags, medians of several records and merged raw ops, on both sides."""
    if pair.convert:
        notes.add(np.flatnonzero(m.cand_converted), f"candidate converted {pair.convert} with the target clock_hz")
        notes.add(np.flatnonzero(m.ref_converted), f"reference converted {pair.convert} with the target clock_hz")
    notes.add(np.flatnonzero(m.flagged_ref), "reference flagged invalid/failed_test: not used")
    notes.add(np.flatnonzero(sel.flagged[m.cand]), "candidate flagged invalid/failed_test")
    for side, idx in (("candidate", m.cand), ("reference", np.where(m.hit, m.ref, -1))):
        ok = idx >= 0
        cnt = sel.n[np.where(ok, idx, 0)]
        multi = ok & (cnt > 1)
        for k in (np.flatnonzero(np.bincount(cnt[multi])) if multi.any() else ()):
            notes.add(np.flatnonzero(ok & (cnt == k)), f"{side}: median of {k} records")
        if sel.notes:
            rows = np.flatnonzero(ok & np.isin(idx, np.fromiter(sel.notes, np.int64)))
            notes.add(rows, [f"{side}: {sel.notes[int(idx[i])]}" for i in rows])
