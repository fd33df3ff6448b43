"""`xfid store copy`: a store's manifest, parts, check rows and whole tracker history into a team store.

In three steps, so that a refused or failed copy changes nothing in the destination:

1. Plan (reads only): everything that can refuse is checked here, before anything is written —
   the destination is writable, its tracker is empty or holds this very history, every part and
   every check's rows file of this store can be read, and no file of the destination is in the way.
2. Write the files as the store's temps (`.tmp-<store id>-…`: unregistered, so invisible to
   readers and swept after the grace period if left behind; on a bucket, uploaded under their
   final names, unregistered) and compare each one's SHA-256 with its original; then register
   everything — the store id a new catalog takes, sources, parts, the tracker history — in ONE
   transaction, which checks the plan again under the write lock (another writer may have come
   between). Any failure rolls it back and removes the files written.
3. After COMMIT, rename the temps into place (a reader uses the temp until then), and compare
   every table's rows and every part's and check file's SHA-256 on both sides.

Safe to re-run: a source already in the destination is checked, not copied again; a tracker
already there must be identical; a check file already there must be the same bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfid import committed, locations, sqlbackend
from xfid import records as recloc
from xfid.errors import StoreError
from xfid.store import CHECKS_IN_BUCKET, Store

TRACKER_TABLES = ("checks", "issues", "observations", "transitions", "tracker_seq")
"""The tracker's history, in foreign-key order; each keeps its ids. Copied as a whole or not at all."""
EXTRA_TABLES = ("check_configs", "triage_pending", "issue_links", "labelled_snapshots")
"""History kept beside the tracker (each check's config, uncertain streaks, issue links, labelled snapshots), each copied
when the destination's is empty. The serve component's secret and tokens are not copied: they are
the credentials of one server, and the team's server makes its own (docs/team.md)."""
KEYS = {"sources": "source_id", "parts": "file", "checks": "id", "issues": "num", "observations": "id",
        "transitions": "id", "tracker_seq": "name", "check_configs": "check_id", "triage_pending": "fingerprint",
        "issue_links": "id",
        "labelled_snapshots": "id"}
SERIAL_IDS = ("checks", "observations", "transitions", "issue_links", "labelled_snapshots")
NOT_CHANGED = "nothing was changed in the destination"


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
    checks_copied: int = 0  # check rows files
    checks_verified: int = 0


@dataclass
class _File:
    """One file to copy: where it is read (`src_fs`: None for a local path) and written."""

    what: str  # e.g. "part fidelity=rtl/part-….parquet", "the rows of check 2"
    src: Any
    src_fs: Any
    final: Any  # its name in the destination once registered
    temp: Any  # where it is written before the commit (== final on a bucket)
    source_id: str | None = None  # a part's source; None for a check file


@dataclass
class _Plan:
    store_id: str  # the destination's store id after the copy
    adopt_id: bool  # a new catalog takes the source's id (its parts' footers carry it)
    sources: list[tuple[Any, ...]]  # rows of `sources` to register, in registration order
    source_cols: list[str]
    parts: dict[str, list[tuple[Any, ...]]]  # source id -> its rows of `parts`
    tables: list[str]  # history tables to copy (TRACKER_TABLES as a whole, and EXTRA_TABLES)
    present: int = 0  # sources already in the destination
    skipped: set[str] = field(default_factory=set)  # registered by another copy during this one
    files: list[_File] = field(default_factory=list)


# --- small helpers ----------------------------------------------------------------------
def _fs_of(store: Store) -> Any:
    import pyarrow.fs as pafs

    return store.fs or pafs.LocalFileSystem()


def _sha256(fs: Any, path: Any) -> str:
    h = hashlib.sha256()
    with (open(path, "rb") if fs is None else fs.open_input_stream(str(path))) as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _exists(fs: Any, path: Any) -> bool:
    if fs is None:
        return Path(path).is_file()
    import pyarrow.fs as pafs

    return bool(fs.get_file_info(str(path)).type == pafs.FileType.File)


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


# --- the copy ---------------------------------------------------------------------------
def copy_store(src: Store, database: str, records: str | None = None) -> CopyReport:
    """Copy `src` into the store at `database` (and `records`: default, where src keeps its parts).

    Raises:
        StoreError: refused before anything was written (the destination is read-only, its tracker
            holds a different history, a file of this store is missing or one of the destination's
            is in the way), or a file or the transaction failed (rolled back, the files written
            removed: the destination is as it was); or, after the commit, the verification found a
            difference (the message says so).
    """
    given = records if records is not None else str(src.location.base) if src.fs is None else records
    undo = _Undo.take(database, given, src.root)
    try:
        return _copy(src, database, given, undo)
    except BaseException:
        if not undo.committed:
            undo.run()
        raise


@dataclass
class _Undo:
    """What a copy into a brand-new team store makes before anything is registered (the catalog's
    tables, the records folder, its store id file): taken away again when the copy is refused or
    fails, so the destination is exactly as before. A destination that existed is changed by
    nothing but the one registering transaction (rolled back on failure)."""

    database: str
    location: recloc.Location
    new_catalog: bool  # the database held no table at all
    had_id_file: bool
    missing_dirs: list[Path] = field(default_factory=list)  # local folders that were not there, deepest first
    committed: bool = False

    @classmethod
    def take(cls, database: str, records: str | None, root: Path) -> _Undo:
        conn = sqlbackend.connect(database)
        try:
            new = not conn.tables()
        finally:
            conn.close()
        # where a new team store keeps its records: the given place, else XFID_RECORDS_URL, else root/records
        loc = recloc.resolve(records, root)
        had_id = bool(new) and loc.exists(loc.base / locations.ID_FILE)
        missing: list[Path] = []
        if new and loc.fs is None:
            for d in (Path(loc.base), Path(loc.base).parent / "checks",
                      *Path(loc.base).parents):
                if not d.exists() and d not in missing:
                    missing.append(d)
            missing.sort(key=lambda d: len(d.parts), reverse=True)
        return cls(database, loc, new, had_id, missing)

    def run(self) -> None:
        """Drop the tables the copy made in a database that held none (only while it registers no
        source and no check: another writer's store is never touched), remove the id file and the
        folders it made (when empty)."""
        if not self.new_catalog:
            return
        conn = sqlbackend.connect(self.database)
        try:
            with contextlib.suppress(*sqlbackend.errors(), StoreError), conn.write_tx():
                tables = conn.tables()
                used = any(conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() for t in ("sources", "checks")
                           if t in tables)
                if used:
                    return
                for t in sorted(tables):
                    conn.execute(f'DROP TABLE IF EXISTS "{t}" CASCADE')
        finally:
            conn.close()
        if not self.had_id_file:
            with contextlib.suppress(StoreError, OSError):
                self.location.delete(self.location.base / locations.ID_FILE)
        for d in self.missing_dirs:
            with contextlib.suppress(OSError):
                d.rmdir()  # only an empty one


def _copy(src: Store, database: str, records: str | None, undo: _Undo) -> CopyReport:
    """copy_store, once the destination's state before it is noted (`undo`)."""
    from xfid.serve import catalog as serve_catalog
    from xfid.tracker import config_db, triage_db
    from xfid.tracker import db as tracker_db

    # opened without comparing its catalog with the records: when they are this store's own (no
    # --to-records), the parts are there and the new catalog does not know them yet: what the copy is for
    dst = Store(src.root, database=database, records=records, check=False)
    rep = CopyReport(src.describe(), dst.describe())
    with dst:
        if not _same_place(src, dst):
            dst.check_catalog()  # a team store whose catalog does not describe its records: refused
        if dst.readonly or (dst.store_id is None and not _same_place(src, dst)):
            dst.require_writable("copy a store into it")
        for setup in (tracker_db.setup, triage_db.setup, config_db.setup):
            setup(src.conn)
            setup(dst.conn)
        if "issue_links" in src.conn.tables():
            serve_catalog.setup(dst.conn)
        plan = _plan(src, dst)
        written: list[_File] = []
        ids = _id_positions(dst.conn)
        try:
            for f in plan.files:
                _write(f, dst, written)
            _committing(dst, plan)  # the committed-file protocol (xfid.committed): attempts, then names
            with dst.conn.write_tx():
                _register(src, dst, plan, rep)
            undo.committed = True
        except BaseException:
            _discard(dst, written)
            _restore_ids(dst.conn, ids)
            raise
        if plan.adopt_id:
            locations.write_id(dst)  # the records location names the store it now is
        _publish(dst, plan, rep)
        _verify(src, dst, rep)
    return rep


def _plan(src: Store, dst: Store) -> _Plan:
    """What the copy will write; raises StoreError, having written nothing, for whatever refuses it."""
    _same_records(dst)
    adopt = bool(src.store_id) and not dst.sources() and dst.store_id != src.store_id
    store_id = src.store_id if adopt else dst.store_id
    if not store_id:  # neither has an id (a store from before store ids, opened read-only)
        raise StoreError(f"{src.root}: this store has no store id yet (it is read-only here); run any xfid command "
                         f"on it once with write access, then copy it ({NOT_CHANGED})")
    src_parts = [tuple(r) for r in src.conn.execute(
        f"SELECT file, source_id, fidelity, rows FROM parts ORDER BY {src.conn.rowid}").fetchall()]
    by_source: dict[str, list[tuple[Any, ...]]] = {}
    for p in src_parts:  # registration order kept: readers see the parts in the same order
        by_source.setdefault(p[1], []).append(p)
    scols, src_sources = _rows(src.conn, "sources")
    order = {sid: i for i, sid in enumerate(by_source)}
    plan = _Plan(store_id, adopt, [], scols, by_source, _history_to_copy(src.conn, dst.conn))
    for srow in sorted(src_sources, key=lambda r: (order.get(r[0], len(order)), r[0])):
        if dst.has_source(srow[0]):
            plan.present += 1
        else:
            plan.sources.append(srow)
    if not _same_place(src, dst):
        for srow in plan.sources:
            plan.files.extend(_part_file(src, dst, p, store_id) for p in by_source.get(srow[0], []))
    plan.files.extend(_check_files(src, dst, store_id))
    return plan


def _same_place(src: Store, dst: Store) -> bool:
    """Whether the destination's records are this store's own folder (nothing to copy but the catalog)."""
    return dst.fs is None and src.fs is None and Path(dst.records).resolve() == Path(src.records).resolve()


def _same_records(dst: Store) -> None:
    """A team store keeps its parts in one place (its catalog says where): copying them elsewhere would
    register parts no other machine finds."""
    row = dst.conn.execute("SELECT value FROM store_meta WHERE key='records'").fetchone()
    given = dst.location.label if dst.fs is not None else str(Path(dst.records).absolute())
    if row is not None and row[0] != given:
        raise StoreError("{label}: this team store keeps its records at {kept}, not {given} ({unchanged}; give "
                         "{records} {kept})", params=("records",), label=dst.db_label, kept=row[0], given=given,
                         unchanged=NOT_CHANGED)


def _history_to_copy(src: sqlbackend.Database, dst: sqlbackend.Database) -> list[str]:
    """The history tables to copy: the tracker's as a whole into an empty tracker (none when it is
    there, identical), each extra one into an empty table. StoreError for a different history."""
    def refuse(table: str) -> StoreError:
        return StoreError(f"{dst.label}: its tracker already holds a different history ({table} differs from "
                          f"{src.label}); a tracker is copied into an empty one only, or one holding this very "
                          f"history ({NOT_CHANGED}; copy into a new database, or empty that one's tracker)")

    out: list[str] = []
    have = dst.execute("SELECT COUNT(*) FROM checks").fetchone()[0] + \
        dst.execute("SELECT COUNT(*) FROM issues").fetchone()[0]
    if have:
        for t in TRACKER_TABLES:
            if _digest(_rows(src, t)[1]) != _digest(_rows(dst, t)[1]):
                raise refuse(t)
    else:
        out.extend(TRACKER_TABLES)
    tables = dst.tables()
    for t in EXTRA_TABLES:
        if t not in src.tables():
            continue
        if t not in tables:
            raise StoreError(f"{dst.label}: has no table {t} to copy {src.label}'s into ({NOT_CHANGED})")
        mine, theirs = _rows(src, t)[1], _rows(dst, t)[1]
        if not theirs:
            out.append(t)
        elif _digest(mine) != _digest(theirs):
            raise refuse(t)
    return out


def _part_file(src: Store, dst: Store, part: tuple[Any, ...], store_id: str) -> _File:
    file, sid = part[0], part[1]
    path = src.records / file
    if src.fs is None and not Path(path).exists():
        path = src.twin(path) or path  # committed, not renamed yet
    if not _exists(src.fs, path):
        raise StoreError(f"{src.records / file}: this part of source {sid[:12]} is missing, so the store cannot "
                         f"be copied ({NOT_CHANGED}; run `xfid doctor`)")
    final = dst.records / file
    temp = final if dst.fs is not None else committed.written_name(final.parent, store_id,
                                                                    Path(file).name[5:].removesuffix(".parquet"))
    return _File(f"part {file}", path, src.fs, final, temp, sid)


def _check_files(src: Store, dst: Store, store_id: str) -> list[_File]:
    """The rows file of each of this store's checks that the destination does not have yet."""
    from xfid.tracker import checkfiles

    out = []
    checks = src.conn.execute("SELECT id, rows_file FROM checks WHERE rows_file IS NOT NULL ORDER BY id").fetchall()
    for cid, name in ((int(r[0]), str(r[1])) for r in checks):
        where = _source_check_file(src, cid, name)
        if where is None:
            raise StoreError(f"{checkfiles.checks_dir(src.checks_root) / name}: the rows of check {cid} are "
                             f"missing, so the store cannot be copied whole ({NOT_CHANGED}; run `xfid doctor`)")
        path, fs = where
        if dst.fs is None:
            final = checkfiles.checks_dir(dst.checks_root) / name
            temp = committed.written_name(final.parent, store_id)  # a written check temp
            if Path(final).resolve() == Path(path).resolve():
                continue  # the same folder (records copied in place)
        else:
            final = temp = dst.records / CHECKS_IN_BUCKET / name
        if _exists(dst.fs, final):
            if _sha256(dst.fs, final) != _sha256(fs, path):
                raise StoreError(f"{dst.location.label if dst.fs else final}: holds other rows of check {cid} than "
                                 f"{path} ({NOT_CHANGED}; copy into a new team store, or move that file away)")
            continue
        out.append(_File(f"the rows of check {cid}", path, fs, final, temp))
    return out


def _source_check_file(src: Store, cid: int, name: str) -> tuple[Any, Any] | None:
    """(path, filesystem) of a check's rows in this store: its file, the temp of a check not renamed
    yet, or on a bucket store the shared copy; None when missing."""
    from xfid.tracker import checkfiles

    local = checkfiles.checks_dir(src.checks_root) / name
    for p in (local, local.with_name(checkfiles.staged_name(src.store_id or "", cid))):
        if p.is_file():
            return p, None
    shared = src.records / CHECKS_IN_BUCKET / name
    if src.fs is not None and _exists(src.fs, shared):
        return shared, src.fs
    return None


def _write(f: _File, dst: Store, written: list[_File]) -> None:
    """Copy one file to its temp and compare the bytes (before any commit: unregistered until then)."""
    import pyarrow.fs as pafs

    try:
        if dst.fs is None:
            Path(f.temp).parent.mkdir(parents=True, exist_ok=True)
        written.append(f)
        pafs.copy_files(str(f.src), str(f.temp), source_filesystem=f.src_fs or pafs.LocalFileSystem(),
                        destination_filesystem=_fs_of(dst))
    except OSError as e:
        raise StoreError(f"{f.src}: cannot copy {f.what} to {dst.location.label}: {sqlbackend.mask(e)} "
                         f"({NOT_CHANGED}; run the copy again)") from None
    if _sha256(f.src_fs, f.src) != _sha256(dst.fs, f.temp):
        raise StoreError(f"{f.temp}: the copy of {f.what} differs from {f.src} ({NOT_CHANGED}; run the copy again)")


def _committing(dst: Store, plan: _Plan) -> None:
    """Before COMMIT, as every writer does (xfid.committed): record each local temp's commit
    attempt, then give it its committing name, which no sweep ever deletes. A copy killed after
    COMMIT leaves committing files the next writer renames; one killed before leaves attempts
    that doctor reports (nothing registered, nothing lost)."""
    if dst.fs is not None:
        _mark_objects(dst, plan)
        return
    local = [f for f in plan.files if f.temp != f.final and dst.fs is None]
    if not local:
        return
    keys = [committed.attempt_key(Path(f.temp)) for f in local]
    committed.record_attempts(dst.conn, keys)
    for f in local:
        if f.source_id is None:  # a check's rows: `.tmp-<id>-check-<N>-<random>.committing.parquet`
            cid = int(Path(f.final).stem.split("-", 1)[1])
            target = committed.check_committing_name(Path(f.temp).parent, str(plan.store_id), cid,
                                                     attempt_rest(f.temp))
        else:
            target = committed.committing_name(Path(f.temp))
        os.replace(f.temp, target)
        f.temp = target


def _mark_objects(dst: Store, plan: _Plan) -> None:
    """A bucket's parts: their attempts recorded, then their empty commit marks (xfid.committed)."""
    parts = [f for f in plan.files if f.source_id is not None]
    if not parts:
        return
    committed.record_attempts(dst.conn, [committed.attempt_key(Path(str(f.final))) for f in parts])
    for f in parts:
        dst.location.put(_mark(dst, f), b"")


def _mark(dst: Store, f: _File) -> Any:
    return committed.mark_path(dst.records, str(f.final.relative_to(dst.records)))


def attempt_rest(temp: Any) -> str:
    """The random part of a written temp's name `.tmp-<store id>-<random>.parquet`."""
    return committed.attempt_key(Path(temp)).rsplit("-", 1)[1]


def _discard(dst: Store, written: list[_File]) -> None:
    """Remove what a failed copy wrote. On a bucket a part is uploaded under its final name: one whose
    source another copy has registered meanwhile (or when that cannot be told) is left to the sweep."""
    for f in written:
        if dst.fs is not None and f.source_id is not None:
            try:
                if dst.has_source(f.source_id):
                    continue
            except StoreError:
                continue
        dst.location.delete(f.temp)
        if dst.fs is not None and f.source_id is not None:
            with contextlib.suppress(StoreError):
                dst.location.delete(_mark(dst, f))


def _register(src: Store, dst: Store, plan: _Plan, rep: CopyReport) -> None:
    """Inside the write transaction: check the plan again under the lock, then register it all."""
    conn = dst.conn
    if plan.adopt_id:
        if dst.sources():  # a writer came between: the temps carry the wrong id
            raise StoreError(f"{dst.db_label}: another writer ingested into it during the copy ({NOT_CHANGED}; "
                             "run the copy again)")
        conn.execute("INSERT INTO store_meta (key, value) VALUES ('store_id', ?) "
                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (plan.store_id,))
        conn.execute("INSERT INTO store_meta (key, value) VALUES ('records', ?) ON CONFLICT (key) DO NOTHING",
                     (dst.location.label if dst.fs is not None else str(Path(dst.records).absolute()),))
        dst.store_id = plan.store_id
    if _history_to_copy(src.conn, conn) != plan.tables:
        raise StoreError(f"{dst.db_label}: its tracker changed during the copy ({NOT_CHANGED}; run the copy again)")
    rep.sources_present = plan.present
    for srow in plan.sources:
        sid = srow[0]
        if dst.has_source(sid):  # another copy got there first: its parts are the same files
            rep.sources_present += 1
            plan.skipped.add(sid)
            continue
        _insert(conn, "sources", plan.source_cols, srow)
        for p in plan.parts.get(sid, []):
            _insert(conn, "parts", ["file", "source_id", "fidelity", "rows"], p)
        rep.sources_copied += 1
        rep.parts_copied += len(plan.parts.get(sid, []))
    _copy_history(src.conn, conn, plan.tables)
    rep.tracker_copied = "checks" in plan.tables


def _copy_history(src: sqlbackend.Database, dst: sqlbackend.Database, tables: list[str]) -> None:
    """The history tables, ids kept (inside the caller's transaction)."""
    if "tracker_seq" in tables:
        dst.execute("DELETE FROM tracker_seq")
    for t in tables:
        cols, rows = _rows(src, t)
        for r in rows:
            _insert(dst, t, cols, r)
    if dst.dialect == sqlbackend.POSTGRESQL:  # new rows continue after the copied ids
        for t in (t for t in SERIAL_IDS if t in tables):
            dst.execute(f"SELECT setval(pg_get_serial_sequence('{t}', 'id'), "
                        f"GREATEST((SELECT MAX(id) FROM {t}), 1), (SELECT MAX(id) FROM {t}) IS NOT NULL)")


ID_COLUMNS = {**{t: "id" for t in SERIAL_IDS}, "parts": "seq"}


def _id_positions(conn: sqlbackend.Database) -> dict[str, tuple[Any, ...]]:
    """PostgreSQL's id sequences (table -> (sequence, last value or None)): they do not roll back."""
    if conn.dialect != sqlbackend.POSTGRESQL:
        return {}
    out = {}
    tables = conn.tables()
    for t, col in ID_COLUMNS.items():
        if t in tables:
            seq = conn.execute(f"SELECT pg_get_serial_sequence('{t}', '{col}')").fetchone()[0]
            if seq:
                row = conn.execute(f"SELECT last_value, is_called FROM {seq}").fetchone()
                out[t] = (seq, row[0], row[1])
    return out


def _restore_ids(conn: sqlbackend.Database, before: dict[str, tuple[Any, ...]]) -> None:
    """After a rollback, put the id sequences back where they were (the copy's setval and inserts moved
    them), under the write lock and only where no committed row has taken an id past that point."""
    if not before:
        return
    with contextlib.suppress(StoreError, *sqlbackend.errors()), conn.write_tx():
        for t, (seq, last, called) in before.items():
            top = conn.execute(f"SELECT MAX({ID_COLUMNS[t]}) FROM {t}").fetchone()[0]
            if top is None or top <= last:
                conn.execute(f"SELECT setval('{seq}', ?, ?)", (last, called))


def _publish(dst: Store, plan: _Plan, rep: CopyReport) -> None:
    """After COMMIT: the temps renamed into place (left to the next writer's sweep when one cannot be:
    readers use the temp meanwhile)."""
    for f in plan.files:
        if f.source_id in plan.skipped:  # its source's parts are the other copy's: ours is a spare temp
            if f.temp != f.final:
                dst.location.delete(f.temp)
            continue
        if f.temp != f.final:
            with contextlib.suppress(OSError):
                os.replace(f.temp, f.final)
        elif dst.fs is not None and f.source_id is not None:
            with contextlib.suppress(OSError, StoreError):  # else the next writer rewrites it
                dst.location.put(_mark(dst, f), committed.COMMITTED_MARK)
        if f.source_id is None:
            rep.checks_copied += 1


def _verify(src: Store, dst: Store, rep: CopyReport) -> None:
    """Row counts and content checksums of every table, and every part's and check file's SHA-256."""
    from xfid.tracker import checkfiles

    tables = dst.conn.tables()
    for t in ("sources", "parts", *TRACKER_TABLES, *(t for t in EXTRA_TABLES if t in src.conn.tables())):
        if t not in tables:
            raise StoreError(f"{dst.db_label}: after the copy, table {t} is missing; run the copy again")
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
        if _sha256(src.fs, mine) != _sha256(dst.fs, theirs):
            raise StoreError(f"{theirs}: differs from {mine} after the copy; run the copy again")
        rep.parts_verified += 1
    for cid, name in src.conn.execute("SELECT id, rows_file FROM checks WHERE rows_file IS NOT NULL ORDER BY id"):
        mine, mine_fs = _source_check_file(src, int(cid), str(name)) or (None, None)
        if dst.fs is None:
            theirs = checkfiles.checks_dir(dst.checks_root) / str(name)
            if not theirs.exists():
                theirs = theirs.with_name(checkfiles.staged_name(dst.store_id or "", int(cid)))
        else:
            theirs = dst.records / CHECKS_IN_BUCKET / str(name)
        if mine is None or not _exists(dst.fs, theirs) or _sha256(mine_fs, mine) != _sha256(dst.fs, theirs):
            raise StoreError(f"{theirs}: the rows of check {cid} are missing or differ from {mine} after the copy; "
                             "run the copy again")
        rep.checks_verified += 1


__all__ = ["CopyReport", "copy_store"]
