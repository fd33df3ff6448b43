"""A database or records URL's password never reaches the terminal (issue 30, HIGH 3).

URLs libpq cannot parse (an unclosed `[`, a bad percent-escape, an unknown `?option`), an
unencoded `@` or `/` or space inside the password, each given in XFID_DATABASE_URL to every
command that opens the store (and to `store copy --to-database`): an `Error:` with the URL
masked, exit 2, no traceback, and neither the password nor any piece of it (the tail after an
`@`, which libpq takes for a host) anywhere in stdout or stderr. An unexpected exception whose
text carries the URL is printed masked by the CLI's last line of defence.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, Cli

HOSTILE = {
    "unclosed [": ("postgresql://u:S3cretPw@[::1:57391/db", ["S3cretPw"]),
    "bad percent-escape": ("postgresql://u:S3c%zzretPw@localhost:1/db", ["S3c%zzretPw", "zzretPw"]),
    "unknown option": ("postgresql://u:S3cretPw@localhost:1/db?bogusparam=1", ["S3cretPw"]),
    "@ in the password": ("postgresql://u:Pw15@S3cretTail@localhost:1/db", ["Pw15@S3cretTail", "S3cretTail"]),
    "two @ in the password": ("postgresql://u:Ab@Cd12@Tail99x@localhost:1/db", ["Cd12", "Tail99x"]),
    "/ in the password": ("postgresql://u:S3cret/PwXy@localhost:1/db", ["S3cret", "PwXy"]),
    "space in the password": ("postgresql://u:S3cret PwXy@localhost:1/db", ["S3cret", "PwXy"]),
    "bad port": ("postgresql://u:S3cretPw@localhost:99999999/db", ["S3cretPw"]),
}


def commands(tmp: Path) -> list[list[str]]:
    data = FIXTURES / "records" / "measured.csv"
    return [["summary"], ["ingest", str(data)], ["doctor"], ["doctor", "--format", "json"], ["sources"],
            ["check", "--actor", "t"], ["report", "--html", "-o", str(tmp / "r.html"), "--since", "2026-01-01"],
            ["store", "copy", "--to-database", "postgresql://u@localhost:1/other"]]


def assert_clean(output: str, secrets: list[str], what: object) -> None:
    assert "Traceback" not in output, (what, output)
    for s in secrets:
        assert s not in output, (what, s, output)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_database_urls_are_errors_without_the_password(case: str, tmp_path: Path):
    url, secrets = HOSTILE[case]
    cli = Cli(tmp_path / "store", tmp_path)
    for cmd in commands(tmp_path):
        r = cli(*cmd, env={"XFID_DATABASE_URL": url})
        assert r.exit_code == 2, (case, cmd, r.output)
        assert "Error:" in r.output, (case, cmd, r.output)
        assert_clean(r.output, secrets, (case, cmd))
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_store_copy_to_a_hostile_url(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The destination of `store copy` on the command line, from a local store."""
    monkeypatch.delenv("XFID_DATABASE_URL", raising=False)
    url, secrets = HOSTILE[case]
    cli = Cli(tmp_path / "store", tmp_path)
    assert cli("ingest", FIXTURES / "records" / "measured.csv").exit_code == 0
    r = cli("store", "copy", "--to-database", url)
    assert r.exit_code == 2 and "Error:" in r.output, (case, r.output)
    assert_clean(r.output, secrets, case)


@pytest.mark.parametrize("case", ["unclosed [", "@ in the password", "bad percent-escape"])
def test_the_real_console_script_prints_no_traceback(case: str, tmp_path: Path):
    """The same through `python -m xfid`, as a user runs it (stderr and stdout both)."""
    url, secrets = HOSTILE[case]
    env = {**os.environ, "XFID_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    for cmd in (["summary"], ["doctor"]):
        p = subprocess.run([sys.executable, "-m", "xfid", "--store", str(tmp_path / "s"), *cmd], env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, (case, cmd, p.stdout, p.stderr)
        assert "Error:" in p.stderr
        assert_clean(p.stdout + p.stderr, secrets, (case, cmd))


def test_a_hostile_records_url_is_masked(tmp_path: Path):
    cli = Cli(tmp_path / "store", tmp_path)
    for url in ("s3://AKIAX:S3cretKey@[bucket/x", "s3://AKIAX:S3cretKey@bucket/x?secret_key=OtherS3cret"):
        r = cli("summary", env={"XFID_RECORDS_URL": url})
        assert_clean(r.output, ["S3cretKey", "OtherS3cret"], url)


def test_mask_takes_the_password_up_to_the_last_at():
    from xfid.sqlbackend import mask

    assert mask("postgresql://u:Pw15@Pw15x@h:5/d") == "postgresql://u:***@h:5/d"
    assert mask("postgresql://u:a/b@c@h/d x") == "postgresql://u:***@h/d x"
    assert mask("'postgresql://u:pw@h/d': no") == "'postgresql://u:***@h/d': no"
    assert mask("postgresql://u@h/d") == "postgresql://u@h/d"
    assert mask("see host=h password='p w' dbname=d") == "see host=h password=*** dbname=d"


def test_secrets_of_the_given_urls_are_scrubbed_where_they_appear_alone(monkeypatch: pytest.MonkeyPatch):
    """libpq quotes a bad token alone, or the tail of a password as a host name."""
    from xfid.sqlbackend import mask

    monkeypatch.setenv("XFID_DATABASE_URL", "postgresql://u:Pw15@Tail99x@h/d")
    text = mask('failed to resolve host "Tail99x@h"; token "Pw15@Tail99x"')
    assert "Tail99x" not in text and "Pw15" not in text, text


def test_an_unexpected_exception_is_printed_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The CLI's last line of defence: a bug's traceback is shown, its URL masked, exit 1."""
    import importlib

    from xfid.cli import COMMANDS

    url = "postgresql://u:Pw15@S3cretTail@localhost/db"
    mod = importlib.import_module(COMMANDS["summary"])

    def boom(*a, **k):
        raise RuntimeError(f"cannot use {url}; host S3cretTail@localhost")

    monkeypatch.setattr(mod.cli, "callback", boom)
    r = Cli(tmp_path / "s", tmp_path)("summary", env={"XFID_DATABASE_URL": url})
    assert r.exit_code == 1, r.output
    assert "internal error" in r.output and "RuntimeError" in r.output
    assert "S3cretTail" not in r.output and "Pw15" not in r.output and re.search(r"u:\*\*\*@", r.output), r.output


def test_the_repr_of_a_team_database_is_masked(pg_url: str):
    from xfid.sqlbackend import connect

    db = connect(pg_url)
    try:
        password = pg_url.split("://", 1)[1].rsplit("@", 1)[0].split(":", 1)[1]
        assert password not in repr(db) and "***" in repr(db)
    finally:
        db.close()
