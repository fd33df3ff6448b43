"""The CLI as a client of a real `xfid serve` on 127.0.0.1 (`--server URL` + env XFID_TOKEN):
ingest, check, issues and compare give the same output and exit codes as on the store itself,
with the token's name as the actor; a reader cannot act; errors are the server's `Error:` text."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.servers import catalog  # noqa: F401 - the fixture
from tests.serving import child_env, make_store, records_csv, running_server, token


def run(env, *args, store=None):
    cmd = [sys.executable, "-m", "xfid", *(("--store", str(store)) if store else ()), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def served(tmp_path, catalog):  # noqa: F811 - parametrised: SQLite and the real PostgreSQL
    store = tmp_path / "store"
    make_store(store, tmp_path / "seed")
    writer, reader = token(store, "ci-runner", "writer"), token(store, "lead-reader", "reader")
    env = child_env()
    with running_server(env, store) as url:
        yield store, url, writer, reader, env


def test_ingest_check_issues_and_compare_through_the_server(served, tmp_path):
    store, url, writer, _reader, env = served
    remote = {**env, "XFID_SERVER": url, "XFID_TOKEN": writer}
    d = tmp_path / "upload" / "run2"
    (d / "sub").mkdir(parents=True)
    (d / "arch.csv").write_text(records_csv("archmodel", "model-v2", (1600, 2010)))
    (d / "sub" / "rtl.csv").write_text(records_csv("rtl", "rtl-b", (1000, 2000)))
    r = run(remote, "ingest", d)
    assert r.returncode == 0, r.stderr
    assert f"{d / 'arch.csv'}" in r.stdout and "4 new rows from 2 file(s)" in r.stdout, r.stdout
    again = run(remote, "ingest", d)  # the same bytes: a no-op, as on the store
    assert again.returncode == 0 and "0 new rows" in again.stdout and "2 already ingested" in again.stdout

    chk = run(remote, "check", "--label", "pr-12", "--format", "json")
    assert chk.returncode == 0, chk.stderr
    summary = json.loads(chk.stdout)
    assert summary["check_id"] == 2 and summary["counts"]["rows"] >= 2

    # the issues list is the same text through the server as on the store
    via = run(remote, "issues", "list")
    local = run(env, "issues", "list", store=store)
    assert via.returncode == local.returncode == 0 and via.stdout == local.stdout
    iid = json.loads(run(remote, "issues", "list", "--format", "json").stdout)[0]["id"]
    ack = run(remote, "issues", "ack", iid, "--owner", "alice", "--note", "from CI")
    assert ack.returncode == 0 and f"{iid}: acknowledged (owner alice)" in ack.stdout, ack.stderr
    shown = json.loads(run(env, "issues", "show", iid, "--format", "json", store=store).stdout)
    assert (shown["history"][-1]["actor"], shown["owner"]) == ("ci-runner", "alice")  # the token's name
    assert run(remote, "issues", "show", iid).stdout == run(env, "issues", "show", iid, store=store).stdout
    assert run(remote, "issues", "link", iid, "https://bugs.example.com/9").returncode == 0

    # compare: --against a label recorded on the store, and --baseline a local file
    assert run(env, "snapshot", "--label", "main", "-o", tmp_path / "base.json", store=store).returncode == 0
    for args in (("--against", "main"), ("--baseline", tmp_path / "base.json")):
        via, local = run(remote, "compare", *args), run(env, "compare", *args, store=store)
        assert (via.returncode, via.stdout) == (local.returncode, local.stdout) == (0, local.stdout), via.stderr


def test_a_reader_cannot_act_and_errors_are_clean(served):
    _store, url, _writer, reader, env = served
    remote = {**env, "XFID_SERVER": url, "XFID_TOKEN": reader}
    assert run(remote, "issues", "list").returncode == 0
    r = run(remote, "issues", "ack", "XF-1", "--owner", "x")
    assert r.returncode == 2 and r.stderr.startswith("Error:") and "Traceback" not in r.stderr, r.stderr
    assert "writer" in r.stderr
    bad = run({**remote, "XFID_TOKEN": "not-a-token"}, "issues", "list")
    assert bad.returncode == 2 and bad.stderr.startswith("Error:")
    none = run({**env, "XFID_SERVER": url}, "issues", "list")
    assert none.returncode == 2 and "XFID_TOKEN" in none.stderr
    unknown = run(remote, "issues", "show", "XF-99")
    assert unknown.returncode == 2 and "XF-99" in unknown.stderr
    actor = run({**remote, "XFID_TOKEN": reader}, "issues", "ack", "XF-1", "--owner", "x", "--actor", "bob")
    assert actor.returncode == 2 and "the actor recorded is the token's name" in actor.stderr
    other = run(remote, "report")
    assert other.returncode == 2 and "--server (or env XFID_SERVER) works with" in other.stderr


def test_an_unreachable_server_is_a_clean_error(tmp_path):
    from tests.servers import free_port

    env = {**child_env(), "XFID_SERVER": f"http://127.0.0.1:{free_port()}", "XFID_TOKEN": "t"}
    r = run(env, "issues", "list")
    assert r.returncode == 2 and "cannot reach the xfid server" in r.stderr and "Traceback" not in r.stderr
    r = run({**env, "XFID_SERVER": "ftp://x"}, "issues", "list")
    assert r.returncode == 2 and "http:// or https://" in r.stderr
    r = run({**env, "XFID_SERVER": "http://u:pw-secret@127.0.0.1:1"}, "issues", "list")
    assert r.returncode == 2 and "pw-secret" not in r.stderr


def test_sixteen_concurrent_uploads_lose_nothing(served, tmp_path):
    """16 clients ingest at once through the server, one of them a broken file: the 15 good
    uploads are all in (every row), the broken one left nothing, and nothing was ingested twice."""
    from concurrent.futures import ThreadPoolExecutor

    from xfid.client import RemoteStore
    from xfid.errors import XfidError

    store, url, writer, _reader, env = served
    files = []
    for i in range(16):
        f = tmp_path / f"up{i}" / f"arch{i}.csv"
        f.parent.mkdir()
        if i == 7:
            f.write_text("fidelity,target\nnot,a,records,file\n")
        else:
            rows = "".join(f"archmodel,t100-a0,w{i},op{j},cycles,value,{1000 + j},cycles,c{i},2026-11-01T00:00:00Z\n"
                           for j in range(500))
            f.write_text("fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n" + rows)
        files.append(f)

    def one(f):
        try:
            return RemoteStore(url, writer).ingest([f.parent], adapter="xfid-records").rows
        except XfidError as e:
            return e

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, files))
    assert isinstance(results[7], XfidError) and "arch7.csv" in str(results[7])
    assert [r for i, r in enumerate(results) if i != 7] == [500] * 15
    doc = json.loads(run(env, "sources", "--format", "json", store=store).stdout)
    paths = [s["path"] for s in doc]
    assert sum("arch7.csv" in p for p in paths) == 0 and sum("/arch" in p for p in paths) >= 15
    exported = [json.loads(x) for x in run(env, "export", store=store).stdout.splitlines()]
    mine = [r for r in exported if str(r.get("run", "")).startswith("c") and r["workload"].startswith("w")]
    assert len(mine) == 15 * 500 and len({(r["workload"], r["op"]) for r in mine}) == 15 * 500
