"""Selection one fidelity partition at a time: peak memory follows the largest partition.

Runs, duplicates and op merges never cross fidelities, so `select` on each fidelity's files
and a merge of the entries gives exactly what `select` gives on the whole store; only the
chosen records' provenance columns are kept from each partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from xfid.config import Config
from xfid.engine.keys import combine
from xfid.engine.selection import (
    KEY_DIMS,
    AlignKeys,
    Selected,
    Selection,
    load,
    order_entries,
    reorder_notes,
    select,
)
from xfid.store import Store

KEPT = ("unit", "run", "source", "source_path", "source_loc", "config", "timestamp")
"""Columns of the chosen records that later stages read (at Selected.rep)."""
PER_ENTRY = ("value", "ref_value", "n", "flagged")
"""Per-entry arrays besides the codes, merged across partitions."""


@dataclass
class _Part:
    """One partition's selection, its arrays in one dict that the merge consumes array by array."""

    dims: dict[str, list[str]]
    fidelities: list[str]
    arrays: dict[str, np.ndarray]  # codes by dimension (and "fid"), PER_ENTRY, "key"
    notes: dict[int, str]
    coverage: Any
    counts: dict[str, Any]
    records: pa.Table  # the KEPT columns of the chosen records, one row per entry


def _groups(store: Store) -> list[list[Path]]:
    """The store's part files grouped by fidelity partition, in manifest order within each."""
    out: dict[str, list[Path]] = {}
    for f in store.part_files():
        out.setdefault(f.parent.name, []).append(f)
    return [out[k] for k in sorted(out)]


def _part(picked: Selection) -> _Part:
    """The chosen entries of one partition and only the KEPT columns of their records."""
    e = picked.entries
    records = picked.records
    slim = records.select([c for c in KEPT if c in records.column_names]).take(pa.array(e.rep, pa.int64()))
    if "source_loc" not in slim.column_names:
        slim = slim.append_column("source_loc", pa.nulls(slim.num_rows, pa.string()))
    arrays = {**e.codes, "value": e.value, "ref_value": picked.keys.ref_value, "n": e.n, "flagged": e.flagged,
              "key": picked.keys.key}
    return _Part(e.dims, e.fidelities, arrays, e.notes, e.coverage, e.counts, slim)


def select_store(store: Store, config: Config, *, targets: Sequence[str] | None = None, as_of: Any = None,
                 runs: Mapping[str, str] | None = None, source_loc: bool = True) -> Selection:
    """`select(load(store, ...), config, runs=runs)`, one fidelity partition at a time.

    The returned Selection's `records` hold the KEPT columns of the chosen records only (entry i
    at row `rep[i]`).
    """
    groups = _groups(store) or [[]]

    def read(files: list[Path]) -> pa.Table:
        return load(store, targets=targets, as_of=as_of, source_loc=source_loc, files=files, pad=False)

    def one(table: pa.Table) -> _Part | None:
        return _part(select(table, config, runs=runs)) if table.num_rows else None

    # one partition at a time, the next one read (Arrow, GIL released) while this one is selected
    found: list[_Part] = []
    with ThreadPoolExecutor(1) as io:
        nxt = io.submit(read, groups[0])
        for i in range(len(groups)):
            table = nxt.result()
            if i + 1 < len(groups):
                nxt = io.submit(read, groups[i + 1])
            part = one(table)
            del table
            if part is not None:
                found.append(part)
    if not found:  # nothing left after the filters: one empty selection
        empty = load(store, targets=targets, as_of=as_of, source_loc=True, files=[])
        return select(empty, config, runs=runs)._replace(records=empty.select(list(KEPT)))
    if len(found) == 1:
        return _single(found[0])
    return _merge(found)


def _single(p: _Part) -> Selection:
    a = p.arrays
    codes = {k: a[k] for k in (*KEY_DIMS, "fid")}
    entries = Selected(p.dims, p.fidelities, codes, a["value"], a["n"], np.arange(p.records.num_rows, dtype=np.int64),
                       a["flagged"], p.notes, p.coverage, p.counts)
    return Selection(entries, AlignKeys(a["key"], a["ref_value"]), p.records)


def _merge(parts: list[_Part]) -> Selection:
    """One Selection from partitions with disjoint fidelities, ordered as `select` orders entries.

    Each array is concatenated as it is taken out of its partition, then put in order in place
    of the concatenation: the peak is one field above the entries themselves.
    """
    dims = {k: sorted(set().union(*(p.dims[k] for p in parts))) for k in KEY_DIMS}
    fids = sorted(set().union(*(p.fidelities for p in parts)))
    for p in parts:
        del p.arrays["key"]  # recomputed below from the merged codes
    code: dict[str, np.ndarray] = {}
    for k in (*KEY_DIMS, "fid"):
        names = dims[k] if k != "fid" else fids
        pos = {v: i for i, v in enumerate(names)}
        chunks = []
        for p in parts:
            own = p.dims[k] if k != "fid" else p.fidelities
            lut = np.array([pos[v] for v in own] or [0], np.int32)
            chunks.append(lut[p.arrays.pop(k)])
        code[k] = np.concatenate(chunks)
        del chunks
    fields = {name: np.concatenate([p.arrays.pop(name) for p in parts]) for name in PER_ENTRY}
    notes: dict[int, str] = {}
    at = 0
    for p in parts:
        notes.update({at + k: v for k, v in p.notes.items()})
        at += p.records.num_rows
    cards = [len(dims[k]) for k in KEY_DIMS] + [len(fids)]
    gk, _ = combine([code[k] for k in (*KEY_DIMS, "fid")], cards)
    reorder = order_entries(gk, cards)
    gk = gk[reorder]
    notes = reorder_notes(notes, reorder)
    for d in (code, fields):
        for k in list(d):
            d[k] = d[k][reorder]  # the unordered array is freed as it is replaced
    counts: dict[str, Any] = {}
    for p in parts:
        for k, v in p.counts.items():
            counts[k] = counts.get(k, 0) + v
    key = gk // len(fids) if fids else gk
    records = pa.concat_tables([p.records for p in parts])
    entries = Selected(dims, fids, code, fields["value"], fields["n"], reorder, fields["flagged"], notes,
                       _coverage([p.coverage for p in parts]), counts)
    return Selection(entries, AlignKeys(key, fields["ref_value"]), records)


def _coverage(frames: list[Any]) -> Any:
    """Coverage tables of several partitions: records of the same (source, raw op) summed."""
    import pandas as pd

    full = [f for f in frames if len(f)]
    if len(full) <= 1:
        return full[0] if full else frames[0]
    cov = pd.concat(full, ignore_index=True)
    keys = [c for c in cov.columns if c != "records"]
    cov = cov.groupby(keys, sort=False, dropna=False, as_index=False)["records"].sum()[list(frames[0].columns)]
    return cov.sort_values(["source", "matched", "raw_op"], kind="stable").reset_index(drop=True)
