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
from xfid.engine.align import KINDS, MISSING, OK, PairRows, align_pair
from xfid.engine.contract import COMPARISON_COLUMNS, ROW_COLUMNS, Correlation
from xfid.engine.fingerprint import fingerprints as batch_fingerprints
from xfid.engine.keys import combine, raw_codes_at, run_starts
from xfid.engine.mismatch import MismatchChecker
from xfid.engine.pairs import parse_as_of, parse_run, resolve_pairs
from xfid.engine.select import ADDITIVE, Selected, load, select
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

ROW_EXTRA = ("efficiency",)
"""Added row column: achieved fraction of a roofline bound (bound/ref for times, ref/bound for rates)."""


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
    table = load(store, targets=targets or None, as_of=when.to_pydatetime() if when is not None else None,
                 source_loc=provenance)
    sel = select(table, config, run=prefer)
    pair_list = resolve_pairs(config, pairs, sel.fidelities)
    plans: dict = {}  # the chosen records' split by chunk, shared by every column read at them
    eu, unames = raw_codes_at(table.column("unit"), sel.rep, plans) if table.num_rows else (np.zeros(0, np.int32), [])
    # entry unit codes into unit_names; the last entries give null units "" and the converted units
    unit_names = [("" if u is None else u) for u in unames] + ["", "s", "cycles"]
    units = np.where(eu < 0, len(unames), eu).astype(np.int64)
    checker = MismatchChecker(table, config, sel.rep, plans)
    results: list[PairRows] = []
    pair_info = []
    # numpy releases the GIL in its sorts and gathers: pairs, and aggregates vs rows, overlap
    pool = ThreadPoolExecutor(THREADS) if THREADS > 1 and len(pair_list) > 1 else None
    aligned = (pool.map if pool else map)(
        lambda p: align_pair(sel, p, config, settings, units, checker, unit_names), pair_list)
    for p, pr in zip(pair_list, aligned, strict=True):
        info = {"candidate": p.candidate, "reference": p.reference, "origin": p.origin,
                "convert": p.convert, "bounds": p.bounds if p.bounds else (
                    settings["roofline_tolerance"] if p.candidate in settings["bound_fidelities"] else None)}
        if pr is None:
            info["skipped"] = "a fidelity of the pair has no records"
        else:
            info.update(pr.counts)
            results.append(pr)
        pair_info.append(info)
    try:
        fut = pool.submit(_comparisons, sel, results, settings, kendall, bootstrap) if pool else None
        rows = _rows_frame(sel, results, table, fingerprints, provenance, unit_names, plans)
        comparisons = fut.result() if fut else _comparisons(sel, results, settings, kendall, bootstrap)
    finally:
        if pool:
            pool.shutdown()
    disc = _discrepancies(rows, include_missing)
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


def _discrepancies(rows: pd.DataFrame, include_missing: bool) -> pd.DataFrame:
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


def _cat(codes: np.ndarray, names: Sequence[Any]) -> pd.Categorical:
    # codes are built in range by construction: skip pandas' validation passes
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(names), dtype=object), validate=False)


def _entry_text(table: pa.Table, name: str, rep: np.ndarray, plans: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per entry (record `rep`): the category code of a dictionary column (-1 null), categories."""
    if not table.num_rows:
        return np.full(len(rep), -1, np.int64), np.array([], object)
    codes, names = raw_codes_at(table.column(name), rep, plans)
    uniq = [("" if v is None else v) for v in names]
    # dictionaries from several files may repeat a value: map through unique categories
    cats, inv = np.unique(np.array(uniq, dtype=object), return_inverse=True) if uniq else (np.array([], object), np.zeros(0, np.int64))
    inv = np.append(inv.reshape(-1), -1)  # code -1 (null) -> -1
    return _small(inv[codes] if len(rep) else np.zeros(0, np.int64), len(cats)), cats


def _small(codes: np.ndarray, n: int) -> np.ndarray:
    """Codes (-1..n-1) in the smallest signed dtype: random gathers from them stay in cache."""
    dt = np.int8 if n < 1 << 7 else np.int16 if n < 1 << 15 else np.int32
    return codes.astype(dt, copy=False)


def _side_cat(ent: np.ndarray, cats: np.ndarray, idx: np.ndarray) -> pd.Categorical:
    """Categorical of entry codes `ent` at entry indices `idx` (-1: missing)."""
    if not len(ent):
        return _cat(np.full(len(idx), -1, np.int8), cats)
    c = ent[np.maximum(idx, 0)]
    c[idx < 0] = -1
    return _cat(c, cats)


def _locs(ent_loc: pa.Array | None, idx: np.ndarray) -> Any:
    if ent_loc is None or not len(idx):
        return pd.Series(np.full(len(idx), None, dtype=object), dtype=object, copy=False)
    taken = pa.chunked_array([ent_loc.take(pa.array(np.maximum(idx, 0), mask=idx < 0))], ent_loc.type)
    return pd.Series(taken.to_pandas(), dtype=object) if len(idx) < 100_000 else taken.to_pandas()


def _units_cat(units: np.ndarray, unit_names: list[str]) -> pd.Categorical:
    """Unit codes -> a Categorical whose categories are the distinct unit strings present, sorted."""
    uniq = sorted(set(unit_names))
    remap = np.array([uniq.index(u) for u in unit_names], np.int64)
    rc = remap[units] if len(units) else np.zeros(0, np.int64)
    present = np.bincount(rc, minlength=len(uniq)) > 0 if len(rc) else np.zeros(len(uniq), bool)
    new = np.cumsum(present) - 1
    return _cat(new[rc] if len(rc) else rc, [u for u, k in zip(uniq, present, strict=True) if k])


def _rows_frame(sel: Selected, results: list[PairRows], table: pa.Table, fingerprints: str,
                provenance: bool = True, unit_names: list[str] | None = None,
                plans: dict | None = None) -> pd.DataFrame:
    if not results:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in (*ROW_COLUMNS, *ROW_EXTRA)})
    cat = lambda k: np.concatenate([getattr(r, k) for r in results])  # noqa: E731
    cand, ref = cat("cand"), cat("ref")
    c = sel.codes
    fids = sorted({r.pair.candidate for r in results} | {r.pair.reference for r in results})
    pair_code = np.repeat(np.arange(len(results)), [len(r.cand) for r in results])
    cand_code = np.array([fids.index(r.pair.candidate) for r in results])[pair_code]
    ref_code = np.array([fids.index(r.pair.reference) for r in results])[pair_code]
    kind = cat("kind")
    ref_n = pd.array(np.where(ref >= 0, sel.n[np.maximum(ref, 0)], 0), dtype="Int64")
    ref_n[ref < 0] = pd.NA
    m = len(cand)
    metric = cat("metric")
    text = {k: _entry_text(table, k, sel.rep, plans) for k in ("run", "source_path", "config")}
    ent_loc = None
    if provenance and len(sel.rep):
        ent_loc = table.column("source_loc").take(pa.array(sel.rep)).combine_chunks()
    sc = {k: _small(c[k], len(sel.dims[k])) for k in ("target", "workload", "op", "stat")}
    df = pd.DataFrame({
        "fingerprint": pd.Series(np.full(m, None, dtype=object), dtype=object),
        "target": _cat(sc["target"][cand], sel.dims["target"]),
        "workload": _cat(sc["workload"][cand], sel.dims["workload"]),
        "op": _cat(sc["op"][cand], sel.dims["op"]),
        "metric": _cat(_small(metric, len(sel.dims["metric"])), sel.dims["metric"]),
        "stat": _cat(sc["stat"][cand], sel.dims["stat"]),
        "candidate": _cat(cand_code, fids), "reference": _cat(ref_code, fids),
        "candidate_value": cat("cand_value"), "reference_value": cat("ref_value"),
        "unit": _units_cat(cat("unit"), unit_names or []),
        "rel_error": cat("rel"), "log_ratio": cat("log_ratio"),
        "tolerance": cat("tol"), "tolerance_abs": cat("tol_abs"), "within": cat("within").astype(bool),
        "kind": _cat(kind.astype(np.int64), KINDS), "severity": cat("severity"),
        "candidate_n": sel.n[cand], "reference_n": ref_n,
        "candidate_run": _side_cat(*text["run"], cand), "reference_run": _side_cat(*text["run"], ref),
        "candidate_source_path": _side_cat(*text["source_path"], cand),
        "candidate_source_loc": _locs(ent_loc, cand),
        "reference_source_path": _side_cat(*text["source_path"], ref),
        "reference_source_loc": _locs(ent_loc, ref),
        "candidate_config": _side_cat(*text["config"], cand), "reference_config": _side_cat(*text["config"], ref),
        "note": pd.Series(np.concatenate([r.note.strings() for r in results]), dtype=object),
        "efficiency": cat("efficiency"),
    }, copy=False)
    want = np.flatnonzero(np.ones(m, bool) if fingerprints == "all" else (kind != OK) & (kind != MISSING))
    if len(want):
        e = cand[want]
        parts = [sel.dims["target"], sel.dims["workload"], sel.dims["op"], sel.dims["metric"], sel.dims["stat"], fids, fids]
        codes = [c["target"][e], c["workload"][e], c["op"][e], metric[want], c["stat"][e], cand_code[want], ref_code[want]]
        fp = np.full(m, None, dtype=object)
        fp[want] = batch_fingerprints(parts, codes)
        df["fingerprint"] = pd.Series(fp, dtype=object)
    return df


def _entry_order(e_order: np.ndarray, ent: np.ndarray, vals: np.ndarray, ent_vals: np.ndarray,
                 n_ent: int) -> np.ndarray:
    """An order sorting `vals` (row i holds the value of entry ent[i]) from the entries' order.

    Valid when every row's value is its entry's (no conversion) and each entry occurs once;
    otherwise the rows are sorted directly.
    """
    if len(ent) and (ent >= 0).all() and np.array_equal(vals, ent_vals[ent], equal_nan=True):
        pos = np.full(n_ent, -1, np.int64)
        pos[ent] = np.arange(len(ent))
        if np.count_nonzero(pos >= 0) == len(ent):  # no entry twice
            o = pos[e_order]
            return o[o >= 0]
    return global_order(vals)


def _comparisons(sel: Selected, results: list[PairRows], settings: dict[str, Any], kendall: bool,
                 bootstrap: bool) -> pd.DataFrame:
    frames = []
    c = sel.codes
    # one order of the entries' values serves every pair's log cand / log ref (log is monotone)
    e_order = global_order(sel.value) if results else None
    for r in results:
        ok = (r.kind != MISSING) & np.isfinite(r.rel) & np.isfinite(r.log_ratio)
        idx = np.flatnonzero(ok)
        if not len(idx):
            continue
        e = r.cand[idx]
        t, m, s, w = c["target"][e], r.metric[idx], c["stat"][e], c["workload"][e]
        cards = [len(sel.dims["target"]), len(sel.dims["metric"]), len(sel.dims["stat"]), len(sel.dims["workload"])]
        orders = (global_order(np.abs(r.rel[idx])),
                  _entry_order(e_order, e, r.cand_value[idx], sel.value, len(sel.value)),
                  _entry_order(e_order, r.ref[idx], r.ref_value[idx], sel.value, len(sel.value)))
        logs = (np.log(r.cand_value[idx]), np.log(r.ref_value[idx]))
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
            st = grouped_stats(gid, nuniq, r.rel[idx], r.log_ratio[idx], r.cand_value[idx],
                               r.ref_value[idx], r.within[idx], kendall=kendall, bootstrap=bootstrap,
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
