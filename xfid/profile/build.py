"""The capability profile of targets: achieved fractions, limits, transfer, interference, conditions."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from xfid.config import Config
from xfid.engine.pipeline import engine_settings
from xfid.errors import XfidError
from xfid.profile.classes import op_class
from xfid.profile.crosstarget import across
from xfid.profile.observe import Gathered, Observation, config_of, evidence, gather
from xfid.profile.stats import MIN_N, caveats, spread, summarize, transfer_verdict
from xfid.store import Store

BUSY = 0.60
"""An Nsight Compute throughput (% of peak) at or above this says the unit is the bottleneck."""
FAR = 0.50
"""A class whose median achieved time is under this fraction of its bound is far from any roofline."""
_CONDITION_KEY = re.compile(r"power|clock|freq|tdp|watt", re.IGNORECASE)
_SHAPE_KEYS = {"m", "n", "k", "interference"}
SAMPLED = ("power", "clock", "dcgm:mem_clock", "ncu:sm_frequency", "ncu:dram_frequency")
"""Sampled power and clock metrics (nvidia-smi, DCGM, Nsight Compute) summarized under the conditions."""


@dataclass
class Profile:
    """The profile document (`targets`: one entry per target) and its renderings."""

    targets: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"targets": self.targets}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False, default=str) + "\n"


def profile(store: Store, config: Config, targets: Sequence[str]) -> Profile:
    """Profile each target from the store's records.

    Raises:
        ConfigError: an unknown target; XfidError: no target given.
    """
    if not targets:
        raise XfidError("name at least one target to profile, e.g. `xfid profile a100-sxm`")
    for t in targets:
        config.target(t)
    gathered = [gather(store, config, t) for t in dict.fromkeys(targets)]
    entries = [target_profile(store, config, g) for g in gathered]
    for e, other in zip(entries, across(gathered, config), strict=True):
        e["transfer_across"] = other
    return Profile(entries)


def target_profile(store: Store, config: Config, g: Gathered) -> dict[str, Any]:
    """One target's entry of the profile document."""
    tgt = config.target(g.target)
    notes: list[str] = []
    if tgt.invented:
        notes.append(f"{g.target} is an invented example target: {tgt.note or 'not a real chip'}")
    if g.fidelity is None:
        notes.append("no measured (or simulated) numbers for this target in the store")
    elif g.fidelity != "measured":
        notes.append(f"no measured numbers: what is achieved comes from {g.fidelity} (a simulation), not hardware")
    isolated = [o for o in g.observations if o.co_runner is None]
    if g.fidelity is not None and not g.observations:
        n = sum(u["n"] for u in g.unbounded)
        notes.append(f"no {g.fidelity} number has a roofline bound ({n} not profiled: see the conditions)")
    if g.observations and not isolated:
        notes.append("every run has a co-runner: no isolated numbers to profile")
    tol = float(engine_settings(config)["bound_tolerance"])
    return {"target": g.target, "fidelity": g.fidelity, "caveats": notes,
            "classes": classes(isolated, tgt, tol),
            "counters_without_bound": counters_without_bound(g.unbounded),
            "transfer": transfer(store, config, g.target, g.fidelity, isolated),
            "interference": interference(g.observations),
            "conditions": conditions(g, tgt)}


def _bucket_order(b: str) -> tuple[int, float]:
    m = re.match(r"^1e(-?\d+)-", b)
    return (0 if b.endswith("FLOP") else 1, float(m.group(1)) if m else float("inf"))


def classes(obs: Sequence[Observation], tgt: Any, bound_tol: float) -> list[dict[str, Any]]:
    """Achieved fraction of bound and of peak per op class x precision x size bucket x limiter."""
    groups: dict[tuple[str, str, str, str], list[Observation]] = defaultdict(list)
    for o in obs:
        groups[(o.op_class, o.precision, o.size_bucket, o.limiter)].append(o)
    out = []
    for (oc, prec, size, lim) in sorted(groups, key=lambda k: (k[0], k[1], _bucket_order(k[2]), k[3])):
        part = groups[(oc, prec, size, lim)]
        fb = summarize([o.fraction_of_bound for o in part])
        peaks = [o.fraction_of_peak for o in part if o.fraction_of_peak is not None]
        fp = summarize(peaks)
        cav = caveats(len(part), fb)
        if peaks and len(peaks) < len(part):
            cav.append(f"fraction of peak from {len(peaks)} of {len(part)} numbers (the others' bounds do not say their work)")
        if fb["median"] is not None and fb["median"] > 1 + bound_tol:
            cav.append("faster than the roofline bound: check the bound's inputs (a bound violation)")
        sp = spread(part)
        if sp and fb["ci"] and sp["median"] > (fb["ci"][1] - fb["ci"][0]) / 2 / max(fb["median"] or 1, 1e-12):
            cav.append(f"runs of the same op vary by {sp['median']:.1%} (more than the CI's half-width)")
        kinds = sorted({o.peak_kind for o in part if o.peak_kind != "none"})
        out.append({"op_class": oc, "precision": prec, "size_bucket": size, "limiter": lim, "n": len(part),
                    "fraction_of_bound": fb, "fraction_of_peak": fp,
                    "peak": _peak(kinds, tgt, prec), "limits": limits(part, lim, fb["median"]),
                    "measurement_spread": sp, "caveats": cav, "evidence": evidence(part)})
    return out


def _peak(kinds: list[str], tgt: Any, prec: str) -> dict[str, Any] | None:
    """The data-sheet figure a class's fraction of peak is taken of (None: the bounds do not say)."""
    if not kinds:
        return None
    k = kinds[0]
    if k == "peak_flops":
        return {"kind": f"peak_flops.{prec}", "value": tgt.peak_flops.get(prec), "unit": "FLOP/s"}
    if k == "interconnect_bw":
        return {"kind": k, "value": tgt.interconnect_bw, "unit": "B/s"}
    return {"kind": k, "value": tgt.mem_bw if k == "mem_bw" else None, "unit": "B/s"}


def _verdict(o: Observation) -> tuple[str, str] | None:
    c = o.counters
    mem = c.get("dram_throughput", c.get("memory_throughput"))
    sm = c.get("sm_throughput")
    if (mem is None and sm is None) or not (o.limiter == "compute" or o.limiter.startswith("memory")):
        return None  # counters speak of SM and DRAM, not of an interconnect or a block's cycles
    says = "memory" if o.limiter.startswith("memory") else "compute"
    own, other = (mem, sm) if says == "memory" else (sm, mem)
    other_name = "compute" if says == "memory" else "memory"
    if own is not None and own >= BUSY:
        return "agrees", f"ncu agrees: {says}-bound"
    if other is not None and other >= BUSY:
        return "disagrees", f"ncu shows {other_name}-bound where the roofline says {says}"
    if mem is None or sm is None:
        missing = "DRAM" if mem is None else "SM"
        return "incomplete", f"ncu: not bound by the unit it measured; no {missing} throughput to tell more"
    return "neither", "neither bound: latency or occupancy limited"


def limits(part: Sequence[Observation], limiter: str, frac: float | None) -> dict[str, Any]:
    """What limits the class: the roofline's limiter and, with counters, whether Nsight Compute agrees."""
    with_c = [(o, v) for o in part if (v := _verdict(o)) is not None]
    out: dict[str, Any] = {"roofline": limiter, "ncu": None, "verdict": "", "agrees": None}
    if with_c:
        med = {k: float(np.median(vals)) for k in ("sm_throughput", "dram_throughput", "memory_throughput",
                                                   "achieved_occupancy")
               if (vals := [o.counters[k] for o, _ in with_c if k in o.counters])}
        out["ncu"] = {"n": len(with_c), **med}
        (label, text), k = Counter(v for _, v in with_c).most_common(1)[0]
        shown = ", ".join(f"{n.replace('_', ' ')} {v:.0%}" for n, v in med.items())
        out["verdict"] = f"{text} ({k} of {len(with_c)} with counters; median {shown})"
        out["agrees"] = label == "agrees"
    elif frac is not None and frac < FAR:
        out["verdict"] = (f"latency, launch or occupancy limited: at {frac:.0%} of the roofline's {limiter} bound "
                          "(no counters to tell which)")
    elif frac is not None:
        out["verdict"] = f"{limiter}-bound (roofline; no counters)"
    return out


def counters_without_bound(unbounded: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kernels with Nsight Compute counters but no roofline bound: what the counters alone say."""
    out = []
    for u in unbounded:
        c = u.get("counters") or {}
        mem, sm = c.get("dram_throughput", c.get("memory_throughput")), c.get("sm_throughput")
        if u["metric"] != "latency" or (mem is None and sm is None):
            continue
        if mem is not None and mem >= BUSY:
            verdict = "memory-bound by ncu"
        elif sm is not None and sm >= BUSY:
            verdict = "compute-bound by ncu"
        elif mem is None or sm is None:
            verdict = f"not bound by the unit measured; no {'DRAM' if mem is None else 'SM'} throughput to tell more"
        else:
            verdict = "neither bound: latency or occupancy limited"
        shown = ", ".join(f"{k.replace('_', ' ')} {v:.0%}" for k, v in sorted(c.items()))
        out.append({"op_class": op_class(u["op"]), "op": u["op"], "workload": u["workload"], "counters": c,
                    "verdict": f"{verdict} ({shown})",
                    "evidence": [{"role": "measured", "source_path": u["source_path"], "source_loc": u["source_loc"]}]})
    return out


def transfer(store: Store, config: Config, target: str, fid: str | None,
             obs: Sequence[Observation]) -> list[dict[str, Any]]:
    """Cross-validated error of the roofline before and after calibration, per op class."""
    from xfid.engine import calibrate

    obs = [o for o in obs if o.op and o.metric in ("latency", "cycles")]
    if fid is None or not obs:
        return []
    rows = pd.DataFrame({
        "target": target, "candidate": "roofline", "reference": fid, "kind": "ok",
        "workload": [o.workload for o in obs], "op": [o.op for o in obs], "metric": [o.metric for o in obs],
        "stat": [o.stat for o in obs], "candidate_value": [o.bound for o in obs],
        "reference_value": [o.value for o in obs],
        "rel_error": [(o.bound - o.value) / o.value for o in obs],
        "log_ratio": [float(np.log(o.bound / o.value)) for o in obs],
        "candidate_config": [json.dumps({"limiter": o.limiter}) for o in obs]})
    try:
        res = calibrate(store, config, "roofline", fid, target, rows=rows, with_predictions=False)
    except XfidError:
        return []
    cal = res.rows
    out = []
    by: dict[str, list[int]] = defaultdict(list)
    for i in cal.index:
        by[obs[i].op_class].append(i)
    for oc in sorted(by):
        idx = by[oc]
        part = [obs[i] for i in idx]
        before = summarize(cal.loc[idx, "ape_before"].tolist(), "mean")
        after = summarize(cal.loc[idx, "ape_after"].tolist(), "mean")
        o0 = part[0]
        tol = config.tolerance_for("roofline", fid, o0.metric, o0.op, o0.stat).rel
        sp = spread(part)
        transfers, verdict = transfer_verdict(len(idx), after, tol, sp)
        out.append({"op_class": oc, "n": len(idx), "cv_method": res.summary["cv_method"],
                    "error_before": before, "error_after": after, "tolerance": tol,
                    "measurement_spread": sp, "transfers": transfers, "verdict": verdict,
                    "caveats": caveats(len(idx), after, "mean", absolute=True), "evidence": evidence(part)})
    return out


def interference(obs: Sequence[Observation]) -> list[dict[str, Any]]:
    """Slowdown of runs with a co-runner over the median of isolated runs of the same key."""
    iso: dict[tuple[str, str, str, str], list[Observation]] = defaultdict(list)
    for o in obs:
        if o.co_runner is None:
            iso[o.key].append(o)
    groups: dict[tuple[str, str], list[tuple[Observation, float, list[Observation]]]] = defaultdict(list)
    unpaired: Counter[tuple[str, str]] = Counter()
    for o in obs:
        if o.co_runner is None:
            continue
        base = iso.get(o.key)
        if not base:
            unpaired[(o.op_class, o.co_runner)] += 1
            continue
        groups[(o.op_class, o.co_runner)].append((o, o.value / float(np.median([b.value for b in base])), base))
    out = []
    for key in sorted(set(groups) | set(unpaired)):
        part = groups.get(key, [])
        s = summarize([x for _, x, _ in part])
        cav = caveats(len(part), s)
        if unpaired[key]:
            cav.append(f"{unpaired[key]} run(s) with this co-runner have no isolated run of the same key")
        ev = evidence([o for o, _, _ in part])
        ev = [dict(e, role="interfered") for e in ev if e["role"] == "measured"]
        ev += [dict(e, role="isolated") for e in evidence([b for _, _, bs in part for b in bs]) if e["role"] == "measured"]
        out.append({"op_class": key[0], "co_runner": key[1], "n": len(part), "slowdown": s,
                    "caveats": cav, "evidence": ev})
    return out


def _distinct(values: Sequence[str], limit: int = 8) -> list[dict[str, Any]]:
    c = Counter(v for v in values if v)
    return [{"value": v, "n": n} for v, n in c.most_common(limit)]


def _is_condition(key: str) -> bool:
    """A configuration key naming a power limit, clock, frequency or TDP (not an id of one)."""
    return bool(_CONDITION_KEY.search(key)) and not key.endswith("_id")


def conditions(g: Gathered, tgt: Any) -> dict[str, Any]:
    """Hardware, software, power/clocks and configuration behind the numbers; what was left out and why."""
    obs = g.observations
    power: dict[str, Counter[str]] = defaultdict(Counter)
    conf: dict[str, Counter[str]] = defaultdict(Counter)
    for o in obs:
        for k, v in o.config.items():
            if not _is_condition(k) and k not in _SHAPE_KEYS:  # power and clocks: from every record below
                conf[k][json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)] += 1
    df = g.records
    if g.fidelity is not None and len(df):
        mine = df[df["fidelity"] == g.fidelity]
        for text, n in mine["config"].astype(object).dropna().value_counts().items():
            for k, v in config_of(text).items():  # e.g. nvidia-smi's power_limit_w beside the kernels
                if _is_condition(k):
                    power[k][json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)] += int(n)
        for metric in SAMPLED:
            part = mine[mine["metric"] == metric]
            v = part["value"].dropna()
            if len(v):
                unit = str(part["unit"].iloc[0])
                files = sorted({str(x) for x in part["source_path"].dropna()})
                where = ", ".join(files[:2]) + (f" (+{len(files) - 2} more)" if len(files) > 2 else "")
                power[metric][f"median {float(v.median()):.4g} {unit} over {len(v)} samples in {where}"] += len(v)
    runs = Counter((o.run, o.co_runner or "") for o in obs)
    return {
        "fidelity": g.fidelity,
        "data_sheet": {"peak_flops": dict(tgt.peak_flops), "mem_bw": tgt.mem_bw, "clock_hz": tgt.clock_hz,
                       "interconnect_bw": tgt.interconnect_bw, "tdp_w": tgt.tdp_w, "invented": tgt.invented},
        "hardware": _distinct([o.hardware for o in obs]),
        "software": _distinct([o.software for o in obs]),
        "power_and_clocks": [{"name": k, "values": [{"value": v, "n": n} for v, n in c.most_common(5)]}
                             for k, c in sorted(power.items())],
        "configuration": [{"name": k, "values": [{"value": v, "n": n} for v, n in c.most_common(5)]}
                          for k, c in sorted(conf.items())],
        "runs": [{"run": r, "co_runner": cr or None, "n": n} for (r, cr), n in sorted(runs.items())],
        "sources": sorted({o.source_path for o in obs}),
        "observations": len(obs),
        "interfered": sum(1 for o in obs if o.co_runner is not None),
        "excluded": g.excluded,
        "unbounded": g.unbounded,
        "min_n": MIN_N,
    }
