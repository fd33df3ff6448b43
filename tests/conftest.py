"""Shared pytest fixtures: a CLI runner bound to a temporary store, and the fixtures folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

# Property tests: no per-example deadline and no "input generation is slow" health check. On a
# loaded 2-core machine one draw took 73 s once (the store test's rows), failing the suite for
# the machine's load, not for the code. Tests that set their own health checks add SLOW_OK.
SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
settings.register_profile("xfid", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("xfid")

MAX_WORKERS = 4
"""pytest-xdist's workers for `-n auto` (pyproject's addopts): one per CPU this process may run on,
at most 4 (each may start a Spark JVM, a browser, servers' clients and the demo's copies)."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))


ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


class Cli:
    """Invoke `xfid` in-process against one store; returns click's Result."""

    def __init__(self, store: Path, cwd: Path):
        self.store = store
        self.cwd = cwd
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None, env: dict[str, str] | None = None):
        from xfid.cli import cli

        return self.runner.invoke(cli, ["--store", str(self.store), *map(str, args)], input=input,
                                  env=env, catch_exceptions=False)

    def ingest_export(self, path, *args: str) -> tuple[list[dict], str]:
        """`xfid ingest PATH ARGS` (must succeed), then every record of the store; and the ingest output."""
        import json

        r = self("ingest", path, *args)
        assert r.exit_code == 0, r.output
        return [json.loads(x) for x in self("export").output.splitlines()], r.output


@pytest.fixture
def xfid_cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "store", tmp_path)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def store_snapshot(store: Path) -> dict[str, bytes]:
    """Every file under a store with its bytes, to assert a failed command changed nothing."""
    if not store.exists():
        return {}
    out = {}
    for f in sorted(store.rglob("*")):
        if f.is_file() and not f.name.endswith(("-wal", "-shm")):
            out[str(f.relative_to(store))] = f.read_bytes()
    return out


def copy_fixture(src: Path, dst_dir: Path) -> Path:
    dst = dst_dir / src.name
    shutil.copy(src, dst)
    return dst


@pytest.fixture
def snapshot():
    """`snapshot(store_dir)` -> {relative path: bytes}; compare before/after a failed command."""
    return store_snapshot


# real PostgreSQL / S3 servers for the team-store tests (started once per session when asked for)
from tests.servers import catalog, own_pg_server, pg_server, pg_url, s3_records, s3_server  # noqa: E402, F401
