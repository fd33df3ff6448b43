"""ReportData: the plain object a report is rendered from, and the pure helpers that shape it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

from xfid.engine.align import BOUND_RANK, MISMATCH_RANK
from xfid.report.period import Period

COUNT_KEYS = ("active", "new", "reopened", "resolved", "waived")
"""`active`: open, acknowledged or reopened at the period's last check (xfid.counts)."""
KIND_RANK = {"bound_violation": 0, "config_mismatch": 1, "over_tolerance": 2, "missing_reference": 3, "ok": 9}
SEVERITY_RANK = {"critical": 0, "high": 1, "major": 1, "medium": 2, "minor": 3, "low": 3, "info": 4}
FIDELITY_ORDER = ("roofline", "archmodel", "rtl", "measured")
MAX_NAME = 44
MAX_POINTS = 5000


@dataclass
class PairSection:
    """One comparison pair: a target, candidate→reference fidelities, one metric and stat."""

    target: str
    candidate: str
    reference: str
    metric: str
    stat: str
    unit: str = ""
    n: int = 0
    mape: float | None = None
    mape_ci: list[float] | None = None
    bias: float | None = None
    spearman: float | None = None
    kendall: float | None = None
    within_tolerance: float | None = None
    prev_mape: float | None = None
    tolerance: float | None = None
    trend: list[tuple[str, float]] = field(default_factory=list)  # (check label, MAPE or achieved), oldest first
    trend_times: list[str] = field(default_factory=list)  # each trend point's check time (ISO), for a date axis
    rows: pd.DataFrame | None = None  # workload, op, candidate_value, reference_value, rel_error, kind, ...
    compared_as: str = "estimate"  # "bound": the candidate bounds the reference (no MAPE, bias, within)
    violations: int | None = None  # a bound's rows beyond it
    violation_worst: float | None = None  # the largest achieved fraction among them
    violation_fingerprints: list[str] = field(default_factory=list)  # worst first
    achieved_median: float | None = None  # the fraction of the bound achieved (<= 1 while it holds)
    achieved_q1: float | None = None
    achieved_q3: float | None = None
    achieved_ci: list[float] | None = None  # 95% CI of the median (seeded bootstrap)
    prev_violations: int | None = None
    prev_achieved: float | None = None

    @property
    def key(self) -> str:
        """Stable anchor text for the pair."""
        return f"{self.target} {self.candidate}→{self.reference} {self.metric}/{self.stat}"

    @property
    def is_bound(self) -> bool:
        """The candidate is a bound on the reference (a roofline), not an estimate of it."""
        return self.compared_as == "bound"

    @property
    def trend_word(self) -> str:
        """better / worse / flat / new: an estimate's MAPE, a bound's violations, against the
        previous check."""
        if self.is_bound:
            if self.violations is None or self.prev_violations is None:
                return "new"
            return "flat" if self.violations == self.prev_violations else (
                "better" if self.violations < self.prev_violations else "worse")
        if self.mape is None or self.prev_mape is None:
            return "new"
        d = self.mape - self.prev_mape
        if abs(d) < 0.005:
            return "flat"
        return "better" if d < 0 else "worse"

    def violation_names(self, ids: dict[str, str]) -> list[str]:
        """The bound violations by the tracker's XF id (`ids`: fingerprint -> id), else the
        fingerprint's first 8 characters (a violation the tracker has not filed)."""
        return [ids.get(fp) or fp[:8] for fp in self.violation_fingerprints]


@dataclass
class ReportData:
    """Everything a report shows, already chosen and counted; renderers only lay it out."""

    period: Period
    generated_at: datetime
    store: str = ""
    config_hash: str = ""
    targets: list[str] = field(default_factory=list)  # filter given with --target, empty = all
    counts: dict[str, int] = field(default_factory=dict)
    prev_counts: dict[str, int] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)  # checks in the period
    pairs: list[PairSection] = field(default_factory=list)
    open_issues: list[dict[str, Any]] = field(default_factory=list)
    resolved_issues: list[dict[str, Any]] = field(default_factory=list)
    ours: list[str] = field(default_factory=list)  # [report] ours: the team's own target(s)
    competitives: list[dict[str, Any]] = field(default_factory=list)  # views.competitive_view, one per own target
    calibration: list[dict[str, Any]] = field(default_factory=list)
    capability: dict[str, Any] = field(default_factory=dict)  # xfid.profile.render.html_context(short=True)
    capability_rows: list[dict[str, Any]] = field(default_factory=list)  # views.capability_rows: compact, sorted
    check_id: int | None = None  # the check whose rows the pairs show (None: a correlation at report time)
    coverage: dict[str, Any] = field(default_factory=dict)
    sources: list[dict[str, Any]] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    max_points: int = MAX_POINTS
    seed: int = 0
    bound_tolerance: float | None = None  # the relative slack a bound had in the check shown
    triage: dict[str, Any] = field(default_factory=dict)  # xfid.report.triage.gather: summaries, overdue, moved...

    @property
    def competitive(self) -> dict[str, Any]:
        """The first own target's competitive view ({} when `[report] ours` is empty)."""
        return self.competitives[0] if self.competitives else {}

    @property
    def worst(self) -> list[dict[str, Any]]:
        """The five worst open discrepancies (bound violations first, then severity, then error)."""
        return sorted(self.open_issues, key=issue_rank)[:5]


FACTOR_LEGEND = ("factor: how far off, |error| ÷ tolerance (a bound violation: ÷ the bound tolerance). The "
                 "tracker's severity is that factor plus a rank for the kind (bound violation + 1000, config "
                 "mismatch + 100): a sort key, not a size.")


def issue_factor(issue: dict[str, Any]) -> float | None:
    """An issue's factor: its own, else its severity less the rank its kind adds (see FACTOR_LEGEND)."""
    f = issue.get("factor")
    if isinstance(f, (int, float)) and not isinstance(f, bool) and math.isfinite(f):
        return float(f)
    sev = issue.get("severity")
    if isinstance(sev, bool) or not isinstance(sev, (int, float)) or not math.isfinite(sev):
        return None
    rank = {"bound_violation": BOUND_RANK, "config_mismatch": MISMATCH_RANK}.get(str(issue.get("kind")), 0.0)
    return float(sev) - rank if sev >= rank else float(sev)


def _sev_rank(sev: Any) -> float:
    if isinstance(sev, (int, float)) and not isinstance(sev, bool):
        return -float(sev)  # a numeric severity: higher is worse
    return float(SEVERITY_RANK.get(str(sev).lower(), 5))


def issue_rank(issue: dict[str, Any]) -> tuple[float, float, float]:
    """Sort key: most severe first."""
    err = issue.get("rel_error")
    mag = abs(err) if isinstance(err, (int, float)) and math.isfinite(err) else 0.0
    return (KIND_RANK.get(str(issue.get("kind")), 5), _sev_rank(issue.get("severity")), -mag)


def op_class(op: str) -> str:
    """The op without layer index or size parameters: `layer3.attn.qkv_proj` → `attn.qkv_proj`."""
    if not op:
        return "(end-to-end)"
    s = re.sub(r"\[.*?\]", "", op)
    s = re.sub(r"(^|\.)(layer|layers|block|blk|h)\.?\d+(?=\.|$)", r"\1", s)
    s = re.sub(r"\.\d+(?=\.|$)", "", s).strip(".")
    return s or op


def shorten(name: str, limit: int = MAX_NAME) -> str:
    """A long kernel/op name cut in the middle with an ellipsis; short names unchanged."""
    if len(name) <= limit:
        return name
    head = (limit - 1) * 2 // 3
    tail = limit - 1 - head
    return name[:head] + "…" + name[-tail:]


def age_days(first_seen: Any, now: datetime) -> int | None:
    """Whole days since an issue was first seen (None when the date is unknown)."""
    if first_seen in (None, ""):
        return None
    try:
        ts = pd.Timestamp(first_seen)
    except (ValueError, TypeError):
        return None
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")
    return max(0, (pd.Timestamp(now) - ts).days)


def count_issues(checks: list[dict[str, Any]]) -> dict[str, int]:
    """Counts for a period from its checks: new/reopened/resolved summed, active/waived as of the last."""
    out = dict.fromkeys(COUNT_KEYS, 0)
    if not checks:
        return out
    ordered = sorted(checks, key=lambda c: str(c.get("time", "")))
    for c in ordered:
        k = c.get("counts") or {}
        for key in ("new", "reopened", "resolved"):
            out[key] += int(k.get(key, 0) or 0)
    last = ordered[-1].get("counts") or {}
    out["active"] = int(last.get("total_open", last.get("still_open", 0)) or 0)
    out["waived"] = int(last.get("waived", 0) or 0)
    return out


def sample_rows(rows: pd.DataFrame, limit: int, seed: int) -> pd.DataFrame:
    """At most `limit` rows, seeded; discrepancies are kept before ok rows so outliers show."""
    if len(rows) <= limit:
        return rows
    bad = rows[rows["kind"] != "ok"] if "kind" in rows else rows.iloc[:0]
    if len(bad) >= limit:
        return bad.sample(limit, random_state=seed)
    good = rows.drop(bad.index).sample(limit - len(bad), random_state=seed)
    return pd.concat([bad, good])


def long_names(data: ReportData) -> list[tuple[str, str]]:
    """(shortened, full) for every workload/op name the report shortens, for the appendix."""
    seen: dict[str, str] = {}
    names: list[str] = []
    for i in [*data.open_issues, *data.resolved_issues]:
        names += [str(i.get("workload") or ""), str(i.get("op") or "")]
    for p in data.pairs:
        if p.rows is not None and len(p.rows):
            names += list(map(str, p.rows["workload"].unique())) + list(map(str, p.rows["op"].unique()))
    names += [str(u.get("raw_op") or "") for u in data.coverage.get("unmatched", [])]
    names += [str(r.get("workload") or "") for r in data.coverage.get("fidelities", [])]
    names += [str(r.get("workload") or "") for c in data.competitives for r in c.get("rows", [])]
    for n in names:
        if len(n) > MAX_NAME and n not in seen:
            seen[n] = shorten(n)
    return sorted(((s, f) for f, s in seen.items()), key=lambda x: x[1])


def pair_key(d: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """(target, candidate, reference, metric, stat) of a comparison or row dict."""
    return (str(d["target"]), str(d["candidate"]), str(d["reference"]), str(d["metric"]), str(d["stat"]))


def is_missing(v: Any) -> bool:
    """None or NaN."""
    return v is None or (isinstance(v, float) and math.isnan(v))
