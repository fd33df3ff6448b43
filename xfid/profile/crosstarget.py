"""Transfer across targets: roofline efficiency factors fitted on one target, applied to another."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from xfid.config import Config
from xfid.profile.observe import Gathered, Observation, evidence
from xfid.profile.stats import caveats, summarize, transfer_verdict

Factors = dict[tuple[str, str], float]


def _usable(g: Gathered) -> list[Observation]:
    return [o for o in g.observations if o.co_runner is None and o.op and o.metric in ("latency", "cycles")]


def fit(obs: Sequence[Observation]) -> Factors:
    """Geometric mean of measured/bound per (op class, limiter), per op class, per limiter, overall
    (the calibration's rule, on the profile's op classes)."""
    logs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for o in obs:
        x = math.log(o.value / o.bound)
        for key in ((o.op_class, o.limiter), (o.op_class, "*"), ("*", o.limiter), ("*", "*")):
            logs[key].append(x)
    return {k: math.exp(sum(v) / len(v)) for k, v in logs.items()}


def factor_for(f: Factors, oc: str, limiter: str) -> tuple[float, str]:
    """The most specific factor and what it was fitted on."""
    for key, what in (((oc, limiter), f"{oc}/{limiter}"), ((oc, "*"), oc), (("*", limiter), limiter),
                      (("*", "*"), "all classes")):
        if key in f:
            return f[key], what
    return 1.0, "none"


def across(gathered: Sequence[Gathered], config: Config) -> list[list[dict[str, Any]]]:
    """For each target: per op class, the error of the roofline calibrated on each other target."""
    usable = [_usable(g) for g in gathered]
    fits = [fit(u) if u else None for u in usable]
    out: list[list[dict[str, Any]]] = []
    for b, (gb, obs_b) in enumerate(zip(gathered, usable, strict=True)):
        rows: list[dict[str, Any]] = []
        for a, ga in enumerate(gathered):
            f = fits[a]
            if a == b or f is None or not obs_b or ga.fidelity != gb.fidelity:
                continue  # measured factors say nothing about a simulation's cycles, and the other way
            by: dict[str, list[Observation]] = defaultdict(list)
            for o in obs_b:
                by[o.op_class].append(o)
            for oc in sorted(by):
                part = by[oc]
                used = {factor_for(f, o.op_class, o.limiter)[1] for o in part}
                before = summarize([abs(o.bound - o.value) / o.value for o in part], "mean")
                after = summarize([abs(o.bound * factor_for(f, o.op_class, o.limiter)[0] - o.value) / o.value
                                   for o in part], "mean")
                tol = config.tolerance_for("roofline", gb.fidelity or "measured", part[0].metric, part[0].op,
                                           part[0].stat).rel
                transfers, verdict = transfer_verdict(len(part), after, tol, None,
                                                      f"error after calibration on {ga.target}")
                rows.append({"calibrated_on": ga.target, "op_class": oc, "n": len(part), "factors": sorted(used),
                             "error_before": before, "error_after": after, "tolerance": tol,
                             "transfers": transfers, "verdict": verdict,
                             "caveats": caveats(len(part), after, "mean", absolute=True),
                             "evidence": evidence(part)})
        out.append(rows)
    return out
