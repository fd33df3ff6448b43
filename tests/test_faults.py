"""SIGKILL during check and report: the store and tracker stay consistent, nothing half-written."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow


def _xfid(store: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "xfid", "--store", str(store), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _kill_after(p: subprocess.Popen, delay: float) -> None:
    time.sleep(delay)
    if p.poll() is None:
        p.send_signal(signal.SIGKILL)
    p.communicate(timeout=120)


@pytest.fixture(scope="module")
def base_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("faults") / "store"
    subprocess.run([sys.executable, "-m", "xfid", "--store", str(store), "ingest", str(FIXTURES / "records")],
                   check=True, capture_output=True)
    return store


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def _consistent(store: Path) -> int:
    conn = sqlite3.connect(store / "xfid.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "checks" not in tables:
            return 0  # killed before the tracker's first migration committed
        checks = [r[0] for r in conn.execute("SELECT id FROM checks")]
        issues = conn.execute("SELECT COUNT(*) FROM issues").fetchone()[0]
        orphans = conn.execute("SELECT COUNT(*) FROM observations WHERE check_id NOT IN (SELECT id FROM checks)").fetchone()[0]
    finally:
        conn.close()
    assert orphans == 0
    for cid in checks:  # every recorded check has its rows
        assert (store / "checks" / f"check-{cid}.parquet").is_file(), cid
    if issues:
        assert checks
    return len(checks)


@pytest.mark.parametrize("delay", [0.3, 0.9, 1.4, 2.0, 2.8])
def test_sigkill_during_check(base_store, tmp_path, delay):
    store = _copy(base_store, tmp_path / "s")
    _kill_after(_xfid(store, "check", "--actor", "ci"), delay)
    n = _consistent(store)
    assert n in (0, 1)
    # the next check succeeds and the tracker is whole
    r = subprocess.run([sys.executable, "-m", "xfid", "--store", str(store), "check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _consistent(store) == n + 1
    visible = sorted(p.name for p in (store / "checks").iterdir() if not p.name.startswith("."))
    assert len(visible) == n + 1


@pytest.mark.parametrize("delay", [1.0, 2.5, 4.0])
def test_sigkill_during_report_leaves_no_partial_pdf(base_store, tmp_path, delay):
    store = _copy(base_store, tmp_path / "s")
    subprocess.run([sys.executable, "-m", "xfid", "--store", str(store), "check"], check=True, capture_output=True)
    out = tmp_path / "r.pdf"
    _kill_after(_xfid(store, "report", "-o", str(out)), delay)
    if out.exists():
        data = out.read_bytes()
        assert data.startswith(b"%PDF") and data.rstrip().endswith(b"%%EOF")
    assert _consistent(store) == 1
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    # a killed writer may leave its hidden temp file, never a partial report under the real name
    assert all(not p.name.endswith("r.pdf") for p in leftovers)


def test_kill_during_ingest_then_doctor_is_clean(tmp_path):
    """Killed after COMMIT, before the rename: doctor finishes the rename; killed before COMMIT:
    the temp is left alone within the grace period, quarantined (not deleted) after it."""
    big = tmp_path / "big.csv"
    big.write_text("fidelity,target,workload,op,metric,value\n" + "".join(
        f"measured,h100-sxm,w,op{i % 500},latency,{i + 1}\n" for i in range(20_000)))

    def xfid(store: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "xfid", "--store", str(store), *args], capture_output=True,
                              text=True, env={**os.environ, **env})

    store = tmp_path / "s"
    xfid(store, "ingest", str(big), XFID_FAULT="store.before_rename")
    r = xfid(store, "doctor")
    assert "unfinished_rename" in r.stdout and r.returncode == 1
    assert len(xfid(store, "export").stdout.splitlines()) == 20_000  # committed: readers use the temp
    r = xfid(store, "doctor", "--repair")
    assert r.returncode == 0, r.stdout
    r = xfid(store, "doctor")
    assert r.returncode == 0 and "healthy" in r.stdout

    store2 = tmp_path / "s2"
    xfid(store2, "ingest", str(big), XFID_FAULT="store.temp_written")
    temps = list((store2 / "records").rglob(".tmp-*"))
    assert len(temps) == 1
    assert xfid(store2, "doctor").returncode == 0  # a young temp may be a writer's: not a problem
    r = xfid(store2, "doctor", "--repair", XFID_TEMP_GRACE_S="0")
    assert "stale_temp" in r.stdout and r.returncode == 0, r.stdout
    assert not temps[0].exists() and len(list((store2 / "quarantine").rglob(".tmp-*"))) == 1
    assert "temp part of a writer" in (store2 / "quarantine" / "NOTES.txt").read_text()
