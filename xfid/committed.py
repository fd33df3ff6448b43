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
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterable
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


def footer(path: Path, key: str) -> dict[str, Any] | None:
    """The JSON document under `key` in a Parquet footer; {} when it has none; None when the
    footer cannot be read (the file was never complete)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        kv = pq.ParquetFile(path).metadata.metadata or {}
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


def rename(src: Path, dest: Path) -> bool:
    """os.replace, False when the source is gone or the rename fails (the next writer retries)."""
    with contextlib.suppress(OSError):
        os.replace(src, dest)
        return True
    return False


__all__ = ["ATTEMPTS_DDL", "COMMITTING", "PROTOCOL", "TEMP_GRACE_S", "TMP_PREFIX", "attempt_key", "attempted",
           "committing", "committing_name", "deletable", "footer", "record_attempts", "rename", "temp_grace_s"]
