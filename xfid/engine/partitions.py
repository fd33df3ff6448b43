"""Selection one fidelity partition at a time: peak memory follows the largest partition.

Runs, duplicates and op merges never cross fidelities, so `select` on each fidelity's files
and a merge of the entries gives exactly what `select` gives on the whole store; only the
chosen records' provenance columns are kept from each partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from xfid.config import Config
from xfid.engine.keys import combine
from xfid.engine.select import KEY_DIMS, Selected, load, order_entries, select
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
    parts: list[Selected] = []
    slims: list[pa.Table] = []
    groups = _groups(store) or [[]]
    for i, files in enumerate(groups):
        table = load(store, targets=targets, as_of=as_of, source_loc=source_loc, files=files)
        if not table.num_rows and (parts or i < len(groups) - 1):
            continue  # nothing left after the filters (an empty store still gets one empty part)
        s = select(table, config, run=run)
        slims.append(table.select(list(KEPT)).take(pa.array(s.rep, pa.int64())))
        s.table = None  # type: ignore[assignment]
        del table
        pa.default_memory_pool().release_unused()
        parts.append(s)
    if len(parts) == 1:
        s = parts[0]
        s.table, s.rep = slims[0], np.arange(len(s.rep), dtype=np.int64)
        return s
    return _merge(parts, pa.concat_tables(slims))


def _merge(parts: list[Selected], slim: pa.Table) -> Selected:
    """One Selected from partitions with disjoint fidelities, ordered as `select` orders entries."""
    dims = {k: sorted(set().union(*(p.dims[k] for p in parts))) for k in KEY_DIMS}
    fids = sorted(set().union(*(p.fidelities for p in parts)))
    codes: dict[str, list[np.ndarray]] = {k: [] for k in (*KEY_DIMS, "fid")}
    for p in parts:
        for k in KEY_DIMS:
            pos = {v: i for i, v in enumerate(dims[k])}
            lut = np.array([pos[v] for v in p.dims[k]] or [0], np.int64)
            codes[k].append(lut[p.codes[k]])
        codes["fid"].append(np.array([fids.index(f) for f in p.fidelities] or [0], np.int64)[p.codes["fid"]])
    code = {k: np.concatenate(v) for k, v in codes.items()}
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
    val, ok_val, cnt, anyflag = cat("value"), cat("ref_value"), cat("n"), cat("flagged")
    rep = np.arange(len(val), dtype=np.int64)
    notes: dict[int, str] = {}
    at = 0
    for p in parts:
        notes.update({at + k: v for k, v in p.notes.items()})
        at += len(p.value)
    cards = [len(dims[k]) for k in KEY_DIMS] + [len(fids)]
    gk, _ = combine([code[k] for k in (*KEY_DIMS, "fid")], cards)
    reorder = order_entries(gk, cards)
    if notes:
        inv = np.empty_like(reorder)
        inv[reorder] = np.arange(len(reorder))
        notes = {int(inv[k]): v for k, v in notes.items()}
    val, ok_val, cnt, rep, anyflag, gk = (a[reorder] for a in (val, ok_val, cnt, rep, anyflag, gk))
    code = {k: v[reorder] for k, v in code.items()}
    counts: dict[str, Any] = {}
    for p in parts:
        for k, v in p.counts.items():
            counts[k] = counts.get(k, 0) + v
    key = gk // len(fids) if fids else gk
    return Selected(slim, dims, fids, code, key, val, ok_val, cnt, rep, anyflag, notes,
                    _coverage([p.coverage for p in parts]), counts)


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
