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
import pyarrow.compute as pc

from xfid.config import Config
from xfid.engine.aggregate import achieved_fraction, is_bound_pair
from xfid.engine.align import NOT_BOUNDS, Aligner
from xfid.engine.keys import combine
from xfid.engine.mismatch import MismatchChecker
from xfid.engine.pairrows import BOUND, KINDS, Pair, code_texts, side_n
from xfid.engine.schema import (
    BOUND_FLAG,
    CANDIDATE,
    CODE,
    COUNT,
    COUNT_FIELDS,
    ENTRY,
    FIDELITY,
    FINGERPRINT,
    GROUP_FIELDS,
    NUMBER,
    REFERENCE,
    ROW_EXTRA_FIELDS,
    ROW_FIELDS,
    SIDES,
    TEXT,
    Field,
    arrow_schema,
    ddl,
    names,
    row_field,
)
from xfid.engine.schema import STAT_FIELDS as SCHEMA_STATS
from xfid.engine.scopes import DERIVED_UNITS, EntryScope, entry_scopes
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
PROVENANCE_FIELDS = tuple(f for f in ROW_FIELDS if f.source and f.source.kind == TEXT)
"""The entry texts a row shows per side (candidate_run, reference_source_loc, ...): not built per
row by the alignment; joined back from the entries in Spark SQL for the rows that come back only
(xfid.engine.spark.provenance)."""
JOINED = tuple(p for p in ENTRY_PROV if any(f.source.name == p for f in PROVENANCE_FIELDS if f.source))
"""The entry columns PROVENANCE_FIELDS show (each on both sides, SIDES)."""
ROW_BUILT = tuple(f for f in (*ROW_FIELDS, *ROW_EXTRA_FIELDS) if f not in PROVENANCE_FIELDS)
"""The row fields the alignment UDF returns (built per group by _rows)."""
ENTRY_REFS = (Field("candidate_entry_metric", pa.string()), Field("reference_entry_metric", pa.string()),
              Field("reference_entry_stat", pa.string()))
"""Which entries a row was aligned from, where the row does not say it: the candidate entry's
metric and the reference entry's metric and stat when they differ from the row's (a conversion,
a number derived from run totals, a stat-value fallback), else null. With the row's fidelities,
target, workload and op they are the entries' keys (one entry per fidelity and key)."""
ALIGNED_FIELDS = (PAIR_INDEX, *ROW_BUILT, *ENTRY_REFS, COUNTS)
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


def sorted_codes(col: pa.Array | pa.ChunkedArray, null: str | None = "") -> tuple[np.ndarray, list[str]]:
    """Codes into the sorted distinct texts of an Arrow text column, as
    `xfid.engine.scopes.text_codes` gives them (a null is the text `null`, "" there) but
    without a Python str per row (Arrow's dictionary encoding, then the few distinct texts
    sorted); with `null=None` a null gets the code len(texts) instead."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if null is not None:
        arr = pc.fill_null(arr, null)
    enc = pc.dictionary_encode(arr)
    texts = enc.dictionary.to_pylist()
    order = np.argsort(np.array(texts, dtype=object), kind="stable")
    rank = np.empty(len(texts) + 1, np.int64)
    rank[order] = np.arange(len(texts))
    rank[len(texts)] = len(texts)
    idx = enc.indices.fill_null(len(texts)).to_numpy(zero_copy_only=False)
    return rank[idx], [texts[i] for i in order]


def _recode(codes: np.ndarray, texts: list[str], into: list[str]) -> np.ndarray:
    """Codes into `texts` as codes into `into` (which holds every text of `texts`)."""
    at = {t: j for j, t in enumerate(into)}
    pos = np.array([at[t] for t in texts], np.int32)
    return pos[codes] if len(codes) else np.zeros(0, np.int32)


def align_group(table: pa.Table, ctx: AlignContext) -> pa.Table:
    """The rows of one (target, workload) (ALIGN_INPUT's columns) for every pair, plus one counts row per pair, as an
    Arrow table of ALIGNED_SCHEMA (built from the arrays directly: no DataFrame per pair, no
    Python object per entry for its texts)."""
    n = table.num_rows
    if not n:
        return arrow_rows({}, 0)
    for j, f in enumerate(table.schema):  # a text column of nulls only may come untyped (not from Spark)
        if pa.types.is_null(f.type):
            table = table.set_column(j, f.name, table.column(j).cast(pa.string()))
    fid_names = ctx.fidelities
    target, workload = str(table.column("target")[0].as_py()), str(table.column("workload")[0].as_py())
    code: dict[str, np.ndarray] = {"target": np.zeros(n, np.int32), "workload": np.zeros(n, np.int32)}
    dims: dict[str, list[str]] = {"target": [target], "workload": [workload]}
    for k in ("metric", "stat", "op"):
        c, texts = sorted_codes(table.column(k))
        dims[k] = sorted(set(texts) | set(CONVERTIBLE)) if k == "metric" else texts
        code[k] = _recode(c, texts, dims[k])
    c, texts = sorted_codes(table.column("fidelity"))
    code["fid"] = _recode(c, texts, list(fid_names))
    cards = [1, len(dims["metric"]), len(dims["stat"]), 1, len(dims["op"])]
    key, _ = combine([code[k] for k in ("target", "metric", "stat", "workload", "op")], cards)
    order = np.lexsort((code["fid"], key))  # the local engine's entry order: (key, fidelity)
    code = {k: v[order] for k, v in code.items()}
    key = key[order]
    value = table.column("value").to_numpy()[order].astype(np.float64, copy=False)
    ref_value = table.column("ref_value").to_numpy()[order].astype(np.float64, copy=False)
    cnt = table.column("n").to_numpy()[order].astype(np.int64, copy=False)
    flagged = table.column("flagged").fill_null(False).to_numpy()[order].astype(bool, copy=False)
    note = table.column("note").take(pa.array(order))
    valid = np.asarray(note.is_valid())
    notes = dict(zip(np.flatnonzero(valid).tolist(), note.filter(pa.array(valid)).to_pylist(), strict=True))
    sel = Selected(dims, list(fid_names), code, value, cnt, np.arange(n, dtype=np.int64), flagged, notes, None, {})
    ucodes, unames = sorted_codes(table.column("unit"), null=None)  # a null unit: code len(unames)
    unit_names = [*unames, "", "s", "cycles", *DERIVED_UNITS]
    units = ucodes[order]
    config = table.column("config").take(pa.array(order))
    checker = MismatchChecker(pa.table({"config": config}), ctx.config, np.arange(n, dtype=np.int64))
    has_op = np.array([bool(t) for t in dims["op"]], np.int64)  # a scope reads whether an entry has an op
    parts = {"metric": (code["metric"], dims["metric"]), "stat": (code["stat"], dims["stat"]),
             "op": (has_op[code["op"]], ["", "op"]), "unit": (units, unit_names)}
    for k in ("source", "config"):
        c, texts = sorted_codes(table.column(k))
        parts[k] = (c[order], texts)
    scopes = EntryScope(entry_scopes(parts), sorted_codes(table.column("run"))[0][order])
    aligner = Aligner(sel, AlignKeys(key, ref_value), ctx.config, ctx.settings, units, unit_names, checker, scopes)
    tables = []
    counts_rows = []
    for i, sides in aligner.plan(ctx.pairs).items():
        pr = aligner.align(sides)
        counts_rows.append((i, json.dumps({k: int(pr.counts.get(k, 0)) for k in COUNT_KEYS})))
        if len(pr.cand):
            tables.append(arrow_rows(_rows(i, pr, sel, unit_names), len(pr.cand)))
    tables.append(arrow_rows({PAIR_INDEX.name: np.array([c[0] for c in counts_rows], np.int64),
                              COUNTS.name: np.array([c[1] for c in counts_rows], dtype=object)}, len(counts_rows)))
    return pa.concat_tables(tables)


def arrow_rows(cols: dict[str, Any], m: int) -> pa.Table:
    """`m` rows of ALIGNED_FIELDS from arrays (an Arrow array is taken as it is; a text may be
    one str for every row, None for null; a column missing is null, NaN for a number; an integer
    column may come as (values, null mask))."""
    out = []
    for f in ALIGNED_FIELDS:
        v = cols.get(f.name)
        if isinstance(v, pa.Array):
            out.append(v if v.type == f.type else v.cast(f.type))
        elif v is None and pa.types.is_floating(f.type):
            out.append(pa.array(np.full(m, np.nan), f.type))  # NaN, as a frame's missing number was
        elif v is None:
            out.append(pa.nulls(m, f.type))
        elif pa.types.is_string(f.type):
            if isinstance(v, str):
                out.append(pa.repeat(pa.scalar(v, f.type), m))
            else:
                out.append(pa.array(np.asarray(v, dtype=object), f.type, from_pandas=True))
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


def _take(texts: Sequence[str | None], codes: np.ndarray, present: np.ndarray | None = None) -> pa.Array:
    """Per row texts[codes[i]] as an Arrow string array (null where not `present`), gathered by
    Arrow: no Python str per row."""
    idx = pa.array(np.asarray(codes, np.int64), mask=None if present is None else ~np.asarray(present, bool))
    return pa.array(list(texts), pa.string()).take(idx)


def _rows(i: int, pr: Any, sel: Selected, unit_names: list[str]) -> dict[str, Any]:
    """One pair's rows of this group: ALIGNED_SCHEMA's columns as arrays (arrow_rows builds them),
    each row field built from its declared source (xfid.engine.schema.Source); the fingerprint is
    computed in Spark SQL (engine.fingerprint_column) and the entry texts joined back
    (xfid.engine.spark.provenance)."""
    c, dims = sel.codes, sel.dims
    side = dict(zip(SIDES, (pr.cand, pr.ref), strict=True))  # entry index per row, -1: missing
    texts = code_texts(dims["metric"], unit_names, pr.note.texts)

    def column(f: Field) -> Any:
        s = f.source
        assert s is not None, f.name
        if s.kind == NUMBER:
            return getattr(pr, s.name)
        if s.kind == CODE:
            return _take(texts[s.name], pr.codes(s.name))
        if s.kind == ENTRY:
            return _take(dims[s.name], c[s.name][side[CANDIDATE]])
        if s.kind == FIDELITY:
            return getattr(pr.pair, s.side)
        if s.kind == COUNT:
            n, missing = side_n(sel.n, side[s.side])
            return (n, missing)
        if s.kind == FINGERPRINT:
            return None
        raise AssertionError(f"{f.name}: {s} is not built per group")

    cand, ref = side[CANDIDATE], side[REFERENCE]
    has_ref = ref >= 0
    ref0 = np.maximum(ref, 0)
    row_stat = c["stat"][cand]
    cand_metric, ref_metric, ref_stat = c["metric"][cand], c["metric"][ref0], c["stat"][ref0]
    # which entries the row came from, where the row's own metric and stat do not say it
    refs = (_take(dims["metric"], cand_metric, cand_metric != pr.metric),
            _take(dims["metric"], ref_metric, has_ref & (ref_metric != pr.metric)),
            _take(dims["stat"], ref_stat, has_ref & (ref_stat != row_stat)))
    return {PAIR_INDEX.name: i, **{f.name: column(f) for f in ROW_BUILT},
            **dict(zip(names(ENTRY_REFS), refs, strict=True))}


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
    return to_arrow(stats_group(table, ctx), STATS_FIELDS_SPARK)


def stats_group(table: pa.Table, ctx: StatsContext) -> pd.DataFrame:
    """Target-level and workload-level aggregates (STATS_SCHEMA) of one (target, pair, metric,
    stat)'s usable rows, in the local engine's row order (workload, then op: one row per
    (workload, op) in a group; Arrow sorts texts by their UTF-8 bytes, which is code point order,
    as Python compares str). The columns are read from Arrow as numbers and codes (no frame)."""
    order = pc.sort_indices(table, sort_keys=[("workload", "ascending"), ("op", "ascending")])

    def col(k: str) -> pa.ChunkedArray:
        return table.column(k).take(order)

    def num(k: str) -> np.ndarray:
        return col(k).to_numpy().astype(np.float64, copy=False)

    rel, lr, cv, rv = (num(row_field(NUMBER, k)) for k in ("rel", "log_ratio", "cand_value", "ref_value"))
    within = col(row_field(NUMBER, "within")).fill_null(False).to_numpy().astype(bool, copy=False)
    head = {k: table.column(k)[0].as_py() for k in STATS_GROUP} if table.num_rows else dict.fromkeys(STATS_GROUP)
    bound_pair = (str(head["candidate"]), str(head["reference"])) in ctx.bound_pairs
    achieved = achieved_fraction(num(row_field(NUMBER, "efficiency")), bound_pair)
    violated = pc.equal(col(row_field(CODE, "kind")), KINDS[BOUND]).fill_null(False).to_numpy().astype(bool, copy=False)
    wl = pc.dictionary_encode(col("workload").combine_chunks())
    wcode = wl.indices.to_numpy(zero_copy_only=False)
    s = ctx.settings
    kw = {"kendall": ctx.kendall, "bootstrap": ctx.bootstrap, "resamples": s["bootstrap_resamples"],
          "seed": s["bootstrap_seed"], "exact_max_n": s["bootstrap_exact_max_n"]}
    first = np.r_[True, wcode[1:] != wcode[:-1]] if len(wcode) else np.zeros(0, bool)
    gid = np.cumsum(first) - 1
    names = wl.dictionary.to_pylist()
    levels = ((np.zeros(len(rel), np.int64), 1, [None]), (gid, int(first.sum()), [names[c] for c in wcode[first]]))
    frames = []
    for g, ng, workloads in levels:
        st = grouped_stats(g, ng, rel, lr, cv, rv, within, achieved=achieved, violated=violated, **kw)
        if str(head["metric"]) in NOT_BOUNDS and bound_pair:  # shown, not checked (aggregate.unchecked)
            st["within_tolerance"] = np.full(ng, np.nan)
        frames.append(pd.DataFrame({**head, "workload": workloads, **{k: st[k] for k in (*STAT_FIELDS, "bound")}}))
    out = pd.concat(frames, ignore_index=True)
    return _plain(out[list(STATS_SCHEMA_NAMES)])
