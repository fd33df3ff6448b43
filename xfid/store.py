"""The embedded store: a Hive-partitioned Parquet dataset plus a SQLite manifest (and tracker)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from xfid.errors import StoreError
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

__all__ = ["FILE_SCHEMA", "ROW_GROUP", "SORT_KEYS", "PreparedSource", "Store", "dict_codes", "sort_order"]

DB_NAME = "xfid.db"
RECORDS = "records"
VERIFIED_PARQUET = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True))
"""Reads check every page's CRC: a flipped bit is an error naming the part, never a wrong value."""
TMP_PREFIX = ".tmp-"
BUSY_TIMEOUT_S = 120.0

_MANIFEST_MIGRATIONS = [
    """
    CREATE TABLE sources (
        source_id TEXT PRIMARY KEY,
        path TEXT NOT NULL,
        adapter TEXT NOT NULL,
        options TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        rows INTEGER NOT NULL,
        ingested_at TEXT NOT NULL,
        summary TEXT NOT NULL
    );
    CREATE TABLE parts (
        file TEXT PRIMARY KEY,
        source_id TEXT NOT NULL REFERENCES sources(source_id),
        fidelity TEXT NOT NULL,
        rows INTEGER NOT NULL
    );
    CREATE INDEX parts_source ON parts(source_id);
    """,
]


def fault_point(name: str) -> None:
    """Fault injection for crash tests: env XFID_FAULT=name kills the process right here."""
    if os.environ.get("XFID_FAULT") == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def resolve_store_path(explicit: str | os.PathLike[str] | None, config_store: str | None = None) -> Path:
    """--store, then env XFID_STORE, then [store].path of the config, then `.xfid`."""
    return Path(explicit or os.environ.get("XFID_STORE") or config_store or ".xfid")


def connect(db_path: Path) -> sqlite3.Connection:
    """A connection in WAL mode with a long busy timeout; autocommit, explicit transactions."""
    conn = sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if mode != "wal":
        _retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _retry(fn, tries: int = 200):
    for i in range(tries):
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or i == tries - 1:
                raise
            time.sleep(0.05)
    return None


@contextlib.contextmanager
def write_tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""
    _retry(lambda: conn.execute("BEGIN IMMEDIATE"))
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def migrate(conn: sqlite3.Connection, component: str, migrations: Sequence[str]) -> None:
    """Apply the versioned migrations of one component (manifest, tracker, ...) once each."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    row = conn.execute("SELECT version FROM schema_version WHERE component=?", (component,)).fetchone()
    have = row[0] if row else 0
    if have >= len(migrations):
        return
    with write_tx(conn):
        row = conn.execute("SELECT version FROM schema_version WHERE component=?", (component,)).fetchone()
        have = row[0] if row else 0
        for sql in migrations[have:]:
            for stmt in sql.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
        conn.execute("INSERT OR REPLACE INTO schema_version VALUES (?, ?)", (component, len(migrations)))


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


class Store:
    """A store directory: `records/fidelity=F/part-*.parquet` + `xfid.db`.

    The manifest is the truth: a Parquet part is visible only once its row in `parts` is
    committed, in the same transaction as its source. Writers take `BEGIN IMMEDIATE`, so
    renames of temp files into place and the manifest change happen under one lock.
    """

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True):
        self.root = Path(root)
        if not self.root.exists():
            if not create:
                raise StoreError(f"no store at {self.root} (run `xfid ingest` first, or pass --store DIR)")
            try:
                self.root.mkdir(parents=True)
            except OSError as e:
                raise StoreError(f"cannot create store {self.root}: {e.strerror}") from None
        elif not self.root.is_dir():
            raise StoreError(f"{self.root} is not a directory (pass --store DIR)")
        self.records = self.root / RECORDS
        self.db_path = self.root / DB_NAME
        try:
            self.records.mkdir(exist_ok=True)
            self.conn = connect(self.db_path)
            migrate(self.conn, "manifest", _MANIFEST_MIGRATIONS)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.db_path}: cannot open the store database: {e} (run `xfid doctor`)") from None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing -----------------------------------------------------------------------
    def has_source(self, source_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM sources WHERE source_id=?", (source_id,)).fetchone() is not None

    def has_path(self, path: str) -> bool:
        """Whether some source was ingested from this path (its bytes may have changed since)."""
        return self.conn.execute("SELECT 1 FROM sources WHERE path=? LIMIT 1", (path,)).fetchone() is not None

    def write_temp(self, prep: PreparedSource, batches: Iterable[pa.Table]) -> None:
        """Write normalized batches into hidden temp parts, one per fidelity.

        Rows are buffered per fidelity and written as row groups of about ROW_GROUP rows,
        each sorted by target/workload/op/metric (xfid.parts), on two threads.
        """

        def open_file(fid: str) -> Path:
            d = self.records / f"fidelity={fid}"
            d.mkdir(exist_ok=True)
            tmp = prep.temps[fid] = d / f"{TMP_PREFIX}{uuid.uuid4().hex}.parquet"
            return tmp

        pw = PartWriter(open_file)
        try:
            for t in batches:
                pw.add(t)
            pw.finish()
            prep.rows += pw.rows
            fault_point("store.temp_written")
            pw.close()
            try:
                for tmp in prep.temps.values():
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

    def _write_error(self, e: BaseException) -> StoreError:
        why = getattr(e, "strerror", None) or str(e)
        return StoreError(f"{self.root}: cannot write to the store: {why} "
                          "(free disk space or raise the file-size limit; nothing was written)")

    def discard(self, prep: PreparedSource) -> None:
        for tmp in prep.temps.values():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        prep.temps.clear()

    def commit(self, preps: Sequence[PreparedSource]) -> None:
        """Make every prepared source visible at once, or none. Already-ingested ones are dropped."""
        renamed: list[Path] = []
        try:
            with write_tx(self.conn):
                self._sweep_orphans()
                now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                for p in preps:
                    if self.has_source(p.source_id):
                        p.already = True
                        self.discard(p)
                        continue
                    self.conn.execute(
                        "INSERT INTO sources VALUES (?,?,?,?,?,?,?,?)",
                        (p.source_id, p.path, p.adapter, json.dumps(p.options, sort_keys=True, default=str),
                         p.content_hash, p.rows, now, json.dumps(p.summary, sort_keys=True, default=str)),
                    )
                    for fid, tmp in p.temps.items():
                        final = tmp.with_name(f"part-{uuid.uuid4().hex}.parquet")
                        os.replace(tmp, final)
                        renamed.append(final)
                        fault_point("store.after_rename")
                        rows = pq.ParquetFile(final).metadata.num_rows
                        self.conn.execute("INSERT INTO parts VALUES (?,?,?,?)",
                                          (str(final.relative_to(self.records)), p.source_id, fid, rows))
                    p.temps.clear()
                fault_point("store.before_commit")
        except BaseException as e:
            for f in renamed:
                with contextlib.suppress(FileNotFoundError):
                    f.unlink()
            for p in preps:
                self.discard(p)
            if isinstance(e, OSError):
                raise self._write_error(e) from None
            if isinstance(e, sqlite3.OperationalError) and ("full" in str(e) or "disk" in str(e)):
                raise self._write_error(e) from None
            raise

    def _sweep_orphans(self) -> list[Path]:
        """Remove part files no manifest row names. Only call under the write lock."""
        known = {r[0] for r in self.conn.execute("SELECT file FROM parts")}
        gone = []
        for f in self.records.glob("fidelity=*/part-*.parquet"):
            if str(f.relative_to(self.records)) not in known:
                with contextlib.suppress(FileNotFoundError):
                    f.unlink()
                gone.append(f)
        return gone

    # --- reading -----------------------------------------------------------------------
    def part_files(self, fidelities: Sequence[str] | None = None) -> list[Path]:
        q = "SELECT file FROM parts"
        args: tuple[Any, ...] = ()
        if fidelities:
            q += f" WHERE fidelity IN ({','.join('?' * len(fidelities))})"
            args = tuple(fidelities)
        return [self.records / r[0] for r in self.conn.execute(q + " ORDER BY rowid", args)]

    def dataset(self, fidelities: Sequence[str] | None = None) -> ds.Dataset | None:
        files = self.part_files(fidelities)
        if not files:
            return None
        missing = [f for f in files if not f.exists()]
        if missing:
            raise StoreError(f"{missing[0]}: a part named in the manifest is missing (run `xfid doctor`)")
        return self.open_parts(files)

    def open_parts(self, files: Sequence[Path], fmt: ds.ParquetFileFormat = VERIFIED_PARQUET) -> ds.Dataset:
        """A dataset over some part files, Hive partitions read from their paths."""
        # a fresh partitioning factory per dataset: discovery mutates it (threads sharing one crash)
        return ds.dataset([str(f) for f in files], format=fmt,
                          partitioning=ds.HivePartitioning.discover(infer_dictionary=True),
                          partition_base_dir=str(self.records))

    def read(self, filters: dict[str, Sequence[str]] | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """All visible records (optionally filtered by column values) in SCHEMA column order."""
        filters = {k: v for k, v in (filters or {}).items() if v}
        try:
            dset = self.dataset(filters.get("fidelity"))
        except (pa.ArrowInvalid, OSError):
            raise self.unreadable(self.part_files(filters.get("fidelity")), "unreadable") from None
        cols = list(columns) if columns else list(SCHEMA.names)
        if dset is None:
            return SCHEMA.empty_table().select(cols)
        expr = None
        for k, vals in filters.items():
            e = pc.field(k).isin(list(vals))
            expr = e if expr is None else expr & e
        try:
            t = dset.to_table(columns=cols, filter=expr)
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
        return StoreError(f"{bad[0] if bad else self.records}: cannot read this part of the store: "
                          f"{bad[1] if bad else error} (run `xfid doctor`)")

    @staticmethod
    def find_unreadable(files: Sequence[Path]) -> tuple[Path, str] | None:
        """The first part file that fails a full, checksum-verified read, and why."""
        for f in files:
            try:
                pq.ParquetFile(f, page_checksum_verification=True).read()
            except (pa.ArrowInvalid, OSError) as e:
                return f, str(e)
        return None

    def sources(self) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT * FROM sources ORDER BY ingested_at, path").fetchall()
        return [dict(r) for r in rows]

    def counts(self) -> dict[str, int]:
        return {r[0]: r[1] for r in self.conn.execute("SELECT fidelity, SUM(rows) FROM parts GROUP BY fidelity ORDER BY fidelity")}
