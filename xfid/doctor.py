"""`xfid doctor`: check a store and repair what can be repaired, never touching good data.

Nothing is deleted: what a repair takes away is moved into `quarantine/` with a line in
`quarantine/NOTES.txt` saying what it was and why. Every repair decision is re-checked
under the store's write lock, so a writer committing meanwhile is never "repaired".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from xfid import committed, sqlbackend
from xfid import records as recloc
from xfid.catalog import CatalogMismatch
from xfid.committed import LEGACY_WRITTEN as LEGACY_TEMP_NAME
from xfid.committed import WRITTEN as TEMP_NAME
from xfid.committed import temp_grace_s
from xfid.errors import StoreError
from xfid.manifest import PART_META
from xfid.partfiles import OBJECT_PART_NAME, committing_part
from xfid.records import Location
from xfid.sqlbackend import UrlError
from xfid.sqlbackend import errors as sqlbackend_errors
from xfid.store import (
    _MANIFEST_MIGRATIONS,
    COMMITTED_GLOB,
    DB_NAME,
    RECORDS,
    Store,
    connect_readonly,
    created_tables,
    resolve_database,
    write_tx,
)

QUARANTINE = "quarantine"
PART_PROBLEMS = ("missing_part", "corrupt_part", "row_mismatch")


@dataclass
class Problem:
    kind: str  # db_corrupt | catalog_mismatch | missing_part | corrupt_part | row_mismatch |
    #            unfinished_rename | stale_temp | foreign_temp | orphan_check | missing_check_rows |
    #            bad_check_rows
    path: str
    detail: str
    repair: str  # what --repair does about it ("" when it cannot; then the fix is in detail)
    repaired: bool = False
    source_id: str = ""


@dataclass
class DoctorReport:
    store: str
    problems: list[Problem] = field(default_factory=list)
    parts_checked: int = 0
    rows_checked: int = 0
    removed: list[dict[str, Any]] = field(default_factory=list)  # removed sources (xfid.removal): not problems

    @property
    def ok(self) -> bool:
        return not [p for p in self.problems if not p.repaired]


def _components() -> dict[str, Sequence[Any]]:
    from xfid.removal_db import MIGRATIONS as REMOVAL
    from xfid.tracker.db import MIGRATIONS as TRACKER

    return {"manifest": _MANIFEST_MIGRATIONS, "tracker": TRACKER, "removal": REMOVAL}


def _db_problem(db: Path) -> Problem | None:
    """A database SQLite cannot read, that fails its integrity check, or lacks a table its
    migrations made. Opened read-only, so a read-only store is checked as it is."""
    fix = "restore xfid.db from a backup, or rebuild the catalog from the parts with `xfid doctor --rebuild-catalog`"
    try:
        conn = connect_readonly(db)
        try:
            res = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            versions = dict(conn.execute("SELECT component, version FROM schema_version").fetchall()) \
                if "schema_version" in tables else {}
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return Problem("db_corrupt", str(db), f"not a readable SQLite database: {e}; {fix}", "")
    if res != ["ok"]:
        return Problem("db_corrupt", str(db), "; ".join(res[:5]) + f"; {fix}", "")
    for comp, migrations in _components().items():
        lost = sorted(created_tables(migrations[: versions.get(comp, 0)]) - tables)
        if lost:
            return Problem("db_corrupt", str(db), f"the {comp} table {lost[0]!r} is missing; {fix}", "")
    return None


def examine(root: Path, repair: bool = False, *, database: str | None = None,
            records: str | None = None) -> DoctorReport:
    """Check (and with `repair`, fix) the store at `root`.

    Checks: the database (readable, whole, every table), the catalog against the parts on
    disk (a `part-*` file the manifest does not know means the database is not this
    store's: only `--rebuild-catalog` fixes that, and no repair runs), each registered part
    (present, footer row count, every page's checksum), temps and check files.

    Repairs (each re-checked under the write lock, each removal a move into quarantine/):
    a source with a missing, damaged or miscounted part is dropped from the manifest and
    its other parts quarantined, so it can be ingested again; a committed temp is renamed
    to its part; this store's temps untouched past the grace period and check files no
    check names are quarantined. Good sources are never touched.
    """
    rep = DoctorReport(str(root))
    if resolve_database(database) is not None:
        return _examine_team(root, rep, repair, database, records)
    if not root.is_dir():
        raise StoreError("no store at {root} (give the store directory: {path} DIR)", params=("path",), root=root)
    db = root / DB_NAME
    records_dir = root / RECORDS
    if not db.exists():
        loc = recloc.resolve(records, root)
        if loc.fs is not None:  # a bucket's parts (its listing bounded in time: xfid.records)
            n, where = sum(1 for e in loc.list() if e.rel.endswith(".parquet")), loc.label
        else:
            n = len(list(records_dir.glob(COMMITTED_GLOB))) if records_dir.is_dir() else 0
            where = "records/"
        if n:
            rep.problems.append(Problem("catalog_mismatch", str(db), f"the store database is missing, but {n} part "
                                        f"files are in {where}; run `xfid doctor --rebuild-catalog`", ""))
        return rep
    p = _db_problem(db)
    if p is not None:
        rep.problems.append(p)
        return rep
    try:
        store = Store(root, create=False, check=False, records=records)
    except StoreError as e:
        rep.problems.append(Problem("db_corrupt", str(db), str(e), ""))
        return rep
    with store:
        try:
            store.check_catalog()
            _check_checks_catalog(store)
        except CatalogMismatch as e:
            rep.problems.append(Problem("catalog_mismatch", str(db), str(e), ""))
            return rep  # nothing else is judged against a catalog that is not this store's
        if _wrong_location(store, rep):
            return rep
        _check_parts(store, rep)
        rep.removed = _removals(store)
        if store.fs is None:
            _check_temps(store, rep)
        else:
            _check_objects(store, rep)
        _check_checkfiles(store, rep)
        if repair and rep.problems:
            if store.readonly:
                raise StoreError("{root}: the store is read-only: {repair} cannot change it", params=("repair",), root=root)
            _repair(store, rep)
    return rep


def _examine_team(root: Path, rep: DoctorReport, repair: bool, database: str | None,
                  records: str | None) -> DoctorReport:
    """examine() for a store whose catalog is on a PostgreSQL server: the tables its migrations
    made, the catalog against the listing of the records (local, network or bucket), each part."""
    if _empty_database(database):
        return rep  # nothing to check yet (and a reader's role could not create the tables): not damage
    try:
        store = Store(root, create=False, check=False, database=database, records=records)
    except CatalogMismatch as e:
        rep.problems.append(Problem("catalog_mismatch", str(root), str(e), ""))
        return rep
    except UrlError:
        raise  # a URL that cannot be read is the user's input, not a damaged store: Error:, exit 2
    except StoreError as e:
        rep.problems.append(Problem("db_corrupt", str(root), str(e), ""))
        return rep
    with store:
        rep.store = f"{root} (database {store.db_label}, records {store.location.label})"
        tables = store.conn.tables()
        versions = dict(store.conn.execute("SELECT component, version FROM schema_version").fetchall())
        for comp, migrations in _components().items():
            lost = sorted(created_tables(migrations[: versions.get(comp, 0)], store.conn.dialect) - tables)
            if lost:
                rep.problems.append(Problem("db_corrupt", store.db_label, f"the {comp} table {lost[0]!r} is "
                                            "missing; restore the database from its backup (docs/team.md)", ""))
                return rep
        try:
            store.check_catalog()
        except CatalogMismatch as e:
            rep.problems.append(Problem("catalog_mismatch", store.db_label, str(e), ""))
            return rep
        if _wrong_location(store, rep):
            return rep
        _check_parts(store, rep)
        rep.removed = _removals(store)
        if store.fs is None:
            _check_temps(store, rep)
        else:
            _check_objects(store, rep)
        _check_saved_checks(store, rep)
        if repair and rep.problems:
            if store.readonly:
                raise StoreError("{root}: the store is read-only: {repair} cannot change it", params=("repair",), root=root)
            _repair(store, rep)
    return rep


def _empty_database(database: str | None) -> bool:
    """Whether the team's database holds no xfid table at all (a store nobody has written yet)."""
    url = resolve_database(database)
    if url is None:
        return False
    conn = sqlbackend.connect(url)
    try:
        return "schema_version" not in conn.tables()
    finally:
        conn.close()


def _wrong_location(store: Store, rep: DoctorReport) -> bool:
    """A records location that is not this store's (xfid.locations): reported, nothing else judged,
    no repair: a part this machine cannot see is not a lost part."""
    if not store.location_problem:
        return False
    rep.problems.append(Problem("records_location", store.location.label, store.location_problem, ""))
    return True


def _check_objects(store: Store, rep: DoctorReport) -> None:
    """Objects in a bucket the catalog does not register, judged by xfid.committed's rule for
    objects: an abandoned upload (no mark, the journal does not name it, footer protocol 3, past
    the grace period) is stale; one whose attempt is marked or recorded is an unfinished commit
    (removed only when provably abandoned); an older xfid's is kept; others' are left alone."""
    objects = store.survey_objects()
    known = store.manifest_files()
    now = time.time()
    mine = [e for e in objects.listing if e.rel not in known and (m := OBJECT_PART_NAME.fullmatch(
        e.rel.split("/", 1)[1])) and m[1] == store.store_id]
    journal = committed.attempted(store.conn, [committed.attempt_key(Path(e.rel)) for e in mine])
    for e in objects.listing:
        if e.rel in known:
            continue
        age = now - e.mtime
        path = str(store.records / e.rel)
        if e in mine:
            if e.rel in objects.marks or committed.attempt_key(Path(e.rel)) in journal:
                rep.problems.append(_unfinished(store, path, committed.attempt_key(Path(e.rel)), age))
            elif e.rel in objects.sweepable:
                rep.problems.append(Problem("stale_temp", path, f"a part uploaded but never registered (a writer "
                                            f"that did not finish, {age / 3600:.1f} h ago)", "quarantine it"))
            elif age > temp_grace_s():
                rep.problems.append(Problem("kept_temp", path, "a part of an older xfid, never registered here, "
                                            "that may have been committed; kept (`xfid doctor --rebuild-catalog` "
                                            "registers it)", ""))
        else:
            rep.problems.append(Problem("foreign_temp", path, "present but registered by no catalog of this "
                                        "store; xfid leaves it alone", ""))


def _registered_names(store: Store) -> set[str]:
    """The file names (not paths) of the parts the catalog registers (for xfid.committed.abandoned)."""
    return {Path(r[0]).name for r in store.conn.execute("SELECT file FROM parts")}


def _abandoned(store: Store, key: str, age: float) -> bool:
    """xfid.committed.abandoned for a part's attempt key (a file's `<store>-<part>`, an object's
    `part-<store>-<part>`)."""
    names = _registered_names(store)

    def registered(k: str) -> bool:
        return f"part-{k.rsplit('-', 1)[-1]}.parquet" in names or f"{k}.parquet" in names

    return committed.abandoned(store.conn, key, age, registered)


def _unfinished(store: Store, path: str, key: str, age: float) -> Problem:
    """An unfinished commit: removed by --repair only when provably abandoned (xfid.committed)."""
    if _abandoned(store, key, age):
        return Problem("unfinished_commit", path, f"a part whose commit was cut short {age / 3600:.1f} h ago and "
                       "is provably abandoned (its attempt is recorded, the catalog does not register it, and later "
                       "commits are registered)", "quarantine it")
    return Problem("unfinished_commit", path, "a part whose commit was cut short (its attempt is recorded, the "
                   "catalog does not register it); kept until it is provably abandoned (older than the grace period "
                   "and a later commit registered): `xfid doctor --rebuild-catalog` registers it", "")


def _check_parts(store: Store, rep: DoctorReport) -> None:
    rows = store.conn.execute(f"SELECT file, source_id, fidelity, rows FROM parts ORDER BY {store.conn.rowid}"
                              ).fetchall()
    for file, sid, _fid, n in rows:
        f = store.records / file
        rep.parts_checked += 1
        twin = store.twin(f)
        if store.fs is not None:
            if not store.location.exists(f):
                rep.problems.append(Problem("missing_part", str(f), "named in the manifest but not in the bucket",
                                            "drop the source from the manifest (re-ingest it)", source_id=sid))
                continue
        elif not f.exists() and twin is not None and twin.exists():
            rep.problems.append(Problem("unfinished_rename", str(twin), f"committed as {file}, not yet renamed "
                                        "(readers use it as it is)", "rename it to its part name", source_id=sid))
            f = twin
        elif not f.exists():
            rep.problems.append(Problem("missing_part", str(f), "named in the manifest but not on disk",
                                        "drop the source from the manifest (re-ingest it)", source_id=sid))
            continue
        bad = part_problem(f, n, store.location)
        if bad is not None:
            kind, detail = bad
            rep.problems.append(Problem(kind, str(f), detail, "quarantine the source's parts and drop it from "
                                        "the manifest (re-ingest it)", source_id=sid))
            continue
        rep.rows_checked += n


def _removals(store: Store) -> list[dict[str, Any]]:
    """The removed sources, reported (their parts are this store's, read by no one: not orphans)."""
    from xfid.removal import removals

    keep = ("removal_id", "source_id", "path", "adapter", "rows", "removed_at", "actor", "reason", "cause")
    return [{k: r[k] for k in keep} for r in removals(store.conn)]


def part_problem(f: Path, rows: int, location: Location | None = None) -> tuple[str, str] | None:
    """(kind, detail) when a part fails: its footer's row count first (so a part claiming
    far more rows than registered is never read whole), then every page's checksum."""
    try:
        with (contextlib.nullcontext(f) if location is None else location.reading(f)) as src, \
                pq.ParquetFile(src, page_checksum_verification=True) as pf:
            if pf.metadata.num_rows != rows:
                return "row_mismatch", f"its footer says {pf.metadata.num_rows} rows, the manifest says {rows}"
            for g in range(pf.num_row_groups):
                pf.read_row_group(g)
    except (pa.ArrowInvalid, OSError) as e:
        return "corrupt_part", f"unreadable: {e}"
    return None


def _check_temps(store: Store, rep: DoctorReport) -> None:
    """Temps judged by the one rule of xfid.committed: a committing part is never called stale."""
    now = time.time()
    for f in committed.find_temps(store.records, sub="fidelity=*/", suffix=""):
        m = TEMP_NAME.fullmatch(f.name)
        c = committed.committing(f.name)
        try:
            age = now - f.stat().st_mtime
        except FileNotFoundError:
            continue
        owner = m[1] if m else c[0] if c and committing_part(f.name) else None
        if owner == store.store_id:
            if _registered(store, f, store.final_name(f).stem[5:]):
                continue  # its part: an unfinished rename (_check_parts)
            if c:
                rep.problems.append(_unfinished(store, str(f), committed.attempt_key(f), age))
            elif committed.deletable(f, PART_META, now=now):
                rep.problems.append(Problem("stale_temp", str(f), f"temp part of a writer that did not finish "
                                            f"(untouched for {age / 3600:.1f} h)", "quarantine it"))
            elif age > temp_grace_s():
                rep.problems.append(Problem("kept_temp", str(f), "temp part of an older xfid that may have been "
                                            "committed; kept (`xfid doctor --rebuild-catalog` registers it)", ""))
        elif owner:
            rep.problems.append(Problem("foreign_temp", str(f), f"temp part of another store (id {owner[:12]}); "
                                        "xfid leaves it alone: move it away by hand if no writer of that store "
                                        "uses this directory", ""))
        elif LEGACY_TEMP_NAME.fullmatch(f.name) and age > temp_grace_s():
            rep.problems.append(Problem("stale_temp", str(f), "temp part of an older xfid that did not finish",
                                        "quarantine it"))


def _registered(store: Store, tmp: Path, part_id: str) -> bool:
    rel = f"{tmp.parent.name}/part-{part_id}.parquet"
    return store.conn.execute("SELECT 1 FROM parts WHERE file=?", (rel,)).fetchone() is not None


def _check_checks_catalog(store: Store) -> None:
    """CatalogMismatch when a saved `check-N` file is named by no check (see xfid.tracker.checkfiles)."""
    from xfid.tracker import checkfiles

    on_disk = checkfiles.committed_on_disk(store.checks_root)
    if on_disk:
        checkfiles.check_catalog(store, _check_files(store), on_disk)


def _check_files(store: Store) -> set[str]:
    from xfid.tracker import db as tracker_db

    try:
        return tracker_db.rows_files(store.conn)
    except sqlite3.OperationalError:  # no tracker tables yet
        return set()


def _check_checkfiles(store: Store, rep: DoctorReport) -> None:
    _check_saved_checks(store, rep)
    checks_dir = store.checks_root / "checks"
    if not checks_dir.is_dir():
        return
    for f in sorted(checks_dir.glob("*.parquet")):
        if _orphan_check(store, f):
            rep.problems.append(Problem("orphan_check", str(f), "temp check rows of a check that did not finish",
                                        "quarantine it"))


def _check_saved_checks(store: Store, rep: DoctorReport) -> None:
    """Each recorded check's rows file: there, and holding that check's rows (its recorded hash;
    footer and row count for older checks), not an output written over it or another check's."""
    from xfid.tracker import checkfiles
    from xfid.tracker import db as tracker_db

    unreadable: tuple[type[BaseException], ...] = (StoreError, *sqlbackend_errors())
    try:
        saved = tracker_db.saved_rows(store.conn)
    except unreadable:  # no tracker tables yet
        return
    for row in saved:
        s = checkfiles.Saved(*row)
        if s.rows_file:
            with contextlib.suppress(StoreError, OSError):
                store.fetch_check_file(s.rows_file)  # a bucket's store: this machine may not have it yet
        why = checkfiles.verify(store.checks_root, s, store.store_id)
        if why is not None:
            kind = "missing_check_rows" if why.endswith("are missing") else "bad_check_rows"
            rep.problems.append(Problem(kind, str(checkfiles.checks_dir(store.checks_root) / str(s.rows_file)),
                                        f"{why}; `xfid report` cannot show check {s.check_id} until the file is "
                                        "restored from a backup of the store (the check's issues and history in "
                                        "the database are intact)", ""))


def _orphan_check(store: Store, f: Path) -> bool:
    """A check file's temp the tracker's sweep would take (every `check-N` is a committed check)."""
    from xfid.tracker import checkfiles

    return checkfiles.abandoned(store, f, _check_files(store))


def _repair(store: Store, rep: DoctorReport) -> None:
    """Act on each problem after re-checking it under the write lock."""
    unseen = _all_unseen(store, rep)
    with write_tx(store.conn) as conn:
        store.check_catalog()  # a catalog that stopped matching meanwhile: no repair at all
        dropped: set[str] = set()
        for p in rep.problems:
            f = Path(p.path)
            if p.kind in PART_PROBLEMS and unseen:
                continue  # reported, never dropped: see _all_unseen
            if p.kind in PART_PROBLEMS:
                if p.source_id in dropped or _still_bad(store, p):
                    if p.source_id not in dropped:
                        _drop_source(store, p.source_id, p.kind)
                        dropped.add(p.source_id)
                    p.repaired = True
            elif p.kind == "unfinished_rename":
                final = store.final_name(f)
                if f.exists() and not final.exists() and _registered(store, f, final.stem[5:]):
                    os.replace(f, final)
                p.repaired = not f.exists() and final.exists()
            elif p.kind == "stale_temp" and store.fs is not None:
                rel = str(PurePosixPath(p.path).relative_to(store.records))
                if rel not in store.manifest_files() and rel in store.survey_objects().sweepable and \
                        not committed.attempted(store.conn, [committed.attempt_key(Path(rel))]):
                    quarantine_object(store, PurePosixPath(p.path), "uploaded, never registered")
                p.repaired = not store.location.exists(PurePosixPath(p.path))
            elif p.kind == "stale_temp":
                m = TEMP_NAME.fullmatch(f.name)
                still = f.exists() and time.time() - f.stat().st_mtime > temp_grace_s() and \
                    not (m and _registered(store, f, m[2])) and \
                    (LEGACY_TEMP_NAME.fullmatch(f.name) is not None or committed.deletable(f, PART_META))
                if still:
                    quarantine(store.root, f, "temp part of a writer that did not finish")
                p.repaired = not f.exists()
            elif p.kind == "unfinished_commit" and p.repair:
                _remove_unfinished(store, p)
            elif p.kind == "orphan_check":
                if f.exists() and _orphan_check(store, f):
                    quarantine(store.root, f, "check rows with no recorded check")
                p.repaired = not f.exists()
        del conn


def _remove_unfinished(store: Store, p: Problem) -> None:
    """Quarantine an unfinished commit found provably abandoned, re-checked under the lock."""
    now = time.time()
    if store.fs is not None:
        obj = PurePosixPath(p.path)
        rel = str(obj.relative_to(store.records))
        info = [e for e in store.location.list() if e.rel == rel]
        if info and rel not in store.manifest_files() and _abandoned(store, committed.attempt_key(Path(rel)),
                                                                     now - info[0].mtime):
            quarantine_object(store, obj, "an unfinished commit, provably abandoned (docs/reliability.md)")
            store.location.delete(committed.mark_path(store.records, rel))
        p.repaired = not store.location.exists(obj)
        return
    f = Path(p.path)
    final = store.final_name(f)
    with contextlib.suppress(FileNotFoundError):
        if str(final.relative_to(store.records)) not in store.manifest_files() and \
                _abandoned(store, committed.attempt_key(f), now - f.stat().st_mtime):
            quarantine(store.root, f, "an unfinished commit, provably abandoned (docs/reliability.md)")
    p.repaired = not f.exists()


def _all_unseen(store: Store, rep: DoctorReport) -> bool:
    """Whether every part the catalog registers is missing from here: this machine cannot see the
    records (another mount, a share down), which no repair may take for lost parts."""
    missing = {p.path for p in rep.problems if p.kind == "missing_part"}
    if not missing or len(missing) < len(store.manifest_files()):
        return False
    for p in rep.problems:
        if p.kind == "missing_part":
            p.repair = ""
            p.detail += ("; every part of the store is missing here, so this machine cannot see the records: "
                         "nothing is dropped (check the records location)")
    return True


def _still_bad(store: Store, p: Problem) -> bool:
    """Whether a part problem found outside the lock still holds (its row, its file)."""
    if store.fs is not None:
        rows = store.conn.execute("SELECT file, rows FROM parts WHERE source_id=?", (p.source_id,)).fetchall()
        for rel, n in rows:
            obj = store.records / rel
            if str(obj) == p.path:
                if p.kind == "missing_part":
                    return not store.location.exists(obj)
                return store.location.exists(obj) and part_problem(obj, n, store.location) is not None
        return False
    f = Path(p.path)
    rows = store.conn.execute("SELECT file, rows FROM parts WHERE source_id=?", (p.source_id,)).fetchall()
    for rel, n in rows:
        part = store.records / rel
        twin = store.twin(part)
        if p.kind == "missing_part" and part == f:
            return not part.exists() and not (twin is not None and twin.exists())
        if p.kind != "missing_part" and f in (part, twin):
            return f.exists() and part_problem(f, n) is not None
    return False  # dropped or re-ingested meanwhile


def _drop_source(store: Store, sid: str, why: str) -> None:
    """Quarantine every part of a source and remove it from the manifest (it can be ingested again)."""
    for (rel,) in store.conn.execute("SELECT file FROM parts WHERE source_id=?", (sid,)).fetchall():
        f = store.records / rel
        if store.fs is not None:
            if store.location.exists(f):
                quarantine_object(store, f, f"part of source {sid[:12]}, dropped from the manifest ({why})")
            continue
        twin = store.twin(f)
        for g in (f, twin):
            if g is not None and g.exists():
                quarantine(store.root, g, f"part of source {sid[:12]}, dropped from the manifest ({why})")
    store.conn.execute("DELETE FROM parts WHERE source_id=?", (sid,))
    store.conn.execute("DELETE FROM sources WHERE source_id=?", (sid,))


def quarantine_object(store: Store, obj: PurePosixPath, why: str) -> Path:
    """Download an object of the bucket into `root/quarantine/` (noted why), then remove it there."""
    import pyarrow.fs as pafs

    rel = Path(str(obj.relative_to(store.records)))
    tmp = store.root / QUARANTINE / ".incoming" / rel.name
    tmp.parent.mkdir(parents=True, exist_ok=True)
    pafs.copy_files(str(obj), str(tmp), source_filesystem=store.fs)
    dest = quarantine(store.root, tmp, f"{store.location.label}/{rel}: {why}")
    store.location.delete(obj)
    return dest


def quarantine(root: Path, f: Path, why: str) -> Path:
    """Move `f` into `root/quarantine/` (same relative path) and note why; returns where it went."""
    q = root / QUARANTINE
    try:
        rel = f.relative_to(root)
    except ValueError:
        rel = Path(f.name)
    dest = q / rel
    n = 1
    while dest.exists():
        dest = q / rel.with_name(f"{rel.name}.{n}")
        n += 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(f), dest)
    with open(q / "NOTES.txt", "a", encoding="utf-8") as notes:
        notes.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\t{rel}\t-> {dest.relative_to(q)}\t{why}\n")
    return dest

__all__ = ["RECORDS", "DoctorReport", "Problem", "examine", "part_problem", "quarantine"]
