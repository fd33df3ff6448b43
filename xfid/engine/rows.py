"""The rows frame (one row per aligned key and pair) and the discrepancies, from integer codes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from xfid.engine.fingerprints import fingerprint_many
from xfid.engine.keys import raw_codes_at
from xfid.engine.pairrows import MISSING, NOTE, OK, PairRows, code_texts, side_n
from xfid.engine.schema import (
    CANDIDATE,
    CODE,
    COUNT,
    ENTRY,
    FIDELITY,
    FINGERPRINT,
    KEY_FIELDS,
    NUMBER,
    REFERENCE,
    ROW_EXTRA_FIELDS,
    ROW_FIELDS,
    SIDES,
    TEXT,
    Field,
    names,
    row_field,
)
from xfid.engine.selection import Selected

ROW_EXTRA = names(ROW_EXTRA_FIELDS)
"""Added row columns (xfid.engine.schema.ROW_EXTRA_FIELDS)."""
KIND, SEVERITY, FINGERPRINT_FIELD = row_field(CODE, "kind"), row_field(NUMBER, "severity"), row_field(FINGERPRINT)
"""The row fields the discrepancies are chosen and sorted by."""


def discrepancies(rows: pd.DataFrame, include_missing: bool) -> pd.DataFrame:
    """Rows other than ok (and missing_reference unless included), by severity (descending),
    then fingerprint; NaN severities and null fingerprints last, ties in row order."""
    kind = rows[KIND].cat.codes.to_numpy() if len(rows) else np.zeros(0, np.int8)
    keep = kind != OK
    if not include_missing:
        keep &= kind != MISSING
    idx = np.flatnonzero(keep)
    sev = rows[SEVERITY].to_numpy(dtype=np.float64)[idx]
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
        fp = rows[FINGERPRINT_FIELD].to_numpy(dtype=object)[idx[sub]]
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


def _units_codes(units: np.ndarray, unit_names: list[str]) -> tuple[np.ndarray, list[str]]:
    """Unit codes -> codes into the distinct unit strings present, sorted (the rows' categories)."""
    uniq = sorted(set(unit_names))
    remap = np.array([uniq.index(u) for u in unit_names], np.int64)
    rc = remap[units] if len(units) else np.zeros(0, np.int64)
    present = np.bincount(rc, minlength=len(uniq)) > 0 if len(rc) else np.zeros(len(uniq), bool)
    new = np.cumsum(present) - 1
    return new[rc] if len(rc) else rc, [u for u, k in zip(uniq, present, strict=True) if k]


def entry_provenance(table: pa.Table, rep: np.ndarray, provenance: bool,
                     plans: dict[Any, Any] | None = None) -> Provenance:
    """What the rows need from the records table, read at the chosen records `rep` only (the
    table itself can be dropped afterwards); source_loc only with `provenance`."""
    run, path, config = (_entry_text(table, k, rep, plans) for k in ("run", "source_path", "config"))
    loc = table.column("source_loc").take(pa.array(rep)).combine_chunks() if provenance and len(rep) else None
    return Provenance(run, path, config, loc)


PACKED = ("cand", "ref", *dict.fromkeys(f.source.name for f in (*ROW_FIELDS, *ROW_EXTRA_FIELDS)
                                        if f.source and f.source.kind in (NUMBER, CODE) and f.source.name != NOTE))
"""PairRows arrays that Packer keeps in one column each over all pairs: the entry indices of both
sides and every array a row field is built from (xfid.engine.schema's NUMBER and CODE sources)."""


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
        `note_texts` (object array) and the notes' codes into it (under NOTE)."""
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
        out[NOTE] = ids
        out["pair"] = np.repeat(np.arange(len(placed), dtype=np.int16), sizes)
        return out


def rows_frame(sel: Selected, results: list[PairRows], packed: dict[str, Any], prov: Provenance,
               fingerprints: str, unit_names: list[str] | None = None) -> pd.DataFrame:
    """The rows frame (ROW_COLUMNS + ROW_EXTRA) of the packed pair rows (Packer.finish()): each
    field built from its declared source (xfid.engine.schema.Source); texts as Categoricals over
    the selection's codes or the code lists (but the notes and source locations, free texts)."""
    fields = (*ROW_FIELDS, *ROW_EXTRA_FIELDS)
    if not results:
        return pd.DataFrame({f.name: pd.Series(dtype=object) for f in fields})
    P = packed
    side = dict(zip(SIDES, (P["cand"], P["ref"]), strict=True))  # entry index per row, -1: missing
    c, dims = sel.codes, sel.dims
    fids = sorted({r.pair.candidate for r in results} | {r.pair.reference for r in results})
    fid_code = {s: np.array([fids.index(getattr(r.pair, s)) for r in results], np.int8)[P["pair"]] for s in SIDES}
    unit_codes, unit_cats = _units_codes(P["unit"], unit_names or [])
    texts = code_texts(dims["metric"], unit_cats, P["note_texts"])
    codes = {**P, "metric": _small(P["metric"], len(dims["metric"])), "unit": unit_codes}
    m = len(side[CANDIDATE])
    nones = np.full(m, None, dtype=object)  # shared by the all-None columns (copy-on-write frames)
    ent_texts: dict[str, Any] = {}  # per entry text without categories, its strings (shared by both sides)

    def column(f: Field) -> Any:
        s = f.source
        assert s is not None, f.name
        if s.kind == NUMBER:
            return P[s.name]
        if s.kind == CODE:  # a Categorical over its list; the notes (free texts) as strings
            t = texts[s.name]
            if s.name == NOTE:
                return pd.Series(np.asarray(t, dtype=object)[codes[s.name]], dtype=object, copy=False)
            return _cat(codes[s.name], t)
        if s.kind == ENTRY:
            return _cat(_small(c[s.name], len(dims[s.name]))[side[CANDIDATE]], dims[s.name])
        if s.kind == FIDELITY:
            return _cat(fid_code[s.side], fids)
        if s.kind == COUNT:
            n, missing = side_n(sel.n, side[s.side])
            return pd.arrays.IntegerArray(n, missing) if s.side == REFERENCE else sel.n[side[s.side]]
        if s.kind == TEXT:
            text = getattr(prov, s.name)
            if f.category:
                return _side_cat(text, side[s.side])
            if s.name not in ent_texts:
                ent_texts[s.name] = None if text is None else text.to_numpy(zero_copy_only=False)
            return _locs(ent_texts[s.name], side[s.side], nones)
        if s.kind == FINGERPRINT:
            return _fingerprints(sel, P, fids, fid_code, fingerprints, nones)
        raise AssertionError(f"{f.name}: unknown source {s}")

    return pd.DataFrame({f.name: column(f) for f in fields}, copy=False)


def _fingerprints(sel: Selected, P: dict[str, Any], fids: list[str], fid_code: dict[str, np.ndarray],
                  fingerprints: str, nones: np.ndarray) -> pd.Series:
    """Each row's fingerprint: of every row (`fingerprints` "all") or of the discrepancies other
    than missing_reference only (None for the others)."""
    kind, cand = P["kind"], P["cand"]
    want = np.flatnonzero(np.ones(len(kind), bool) if fingerprints == "all" else (kind != OK) & (kind != MISSING))
    if not len(want):
        return pd.Series(nones, dtype=object, copy=False)
    c, dims, e = sel.codes, sel.dims, cand[want]
    # FINGERPRINT_FIELDS' order: the key (the row's own metric, which a conversion may change from
    # its candidate entry's), then both sides' fidelities
    parts = [*(dims[k] for k in KEY_FIELDS), *(fids for _ in SIDES)]
    codes = [*(P[k][want] if k == "metric" else c[k][e] for k in KEY_FIELDS), *(fid_code[s][want] for s in SIDES)]
    fp = np.full(len(kind), None, dtype=object)
    fp[want] = fingerprint_many(parts, codes)
    return pd.Series(fp, dtype=object, copy=False)
