"""Power and energy: per-GPU power-log summaries, and energy over a benchmark's window."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xfid.adapters.base import Columns

POWER_SOURCES = ("nvidia-smi", "dcgm")
"""Adapters whose `power`/`value` rows are timestamped samples (a power log)."""
BENCH_SOURCES = ("vllm", "sglang")
"""Adapters whose `duration` row's timestamp is the benchmark's end time."""
DERIVED = "derived-energy"
MIN_SAMPLES = 3
RELATIVE_TIME = "relative_time"
"""Flag on samples whose timestamps are not wall-clock times (dcgm without `start`)."""
NO_SAMPLE_TIME = "no_sample_time"
"""Flag on a sample whose file gives no time at all (a dcgm-exporter dump without `--option
timestamp`): its record's timestamp is the ingest time, never a sample time."""
COUNTER_SOURCES = ("dcgm-exporter",)
"""Adapters whose energy is a since-boot counter read once per file (`dcgm:total_energy`): the
dumps of one run make a series, and the energy over a window is a difference of readings."""
ENERGY_COUNTER = "dcgm:total_energy"


def trapezoid(t_s: Sequence[float], watts: Sequence[float]) -> float:
    """Energy in joules: the trapezoid integral of power samples over their times (seconds)."""
    t = np.asarray(t_s, dtype=float)
    w = np.asarray(watts, dtype=float)
    if len(t) < 2:
        return 0.0
    return float(np.sum((t[1:] - t[:-1]) * (w[1:] + w[:-1]) / 2.0))


@dataclass
class Series:
    """One GPU's power samples from one log: times (s, epoch or relative) and watts."""

    t: list[float] = field(default_factory=list)
    w: list[float] = field(default_factory=list)
    first_loc: str = ""
    last_loc: str = ""
    last_time: str | None = None
    """ISO time of the last sample (the summaries' timestamp), when the log has wall-clock times."""


def add_log_summary(out: Columns, series: dict[str, Series], base: dict[str, Any], what: str) -> None:
    """Per-GPU energy (trapezoid over the whole log), mean and max power of a power log.

    Args:
        out: the adapter's column buffer.
        series: op (`gpu0`, ...) -> samples, in file order.
        base: columns shared by the summary rows (config, hardware, software, flags...).
        what: the column the power came from, named in `source_loc`.
    """
    for op, s in sorted(series.items()):
        if not s.w:
            continue
        span = f"{s.first_loc}..{s.last_loc}"
        n = len(s.w)
        base = {"timestamp": s.last_time, **base}
        out.add("power", "mean", float(np.mean(s.w)), "W", f"{span}: mean of {what}", op=op, n_samples=n, **base)
        out.add("power", "max", float(np.max(s.w)), "W", f"{span}: max of {what}", op=op, n_samples=n, **base)
        if n >= 2:
            dur = s.t[-1] - s.t[0]
            out.add("energy", "value", trapezoid(s.t, s.w), "J",
                    f"{span}: trapezoid of {what} over {dur:.3f} s", op=op, n_samples=n, **base)


# --- energy over a benchmark window ------------------------------------------------------------
@dataclass
class Derived:
    """Derived records for one (benchmark, power log) pair, or the warning why there are none."""

    source_id: str
    source_path: str
    inputs: tuple[str, ...]
    rows: dict[str, list[Any]] | None
    warning: str | None = None


def _iso(us: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(us / 1e6, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


def _window_energy(t: np.ndarray, w: np.ndarray, a: float, b: float) -> tuple[float, float, int]:
    """(energy J, covered seconds, samples inside [a, b]); edges linearly interpolated."""
    lo, hi = max(a, t[0]), min(b, t[-1])
    if hi <= lo:
        return 0.0, 0.0, 0
    inside = (t > lo) & (t < hi)
    tt = np.concatenate([[lo], t[inside], [hi]])
    ww = np.concatenate([[np.interp(lo, t, w)], w[inside], [np.interp(hi, t, w)]])
    n = int(np.count_nonzero((t >= a) & (t <= b)))
    return trapezoid(tt, ww), hi - lo, n


def derive(records: Any, only: Iterable[str] | None = None) -> list[Derived]:
    """Energy, mean power, tokens/J and J/token over each benchmark's window.

    For every run holding a benchmark result (vllm/sglang: `duration` whose timestamp is the end
    time, and `output_tokens`) and a power log (nvidia-smi/dcgm `power` samples with wall-clock
    timestamps), the per-GPU power is integrated (trapezoid, edges interpolated) over
    [end - duration, end] and summed over the log's GPUs.

    Args:
        records: a pyarrow Table of normalized records (e.g. from `Store.read`).
        only: when given, only pairs involving one of these source_ids.

    Returns:
        One Derived per (benchmark, power log) pair: normalized-column rows, or a warning why
        no number was derived (window not covered, fewer than MIN_SAMPLES samples).
    """
    import hashlib

    import pyarrow.compute as pc

    t = records
    cols = ["source", "source_id", "source_path", "run", "metric", "stat", "op", "value", "timestamp",
            "target", "workload", "hardware", "flags"]
    data = {c: t.column(c).cast(_plain(t.column(c).type)).to_pylist() if c != "timestamp"
            else pc.cast(t.column(c), "int64").to_pylist() for c in cols}
    configs = t.column("config") if "config" in t.column_names else None  # read row by row, counters only
    only_set = set(only) if only is not None else None
    bench: dict[str, dict[str, Any]] = {}
    logs: dict[str, dict[str, Any]] = {}
    relative: dict[str, dict[str, Any]] = {}
    counters: dict[Any, dict[str, Any]] = {}
    for i in range(t.num_rows):
        src, sid, run, metric, stat = (data[k][i] for k in ("source", "source_id", "run", "metric", "stat"))
        if src in BENCH_SOURCES and stat == "value" and metric in ("duration", "output_tokens"):
            b = bench.setdefault(sid, {"run": run, "path": data["source_path"][i], "target": data["target"][i],
                                       "workload": data["workload"][i]})
            b[metric] = data["value"][i]
            if metric == "duration":
                b["end_us"] = data["timestamp"][i]
        elif src in POWER_SOURCES and metric == "power" and RELATIVE_TIME in (data["flags"][i] or ""):
            relative.setdefault(sid, {"run": run, "path": data["source_path"][i]})
        elif (src in POWER_SOURCES and metric == "power" and stat == "value" and data["value"][i] is not None
              and data["timestamp"][i] is not None):
            lg = logs.setdefault(sid, {"run": run, "path": data["source_path"][i], "hw": data["hardware"][i],
                                       "gpus": defaultdict(list)})
            lg["gpus"][data["op"][i]].append((data["timestamp"][i] / 1e6, data["value"][i]))
        elif src in COUNTER_SOURCES and metric == ENERGY_COUNTER:
            _add_reading(counters, relative, data, i, configs[i].as_py() if configs is not None else None)
    out = []
    for bsid, b in sorted(bench.items()):
        for lsid, lg in sorted(logs.items()):
            if lg["run"] != b["run"] or (only_set is not None and not ({bsid, lsid} & only_set)):
                continue
            sid = hashlib.sha256(f"{DERIVED}\0{bsid}\0{lsid}".encode()).hexdigest()
            path = f"{b['path']} + {lg['path']}"
            out.append(_pair(sid, path, (bsid, lsid), b, lg))
        for lsid, lg in sorted(relative.items()):
            if lg["run"] == b["run"] and (only_set is None or {bsid, lsid} & only_set):
                out.append(Derived("", "", (bsid, lsid), None,
                                   f"run {b['run']!r}: power log {lg['path']} has no wall-clock times, so it cannot "
                                   f"be matched to {b['path']}'s window (dcgm: pass --option start=ISO-TIME; "
                                   "dcgm-exporter: --option timestamp=ISO-TIME)"))
        for host, cn in sorted(counters.get(b["run"], {}).items()):
            if only_set is None or ({bsid} | set(cn["paths"])) & only_set:
                out.append(_counter_pair(bsid, b, host, cn))
    return out


def _add_reading(counters: dict[Any, dict[str, Any]], untimed: dict[str, dict[str, Any]], data: dict[str, list[Any]],
                 i: int, config: str | None) -> None:
    """Collect one energy-counter reading (J since boot) of a dump, by run, host, GPU and time.

    The host is the dump's `Hostname` (from the record's config): like one power log, one host's
    dumps make one series. The GPU is its UUID where the dump has one, else its op."""
    import json

    sid, run = data["source_id"][i], data["run"][i]
    if NO_SAMPLE_TIME in (data["flags"][i] or "") or data["timestamp"][i] is None:
        untimed.setdefault(sid, {"run": run, "path": data["source_path"][i]})
        return
    if data["value"][i] is None:
        return
    try:
        cfg = json.loads(config) if config else {}
    except ValueError:
        cfg = {}
    op, host = data["op"][i], str(cfg.get("hostname") or "")
    key = cfg.get("uuid") or op
    cn = counters.setdefault(run, {}).setdefault(host, {"hw": data["hardware"][i], "gpus": defaultdict(list),
                                                        "paths": {}, "names": {}})
    cn["gpus"][key].append((data["timestamp"][i] / 1e6, float(data["value"][i]), sid))
    cn["names"][key] = op
    cn["paths"][sid] = data["source_path"][i]


def _counter_pair(bsid: str, b: dict[str, Any], host: str, cn: dict[str, Any]) -> Derived:
    """Energy over a benchmark window from since-boot counter readings of one host's dumps.

    The counter of each GPU is read at the dumps' times; between two readings it is taken as
    rising linearly (constant power), so the energy over [start, end] is the counter
    interpolated at `end` minus the counter interpolated at `start`: a difference of readings,
    never a sum of them. A dump at or before the start and one at or after the end are needed.
    The derived source's id is the benchmark's and the host's: the first dumps that span the
    window give the host's energy, and a later dump of the same host adds no second estimate."""
    import hashlib

    from xfid.schema import canonical_json

    name = (f"run {b['run']!r}: {b['path']} with {len(cn['paths'])} dcgm-exporter dump(s)"
            + (f" of host {host}" if host else ""))
    if b.get("duration") is None or b.get("end_us") is None:
        return Derived("", "", (bsid,), None, f"{name}: the result has no duration/end time; no energy derived")
    end = b["end_us"] / 1e6
    start = end - float(b["duration"])
    window = f"{_iso(int(start * 1e6))}..{_iso(b['end_us'])}"
    total, per_gpu, used = 0.0, {}, set[str]()
    names = cn["names"]
    for key, readings in sorted(cn["gpus"].items(), key=lambda kv: names[kv[0]]):
        op = names[key]
        readings.sort()
        tt = np.array([r[0] for r in readings])
        cc = np.array([r[1] for r in readings])
        if tt[0] > start or tt[-1] < end:
            return Derived("", "", (bsid, *sorted(cn["paths"])), None,
                           f"{name}: the {op} energy counter is read at {len(tt)} time(s) from {_iso(int(tt[0] * 1e6))} "
                           f"to {_iso(int(tt[-1] * 1e6))}, which does not span the window {window}; take a dump "
                           "before the benchmark starts and one after it ends; no energy derived")
        if np.any(np.diff(cc) < 0):
            return Derived("", "", (bsid, *sorted(cn["paths"])), None,
                           f"{name}: the {op} energy counter goes down between dumps (a driver reload or "
                           "another GPU under the same op); no energy derived")
        lo = int(np.searchsorted(tt, start, side="right")) - 1
        hi = int(np.searchsorted(tt, end, side="left"))
        idx = sorted({lo, min(lo + 1, len(tt) - 1), max(hi - 1, 0), hi})
        e = float(np.interp(end, tt, cc) - np.interp(start, tt, cc))
        used.update(readings[k][2] for k in idx)
        per_gpu[op] = {"readings": len(idx), "energy_j": round(e, 6)}
        total += e
    sids = tuple(sorted(used))
    sid = hashlib.sha256("\0".join((DERIVED, bsid, COUNTER_SOURCES[0], host)).encode()).hexdigest()
    path = f"{b['path']} + " + " + ".join(cn["paths"][s] for s in sids)
    tokens = b.get("output_tokens")
    cfg = canonical_json({"method": "difference of DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION readings (since-boot "
                                    "counter) interpolated linearly to the window edges, summed over GPUs",
                          "window_start": _iso(int(start * 1e6)), "window_end": _iso(b["end_us"]),
                          "window_s": round(end - start, 6), "gpus": per_gpu, "output_tokens": tokens,
                          "host": host or None, "benchmark_source_id": bsid, "power_source_ids": list(sids)})
    loc = f"window {window}; " + ", ".join(f"{op} {v['readings']} counter readings" for op, v in per_gpu.items())
    rows = Columns()
    n = sum(v["readings"] for v in per_gpu.values())
    base = {"target": b["target"], "workload": b["workload"], "run": b["run"], "config": cfg,
            "hardware": cn["hw"], "software": "xfid power (derived)", "timestamp": _iso(b["end_us"])}
    rows.add("energy", "value", total, "J", loc, n_samples=n, **base)
    rows.add("power", "mean", total / (end - start), "W", loc + "; energy / window", n_samples=n, **base)
    if tokens:
        rows.add("tokens_per_joule", "value", tokens / total, "tokens/J", loc + "; output_tokens / energy", **base)
        rows.add("energy_per_token", "value", total / tokens, "J/token", loc + "; energy / output_tokens", **base)
    return Derived(sid, path, (bsid, *sids), rows.cols)


def _pair(sid: str, path: str, inputs: tuple[str, str], b: dict[str, Any], lg: dict[str, Any]) -> Derived:
    from xfid.schema import canonical_json

    name = f"run {b['run']!r}: {b['path']} with power log {lg['path']}"
    if b.get("duration") is None or b.get("end_us") is None:
        return Derived(sid, path, inputs, None, f"{name}: the result has no duration/end time; no energy derived")
    end = b["end_us"] / 1e6
    start = end - float(b["duration"])
    window = f"{_iso(int(start * 1e6))}..{_iso(b['end_us'])}"
    total, n_total, per_gpu, worst_cover = 0.0, 0, {}, None
    for op, samples in sorted(lg["gpus"].items()):
        samples.sort()
        tt = np.array([s[0] for s in samples])
        ww = np.array([s[1] for s in samples])
        e, covered, n = _window_energy(tt, ww, start, end)
        step = float(np.median(np.diff(tt))) if len(tt) > 1 else 0.0
        if n < MIN_SAMPLES:
            return Derived(sid, path, inputs, None,
                           f"{name}: only {n} {op} power sample(s) in the window {window} "
                           f"(need >= {MIN_SAMPLES}); no energy derived")
        if covered < (end - start) - max(2 * step, 0.01 * (end - start)):
            return Derived(sid, path, inputs, None,
                           f"{name}: the {op} log covers only {covered:.1f} s of the {end - start:.1f} s window "
                           f"{window}; no energy derived")
        worst_cover = covered if worst_cover is None else min(worst_cover, covered)
        total += e
        n_total += n
        per_gpu[op] = {"samples": n, "energy_j": round(e, 6)}
    if not per_gpu:
        return Derived(sid, path, inputs, None, f"{name}: the power log has no samples; no energy derived")
    tokens = b.get("output_tokens")
    cfg = canonical_json({"method": "trapezoid of power samples, edges interpolated, summed over GPUs",
                          "window_start": _iso(int(start * 1e6)), "window_end": _iso(b["end_us"]),
                          "window_s": round(end - start, 6), "covered_s": round(worst_cover or 0.0, 6),
                          "gpus": per_gpu, "n_samples": n_total, "output_tokens": tokens,
                          "benchmark_source_id": inputs[0], "power_source_id": inputs[1]})
    loc = (f"window {window}; " + ", ".join(f"{op} {v['samples']} samples" for op, v in per_gpu.items()))
    rows = Columns()
    base = {"target": b["target"], "workload": b["workload"], "run": b["run"], "config": cfg,
            "hardware": lg["hw"], "software": "xfid power (derived)", "timestamp": _iso(b["end_us"])}
    rows.add("energy", "value", total, "J", loc, n_samples=n_total, **base)
    rows.add("power", "mean", total / (end - start), "W", loc + "; energy / window", n_samples=n_total, **base)
    if tokens:
        rows.add("tokens_per_joule", "value", tokens / total, "tokens/J", loc + "; output_tokens / energy", **base)
        rows.add("energy_per_token", "value", total / tokens, "J/token", loc + "; energy / output_tokens", **base)
    return Derived(sid, path, inputs, rows.cols)


def derive_energy_sources(store: Any, preps: Sequence[Any]) -> list[Any]:
    """The ingest hook: derived-energy sources for the runs this ingest touches.

    Reads the new sources' temp parts plus what the store holds for the same runs, derives
    (see `derive`) and writes each pair's records to a temp part of a new PreparedSource
    (adapter `derived-energy`, id hashed from the two input source_ids, so re-ingest is a
    no-op). Warnings go to the summary of the new input sources.

    Args:
        store: the open `xfid.store.Store`.
        preps: the PreparedSources of this ingest, already written to temp parts.

    Returns:
        PreparedSources to commit together with `preps`.
    """
    from collections import Counter

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from xfid.schema import normalize
    from xfid.store import PreparedSource

    mine = [p for p in preps if p.adapter in (*POWER_SOURCES, *COUNTER_SOURCES, *BENCH_SOURCES) and p.temps]
    if not mine:
        return []
    cols = ["source", "source_id", "source_path", "run", "metric", "stat", "op", "value", "timestamp",
            "target", "workload", "hardware", "flags"]
    keep = ["power", "duration", "output_tokens", ENERGY_COUNTER]

    def plain(t: pa.Table) -> pa.Table:
        """The columns derive reads; `config` only on the few counter readings (it names their GPU)."""
        counter = pc.equal(t.column("metric").cast(pa.string()), ENERGY_COUNTER)
        parts = []
        for part, with_cfg in ((t.filter(counter), True), (t.filter(pc.invert(counter)), False)):
            cfg = part.column("config").cast(pa.string()) if with_cfg else pa.nulls(part.num_rows, pa.string())
            parts.append(pa.table({**{c: part.column(c).cast(_plain(part.column(c).type)) for c in cols},
                                   "config": cfg}))
        return pa.concat_tables(parts)

    tables = []
    for p in mine:
        for tmp in p.temps.values():
            t = pq.read_table(tmp)
            tables.append(plain(t.filter(pc.field("metric").isin(keep))))
    runs = sorted({r for t in tables for r in t.column("run").to_pylist() if r})
    if runs:
        tables.append(plain(store.read(filters={"run": runs, "metric": keep})))
    by_id = {p.source_id: p for p in mine}
    out = []
    for d in derive(pa.concat_tables(tables), only=by_id):
        if d.rows is None:
            for sid in d.inputs:
                if sid in by_id:
                    by_id[sid].summary.setdefault("warnings", []).append(d.warning)
            continue
        if store.has_source(d.source_id) or any(p.source_id == d.source_id for p in out):
            continue
        prep = PreparedSource(d.source_id, d.source_path, DERIVED, {"inputs": list(d.inputs)}, d.source_id)
        defaults = {"fidelity": "measured", "source": DERIVED, "source_id": d.source_id,
                    "source_path": d.source_path}
        summary = {"metrics": dict(Counter(d.rows["metric"])), "nulls": {}, "warnings": [],
                   "skipped_rows": [], "skipped_rows_total": 0}
        store.write_temp(prep, [normalize(d.rows, source_path=d.source_path, defaults=defaults)],
                         describe=lambda summary=summary: summary)  # in the footer too (--rebuild-catalog)
        out.append(prep)
    return out


def _plain(t: Any) -> Any:
    import pyarrow as pa

    return t.value_type if pa.types.is_dictionary(t) else t
