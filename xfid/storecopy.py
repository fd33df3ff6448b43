"""`xfid store copy`: a store's manifest, parts and whole tracker history into a team store.

Safe to re-run: a source already in the destination is checked, not copied again; parts are
written as temps and registered with their source in one transaction (renamed after it on a
directory, uploaded under their final name to a bucket); the tracker is copied once, in one
transaction, ids kept. Afterwards every table's row count and content checksum, and every
part's SHA-256, are compared on both sides.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfid import committed, locations, sqlbackend
from xfid.errors import StoreError
from xfid.store import Store

TRACKER_TABLES = ("checks", "issues", "observations", "transitions", "tracker_seq")
"""In foreign-key order; each keeps its ids."""
KEYS = {"sources": "source_id", "parts": "file", "checks": "id", "issues": "num", "observations": "id",
        "transitions": "id", "tracker_seq": "name"}


@dataclass
class CopyReport:
    source: dict[str, str]
    destination: dict[str, str]
    sources_copied: int = 0
    sources_present: int = 0
    parts_copied: int = 0
    tracker_copied: bool = False
    counts: dict[str, int] = field(default_factory=dict)  # rows per table, equal on both sides
    parts_verified: int = 0


def _sha256(store: Store, path: Any) -> str:
    h = hashlib.sha256()
    f = store.location.open_input(path)
    with (open(f, "rb") if isinstance(f, (str, os.PathLike)) else f) as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _rows(conn: sqlbackend.Database, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    cur = conn.execute(f"SELECT * FROM {table} ORDER BY {KEYS[table]}")
    rows = cur.fetchall()
    cols = [d[0] for d in cur.description] if cur.description else []
    keep = [i for i, c in enumerate(cols) if c != "seq"]  # PostgreSQL's parts order column
    return [cols[i] for i in keep], [tuple(r[i] for i in keep) for r in rows]


def _digest(rows: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(repr([tuple(float(v) if isinstance(v, int) and not isinstance(v, bool) else v
                                      for v in r) for r in rows]).encode()).hexdigest()


def _insert(conn: sqlbackend.Database, table: str, cols: list[str], row: tuple[Any, ...]) -> None:
    conn.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({','.join('?' * len(cols))})", row)


def copy_store(src: Store, database: str, records: str | None = None) -> CopyReport:
    """Copy `src` into the store at `database` (and `records`: default, where src keeps its parts).

    Raises:
        StoreError: the destination tracker already holds a different history, a part cannot be
            copied, or the verification finds a difference (nothing half-registered either way).
    """
    from xfid.tracker import db as tracker_db

    dst = Store(src.root, database=database, records=records if records is not None else str(src.location.base)
                if src.fs is None else records)
    rep = CopyReport(src.describe(), dst.describe())
    with dst:
        dst.require_writable("copy a store into it")
        tracker_db.setup(src.conn)
        tracker_db.setup(dst.conn)
        with dst.conn.write_tx():  # a new catalog takes the source's store id (its parts' footers carry it)
            if not dst.sources() and src.store_id and dst.store_id != src.store_id:
                dst.conn.execute("UPDATE store_meta SET value=? WHERE key='store_id'", (src.store_id,))
                dst.store_id = src.store_id
                locations.write_id(dst)  # the records location names the store it now is
        same_place = dst.fs is None and src.fs is None and Path(dst.records).resolve() == Path(src.records).resolve()
        src_parts = [tuple(r) for r in src.conn.execute(
            f"SELECT file, source_id, fidelity, rows FROM parts ORDER BY {src.conn.rowid}").fetchall()]
        by_source: dict[str, list[tuple[Any, ...]]] = {}
        for p in src_parts:  # registration order kept: readers see the parts in the same order
            by_source.setdefault(p[1], []).append(p)
        scols, src_sources = _rows(src.conn, "sources")
        order = {sid: i for i, sid in enumerate(by_source)}
        for srow in sorted(src_sources, key=lambda r: (order.get(r[0], len(order)), r[0])):
            sid = srow[0]
            if dst.has_source(sid):
                rep.sources_present += 1
                continue
            renames: list[tuple[Any, Any]] = []
            written: list[Any] = []
            try:
                for file, _sid, _fid, _n in by_source.get(sid, []):
                    if same_place:
                        continue
                    part = src.records / file
                    if src.fs is None and not Path(part).exists() and src.twin(part) is not None:
                        part = src.twin(part) or part
                    target = dst.records / file
                    tmp = target if dst.fs is not None else \
                        target.with_name(f".tmp-{dst.store_id}-{Path(file).name[5:]}")
                    _copy_file(src, part, dst, tmp)
                    written.append(tmp)
                    if _sha256(src, part) != _sha256(dst, tmp):
                        raise StoreError(f"{dst.location.label}/{file}: the copy differs from {part}; nothing of "
                                         f"source {sid[:12]} was registered (run the copy again)")
                    if tmp != target:
                        renames.append((tmp, target))
                if renames:  # the committed-file protocol (xfid.committed): attempt recorded, then committing
                    committed.record_attempts(dst.conn, [committed.attempt_key(t) for t, _ in renames])
                    for i, (t, target) in enumerate(renames):
                        os.replace(t, committed.committing_name(t))
                        renames[i] = (committed.committing_name(t), target)
                        written[written.index(t)] = renames[i][0]
                with dst.conn.write_tx():
                    if dst.has_source(sid):  # another copy got there first
                        rep.sources_present += 1
                        renames = []
                    else:
                        _insert(dst.conn, "sources", scols, srow)
                        for p in by_source.get(sid, []):
                            _insert(dst.conn, "parts", ["file", "source_id", "fidelity", "rows"], p)
                        rep.sources_copied += 1
                        rep.parts_copied += len(by_source.get(sid, []))
            except BaseException:
                for w in written:
                    dst.location.delete(w)
                raise
            for tmp, target in renames:
                os.replace(tmp, target)
            for w in written if not renames and dst.fs is None else ():
                dst.location.delete(w)  # not registered (already there): no stray temp
        rep.tracker_copied = _copy_tracker(src.conn, dst.conn)
        _verify(src, dst, rep)
    return rep


def _copy_file(src: Store, part: Any, dst: Store, tmp: Any) -> None:
    import pyarrow.fs as pafs

    try:
        if dst.fs is None:
            Path(tmp).parent.mkdir(parents=True, exist_ok=True)
        pafs.copy_files(str(part), str(tmp), source_filesystem=src.fs or pafs.LocalFileSystem(),
                        destination_filesystem=dst.fs or pafs.LocalFileSystem())
    except OSError as e:
        raise StoreError(f"{part}: cannot copy this part to {dst.location.label}: {sqlbackend.mask(e)} "
                         "(nothing of its source was registered; run the copy again)") from None


def _copy_tracker(src: sqlbackend.Database, dst: sqlbackend.Database) -> bool:
    """The whole tracker history, ids kept, in one transaction; False when it is already there."""
    with dst.write_tx():
        have = dst.execute("SELECT COUNT(*) FROM checks").fetchone()[0] + \
            dst.execute("SELECT COUNT(*) FROM issues").fetchone()[0]
        if have:
            for t in TRACKER_TABLES:
                if _digest(_rows(src, t)[1]) != _digest(_rows(dst, t)[1]):
                    raise StoreError(f"{dst.label}: its tracker already holds a different history ({t} differs); "
                                     "a tracker is copied into an empty one only (nothing was changed)")
            return False
        dst.execute("DELETE FROM tracker_seq")
        for t in TRACKER_TABLES:
            cols, rows = _rows(src, t)
            for r in rows:
                _insert(dst, t, cols, r)
        if dst.dialect == sqlbackend.POSTGRESQL:  # new rows continue after the copied ids
            for t in ("checks", "observations", "transitions"):
                dst.execute(f"SELECT setval(pg_get_serial_sequence('{t}', 'id'), "
                            f"GREATEST((SELECT MAX(id) FROM {t}), 1), (SELECT MAX(id) FROM {t}) IS NOT NULL)")
    return True


def _verify(src: Store, dst: Store, rep: CopyReport) -> None:
    """Row counts and content checksums of every table, and every part's SHA-256, on both sides."""
    for t in ("sources", "parts", *TRACKER_TABLES):
        a, b = _rows(src.conn, t)[1], _rows(dst.conn, t)[1]
        if t in ("sources", "parts"):  # the destination may hold more (a team store): ours must be there
            keys = {r[0] for r in a}
            b = [r for r in b if r[0] in keys]
        if len(a) != len(b) or _digest(a) != _digest(b):
            raise StoreError(f"{dst.db_label}: after the copy, table {t} differs from {src.db_label} ({len(a)} vs "
                             f"{len(b)} rows); run the copy again")
        rep.counts[t] = len(a)
    for file, *_ in _rows(src.conn, "parts")[1]:
        mine = src.records / file
        if src.fs is None and not Path(mine).exists():
            mine = src.twin(mine) or mine
        theirs = dst.records / file
        if dst.fs is None and not Path(theirs).exists():
            theirs = dst.twin(theirs) or theirs
        if _sha256(src, mine) != _sha256(dst, theirs):
            raise StoreError(f"{theirs}: differs from {mine} after the copy; run the copy again")
        rep.parts_verified += 1


__all__ = ["CopyReport", "copy_store"]
