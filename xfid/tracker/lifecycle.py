"""The issue state machine: states, manual actions, automatic events, and argument checks."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from xfid.errors import TrackerError

STATES: tuple[str, ...] = ("open", "acknowledged", "resolved", "reopened", "waived", "invalid", "duplicate",
                           "downstream")
ACTIVE: tuple[str, ...] = ("open", "acknowledged", "reopened")
"""States that count as open (total_open): someone still has to act."""
TRIAGED: tuple[str, ...] = ("invalid", "duplicate", "downstream")
"""Triage verdicts: the data is wrong (invalid), another issue says it (duplicate of XF-N), or
another issue causes it (downstream of XF-N). A check never reopens or resolves them; only a
person moves them on (reopen, or another verdict). An invalid issue's key leaves the statistics."""
RELATED: tuple[str, ...] = ("duplicate", "downstream")
"""Verdicts that name another issue (`of`)."""

FILING_KINDS: tuple[str, ...] = ("over_tolerance", "bound_violation", "config_mismatch")
"""Discrepancy kinds that file an issue; missing_reference is only counted."""

# Manual actions (CLI / Tracker.transition): action -> {from_state: to_state}.
ACTIONS: dict[str, dict[str, str]] = {
    "ack": {"open": "acknowledged", "reopened": "acknowledged", "acknowledged": "acknowledged"},
    "resolve": {"open": "resolved", "acknowledged": "resolved", "reopened": "resolved", "waived": "resolved"},
    "reopen": {"resolved": "reopened", "waived": "reopened", **dict.fromkeys(TRIAGED, "reopened")},
    "waive": {"open": "waived", "acknowledged": "waived", "reopened": "waived", "waived": "waived"},
    "note": {s: s for s in STATES},
    # triage verdicts apply from every state (a verdict can be corrected by another one)
    "invalid": dict.fromkeys(STATES, "invalid"),
    "duplicate": dict.fromkeys(STATES, "duplicate"),
    "downstream": dict.fromkeys(STATES, "downstream"),
}

NEW = ""
"""The state of an issue that does not exist yet (only `detected` applies to it)."""

# Automatic events applied by checks (and waiver expiry on reads): event -> {from: to}.
AUTO: dict[str, dict[str, str]] = {
    "detected": {NEW: "open"},
    "recurred": {"resolved": "reopened"},
    "auto_resolved": {s: "resolved" for s in (*ACTIVE, "waived")},
    "waiver_expired": {"waived": "open"},
    "waiver_exceeded": {"waived": "open"},
    # a source the issue's evidence came from was removed (xfid.tracker.evidence): no row is
    # left for its key (resolved, saying so), or the remaining records are judged (state kept)
    "evidence_removed": {s: "resolved" for s in (*ACTIVE, "waived")},
    "evidence_reduced": {s: s for s in (*ACTIVE, "waived")},
    # a check saw the key of a triaged issue beyond tolerance again: it stays as triaged (not
    # reopened, not filed anew); written once per verdict, at the first such check
    "still_seen": {s: s for s in TRIAGED},
}

EVENTS: dict[str, dict[str, str]] = {**ACTIONS, **AUTO}
"""Every event that can change an issue's state, manual and automatic."""

_ID = re.compile(r"^\s*(?:XF-)?([0-9]{1,18})\s*$", re.IGNORECASE | re.ASCII)  # ASCII digits, fits SQLite
MAX_WAIVER_DAYS = 5 * 366
"""A waiver expires within about five years: a later --until is refused as a typo."""


class TransitionRefused(TrackerError):
    """An event that does not apply to the issue's state (`allowed` lists those that do)."""

    def __init__(self, state: str, event: str):
        self.state, self.event = state, event
        self.allowed = allowed_events(state)
        shown = state or "not filed yet"
        super().__init__(f"an issue that is {shown} cannot take {event!r}; allowed from {shown}: "
                         f"{', '.join(self.allowed) or 'nothing'}")

    def for_issue(self, issue_id: str) -> TrackerError:
        """The same refusal worded for one issue and the manual actions (what the CLI prints)."""
        return TrackerError(f"{issue_id} is {self.state}: cannot {self.event} it; allowed from {self.state}: "
                            f"{', '.join(allowed_actions(self.state))}")


def apply(state: str | None, event: str) -> str:
    """The state after `event` on an issue in `state` (None or NEW: not filed yet). Pure.

    Raises:
        TrackerError: an unknown event (the known ones listed).
        TransitionRefused: an event that does not apply to `state`.
    """
    table = EVENTS.get(event)
    if table is None:
        raise TrackerError(f"unknown action {event!r}; actions: {', '.join(ACTIONS)}")
    current = NEW if state is None else state
    if current not in table:
        raise TransitionRefused(current, event)
    return table[current]


WAIVER_COLUMNS = ("waiver_reason", "waiver_until", "waiver_max_error")
TRIAGE_COLUMNS = ("triage_reason", "related_to")
"""The verdict's reason (invalid) and the issue it names (duplicate, downstream)."""


def row_changes(state: str | None, event: str, new_state: str) -> dict[str, object]:
    """What a transition does to the issue row besides its state. Pure.

    Leaving `waived` ends the waiver, leaving a triage verdict its reason and related issue; a
    manual action that changes the state restarts the count of clean checks (automatic events
    keep it: auto-resolve records the streak it reached).
    """
    out: dict[str, object] = {}
    if new_state != "waived":
        out.update(dict.fromkeys(WAIVER_COLUMNS))
    if state in TRIAGED and new_state not in TRIAGED:
        out.update(dict.fromkeys(TRIAGE_COLUMNS))
    if event in ACTIONS and new_state != state:
        out["clean_streak"] = 0
    return out


def allowed_actions(state: str) -> list[str]:
    """Manual actions that are valid from `state`, in a stable order."""
    return [a for a, table in ACTIONS.items() if state in table]


def allowed_events(state: str) -> list[str]:
    """Manual and automatic events that are valid from `state`, in a stable order."""
    return [e for e, table in EVENTS.items() if state in table]


MAX_NAME = 200
"""Longest owner, actor or check label (characters): a name, not a document."""
MAX_TEXT = 10_000
"""Longest note or waiver reason (characters); longer text belongs in a linked document."""


def check_text_sizes(iid: str, **fields: str | None) -> None:
    """Refuse an owner/actor longer than MAX_NAME or a note/reason longer than MAX_TEXT."""
    for name, value in fields.items():
        limit = MAX_NAME if name in ("owner", "actor", "label") else MAX_TEXT
        if value is not None and len(value) > limit:
            raise TrackerError(f"{iid}: the {name} is {len(value):,} characters; at most {limit:,} are kept "
                               f"- shorten it{' or link a document' if limit == MAX_TEXT else ''}")


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


def parse_date(text: str | date, param: str = "until") -> date:
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
        raise TrackerError(f"{{{param}}}: bad date {{text!r}}; use YYYY-MM-DD, e.g. 2026-12-31", params=(param,),
                           text=text) from None


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
        raise TrackerError("waiving {issue} needs a reason ({reason} TEXT)", params=("reason",), issue=issue_id)
    if until is None:
        raise TrackerError("waiving {issue} needs an expiry date ({until} YYYY-MM-DD)", params=("until",),
                           issue=issue_id)
    day = parse_date(until)
    if day < today:
        raise TrackerError(f"{{until}} {day.isoformat()} is in the past (today is {today.isoformat()}); "
                           "give today or a later date", params=("until",))
    if (day - today).days > MAX_WAIVER_DAYS:
        raise TrackerError(f"{{until}} {day.isoformat()} is more than five years away; a waiver must expire "
                           "(give a nearer date and renew it then)", params=("until",))
    if max_error is not None:
        if isinstance(max_error, bool) or not isinstance(max_error, (int, float)) or not 0 <= max_error < float("inf"):
            raise TrackerError("{max_error} must be a relative error >= 0 (e.g. 0.25), got {value!r}",
                               params=("max_error",), value=max_error)
        max_error = float(max_error)
    return str(reason).strip(), day, max_error
