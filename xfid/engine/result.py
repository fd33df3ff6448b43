"""What every engine does before it reads and after it has aggregated: `begin()` and `finish()`.

Both engines (the local one, xfid.engine.pipeline, and Spark, xfid.engine.spark.engine) call
these, so a result's settings, per-pair info, discrepancies and violation ids are built once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

from xfid.config import DEFAULT_BOUND_TOLERANCE, Config
from xfid.engine.aggregate import with_violation_ids
from xfid.engine.contract import Correlation
from xfid.engine.pairrows import Pair
from xfid.engine.pairs import parse_as_of, parse_run
from xfid.engine.request import Request
from xfid.engine.rows import discrepancies
from xfid.engine.selection import ADDITIVE
from xfid.engine.stats import BOOTSTRAP_EXACT_MAX_N, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from xfid.store import Store

SKIPPED = "a fidelity of the pair has no records"
"""`settings.pairs[i].skipped` of a pair that was not aligned."""


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


@dataclass(frozen=True)
class Start:
    """A request checked against the config: the engine settings, the parsed run preference
    (`{fidelity or '*': run}`) and the as-of time (a UTC Timestamp)."""

    settings: dict[str, Any]
    runs: dict[str, str] | None
    as_of: pd.Timestamp | None

    @property
    def as_of_datetime(self) -> datetime | None:
        """The as-of time as the selection takes it."""
        return self.as_of.to_pydatetime() if self.as_of is not None else None


def begin(config: Config, req: Request) -> Start:
    """Check the request's targets and parse its runs and as-of time, before anything is read.

    Raises:
        ConfigError: an unknown target (the configured ones listed); EngineError: a malformed run or date.
    """
    for t in req.targets:
        if t not in config.targets:
            config.target(t)  # raises a ConfigError listing the configured targets
    settings = engine_settings(config)
    if req.exclude_keys:  # the keys of invalid issues: the aggregate leaves their rows out
        settings["excluded_keys"] = [list(k) for k in req.exclude_keys]
    return Start(settings, parse_run(req.runs), parse_as_of(req.as_of))


def pair_info(p: Pair, settings: dict[str, Any]) -> dict[str, Any]:
    """What `settings.pairs` says of a pair before its counts are added."""
    bounds = p.bounds or (settings["roofline_tolerance"] if p.candidate in settings["bound_fidelities"] else None)
    return {"candidate": p.candidate, "reference": p.reference, "origin": p.origin, "convert": p.convert,
            "bounds": bounds}


@dataclass
class Selection:
    """What `finish` needs of an engine's selection: the targets it holds (sorted, and in the
    order their clocks are listed), its counts and coverage."""

    targets: list[str]
    counts: dict[str, Any]
    coverage: pd.DataFrame
    clock_targets: Sequence[str] = ()


@dataclass
class Aligned:
    """What an engine's align step gives finish(): the selection's summary, the pairs, per pair
    the alignment's counts (`counts[i]` for the pairs that were aligned, the others skipped), the
    rows (every row, or those an engine brings back) and the engine's own settings entries."""

    selection: Selection
    pairs: list[Pair]
    counts: dict[int, dict[str, int]]
    rows: pd.DataFrame
    extra: dict[str, Any] = field(default_factory=dict)
    violations: pd.DataFrame | None = None
    """When the discrepancies did not come back (written to Parquet): the bound violations'
    fields that name them in the comparisons (xfid.engine.spark.output.VIOLATION_COLUMNS)."""


def finish(store: Store, config: Config, req: Request, start: Start, aligned: Aligned,
           comparisons: pd.DataFrame) -> Correlation:
    """The Correlation of an engine's aligned rows and comparisons: the discrepancies (sorted),
    the bound aggregates' violation ids, per pair its info and counts, the settings (plus the
    engine's `extra`) and the sources."""
    sel, pairs, counts, rows = aligned.selection, aligned.pairs, aligned.counts, aligned.rows
    disc = discrepancies(rows, req.include_missing)
    info = []
    for i, p in enumerate(pairs):
        d = pair_info(p, start.settings)
        if i in counts:
            d.update(counts[i])
        else:
            d["skipped"] = SKIPPED
        info.append(d)
    out_settings = result_settings(config, start, req, targets=list(req.targets) or sel.targets, pairs=pairs,
                                   pair_info=info, counts=sel.counts,
                                   clock_targets=sel.clock_targets or sel.targets)
    out_settings.update(aligned.extra)
    named = disc if aligned.violations is None else aligned.violations
    return Correlation(rows, with_violation_ids(comparisons, named), disc, sel.coverage, result_sources(store),
                       config.hash(), out_settings)


def result_settings(config: Config, start: Start, req: Request, *, targets: list[str], pairs: Sequence[Pair],
                    pair_info: list[dict[str, Any]], counts: dict[str, Any],
                    clock_targets: Iterable[str]) -> dict[str, Any]:
    """`Correlation.settings`: what a result was computed with; `clock_hz` names the configured
    clocks of `clock_targets` when a pair converts cycles."""
    settings = start.settings
    clocks = {t: config.targets[t].clock_hz for t in clock_targets if t in config.targets}
    return {
        **settings, "run": start.runs, "as_of": start.as_of.isoformat() if start.as_of is not None else None,
        "targets": targets, "pairs": pair_info,
        "clock_hz": {t: c for t, c in clocks.items() if any(p.convert for p in pairs)},
        "counts": counts, "additive_metrics": sorted(ADDITIVE), "op_map_rules": len(config.op_maps),
        "kendall": req.kendall, "bootstrap": req.bootstrap, "fingerprints": req.fingerprints,
        "provenance": req.provenance,
        "ci_method": (f"percentile bootstrap, {settings['bootstrap_resamples']} resamples, seed "
                      f"{settings['bootstrap_seed']}, exact up to n={settings['bootstrap_exact_max_n']}, "
                      "normal approximation of the bootstrap above") if req.bootstrap else None,
    }


def result_sources(store: Store) -> list[dict[str, Any]]:
    """`Correlation.sources`: every source of the store, as a result names it."""
    return [{"source_id": s["source_id"], "path": s["path"], "adapter": s["adapter"],
             "content_hash": s["content_hash"]} for s in store.sources()]
