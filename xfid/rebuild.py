"""`xfid doctor --rebuild-catalog`: a fresh manifest from the provenance in the parts' footers.

The database in place is moved into a backup folder, never deleted. The tracker's tables
are kept when that database belongs to the same store (an older copy), and the check files
no check of it names go into the backup; otherwise the new database starts with an empty
tracker and the backup keeps what the old one held, with the check files (`checks/`) its
checks saved.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from xfid import committed, locations
from xfid import records as recloc
from xfid.doctor import quarantine
from xfid.errors import StoreError
from xfid.manifest import PART_META, read_part_meta
from xfid.partfiles import OBJECT_PART_NAME, committing_part
from xfid.store import (
    _MANIFEST_MIGRATIONS,
    COMMITTED_GLOB,
    DB_NAME,
    RECORDS,
    connect,
    connect_readonly,
    migrate,
    resolve_database,
    write_tx,
)


@dataclass
class RebuildReport:
    store: str
    store_id: str = ""
    sources: int = 0
    parts: int = 0
    rows: int = 0
    backup: str = ""  # the folder the previous database (and check files) went to ("" when nothing moved)
    moved: list[str] = field(default_factory=list)  # the names moved there
    tracker_kept: bool = False
    legacy_parts: int = 0  # parts from before footers carried provenance (rebuilt from their rows)
    renamed: list[str] = field(default_factory=list)  # committed temps finished
    quarantined: list[str] = field(default_factory=list)  # parts that could not be registered, and why


@dataclass
class _Source:
    row: dict[str, Any]
    parts: list[tuple[str, str, int]] = field(default_factory=list)  # (file, fidelity, rows)


def rebuild_catalog(root: Path, database: str | None = None, records: str | None = None) -> RebuildReport:
    """Rebuild `root`'s manifest from its part files; run it with no other xfid using the store.

    Args:
        records: the records location (else env XFID_RECORDS_URL, else `root/records`); a
            bucket's parts that may be committed are read (xfid.committed: marked, or an older xfid's).

    Raises:
        StoreError: no parts, parts of several stores mixed, or the store cannot be written.
    """
    url = resolve_database(database)  # the argument, else the environment (xfid.locations)
    if url:
        return _rebuild_team(root, url, records)
    loc = recloc.resolve(records, root) if records is not None or locations.env_records_url() else None
    if loc is not None and loc.fs is not None:
        return _rebuild_local(root, loc.base, [], _object_parts(loc), loc)  # type: ignore[arg-type]
    records_dir = root / RECORDS if loc is None else Path(loc.base)
    renamed = _finish_committing(records_dir)
    parts = sorted(records_dir.glob(COMMITTED_GLOB)) if records_dir.is_dir() else []
    return _rebuild_local(root, records_dir, renamed, parts, None)


def _object_parts(loc: recloc.Location) -> list[Any]:
    """A bucket's parts that may be committed: each with a mark (its attempt was recorded), and each
    older xfid's (its footer does not say protocol 3); never an unmarked upload of this one."""
    marks = loc.list_marks()
    out = []
    for e in loc.list():
        if not OBJECT_PART_NAME.fullmatch(e.rel.split("/", 1)[1]):
            continue
        f = loc.base / e.rel
        doc = None if e.rel in marks else committed.footer(f, PART_META, loc.fs)
        if e.rel in marks or (doc or {}).get("commit_protocol") != committed.OBJECT_PROTOCOL:
            out.append(f)
    return out


def _rebuild_local(root: Path, records: Any, renamed: list[str], parts: list[Any],
                   loc: recloc.Location | None) -> RebuildReport:
    """The SQLite catalog's rebuild, from `parts` (files under `records`, or a bucket's objects)."""
    if not parts and not (root / "checks").is_dir():
        raise StoreError(f"{records}: no part files to rebuild the catalog from")
    rep = RebuildReport(str(root), renamed=renamed)
    metas = {f: read_part_meta(f, loc) for f in parts}
    ids = Counter(m["store_id"] for m in metas.values() if m.get("store_id"))
    if len(ids) > 1:
        listed = ", ".join(f"{k[:12]} ({n} parts)" for k, n in ids.most_common())
        raise StoreError(f"{records}: parts of {len(ids)} stores are mixed here: {listed}; move the parts of the "
                         "other stores out of records/ first, then run `xfid doctor --rebuild-catalog` again")
    db = root / DB_NAME
    old = _old_db(db)
    store_id = next(iter(ids)) if ids else (old or {}).get("store_id") or uuid.uuid4().hex
    rep.store_id = store_id
    sources: dict[str, _Source] = {}
    bad: list[tuple[Path, str]] = []
    for f in parts:
        why = _add_part(records, f, metas[f], store_id, sources, rep, loc)
        if why:
            bad.append((f, why))
    # a source is registered only when every one of its parts is there
    for sid, s in list(sources.items()):
        missing = [fid for fid, n in s.row.pop("_want", {}).items() if fid not in {p[1] for p in s.parts}
                   and n]
        if missing:
            del sources[sid]
            bad.extend((records / file, f"source {sid[:12]} lacks its {missing[0]} part") for file, _, _ in s.parts)
    tmp = root / f"{DB_NAME}.rebuild-{uuid.uuid4().hex[:8]}"
    keep = _older_copy(old, store_id, sources)
    if keep:  # what that database records as removed (xfid.removal) is not brought back
        from xfid.removal import keep_removed

        keep_removed(db, sources)
    _write_db(tmp, db if keep else None, store_id, sources)
    rep.tracker_kept = keep
    orphan_checks = not keep and (root / "checks").is_dir()
    strays = _unknown_checks(root, tmp) if keep else []
    if db.exists() or (root / f"{DB_NAME}-wal").exists() or orphan_checks or strays:
        backup = root / f"catalog-backup-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:6]}"
        backup.mkdir()
        for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
            if (root / name).exists():
                os.replace(root / name, backup / name)
                rep.moved.append(name)
        if orphan_checks:  # the saved rows of checks only that database knows
            os.replace(root / "checks", backup / "checks")
            rep.moved.append("checks/")
        if strays:  # check files of checks the kept (older) tracker does not know
            (backup / "checks").mkdir()
            for name, dest in strays:
                os.replace(root / "checks" / name, backup / "checks" / dest)
                rep.moved.append(f"checks/{dest}")
        rep.backup = str(backup)
    os.replace(tmp, db)
    for name in (f"{tmp.name}-wal", f"{tmp.name}-shm"):  # left by the read-only look at the new tracker
        (root / name).unlink(missing_ok=True)
    if loc is not None:
        _marks_committed(loc, records, sources)
    return _finish(rep, root, bad, sources, loc)


def _finish_committing(records: Path) -> list[str]:
    """Rename every committing part (xfid.committed) to its final name: each may be committed
    in a database newer than the one here, so each is registered (its siblings are checked)."""
    out: list[str] = []
    for f in committed.find_temps(records, sub="fidelity=*/", suffix=committed.COMMITTING) if records.is_dir() else []:
        if not committing_part(f.name):
            continue
        final = f.with_name(f"part-{committed.attempt_key(f).rsplit('-', 1)[1]}.parquet")
        if not final.exists() and committed.rename(f, final):
            out.append(str(final))
    return out


def _rebuild_team(root: Path, database: str, records: str | None = None) -> RebuildReport:
    """A team store's manifest rebuilt in its PostgreSQL database from the parts' footers.

    The old `sources` and `parts` rows are copied aside first (`sources_before_<stamp>`,
    `parts_before_<stamp>`), then replaced, in one transaction; the tracker and the store id are
    kept (the parts must be this store's). Committing check files no check names are moved to
    `<checks>/../catalog-backup-<stamp>/checks/` under their final names; never deleted.
    """
    from xfid.store import Store
    from xfid.tracker import checkfiles

    with Store(root, check=False, database=database, records=records) as store:
        store.require_writable("rebuild the catalog")
        loc = store.location if store.fs is not None else None
        where: Any = store.records
        if loc is not None:
            rep = RebuildReport(str(root), store_id=store.store_id or "")
            parts = _object_parts(loc)
        else:
            where = Path(store.records)
            rep = RebuildReport(str(root), store_id=store.store_id or "", renamed=_finish_committing(where))
            parts = sorted(where.glob(COMMITTED_GLOB)) if where.is_dir() else []
        metas = {f: read_part_meta(f, loc) for f in parts}
        ids = {m["store_id"] for m in metas.values() if m.get("store_id")}
        if ids - {store.store_id}:
            raise StoreError(f"{store.location.label}: parts of store(s) {', '.join(sorted(i[:12] for i in ids))} are "
                             "here, this "
                             f"catalog is store {(store.store_id or '')[:12]}'s; nothing was changed")
        sources: dict[str, _Source] = {}
        bad: list[tuple[Path, str]] = []
        for f in parts:
            why = _add_part(where, f, metas[f], rep.store_id, sources, rep, loc)
            if why:
                bad.append((f, why))
        for sid, s in list(sources.items()):
            want = s.row.pop("_want", {})
            if [fid for fid, n in want.items() if n and fid not in {p[1] for p in s.parts}]:
                del sources[sid]
                bad.extend((where / file, f"source {sid[:12]} lacks a part") for file, _, _ in s.parts)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"_{uuid.uuid4().hex[:6]}"
        conn = store.conn
        with store._db("rebuild the catalog"), write_tx(conn):
            for table in ("sources", "parts"):
                conn.execute(f"CREATE TABLE {table}_before_{stamp.lower()} AS SELECT * FROM {table}")
            conn.execute("DELETE FROM parts")
            conn.execute("DELETE FROM sources")
            for s in sorted(sources.values(), key=lambda s: (s.row["ingested_at"] or "", s.row["path"] or "")):
                r = s.row
                summary = r["summary"] if isinstance(r["summary"], str) else json.dumps(r["summary"], sort_keys=True)
                conn.execute("INSERT INTO sources (source_id, path, adapter, options, content_hash, rows, ingested_at,"
                             " summary) VALUES (?,?,?,?,?,?,?,?)",
                             (r["source_id"], r["path"], r["adapter"], r["options"], r["content_hash"], r["rows"],
                              r["ingested_at"], summary))
                for file, fid, n in s.parts:
                    conn.execute("INSERT INTO parts (file, source_id, fidelity, rows) VALUES (?,?,?,?)",
                                 (file, r["source_id"], fid, n))
        rep.moved += [f"sources -> sources_before_{stamp.lower()}", f"parts -> parts_before_{stamp.lower()}"]
        known = {r[0] for r in conn.execute("SELECT rows_file FROM checks WHERE rows_file IS NOT NULL")} \
            if "checks" in conn.tables() else set()
        d = checkfiles.checks_dir(store.checks_root)
        for name in sorted(os.listdir(d)) if d.is_dir() else []:
            m = checkfiles.COMMITTING.fullmatch(name)
            if not m:
                continue
            final = checkfiles.final_name(int(m[2]))
            if final in known:
                committed.rename(d / name, d / final)
                continue
            backup = store.checks_root / f"catalog-backup-{stamp}" / "checks"
            backup.mkdir(parents=True, exist_ok=True)
            os.replace(d / name, backup / final)
            rep.backup = str(backup.parent)
            rep.moved.append(f"checks/{final}")
        if loc is not None:
            _marks_committed(loc, where, sources)
    return _finish(rep, root, bad, sources, loc)


def _marks_committed(loc: recloc.Location, records: Any, sources: dict[str, _Source]) -> None:
    """A bucket's registered parts: their marks say committed (as a rebuild renames committing files)."""
    for s in sources.values():
        for file, _, _ in s.parts:
            loc.put(committed.mark_path(records, file), committed.COMMITTED_MARK)


def _old_db(db: Path) -> dict[str, Any] | None:
    """The store id and source ids of the database in place, when it can be read."""
    if not db.exists():
        return None
    try:
        conn = connect_readonly(db)
        try:
            sources = {r[0] for r in conn.execute("SELECT source_id FROM sources")}
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            row = conn.execute("SELECT value FROM store_meta WHERE key='store_id'").fetchone() \
                if "store_meta" in tables else None
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None
    return {"store_id": row[0] if row else None, "sources": sources}


def _unknown_checks(root: Path, db: Path) -> list[tuple[str, str]]:
    """The committed-looking check files (`checks/check-N.parquet`, and committing ones) no check
    in `db` names, each with the name it keeps in the backup; a committing file of a check `db`
    names is renamed to its final name here."""
    from xfid.tracker import checkfiles

    on_disk = checkfiles.committed_on_disk(root)
    pending = [(f, int(m[2])) for f in sorted(os.listdir(root / "checks"))
               if (m := checkfiles.COMMITTING.fullmatch(f))] if (root / "checks").is_dir() else []
    if not on_disk and not pending:
        return []
    try:
        conn = connect_readonly(db)
        try:
            known = {r[0] for r in conn.execute("SELECT rows_file FROM checks WHERE rows_file IS NOT NULL")}
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        known = set()
    out = [(f, f) for f in on_disk if f not in known]
    for f, cid in pending:
        final = checkfiles.final_name(cid)
        if final in known and not (root / "checks" / final).exists():
            committed.rename(root / "checks" / f, root / "checks" / final)
        elif final not in known:
            out.append((f, final))
    return out


def _older_copy(old: dict[str, Any] | None, store_id: str, sources: dict[str, _Source]) -> bool:
    """Whether the database in place is an older copy of this store: its id is the parts' id,
    or (from before store ids) every source it knows is among the parts'."""
    if old is None:
        return False
    if old["store_id"]:
        return bool(old["store_id"] == store_id)
    return bool(old["sources"]) and old["sources"] <= set(sources)


def _add_part(records: Any, f: Any, meta: dict[str, Any], store_id: str, sources: dict[str, _Source],
              rep: RebuildReport, loc: recloc.Location | None = None) -> str:
    """Register one part into `sources`; the reason when it cannot be. `loc`: a bucket's location."""
    fid = f.parent.name.split("=", 1)[1]
    rel = str(f.relative_to(records))
    try:
        if loc is None:
            with pq.ParquetFile(f) as pf:
                footer_rows = pf.metadata.num_rows
        else:
            with loc.fs.open_input_file(str(f)) as fh:
                footer_rows = pq.ParquetFile(fh).metadata.num_rows
    except (pa.ArrowInvalid, OSError) as e:
        return f"unreadable footer: {e}"
    if not meta:
        if loc is not None:
            return "no provenance in its footer"
        return _add_legacy(f, rel, fid, footer_rows, sources, rep)
    src = meta.get("source") or {}
    if meta.get("rows") != footer_rows or meta.get("fidelity") != fid or not src.get("source_id"):
        return f"its footer holds {footer_rows} rows of {fid}, its provenance says {meta.get('rows')} of " \
               f"{meta.get('fidelity')}"
    sid = src["source_id"]
    s = sources.setdefault(sid, _Source(
        {k: src.get(k) for k in ("source_id", "path", "adapter", "options", "content_hash", "rows", "ingested_at",
                                 "summary")},
    ))
    s.row["_want"] = {k: v.get("rows", 0) for k, v in (meta.get("parts") or {}).items()}
    s.parts.append((rel, fid, footer_rows))
    # siblings committed with it but never renamed (killed between COMMIT and the rename)
    for sfid, sib in (meta.get("parts") or {}).items() if loc is None else ():
        name = f"part-{sib.get('part')}.parquet"
        final = records / f"fidelity={sfid}" / name
        temp = committed.written_name(final.parent, store_id, str(sib.get("part")))  # an older xfid's
        if sfid != fid and not final.exists() and temp.exists():
            os.replace(temp, final)
            rep.renamed.append(str(final))
            with pq.ParquetFile(final) as pf:
                s.parts.append((str(final.relative_to(records)), sfid, pf.metadata.num_rows))
    return ""


def _add_legacy(f: Path, rel: str, fid: str, rows: int, sources: dict[str, _Source], rep: RebuildReport) -> str:
    """A part with no provenance footer: its source from the provenance columns of its rows."""
    try:
        t = pq.read_table(f, columns=["source_id", "source_path", "source", "timestamp", "metric"])
    except (pa.ArrowInvalid, OSError) as e:
        return f"unreadable: {e}"
    sids = pc.unique(t.column("source_id")).to_pylist()
    if len(sids) != 1 or not sids[0]:
        return f"its rows name {len(sids)} sources (a part holds one)"
    sid = sids[0]
    first = t.slice(0, 1).to_pylist()[0] if t.num_rows else {}
    ts = first.get("timestamp")
    s = sources.setdefault(sid, _Source({
        "source_id": sid, "path": first.get("source_path") or "", "adapter": first.get("source") or "",
        "options": "{}", "content_hash": "", "rows": 0,
        "ingested_at": ts.strftime("%Y-%m-%dT%H:%M:%SZ") if ts else "", "summary": {"metrics": {}},
    }))
    s.row["rows"] += rows
    for r in pc.value_counts(t.column("metric")).to_pylist():
        s.row["summary"]["metrics"][r["values"]] = s.row["summary"]["metrics"].get(r["values"], 0) + r["counts"]
    s.parts.append((rel, fid, rows))
    rep.legacy_parts += 1
    return ""


def _write_db(tmp: Path, keep_from: Path | None, store_id: str, sources: dict[str, _Source]) -> None:
    """The new database at `tmp`: a copy of `keep_from` (its tracker) with the manifest replaced, or a new one."""
    try:
        if keep_from is not None:
            src = connect_readonly(keep_from)
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)
            finally:
                src.close()
                dst.close()
        conn = connect(tmp)
        try:
            migrate(conn, "manifest", _MANIFEST_MIGRATIONS)
            with write_tx(conn):
                conn.execute("DELETE FROM parts")
                conn.execute("DELETE FROM sources")
                conn.execute("INSERT OR REPLACE INTO store_meta VALUES ('store_id', ?)", (store_id,))
                for s in sorted(sources.values(), key=lambda s: (s.row["ingested_at"] or "", s.row["path"] or "")):
                    r = s.row
                    summary = r["summary"]
                    if not isinstance(summary, str):
                        summary = json.dumps(summary, sort_keys=True)
                    conn.execute("INSERT INTO sources VALUES (?,?,?,?,?,?,?,?)",
                                 (r["source_id"], r["path"], r["adapter"], r["options"], r["content_hash"], r["rows"],
                                  r["ingested_at"], summary))
                    for file, fid, n in s.parts:
                        conn.execute("INSERT INTO parts VALUES (?,?,?,?)", (file, r["source_id"], fid, n))
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    except (sqlite3.DatabaseError, OSError) as e:
        for name in (tmp.name, f"{tmp.name}-wal", f"{tmp.name}-shm"):
            (tmp.parent / name).unlink(missing_ok=True)
        raise StoreError(f"{tmp.parent}: cannot write the rebuilt catalog: {e} (nothing was changed)") from None
    for name in (f"{tmp.name}-wal", f"{tmp.name}-shm"):
        (tmp.parent / name).unlink(missing_ok=True)



def _finish(rep: RebuildReport, root: Path, bad: list[tuple[Any, str]], sources: dict[str, Any],
            loc: recloc.Location | None = None) -> RebuildReport:
    """What both rebuilds end with: the unreadable files quarantined (a bucket's left where they
    are, named), the rebuilt sources counted."""
    for f, why in bad:
        if loc is not None:
            rep.quarantined.append(f"{loc.label}/{f.relative_to(loc.base)}: {why} (left in place, not registered)")
        elif f.exists():
            rep.quarantined.append(f"{quarantine(root, f, f'not registered by --rebuild-catalog: {why}')}: {why}")
    for s in sources.values():
        rep.sources += 1
        rep.parts += len(s.parts)
        rep.rows += sum(n for _, _, n in s.parts)
    return rep

__all__ = ["RebuildReport", "rebuild_catalog"]
