"""One check into the tracker: observations, new/reopened/resolved issues, the saved rows."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from xfid.errors import TrackerError
from xfid.store import write_tx
from xfid.tracker import checkfiles
from xfid.tracker.db import OBSERVATION_FIELDS, as_float, as_text, dumps, observation_values, plain
from xfid.tracker.lifecycle import ACTIVE, FILING_KINDS, format_id, stamp

if TYPE_CHECKING:
    import pandas as pd

    from xfid.engine.contract import Correlation
    from xfid.tracker.tracker import CheckSummary, Tracker

KEY = ("target", "workload", "op", "metric", "stat", "candidate", "reference")
LATEST = ("kind", "severity", "candidate_value", "reference_value", "unit", "rel_error", "tolerance")


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
        extra = frames[1][~frames[1]["fingerprint"].isin(rows["fingerprint"])]
        if len(extra):
            rows = pd.concat([rows, extra], ignore_index=True)
    return rows.reset_index(drop=True)


def _comparisons(corr: Correlation) -> list[dict[str, Any]]:
    c = corr.comparisons
    if c is None or not len(c) or "workload" not in c.columns:
        return []
    top = c[c["workload"].isna()]
    return [plain(r) for r in top.to_dict("records")]


def record(tr: Tracker, corr: Correlation, *, actor: str, now: datetime, label: str | None,
           k: int) -> CheckSummary:
    """The body of Tracker.record_check (see there)."""
    from xfid.tracker.tracker import CheckSummary

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise TrackerError(f"resolve_after (clean checks to resolve) must be an integer >= 1, got {k!r}")
    rows = _frame(corr)
    kinds = rows["kind"].astype("string")
    filed = rows[kinds.isin(FILING_KINDS).fillna(False)]
    if filed["fingerprint"].isna().any():
        bad = filed[filed["fingerprint"].isna()].iloc[0]
        raise TrackerError(f"correlation row {bad.name} ({', '.join(str(bad.get(c)) for c in KEY)}) has no "
                           "fingerprint (the engine must fill it: xfid.engine.fingerprint)")
    if "severity" in filed.columns:
        filed = filed.assign(_sev=filed["severity"].map(as_float).fillna(-1.0))
        filed = filed.sort_values("_sev", ascending=False, kind="stable").drop(columns="_sev")
    filed = filed.drop_duplicates("fingerprint").sort_index()  # new ids follow the engine's row order
    clean = set(rows.loc[(kinds == "ok").fillna(False), "fingerprint"].astype(str)) - set(filed["fingerprint"].astype(str))
    summary = CheckSummary(check_id=0, time=stamp(now), rows=len(rows),
                           missing_reference=int((kinds == "missing_reference").fillna(False).sum()))
    tmp = checkfiles.write_temp(tr.store.root, rows)
    final = None
    conn = tr.conn
    try:
        with write_tx(conn):
            checkfiles.sweep(tr.store.root, conn)
            cur = conn.execute(
                "INSERT INTO checks (time, actor, label, config_hash, sources, counts, comparisons, settings,"
                " rows_file, n_rows) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (stamp(now), actor, label, corr.config_hash or "", dumps(corr.sources or []), "{}",
                 dumps(_comparisons(corr)), dumps(corr.settings or {}), None, len(rows)))
            cid = summary.check_id = int(cur.lastrowid or 0)
            unwaived = set(tr._expire(now, actor=actor, check_id=cid))
            existing = {r["fingerprint"]: dict(r) for r in conn.execute("SELECT * FROM issues")}
            for row in filed.to_dict("records"):
                _observe(tr, cid, now, actor, row, existing.get(str(row["fingerprint"])), summary, unwaived)
            for fp in clean:
                iss = existing.get(fp)
                if iss is None or iss["state"] not in (*ACTIVE, "waived"):
                    continue
                streak = int(iss["clean_streak"] or 0) + 1
                if streak >= k:
                    conn.execute("UPDATE issues SET state='resolved', clean_streak=?, waiver_reason=NULL,"
                                 " waiver_until=NULL, waiver_max_error=NULL, updated_at=? WHERE num=?",
                                 (streak, stamp(now), iss["num"]))
                    tr._log(iss["num"], cid, now, actor, "auto_resolved", iss["state"], "resolved",
                            note=f"within tolerance in {streak} consecutive check(s) (resolve_after = {k})")
                    summary.resolved.append(format_id(iss["num"]))
                else:
                    conn.execute("UPDATE issues SET clean_streak=? WHERE num=?", (streak, iss["num"]))
            summary.unwaived.extend(format_id(n) for n in sorted(unwaived))
            for lst in (summary.new, summary.reopened, summary.resolved, summary.still_open, summary.waived):
                lst.sort(key=lambda s: int(s[3:]))
            summary.total_open = conn.execute(
                f"SELECT COUNT(*) FROM issues WHERE state IN ({','.join('?' * len(ACTIVE))})", ACTIVE).fetchone()[0]
            final = checkfiles.publish(tr.store.root, tmp, cid)
            conn.execute("UPDATE checks SET counts=?, rows_file=? WHERE id=?",
                         (dumps(summary.counts()), final.name, cid))
    except BaseException:
        checkfiles.discard(tmp, final)
        raise
    return summary


def _observe(tr: Tracker, cid: int, now: datetime, actor: str, row: dict[str, Any],
             iss: dict[str, Any] | None, summary: CheckSummary, unwaived: set[int]) -> None:
    """File or update the issue of one discrepancy row, and add its observation."""
    conn = tr.conn
    t = stamp(now)
    latest = [as_float(row.get(f)) if f not in ("kind", "unit") else as_text(row.get(f)) for f in LATEST]
    if iss is None:
        num = conn.execute("UPDATE tracker_seq SET value = value + 1 WHERE name='issue' RETURNING value").fetchone()[0]
        conn.execute(
            f"INSERT INTO issues (num, fingerprint, state, {', '.join(KEY)}, {', '.join(LATEST)},"
            " clean_streak, first_seen, last_seen, first_check, last_check, updated_at)"
            f" VALUES ({','.join('?' * (3 + len(KEY) + len(LATEST) + 6))})",
            (num, str(row["fingerprint"]), "open", *[as_text(row.get(c)) for c in KEY], *latest,
             0, t, t, cid, cid, t))
        tr._log(num, cid, now, actor, "detected", None, "open", note=f"first seen in check {cid}")
        summary.new.append(format_id(num))
    else:
        num, state, new_state = iss["num"], iss["state"], iss["state"]
        rel = as_float(row.get("rel_error"))
        if state == "resolved":
            new_state = "reopened"
            tr._log(num, cid, now, actor, "recurred", state, new_state, note=f"seen again in check {cid}")
            summary.reopened.append(format_id(num))
        elif state == "waived":
            bound = iss["waiver_max_error"]
            if bound is not None and rel is not None and abs(rel) > bound:
                new_state = "open"
                tr._log(num, cid, now, actor, "waiver_exceeded", state, new_state,
                        note=f"|rel_error| {abs(rel):.4g} > waiver bound {bound:.4g} in check {cid}")
                unwaived.add(num)
                summary.still_open.append(format_id(num))
            else:
                summary.waived.append(format_id(num))
        else:
            summary.still_open.append(format_id(num))
        extra = ", waiver_reason=NULL, waiver_until=NULL, waiver_max_error=NULL" if new_state != state and state == "waived" else ""
        conn.execute(
            f"UPDATE issues SET state=?, {', '.join(f'{c}=?' for c in LATEST)}, clean_streak=0,"
            f" last_seen=?, last_check=?, updated_at=?{extra} WHERE num=?",
            (new_state, *latest, t, cid, t, num))
    conn.execute(
        f"INSERT INTO observations (issue_num, check_id, time, {', '.join(OBSERVATION_FIELDS)})"
        f" VALUES ({','.join('?' * (3 + len(OBSERVATION_FIELDS)))})",
        (num, cid, t, *observation_values(row)))
