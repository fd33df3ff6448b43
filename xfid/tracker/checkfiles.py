"""The aligned rows of each check as `<store>/checks/check-<id>.parquet` (atomic, orphan-swept)."""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from xfid.errors import TrackerError

if TYPE_CHECKING:
    import pandas as pd

CHECKS_DIR = "checks"
TMP_PREFIX = ".tmp-"
STALE_TMP_S = 3600.0
_FINAL = re.compile(r"^check-(\d+)\.parquet$")


def checks_dir(root: Path) -> Path:
    return Path(root) / CHECKS_DIR


def final_name(check_id: int) -> str:
    return f"check-{check_id}.parquet"


def write_temp(root: Path, rows: pd.DataFrame) -> Path:
    """Write rows to a hidden temp file (outside any lock) and fsync it; returns its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = checks_dir(root)
    d.mkdir(parents=True, exist_ok=True)
    try:
        table = pa.Table.from_pandas(rows, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # mixed-type object columns (dicts next to strings...): store their text form
        fixed = rows.copy()
        for c in fixed.columns:
            if fixed[c].dtype == object:
                fixed[c] = fixed[c].map(lambda v: None if v is None else str(v))
        table = pa.Table.from_pandas(fixed, preserve_index=False)
    tmp = d / f"{TMP_PREFIX}{uuid.uuid4().hex}.parquet"
    pq.write_table(table, tmp, compression="zstd")
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    return tmp


def publish(root: Path, tmp: Path, check_id: int) -> Path:
    """Rename the temp file to its final name. Call under the write lock, before COMMIT."""
    final = checks_dir(root) / final_name(check_id)
    os.replace(tmp, final)
    return final


def discard(*paths: Path | None) -> None:
    for p in paths:
        if p is not None:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


def sweep(root: Path, known: set[str]) -> list[Path]:
    """Remove check files not in `known` (the committed checks' files), and stale temp files.

    Call under the write lock.
    """
    d = checks_dir(root)
    if not d.is_dir():
        return []
    gone = []
    now = time.time()
    for f in d.iterdir():
        orphan = _FINAL.match(f.name) and f.name not in known
        stale = f.name.startswith(TMP_PREFIX) and now - f.stat().st_mtime > STALE_TMP_S
        if orphan or stale:
            discard(f)
            gone.append(f)
    return gone


def read(root: Path, check_id: int, rows_file: str | None) -> pd.DataFrame:
    """The saved rows of one check as a DataFrame.

    Raises:
        TrackerError: the file is missing or unreadable.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows_file:
        raise TrackerError(f"check {check_id} saved no rows")
    path = checks_dir(root) / rows_file
    try:
        return pq.read_table(path).to_pandas()
    except FileNotFoundError:
        raise TrackerError(f"{path}: the rows of check {check_id} are missing (run `xfid doctor`)") from None
    except (OSError, pa.ArrowInvalid) as e:
        raise TrackerError(f"{path}: cannot read the rows of check {check_id}: {e}") from None
