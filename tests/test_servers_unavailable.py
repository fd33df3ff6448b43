"""The test set-up never errors where it should skip: every way a server can be missing is one
"unavailable" path (skipped with the reason, failed under CI=true), never an exception."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import servers

ROOT = Path(__file__).resolve().parent.parent


def _pytest(test: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run one PostgreSQL test in a fresh interpreter with `env` (PATH lacking runuser)."""
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "XFID_TEST_PG_URL", "XFID_DATABASE_URL")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", test],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**base, "PYTHONPATH": str(ROOT), **env})


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the servers' start as root, and this process is not root")
@pytest.mark.parametrize("ci", ["", "true"])
def test_root_without_runuser_is_unavailable_not_an_error(tmp_path, ci):
    """As root with no `runuser` on PATH: the PostgreSQL test is skipped (failed under CI) with the
    reason, and no test errors with FileNotFoundError."""
    bare = tmp_path / "bin"  # a PATH with nothing on it: no runuser (initdb is found in its own folder)
    bare.mkdir()
    r = _pytest("tests/test_team.py::test_xf_numbers_unique_across_writers", PATH=str(bare), CI=ci)
    out = r.stdout + r.stderr
    assert "FileNotFoundError" not in out and "Traceback" not in out, out
    assert "runuser" in out, out
    if ci:
        assert r.returncode == 1 and "could not be started under CI" in out, out  # reported at set-up, with the reason
    else:
        assert r.returncode == 0 and "SKIPPED [1]" in out and "PostgreSQL not available" in out, out


@pytest.mark.skipif(os.geteuid() != 0, reason="the runuser check applies to root only, and this process is not root")
def test_start_pg_without_runuser(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("XFID_TEST_PG_OS_USER", raising=False)
    srv, why = servers.start_pg()
    assert srv is None and "runuser" in why


@pytest.mark.parametrize("exc", [FileNotFoundError(2, "No such file or directory", "initdb"),
                                 subprocess.TimeoutExpired("initdb", 180), PermissionError(13, "denied"),
                                 KeyError("no such user: nobody")])
def test_every_failing_start_is_a_reason(monkeypatch, exc):
    """A program that vanishes, hangs, may not run, or a user that does not exist: (None, why)."""
    def boom(*a, **k):
        raise exc

    monkeypatch.setattr(servers.subprocess, "run", boom)
    monkeypatch.setattr(servers.shutil, "chown", lambda *a, **k: None)
    monkeypatch.setattr(servers, "_pg_bin", lambda name: f"/usr/bin/{name}")
    made = []
    mkdtemp = servers.tempfile.mkdtemp
    monkeypatch.setattr(servers.tempfile, "mkdtemp", lambda **k: made.append(mkdtemp(**k)) or made[-1])
    srv, why = servers.start_pg()
    assert srv is None and type(exc).__name__ in why
    assert len(made) == 1 and not Path(made[0]).exists()  # its folder is removed again


@pytest.mark.parametrize("ci,outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_unavailable_fails_under_ci_and_skips_elsewhere(monkeypatch, ci, outcome):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="PostgreSQL"):
        servers.unavailable("PostgreSQL", "initdb/pg_ctl not found")


def test_a_server_that_went_away_is_unavailable(monkeypatch):
    """A database asked of a server that does not answer: the same reason path, not an error."""
    monkeypatch.delenv("CI", raising=False)
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[dev]')")
    srv = servers.PgServer(f"postgresql://xfid:pw@127.0.0.1:{servers.free_port()}/postgres")
    with pytest.raises(pytest.skip.Exception, match="PostgreSQL not available: cannot create a database"):
        srv.database()
