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
