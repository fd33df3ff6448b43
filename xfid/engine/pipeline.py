"""`correlate()`: store + config -> Correlation (rows, comparisons, discrepancies, coverage)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from xfid.config import Config
from xfid.engine.aggregate import Aggregates
from xfid.engine.align import Aligner
from xfid.engine.contract import Correlation
from xfid.engine.keys import raw_codes_at
from xfid.engine.mismatch import MismatchChecker
from xfid.engine.pairrows import PairRows
from xfid.engine.pairs import resolve_pairs
from xfid.engine.partitions import select_store
from xfid.engine.request import Request
from xfid.engine.result import Selection, begin, engine_settings, finish
from xfid.engine.rows import Packer, entry_provenance, rows_frame
from xfid.engine.scopes import DERIVED_UNITS, EntryScope, entry_scopes
from xfid.store import Store

__all__ = ["THREADS", "correlate", "engine_settings"]

THREADS = min(2, os.cpu_count() or 1)
"""Threads sharing the rows frame and the per-pair aggregates."""


def correlate(store: Store, config: Config, request: Request | None = None, **fields: Any) -> Correlation:
    """Align the fidelities in `store` and compute errors, aggregates and discrepancies.

    Args:
        store: the store to read.
        config: the effective configuration (targets, tolerances, op maps, pairs, settings).
        request: what to correlate (xfid.engine.request.Request), or a Request of `fields`
            (`runs=`, `as_of=`, `targets=`, `pairs=`, `include_missing=`, `kendall=`, ...).
            Its `track` and `keep` change nothing here: every row is returned.

    Returns:
        A Correlation with the contract columns (xfid.engine.contract) plus rows.ROW_EXTRA.

    Raises:
        EngineError, ConfigError: a malformed pair/run/date or an unknown target.
    """
    req = request if request is not None else Request.of(**fields)
    start = begin(config, req)
    settings = start.settings
    kendall, bootstrap, provenance = req.kendall, req.bootstrap, req.provenance
    sel, keys, records = select_store(store, config, targets=list(req.targets) or None, run=start.runs,
                                      source_loc=provenance, as_of=start.as_of_datetime)
    pair_list = resolve_pairs(config, req.pairs, sel.fidelities)
    plans: dict[Any, Any] = {}  # the chosen records' split by chunk, shared by every column read at them
    units, unit_names = _entry_units(records, sel.rep, plans)
    prov = entry_provenance(records, sel.rep, provenance, plans)
    aligner = Aligner(sel, keys, config, settings, units, unit_names,
                      MismatchChecker(records, config, sel.rep, plans),
                      _entry_scope(sel, records, units, unit_names, prov, plans))
    # everything later works on entries: let the records table go (the largest allocation)
    del records, keys, units, plans
    pa.default_memory_pool().release_unused()
    counts: dict[int, dict[str, int]] = {}
    # the rows columns are allocated once; each pair is copied in as soon as it is aligned
    pending = aligner.plan(pair_list)
    packer = Packer([pending[i].size if i in pending else 0 for i in range(len(pair_list))], len(sel.value),
                    len(sel.dims["metric"]), len(unit_names))

    # the aggregates run on a worker thread, each pair as soon as it is aligned here (numpy
    # releases the GIL in its sorts and gathers); this thread joins them after the rows frame
    agg = Aggregates(sel, settings, kendall, bootstrap)
    pool = ThreadPoolExecutor(THREADS - 1) if THREADS > 1 and pair_list else None
    fut = pool.submit(agg.work, True) if pool else None
    try:
        placed: list[tuple[int, PairRows]] = []
        try:
            for i in range(len(pair_list)):
                if i in pending:
                    pr = aligner.align(pending.pop(i))
                    packer.place(i, pr)
                    counts[i] = pr.counts
                    placed.append((i, pr))
                    agg.add(pr)
        finally:
            agg.close()
        # what only the alignment needed: the per-fidelity sides, keys, reference values, units
        del aligner, pending
        packed = packer.finish(placed)
        rows = rows_frame(sel, [pr for _, pr in placed], packed, prov, req.fingerprints, unit_names)
        agg.work(wait=False)
        if fut:
            fut.result()
    finally:
        if pool:
            pool.shutdown()
    selected = Selection(sorted(sel.dims["target"]), sel.counts, sel.coverage, sel.dims["target"])
    return finish(store, config, req, start, selected, pair_list, counts, rows, agg.result())


def _entry_scope(sel: Any, records: pa.Table, units: np.ndarray, unit_names: list[str], prov: Any,
                 plans: dict[Any, Any]) -> EntryScope:
    """Per entry: its scope (xfid.scope, from the chosen record) and its run code."""
    n = len(sel.value)
    parts: dict[str, tuple[np.ndarray, Any]] = {k: (sel.codes[k], sel.dims[k]) for k in ("metric", "stat", "op")}
    parts["unit"] = (units, unit_names)
    for k in ("source", "config"):
        parts[k] = (raw_codes_at(records.column(k), sel.rep, plans) if records.num_rows and n
                    else (np.zeros(n, np.int64), []))
    return EntryScope(entry_scopes(parts), np.asarray(prov.run.codes, np.int64))


def _entry_units(records: pa.Table, rep: np.ndarray, plans: dict[Any, Any]) -> tuple[np.ndarray, list[str]]:
    """Per entry, a code into the unit names; the last names are "" (null units) and the units
    conversions produce."""
    if records.num_rows:
        eu, unames = raw_codes_at(records.column("unit"), rep, plans)
    else:
        eu, unames = np.zeros(0, np.int32), []
    unit_names = [("" if u is None else u) for u in unames] + ["", "s", "cycles", *DERIVED_UNITS]
    units = np.where(eu < 0, len(unames), eu).astype(np.int16 if len(unit_names) < 1 << 15 else np.int64)
    return units, unit_names
