"""`correlate()`: store + config -> Correlation (rows, comparisons, discrepancies, coverage)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from xfid.config import DEFAULT_BOUND_TOLERANCE, Config
from xfid.engine.aggregate import Aggregates, with_violation_ids
from xfid.engine.align import Aligner
from xfid.engine.contract import Correlation
from xfid.engine.keys import raw_codes_at
from xfid.engine.mismatch import MismatchChecker
from xfid.engine.pairrows import Pair, PairRows
from xfid.engine.pairs import parse_as_of, parse_run, resolve_pairs
from xfid.engine.partitions import select_store
from xfid.engine.rows import Packer, discrepancies, entry_provenance, rows_frame
from xfid.engine.scopes import DERIVED_UNITS, EntryScope, entry_scopes
from xfid.engine.selection import ADDITIVE
from xfid.engine.stats import (
    BOOTSTRAP_EXACT_MAX_N,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
)
from xfid.store import Store

THREADS = min(2, os.cpu_count() or 1)
"""Threads sharing the rows frame and the per-pair aggregates."""


def engine_settings(config: Config) -> dict[str, Any]:
    """Engine settings from `[settings]` with their defaults."""
    s = config.settings
    return {
        "bound_tolerance": float(s.get("bound_tolerance", DEFAULT_BOUND_TOLERANCE)),
        "roofline_tolerance": str(s.get("roofline_tolerance", "bound")),
        "roofline_min_efficiency": s.get("roofline_min_efficiency"),
        "bound_fidelities": list(s.get("bound_fidelities", ["roofline"])),
        "value_matches": list(s.get("value_matches", ["median", "mean"])),
        "bootstrap_resamples": int(s.get("bootstrap_resamples", BOOTSTRAP_RESAMPLES)),
        "bootstrap_seed": int(s.get("bootstrap_seed", BOOTSTRAP_SEED)),
        "bootstrap_exact_max_n": int(s.get("bootstrap_exact_max_n", BOOTSTRAP_EXACT_MAX_N)),
    }


def correlate(store: Store, config: Config, *, run: str | Mapping[str, str] | Sequence[str] | None = None,
              as_of: Any = None, targets: Iterable[str] | None = None, pairs: Iterable[Any] | None = None,
              include_missing: bool = False, kendall: bool = True, bootstrap: bool = True,
              fingerprints: str = "all", provenance: bool = True,
              exclude_keys: Iterable[Sequence[str]] | None = None) -> Correlation:
    """Align the fidelities in `store` and compute errors, aggregates and discrepancies.

    Args:
        store: the store to read.
        config: the effective configuration (targets, tolerances, op maps, pairs, settings).
        run: prefer this run (`"R"`, or `{"archmodel": "R"}` / `["archmodel=R"]`) over the latest.
        as_of: ignore records newer than this date (whole day) or date-time.
        targets: only these targets.
        pairs: `"cand->ref"` strings (default: `[[compare]]`, else pairs.DEFAULT_PAIRS).
        include_missing: list missing_reference rows among the discrepancies too.
        kendall / bootstrap: compute Kendall tau and the bootstrap CIs (both on by default).
        fingerprints: "all" rows, or only "discrepancies" other than missing_reference (faster on
            huge stores; None elsewhere).
        provenance: read source_loc for every row (False leaves the *_source_loc columns None).
        exclude_keys: keys (target, workload, op, metric, stat, candidate, reference) whose rows
            stay in the rows but leave the comparisons (the statistics): the tracker's issues
            marked invalid (the data is wrong). Recorded in `settings["excluded_keys"]`.

    Returns:
        A Correlation with the contract columns (xfid.engine.contract) plus rows.ROW_EXTRA.

    Raises:
        EngineError, ConfigError: a malformed pair/run/date or an unknown target.
    """
    targets = list(targets or [])
    for t in targets:
        if t not in config.targets:
            config.target(t)  # raises a ConfigError listing the configured targets
    settings = engine_settings(config)
    excluded = sorted({tuple(str(x or "") for x in k) for k in exclude_keys or ()})
    if excluded:
        settings["excluded_keys"] = [list(k) for k in excluded]
    prefer = parse_run(run)
    when = parse_as_of(as_of)
    sel, keys, records = select_store(store, config, targets=targets or None, run=prefer, source_loc=provenance,
                                      as_of=when.to_pydatetime() if when is not None else None)
    pair_list = resolve_pairs(config, pairs, sel.fidelities)
    plans: dict[Any, Any] = {}  # the chosen records' split by chunk, shared by every column read at them
    units, unit_names = _entry_units(records, sel.rep, plans)
    prov = entry_provenance(records, sel.rep, provenance, plans)
    aligner = Aligner(sel, keys, config, settings, units, unit_names,
                      MismatchChecker(records, config, sel.rep, plans),
                      _entry_scope(sel, records, units, unit_names, prov, plans))
    # everything later works on entries: let the records table go (the largest allocation)
    del records, keys, units, plans
    pa.default_memory_pool().release_unused()
    pair_info = []
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
            for i, p in enumerate(pair_list):
                info = _pair_info(p, settings)
                if i in pending:
                    pr = aligner.align(pending.pop(i))
                    packer.place(i, pr)
                    info.update(pr.counts)
                    placed.append((i, pr))
                    agg.add(pr)
                else:
                    info["skipped"] = "a fidelity of the pair has no records"
                pair_info.append(info)
        finally:
            agg.close()
        # what only the alignment needed: the per-fidelity sides, keys, reference values, units
        del aligner, pending
        packed = packer.finish(placed)
        rows = rows_frame(sel, [pr for _, pr in placed], packed, prov, fingerprints, unit_names)
        agg.work(wait=False)
        if fut:
            fut.result()
    finally:
        if pool:
            pool.shutdown()
    comparisons = agg.result()
    disc = discrepancies(rows, include_missing)
    comparisons = with_violation_ids(comparisons, disc)
    out_settings = result_settings(config, settings, prefer=prefer, when=when,
                                   targets=targets or sorted(sel.dims["target"]), pairs=pair_list,
                                   pair_info=pair_info, counts=sel.counts, kendall=kendall, bootstrap=bootstrap,
                                   fingerprints=fingerprints, provenance=provenance,
                                   clock_targets=sel.dims["target"])
    sources = result_sources(store)
    cov = sel.coverage
    return Correlation(rows, comparisons, disc, cov, sources, config.hash(), out_settings)


def result_settings(config: Config, settings: dict[str, Any], *, prefer: Any, when: Any, targets: list[str],
                    pairs: Sequence[Pair], pair_info: list[dict[str, Any]], counts: dict[str, Any],
                    kendall: bool, bootstrap: bool, fingerprints: str, provenance: bool,
                    clock_targets: Iterable[str]) -> dict[str, Any]:
    """`Correlation.settings`: what a result was computed with (both engines build it here);
    `clock_hz` names the configured clocks of `clock_targets` when a pair converts cycles."""
    clocks = {t: config.targets[t].clock_hz for t in clock_targets if t in config.targets}
    return {
        **settings, "run": prefer, "as_of": when.isoformat() if when is not None else None,
        "targets": targets, "pairs": pair_info,
        "clock_hz": {t: c for t, c in clocks.items() if any(p.convert for p in pairs)},
        "counts": counts, "additive_metrics": sorted(ADDITIVE), "op_map_rules": len(config.op_maps),
        "kendall": kendall, "bootstrap": bootstrap, "fingerprints": fingerprints, "provenance": provenance,
        "ci_method": (f"percentile bootstrap, {settings['bootstrap_resamples']} resamples, seed "
                      f"{settings['bootstrap_seed']}, exact up to n={settings['bootstrap_exact_max_n']}, "
                      "normal approximation of the bootstrap above") if bootstrap else None,
    }


def result_sources(store: Store) -> list[dict[str, Any]]:
    """`Correlation.sources`: every source of the store, as a result names it."""
    return [{"source_id": s["source_id"], "path": s["path"], "adapter": s["adapter"],
             "content_hash": s["content_hash"]} for s in store.sources()]


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


def _pair_info(p: Pair, settings: dict[str, Any]) -> dict[str, Any]:
    """What `settings.pairs` says of a pair before its counts are added."""
    bounds = p.bounds or (settings["roofline_tolerance"] if p.candidate in settings["bound_fidelities"] else None)
    return {"candidate": p.candidate, "reference": p.reference, "origin": p.origin, "convert": p.convert,
            "bounds": bounds}
