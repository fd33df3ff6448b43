"""The scratch folders of checks (xfid.tracker.scratch): a killed check's folder is swept by the
next check, a running check's never."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.test_engine_helpers import make_store, rec
from xfid.tracker import scratch

HOLDER = r"""
import contextlib, sys, time
from pathlib import Path
from xfid.tracker import scratch
with contextlib.ExitStack() as stack:
    print(scratch.folder(Path(sys.argv[1]), stack), flush=True)
    time.sleep(600)
"""


def _aged(path: Path, seconds: float = 3600.0) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _holder(home: Path) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(home)], stdout=subprocess.PIPE, text=True)
    return proc, Path(proc.stdout.readline().strip())


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=30)
    proc.stdout.close()


def test_a_running_checks_folder_is_kept_and_a_killed_ones_swept(tmp_path):
    proc, held = _holder(tmp_path)
    try:
        assert held.is_dir() and held.name.startswith(scratch.PREFIX)
        _aged(held / scratch.HELD)
        _aged(held)
        assert scratch.sweep(tmp_path) == [] and held.is_dir()  # its check still runs
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert held.is_dir()  # a killed check cannot remove it
        assert scratch.sweep(tmp_path) == [held] and not held.exists()
    finally:
        _stop(proc)


def test_a_folder_ends_with_its_check(tmp_path):
    with contextlib.ExitStack() as stack:
        made = scratch.folder(tmp_path, stack)
        (made / "rows.parquet").mkdir()
        (made / "rows.parquet" / "part-0.parquet").write_bytes(b"x")
        assert scratch.sweep(tmp_path) == []  # held by this check (its lock, not only its age)
    assert not made.exists() and list(tmp_path.iterdir()) == []


def test_a_folder_without_its_held_file_waits_for_the_grace_period(tmp_path, monkeypatch):
    old = tmp_path / f"{scratch.PREFIX}old"
    (old / "rows.parquet").mkdir(parents=True)
    assert scratch.sweep(tmp_path) == []  # young: its check may be about to lock it
    monkeypatch.setenv("XFID_TEMP_GRACE_S", "60")
    _aged(old, 120)
    assert scratch.sweep(tmp_path) == [old]


def test_a_young_unlocked_held_file_is_left_alone(tmp_path):
    d = tmp_path / f"{scratch.PREFIX}new"
    d.mkdir()
    (d / scratch.HELD).write_text("")
    assert scratch.sweep(tmp_path) == []  # between its creation and its lock
    _aged(d / scratch.HELD, scratch.SETTLE_S + 5)
    assert scratch.sweep(tmp_path) == [d]


def test_other_entries_of_the_checks_folder_are_never_touched(tmp_path, monkeypatch):
    monkeypatch.setenv("XFID_TEMP_GRACE_S", "0")
    (tmp_path / "check-1.parquet").write_bytes(b"x")
    (tmp_path / "rows-dir").mkdir()
    (tmp_path / f"{scratch.PREFIX}file").write_text("")  # a file, not a scratch folder
    for p in tmp_path.iterdir():
        _aged(p)
    assert scratch.sweep(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{scratch.PREFIX}file", "check-1.parquet", "rows-dir"]


def test_a_check_sweeps_what_a_killed_check_left(tmp_path):
    from xfid.api import XfidStore
    from xfid.tracker.checkfiles import checks_dir

    make_store(tmp_path, {"a.csv": [rec("archmodel", "gemm", 1.0), rec("measured", "gemm", 1.5)]}, name="s").close()
    home = checks_dir(tmp_path / "s")
    home.mkdir(parents=True, exist_ok=True)
    proc, running = _holder(home)
    try:
        left = home / f"{scratch.PREFIX}killed"
        (left / "rows.parquet").mkdir(parents=True)
        (left / scratch.HELD).write_text("")
        for p in (left / scratch.HELD, left, running / scratch.HELD):
            _aged(p)
        with XfidStore(tmp_path / "s") as s:
            s.check(actor="t")
        assert not left.exists()
        assert running.is_dir()  # another check's, still running
    finally:
        _stop(proc)
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(scratch.PREFIX)) == [running.name]
