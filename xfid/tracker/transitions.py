"""The one writer of issue state: a transition updates the issue row and adds its history row together."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import Any, NamedTuple

from xfid.sqlbackend import Database
from xfid.tracker import db, lifecycle
from xfid.tracker.lifecycle import stamp


class Transition(NamedTuple):
    """What one written transition did."""

    num: int
    from_state: str | None
    to_state: str


def write(conn: Database, issue: dict[str, Any] | None, event: str, *, actor: str, now: datetime,
          check_id: int | None = None, values: dict[str, Any] | None = None, note: str | None = None,
          owner: str | None = None, reason: str | None = None, until: str | None = None,
          max_error: float | None = None, related: int | None = None) -> Transition:
    """Apply `event` to `issue` and record it: the issue row and its history row, in the caller's transaction.

    Args:
        conn: a connection inside a write transaction (both rows commit together or not at all).
        issue: the stored issue row, or None to file a new issue (`event` is then `detected`).
        event: a manual action (lifecycle.ACTIONS) or an automatic event (lifecycle.AUTO).
        actor: who acts (a person, or the check's actor).
        now: the time stamped on the issue's updated_at and on the history row.
        check_id: the check that caused an automatic event.
        values: further issue columns to set (the latest numbers of an observation, the key of a new issue).
        note, owner, reason, until, max_error: kept in the history; `ack` sets the owner, `waive` the waiver,
            `invalid` the reason.
        related: the issue number a `duplicate` or `downstream` verdict names (kept on the row and in history).

    Raises:
        TransitionRefused: the event does not apply to the issue's state; nothing is written.
    """
    if not conn.in_transaction:
        raise RuntimeError("transitions.write must run inside a write transaction")
    old = None if issue is None else str(issue["state"])
    new = lifecycle.apply(old, event)
    t = stamp(now)
    changes: dict[str, Any] = {**lifecycle.row_changes(old, event, new), **(values or {})}
    if event == "ack":
        changes["owner"] = owner
    elif event == "waive":
        changes.update(waiver_reason=reason, waiver_until=until, waiver_max_error=max_error)
    elif event == "invalid":
        changes.update(triage_reason=reason, related_to=None)
    elif event in lifecycle.RELATED:
        changes.update(triage_reason=None, related_to=related)
    changes.update(state=new, updated_at=t)
    if issue is None:
        num = db.next_issue_number(conn)
        db.insert_issue(conn, {"num": num, **changes})
    else:
        num = int(issue["num"])
        db.update_issue(conn, num, changes)
    waive = event == "waive"
    db.insert_transition(conn, num, check_id, t, actor, event, old, new,
                         {"note": note, "owner": owner, "reason": reason if waive or event == "invalid" else None,
                          "until": until if waive else None, "max_error": max_error if waive else None,
                          "related": related if event in lifecycle.RELATED else None})
    return Transition(num, old, new)


class Planned(NamedTuple):
    """One automatic event of many (write_many): the issue (None: file a new one), the event, the
    issue columns to set, the note."""

    issue: dict[str, Any] | None
    event: str
    values: dict[str, Any]
    note: str | None


def write_many(conn: Database, planned: Sequence[Planned], *, actor: str, now: datetime,
               check_id: int | None = None) -> list[Transition]:
    """`write` of many automatic events (lifecycle.AUTO) at once, as a check files its rows: the same
    issue rows, new issues numbered in the order given, the history rows in that order, in the
    caller's transaction; one statement per table and set of columns (PostgreSQL pipelines them).
    Each issue at most once. Checked whole before anything is written.

    Raises:
        TransitionRefused: an event that does not apply to its issue's state; nothing is written.
        ValueError: a manual action (those go through `write`).
    """
    if not conn.in_transaction:
        raise RuntimeError("transitions.write_many must run inside a write transaction")
    t = stamp(now)
    decided = []
    for p in planned:
        if p.event not in lifecycle.AUTO:
            raise ValueError(f"write_many takes automatic events only, not {p.event!r}")
        old = None if p.issue is None else str(p.issue["state"])
        new = lifecycle.apply(old, p.event)
        decided.append((old, new, {**lifecycle.row_changes(old, p.event, new), **p.values,
                                   "state": new, "updated_at": t}))
    fresh = iter(db.next_issue_numbers(conn, sum(p.issue is None for p in planned)))
    out, inserts, updates, history = [], [], [], []
    for p, (old, new, changes) in zip(planned, decided, strict=True):
        if p.issue is None:
            num = next(fresh)
            inserts.append({"num": num, **changes})
        else:
            num = int(p.issue["num"])
            updates.append((num, changes))
        history.append((num, check_id, t, actor, p.event, old, new, {"note": p.note}))
        out.append(Transition(num, old, new))
    db.insert_issues(conn, inserts)
    db.update_issues(conn, updates)
    db.insert_transitions(conn, history)
    return out


def expire_waivers(conn: Database, now: datetime, *, actor: str, check_id: int | None = None) -> list[int]:
    """Waivers whose expiry date has passed go back to open; returns their numbers. Inside a write transaction."""
    out = []
    for r in db.waivers_due(conn, now.date().isoformat()):
        # stamped at the moment it expired (00:00 UTC the day after --until), not when noticed
        at = datetime.combine(date.fromisoformat(r["waiver_until"]) + timedelta(days=1), dtime.min, tzinfo=UTC)
        write(conn, r, "waiver_expired", actor=actor, now=at, check_id=check_id,
              note=f"waiver expired (it ran until {r['waiver_until']})")
        out.append(int(r["num"]))
    return out
