"""Output paths (`-o`) are written, not replaced: modes kept, links followed, devices written in place."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path

import pytest

from xfid.errors import ReportError, XfidError
from xfid.outfile import open_output, resolve, write_output


def test_regular_file_keeps_its_mode_and_a_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        new = tmp_path / "new.txt"
        write_output(new, "a")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644  # not mkstemp's 0600
        kept = tmp_path / "kept.txt"
        kept.write_text("old")
        kept.chmod(0o640)
        ino = kept.stat().st_ino
        write_output(kept, b"new bytes")
        assert kept.read_bytes() == b"new bytes" and stat.S_IMODE(kept.stat().st_mode) == 0o640
        assert kept.stat().st_ino != ino  # replaced atomically (a reader sees old or new bytes)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt", "new.txt"]  # no temp left
    finally:
        os.umask(old)


def test_symlink_is_written_through(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old")
    real.chmod(0o664)
    (tmp_path / "sub").mkdir()
    link = tmp_path / "sub" / "link.csv"
    link.symlink_to("../real.csv")
    chain = tmp_path / "chain.csv"
    chain.symlink_to(link)
    write_output(chain, "through two links")
    assert chain.is_symlink() and link.is_symlink() and not real.is_symlink()
    assert real.read_text() == "through two links" and stat.S_IMODE(real.stat().st_mode) == 0o664
    dangling = tmp_path / "dangling"
    dangling.symlink_to("made.txt")
    write_output(dangling, "x")  # like `>`: the file the link names is created
    assert dangling.is_symlink() and (tmp_path / "made.txt").read_text() == "x"


def test_dev_null_and_a_fifo_are_written_directly(tmp_path):
    write_output("/dev/null", b"x" * 100_000)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_output(fifo, b"through the pipe\n")
    reader.join(10)
    assert got == [b"through the pipe\n"] and stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_dev_stdout_names_the_open_descriptor(tmp_path):
    real, fd_link = resolve("/dev/stdout")
    assert fd_link and real.name == "1"


@pytest.mark.parametrize("mode", ["w", "a"])
def test_dev_stdout_shares_the_offset_of_what_is_printed(tmp_path, mode):
    """`-o /dev/stdout > file` (or `>>`): the output lands between what is printed before and after."""
    import subprocess
    import sys

    out = tmp_path / "out.txt"
    out.write_text("old\n")
    code = ("from xfid.outfile import write_output\nprint('before')\n"
            "write_output('/dev/stdout', 'middle\\n')\nprint('after')\n")
    with open(out, mode) as f:
        subprocess.run([sys.executable, "-c", code], stdout=f, check=True, timeout=60)
    assert out.read_text() == ("old\n" if mode == "a" else "") + "before\nmiddle\nafter\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_dev_full_is_an_error_and_stays_a_device():
    with pytest.raises(XfidError, match=r"cannot write /dev/full: No space left on device"):
        write_output("/dev/full", b"x" * 100_000)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_write_error_leaves_the_target_and_no_temp(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    for err in (errno.ENOSPC, errno.EIO):
        with pytest.raises(ReportError, match=f"cannot write {target}: {os.strerror(err)}"), \
                open_output(target, error=ReportError) as f:
            f.write(b"partial")
            raise OSError(err, os.strerror(err))
        assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.json"]
    with pytest.raises(KeyError), open_output(target) as f:  # any failure: nothing half-written
        f.write(b"partial")
        raise KeyError("x")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_missing_folder_is_an_error_never_created(tmp_path):
    with pytest.raises(XfidError, match=r"folder .*/nope does not exist \(create it first\)"):
        write_output(tmp_path / "nope" / "x.csv", "a")
    assert not (tmp_path / "nope").exists()
    with pytest.raises(XfidError, match="it is a folder"):
        write_output(tmp_path, "a")


# Every command's -o goes through xfid.outfile: a symlink stays a link, /dev/full is an Error.

RECORDS_COMMANDS = {
    "export-jsonl": ("export", "-o", "{out}"),
    "export-csv": ("export", "--format", "csv", "-o", "{out}"),
    "export-parquet": ("export", "--format", "parquet", "-o", "{out}"),
    "snapshot": ("snapshot", "-o", "{out}"),
    "correlate": ("correlate", "--format", "json", "-o", "{out}"),
    "calibrate": ("calibrate", "--candidate", "roofline", "--reference", "measured", "--target", "h100-sxm",
                  "-o", "{out}"),
    "roofline": ("roofline", "--target", "a100-sxm", "--gemm", "1024,1024,1024", "-o", "{out}"),
    "report": ("report", "--week", "2026-W48", "--html", "-o", "{out}"),
    "compare": ("compare", "--baseline", "{baseline}", "--current", "{baseline}", "-o", "{out}"),
}
SUFFIX = {"export-parquet": ".parquet", "export-jsonl": ".jsonl", "export-csv": ".csv", "calibrate": ".txt",
          "roofline": ".csv", "report": ".html", "compare": ".txt"}
BASELINE = Path(__file__).resolve().parent.parent / "fixtures" / "demo" / "baseline.json"


@pytest.fixture(scope="module")
def loaded_store(tmp_path_factory):
    from tests.conftest import FIXTURES, Cli

    d = tmp_path_factory.mktemp("outfile")
    cli = Cli(d / "store", d)
    assert cli("ingest", FIXTURES / "records").exit_code == 0
    return cli


@pytest.mark.parametrize("name", sorted(RECORDS_COMMANDS))
def test_each_command_writes_through_links_and_reports_a_full_disk(loaded_store, tmp_path, name):
    real = tmp_path / f"real{SUFFIX.get(name, '.json')}"
    real.write_text("old")
    real.chmod(0o664)
    link = tmp_path / f"link{real.suffix}"
    link.symlink_to(real.name)
    args = [a.format(out=link, baseline=BASELINE) for a in RECORDS_COMMANDS[name]]
    r = loaded_store(*args)
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and real.read_bytes() != b"old" and stat.S_IMODE(real.stat().st_mode) == 0o664
    if real.suffix == ".json":
        json.loads(real.read_text())
    if os.path.exists("/dev/full") and name != "roofline":  # roofline picks its format by extension
        r = loaded_store(*[a.format(out="/dev/full", baseline=BASELINE) for a in RECORDS_COMMANDS[name]])
        assert r.exit_code == 2 and "Error: cannot write /dev/full: No space left on device" in r.output
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
        assert not Path("/dev/full-numbers.csv").exists()  # the report's attachment: never beside a device
    missing = tmp_path / "missing" / Path(real.name)
    r = loaded_store(*[a.format(out=missing, baseline=BASELINE) for a in RECORDS_COMMANDS[name]])
    assert r.exit_code == 2 and "does not exist" in r.output and not missing.parent.exists()
