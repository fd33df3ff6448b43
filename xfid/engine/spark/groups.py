"""What the executors run per group, with the local engine's own code.

`align_group`: the entries of one (target, workload) -> its rows for every pair (alignment,
conversions, errors, tolerances, bounds, kinds, severities, notes and config_mismatch all stay
within one target and workload (the fingerprints are computed in Spark SQL afterwards), so `xfid.engine.align.Aligner` runs on the
group as it runs on the whole store). `stats_group`: the usable rows of one (target, pair,
metric, stat) -> its target-level and workload-level aggregates by
`xfid.engine.stats.grouped_stats` (Kendall tau-b and the seeded bootstrap CIs included), the
rows in the local engine's order so the CIs are the same numbers.

Nothing here imports pyspark: the functions take and return Arrow tables (Spark's applyInArrow).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from xfid.config import Config
from xfid.engine.aggregate import achieved_fraction, is_bound_pair
from xfid.engine.align import NOT_BOUNDS, Aligner
from xfid.engine.keys import combine
from xfid.engine.mismatch import MismatchChecker
from xfid.engine.pairrows import KINDS, Pair
from xfid.engine.schema import (
    BOUND_FLAG,
    COUNT_FIELDS,
    GROUP_FIELDS,
    ROW_EXTRA_FIELDS,
    ROW_FIELDS,
    Field,
    arrow_schema,
    ddl,
    names,
)
from xfid.engine.schema import STAT_FIELDS as SCHEMA_STATS
from xfid.engine.scopes import DERIVED_UNITS, SCOPE_NAMES, EntryScope, entry_scopes, text_codes
from xfid.engine.selection import CONVERTIBLE, AlignKeys, Selected
from xfid.engine.spark.select import ENTRY_FIELDS, ENTRY_PROV
from xfid.engine.spark.select import ENTRY_SCHEMA as ENTRY_SCHEMA  # the UDF's input (re-exported)
from xfid.engine.stats import grouped_stats

PAIR_INDEX, COUNTS = Field("pair_index", pa.int32()), Field("counts", pa.string())
"""Spark's own row fields: the pair a row belongs to, and on a counts row (one per pair and
group, every other field null) the alignment's counts as JSON."""
ROW_FIELDS_SPARK = (PAIR_INDEX, *ROW_FIELDS, *ROW_EXTRA_FIELDS, COUNTS)
ROW_SCHEMA = ddl(ROW_FIELDS_SPARK)
ROW_SCHEMA_NAMES = names(ROW_FIELDS_SPARK)
SIDES = ("candidate", "reference")
JOINED = tuple(p for p in ENTRY_PROV if f"{SIDES[0]}_{p}" in names(ROW_FIELDS))
"""The entry provenance a row shows per side (candidate_run, reference_source_loc, ...): not
built per row by the alignment; joined back from the entries in Spark SQL for the rows that come
back only (xfid.engine.spark.provenance)."""
PROVENANCE_FIELDS = tuple(f for f in ROW_FIELDS if any(f.name == f"{s}_{p}" for s in SIDES for p in JOINED))
ENTRY_REFS = (Field("candidate_entry_metric", pa.string()), Field("reference_entry_metric", pa.string()),
              Field("reference_entry_stat", pa.string()))
"""Which entries a row was aligned from, where the row does not say it: the candidate entry's
metric and the reference entry's metric and stat when they differ from the row's (a conversion,
a number derived from run totals, a stat-value fallback), else null. With the row's fidelities,
target, workload and op they are the entries' keys (one entry per fidelity and key)."""
ALIGNED_FIELDS = (PAIR_INDEX, *(f for f in ROW_FIELDS if f not in PROVENANCE_FIELDS), *ROW_EXTRA_FIELDS,
                  *ENTRY_REFS, COUNTS)
"""What the alignment UDF returns per row: the row's numbers, codes and texts but its
provenance, and the entry references the provenance is joined back by."""
ALIGNED_SCHEMA = ddl(ALIGNED_FIELDS)
ALIGN_INPUT = tuple(n for n in names(ENTRY_FIELDS) if n not in JOINED or n in ("run", "config"))
"""The entry columns the alignment reads (the run and config texts define scopes and config
mismatches; the source path and location are only shown, so they stay out of the UDF)."""
STAT_FIELDS = names(SCHEMA_STATS)
STATS_FIELDS_SPARK = (*GROUP_FIELDS, *SCHEMA_STATS, BOUND_FLAG)
STATS_SCHEMA = ddl(STATS_FIELDS_SPARK)
STATS_SCHEMA_NAMES = names(STATS_FIELDS_SPARK)
STATS_GROUP = tuple(k for k in names(GROUP_FIELDS) if k != "workload")
COUNT_KEYS = names(COUNT_FIELDS)


@dataclass
class AlignContext:
    """What every group's alignment shares (shipped to the executors with the function)."""

    config: Config
    settings: dict[str, Any]
    pairs: list[Pair]
    fidelities: list[str]  # every fidelity of the selection, sorted (the local engine's codes)


def _codes(values: np.ndarray, names: list[str]) -> np.ndarray:
    return np.searchsorted(np.array(names, dtype=object), values).astype(np.int32)


def _text(a: Any) -> np.ndarray:
    out = np.asarray(a, dtype=object).copy()
    out[pd.isna(out)] = None
    return out


def to_arrow(df: pd.DataFrame, fields: Sequence[Field]) -> pa.Table:
    """`df` as an Arrow table of exactly the schema of `fields` (None and NaN in text columns are null)."""
    schema = arrow_schema(fields)
    cols = []
    for f in schema:
        if f.name not in df.columns:
            cols.append(pa.nulls(len(df), f.type))
            continue
        v = df[f.name]
        if pa.types.is_floating(f.type):
            cols.append(pa.array(pd.to_numeric(v, errors="coerce").to_numpy(np.float64), pa.float64()))
        elif pa.types.is_string(f.type):
            cols.append(pa.array(v.to_numpy(dtype=object), pa.string(), from_pandas=True))
        else:  # bool and integer columns, nullable (the counts rows carry none)
            mask = np.array(v.isna().to_numpy(), dtype=bool)
            data = np.array(v.to_numpy(dtype=object), dtype=object)
            data[mask] = 0
            np_type = bool if pa.types.is_boolean(f.type) else np.int64
            cols.append(pa.array(data.astype(np_type), f.type, mask=mask))
    return pa.Table.from_arrays(cols, schema=schema)


def from_arrow(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as a DataFrame with text columns as object arrays (str or None)."""
    out = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            out[name] = col.to_numpy(zero_copy_only=False).astype(object, copy=False)
        elif pa.types.is_boolean(col.type):
            out[name] = col.fill_null(False).to_numpy(zero_copy_only=False)
        else:
            out[name] = col.to_numpy()
    return pd.DataFrame(out)


def align_arrow(table: pa.Table, ctx: AlignContext) -> pa.Table:
    """align_group on Arrow tables (ENTRY_SCHEMA in, ROW_SCHEMA out)."""
    return align_group(from_arrow(table), ctx)


def align_group(pdf: pd.DataFrame, ctx: AlignContext) -> pa.Table:
    """The rows of one (target, workload) for every pair, plus one counts row per pair, as an
    Arrow table of ALIGNED_SCHEMA (built from the arrays directly: no DataFrame per pair)."""
    if not len(pdf):
        return arrow_rows({}, 0)
    fid_names = ctx.fidelities
    raw = {k: _text(pdf[k]) for k in ("fidelity", "op", "metric", "stat", "note", "unit", "run", "source", "config")}
    target, workload = str(pdf["target"].iloc[0]), str(pdf["workload"].iloc[0])
    dims = {"target": [target], "workload": [workload], "metric": sorted(set(raw["metric"]) | set(CONVERTIBLE)),
            "stat": sorted(set(raw["stat"])), "op": sorted(set(raw["op"]))}
    n = len(pdf)
    code = {"target": np.zeros(n, np.int32), "workload": np.zeros(n, np.int32),
            "metric": _codes(raw["metric"], dims["metric"]), "stat": _codes(raw["stat"], dims["stat"]),
            "op": _codes(raw["op"], dims["op"]), "fid": _codes(raw["fidelity"], fid_names)}
    cards = [1, len(dims["metric"]), len(dims["stat"]), 1, len(dims["op"])]
    key, _ = combine([code[k] for k in ("target", "metric", "stat", "workload", "op")], cards)
    order = np.lexsort((code["fid"], key))  # the local engine's entry order: (key, fidelity)
    code = {k: v[order] for k, v in code.items()}
    key = key[order]
    raw = {k: v[order] for k, v in raw.items()}
    value = pdf["value"].to_numpy(np.float64)[order]
    ref_value = pdf["ref_value"].to_numpy(np.float64)[order]
    cnt = pdf["n"].to_numpy(np.int64)[order]
    flagged = pdf["flagged"].to_numpy(bool)[order]
    notes = {i: str(t) for i, t in enumerate(raw["note"]) if t is not None}
    sel = Selected(dims, list(fid_names), code, value, cnt, np.arange(n, dtype=np.int64), flagged, notes, None, {})
    unames = sorted({u for u in raw["unit"] if u is not None})
    unit_names = [*unames, "", "s", "cycles", *DERIVED_UNITS]
    upos = {u: i for i, u in enumerate(unames)}
    units = np.array([upos[u] if u is not None else len(unames) for u in raw["unit"]], np.int64)
    checker = MismatchChecker(pa.table({"config": pa.array(list(raw["config"]), pa.string())}), ctx.config,
                              np.arange(n, dtype=np.int64))
    parts = {k: (code[k], dims[k]) for k in ("metric", "stat", "op")}
    parts.update(unit=(units, unit_names), source=text_codes(raw["source"]), config=text_codes(raw["config"]))
    scopes = EntryScope(entry_scopes(parts), text_codes(raw["run"])[0])
    aligner = Aligner(sel, AlignKeys(key, ref_value), ctx.config, ctx.settings, units, unit_names, checker, scopes)
    tables = []
    counts_rows = []
    for i, sides in aligner.plan(ctx.pairs).items():
        pr = aligner.align(sides)
        counts_rows.append((i, json.dumps({k: int(pr.counts.get(k, 0)) for k in COUNT_KEYS})))
        if len(pr.cand):
            tables.append(arrow_rows(_rows(i, pr, sel, unit_names), len(pr.cand)))
    tables.append(arrow_rows({"pair_index": np.array([c[0] for c in counts_rows], np.int64),
                              "counts": np.array([c[1] for c in counts_rows], dtype=object)}, len(counts_rows)))
    return pa.concat_tables(tables)


def arrow_rows(cols: dict[str, Any], m: int) -> pa.Table:
    """`m` rows of ALIGNED_FIELDS from arrays (a text may be one str for every row, None for
    null; a column missing is null, NaN for a number; an integer column may come as (values,
    null mask))."""
    out = []
    for f in ALIGNED_FIELDS:
        v = cols.get(f.name)
        if v is None and pa.types.is_floating(f.type):
            out.append(pa.array(np.full(m, np.nan), f.type))  # NaN, as a frame's missing number was
        elif v is None:
            out.append(pa.nulls(m, f.type))
        elif pa.types.is_string(f.type):
            arr = np.full(m, v, dtype=object) if isinstance(v, str) else np.asarray(v, dtype=object)
            out.append(pa.array(arr, f.type, from_pandas=True))
        elif pa.types.is_floating(f.type):
            out.append(pa.array(np.asarray(v, np.float64), f.type))
        elif pa.types.is_boolean(f.type):
            out.append(pa.array(np.asarray(v, bool), f.type))
        elif isinstance(v, tuple):
            out.append(pa.array(np.asarray(v[0], np.int64), f.type, mask=np.asarray(v[1], bool)))
        else:
            out.append(pa.array(np.broadcast_to(np.asarray(v, np.int64), (m,)), f.type))
    return pa.Table.from_arrays(out, schema=arrow_schema(ALIGNED_FIELDS))


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """String columns as object arrays (pandas' own string dtypes do not cross into Spark)."""
    for c in df.columns:
        if not (pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c])):
            df[c] = pd.Series(df[c].to_numpy(dtype=object), index=df.index, dtype=object)
    return df


def _differs(names: list[str], codes: np.ndarray, row_codes: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Per row the name of codes[i] where it is not the row's own code (and the entry is
    present), else None."""
    out = np.full(len(codes), None, dtype=object)
    d = np.flatnonzero(present & (codes != row_codes))
    out[d] = np.array(names, dtype=object)[codes[d]]
    return out


def _rows(i: int, pr: Any, sel: Selected, unit_names: list[str]) -> dict[str, Any]:
    """One pair's rows of this group: ALIGNED_SCHEMA's columns as arrays (arrow_rows builds them)."""
    c = sel.codes
    cand, ref = pr.cand, pr.ref
    dims = sel.dims
    has_ref = ref >= 0
    ref0 = np.maximum(ref, 0)
    row_stat = c["stat"][cand]
    return {
        "pair_index": i, "fingerprint": None,  # computed in Spark SQL (engine.fingerprint_column)
        "target": dims["target"][0], "workload": dims["workload"][0],
        "op": np.array(dims["op"], dtype=object)[c["op"][cand]],
        "metric": np.array(dims["metric"], dtype=object)[pr.metric],
        "stat": np.array(dims["stat"], dtype=object)[row_stat],
        "candidate": pr.pair.candidate, "reference": pr.pair.reference,
        "candidate_value": pr.cand_value, "reference_value": pr.ref_value,
        "unit": np.array(unit_names, dtype=object)[pr.unit],
        "rel_error": pr.rel, "log_ratio": pr.log_ratio, "tolerance": pr.tol, "tolerance_abs": pr.tol_abs,
        "within": pr.within, "kind": np.array(KINDS, dtype=object)[pr.kind], "severity": pr.severity,
        "candidate_n": sel.n[cand], "reference_n": (np.where(has_ref, sel.n[ref0], 0), ~has_ref),
        "note": np.array(pr.note.texts, dtype=object)[pr.note.ids], "efficiency": pr.efficiency,
        "factor": pr.factor, "scope": np.array(SCOPE_NAMES, dtype=object)[pr.scope],
        "candidate_entry_metric": _differs(dims["metric"], c["metric"][cand], pr.metric, np.ones(len(cand), bool)),
        "reference_entry_metric": _differs(dims["metric"], c["metric"][ref0], pr.metric, has_ref),
        "reference_entry_stat": _differs(dims["stat"], c["stat"][ref0], row_stat, has_ref),
    }


@dataclass
class StatsContext:
    settings: dict[str, Any]
    kendall: bool
    bootstrap: bool
    bound_pairs: frozenset[tuple[str, str]] = frozenset()  # (candidate, reference) checked as bounds

    @classmethod
    def of(cls, settings: dict[str, Any], kendall: bool, bootstrap: bool, pairs: list[Pair]) -> StatsContext:
        """The context of these pairs: which of them aggregate as bounds (aggregate.is_bound_pair)."""
        return cls(settings, kendall, bootstrap,
                   frozenset((p.candidate, p.reference) for p in pairs if is_bound_pair(p, settings)))


def stats_arrow(table: pa.Table, ctx: StatsContext) -> pa.Table:
    """stats_group on Arrow tables (STATS_SCHEMA out)."""
    return to_arrow(stats_group(from_arrow(table), ctx), STATS_FIELDS_SPARK)


def stats_group(pdf: pd.DataFrame, ctx: StatsContext) -> pd.DataFrame:
    """Target-level and workload-level aggregates (STATS_SCHEMA) of one (target, pair, metric,
    stat)'s usable rows, in the local engine's row order (workload, then op)."""
    pdf = pdf.sort_values(["workload", "op"], kind="stable")
    rel, lr, cv, rv = (pdf[k].to_numpy(np.float64) for k in ("rel_error", "log_ratio", "candidate_value",
                                                              "reference_value"))
    within = pdf["within"].to_numpy(bool)
    bound_pair = (str(pdf["candidate"].iloc[0]), str(pdf["reference"].iloc[0])) in ctx.bound_pairs
    achieved = achieved_fraction(pdf["efficiency"].to_numpy(np.float64), bound_pair)
    violated = (pdf["kind"] == "bound_violation").to_numpy(bool)
    wl = pdf["workload"].to_numpy(dtype=object)
    s = ctx.settings
    kw = {"kendall": ctx.kendall, "bootstrap": ctx.bootstrap, "resamples": s["bootstrap_resamples"],
          "seed": s["bootstrap_seed"], "exact_max_n": s["bootstrap_exact_max_n"]}
    first = np.r_[True, wl[1:] != wl[:-1]] if len(wl) else np.zeros(0, bool)
    gid = np.cumsum(first) - 1
    levels = ((np.zeros(len(rel), np.int64), 1, [None]), (gid, int(first.sum()), list(wl[first])))
    head = {k: pdf[k].iloc[0] for k in STATS_GROUP}
    frames = []
    for g, ng, workloads in levels:
        st = grouped_stats(g, ng, rel, lr, cv, rv, within, achieved=achieved, violated=violated, **kw)
        if str(head["metric"]) in NOT_BOUNDS and bound_pair:  # shown, not checked (aggregate.unchecked)
            st["within_tolerance"] = np.full(ng, np.nan)
        frames.append(pd.DataFrame({**head, "workload": workloads, **{k: st[k] for k in (*STAT_FIELDS, "bound")}}))
    out = pd.concat(frames, ignore_index=True)
    return _plain(out[list(STATS_SCHEMA_NAMES)])
