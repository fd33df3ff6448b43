"""The rows frame (one row per aligned key and pair) and the discrepancies, from integer codes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from xfid.engine.contract import ROW_COLUMNS
from xfid.engine.fingerprints import fingerprint_many
from xfid.engine.keys import raw_codes_at
from xfid.engine.pairrows import KINDS, MISSING, OK, PairRows
from xfid.engine.schema import ROW_EXTRA_FIELDS, names
from xfid.engine.scopes import SCOPE_NAMES
from xfid.engine.selection import Selected

ROW_EXTRA = names(ROW_EXTRA_FIELDS)
"""Added row columns (xfid.engine.schema.ROW_EXTRA_FIELDS)."""


def discrepancies(rows: pd.DataFrame, include_missing: bool) -> pd.DataFrame:
    """Rows other than ok (and missing_reference unless included), by severity (descending),
    then fingerprint; NaN severities and null fingerprints last, ties in row order."""
    kind = rows["kind"].cat.codes.to_numpy() if len(rows) else np.zeros(0, np.int8)
    keep = kind != KINDS.index("ok")
    if not include_missing:
        keep &= kind != MISSING
    idx = np.flatnonzero(keep)
    sev = rows["severity"].to_numpy(dtype=np.float64)[idx]
    key = -np.nan_to_num(sev, nan=0.0)
    nan = np.isnan(sev)
    order = np.lexsort((key, nan))  # severity descending, NaN last; ties in row order
    ks, ns = key[order], nan[order]
    tie = np.r_[False, (ks[1:] == ks[:-1]) & (ns[1:] == ns[:-1])]
    if tie.any():  # only rows of equal severity need their fingerprints compared
        starts = np.flatnonzero(~tie)
        gid = np.cumsum(~tie) - 1
        size = np.diff(np.r_[starts, len(order)])
        pos = np.flatnonzero(size[gid] > 1)
        sub = order[pos]
        fp = rows["fingerprint"].to_numpy(dtype=object)[idx[sub]]
        null_fp = pd.isna(fp)
        fps = np.where(null_fp, "", fp).astype(str)
        order[pos] = sub[np.lexsort((fps, null_fp, gid[pos]))]
    return rows.take(idx[order]).reset_index(drop=True)


def _cat(codes: np.ndarray, names: Sequence[Any] | np.ndarray) -> pd.Categorical:
    # codes are built in range by construction: skip pandas' validation passes
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(names), dtype=object), validate=False)


class EntryText(NamedTuple):
    """A text column of the chosen records, per entry: a category code (-1 null) and the categories."""

    codes: np.ndarray
    categories: np.ndarray


class Provenance(NamedTuple):
    """What the rows need from the records table, read at the chosen records only."""

    run: EntryText
    source_path: EntryText
    config: EntryText
    source_loc: pa.Array | None  # one string per entry (None without provenance)


def _entry_text(table: pa.Table, name: str, rep: np.ndarray, plans: dict[Any, Any] | None = None) -> EntryText:
    """Per entry (record `rep`): the category code of a dictionary column (-1 null), categories."""
    if not table.num_rows:
        return EntryText(np.full(len(rep), -1, np.int64), np.array([], object))
    codes, names = raw_codes_at(table.column(name), rep, plans)
    uniq = [("" if v is None else v) for v in names]
    # dictionaries from several files may repeat a value: map through unique categories
    cats, inv = np.unique(np.array(uniq, dtype=object), return_inverse=True) if uniq else (np.array([], object), np.zeros(0, np.int64))
    inv = np.append(inv.reshape(-1), -1)  # code -1 (null) -> -1
    return EntryText(_small(inv[codes] if len(rep) else np.zeros(0, np.int64), len(cats)), cats)


def _small(codes: np.ndarray, n: int) -> np.ndarray:
    """Codes (-1..n-1) in the smallest signed dtype: random gathers from them stay in cache."""
    dt = np.int8 if n < 1 << 7 else np.int16 if n < 1 << 15 else np.int32
    return codes.astype(dt, copy=False)


def _side_cat(text: EntryText, idx: np.ndarray) -> pd.Categorical:
    """Categorical of the entries' texts at entry indices `idx` (-1: missing)."""
    if not len(text.codes):
        return _cat(np.full(len(idx), -1, np.int8), text.categories)
    c = text.codes[np.maximum(idx, 0)]
    c[idx < 0] = -1
    return _cat(c, text.categories)


def _locs(ent_loc: np.ndarray | None, idx: np.ndarray, nones: np.ndarray) -> Any:
    """source_loc per row from the entries' strings (`ent_loc`, one str object per entry, shared
    by every row and both sides that point at the entry); None where idx < 0."""
    if ent_loc is None or not len(idx):
        return pd.Series(nones, dtype=object, copy=False)
    out = ent_loc[idx]
    out[idx < 0] = None
    return pd.Series(out, dtype=object, copy=False)


def _units_cat(units: np.ndarray, unit_names: list[str]) -> pd.Categorical:
    """Unit codes -> a Categorical whose categories are the distinct unit strings present, sorted."""
    uniq = sorted(set(unit_names))
    remap = np.array([uniq.index(u) for u in unit_names], np.int64)
    rc = remap[units] if len(units) else np.zeros(0, np.int64)
    present = np.bincount(rc, minlength=len(uniq)) > 0 if len(rc) else np.zeros(len(uniq), bool)
    new = np.cumsum(present) - 1
    return _cat(new[rc] if len(rc) else rc, [u for u, k in zip(uniq, present, strict=True) if k])


def entry_provenance(table: pa.Table, rep: np.ndarray, provenance: bool,
                     plans: dict[Any, Any] | None = None) -> Provenance:
    """What the rows need from the records table, read at the chosen records `rep` only (the
    table itself can be dropped afterwards); source_loc only with `provenance`."""
    run, path, config = (_entry_text(table, k, rep, plans) for k in ("run", "source_path", "config"))
    loc = table.column("source_loc").take(pa.array(rep)).combine_chunks() if provenance and len(rep) else None
    return Provenance(run, path, config, loc)


PACKED = ("cand", "ref", "metric", "unit", "cand_value", "ref_value", "rel", "log_ratio", "tol", "tol_abs",
          "within", "kind", "severity", "efficiency", "factor", "scope")
"""PairRows arrays that Packer keeps in one column each over all pairs."""


class Packer:
    """The rows columns, allocated once for every pair: each aligned pair is copied into its
    slice as soon as it is done and its fields become views of it, so the per-pair arrays are
    freed pair by pair (no second copy of the rows in memory, no concatenation).

    Entry indices and metric/unit codes are narrowed on the way."""

    def __init__(self, sizes: list[int], n_entries: int, n_metrics: int, n_units: int):
        self.bounds = np.cumsum([0, *sizes])
        total = int(self.bounds[-1])
        entry = np.int32 if n_entries < 1 << 31 else np.int64
        dtypes = {"cand": entry, "ref": entry, "metric": np.int16 if n_metrics < 1 << 15 else np.int64,
                  "unit": np.int16 if n_units < 1 << 15 else np.int64, "within": np.bool_, "kind": np.int8,
                  "scope": np.int8}
        self.out: dict[str, Any] = {k: np.empty(total, dtypes.get(k, np.float64)) for k in PACKED}

    def place(self, i: int, r: PairRows) -> None:
        """Copy pair number i's rows into its slice; its fields become views of the columns."""
        a, b = int(self.bounds[i]), int(self.bounds[i + 1])
        if len(r.cand) != b - a:
            raise AssertionError(f"pair {r.pair.label}: {len(r.cand)} rows, {b - a} planned")
        for k in PACKED:
            view = self.out[k][a:b]
            view[...] = getattr(r, k)
            setattr(r, k, view)

    def finish(self, placed: list[tuple[int, PairRows]]) -> dict[str, Any]:
        """The columns plus `pair` (number of the row's pair among the placed ones),
        `note_texts` (object array) and `note_ids` (codes into it)."""
        if not placed:
            return {}
        out = dict(self.out)  # a pair that was not placed has no rows: the columns are all placed rows
        texts: dict[str, int] = {}
        ids = np.empty(int(self.bounds[-1]), np.int32)
        sizes = []
        for i, r in placed:
            a, b = int(self.bounds[i]), int(self.bounds[i + 1])
            lut = np.array([texts.setdefault(t, len(texts)) for t in r.note.texts], np.int32)
            ids[a:b] = lut[r.note.ids]
            sizes.append(b - a)
        out["note_texts"] = np.array(list(texts), dtype=object)
        out["note_ids"] = ids
        out["pair"] = np.repeat(np.arange(len(placed), dtype=np.int16), sizes)
        return out


def rows_frame(sel: Selected, results: list[PairRows], packed: dict[str, Any], prov: Provenance,
               fingerprints: str, unit_names: list[str] | None = None) -> pd.DataFrame:
    """The rows frame (ROW_COLUMNS + ROW_EXTRA) of the packed pair rows (Packer.finish())."""
    if not results:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in (*ROW_COLUMNS, *ROW_EXTRA)})
    P = packed
    cand, ref = P["cand"], P["ref"]
    c = sel.codes
    fids = sorted({r.pair.candidate for r in results} | {r.pair.reference for r in results})
    pair_code = P["pair"]
    cand_code = np.array([fids.index(r.pair.candidate) for r in results], np.int8)[pair_code]
    ref_code = np.array([fids.index(r.pair.reference) for r in results], np.int8)[pair_code]
    kind = P["kind"]
    no_ref = ref < 0
    ref_n = pd.arrays.IntegerArray(np.where(no_ref, 0, sel.n[np.maximum(ref, 0)]).astype(np.int64, copy=False),
                                   no_ref)
    m = len(cand)
    metric = P["metric"]
    ent_loc = None if prov.source_loc is None else prov.source_loc.to_numpy(zero_copy_only=False)
    sc = {k: _small(c[k], len(sel.dims[k])) for k in ("target", "workload", "op", "stat")}
    nones = np.full(m, None, dtype=object)  # shared by the all-None columns (copy-on-write frames)
    df = pd.DataFrame({
        "fingerprint": pd.Series(nones, dtype=object, copy=False),
        "target": _cat(sc["target"][cand], sel.dims["target"]),
        "workload": _cat(sc["workload"][cand], sel.dims["workload"]),
        "op": _cat(sc["op"][cand], sel.dims["op"]),
        "metric": _cat(_small(metric, len(sel.dims["metric"])), sel.dims["metric"]),
        "stat": _cat(sc["stat"][cand], sel.dims["stat"]),
        "candidate": _cat(cand_code, fids), "reference": _cat(ref_code, fids),
        "candidate_value": P["cand_value"], "reference_value": P["ref_value"],
        "unit": _units_cat(P["unit"], unit_names or []),
        "rel_error": P["rel"], "log_ratio": P["log_ratio"],
        "tolerance": P["tol"], "tolerance_abs": P["tol_abs"], "within": P["within"].astype(bool, copy=False),
        "kind": _cat(kind, KINDS), "severity": P["severity"],
        "candidate_n": sel.n[cand], "reference_n": ref_n,
        "candidate_run": _side_cat(prov.run, cand), "reference_run": _side_cat(prov.run, ref),
        "candidate_source_path": _side_cat(prov.source_path, cand),
        "candidate_source_loc": _locs(ent_loc, cand, nones),
        "reference_source_path": _side_cat(prov.source_path, ref),
        "reference_source_loc": _locs(ent_loc, ref, nones),
        "candidate_config": _side_cat(prov.config, cand), "reference_config": _side_cat(prov.config, ref),
        "note": pd.Series(P["note_texts"][P["note_ids"]], dtype=object, copy=False),
        "efficiency": P["efficiency"], "factor": P["factor"],
        "scope": _cat(P["scope"], SCOPE_NAMES),
    }, copy=False)
    want = np.flatnonzero(np.ones(m, bool) if fingerprints == "all" else (kind != OK) & (kind != MISSING))
    if len(want):
        e = cand[want]
        parts = [sel.dims["target"], sel.dims["workload"], sel.dims["op"], sel.dims["metric"], sel.dims["stat"], fids, fids]
        codes = [c["target"][e], c["workload"][e], c["op"][e], metric[want], c["stat"][e], cand_code[want], ref_code[want]]
        fp = np.full(m, None, dtype=object)
        fp[want] = fingerprint_many(parts, codes)
        df["fingerprint"] = pd.Series(fp, dtype=object, copy=False)
    return df
