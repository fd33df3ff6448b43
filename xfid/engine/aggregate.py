"""Aggregates per (target[, workload], pair, metric, stat): one task per pair, shared by threads."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from xfid.engine.align import NOT_BOUNDS
from xfid.engine.contract import COMPARISON_COLUMNS
from xfid.engine.keys import combine, run_starts
from xfid.engine.pairrows import BOUND, MISSING, Pair, PairRows
from xfid.engine.schema import BOUND as BOUND_PAIR
from xfid.engine.schema import (
    BOUND_FLAG,
    BOUND_STATS,
    CI_FIELDS,
    COMPARED_AS_FIELD,
    ESTIMATE,
    FINGERPRINT,
    GROUP_FIELDS,
    STAT_FIELDS,
    VIOLATION_IDS,
    names,
    packed,
    row_field,
)
from xfid.engine.selection import Selected
from xfid.engine.stats import global_order, grouped_stats

STAT_NAMES = names(STAT_FIELDS)

AGGREGATE_COLUMNS = tuple(c for c in COMPARISON_COLUMNS if c != VIOLATION_IDS.name)
"""What the statistics give; `violation_ids` comes from the discrepancies (with_violation_ids).
`compared_as` of an aggregate: ESTIMATE of its reference (MAPE, bias, ...) or BOUND_PAIR on it
(violations and the achieved fraction of the bound)."""
SHOWN_AS_INT = frozenset(f.name for f in STAT_FIELDS if f.shown is not None and f.shown == pa.int64())
"""Bound statistics grouped_stats computes as floats (NaN for an estimate) and the comparisons
show as integers (null for an estimate)."""


def is_bound_pair(pair: Pair, settings: dict[str, Any]) -> bool:
    """A pair whose candidate is a bound fidelity checked as a bound ([settings]
    roofline_tolerance or the pair's `bounds` = "bound"): its bound metrics aggregate as bounds."""
    return pair.candidate in settings["bound_fidelities"] and (pair.bounds or settings["roofline_tolerance"]) == "bound"


def unchecked(pair: Pair, settings: dict[str, Any], metric: str) -> bool:
    """A bound pair's metric that bounds nothing (align.NOT_BOUNDS, a roofline's power): its rows
    are shown, never checked, so its aggregates have no within_tolerance share (it would read
    100% whatever the error)."""
    return metric in NOT_BOUNDS and is_bound_pair(pair, settings)


def achieved_fraction(efficiency: np.ndarray, bound_pair: bool) -> np.ndarray:
    """The fraction of the bound achieved per row: the row's efficiency in a bound pair (NaN for a
    metric that bounds nothing), NaN in any other pair."""
    return np.asarray(efficiency, np.float64) if bound_pair else np.full(len(efficiency), np.nan)


def with_violation_ids(comparisons: pd.DataFrame, discrepancies: pd.DataFrame) -> pd.DataFrame:
    """The comparisons with `violation_ids`: per bound aggregate the fingerprints of its bound
    violations, worst (largest factor) first; None for an estimate."""
    ids: dict[tuple[Any, ...], list[str]] = {}
    d = discrepancies
    group = names(GROUP_FIELDS)
    w = group.index("workload")  # a violation counts in its workload's group and its target's (workload None)
    if len(d):
        v = d[d["kind"] == "bound_violation"].sort_values("factor", ascending=False, kind="stable",
                                                           na_position="last")
        for *key, fp in v[[*group, row_field(FINGERPRINT)]].itertuples(index=False, name=None):
            for wl in (None, key[w]):
                ids.setdefault((*key[:w], wl, *key[w + 1:]), []).append(str(fp))
    out = comparisons.copy()
    keys = zip(*(out[k].tolist() for k in group), strict=True)
    out["violation_ids"] = [ids.get(k, []) if c == BOUND_PAIR else None
                            for k, c in zip(keys, out["compared_as"].tolist(), strict=True)]
    return out[list(COMPARISON_COLUMNS)]


def pack_comparisons(stats: pd.DataFrame | None) -> pd.DataFrame:
    """The comparisons table (AGGREGATE_COLUMNS) of the groups' statistics, as both engines give
    them (schema.GROUP_FIELDS, schema.STAT_FIELDS and the `bound` flag, one row per group): the
    intervals packed as [low, high] (None when n < 3 or undefined), the bound columns, the group
    names as str or None, target-level rows first, then per workload, sorted."""
    if stats is None or not len(stats):
        return pd.DataFrame({k: pd.Series(dtype=object) for k in AGGREGATE_COLUMNS})
    out = stats.copy()
    ci_ok = (out["n"] >= 3) & np.isfinite(out["mape_ci_low"])
    for ci in ("mape_ci", "bias_ci"):
        low, high = CI_FIELDS[ci]
        out[ci] = [[float(a), float(b)] if k else None for a, b, k in zip(out[low], out[high], ci_ok, strict=True)]
    for c in names(GROUP_FIELDS):
        out[c] = out[c].astype(object).where(out[c].notna(), None)
    out["n"] = out["n"].astype(np.int64)
    st = {k: out[k].to_numpy(np.float64) for k in BOUND_STATS}
    for k, v in bound_columns({**st, "bound": out["bound"].to_numpy(bool)}).items():
        out[k] = v
    out["_lvl"] = out["workload"].notna()
    out = out.sort_values(["_lvl", *names(GROUP_FIELDS)], kind="stable",
                          na_position="first").drop(columns="_lvl").reset_index(drop=True)
    return out[list(AGGREGATE_COLUMNS)]


def bound_columns(st: dict[str, Any]) -> dict[str, Any]:
    """The comparisons columns of the bound statistics (see contract.COMPARISON_COLUMNS):
    `compared_as`, then each of BOUND_STATS as the comparisons show it (intervals packed)."""
    out: dict[str, Any] = {COMPARED_AS_FIELD.name: np.where(st["bound"], BOUND_PAIR, ESTIMATE).astype(object)}
    for name in packed(BOUND_STATS):
        if name in CI_FIELDS:
            low, high = (st[k] for k in CI_FIELDS[name])
            out[name] = [[float(a), float(b)] if k else None
                         for a, b, k in zip(low, high, np.isfinite(low), strict=True)]
        elif name in SHOWN_AS_INT:
            out[name] = pd.array(np.where(st["bound"], st[name], np.nan), dtype="Float64").astype("Int64")
        else:
            out[name] = st[name]
    return out


def excluded_rows(sel: Selected, r: PairRows, keys: list[list[str]]) -> np.ndarray | None:
    """Rows of one pair whose key (target, workload, op, metric, stat, candidate, reference) is
    among `keys` (settings["excluded_keys"]: issues marked invalid); None when none is."""
    mine = [k for k in keys if (k[5], k[6]) == (r.pair.candidate, r.pair.reference)]
    if not mine:
        return None
    c, e = sel.codes, r.cand
    out = np.zeros(len(e), bool)
    for k in mine:
        try:
            t, w, op, m, s = (sel.dims[d].index(v) for d, v in zip(("target", "workload", "op", "metric", "stat"),
                                                                   k[:5], strict=True))
        except ValueError:  # a key this selection does not hold
            continue
        out |= ((c["target"][e] == t) & (c["workload"][e] == w) & (c["op"][e] == op) & (r.metric == m)
                & (c["stat"][e] == s))
    return out


class _EntryOrders:
    """Per fidelity, the order of its entries by value, computed once and shared by every pair:
    a pair's rows on one side are that fidelity's entries in increasing entry order."""

    def __init__(self, sel: Selected):
        self.sel = sel
        self.lock = threading.Lock()
        self.local = np.empty(len(sel.value), np.int64)  # entry -> index among its fidelity's entries
        self.members: dict[int, np.ndarray] = {}
        self.orders: dict[int, np.ndarray] = {}

    def _fid(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            return self._fid_locked(f)

    def _fid_locked(self, f: int) -> tuple[np.ndarray, np.ndarray]:
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


class Aggregates:
    """The comparisons table, pair by pair, by whichever threads call `work()`; pairs are added
    as they are aligned, so a worker can aggregate one pair while the next is being aligned."""

    def __init__(self, sel: Selected, settings: dict[str, Any], kendall: bool, bootstrap: bool):
        self.sel, self.settings = sel, settings
        self.kendall, self.bootstrap = kendall, bootstrap
        self.orders = _EntryOrders(sel)
        self.pairs: list[PairRows] = []
        self.frames: dict[int, list[pd.DataFrame]] = {}
        self._next = 0
        self._closed = False
        self._cv = threading.Condition()

    def add(self, r: PairRows) -> None:
        """A pair whose rows are final (placed): aggregate it."""
        with self._cv:
            self.pairs.append(r)
            self._cv.notify_all()

    def close(self) -> None:
        """No more pairs: workers waiting for one return."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def work(self, wait: bool = False) -> None:
        """Aggregate pairs nobody has taken yet; with `wait`, also those still to be added,
        until close()."""
        while True:
            with self._cv:
                while wait and not self._closed and self._next >= len(self.pairs):
                    self._cv.wait()
                if self._next >= len(self.pairs):
                    return
                i = self._next
                self._next += 1
                r = self.pairs[i]
            self.frames[i] = _pair_frames(self.sel, r, self.orders, self.settings, self.kendall, self.bootstrap)

    def result(self) -> pd.DataFrame:
        """All pairs' aggregates: target-level rows first, then per workload, sorted."""
        self.work()
        frames = [f for i in sorted(self.frames) for f in self.frames[i]]
        return pack_comparisons(pd.concat(frames, ignore_index=True) if frames else None)


def _pair_frames(sel: Selected, r: PairRows, eo: _EntryOrders, settings: dict[str, Any], kendall: bool,
                 bootstrap: bool) -> list[pd.DataFrame]:
    """The target-level and workload-level aggregates of one pair's rows."""
    frames: list[pd.DataFrame] = []
    c = sel.codes
    ok = (r.kind != MISSING) & np.isfinite(r.rel) & np.isfinite(r.log_ratio)
    gone = excluded_rows(sel, r, settings.get("excluded_keys") or [])
    if gone is not None:  # keys marked invalid leave the statistics (their rows stay in the rows)
        ok &= ~gone
    idx = np.flatnonzero(ok)
    if not len(idx):
        return frames
    # the rows the aggregates use, gathered once for both levels (views when all are used)
    take = (lambda a: a) if len(idx) == len(ok) else (lambda a: a[idx])
    rel, lr, cv, rv, within = (take(a) for a in (r.rel, r.log_ratio, r.cand_value, r.ref_value, r.within))
    achieved = take(achieved_fraction(r.efficiency, is_bound_pair(r.pair, settings)))
    violated = take(r.kind == BOUND)
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
                           exact_max_n=settings["bootstrap_exact_max_n"], orders=orders, logs=logs,
                           achieved=achieved, violated=violated)
        f = pd.DataFrame({
            "target": [sel.dims["target"][x] for x in t[first]],
            "workload": [sel.dims["workload"][x] for x in w[first]] if level == "workload" else None,
            "candidate": r.pair.candidate, "reference": r.pair.reference,
            "metric": [sel.dims["metric"][x] for x in m[first]],
            "stat": [sel.dims["stat"][x] for x in s[first]],
            **{k: st[k] for k in (*STAT_NAMES, BOUND_FLAG.name)},
        })
        f.loc[[unchecked(r.pair, settings, x) for x in f["metric"]], "within_tolerance"] = np.nan
        frames.append(f)
    return frames
