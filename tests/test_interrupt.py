"""Ctrl-C during ingest: it says what it left, and a Ctrl-C after COMMIT never deletes the data.

The interrupt is raised at the store's fault points (the places a crash test kills the process),
as a KeyboardInterrupt, which is what Ctrl-C delivers to Python."""

from __future__ import annotations

import pytest

import xfid.partwrite
from tests.test_engine_helpers import rec, write_csv


def _interrupt_at(monkeypatch, point: str) -> None:
    real = xfid.partwrite.fault_point  # the commit's fault points (xfid.partwrite)

    def fault(name: str) -> None:
        if name == point:
            raise KeyboardInterrupt
        real(name)

    monkeypatch.setattr(xfid.partwrite, "fault_point", fault)


def _temps(store_dir):
    return sorted(p.name for p in store_dir.rglob(".tmp-*"))


@pytest.fixture
def two_files(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_csv(d / "m.csv", [rec("measured", "a", 1.0), rec("measured", "b", 2.0)])
    write_csv(d / "r.csv", [rec("archmodel", "a", 1.1), rec("archmodel", "b", 2.2)])
    return d


def test_ctrl_c_after_commit_keeps_the_data_and_says_so(xfid_cli, two_files, tmp_path, monkeypatch):
    _interrupt_at(monkeypatch, "store.before_rename")
    r = xfid_cli("ingest", "--adapter", "xfid-records", two_files)
    assert r.exit_code == 130, r.output
    assert "Interrupted: after the commit: 2 file(s) are in the store" in r.output and "Traceback" not in r.output
    assert _temps(tmp_path / "store"), "the committed temps are still there, under their temporary names"
    monkeypatch.undo()
    out = xfid_cli("export", "--format", "csv")
    assert out.exit_code == 0 and len(out.output.strip().splitlines()) == 1 + 4, out.output
    doc = xfid_cli("doctor")  # the temps are named as committed, not missing or orphaned
    assert doc.output.count("unfinished_rename") == 2 and "missing" not in doc.output, doc.output
    again = xfid_cli("ingest", "--adapter", "xfid-records", two_files)  # the next writer renames them
    assert again.exit_code == 0 and "0 new rows" in again.output, again.output
    assert not _temps(tmp_path / "store")
    assert xfid_cli("doctor").exit_code == 0


def test_ctrl_c_before_commit_leaves_nothing_and_says_so(xfid_cli, two_files, tmp_path, monkeypatch):
    _interrupt_at(monkeypatch, "store.before_commit")
    r = xfid_cli("ingest", "--adapter", "xfid-records", two_files)
    assert r.exit_code == 130, r.output
    assert "Interrupted: nothing was ingested (2 file(s) were prepared" in r.output
    assert "Run the same ingest again" in r.output and "Traceback" not in r.output
    assert not _temps(tmp_path / "store")
    monkeypatch.undo()
    assert xfid_cli("sources").output.count("m.csv") == 0
    ok = xfid_cli("ingest", "--adapter", "xfid-records", two_files)
    assert ok.exit_code == 0 and "8 new rows" not in ok.output and "4 new rows" in ok.output, ok.output


def test_ctrl_c_elsewhere_is_a_message_not_a_traceback(xfid_cli, two_files, monkeypatch):
    assert xfid_cli("ingest", "--adapter", "xfid-records", two_files).exit_code == 0

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("xfid.api.XfidStore.correlate", boom)
    r = xfid_cli("correlate")
    assert r.exit_code == 130 and r.output.strip().endswith("Interrupted: Ctrl-C"), r.output
