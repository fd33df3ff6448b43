"""The report's triage part: what the tracker says a lead should look at first.

Summaries of what the latest check filed (issues grouped by probable common cause), issues past
their triage-by date, which side moved for issues whose error jumped between checks, rows held
as measured on another software stack, and keys or sources that stopped reporting. Each comes
from the tracker module that defines it (xfid.tracker.summaries, due, stack, stale and
xfid.drift.history); this module only gathers them for one check.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from xfid.errors import XfidError

if TYPE_CHECKING:
    import pandas as pd

    from xfid.config import Config
    from xfid.store import Store
    from xfid.tracker import Tracker

MAX_MOVED = 40
"""Issues whose moves the report looks up (the worst first, as the PDF's register lists them)."""


def _where(config: Config) -> str:
    return str(config.path or "bundled xfid.toml")


def summaries(tr: Tracker, config: Config, check_id: int) -> list[dict[str, Any]]:
    """The latest check's summaries (xfid.tracker.summaries), largest first."""
    from xfid.tracker.summaries import SummarySettings

    return tr.summaries(check_id, SummarySettings.from_config(config.section("tracker"), _where(config)))


def overdue(issues: list[dict[str, Any]], config: Config, today: date) -> list[dict[str, Any]]:
    """Active issues past their triage-by date (`[tracker] triage_days`), the longest waiting first."""
    from xfid.tracker.due import TRIAGE_DAYS, annotate

    days = config.section("tracker").get("triage_days", TRIAGE_DAYS)
    late = [annotate(dict(i), days, today) for i in issues]
    return sorted((i for i in late if i["overdue"]), key=lambda i: (i["triage_by"], str(i["id"])))


def moved(tr: Tracker, config: Config, issues: list[dict[str, Any]], checks: list[dict[str, Any]]) -> dict[str, str]:
    """{issue id: 'moved: reference — measured run r7 -> r8, ...'} for the issues whose error
    jumped at the latest move of their series (xfid.drift.history.moves). Each check's rows are
    read once for all issues."""
    from xfid.drift.history import MIN_CHANGE, describe_move, moves, series_point

    want = {str(i["fingerprint"]): str(i["id"]) for i in issues[:MAX_MOVED] if i.get("fingerprint")}
    if not want:
        return {}
    series: dict[str, list[dict[str, Any]]] = {fp: [] for fp in want}
    for chk in sorted(checks, key=lambda c: c["id"]):
        rows = tr.check_rows(chk["id"])
        if rows is None or not len(rows) or "fingerprint" not in rows:
            continue
        hit = rows[rows["fingerprint"].isin(list(want))].drop_duplicates("fingerprint")
        for r in hit.to_dict("records"):
            series[str(r["fingerprint"])].append(series_point(chk, str(r["fingerprint"]), r))
    step = config.section("drift").get("error_abs", MIN_CHANGE)
    out = {}
    for fp, pts in series.items():
        ms = moves(pts, step)
        if ms:
            out[want[fp]] = f"check {ms[-1]['check_id']}: {describe_move(ms[-1])}"
    return out


def gather(store: Store, config: Config, check_id: int, rows: pd.DataFrame | None,
           issues: list[dict[str, Any]], today: date) -> dict[str, Any]:
    """Everything the report's triage part shows for one check. A part that cannot be read (a
    damaged check file, a bad setting) is left out with the reason in `errors`, never the report."""
    from xfid.tracker import Tracker
    from xfid.tracker.stack import headline as stack_headline
    from xfid.tracker.stale import StaleSettings, find

    tr = Tracker(store)
    out: dict[str, Any] = {"summaries": [], "overdue": overdue(issues, config, today), "moved": {},
                           "stack": stack_headline(rows), "stale": {}, "errors": []}
    for name, part in (("summaries", lambda: summaries(tr, config, check_id)),
                       ("moved", lambda: moved(tr, config, issues, tr.checks())),
                       ("stale", lambda: find(tr, check_id, StaleSettings.from_config(config)))):
        try:
            out[name] = part()
        except XfidError as e:
            out["errors"].append(f"{name}: {e}")
    return out


def sentences(t: dict[str, Any]) -> list[str]:
    """Page-1 sentences on triage: summaries, overdue, stack, stale (none when all are empty)."""
    out = []
    grouped = [s for s in t.get("summaries", []) if s["cause"]["kind"] != "single"]
    if grouped:
        top = grouped[0]
        out.append(f"{len(t['summaries'])} summaries of what the latest check filed; the largest, {top['id']}, "
                   f"groups {top['n_issues']} issues: {top['cause']['text']}.")
    late = t.get("overdue", [])
    if late:
        ids = ", ".join(str(i["id"]) for i in late[:5]) + (" …" if len(late) > 5 else "")
        out.append(f"{len(late)} active issue(s) past their triage-by date ({ids}; the oldest was due "
                   f"{late[0]['triage_by']}).")
    if t.get("stack"):
        out.append(f"Stack changed: {t['stack']}.")
    stale = t.get("stale") or {}
    if stale.get("keys") or stale.get("sources"):
        out.append(f"Stopped reporting (stale, not filed): {len(stale.get('sources', []))} source(s), "
                   f"{len(stale.get('keys', []))} key(s).")
    return out
