"""Observations: each achieved number of a target with its roofline bound, counters and provenance."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from xfid.config import Config, Target
from xfid.engine.calibration import config_of, op_size
from xfid.engine.opmap import map_name
from xfid.models.llm import BYTES_PER_ELEMENT
from xfid.profile.classes import op_class, precision_of, size_bucket
from xfid.schema import FLAG_NO_REFERENCE
from xfid.store import Store

TIME_METRICS = ("latency", "cycles", "ttft", "tpot", "itl")
"""Metrics whose bound is a least time (a roofline latency, a block cycle count, a step time)."""
STAT_PREFERENCE = ("value", "median", "p50", "mean")
"""Of the stats one record set gives for a key, the first of these is the observation."""
COUNTERS = {"utilization": "sm_throughput", "ncu:dram_throughput": "dram_throughput",
            "ncu:memory_throughput": "memory_throughput", "ncu:achieved_occupancy": "achieved_occupancy"}
"""Nsight Compute metrics (as the ncu adapter names them) -> the counter names of a profile."""
ISOLATED = ("", "none", "isolated", "no", "false")
"""`interference` values that mean the run had no co-runner."""
COMPUTED = "(computed by xfid roofline)"
_COLUMNS = ["fidelity", "target", "workload", "op", "metric", "stat", "value", "unit", "source", "source_id",
            "source_path", "source_loc", "run", "timestamp", "hardware", "software", "config", "null_reason", "flags"]


@dataclass
class Bound:
    """A least time for one (workload, op, metric) and where it came from."""

    value: float
    cfg: dict[str, Any]
    source_path: str
    source_loc: str


@dataclass
class Observation:
    """One achieved number (one record) aligned with its bound."""

    target: str
    workload: str
    op: str
    raw_op: str
    metric: str
    stat: str
    run: str
    value: float
    bound: float
    limiter: str
    op_class: str
    precision: str
    size_bucket: str
    fraction_of_bound: float
    fraction_of_peak: float | None
    peak_kind: str
    co_runner: str | None
    source_path: str
    source_loc: str
    bound_path: str
    bound_loc: str
    hardware: str
    software: str
    config: dict[str, Any]
    counters: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.workload, self.op, self.metric, self.stat)

    def evidence(self) -> list[dict[str, str]]:
        return [{"role": "measured", "source_path": self.source_path, "source_loc": self.source_loc},
                {"role": "bound", "source_path": self.bound_path, "source_loc": self.bound_loc}]


@dataclass
class Gathered:
    """What a target's records give: the observations, what was left out and why, the conditions."""

    target: str
    fidelity: str | None
    observations: list[Observation]
    excluded: list[dict[str, Any]]
    unbounded: list[dict[str, Any]]
    records: pd.DataFrame


def evidence(obs: Sequence[Observation]) -> list[dict[str, str]]:
    """The distinct records (measured and bound) behind `obs`, in order."""
    seen: dict[tuple[str, str, str], dict[str, str]] = {}
    for o in obs:
        for e in o.evidence():
            seen.setdefault((e["role"], e["source_path"], e["source_loc"]), e)
    return list(seen.values())


def co_runner(cfg: dict[str, Any]) -> str | None:
    """The co-runner a record was measured with (`--meta interference=NAME` or a sidecar meta), or None."""
    v = cfg.get("interference")
    if v is None or str(v).strip().lower() in ISOLATED:
        return None
    return str(v)


def achieved_fidelity(df: pd.DataFrame) -> str | None:
    """measured when the target has measured numbers, else rtl (a simulation), else None."""
    fids = set(df["fidelity"].astype(str)) if len(df) else set()
    for f in ("measured", "rtl"):
        if f in fids:
            return f
    return None


def _latest_bounds(df: pd.DataFrame, config: Config) -> dict[tuple[str, str, str], Bound]:
    r = df[(df["fidelity"] == "roofline") & (df["stat"] == "value") & df["metric"].isin(TIME_METRICS)
           & df["value"].notna()]
    out: dict[tuple[str, str, str], Bound] = {}
    for row in r.sort_values("timestamp", kind="stable").itertuples():
        op = map_name(str(row.op), str(row.source), config.op_maps)[0] if row.op else ""
        out[(str(row.workload), op, str(row.metric))] = Bound(float(row.value), config_of(row.config),
                                                              str(row.source_path), str(row.source_loc or ""))
    return out


def _computed_bounds(need: pd.DataFrame, config: Config) -> dict[tuple[str, str, str], Bound]:
    """Bounds the store lacks, computed now by the roofline for GEMM shapes, LLM workloads, T100 blocks."""
    import pyarrow as pa

    from xfid.models.auto import plan_bounds

    if not len(need):
        return {}
    table = pa.table({c: pa.array(need[c].astype(object).where(need[c].notna(), None).tolist(), pa.string())
                      for c in ("fidelity", "target", "workload", "op", "config")})
    out: dict[tuple[str, str, str], Bound] = {}
    for _name, recs in plan_bounds(table, config)[0]:
        for r in recs:
            if r["metric"] in TIME_METRICS:
                loc = f"[targets.{r['target']}] {r['workload']} {r['op'] or '(end-to-end)'} {r['metric']}"
                out[(r["workload"], r["op"], r["metric"])] = Bound(float(r["value"]), config_of(r["config"]),
                                                                   COMPUTED, loc)
    return out


def _counters(df: pd.DataFrame) -> dict[tuple[str, str, str, str], dict[str, float]]:
    c = df[df["metric"].isin(list(COUNTERS)) & df["value"].notna()]
    out: dict[tuple[str, str, str, str], dict[str, float]] = defaultdict(dict)
    for (sid, run, wl, op, metric), g in c.groupby(["source_id", "run", "workload", "op", "metric"], observed=True):
        out[(str(sid), str(run), str(wl), str(op))][COUNTERS[str(metric)]] = float(g["value"].median())
    return out


def peak_fraction(t: float, limiter: str, cfg: dict[str, Any], target: Target, precision: str,
                  metric: str) -> tuple[float | None, str]:
    """Achieved FLOP/s over the data-sheet peak (compute), bytes/s over the level's bandwidth
    (memory), comm bytes/s over interconnect_bw; None where the bound does not say the work."""
    if metric == "cycles":
        if not target.clock_hz:
            return None, "none"
        t = t / target.clock_hz
        if limiter == "cycles":
            return None, "none"
    if t <= 0:
        return None, "none"
    if limiter == "compute":
        flops = cfg.get("flops")
        peak = target.peak_flops.get(precision) or cfg.get("peak_flops")
        if isinstance(flops, (int, float)) and flops > 0 and peak:
            return float(flops) / t / float(peak), "peak_flops"
    elif limiter.startswith("memory"):
        level = limiter.partition(":")[2] or "hbm"
        nbytes = (cfg.get("bytes_by_level") or {}).get(level, cfg.get("bytes"))
        bw = (cfg.get("levels") or {}).get(level, {}).get("bw") or cfg.get("mem_bw") or target.mem_bw
        if isinstance(nbytes, (int, float)) and nbytes > 0 and bw:
            return float(nbytes) / t / float(bw), f"{level}_bw" if level != "hbm" else "mem_bw"
    elif limiter == "interconnect":
        comm, bw = cfg.get("comm_bytes"), cfg.get("interconnect_bw") or target.interconnect_bw
        if isinstance(comm, (int, float)) and comm > 0 and bw:
            return float(comm) / t / float(bw), "interconnect_bw"
    return None, "none"


def _pick_stats(a: pd.DataFrame) -> pd.DataFrame:
    """Per record set (source, run, workload, op, metric) the most preferred stat only."""
    rank = {s: i for i, s in enumerate(STAT_PREFERENCE)}
    a = a[a["stat"].isin(STAT_PREFERENCE)].copy()
    a["_rank"] = a["stat"].map(rank)
    best = a.groupby(["source_id", "run", "workload", "op", "metric"], observed=True)["_rank"].transform("min")
    return a[a["_rank"] == best].drop(columns="_rank")


def gather(store: Store, config: Config, target: str) -> Gathered:
    """Every achieved time of `target` with its bound; flagged, null and unbounded numbers listed.

    Raises:
        ConfigError: an unknown target (the configured ones listed).
    """
    tgt = config.target(target)
    t = store.read({"target": [target]}, _COLUMNS)
    df = t.to_pandas()
    for c in ("fidelity", "workload", "op", "metric", "stat", "source", "source_id", "run"):
        df[c] = df[c].astype(object).where(df[c].notna(), "").astype(str)
    fid = achieved_fidelity(df)
    if fid is None:
        return Gathered(target, None, [], [], [], df)
    mine = df[df["fidelity"] == fid]
    counters = _counters(mine)
    flags = mine["flags"].astype(object).fillna("").astype(str)
    bad = flags.map(lambda f: bool(set(f.split(",")) & set(FLAG_NO_REFERENCE)))
    timed = mine["metric"].isin(TIME_METRICS)
    excluded = _excluded(mine[bad], "flagged"), _excluded(mine[~bad & timed & mine["value"].isna()], "null")
    a = _pick_stats(mine[~bad & timed & mine["value"].notna()])
    a = a.assign(canon=[map_name(o, s, config.op_maps)[0] if o else "" for o, s in zip(a["op"], a["source"], strict=True)])
    bounds = _latest_bounds(df, config)
    missing = a[[(w, o, m) not in bounds for w, o, m in zip(a["workload"], a["canon"], a["metric"], strict=True)]]
    need = missing.assign(op=missing["canon"])[["fidelity", "target", "workload", "op", "config"]]
    bounds.update({k: v for k, v in _computed_bounds(need, config).items() if k not in bounds})
    obs: list[Observation] = []
    unbounded: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in a.itertuples():
        b = bounds.get((r.workload, r.canon, r.metric))
        if b is None or not r.value or r.value <= 0 or not math.isfinite(r.value) or not 0 < b.value < math.inf:
            u = unbounded.setdefault((r.workload, r.canon, r.metric), {
                "workload": r.workload, "op": r.canon, "metric": r.metric, "n": 0,
                "source_path": _s(r.source_path), "source_loc": _s(r.source_loc),
                "why": "no roofline bound (an op name no model or [[op_map]] rule covers)" if b is None
                else "not a positive time" if not 0 < r.value < math.inf else "the bound is not a positive time",
                "counters": {}})
            u["n"] += 1
            u["counters"] = u["counters"] or counters.get((r.source_id, r.run, r.workload, r.op), {})
            continue
        mcfg = config_of(r.config)
        limiter = str(b.cfg.get("limiter") or "unknown")
        prec = precision_of(b.cfg, mcfg, r.workload, BYTES_PER_ELEMENT)
        work = b.cfg.get("flops") or op_size(r.canon, b.cfg), b.cfg.get("bytes")
        frac_peak, kind = peak_fraction(float(r.value), limiter, b.cfg, tgt, prec, r.metric)
        obs.append(Observation(
            target=target, workload=r.workload, op=r.canon, raw_op=r.op, metric=r.metric, stat=r.stat, run=r.run,
            value=float(r.value), bound=b.value, limiter=limiter, op_class=op_class(r.canon), precision=prec,
            size_bucket=size_bucket(*(float(x) if isinstance(x, (int, float)) else None for x in work)),
            fraction_of_bound=b.value / float(r.value), fraction_of_peak=frac_peak, peak_kind=kind,
            co_runner=co_runner(mcfg), source_path=_s(r.source_path), source_loc=_s(r.source_loc),
            bound_path=b.source_path, bound_loc=b.source_loc, hardware=_s(r.hardware), software=_s(r.software),
            config=mcfg, counters=counters.get((r.source_id, r.run, r.workload, r.op), {})))
    return Gathered(target, fid, obs, [*excluded[0], *excluded[1]], list(unbounded.values()), df)


def _s(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _excluded(part: pd.DataFrame, why: str) -> list[dict[str, Any]]:
    """One entry per (source file, run): how many numbers, the flags, the reason the file gave."""
    out = []
    for (path, run), g in part.groupby(["source_path", "run"], observed=True, sort=True):
        cfgs = [config_of(c) for c in g["config"]]
        reasons = sorted({str(c[k]).strip() for c in cfgs for k in ("invalid_reason", "failure", "reason") if c.get(k)})
        if why == "flagged":
            flags = sorted({f for v in g["flags"].dropna() for f in str(v).split(",") if f})
            because = f"flagged {', '.join(flags)}" + (f": {'; '.join(reasons)}" if reasons else "")
        else:
            because = "null value: " + ", ".join(sorted({str(v) for v in g["null_reason"].dropna()}) or ["no reason"])
        out.append({"source_path": str(path), "run": str(run), "n": len(g), "why": because,
                    "source_loc": str(g["source_loc"].iloc[0] or "")})
    return out
