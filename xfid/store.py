"""The store: a Hive-partitioned Parquet dataset plus its catalog (SQLite or PostgreSQL), and the tracker's.

`Store` is the coordinator. What each rule needs lives in one module, used by parts and check
files alike:
- which temp may be deleted, ever, and the names that say so: xfid.committed;
- how parts are written and committed where the records are (directory or bucket): xfid.partfiles
  (`store.parts`), the commit itself xfid.partwrite, reading xfid.partread;
- which records location is this store's, and the environment's two URLs: xfid.locations;
- which paths an output may be written to: xfid.outfile (`Store.area`);
- the catalog's tables: xfid.manifest.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from xfid import catalog, locations, manifest, outfile, partfiles, partread, partwrite, sqlbackend
from xfid import records as recloc
from xfid.catalog import CatalogMismatch
from xfid.errors import StoreError
from xfid.manifest import PART_META, read_part_meta  # noqa: F401  (re-exported)
from xfid.partfiles import CHECKS_IN_BUCKET, ObjectSurvey  # noqa: F401  (re-exported)
from xfid.partread import VERIFIED_PARQUET
from xfid.parts import (
    FILE_SCHEMA,
    ROW_GROUP,
    SORT_KEYS,
    dict_codes,
    sort_order,
)
from xfid.partwrite import PreparedSource, fault_point, utc_now  # noqa: F401  (re-exported)
from xfid.sqlbackend import Database

__all__ = ["FILE_SCHEMA", "ROW_GROUP", "SORT_KEYS", "CatalogMismatch", "PreparedSource", "Store", "dict_codes",
           "sort_order"]

DB_NAME = "xfid.db"
RECORDS = "records"
COMMITTED_GLOB = "fidelity=*/part-*.parquet"
REBUILD_HINT = ("nothing was changed or deleted; rebuild the catalog from the parts with "
                "`xfid doctor --rebuild-catalog` (it moves any xfid.db here into a backup folder, never deletes it)")

_PARTS_AND_SOURCES = manifest.PARTS_AND_SOURCES
_MANIFEST_MIGRATIONS = manifest.MIGRATIONS  # the manifest's tables: xfid.manifest


def resolve_store_path(explicit: str | os.PathLike[str] | None, config_store: str | None = None) -> Path:
    """--store, then env XFID_STORE, then [store].path of the config, then `.xfid`."""
    return Path(explicit or os.environ.get("XFID_STORE") or config_store or ".xfid")


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
    """The catalog's database URL: the argument, then env XFID_DATABASE_URL (read by xfid.locations);
    None: the store's own SQLite file.

    Raises:
        StoreError: a URL that is not PostgreSQL's (masked in the message).
    """
    url = explicit or locations.env_database_url()
    sqlbackend.remember_secrets(url)
    if url and not sqlbackend.is_postgres(url):
        raise StoreError(f"database {sqlbackend.mask(url)!r}: not a PostgreSQL URL; write "
                         "postgresql://USER@HOST[:PORT]/DBNAME (the password from PGPASSWORD or ~/.pgpass), or "
                         "leave it unset for the SQLite file inside the store")
    return url


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
        self.parts = partfiles.for_store(self)  # how parts are committed there (the one place that knows)
        outfile.protect(self, self.area())
        self.store_id: str | None = None
        self._expected: dict[str, tuple[str, int]] = {}  # part path -> (manifest file, rows)
        self._touched = 0.0
        self._removals = False  # whether the catalog has xfid.removal's tables (once true, stays)
        if self.team:
            self.readonly = self.parts.readonly()
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
        return self.parts.checks_root

    def share_check_file(self, local: Path) -> None:
        """Upload a committed check's rows to a bucket (`<records>/_checks/`), for the other machines."""
        self.parts.share_check_file(local)

    def fetch_check_file(self, name: str) -> None:
        """Download a check's rows from a bucket when this machine does not have them."""
        self.parts.fetch_check_file(name)

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
        if self.store_id is None and not self.readonly:
            # a new store (or one from before store ids): its records folder; an existing store's
            # folder is never created (an unmounted share stays a refusal: xfid.locations)
            self.parts.create_folder()
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
        return self.parts.guarded_area()

    def close(self) -> None:
        outfile.unprotect(self)
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the catalog and the parts on disk (xfid.catalog) ------------------------------
    def committed_on_disk(self, objects: ObjectSurvey | None = None) -> list[str]:
        """Every committed part file (records-relative, sorted): `part-*` in a directory; on a
        bucket, whose names prove nothing, the parts whose mark says committed (xfid.committed)."""
        return self.parts.committed_on_disk(objects)

    def _files_beside(self) -> str:
        return catalog.files_beside(self)

    def manifest_files(self) -> set[str]:
        """Every part file this catalog knows: the registered ones and those of removed sources."""
        return catalog.manifest_files(self)

    def removed_files(self) -> set[str]:
        """The parts of removed sources (xfid.removal): this store's files, read by no one."""
        return catalog.removed_files(self)

    def check_catalog(self, objects: ObjectSurvey | None = None) -> None:
        """Raise CatalogMismatch when a committed part on disk is not in the manifest (xfid.catalog)."""
        catalog.check(self, objects)

    def _matches(self) -> bool:
        return catalog.matches(self)

    def mismatch(self, unknown: Sequence[str], known: int) -> CatalogMismatch:
        return catalog.mismatch(self, unknown, known)

    # --- where parts are (xfid.partfiles) ----------------------------------------------
    def final_name(self, tmp: Path) -> Path:
        """The name a written part is registered under."""
        return self.parts.final_name(tmp)

    def twin(self, part: Path) -> Path | None:
        """The temp a committed part is renamed from (present between COMMIT and the rename)."""
        return self.parts.twin(part)

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
    # --- the committed-file protocol (xfid.partfiles, xfid.partwrite) ------------------
    def write_temp(self, prep: PreparedSource, batches: Iterable[pa.Table],
                   describe: Callable[[], dict[str, Any]] | None = None) -> None:
        """Write a source's batches into hidden parts (xfid.partwrite.write_temp)."""
        partwrite.write_temp(self, prep, batches, describe)

    def keep_alive(self, preps: Sequence[PreparedSource]) -> None:
        """Refresh finished temps while later files are read, so no sweep takes them."""
        partwrite.keep_alive(self, preps)

    def discard(self, prep: PreparedSource) -> None:
        """Remove a prepared source's uncommitted parts."""
        partwrite.discard(self, prep)

    def commit(self, preps: Sequence[PreparedSource]) -> None:
        """Make every prepared source visible at once, or none (xfid.partwrite.commit)."""
        partwrite.commit(self, preps)

    def committing_on_disk(self, objects: ObjectSurvey | None = None) -> list[str]:
        """Every committing part (records-relative): committed, or its commit was cut short."""
        return self.parts.committing_on_disk(objects)

    def unproven_committing(self, known: set[str] | None = None, objects: ObjectSurvey | None = None) -> list[str]:
        """Committing parts the catalog neither registers nor recorded an attempt for (an older database)."""
        return self.parts.unproven_committing(known, objects)

    def settle(self, keep: set[Path] | frozenset[Path] = frozenset(),
               objects: ObjectSurvey | None = None) -> dict[str, list[Path]]:
        """Finish the renames of committed temps and remove this store's abandoned temps.

        Only call under the write lock. The rule is xfid.committed's, one for parts and check
        files: never a committing file, nor a temp whose footer may say it was committed, nor
        one inside the grace period, nor another store's; every `part-*` is left alone.

        Args:
            keep: the temps of the commit calling it (never removed, however old).

        Returns:
            {"renamed": [...], "removed": [...]}: what was done.
        """
        return self.parts.settle(keep, objects)

    def survey_objects(self, sweep: bool = True) -> ObjectSurvey | None:
        """A bucket's parts and marks, and with `sweep` what the sweep may take (call it before
        the lock); None for a directory, whose names say the same."""
        return self.parts.survey(sweep)

    # --- reading (xfid.partread) -------------------------------------------------------
    def part_files(self, fidelities: Sequence[str] | None = None) -> list[Path]:
        """The committed parts (of some fidelities), in commit order."""
        return partread.part_files(self, fidelities)

    def dataset(self, fidelities: Sequence[str] | None = None) -> ds.Dataset | None:
        return partread.dataset(self, fidelities)

    def open_parts(self, files: Sequence[Path], fmt: ds.ParquetFileFormat = VERIFIED_PARQUET) -> ds.Dataset:
        """A dataset over some part files, each footer's rows checked against the manifest's."""
        return partread.open_parts(self, files, fmt)

    def read(self, filters: dict[str, Sequence[str]] | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """All visible records (optionally filtered by column values) in SCHEMA column order."""
        return partread.read(self, filters, columns)

    def unreadable(self, files: Sequence[Path], error: object) -> StoreError:
        return partread.unreadable(self, files, error)

    def find_unreadable(self, files: Sequence[Path]) -> tuple[Path, str] | None:
        return partread.find_unreadable(self, files)

    def sources(self) -> list[dict[str, Any]]:
        with self._db("read the manifest"):
            rows = self.conn.execute("SELECT * FROM sources ORDER BY ingested_at, path").fetchall()
        return [dict(r) for r in rows]

    def counts(self) -> dict[str, int]:
        with self._db("read the manifest"):
            q = "SELECT fidelity, SUM(rows) FROM parts GROUP BY fidelity ORDER BY fidelity"
            return {r[0]: int(r[1]) for r in self.conn.execute(q)}


_options_json = manifest.options_json
_summary_json = manifest.summary_json
