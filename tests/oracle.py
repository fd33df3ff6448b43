"""A plain reference implementation of `xfid correlate`, for tests: slow, obvious, pandas only.

It reads the store's records and follows the rules of docs/engine.md one step at a time, record
by record and group by group, without any of the engine's integer codes, sorts or threads:

1. records newer than `as_of` or of other targets are dropped; op maps give each record its
   canonical op (the first rule for its source whose regex matches anywhere in the raw name);
2. per fidelity and key (target, workload, op, metric, stat) the chosen run is the one that has
   the key and ranks highest by (preferred by `run`, latest timestamp of the run in that
   fidelity, run name);
3. the records of one raw op in that run: the median of the non-null values, their count, the
   record at the lower median as provenance, and the median of the unflagged ones as the value
   the key has as a reference; several raw ops of one canonical key: summed (additive metrics)
   or their median; a key whose value is null is dropped;
4. per pair, each candidate key in a (target, workload) the reference has is aligned with the
   reference's key (stat `value` falls back to the reference's `median`, then `mean`); errors,
   the first matching tolerance rule, kinds, severities, roofline bounds, config mismatches, notes;
5. the op-map coverage (per source and raw op) and the selection counts (records, older runs,
   nulls, flagged records, null keys);
6. the aggregates of each pair per (target, metric, stat) and per (target, workload, metric,
   stat): n, MAPE, median APE, bias, log-RMSE, Pearson on logs, Spearman, Kendall tau-b (counted
   pair by pair) and the fraction within tolerance; for a bound, the violations and the fraction
   of the bound achieved instead of the error statistics.

A config_mismatch (the params of both numbers, an rtl number's params against the target's block
table, precision and batch) takes precedence over the other kinds of an aligned row.

A pair that converts (`[[compare]] convert = "cycles->latency"`) turns either side's cycles of a
target with a clock into latency (value / clock_hz; the other way value * clock_hz), a native
number of the same key winning.

Scopes (what a number is per): a number's scope is the `scope` its record's config states, else
the one its metric fixes (rates and powers per second, a utilization a level), else for these
records (xfid-records) one op invocation for an op's number and one model step for a
workload-level one. A candidate whose reference key has another scope is not compared: a
missing_reference row noted "not comparable" (the numbers derived from run totals are not
modelled: the random stores have no run totals).

A bound pair's bound metric (a group whose rows have an efficiency) aggregates as a bound:
compared_as "bound", the violations (their fingerprints, largest factor first), the largest
efficiency among them, the median and quartiles
of the efficiency (the fraction of the bound achieved), and no MAPE, median APE, bias, log-RMSE
or within-tolerance share.

Not modelled: the bootstrap CIs (mape_ci, bias_ci, achieved_ci).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from xfid.config import Config
from xfid.engine.fingerprints import fingerprint
from xfid.schema import FLAG_NO_REFERENCE, fidelity_rank
from xfid.store import Store

KEY = ("target", "workload", "op", "metric", "stat")
ADDITIVE = {"latency", "cycles", "bytes", "flops", "energy"}
LOWER_BOUND = {"latency", "cycles", "ttft", "tpot", "itl", "e2e_latency", "duration", "energy", "energy_per_token"}
UPPER_BOUND = {"throughput_tokens", "throughput_total_tokens", "throughput_requests", "throughput_samples",
               "tokens_per_joule"}
NOT_BOUNDS = {"power"}  # a roofline's power bounds nothing: in bound mode shown, never flagged
PER_SECOND = {"throughput_tokens", "power"}  # the metrics of the random stores whose scope the metric fixes
LEVELS = {"utilization"}
CONVERSIONS = {"cycles->latency": ("cycles", "latency", "s"), "latency->cycles": ("latency", "cycles", "cycles")}
DEFAULT_PAIRS = [("roofline", "archmodel"), ("archmodel", "rtl"), ("archmodel", "measured"),
                 ("roofline", "measured"), ("rtl", "measured"), ("roofline", "rtl")]
READ = ["fidelity", "target", "workload", "op", "metric", "stat", "value", "unit", "source", "source_path",
        "source_loc", "run", "timestamp", "config", "flags"]


@dataclass
class Entry:
    """The number that represents one fidelity's key."""

    fidelity: str
    key: tuple[str, str, str, str, str]  # target, workload, op, metric, stat
    value: float
    ref_value: float  # without flagged records (NaN when all are flagged)
    n: int
    rep: dict[str, Any]  # the record whose provenance is shown
    flagged: bool
    merge_note: str | None = None
    unit: str = ""  # the representative record's ("" when null), or the unit a conversion gives
    converted: bool = False


@dataclass
class OraclePair:
    candidate: str
    reference: str
    bounds: str | None = None
    convert: str | None = None


@dataclass
class Result:
    rows: pd.DataFrame
    discrepancies: pd.DataFrame
    comparisons: pd.DataFrame
    coverage: pd.DataFrame
    counts: dict[str, int]
    entries: dict[str, dict[tuple, Entry]] = field(default_factory=dict)


def read_records(store: Store) -> pd.DataFrame:
    """Every record of the store, part file by part file, in the store's order."""
    frames = []
    for path in store.part_files():
        hive = dict(p.split("=", 1) for p in path.relative_to(store.records).parent.parts if "=" in p)
        table = pq.read_table(path)
        df = table.select([c for c in READ if c in table.column_names]).to_pandas()
        for name, value in hive.items():  # partition columns live in the path
            df[name] = value
        df = df[READ]
        for c in df.columns:
            if isinstance(df[c].dtype, pd.CategoricalDtype):
                df[c] = df[c].astype(object)
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=READ)
    out = pd.concat(frames, ignore_index=True)
    out["value"] = out["value"].astype(float)
    return out


def as_of_limit(text: str | None) -> pd.Timestamp | None:
    """A date means its whole day (UTC); a date-time is exact."""
    if text is None:
        return None
    ts = pd.Timestamp(text)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        ts = ts + pd.Timedelta(days=1) - pd.Timedelta(microseconds=1)
    return ts


def canonical_op(raw: str, source: str, config: Config) -> str:
    if raw == "":
        return raw
    for rule in config.op_maps:
        if rule.applies_to(source) and rule.match.search(raw):
            return rule.op
    return raw


def flagged(flags: Any) -> bool:
    return isinstance(flags, str) and any(f.strip() in FLAG_NO_REFERENCE for f in flags.split(","))


def median(values: list[float]) -> float:
    """The median of the values (NaN when there are none)."""
    v = sorted(values)
    if not v:
        return math.nan
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def _micros(ts: Any) -> int:
    return 0 if pd.isna(ts) else int(pd.Timestamp(ts).value // 1000)


def choose_runs(df: pd.DataFrame, prefer: dict[str, str] | None) -> pd.DataFrame:
    """The records of the chosen run of each (fidelity, key)."""
    rank: dict[tuple[str, str], tuple[bool, int, str]] = {}
    for (fid, run), g in df.groupby(["fidelity", "run"], dropna=False, sort=False):
        name = "" if pd.isna(run) else str(run)
        want = (prefer or {}).get(fid, (prefer or {}).get("*"))
        rank[(fid, name)] = (want is not None and name == want, max(_micros(t) for t in g["timestamp"]), name)
    df = df.assign(run_name=["" if pd.isna(r) else str(r) for r in df["run"]])
    keep = []
    for _, g in df.groupby(["fidelity", *KEY], sort=False):
        best = max(rank[(f, r)] for f, r in zip(g["fidelity"], g["run_name"], strict=True))
        keep += [i for i, f, r in zip(g.index, g["fidelity"], g["run_name"], strict=True) if rank[(f, r)] == best]
    return df.loc[sorted(keep)]


def reduce_raw_op(g: pd.DataFrame) -> tuple[float, float, int, dict[str, Any], bool]:
    """(value, reference value, count, representative record, any flagged) of one raw op's records."""
    recs = g.to_dict("records")
    flags = [flagged(r["flags"]) for r in recs]
    if len(recs) == 1:
        v = recs[0]["value"]
        return v, (math.nan if flags[0] else v), 1, recs[0], flags[0]
    good = [r for r in recs if not math.isnan(r["value"])]
    ordered = sorted(good, key=lambda r: r["value"]) + [r for r in recs if math.isnan(r["value"])]
    value = median([r["value"] for r in good])
    rep = ordered[max(len(good) - 1, 0) // 2]
    ref = median([r["value"] for r, f in zip(recs, flags, strict=True) if not f and not math.isnan(r["value"])]) \
        if any(flags) else value
    return value, ref, len(good), rep, any(flags)


def select(df: pd.DataFrame, config: Config) -> tuple[dict[str, dict[tuple, Entry]], int]:
    """Per fidelity, its entries by key, and how many keys were dropped as null."""
    out: dict[str, dict[tuple, Entry]] = {}
    null_keys = 0
    for (fid, *key), g in df.groupby(["fidelity", *KEY], sort=True):
        parts = []  # one per raw op, in the order of the raw names
        for raw, rg in sorted(g.groupby("raw_op", sort=False), key=lambda kv: kv[0]):
            parts.append((raw, *reduce_raw_op(rg)))
        if len(parts) == 1:
            _, value, ref, n, rep, flag = parts[0]
            entry = Entry(fid, tuple(key), value, ref, n, rep, flag)
        else:
            values, refs = [p[1] for p in parts], [p[2] for p in parts]
            present = [v for v in values if not math.isnan(v)]
            if key[3] in ADDITIVE:
                value, ref, how = (sum(present) if present else math.nan), sum(refs), "sum"
            else:
                nan_ref = any(math.isnan(r) for r in refs)
                value, ref, how = median(present), (math.nan if nan_ref else median(refs)), "median"
            names = [p[0] for p in parts]
            shown = ", ".join(names[:3]) + (f", ... ({len(names)} in all)" if len(names) > 3 else "")
            entry = Entry(fid, tuple(key), value, ref, sum(p[3] for p in parts), parts[0][4],
                          any(p[5] for p in parts), f"{how} of {len(names)} raw ops: {shown}")
        entry.unit = entry.rep["unit"] or ""
        if math.isnan(entry.value):
            null_keys += 1
        else:
            out.setdefault(fid, {})[entry.key] = entry
    return out, null_keys


def coverage(df: pd.DataFrame, config: Config) -> pd.DataFrame:
    """Per (source, raw op) with records: the canonical op, whether a rule matched (and which),
    the records, whether any rule applies to the source at all."""
    rows = []
    for (source, raw), g in df.groupby(["source", "raw_op"], sort=False):
        if raw == "":
            continue
        rules = [(i, r) for i, r in enumerate(config.op_maps) if r.applies_to(source)]
        rule = next((i for i, r in rules if r.match.search(raw)), -1)
        rows.append({"source": source, "raw_op": raw, "op": config.op_maps[rule].op if rule >= 0 else raw,
                     "matched": rule >= 0, "records": len(g), "has_rules": bool(rules), "rule": rule})
    cov = pd.DataFrame(rows, columns=["source", "raw_op", "op", "matched", "records", "has_rules", "rule"])
    return cov.sort_values(["source", "matched", "raw_op"], kind="stable").reset_index(drop=True)


def resolve_pairs(pairs: list[OraclePair] | None, config: Config, present: set[str]) -> list[OraclePair]:
    """Explicit pairs (with the convert and bounds of a matching [[compare]] entry), else the
    [[compare]] entries, else the defaults, and each derived label present (`roofline-cal`) with
    the references of its base, in fidelity order."""
    entries = [OraclePair(c["candidate"], c["reference"], c.get("bounds"), c.get("convert"))
               for c in config.raw.get("compare", [])]
    if pairs is not None:
        conf = {(e.candidate, e.reference): e for e in entries}
        return [OraclePair(p.candidate, p.reference, p.bounds or getattr(conf.get((p.candidate, p.reference)), "bounds", None),
                           p.convert or getattr(conf.get((p.candidate, p.reference)), "convert", None)) for p in pairs]
    if entries:
        return entries
    derived = [(d, r) for d in sorted(present - {"roofline", "archmodel", "rtl", "measured"})
               for c, r in DEFAULT_PAIRS if c == d.split("-", 1)[0]]
    ordered = sorted(DEFAULT_PAIRS + derived, key=lambda p: (fidelity_rank(p[0]), p[0], fidelity_rank(p[1])))
    return [OraclePair(c, r) for c, r in ordered]


def converted(side: dict[tuple, Entry], convert: str, config: Config) -> dict[tuple, Entry]:
    """One fidelity's entries for a pair that converts: every `src` number of a target with a
    clock becomes a `dst` number (value / clock_hz for cycles->latency, value * clock_hz the
    other way); where the fidelity has a native `dst` number of that key, the native one stays
    and the converted one is dropped."""
    src, dst, unit = CONVERSIONS[convert]
    out = dict(side)
    for key, e in side.items():
        target = config.targets.get(key[0])
        clock = target.clock_hz if target is not None else None
        if key[3] != src or not clock:
            continue
        out.pop(key)
        new = (key[0], key[1], key[2], dst, key[4])
        if new in side:
            continue  # the native number wins
        factor = 1.0 / clock if src == "cycles" else clock
        out[new] = Entry(e.fidelity, new, e.value * factor, e.ref_value * factor, e.n, e.rep, e.flagged,
                         e.merge_note, unit, True)
    return out


def _sort_key(key: tuple) -> tuple:
    t, w, o, m, s = key
    return (t, m, s, w, o)


def align(pair: OraclePair, entries: dict[str, dict[tuple, Entry]], config: Config,
          settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of one pair, in key order (target, metric, stat, workload, op)."""
    cand, refs = entries.get(pair.candidate, {}), entries.get(pair.reference, {})
    if pair.convert:
        cand, refs = converted(cand, pair.convert, config), converted(refs, pair.convert, config)
    present = {(k[0], k[1]) for k in refs}
    stats = {k[4] for es in entries.values() for k in es}
    rows = []
    for key in sorted(cand, key=_sort_key):
        if (key[0], key[1]) not in present:
            continue
        c = cand[key]
        r, alt = refs.get(key), None
        if r is None and key[4] == "value":
            for s in settings["value_matches"]:
                other = (*key[:4], s)
                if s in stats and other in refs:
                    r, alt = refs[other], s
                    break
        rows.append(_row(pair, c, r, alt, config, settings))
    return rows


def _row(pair: OraclePair, c: Entry, r: Entry | None, alt: str | None, config: Config,
         settings: dict[str, Any]) -> dict[str, Any]:
    target, workload, op, metric, stat = c.key
    cv = c.value
    refv = r.ref_value if r is not None else math.nan
    sc = scope(c)
    apart = r is not None and scope(r) != sc
    if apart:
        refv = math.nan
    flagged_ref = r is not None and not apart and math.isnan(refv)
    missing = r is None or flagged_ref or apart
    rel = (cv - refv) / refv if not math.isnan(refv) and refv != 0 else math.nan
    lr = math.log(cv) - math.log(refv) if cv > 0 and refv > 0 else math.nan
    t = config.tolerance_for(pair.candidate, pair.reference, metric, op, stat)
    tol, tol_abs = t.rel, t.abs
    within = not missing and (abs(rel) <= tol or abs(cv - refv) <= tol_abs)
    kind = "missing_reference" if missing else ("ok" if within else "over_tolerance")
    severity = 0.0 if missing else abs(rel) / max(tol, 1e-12)
    factor = severity  # how far off, without the rank severity adds for the kind
    efficiency = math.nan
    notes: list[str] = []
    if pair.candidate in settings["bound_fidelities"]:
        lower, upper = metric in LOWER_BOUND, metric in UPPER_BOUND
        bt = float(settings["bound_tolerance"])
        mode = pair.bounds or settings["roofline_tolerance"]
        if lower or upper:
            efficiency = (cv / refv if lower else refv / cv) if not math.isnan(refv) else math.nan
        violated = not missing and ((lower and refv < cv * (1 - bt)) or (upper and refv > cv * (1 + bt)))
        if mode == "bound" and (lower or upper) and not missing:
            tol, within, kind = bt, not violated, "ok"
            minimum = settings.get("roofline_min_efficiency")
            if minimum is not None and not violated and efficiency < float(minimum):
                kind, within = "over_tolerance", False
                severity = factor = float(minimum) / max(efficiency, 1e-12)
                notes.append(f"efficiency below roofline_min_efficiency {minimum}")
            if not violated and kind != "over_tolerance":
                severity = factor = 0.0
        if mode == "bound" and metric in NOT_BOUNDS and not missing:
            kind, within, severity, factor = "ok", True, 0.0, 0.0
            notes.append("not a bound (the power at the roofline bound): shown, not checked")
        if violated:
            kind, within = "bound_violation", False
            factor = abs(rel) / max(bt, 1e-12)
            severity = 1000.0 + factor
            notes.append("reference beyond the roofline bound")
    mismatch = None if missing or r is None else config_mismatch(pair, c, r, config)
    if mismatch is not None:
        kind, within = "config_mismatch", False
        severity = 100.0 + min(0.0 if math.isnan(factor) else factor, 899.0)
        notes.append(mismatch)
    if pair.convert and c.converted:
        notes.append(f"candidate converted {pair.convert} with the target clock_hz")
    if pair.convert and r is not None and r.converted:
        notes.append(f"reference converted {pair.convert} with the target clock_hz")
    if flagged_ref:
        notes.append("reference flagged invalid/failed_test: not used")
    if c.flagged:
        notes.append("candidate flagged invalid/failed_test")
    for side, e in (("candidate", c), ("reference", r)):
        if e is not None and e.n > 1:
            notes.append(f"{side}: median of {e.n} records")
        if e is not None and e.merge_note:
            notes.append(f"{side}: {e.merge_note}")
    if alt is not None:
        notes.append(f"stat value compared with the reference {alt}")
    if apart:
        notes.append(f"not comparable: candidate {_per(sc)}, reference {_per(scope(r))} (no reference value used)")
    none = r is None
    return {
        "fingerprint": fingerprint(target, workload, op, metric, stat, pair.candidate, pair.reference),
        "target": target, "workload": workload, "op": op, "metric": metric, "stat": stat,
        "candidate": pair.candidate, "reference": pair.reference,
        "candidate_value": cv, "reference_value": refv, "unit": c.unit,
        "rel_error": rel, "log_ratio": lr, "tolerance": tol, "tolerance_abs": tol_abs,
        "within": within, "kind": kind, "severity": severity,
        "candidate_n": c.n, "reference_n": None if none else r.n,
        "candidate_run": c.rep["run"], "reference_run": None if none else r.rep["run"],
        "candidate_source_path": c.rep["source_path"], "candidate_source_loc": c.rep["source_loc"],
        "reference_source_path": None if none else r.rep["source_path"],
        "reference_source_loc": None if none else r.rep["source_loc"],
        "candidate_config": c.rep["config"], "reference_config": None if none else r.rep["config"],
        "note": "; ".join(notes), "efficiency": efficiency, "factor": factor, "scope": sc,
    }


def scope(e: Entry) -> str:
    """What the number of an entry is per (see the module docstring)."""
    stated = _config(e.rep["config"]).get("scope")
    if stated is not None:
        return str(stated)
    metric, op = e.key[3], e.key[2]
    if metric in PER_SECOND:
        return "second"
    if metric in LEVELS:
        return "level"
    return "op" if op else "step"


def _per(s: str) -> str:
    return s if s in ("level", "unstated") else f"per {s}"


def _config(text: Any) -> dict[str, Any]:
    try:
        v = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        v = {}
    return v if isinstance(v, dict) else {}


def _same(a: Any, b: Any) -> bool:
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return float(a) == float(b) if numbers else str(a) == str(b)


def config_mismatch(pair: OraclePair, c: Entry, r: Entry, config: Config) -> str | None:
    """The note of a config_mismatch, or None: the params of both numbers against each other,
    an rtl number's params against the target's block table, precision and batch."""
    cc, rc = _config(c.rep["config"]), _config(r.rep["config"])
    target, workload = c.key[0], c.key[1]
    diffs = []
    pc, pr = cc.get("params"), rc.get("params")
    if isinstance(pc, dict) and isinstance(pr, dict):
        diffs += [f"{k}: {pair.candidate}={pc[k]} vs {pair.reference}={pr[k]}"
                  for k in sorted(set(pc) & set(pr)) if not _same(pc[k], pr[k])]
    spec_target = config.targets.get(target)
    blocks = spec_target.extra.get("blocks", {}) if spec_target is not None else {}
    for fid, cfg in ((pair.candidate, cc), (pair.reference, rc)):
        params = cfg.get("params")
        if fid.split("-", 1)[0] != "rtl" or not isinstance(params, dict):
            continue
        block = str(cfg["block"]) if cfg.get("block") else (
            workload.split("/", 1)[1] if workload.startswith("block/") else None)
        spec = blocks.get(block, {}) if isinstance(blocks, dict) and block else {}
        if isinstance(spec, dict):
            diffs += [f"{k}: {fid}={params[k]} vs targets.{target}.blocks.{block}={spec[k]}"
                      for k in sorted(set(params) & set(spec)) if not _same(params[k], spec[k])]
    for k in ("precision", "batch"):
        if k in cc and k in rc and not _same(cc[k], rc[k]):
            diffs.append(f"{k}: {pair.candidate}={cc[k]} vs {pair.reference}={rc[k]}")
    return "config mismatch: " + ", ".join(diffs) if diffs else None


def pearson(x: list[float], y: list[float]) -> float:
    if len(x) < 2 or len(set(x)) == 1 or len(set(y)) == 1:
        return math.nan
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def kendall_tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b, pair by pair: (concordant - discordant) / sqrt((n0 - ties x) (n0 - ties y))."""
    if len(x) < 2:
        return math.nan
    conc = disc = tie_x = tie_y = 0
    for i, j in combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        if dx == 0 and dy == 0:
            tie_x += 1
            tie_y += 1
        elif dx == 0:
            tie_x += 1
        elif dy == 0:
            tie_y += 1
        elif (dx > 0) == (dy > 0):
            conc += 1
        else:
            disc += 1
    n0 = len(x) * (len(x) - 1) / 2
    denom = math.sqrt((n0 - tie_x) * (n0 - tie_y))
    return math.nan if denom == 0 else max(-1.0, min(1.0, (conc - disc) / denom))


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of values, interpolated linearly between the two closest ranks."""
    v = sorted(values)
    p = q * (len(v) - 1)
    lo = math.floor(p)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (p - lo)


def bound_aggregate(g: pd.DataFrame) -> dict[str, Any]:
    """A bound group's statistics: violations (count, the largest achieved fraction among them) and
    the achieved fraction's median and quartiles; the estimate statistics are None."""
    achieved = [float(x) for x in g["efficiency"] if not math.isnan(float(x))]
    worst = [float(e) for e, k in zip(g["efficiency"], g["kind"], strict=True) if k == "bound_violation"]
    return {"mape": None, "median_ape": None, "bias": None, "log_rmse": None, "within_tolerance": None,
            "compared_as": "bound", "violations": len(worst), "violation_worst": max(worst) if worst else None,
            "achieved_median": quantile(achieved, 0.5), "achieved_q1": quantile(achieved, 0.25),
            "achieved_q3": quantile(achieved, 0.75),
            "violation_ids": [r["fingerprint"] for r in sorted(
                (r for r in g.to_dict("records") if r["kind"] == "bound_violation"),
                key=lambda r: (-r["factor"], r["fingerprint"]))]}


def aggregate(rows: pd.DataFrame, by: list[str], bound_pair: bool = False) -> list[dict[str, Any]]:
    """The aggregates of one pair's rows per group `by`. In a bound pair (its candidate a bound
    fidelity, checked in "bound" mode) a group of rows with an efficiency is a bound."""
    use = rows[(rows["kind"] != "missing_reference") & np.isfinite(rows["rel_error"].astype(float))
               & np.isfinite(rows["log_ratio"].astype(float))]
    out = []
    for key, g in use.groupby(by, sort=True):
        ape = g["rel_error"].abs().tolist()
        lr = g["log_ratio"].tolist()
        lx = [math.log(v) for v in g["candidate_value"]]
        ly = [math.log(v) for v in g["reference_value"]]
        n = len(g)
        spearman = pearson(pd.Series(lx).rank().tolist(), pd.Series(ly).rank().tolist())
        out.append({
            **dict(zip(by, key, strict=True)), "workload": key[by.index("workload")] if "workload" in by else None,
            "candidate": g["candidate"].iloc[0], "reference": g["reference"].iloc[0],
            "n": n, "mape": sum(ape) / n, "median_ape": median(ape), "bias": math.exp(sum(lr) / n),
            "log_rmse": math.sqrt(sum(v * v for v in lr) / n), "pearson_log": pearson(lx, ly),
            "spearman": spearman if n >= 2 else math.nan, "kendall": kendall_tau_b(lx, ly),
            "within_tolerance": sum(bool(w) for w in g["within"]) / n,
            "compared_as": "estimate", "violations": None, "violation_worst": None, "achieved_median": None,
            "achieved_q1": None, "achieved_q3": None, "violation_ids": None,
        })
        if bound_pair and any(not math.isnan(float(x)) for x in g["efficiency"]):
            out[-1].update(bound_aggregate(g))
        if bound_pair and g["metric"].iloc[0] in NOT_BOUNDS:  # shown, never checked: no within share
            out[-1]["within_tolerance"] = None
    return out


def correlate(store: Store, config: Config, *, pairs: list[OraclePair] | None = None, run: dict[str, str] | None = None,
              as_of: str | None = None, include_missing: bool = False, targets: list[str] | None = None) -> Result:
    """Rows, discrepancies and comparisons (without CIs) as docs/engine.md defines them."""
    s = config.settings
    settings = {"bound_tolerance": float(s.get("bound_tolerance", 0.02)),
                "roofline_tolerance": str(s.get("roofline_tolerance", "bound")),
                "roofline_min_efficiency": s.get("roofline_min_efficiency"),
                "bound_fidelities": list(s.get("bound_fidelities", ["roofline"])),
                "value_matches": list(s.get("value_matches", ["median", "mean"]))}
    df = read_records(store)
    limit = as_of_limit(as_of)
    if limit is not None:
        df = df[df["timestamp"].notna() & (df["timestamp"] <= limit)]
    if targets:
        df = df[df["target"].isin(targets)]
    df = df.assign(raw_op=df["op"])
    df["op"] = [canonical_op(o, src, config) for o, src in zip(df["raw_op"], df["source"], strict=True)]
    chosen = choose_runs(df, run) if len(df) else df
    entries, null_keys = select(chosen, config) if len(df) else ({}, 0)
    counts = {"records": len(df), "history_records": len(df) - len(chosen),
              "null_records": int(df["value"].isna().sum()), "null_keys": null_keys,
              "flagged_records": sum(flagged(f) for f in df["flags"])}
    present = set(df["fidelity"])
    rows: list[dict[str, Any]] = []
    comps: list[dict[str, Any]] = []
    for p in resolve_pairs(pairs, config, present):
        if p.candidate not in present or p.reference not in present:
            continue
        pr = pd.DataFrame(align(p, entries, config, settings))
        rows += pr.to_dict("records")
        if len(pr):
            bound = p.candidate in settings["bound_fidelities"] and (p.bounds or settings["roofline_tolerance"]) == "bound"
            comps += (aggregate(pr, ["target", "metric", "stat"], bound)
                      + aggregate(pr, ["target", "workload", "metric", "stat"], bound))
    rows_df = pd.DataFrame(rows)
    comp_df = pd.DataFrame(comps)
    if len(comp_df):
        comp_df["_level"] = comp_df["workload"].notna()
        comp_df = comp_df.sort_values(["_level", "target", "workload", "candidate", "reference", "metric", "stat"],
                                      kind="stable", na_position="first").drop(columns="_level")
        comp_df = comp_df.reset_index(drop=True)
    if len(rows_df):
        bad = rows_df[(rows_df["kind"] != "ok") & (include_missing | (rows_df["kind"] != "missing_reference"))]
        # severity descending (NaN last), then fingerprint, then row order
        order = sorted(bad.index, key=lambda i: (math.isnan(bad.at[i, "severity"]),
                                                 -(0.0 if math.isnan(bad.at[i, "severity"]) else bad.at[i, "severity"]),
                                                 bad.at[i, "fingerprint"], i))
        disc = bad.loc[order].reset_index(drop=True)
    else:
        disc = rows_df
    return Result(rows_df, disc, comp_df, coverage(df, config), counts, entries)
