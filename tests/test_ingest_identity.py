"""A source is its bytes + adapter + context, whether it is hashed before or while it is read."""

from __future__ import annotations

import shutil

from xfid.ingest import IngestOptions, ingest
from xfid.store import Store

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
