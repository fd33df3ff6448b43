"""xfid-records reads, fast paths against the plain reads they replaced.

Parquet: key-like text is read straight into dictionaries (`read_dictionary`) instead of every
column as the file's Arrow schema says (strings per row, then encoded by the normalizer): the
normalized batches are the same, row for row, and the errors about bad text still name the
file and the row. Parquet: the next batch is read on a thread (`read_ahead`) while this one
is normalized: the same batches, in order, the same errors. (Streamed CSV gains nothing from
it, Arrow's CSV reader already reads ahead: 0.996 of the time, 4M rows; it is checked here
against the whole-file read.)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xfid.adapters.base import ReadContext, iter_batches
from xfid.adapters.records import RecordsAdapter
from xfid.errors import XfidError
from xfid.schema import normalize, with_lazy_loc


def _records(n: int, seed: int = 0) -> pa.Table:
    """Plain string columns (as pandas or a plain pyarrow table writes them): repeated keys, a
    high-cardinality workload (the writer falls back from dictionary to plain pages), empty
    ops, non-ASCII text and nulls in an optional column."""
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 3, n)
    hw = np.array(["gpu-é", "", "gpu-x"], dtype=object)[rng.integers(0, 3, n)]
    hw[rng.random(n) < 0.2] = None
    return pa.table({
        "fidelity": np.array(["measured", "rtl", "roofline"])[rng.integers(0, 3, n)],
        "target": np.array(["t2", "t1"])[rng.integers(0, 2, n)],
        "workload": np.array([f"w{i}" for i in rng.integers(0, n, n)]),
        "op": np.array(["", "gemm", "attn·x"])[rng.integers(0, 3, n)],
        "metric": np.array(["latency", "cycles", "bytes"])[m],
        "value": rng.lognormal(0, 1, n),
        "unit": np.array(["ms", "cycles", "B"])[m],
        "run": np.array(["r1", "r2"])[rng.integers(0, 2, n)],
        "hardware": pa.array(hw, pa.string()),
    })


def _plain_read(path):
    """The read before: the batches as the file's schema gives them (plain strings), each
    row's source_loc "row N"."""
    pf = pq.ParquetFile(path)
    row = 1
    for b in pf.iter_batches(batch_size=1 << 20):
        yield with_lazy_loc(pa.Table.from_batches([b]), "row", row)
        row += b.num_rows


def _normalized(tables, path):
    defaults = {"source": "xfid-records", "source_path": str(path), "source_id": "s" * 64, "run": "src"}
    out = [normalize(t, source_path=str(path), defaults=defaults) for t in tables]
    return pa.concat_tables(out).cast(pa.schema([(f.name, f.type.value_type if pa.types.is_dictionary(f.type)
                                                   else f.type) for f in out[0].schema]))


def test_dictionary_read_normalizes_to_the_plain_reads_rows(tmp_path):
    src = _records(30_000)
    f = tmp_path / "r.parquet"
    pq.write_table(src, f, row_group_size=7_000, dictionary_pagesize_limit=4096)
    assert pq.ParquetFile(f).schema_arrow.field("target").type == pa.string()  # plain in the file's schema
    ctx = ReadContext(path=f)
    batches = list(iter_batches(RecordsAdapter().read(ctx)))
    for name in ("target", "workload", "op", "metric", "unit", "run", "hardware"):
        assert pa.types.is_dictionary(batches[0].schema.field(name).type), name
    assert pa.types.is_floating(batches[0].schema.field("value").type)
    fast = _normalized(batches, f)
    plain = _normalized(list(_plain_read(f)), f)
    assert fast.num_rows == 30_000
    assert fast.equals(plain)
    assert fast.column("hardware").null_count == plain.column("hardware").null_count > 0


def test_a_file_with_dictionary_columns_reads_as_before(tmp_path):
    src = _records(5_000)
    src = pa.table({n: (c.dictionary_encode() if pa.types.is_string(c.type) else c)
                    for n, c in zip(src.column_names, src.columns, strict=True)})
    f = tmp_path / "r.parquet"
    pq.write_table(src, f, row_group_size=2_000)
    fast = _normalized(list(iter_batches(RecordsAdapter().read(ReadContext(path=f)))), f)
    assert fast.equals(_normalized(list(_plain_read(f)), f))


@pytest.mark.parametrize(("column", "values", "match"), [
    ("metric", ["latency"] * 2999 + ["nonsense"], r"r\.parquet, row 3000: unknown metric 'nonsense'"),
    ("target", ["t1"] * 1499 + [None] * 1501, r"r\.parquet, row 1500: missing 'target'"),
    ("op", list(range(3000)), r"column 'op' must hold text"),
])
def test_bad_text_is_still_named_with_its_row(tmp_path, column, values, match):
    src = _records(3_000)
    src = src.set_column(src.column_names.index(column), column, pa.array(values))
    f = tmp_path / "r.parquet"
    pq.write_table(src, f, row_group_size=1_000)
    ctx = ReadContext(path=f)
    with pytest.raises(XfidError, match=match):
        for b in iter_batches(RecordsAdapter().read(ctx)):
            normalize(b, source_path=str(f), defaults={"source": "xfid-records", "source_path": str(f),
                                                       "source_id": "s" * 64, "run": "src"})


def test_read_ahead_gives_the_items_in_order_one_ahead_at_most():
    import time

    from xfid.adapters.records import read_ahead

    made = []

    def items():
        for i in range(6):
            made.append(i)
            yield i

    got = []
    for x in read_ahead(items()):
        time.sleep(0.02)  # the thread has time to run ahead, if it would
        assert len(made) <= x + 2  # this one and at most the next
        got.append(x)
    assert got == list(range(6))


def test_read_ahead_raises_the_error_after_the_items_before_it_and_stops_when_closed():
    import threading

    from xfid.adapters.records import read_ahead

    def failing():
        yield 1
        yield 2
        raise ValueError("bad page")

    got = []
    with pytest.raises(ValueError, match="bad page"):
        for x in read_ahead(failing()):
            got.append(x)
    assert got == [1, 2]

    def endless():
        i = 0
        while True:
            i += 1
            yield i

    it = read_ahead(endless())
    assert next(it) == 1
    it.close()  # the caller stopped: the thread ends
    assert not [t for t in threading.enumerate() if t.name == "xfid-read-ahead"]


def test_streamed_csv_gives_the_whole_reads_rows_and_errors(tmp_path, monkeypatch):
    import pyarrow.csv as pcsv

    from xfid.adapters import records

    src = _records(20_000)
    f = tmp_path / "r.csv"
    pcsv.write_csv(src, f)

    def normalized():
        return _normalized(list(iter_batches(RecordsAdapter().read(ReadContext(path=f)))), f)

    whole = normalized()
    monkeypatch.setattr(records, "WHOLE_CSV_BYTES", 0)  # streamed
    monkeypatch.setattr(records, "CSV_BLOCK", 64 << 10)
    monkeypatch.setattr(records, "BATCH_ROWS", 3_000)
    streamed = normalized()
    assert streamed.num_rows == 20_000 and streamed.equals(whole)
    assert streamed.column("source_loc")[4_321].as_py() == "line 4323"

    lines = f.read_bytes().splitlines(keepends=True)
    lines[15_000] = b'"measured","t1","w1","gemm","latency",oops,"ms","r1",""\n'
    f.write_bytes(b"".join(lines))
    with pytest.raises(XfidError, match=r"r\.csv, line 15001: 'value' must be a number, got 'oops'"):
        normalized()
