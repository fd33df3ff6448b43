"""`xfid doctor`: check a store and repair what can be repaired, never touching good data."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from xfid.errors import StoreError
from xfid.store import DB_NAME, RECORDS, TMP_PREFIX, Store, write_tx

STALE_TMP_S = 3600.0


@dataclass
class Problem:
    kind: str  # db_corrupt | missing_part | corrupt_part | row_mismatch | orphan_part | stale_temp | orphan_check
    path: str
    detail: str
    repair: str  # what --repair does about it ("" when it cannot)
    repaired: bool = False


@dataclass
class DoctorReport:
    store: str
    problems: list[Problem] = field(default_factory=list)
    parts_checked: int = 0
    rows_checked: int = 0

    @property
    def ok(self) -> bool:
        return not [p for p in self.problems if not p.repaired]


def _db_problem(db: Path) -> Problem | None:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            res = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return Problem("db_corrupt", str(db), f"not a readable SQLite database: {e}",
                       "cannot repair: restore xfid.db from a backup; the Parquet records are intact and can be re-ingested")
    if res != ["ok"]:
        return Problem("db_corrupt", str(db), "; ".join(res[:5]), "cannot repair: restore xfid.db from a backup")
    return None


def examine(root: Path, repair: bool = False) -> DoctorReport:
    """Check (and with `repair`, fix) the store at `root`.

    Repairs: orphan part files (no manifest row) and stale temp files are deleted; manifest
    rows whose part is missing, corrupt or has the wrong row count are removed together with
    every part of that source (moved to `quarantine/`), so the source can be ingested again.
    Good sources are never touched.
    """
    rep = DoctorReport(str(root))
    if not root.is_dir():
        raise StoreError(f"no store at {root} (pass --store DIR)")
    db = root / DB_NAME
    if db.exists():
        p = _db_problem(db)
        if p is not None:
            rep.problems.append(p)
            return rep
    with Store(root) as store:
        conn = store.conn
        parts = [dict(r) for r in conn.execute("SELECT file, source_id, fidelity, rows FROM parts")]
        known = {p["file"] for p in parts}
        bad_sources: dict[str, str] = {}
        for p in parts:
            f = store.records / p["file"]
            rep.parts_checked += 1
            if not f.exists():
                rep.problems.append(Problem("missing_part", str(f), "named in the manifest but not on disk",
                                            "drop the source from the manifest (re-ingest it)"))
                bad_sources[p["source_id"]] = "missing part"
                continue
            try:
                t = pq.ParquetFile(f, page_checksum_verification=True).read()
            except (pa.ArrowInvalid, OSError) as e:
                rep.problems.append(Problem("corrupt_part", str(f), f"unreadable: {e}",
                                            "quarantine the source's parts and drop it from the manifest (re-ingest it)"))
                bad_sources[p["source_id"]] = "corrupt part"
                continue
            rep.rows_checked += t.num_rows
            if t.num_rows != p["rows"]:
                rep.problems.append(Problem("row_mismatch", str(f), f"{t.num_rows} rows, manifest says {p['rows']}",
                                            "quarantine the source's parts and drop it from the manifest"))
                bad_sources[p["source_id"]] = "row count mismatch"
        now = time.time()
        for f in sorted(store.records.glob("fidelity=*/*.parquet")):
            rel = str(f.relative_to(store.records))
            if f.name.startswith(TMP_PREFIX):
                if now - f.stat().st_mtime > STALE_TMP_S:
                    rep.problems.append(Problem("stale_temp", str(f), "temp file of a writer that did not finish", "delete it"))
            elif rel not in known:
                rep.problems.append(Problem("orphan_part", str(f), "part file no manifest row names (invisible to xfid)",
                                            "delete it"))
        checks_dir = root / "checks"
        if checks_dir.is_dir():
            with contextlib.suppress(sqlite3.OperationalError):
                ids = {r[0] for r in conn.execute("SELECT id FROM checks")}
                for f in sorted(checks_dir.glob("*.parquet")):
                    stem = f.stem.replace("check-", "")
                    stale_tmp = f.name.startswith(".") and now - f.stat().st_mtime > STALE_TMP_S
                    if stale_tmp or (not f.name.startswith(".") and stem.isdigit() and int(stem) not in ids):
                        rep.problems.append(Problem("orphan_check", str(f), "check rows with no recorded check", "delete it"))
        if repair:
            _repair(store, rep, bad_sources)
    return rep


def _repair(store: Store, rep: DoctorReport, bad_sources: dict[str, str]) -> None:
    quarantine = store.root / "quarantine"
    with write_tx(store.conn) as conn:
        for sid in bad_sources:
            files = [r[0] for r in conn.execute("SELECT file FROM parts WHERE source_id=?", (sid,))]
            for rel in files:
                f = store.records / rel
                if f.exists():
                    dest = quarantine / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(f), dest)
            conn.execute("DELETE FROM parts WHERE source_id=?", (sid,))
            conn.execute("DELETE FROM sources WHERE source_id=?", (sid,))
        for p in rep.problems:
            if p.kind in ("missing_part", "corrupt_part", "row_mismatch"):
                p.repaired = True
            elif p.kind in ("orphan_part", "stale_temp", "orphan_check"):
                with contextlib.suppress(FileNotFoundError):
                    Path(p.path).unlink()
                p.repaired = True


__all__ = ["RECORDS", "DoctorReport", "Problem", "examine"]
