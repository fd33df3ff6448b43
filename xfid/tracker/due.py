"""Triage due dates: each issue that needs triage gets a triage-by date.

An issue needs triage while nobody has looked at it: state `open` (counted from when it was
first seen) or `reopened` (counted from when it changed to that state, `updated_at`).
Acknowledging, waiving or resolving it triages it. Its triage-by date is that start plus
`[tracker] triage_days` working days (Monday to Friday; default 3); it is overdue from the day
after. Nothing is stored: the date follows from the issue and the setting, so changing the
setting applies to every issue at once.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

TRIAGE_DAYS = 3
"""Default `[tracker] triage_days`: working days to triage a new or reopened issue."""
UNTRIAGED = ("open", "reopened")


def add_working_days(start: date, days: int) -> date:
    """`start` plus `days` working days (Saturday and Sunday skipped); 0 days: `start` itself."""
    d = start
    left = days
    while left > 0:
        d += timedelta(days=1)
        if d.weekday() < 5:
            left -= 1
    return d


def _day(stamp: Any) -> date | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).date()
    except ValueError:
        return None


def annotate(issue: dict[str, Any], days: int, today: date) -> dict[str, Any]:
    """`issue` with `triage_by` (ISO date, or None when it needs no triage) and `overdue`."""
    start = None
    if issue.get("state") == "open":
        start = _day(issue.get("first_seen"))
    elif issue.get("state") == "reopened":
        start = _day(issue.get("updated_at")) or _day(issue.get("last_seen"))
    due = add_working_days(start, days) if start else None
    issue["triage_by"] = due.isoformat() if due else None
    issue["overdue"] = bool(due and today > due)
    return issue
