"""Assemble ReportData from the store and what the checks recorded (the only impure part).

With checks recorded, the report reads them: the latest check's rows, comparisons and op-map
coverage, and its calibration is fitted on those rows; nothing is correlated again. With no
check yet, it correlates once, now, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from xfid import counts
from xfid.config import report_ours
from xfid.errors import ReportError, XfidError
from xfid.report.data import MAX_POINTS, ReportData, count_issues
from xfid.report.headline import bucket_order
from xfid.report.period import Period
from xfid.report.views import (
    build_pairs,
    capability_rows,
    competitive_view,
    fidelity_coverage,
    unmatched_ops,
)

if TYPE_CHECKING:
    from xfid.config import Config
    from xfid.store import Store

TREND_WEEKS = 12
END_TO_END = ["throughput_tokens", "tokens_per_joule", "energy_per_token", "ttft", "itl", "power"]


def _in_targets(d: dict[str, Any], targets: list[str]) -> bool:
    return not targets or d.get("target") in targets


def source_provenance(store: Store, limit: int = 3) -> list[dict[str, Any]]:
    """Manifest rows with the distinct hardware/software/config strings each source recorded."""
    out = [dict(s) for s in store.sources()]
    t = store.read(columns=["source_id", "hardware", "software", "config"])
    df = t.to_pandas().drop_duplicates() if t.num_rows else pd.DataFrame(columns=["source_id"])
    by = {sid: g for sid, g in df.groupby("source_id")} if len(df) else {}
    for s in out:
        g = by.get(s["source_id"])
        for col in ("hardware", "software", "config"):
            vals = [] if g is None else [str(v) for v in g[col].dropna().unique() if str(v)]
            s[col] = vals[:limit] + ([f"(+{len(vals) - limit} more)"] if len(vals) > limit else [])
    return out


@dataclass
class _Basis:
    """What the report's pairs, coverage and calibration come from: one check, or a correlation now."""

    rows: pd.DataFrame
    coverage: pd.DataFrame | None
    settings: dict[str, Any]
    check_id: int | None = None


def _tracker_part(data: ReportData, store: Store, period: Period) -> _Basis | None:
    """Fill counts, pairs and issues from the tracker; None when it has no check up to the period end."""
    from xfid.tracker import Tracker

    tr = Tracker(store)
    prev = period.previous()
    checks = tr.checks(period.since, period.until)
    history = tr.checks(period.until - timedelta(weeks=TREND_WEEKS), period.until)
    if not history:
        return None
    data.checks = checks
    data.counts = count_issues(checks)
    data.prev_counts = count_issues(tr.checks(prev.since, prev.until))
    latest = history[-1]
    if not checks:
        data.caveats.append(f"no check was recorded in {period.span()}; pairs show the last earlier check "
                            f"(#{latest['id']}, {latest['time']})")
    rows = tr.check_rows(latest["id"])
    data.pairs = build_pairs(history, rows, data.targets)
    issues = [i for i in tr.issues() if _in_targets(i, data.targets)]
    data.open_issues = [dict(i) for i in counts.active(issues)]  # the active ones: open, acknowledged, reopened
    resolved_ids = {e["id"] for e in tr.events(period.since, period.until) if e["to_state"] == "resolved"}
    data.resolved_issues = [i for i in issues if i["id"] in resolved_ids]
    data.counts["waived"] = sum(1 for i in issues if i["state"] == "waived") if checks else data.counts["waived"]
    coverage = tr.check_coverage(latest["id"])
    if coverage is None:
        data.caveats.append(f"op-map coverage: check #{latest['id']} was recorded before checks kept it; "
                            "the next `xfid check` records it")
    return _Basis(rows, coverage, latest.get("settings") or {}, latest["id"])


def _live_part(data: ReportData, store: Store, config: Config) -> _Basis:
    """No tracker history: correlate now and show its discrepancies (not tracked: ids are fingerprints)."""
    from xfid.engine import correlate

    corr = correlate(store, config)
    now = data.generated_at.isoformat()
    comps = corr.comparisons.astype(object).where(corr.comparisons.notna(), None).to_dict("records")
    data.pairs = build_pairs([{"time": now, "label": "now", "comparisons": comps}], corr.rows, data.targets)
    data.open_issues = [dict(r, id=r["fingerprint"][:8], state="untracked", owner="", first_seen=None, last_seen=now)
                        for r in corr.discrepancies.to_dict("records") if _in_targets(r, data.targets)]
    data.counts = {"active": len(data.open_issues), "new": 0, "reopened": 0, "resolved": 0, "waived": 0}
    data.caveats.append("no `xfid check` has been recorded: numbers come from a correlation run at report time; "
                        "issue counts, ages and trends need the tracker")
    return _Basis(corr.rows, corr.coverage, corr.settings)


def _calibration(data: ReportData, store: Store, config: Config, basis: _Basis) -> list[dict[str, Any]]:
    """Each model->measured pair of a real (not `invented`) target, fitted on the rows the report shows."""
    from xfid.engine import calibrate

    def real(name: str) -> bool:
        t = config.targets.get(name)
        return t is None or not t.invented

    want = sorted({(p.candidate, p.reference, p.target) for p in data.pairs
                   if p.reference == "measured" and p.candidate in ("roofline", "archmodel") and real(p.target)})
    out: list[dict[str, Any]] = []
    for cand, ref, tgt in want:
        try:
            res = calibrate(store, config, cand, ref, tgt, rows=basis.rows, with_predictions=False)
        except XfidError as e:
            out.append({"candidate": cand, "reference": ref, "target": tgt, "error": str(e)})
            continue
        cv = sorted(_records(res.cv), key=lambda v: (str(v.get("group_by")), bucket_order(str(v.get("group")))))
        out.append({"candidate": cand, "reference": ref, "target": tgt,
                    "factors": _records(res.factors), "cv": cv, "summary": dict(res.summary)})
    return out


def _capability(store: Store, config: Config, recs: pd.DataFrame, targets: list[str],
                data: ReportData) -> dict[str, Any]:
    """The capability profile's tables (the same code as `xfid profile`) for each target with
    measured or simulated numbers: the --target ones, else every configured one."""
    from xfid.profile import profile
    from xfid.profile.render import html_context

    have = recs[recs["fidelity"].isin(["measured", "rtl"])]["target"].astype(str).unique()
    names = [t for t in (targets or sorted(have)) if t in config.targets and t in set(have)]
    if not names:
        return {}
    try:
        prof = profile(store, config, names)
    except XfidError as e:
        data.caveats.append(f"capability profile not shown: {e}")
        return {}
    data.capability_rows = capability_rows(prof.targets)
    return html_context(prof, short=True)


def _records(v: Any) -> list[dict[str, Any]]:
    if isinstance(v, pd.DataFrame):
        return v.to_dict("records")
    return [dict(x) if not isinstance(x, dict) else x for x in (v or [])]


def _bound_tolerance(settings: dict[str, Any], config: Config) -> float:
    """The bound tolerance the numbers were judged by: the check's (or correlation's) setting."""
    value = settings.get("bound_tolerance")
    if value is None:  # a check recorded without engine settings: what the engine would use now
        from xfid.engine.pipeline import engine_settings

        value = engine_settings(config)["bound_tolerance"]
    return float(value)


def build_report_data(store: Store, config: Config, period: Period, targets: list[str] | None = None,
                      now: datetime | None = None, max_points: int = MAX_POINTS) -> ReportData:
    """Everything the report shows, read from the store and what its latest check recorded.

    Raises:
        ReportError: an empty store, or nothing to correlate.
    """
    targets = list(targets or [])
    for t in targets:
        config.target(t)  # unknown target: a ConfigError that lists the configured ones
    if not store.sources():
        raise ReportError(f"store {store.root} is empty; ingest files with `xfid ingest` and run `xfid check`")
    data = ReportData(period=period, generated_at=now or datetime.now(UTC), store=str(store.root),
                      config_hash=config.hash(), targets=targets, max_points=max_points)
    basis = _tracker_part(data, store, period) or _live_part(data, store, config)
    data.bound_tolerance = _bound_tolerance(basis.settings, config)
    data.check_id = basis.check_id
    if basis.check_id is not None:  # the tracker's view for a lead: summaries, overdue, moves, stack, stale
        from xfid.report.data import issue_rank
        from xfid.report.triage import gather

        data.triage = gather(store, config, basis.check_id, basis.rows, sorted(data.open_issues, key=issue_rank),
                             data.generated_at.date())
    cols = ["fidelity", "target", "workload", "op", "metric", "stat", "value", "unit", "timestamp"]
    recs = store.read(columns=cols).to_pandas()
    data.ours = report_ours(config)
    # the end-to-end records with their file and row: the attachment traces each competitive cell
    e2e = store.read({"metric": END_TO_END}, columns=[*cols, "source_path", "source_loc"]).to_pandas()
    rivals = [t for t in targets if t not in data.ours]
    data.competitives = [competitive_view(e2e, name, invented=config.targets[name].invented,
                                          note=config.targets[name].note, targets=rivals) for name in data.ours]
    unmatched, total = unmatched_ops(basis.coverage, limit=None)  # all: the attachment lists every one
    data.coverage = {"unmatched": unmatched, "unmatched_total": total,
                     "fidelities": fidelity_coverage(recs, targets)}
    data.calibration = _calibration(data, store, config, basis)
    data.capability = _capability(store, config, recs, targets, data)
    data.sources = source_provenance(store)
    for name in data.ours:
        if config.targets[name].invented:
            data.caveats.append(f"{name} is an invented example target: {config.targets[name].note or 'not a real chip'}")
    return data
