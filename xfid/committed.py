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

An unmarked part whose footer does not say protocol 3 is an older xfid's (protocol 2 wrote
bucket parts without marks or journal entries). Registered, the next writer's sweep gives it
its `committed` mark (its "rename"), so from then on a restored older database is judged by
it. Not registered, the database cannot prove it abandoned (it may be committed, and the
database older): never deleted; `doctor` reports it (`kept_temp`) and `--rebuild-catalog`
registers it. Marks are kept as long as their part (a restored database is judged by them).

The names, their globs (`find_temps`) and the sweep of a folder's temps (`settle_temps`) are
written here only: parts (xfid.partfiles) and check files (xfid.tracker.checkfiles) call them.

An unfinished commit (a committing file or mark whose attempt is recorded, not registered)
may be removed by `xfid doctor --repair` only when `abandoned` says so: see its docstring.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
WRITTEN = re.compile(r"\.tmp-([0-9a-f]{32})-([0-9a-f]{32})\.parquet")
"""A written temp, `.tmp-<store id>-<key>.parquet` (a part's or a check's rows): never committed."""
LEGACY_WRITTEN = re.compile(r"\.tmp-([0-9a-f]{32})\.parquet")
"""A temp part of a store from before store ids (whose store cannot be proven)."""
CHECK_STAGED = re.compile(r"\.tmp-([0-9a-f]{32})-check-(\d+)\.parquet")
"""An older xfid's rows of check N, renamed to `check-N.parquet` after its COMMIT."""
CHECK_COMMITTING = re.compile(r"\.tmp-([0-9a-f]{32})-check-(\d+)-([0-9a-f]{32})\.committing\.parquet")
"""The rows of check N, their commit attempt recorded; renamed to `check-N.parquet` after COMMIT."""


def temp_grace_s() -> float:
    try:
        return float(os.environ.get("XFID_TEMP_GRACE_S", TEMP_GRACE_S))
    except ValueError:
        return TEMP_GRACE_S


def written_name(folder: Path, store_id: str, key: str | None = None) -> Path:
    """A written temp in `folder`: `.tmp-<store id>-<key>.parquet` (default: a new random key)."""
    return Path(folder) / f"{TMP_PREFIX}{store_id}-{key or uuid.uuid4().hex}.parquet"


def check_staged_name(store_id: str, check_id: int) -> str:
    """An older xfid's name for check N's rows between its COMMIT and the rename."""
    return f"{TMP_PREFIX}{store_id}-check-{check_id}.parquet"


def check_committing_name(folder: Path, store_id: str, check_id: int, key: str) -> Path:
    """The committing name of check N's rows (`key`: the written temp's random part)."""
    return Path(folder) / f"{TMP_PREFIX}{store_id}-check-{check_id}-{key}{COMMITTING}"


def scratch_name(folder: Path, what: str, suffix: str = "") -> Path:
    """A private temp that takes part in no commit (a download, the store id file being written):
    `.tmp-<what>-<random><suffix>`, renamed into place by its writer; no sweep ever matches it."""
    return Path(folder) / f"{TMP_PREFIX}{what}-{uuid.uuid4().hex}{suffix}"


def find_temps(folder: Path, store_id: str | None = None, *, sub: str = "", middle: str = "",
               suffix: str = ".parquet") -> list[Path]:
    """The temps in `folder` (`sub`: a glob of subfolders, e.g. `fidelity=*/`), sorted: of any store,
    or of `store_id`; `middle`/`suffix` narrow the name (e.g. middle="check-3-", suffix=COMMITTING)."""
    mine = f"{store_id}-" if store_id else ""
    return sorted(Path(folder).glob(f"{sub}{TMP_PREFIX}{mine}{middle}*{suffix}"))


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


def settle_temps(temps: Iterable[Path], final_of: Callable[[Path], Path | None],
                 registered: Callable[[Path], bool], footer_key: str,
                 keep: set[Path] | frozenset[Path] = frozenset()) -> dict[str, list[Path]]:
    """The one sweep of a folder's temps, for parts and check files alike (under the write lock).

    A temp whose final file the catalog registers is renamed to it (its COMMIT happened, the
    rename did not); any other goes only when `deletable` says so: never a committing file,
    never a written one inside the grace period or whose footer may say it was committed.

    Args:
        temps: this store's temps of the caller's names (no other file is ever passed).
        final_of: the final file a temp becomes (None: a written temp named for no file yet).
        registered: whether the catalog registers that final file.
        footer_key: the footer's metadata key (PART_META, CHECK_META).
        keep: temps of the commit calling it (never removed, however old).

    Returns:
        {"renamed": [final files], "removed": [temps]}: what was done.
    """
    done: dict[str, list[Path]] = {"renamed": [], "removed": []}
    now = time.time()
    for tmp in temps:
        if tmp in keep:
            continue
        final = final_of(tmp)
        if final is not None and registered(final):
            if not final.exists() and rename(tmp, final):
                done["renamed"].append(final)
            continue
        if deletable(tmp, footer_key, now=now):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
                done["removed"].append(tmp)
    return done


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


__all__ = ["ATTEMPTS_DDL", "CHECK_COMMITTING", "CHECK_STAGED", "COMMITTED_MARK", "COMMITTING", "LEGACY_WRITTEN", "MARKS",
           "OBJECT_PROTOCOL", "PROTOCOL", "TEMP_GRACE_S", "TMP_PREFIX", "WRITTEN", "abandoned", "attempt_key",
           "attempted", "check_committing_name", "check_staged_name", "committing", "committing_name", "deletable",
           "find_temps", "footer", "mark_path", "object_deletable", "record_attempts", "rename", "scratch_name",
           "settle_temps", "temp_grace_s", "written_name"]
