"""A source is its bytes + adapter + context, whether it is hashed before or while it is read."""

from __future__ import annotations

import shutil

import pytest

from xfid.ingest import IngestOptions, ingest
from xfid.store import Store

pytestmark = pytest.mark.usefixtures("catalog")  # each test on SQLite and on PostgreSQL (tests/servers.py)

HEADER = "fidelity,target,workload,op,metric,stat,value,unit,run\n"


def write(path, n, start=0):
    path.write_text(HEADER + "".join(f"measured,t,w,op{i},latency,value,{i + start},us,r1\n" for i in range(n)))
    return path


def test_same_bytes_under_a_new_path_is_already_ingested(tmp_path):
    a = write(tmp_path / "a.csv", 40)
    b = tmp_path / "copy.csv"
    shutil.copy(a, b)
    with Store(tmp_path / "s") as s:
        r1 = ingest(s, [a], IngestOptions())  # a new path: hashed while it is read
        r2 = ingest(s, [b], IngestOptions())  # new path, known bytes: found once the hash is in
        r3 = ingest(s, [a], IngestOptions())  # a known path: hashed first, not read again
        assert (r1.rows, r2.rows, r3.rows) == (40, 0, 0)
        assert r2.files[0].already and r3.files[0].already
        assert r1.files[0].source_id == r2.files[0].source_id == r3.files[0].source_id
        assert s.read().num_rows == 40 and len(s.sources()) == 1
        assert not list((tmp_path / "s" / "records").rglob(".tmp-*"))


def test_changed_bytes_at_a_known_path_are_a_new_source(tmp_path):
    a = write(tmp_path / "a.csv", 10)
    with Store(tmp_path / "s") as s:
        first = ingest(s, [a], IngestOptions()).files[0]
        write(a, 12, start=100)
        second = ingest(s, [a], IngestOptions()).files[0]
        assert second.rows == 12 and second.source_id != first.source_id
        t = s.read()
        assert t.num_rows == 22
        run = {r["source_id"]: r["run"] for r in t.select(["source_id", "run"]).to_pylist()}
        assert run[second.source_id] == "r1"  # the file's run column, not the src- default
        assert len(s.sources()) == 2


def test_default_run_names_the_source(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("fidelity,target,workload,op,metric,value,unit\nmeasured,t,w,,latency,1,s\n")
    with Store(tmp_path / "s") as s:
        sid = ingest(s, [a], IngestOptions()).files[0].source_id
        assert s.read().column("run").to_pylist() == [f"src-{sid[:10]}"]


SECRET = "root:$6$SECRETHASH$abcdef:19000:0:99999:7:::"


def test_directory_ingest_does_not_follow_links_out_of_the_tree(xfid_cli, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text(SECRET + "\n")
    (outside / "more.csv").write_text(HEADER + "measured,t,w,op,latency,value,1,us,r1\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    write(tree / "good.csv", 5)
    (tree / "xfid-source.toml").write_text('adapter = "xfid-records"\n')  # every file read as records
    (tree / "link.csv").symlink_to(outside / "shadow")
    (tree / "sub").symlink_to(outside, target_is_directory=True)
    (tree / "alias.csv").symlink_to(tree / "good.csv")  # inside the tree: followed
    r = xfid_cli("ingest", tree)
    assert r.exit_code == 0, r.output
    assert "SECRETHASH" not in r.output
    assert f"skipped {tree / 'link.csv'}: a symbolic link out of {tree}: not followed" in r.output
    assert f"skipped {tree / 'sub'}: a symbolic link to a directory: not followed" in r.output
    assert "5 new rows from 1 file(s); 1 already ingested" in r.output
    with Store(xfid_cli.store, create=False) as s:
        paths = {x["path"] for x in s.sources()}
    assert paths == {str(tree / "alias.csv")} or paths == {str(tree / "good.csv")}


def test_an_error_quotes_a_short_escaped_excerpt_of_the_file(xfid_cli, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "measured,t,w,op,latency,value,\x1b[2J\u202e" + "9" * 20_000 + "x,us,r1\n")
    r = xfid_cli("ingest", bad)
    assert r.exit_code == 2 and r.output.startswith("Error: ") and str(bad) in r.output
    assert len(r.output) < 800 and "\x1b" not in r.output and "\u202e" not in r.output


@pytest.mark.parametrize(("toml", "key"), [
    ('skip = "no"\n', "'skip'"),
    ("target = 5\n", "'target'"),
    ('meta = "x"\n', "'meta'"),
    ('[files."a.csv"]\nrun = ["r"]\n', "'run'"),
    ('files = 3\n', "'files'"),
])
def test_sidecar_values_of_the_wrong_type_are_an_error(xfid_cli, tmp_path, toml, key):
    d = tmp_path / "d"
    d.mkdir()
    write(d / "a.csv", 3)
    (d / "xfid-source.toml").write_text(toml)
    r = xfid_cli("ingest", d)
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "xfid-source.toml" in r.output, r.output
    assert key in r.output and "Traceback" not in r.output
    assert not (xfid_cli.store / "records").exists() or not list((xfid_cli.store / "records").rglob("*.parquet"))


def test_sidecar_skip_true_still_skips(xfid_cli, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    write(d / "a.csv", 3)
    (d / "xfid-source.toml").write_text('[files."a.csv"]\nskip = true\n')
    r = xfid_cli("ingest", d)
    assert r.exit_code == 0 and "skipped by xfid-source.toml" in r.output


def test_a_probes_results_xml_is_part_of_its_source(tmp_path):
    """A test that now fails in results.xml makes the probe file a new source, not 'already ingested'."""
    from tests.conftest import FIXTURES

    out = FIXTURES / "rtl" / "probe_output"
    d = tmp_path / "run"
    d.mkdir()
    probe = shutil.copy(out / "xfid_rtl.jsonl", d / "xfid_rtl.jsonl")
    shutil.copy(out / "results.xml", d / "results.xml")
    with Store(tmp_path / "s") as s:
        first = ingest(s, [probe], IngestOptions()).files[0]
        assert first.rows > 0
        assert ingest(s, [probe], IngestOptions()).files[0].already  # same bytes everywhere: a no-op
        xml = (d / "results.xml").read_text()
        tag = '<testcase classname="test_dma" name="test_dma_transfers" time="0.192">'
        assert tag in xml
        (d / "results.xml").write_text(xml.replace(tag, tag + '<failure message="now it fails" />'))
        second = ingest(s, [probe], IngestOptions()).files[0]
        assert not second.already and second.rows == first.rows and second.source_id != first.source_id
