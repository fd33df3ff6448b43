"""Which numbers: load records, apply op maps, pick the latest run per key, aggregate duplicates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from xfid.config import Config
from xfid.engine.keys import combine, dict_chunks, encode, raw_codes, run_starts
from xfid.engine.opmap import apply_op_maps
from xfid.errors import EngineError
from xfid.schema import FLAG_NO_REFERENCE
from xfid.store import Store

LOAD_COLUMNS = ("fidelity", "target", "workload", "op", "metric", "stat", "value", "unit", "source",
                "source_path", "source_loc", "run", "timestamp", "config", "flags")
_DICT_READ = ("source_path", "run", "config", "flags", "unit")
ADDITIVE = frozenset({"latency", "cycles", "bytes", "flops", "energy"})
"""Metrics summed when several raw ops map to one canonical op within one run of one key."""
CONVERTIBLE = ("cycles", "latency", "energy_per_token", "power")
"""Metrics that conversions produce (cycles<->latency; the numbers derived from run totals,
xfid.engine.scopes.DERIVED): they always have a code."""
KEY_DIMS = ("target", "metric", "stat", "workload", "op")
"""Key components, most significant first: groups (target, metric, stat[, workload]) are contiguous."""


@dataclass
class Selected:
    """One entry per (fidelity, key): the number that represents it, sorted by (key, fidelity).

    What every later stage reads (alignment, rows, aggregates); what only the alignment reads
    is in AlignKeys, the chosen records in Selection.records."""

    dims: dict[str, list[str]]
    fidelities: list[str]
    codes: dict[str, np.ndarray]  # per entry: target, metric, stat, workload, op, fid
    value: np.ndarray  # median over the chosen run's records (all of them)
    n: np.ndarray  # records behind the value
    rep: np.ndarray  # row of Selection.records whose provenance represents the entry
    flagged: np.ndarray  # bool: some record of the entry carries a no-reference flag
    notes: dict[int, str]
    coverage: Any
    counts: dict[str, Any] = field(default_factory=dict)


class AlignKeys(NamedTuple):
    """Per entry, what only the alignment reads (dropped with it)."""

    key: np.ndarray  # combined (target, metric, stat, workload, op), sorted; fid breaks ties
    ref_value: np.ndarray  # the value without records flagged invalid / failed_test


class Selection(NamedTuple):
    """What `select` chose: the entries, their alignment keys, and the records they point at."""

    entries: Selected
    keys: AlignKeys
    records: pa.Table  # entry i's provenance is row entries.rep[i]


def load(store: Store, *, targets: Sequence[str] | None = None, as_of: Any = None,
         source_loc: bool = True, files: Sequence[Any] | None = None, pad: bool = True,
         runs: Sequence[str] | None = None, columns: Sequence[str] = LOAD_COLUMNS) -> pa.Table:
    """Read `columns` (default the columns the engine needs) of the records of `targets` and
    `runs` (None: all), of `files` (default all), in the files' order; low-cardinality strings
    come as dictionaries. Without `source_loc` the column is all null (absent unless `pad`)."""
    files = store.part_files() if files is None else files
    cols = [c for c in columns if source_loc or c != "source_loc"]
    if not files:
        return pa.table({c: pa.array([], pa.float64() if c == "value" else pa.string()) for c in columns})
    fmt = ds.ParquetFileFormat(  # page CRCs checked: a flipped bit is an error, never a wrong value
        read_options=ds.ParquetReadOptions(dictionary_columns=set(_DICT_READ)),
        default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True))
    expr = None
    if targets:
        expr = pc.field("target").isin(list(targets))
    if as_of is not None:
        e = pc.field("timestamp") <= pa.scalar(as_of, pa.timestamp("us", tz="UTC"))
        expr = e if expr is None else expr & e
    if runs is not None:
        e = pc.field("run").isin(pa.array(list(runs), pa.string()))
        expr = e if expr is None else expr & e
    try:
        t = store.open_parts(files, fmt).to_table(columns=cols, filter=expr)
    except (pa.ArrowInvalid, OSError) as e:  # a truncated or damaged part
        raise store.unreadable(files, e) from None
    if not source_loc and pad and "source_loc" in columns:
        t = t.append_column("source_loc", pa.nulls(t.num_rows, pa.string()))
    return t


DENSE_MAX = 1 << 22
"""Largest key space grouped through dense arrays (bincount / scatter) instead of a sort."""


def _dense(key: np.ndarray, card: int, n: int) -> tuple[np.ndarray, int]:
    """`key` as an order-preserving code in [0, size): itself when the space is small, else ranks."""
    if card <= max(DENSE_MAX, 2 * n):
        return key, card
    uniq, inv = np.unique(key, return_inverse=True)
    return inv.astype(np.int64, copy=False), len(uniq)


def _run_rank(fid: np.ndarray, run: np.ndarray, run_names: list[Any], ts: np.ndarray,
              runs: Mapping[str, str] | None, fid_names: list[str]) -> np.ndarray:
    """Rank of each record's run within its fidelity: by the run's latest timestamp, then name."""
    nr = max(len(run_names), 1)
    fr = run.astype(np.int64)  # (fidelity, run) code, built in place
    fr += 1
    if len(fid) and fid.strides == (0,):
        fr += int(fid[0]) * (nr + 1)  # one fidelity (a partition): a constant offset
    elif len(fid):
        fr += fid.astype(np.int64) * (nr + 1)
    size = max(len(fid_names), 1) * (nr + 1)
    run_ts = np.full(size, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(run_ts, fr, ts)
    uniq = np.flatnonzero(np.bincount(fr, minlength=size))
    names = [str(run_names[u % (nr + 1) - 1]) if u % (nr + 1) else "" for u in uniq]
    # rank over (preferred, timestamp, name): a --run choice beats every timestamp
    pref = np.zeros(len(uniq), np.int64)
    if runs:
        for i, u in enumerate(uniq):
            want = runs.get(fid_names[u // (nr + 1)], runs.get("*"))
            pref[i] = int(want is not None and names[i] == want)
    name_rank = np.argsort(np.argsort(np.array(names, dtype=object), kind="stable"), kind="stable")
    rank_of_uniq = np.lexsort((name_rank, run_ts[uniq], pref)).argsort()
    dense = np.zeros(size, np.int32)
    dense[uniq] = rank_of_uniq
    return dense[fr]


def select(table: pa.Table, config: Config, *, runs: Mapping[str, str] | None = None) -> Selection:
    """Pick, per fidelity and key, the latest run that has the key and aggregate it.

    Duplicates within that run are aggregated by their median (NaN ignored), with the
    count kept. Several raw ops that the op maps turn into one canonical op are summed for
    ADDITIVE metrics and otherwise represented by their median. Keys whose chosen records
    are all null are not compared (counted in `counts["null_keys"]`).

    Raises:
        EngineError: a fidelity label the schema does not know.
    """
    n = table.num_rows
    f, fid_names = encode(table.column("fidelity"))
    t, tn = encode(table.column("target"))
    w, wn = encode(table.column("workload"))
    mt, mn = encode(table.column("metric"), CONVERTIBLE)
    st, sn = encode(table.column("stat"))
    src, src_names = raw_codes(table.column("source"))
    o_raw, raw_names = encode(table.column("op"))
    o, on, merges, coverage = apply_op_maps(src, src_names, o_raw, raw_names, config.op_maps)
    del src
    runc, run_names = raw_codes(table.column("run"))
    ts = pc.fill_null(table.column("timestamp").cast(pa.int64()), 0).to_numpy()
    value = table.column("value").to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    flagged_rec = _no_reference(table.column("flags"))
    rr = _run_rank(f, runc, run_names, ts, runs, fid_names) if n else np.zeros(0, np.int32)
    del runc, ts
    dims = {"target": tn, "metric": mn, "stat": sn, "workload": wn, "op": on}
    cards = [len(tn), len(mn), len(sn), len(wn), len(on), len(fid_names)]
    # selection in the store's file order (target, workload, op, metric): nearly sorted
    fk, _ = combine([t, w, o, mt, st, f], [cards[0], cards[3], cards[4], cards[1], cards[2], cards[5]])
    fk, size = _dense(fk, int(np.prod([max(c, 1) for c in cards], dtype=object)), n)
    best = np.full(size, -1, np.int32)
    np.maximum.at(best, fk, rr)
    sel = np.flatnonzero(rr == best[fk])
    del best, rr
    counts: dict[str, Any] = {"records": n, "history_records": int(n - len(sel)),
                              "null_records": int(np.isnan(value).sum())}
    sub = combine([fk[sel], o_raw[sel]], [size, len(raw_names)])[0] if merges else fk[sel]
    o2 = np.argsort(sub, kind="stable")
    sel, sub = sel[o2], sub[o2]
    del o2
    e_starts = run_starts(sub)
    del sub
    val, ok_val, cnt, rep, anyflag = _median_groups(value, flagged_rec, e_starts, sel)
    efk = fk[rep]
    del fk
    notes: dict[int, str] = {}
    if merges:
        merged, notes = _merge_raw(RawEntries(val, ok_val, cnt, rep, anyflag, efk), o_raw, raw_names, mt, mn)
        val, ok_val, cnt, rep, anyflag, efk = merged
        del merged
    good = ~np.isnan(val)
    counts["null_keys"] = int((~good).sum())
    counts["flagged_records"] = int(flagged_rec.sum())
    if not good.all():
        idx = np.flatnonzero(good)
        remap = {int(np.searchsorted(idx, k)): v for k, v in notes.items() if good[k]}
        val, ok_val, cnt, rep, anyflag, efk, notes = (val[idx], ok_val[idx], cnt[idx], rep[idx],
                                                      anyflag[idx], efk[idx], remap)
    # entries in (target, metric, stat, workload, op, fidelity) order: groups are contiguous
    code = {"target": t[rep], "metric": mt[rep], "stat": st[rep], "workload": w[rep], "op": o[rep], "fid": f[rep]}
    code = {k: v.astype(np.int32, copy=False) for k, v in code.items()}  # codes < 2**31: half the memory
    gk, _ = combine([code[k] for k in ("target", "metric", "stat", "workload", "op", "fid")], cards)
    reorder = order_entries(gk, cards)
    notes = reorder_notes(notes, reorder)
    val, ok_val, cnt, rep, anyflag, gk = (a[reorder] for a in (val, ok_val, cnt, rep, anyflag, gk))
    codes = {k: v[reorder] for k, v in code.items()}
    for name in fid_names:
        check_fidelity(name)
    key = gk // len(fid_names) if len(fid_names) else gk
    entries = Selected(dims, fid_names, codes, val, cnt, rep, anyflag, notes, coverage, counts)
    return Selection(entries, AlignKeys(key, ok_val), table)


def order_entries(gk: np.ndarray, cards: Sequence[int]) -> np.ndarray:
    """The order sorting unique entry keys `gk` (mixed radix over `cards`)."""
    gsize = int(np.prod([max(c, 1) for c in cards], dtype=object))
    if len(gk) > 1 and gsize <= max(DENSE_MAX, 4 * len(gk)):
        slot = np.full(gsize, -1, np.int64)  # keys are unique: order by scattering into the key space
        slot[gk] = np.arange(len(gk))
        return slot[slot >= 0]
    return np.argsort(gk, kind="stable")


def reorder_notes(notes: dict[int, str], reorder: np.ndarray) -> dict[int, str]:
    """Notes keyed by entry position, after the entries were put in the order `reorder`."""
    if not notes:
        return notes
    inv = np.empty_like(reorder)
    inv[reorder] = np.arange(len(reorder))
    return {int(inv[k]): v for k, v in notes.items()}


def check_fidelity(name: str) -> None:
    from xfid.schema import fidelity_rank

    try:
        fidelity_rank(name)
    except Exception as e:  # SchemaError
        raise EngineError(f"store holds an unknown fidelity label {name!r}: {e}") from None


def _flag_bad(v: Any) -> bool:
    return bool(v) and any(x.strip() in FLAG_NO_REFERENCE for x in str(v).split(","))


def _no_reference(flags: pa.ChunkedArray) -> np.ndarray:
    if flags.null_count == len(flags) or not any(
            _flag_bad(v) for c in dict_chunks(flags) for v in c.dictionary.to_pylist()):
        return np.zeros(len(flags), bool)  # no record carries a no-reference flag
    codes, names = raw_codes(flags)
    bad = np.array([_flag_bad(v) for v in names] + [False], dtype=bool)
    return bad[codes]  # code -1 (null) -> the trailing False


def _median_groups(value: np.ndarray, flagged: np.ndarray, starts: np.ndarray,
                   rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per contiguous group of `rows` (record indices): median (NaN ignored), the same without
    flagged records, count, representative (the record at the lower median), any flagged.

    Groups are sorted by size class: every group of size s is one (groups x s) matrix sorted
    along its rows (stable, NaN last), so ties keep the records' order.
    """
    m = len(rows)
    sizes = np.diff(np.r_[starts, m]).astype(np.int64)
    first = rows[starts] if m else rows[:0]
    val = value[first]
    fl = flagged[first]
    ok = np.where(fl, np.nan, val)
    rep = first.copy()
    cnt = sizes.copy()
    anyflag = fl.copy()
    for size in np.unique(sizes[sizes > 1]):
        g = np.flatnonzero(sizes == size)
        recs = rows[starts[g][:, None] + np.arange(size)]
        v = value[recs]
        o = np.argsort(v, axis=1, kind="stable")
        sv = np.take_along_axis(v, o, axis=1)
        c = (~np.isnan(sv)).sum(axis=1)
        lo, hi = np.maximum(c - 1, 0) // 2, np.minimum(c // 2, size - 1)
        r = np.arange(len(g))
        val[g] = np.where(c > 0, (sv[r, lo] + sv[r, hi]) / 2, np.nan)
        rep[g] = recs[r, o[r, lo]]
        cnt[g] = c
        fg = flagged[recs]
        anyflag[g] = fg.any(axis=1)
        ok[g] = val[g]
        hit = np.flatnonzero(anyflag[g])
        if len(hit):
            v2 = np.sort(np.where(fg[hit], np.nan, v[hit]), axis=1)
            c2 = (~np.isnan(v2)).sum(axis=1)
            r2 = np.arange(len(hit))
            lo2, hi2 = np.maximum(c2 - 1, 0) // 2, np.minimum(c2 // 2, size - 1)
            ok[g[hit]] = np.where(c2 > 0, (v2[r2, lo2] + v2[r2, hi2]) / 2, np.nan)
    return val, ok, cnt, rep, anyflag


class RawEntries(NamedTuple):
    """Entries of one raw op each (several may share a canonical key), in canonical key order."""

    value: np.ndarray
    ref_value: np.ndarray
    n: np.ndarray
    rep: np.ndarray
    flagged: np.ndarray
    key: np.ndarray  # the canonical (key, fidelity) code


def _merge_raw(raw: RawEntries, o_raw: np.ndarray, raw_names: list[str], mt: np.ndarray,
               mn: list[str]) -> tuple[RawEntries, dict[int, str]]:
    """Combine entries of several raw ops that map to one canonical key (sum or median)."""
    val, ok_val, cnt, rep, anyflag, efk = raw
    starts = run_starts(efk)
    sizes = np.diff(np.r_[starts, len(efk)])
    additive = np.array([m in ADDITIVE for m in mn], dtype=bool)[mt[rep]]
    out_v = val[starts].copy()
    out_ok = ok_val[starts].copy()
    notes: dict[int, str] = {}
    for gi in np.flatnonzero(sizes > 1):
        s, e = starts[gi], starts[gi] + sizes[gi]
        names = [raw_names[o_raw[r]] for r in rep[s:e]]
        if additive[s]:
            out_v[gi] = np.nansum(val[s:e]) if not np.isnan(val[s:e]).all() else np.nan
            out_ok[gi] = np.sum(ok_val[s:e])
            how = "sum"
        else:
            out_v[gi] = np.nanmedian(val[s:e]) if not np.isnan(val[s:e]).all() else np.nan
            out_ok[gi] = np.median(ok_val[s:e])
            how = "median"
        shown = ", ".join(names[:3]) + (f", ... ({len(names)} in all)" if len(names) > 3 else "")
        notes[int(gi)] = f"{how} of {len(names)} raw ops: {shown}"
    merged = RawEntries(out_v, out_ok, np.add.reduceat(cnt, starts), rep[starts],
                        np.logical_or.reduceat(anyflag, starts), efk[starts])
    return merged, notes
