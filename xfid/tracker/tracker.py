"""The tracker: issues keyed by discrepancy fingerprint, their lifecycle, checks and history."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import TYPE_CHECKING, Any

from xfid.errors import TrackerError
from xfid.store import migrate, write_tx
from xfid.tracker import checkfiles, lifecycle
from xfid.tracker.db import MIGRATIONS
from xfid.tracker.lifecycle import FILING_KINDS, STATES, format_id, stamp, utc

if TYPE_CHECKING:
    import pandas as pd

    from xfid.engine.contract import Correlation
    from xfid.store import Store

SYSTEM_ACTOR = "xfid"
ISSUE_KEYS = ("id", "fingerprint", "state", "kind", "severity", "target", "workload", "op", "metric",
              "stat", "candidate", "reference", "candidate_value", "reference_value", "rel_error", "owner",
              "first_seen", "last_seen")
EXTRA_KEYS = ("unit", "tolerance", "waiver_reason", "waiver_until", "waiver_max_error", "clean_streak",
              "first_check", "last_check", "updated_at")


def _window(query: str, column: str, since: datetime | None, until: datetime | None) -> tuple[str, list[Any]]:
    """`query` narrowed to since <= column < until (either bound optional), with its arguments."""
    args: list[Any] = []
    if since is not None:
        query += f" AND {column} >= ?"
        args.append(stamp(since))
    if until is not None:
        query += f" AND {column} < ?"
        args.append(stamp(until))
    return query, args


@dataclass
class CheckSummary:
    """What one check changed: issue ids per outcome, and the counts."""

    check_id: int
    time: str
    new: list[str] = field(default_factory=list)
    reopened: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    still_open: list[str] = field(default_factory=list)
    waived: list[str] = field(default_factory=list)
    unwaived: list[str] = field(default_factory=list)  # waiver expired or exceeded at this check
    total_open: int = 0
    missing_reference: int = 0
    rows: int = 0

    def counts(self) -> dict[str, int]:
        """The counts stored with the check (`Tracker.checks()[i]["counts"]`)."""
        return {"new": len(self.new), "reopened": len(self.reopened), "resolved": len(self.resolved),
                "still_open": len(self.still_open), "waived": len(self.waived),
                "unwaived": len(self.unwaived), "total_open": self.total_open,
                "missing_reference": self.missing_reference, "rows": self.rows}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["counts"] = self.counts()
        return d


def issue_dict(r: sqlite3.Row | dict[str, Any]) -> dict[str, Any]:
    """A stored issue row as the public dict (ISSUE_KEYS first, then EXTRA_KEYS)."""
    r = dict(r)
    out: dict[str, Any] = {"id": format_id(r["num"])}
    for k in (*ISSUE_KEYS[1:], *EXTRA_KEYS):
        out[k] = r.get(k)
    return out


class Tracker:
    """Tracked discrepancies in the store's SQLite database (tables created on first use)."""

    def __init__(self, store: Store):
        self.store = store
        self.conn = store.conn
        try:
            migrate(self.conn, "tracker", MIGRATIONS)
        except sqlite3.DatabaseError as e:
            raise TrackerError(f"{store.db_path}: cannot set up the tracker tables: {e} (run `xfid doctor`)") from None

    # --- writing ---------------------------------------------------------------------
    def record_check(self, corr: Correlation, *, actor: str, now: datetime | None = None,
                     label: str | None = None, clean_checks_to_resolve: int = 1) -> CheckSummary:
        """Record one check: file new issues, reopen recurring ones, auto-resolve clean ones.

        Args:
            corr: the correlation of this check; its rows are saved under `<store>/checks/`.
            actor: who ran the check (recorded on every automatic transition).
            now: the check time (default: the current time, UTC).
            label: a free label (a commit, "nightly", ...).
            clean_checks_to_resolve: K consecutive checks with the key within tolerance resolve it.

        Returns:
            The summary: ids that are new, reopened, resolved, still open, waived.

        Raises:
            TrackerError: K < 1 or rows without the contract columns.
        """
        from xfid.tracker.recording import record

        return record(self, corr, actor=actor, now=utc(now), label=label, k=clean_checks_to_resolve)

    def transition(self, issue_id: str, action: str, *, actor: str, note: str | None = None,
                   owner: str | None = None, reason: str | None = None, until: date | str | None = None,
                   max_error: float | None = None, now: datetime | None = None) -> dict[str, Any]:
        """Apply a manual action (ack, resolve, reopen, waive, note) and record it in history.

        Raises:
            TrackerError: an unknown id, an invalid transition (allowed ones listed), a missing
                owner/reason/expiry, a bad or past date. Nothing is changed then.
        """
        now = utc(now)
        num = lifecycle.parse_id(issue_id)
        iid = format_id(num)
        if action not in lifecycle.ACTIONS:
            raise TrackerError(f"unknown action {action!r}; actions: {', '.join(lifecycle.ACTIONS)}")
        sets: dict[str, Any] = {}
        if action == "ack":
            if not owner or not owner.strip():
                raise TrackerError(f"acknowledging {iid} needs an owner (--owner NAME)")
            sets["owner"] = owner = owner.strip()
        elif action == "waive":
            reason, day, max_error = lifecycle.check_waiver(iid, reason, until, max_error, now.date())
            until = day.isoformat()
            sets.update(waiver_reason=reason, waiver_until=until, waiver_max_error=max_error)
        elif action == "note" and (not note or not note.strip()):
            raise TrackerError(f"a note on {iid} needs text (--note TEXT)")
        with write_tx(self.conn):
            self._expire(now, actor=SYSTEM_ACTOR)
            row = self.conn.execute("SELECT * FROM issues WHERE num=?", (num,)).fetchone()
            if row is None:
                raise TrackerError(self._unknown(iid))
            new = lifecycle.next_state(iid, row["state"], action)
            if row["state"] == "waived" and new != "waived":
                sets.update(waiver_reason=None, waiver_until=None, waiver_max_error=None)
            if new != row["state"]:
                sets["clean_streak"] = 0
            sets.update(state=new, updated_at=stamp(now))
            self.conn.execute(f"UPDATE issues SET {', '.join(f'{k}=?' for k in sets)} WHERE num=?",
                              (*sets.values(), num))
            self._log(num, None, now, actor, action, row["state"], new, note=note, owner=owner,
                      reason=reason if action == "waive" else None,
                      until=until if action == "waive" else None,
                      max_error=max_error if action == "waive" else None)
            out = self.conn.execute("SELECT * FROM issues WHERE num=?", (num,)).fetchone()
        return issue_dict(out)

    def _log(self, num: int, check_id: int | None, now: datetime, actor: str, action: str,
             from_state: str | None, to_state: str, **extra: Any) -> None:
        self.conn.execute(
            "INSERT INTO transitions (issue_num, check_id, time, actor, action, from_state, to_state,"
            " note, owner, reason, until, max_error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (num, check_id, stamp(now), actor, action, from_state, to_state, extra.get("note"),
             extra.get("owner"), extra.get("reason"), extra.get("until"), extra.get("max_error")))

    def _expire(self, now: datetime, *, actor: str, check_id: int | None = None) -> list[int]:
        """Waivers whose expiry date has passed go back to open. Call inside a write transaction."""
        today = now.date().isoformat()
        rows = self.conn.execute("SELECT num, waiver_until FROM issues WHERE state='waived' AND waiver_until < ?",
                                 (today,)).fetchall()
        for r in rows:
            # stamped at the moment it expired (00:00 UTC the day after --until), not when noticed
            at = datetime.combine(date.fromisoformat(r["waiver_until"]) + timedelta(days=1), dtime.min, tzinfo=UTC)
            self.conn.execute("UPDATE issues SET state='open', waiver_reason=NULL, waiver_until=NULL,"
                              " waiver_max_error=NULL, updated_at=? WHERE num=?", (stamp(at), r["num"]))
            self._log(r["num"], check_id, at, actor, "waiver_expired", "waived", "open",
                      note=f"waiver expired (it ran until {r['waiver_until']})")
        return [r["num"] for r in rows]

    def _expire_on_read(self, now: datetime | None) -> None:
        now = utc(now)
        due = self.conn.execute("SELECT 1 FROM issues WHERE state='waived' AND waiver_until < ? LIMIT 1",
                                (now.date().isoformat(),)).fetchone()
        if not due:
            return
        try:
            with write_tx(self.conn):
                self._expire(now, actor=SYSTEM_ACTOR)
        except sqlite3.OperationalError as e:
            if "readonly" not in str(e):  # a read-only store: report what is stored, expire later
                raise

    def _unknown(self, iid: str) -> str:
        r = self.conn.execute("SELECT MIN(num), MAX(num), COUNT(*) FROM issues").fetchone()
        if not r[2]:
            return f"unknown issue {iid}: the tracker has no issues yet (run `xfid check`)"
        return (f"unknown issue {iid}; the tracker has {r[2]} issue(s) between {format_id(r[0])} and "
                f"{format_id(r[1])} (see `xfid issues list`)")

    # --- reading ---------------------------------------------------------------------
    def issues(self, *, state: str | None = None, target: str | None = None, kind: str | None = None,
               severity_min: float | None = None, now: datetime | None = None) -> list[dict[str, Any]]:
        """Issues ordered by id, filtered by state, target, kind and minimum severity.

        Raises:
            TrackerError: an unknown state or kind (the valid ones listed).
        """
        if state is not None and state not in STATES:
            raise TrackerError(f"unknown state {state!r}; states: {', '.join(STATES)}")
        if kind is not None and kind not in FILING_KINDS:
            raise TrackerError(f"unknown issue kind {kind!r}; kinds: {', '.join(FILING_KINDS)}")
        self._expire_on_read(now)
        q, args = "SELECT * FROM issues WHERE 1=1", list[Any]()
        for col, v in (("state", state), ("target", target), ("kind", kind)):
            if v is not None:
                q += f" AND {col}=?"
                args.append(v)
        if severity_min is not None:
            q += " AND severity >= ?"
            args.append(float(severity_min))
        return [issue_dict(r) for r in self.conn.execute(q + " ORDER BY num", args)]

    def issue(self, issue_id: str, *, now: datetime | None = None) -> dict[str, Any]:
        """One issue with its full `history` (transitions) and every `observation`.

        Raises:
            TrackerError: a malformed or unknown id.
        """
        num = lifecycle.parse_id(issue_id)
        self._expire_on_read(now)
        row = self.conn.execute("SELECT * FROM issues WHERE num=?", (num,)).fetchone()
        if row is None:
            raise TrackerError(self._unknown(format_id(num)))
        out = issue_dict(row)
        out["history"] = [
            {k: r[k] for k in ("time", "actor", "action", "from_state", "to_state", "note", "owner",
                               "reason", "until", "max_error", "check_id")}
            for r in self.conn.execute("SELECT * FROM transitions WHERE issue_num=? ORDER BY id", (num,))]
        obs = self.conn.execute(
            "SELECT o.*, c.label AS check_label FROM observations o JOIN checks c ON c.id = o.check_id"
            " WHERE o.issue_num=? ORDER BY o.id", (num,)).fetchall()
        out["observations"] = [{k: v for k, v in dict(r).items() if k not in ("id", "issue_num")} for r in obs]
        return out

    def checks(self, since: datetime | None = None, until: datetime | None = None) -> list[dict[str, Any]]:
        """Checks with since <= time < until, oldest first."""
        q, args = _window("SELECT * FROM checks WHERE 1=1", "time", since, until)
        out = []
        for r in self.conn.execute(q + " ORDER BY id", args):
            d = {k: r[k] for k in ("id", "time", "actor", "label", "config_hash", "rows_file", "n_rows")}
            for k in ("sources", "counts", "comparisons", "settings"):
                d[k] = json.loads(r[k])
            out.append(d)
        return out

    def check_rows(self, check_id: int) -> pd.DataFrame:
        """The Correlation.rows saved by one check.

        Raises:
            TrackerError: an unknown check id, or its file is missing.
        """
        r = self.conn.execute("SELECT rows_file FROM checks WHERE id=?", (int(check_id),)).fetchone()
        if r is None:
            last = self.conn.execute("SELECT MAX(id) FROM checks").fetchone()[0]
            raise TrackerError(f"unknown check {check_id}; " +
                               (f"checks run from 1 to {last}" if last else "no check has been recorded yet"))
        return checkfiles.read(self.store.root, int(check_id), r["rows_file"])

    def events(self, since: datetime | None = None, until: datetime | None = None) -> list[dict[str, Any]]:
        """Transitions with since <= time < until, oldest first (kind = the issue's discrepancy kind)."""
        self._expire_on_read(None)
        q, args = _window("SELECT t.*, i.fingerprint, i.kind, i.target, i.workload, i.op, i.metric, i.stat,"
                          " i.candidate, i.reference FROM transitions t JOIN issues i ON i.num = t.issue_num"
                          " WHERE 1=1", "t.time", since, until)
        out = []
        for r in self.conn.execute(q + " ORDER BY t.id", args):
            d = {"id": format_id(r["issue_num"]), "event_id": r["id"]}
            for k in ("fingerprint", "from_state", "to_state", "actor", "time", "note", "kind", "action",
                      "check_id", "owner", "reason", "until", "max_error", "target", "workload", "op",
                      "metric", "stat", "candidate", "reference"):
                d[k] = r[k]
            out.append(d)
        return out
