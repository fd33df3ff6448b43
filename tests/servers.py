"""Real servers for the team-store tests: a PostgreSQL and an S3-protocol server (moto) on 127.0.0.1.

Each is taken from the environment when CI started it (XFID_TEST_PG_URL: a role that may
CREATE DATABASE; XFID_TEST_S3_URL: http://HOST:PORT of an S3 endpoint, credentials in the AWS_*
environment), else started here for the session and stopped at its end: PostgreSQL with
Debian's `initdb`/`pg_ctl` as an unprivileged user (root may not run the server), moto's
`moto_server`. A given server that is deleted whole after the run (.ci/run's) says so with
XFID_TEST_PG_DISPOSABLE=1: its databases are then not dropped one by one at the end. Under
CI=true a test that needs a server FAILS when it cannot be had; elsewhere it is skipped with the
reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

PG_BIN_DIRS = ("/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin")
PG_PASSWORD = "s3cr3t-xfid-test"  # the test server's password: tests assert it is never printed
PG_USER = "xfid"


def unavailable(what: str, why: str) -> None:
    """Fail under CI (a server test never skips silently there), skip elsewhere."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} is needed and could not be started under CI: {why}", pytrace=False)
    pytest.skip(f"{what} not available: {why}")


def need_tool(name: str, package: str) -> str:
    """The path of a command-line tool a test needs (Debian's `package` has it): under CI it
    fails when missing (.ci/run installs it), elsewhere the test is skipped with the reason."""
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} (Debian package {package})", "not on PATH")
    return str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin(name: str) -> str | None:
    for d in PG_BIN_DIRS:
        if Path(d, name).exists():
            return str(Path(d, name))
    return shutil.which(name)


def with_user(url: str, user: str, password: str) -> str:
    """`url` with another user and password."""
    u = urlsplit(url)
    host = u.netloc.rsplit("@", 1)[-1]
    return urlunsplit((u.scheme, f"{user}:{password}@{host}", u.path, u.query, u.fragment))


def password_of(url: str) -> str:
    pw = urlsplit(url).password
    assert pw, url
    return pw


class PgServer:
    """A PostgreSQL server this session started (or was given): `admin_url`, `database()`, `stop()`/`start()`."""

    def __init__(self, admin_url: str, data: Path | None = None, user: str | None = None):
        self.admin_url = admin_url
        self.data = data
        self.user = user  # the OS user running it (None: not ours to stop or restart)
        self.created: list[str] = []

    def url(self, dbname: str) -> str:
        """The URL of a database on this server, always with a password in it (the server's, else
        PGPASSWORD, else a stand-in a trust-authenticated server ignores): tests check it is never shown."""
        u = urlsplit(self.admin_url)
        pw = u.password or os.environ.get("PGPASSWORD") or PG_PASSWORD
        return with_user(urlunsplit((u.scheme, u.netloc, f"/{dbname}", u.query, "")), u.username or PG_USER, pw)

    def database(self) -> str:
        """A new, empty database; its URL (with the password)."""
        import psycopg

        name = f"xfid_{uuid.uuid4().hex[:12]}"
        try:
            with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=30) as c:
                c.execute(f'CREATE DATABASE "{name}"')
        except psycopg.OperationalError as e:  # the server went away (or never answered): one reason
            unavailable("PostgreSQL", f"cannot create a database: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        self.created.append(name)
        return self.url(name)

    def drop_all(self) -> None:
        """Drop the databases and roles this session made (on a server CI keeps between runs too)."""
        import psycopg

        with contextlib.suppress(Exception), psycopg.connect(self.admin_url, autocommit=True) as c:
            for name in self.created:
                c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                for role in (f"{name}_reader", f"{name}_writer"):
                    c.execute(f'DROP ROLE IF EXISTS "{role}"')
        self.created.clear()

    def _ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self.data is not None and self.user is not None
        cmd = [_pg_bin("pg_ctl") or "pg_ctl", "-D", str(self.data), *args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def stop(self, mode: str = "fast") -> None:
        self._ctl("stop", "-m", mode, "-w")

    def start(self) -> None:
        if self._ctl("status").returncode == 0:
            return
        r = self._ctl("start", "-w", "-l", str(self.data / "log.txt"))
        if r.returncode:
            raise RuntimeError(f"pg_ctl start failed: {r.stderr or r.stdout}")


def start_pg() -> tuple[PgServer | None, str]:
    """initdb + pg_ctl start on a free port; (server, "") or (None, why not).

    Every way the server cannot be had (a program missing, root without `runuser`, no such OS
    user, a failing or hanging command) is a (None, why) here, never an exception, so the tests
    that need it are reported through `unavailable` (skipped, or failed under CI)."""
    try:
        return _start_pg()
    except (OSError, subprocess.SubprocessError, LookupError) as e:
        return None, f"{type(e).__name__}: {e}"


def _start_pg() -> tuple[PgServer | None, str]:
    initdb = _pg_bin("initdb")
    if initdb is None or _pg_bin("pg_ctl") is None:
        return None, "initdb/pg_ctl not found (install Debian's postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return None, "psycopg is not installed (pip install -e '.[dev]')"
    user = os.environ.get("XFID_TEST_PG_OS_USER") or ("nobody" if os.geteuid() == 0 else None)
    if user is not None and os.geteuid() == 0 and shutil.which("runuser") is None:
        return None, (f"running as root, PostgreSQL must run as another user ({user}), and `runuser` is not on "
                      "PATH (install util-linux, or run the tests as an unprivileged user)")
    top = Path(tempfile.mkdtemp(prefix="xfid-pg-"))
    try:
        srv, why = _init_and_start(top, user, initdb)
    except BaseException:
        shutil.rmtree(top, ignore_errors=True)
        raise
    if srv is None:  # a start that failed leaves no folder behind (each test run used to leave four)
        shutil.rmtree(top, ignore_errors=True)
    return srv, why


def _init_and_start(top: Path, user: str | None, initdb: str) -> tuple[PgServer | None, str]:
    data = top / "data"
    pwfile = top / "pw"
    pwfile.write_text(PG_PASSWORD + "\n")
    if user is not None:
        shutil.chown(top, user)
        shutil.chown(pwfile, user)
        top.chmod(0o700)
    port = free_port()

    def as_user(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        if user is not None and os.geteuid() == 0:
            cmd = ["runuser", "-u", user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=top)

    r = as_user([initdb, "-D", str(data), "-U", PG_USER, f"--pwfile={pwfile}", "--auth-local=trust",
                 "--auth-host=scram-sha-256", "--locale=C", "-E", "UTF8", "--no-sync"])
    if r.returncode:
        return None, f"initdb failed: {(r.stderr or r.stdout).strip()[-400:]}"
    with open(data / "postgresql.conf", "a") as f:
        f.write(f"\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{top}'\n"
                "fsync = off\nmax_connections = 200\n")
    srv = PgServer(f"postgresql://{PG_USER}:{PG_PASSWORD}@127.0.0.1:{port}/postgres", data, user or "")
    srv.user = user or os.environ.get("USER", "")
    r = as_user([_pg_bin("pg_ctl") or "pg_ctl", "-D", str(data), "-l", str(data / "log.txt"), "-w", "start"])
    if r.returncode:
        return None, f"pg_ctl start failed: {(r.stderr or r.stdout).strip()[-400:]}"
    return srv, ""


def remove_pg(srv: PgServer) -> None:
    """The teardown of a server `start_pg` started: stop it at once, remove its folder (data, password
    file, socket). Never raises: a failing stop still removes the folder."""
    with contextlib.suppress(Exception):
        srv.stop("immediate")
    with contextlib.suppress(Exception):
        assert srv.data is not None
        shutil.rmtree(srv.data.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    given = os.environ.get("XFID_TEST_PG_URL")
    if given:
        srv = PgServer(given)
        try:
            import psycopg

            psycopg.connect(given, connect_timeout=10).close()
        except Exception as e:
            unavailable("PostgreSQL (XFID_TEST_PG_URL)", f"cannot connect: {type(e).__name__}")
        yield srv
        if os.environ.get("XFID_TEST_PG_DISPOSABLE") != "1":  # .ci/run deletes its whole server after the run
            srv.drop_all()
        return
    srv, why = start_pg()
    if srv is None:
        unavailable("PostgreSQL", why)
        return
    try:
        yield srv
    finally:
        remove_pg(srv)


@pytest.fixture
def own_pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server of this test's own (started even when CI gave one), for tests that stop it."""
    srv, why = start_pg()
    if srv is None:
        unavailable("PostgreSQL (a server of the test's own)", why)
        return
    try:
        yield srv
    finally:
        remove_pg(srv)


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL (with its password) of a new, empty database on the session's server."""
    return pg_server.database()


class S3Server:
    def __init__(self, endpoint: str, proc: subprocess.Popen[bytes] | None = None):
        self.endpoint = endpoint  # http://HOST:PORT
        self.proc = proc

    def bucket(self) -> str:
        """A new bucket; its records URL (s3://BUCKET/records?endpoint_override=...&scheme=http)."""
        import pyarrow.fs as pafs

        u = urlsplit(self.endpoint)
        name = f"xfid-{uuid.uuid4().hex[:12]}"
        fs = pafs.S3FileSystem(endpoint_override=u.netloc, scheme=u.scheme, region="us-east-1",
                               allow_bucket_creation=True)
        fs.create_dir(name)
        return f"s3://{name}/records?endpoint_override={u.netloc}&scheme={u.scheme}&region=us-east-1"


def _aws_env() -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "xfid-test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "xfid-test-secret")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    _aws_env()
    given = os.environ.get("XFID_TEST_S3_URL")
    if given:
        yield S3Server(given.rstrip("/"))
        return
    exe = Path(sys.executable).with_name("moto_server")
    if not exe.exists():
        exe = Path(shutil.which("moto_server") or "moto_server")
    if not exe.exists():
        unavailable("an S3 server (moto_server)", "moto is not installed (pip install -e '.[dev]')")
        return
    port = free_port()
    log = open(Path(tempfile.gettempdir()) / f"xfid-moto-{port}.log", "wb")  # noqa: SIM115 - lives as long as the server
    try:
        proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    except OSError as e:
        log.close()
        unavailable("an S3 server (moto_server)", f"it cannot be started: {e}")
        return
    deadline = time.time() + 30
    while time.time() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            break
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        unavailable("an S3 server (moto_server)", "it did not listen within 30 s")
    if proc.poll() is not None:
        unavailable("an S3 server (moto_server)", f"it exited with {proc.returncode}")
    try:
        yield S3Server(f"http://127.0.0.1:{port}", proc)
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        log.close()


@pytest.fixture
def s3_records(s3_server: S3Server) -> str:
    """The records URL of a new bucket on the session's S3 server."""
    try:
        return s3_server.bucket()
    except OSError as e:
        unavailable(f"an S3 server at {s3_server.endpoint}", f"cannot create a bucket: {e}")
        raise


def sqlite_only(why: str) -> Any:
    """Mark a test of a module parametrized by `catalog` that applies to the SQLite catalog only."""

    def mark(fn: Any) -> Any:
        fn.sqlite_only = why
        return fn

    return mark


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Run a test against each catalog backend: None (the store's SQLite file) or a new PostgreSQL
    database, whose URL is also put in XFID_DATABASE_URL so every store the test opens uses it."""
    if request.param == "sqlite":
        monkeypatch.delenv("XFID_DATABASE_URL", raising=False)
        return None
    why = getattr(request.function, "sqlite_only", None)
    if why:
        pytest.skip(f"SQLite catalog only: {why}")
    url = request.getfixturevalue("pg_server").database()
    monkeypatch.setenv("XFID_DATABASE_URL", url)
    return str(url)
