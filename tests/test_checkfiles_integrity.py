"""The tracker's check files follow the parts' rules: never lost, never swept unless provably garbage.

A `check-N.parquet` file is renamed into place only after its check's COMMIT, so one the
database does not know means an older (or another store's) database: an `Error:` with the
`--rebuild-catalog` fix, never a deletion. The sweep takes only this store's temps past the
grace period; a kill between COMMIT and the rename keeps the check readable. Every writing
command on a read-only store is an `Error:`, and the rebuilt catalog keeps derived summaries.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.test_store_integrity import _make_read_only, _make_writable, drop_wal, write

REBUILD = "--rebuild-catalog"


def check_files(store: Path) -> list[str]:
    return sorted(f.name for f in (store / "checks").glob("check-*.parquet"))


def check(cli, *args: str):
    r = cli("check", "--actor", "t", *args)
    assert r.exit_code in (0, 1), r.output
    return r


def test_a_rolled_back_database_keeps_newer_check_files(xfid_cli, tmp_path):
    """The database restored from a copy taken before two checks, with no part changed since:
    `check`, `issues` and `doctor` stop with the fix; the newer checks' files stay; the rebuild
    keeps the older tracker and moves the files it does not know into the backup."""
    assert xfid_cli("ingest", write(tmp_path / "a.csv", 20, "a")).exit_code == 0
    check(xfid_cli)
    drop_wal(xfid_cli.store)
    older = tmp_path / "older.db"
    shutil.copy(xfid_cli.store / "xfid.db", older)
    check(xfid_cli)
    check(xfid_cli)
    assert check_files(xfid_cli.store) == ["check-1.parquet", "check-2.parquet", "check-3.parquet"]
    drop_wal(xfid_cli.store)
    shutil.copy(older, xfid_cli.store / "xfid.db")

    for cmd in (("check", "--actor", "t"), ("issues", "list"), ("issues", "ack", "XF-1", "--owner", "o")):
        r = xfid_cli(*cmd)
        assert r.exit_code == 2 and r.output.startswith("Error: "), (cmd, r.output)
        assert "older than the check files" in r.output and REBUILD in r.output and "Traceback" not in r.output
        assert len(check_files(xfid_cli.store)) == 3  # never a check file less
    for args in (("doctor",), ("doctor", "--repair")):
        r = xfid_cli(*args)
        assert r.exit_code == 1 and "catalog_mismatch" in r.output and REBUILD in r.output, r.output
        assert len(check_files(xfid_cli.store)) == 3
    assert not (xfid_cli.store / "quarantine").exists()

    r = xfid_cli("doctor", REBUILD)
    assert r.exit_code == 0 and "tracker history kept" in r.output, r.output
    assert check_files(xfid_cli.store) == ["check-1.parquet"]
    backup = next(xfid_cli.store.glob("catalog-backup-*"))
    assert sorted(f.name for f in (backup / "checks").iterdir()) == ["check-2.parquet", "check-3.parquet"]
    assert (backup / "xfid.db").is_file()
    assert xfid_cli("doctor").exit_code == 0
    check(xfid_cli)  # the next check goes on from the kept tracker
    assert check_files(xfid_cli.store) == ["check-1.parquet", "check-2.parquet"]


def test_another_stores_check_file_is_named_as_such(tmp_path):
    from xfid.ingest import IngestOptions, ingest
    from xfid.store import CatalogMismatch, Store
    from xfid.tracker import Tracker, checkfiles

    with Store(tmp_path / "s") as s:
        ingest(s, [write(tmp_path / "a.csv", 3, "a")], IngestOptions())
        tmp = checkfiles.write_temp(s.root, __import__("pandas").DataFrame({"x": [1]}), uuid.uuid4().hex)
        os.replace(tmp, tmp.with_name("check-1.parquet"))
        with pytest.raises(CatalogMismatch, match=r"belongs to another store .* check file"):
            Tracker(s)
    assert (tmp_path / "s" / "checks" / "check-1.parquet").is_file()


def test_the_check_sweep_takes_only_this_stores_abandoned_temps(tmp_path, monkeypatch):
    from tests.test_tracker_helpers import corr, row
    from xfid.store import Store
    from xfid.tracker import Tracker, checkfiles

    bad = row(2.0)
    with Store(tmp_path / "s") as s:
        tr = Tracker(s)
        tr.record_check(corr(bad), actor="ci")
        d = s.root / "checks"
        sid = s.store_id
        ours_old = d / f".tmp-{sid}-{uuid.uuid4().hex}.parquet"
        ours_young = d / f".tmp-{sid}-{uuid.uuid4().hex}.parquet"
        staged_old = d / checkfiles.staged_name(sid, 77)  # staged for a check that never committed
        foreign_old = d / f".tmp-{uuid.uuid4().hex}-{uuid.uuid4().hex}.parquet"
        legacy_old = d / f".tmp-{uuid.uuid4().hex}.parquet"  # an older xfid's temp
        for f in (ours_old, ours_young, staged_old, foreign_old, legacy_old):
            f.write_bytes(b"PAR1 half-written")
        old = time.time() - 2 * 3600
        for f in (ours_old, staged_old, foreign_old, legacy_old):
            os.utime(f, (old, old))
        tr.record_check(corr(bad), actor="ci")
        assert not ours_old.exists() and not staged_old.exists()
        assert ours_young.exists() and foreign_old.exists() and legacy_old.exists()
        assert check_files(s.root) == ["check-1.parquet", "check-2.parquet"]
        monkeypatch.setenv("XFID_TEMP_GRACE_S", "0")
        from xfid.doctor import examine

        kinds = sorted((p.kind, Path(p.path).name) for p in examine(s.root).problems)
        assert kinds == [("orphan_check", ours_young.name)]  # doctor judges temps as the sweep does


def test_a_check_killed_between_commit_and_rename_stays_readable(xfid_cli, tmp_path):
    """Killed after its COMMIT, before the rename: the check's rows are read from its temp, doctor
    (even past the grace period) does not call it an orphan, and the next check finishes the rename."""
    assert xfid_cli("ingest", FIXTURES / "records").exit_code == 0
    p = subprocess.run([sys.executable, "-m", "xfid", "--store", str(xfid_cli.store), "check"],
                       capture_output=True, env={**os.environ, "XFID_FAULT": "check.before_rename"})
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert check_files(xfid_cli.store) == []
    assert len(list((xfid_cli.store / "checks").glob(".tmp-*-check-1-*.committing.parquet"))) == 1
    r = xfid_cli("history", "XF-1")  # reads the check's saved rows
    assert r.exit_code == 0 and "config_mismatch" in r.output, r.output
    r = xfid_cli("doctor", "--repair", env={"XFID_TEMP_GRACE_S": "0"})
    assert r.exit_code == 0 and "orphan_check" not in r.output, r.output
    check(xfid_cli)
    assert check_files(xfid_cli.store) == ["check-1.parquet", "check-2.parquet"]
    assert not list((xfid_cli.store / "checks").glob(".tmp-*"))


def _fake_rtl_run(monkeypatch, tmp_path: Path) -> None:
    """`xfid rtl run` without a simulator: the run 'leaves' the probe fixture's outputs."""
    import rtl_hooks.runner as runner

    src = FIXTURES / "rtl" / "probe_output"
    out = tmp_path / "rtl"
    shutil.copytree(src, out)

    def run_block(block, params, **kw):
        return runner.RunResult(block=block, simulator="fake", params={}, build_dir=out, out=out / "xfid_rtl.jsonl",
                                results_xml=out / "results.xml", tests=1)

    monkeypatch.setattr(runner, "run_block", run_block)


def test_every_writing_command_on_a_read_only_store_is_an_error(xfid_cli, tmp_path, snapshot, monkeypatch):
    """Really read-only (chmod for a user, `chattr +i` as root): each writer says so, no traceback,
    not a byte changed."""
    assert xfid_cli("ingest", FIXTURES / "records").exit_code == 0
    check(xfid_cli)
    drop_wal(xfid_cli.store)
    snap = snapshot(xfid_cli.store)
    _fake_rtl_run(monkeypatch, tmp_path)
    if not _make_read_only(xfid_cli.store):
        pytest.skip("cannot make a directory read-only here (root without chattr / immutable attribute)")
    writers = [
        ("check", "--actor", "t"),
        ("issues", "ack", "XF-1", "--owner", "o"),
        ("issues", "resolve", "XF-1"),
        ("issues", "note", "XF-1", "--note", "n"),
        ("issues", "waive", "XF-1", "--reason", "r", "--until", "2027-06-01"),
        ("calibrate", "--candidate", "roofline", "--reference", "measured", "--target", "h100-sxm", "--write-back"),
        ("ingest", write(tmp_path / "b.csv", 3, "b")),
        ("rtl", "run", "gemm_tile", "--ingest"),
        ("snapshot", "-o", xfid_cli.store / "base.json"),
        ("report", "--html", "-o", xfid_cli.store / "r.html"),
    ]
    try:
        for cmd in writers:
            r = xfid_cli(*cmd)
            assert r.exit_code == 2, (cmd, r.output)
            assert "Error: " in r.output and "Traceback" not in r.output, (cmd, r.output)
            want = "cannot write" if cmd[0] in ("snapshot", "report") else "read-only"
            assert want in r.output, (cmd, r.output)
        assert snapshot(xfid_cli.store) == snap
        r = xfid_cli("issues", "list")  # the readers still work
        assert r.exit_code == 0 and "XF-1" in r.output, r.output
    finally:
        _make_writable(xfid_cli.store)


def test_a_derived_sources_summary_survives_the_rebuild(xfid_cli, fixtures):
    """Power-derived sources get their summary in their parts' footers (describe), so the
    rebuilt catalog lists the same summary for every source, the derived one included."""
    r = xfid_cli("ingest", fixtures / "measured" / "energy")
    assert r.exit_code == 0 and "[derived-energy]" in r.output, r.output

    def sources() -> list[dict]:
        from xfid.store import Store

        with Store(xfid_cli.store) as s:
            return s.sources()

    before = sources()
    derived = [s for s in before if s["adapter"] == "derived-energy"]
    assert derived and json.loads(derived[0]["summary"])["metrics"]
    drop_wal(xfid_cli.store)
    (xfid_cli.store / "xfid.db").unlink()
    assert xfid_cli("doctor", REBUILD).exit_code == 0
    assert sources() == before


def test_the_api_rebuilds_the_catalog(tmp_path):
    import xfid

    with xfid.open_store(tmp_path / "s") as st:
        st.ingest([write(tmp_path / "a.csv", 12, "a"), write(tmp_path / "b.csv", 5, "b")])
        before = st.records().sort_values(["workload", "op"]).reset_index(drop=True)
    drop_wal(tmp_path / "s")
    (tmp_path / "s" / "xfid.db").unlink()
    with xfid.open_store(tmp_path / "s") as st:
        rep = st.rebuild_catalog()
        assert (rep.sources, rep.parts, rep.rows) == (2, 2, 17)
        after = st.records().sort_values(["workload", "op"]).reset_index(drop=True)
    assert after.equals(before)
