"""Corrupted stores are detected with the file named; `xfid doctor --repair` fixes what it can."""

from __future__ import annotations

import json

import pytest

HEADER = "fidelity,target,workload,op,metric,stat,value,unit\n"


def make_store(xfid_cli, tmp_path, n_files=2):
    files = []
    for i in range(n_files):
        f = tmp_path / f"r{i}.csv"
        f.write_text(HEADER + "".join(f"measured,h100-sxm,w{i},op{j},latency,value,{j + 1},ms\n" for j in range(200)))
        files.append(f)
        assert xfid_cli("ingest", f).exit_code == 0
    return files


def parts(store):
    return sorted((store / "records").rglob("part-*.parquet"))


def test_healthy_store(xfid_cli, tmp_path):
    make_store(xfid_cli, tmp_path)
    r = xfid_cli("doctor")
    assert r.exit_code == 0 and "2 parts, 400 rows checked" in r.output and "healthy" in r.output


@pytest.mark.parametrize("damage", ["truncate", "bitflip"])
def test_damaged_part_is_named_and_quarantined(xfid_cli, tmp_path, damage):
    make_store(xfid_cli, tmp_path)
    bad = parts(xfid_cli.store)[0]
    data = bytearray(bad.read_bytes())
    if damage == "truncate":
        bad.write_bytes(data[: len(data) // 2])
    else:
        data[len(data) // 3] ^= 0xFF  # inside a data page: caught by the page checksum
        bad.write_bytes(bytes(data))
    r = xfid_cli("export")
    assert r.exit_code == 2 and r.output.startswith("Error: ") and bad.name in r.output and "xfid doctor" in r.output
    r = xfid_cli("correlate")  # the engine's own reader checks the page CRCs too
    assert r.exit_code == 2 and r.output.startswith("Error: ") and bad.name in r.output and "xfid doctor" in r.output
    r = xfid_cli("doctor")
    assert r.exit_code == 1 and "corrupt_part" in r.output and bad.name in r.output
    r = xfid_cli("doctor", "--repair")
    assert r.exit_code == 0 and "repaired" in r.output
    recs = [json.loads(x) for x in xfid_cli("export").output.splitlines()]
    assert len(recs) == 200  # the good source is untouched
    assert len(list((xfid_cli.store / "quarantine").rglob("*.parquet"))) == 1
    assert xfid_cli("doctor").exit_code == 0


def test_missing_part_is_dropped_and_can_be_ingested_again(xfid_cli, tmp_path):
    files = make_store(xfid_cli, tmp_path)
    p0 = parts(xfid_cli.store)[0]
    p0.unlink()
    r = xfid_cli("doctor")
    assert r.exit_code == 1 and "missing_part" in r.output and "--repair" in r.output
    assert xfid_cli("doctor", "--repair").exit_code == 0
    assert len(xfid_cli("export").output.splitlines()) == 200
    # the dropped source can be ingested again
    r = xfid_cli("ingest", *files)
    assert "200 new rows from 1 file(s); 1 already ingested" in r.output


def test_an_unregistered_part_is_never_repaired_away(xfid_cli, tmp_path):
    """A committed-looking part the manifest does not know: the catalog is not this store's;
    --repair changes nothing, every command says how to rebuild the catalog."""
    make_store(xfid_cli, tmp_path)
    stranger = parts(xfid_cli.store)[0].parent / "part-0000orphan.parquet"
    stranger.write_bytes(parts(xfid_cli.store)[0].read_bytes())
    before = sorted((xfid_cli.store / "records").rglob("*"))
    r = xfid_cli("doctor")
    assert r.exit_code == 1 and "catalog_mismatch" in r.output and "--rebuild-catalog" in r.output
    r = xfid_cli("doctor", "--repair")
    assert r.exit_code == 1 and "does not fix" in r.output
    for cmd in (("export",), ("summary",), ("check",), ("ingest", str(tmp_path / "r0.csv"))):
        r = xfid_cli(*cmd)
        assert r.exit_code == 2 and r.output.startswith("Error: ") and "--rebuild-catalog" in r.output, cmd
    assert sorted((xfid_cli.store / "records").rglob("*")) == before
    assert not (xfid_cli.store / "quarantine").exists()


def test_corrupted_database_is_named(xfid_cli, tmp_path):
    make_store(xfid_cli, tmp_path)
    db = xfid_cli.store / "xfid.db"
    for extra in ("xfid.db-wal", "xfid.db-shm"):
        (xfid_cli.store / extra).unlink(missing_ok=True)
    db.write_bytes(b"this is not sqlite" * 100)
    r = xfid_cli("doctor")
    assert r.exit_code == 1 and "db_corrupt" in r.output and "xfid.db" in r.output and "Traceback" not in r.output
    r = xfid_cli("export")
    assert r.exit_code == 2 and "xfid.db" in r.output and "Traceback" not in r.output
