"""`correlate()`: store + config -> Correlation (rows, comparisons, discrepancies, coverage)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from xfid.config import Config
from xfid.engine.align import MISSING, PairRows, align_pair, pair_size
from xfid.engine.contract import COMPARISON_COLUMNS, Correlation
from xfid.engine.keys import combine, raw_codes_at, run_starts
from xfid.engine.mismatch import MismatchChecker
from xfid.engine.pairs import parse_as_of, parse_run, resolve_pairs
from xfid.engine.rows import ROW_EXTRA, Packer, discrepancies, entry_provenance, rows_frame  # noqa: F401 (ROW_EXTRA re-exported)
from xfid.engine.partitions import select_store
from xfid.engine.select import ADDITIVE, Selected
from xfid.engine.stats import (
    BOOTSTRAP_EXACT_MAX_N,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    global_order,
    grouped_stats,
)
from xfid.store import Store

THREADS = min(2, os.cpu_count() or 1)
"""Worker threads for independent pairs and for the aggregates next to the rows frame."""



def engine_settings(config: Config) -> dict[str, Any]:
    """Engine settings from `[settings]` with their defaults."""
    s = config.settings
    return {
        "bound_tolerance": float(s.get("bound_tolerance", 0.02)),
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
              fingerprints: str = "all", provenance: bool = True) -> Correlation:
    """Align the fidelities in `store` and compute errors, aggregates and discrepancies.

    Args:
        store: the store to read.
        config: the effective configuration (targets, tolerances, op maps, pairs, settings).
        run: prefer this run (`"R"`, or `{"archmodel": "R"}` / `["archmodel=R"]`) over the latest.
        as_of: ignore records newer than this date (whole day) or date-time.
        targets: only these targets.
        pairs: `"cand->ref"` strings (default: `[[compare]]`, else the DESIGN.md defaults).
        include_missing: list missing_reference rows among the discrepancies too.
        kendall / bootstrap: compute Kendall tau and the bootstrap CIs (both on by default).
        fingerprints: "all" rows, or only "discrepancies" other than missing_reference (faster on
            huge stores; None elsewhere).
        provenance: read source_loc for every row (False leaves the *_source_loc columns None).

    Returns:
        A Correlation with the contract columns (xfid.engine.contract) plus ROW_EXTRA.

    Raises:
        EngineError, ConfigError: a malformed pair/run/date or an unknown target.
    """
    targets = list(targets or [])
    for t in targets:
        if t not in config.targets:
            config.target(t)  # raises a ConfigError listing the configured targets
    settings = engine_settings(config)
    prefer = parse_run(run)
    when = parse_as_of(as_of)
    sel = select_store(store, config, targets=targets or None, run=prefer, source_loc=provenance,
                       as_of=when.to_pydatetime() if when is not None else None)
    table = sel.table  # the chosen records' provenance columns (entry i at row sel.rep[i])
    pair_list = resolve_pairs(config, pairs, sel.fidelities)
    plans: dict = {}  # the chosen records' split by chunk, shared by every column read at them
    eu, unames = raw_codes_at(table.column("unit"), sel.rep, plans) if table.num_rows else (np.zeros(0, np.int32), [])
    # entry unit codes into unit_names; the last entries give null units "" and the converted units
    unit_names = [("" if u is None else u) for u in unames] + ["", "s", "cycles"]
    units = np.where(eu < 0, len(unames), eu).astype(np.int64)
    checker = MismatchChecker(table, config, sel.rep, plans)
    prov = entry_provenance(table, sel.rep, provenance, plans)
    # everything later works on entries: let the records table go (the largest allocation)
    sel.table = None  # type: ignore[assignment]
    del table
    pa.default_memory_pool().release_unused()
    results: list[PairRows] = []
    pair_info = []
    # the rows columns are allocated once; each pair is copied in as soon as it is aligned
    sizes = [pair_size(sel, p, config, units, unit_names) for p in pair_list]
    packer = Packer(sizes, len(sel.value), len(sel.dims["metric"]), len(unit_names))

    def one(i: int) -> PairRows | None:
        pr = align_pair(sel, pair_list[i], config, settings, units, checker, unit_names)
        if pr is not None:
            packer.place(i, pr)
        return pr

    # numpy releases the GIL in its sorts and gathers: pairs, and aggregates vs rows, overlap
    pool = ThreadPoolExecutor(THREADS) if THREADS > 1 and len(pair_list) > 1 else None
    aligned = (pool.map if pool else map)(one, range(len(pair_list)))
    placed = []
    for i, (p, pr) in enumerate(zip(pair_list, aligned, strict=True)):
        info = {"candidate": p.candidate, "reference": p.reference, "origin": p.origin,
                "convert": p.convert, "bounds": p.bounds if p.bounds else (
                    settings["roofline_tolerance"] if p.candidate in settings["bound_fidelities"] else None)}
        if pr is None:
            info["skipped"] = "a fidelity of the pair has no records"
        else:
            info.update(pr.counts)
            results.append(pr)
            placed.append((i, pr))
        pair_info.append(info)
    sel.cache.clear()  # the per-fidelity side arrays are no longer needed
    packed = packer.finish(placed)
    try:
        fut = pool.submit(_comparisons, sel, results, settings, kendall, bootstrap) if pool else None
        rows = rows_frame(sel, results, packed, prov, fingerprints, unit_names)
        comparisons = fut.result() if fut else _comparisons(sel, results, settings, kendall, bootstrap)
    finally:
        if pool:
            pool.shutdown()
    disc = discrepancies(rows, include_missing)
    clocks = {t: config.targets[t].clock_hz for t in sel.dims["target"] if t in config.targets}
    out_settings = {
        **settings, "run": prefer, "as_of": when.isoformat() if when is not None else None,
        "targets": targets or sorted(sel.dims["target"]), "pairs": pair_info,
        "clock_hz": {t: c for t, c in clocks.items() if any(p.convert for p in pair_list)},
        "counts": sel.counts, "additive_metrics": sorted(ADDITIVE), "op_map_rules": len(config.op_maps),
        "kendall": kendall, "bootstrap": bootstrap, "fingerprints": fingerprints, "provenance": provenance,
        "ci_method": (f"percentile bootstrap, {settings['bootstrap_resamples']} resamples, seed "
                      f"{settings['bootstrap_seed']}, exact up to n={settings['bootstrap_exact_max_n']}, "
                      "normal approximation of the bootstrap above") if bootstrap else None,
    }
    sources = [{"source_id": s["source_id"], "path": s["path"], "adapter": s["adapter"],
                "content_hash": s["content_hash"]} for s in store.sources()]
    cov = sel.coverage
    return Correlation(rows, comparisons, disc, cov, sources, config.hash(), out_settings)


class _EntryOrders:
    """Per fidelity, the order of its entries by value, computed once and shared by every pair:
    a pair's rows on one side are that fidelity's entries in increasing entry order."""

    def __init__(self, sel: Selected):
        self.sel = sel
        self.local = np.empty(len(sel.value), np.int64)  # entry -> index among its fidelity's entries
        self.members: dict[int, np.ndarray] = {}
        self.orders: dict[int, np.ndarray] = {}

    def _fid(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        if f not in self.orders:
            ent = np.flatnonzero(self.sel.codes["fid"] == f)
            self.local[ent] = np.arange(len(ent))
            self.members[f] = ent
            self.orders[f] = global_order(self.sel.value[ent])
        return self.members[f], self.orders[f]

    def rows_order(self, f: int, ent: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """An order sorting `vals`, where row i holds the value of entry ent[i] of fidelity f.

        Valid when every row's value is its entry's (no conversion) and each entry occurs once;
        otherwise the rows are sorted directly."""
        members, order = self._fid(f)
        if len(ent) and (ent >= 0).all() and np.array_equal(vals, self.sel.value[ent], equal_nan=True):
            pos = np.full(len(members), -1, np.int64)
            loc = self.local[ent]
            pos[loc] = np.arange(len(ent))
            if np.count_nonzero(pos >= 0) == len(ent):  # no entry twice
                o = pos[order]
                return o[o >= 0]
        return global_order(vals)


def _comparisons(sel: Selected, results: list[PairRows], settings: dict[str, Any], kendall: bool,
                 bootstrap: bool) -> pd.DataFrame:
    frames = []
    c = sel.codes
    # one order of each fidelity's values serves every pair's log cand / log ref (log is monotone)
    eo = _EntryOrders(sel)
    for r in results:
        ok = (r.kind != MISSING) & np.isfinite(r.rel) & np.isfinite(r.log_ratio)
        idx = np.flatnonzero(ok)
        if not len(idx):
            continue
        # the rows the aggregates use, gathered once for both levels (views when all are used)
        take = (lambda a: a) if len(idx) == len(ok) else (lambda a: a[idx])  # noqa: E731
        rel, lr, cv, rv, within = (take(a) for a in (r.rel, r.log_ratio, r.cand_value, r.ref_value, r.within))
        e = take(r.cand)
        t, m, s, w = c["target"][e], take(r.metric), c["stat"][e], c["workload"][e]
        cards = [len(sel.dims["target"]), len(sel.dims["metric"]), len(sel.dims["stat"]), len(sel.dims["workload"])]
        orders = (global_order(np.abs(rel)),
                  eo.rows_order(sel.fidelities.index(r.pair.candidate), e, cv),
                  eo.rows_order(sel.fidelities.index(r.pair.reference), take(r.ref), rv))
        logs = (np.log(cv), np.log(rv))
        for level in ("target", "workload"):
            parts = [t, m, s] + ([w] if level == "workload" else [])
            key, _ = combine(parts, cards[:len(parts)])
            if len(key) > 1 and bool(np.all(key[1:] >= key[:-1])):
                # rows come in key order: groups are contiguous
                first = run_starts(key)
                gid = np.zeros(len(key), np.int64)
                gid[first[1:]] = 1
                gid = np.cumsum(gid)
                nuniq = len(first)
            else:
                uniq, first, gid = np.unique(key, return_index=True, return_inverse=True)
                gid, nuniq = gid.reshape(-1), len(uniq)
            st = grouped_stats(gid, nuniq, rel, lr, cv, rv, within, kendall=kendall, bootstrap=bootstrap,
                               resamples=settings["bootstrap_resamples"], seed=settings["bootstrap_seed"],
                               exact_max_n=settings["bootstrap_exact_max_n"], orders=orders, logs=logs)
            f = pd.DataFrame({
                "target": [sel.dims["target"][x] for x in t[first]],
                "workload": [sel.dims["workload"][x] for x in w[first]] if level == "workload" else None,
                "candidate": r.pair.candidate, "reference": r.pair.reference,
                "metric": [sel.dims["metric"][x] for x in m[first]],
                "stat": [sel.dims["stat"][x] for x in s[first]],
                **{k: st[k] for k in ("n", "mape", "median_ape", "bias", "log_rmse", "pearson_log",
                                      "spearman", "kendall", "within_tolerance")},
            })
            ci_ok = (st["n"] >= 3) & np.isfinite(st["mape_ci_low"])
            f["mape_ci"] = [[float(a), float(b)] if k else None
                            for a, b, k in zip(st["mape_ci_low"], st["mape_ci_high"], ci_ok, strict=True)]
            f["bias_ci"] = [[float(a), float(b)] if k else None
                            for a, b, k in zip(st["bias_ci_low"], st["bias_ci_high"], ci_ok, strict=True)]
            frames.append(f)
    if not frames:
        return pd.DataFrame({k: pd.Series(dtype=object) for k in COMPARISON_COLUMNS})
    out = pd.concat(frames, ignore_index=True)
    out["_lvl"] = out["workload"].notna()
    out = out.sort_values(["_lvl", "target", "workload", "candidate", "reference", "metric", "stat"],
                          kind="stable", na_position="first").drop(columns="_lvl").reset_index(drop=True)
    out["workload"] = out["workload"].astype(object).where(out["workload"].notna(), None)
    return out[list(COMPARISON_COLUMNS)]
