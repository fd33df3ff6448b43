"""Selection one fidelity partition at a time: peak memory follows the largest partition.

Runs, duplicates and op merges never cross fidelities, so `select` on each fidelity's files
and a merge of the entries gives exactly what `select` gives on the whole store; only the
chosen records' provenance columns are kept from each partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from xfid.config import Config
from xfid.engine.keys import combine
from xfid.engine.select import KEY_DIMS, Selected, load, order_entries, reorder_notes, select
from xfid.store import Store

KEPT = ("unit", "run", "source_path", "source_loc", "config", "timestamp")
"""Columns of the chosen records that later stages read (at Selected.rep)."""


def _groups(store: Store) -> list[list]:
    """The store's part files grouped by fidelity partition, in manifest order within each."""
    out: dict[str, list] = {}
    for f in store.part_files():
        out.setdefault(f.parent.name, []).append(f)
    return [out[k] for k in sorted(out)]


def select_store(store: Store, config: Config, *, targets: Sequence[str] | None = None, as_of: Any = None,
                 run: Mapping[str, str] | None = None, source_loc: bool = True) -> Selected:
    """`select(load(store, ...), config, run=run)`, one fidelity partition at a time.

    The returned Selected's `table` holds the KEPT columns of the chosen records only (entry i
    at row `rep[i]`).
    """
    groups = _groups(store) or [[]]

    def read(files: list) -> pa.Table:
        return load(store, targets=targets, as_of=as_of, source_loc=source_loc, files=files, pad=False)

    def one(table: pa.Table) -> tuple[Selected, pa.Table] | None:
        if not table.num_rows:
            return None
        s = select(table, config, run=run)
        slim = table.select([c for c in KEPT if c in table.column_names]).take(pa.array(s.rep, pa.int64()))
        if "source_loc" not in slim.column_names:
            slim = slim.append_column("source_loc", pa.nulls(slim.num_rows, pa.string()))
        s.table = None  # type: ignore[assignment]
        return s, slim

    # one partition at a time, the next one read (Arrow, GIL released) while this one is selected
    found = []
    with ThreadPoolExecutor(1) as io:
        nxt = io.submit(read, groups[0])
        for i in range(len(groups)):
            table = nxt.result()
            if i + 1 < len(groups):
                nxt = io.submit(read, groups[i + 1])
            d = one(table)
            del table
            if d is not None:
                found.append(d)
    if not found:  # nothing left after the filters: one empty selection
        empty = load(store, targets=targets, as_of=as_of, source_loc=True, files=[])
        s = select(empty, config, run=run)
        found = [(s, empty.select(list(KEPT)))]
    parts = [s for s, _ in found]
    slims = [t for _, t in found]
    if len(parts) == 1:
        s = parts[0]
        s.table, s.rep = slims[0], np.arange(len(s.rep), dtype=np.int64)
        return s
    return _merge(parts, pa.concat_tables(slims))


def _merge(parts: list[Selected], slim: pa.Table) -> Selected:
    """One Selected from partitions with disjoint fidelities, ordered as `select` orders entries.

    Each field is concatenated and the partitions' arrays dropped before the next, then put in
    order in place of the concatenation: the peak is one field above the entries themselves.
    """
    dims = {k: sorted(set().union(*(p.dims[k] for p in parts))) for k in KEY_DIMS}
    fids = sorted(set().union(*(p.fidelities for p in parts)))
    code: dict[str, np.ndarray] = {}
    for k in (*KEY_DIMS, "fid"):
        names = dims[k] if k != "fid" else fids
        pos = {v: i for i, v in enumerate(names)}
        chunks = []
        for p in parts:
            own = p.dims[k] if k != "fid" else p.fidelities
            lut = np.array([pos[v] for v in own] or [0], np.int32)
            chunks.append(lut[p.codes[k]])
            p.codes[k] = None  # type: ignore[assignment]
        code[k] = np.concatenate(chunks)
        del chunks
    fields: dict[str, np.ndarray] = {}
    for name in ("value", "ref_value", "n", "flagged"):
        fields[name] = np.concatenate([getattr(p, name) for p in parts])
        for p in parts:
            setattr(p, name, None)
    notes: dict[int, str] = {}
    at = 0
    for p in parts:
        notes.update({at + k: v for k, v in p.notes.items()})
        at += len(p.rep)
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
    return Selected(slim, dims, fids, code, key, fields["value"], fields["ref_value"], fields["n"], reorder,
                    fields["flagged"], notes, _coverage([p.coverage for p in parts]), counts)


def _coverage(frames: list) -> Any:
    """Coverage tables of several partitions: records of the same (source, raw op) summed."""
    import pandas as pd

    full = [f for f in frames if len(f)]
    if len(full) <= 1:
        return full[0] if full else frames[0]
    cov = pd.concat(full, ignore_index=True)
    keys = [c for c in cov.columns if c != "records"]
    cov = cov.groupby(keys, sort=False, dropna=False, as_index=False)["records"].sum()[list(frames[0].columns)]
    return cov.sort_values(["source", "matched", "raw_op"], kind="stable").reset_index(drop=True)
