"""The issue state machine: states, manual actions, automatic events, and argument checks."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from xfid.errors import TrackerError

STATES: tuple[str, ...] = ("open", "acknowledged", "resolved", "reopened", "waived")
ACTIVE: tuple[str, ...] = ("open", "acknowledged", "reopened")
"""States that count as open (total_open): someone still has to act."""

FILING_KINDS: tuple[str, ...] = ("over_tolerance", "bound_violation", "config_mismatch")
"""Discrepancy kinds that file an issue; missing_reference is only counted."""

# Manual actions (CLI / Tracker.transition): action -> {from_state: to_state}.
ACTIONS: dict[str, dict[str, str]] = {
    "ack": {"open": "acknowledged", "reopened": "acknowledged", "acknowledged": "acknowledged"},
    "resolve": {"open": "resolved", "acknowledged": "resolved", "reopened": "resolved", "waived": "resolved"},
    "reopen": {"resolved": "reopened", "waived": "reopened"},
    "waive": {"open": "waived", "acknowledged": "waived", "reopened": "waived", "waived": "waived"},
    "note": {s: s for s in STATES},
}

# Automatic events applied by checks (and waiver expiry on reads): event -> {from: to}.
AUTO: dict[str, dict[str, str]] = {
    "detected": {"": "open"},
    "recurred": {"resolved": "reopened"},
    "auto_resolved": {s: "resolved" for s in (*ACTIVE, "waived")},
    "waiver_expired": {"waived": "open"},
    "waiver_exceeded": {"waived": "open"},
}

_ID = re.compile(r"^\s*(?:XF-)?(\d+)\s*$", re.IGNORECASE)


def allowed_actions(state: str) -> list[str]:
    """Manual actions that are valid from `state`, in a stable order."""
    return [a for a, table in ACTIONS.items() if state in table]


def next_state(issue_id: str, state: str, action: str) -> str:
    """The state after a manual `action` on an issue in `state`.

    Raises:
        TrackerError: an unknown action, or one not allowed from `state` (the allowed ones listed).
    """
    if action not in ACTIONS:
        raise TrackerError(f"unknown action {action!r}; actions: {', '.join(ACTIONS)}")
    table = ACTIONS[action]
    if state not in table:
        raise TrackerError(
            f"{issue_id} is {state}: cannot {action} it; allowed from {state}: {', '.join(allowed_actions(state))}"
        )
    return table[state]


def auto_state(state: str, event: str) -> str | None:
    """The state after an automatic `event`, or None when the event does not apply to `state`."""
    return AUTO[event].get(state)


def parse_id(issue_id: str) -> int:
    """`XF-12` (any case, or a bare 12) -> 12.

    Raises:
        TrackerError: anything else, with the expected form.
    """
    m = _ID.match(str(issue_id))
    if not m or int(m.group(1)) < 1:
        raise TrackerError(f"bad issue id {issue_id!r}; issue ids look like XF-12 (see `xfid issues list`)")
    return int(m.group(1))


def format_id(num: int) -> str:
    return f"XF-{num}"


def parse_date(text: str | date, what: str = "--until") -> date:
    """A YYYY-MM-DD date (or a date object).

    Raises:
        TrackerError: a malformed or impossible date, with the expected form.
    """
    if isinstance(text, datetime):
        return text.date()
    if isinstance(text, date):
        return text
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(text).strip()):
            raise ValueError
        return date.fromisoformat(str(text).strip())
    except ValueError:
        raise TrackerError(f"{what}: bad date {text!r}; use YYYY-MM-DD, e.g. 2026-12-31") from None


def utc(now: datetime | None) -> datetime:
    """`now` as an aware UTC datetime (naive means UTC), or the current time; whole seconds."""
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(UTC).replace(microsecond=0)


def stamp(now: datetime) -> str:
    """The stored form of a time: `2026-12-01T08:30:00Z` (sorts as text)."""
    return utc(now).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_waiver(issue_id: str, reason: str | None, until: date | str | None, max_error: float | None,
                 today: date) -> tuple[str, date, float | None]:
    """Validate the arguments of `waive`: a reason, an expiry today or later, a bound >= 0.

    Raises:
        TrackerError: naming the bad argument and the fix.
    """
    if not reason or not str(reason).strip():
        raise TrackerError(f"waiving {issue_id} needs a reason (--reason TEXT)")
    if until is None:
        raise TrackerError(f"waiving {issue_id} needs an expiry date (--until YYYY-MM-DD)")
    day = parse_date(until)
    if day < today:
        raise TrackerError(f"--until {day.isoformat()} is in the past (today is {today.isoformat()}); "
                           "give today or a later date")
    if max_error is not None:
        if isinstance(max_error, bool) or not isinstance(max_error, (int, float)) or not max_error >= 0:
            raise TrackerError(f"--max-error must be a relative error >= 0 (e.g. 0.25), got {max_error!r}")
        max_error = float(max_error)
    return str(reason).strip(), day, max_error
