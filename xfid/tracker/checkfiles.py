"""The aligned rows of each check as `<store>/checks/check-<id>.parquet`, written as the parts are.

The protocol is the parts' (xfid.committed): a check's rows are written to
`.tmp-<store id>-<random>.parquet`; its commit attempt is recorded before the write lock;
under the lock it is renamed to `.tmp-<store id>-check-<id>-<random>.committing.parquet` and,
only after the check's COMMIT, to `check-<id>.parquet` (until then readers use the temp). So a
`check-*` file is always a committed check, and a committing one may be: one the database
does not know (no check, no recorded attempt) means the database is not the one these files
belong to (an older copy, another store's), a CatalogMismatch, never garbage. The sweep
removes only this store's written temps, untouched for the grace period (committed.deletable).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xfid import committed
from xfid.catalog import CatalogMismatch, why_unknown
from xfid.errors import TrackerError
from xfid.store import REBUILD_HINT
from xfid.tracker.chunks import CHUNK_ROWS

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from xfid.sqlbackend import Database
    from xfid.store import Store

CHECKS_DIR = "checks"
CHECK_META = "xfid.check"
"""The Parquet footer key naming the store a check file belongs to."""
FINAL = re.compile(r"check-(\d+)\.parquet")
WRITTEN = committed.WRITTEN
"""Rows written, not yet given to a check (the names: xfid.committed)."""
STAGED = committed.CHECK_STAGED
"""An older xfid's rows of check N, renamed to `check-N.parquet` after its COMMIT."""
COMMITTING = committed.CHECK_COMMITTING
"""The rows of check N, their commit attempt recorded; renamed to `check-N.parquet` after COMMIT."""


def checks_dir(root: Path) -> Path:
    return Path(root) / CHECKS_DIR


def final_name(check_id: int) -> str:
    return f"check-{check_id}.parquet"


def staged_name(store_id: str, check_id: int) -> str:
    """An older xfid's name for check N's rows between its COMMIT and the rename."""
    return committed.check_staged_name(store_id, check_id)


def attempt_key(path: Path) -> str:
    """The commit journal's key of a check file (written or committing): `<store id>-<random>`."""
    m = COMMITTING.fullmatch(path.name)
    return f"{m[1]}-{m[3]}" if m else committed.attempt_key(path)


def record_attempt(conn: Database, tmp: Path) -> None:
    """Record the check's commit attempt (before the write lock; xfid.committed)."""
    committed.record_attempts(conn, [attempt_key(tmp)])


def write_temp(root: Path, rows: pd.DataFrame, store_id: str) -> Path:
    """Write rows to a hidden temp file (outside any lock) and fsync it; returns its path."""
    return write_temp_chunks(root, [rows], store_id)


def write_temp_chunks(root: Path, chunks: Iterable[pd.DataFrame], store_id: str) -> Path:
    """Write the rows, given as frames of the same columns one after the other (at least one),
    to a hidden temp file (outside any lock) and fsync it; returns its path. One row group per
    non-empty frame; the file's schema is the first frame's (`rows_schema`)."""
    import pyarrow.parquet as pq

    d = checks_dir(root)
    d.mkdir(parents=True, exist_ok=True)
    doc = {"store_id": store_id, "commit_protocol": committed.PROTOCOL}
    tmp = committed.written_name(d, store_id)
    writer = None
    try:
        for rows in chunks:
            if writer is None:
                table = rows_schema(_table(rows))
                meta = {**(table.schema.metadata or {}), CHECK_META.encode(): json.dumps(doc).encode()}
                table = table.replace_schema_metadata(meta)
                writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
                writer.write_table(table)
                schema = table.schema
            elif len(rows):
                writer.write_table(_table(rows, schema))
        if writer is None:
            raise TrackerError("a check's rows file needs at least one frame of rows (even an empty one)")
        writer.close()
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    except BaseException:
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
        discard(tmp)
        raise
    return tmp


def _table(rows: pd.DataFrame, schema: pa.Schema | None = None) -> pa.Table:
    """A frame of rows as Arrow (of `schema` when given); object columns that Arrow cannot type
    (dicts next to strings...) are stored as their text."""
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(rows, schema=schema, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        fixed = rows.copy()
        for c in fixed.columns:
            if fixed[c].dtype == object:
                fixed[c] = fixed[c].map(lambda v: None if v is None else str(v))
        return pa.Table.from_pandas(fixed, schema=schema, preserve_index=False)


def rows_schema(table: pa.Table) -> pa.Table:
    """`table` with its columns of no type (every value null) given their declared type (the row
    fields of xfid.engine.schema, the noise and stack columns; else string), the interval hashes
    as large strings, and its categories
    indexed by int32, so that a later chunk's values (and categories) fit the file's schema
    whichever chunk came first."""
    import pyarrow as pa

    from xfid.engine.dataset import DATASET_SCHEMA
    from xfid.engine.schema import ROW_FIELDS, arrow_schema
    from xfid.tracker.noise import NOISE_KEY

    declared = {f.name: f.type for f in (*arrow_schema(ROW_FIELDS), *DATASET_SCHEMA)}
    declared.update({"rel_error_low": pa.float64(), "rel_error_high": pa.float64()})
    fixed = {NOISE_KEY: pa.large_string()}  # the same type whichever way the rows came (text or Arrow strings)
    fields = [pa.field(f.name, fixed[f.name]) if f.name in fixed
              else pa.field(f.name, declared.get(f.name, pa.string())) if pa.types.is_null(f.type)
              else pa.field(f.name, pa.dictionary(pa.int32(), f.type.value_type)) if pa.types.is_dictionary(f.type)
              else f for f in table.schema]
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def stage(root: Path, tmp: Path, store_id: str, check_id: int) -> Path:
    """Name the temp file for its check (its attempt recorded). Call under the write lock, before COMMIT."""
    staged = committed.check_committing_name(checks_dir(root), store_id, check_id, attempt_key(tmp).rsplit("-", 1)[1])
    os.replace(tmp, staged)
    return staged


def publish(staged: Path, check_id: int) -> Path | None:
    """Rename a committed check's temp to its final name (after COMMIT); None when it could not
    be (the next writer's sweep finishes it, readers use the temp meanwhile)."""
    final = staged.with_name(final_name(check_id))
    return final if committed.rename(staged, final) else None


def discard(*paths: Path | None) -> None:
    for p in paths:
        if p is not None:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


def committed_on_disk(root: Path) -> list[str]:
    """Every committed-looking check file (`check-<id>.parquet`), sorted."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        return sorted(f.name for f in os.scandir(checks_dir(root)) if FINAL.fullmatch(f.name))
    return []


def check_catalog(store: Store, known: set[str], on_disk: list[str] | None = None) -> None:
    """Raise CatalogMismatch when a committed check file is not named by any committed check.

    Pass `on_disk` listed before `known` was read (outside the lock): a check file is
    renamed into place only after its commit, so a concurrent check is never a stranger.
    """
    files = committed_on_disk(store.checks_root) if on_disk is None else on_disk
    unknown = [f for f in files if f not in known]
    unknown += unproven_committing(store, known)
    if not unknown:
        return
    first = checks_dir(store.checks_root) / unknown[0]
    other = _footer_store(first)
    why = why_unknown(f"{len(unknown)} check file(s) in {CHECKS_DIR}/, e.g. {first},", other, store.store_id,
                      not known, "holds no check", "the check files")
    raise CatalogMismatch(f"{store.db_path}: the store database {why}; " + REBUILD_HINT)


def unproven_committing(store: Store, known: set[str]) -> list[str]:
    """Committing check files of checks the database knows nothing of (no check, no recorded
    attempt): the database is older than them. Listed before the journal is read."""
    found = [f for f in _names(checks_dir(store.checks_root))
             if (m := COMMITTING.fullmatch(f)) and final_name(int(m[2])) not in known]
    if not found:
        return []
    seen = committed.attempted(store.conn, [attempt_key(Path(f)) for f in found])
    return sorted(f for f in found if attempt_key(Path(f)) not in seen
                  and (checks_dir(store.checks_root) / f).exists())


def _names(d: Path) -> list[str]:
    try:
        return [f.name for f in os.scandir(d)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _footer_store(path: Path) -> str | None:
    doc = committed.footer(path, CHECK_META)
    return doc.get("store_id") if doc else None


def sweep(store: Store, known: set[str]) -> dict[str, list[Path]]:
    """Finish the renames of committed checks' temps and remove this store's abandoned temps.

    Call under the write lock, with `known` the committed checks' file names.

    Returns:
        {"renamed": [...], "removed": [...]}: what was done.
    """
    d = checks_dir(store.checks_root)
    if not store.store_id or not d.is_dir():
        return {"renamed": [], "removed": []}
    temps = [f for f in committed.find_temps(d, store.store_id)
             if COMMITTING.fullmatch(f.name) or STAGED.fullmatch(f.name) or WRITTEN.fullmatch(f.name)]
    return committed.settle_temps(temps, _final_of, lambda final: final.name in known, CHECK_META)


def _final_of(temp: Path) -> Path | None:
    """The check file a temp becomes (None: written rows given to no check yet)."""
    staged = COMMITTING.fullmatch(temp.name) or STAGED.fullmatch(temp.name)
    return temp.with_name(final_name(int(staged[2]))) if staged else None


def abandoned(store: Store, f: Path, known: set[str]) -> bool:
    """Whether `f` is provably garbage: a temp named with this store's id that no committed
    check names (`known`: their file names), untouched for the grace period. `check-*` files
    and other stores' or older versions' temps never are."""
    if not store.store_id:
        return False
    m = STAGED.fullmatch(f.name) or WRITTEN.fullmatch(f.name)
    if m is None or m[1] != store.store_id or (m.re is STAGED and final_name(int(m[2])) in known):
        return False  # committing files never are: committed.deletable
    return committed.deletable(f, CHECK_META)


def file_hash(path: Path) -> str:
    """The sha256 of a check's rows file, recorded with the check (`checks.rows_sha256`)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Saved:
    """What the checks table says of one check's rows file (`sha256` None: a check recorded
    before xfid kept the hash; its file is then verified by footer and row count only)."""

    check_id: int
    rows_file: str | None
    n_rows: int | None = None
    sha256: str | None = None


def _load(root: Path, saved: Saved, store_id: str | None) -> tuple[Path, bytes | None]:
    """(the file's path, its bytes; None when missing), from its temp when its rename is not done yet."""
    path = checks_dir(root) / str(saved.rows_file)
    tries = [path]
    if store_id:  # renamed between the two looks (committing, then final): the final name again
        tries += committed.find_temps(path.parent, store_id, middle=f"check-{saved.check_id}-",
                                      suffix=committed.COMMITTING)
        tries += [path.with_name(staged_name(store_id, saved.check_id)), path]
    for p in tries:
        try:
            return path, p.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as e:
            raise TrackerError(f"{path}: cannot read the rows of check {saved.check_id}: {e.strerror or e} "
                               "(run `xfid doctor`)") from None
    return path, None


def content_problem(data: bytes, saved: Saved, store_id: str | None) -> str | None:
    """Why `data` is not the rows check `saved.check_id` recorded (None: it is): a hash that
    differs, or (no hash recorded) not Parquet, no xfid.check footer, another store's, another
    row count. A file overwritten by an output, another check's rows or a truncated copy."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if saved.sha256:
        return None if hashlib.sha256(data).hexdigest() == saved.sha256 else "its content is not what the check saved"
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        doc = json.loads((pf.metadata.metadata or {}).get(CHECK_META.encode(), b"null"))
    except (pa.ArrowInvalid, OSError, ValueError):
        return "it is not a readable Parquet file"
    if not isinstance(doc, dict):
        return "it has no xfid check footer (it was not written by `xfid check`)"
    if store_id and doc.get("store_id") and doc["store_id"] != store_id:
        return f"it was written by another store (id {str(doc['store_id'])[:12]})"
    if saved.n_rows is not None and pf.metadata.num_rows != saved.n_rows:
        return f"it holds {pf.metadata.num_rows} rows where the check saved {saved.n_rows}"
    return None


def verify(root: Path, saved: Saved, store_id: str | None) -> str | None:
    """None when the check's rows file is there and holds its rows, else what is wrong (for doctor,
    which names the file)."""
    if not saved.rows_file:
        return None
    _path, data = _load(root, saved, store_id)
    if data is None:
        return f"the rows of check {saved.check_id} are missing"
    why = content_problem(data, saved, store_id)
    return None if why is None else f"this is not the rows file of check {saved.check_id}: {why}"


def read(root: Path, check_id: int, rows_file: str | None, store_id: str | None = None, *,
         saved: Saved | None = None) -> pd.DataFrame:
    """The saved rows of one check as a DataFrame (from its temp when its rename is not done yet),
    read once and verified against what the check recorded (`saved`) before it is parsed.

    Raises:
        TrackerError: the file is missing, unreadable, or not this check's rows (overwritten,
            truncated, another check's): the message names the check and `xfid doctor`.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path, data = _verified(root, check_id, rows_file, store_id, saved)
    try:
        return pq.read_table(pa.BufferReader(data)).to_pandas()
    except (OSError, pa.ArrowInvalid) as e:
        raise TrackerError(f"{path}: cannot read the rows of check {check_id}: {e} (run `xfid doctor`)") from None


def read_chunks(root: Path, check_id: int, rows_file: str | None, store_id: str | None = None, *,
                saved: Saved | None = None, columns: Iterable[str] | None = None,
                size: int = CHUNK_ROWS) -> Iterator[pd.DataFrame]:
    """`read()`'s rows as frames of at most `size` rows, in order, of `columns` only (those the
    file has; default all): the file is verified first, then parsed a batch at a time.

    Raises:
        TrackerError: as `read()`.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path, data = _verified(root, check_id, rows_file, store_id, saved)
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        have = pf.schema_arrow.names
        cols = have if columns is None else [c for c in columns if c in have]
        for batch in pf.iter_batches(batch_size=size, columns=cols):
            yield pa.Table.from_batches([batch]).to_pandas()
    except (OSError, pa.ArrowInvalid) as e:
        raise TrackerError(f"{path}: cannot read the rows of check {check_id}: {e} (run `xfid doctor`)") from None


def _verified(root: Path, check_id: int, rows_file: str | None, store_id: str | None,
              saved: Saved | None) -> tuple[Path, bytes]:
    """(path, bytes) of one check's rows file, verified against what the check recorded."""
    if not rows_file:
        raise TrackerError(f"check {check_id} saved no rows")
    saved = saved or Saved(check_id, rows_file)
    path, data = _load(root, saved, store_id)
    if data is None:
        raise TrackerError(f"{path}: the rows of check {check_id} are missing (run `xfid doctor`)")
    why = content_problem(data, saved, store_id)
    if why is not None:
        raise TrackerError(f"{path}: this is not the rows file of check {check_id}: {why} (was it overwritten? "
                           "run `xfid doctor`; restore the file from a backup of the store)")
    return path, data
