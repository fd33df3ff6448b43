"""No output path may destroy a store (issue 30, HIGH 2), and doctor checks what check files hold.

Every command with an output path (`-o`, `--out`, `--build-dir`) and every API method that
writes a file is aimed at each part of a store -- its folder, its database and `-wal`, a
committed part, a saved check, and the same through a symlink, a hard link and a `..` path,
and a folder holding the store -- on the SQLite catalog and on a team store (a real PostgreSQL
catalog, the records in a local folder elsewhere). Each is `Error:`, exit 2, no traceback, and
every byte of the store (and every catalog row) is as it was. A check file overwritten (by a
CSV, another check's rows, a truncated copy) or missing is reported by `xfid doctor`, and
`xfid report` then names the check and doctor instead of failing with a KeyError.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, Cli
from tests.test_store_integrity import write

CONFIG = FIXTURES / "demo" / "xfid.toml"
BASELINE = FIXTURES / "demo" / "baseline.json"


# --- a store with parts and two checks, on either catalog ------------------------------------
class Team:
    """One store under test: its CLI, its folders and how to fingerprint everything it holds."""

    def __init__(self, tmp: Path, catalog: str | None, monkeypatch: pytest.MonkeyPatch):
        self.tmp, self.url = tmp, catalog
        self.root = tmp / "store"
        if catalog:  # a team store: the records in a local folder outside the store's working folder
            self.records = tmp / "shared" / "records"
            monkeypatch.setenv("XFID_RECORDS_URL", str(self.records))
        else:
            monkeypatch.delenv("XFID_RECORDS_URL", raising=False)
            self.records = self.root / "records"
        self.checks = self.records.parent / "checks"
        self.cli = Cli(self.root, tmp)
        self.out = tmp / "out"
        self.out.mkdir()

    def ok(self, *args: Any) -> str:
        r = self.cli(*args)
        assert r.exit_code in (0, 1), r.output  # check exits 1 when it files issues
        return r.output

    def fill(self) -> None:
        self.ok("ingest", FIXTURES / "records")
        self.ok("check", "--actor", "t")
        self.ok("ingest", write(self.tmp / "more.csv", 5, "m"))
        self.ok("check", "--actor", "t")

    def part(self) -> Path:
        return sorted(self.records.rglob("part-*.parquet"))[0]

    def state(self) -> dict[str, Any]:
        """The sha256 of every file of the store (folder, records, checks) and, for a team store,
        every row of its catalog tables."""
        files = {}
        for top in {self.root, self.records, self.checks}:
            for f in sorted(top.rglob("*")) if top.exists() else []:
                if f.is_file():
                    files[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
        out: dict[str, Any] = {"files": files}
        if self.url:
            import psycopg

            with psycopg.connect(self.url) as c:
                for t in ("sources", "parts", "checks", "issues", "observations", "transitions"):
                    out[t] = [repr(r) for r in c.execute(f"SELECT * FROM {t} ORDER BY 1")]
        return out


@pytest.fixture
def team(tmp_path: Path, catalog: str | None, monkeypatch: pytest.MonkeyPatch) -> Team:
    monkeypatch.setenv("XFID_CONFIG", str(CONFIG))
    t = Team(tmp_path, catalog, monkeypatch)
    t.fill()
    return t


def targets(t: Team) -> dict[str, Path]:
    """Each way of naming a file of the store (the db of a SQLite store; a part for a team store,
    whose database is on the server)."""
    db = t.root / "xfid.db"
    victim = db if db.is_file() else t.part()
    link = t.out / "link.out"
    link.symlink_to(victim)
    hard = t.out / "hard.out"
    os.link(victim, hard)
    return {
        "store folder": t.root,
        "database": db,
        "wal": t.root / "xfid.db-wal",
        "part": t.part(),
        "check": t.checks / "check-2.parquet",
        "symlink": link,
        "hard link": hard,
        "dotdot": t.out / ".." / victim.relative_to(t.tmp),
        "new file in records": t.records / "fidelity=measured" / "new.csv",
        "folder holding the store": t.tmp,
    }


def commands(dest: Path | str) -> list[list[str]]:
    """Every command with an output path, the path first (its check runs before anything else)."""
    d = str(dest)
    return [
        ["export", "-o", d, "--format", "csv"],
        ["export", "-o", d, "--format", "parquet"],
        ["export", "-o", d],
        ["report", "-o", d, "--html", "--since", "2026-01-01"],
        ["report", "-o", d],
        ["snapshot", "-o", d],
        ["correlate", "-o", d, "--format", "csv"],
        ["calibrate", "-o", d, "--candidate", "roofline", "--reference", "measured", "--target", "h100-sxm"],
        ["compare", "-o", d, "--baseline", str(BASELINE)],
        ["profile", "-o", d, "t100-a0"],
        ["roofline", "-o", d, "--target", "h100-sxm", "--gemm", "64,64,64"],
        ["roofline", "-o", d, "--target", "h100-sxm", "--gemm", "64,64,64", "--ingest"],
        ["rtl", "run", "gemm_tile", "--out", d],
        ["rtl", "run", "gemm_tile", "--build-dir", d],
        ["demo", "--out", d],
    ]


def test_no_output_path_can_write_into_the_store(team: Team):
    """Every command x every name of a store file: Error:, exit 2, no traceback, the store as it was."""
    before = team.state()
    cases = targets(team)
    seen = 0
    for name, dest in cases.items():
        for cmd in commands(dest):
            r = team.cli(*cmd)
            assert r.exit_code == 2, (name, cmd, r.output)
            assert "Error:" in r.output and "Traceback" not in r.output, (name, cmd, r.output)
            seen += 1
    assert seen == len(cases) * len(commands(Path("x")))
    assert team.state() == before


def test_the_python_api_refuses_the_same_paths(team: Team):
    from xfid.api import open_store
    from xfid.errors import XfidError

    before = team.state()
    files = {k: v for k, v in targets(team).items() if k != "folder holding the store"}
    with open_store(team.root, CONFIG) as s:
        for dest in files.values():
            for call in (lambda d: s.export("csv", d), lambda d: s.export("parquet", d),
                         lambda d: s.snapshot(d), lambda d: s.report("2026-01-01..2026-12-31", d, html=True)):
                with pytest.raises(XfidError, match="store"):
                    call(dest)
    assert team.state() == before


def test_a_store_the_process_was_not_pointed_at_is_refused_too(team: Team, tmp_path: Path):
    """A folder holding an xfid.db is a store even when no option names it (SQLite stores)."""
    other = Cli(tmp_path / "elsewhere", tmp_path)
    db = team.root / "xfid.db"
    if not db.is_file():
        pytest.skip("a team store keeps no database file to aim at")
    before = team.state()
    r = other("export", "-o", str(db), "--format", "csv")
    assert r.exit_code == 2 and "Error:" in r.output and "Traceback" not in r.output, r.output
    assert team.state() == before


def test_outputs_outside_the_store_are_written(team: Team):
    """The guard refuses only the store: the same commands write next to it."""
    for args, dest in ((["export", "--format", "csv"], team.out / "r.csv"), (["snapshot"], team.out / "b.json")):
        r = team.cli(*args, "-o", str(dest))
        assert r.exit_code == 0, r.output
        assert dest.stat().st_size > 0


def test_an_empty_output_name_is_an_error_not_stdout(team: Team):
    for cmd in commands(""):
        r = team.cli(*cmd)
        assert r.exit_code == 2 and "Error:" in r.output and "Traceback" not in r.output, (cmd, r.output)
        assert "empty name" in r.output or "Invalid value" in r.output, (cmd, r.output)
    r = team.cli("export", "-o", "", "--format", "csv")
    assert "empty name" in r.output and "measured" not in r.output  # nothing went to stdout
    from xfid.api import open_store
    from xfid.errors import XfidError

    with open_store(team.root, CONFIG) as s:
        for call in (lambda: s.export("csv", ""), lambda: s.snapshot(""), lambda: s.report(None, "")):
            with pytest.raises(XfidError, match="empty name"):
                call()


# --- doctor verifies what the check files hold ------------------------------------------------
def _today() -> str:
    return datetime.now(UTC).date().isoformat()


@pytest.mark.parametrize("damage", ["csv", "other check", "truncated", "missing", "snapshot"])
def test_doctor_reports_a_check_file_that_is_not_its_checks_rows(team: Team, damage: str):
    f2, f1 = team.checks / "check-2.parquet", team.checks / "check-1.parquet"
    assert f1.read_bytes() != f2.read_bytes()  # two checks of different data
    healthy = team.cli("doctor")
    assert healthy.exit_code == 0 and "healthy" in healthy.output, healthy.output
    if damage == "csv":
        f2.write_text("fidelity,target\nrtl,t100\n")
    elif damage == "other check":
        shutil.copy(f1, f2)
    elif damage == "truncated":
        f2.write_bytes(f2.read_bytes()[: f2.stat().st_size // 2])
    elif damage == "missing":
        f2.unlink()
    else:  # what `snapshot -o check-2.parquet` wrote before the guard: a valid Parquet of other columns
        r = team.cli("snapshot", "-o", str(team.out / "s.parquet"))
        assert r.exit_code == 0, r.output
        shutil.copy(team.out / "s.parquet", f2)
    r = team.cli("doctor")
    assert r.exit_code != 0 and "healthy" not in r.output, r.output
    kind = "missing_check_rows" if damage == "missing" else "bad_check_rows"
    assert kind in r.output and "check 2" in r.output, r.output
    r = team.cli("report", "--html", "-o", str(team.out / "r.html"), "--since", _today())
    assert r.exit_code == 2 and "Traceback" not in r.output and "KeyError" not in r.output, r.output
    assert "Error:" in r.output and "check 2" in r.output and "doctor" in r.output, r.output
    assert not (team.out / "r.html").exists()


def test_a_check_recorded_before_the_hash_is_verified_by_footer_and_rows(team: Team):
    """Older checks have no recorded hash: a file without xfid's footer, another store's, or with
    another row count is still reported."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from xfid.tracker import checkfiles

    f2 = team.checks / "check-2.parquet"
    data, n = f2.read_bytes(), pq.ParquetFile(f2).metadata.num_rows
    old = checkfiles.Saved(2, f2.name, n)  # no sha256: a check from before it was kept
    assert checkfiles.content_problem(data, old, None) is None
    assert "rows" in str(checkfiles.content_problem(data, checkfiles.Saved(2, f2.name, n + 1), None))
    assert "another store" in str(checkfiles.content_problem(data, old, "f" * 32))
    assert "Parquet" in str(checkfiles.content_problem(b"a,b\n", old, None))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"a": [1]}), sink)
    assert "footer" in str(checkfiles.content_problem(sink.getvalue().to_pybytes(), old, None))


def test_an_object_store_records_prefix_is_refused(tmp_path: Path):
    """A bucket's records are compared by URL prefix (an output named by URL never lands among them)."""
    from xfid import outfile
    from xfid.errors import XfidError

    owner = object()
    outfile.protect(owner, outfile.StoreArea("s3 store", (), urls=("s3://bucket/records",)))
    try:
        for dest in ("s3://bucket/records", "s3://bucket/records/fidelity=rtl/part-x.parquet"):
            with pytest.raises(XfidError, match="records of the store"):
                outfile.guard(dest)
        outfile.guard(str(tmp_path / "x.csv"))  # elsewhere: no refusal
        outfile.guard("s3://bucket/records-other/x")
    finally:
        outfile.unprotect(owner)


def test_the_records_of_a_store_no_option_names_are_refused(team: Team, tmp_path: Path):
    """A `fidelity=*` folder holding parts is a store's records, even a team store's this machine
    was not pointed at (no xfid.db beside them)."""
    other = Cli(tmp_path / "elsewhere", tmp_path)
    before = team.state()
    for dest in (team.part(), team.part().parent / "new.csv"):
        r = other("export", "-o", str(dest), "--format", "csv", env={"XFID_RECORDS_URL": "",
                                                                      "XFID_DATABASE_URL": ""})
        assert r.exit_code == 2 and "Error:" in r.output and "Traceback" not in r.output, r.output
    assert team.state() == before
