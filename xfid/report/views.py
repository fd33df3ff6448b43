"""Pure builders for report sections: comparison pairs, the competitive view, fidelity coverage."""

from __future__ import annotations

from typing import Any

import pandas as pd

from xfid.models.auto import first_token_workload
from xfid.report.data import FIDELITY_ORDER, PairSection, is_missing, pair_key

COMPETITIVE_METRICS = (  # metric, label, higher is better
    ("throughput_tokens", "tokens/s", True),
    ("tokens_per_joule", "tokens/s/W", True),
    ("energy_per_token", "J/token", False),
    ("ttft", "TTFT", False),
    ("itl", "ITL", False),
)
STAT_PREFERENCE = ("mean", "value", "median", "p50")


def _num(v: Any) -> float | None:
    return None if is_missing(v) else float(v)


def _ci(v: Any) -> list[float] | None:
    if v is None or isinstance(v, float):
        return None
    vals = list(v)
    return [float(vals[0]), float(vals[1])] if len(vals) == 2 else None


def _trend_value(comp: dict[str, Any]) -> float | None:
    """What a pair's trend plots: an estimate's MAPE, a bound's median achieved fraction."""
    v = comp.get("achieved_median") if comp.get("compared_as") == "bound" else comp.get("mape")
    return None if is_missing(v) else float(v)


def bound_from_rows(comp: dict[str, Any], sel: pd.DataFrame | None, bound_fidelities: tuple[str, ...]) -> dict[str, Any]:
    """A comparison with its bound statistics: as recorded, or, for a check recorded before
    bounds were aggregated as bounds (no `compared_as`), from its rows' efficiency (no CI then)."""
    if comp.get("compared_as") is not None or sel is None or "efficiency" not in sel:
        return comp
    eff = pd.to_numeric(sel["efficiency"], errors="coerce")
    usable = eff[eff.notna() & (sel["kind"] != "missing_reference")]
    if comp.get("candidate") not in bound_fidelities or not len(usable):
        return comp
    viol = sel.loc[usable.index][sel.loc[usable.index, "kind"] == "bound_violation"]
    return {**comp, "compared_as": "bound", "violations": len(viol),
            "violation_worst": float(pd.to_numeric(viol["efficiency"]).max()) if len(viol) else None,
            "achieved_median": float(usable.quantile(0.5)), "achieved_q1": float(usable.quantile(0.25)),
            "achieved_q3": float(usable.quantile(0.75)), "achieved_ci": None,
            **{k: None for k in ("mape", "mape_ci", "bias", "within_tolerance")}}


def _violations(sel: pd.DataFrame | None) -> list[str]:
    """The fingerprints of a pair's bound violations, worst (largest factor) first."""
    if sel is None or not len(sel) or "fingerprint" not in sel:
        return []
    v = sel[sel["kind"] == "bound_violation"]
    if "factor" in v:
        v = v.sort_values("factor", ascending=False, kind="stable")
    return [str(fp) for fp in v["fingerprint"] if isinstance(fp, str) and fp]


def _int(v: Any) -> int | None:
    return None if is_missing(v) else int(v)


def build_pairs(checks: list[dict[str, Any]], rows: pd.DataFrame | None, targets: list[str],
                bound_fidelities: tuple[str, ...] = ("roofline",)) -> list[PairSection]:
    """One PairSection per target-level comparison of the latest check, with trend over all checks.

    Args:
        checks: tracker checks, any order; the latest one is "current".
        rows: Correlation.rows of the latest check (or None).
        targets: keep only these targets (empty: all).
        bound_fidelities: what a check recorded before bounds were aggregated as bounds is read
            as a bound for (see bound_from_rows).
    """
    if not checks:
        return []
    ordered = sorted(checks, key=lambda c: str(c.get("time", "")))
    history: dict[tuple, list[tuple[str, float]]] = {}
    times: dict[tuple, list[str]] = {}  # the checks' times, parallel to history (the trend's date axis)
    for c in ordered:
        for comp in c.get("comparisons") or []:
            v = _trend_value(comp) if comp.get("workload") is None else None
            if v is not None:
                history.setdefault(pair_key(comp), []).append((str(c.get("label") or c.get("time"))[:16], v))
                times.setdefault(pair_key(comp), []).append(str(c.get("time") or ""))
    prev = {pair_key(c): c for c in (ordered[-2].get("comparisons") or []) if c.get("workload") is None} if len(ordered) > 1 else {}
    out = []
    for comp in ordered[-1].get("comparisons") or []:
        if comp.get("workload") is not None or (targets and comp["target"] not in targets):
            continue
        key = pair_key(comp)
        sel = None
        if rows is not None and len(rows):
            m = ((rows["target"] == key[0]) & (rows["candidate"] == key[1]) & (rows["reference"] == key[2])
                 & (rows["metric"] == key[3]) & (rows["stat"] == key[4]))
            sel = rows.loc[m]
        comp = bound_from_rows(comp, sel, bound_fidelities)
        unit = str(sel["unit"].iloc[0]) if sel is not None and len(sel) and "unit" in sel else ""
        tol = float(sel["tolerance"].median()) if sel is not None and len(sel) and "tolerance" in sel else None
        before = prev.get(key, {})
        bound = comp.get("compared_as") == "bound"
        out.append(PairSection(
            *key, unit=unit, n=int(comp.get("n") or 0), mape=_num(comp.get("mape")), mape_ci=_ci(comp.get("mape_ci")),
            bias=_num(comp.get("bias")), spearman=_num(comp.get("spearman")), kendall=_num(comp.get("kendall")),
            within_tolerance=_num(comp.get("within_tolerance")),
            prev_mape=_num(before.get("mape")) if before else None,
            tolerance=tol, trend=history.get(key, []), trend_times=times.get(key, []), rows=sel,
            compared_as="bound" if bound else "estimate", violations=_int(comp.get("violations")),
            violation_worst=_num(comp.get("violation_worst")), violation_fingerprints=_violations(sel) if bound else [],
            achieved_median=_num(comp.get("achieved_median")), achieved_q1=_num(comp.get("achieved_q1")),
            achieved_q3=_num(comp.get("achieved_q3")), achieved_ci=_ci(comp.get("achieved_ci")),
            prev_violations=_int(before.get("violations")) if before else None,
            prev_achieved=_num(before.get("achieved_median")) if before else None,
        ))
    out.sort(key=lambda p: (p.target, FIDELITY_ORDER.index(p.candidate) if p.candidate in FIDELITY_ORDER else 9,
                            p.reference, p.metric, p.stat))
    return out


def _text(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and v != v) else str(v)


def _sources(*cells: dict[str, Any]) -> dict[str, str]:
    """A derived cell's provenance: the records it was computed from, joined with ` + `."""
    return {"source_path": " + ".join(c.get("source_path", "") for c in cells),
            "source_loc": " + ".join(c.get("source_loc", "") for c in cells)}


def _pick(df: pd.DataFrame) -> pd.Series | None:
    """The row to show for one (target, workload, metric): preferred stat, latest timestamp."""
    for st in STAT_PREFERENCE:
        s = df[df["stat"] == st]
        if len(s):
            return s.sort_values("timestamp").iloc[-1] if "timestamp" in s else s.iloc[-1]
    return None


def competitive_view(records: pd.DataFrame, ours: str, invented: bool = False,
                     note: str = "", targets: list[str] | None = None) -> dict[str, Any]:
    """One of our own targets (`[report] ours`; its highest available fidelity) against measured
    competitors on the same workloads.

    Args:
        records: end-to-end store records (columns fidelity, target, workload, op, metric, stat,
            value, unit, timestamp).
        ours: our target, projected by models; invented/note come from its config entry.
        targets: competitor targets to keep (empty/None: all measured ones).

    Returns:
        dict with `ours` (the name), `competitors` (target names), `rows` (workload, metric, label,
        higher_better, ours {value, fidelity, stat} or None, by_target {target: {value, fidelity,
        stat}}, advantage) and flags.
    """
    want = {m for m, _, _ in COMPETITIVE_METRICS}
    df = records[(records["op"] == "") & records["metric"].isin(want | {"power"}) & records["value"].notna()].copy()
    df["fidelity"] = df["fidelity"].astype(str)
    mine = df[df["target"] == ours]
    rivals = df[(df["target"] != ours) & (df["fidelity"] == "measured")]
    if targets:
        rivals = rivals[rivals["target"].isin(targets)]
    workloads = sorted(set(mine["workload"]) & set(rivals["workload"]))
    rows, competitors = [], sorted(set(rivals[rivals["workload"].isin(workloads)]["target"]))

    def cell(sub: pd.DataFrame, metric: str) -> dict[str, Any] | None:
        for fid in reversed(FIDELITY_ORDER):
            r = _pick(sub[(sub["fidelity"] == fid) & (sub["metric"] == metric)])
            if r is not None:
                return {"value": float(r["value"]), "fidelity": fid, "stat": str(r["stat"]), "derived": False,
                        "source_path": _text(r.get("source_path")), "source_loc": _text(r.get("source_loc"))}
        if metric == "tokens_per_joule":  # tokens/s ÷ W from the same fidelity
            tput, power = cell(sub, "throughput_tokens"), cell(sub, "power")
            if tput and power and power["fidelity"] == tput["fidelity"] and power["value"] > 0:
                return {"value": tput["value"] / power["value"], "fidelity": tput["fidelity"], "stat": "derived", "derived": True,
                        **_sources(tput, power)}
        if metric == "energy_per_token":  # J/token = 1 / (tokens/J), the same fidelity
            tpj = cell(sub, "tokens_per_joule")
            if tpj and tpj["value"] > 0:
                return {"value": 1.0 / tpj["value"], "fidelity": tpj["fidelity"], "stat": "derived", "derived": True,
                        **_sources(tpj)}
        return None

    for w in workloads:
        for metric, label, higher in COMPETITIVE_METRICS:
            mine_cell = cell(mine[mine["workload"] == w], metric)
            first = first_token_workload(w)
            if mine_cell is None and metric == "ttft" and first:  # one prompt's prefill bounds every TTFT
                mine_cell = cell(mine[mine["workload"] == first], metric)
                if mine_cell is not None:
                    mine_cell = {**mine_cell, "stat": f"{mine_cell['stat']} of {first.split('/', 1)[1]}"}
            by = {t: c for t in competitors if (c := cell(rivals[(rivals["workload"] == w) & (rivals["target"] == t)], metric))}
            if mine_cell is None and not by:
                continue
            best = None
            if mine_cell and by:
                vals = [c["value"] for c in by.values()]
                ref = max(vals) if higher else min(vals)
                best = mine_cell["value"] / ref if ref else None
                if best is not None and not higher:
                    best = 1 / best if best else None  # >1 always means ours is better
            rows.append({"workload": w, "metric": metric, "label": label, "higher_better": higher,
                         "ours": mine_cell, "by_target": by, "advantage": best})
    return {"ours": ours, "invented": invented, "note": note, "competitors": competitors, "rows": rows}


def fidelity_coverage(records: pd.DataFrame, targets: list[str] | None = None) -> list[dict[str, Any]]:
    """Per (target, workload): which fidelities have numbers and which are missing."""
    if records.empty:
        return []
    df = records[["target", "workload", "fidelity"]].astype(str).drop_duplicates()
    if targets:
        df = df[df["target"].isin(targets)]
    out = []
    for (t, w), g in df.groupby(["target", "workload"], sort=True):
        have = [f for f in FIDELITY_ORDER if f in set(g["fidelity"])]
        out.append({"target": t, "workload": w, "have": have, "missing": [f for f in FIDELITY_ORDER if f not in have]})
    return out


def unmatched_ops(coverage: pd.DataFrame | None, limit: int | None = 40) -> tuple[list[dict[str, Any]], int]:
    """Raw op names no op map of their source matched (xfid.counts.unmatched_ops: most records
    first; at most `limit`, None: all), and how many there are in all."""
    from xfid.counts import unmatched_ops as gaps

    un = gaps(coverage)
    return (un if limit is None else un.head(limit)).to_dict("records"), len(un)


UNRECORDED = "—"
LIMITER_WORDS = {"cycles": "cycle count"}
"""The block model bounds an RTL block's cycles: no compute or memory limit to name."""


def _shown(v: Any) -> str:
    return UNRECORDED if v in (None, "", "unknown") else str(v)


def capability_rows(targets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The capability profile's classes (xfid.profile's `targets`), one compact row each, sizes
    in numeric order; what the records do not say is "—" (see UNRECORDED_NOTE), never "unknown"."""
    from xfid.report.headline import bucket_order

    out = []
    for t in targets:
        for c in t["classes"]:
            fb, fp = c["fraction_of_bound"], c["fraction_of_peak"]
            peak = c.get("peak") or {}
            out.append({"target": t["target"], "op_class": c["op_class"], "precision": _shown(c["precision"]),
                        "size": _shown(c["size_bucket"]), "size_key": bucket_order(c["size_bucket"]),
                        "limiter": LIMITER_WORDS.get(c["limiter"], _shown(c["limiter"])), "n": int(c["n"]),
                        "of_bound": fb.get("median"), "ci": fb.get("ci"), "of_peak": fp.get("median"),
                        "peak_kind": peak.get("kind") or "", "verdict": c["limits"]["verdict"],
                        "caveats": "; ".join(c["caveats"]), "evidence": list(c.get("evidence") or [])})
    out.sort(key=lambda r: (r["target"], r["op_class"], r["precision"], r["size_key"], r["limiter"]))
    return out


UNRECORDED_NOTE = ("—: the records do not say (an RTL block's cocotb run records cycles, no precision or FLOP "
                   "count); cycle count: the block model bounds the cycles, so there is no compute or memory limit "
                   "to name.")
