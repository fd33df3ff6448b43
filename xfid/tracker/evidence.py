"""Issues whose evidence was removed (`xfid sources remove`): re-evaluated, and said so, by the next check.

An issue depends on a removed source when its latest observation's candidate or reference
record came from that source (the observation's source path is the source's, and the check
that made the observation read that source). The first check after the removal, inside its
own transaction:

- the key has a row in this check (other records still give it): `evidence_reduced`, state
  kept, and the check goes on to judge the row as usual (it may file, hold or count it clean);
- the key has no row at all although the check covered it: `evidence_removed`, the issue is
  resolved, its history saying which source went, who removed it, when and why. Never a silent
  resolve: a re-ingest that brings the discrepancy back reopens it (`recurred`).

A check that did not cover the issue (narrowed by --target, --as-of, or without its pair)
leaves it for a later one, and the removal stays pending until every dependent issue was seen.
So does a check whose correlation still read the removed source (it correlated before the
removal committed). A source ingested again before any check re-evaluated its removal has its
records back: that removal is closed without a transition.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from xfid.sqlbackend import Database
from xfid.tracker import transitions
from xfid.tracker.lifecycle import ACTIVE, format_id

EVENTS = ("evidence_removed", "evidence_reduced")


def pending(conn: Database) -> list[dict[str, Any]]:
    """The removals no check has re-evaluated yet ([] in a store that never removed a source)."""
    if "removed_sources" not in conn.tables():
        return []
    return [dict(r) for r in conn.execute(
        "SELECT removal_id, source_id, path, adapter, removed_at, actor, reason, cause, after_check "
        "FROM removed_sources WHERE evaluated_check IS NULL ORDER BY removal_id")]


def reevaluate(conn: Database, cid: int, now: datetime, actor: str, existing: dict[str, dict[str, Any]],
               present: set[str], settings: dict[str, Any] | None,
               read: set[str] | None = None) -> tuple[list[str], list[str]]:
    """Write the evidence transitions of check `cid` (inside its write transaction).

    Args:
        existing: the issues by fingerprint (as the check read them); the ones resolved here
            are updated in place, so the rest of the check sees their new state.
        present: the fingerprints that have a row in this check.
        settings: the correlation's settings (its targets, as_of and pairs say what it covered).
        read: the source ids the correlation read. A removal whose source it read was committed
            while this check correlated: it stays pending for the next check.

    Returns:
        (ids resolved because their evidence is gone, ids whose evidence was reduced).
    """
    todo = pending(conn)
    if not todo:
        return [], []
    back = {r[0] for r in conn.execute("SELECT source_id FROM sources")} & {r["source_id"] for r in todo}
    for r in [r for r in todo if r["source_id"] in back]:  # ingested again since: its records are back
        conn.execute("UPDATE removed_sources SET evaluated_check=? WHERE removal_id=?", (cid, r["removal_id"]))
    todo = [r for r in todo if r["source_id"] not in back and r["source_id"] not in (read or set())]
    if not todo:
        return [], []
    live = {n: i for i, n in ((i, int(i["num"])) for i in existing.values()) if i["state"] in (*ACTIVE, "waived")}
    latest = _latest_observations(conn, list(live))
    sources_of = _check_sources(conn, {o["check_id"] for o in latest.values()})
    gone_ids: list[str] = []
    reduced_ids: list[str] = []
    unseen: set[int] = set()
    for num, iss in sorted(live.items()):
        obs = latest.get(num)
        if obs is None:
            continue
        hits = [r for r in todo if _depends(obs, r, sources_of.get(int(obs["check_id"]))) and not _told(conn, num, r)]
        if not hits:
            continue
        if not _covered(iss, settings):
            unseen.update(int(r["removal_id"]) for r in hits)
            continue
        note = "; ".join(_said(r) for r in hits)
        if iss["fingerprint"] in present:
            transitions.write(conn, iss, "evidence_reduced", actor=actor, now=now, check_id=cid,
                              note=f"{note}; re-evaluated in check {cid} on the records that remain")
            reduced_ids.append(format_id(num))
        else:
            t = transitions.write(conn, iss, "evidence_removed", actor=actor, now=now, check_id=cid,
                                  values={"clean_streak": 0},
                                  note=f"{note}; check {cid} has no row for this key, so nothing shows the "
                                       "discrepancy any more (ingesting the source again reopens it if it holds)")
            iss["state"] = t.to_state
            gone_ids.append(format_id(num))
    done = [int(r["removal_id"]) for r in todo if int(r["removal_id"]) not in unseen]
    for rid in done:
        conn.execute("UPDATE removed_sources SET evaluated_check=? WHERE removal_id=?", (cid, rid))
    return gone_ids, reduced_ids


def _said(r: dict[str, Any]) -> str:
    why = f": {r['reason']}" if r.get("reason") else ""
    cause = f" ({r['cause']})" if r.get("cause") else ""
    return (f"evidence removed: source {r['source_id'][:12]} ({r['path']}) removed by {r['actor']} at "
            f"{r['removed_at']}{why}{cause}")


def _latest_observations(conn: Database, nums: list[int]) -> dict[int, dict[str, Any]]:
    """Each issue's latest observation (its check and both records' source paths)."""
    if not nums:
        return {}
    out: dict[int, dict[str, Any]] = {}
    for i in range(0, len(nums), 500):
        chunk = nums[i:i + 500]
        q = ("SELECT issue_num, check_id, candidate_source_path, reference_source_path FROM observations "
             f"WHERE id IN (SELECT MAX(id) FROM observations WHERE issue_num IN ({','.join('?' * len(chunk))}) "
             "GROUP BY issue_num)")
        for r in conn.execute(q, tuple(chunk)):
            out[int(r[0])] = {"check_id": r[1], "paths": {r[2], r[3]} - {None, ""}}
    return out


def _check_sources(conn: Database, ids: set[int]) -> dict[int, set[str] | None]:
    """The source ids each check read (None: the check did not record them)."""
    out: dict[int, set[str] | None] = {}
    for cid in sorted(ids):
        r = conn.execute("SELECT sources FROM checks WHERE id=?", (int(cid),)).fetchone()
        try:
            srcs = json.loads(r[0]) if r is not None else None
        except ValueError:
            srcs = None
        out[int(cid)] = {str(s.get("source_id")) for s in srcs if isinstance(s, dict)} if srcs else None
    return out


def _depends(obs: dict[str, Any], removal: dict[str, Any], read: set[str] | None) -> bool:
    """Whether the observation's records came from the removed source: its path, in a check that
    read that source (a check after the removal reads it no more, unless it correlated before)."""
    if removal["path"] not in obs["paths"]:
        return False
    return read is None or removal["source_id"] in read


def _told(conn: Database, num: int, removal: dict[str, Any]) -> bool:
    """Whether an earlier check already re-evaluated this issue for this removal (the removal
    stayed pending for another issue that check did not cover)."""
    q = (f"SELECT note FROM transitions WHERE issue_num=? AND action IN ({','.join('?' * len(EVENTS))})"
         " AND check_id > ?")
    after = removal.get("after_check") or 0
    mark = f"source {removal['source_id'][:12]} ({removal['path']}) removed by {removal['actor']} at " \
           f"{removal['removed_at']}"
    return any(mark in (r[0] or "") for r in conn.execute(q, (num, *EVENTS, int(after))))


def _covered(iss: dict[str, Any], settings: dict[str, Any] | None) -> bool:
    """Whether this check could have produced the issue's row: all targets (or its own), no
    --as-of, and its candidate/reference pair among the pairs compared."""
    s = settings or {}
    if s.get("as_of"):
        return False
    targets = s.get("targets") or []
    if targets and iss.get("target") not in targets:
        return False
    pairs = s.get("pairs")
    if isinstance(pairs, list) and pairs and all(isinstance(p, dict) for p in pairs):
        return any(p.get("candidate") == iss.get("candidate") and p.get("reference") == iss.get("reference")
                   for p in pairs)
    return True
