"""The committed-file protocol, one for parts and check files: which temp may be deleted, ever.

A file that becomes visible through a commit of the catalog (a part, a check's saved rows)
goes through three names:

1. written:    `.tmp-<store id>-<key>.parquet`, complete and fsynced, its footer carrying
   `"commit_protocol": 2`. While it has this name no commit has named it.
2. committing: `.tmp-<store id>-<...>.committing.parquet`. Before this rename the writer
   records the attempt (`commit_attempts`, its own durable transaction); only then does it
   rename, take the write lock and COMMIT.
3. final:      `part-<key>.parquet` / `check-<N>.parquet`, renamed after COMMIT.

So the name says what the file may be. The rule (`deletable`), written once:

- a written temp is provably uncommitted: it may be swept once older than the grace period
  (as may an older xfid's temp whose footer cannot be read: a commit reads every footer);
- a committing file is NEVER deleted by a sweep. Registered: it is renamed to its final name.
  Not registered but its attempt recorded: a writer killed during its commit (doctor reports
  it; `--repair` moves it to quarantine/). Not registered and no attempt recorded: the
  database is older than the file (a restored backup), the same CatalogMismatch as for an
  unknown `part-*`, and `xfid doctor --rebuild-catalog` registers it;
- an older xfid's temp with a readable footer may be a committed one: never deleted.

`commit_attempts` is insert-only (a docs/team.md writer may INSERT, not DELETE).

A bucket (s3://, gs://) has no rename: a part is uploaded once under its final name
`part-<store id>-<part id>.parquet`, its footer carrying `"commit_protocol": 3`. The names'
role is played by a mark, `<records>/_committing/<fidelity=F>/<part name>`, an object whose
size the bucket's listing reports:

1. no mark: the attempt was never recorded, so the part was never committed (swept, under
   the same rule as a written temp, once the journal does not name it either);
2. an empty mark: uploaded after the attempt is recorded, before the lock (as the committing
   rename); judged as a committing file;
3. a mark holding `committed`: rewritten after COMMIT (as the final rename). A part with it
   that the catalog does not register means the database is older than the part.

An unmarked part whose footer does not say protocol 3 is an older xfid's (it may be
committed): never deleted. Marks are kept as long as their part (a restored database is
judged by them).

An unfinished commit (a committing file or mark whose attempt is recorded, not registered)
may be removed by `xfid doctor --repair` only when `abandoned` says so: see its docstring.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from xfid.sqlbackend import Database

TMP_PREFIX = ".tmp-"
COMMITTING = ".committing.parquet"
PROTOCOL = 2
"""The footer's `commit_protocol`: written by a writer that records its commit attempts."""
TEMP_GRACE_S = 3600.0
"""A written temp untouched this long may be swept; env XFID_TEMP_GRACE_S overrides (tests)."""

ATTEMPTS_DDL = """
    CREATE TABLE IF NOT EXISTS commit_attempts (name TEXT PRIMARY KEY, at TEXT NOT NULL);
    """
"""The manifest migration that adds the journal of commit attempts."""

OBJECT_PROTOCOL = 3
"""The footer's `commit_protocol` of a bucket's part: its commit attempt is marked (MARKS)."""
MARKS = "_committing"
"""The folder of a bucket's commit marks, under the records location (beside fidelity=*)."""
COMMITTED_MARK = b"committed\n"

_COMMITTING = re.compile(r"\.tmp-([0-9a-f]{32})-(.+)\.committing\.parquet")


def temp_grace_s() -> float:
    try:
        return float(os.environ.get("XFID_TEMP_GRACE_S", TEMP_GRACE_S))
    except ValueError:
        return TEMP_GRACE_S


def committing_name(written: Path) -> Path:
    """The name a written temp takes once its commit attempt is recorded."""
    return written.with_name(written.name.removesuffix(".parquet") + COMMITTING)


def committing(name: str) -> tuple[str, str] | None:
    """(store id, rest) of a committing file's name, else None."""
    m = _COMMITTING.fullmatch(name)
    return (m[1], m[2]) if m else None


def attempt_key(written: Path) -> str:
    """The journal's name for one file's commit attempt: its written name's unique part."""
    return written.name.removeprefix(TMP_PREFIX).removesuffix(COMMITTING).removesuffix(".parquet")


def record_attempts(conn: Database, keys: Iterable[str]) -> None:
    """Record, durably and before any committing rename, that these files are about to be committed.

    Its own short transaction, committed before the caller's: on PostgreSQL autocommitted
    INSERTs (no lock needed), on SQLite one write transaction (its writers take turns)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    sql = "INSERT INTO commit_attempts (name, at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
    if conn.dialect == "sqlite":
        with conn.write_tx():
            for k in keys:
                conn.execute(sql, (k, stamp))
        return
    for k in keys:
        conn.execute(sql, (k, stamp))


def attempted(conn: Database, keys: Iterable[str]) -> set[str]:
    """Which of these attempt keys the database recorded (none when it has no journal yet)."""
    keys = list(keys)
    if not keys or "commit_attempts" not in conn.tables():
        return set()
    out: set[str] = set()
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        rows = conn.execute(f"SELECT name FROM commit_attempts WHERE name IN ({','.join('?' * len(chunk))})",
                            tuple(chunk)).fetchall()
        out.update(r[0] for r in rows)
    return out


def footer(path: Any, key: str, fs: Any = None) -> dict[str, Any] | None:
    """The JSON document under `key` in a Parquet footer; {} when it has none; None when the
    footer cannot be read (the file was never complete). `fs`: a bucket's pyarrow filesystem."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if fs is None:
            with pq.ParquetFile(path) as pf:
                kv = pf.metadata.metadata or {}
        else:
            with fs.open_input_file(str(path)) as f:
                kv = pq.ParquetFile(f).metadata.metadata or {}
    except (pa.ArrowInvalid, OSError):
        return None
    try:
        doc = json.loads(kv.get(key.encode(), b"{}"))
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def deletable(path: Path, footer_key: str, *, now: float | None = None) -> bool:
    """Whether a sweep may delete this unregistered temp: the one rule (see the module docstring).

    Call only for a file of this store that the catalog does not register.
    """
    if committing(path.name):
        return False  # it may have been committed: kept, whatever its age
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except FileNotFoundError:
        return False
    if age <= temp_grace_s():
        return False
    doc = footer(path, footer_key)
    return doc is None or doc.get("commit_protocol") == PROTOCOL


def mark_path(records: Any, rel: str) -> Any:
    """Where a bucket part's commit mark is (`rel`: the part, records-relative)."""
    return records / MARKS / rel


def object_deletable(rel: str, marks: dict[str, int], age: float, doc: dict[str, Any] | None) -> bool:
    """Whether a sweep may delete this unregistered bucket part of this store whose attempt the
    journal does not name: the one rule, for objects (see the module docstring).

    Args:
        marks: records-relative part -> the size of its commit mark (Location.list_marks).
        age: seconds since the upload.
        doc: its footer's PART_META (None: unreadable, it never took part in a commit).
    """
    if rel in marks or age <= temp_grace_s():
        return False
    return doc is None or doc.get("commit_protocol") == OBJECT_PROTOCOL


def abandoned(conn: Database, key: str, age: float, registered: Callable[[str], bool]) -> bool:
    """Whether an unfinished commit (its attempt `key` recorded, its file not registered) is
    provably abandoned, so `xfid doctor --repair` may take it away.

    All three must hold:
    - the journal names the attempt (so this database is not older than the attempt);
    - the file is older than the grace period (no writer is still inside that commit: a writer
      gives up waiting for the lock after XFID_LOCK_TIMEOUT_S, well under it);
    - the journal holds a later attempt (recorded after this one's second) whose file the
      catalog registers (`registered(key)`): this database went on committing after it, by its
      own clock, not only by a file server's mtime, which another machine's clock may skew.
    What it cannot rule out: a commit that reached COMMIT and was killed before its rename (or
    its mark's rewrite) AND whose database was then restored from a backup taken inside that
    commit's few seconds. docs/reliability.md says so.
    """
    if age <= temp_grace_s() or "commit_attempts" not in conn.tables():
        return False
    row = conn.execute("SELECT at FROM commit_attempts WHERE name=?", (key,)).fetchone()
    if row is None:
        return False
    later = conn.execute("SELECT name FROM commit_attempts WHERE at > ? ORDER BY at", (row[0],))
    return any(registered(r[0]) for r in later)


def rename(src: Path, dest: Path) -> bool:
    """os.replace, False when the source is gone or the rename fails (the next writer retries)."""
    with contextlib.suppress(OSError):
        os.replace(src, dest)
        return True
    return False


__all__ = ["ATTEMPTS_DDL", "COMMITTED_MARK", "COMMITTING", "MARKS", "OBJECT_PROTOCOL", "PROTOCOL", "TEMP_GRACE_S",
           "TMP_PREFIX", "abandoned", "attempt_key", "attempted", "committing", "committing_name", "deletable",
           "footer", "mark_path", "object_deletable", "record_attempts", "rename", "temp_grace_s"]
