"""The catalog's and tracker's SQL backends: SQLite (a file in the store) or PostgreSQL (a team server).

Everything that differs between the two lives here: connecting, placeholders (`?` in xfid's
SQL, `%s` for psycopg), table DDL types, the write lock (SQLite's BEGIN IMMEDIATE, PostgreSQL's
transaction-scoped advisory lock), the list of tables, and how a lost server becomes an error.
Callers write one SQL text (portable upserts: `INSERT ... ON CONFLICT`) and use `Database`.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from xfid.errors import StoreError
from xfid.locations import DATABASE_ENV, RECORDS_ENV, env_urls

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
BUSY_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 10
LOCK_TIMEOUT_S = 600.0
"""How long a writer waits for the team's write lock before giving up; env XFID_LOCK_TIMEOUT_S."""
LOCK_KEY = 0x78666964  # "xfid": the one advisory lock every writer of a PostgreSQL store takes
PG_SCHEMES = ("postgresql://", "postgres://")

_URL = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)(\S*)")
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_QUERY_SECRET = re.compile(r"([?&](?:password|secret_key|session_token|access_key)=)[^&\s]*", re.IGNORECASE)
SECRET_ENV = (DATABASE_ENV, RECORDS_ENV)
"""The environment variables whose URLs may carry a password: their secrets are scrubbed from any text."""
_MIN_SECRET = 4
"""Shorter pieces of a password are not scrubbed on their own (they would blank ordinary words);
the URL form is masked whatever the length."""
_remembered: set[str] = set()


def lock_timeout_s() -> float:
    """The write lock's wait limit in seconds (env XFID_LOCK_TIMEOUT_S, default LOCK_TIMEOUT_S)."""
    import os

    try:
        value = float(os.environ.get("XFID_LOCK_TIMEOUT_S", LOCK_TIMEOUT_S))
    except ValueError:
        raise StoreError(f"XFID_LOCK_TIMEOUT_S={os.environ['XFID_LOCK_TIMEOUT_S']!r}: not a number of seconds; "
                         f"unset it (the default is {LOCK_TIMEOUT_S:g}) or write e.g. 120") from None
    if not 0 < value <= 86400:
        raise StoreError(f"XFID_LOCK_TIMEOUT_S={value:g}: must be between 0 and 86400 seconds "
                         f"(the default is {LOCK_TIMEOUT_S:g})")
    return value


class LockTimeout(StoreError):
    """A writer gave up waiting for the store's write lock."""


def mask(text: object) -> str:
    """`text` with every password hidden: `scheme://user:***@host`, `password=***`, `?secret_key=***`.

    Every URL, error, log line, report or check record that may hold a database or bucket URL
    goes through this one function before it is shown or stored. A URL's password is all of
    its user part after the first `:` up to the LAST `@` of the URL (an unencoded `@` in a
    password must not leave its tail visible). The secrets of the URLs this process was given
    (env XFID_DATABASE_URL / XFID_RECORDS_URL, `remember_secrets`) are also scrubbed where they
    appear without their URL: libpq quotes a bad token alone, or a password's tail as a host.
    """
    s = _URL.sub(_mask_url, str(text))
    s = _KV_PASSWORD.sub(r"\1***", s)
    s = _QUERY_SECRET.sub(r"\1***", s)
    for secret in _secrets(env_urls() + tuple(sorted(_remembered))):
        s = s.replace(secret, "***")
    return s


def _mask_url(m: re.Match[str]) -> str:
    scheme, rest = m.group(1), m.group(2)
    user, colon, _password = rest[:rest.rfind("@")].partition(":") if "@" in rest else ("", "", "")
    return f"{scheme}{user}:***{rest[rest.rfind('@'):]}" if colon else m.group(0)


def remember_secrets(url: str | None) -> None:
    """Scrub this URL's password (and its pieces) from every text `mask` is given from now on."""
    if url and _url_password(url):
        _remembered.add(url)


def _url_password(url: str) -> str:
    rest = url.split("://", 1)[1] if "://" in url else ""
    return rest[:rest.rfind("@")].partition(":")[2] if "@" in rest else ""


@functools.lru_cache(maxsize=64)
def _secrets(urls: tuple[str, ...]) -> tuple[str, ...]:
    """The password of each URL, decoded and raw, and its pieces between `@ : / %` and the query's
    secret values; longest first, so a piece never leaves part of a longer secret visible."""
    from urllib.parse import unquote

    found: set[str] = set()
    for url in urls:
        values = [_url_password(url), *(m.group(0).split("=", 1)[1] for m in _QUERY_SECRET.finditer(url))]
        for v in values:
            found.update({v, unquote(v)})
            found.update(re.split(r"[@:/%?&#\s]+", v))
    return tuple(sorted((v for v in found if len(v) >= _MIN_SECRET), key=len, reverse=True))


class UrlError(StoreError):
    """A database URL that cannot be read (its text masked in the message)."""


def check_url(url: str) -> None:
    """Raise UrlError for a PostgreSQL URL libpq would misread or refuse, before any connection.

    An unencoded `@` in the user part (libpq would take the password's tail as the host) and
    anything libpq cannot parse (a bad percent-escape, an unclosed `[`, an unknown `?option`)
    are an `Error:` naming the URL masked, never a traceback carrying it.
    """
    remember_secrets(url)
    head = url.split("://", 1)[1].split("?", 1)[0]
    userinfo = head[:head.rfind("@")] if "@" in head else ""
    for ch, code in (("@", "%40"), ("/", "%2F")):
        if ch in userinfo:
            raise UrlError(f"database URL {mask(url)!r}: the user or password holds an unencoded {ch!r} (libpq "
                           f"would read part of the password as the host; write it as {code}, or leave the password "
                           "out and put it in PGPASSWORD or ~/.pgpass)")
    psycopg = require_psycopg()
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
        for port in str(params.get("port") or "").split(","):
            if port and not (port.isdigit() and 0 < int(port) < 65536):
                raise psycopg.ProgrammingError(f"invalid port {port!r} (a number from 1 to 65535)")
    except psycopg.Error as e:
        raise UrlError(f"database URL {mask(url)!r} cannot be read: {_first_line(e)} (percent-encode any of "
                       "@ : / % ? # [ ] in the user or password, e.g. %40 for @; see the libpq connection URI "
                       "options)") from None


def is_postgres(url: str | None) -> bool:
    return bool(url) and str(url).startswith(PG_SCHEMES)


def ddl(sql: str, dialect: str) -> str:
    """A migration's SQLite DDL as `dialect` writes it (64-bit integers, doubles, byte-order text)."""
    if dialect == SQLITE:
        return sql
    sql = re.sub(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", sql)
    sql = re.sub(r"\bINTEGER\b", "BIGINT", sql)
    sql = re.sub(r"\bREAL\b", "DOUBLE PRECISION", sql)
    # byte order, as SQLite compares text: ORDER BY path gives the same order on both
    return re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', sql)


Migration = str | dict[str, str]
"""One migration: SQLite DDL (translated by `ddl` for PostgreSQL), or a text per dialect."""


def migration_text(m: Migration, dialect: str) -> str:
    if isinstance(m, dict):
        return m[dialect]
    return ddl(m, dialect)


class Row(tuple):  # type: ignore[type-arg]
    """A PostgreSQL row read like sqlite3.Row: by position, by column name, and as a mapping."""

    _names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Any:
    names = tuple(d.name for d in cursor.description or ())
    cls = type("Row", (Row,), {"_names": names, "__slots__": ()})
    return lambda values: cls(values)


def errors() -> tuple[type[BaseException], ...]:
    """What a failed statement raises on either backend: sqlite3.DatabaseError, and psycopg.Error
    once psycopg is loaded (only a PostgreSQL store loads it: a SQLite store's start stays fast)."""
    pg = sys.modules.get("psycopg")
    return (sqlite3.DatabaseError,) if pg is None else (sqlite3.DatabaseError, pg.Error)


class ServerLost(StoreError):
    """The PostgreSQL server could not be reached, or the connection broke (a restart, a network error)."""


class Database:
    """One connection: `execute(sql, params)` with `?` placeholders, `write_tx()`, `tables()`.

    Attributes:
        dialect: SQLITE or POSTGRESQL.
        label: where it is, for messages (a path, or the URL with its password masked).
        rowid: the column that orders the parts table by registration.
    """

    dialect = SQLITE
    rowid = "rowid"
    raw: Any  # sqlite3.Connection, or psycopg.Connection

    def __init__(self, raw: sqlite3.Connection, label: str):
        self.raw = raw
        self.label = label
        self.tx_values: dict[str, Any] = {}  # what the current write transaction has learnt (emptied at BEGIN)
        self.execute = raw.execute  # the hot path: no wrapper per statement on SQLite
        self.executemany = raw.executemany

    def defer(self, sql: str, params: Sequence[Any] = (), rank: int = 0) -> None:
        """See PostgresDatabase.defer; SQLite runs the statement at once."""
        self.raw.execute(sql, params)

    def defer_many(self, sql: str, rows: Sequence[Sequence[Any]], rank: int = 0) -> None:
        """`defer` of each row in order; SQLite runs them at once, as one executemany."""
        if rows:
            self.raw.executemany(sql, rows)

    @property
    def in_transaction(self) -> bool:
        return self.raw.in_transaction

    def tables(self) -> set[str]:
        return {r[0] for r in self.raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    @contextlib.contextmanager
    def write_tx(self) -> Iterator[Database]:
        """BEGIN IMMEDIATE ... COMMIT (one writer at a time), rolled back on any exception."""
        self._begin()
        self.tx_values = {}
        try:
            yield self
        except BaseException:
            self.raw.execute("ROLLBACK")
            raise
        else:
            try:
                self.raw.execute("COMMIT")
            except BaseException:
                if self.raw.in_transaction:
                    self.raw.execute("ROLLBACK")
                raise

    def _begin(self) -> None:
        """BEGIN IMMEDIATE; while another writer holds the lock, say so once on stderr and keep
        trying for lock_timeout_s() in all (a LockTimeout then: nothing was written)."""
        limit = lock_timeout_s()
        step = min(2.0, limit)
        deadline = time.monotonic() + limit
        said = False
        self.raw.execute(f"PRAGMA busy_timeout = {int(step * 1000)}")
        try:
            while True:
                try:
                    self.raw.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as e:
                    if "locked" not in str(e) and "busy" not in str(e):
                        raise
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"{self.label}: gave up waiting for the store's write lock after {limit:g} s "
                                      "(another writer held it all that time); nothing was changed: run the "
                                      "command again later, or raise XFID_LOCK_TIMEOUT_S")
                if not said:
                    print(f"xfid: waiting for the store's write lock on {self.label} (another writer holds it; "
                          f"giving up after {limit:g} s, XFID_LOCK_TIMEOUT_S)", file=sys.stderr, flush=True)
                    said = True
                time.sleep(0.02)
        finally:
            self.raw.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")

    def may_write(self) -> bool:
        return True

    def close(self) -> None:
        self.raw.close()


def _retry(fn: Any, tries: int = 200) -> Any:
    for i in range(tries):
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or i == tries - 1:
                raise
            time.sleep(0.05)
    return None


def connect_sqlite(db_path: Path, readonly: bool = False) -> Database:
    """A SQLite connection in WAL mode with a long busy timeout; autocommit, explicit transactions.

    `readonly` opens with SQLite's `mode=ro` (for a store this process may not write); when
    the WAL index cannot be created beside it, the file is read as it is (`immutable=1`).
    """
    conn = sqlite_readonly(db_path) if readonly else \
        sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    if not readonly:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if mode != "wal":
            _retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return Database(conn, str(db_path))


def sqlite_readonly(db_path: Path) -> sqlite3.Connection:
    """A `mode=ro` connection; `immutable=1` where a WAL database's -shm cannot be created."""
    uri = f"file:{quote(str(db_path))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        if (db_path.parent / f"{db_path.name}-wal").exists():  # reading without it would miss commits
            raise sqlite3.OperationalError(
                f"read-only, and {db_path.name}-wal beside it may hold commits not yet in {db_path.name} (a writer "
                "stopped or still running): run any xfid command on it once with write access") from None
    return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    """xfid's `?` placeholders as psycopg's `%s` (a literal % doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresDatabase(Database):
    """A PostgreSQL connection (psycopg 3) that behaves like the SQLite one.

    Autocommit outside `write_tx`, so each read sees the latest commits; `write_tx` is one
    transaction holding `pg_advisory_xact_lock(LOCK_KEY)`: writers of the catalog and the
    tracker on every machine take turns, as SQLite's one writer does, and the lock goes with
    the transaction (a killed writer's session ends, its lock with it).
    """

    dialect = POSTGRESQL
    rowid = "seq"

    def __init__(self, url: str):
        check_url(url)
        self.url = url
        self.label = mask(url)
        self.raw = self._connect()
        self._tx = False
        self.tx_values = {}
        self._pending: dict[tuple[int, str], list[tuple[Any, ...]]] = {}

    def _connect(self) -> Any:
        psycopg = require_psycopg()
        try:
            # libpq reads a password missing from the URL from PGPASSWORD or ~/.pgpass
            return psycopg.connect(self.url, autocommit=True, row_factory=_row_factory,
                                   connect_timeout=CONNECT_TIMEOUT_S, application_name="xfid")
        except psycopg.OperationalError as e:
            raise ServerLost(f"{self.label}: cannot connect to the PostgreSQL server: {_first_line(e)} "
                             "(check the URL, the server and the password in PGPASSWORD or ~/.pgpass; "
                             "nothing was changed)") from None
        except psycopg.Error as e:  # a URL libpq refuses only when connecting
            raise UrlError(f"{self.label}: cannot use this database URL: {_first_line(e)} (check the URL; "
                           "nothing was changed)") from None

    def __repr__(self) -> str:
        return f"<PostgresDatabase {self.label}>"

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:  # type: ignore[override]
        psycopg = require_psycopg()
        if self.raw.closed and not self._tx:
            self.raw = self._connect()  # the server came back: a new session for a new statement
        if self._pending:
            self._flush()
        try:
            if params:
                return self.raw.execute(_pg_sql(sql), tuple(params))
            return self.raw.execute(sql.replace("%", "%%") if "%" in sql else sql)
        except psycopg.errors.LockNotAvailable:
            raise LockTimeout(f"{self.label}: gave up waiting for the store's write lock after {lock_timeout_s():g} s "
                              "(another writer held it all that time); nothing was changed: run the command again "
                              "later, or raise XFID_LOCK_TIMEOUT_S") from None
        except psycopg.OperationalError as e:
            raise self.lost(e) from None
        except psycopg.errors.InsufficientPrivilege as e:
            raise StoreError(f"{self.label}: {_first_line(e)}: this database role may only read (a writer needs "
                             "INSERT and UPDATE on the xfid tables: see docs/team.md); nothing was changed") from None
        except psycopg.errors.UndefinedTable as e:
            raise StoreError(f"{self.label}: the store database is damaged: {_first_line(e)} (restore it from its "
                             "backup, or run `xfid doctor`)") from None

    def defer(self, sql: str, params: Sequence[Any] = (), rank: int = 0) -> None:
        """A statement whose result nobody reads, sent with the others of the same text as one
        batch, before any statement that is not deferred runs and before COMMIT.

        Batches go by `rank`, then in the order their text first came, each in its own order:
        the caller ranks a table's INSERTs after those of the tables its rows refer to.
        """
        if not self._tx:
            self.execute(sql, params)
            return
        self._pending.setdefault((rank, sql), []).append(tuple(params))

    def defer_many(self, sql: str, rows: Sequence[Sequence[Any]], rank: int = 0) -> None:
        """`defer` of each row in order (in a transaction they join the batch of their text);
        outside one, one executemany."""
        if not rows:
            return
        if not self._tx:
            self.executemany(sql, rows)
            return
        self._pending.setdefault((rank, sql), []).extend(tuple(r) for r in rows)

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        for (_rank, sql), rows in sorted(pending.items(), key=lambda kv: kv[0][0]):
            self.executemany(sql, rows)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:  # type: ignore[override]
        psycopg = require_psycopg()
        try:
            with self.raw.cursor() as cur:
                cur.executemany(_pg_sql(sql), [tuple(r) for r in rows])
        except psycopg.OperationalError as e:
            raise self.lost(e) from None

    def lost(self, e: BaseException) -> ServerLost:
        when = "during a transaction, which the server rolled back: nothing of it was committed" if self._tx \
            else "between statements"
        return ServerLost(f"{self.label}: lost the PostgreSQL server ({_first_line(e)}) {when}; run the command "
                          "again once the server is reachable")

    @property
    def in_transaction(self) -> bool:
        return self._tx

    def tables(self) -> set[str]:
        return {r[0] for r in self.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}

    @contextlib.contextmanager
    def write_tx(self) -> Iterator[Database]:
        """BEGIN; the store's advisory lock; ... COMMIT, rolled back on any exception."""
        if self.raw.closed:
            self.raw = self._connect()
        self.execute("BEGIN")
        self._tx = True
        self.tx_values = {}
        self._pending = {}
        try:
            # pipeline mode: statements whose results are not read go out without a round trip
            # each (a check's thousands of INSERTs); a fetch, and the end of the block, wait for them
            with self._pipeline():
                self._lock()
                yield self
                self._flush()
        except BaseException:
            self._tx = False
            self._pending = {}
            with contextlib.suppress(*errors(), StoreError):
                self.execute("ROLLBACK")
            raise
        self._tx = False
        try:
            self.execute("COMMIT")
        except ServerLost as e:
            raise ServerLost(str(e).replace("between statements", "at COMMIT, so it may or may not have "
                                            "been committed").replace(
                "run the command again once the server is reachable",
                "once the server is reachable, see what is there (`xfid sources`, `xfid issues list`) before "
                "running it again: an ingest run again is a no-op if it was committed, a check records a "
                "second check")) from None

    def _lock(self) -> None:
        """Take the store's advisory lock; when another writer holds it, say so on stderr and wait
        at most lock_timeout_s() (a LockTimeout then: nothing of this transaction was written)."""
        if self.execute("SELECT pg_try_advisory_xact_lock(?)", (LOCK_KEY,)).fetchone()[0]:
            return
        limit = lock_timeout_s()
        print(f"xfid: waiting for the store's write lock on {self.label} (another writer holds it; giving up "
              f"after {limit:g} s, XFID_LOCK_TIMEOUT_S)", file=sys.stderr, flush=True)
        self.execute(f"SET LOCAL lock_timeout = {int(limit * 1000)}")
        self.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_KEY,)).fetchone()

    @contextlib.contextmanager
    def _pipeline(self) -> Iterator[None]:
        psycopg = require_psycopg()
        try:
            with self.raw.pipeline():
                yield
        except psycopg.errors.LockNotAvailable:
            raise LockTimeout(f"{self.label}: gave up waiting for the store's write lock after {lock_timeout_s():g} s "
                              "(another writer held it all that time); nothing was changed: run the command again "
                              "later, or raise XFID_LOCK_TIMEOUT_S") from None
        except psycopg.OperationalError as e:
            raise self.lost(e) from None
        except psycopg.errors.InsufficientPrivilege as e:
            raise StoreError(f"{self.label}: {_first_line(e)}: this database role may only read (a writer needs "
                             "INSERT and UPDATE on the xfid tables: see docs/team.md); nothing was changed") from None

    def may_write(self) -> bool:
        """Whether this role may register parts (INSERT on parts)."""
        r = self.execute("SELECT has_table_privilege(current_user, 'parts', 'INSERT')").fetchone()
        return bool(r[0])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()

    def __del__(self) -> None:  # a store dropped unclosed ends its session quietly, as sqlite3's does
        raw = getattr(self, "raw", None)
        if raw is not None:
            with contextlib.suppress(Exception):
                raw.close()


def _first_line(e: BaseException) -> str:
    return mask(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)


def require_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError("a PostgreSQL database needs psycopg 3: pip install 'xfid[team]'") from None
    return psycopg


def connect(url_or_path: str | Path, readonly: bool = False) -> Database:
    """A PostgreSQL URL, or a SQLite file path."""
    if isinstance(url_or_path, str) and is_postgres(url_or_path):
        return PostgresDatabase(url_or_path)
    return connect_sqlite(Path(url_or_path), readonly=readonly)


def migrate(conn: Database, component: str, migrations: Sequence[Migration],
            on_lost: Any = None) -> None:
    """Apply the versioned migrations of one component (manifest, tracker, ...) once each.

    Args:
        on_lost: called with the first table a recorded migration made that is gone; it raises.
    """
    if "schema_version" not in conn.tables():  # (a reader's role may not create tables)
        with conn.write_tx():  # under the lock: PostgreSQL's CREATE TABLE IF NOT EXISTS races with itself
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (component TEXT PRIMARY KEY, "
                         "version INTEGER NOT NULL)")
    row = conn.execute("SELECT version FROM schema_version WHERE component=?", (component,)).fetchone()
    have = row[0] if row else 0
    if have:
        lost = sorted(created_tables(migrations[:have], conn.dialect) - conn.tables())
        if lost:
            if on_lost is not None:
                on_lost(lost[0])
            raise StoreError(f"{conn.label}: the store database is damaged: the {component} table {lost[0]!r} "
                             "is missing (restore it from a backup, or run `xfid doctor`)")
    if have >= len(migrations):
        return
    with conn.write_tx():
        row = conn.execute("SELECT version FROM schema_version WHERE component=?", (component,)).fetchone()
        have = row[0] if row else 0
        for m in migrations[have:]:
            for stmt in migration_text(m, conn.dialect).split(";"):
                if stmt.strip():
                    conn.execute(stmt)
        conn.execute("INSERT INTO schema_version VALUES (?, ?) ON CONFLICT (component) DO UPDATE "
                     "SET version = excluded.version", (component, len(migrations)))


def created_tables(migrations: Sequence[Migration], dialect: str = SQLITE) -> set[str]:
    """The tables a sequence of migrations leaves (created, minus dropped, renames followed)."""
    have: set[str] = set()
    for m in migrations:
        sql = migration_text(m, dialect)
        for g in re.finditer(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)|DROP TABLE (?:IF EXISTS )?(\w+)"
                             r"|ALTER TABLE (\w+) RENAME TO (\w+)", sql, re.IGNORECASE):
            if g[1]:
                have.add(g[1])
            elif g[2]:
                have.discard(g[2])
            else:
                have.discard(g[3])
                have.add(g[4])
    return have


__all__ = [
    "POSTGRESQL",
    "SQLITE",
    "Database",
    "PostgresDatabase",
    "ServerLost",
    "connect",
    "connect_sqlite",
    "created_tables",
    "ddl",
    "errors",
    "is_postgres",
    "mask",
    "migrate",
    "remember_secrets",
    "sqlite_readonly",
]
