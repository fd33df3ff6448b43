"""The tracker: issues keyed by discrepancy fingerprint, their lifecycle, checks and history."""

from __future__ import annotations

import sqlite3
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from xfid import sqlbackend
from xfid.errors import StoreError, TrackerError
from xfid.store import write_tx
from xfid.tracker import checkfiles, config_db, db, lifecycle, transitions, triage_db
from xfid.tracker.lifecycle import FILING_KINDS, STATES, TransitionRefused, format_id, stamp, utc
from xfid.tracker.noise import NoiseSettings
from xfid.tracker.recording import CheckSummary, record

if TYPE_CHECKING:
    import pandas as pd

    from xfid.engine import Correlation
    from xfid.store import Store

SYSTEM_ACTOR = "xfid"
ISSUE_KEYS = ("id", "fingerprint", "state", "kind", "severity", "target", "workload", "op", "metric",
              "stat", "candidate", "reference", "candidate_value", "reference_value", "rel_error", "owner",
              "first_seen", "last_seen")
EXTRA_KEYS = ("unit", "tolerance", "waiver_reason", "waiver_until", "waiver_max_error", "clean_streak",
              "first_check", "last_check", "updated_at")

__all__ = ["EXTRA_KEYS", "ISSUE_KEYS", "SYSTEM_ACTOR", "CheckSummary", "Tracker", "issue_dict"]


def _stamp(t: datetime | None) -> str | None:
    return None if t is None else stamp(t)


def issue_dict(r: sqlite3.Row | dict[str, Any]) -> dict[str, Any]:
    """A stored issue row as the public dict (ISSUE_KEYS first, then EXTRA_KEYS)."""
    r = dict(r)
    out: dict[str, Any] = {"id": format_id(r["num"])}
    for k in (*ISSUE_KEYS[1:], *EXTRA_KEYS):
        out[k] = r.get(k)
    return out


class Tracker:
    """Tracked discrepancies in the store's SQLite database (tables created on first use).

    Raises:
        CatalogMismatch: a saved check file (`checks/check-N.parquet`) that no check in the
            database names (an older or another store's database: see xfid.tracker.checkfiles).
    """

    def __init__(self, store: Store):
        self.store = store
        self.conn = store.conn
        on_disk = checkfiles.committed_on_disk(store.checks_root)  # listed first: see checkfiles.check_catalog
        try:
            db.setup(self.conn)
            triage_db.setup(self.conn)
            config_db.setup(self.conn)
            known = db.rows_files(self.conn)
        except sqlbackend.errors() as e:
            raise TrackerError(f"{store.db_label}: cannot set up the tracker tables: {sqlbackend.mask(e)} "
                               "(run `xfid doctor`)") from None
        checkfiles.check_catalog(store, known, on_disk)

    # --- writing ---------------------------------------------------------------------
    def record_check(self, corr: Correlation, *, actor: str, now: datetime | None = None,
                     label: str | None = None, clean_checks_to_resolve: int = 1,
                     noise: NoiseSettings | None = None,
                     config: tuple[str, str | None, str | None] | None = None) -> CheckSummary:
        """Record one check: file new issues, reopen recurring ones, auto-resolve clean ones.

        Args:
            corr: the correlation of this check; its rows are saved under `<store>/checks/`, its
                op-map coverage table with the check.
            actor: who ran the check (recorded on every automatic transition).
            now: the check time (default: the current time, UTC).
            label: a free label (a commit, "nightly", ...).
            clean_checks_to_resolve: K consecutive checks with the key within tolerance resolve it.
            noise: confirm_after and hysteresis (xfid.tracker.noise; default NoiseSettings()).
            config: (hash, path, text) of the config the check was judged by, recorded with it
                (xfid.tracker.config_db); None records none.

        Returns:
            The summary: ids that are new, reopened, resolved, still open, waived.

        Raises:
            TrackerError: K < 1 or rows without the contract columns.
            StoreError: the store is read-only, or its database does not know its check files.
        """
        lifecycle.check_text_sizes("the check", actor=actor, label=label)
        self.store.require_writable("record a check")
        return record(self.store, corr, actor=actor, now=utc(now), label=label, k=clean_checks_to_resolve,
                      noise=noise, config=config)

    def transition(self, issue_id: str, action: str, *, actor: str, note: str | None = None,
                   owner: str | None = None, reason: str | None = None, until: date | str | None = None,
                   max_error: float | None = None, now: datetime | None = None) -> dict[str, Any]:
        """Apply a manual action (ack, resolve, reopen, waive, note) and record it in history.

        Raises:
            TrackerError: an unknown id, an invalid transition (allowed ones listed), a missing
                owner/reason/expiry, a bad or past date. Nothing is changed then.
            StoreError: the store is read-only.
        """
        now = utc(now)
        num = lifecycle.parse_id(issue_id)
        iid = format_id(num)
        if action not in lifecycle.ACTIONS:
            raise TrackerError(f"unknown action {action!r}; actions: {', '.join(lifecycle.ACTIONS)}")
        lifecycle.check_text_sizes(iid, owner=owner, note=note, reason=reason, actor=actor)
        if action == "ack":
            if not owner or not owner.strip():
                raise TrackerError("acknowledging {iid} needs an owner ({owner} NAME)", params=("owner",), iid=iid)
            owner = owner.strip()
        elif action == "waive":
            reason, day, max_error = lifecycle.check_waiver(iid, reason, until, max_error, now.date())
            until = day.isoformat()
        elif action == "note" and (not note or not note.strip()):
            raise TrackerError("a note on {iid} needs text ({note} TEXT)", params=("note",), iid=iid)
        self.store.require_writable(f"{action} {iid}")
        with write_tx(self.conn):
            transitions.expire_waivers(self.conn, now, actor=SYSTEM_ACTOR)
            row = db.issue_row(self.conn, num)
            if row is None:
                raise TrackerError(self._unknown(iid))
            try:
                transitions.write(self.conn, row, action, actor=actor, now=now, note=note, owner=owner,
                                  reason=reason, until=None if until is None else str(until), max_error=max_error)
            except TransitionRefused as e:
                raise e.for_issue(iid) from None
            out = db.issue_row(self.conn, num)
        assert out is not None
        return issue_dict(out)

    def _expire_on_read(self, now: datetime | None) -> None:
        now = utc(now)
        if not db.any_waiver_due(self.conn, now.date().isoformat()):
            return
        try:
            with write_tx(self.conn):
                transitions.expire_waivers(self.conn, now, actor=SYSTEM_ACTOR)
        except (sqlite3.OperationalError, StoreError) as e:
            if "readonly" not in str(e) and "may only read" not in str(e):  # a read-only store or role:
                raise  # report what is stored, expire later

    def _unknown(self, iid: str) -> str:
        low, high, n = db.number_range(self.conn)
        if not n:
            return f"unknown issue {iid}: the tracker has no issues yet (run `xfid check`)"
        return (f"unknown issue {iid}; the tracker has {n} issue(s) between {format_id(low or 0)} and "
                f"{format_id(high or 0)} (see `xfid issues list`)")

    # --- reading ---------------------------------------------------------------------
    def issues(self, *, state: str | None = None, target: str | None = None, kind: str | None = None,
               severity_min: float | None = None, now: datetime | None = None) -> list[dict[str, Any]]:
        """Issues ordered by id, filtered by state, target, kind and minimum severity.

        `state` is one of STATES, or "active": the group open, acknowledged and reopened
        (xfid.counts: the issues someone still has to act on).

        Raises:
            TrackerError: an unknown state or kind (the valid ones listed).
        """
        if state == "active":
            return [i for i in self.issues(target=target, kind=kind, severity_min=severity_min, now=now)
                    if i["state"] in lifecycle.ACTIVE]
        if state is not None and state not in STATES:
            raise TrackerError(f"unknown state {state!r}; states: {', '.join(STATES)}, or active "
                               f"({', '.join(lifecycle.ACTIVE)})")
        if kind is not None and kind not in FILING_KINDS:
            raise TrackerError(f"unknown issue kind {kind!r}; kinds: {', '.join(FILING_KINDS)}")
        self._expire_on_read(now)
        rows = db.select_issues(self.conn, {"state": state, "target": target, "kind": kind}, severity_min)
        return [issue_dict(r) for r in rows]

    def issue(self, issue_id: str, *, now: datetime | None = None) -> dict[str, Any]:
        """One issue with its full `history` (transitions) and every `observation`.

        Raises:
            TrackerError: a malformed or unknown id.
        """
        num = lifecycle.parse_id(issue_id)
        self._expire_on_read(now)
        row = db.issue_row(self.conn, num)
        if row is None:
            raise TrackerError(self._unknown(format_id(num)))
        out = issue_dict(row)
        out["history"] = db.history(self.conn, num)
        out["observations"] = db.observations(self.conn, num)
        return out

    def checks(self, since: datetime | None = None, until: datetime | None = None) -> list[dict[str, Any]]:
        """Checks with since <= time < until, oldest first."""
        return db.select_checks(self.conn, _stamp(since), _stamp(until))

    def _check_field(self, check_id: int, column: str) -> Any:
        found, value = db.check_field(self.conn, int(check_id), column)
        if not found:
            last = db.last_check_id(self.conn)
            raise TrackerError(f"unknown check {check_id}; " +
                               (f"checks run from 1 to {last}" if last else "no check has been recorded yet"))
        return value

    def check_rows(self, check_id: int) -> pd.DataFrame:
        """The Correlation.rows saved by one check.

        Raises:
            TrackerError: an unknown check id, or its file is missing.
        """
        rows_file = self._check_field(check_id, "rows_file")
        if rows_file:
            self.store.fetch_check_file(rows_file)  # saved by another machine into the bucket
        saved = checkfiles.Saved(*db.saved_rows(self.conn, int(check_id))[0])
        return checkfiles.read(self.store.checks_root, int(check_id), rows_file, self.store.store_id, saved=saved)

    def check_coverage(self, check_id: int) -> pd.DataFrame | None:
        """The op-map coverage table (Correlation.coverage) one check saw; None for a check recorded
        before xfid kept it.

        Raises:
            TrackerError: an unknown check id.
        """
        import json

        import pandas as pd

        from xfid.engine.contract import COVERAGE_COLUMNS

        text = self._check_field(check_id, "coverage")
        if text is None:
            return None
        doc = json.loads(text)
        return pd.DataFrame(doc["rows"], columns=doc["columns"] or list(COVERAGE_COLUMNS))

    def events(self, since: datetime | None = None, until: datetime | None = None) -> list[dict[str, Any]]:
        """Transitions with since <= time < until, oldest first (kind = the issue's discrepancy kind)."""
        self._expire_on_read(None)
        out = []
        for r in db.transitions_between(self.conn, _stamp(since), _stamp(until)):
            d = {"id": format_id(r["issue_num"]), "event_id": r["id"]}
            for k in ("fingerprint", "from_state", "to_state", "actor", "time", "note", "kind", "action",
                      "check_id", "owner", "reason", "until", "max_error", "target", "workload", "op",
                      "metric", "stat", "candidate", "reference"):
                d[k] = r[k]
            out.append(d)
        return out
