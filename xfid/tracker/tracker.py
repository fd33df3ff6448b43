"""The tracker: issues keyed by discrepancy fingerprint, their lifecycle, checks and history."""

from __future__ import annotations

import sqlite3
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from xfid import sqlbackend
from xfid.errors import StoreError, TrackerError
from xfid.store import write_tx
from xfid.tracker import checkfiles, config_db, db, lifecycle, summaries, transitions, triage_db
from xfid.tracker.chunks import CHUNK_ROWS
from xfid.tracker.lifecycle import FILING_KINDS, STATES, TransitionRefused, format_id, stamp, utc
from xfid.tracker.noise import NoiseSettings
from xfid.tracker.recording import CheckSummary, record
from xfid.tracker.summaries import SummarySettings

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    import pandas as pd

    from xfid.engine import Correlation
    from xfid.store import Store
    from xfid.tracker.chunks import RowChunks

SYSTEM_ACTOR = "xfid"
ISSUE_KEYS = ("id", "fingerprint", "state", "kind", "severity", "target", "workload", "op", "metric",
              "stat", "candidate", "reference", "candidate_value", "reference_value", "rel_error", "owner",
              "first_seen", "last_seen")
EXTRA_KEYS = ("unit", "tolerance", "waiver_reason", "waiver_until", "waiver_max_error", "triage_reason",
              "related_to", "clean_streak",
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
    if out["related_to"] is not None:
        out["related_to"] = format_id(int(out["related_to"]))
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
                     config: tuple[str, str | None, str | None] | None = None,
                     rows: RowChunks | None = None,
                     look: Callable[[pd.DataFrame], None] | None = None) -> CheckSummary:
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
            rows: the check's rows in chunks (xfid.tracker.chunks), instead of `corr.rows`.
            look: called with each chunk of the rows once, in order, before anything is filed.

        Returns:
            The summary: ids that are new, reopened, resolved, still open, waived.

        Raises:
            TrackerError: K < 1 or rows without the contract columns.
            StoreError: the store is read-only, or its database does not know its check files.
        """
        lifecycle.check_text_sizes("the check", actor=actor, label=label)
        self.store.require_writable("record a check")
        return record(self.store, corr, actor=actor, now=utc(now), label=label, k=clean_checks_to_resolve,
                      noise=noise, config=config, rows=rows, look=look)

    def transition(self, issue_id: str, action: str, *, actor: str, note: str | None = None,
                   owner: str | None = None, reason: str | None = None, until: date | str | None = None,
                   max_error: float | None = None, of: str | None = None,
                   now: datetime | None = None) -> dict[str, Any]:
        """Apply a manual action (ack, resolve, reopen, waive, note, invalid, duplicate, downstream)
        and record it in history.

        `invalid` needs a `reason`; `duplicate` and `downstream` need `of`, another existing
        issue (XF-N) that does not lead back to this one through its own duplicate/downstream link.

        Raises:
            TrackerError: an unknown id, an invalid transition (allowed ones listed), a missing
                owner/reason/expiry/of, a bad or past date, an `of` that is the issue itself,
                unknown, or would close a cycle. Nothing is changed then.
            StoreError: the store is read-only.
        """
        now = utc(now)
        num = lifecycle.parse_id(issue_id)
        iid = format_id(num)
        args = self._arguments(iid, action, actor=actor, note=note, owner=owner, reason=reason, until=until,
                               max_error=max_error, of=of, now=now)
        if args["related"] == num:
            raise TrackerError(f"{iid} cannot be {action} of itself; give another issue ({{of}} XF-N)",
                               params=("of",))
        related = args["related"]
        self.store.require_writable(f"{action} {iid}")
        with write_tx(self.conn):
            transitions.expire_waivers(self.conn, now, actor=SYSTEM_ACTOR)
            row = db.issue_row(self.conn, num)
            if row is None:
                raise TrackerError(self._unknown(iid))
            if related is not None:
                self._check_related(iid, num, related)
            try:
                transitions.write(self.conn, row, action, actor=actor, now=now, **args)
            except TransitionRefused as e:
                raise e.for_issue(iid) from None
            out = db.issue_row(self.conn, num)
        assert out is not None
        return issue_dict(out)

    @staticmethod
    def _arguments(label: str, action: str, *, actor: str, note: str | None, owner: str | None,
                   reason: str | None, until: date | str | None, max_error: float | None, of: str | None,
                   now: datetime) -> dict[str, Any]:
        """The checked, normalized arguments of a manual action on `label` (an issue or a summary).

        Raises:
            TrackerError: an unknown action, a missing or oversized argument, a bad date or id.
        """
        if action not in lifecycle.ACTIONS:
            raise TrackerError(f"unknown action {action!r}; actions: {', '.join(lifecycle.ACTIONS)}")
        iid = label
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
        elif action == "invalid":
            if not reason or not str(reason).strip():
                raise TrackerError("marking {iid} invalid needs a reason: what is wrong with the data ({reason} TEXT)",
                                   params=("reason",), iid=iid)
            reason = str(reason).strip()
        related = None
        if action in lifecycle.RELATED:
            if of is None or not str(of).strip():
                raise TrackerError(f"marking {{iid}} {action} needs the issue it is {action} of ({{of}} XF-N)",
                                   params=("of",), iid=iid)
            related = lifecycle.parse_id(of)
        return {"note": note, "owner": owner, "reason": reason, "until": None if until is None else str(until),
                "max_error": max_error, "related": related}

    def summary_transition(self, summary_id: str, action: str, *, actor: str, note: str | None = None,
                           owner: str | None = None, reason: str | None = None, until: date | str | None = None,
                           max_error: float | None = None, of: str | None = None, now: datetime | None = None,
                           settings: SummarySettings | None = None) -> dict[str, Any]:
        """Apply one manual action to every issue of a summary, in one transaction.

        Issues whose state does not take the action (an ack on a resolved one) are skipped and
        listed; with `duplicate`/`downstream`, the `of` issue itself is skipped (it is the root).

        Returns:
            {"summary": S-id, "action", "changed": [issue dicts], "skipped": [{"id", "state", "why"}]}.

        Raises:
            TrackerError: a bad or unknown summary id, a bad argument (as for `transition`), a
                cycle, or no issue of the summary takes the action. Nothing is changed then.
            StoreError: the store is read-only.
        """
        now = utc(now)
        summ = self.summary(summary_id, settings=settings)
        sid = summ["id"]
        args = self._arguments(sid, action, actor=actor, note=note, owner=owner, reason=reason, until=until,
                               max_error=max_error, of=of, now=now)
        self.store.require_writable(f"{action} {sid}")
        changed, skipped = [], []
        with write_tx(self.conn):
            transitions.expire_waivers(self.conn, now, actor=SYSTEM_ACTOR)
            for iid in summ["issues"]:
                num = lifecycle.parse_id(iid)
                row = db.issue_row(self.conn, num)
                assert row is not None  # a summary lists filed issues; issues are never deleted
                if args["related"] == num:
                    skipped.append({"id": iid, "state": row["state"], "why": f"the issue it is {action} of"})
                    continue
                if str(row["state"]) not in lifecycle.ACTIONS[action]:
                    skipped.append({"id": iid, "state": row["state"],
                                    "why": f"{'an' if str(row['state'])[:1] in 'aeiou' else 'a'} {row['state']} "
                                           f"issue cannot take {action!r}"})
                    continue
                if args["related"] is not None:
                    self._check_related(iid, num, args["related"])
                transitions.write(self.conn, row, action, actor=actor, now=now, **args)
                changed.append(num)
            if not changed:
                raise TrackerError(f"no issue of {sid} can take {action!r}: " +
                                   ", ".join(f"{x['id']} ({x['why']})" for x in skipped))
            out = [issue_dict(r) for r in (db.issue_row(self.conn, n) for n in changed) if r is not None]
        return {"summary": sid, "action": action, "changed": out, "skipped": skipped}

    def summaries(self, check_id: int | None = None,
                  settings: SummarySettings | None = None) -> list[dict[str, Any]]:
        """What one check (default: the latest) filed, grouped by probable common cause
        (xfid.tracker.summaries): [{"id": "S-3-1", "check_id", "cause": {"kind", "text", ...},
        "issues": [XF ids], "n_issues", "rows_with_cause", "share"}], largest first.

        Raises:
            TrackerError: an unknown check id.
        """
        if check_id is None:
            check_id = db.last_check_id(self.conn)
            if check_id is None:
                return []
        self._check_field(int(check_id), "rows_file")  # an unknown check: the ids that exist
        filed = summaries.filed_rows(self.conn, int(check_id))
        if not filed:
            return []
        counts = summaries.count_causes(self.check_rows(int(check_id)))
        return summaries.group(int(check_id), filed, counts, settings or SummarySettings())

    def summary(self, summary_id: str, *, settings: SummarySettings | None = None) -> dict[str, Any]:
        """One summary by id (S-<check>-<n>).

        Raises:
            TrackerError: a malformed id, an unknown check, or no such summary at that check.
        """
        cid, n = summaries.parse_id(summary_id)
        found = self.summaries(cid, settings)
        if n > len(found):
            raise TrackerError(f"unknown summary S-{cid}-{n}; check {cid} has "
                               + (f"summaries S-{cid}-1 to S-{cid}-{len(found)}" if found else "no summaries "
                                  "(it filed no issues)") + " (see `xfid issues summaries --check N`)")
        return found[n - 1]

    def summary_of(self, issue_id: str, *, settings: SummarySettings | None = None) -> dict[str, Any] | None:
        """The summary an issue belongs to: that of the latest check that filed or reopened it
        (None for an issue no check filed, which cannot happen through xfid)."""
        cid = summaries.last_filing_check(self.conn, lifecycle.parse_id(issue_id))
        if cid is None:
            return None
        iid = format_id(lifecycle.parse_id(issue_id))
        return next((x for x in self.summaries(cid, settings) if iid in x["issues"]), None)

    def _check_related(self, iid: str, num: int, related: int) -> None:
        """Refuse an `of` issue that does not exist or whose own duplicate/downstream links lead
        back to `num` (a cycle: no issue in it would name the real cause)."""
        if db.issue_row(self.conn, related) is None:
            raise TrackerError(f"{{of}} {format_id(related)}: " + self._unknown(format_id(related)), params=("of",))
        chain, m = [num, related], db.related_to(self.conn, related)
        while m is not None and m not in chain[1:]:
            chain.append(m)
            if m == num:
                raise TrackerError(f"{{of}} {format_id(related)} would make a cycle: "
                                   f"{' -> '.join(format_id(x) for x in chain)}; name the issue at the root instead",
                                   params=("of",))
            m = db.related_to(self.conn, m)

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

    def invalid_keys(self) -> list[tuple[str, ...]]:
        """The keys (target, workload, op, metric, stat, candidate, reference) of the issues marked
        invalid: a check leaves their rows out of the statistics (xfid.engine.pipeline exclude_keys)."""
        return db.invalid_keys(self.conn)

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

    def check_row_chunks(self, check_id: int, columns: Iterable[str] | None = None,
                         size: int = CHUNK_ROWS) -> Iterator[pd.DataFrame]:
        """`check_rows()` as frames of at most `size` rows, of `columns` only (default all).

        Raises:
            TrackerError: as check_rows().
        """
        rows_file = self._check_field(check_id, "rows_file")
        if rows_file:
            self.store.fetch_check_file(rows_file)
        saved = checkfiles.Saved(*db.saved_rows(self.conn, int(check_id))[0])
        return checkfiles.read_chunks(self.store.checks_root, int(check_id), rows_file, self.store.store_id,
                                      saved=saved, columns=columns, size=size)

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
