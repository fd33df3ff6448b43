"""xfid-records: the normalized schema itself, as CSV, JSON lines or Parquet."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from xfid.adapters import jsonutil
from xfid.adapters.base import Adapter, ReadContext, head_text
from xfid.schema import COLUMNS, REQUIRED, with_lazy_loc

TEXT_COLUMNS = ("fidelity", "target", "workload", "op", "metric", "stat", "unit", "run", "hardware",
                "software", "config", "null_reason", "flags", "source_loc", "timestamp")
ALLOWED = tuple(c for c in COLUMNS if c not in ("source", "source_id", "source_path"))
BATCH_ROWS = 1 << 20
"""Rows per batch handed to the normalizer (small Parquet row groups and CSV blocks are
grouped up to it)."""
WHOLE_CSV_BYTES = 256 << 20
"""CSV files up to this size are parsed in one multi-threaded read; larger ones are streamed."""
CSV_BLOCK = 4 << 20
"""Bytes per CSV block: many blocks keep both cores busy (one 64 MB block each did not)."""
MAX_LINE_BYTES = 2 << 20
"""Longest JSON line read: a record's strings are capped (4 KiB keys, 64 KiB provenance, see
xfid.schema), so a longer line is refused before it is held in memory."""
_DICT = pa.dictionary(pa.int32(), pa.string())
_DICT_COLUMNS = frozenset(c for c in TEXT_COLUMNS if c not in ("source_loc", "timestamp"))


def _regroup(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """Record batches (one per CSV block) as tables of at least `rows` rows (the last: the rest)."""
    acc: list[pa.RecordBatch] = []
    n = 0
    for b in batches:
        acc.append(b)
        n += b.num_rows
        if n >= rows:
            yield pa.Table.from_batches(acc)
            acc, n = [], 0
    if acc:
        yield pa.Table.from_batches(acc)


_END = object()


def read_ahead(items: Iterator[Any]) -> Iterator[Any]:
    """The items of `items`, the next one produced on a thread while the caller works on this one.

    At most one item waits ahead (the thread starts the next only once the caller has taken
    the one before), so memory grows by one item. An error of `items` is raised here, after
    the items before it; closing this generator (the caller stopped, e.g. on an error of its
    own) stops the thread once the item it is producing is done.
    """
    box: queue.SimpleQueue[tuple[Any, BaseException | None]] = queue.SimpleQueue()
    room = threading.Semaphore(1)  # released when the caller takes an item
    stop = threading.Event()

    def produce() -> None:
        try:
            while True:
                while not room.acquire(timeout=0.05):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                item = next(items, _END)
                box.put((item, None))
                if item is _END:
                    return
        except BaseException as e:  # handed to the caller, in order
            box.put((None, e))

    worker = threading.Thread(target=produce, name="xfid-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item, error = box.get()
            room.release()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        worker.join()


def _fill_empty(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary column with each null as "" (an empty CSV field of `op`)."""
    out = []
    for c in col.chunks:
        if c.null_count:
            d = c.dictionary.to_pylist()
            if "" not in d:
                d.append("")
            c = pa.DictionaryArray.from_arrays(pc.fill_null(c.indices, d.index("")), pa.array(d, pa.string()))
        out.append(c)
    return pa.chunked_array(out, col.type)


class RecordsAdapter(Adapter):
    name = "xfid-records"
    fidelity = None
    formats = "xfid normalized records: CSV, JSON lines or Parquet with fidelity,target,workload,op,metric,value"
    extensions: ClassVar[tuple[str, ...]] = (".csv", ".jsonl", ".parquet")

    @staticmethod
    def _looks_like(names: set[str]) -> bool:
        """metric, value and op present, and most other required columns (flags may add the rest)."""
        return {"metric", "value", "op"} <= names and len(names & set(REQUIRED)) >= 4

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if head.startswith(b"PAR1"):
            try:
                names = set(pq.read_schema(path).names)
            except (OSError, pa.ArrowInvalid):
                return False
            return cls._looks_like(names)
        text = head_text(head)
        first = text.splitlines()[0] if text.strip() else ""
        if first.startswith("{"):
            try:
                obj = json.loads(first)
            except (ValueError, RecursionError):  # RecursionError: nested too deep for json
                return False
            return isinstance(obj, dict) and cls._looks_like(set(obj))
        cols = {c.strip().strip('"') for c in first.split(",")}
        return cls._looks_like(cols)

    def read(self, ctx: ReadContext) -> Iterator[pa.Table]:
        with ctx.path.open("rb") as f:
            data_head = f.read(4096)
        if not data_head.strip():
            raise ctx.error(None, "the file is empty")
        if data_head.startswith(b"PAR1"):
            return self._parquet(ctx)
        text_head = head_text(data_head).lstrip()
        if text_head.startswith("{"):
            return self._jsonl(ctx)
        return self._csv(ctx)

    def _check_columns(self, ctx: ReadContext, names: list[str], where: str) -> None:
        bad = [n for n in names if n not in ALLOWED]
        if bad:
            raise ctx.error(where, f"unknown column {bad[0]!r}", f"xfid-records columns are {', '.join(ALLOWED)}")
        missing = [c for c in REQUIRED if c not in names and getattr(ctx, c, None) is None]
        if missing:
            m = missing[0]
            fix = f"xfid-records needs {', '.join(REQUIRED)}"
            if m in ("target", "workload", "fidelity"):
                fix = f"add the column, or pass --{m} or set {m} in xfid-source.toml beside the file"
            raise ctx.error(where, f"missing required column {m!r}", fix)

    def _parquet(self, ctx: ReadContext) -> Iterator[pa.Table]:
        try:
            schema = pq.read_schema(ctx.path)
            # key-like text is read straight into dictionaries (what the schema stores), from the
            # file's own dictionary pages where it has them: no string per row is built, and
            # the normalizer has nothing left to encode
            text = [f.name for f in schema if f.name in _DICT_COLUMNS and pa.types.is_string(f.type)]
            pf = pq.ParquetFile(ctx.path, read_dictionary=text)
        except (OSError, pa.ArrowInvalid) as e:
            raise ctx.error(None, f"not a readable Parquet file: {e}") from None
        self._check_columns(ctx, pf.schema_arrow.names, "schema")

        def tables() -> Iterator[pa.Table]:
            row = 0
            for t in _regroup(pf.iter_batches(batch_size=BATCH_ROWS), BATCH_ROWS):
                if "source_loc" not in t.column_names:  # "row N", built by the store after sorting
                    t = with_lazy_loc(t, "row", row + 1)
                row += t.num_rows
                yield t

        # the next batch is decoded while the caller normalizes this one (Arrow decodes on
        # demand, so without this its threads would wait for the normalizer and it for them)
        yield from read_ahead(tables())

    def _csv(self, ctx: ReadContext) -> Iterator[pa.Table]:
        with ctx.path.open("rb") as f:
            head = f.read(1 << 16)
        if head.startswith(b"\xef\xbb\xbf"):
            head = head[3:]
        if not head.strip():
            raise ctx.error(None, "the file is empty")
        header = head.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip("\r")
        names = [c.strip().strip('"') for c in header.split(",")]
        self._check_columns(ctx, names, "line 1")
        # key-like text is read straight into dictionaries (what the schema stores)
        types: dict[str, Any] = {c: _DICT if c in _DICT_COLUMNS else pa.string() for c in TEXT_COLUMNS if c in names}
        if "value" in names:
            types["value"] = pa.float64()
        opts = {
            "read_options": pcsv.ReadOptions(block_size=CSV_BLOCK),
            "parse_options": pcsv.ParseOptions(newlines_in_values=False),
            # only an empty field is null: "NA", "null", "n/a" stay strings
            "convert_options": pcsv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                                   null_values=[""], quoted_strings_can_be_null=False),
        }
        try:
            if ctx.path.stat().st_size <= WHOLE_CSV_BYTES:
                # small enough to parse at once: Arrow's multi-threaded reader
                batches: Any = pcsv.read_csv(ctx.path, **opts).to_batches()
            else:
                batches = pcsv.open_csv(ctx.path, **opts)  # streamed: memory stays bounded
            row = 0
            for t in _regroup(batches, BATCH_ROWS):
                for c in ("op", "unit"):  # an empty op is ""; an empty unit is "" (the normalizer
                    # takes it only where the metric has one scale, never as seconds)
                    if c in t.column_names and t.column(c).null_count:
                        t = t.set_column(t.column_names.index(c), c, _fill_empty(t.column(c)))
                if "source_loc" not in t.column_names:  # "line N", built by the store after sorting
                    t = with_lazy_loc(t, "line", row + 2)
                row += t.num_rows
                yield t
        except pa.ArrowInvalid as e:
            bad = _first_bad_row(ctx.path.read_bytes(), len(names)) or _first_bad_value(ctx, names)
            if bad:
                raise ctx.error(bad[0], bad[1], "every row needs one field per header column") from None
            raise ctx.error(None, f"not a valid xfid-records CSV: {e}") from None

    def _jsonl(self, ctx: ReadContext) -> Iterator[pa.Table]:
        rows: list[dict[str, Any]] = []
        locs: list[str] = []
        for lineno, line in jsonutil.bounded_lines(ctx, MAX_LINE_BYTES,
                                                   "one record per line; a record's strings are at most 64 KiB"):
            if not line.strip():
                continue
            obj = jsonutil.loads(ctx, line, f"line {lineno}")
            if not isinstance(obj, dict):
                raise ctx.error(f"line {lineno}", "each line must be one JSON object")
            if lineno == 1 or (not rows and not locs):
                self._check_columns(ctx, list(obj), f"line {lineno}")
            bad = [k for k in obj if k not in ALLOWED]
            if bad:
                raise ctx.error(f"line {lineno}", f"unknown key {bad[0]!r}", f"xfid-records keys are {', '.join(ALLOWED)}")
            v = obj.get("value")
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ctx.error(f"line {lineno}", f"'value' must be a number, got {v!r}")
            for k in TEXT_COLUMNS:
                x = obj.get(k)
                if x is not None and k != "config" and not isinstance(x, str):
                    raise ctx.error(f"line {lineno}", f"{k!r} must be a string, got {x!r}")
            if isinstance(obj.get("config"), dict):
                obj["config"] = json.dumps(obj["config"], sort_keys=True, separators=(",", ":"))
            if "unit" in obj and obj["unit"] is None:
                obj["unit"] = ""  # written but empty: not "already canonical"
            rows.append(obj)
            locs.append(f"line {lineno}")
            if len(rows) >= BATCH_ROWS:
                yield self._json_table(rows, locs)
                rows, locs = [], []
        if rows:
            yield self._json_table(rows, locs)

    @staticmethod
    def _json_table(rows: list[dict[str, Any]], locs: list[str]) -> pa.Table:
        seen = set().union(*rows)
        names = [c for c in ALLOWED if c in seen or c == "source_loc"]
        cols: dict[str, Any] = {c: [r.get(c) for r in rows] for c in names if c != "source_loc"}
        if "value" in cols:
            cols["value"] = pa.array([None if x is None else float(x) for x in cols["value"]], pa.float64())
        if "n_samples" in cols:
            cols["n_samples"] = pa.array(cols["n_samples"], pa.int64())
        cols["source_loc"] = locs
        return pa.table(cols)


def _first_bad_row(raw: bytes, width: int) -> tuple[str, str] | None:
    """The first line whose field count differs from the header (slow path, errors only)."""
    import csv

    text = raw.decode("utf-8", errors="replace").splitlines()
    for lineno, fields in enumerate(csv.reader(text), 1):
        if fields and len(fields) != width:
            return f"line {lineno}", f"expected {width} fields, got {len(fields)}"
    return None


def _first_bad_value(ctx: ReadContext, names: list[str]) -> tuple[str, str] | None:
    """The first line whose `value` is not a number (slow path, errors only)."""
    import csv

    if "value" not in names:
        return None
    col = names.index("value")
    with ctx.path.open(encoding="utf-8-sig", errors="replace", newline="") as f:
        for lineno, fields in enumerate(csv.reader(f), 1):
            if lineno == 1 or len(fields) <= col or not fields[col].strip():
                continue
            try:
                float(fields[col])
            except ValueError:
                return f"line {lineno}", f"'value' must be a number, got {fields[col]!r}"
    return None

