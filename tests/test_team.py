"""The team store on real servers: one PostgreSQL catalog and tracker, records in a shared
directory or an S3 bucket (moto), several "machines" (store directories) and writers at once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import Cli
from tests.servers import password_of, with_user

HEAD = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"
OPS = ('"gemm_tile[m=128,n=128,k=256]"', '"gemm_tile[m=256,n=128,k=256]"')


def records(path: Path, fidelity: str, run: str, values: tuple[float, float]) -> Path:
    rows = "".join(f"{fidelity},t100-a0,gemm-sweep,{op},cycles,value,{v},cycles,{run},2026-11-01T00:00:00Z\n"
                   for op, v in zip(OPS, values, strict=True))
    path.write_text(HEAD + rows)
    return path


def big(path: Path, n: int, tag: str) -> Path:
    path.write_text("fidelity,target,workload,op,metric,value,run\n" + "".join(
        f"measured,h100-sxm,w,op{i % 500},latency,{i + 1},{tag}\n" for i in range(n)))
    return path


def machine(tmp_path: Path, name: str, database: str, records_url: str) -> tuple[Cli, dict[str, str]]:
    env = {"XFID_DATABASE_URL": database, "XFID_RECORDS_URL": records_url}
    return Cli(tmp_path / name, tmp_path), env


def run(cli: Cli, env: dict[str, str], *args: str, ok: bool = True) -> str:
    r = cli(*args, env=env)
    if ok:
        assert r.exit_code == 0, r.output
    url = env.get("XFID_DATABASE_URL") or os.environ.get("XFID_DATABASE_URL")
    for secret in (urlsplit(url).password if url else None, env.get("PGPASSWORD")):
        if secret:
            assert secret not in r.output
    return r.output


def xfid(store: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "xfid", "--store", str(store), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **env})


def test_two_machines_share_rows_sources_and_issues(pg_url, tmp_path):
    shared = str(tmp_path / "nfs" / "records")
    a, ea = machine(tmp_path, "laptop", pg_url, shared)
    b, eb = machine(tmp_path, "ci-runner", pg_url, shared)
    run(a, ea, "ingest", records(tmp_path / "rtl.csv", "rtl", "rtl-a", (1000, 2000)))
    run(b, eb, "ingest", records(tmp_path / "arch.csv", "archmodel", "m1", (1250, 2010)))
    assert "0 new rows from 0 file(s); 1 already ingested" in run(b, eb, "ingest", tmp_path / "rtl.csv")
    assert run(a, ea, "export") == run(b, eb, "export") and len(run(a, ea, "export").splitlines()) == 4
    assert run(a, ea, "sources") == run(b, eb, "sources")
    s = json.loads(run(b, eb, "check", "--format", "json", "--actor", "ci"))
    assert s["new"] == ["XF-1"]
    run(a, ea, "issues", "ack", "XF-1", "--owner", "alice", "--actor", "alice")
    shown = json.loads(run(b, eb, "issues", "show", "XF-1", "--format", "json"))
    assert (shown["state"], shown["owner"]) == ("acknowledged", "alice")
    assert [h["action"] for h in shown["history"]] == ["detected", "ack"]
    assert run(a, ea, "issues", "list") == run(b, eb, "issues", "list")
    report = tmp_path / "weekly.html"  # the lead's report on a third machine reads the CI runner's check
    c, ec = machine(tmp_path, "lead", pg_url, shared)
    run(c, ec, "report", "--html", "-o", str(report), "--since", "2026-01-01")
    assert "XF-1" in report.read_text() and "alice" in report.read_text()
    assert list((tmp_path / "nfs" / "checks").glob("check-1.parquet")) and not (tmp_path / "ci-runner" / "checks").exists()
    out = run(b, eb, "doctor")
    assert "healthy" in out and "***@" in out  # the URL is shown, its password masked
    assert not (tmp_path / "laptop" / "xfid.db").exists()  # nothing of the catalog is local


def test_xf_numbers_unique_across_writers(pg_url, tmp_path):
    """Checks on two machines file issues from one sequence: no number twice, none reused."""
    shared = str(tmp_path / "records")
    a, ea = machine(tmp_path, "a", pg_url, shared)
    b, eb = machine(tmp_path, "b", pg_url, shared)
    run(a, ea, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    run(a, ea, "ingest", records(tmp_path / "a1.csv", "archmodel", "m1", (1500, 2010)))
    assert json.loads(run(a, ea, "check", "--format", "json"))["new"] == ["XF-1"]
    run(b, eb, "ingest", records(tmp_path / "a2.csv", "archmodel", "m2", (1000, 3000)))
    s = json.loads(run(b, eb, "check", "--format", "json", "--resolve-after", "1"))
    assert s["new"] == ["XF-2"] and s["resolved"] == ["XF-1"]


def test_sixteen_writers_at_once(pg_url, tmp_path):
    """16 processes against one PostgreSQL and one records directory: distinct ingests, re-ingests
    of one file, checks and issue actions. Every row once, every source once, every transition kept."""
    shared = str(tmp_path / "records")
    env = {"XFID_DATABASE_URL": pg_url, "XFID_RECORDS_URL": shared}
    a, _ = machine(tmp_path, "m0", pg_url, shared)
    run(a, env, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    run(a, env, "ingest", records(tmp_path / "arch.csv", "archmodel", "m1", (1500, 2010)))
    run(a, env, "check", "--actor", "seed")
    same = big(tmp_path / "same.csv", 3000, "same")
    procs = []
    for i in range(16):
        store = tmp_path / f"m{i + 1}"
        kind = ("ingest", "reingest", "check", "note")[i % 4]
        if kind == "ingest":
            args = ["ingest", str(big(tmp_path / f"d{i}.csv", 2000 + i, f"d{i}"))]
        elif kind == "reingest":
            args = ["ingest", str(same)]
        elif kind == "check":
            args = ["check", "--actor", f"w{i}"]
        else:
            args = ["issues", "note", "XF-1", "--note", f"note {i}", "--actor", f"w{i}"]
        procs.append((kind, xfid(store, env, *args)))
    outs = [(k, p.communicate(timeout=300)[0], p.returncode) for k, p in procs]
    for kind, out, rc in outs:
        assert rc == 0, f"{kind}: {out}"
        assert "locked" not in out and "Error" not in out and password_of(pg_url) not in out
    srcs = json.loads(run(a, env, "sources", "--format", "json"))
    ids = [s["source_id"] for s in srcs]
    assert len(ids) == len(set(ids)) == 2 + 4 + 1  # seeds, distinct ingests, one copy of the re-ingested file
    want = 4 + sum(2000 + i for i in range(0, 16, 4)) + 3000
    assert len(run(a, env, "export").splitlines()) == want
    hist = json.loads(run(a, env, "issues", "show", "XF-1", "--format", "json"))["history"]
    assert sorted(h["note"] for h in hist if h["action"] == "note") == sorted(f"note {i}" for i in range(3, 16, 4))
    out = run(a, env, "doctor")
    assert "healthy" in out


def _consistent(cli: Cli, env: dict[str, str]) -> int:
    """Rows visible == rows the catalog registers; the doctor finds nothing wrong."""
    srcs = json.loads(run(cli, env, "sources", "--format", "json"))
    n = len(run(cli, env, "export").splitlines())
    assert n == sum(int(s["rows"]) for s in srcs)
    out = run(cli, env, "doctor", ok=False)
    assert "missing_part" not in out and "catalog_mismatch" not in out and "corrupt" not in out, out
    return n


def test_kill9_during_ingest_and_check(pg_url, tmp_path):
    """SIGKILL at random moments of ingest and check: the catalog stays consistent, no partial
    rows are visible, and the next writer sweeps what the killed one left (grace 0 here).
    4 kills in the default run; XFID_TEAM_KILLS=50 for the full count (about two minutes)."""
    kills = int(os.environ.get("XFID_TEAM_KILLS", "4"))
    shared = str(tmp_path / "records")
    env = {"XFID_DATABASE_URL": pg_url, "XFID_RECORDS_URL": shared, "XFID_TEMP_GRACE_S": "0"}
    cli, _ = machine(tmp_path, "m", pg_url, shared)
    run(cli, env, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    run(cli, env, "ingest", records(tmp_path / "arch.csv", "archmodel", "m1", (1500, 2010)))
    rnd = random.Random(17)
    for i in range(kills):
        f = big(tmp_path / f"k{i}.csv", 20_000, f"k{i}")
        p = xfid(tmp_path / f"k{i}", env, "ingest", str(f)) if i % 2 == 0 else \
            xfid(tmp_path / f"k{i}", env, "check", "--actor", "k")
        time.sleep(rnd.uniform(0.3, 2.0))
        p.send_signal(signal.SIGKILL)
        p.communicate()
        _consistent(cli, env)
    run(cli, env, "ingest", big(tmp_path / "last.csv", 10, "last"))  # the next writer's sweep
    leftovers = [f for f in Path(shared).rglob(".tmp-*")]
    assert leftovers == []
    _consistent(cli, env)


def test_server_restart_mid_ingest(own_pg_server, tmp_path, monkeypatch):
    """The server stops inside the ingest's transaction: a clear Error, nothing committed; after
    the restart the same ingest succeeds once."""
    pg_server = own_pg_server
    url = pg_server.database()
    shared = str(tmp_path / "records")
    cli, env = machine(tmp_path, "m", url, shared)
    run(cli, env, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    from xfid.store import Store

    settle = Store.settle

    def stop_then_settle(self, **kw):
        pg_server.stop("immediate")
        return settle(self, **kw)

    monkeypatch.setattr(Store, "settle", stop_then_settle)
    try:
        r = cli("ingest", big(tmp_path / "b.csv", 5000, "b"), env=env)
    finally:
        monkeypatch.setattr(Store, "settle", settle)
        pg_server.start()
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "Traceback" not in r.output
    assert "run the command again" in r.output and password_of(url) not in r.output and "***@" in r.output
    assert len(run(cli, env, "export").splitlines()) == 2  # nothing half-committed
    assert "5000 new rows from 1 file(s)" in run(cli, env, "ingest", tmp_path / "b.csv")
    assert _consistent(cli, env) == 5002


def test_server_down_is_a_clear_error(pg_server, tmp_path):
    cli, env = machine(tmp_path, "m", pg_server.url("no_such_db"), str(tmp_path / "r"))
    r = cli("sources", env=env)
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "cannot connect" in r.output
    assert password_of(env["XFID_DATABASE_URL"]) not in r.output


def test_s3_records_ingest_correlate_check_report(catalog, s3_records, tmp_path):
    """Records in an S3 bucket (moto): ingest, correlate, check and report read them through the
    catalog's list; a killed upload is swept; doctor checks the bucket against the catalog."""
    env = {"XFID_RECORDS_URL": s3_records}
    if catalog:
        env["XFID_DATABASE_URL"] = catalog
    cli = Cli(tmp_path / "m", tmp_path)
    run(cli, env, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    run(cli, env, "ingest", records(tmp_path / "arch.csv", "archmodel", "m1", (1250, 2010)))
    assert not (tmp_path / "m" / "records").exists()
    corr = run(cli, env, "correlate", "--format", "json")
    assert "over_tolerance" in corr
    assert json.loads(run(cli, env, "check", "--format", "json"))["new"] == ["XF-1"]
    out = tmp_path / "r.html"
    run(cli, env, "report", "--html", "-o", str(out), "--since", "2026-01-01")
    assert "XF-1" in out.read_text()
    assert "healthy" in run(cli, env, "doctor")
    if catalog:  # another machine of the team store reads the check's rows from the bucket
        other = Cli(tmp_path / "lead", tmp_path)
        run(other, env, "report", "--html", "-o", str(tmp_path / "r2.html"), "--since", "2026-01-01")
        assert "XF-1" in (tmp_path / "r2.html").read_text()
    # an upload whose attempt was never recorded (no mark): past the grace period, swept by the next writer
    p = xfid(tmp_path / "m", {**env, "XFID_FAULT": "store.before_attempt"}, "ingest",
             str(big(tmp_path / "k.csv", 100, "k")))
    p.communicate()
    assert len(run(cli, env, "export").splitlines()) == 4
    run(cli, {**env, "XFID_TEMP_GRACE_S": "0"}, "ingest", big(tmp_path / "n.csv", 3, "n"))
    assert "healthy" in run(cli, env, "doctor")
    assert len(run(cli, env, "export").splitlines()) == 7
    # killed inside its commit (attempt recorded, mark uploaded): never swept; doctor --repair takes it only
    # once provably abandoned (past the grace period and a later commit registered: xfid.committed.abandoned)
    p = xfid(tmp_path / "m", {**env, "XFID_FAULT": "store.before_commit"}, "ingest",
             str(big(tmp_path / "u.csv", 10, "u")))
    p.communicate()
    grace0 = {**env, "XFID_TEMP_GRACE_S": "0"}
    out = run(cli, grace0, "doctor", "--repair", ok=False)
    assert "unfinished_commit" in out and "kept until it is provably abandoned" in out, out
    time.sleep(1.1)  # the journal's clock has whole seconds: the next commit is recorded later
    run(cli, grace0, "ingest", big(tmp_path / "v.csv", 2, "v"))
    assert "unfinished_commit" in run(cli, env, "doctor", ok=False)  # swept by no writer
    out = run(cli, grace0, "doctor", "--repair")
    assert "provably abandoned" in out, out
    assert "healthy" in run(cli, env, "doctor")
    assert len(run(cli, env, "export").splitlines()) == 9
    assert list((tmp_path / "m" / "quarantine").rglob("part-*.parquet"))


def test_passwords_masked_everywhere(pg_url, tmp_path):
    from xfid.sqlbackend import mask

    assert mask("postgresql://u:pw@h:5432/d") == "postgresql://u:***@h:5432/d"
    assert mask("host=h password=pw dbname=d") == "host=h password=*** dbname=d"
    assert mask("s3://AKIA:SECRET@bucket/p?secret_key=SECRET&x=1") == "s3://AKIA:***@bucket/p?secret_key=***&x=1"
    assert mask("postgresql://u@h/d") == "postgresql://u@h/d"
    shared = str(tmp_path / "records")
    cli, env = machine(tmp_path, "m", pg_url, shared)
    outs = [run(cli, env, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000))),
            run(cli, env, "ingest", records(tmp_path / "arch.csv", "archmodel", "m1", (1250, 2010))),
            run(cli, env, "check", "--format", "json"), run(cli, env, "doctor"),
            run(cli, env, "doctor", "--format", "json"), run(cli, env, "summary"),
            run(cli, env, "issues", "show", "XF-1", "--format", "json")]
    bad = machine(tmp_path, "m", pg_url.replace(f":{password_of(pg_url)}@", f":{password_of(pg_url)}x@"), shared)
    outs.append(run(bad[0], bad[1], "sources", ok=False))
    report = tmp_path / "r.html"
    run(cli, env, "report", "--html", "-o", str(report), "--since", "2026-01-01")
    outs.append(report.read_text())
    for o in outs:
        assert password_of(pg_url) not in o
    import psycopg

    with psycopg.connect(pg_url) as c:  # nor in anything stored: check records, settings, sources
        for table in ("checks", "sources", "transitions", "observations", "store_meta"):
            for row in c.execute(f"SELECT * FROM {table}"):
                assert password_of(pg_url) not in repr(row), table


def test_reader_role_reads_but_cannot_write(pg_url, pg_server, tmp_path):
    """A role with SELECT only (docs/team.md) reads every table; a write is an Error naming the GRANTs."""
    import psycopg

    shared = str(tmp_path / "records")
    cli, env = machine(tmp_path, "m", pg_url, shared)
    run(cli, env, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    run(cli, env, "ingest", records(tmp_path / "arch.csv", "archmodel", "m1", (1250, 2010)))
    run(cli, env, "check")
    tag = pg_url.rsplit("/", 1)[1]  # roles are the server's: one pair per test database
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f"CREATE ROLE {tag}_reader LOGIN PASSWORD 'reader-pw'")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {tag}_reader")
    reader_url = with_user(pg_url, f"{tag}_reader", "reader-pw")
    r_env = {**env, "XFID_DATABASE_URL": reader_url}
    assert run(cli, r_env, "export") == run(cli, env, "export")
    assert "XF-1" in run(cli, r_env, "issues", "list")
    run(cli, r_env, "report", "--html", "-o", str(tmp_path / "r.html"), "--since", "2026-01-01")
    out = run(cli, r_env, "ingest", big(tmp_path / "x.csv", 5, "x"), ok=False)
    assert out.startswith("Error: ") and "read-only" in out and "reader-pw" not in out
    out = run(cli, r_env, "issues", "ack", "XF-1", "--owner", "me", ok=False)
    assert out.startswith("Error: ") and "read-only" in out
    # a writer with the GRANTs of docs/team.md ingests, checks and acts
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f"CREATE ROLE {tag}_writer LOGIN PASSWORD 'writer-pw'")
        for grant in ("GRANT USAGE ON SCHEMA public TO {}",
                      "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {}",
                      "GRANT DELETE ON parts, sources TO {}",
                      "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}"):
            c.execute(grant.format(f"{tag}_writer"))
    w_env = {**env, "XFID_DATABASE_URL": with_user(pg_url, f"{tag}_writer", "writer-pw")}
    run(cli, w_env, "ingest", big(tmp_path / "w.csv", 5, "w"))
    run(cli, w_env, "ingest", records(tmp_path / "arch2.csv", "archmodel", "m2", (1000, 4000)))
    s = json.loads(run(cli, w_env, "check", "--format", "json"))
    assert s["new"] == ["XF-2"]
    run(cli, w_env, "issues", "ack", "XF-2", "--owner", "me")


@pytest.mark.parametrize("to_s3", [False, True], ids=["dir", "s3"])
def test_store_copy_to_team(pg_url, tmp_path, to_s3, request):
    """A local SQLite store copied into PostgreSQL (+ a shared directory or a bucket): the same rows,
    sources, issues and history; verified; a second run copies nothing; new work continues the ids."""
    local = Cli(tmp_path / "local", tmp_path)
    run(local, {}, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    run(local, {}, "ingest", records(tmp_path / "arch.csv", "archmodel", "m1", (1250, 2010)))
    run(local, {}, "check")
    run(local, {}, "issues", "ack", "XF-1", "--owner", "bob")
    dest = request.getfixturevalue("s3_records") if to_s3 else str(tmp_path / "team-records")
    out = run(local, {}, "store", "copy", "--to-database", pg_url, "--to-records", dest)
    assert "sources: 2 copied" in out and "parts: 2 copied, 2 verified" in out and password_of(pg_url) not in out
    again = run(local, {}, "store", "copy", "--to-database", pg_url, "--to-records", dest)
    assert "sources: 0 copied, 2 already there" in again and "tracker: already there, identical" in again
    team, env = machine(tmp_path, "other-machine", pg_url, dest)
    assert run(team, env, "export") == run(local, {}, "export")
    assert run(team, env, "issues", "show", "XF-1") == run(local, {}, "issues", "show", "XF-1")
    assert "healthy" in run(team, env, "doctor")
    run(team, env, "ingest", records(tmp_path / "arch2.csv", "archmodel", "m2", (1000, 3000)))
    s = json.loads(run(team, env, "check", "--format", "json"))
    assert s["new"] == ["XF-2"] and s["check_id"] == 2


def test_locations_from_config_and_env_are_checked_and_masked(tmp_path, pg_url):
    """[store] database/records are validated like every key; env overrides config; no password shown."""
    cli = Cli(tmp_path / "m", tmp_path)
    cfg = tmp_path / "xfid.toml"
    cfg.write_text('[store]\ndatabase = "mysql://me:hunter2@db/x"\n')
    r = cli("--config", cfg, "sources")
    assert r.exit_code == 2 and "[store] database must be a PostgreSQL URL" in r.output and "hunter2" not in r.output
    cfg.write_text('[store]\nrecords = "ftp://me:hunter2@host/p"\n')
    r = cli("--config", cfg, "sources")
    assert r.exit_code == 2 and "[store] records must be" in r.output and "hunter2" not in r.output
    r = cli("sources", env={"XFID_DATABASE_URL": "mysql://me:hunter2@db/x"})
    assert r.exit_code == 2 and "not a PostgreSQL URL" in r.output and "hunter2" not in r.output
    shared = tmp_path / "shared"
    cfg.write_text(f'[store]\ndatabase = "{pg_url}"\nrecords = "file://{shared}"\n')
    run(cli, {}, "--config", str(cfg), "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    assert list(shared.rglob("part-*.parquet")) and not (tmp_path / "m" / "xfid.db").exists()
    from xfid.api import open_store

    with open_store(tmp_path / "elsewhere", cfg) as s:  # the Python API reads the same keys
        assert len(s.sources()) == 1


def test_password_from_pgpassword_or_pgpass(pg_url, tmp_path, monkeypatch):
    """A URL without a password: libpq reads PGPASSWORD, else ~/.pgpass (as for psql)."""
    u = urlsplit(pg_url)
    bare = pg_url.replace(f":{u.password}@", "@")
    cli, env = machine(tmp_path, "m", bare, str(tmp_path / "records"))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    run(cli, {**env, "PGPASSWORD": str(u.password)}, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1, 2)))
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"{u.hostname}:{u.port}:*:{u.username}:{u.password}\n")
    pgpass.chmod(0o600)
    assert "1 already ingested" in run(cli, {**env, "PGPASSFILE": str(pgpass)}, "ingest", tmp_path / "rtl.csv")


def test_rebuild_catalog_of_a_team_catalog(pg_url, tmp_path):
    """Issue 30: --rebuild-catalog works for a team store (the old rows copied aside, the manifest
    rebuilt from the parts' footers), from the env or from [store] database."""
    cli, env = machine(tmp_path, "m", pg_url, str(tmp_path / "records"))
    run(cli, env, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1, 2)))
    before = run(cli, env, "export")
    cfg = tmp_path / "xfid.toml"
    cfg.write_text(f'[store]\ndatabase = "{pg_url}"\n')
    for e, args in ((env, ()), ({}, ("--config", str(cfg)))):
        out = run(cli, e, *args, "doctor", "--rebuild-catalog")
        assert "1 sources, 2 rows" in out, out
    assert run(cli, env, "export") == before
