"""`xfid sources remove`: a source taken back out of every read, all or nothing, on both catalogs.

Each test runs on the SQLite catalog and on a real PostgreSQL server (the `catalog` fixture of
tests/servers.py puts its URL in XFID_DATABASE_URL, which the CLI, the API and the killed
subprocesses all read).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import xfid
from tests.conftest import Cli
from tests.servers import sqlite_only
from xfid.errors import XfidError
from xfid.store import Store

pytestmark = pytest.mark.usefixtures("catalog")

HEAD = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"
OPS = ('"gemm_tile[m=128,n=128,k=256]"', '"gemm_tile[m=256,n=128,k=256]"')


def records(path: Path, fidelity: str, run: str, values: tuple[float, float],
            when: str = "2026-11-01T00:00:00Z") -> Path:
    """Two cycles records of one run (the first op is the one the tests make disagree)."""
    rows = "".join(f"{fidelity},t100-a0,gemm-sweep,{op},cycles,value,{v},cycles,{run},{when}\n"
                   for op, v in zip(OPS, values, strict=True))
    path.write_text(HEAD + rows)
    return path


def ok(cli: Cli, *args: object) -> str:
    r = cli(*map(str, args))
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    return r.output


def sources(cli: Cli, *flags: str) -> list[dict]:
    return json.loads(ok(cli, "sources", "--format", "json", *flags))


def exported(cli: Cli) -> list[dict]:
    return [json.loads(x) for x in ok(cli, "export").splitlines()]


def healthy(cli: Cli) -> str:
    r = cli("doctor")
    assert r.exit_code == 0 and r.output.rstrip().endswith("healthy"), r.output
    for bad in ("catalog_mismatch", "missing_part", "stale_temp", "orphan", "corrupt"):
        assert bad not in r.output, r.output
    return r.output


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "store", tmp_path)


@pytest.fixture
def two(cli: Cli, tmp_path: Path) -> tuple[Path, Path]:
    """An RTL run and an architecture-model run of the same two ops: op 1 is 25% off."""
    rtl = records(tmp_path / "rtl.csv", "rtl", "r1", (1000, 2000))
    arch = records(tmp_path / "arch.csv", "archmodel", "m1", (1250, 2010))
    ok(cli, "ingest", rtl, arch)
    return rtl, arch


def test_removed_rows_leave_export_records_correlate_and_summary(cli, two, tmp_path):
    rtl, arch = two
    assert len(exported(cli)) == 4
    before = json.loads(ok(cli, "correlate", "--format", "json"))
    assert any(r["kind"] == "over_tolerance" for r in before["discrepancies"])
    out = ok(cli, "sources", "remove", str(arch), "--reason", "wrong target", "--actor", "alice")
    sid = next(s["source_id"] for s in sources(cli, "--all") if s["path"] == str(arch))
    assert f"removed source {sid[:12]} (xfid-records, 2 rows, {arch}) by alice" in out and "wrong target" in out
    rows = exported(cli)
    assert len(rows) == 2 and {r["fidelity"] for r in rows} == {"rtl"}
    assert [s["path"] for s in sources(cli)] == [str(rtl)]
    with xfid.open_store(cli.store) as st:
        recs = st.records()
        assert len(recs) == 2 and set(recs["source_id"]) != {sid} and sid not in set(recs["source_id"])
        assert st.summary()["records"] == 2 and st.summary()["sources"] == 1
        corr = st.correlate()
        assert not len(corr.rows) or not (corr.rows["reference"].eq("archmodel") | corr.rows["candidate"].eq(
            "archmodel")).any()
        assert [s["source_id"] for s in corr.sources] == [s["source_id"] for s in sources(cli)]
    after = json.loads(ok(cli, "correlate", "--format", "json"))
    assert after["discrepancies"] == []
    with Store(cli.store) as s:  # the engine's own selection reads the same parts
        from xfid.engine.selection import load

        assert load(s).num_rows == 2 and s.read().num_rows == 2
        assert len(s.part_files()) == 1 and len(s.removed_files()) == 1
    assert "1 removed source(s), 2 rows" in healthy(cli)


def test_spark_report_and_profile_read_only_what_remains(cli, two):
    """Spark's selection lists its parts from the same catalog (no Spark needed to see which);
    the report's provenance table and the profile read the store the same way."""
    _, arch = two
    from xfid.engine.spark.select import committed_parts
    from xfid.report.assemble import source_provenance

    with Store(cli.store) as s:
        before = {str(f) for f in committed_parts(s)}
    ok(cli, "sources", "remove", str(arch))
    with Store(cli.store) as s:
        after = {str(f) for f in committed_parts(s)}
        assert len(before) == 2 and len(after) == 1 and after < before
        assert "fidelity=rtl" in next(iter(after))
        assert [p["path"] for p in source_provenance(s)] == [str(two[0])]
    with xfid.open_store(cli.store) as st:  # the profile cites the RTL file as evidence, until it is removed
        assert str(two[0]) in json.dumps(st.profile("t100-a0").to_dict())
        st.remove_source(str(two[0]))
        assert str(two[0]) not in json.dumps(st.profile("t100-a0").to_dict())


def test_sources_all_shows_who_when_why_and_plain_sources_does_not(cli, two):
    _, arch = two
    ok(cli, "sources", "remove", str(arch), "--reason", "broken run", "--actor", "bob")
    plain = ok(cli, "sources")
    assert str(arch) not in plain and "removed" not in plain
    table = ok(cli, "sources", "--all")
    assert "removed (1):" in table
    line = next(x for x in table.splitlines() if str(arch) in x)
    assert "bob" in line and "broken run" in line
    gone = [s for s in sources(cli, "--all") if "removed_at" in s]
    assert len(gone) == 1
    g = gone[0]
    assert (g["actor"], g["reason"], g["path"], g["rows"], g["adapter"]) == ("bob", "broken run", str(arch), 2,
                                                                             "xfid-records")
    assert g["removed_at"].endswith("Z") and g["options"]["fidelity"] is None  # the manifest row, kept whole
    assert len(sources(cli)) == 1


def test_a_hostile_reason_is_printed_escaped(cli, two):
    rtl, _ = two
    out = ok(cli, "sources", "remove", str(rtl), "--reason", "bad\x1b[31m run\u202e")
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b" in out
    table = ok(cli, "sources", "--all")
    assert "\x1b" not in table and "\\x1b" in table


def test_reingest_after_removal_and_remove_again(cli, two, tmp_path):
    _, arch = two
    first = sources(cli)
    sid = next(s["source_id"] for s in first if s["path"] == str(arch))
    ok(cli, "sources", "remove", sid[:8], "--reason", "oops")
    r = cli("sources", "remove", sid)
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "already removed by" in r.output
    assert "oops" in r.output and "Traceback" not in r.output
    out = ok(cli, "ingest", arch)
    assert "2 new rows from 1 file(s)" in out  # not "already ingested": the removal freed it
    assert len(exported(cli)) == 4
    assert sorted(s["source_id"] for s in sources(cli)) == sorted(s["source_id"] for s in first)  # same bytes, id
    assert "0 new rows" in ok(cli, "ingest", arch)  # and a second ingest is the usual no-op
    ok(cli, "sources", "remove", str(arch), "--reason", "again")  # the re-ingested one goes the same way
    gone = [s for s in sources(cli, "--all") if "removed_at" in s]
    assert [g["reason"] for g in gone] == ["oops", "again"] and {g["source_id"] for g in gone} == {sid}
    assert len(exported(cli)) == 2
    healthy(cli)


def test_unknown_and_ambiguous_sources_are_clear_errors(cli, two, tmp_path):
    _, arch = two
    before = sources(cli)
    r = cli("sources", "remove", str(tmp_path / "arch.cvs"))
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "no source" in r.output
    assert "did you mean" in r.output and str(arch) in r.output and "Traceback" not in r.output
    sid = before[0]["source_id"]
    r = cli("sources", "remove", sid[:11] + "x")
    assert r.exit_code == 2 and "did you mean" in r.output and sid[:12] in r.output
    # the same file ingested with another context is another source of the same path
    ok(cli, "ingest", arch, "--run", "m9")
    r = cli("sources", "remove", str(arch))
    assert r.exit_code == 2 and "matches 2 sources" in r.output and "give the SOURCE_ID" in r.output
    assert len(sources(cli)) == 3 and len(exported(cli)) == 6  # nothing was changed
    assert cli("sources", "remove", "").exit_code == 2


def test_api_remove_source(cli, two):
    rtl, arch = two
    with xfid.open_store(cli.store) as st:
        done = st.remove_source(str(rtl), reason="rerun pending", actor="carol")
        assert [(d.path, d.actor, d.reason, d.cause) for d in done] == [(str(rtl), "carol", "rerun pending", None)]
        assert len(st.records()) == 2
        assert [s["path"] for s in st.sources()] == [str(arch)]
        gone = [s for s in st.sources(removed=True) if "removed_at" in s]
        assert [(g["path"], g["actor"]) for g in gone] == [(str(rtl), "carol")]
        with pytest.raises(XfidError, match="already removed by carol"):
            st.remove_source(done[0].source_id)
        rep = st.doctor()
        assert rep.ok and [r["path"] for r in rep.removed] == [str(rtl)]


def _issue(cli: Cli, iid: str = "XF-1") -> dict:
    return json.loads(ok(cli, "issues", "show", iid, "--format", "json"))


def test_check_after_removal_says_the_evidence_is_gone(cli, two):
    """The reference of XF-1 is removed: the next check resolves it with an explicit
    `evidence_removed` (never a silent auto-resolve); re-ingesting brings it back."""
    _, arch = two
    assert json.loads(ok(cli, "check", "--format", "json", "--actor", "ci"))["new"] == ["XF-1"]
    ok(cli, "sources", "remove", str(arch), "--reason", "model of the wrong chip", "--actor", "alice")
    s = json.loads(ok(cli, "check", "--format", "json", "--actor", "ci"))
    assert s["evidence_removed"] == ["XF-1"] and s["resolved"] == [] and s["counts"]["total_open"] == 0
    iss = _issue(cli)
    last = iss["history"][-1]
    sid = next(x["source_id"] for x in sources(cli, "--all") if "removed_at" in x)
    assert (last["action"], last["from_state"], last["to_state"], last["actor"]) == (
        "evidence_removed", "open", "resolved", "ci")
    assert last["note"].startswith(f"evidence removed: source {sid[:12]} ({arch}) removed by alice at ")
    assert "model of the wrong chip" in last["note"] and "no row for this key" in last["note"]
    assert "evidence removed" not in ok(cli, "check", "--actor", "ci")  # said once, by the first check after
    assert [h["action"] for h in _issue(cli)["history"]].count("evidence_removed") == 1
    ok(cli, "ingest", arch)
    s = json.loads(ok(cli, "check", "--format", "json", "--actor", "ci"))
    assert s["reopened"] == ["XF-1"] and _issue(cli)["history"][-1]["action"] == "recurred"


def test_check_after_removal_judges_what_remains(cli, tmp_path):
    """Two model runs; the newer (25% off) is removed: the check notes `evidence_reduced`, keeps
    XF-1 open and counts the older run's agreeing number as one clean check."""
    ok(cli, "ingest", records(tmp_path / "rtl.csv", "rtl", "r1", (1000, 2000)),
       records(tmp_path / "old.csv", "archmodel", "m0", (1010, 2010), "2026-10-01T00:00:00Z"),
       records(tmp_path / "new.csv", "archmodel", "m1", (1250, 2010), "2026-11-01T00:00:00Z"))
    assert json.loads(ok(cli, "check", "--format", "json"))["new"] == ["XF-1"]
    ok(cli, "sources", "remove", str(tmp_path / "new.csv"), "--reason", "bad build")
    s = json.loads(ok(cli, "check", "--format", "json", "--actor", "ci"))
    assert s["evidence_reduced"] == ["XF-1"] and s["evidence_removed"] == [] and s["resolved"] == []
    iss = _issue(cli)
    assert iss["state"] == "open" and iss["clean_streak"] == 1
    h = iss["history"][-1]
    assert (h["action"], h["to_state"]) == ("evidence_reduced", "open")
    assert "bad build" in h["note"] and "on the records that remain" in h["note"]
    s = json.loads(ok(cli, "check", "--format", "json", "--actor", "ci"))  # the second clean check resolves
    assert s["resolved"] == ["XF-1"] and s["evidence_reduced"] == []
    assert [x["action"] for x in _issue(cli)["history"]] == ["detected", "evidence_reduced", "auto_resolved"]


def test_a_narrowed_check_leaves_the_issue_for_a_later_one(cli, two, tmp_path):
    _, arch = two
    ok(cli, "check")
    ok(cli, "sources", "remove", str(arch))
    s = json.loads(ok(cli, "check", "--format", "json", "--target", "h100-sxm"))  # not XF-1's target
    assert s["evidence_removed"] == [] and _issue(cli)["state"] == "open"
    out = ok(cli, "check")
    assert "evidence removed (a removed source held all of it; resolved, saying so): XF-1" in out


def test_a_check_that_correlated_before_the_removal_leaves_it_pending(cli, two):
    _, arch = two
    with xfid.open_store(cli.store) as st:
        assert st.check(actor="ci").new == ["XF-1"]
        stale = st.correlate()  # read both sources
        st.remove_source(str(arch), reason="late")
        s = st.check(correlation=stale, actor="ci")  # committed after the removal, computed before it
        assert s.evidence_removed == s.evidence_reduced == [] and st.issue("XF-1")["state"] == "open"
        s = st.check(actor="ci")
        assert s.evidence_removed == ["XF-1"] and st.issue("XF-1")["state"] == "resolved"


def test_reingested_before_any_check_closes_the_removal_quietly(cli, two):
    _, arch = two
    ok(cli, "check")
    ok(cli, "sources", "remove", str(arch))
    ok(cli, "ingest", arch)
    s = json.loads(ok(cli, "check", "--format", "json"))
    assert s["evidence_removed"] == s["evidence_reduced"] == [] and s["still_open"] == ["XF-1"]
    assert [h["action"] for h in _issue(cli)["history"]] == ["detected"]
    ok(cli, "sources", "remove", str(arch))  # a later removal is judged by the next check as usual
    assert json.loads(ok(cli, "check", "--format", "json"))["evidence_removed"] == ["XF-1"]


def test_derived_sources_go_with_their_input(cli, fixtures, tmp_path):
    """A run's derived energy (xfid.power) is computed from its power log: removing the log
    removes it too, noted so."""
    ok(cli, "ingest", fixtures / "measured" / "energy")
    derived = [s for s in sources(cli) if s["adapter"] == "derived-energy"]
    assert len(derived) == 1
    inputs = derived[0]["options"]["inputs"]  # [benchmark, power log]
    out = ok(cli, "sources", "remove", inputs[1], "--reason", "log of another GPU")
    assert "also removed" in out and "derived from source" in out
    assert not [s for s in sources(cli) if s["adapter"] == "derived-energy" and inputs[1] in s["options"]["inputs"]]
    healthy(cli)


# --- all or nothing: kill -9 inside the removal -----------------------------------------
def _remove_proc(store: Path, ref: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "xfid", "--store", str(store), "sources", "remove", ref,
                             "--reason", "killed", "--actor", "k"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})})


def _state(cli: Cli, arch: Path) -> str:
    """"before" or "after" the removal of `arch`, asserting the store is wholly one of them."""
    live = sources(cli)
    gone = [s for s in sources(cli, "--all") if "removed_at" in s and s["path"] == str(arch)]
    rows = exported(cli)
    with Store(cli.store) as s:
        removed = s.removed_files()
    if any(s["path"] == str(arch) for s in live):
        assert len(rows) == 4 and len(live) == 2
        return "before"
    assert len(rows) == 2 and {r["fidelity"] for r in rows} == {"rtl"} and len(live) == 1
    assert gone and removed
    return "after"


@pytest.mark.parametrize(("fault", "want"), [
    ("remove.parts_copied", "before"), ("remove.first_moved", "before"), ("remove.before_commit", "before"),
    ("remove.after_commit", "after"),
])
def test_kill9_at_each_step_is_all_or_nothing(cli, two, fault, want):
    _, arch = two
    p = _remove_proc(cli.store, str(arch), {"XFID_FAULT": fault})
    out, _ = p.communicate(timeout=120)
    assert p.returncode == -signal.SIGKILL, out
    assert _state(cli, arch) == want
    healthy(cli)
    if want == "before":  # the store is usable as it was: the removal runs through now
        ok(cli, "sources", "remove", str(arch))
        assert _state(cli, arch) == "after"
        assert len([s for s in sources(cli, "--all") if "removed_at" in s]) == 1
    healthy(cli)


def test_kill9_at_random_moments(cli, two):
    """SIGKILL after a random delay, several times: each time wholly before or wholly after."""
    _, arch = two
    t0 = time.monotonic()  # one removal run through, timed: the kills fall within its span
    p = _remove_proc(cli.store, str(arch))
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    span = time.monotonic() - t0
    ok(cli, "ingest", arch)
    rnd = random.Random(29)
    seen = []
    removals = 1
    for _ in range(int(os.environ.get("XFID_REMOVE_KILLS", "6"))):
        p = _remove_proc(cli.store, str(arch))
        time.sleep(rnd.uniform(0.5, 1.1) * span)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=60)
        state = _state(cli, arch)
        seen.append(state)
        healthy(cli)
        if state == "after":
            removals += 1
            assert len([s for s in sources(cli, "--all") if "removed_at" in s]) == removals
            ok(cli, "ingest", arch)  # for the next round
    print(f"removal run through in {span:.2f} s; killed runs ended: {seen}")  # both outcomes are valid


@sqlite_only("--rebuild-catalog rebuilds a store's own SQLite catalog")
def test_rebuild_catalog_keeps_a_removed_source_removed(cli, two):
    _, arch = two
    ok(cli, "sources", "remove", str(arch), "--reason", "wrong")
    want = exported(cli)
    out = ok(cli, "doctor", "--rebuild-catalog")
    assert "tracker history kept" in out
    assert exported(cli) == want and [s["path"] for s in sources(cli)] != [] and len(sources(cli)) == 1
    assert [s["reason"] for s in sources(cli, "--all") if "removed_at" in s] == ["wrong"]
    healthy(cli)
    assert "2 new rows" in ok(cli, "ingest", arch)


def test_team_roles_writer_removes_reader_cannot(catalog, tmp_path):
    """docs/team.md's roles: the owner's first ingest makes the removal tables; a writer with the
    documented GRANTs removes; a reader's removal is an Error and changes nothing."""
    if catalog is None:
        pytest.skip("roles are PostgreSQL's (the SQLite catalog has none)")
    import psycopg

    from tests.servers import with_user

    cli = Cli(tmp_path / "store", tmp_path)
    rtl = records(tmp_path / "rtl.csv", "rtl", "r1", (1000, 2000))
    arch = records(tmp_path / "arch.csv", "archmodel", "m1", (1250, 2010))
    ok(cli, "ingest", rtl, arch)  # as the owner
    tag = catalog.rsplit("/", 1)[1]
    with psycopg.connect(catalog, autocommit=True) as c:
        c.execute(f"CREATE ROLE {tag}_rd LOGIN PASSWORD 'reader-pw'")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {tag}_rd")
        c.execute(f"CREATE ROLE {tag}_wr LOGIN PASSWORD 'writer-pw'")
        for grant in ("GRANT USAGE ON SCHEMA public TO {}",
                      "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {}",
                      "GRANT DELETE ON parts, sources TO {}",
                      "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}"):
            c.execute(grant.format(f"{tag}_wr"))
    reader = {"XFID_DATABASE_URL": with_user(catalog, f"{tag}_rd", "reader-pw")}
    r = cli("sources", "remove", str(arch), env=reader)
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "read-only" in r.output
    assert "reader-pw" not in r.output and len(exported(cli)) == 4
    writer = {"XFID_DATABASE_URL": with_user(catalog, f"{tag}_wr", "writer-pw")}
    r = cli("sources", "remove", str(arch), "--reason", "by the writer", env=writer)
    assert r.exit_code == 0, r.output
    assert len(exported(cli)) == 2
    r = cli("sources", "--all", env=reader)
    assert r.exit_code == 0 and "by the writer" in r.output
    healthy(cli)
