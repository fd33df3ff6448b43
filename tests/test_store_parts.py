"""Temp parts: rows split by fidelity, each row group sorted by key, provenance kept with its row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from xfid import parts
from xfid.ingest import IngestOptions, ingest
from xfid.store import Store

pytestmark = pytest.mark.usefixtures("catalog")  # each test on SQLite and on PostgreSQL (tests/servers.py)

FIDS = np.array(["measured", "rtl", "roofline"])
METRICS = np.array(["latency", "cycles", "bytes"])
UNITS = np.array(["ms", "cycles", "B"])


def records(n: int, seed: int = 0, fids: int = 3) -> pa.Table:
    """Random records whose value is the 1-based row number (so provenance can be checked)."""
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 3, n)
    return pa.table({
        "fidelity": FIDS[rng.integers(0, fids, n)],
        "target": np.array(["t2", "t1"])[rng.integers(0, 2, n)],
        "workload": np.array([f"w{i}" for i in range(9, -1, -1)])[rng.integers(0, 10, n)],
        "op": np.array(["", "gemm", "attn", "add"])[rng.integers(0, 4, n)],
        "metric": METRICS[m],
        "value": np.arange(1, n + 1, dtype=np.float64),
        "unit": UNITS[m],
        "run": np.array(["r1", "r2"])[rng.integers(0, 2, n)],
    })


def check_store(store: Store, src: pa.Table, word: str, first: int, scale: dict[str, float]) -> None:
    """Every input row is in its fidelity's part once, with its source_loc; row groups are sorted."""
    seen = 0
    for f in store.part_files():
        fid = f.parent.name.split("=", 1)[1]
        pf = pq.ParquetFile(f)
        assert pf.schema_arrow.equals(parts.FILE_SCHEMA)
        for g in range(pf.num_row_groups):
            t = pf.read_row_group(g)
            keys = list(zip(*(t.column(k).to_pylist() for k, _ in parts.SORT_KEYS), strict=True))
            assert keys == sorted(keys)  # sorted by (target, workload, op, metric) within the group
            metric = np.array(t.column("metric").to_pylist())
            row = np.rint(t.column("value").to_numpy() / np.vectorize(scale.get)(metric)).astype(int)
            want = src.take(pa.array(row - 1))
            assert want.column("fidelity").to_pylist() == [fid] * t.num_rows
            for k in ("target", "workload", "op", "metric", "run"):
                assert t.column(k).to_pylist() == want.column(k).to_pylist()
            assert t.column("source_loc").to_pylist() == [f"{word} {r - 1 + first}" for r in row]
            # equal keys keep the input order (a stable sort)
            for a, b in zip(range(len(keys) - 1), range(1, len(keys)), strict=True):
                if keys[a] == keys[b]:
                    assert row[a] < row[b]
            seen += t.num_rows
    assert seen == src.num_rows


SCALE = {"latency": 1e-3, "cycles": 1.0, "bytes": 1.0}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_parts_are_sorted_and_keep_each_rows_provenance(tmp_path, monkeypatch, fmt):
    # small batches and row groups: several batches per row group, several row groups per part
    monkeypatch.setattr("xfid.adapters.records.BATCH_ROWS", 700)
    monkeypatch.setattr(parts, "ROW_GROUP", 1000)
    src = records(5000)
    f = tmp_path / f"r.{fmt}"
    if fmt == "csv":
        pcsv.write_csv(src, f)
    else:
        pq.write_table(src, f, row_group_size=900)
    with Store(tmp_path / "s") as s:
        assert ingest(s, [f], IngestOptions(target=None)).rows == 5000
        check_store(s, src, "line" if fmt == "csv" else "row", 2 if fmt == "csv" else 1, SCALE)
        groups = [pq.ParquetFile(p).metadata.num_row_groups for p in s.part_files()]
        assert len(groups) == 3 and all(g >= 2 for g in groups)


def test_one_batch_one_fidelity_already_sorted_is_written_as_is(tmp_path):
    src = records(3000, fids=1).sort_by([(k, "ascending") for k, _ in parts.SORT_KEYS])
    src = src.set_column(5, "value", pa.array(np.arange(1, 3001, dtype=np.float64)))
    f = tmp_path / "r.parquet"
    pq.write_table(src, f)
    with Store(tmp_path / "s") as s:
        ingest(s, [f], IngestOptions())
        check_store(s, src, "row", 1, SCALE)


def test_order_of_matches_lexsort_and_sees_sorted_input():
    rng = np.random.default_rng(3)
    # keys of 3, 16, 21, 32, 35, 47 and 60 bits: one byte, one 16-bit digit, a 16-bit digit and
    # a byte, two and three 16-bit digits (the radix passes), and past 48 bits (numpy's sort)
    for card in ([3, 5], [7], [300, 200], [2, 200, 500, 6], [4096, 4096, 256], [70_000, 70_000, 5],
                 [2**16, 2**16, 2**15], [2**20, 2**20, 2**20], [2, 2]):
        codes = [rng.integers(0, c, 20_000).astype(np.int32) for c in card]
        assert np.array_equal(parts.order_of(codes), np.lexsort(list(reversed(codes))))
    assert parts.order_of([np.array([0, 0, 1, 2], dtype=np.int32)]) is None


def test_the_part_writer_options_write_what_arrows_defaults_write(tmp_path):
    """WRITE_BATCH (values handed to the column writers at a time; Arrow's default is 1,024)
    changes how fast a part is written, not what: the same rows, row groups and statistics."""
    src = records(300_000, fids=1)  # a row group of several write batches
    f = tmp_path / "r.parquet"
    pq.write_table(src, f)
    with Store(tmp_path / "s") as s:
        ingest(s, [f], IngestOptions())
        (part,) = s.part_files()
    table = pq.read_table(part, schema=parts.FILE_SCHEMA)
    plain = {k: v for k, v in parts.WRITE_OPTIONS.items() if k != "write_batch_size"}
    files = []
    for name, opts in (("fast", parts.WRITE_OPTIONS), ("plain", plain)):
        out = tmp_path / f"{name}.parquet"
        with pq.ParquetWriter(out, parts.FILE_SCHEMA, **opts) as w:
            w.write_table(table, row_group_size=parts.ROW_GROUP)
        files.append(pq.ParquetFile(out))
    assert parts.WRITE_OPTIONS["write_batch_size"] > 1024
    fast, ref = files
    assert fast.read().equals(ref.read()) and fast.read().equals(table)
    assert fast.metadata.num_row_groups == ref.metadata.num_row_groups
    for g in range(ref.metadata.num_row_groups):
        for i in range(ref.metadata.num_columns):
            a, b = fast.metadata.row_group(g).column(i), ref.metadata.row_group(g).column(i)
            assert (a.path_in_schema, a.is_stats_set) == (b.path_in_schema, b.is_stats_set)
            if b.is_stats_set:
                assert a.statistics.equals(b.statistics), a.path_in_schema


def test_constant_and_null_columns_survive_the_sort(tmp_path):
    """Columns that hold one value (or none) are rebuilt, not gathered: same values as before."""
    src = records(2000)
    src = src.append_column("hardware", pa.array(["gpu-x"] * 2000)).append_column("flags", pa.nulls(2000, pa.string()))
    f = tmp_path / "r.parquet"
    pq.write_table(src, f)
    with Store(tmp_path / "s") as s:
        ingest(s, [f], IngestOptions(meta={"k": "v"}))
        t = s.read()
    assert set(t.column("hardware").to_pylist()) == {"gpu-x"}
    assert t.column("flags").null_count == 2000
    assert set(t.column("config").to_pylist()) == {'{"k":"v"}'}
    assert len(set(t.column("timestamp").to_pylist())) == 1
    assert set(t.column("source").to_pylist()) == {"xfid-records"}


def test_a_damaged_page_anywhere_is_an_error_naming_the_part(tmp_path):
    """Reads verify page checksums: a flipped byte in any column's data is caught, not read as a value."""
    from xfid.errors import StoreError

    f = tmp_path / "r.parquet"
    pq.write_table(records(3000, fids=1), f)
    with Store(tmp_path / "s") as s:
        ingest(s, [f], IngestOptions())
        part = s.part_files()[0]
        good = part.read_bytes()
        md = pq.ParquetFile(part).metadata.row_group(0)
        for i in range(md.num_columns):
            c = md.column(i)
            end = (c.dictionary_page_offset or c.data_page_offset) + c.total_compressed_size
            data = bytearray(good)
            data[end - 1] ^= 0xFF  # the last byte of the column chunk: inside its last page's data
            part.write_bytes(bytes(data))
            with pytest.raises(StoreError, match=part.name):
                s.read()
        part.write_bytes(good)
        assert s.read().num_rows == 3000


def test_each_part_carries_its_provenance_in_the_footer(tmp_path):
    """The footer of every part of a source names the store, the part, its siblings and the
    source's manifest row: enough to rebuild the catalog."""
    import json

    from xfid.store import PART_META

    f = tmp_path / "r.parquet"
    pq.write_table(records(3000), f)
    with Store(tmp_path / "s") as s:
        ingest(s, [f], IngestOptions(meta={"k": "v"}))
        (src,) = s.sources()
        rows = {r["file"]: r for r in map(dict, s.conn.execute("SELECT * FROM parts"))}
        assert len(rows) == 3
        for part in s.part_files():
            doc = json.loads(pq.ParquetFile(part).metadata.metadata[PART_META.encode()])
            rel = str(part.relative_to(s.records))
            assert doc["store_id"] == s.store_id and doc["fidelity"] == rows[rel]["fidelity"]
            assert part.name == f"part-{doc['part']}.parquet" and doc["rows"] == rows[rel]["rows"]
            assert {k: v["rows"] for k, v in doc["parts"].items()} == {r["fidelity"]: r["rows"] for r in rows.values()}
            assert doc["source"] == src


@pytest.mark.parametrize("start", [1, 2**31 - 50])
def test_lazy_source_locs_are_the_plain_strings(start):
    """_locs builds "row N" from int32 numbers where they fit (int64 past 2**31): the same
    strings as formatting each row's number, in the sorted order."""
    t = pa.table({"v": np.arange(100)})
    rng = np.random.default_rng(5)
    idx = [np.sort(rng.choice(100, 40, replace=False)), None]
    pieces = [parts._Piece(parts._Batch(t, ("row", start + 100 * k), {}), i) for k, i in enumerate(idx)]
    nums = [start + 100 * k + (np.arange(100) if i is None else i) for k, i in enumerate(idx)]
    plain = [f"row {n}" for n in np.concatenate(nums).tolist()]
    order = rng.permutation(len(plain))
    assert parts._locs(pieces, None).to_pylist() == plain
    assert parts._locs(pieces, order).to_pylist() == [plain[i] for i in order]
