"""Issue 30's store safety classes, on the SQLite and the PostgreSQL catalog.

A restored older database never costs a committed file that was still a temp (parts and check
files: the one protocol of xfid.committed); a writer whose records location is not the store's
is refused before it writes; concurrent creators of one new store all succeed; a writer
waiting for the team's lock gives up with a clean error.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Cli

pytestmark = pytest.mark.usefixtures("catalog")  # each test on SQLite and on PostgreSQL (tests/servers.py)

HEADER = "fidelity,target,workload,op,metric,stat,value,unit,run\n"


def write(path: Path, n: int, tag: str) -> Path:
    """Measured and modeled rows of `n` ops, so a check has rows to save."""
    rows = "".join(f"{fid},h100-sxm,w{tag},op{i},latency,value,{i + 1 + (0.5 if fid == 'roofline' else 0)},us,"
                   f"r{tag}\n" for i in range(n) for fid in ("measured", "roofline"))
    path.write_text(HEADER + rows)
    return path


def xfid(store: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xfid", "--store", str(store), *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env})


def backup(store: Path, catalog: str | None, pg_server=None) -> str | Path:
    """A real copy of the catalog as it is now: the SQLite file (backup API) or a PostgreSQL database
    made from it as a template."""
    if catalog is None:
        dst = store.parent / "older.db"
        src = sqlite3.connect(store / "xfid.db")
        out = sqlite3.connect(dst)
        src.backup(out)
        src.close()
        out.close()
        return dst
    import psycopg

    name = f"{catalog.rsplit('/', 1)[1]}_older"
    with psycopg.connect(pg_server.admin_url, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}" TEMPLATE "{catalog.rsplit("/", 1)[1]}"')
    pg_server.created.append(name)
    return pg_server.url(name)


def restore(store: Path, older: str | Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if isinstance(older, Path):
        for extra in ("xfid.db-wal", "xfid.db-shm"):
            (store / extra).unlink(missing_ok=True)
        os.replace(older, store / "xfid.db")
    else:
        monkeypatch.setenv("XFID_DATABASE_URL", older)


def test_a_restored_older_database_never_costs_a_committed_temp(tmp_path, catalog, monkeypatch, request):
    store = tmp_path / "s"
    cli = Cli(store, tmp_path)
    assert cli("ingest", write(tmp_path / "a.csv", 6, "a")).exit_code == 0
    pg = request.getfixturevalue("pg_server") if catalog else None
    older = backup(store, catalog, pg)
    # killed after COMMIT, before the renames: a committed part and a committed check file, still temps
    p = xfid(store, "ingest", str(write(tmp_path / "b.csv", 19, "b")), XFID_FAULT="store.before_rename")
    assert p.returncode == -signal.SIGKILL, p.stderr
    p = xfid(store, "check", "--actor", "ci", XFID_FAULT="check.before_rename")
    assert p.returncode == -signal.SIGKILL, p.stderr
    parts = sorted((store / "records").rglob(".tmp-*.committing.parquet"))
    checks = sorted((store / "checks").glob(".tmp-*.committing.parquet"))
    assert len(parts) == 2 and len(checks) == 1  # measured + roofline parts of b.csv
    restore(store, older, monkeypatch)
    monkeypatch.setenv("XFID_TEMP_GRACE_S", "0")  # the grace period is long past
    for cmd in (("ingest", str(write(tmp_path / "c.csv", 3, "c"))), ("check", "--actor", "ci"), ("export",)):
        r = cli(*cmd)
        assert r.exit_code == 2, (cmd, r.output)
        assert r.output.startswith("Error: ") and "older" in r.output and "Traceback" not in r.output, r.output
    assert all(f.exists() for f in parts + checks)  # nothing deleted
    r = cli("doctor", "--rebuild-catalog")  # a team store: in its database, the old rows copied aside
    assert r.exit_code == 0, r.output
    rows = cli("export")
    assert rows.exit_code == 0, rows.output
    assert len(rows.output.splitlines()) == 12 + 38  # a.csv's rows and b.csv's, none lost
    if catalog is None:
        kept = list(store.glob("catalog-backup-*/checks/check-*.parquet"))
        assert len(kept) == 1  # the committed check's rows are kept, beside the database they belong with
        assert not list(store.glob("xfid.db.rebuild-*"))  # no -wal / -shm left behind


def _ingest(store: Path, f: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return xfid(store, "ingest", str(f), **env)


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()} if d.exists() else {}


def test_a_second_records_location_on_one_catalog_is_refused(tmp_path, catalog):
    """Issue 30 HIGH 4: machine B with another records location is refused before it writes
    (catalog and both locations unchanged); doctor --repair there removes nothing."""
    r1, r2 = tmp_path / "share1" / "records", tmp_path / "share2" / "records"
    a = tmp_path / "a"
    b = tmp_path / "b" if catalog else a  # a team's other machine, or the same store with another location
    p = _ingest(a, write(tmp_path / "a.csv", 4, "a"), XFID_RECORDS_URL=str(r1))
    assert p.returncode == 0, p.stderr
    before = xfid(a, "export", XFID_RECORDS_URL=str(r1)).stdout
    assert len(before.splitlines()) == 8
    shared = _tree(r1)
    r2.mkdir(parents=True)
    for where in (r2, tmp_path / "unmounted" / "records"):
        p = _ingest(b, write(tmp_path / "b.csv", 3, "b"), XFID_RECORDS_URL=str(where))
        assert p.returncode == 2, (p.stdout, p.stderr)
        err = p.stderr
        assert err.startswith("Error: ") and str(where) in err and str(r1) in err and "Traceback" not in err, err
        assert "nothing was written" in err
    assert _tree(r2) == {} and not (tmp_path / "unmounted").exists()  # no mount-point folders made
    rep = xfid(b, "doctor", "--repair", XFID_RECORDS_URL=str(r2))
    assert "records_location" in rep.stdout + rep.stderr and rep.returncode != 0, rep.stdout + rep.stderr
    assert _tree(r1) == shared and _tree(r2) == {}
    assert xfid(a, "export", XFID_RECORDS_URL=str(r1)).stdout == before  # catalog unchanged
    # a location holding another store's id is refused the same way
    other = tmp_path / "other"
    assert _ingest(other, write(tmp_path / "o.csv", 2, "o"), XFID_DATABASE_URL="",
                   XFID_RECORDS_URL=str(r2)).returncode == 0
    p = _ingest(b, write(tmp_path / "b.csv", 3, "b"), XFID_RECORDS_URL=str(r2))
    assert p.returncode == 2 and "belongs to another store" in p.stderr, p.stderr
    assert xfid(a, "export", XFID_RECORDS_URL=str(r1)).stdout == before


def test_a_local_store_whose_records_folder_moved_is_refused(tmp_path, catalog):
    store = tmp_path / "s"
    assert _ingest(store, write(tmp_path / "a.csv", 4, "a")).returncode == 0
    os.replace(store / "records", store / "records-moved")
    p = _ingest(store, write(tmp_path / "b.csv", 3, "b"))
    assert p.returncode == 2 and p.stderr.startswith("Error: ") and "no records folder" in p.stderr, p.stderr
    assert not (store / "records").exists()  # not made again: nothing written to a new records/
    xfid(store, "doctor", "--repair")
    os.replace(store / "records-moved", store / "records")
    assert len(xfid(store, "export").stdout.splitlines()) == 8  # doctor dropped no source
    assert _ingest(store, write(tmp_path / "b.csv", 3, "b")).returncode == 0


def test_an_old_store_without_an_id_file_is_adopted(tmp_path, catalog):
    """A store from before id files: its first writer finds the registered parts and writes the id."""
    store = tmp_path / "s"
    assert _ingest(store, write(tmp_path / "a.csv", 4, "a")).returncode == 0
    (store / "records" / ".xfid-store-id").unlink()
    assert _ingest(store, write(tmp_path / "b.csv", 3, "b")).returncode == 0
    assert (store / "records" / ".xfid-store-id").is_file()
    assert len(xfid(store, "export").stdout.splitlines()) == 14


def test_eight_processes_creating_one_new_store_all_succeed(tmp_path, catalog):
    store = tmp_path / "new" / "s"
    files = [write(tmp_path / f"f{i}.csv", 3, str(i)) for i in range(8)]
    procs = [subprocess.Popen([sys.executable, "-m", "xfid", "--store", str(store), "ingest", str(f)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for f in files]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert len(xfid(store, "export").stdout.splitlines()) == 8 * 6


def test_a_writer_waiting_for_the_lock_gives_up_with_a_clean_error(tmp_path, catalog):
    """Another writer holds the lock (PostgreSQL's advisory lock, SQLite's write lock) past
    XFID_LOCK_TIMEOUT_S: the waiting writer says so, then stops with an Error, nothing written."""
    store = tmp_path / "s"
    assert _ingest(store, write(tmp_path / "a.csv", 4, "a")).returncode == 0
    if catalog:
        import psycopg

        from xfid.sqlbackend import LOCK_KEY

        holder = psycopg.connect(catalog, autocommit=True)
        holder.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
    else:
        holder = sqlite3.connect(store / "xfid.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
    try:
        p = _ingest(store, write(tmp_path / "b.csv", 3, "b"), XFID_LOCK_TIMEOUT_S="2")
    finally:
        holder.close()
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "waiting for the store's write lock" in p.stderr and "Error: " in p.stderr, p.stderr
    assert "gave up waiting" in p.stderr and "Traceback" not in p.stderr
    assert len(xfid(store, "export").stdout.splitlines()) == 8
    assert not list((store / "records").rglob(".tmp-*"))


def test_a_reader_role_on_an_empty_database_is_not_db_corrupt(tmp_path, catalog):
    if catalog is None:
        pytest.skip("a PostgreSQL role; a SQLite store has no roles")
    import psycopg

    from tests.servers import with_user

    tag = catalog.rsplit("/", 1)[1]
    with psycopg.connect(catalog, autocommit=True) as c:
        c.execute(f"CREATE ROLE {tag}_reader LOGIN PASSWORD 'reader-pw'")
        c.execute(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC, {tag}_reader")
    r = xfid(tmp_path / "m", "doctor", XFID_DATABASE_URL=with_user(catalog, f"{tag}_reader", "reader-pw"))
    assert r.returncode == 0 and "db_corrupt" not in r.stdout and "reader-pw" not in r.stdout + r.stderr, \
        (r.stdout, r.stderr)


def _objects(url: str) -> dict[str, int]:
    """Every object under a bucket's records URL: path -> size."""
    import pyarrow.fs as pafs

    fs, base = pafs.FileSystem.from_uri(url)
    return {i.path: i.size for i in fs.get_file_info(pafs.FileSelector(base, recursive=True))
            if i.type == pafs.FileType.File}


def test_a_restored_older_database_never_costs_a_committed_bucket_part(tmp_path, catalog, monkeypatch, request):
    """Issue 30 HIGH 1 on a bucket (no rename: the commit marks of xfid.committed): after an older
    database is restored, a committed part, and one whose writer was killed after COMMIT, are an
    `Error:` and never swept, past the grace period too; `--rebuild-catalog` brings every row back."""
    url = request.getfixturevalue("s3_records")
    monkeypatch.setenv("XFID_RECORDS_URL", url)
    store = tmp_path / "s"
    cli = Cli(store, tmp_path)
    assert cli("ingest", write(tmp_path / "a.csv", 6, "a")).exit_code == 0
    pg = request.getfixturevalue("pg_server") if catalog else None
    older = backup(store, catalog, pg)
    assert cli("ingest", write(tmp_path / "b.csv", 19, "b")).exit_code == 0
    p = xfid(store, "ingest", str(write(tmp_path / "d.csv", 3, "d")), XFID_FAULT="store.before_rename")
    assert p.returncode == -signal.SIGKILL, p.stderr  # committed; its marks still say "committing"
    before = _objects(url)
    assert sum(1 for k in before if "/fidelity=" in k and "_committing" not in k) == 6
    restore(store, older, monkeypatch)
    monkeypatch.setenv("XFID_TEMP_GRACE_S", "0")  # the grace period is long past
    for cmd in (("ingest", str(write(tmp_path / "c.csv", 3, "c"))), ("check", "--actor", "ci"), ("export",),
                ("doctor", "--repair")):
        r = cli(*cmd)
        assert r.exit_code in (1, 2), (cmd, r.output)
        assert "older" in r.output and "Traceback" not in r.output, (cmd, r.output)
    assert _objects(url) == before  # nothing deleted, nothing written
    r = cli("doctor", "--rebuild-catalog")
    assert r.exit_code == 0, r.output
    rows = cli("export")
    assert rows.exit_code == 0, rows.output
    assert len(rows.output.splitlines()) == 12 + 38 + 6  # a.csv's, b.csv's and d.csv's rows, none lost
    assert "healthy" in cli("doctor").output


def test_an_unfinished_commit_is_removed_only_once_provably_abandoned(tmp_path, catalog, monkeypatch):
    """A writer killed inside its commit (attempt recorded, committing names, no COMMIT): no sweep
    takes its files; `doctor --repair` quarantines them only past the grace period AND once a
    later commit is registered (xfid.committed.abandoned), and says what it took."""
    store = tmp_path / "s"
    cli = Cli(store, tmp_path)
    assert cli("ingest", write(tmp_path / "a.csv", 4, "a")).exit_code == 0
    p = xfid(store, "ingest", str(write(tmp_path / "u.csv", 5, "u")), XFID_FAULT="store.before_commit")
    assert p.returncode == -signal.SIGKILL, p.stderr
    left = sorted((store / "records").rglob(".tmp-*.committing.parquet"))
    assert len(left) == 2
    monkeypatch.setenv("XFID_TEMP_GRACE_S", "0")
    r = cli("doctor", "--repair")  # past the grace period, but no later commit: kept
    assert r.exit_code == 1 and "unfinished_commit" in r.output and "kept until" in r.output, r.output
    assert all(f.exists() for f in left)
    time.sleep(1.1)  # the journal's clock has whole seconds
    assert cli("ingest", write(tmp_path / "b.csv", 3, "b")).exit_code == 0
    assert all(f.exists() for f in left)  # the writer's sweep never takes one
    monkeypatch.setenv("XFID_TEMP_GRACE_S", "3600")
    assert "kept until" in cli("doctor", "--repair").output  # younger than the grace period: kept
    monkeypatch.setenv("XFID_TEMP_GRACE_S", "0")
    r = cli("doctor", "--repair")
    assert r.exit_code == 0 and r.output.count("provably abandoned") == 2, r.output
    assert not any(f.exists() for f in left)
    assert sorted(f.name for f in (store / "quarantine").rglob("*.committing.parquet")) == sorted(f.name for f in left)
    assert "healthy" in cli("doctor").output
    assert len(cli("export").output.splitlines()) == 2 * (4 + 3)


def _as_an_older_xfid_left_them(url: str, parts: list[str], *, unmark: bool) -> None:
    """Make bucket parts look uploaded by an xfid from before the commit marks (its footer said
    `"commit_protocol": 2` and it left no mark nor journal entry): the footer rewritten, the mark removed."""
    import json

    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    fs, base = pafs.FileSystem.from_uri(url)
    for path in parts:
        with fs.open_input_file(path) as f:
            table = pq.ParquetFile(f).read()
        meta = dict(table.schema.metadata)
        doc = json.loads(meta[b"xfid.part"])
        assert doc["commit_protocol"] == 3
        meta[b"xfid.part"] = json.dumps({**doc, "commit_protocol": 2}, sort_keys=True).encode()
        with fs.open_output_stream(path) as f:
            pq.write_table(table.replace_schema_metadata(meta), f)
        if unmark:
            fs.delete_file(f"{base}/_committing/{path[len(base) + 1:]}")


def test_an_older_xfids_bucket_parts_are_marked_or_kept_never_swept(tmp_path, catalog, monkeypatch, request):
    """Bucket parts of an xfid from before the commit marks (footer protocol 2, no mark, no journal
    entry), by the one rule (xfid.committed): a registered one is given its `committed` mark by the next
    writer (its "rename"), so an older database restored later is judged by it; an unregistered one
    cannot be proven abandoned by the database (it may be committed), so no sweep deletes it, past the
    grace period too, and doctor reports it as kept. `--rebuild-catalog` brings every row back."""
    url = request.getfixturevalue("s3_records")
    monkeypatch.setenv("XFID_RECORDS_URL", url)
    store = tmp_path / "s"
    cli = Cli(store, tmp_path)

    def parts() -> set[str]:
        return {k for k in _objects(url) if "/fidelity=" in k and "/_committing/" not in k}

    assert cli("ingest", write(tmp_path / "z.csv", 2, "z")).exit_code == 0
    pg = request.getfixturevalue("pg_server") if catalog else None
    older = backup(store, catalog, pg)
    seen = parts()
    assert cli("ingest", write(tmp_path / "a.csv", 6, "a")).exit_code == 0
    registered = sorted(parts() - seen)
    p = xfid(store, "ingest", str(write(tmp_path / "k.csv", 4, "k")), XFID_FAULT="store.before_attempt")
    assert p.returncode == -signal.SIGKILL, p.stderr  # uploaded, never committed, never marked
    uploaded = sorted(parts() - seen - set(registered))
    assert len(registered) == 2 and len(uploaded) == 2
    _as_an_older_xfid_left_them(url, registered, unmark=True)
    _as_an_older_xfid_left_them(url, uploaded, unmark=False)
    base = url.split("://", 1)[1].split("?", 1)[0]
    marks = {k: v for k, v in _objects(url).items() if "/_committing/" in k}
    assert not any(k.replace("/_committing", "") in registered for k in marks)

    monkeypatch.setenv("XFID_TEMP_GRACE_S", "0")  # the grace period is long past
    r = cli("ingest", write(tmp_path / "b.csv", 3, "b"))
    assert r.exit_code == 0, r.output
    now = _objects(url)
    assert all(k in now for k in uploaded)  # never swept
    for k in registered:  # marked committed by the writer's settle
        assert now[f"{base}/_committing/{k[len(base) + 1:]}"] == len(b"committed\n"), k
    r = cli("doctor")
    assert "kept_temp" in r.output and "Traceback" not in r.output, r.output
    r = cli("doctor", "--repair")
    assert "Traceback" not in r.output and all(k in _objects(url) for k in uploaded), r.output

    restore(store, older, monkeypatch)  # knows z.csv only: a.csv's parts are judged by their marks now
    for cmd in (("ingest", str(write(tmp_path / "c.csv", 3, "c"))), ("export",), ("doctor", "--repair")):
        r = cli(*cmd)
        assert r.exit_code in (1, 2) and "older" in r.output and "Traceback" not in r.output, (cmd, r.output)
    assert all(k in _objects(url) for k in registered + uploaded)
    r = cli("doctor", "--rebuild-catalog")
    assert r.exit_code == 0, r.output
    rows = cli("export")
    assert rows.exit_code == 0, rows.output
    # z's, a's and b's rows, none lost; k's upload is registered too (it may have been committed)
    assert len(rows.output.splitlines()) == 2 * (2 + 6 + 3 + 4)
