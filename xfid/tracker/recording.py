"""One check into the tracker: observations, new/reopened/resolved issues, the saved rows."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from xfid.errors import TrackerError
from xfid.sqlbackend import Database
from xfid.store import fault_point, write_tx
from xfid.tracker import checkfiles, config_db, db, evidence, transitions, triage_db
from xfid.tracker.chunks import RowChunks
from xfid.tracker.db import KEY_COLUMNS, LATEST_COLUMNS, as_float, as_text, plain
from xfid.tracker.lifecycle import ACTIVE, FILING_KINDS, TRIAGED, format_id, stamp
from xfid.tracker.noise import UNCERTAIN, NoiseSettings, clean_rows

CheckConfig = tuple[str, str | None, str | None]
"""(hash, path, text) of the config a check was judged by (xfid.tracker.config_db)."""

if TYPE_CHECKING:
    import pandas as pd

    from xfid.engine import Correlation
    from xfid.store import Store


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
    held: list[str] = field(default_factory=list)  # within tolerance, inside the hysteresis margin: not clean
    resolving: list[str] = field(default_factory=list)  # "XF-N i/k": clean in i of the k checks that resolve it
    pending: list[str] = field(default_factory=list)  # fingerprints uncertain, not (yet) filed
    evidence_removed: list[str] = field(default_factory=list)  # resolved: a removed source held all their evidence
    evidence_reduced: list[str] = field(default_factory=list)  # a removed source held some: judged on the rest
    triaged: list[str] = field(default_factory=list)  # invalid/duplicate/downstream, still beyond tolerance: state kept
    stack_changed: list[dict[str, Any]] = field(default_factory=list)  # rows measured off their stack (tracker.stack)
    stale: dict[str, Any] = field(default_factory=dict)  # keys/sources that stopped reporting (tracker.stale)
    uncertain: int = 0  # rows whose interval straddles the tolerance
    total_open: int = 0
    missing_reference: int = 0
    rows: int = 0

    def counts(self) -> dict[str, int]:
        """The counts stored with the check (`Tracker.checks()[i]["counts"]`)."""
        return {"new": len(self.new), "reopened": len(self.reopened), "resolved": len(self.resolved),
                "still_open": len(self.still_open), "waived": len(self.waived),
                "unwaived": len(self.unwaived), "held": len(self.held), "pending": len(self.pending),
                "triaged": len(self.triaged),
                "uncertain": self.uncertain, "total_open": self.total_open,
                "missing_reference": self.missing_reference, "rows": self.rows}

    def to_dict(self) -> dict[str, Any]:
        """asdict(self) and the counts; a list of ids copied as a list (asdict's deep copy walked
        every id of a large check one by one: seconds at 1M records)."""
        d = {f.name: list(v) if isinstance(v := getattr(self, f.name), list) and all(type(x) is str for x in v)
             else copy.deepcopy(v) for f in fields(self)}
        d["counts"] = self.counts()
        return d


def _frame(corr: Correlation) -> pd.DataFrame:
    """The check's rows; discrepancies not in rows (a partial engine) are added, never dropped."""
    import pandas as pd

    from xfid.engine.contract import ROW_COLUMNS

    frames = [f for f in (corr.rows, corr.discrepancies) if f is not None and len(f)]
    if not frames:
        return pd.DataFrame(columns=list(ROW_COLUMNS))
    for f in frames:
        for col in ("fingerprint", "kind"):
            if col not in f.columns:
                raise TrackerError(f"correlation rows lack the {col!r} column (see xfid/engine/contract.py)")
    rows = frames[0]
    if len(frames) == 2:
        extra = frames[1][~_isin(frames[1]["fingerprint"], rows["fingerprint"])]
        if len(extra):
            rows = pd.concat([rows, extra], ignore_index=True)
    return rows.reset_index(drop=True)


def _isin(values: pd.Series, among: pd.Series) -> Any:
    """`values.isin(among)` (a boolean array). Arrow-backed strings on both sides go to pyarrow's
    is_in directly: pandas turns every value of `among` into a Python object first (seconds for a
    large check's rows)."""
    import numpy as np
    import pandas as pd

    if not all(isinstance(s.dtype, pd.StringDtype) and s.dtype.storage == "pyarrow" for s in (values, among)):
        return values.isin(among).to_numpy()
    import pyarrow as pa
    import pyarrow.compute as pc

    have = pa.array(values.array)
    return np.asarray(pc.is_in(have, value_set=pa.array(among.array).cast(have.type)), dtype=np.bool_)


def _comparisons(corr: Correlation) -> list[dict[str, Any]]:
    c = corr.comparisons
    if c is None or not len(c) or "workload" not in c.columns:
        return []
    top = c[c["workload"].isna()]
    return [plain(r) for r in top.to_dict("records")]


def _coverage(corr: Correlation) -> dict[str, Any] | None:
    """The coverage table as {"columns": [...], "rows": [[...], ...]} (column order kept)."""
    c = getattr(corr, "coverage", None)
    if c is None:
        return None
    return {"columns": [str(x) for x in c.columns], "rows": [plain(list(r)) for r in c.itertuples(index=False)]}


class _Tally:
    """What the filing needs of a check's rows, gathered chunk by chunk in row order: per
    fingerprint a few values (the filed row chosen, the first uncertain row, the first ok row's
    clean flag), the set of every fingerprint, and counts."""

    def __init__(self, hysteresis: float):
        self.hysteresis = hysteresis
        self.rows = 0
        self.missing_reference = 0
        self.fingerprints: set[str] = set()
        self.best: dict[Any, tuple[float, int]] = {}  # filed: fingerprint -> (severity, position)
        self.unsure: dict[Any, int] = {}  # uncertain: fingerprint -> first position
        self.ok: dict[str, bool] = {}  # ok: fingerprint -> is its first ok row clean

    def feed(self, chunks: Iterable[pd.DataFrame],
             look: Callable[[pd.DataFrame], None] | None = None) -> Iterator[pd.DataFrame]:
        """Tally each chunk (indexed by position, xfid.tracker.chunks), show it to `look`, pass it on."""
        for rows in chunks:
            self.add(rows)
            if look is not None:
                look(rows)
            yield rows

    def add(self, rows: pd.DataFrame) -> None:
        import pandas as pd

        if len(rows):
            for col in ("fingerprint", "kind"):
                if col not in rows.columns:
                    raise TrackerError(f"correlation rows lack the {col!r} column (see xfid/engine/contract.py)")
        elif "kind" not in rows.columns:
            return
        self.rows += len(rows)
        kinds = rows["kind"].astype("string")
        fps = rows["fingerprint"]
        has_fp = fps.notna()
        self.missing_reference += int((kinds == "missing_reference").fillna(False).sum())
        self.fingerprints.update(fps[has_fp].astype(str).tolist())  # tolist: not an Arrow scalar at a time
        filed = rows[kinds.isin(FILING_KINDS).fillna(False)]
        if filed["fingerprint"].isna().any():
            bad = filed[filed["fingerprint"].isna()].iloc[0]
            raise TrackerError(f"correlation row {bad.name} ({', '.join(str(bad.get(c)) for c in KEY_COLUMNS)}) has "
                               "no fingerprint (the engine must fill it: xfid.engine.fingerprint)")
        if "severity" in filed.columns:  # each fingerprint's row of highest severity, the first of equals
            filed = filed.assign(_sev=pd.Series(db.column_values(filed, "severity"), index=filed.index,
                                                dtype="float64").fillna(-1.0))  # as_float of each, as arrays
            filed = filed.sort_values("_sev", ascending=False, kind="stable")
            sev = filed["_sev"]
        else:
            sev = None
        filed = filed.drop_duplicates("fingerprint")
        for fp, pos, s in zip(filed["fingerprint"].tolist(), filed.index.tolist(),
                              sev.loc[filed.index].tolist() if sev is not None else [-1.0] * len(filed), strict=True):
            had = self.best.get(fp)
            if had is None or (sev is not None and s > had[0]):
                self.best[fp] = (float(s), int(pos))
        unsure = rows[(kinds == UNCERTAIN).fillna(False) & has_fp].drop_duplicates("fingerprint")
        for fp, pos in zip(unsure["fingerprint"].tolist(), unsure.index.tolist(), strict=True):
            self.unsure.setdefault(fp, int(pos))
        ok_rows = rows[(kinds == "ok").fillna(False) & has_fp].drop_duplicates("fingerprint")
        flags = clean_rows(ok_rows, self.hysteresis).tolist()  # noise.clean of each row, at once
        for fp, ok in zip(ok_rows["fingerprint"].astype(str).tolist(), flags, strict=True):
            if fp not in self.ok:  # the first ok row of each fingerprint, over all chunks
                self.ok[fp] = ok

    def filed(self) -> list[int]:
        """The positions of the rows that file, in row order (new ids follow the engine's row order)."""
        return sorted(pos for _, pos in self.best.values())

    def uncertain(self) -> list[tuple[str, int]]:
        """(fingerprint, position) of the first uncertain row of each fingerprint that files no
        row, in row order."""
        return sorted(((str(fp), pos) for fp, pos in self.unsure.items() if fp not in self.best), key=lambda x: x[1])

    def worse(self) -> set[str]:
        return {str(fp) for fp in self.best} | {str(fp) for fp in self.unsure if fp not in self.best}


def record(store: Store, corr: Correlation, *, actor: str, now: datetime, label: str | None,
           k: int, noise: NoiseSettings | None = None, config: CheckConfig | None = None,
           rows: RowChunks | None = None, look: Callable[[pd.DataFrame], None] | None = None) -> CheckSummary:
    """Record one check (the body of Tracker.record_check: see there).

    Filing: over-tolerance, bound-violation and config-mismatch rows file (or reopen) at once;
    an `uncertain` row (its interval straddles the tolerance: xfid.tracker.noise) files only
    when its key was uncertain-or-worse in `confirm_after` checks in a row. Resolving: a row
    counts as clean only when it is ok and within tolerance * (1 - hysteresis); ok rows inside
    that margin are `held` (the clean streak starts again).

    `rows`: the check's rows in chunks (xfid.tracker.chunks), read three times at most; default
    `corr`'s rows (and its discrepancies not among them) as one chunk. `look`: called with each
    chunk once, in order, as the rows file is written."""
    noise = noise or NoiseSettings()
    conn, root = store.conn, store.checks_root
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise TrackerError(f"resolve_after (clean checks to resolve) must be an integer >= 1, got {k!r}")
    if rows is None:
        frame = _frame(corr)
        rows = RowChunks(lambda: [frame])
    tally = _Tally(noise.hysteresis)
    tmp = checkfiles.write_temp_chunks(root, tally.feed(rows, look), store.store_id or "")
    filed, unsure = tally.filed(), tally.uncertain()
    worse = tally.worse()
    clean = {fp: ok for fp, ok in tally.ok.items() if fp not in worse}
    summary = CheckSummary(check_id=0, time=stamp(now), rows=tally.rows, uncertain=len(unsure),
                           missing_reference=tally.missing_reference)
    try:
        rows_sha256 = checkfiles.file_hash(tmp)  # outside the lock: doctor and readers verify the file by it
    except BaseException:
        checkfiles.discard(tmp)
        raise
    staged = None
    sent = False  # COMMIT sent: its outcome may be unknown, the committing file is kept (xfid.committed)
    try:
        checkfiles.record_attempt(conn, tmp)
        with write_tx(conn):
            known = db.rows_files(conn)
            checkfiles.check_catalog(store, known)
            checkfiles.sweep(store, known)
            cid = summary.check_id = db.insert_check(
                conn, stamp(now), actor, label, corr.config_hash or "", corr.sources or [], _comparisons(corr),
                corr.settings or {}, _coverage(corr), tally.rows)
            if config is not None:  # (hash, path, text) of the config the check was judged by
                config_db.insert(conn, cid, *config)
            unwaived = set(transitions.expire_waivers(conn, now, actor=actor, check_id=cid))
            existing = db.issues_by_fingerprint(conn)
            summary.evidence_removed, summary.evidence_reduced = evidence.reevaluate(  # xfid sources remove
                conn, cid, now, actor, existing, tally.fingerprints, corr.settings,
                {str(s.get("source_id")) for s in corr.sources or [] if isinstance(s, dict)})
            before = triage_db.pending(conn)
            streaks = {fp: before.get(fp, 0) + 1 for fp in worse}
            confirmed, why = [], {}  # the uncertain rows that file, and what their notes add
            for fp, pos in unsure:
                iss = existing.get(fp)
                if (iss is not None and iss["state"] != "resolved") or streaks[fp] >= noise.confirm_after:
                    confirmed.append(pos)
                    why[fp] = f"uncertain in {streaks[fp]} consecutive check(s) (confirm_after = {noise.confirm_after})"
                else:
                    summary.pending.append(fp)
            filing = Filing(conn, cid, now, actor, existing, summary, unwaived)
            FILE_ROWS(filing, rows, filed, {})
            FILE_ROWS(filing, rows, confirmed, why)
            triage_db.set_pending(conn, streaks, cid)
            for fp in sorted(clean):
                iss = existing.get(fp)
                if iss is None or iss["state"] not in (*ACTIVE, "waived"):
                    continue
                if not clean[fp]:
                    summary.held.append(format_id(iss["num"]))
                    if iss["clean_streak"]:
                        db.update_issue(conn, iss["num"], {"clean_streak": 0})
                    continue
                streak = int(iss["clean_streak"] or 0) + 1
                if streak >= k:
                    transitions.write(conn, iss, "auto_resolved", actor=actor, now=now, check_id=cid,
                                      values={"clean_streak": streak},
                                      note=f"within tolerance in {streak} consecutive check(s) (resolve_after = {k})")
                    summary.resolved.append(format_id(iss["num"]))
                else:
                    db.update_issue(conn, iss["num"], {"clean_streak": streak})
                    summary.resolving.append(f"{format_id(iss['num'])} {streak}/{k}")
            summary.unwaived.extend(format_id(n) for n in sorted(unwaived))
            for lst in (summary.new, summary.reopened, summary.resolved, summary.still_open, summary.waived,
                        summary.held, summary.resolving, summary.triaged):
                lst.sort(key=lambda s: int(s.split()[0][3:]))
            summary.total_open = db.count_in_states(conn, ACTIVE)
            staged = checkfiles.stage(root, tmp, store.store_id or "", cid)
            db.finish_check(conn, cid, summary.counts(), checkfiles.final_name(cid), rows_sha256)
            sent = True
    except BaseException:
        checkfiles.discard(tmp, None if sent else staged)
        raise
    assert staged is not None
    fault_point("check.before_rename")
    final = checkfiles.publish(staged, summary.check_id)
    if final is not None:
        store.share_check_file(final)  # a bucket's store: the other machines read the rows from there
    return summary


@dataclass
class Filing:
    """What filing a check's rows needs besides the rows: where, when, by whom, the issues as the
    check read them, the summary and the unwaived issues it adds to."""

    conn: Database
    cid: int
    now: datetime
    actor: str
    existing: dict[str, dict[str, Any]]
    summary: CheckSummary
    unwaived: set[int]


def file_each(f: Filing, rows: RowChunks, positions: list[int], why: dict[str, str]) -> None:
    """File the rows at `positions` one by one (`_observe`): the plain version of `file_batched`."""
    for row in rows.records(positions):
        fp = str(row["fingerprint"])
        _observe(f.conn, f.cid, f.now, f.actor, row, f.existing.get(fp), f.summary, f.unwaived, why=why.get(fp))


def file_batched(f: Filing, rows: RowChunks, positions: list[int], why: dict[str, str]) -> None:
    """File the rows at `positions` as `file_each` does, a chunk at a time: every row's action is
    decided first (as `_observe` decides it), then each table is written with one statement per
    kind of write (transitions.write_many, db.update_issues, db.insert_observations), the values
    converted column by column. The same rows, issue numbers, notes, times and summary lists."""
    for frame in rows.frames(positions):
        _file_frame(f, frame.reset_index(drop=True), why)


FILE_ROWS: Callable[[Filing, RowChunks, list[int], dict[str, str]], None] = file_batched
"""How `record` files its rows (tests pin `file_batched` against `file_each`)."""


def _file_frame(f: Filing, frame: pd.DataFrame, why: dict[str, str]) -> None:
    t = stamp(f.now)
    cid, summary = f.cid, f.summary
    fps = [str(v) for v in frame["fingerprint"].tolist()]
    kinds = frame["kind"].tolist()
    latest = {c: db.column_values(frame, c) for c in LATEST_COLUMNS}
    keys = {c: db.column_values(frame, c) for c in KEY_COLUMNS}
    issues = [f.existing.get(fp) for fp in fps]
    last = db.last_actions(f.conn, (int(iss["num"]) for iss in issues if iss is not None and iss["state"] in TRIAGED))
    planned: list[transitions.Planned] = []
    nums: list[int | None] = []  # each row's issue number (None: a new issue, numbered by write_many)
    lists: list[list[str]] = []  # the summary list each row's id goes to
    updates: list[tuple[int, dict[str, Any]]] = []
    for i, (fp, iss) in enumerate(zip(fps, issues, strict=True)):
        extra = f"; {why[fp]}" if why.get(fp) else ""
        seen = {**{c: latest[c][i] for c in LATEST_COLUMNS}, "clean_streak": 0, "last_seen": t, "last_check": cid}
        if iss is None:
            planned.append(transitions.Planned(
                None, "detected", {"fingerprint": fp, **{c: keys[c][i] for c in KEY_COLUMNS}, **seen,
                                   "first_seen": t, "first_check": cid}, f"first seen in check {cid}{extra}"))
            nums.append(None)
            lists.append(summary.new)
            continue
        num, state = int(iss["num"]), iss["state"]
        nums.append(num)
        rel = latest["rel_error"][i]
        bound = iss["waiver_max_error"]
        if state in TRIAGED:
            if last.get(num) != "still_seen":
                related = iss.get("related_to")
                planned.append(transitions.Planned(
                    iss, "still_seen", seen, f"seen again ({kinds[i]}) in check {cid}; stays {state}"
                    + (f" of {format_id(int(related))}" if related is not None else "") + " (not reopened)"))
            else:
                updates.append((num, {**seen, "updated_at": t}))
            lists.append(summary.triaged)
        elif state == "resolved":
            planned.append(transitions.Planned(iss, "recurred", seen, f"seen again in check {cid}{extra}"))
            lists.append(summary.reopened)
        elif state == "waived" and bound is not None and rel is not None and abs(rel) > bound:
            planned.append(transitions.Planned(
                iss, "waiver_exceeded", seen, f"|rel_error| {abs(rel):.4g} > waiver bound {bound:.4g} in check {cid}"))
            f.unwaived.add(num)
            lists.append(summary.still_open)
        else:
            updates.append((num, {**seen, "updated_at": t}))
            lists.append(summary.waived if state == "waived" else summary.still_open)
    fresh = iter(w.num for w, p in zip(transitions.write_many(f.conn, planned, actor=f.actor, now=f.now, check_id=cid),
                                       planned, strict=True) if p.issue is None)
    nums = [next(fresh) if n is None else n for n in nums]
    db.update_issues(f.conn, updates)
    db.insert_observations(f.conn, [(n, cid, t, *obs) for n, obs in zip(nums, db.observation_rows(frame), strict=True)])
    for n, lst in zip(nums, lists, strict=True):
        lst.append(format_id(n))


def _observe(conn: Database, cid: int, now: datetime, actor: str, row: dict[str, Any],
             iss: dict[str, Any] | None, summary: CheckSummary, unwaived: set[int], why: str | None = None) -> None:
    """File or update the issue of one discrepancy row, and add its observation (`why`: added to
    the note of a filing or reopening)."""
    extra = f"; {why}" if why else ""
    t = stamp(now)
    latest = {f: as_text(row.get(f)) if f in ("kind", "unit") else as_float(row.get(f)) for f in LATEST_COLUMNS}
    seen = {**latest, "clean_streak": 0, "last_seen": t, "last_check": cid}
    if iss is None:
        num = transitions.write(
            conn, None, "detected", actor=actor, now=now, check_id=cid, note=f"first seen in check {cid}{extra}",
            values={"fingerprint": str(row["fingerprint"]), **{c: as_text(row.get(c)) for c in KEY_COLUMNS},
                    **seen, "first_seen": t, "first_check": cid}).num
        summary.new.append(format_id(num))
    else:
        num, state = int(iss["num"]), iss["state"]
        rel = as_float(row.get("rel_error"))
        bound = iss["waiver_max_error"]
        if state in TRIAGED:  # a person's verdict stands: not reopened, not filed anew
            if db.last_action(conn, num) != "still_seen":  # said once per verdict, not at every check
                related = iss.get("related_to")
                transitions.write(conn, iss, "still_seen", actor=actor, now=now, check_id=cid, values=seen,
                                  note=f"seen again ({row.get('kind')}) in check {cid}; stays {state}"
                                       + (f" of {format_id(int(related))}" if related is not None else "")
                                       + " (not reopened)")
            else:
                db.update_issue(conn, num, {**seen, "updated_at": t})
            summary.triaged.append(format_id(num))
        elif state == "resolved":
            transitions.write(conn, iss, "recurred", actor=actor, now=now, check_id=cid, values=seen,
                              note=f"seen again in check {cid}{extra}")
            summary.reopened.append(format_id(num))
        elif state == "waived" and bound is not None and rel is not None and abs(rel) > bound:
            transitions.write(conn, iss, "waiver_exceeded", actor=actor, now=now, check_id=cid, values=seen,
                              note=f"|rel_error| {abs(rel):.4g} > waiver bound {bound:.4g} in check {cid}")
            unwaived.add(num)
            summary.still_open.append(format_id(num))
        else:  # still there, its state unchanged
            db.update_issue(conn, num, {**seen, "updated_at": t})
            (summary.waived if state == "waived" else summary.still_open).append(format_id(num))
    db.insert_observation(conn, num, cid, t, row)
