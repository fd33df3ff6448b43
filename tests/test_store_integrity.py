"""The store never deletes what it cannot prove is its own garbage.

A database that does not describe the parts beside it (deleted, emptied, another store's,
an older copy) is an `Error:` for every command and `doctor --rebuild-catalog` restores it
from the parts; the sweep takes only this store's abandoned temps; `doctor --repair` beside
an ingest loses nothing; a part holding more rows than registered is not read; a damaged or
read-only database gives `Error:` or is served as it is, never a traceback.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xfid.ingest import IngestOptions, ingest
from xfid.store import Store

HEADER = "fidelity,target,workload,op,metric,stat,value,unit,run\n"


def write(path: Path, n: int, tag: str = "a") -> Path:
    path.write_text(HEADER + "".join(f"measured,h100-sxm,w{tag},op{i},latency,value,{i + 1},us,r{tag}\n"
                                     for i in range(n)))
    return path


def on_disk(store: Path) -> set[str]:
    """Every Parquet file under records/ (parts and temps), by name."""
    return {f.name for f in (store / "records").rglob("*.parquet")}


def drop_wal(store: Path) -> None:
    for extra in ("xfid.db-wal", "xfid.db-shm"):
        (store / extra).unlink(missing_ok=True)


def export(cli) -> list[str]:
    r = cli("export")
    assert r.exit_code == 0, r.output
    return sorted(r.output.splitlines())


@pytest.fixture
def store_with_history(xfid_cli, tmp_path):
    """A store with two ingests and a check between them, and a copy of its database after the first."""
    assert xfid_cli("ingest", write(tmp_path / "a.csv", 40, "a")).exit_code == 0
    assert xfid_cli("check", "--actor", "t").exit_code in (0, 1)
    drop_wal(xfid_cli.store)
    older = tmp_path / "older.db"
    shutil.copy(xfid_cli.store / "xfid.db", older)
    assert xfid_cli("ingest", write(tmp_path / "b.csv", 30, "b"), write(tmp_path / "b2.csv", 5, "c")).exit_code == 0
    return older


def damage(kind: str, store: Path, tmp_path: Path, older: Path) -> None:
    drop_wal(store)
    db = store / "xfid.db"
    if kind == "deleted":
        db.unlink()
    elif kind == "emptied":
        db.write_bytes(b"")
    elif kind == "foreign":
        other = tmp_path / "other"
        with Store(other) as s:
            ingest(s, [write(tmp_path / "o.csv", 7, "o")], IngestOptions())
        shutil.copy(other / "xfid.db", db)
    else:
        shutil.copy(older, db)
        if kind == "older_unversioned":  # a copy from before store ids (manifest version 1)
            conn = sqlite3.connect(db)
            conn.execute("DROP TABLE store_meta")
            conn.execute("UPDATE schema_version SET version=1 WHERE component='manifest'")
            conn.commit()
            conn.close()


@pytest.mark.parametrize("kind", ["deleted", "emptied", "foreign", "older", "older_unversioned"])
def test_a_database_that_does_not_match_its_parts_stops_every_command(xfid_cli, tmp_path, store_with_history,
                                                                      kind):
    before = export(xfid_cli)
    parts = on_disk(xfid_cli.store)
    assert len(parts) == 3
    damage(kind, xfid_cli.store, tmp_path, store_with_history)
    new = write(tmp_path / "n.csv", 9, "n")
    for cmd in (("ingest", new), ("check",), ("summary",), ("export",), ("sources",), ("correlate",)):
        r = xfid_cli(*cmd)
        assert r.exit_code == 2, (cmd, r.output)
        assert r.output.startswith("Error: ") and "--rebuild-catalog" in r.output and "Traceback" not in r.output
        assert on_disk(xfid_cli.store) >= parts  # never a part less
    want = {"deleted": "is missing", "emptied": "is empty", "foreign": "another store", "older": "older than the parts",
            "older_unversioned": "older than the parts"}
    assert want[kind] in xfid_cli("summary").output
    for args in (("doctor",), ("doctor", "--repair")):
        r = xfid_cli(*args)
        assert r.exit_code == 1 and "catalog_mismatch" in r.output and "--rebuild-catalog" in r.output, r.output
        assert on_disk(xfid_cli.store) >= parts
    assert not (xfid_cli.store / "quarantine").exists()

    r = xfid_cli("doctor", "--rebuild-catalog")
    assert r.exit_code == 0, r.output
    assert "catalog rebuilt from 3 parts: 3 sources, 75 rows" in r.output
    backups = list(xfid_cli.store.glob("catalog-backup-*"))
    if kind != "deleted":  # the database that was there is kept, never deleted
        assert len(backups) == 1 and (backups[0] / "xfid.db").is_file()
    assert ("tracker history kept" in r.output) == kind.startswith("older")
    if not kind.startswith("older"):  # the check's rows go with the database that knew them
        assert not list((xfid_cli.store / "checks").glob("*.parquet"))
        assert list((backups[0] / "checks").glob("check-*.parquet"))
    else:
        assert list((xfid_cli.store / "checks").glob("check-*.parquet"))
    assert export(xfid_cli) == before
    assert on_disk(xfid_cli.store) == parts
    r = xfid_cli("doctor")
    assert r.exit_code == 0 and "healthy" in r.output, r.output
    # source identity came back too: the same files are already ingested, a new one goes in
    r = xfid_cli("ingest", tmp_path / "a.csv", tmp_path / "b.csv", new)
    assert r.exit_code == 0 and "9 new rows from 1 file(s); 2 already ingested" in r.output, r.output


def test_rebuild_restores_the_manifest_row_for_row(tmp_path):
    """The rebuilt sources and parts tables equal the ones the ingests wrote."""
    from xfid.store import read_part_meta

    store = tmp_path / "s"
    with Store(store) as s:
        ingest(s, [write(tmp_path / "a.csv", 20, "a")], IngestOptions(meta={"k": "v"}, run="x"))
        ingest(s, [write(tmp_path / "b.csv", 10, "b")], IngestOptions(target="t9"))
        sources = s.sources()
        parts = [dict(r) for r in s.conn.execute("SELECT * FROM parts ORDER BY file")]
        sid = s.store_id
        for f in s.part_files():  # each footer names this store and its source
            meta = read_part_meta(f)
            assert meta["store_id"] == sid and meta["source"]["source_id"] in {x["source_id"] for x in sources}
    (store / "xfid.db").unlink()
    drop_wal(store)
    from xfid.rebuild import rebuild_catalog

    rep = rebuild_catalog(store)
    assert (rep.sources, rep.parts, rep.rows, rep.store_id) == (2, 2, 30, sid)
    with Store(store) as s:
        assert s.sources() == sources
        assert [dict(r) for r in s.conn.execute("SELECT * FROM parts ORDER BY file")] == parts
        assert s.store_id == sid


def test_rebuild_finishes_a_committed_rename_and_reads_parts_without_a_footer(tmp_path):
    """A part from before provenance footers is rebuilt from its rows; a sibling committed but
    never renamed (killed between COMMIT and the rename) is renamed and registered."""
    from xfid.store import PART_META

    store = tmp_path / "s"
    two = tmp_path / "two.csv"
    two.write_text(HEADER + "measured,t,w,op,latency,value,1,us,r\nrtl,t,w,op,latency,value,2,us,r\n")
    with Store(store) as s:
        ingest(s, [write(tmp_path / "a.csv", 12, "a")], IngestOptions())
        legacy = s.part_files()[0]
    t = pq.read_table(legacy)  # rewritten as the previous xfid wrote it: no provenance footer
    pq.write_table(t.replace_schema_metadata(None), legacy)
    assert PART_META.encode() not in (pq.ParquetFile(legacy).metadata.metadata or {})
    p = subprocess.run([sys.executable, "-m", "xfid", "--store", str(store), "ingest", str(two)], capture_output=True,
                       env={**os.environ, "XFID_FAULT": "store.after_rename"})
    assert p.returncode == -signal.SIGKILL  # killed after the first of the two renames
    assert len(list((store / "records").rglob(".tmp-*"))) == 1
    (store / "xfid.db").unlink()
    drop_wal(store)
    from xfid.rebuild import rebuild_catalog

    rep = rebuild_catalog(store)
    assert (rep.sources, rep.parts, rep.rows, rep.legacy_parts, len(rep.renamed)) == (2, 3, 14, 1, 1)
    assert not list((store / "records").rglob(".tmp-*"))
    with Store(store) as s:
        assert s.read().num_rows == 14
        assert ingest(s, [tmp_path / "a.csv"], IngestOptions()).files[0].already  # source_id from its rows


def test_rebuild_refuses_parts_of_two_stores(tmp_path):
    from xfid.errors import StoreError
    from xfid.rebuild import rebuild_catalog

    for name in ("s", "t"):
        with Store(tmp_path / name) as s:
            ingest(s, [write(tmp_path / f"{name}.csv", 3, name)], IngestOptions())
    for f in (tmp_path / "t" / "records").rglob("part-*"):
        shutil.copy(f, (tmp_path / "s" / "records" / f.parent.name) / f.name)
    with pytest.raises(StoreError, match="parts of 2 stores are mixed"):
        rebuild_catalog(tmp_path / "s")
    assert (tmp_path / "s" / "xfid.db").is_file()  # nothing moved


def test_the_sweep_takes_only_this_stores_abandoned_temps(tmp_path):
    store = tmp_path / "s"
    with Store(store) as s:
        ingest(s, [write(tmp_path / "a.csv", 5, "a")], IngestOptions())
        d = s.part_files()[0].parent
        ours_old = d / f".tmp-{s.store_id}-{uuid.uuid4().hex}.parquet"
        ours_young = d / f".tmp-{s.store_id}-{uuid.uuid4().hex}.parquet"
        foreign_old = d / f".tmp-{uuid.uuid4().hex}-{uuid.uuid4().hex}.parquet"
        legacy_old = d / f".tmp-{uuid.uuid4().hex}.parquet"
        for f in (ours_old, ours_young, foreign_old, legacy_old):
            f.write_bytes(b"PAR1 half-written")
        old = time.time() - 2 * 3600
        for f in (ours_old, foreign_old, legacy_old):
            os.utime(f, (old, old))
        ingest(s, [write(tmp_path / "b.csv", 5, "b")], IngestOptions())
        assert not ours_old.exists()
        assert ours_young.exists() and foreign_old.exists() and legacy_old.exists()
        assert len(list(d.glob("part-*"))) == 2 and s.read().num_rows == 10


def test_a_writers_finished_temps_stay_fresh_until_its_commit(tmp_path, monkeypatch):
    """A long multi-file ingest touches its finished temps, so a sweep elsewhere never takes them."""
    monkeypatch.setenv("XFID_TEMP_GRACE_S", "0.8")
    files = [write(tmp_path / f"f{i}.csv", 5, str(i)) for i in range(3)]
    store = tmp_path / "s"
    seen: list[float] = []
    import xfid.ingest as ing

    real = ing.prepare

    def slow(*args, **kwargs):
        time.sleep(0.5)  # each file takes a while: the first temp would be past the grace by the commit
        temps = list((store / "records").rglob(".tmp-*"))
        if temps:
            seen.append(time.time() - min(f.stat().st_mtime for f in temps))
        return real(*args, **kwargs)

    monkeypatch.setattr(ing, "prepare", slow)
    with Store(store) as s, Store(store) as other:
        r = ingest(s, files, IngestOptions())
        assert r.rows == 15
        other.conn.execute("BEGIN IMMEDIATE")
        assert other.settle() == {"renamed": [], "removed": []}
        other.conn.execute("COMMIT")
    assert seen and max(seen) < 0.8


def test_a_part_committed_while_doctor_verifies_is_not_repaired_away(tmp_path, monkeypatch):
    """Deterministic: an ingest commits while `doctor --repair` is verifying parts outside the lock."""
    import xfid.doctor as doctor

    store = tmp_path / "s"
    with Store(store) as s:
        ingest(s, [write(tmp_path / "a.csv", 10, "a")], IngestOptions())
    real = doctor.pq.ParquetFile
    late = write(tmp_path / "late.csv", 10, "late")

    def verifying(*a, **kw):
        if not late.with_suffix(".done").exists():
            late.with_suffix(".done").touch()
            with Store(store) as other:
                ingest(other, [late], IngestOptions())
        return real(*a, **kw)

    monkeypatch.setattr(doctor.pq, "ParquetFile", verifying)
    rep = doctor.examine(store, repair=True)
    monkeypatch.setattr(doctor.pq, "ParquetFile", real)
    assert rep.ok, rep.problems
    assert len(list((store / "records").rglob("part-*"))) == 2
    with Store(store) as s:
        assert s.read().num_rows == 20


def test_doctor_repair_beside_ingests_never_loses_a_part(tmp_path):
    """`doctor --repair` and `ingest` started together, repeated with the doctor a little later
    each time (so its scan may straddle the commit): every committed part stays."""
    store = tmp_path / "s"
    base = tmp_path / "base"
    base.mkdir()
    for i in range(20):  # enough rows that doctor's verification can overlap the ingest's commit
        write(base / f"b{i}.csv", 10_000, f"b{i}")
    with Store(store) as s:
        ingest(s, [base], IngestOptions())
    rows = 20 * 10_000
    cmd = [sys.executable, "-m", "xfid", "--store", str(store)]
    for i, delay in enumerate((0.1, 0.25)):
        f = write(tmp_path / f"n{i}.csv", 20_000, f"n{i}")
        ing = subprocess.Popen([*cmd, "ingest", str(f)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        doc = subprocess.Popen([*cmd, "doctor", "--repair"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        outs = [p.communicate(timeout=120) for p in (ing, doc)]
        assert ing.returncode == 0, outs[0]
        assert doc.returncode == 0, outs[1]
        rows += 20_000
        assert len(list((store / "records").rglob("part-*"))) == 21 + i, outs[1]
    with Store(store) as s:
        assert s.read(columns=["value"]).num_rows == rows
    assert not (store / "quarantine").exists()


def test_a_part_holding_more_rows_than_registered_is_not_read(xfid_cli, tmp_path):
    assert xfid_cli("ingest", write(tmp_path / "a.csv", 20)).exit_code == 0
    part = next((xfid_cli.store / "records").rglob("part-*"))
    t = pq.read_table(part)
    big = pa.concat_tables([t] * 5000)  # 100k rows in a small, valid file
    pq.write_table(big, part, compression="zstd")
    for cmd in ("export", "correlate", "summary"):
        r = xfid_cli(cmd)
        assert r.exit_code == 2 and r.output.startswith("Error: "), (cmd, r.output)
        assert part.name in r.output and "100000 rows" in r.output and "xfid doctor" in r.output
    calls = []
    real = pq.ParquetFile.read_row_group

    def counting(self, *a, **kw):
        calls.append(1)
        return real(self, *a, **kw)

    pq.ParquetFile.read_row_group = counting
    try:
        r = xfid_cli("doctor")
    finally:
        pq.ParquetFile.read_row_group = real
    assert r.exit_code == 1 and "row_mismatch" in r.output and "footer says 100000 rows" in r.output
    assert calls == []  # judged from the footer, not read


@pytest.mark.parametrize("table", ["sources", "parts", "store_meta", "issues", "checks"])
def test_a_dropped_table_is_an_error_and_doctor_is_not_fooled(xfid_cli, tmp_path, table):
    f = write(tmp_path / "a.csv", 10)
    assert xfid_cli("ingest", f).exit_code == 0
    assert xfid_cli("check", "--actor", "t").exit_code in (0, 1)
    conn = sqlite3.connect(xfid_cli.store / "xfid.db")
    conn.execute(f"DROP TABLE {table}")
    conn.close()
    r = xfid_cli("doctor")
    assert r.exit_code == 1 and "db_corrupt" in r.output and repr(table) in r.output and "healthy" not in r.output
    cmds = [("check",)] if table in ("issues", "checks") else [("summary",), ("check",), ("ingest", f), ("export",)]
    for cmd in cmds:
        r = xfid_cli(*cmd)
        assert r.exit_code == 2 and r.output.startswith("Error: ") and "Traceback" not in r.output, (cmd, r.output)
        assert "xfid.db" in r.output


def test_a_corrupt_database_is_an_error_for_every_command(xfid_cli, tmp_path):
    f = write(tmp_path / "a.csv", 10)
    assert xfid_cli("ingest", f).exit_code == 0
    drop_wal(xfid_cli.store)
    db = xfid_cli.store / "xfid.db"
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the header's tail and the schema page
    db.write_bytes(bytes(data))
    for cmd in (("summary",), ("check",), ("ingest", f), ("sources",)):
        r = xfid_cli(*cmd)
        assert r.exit_code == 2 and r.output.startswith("Error: ") and "xfid.db" in r.output, (cmd, r.output)
    r = xfid_cli("doctor")
    assert r.exit_code == 1 and "db_corrupt" in r.output


def _make_read_only(path: Path) -> bool:
    """Make `path` (recursively) unwritable for this process: chmod for a user, the immutable
    attribute for root (whom permissions do not stop). False when neither works here."""
    if os.geteuid() != 0:
        for f in [path, *path.rglob("*")]:
            f.chmod(0o555 if f.is_dir() else 0o444)
    elif shutil.which("chattr") is None or subprocess.run(["chattr", "-R", "+i", str(path)],
                                                          capture_output=True).returncode:
        return False
    return not os.access(path, os.W_OK)


def _make_writable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)
    else:
        for f in [path, *path.rglob("*")]:
            f.chmod(0o755 if f.is_dir() else 0o644)


def test_a_read_only_store_serves_the_read_commands(xfid_cli, tmp_path, snapshot):
    """Really read-only (the store cannot be written by this process, root included): the
    database is opened with SQLite's mode=ro (immutable when its WAL index cannot be made)."""
    assert xfid_cli("ingest", write(tmp_path / "a.csv", 30)).exit_code == 0
    before = export(xfid_cli)
    drop_wal(xfid_cli.store)
    snap = snapshot(xfid_cli.store)
    if not _make_read_only(xfid_cli.store):
        pytest.skip("cannot make a directory read-only here (root without chattr / immutable attribute)")
    try:
        assert export(xfid_cli) == before
        for cmd in ("summary", "sources", "correlate"):
            r = xfid_cli(cmd)
            assert r.exit_code == 0, (cmd, r.output)
        r = xfid_cli("doctor")
        assert r.exit_code == 0 and "healthy" in r.output, r.output
        r = xfid_cli("ingest", write(tmp_path / "b.csv", 3, "b"))
        assert r.exit_code == 2 and r.output.startswith("Error: ") and "read-only" in r.output, r.output
        assert snapshot(xfid_cli.store) == snap
    finally:
        _make_writable(xfid_cli.store)
