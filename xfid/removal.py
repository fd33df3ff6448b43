"""Taking a source back out (`xfid sources remove`): its records leave every later read, at once.

A removal is one catalog transaction, all or nothing like an ingest: the source's row and its
parts' rows move from `sources`/`parts` into `removed_sources`/`removed_parts` (this module's
own migration component, "removal"). Every reader selects parts through `parts`, so none of
them sees the rows any more; the part files stay where they are, registered in
`removed_parts`, so the catalog check, the sweep and `xfid doctor` still know them (they are
neither strangers nor orphans). Nothing is deleted: `xfid sources --all` lists each removal
with who removed it, when and why, and the same file can be ingested again (its source id is
free in `sources` again; a new ingest writes new parts).

A derived source computed from the removed one (the energy of a run: xfid.power) goes with
it, noted as such. The next check re-evaluates the issues whose last observation came from a
removed source and says so in their history (xfid.tracker.evidence).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xfid.errors import StoreError
from xfid.removal_db import COMPONENT, MIGRATIONS, removals, setup
from xfid.sqlbackend import Database
from xfid.store import fault_point, utc_now, write_tx

if TYPE_CHECKING:
    from xfid.store import Store

SOURCE_COLUMNS = ("source_id", "path", "adapter", "options", "content_hash", "rows", "ingested_at", "summary")
MIN_PREFIX = 6
"""A source id may be given by a unique prefix this long or longer (`xfid sources` shows 12)."""


@dataclass
class Removed:
    """One source taken out: what it was, who removed it, when, why."""

    removal_id: int
    source_id: str
    path: str
    adapter: str
    rows: int
    removed_at: str
    actor: str
    reason: str | None
    cause: str | None  # None: named by the user; else why it went with another ("derived from ...")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def remove_source(store: Store, ref: str, *, actor: str, reason: str | None = None) -> list[Removed]:
    """Remove the source `ref` (a source id, a unique prefix of one, or the path it was ingested
    from) and the derived sources computed from it, in one transaction.

    Returns:
        The removals: the named source first, then what went with it.

    Raises:
        StoreError: an unknown source (close matches named), one already removed (by whom, when),
            an ambiguous path or prefix (the candidates listed), a read-only store.
    """
    store.require_writable("remove a source")
    reason = (reason or "").strip() or None
    conn = store.conn
    setup(conn)
    sid = resolve(store, ref)
    out: list[Removed] = []
    with write_tx(conn):
        store.check_catalog()
        store.settle()  # committed temps renamed first: the parts moved are their final names
        live = {s["source_id"]: s for s in store.sources()}
        if sid not in live:  # removed by another process since it was resolved
            raise _already(store, ref, [r for r in removals(conn) if r["source_id"] == sid])
        row = conn.execute("SELECT MAX(id) FROM checks").fetchone() if "checks" in conn.tables() else None
        after = row[0] if row else None
        now = utc_now()
        out.append(_move(conn, live[sid], now, actor, reason, None, after))
        fault_point("remove.first_moved")
        for d in derived_from(live, sid):
            out.append(_move(conn, d, now, actor, reason, f"derived from source {sid[:12]}, removed with it", after))
        fault_point("remove.before_commit")
    fault_point("remove.after_commit")
    return out


def _move(conn: Database, src: dict[str, Any], now: str, actor: str, reason: str | None, cause: str | None,
          after: int | None) -> Removed:
    """Move one source's row and its parts' rows into the removal tables (inside the transaction)."""
    sid = src["source_id"]
    rid = int(conn.execute(
        f"INSERT INTO removed_sources ({', '.join(SOURCE_COLUMNS)}, removed_at, actor, reason, cause, after_check)"
        f" VALUES ({','.join('?' * (len(SOURCE_COLUMNS) + 5))}) RETURNING removal_id",
        (*(src[c] for c in SOURCE_COLUMNS), now, actor, reason, cause, after)).fetchone()[0])
    conn.execute("INSERT INTO removed_parts (file, removal_id, source_id, fidelity, rows) "
                 "SELECT file, ?, source_id, fidelity, rows FROM parts WHERE source_id=?", (rid, sid))
    fault_point("remove.parts_copied")
    conn.execute("DELETE FROM parts WHERE source_id=?", (sid,))
    conn.execute("DELETE FROM sources WHERE source_id=?", (sid,))
    return Removed(rid, sid, src["path"], src["adapter"], int(src["rows"]), now, actor, reason, cause)


def keep_removed(db: Path, sources: dict[str, Any]) -> None:
    """`--rebuild-catalog` from an older copy of this store's database (`db`): the parts it
    records as removed stay removed (dropped from the rebuilt `sources`, {source id: with .parts})."""
    import sqlite3

    from xfid.store import connect_readonly

    try:
        conn = connect_readonly(db)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            files = {r[0] for r in conn.execute("SELECT file FROM removed_parts")} \
                if "removed_parts" in tables else set()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return
    for sid, s in list(sources.items()):
        s.parts = [p for p in s.parts if p[0] not in files]
        if not s.parts:
            del sources[sid]


def derived_from(live: dict[str, dict[str, Any]], sid: str) -> list[dict[str, Any]]:
    """The live sources computed from source `sid` (their options name it among their inputs)."""
    from xfid.power import DERIVED

    out = []
    for s in live.values():
        if s["adapter"] != DERIVED or s["source_id"] == sid:
            continue
        try:
            inputs = json.loads(s["options"]).get("inputs") or []
        except (ValueError, AttributeError):
            continue
        if sid in inputs:
            out.append(s)
    return out


def resolve(store: Store, ref: str) -> str:
    """The source id `ref` names: an id, a unique prefix (>= MIN_PREFIX characters), or a path.

    Raises:
        StoreError: nothing matches (close ids and paths suggested), it was removed already, or
            several sources match (listed, with the id to give).
    """
    text = str(ref).strip()
    if not text:
        raise StoreError("sources remove: give a SOURCE_ID (or a unique prefix of one) or the PATH a source was "
                         "ingested from (`xfid sources` lists them)")
    live = store.sources()
    hits = _matches(live, text)
    if len(hits) == 1:
        return str(hits[0]["source_id"])
    if hits:
        listed = "; ".join(f"{s['source_id'][:16]} ({s['adapter']}, {s['path']}, ingested {s['ingested_at']})"
                           for s in hits[:10])
        raise StoreError(f"sources remove: {text!r} matches {len(hits)} sources: {listed}; give the SOURCE_ID of "
                         "the one to remove")
    gone = _matches(removals(store.conn), text)
    if gone:
        raise _already(store, text, gone)
    names = [s["source_id"][:12] for s in live] + [s["path"] for s in live]
    close = difflib.get_close_matches(text, names, n=3, cutoff=0.5)
    close += [s["source_id"][:12] for s in live if text in s["source_id"] and s["source_id"][:12] not in close][:3]
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    raise StoreError(f"sources remove: no source {text!r} in {store.root}; {hint}"
                     "(`xfid sources` lists the source ids and paths)")


def _matches(rows: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The rows whose source id is `text` (or starts with it), else whose path is it."""
    exact = [s for s in rows if s["source_id"] == text]
    if exact:
        return _distinct(exact)
    if len(text) >= MIN_PREFIX:
        pre = [s for s in rows if s["source_id"].startswith(text)]
        if pre:
            return _distinct(pre)
    same = [s for s in rows if s["path"] == text]
    if not same:
        want = _resolved(text)
        same = [s for s in rows if want is not None and _resolved(s["path"]) == want]
    return _distinct(same)


def _distinct(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per source id (a source removed twice, re-ingested between, is one source)."""
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        seen[r["source_id"]] = r  # the latest removal of each
    return list(seen.values())


def _resolved(path: str) -> Path | None:
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def _already(store: Store, ref: str, gone: list[dict[str, Any]]) -> StoreError:
    """The error for removing again: who removed it, when, why, and how to bring it back."""
    last = gone[-1]
    why = f": {last['reason']}" if last.get("reason") else ""
    return StoreError(f"sources remove: source {last['source_id'][:12]} ({last['path']}) was already removed by "
                      f"{last['actor']} at {last['removed_at']}{why}; nothing was changed (`xfid sources --all` "
                      "lists removals; ingest the file again to bring it back)")


__all__ = [
    "COMPONENT",
    "MIGRATIONS",
    "Removed",
    "derived_from",
    "keep_removed",
    "removals",
    "remove_source",
    "resolve",
    "setup",
]
