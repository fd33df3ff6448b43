"""The embedded store: a Hive-partitioned Parquet dataset plus a SQLite manifest (and tracker)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from xfid import committed, locations, manifest, outfile, sqlbackend
from xfid import records as recloc
from xfid.committed import TEMP_GRACE_S, TMP_PREFIX, temp_grace_s  # noqa: F401  (re-exported)
from xfid.errors import StoreError
from xfid.manifest import PART_FORMAT, PART_META, read_part_meta
from xfid.parts import (
    FILE_SCHEMA,
    ROW_GROUP,
    SORT_KEYS,
    PartWriter,
    WriteFailed,
    dict_codes,
    sort_order,
)
from xfid.schema import SCHEMA
from xfid.sqlbackend import Database

__all__ = ["FILE_SCHEMA", "ROW_GROUP", "SORT_KEYS", "CatalogMismatch", "PreparedSource", "Store", "dict_codes",
           "sort_order"]

DB_NAME = "xfid.db"
RECORDS = "records"
VERIFIED_PARQUET = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True))
"""Reads check every page's CRC: a flipped bit is an error naming the part, never a wrong value."""
# TMP_PREFIX, TEMP_GRACE_S, temp_grace_s: xfid.committed (the one committed-file protocol).
# A writer keeps its finished temps fresh until it commits (Store.keep_alive).
TEMP_NAME = re.compile(r"\.tmp-([0-9a-f]{32})-([0-9a-f]{32})\.parquet")
"""`.tmp-<store id>-<part id>.parquet`: a part being written, not yet registered."""
LEGACY_TEMP_NAME = re.compile(r"\.tmp-([0-9a-f]{32})\.parquet")
"""A temp part of a store from before store ids (whose store cannot be proven)."""
OBJECT_PART_NAME = re.compile(r"part-([0-9a-f]{32})-([0-9a-f]{32})\.parquet")
"""`part-<store id>-<part id>.parquet`: a part in a bucket, uploaded once, visible when registered."""
COMMITTED_GLOB = "fidelity=*/part-*.parquet"
CHECKS_IN_BUCKET = "_checks"
"""Where a bucket's store keeps the committed checks' rows (beside, never inside, fidelity=*)."""
REBUILD_HINT = ("nothing was changed or deleted; rebuild the catalog from the parts with "
                "`xfid doctor --rebuild-catalog` (it moves any xfid.db here into a backup folder, never deletes it)")

_PARTS_AND_SOURCES = manifest.PARTS_AND_SOURCES
_MANIFEST_MIGRATIONS = manifest.MIGRATIONS  # the manifest's tables: xfid.manifest


class CatalogMismatch(StoreError):
    """The database does not describe the part files beside it (missing, empty, foreign or older)."""


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def fault_point(name: str) -> None:
    """Fault injection for crash tests: env XFID_FAULT=name kills the process right here."""
    if os.environ.get("XFID_FAULT") == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def resolve_store_path(explicit: str | os.PathLike[str] | None, config_store: str | None = None) -> Path:
    """--store, then env XFID_STORE, then [store].path of the config, then `.xfid`."""
    return Path(explicit or os.environ.get("XFID_STORE") or config_store or ".xfid")


def store_area(root: Path, location: recloc.Location) -> outfile.StoreArea:
    """A store's folder, records and checks as `xfid.outfile.guard` protects them."""
    if location.fs is not None:
        from urllib.parse import urlsplit

        scheme = urlsplit(location.label).scheme
        return outfile.StoreArea(str(root), (root, root / "checks"), urls=(f"{scheme}://{location.base}",))
    records = Path(location.base)
    return outfile.StoreArea(str(root), (root, records, records.parent / "checks"))


def connect(db_path: Path, readonly: bool = False) -> Database:
    """The store's SQLite database (xfid.sqlbackend.connect_sqlite)."""
    return sqlbackend.connect_sqlite(db_path, readonly=readonly)


connect_readonly = sqlbackend.sqlite_readonly
created_tables = sqlbackend.created_tables


def writable(path: Path) -> bool:
    """Whether this process may write `path` (a file or a directory)."""
    return os.access(path, os.W_OK)


def write_tx(conn: Database) -> contextlib.AbstractContextManager[Database]:
    """One write transaction, the store's writers taking turns (Database.write_tx), rolled back on any exception."""
    return conn.write_tx()


def migrate(conn: Database, component: str, migrations: Sequence[sqlbackend.Migration]) -> None:
    """Apply the versioned migrations of one component (manifest, tracker, ...) once each."""
    sqlbackend.migrate(conn, component, migrations)


def resolve_database(explicit: str | None = None) -> str | None:
    """The catalog's database URL: the argument, then env XFID_DATABASE_URL; None: the store's own SQLite file."""
    url = explicit or locations.env_database_url()
    sqlbackend.remember_secrets(url)
    if url and not sqlbackend.is_postgres(url):
        raise StoreError(f"database {sqlbackend.mask(url)!r}: not a PostgreSQL URL; write "
                         "postgresql://USER@HOST[:PORT]/DBNAME (the password from PGPASSWORD or ~/.pgpass), or "
                         "leave it unset for the SQLite file inside the store")
    return url


@dataclass
class PreparedSource:
    """One source file read and written to temp Parquet parts, not yet visible."""

    source_id: str
    path: str
    adapter: str
    options: dict[str, Any]
    content_hash: str
    rows: int = 0
    summary: dict[str, Any] = field(default_factory=dict)
    temps: dict[str, Path] = field(default_factory=dict)  # fidelity -> temp file
    already: bool = False
    ingested_at: str = ""  # set when its parts are written; the same in the manifest and the parts


@dataclass
class ObjectSurvey:
    """A bucket's parts and commit marks, listed before the write lock (xfid.committed)."""

    listing: list[recloc.FileEntry]
    marks: dict[str, int]  # records-relative part -> its mark's size (0: committing; else committed)
    sweepable: set[str] = field(default_factory=set)  # unmarked, unregistered, expired: the sweep's candidates


class Store:
    """A store directory: `records/fidelity=F/part-*.parquet` + `xfid.db`.

    The manifest is the truth: a Parquet part is visible only once its row in `parts` is
    committed, in the same transaction as its source. A part is written as a temp file,
    `.tmp-<store id>-<part id>.parquet`; the commit registers `part-<part id>.parquet`, and
    only after COMMIT is the temp renamed to that name (until then readers use the temp).
    So a `part-*` file is always a committed part: one the manifest does not know means the
    database is not the one these parts belong to (missing, emptied, another store's, or an
    older copy), and every command stops with a CatalogMismatch instead of acting on it.
    The sweep removes only temps named with this store's id, unregistered, and untouched for
    TEMP_GRACE_S.

    Args:
        root: the store directory.
        create: create the directory when it does not exist (else a StoreError).
        check: compare the catalog with the parts on disk when opening (`xfid doctor` opens
            without, to report the mismatch rather than stop at it).

    Raises:
        CatalogMismatch: the database does not describe the parts beside it.
        StoreError: the database cannot be opened, is damaged, or the directory is unusable.
    """

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True, check: bool = True,
                 database: str | None = None, records: str | os.PathLike[str] | None = None):
        self.root = Path(root)
        self.database_url = resolve_database(database)
        self.team = self.database_url is not None
        self.db_path = self.root / DB_NAME
        self.db_label = sqlbackend.mask(self.database_url) if self.database_url else str(self.db_path)
        if not self.root.exists():
            if not create and not self.team:  # a team store's working directory is made on first use
                raise StoreError("no store at {root} (ingest into it first, or give the store directory: {path} DIR)",
                                 params=("path",), root=self.root)
            try:
                self.root.mkdir(parents=True, exist_ok=True)  # another process may be creating it too
            except OSError as e:
                raise StoreError(f"cannot create store {self.root}: {e.strerror}") from None
        elif not self.root.is_dir():
            raise StoreError("{root} is not a directory (give the store directory: {path} DIR)", params=("path",),
                             root=self.root)
        given = records if records is not None else locations.env_records_url()
        if self.team:
            self.conn: Database = sqlbackend.connect(str(self.database_url))
            given = given if given is not None else self._stored_records()
        self.location = recloc.resolve(given, self.root)
        self.fs = self.location.fs  # None: a local or network directory, renamed into place
        self.records: Any = self.location.base
        outfile.protect(self, self.area())
        self.store_id: str | None = None
        self._expected: dict[str, tuple[str, int]] = {}  # part path -> (manifest file, rows)
        self._touched = 0.0
        self._removals = False  # whether the catalog has xfid.removal's tables (once true, stays)
        if self.team:
            self.readonly = self.fs is None and Path(self.records).exists() and not writable(Path(self.records))
        else:
            has_db = self.db_path.exists()
            self.readonly = not writable(self.root) or (has_db and not writable(self.db_path))
            if not has_db:
                if self.readonly:
                    raise StoreError(f"{self.db_path}: no store database, and the store is read-only "
                                     "(run `xfid ingest` with write access first)")
                if check and self._files_beside():
                    raise CatalogMismatch(f"{self.db_path}: the store database is missing, but "
                                          f"{self._files_beside()} are here; " + self.rebuild_hint)
            try:
                self.conn = connect(self.db_path, readonly=self.readonly)
            except sqlbackend.errors() as e:
                raise StoreError(f"{self.db_path}: cannot open the store database: {e} (run `xfid doctor`)") from None
        self.location_problem: str | None = None  # why this machine's records location is not the store's
        try:
            self._open(check)
        except BaseException:
            self.conn.close()
            raise

    def _stored_records(self) -> str | None:
        """The records location a team store was created with (kept in its catalog), for a machine
        that names none; None for a new store (it keeps `<store>/records`, a shared path then)."""
        try:
            if "store_meta" not in self.conn.tables():
                return None
            row = self.conn.execute("SELECT value FROM store_meta WHERE key='records'").fetchone()
        except StoreError:
            self.conn.close()
            raise
        if row is None:
            return None
        if "***" in row[0]:
            self.conn.close()
            raise StoreError(f"{self.db_label}: this store's records are at {row[0]}; give their URL with its "
                             "credentials in XFID_RECORDS_URL or [store] records (see docs/team.md)")
        return str(row[0])

    @property
    def rebuild_hint(self) -> str:
        if self.team:
            return ("nothing was changed or deleted; point the database URL (XFID_DATABASE_URL or [store] database) "
                    "at this store's database, or restore it from its backup (docs/team.md)")
        return REBUILD_HINT

    @property
    def checks_root(self) -> Path:
        """The folder whose `checks/` holds the saved rows of each check: beside the records when
        they are in a directory (so every machine of a team store reads them), else the store."""
        return Path(self.records).parent if self.fs is None else self.root

    def share_check_file(self, local: Path) -> None:
        """Upload a committed check's rows to the bucket (`<records>/_checks/`), for the other machines."""
        if self.fs is None:
            return
        try:
            self.location.copy_in(local, f"{CHECKS_IN_BUCKET}/{local.name}")
        except OSError as e:
            raise StoreError(f"{self.location.label}: the check is recorded, but its rows could not be uploaded "
                             f"({sqlbackend.mask(e)}): other machines cannot show them until "
                             f"{local} is copied to {CHECKS_IN_BUCKET}/ there") from None

    def fetch_check_file(self, name: str) -> None:
        """Download a check's rows from the bucket when this machine does not have them."""
        local = self.checks_root / "checks" / name
        if self.fs is None or local.exists():
            return
        import pyarrow.fs as pafs

        src = str(self.records / CHECKS_IN_BUCKET / name)
        if not self.location.exists(self.records / CHECKS_IN_BUCKET / name):
            return  # checkfiles.read names what is missing
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f"{TMP_PREFIX}download-{uuid.uuid4().hex}.parquet")
        pafs.copy_files(src, str(tmp), source_filesystem=self.fs)
        os.replace(tmp, local)

    def describe(self) -> dict[str, str]:
        """Where this store keeps its catalog and its records (passwords masked)."""
        return {"store": str(self.root), "database": self.db_label, "records": self.location.label}

    def _open(self, check: bool) -> None:
        """Check the database's tables, apply migrations, read the store id, compare with the parts."""
        with self._db("open"):
            # The version first, then the tables: a migration commits both at once, so tables
            # read after the version always include what that version made (on PostgreSQL each
            # statement sees the latest commit; read the other way round, a store another
            # process is creating right now would look damaged).
            version = 0
            if "schema_version" in self.conn.tables():
                row = self.conn.execute("SELECT version FROM schema_version WHERE component='manifest'").fetchone()
                version = row[0] if row else 0
            tables = self.conn.tables()
            lost = sorted(created_tables(_MANIFEST_MIGRATIONS[:version], self.conn.dialect) - tables)
            if lost:
                raise StoreError(f"{self.db_label}: the store database is damaged: table {lost[0]!r} is missing; "
                                 + self.rebuild_hint)
            if version == 0 and check and self._files_beside():
                raise CatalogMismatch(f"{self.db_label}: the store database is empty, but "
                                      f"{self._files_beside()} are here; " + self.rebuild_hint)
            if not self.readonly:  # a read-only store from an older xfid is read as it is
                migrate(self.conn, "manifest", _MANIFEST_MIGRATIONS)
                from xfid import removal_db as removal

                self._removals = removal.setup_on_open(self.conn)  # made with the manifest's tables
                tables.add("store_meta")
                if self.team and not self.conn.may_write():
                    self.readonly = True  # a reader's role: SELECT only
            row = None
            if "store_meta" in tables:
                row = self.conn.execute("SELECT value FROM store_meta WHERE key='store_id'").fetchone()
            self.store_id = row[0] if row else None
        if self.store_id is None and not self.readonly and self.fs is None:
            # a new store (or one from before store ids): its records folder; an existing store's
            # folder is never created (an unmounted share stays a refusal: xfid.locations)
            try:
                Path(self.records).mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"{self.records}: cannot create the records directory: {e.strerror}") from None
        if check:
            self.check_catalog()
        if self.store_id is None and not self.readonly and self._matches():  # new, or from before store ids
            with self._db("open"):
                self.conn.execute("INSERT INTO store_meta VALUES ('store_id', ?) ON CONFLICT (key) DO NOTHING",
                                  (uuid.uuid4().hex,))
                # where its parts are: for the machines that do not say, and for the refusals
                self.conn.execute("INSERT INTO store_meta VALUES ('records', ?) ON CONFLICT (key) DO NOTHING",
                                  (locations.here(self),))
                self.store_id = self.conn.execute("SELECT value FROM store_meta WHERE key='store_id'").fetchone()[0]
        if self.store_id is not None and not self.readonly:
            self._check_location(check)

    def _check_location(self, check: bool) -> None:
        """Refuse (or, for doctor, note) a records location that is not this store's (xfid.locations)."""
        with self._db("open"):
            row = self.conn.execute("SELECT value FROM store_meta WHERE key='records'").fetchone()
        why = locations.problem(self, row[0] if row else None)
        if why and check:
            raise StoreError(why)
        self.location_problem = why

    @contextlib.contextmanager
    def _db(self, what: str) -> Iterator[None]:
        """Database errors of the manifest as a StoreError naming the database."""
        try:
            yield
        except sqlbackend.errors() as e:
            msg = sqlbackend.mask(e)
            if "readonly" in msg or "read-only" in msg:
                raise StoreError(f"{self.db_label}: the store is read-only: cannot {what}") from None
            if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError):
                raise StoreError(f"{self.db_label}: the store database is damaged ({msg}); run `xfid doctor`") from None
            raise StoreError(f"{self.db_label}: cannot {what}: {msg} (run `xfid doctor`)") from None

    def area(self) -> outfile.StoreArea:
        """The folders (and records URL) no output of any command may be written into."""
        return store_area(self.root, self.location)

    def close(self) -> None:
        outfile.unprotect(self)
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the catalog and the parts on disk ---------------------------------------------
    def committed_on_disk(self, objects: ObjectSurvey | None = None) -> list[str]:
        """Every committed-looking part file (`part-*`), relative to records/, sorted.

        On a bucket a `part-*` object is uploaded before its commit, so its name proves
        nothing: there the parts whose mark says committed (xfid.committed).
        """
        out: list[str] = []
        if self.fs is not None:
            objects = objects or self.survey_objects(sweep=False)
            listed = {e.rel for e in objects.listing}
            return sorted(r for r, size in objects.marks.items() if size and r in listed)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for d in os.scandir(self.records):
                if d.name.startswith("fidelity=") and d.is_dir():
                    out.extend(f"{d.name}/{f.name}" for f in os.scandir(d.path)
                               if f.name.startswith("part-") and f.name.endswith(".parquet"))
        return sorted(out)

    def _files_beside(self) -> str:
        """What only a database could have written here: committed parts, saved check rows ("" if none)."""
        if self.fs is not None:
            parts = sum(1 for e in self.location.list() if e.rel.endswith(".parquet"))
        else:
            parts = len(self.committed_on_disk()) + len(self.committing_on_disk())
        checks = len(list((self.root / "checks").glob("check-*.parquet"))) \
            if (self.root / "checks").is_dir() and not self.team else 0
        found = [f"{parts} part files in {self.location.label}" if parts else "",
                 f"{checks} check files in checks/" if checks else ""]
        return " and ".join(x for x in found if x)

    def manifest_files(self) -> set[str]:
        """Every part file this catalog knows: the registered ones and those of removed sources."""
        with self._db("read the manifest"):
            return {r[0] for r in self.conn.execute("SELECT file FROM parts")} | self.removed_files()

    def removed_files(self) -> set[str]:
        """The parts of removed sources (xfid.removal): this store's files, read by no one."""
        from xfid import removal_db as removal

        self._removals = self._removals or removal.has_tables(self.conn)  # tables are never dropped
        return removal.removed_files(self.conn) if self._removals else set()

    def check_catalog(self, objects: ObjectSurvey | None = None) -> None:
        """Raise CatalogMismatch when a committed part on disk is not in the manifest.

        Parts are renamed into place only after their commit, so listing the files first and
        reading the manifest second never mistakes a concurrent writer's part for a stranger.
        On a bucket the marks play the names' role (xfid.committed); `objects`: a listing taken
        before the lock (else one is taken now).
        """
        if self.fs is not None and objects is None:
            objects = self.survey_objects(sweep=False)
        on_disk = self.committed_on_disk(objects)
        known = self.manifest_files()
        unknown = [f for f in on_disk if f not in known]
        unknown += self.unproven_committing(known, objects)  # listed before its journal is read
        if unknown:
            raise self.mismatch(unknown, len(known))

    def _matches(self) -> bool:
        """Whether the catalog describes the parts on disk (a store id is given only then)."""
        try:
            self.check_catalog()
        except CatalogMismatch:
            return False
        return True

    def mismatch(self, unknown: Sequence[str], known: int) -> CatalogMismatch:
        """The error for committed parts the manifest does not know: what happened, and the fix."""
        first = self.records / unknown[0]
        other = read_part_meta(first, self.location).get("store_id")
        n = f"{len(unknown)} part file(s) here, e.g. {first},"
        if other and self.store_id and other != self.store_id:
            why = (f"belongs to another store (id {self.store_id[:12]}): {n} were written by store {other[:12]} "
                   "(was xfid.db copied from elsewhere?)")
        elif known == 0:
            why = f"is empty: {n} are not in it"
        else:
            why = f"is older than the parts: {n} are not in it (was xfid.db restored from an older copy?)"
        return CatalogMismatch(f"{self.db_label}: the store database {why}; " + self.rebuild_hint)

    def temp_path(self, fid: str) -> Path:
        """Where a new part is written: a temp renamed after its commit, or on a bucket (no
        rename) its final `part-<store id>-<part id>.parquet`, visible once registered."""
        if self.fs is not None:
            return self.records / f"fidelity={fid}" / f"part-{self.store_id}-{uuid.uuid4().hex}.parquet"
        return self.records / f"fidelity={fid}" / f"{TMP_PREFIX}{self.store_id}-{uuid.uuid4().hex}.parquet"

    def final_name(self, tmp: Path) -> Path:
        """The name a written part is registered under."""
        if self.fs is not None:
            return tmp
        part_id = committed.attempt_key(tmp).rsplit("-", 1)[1]
        return tmp.with_name(f"part-{part_id}.parquet")

    def twin(self, part: Path) -> Path | None:
        """The temp a committed part is renamed from (present between COMMIT and the rename)."""
        if not (part.name.startswith("part-") and self.store_id) or self.fs is not None:
            return None
        written = part.with_name(f"{TMP_PREFIX}{self.store_id}-{part.name[5:]}")
        now = committed.committing_name(written)
        return now if now.exists() or not written.exists() else written  # an older xfid's committed temp


    # --- writing -----------------------------------------------------------------------
    def require_writable(self, what: str) -> None:
        """Raise StoreError when this store cannot be written (read-only directory or database)."""
        if self.location_problem:
            raise StoreError(self.location_problem)
        if self.readonly or not self.store_id:
            raise StoreError(f"{self.root}: the store is read-only: cannot {what} (the commands that "
                             "only read it, e.g. summary, export, correlate, report, doctor, still work)")

    def has_source(self, source_id: str) -> bool:
        with self._db("read the manifest"):
            return self.conn.execute("SELECT 1 FROM sources WHERE source_id=?", (source_id,)).fetchone() is not None

    def has_path(self, path: str) -> bool:
        """Whether some source was ingested from this path (its bytes may have changed since)."""
        with self._db("read the manifest"):
            return self.conn.execute("SELECT 1 FROM sources WHERE path=? LIMIT 1", (path,)).fetchone() is not None

    def write_temp(self, prep: PreparedSource, batches: Iterable[pa.Table],
                   describe: Callable[[], dict[str, Any]] | None = None) -> None:
        """Write normalized batches into hidden temp parts, one per fidelity.

        Rows are buffered per fidelity and written as row groups of about ROW_GROUP rows,
        each sorted by target/workload/op/metric (xfid.parts), on two threads. Each part's
        footer carries its provenance (PART_META); `describe`, called once every batch is
        read, gives the source's summary that goes into it.
        """
        self.require_writable("ingest")

        def open_file(fid: str) -> Path:
            tmp = prep.temps[fid] = self.temp_path(fid)
            if self.fs is None:
                tmp.parent.mkdir(exist_ok=True)
            return tmp

        pw = PartWriter(open_file, filesystem=self.fs)
        try:
            for t in batches:
                pw.add(t)
            pw.finish()
            prep.rows += pw.rows
            if describe is not None:
                prep.summary = describe()
            prep.ingested_at = utc_now()
            fault_point("store.temp_written")
            pw.close(self._part_meta(prep, pw.rows_of))
            try:
                for tmp in prep.temps.values() if self.fs is None else ():  # a bucket's upload ends at close
                    with open(tmp, "rb+") as f:
                        os.fsync(f.fileno())
            except OSError as e:
                raise WriteFailed() from e
        except BaseException as e:
            pw.abort()
            self.discard(prep)
            if isinstance(e, WriteFailed):
                raise self._write_error(e.__cause__ or e) from None
            raise

    def _part_meta(self, prep: PreparedSource, rows_of: dict[str, int]) -> Callable[[str], dict[str, str]]:
        """Each fidelity's footer metadata: the store, the part, its siblings and its source."""
        siblings = {fid: {"part": tmp.name.rsplit("-", 1)[1].removesuffix(".parquet"), "rows": rows_of.get(fid, 0)}
                    for fid, tmp in prep.temps.items()}
        source = {"source_id": prep.source_id, "path": prep.path, "adapter": prep.adapter,
                  "options": _options_json(prep.options), "content_hash": prep.content_hash, "rows": prep.rows,
                  "ingested_at": prep.ingested_at, "summary": _summary_json(prep.summary)}

        def meta(fid: str) -> dict[str, str]:
            protocol = committed.OBJECT_PROTOCOL if self.fs is not None else committed.PROTOCOL
            doc = {"format": PART_FORMAT, "commit_protocol": protocol, "store_id": self.store_id,
                   "fidelity": fid, **siblings[fid],
                   "parts": siblings, "source": source}
            return {PART_META: json.dumps(doc, sort_keys=True)}

        return meta

    def keep_alive(self, preps: Sequence[PreparedSource]) -> None:
        """Refresh the mtime of finished temps while later files are read, so no sweep takes them."""
        now = time.time()
        if now - self._touched < temp_grace_s() / 8 or self.fs is not None:
            return  # an object's time is its upload's: a bucket's ingest commits within the grace period
        self._touched = now
        for p in preps:
            for tmp in p.temps.values():
                with contextlib.suppress(FileNotFoundError):
                    os.utime(tmp)

    def _write_error(self, e: BaseException) -> StoreError:
        why = getattr(e, "strerror", None) or str(e)
        return StoreError(f"{self.location.label}: cannot write to the store: {sqlbackend.mask(why)} "
                          "(free disk space or raise the file-size limit; nothing was written)")

    def discard(self, prep: PreparedSource) -> None:
        for tmp in prep.temps.values():
            with contextlib.suppress(FileNotFoundError, StoreError):
                self.location.delete(tmp)
        prep.temps.clear()

    def commit(self, preps: Sequence[PreparedSource]) -> None:
        """Make every prepared source visible at once, or none. Already-ingested ones are dropped.

        Under the write lock: the catalog is checked against the parts on disk, then settled
        (see `settle`), then the sources and their parts are registered. Temps are renamed to
        their part names after COMMIT; a crash before the renames leaves committed temps that
        readers use in their place and the next writer renames.
        """
        if any(p.temps for p in preps):
            self.require_writable("ingest")
        renames: list[tuple[Path, Path]] = []
        attempted = False  # True once COMMIT was sent: its outcome may be unknown, the files are kept
        try:
            fault_point("store.before_attempt")
            self._mark_committing(preps)
            # everything slow before the lock (xfid.committed; a bucket's requests): the footers'
            # row counts, the bucket's listing for the sweep
            rows_of = {tmp: self._footer_rows(tmp) for p in preps for tmp in p.temps.values()}
            objects = self.survey_objects() if self.fs is not None else None
            with write_tx(self.conn):
                self.check_catalog(objects)
                self.settle(keep={tmp for p in preps for tmp in p.temps.values()}, objects=objects)
                for p in preps:
                    if self.has_source(p.source_id):
                        p.already = True
                        self.discard(p)
                        continue
                    self.conn.execute(
                        "INSERT INTO sources (source_id, path, adapter, options, content_hash, rows, ingested_at,"
                        " summary) VALUES (?,?,?,?,?,?,?,?)",
                        (p.source_id, p.path, p.adapter, _options_json(p.options), p.content_hash, p.rows,
                         p.ingested_at or utc_now(), _summary_json(p.summary)),
                    )
                    for fid, tmp in p.temps.items():
                        final = self.final_name(tmp)
                        rows = rows_of[tmp]
                        self.conn.execute("INSERT INTO parts (file, source_id, fidelity, rows) VALUES (?,?,?,?)",
                                          (str(final.relative_to(self.records)), p.source_id, fid, rows))
                        if final != tmp:
                            renames.append((tmp, final))
                fault_point("store.before_commit")
                attempted = True
        except BaseException as e:
            for p in preps:
                if not attempted:  # rolled back for certain: this writer's own files, never committed
                    self.discard(p)
            if isinstance(e, OSError):
                raise self._write_error(e) from None
            if isinstance(e, sqlite3.OperationalError) and ("full" in str(e) or "disk" in str(e)):
                raise self._write_error(e) from None
            if isinstance(e, sqlbackend.errors()):
                with self._db("commit the ingest"):
                    raise
            raise
        fault_point("store.before_rename")
        if self.fs is not None:
            self._marks_committed(preps)
        for tmp, final in renames:
            with contextlib.suppress(OSError):  # left to the next writer: readers use the temp meanwhile
                os.replace(tmp, final)
            fault_point("store.after_rename")
        for p in preps:
            p.temps.clear()

    def _footer_rows(self, tmp: Path) -> int:
        """A written part's row count from its footer (read before the write lock)."""
        try:
            if self.fs is not None and not self.location.exists(tmp):
                raise FileNotFoundError(str(tmp))
            with self.location.reading(tmp) as src, pq.ParquetFile(src) as pf:  # closed: on a bucket, a connection
                return int(pf.metadata.num_rows)
        except FileNotFoundError:
            raise StoreError(f"{tmp}: this ingest's temp part vanished before its commit (was it removed by hand, "
                             "or left untouched past the sweep's grace period?); nothing was committed, "
                             "ingest again") from None

    def _mark_committing(self, preps: Sequence[PreparedSource]) -> None:
        """Record the commit attempt of every temp, then give each its committing name (xfid.committed).

        Outside the write lock; a bucket's parts keep their one uploaded name and get an empty mark."""
        if self.fs is not None:
            self._mark_objects(preps)
            return
        temps = [(p, fid, tmp) for p in preps for fid, tmp in p.temps.items()]
        if not temps:
            return
        with self._db("record the commit attempt"):
            committed.record_attempts(self.conn, [committed.attempt_key(t) for _, _, t in temps])
        for p, fid, tmp in temps:
            if committed.committing(tmp.name):
                continue
            dest = committed.committing_name(tmp)
            try:
                os.replace(tmp, dest)
            except FileNotFoundError:
                raise StoreError(f"{tmp}: this ingest's temp part vanished before its commit (was it removed by "
                                 "hand, or left untouched past the sweep's grace period?); nothing was committed, "
                                 "ingest again") from None
            p.temps[fid] = dest

    def _mark_objects(self, preps: Sequence[PreparedSource]) -> None:
        """A bucket's commit attempt: recorded in the journal, then each part's empty mark uploaded."""
        objs = [tmp for p in preps for tmp in p.temps.values()]
        if not objs:
            return
        with self._db("record the commit attempt"):
            committed.record_attempts(self.conn, [committed.attempt_key(o) for o in objs])
        for o in objs:
            try:
                self.location.put(committed.mark_path(self.records, str(o.relative_to(self.records))), b"")
            except OSError as e:
                raise StoreError(f"{self.location.label}: cannot write the commit mark of {o}: {sqlbackend.mask(e)}; "
                                 "nothing was committed, ingest again") from None

    def _marks_committed(self, preps: Sequence[PreparedSource]) -> None:
        """After COMMIT: each part's mark says committed (a failure leaves it to the next writer)."""
        for p in preps:
            for o in p.temps.values():
                with contextlib.suppress(OSError):
                    self.location.put(committed.mark_path(self.records, str(o.relative_to(self.records))),
                                      committed.COMMITTED_MARK)

    def committing_on_disk(self, objects: ObjectSurvey | None = None) -> list[str]:
        """Every committing part file (records-relative): committed, or its commit was cut short.
        On a bucket: the parts whose mark is still empty."""
        if self.fs is not None:
            objects = objects or self.survey_objects(sweep=False)
            listed = {e.rel for e in objects.listing}
            return sorted(r for r, size in objects.marks.items() if not size and r in listed)
        return sorted(f"{d.name}/{f.name}" for d in _scandir(Path(self.records)) if d.name.startswith("fidelity=")
                      for f in _scandir(Path(d.path)) if committing_part(f.name))

    def unproven_committing(self, known: set[str] | None = None, objects: ObjectSurvey | None = None) -> list[str]:
        """Committing parts (records-relative) the catalog neither registers nor recorded an attempt
        for: the database is older than them (xfid.committed). List before reading the catalog."""
        found = self.committing_on_disk(objects)
        if not found:
            return []
        known = self.manifest_files() if known is None else known
        unknown = [f for f in found if str(self.final_name(self.records / f).relative_to(self.records)) not in known]
        if not unknown:
            return []
        with self._db("read the commit journal"):
            seen = committed.attempted(self.conn, [committed.attempt_key(Path(f)) for f in unknown])
        return sorted(f for f in unknown if committed.attempt_key(Path(f)) not in seen
                      and (self.fs is not None or (self.records / f).exists()))

    def settle(self, keep: set[Path] | frozenset[Path] = frozenset(),
               objects: ObjectSurvey | None = None) -> dict[str, list[Path]]:
        """Finish the renames of committed temps and remove this store's abandoned temps.

        Only call under the write lock. A temp is removed only when its name carries this
        store's id, the manifest does not register its part, and it is older than the grace
        period; temps of other stores, of old versions, and every `part-*` are left alone.

        Args:
            keep: the temps of the commit calling it (never removed, however old).

        Returns:
            {"renamed": [...], "removed": [...]}: what was done.
        """
        done: dict[str, list[Path]] = {"renamed": [], "removed": []}
        if self.fs is not None:
            return self._settle_objects(done, keep, objects)
        if not self.store_id or not self.records.is_dir():
            return done
        temps = list(self.records.glob(f"fidelity=*/{TMP_PREFIX}{self.store_id}-*.parquet"))
        if not temps:
            return done
        known = self.manifest_files()
        now = time.time()
        for tmp in temps:
            if tmp in keep:
                continue
            m = TEMP_NAME.fullmatch(tmp.name)
            if not (m or committing_part(tmp.name)):
                continue
            final = self.final_name(tmp)
            if str(final.relative_to(self.records)) in known:
                if not final.exists() and committed.rename(tmp, final):
                    done["renamed"].append(final)
                continue
            if committed.deletable(tmp, PART_META, now=now):  # the one rule: never a committing part
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
                    done["removed"].append(tmp)
        return done

    def survey_objects(self, sweep: bool = True) -> ObjectSurvey:
        """A bucket's parts and marks (two listing requests) and, with `sweep`, which of this
        store's parts the sweep may take (their footers read here): call it before the lock."""
        survey = ObjectSurvey(self.location.list(), self.location.list_marks())
        if not (sweep and self.store_id):
            return survey
        known = self.manifest_files()
        now = time.time()
        for e in survey.listing:
            m = OBJECT_PART_NAME.fullmatch(e.rel.split("/", 1)[1])
            if not (m and m[1] == self.store_id) or e.rel in known or e.rel in survey.marks \
                    or now - e.mtime <= temp_grace_s():
                continue
            doc = committed.footer(self.records / e.rel, PART_META, self.fs)
            if committed.object_deletable(e.rel, survey.marks, now - e.mtime, doc):
                survey.sweepable.add(e.rel)
        return survey

    def _settle_objects(self, done: dict[str, list[Path]], keep: set[Path] | frozenset[Path],
                        objects: ObjectSurvey | None = None) -> dict[str, list[Path]]:
        """settle() on a bucket: a committed part's empty mark is rewritten (its "rename"); an
        unmarked, unregistered part of this store past the grace period, that the journal does not
        name and whose footer says protocol 3, goes (xfid.committed: never one that may be committed)."""
        if not self.store_id:
            return done
        objects = objects or self.survey_objects()
        known = self.manifest_files()
        for rel in sorted(r for r, size in objects.marks.items() if not size and r in known):
            with contextlib.suppress(OSError):  # left to the next writer
                self.location.put(committed.mark_path(self.records, rel), committed.COMMITTED_MARK)
                done["renamed"].append(self.records / rel)
        gone = [r for r in sorted(objects.sweepable) if r not in known and self.records / r not in keep]
        journal = committed.attempted(self.conn, [committed.attempt_key(Path(r)) for r in gone])
        for rel in gone:
            if committed.attempt_key(Path(rel)) in journal:
                continue  # its attempt is recorded: it may have been committed
            self.location.delete(self.records / rel)
            done["removed"].append(self.records / rel)
        return done

    # --- reading -----------------------------------------------------------------------
    def part_files(self, fidelities: Sequence[str] | None = None) -> list[Path]:
        """The committed parts (of some fidelities), in commit order; a committed temp not yet
        renamed stands in for its part."""
        q = "SELECT file, rows FROM parts"
        args: tuple[Any, ...] = ()
        if fidelities:
            q += f" WHERE fidelity IN ({','.join('?' * len(fidelities))})"
            args = tuple(fidelities)
        with self._db("read the manifest"):
            rows = self.conn.execute(q + f" ORDER BY {self.conn.rowid}", args).fetchall()
        out = []
        for file, n in rows:
            f = self.records / file
            if self.fs is None and not f.exists():
                twin = self.twin(f)
                if twin is not None and twin.exists():
                    f = twin
            self._expected[str(f)] = (file, n)
            out.append(f)
        return out

    def dataset(self, fidelities: Sequence[str] | None = None) -> ds.Dataset | None:
        files = self.part_files(fidelities)
        if not files:
            return None
        if self.fs is None:
            missing = [f for f in files if not f.exists()]
        else:
            listed = {e.rel for e in self.location.list()}
            missing = [f for f in files if self._expected.get(str(f), ("",))[0] not in listed]
        if missing:
            raise StoreError(f"{missing[0]}: a part named in the manifest is missing (run `xfid doctor`)")
        return self.open_parts(files)

    def open_parts(self, files: Sequence[Path], fmt: ds.ParquetFileFormat = VERIFIED_PARQUET) -> ds.Dataset:
        """A dataset over some part files, Hive partitions read from their paths.

        Each part's footer row count is compared with the manifest's before any data is read.

        Raises:
            StoreError: a part whose footer does not hold the rows the manifest registered.
        """
        if self.fs is not None and files:
            # the first request of every read, bounded (xfid.records.bounded): a bucket that never
            # answers is an error here, not a hang; a stall later in a read ends at the client's own
            # transfer timeout (S3: request_timeout; GCS: its stall timeout, ~120 s: docs/reliability.md)
            self.location.bounded(f"read {files[0]}", self.fs.get_file_info, str(files[0]))
        # a fresh partitioning factory per dataset: discovery mutates it (threads sharing one crash)
        dset = ds.dataset([str(f) for f in files], format=fmt, filesystem=self.fs,
                          partitioning=ds.HivePartitioning.discover(infer_dictionary=True),
                          partition_base_dir=str(self.records))
        for frag in dset.get_fragments():
            want = self._expected.get(frag.path)
            if want is None:
                continue
            try:
                have = frag.metadata.num_rows
            except (pa.ArrowInvalid, OSError):
                continue  # an unreadable footer: the read names it (Store.unreadable)
            if have != want[1]:
                raise StoreError(f"{frag.path}: this part's footer says {have} rows, the manifest registered "
                                 f"{want[1]}; it was not read (run `xfid doctor`)")
        return dset

    def read(self, filters: dict[str, Sequence[str]] | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """All visible records (optionally filtered by column values) in SCHEMA column order."""
        filters = {k: v for k, v in (filters or {}).items() if v}
        cols = list(columns) if columns else list(SCHEMA.names)
        expr = None
        for k, vals in filters.items():
            e = pc.field(k).isin(list(vals))
            expr = e if expr is None else expr & e
        for attempt in range(2):  # a second try when a committed temp was renamed while we read it
            try:
                dset = self.dataset(filters.get("fidelity"))
            except (pa.ArrowInvalid, OSError):
                raise self.unreadable(self.part_files(filters.get("fidelity")), "unreadable") from None
            if dset is None:
                return SCHEMA.empty_table().select(cols)
            try:
                t = dset.to_table(columns=cols, filter=expr)
                break
            except FileNotFoundError:
                if attempt:
                    raise self.unreadable(self.part_files(filters.get("fidelity")), "missing") from None
            except (pa.ArrowInvalid, OSError) as e:
                raise self.unreadable(self.part_files(filters.get("fidelity")), e) from None
        if "fidelity" in cols:
            i = t.column_names.index("fidelity")
            t = t.set_column(i, SCHEMA.field("fidelity"), t.column(i).cast(SCHEMA.field("fidelity").type))
        # one dictionary per column across all parts, so Arrow group-bys and joins work directly
        return t.unify_dictionaries()

    def unreadable(self, files: Sequence[Path], error: object) -> StoreError:
        """The error for a failed read of `files`: the first part that fails a full read, and why
        (else the store and `error`)."""
        bad = self.find_unreadable(files)
        return StoreError(f"{bad[0] if bad else self.location.label}: cannot read this part of the store: "
                          f"{sqlbackend.mask(bad[1] if bad else error)} (run `xfid doctor`)")

    def find_unreadable(self, files: Sequence[Path]) -> tuple[Path, str] | None:
        """The first part file that fails a full, checksum-verified read, and why.

        A part whose footer holds more rows than the manifest registered is named without
        being read whole.
        """
        for f in files:
            want = self._expected.get(str(f))
            try:
                with self.location.reading(f) as src, pq.ParquetFile(src, page_checksum_verification=True) as pf:
                    if want is not None and pf.metadata.num_rows != want[1]:
                        return f, f"its footer says {pf.metadata.num_rows} rows, the manifest registered {want[1]}"
                    for g in range(pf.num_row_groups):
                        pf.read_row_group(g)
            except (pa.ArrowInvalid, OSError) as e:
                return f, str(e)
        return None

    def sources(self) -> list[dict[str, Any]]:
        with self._db("read the manifest"):
            rows = self.conn.execute("SELECT * FROM sources ORDER BY ingested_at, path").fetchall()
        return [dict(r) for r in rows]

    def counts(self) -> dict[str, int]:
        with self._db("read the manifest"):
            q = "SELECT fidelity, SUM(rows) FROM parts GROUP BY fidelity ORDER BY fidelity"
            return {r[0]: int(r[1]) for r in self.conn.execute(q)}


def committing_part(name: str) -> bool:
    """Whether `name` is a part's committing name (`.tmp-<store>-<part>.committing.parquet`)."""
    c = committed.committing(name)
    return c is not None and re.fullmatch(r"[0-9a-f]{32}", c[1]) is not None


def _scandir(path: Path) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []


_options_json = manifest.options_json
_summary_json = manifest.summary_json
