"""`correlate()`: store + config -> Correlation (rows, comparisons, discrepancies, coverage)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
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
from xfid.engine.result import Aligned, Selection, Start, begin, engine_settings, finish
from xfid.engine.rows import Packer, entry_provenance, rows_frame
from xfid.engine.scopes import DERIVED_UNITS, EntryScope, entry_scopes
from xfid.store import Store

__all__ = ["THREADS", "aggregate", "align", "correlate", "engine_settings", "select"]

THREADS = min(2, os.cpu_count() or 1)
"""Threads sharing the rows frame and the per-pair aggregates."""


def correlate(store: Store, config: Config, request: Request | None = None, **fields: Any) -> Correlation:
    """Align the fidelities in `store` and compute errors, aggregates and discrepancies.

    The local engine's steps (select -> align -> aggregate -> finish, xfid.engine.engines.Engine).

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
    with small_pages():
        start = begin(config, req)
        aligned = align(select(store, config, req, start))
        return finish(store, config, req, start, aligned, aggregate(aligned))


THP_DEFRAG = Path("/sys/kernel/mm/transparent_hugepage/defrag")
"""Linux's setting for what a fault in a region advised for huge pages does when none is free."""


def stalls_on_huge_pages(defrag: Path = THP_DEFRAG) -> bool:
    """Whether the kernel compacts memory synchronously when a region advised for huge pages
    (madvise MADV_HUGEPAGE) first faults and no huge page is free: transparent huge pages'
    defrag setting `madvise` or `defer+madvise` (the chosen one is in brackets)."""
    try:
        text = defrag.read_text()
    except OSError:
        return False
    chosen = text[text.find("[") + 1:text.find("]")] if "[" in text else ""
    return chosen in ("madvise", "defer+madvise")


def _hugepage_setter() -> Any:
    """numpy's switch for its huge-page advice on new arrays (returns the previous setting), or None."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray  # type: ignore[no-redef]
    return getattr(multiarray, "_set_madvise_hugepage", None)


PR_SET_THP_DISABLE, PR_GET_THP_DISABLE = 41, 42
"""Linux prctl options: transparent huge pages off for the whole process (checked at each fault)."""


def _thp_switch() -> Any:
    """A function that turns transparent huge pages off (True) or back on (False) for this
    process and answers whether they were off before (prctl PR_SET/GET_THP_DISABLE), or None
    where there is no such switch (not Linux, no libc, a kernel before 3.15)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) < 0:
        return None

    def switch(off: bool) -> bool:
        was = prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) > 0
        prctl(PR_SET_THP_DISABLE, int(off), 0, 0, 0)
        return was

    return switch


@contextmanager
def small_pages() -> Iterator[None]:
    """The engine's memory in normal pages where huge pages would stall: numpy advises huge pages
    for every large array and Arrow's allocator (mimalloc) for its 1 GiB arenas, and where the
    kernel then compacts memory on the first touch of each (stalls_on_huge_pages) the engine's
    ~2 GB of new memory at 10M records cost seconds of CPU in the kernel (docs/scale.md, "The
    local engine, measured 2026-12-07, third pass" and "fourth pass"). Transparent huge pages
    are turned off for the process (prctl) and numpy's advice with them; both are restored
    afterwards. A process that had them off already is left as it was."""
    if not stalls_on_huge_pages():
        yield
        return
    setter, switch = _hugepage_setter(), _thp_switch()
    was = setter(False) if setter is not None else None
    thp_was_off = switch(True) if switch is not None else True
    try:
        yield
    finally:
        if not thp_was_off:
            switch(False)
        if setter is not None:
            setter(was)


@dataclass
class Selected:
    """The local selection, ready to align: the entries (selection.Selected), the pairs, the
    aligner with what it read of the records, the provenance and unit names the rows need."""

    sel: Any
    pairs: list[Any]
    aligner: Aligner | None
    prov: Any
    unit_names: list[str]
    req: Request
    settings: dict[str, Any]


def select(store: Store, config: Config, req: Request, start: Start) -> Selected:
    """Read the chosen records and build the aligner; the records table is let go here (the
    largest allocation: everything later works on entries)."""
    sel, keys, records = select_store(store, config, targets=list(req.targets) or None, runs=start.runs,
                                      source_loc=req.provenance, as_of=start.as_of_datetime)
    pair_list = resolve_pairs(config, req.pairs, sel.fidelities)
    plans: dict[Any, Any] = {}  # the chosen records' split by chunk, shared by every column read at them
    units, unit_names = _entry_units(records, sel.rep, plans)
    prov = entry_provenance(records, sel.rep, req.provenance, plans)
    aligner = Aligner(sel, keys, config, start.settings, units, unit_names,
                      MismatchChecker(records, config, sel.rep, plans),
                      _entry_scope(sel, records, units, unit_names, prov, plans))
    del records, keys, units, plans
    pa.default_memory_pool().release_unused()
    return Selected(sel, pair_list, aligner, prov, unit_names, req, start.settings)


@dataclass
class LocalAligned(Aligned):
    """Aligned rows plus the aggregates still being computed on a worker thread."""

    agg: Aggregates | None = None
    pool: ThreadPoolExecutor | None = None
    fut: Any = None


def align(s: Selected) -> LocalAligned:
    """Align every pair into one rows frame. The aggregates run on a worker thread, each pair as
    soon as it is aligned here (numpy releases the GIL in its sorts and gathers); aggregate()
    joins them."""
    sel, pair_list, aligner = s.sel, s.pairs, s.aligner
    assert aligner is not None, "a selection is aligned once"
    s.aligner = None
    counts: dict[int, dict[str, int]] = {}
    # the rows columns are allocated once; each pair is copied in as soon as it is aligned
    pending = aligner.plan(pair_list)
    packer = Packer([pending[i].size if i in pending else 0 for i in range(len(pair_list))], len(sel.value),
                    len(sel.dims["metric"]), len(s.unit_names))
    agg = Aggregates(sel, s.settings, s.req.kendall, s.req.bootstrap)
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
        rows = rows_frame(sel, [pr for _, pr in placed], packed, s.prov, s.req.fingerprints, s.unit_names)
    except BaseException:
        if pool:
            pool.shutdown()
        raise
    selected = Selection(sorted(sel.dims["target"]), sel.counts, sel.coverage, sel.dims["target"])
    return LocalAligned(selected, pair_list, counts, rows, agg=agg, pool=pool, fut=fut)


def aggregate(a: LocalAligned) -> pd.DataFrame:
    """The comparisons: join the worker thread's aggregates (this thread takes what is left)."""
    assert a.agg is not None
    try:
        a.agg.work(wait=False)
        if a.fut:
            a.fut.result()
    finally:
        if a.pool:
            a.pool.shutdown()
    agg, a.agg, a.pool, a.fut = a.agg, None, None, None
    return agg.result()


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
