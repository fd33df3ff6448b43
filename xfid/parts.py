"""Temp parts of one source: batches split by fidelity, each row group sorted by key, written on two threads."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from xfid.convert import zeros_index
from xfid.schema import SCHEMA, lazy_loc, loc_strings

FILE_SCHEMA = pa.schema([f for f in SCHEMA if f.name != "fidelity"])
SORT_KEYS = [("target", "ascending"), ("workload", "ascending"), ("op", "ascending"), ("metric", "ascending")]
ROW_GROUP = 1 << 20
STATS_COLUMNS = ("target", "workload", "op", "metric", "stat", "value", "run", "source_id", "timestamp")
"""Columns with min/max statistics: those readers filter on (xfid's own reads, `export`
filters, `as_of`), so row groups can be skipped. Statistics on every column cost a quarter
to a third of the write and prune nothing xfid asks for."""
WRITE_BATCH = 1 << 16
WRITE_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "write_page_checksum": True,  # `xfid doctor` and reads name a damaged part by its checksums
    # source_loc is unique per row and value mostly so: a dictionary attempt is wasted work
    "use_dictionary": [n for n in FILE_SCHEMA.names if n not in ("source_loc", "value")],
    "write_statistics": list(STATS_COLUMNS),
    # values handed to the column writers at a time (Arrow's default is 1,024): each hand-over
    # costs a fixed amount (for a dictionary column with statistics, a hash of the batch's
    # codes), which at 1,024 was a tenth of a part's write; pages still close at about 1 MB
    # (data_page_size), now to within one batch
    "write_batch_size": WRITE_BATCH,
}
_NULL = object()  # a column that is null in every row


class WriteFailed(Exception):
    """Writing a temp part failed (disk full, file-size limit); its cause says why."""


def dict_codes(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer codes of a dictionary column whose order is the order of its string values."""
    arr = col.unify_dictionaries().combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    ranks = pc.rank(arr.dictionary, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.int32)
    idx = arr.indices.to_numpy(zero_copy_only=False)
    return ranks[idx] if len(ranks) else idx.astype(np.int32)


def order_of(codes: Sequence[np.ndarray]) -> np.ndarray | None:
    """Stable row order sorting by the code columns (most significant first); None if sorted."""
    if not codes or len(codes[0]) < 2:
        return None
    combined = codes[0].astype(np.int64)  # mixed-radix number, built in place
    space = int(combined.max()) + 1
    for c in codes[1:]:
        width = int(c.max()) + 1
        if space > (2**62) // width:
            return np.lexsort(list(reversed(codes)))
        combined *= width
        combined += c
        space *= width
    if np.all(combined[1:] >= combined[:-1]):
        return None
    bits = max(space - 1, 1).bit_length()
    if bits > 48:
        return np.argsort(combined, kind="stable")
    # LSD radix sort on 16-bit digits: numpy's stable sort of uint16 (uint8) is a radix sort.
    # Each digit is cut from the whole key into its own contiguous array first (a strided
    # view of the key's bytes sorted a quarter slower), then gathered in the order so far.
    order = None
    for shift in range(0, bits, 16):
        digit = (combined >> shift) if shift else combined
        digit = digit.astype(np.uint8 if bits - shift <= 8 else np.uint16)  # the last one may fit a byte
        order = np.argsort(digit, kind="stable") if order is None else order[np.argsort(digit[order], kind="stable")]
    return order


def sort_order(table: pa.Table, keys: Sequence[str]) -> np.ndarray | None:
    """Row order sorted by dictionary-encoded key columns (Arrow cannot sort dictionaries).

    Returns None when the rows are already in order (no reordering needed).
    """
    return order_of([dict_codes(table.column(k)) for k in keys])


@dataclass
class _Batch:
    table: pa.Table
    loc: tuple[str, int] | None  # lazy source_loc: (word, first number)
    consts: dict[str, Any]  # column -> its one value (or _NULL) where the batch holds only one


@dataclass
class _Piece:
    batch: _Batch
    idx: np.ndarray | None  # the batch's rows of one fidelity, ascending; None: all of them

    def __len__(self) -> int:
        return self.batch.table.num_rows if self.idx is None else len(self.idx)


def _constants(table: pa.Table, lazy: bool) -> dict[str, Any]:
    """Columns of FILE_SCHEMA holding one value in every row: a sort leaves them as they are."""
    out: dict[str, Any] = {}
    n = table.num_rows
    for f in FILE_SCHEMA:
        if f.name == "source_loc" and lazy:
            continue
        col = table.column(f.name)
        if col.null_count == n:
            out[f.name] = _NULL
        elif col.null_count:
            continue
        elif pa.types.is_dictionary(col.type):
            dicts = [c.dictionary for c in col.chunks]
            if all(len(d) == 1 for d in dicts) and len({d[0].as_py() for d in dicts}) == 1:
                out[f.name] = dicts[0][0].as_py()
        elif pa.types.is_integer(col.type) or pa.types.is_timestamp(col.type):
            mm = pc.min_max(col)
            if mm["min"] == mm["max"]:
                out[f.name] = mm["min"]
    return out


def split_fidelities(table: pa.Table) -> list[tuple[str, np.ndarray | None]]:
    """(fidelity, its rows ascending) per fidelity of a normalized batch; None = every row."""
    col = table.column("fidelity")
    arr = col.unify_dictionaries().combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    values = arr.dictionary.to_pylist()
    uniq = list(dict.fromkeys(values))
    idx = arr.indices.to_numpy(zero_copy_only=False)
    if len(uniq) < len(values):  # a dictionary with repeated entries
        idx = np.array([uniq.index(v) for v in values], dtype=np.int64)[idx]
    lo, hi = int(idx.min()), int(idx.max())
    if lo == hi:
        return [(uniq[lo], None)]
    order = np.argsort(idx.astype(np.uint16 if len(uniq) < 1 << 16 else np.int64), kind="stable")
    bounds = np.cumsum(np.bincount(idx, minlength=len(uniq)))
    out, start = [], 0
    for code, end in enumerate(bounds.tolist()):
        if end > start:
            out.append((uniq[code], order[start:end]))
        start = end
    return out


def _constant(f: pa.Field, value: Any, pieces: Sequence[_Piece]) -> pa.Array | pa.ChunkedArray:
    """A column holding `value` in every row of the pieces, built without copying rows."""
    n = sum(len(p) for p in pieces)
    if pa.types.is_dictionary(f.type):
        values = pa.array([] if value is _NULL else [value], f.type.value_type)
        return pa.DictionaryArray.from_arrays(zeros_index(n, null=value is _NULL), values, safe=False)
    # fixed width: the pieces' own (constant) columns, cut to their lengths: zero-copy
    return pa.chunked_array([c for p in pieces for c in p.batch.table.column(f.name).slice(0, len(p)).chunks], f.type)


def _single(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """One chunk with one dictionary, as the Parquet writer wants it."""
    if isinstance(col, pa.ChunkedArray) and col.num_chunks > 1:
        return col.unify_dictionaries().combine_chunks() if pa.types.is_dictionary(col.type) else col.combine_chunks()
    return col


def _locs(pieces: Sequence[_Piece], order: np.ndarray | None) -> pa.Array:
    """source_loc of the pieces' rows in `order`: built from row numbers where it is lazy."""
    rows = [p.idx if p.idx is not None else np.arange(len(p)) for p in pieces]
    locs = [p.batch.loc for p in pieces]
    if all(locs) and len({w for w, _ in locs}) == 1:
        # int32 numbers where they fit: half the bytes to gather, and Arrow formats them faster
        top = max(s + p.batch.table.num_rows for (_, s), p in zip(locs, pieces, strict=True))
        kind = np.int32 if top < 2**31 else np.int64
        nums = np.concatenate([np.add(r, s, dtype=kind) for (_, s), r in zip(locs, rows, strict=True)])
        return loc_strings(locs[0][0], nums if order is None else nums[order])
    parts = [loc_strings(lz[0], lz[1] + r) if lz else p.batch.table.column("source_loc").take(r).combine_chunks()
             for p, lz, r in zip(pieces, locs, rows, strict=True)]
    col = pa.chunked_array(parts, pa.string())
    return _single(col if order is None else col.take(order))


def assemble(pieces: Sequence[_Piece]) -> pa.Table:
    """The rows of `pieces` (one fidelity) as one table in FILE_SCHEMA, sorted by SORT_KEYS.

    Only columns that vary are gathered (one gather for a single piece; for several, each
    piece's rows, then the sort order); constant ones are rebuilt, and a lazy source_loc is
    built from the permuted row numbers.
    """
    gathered: dict[str, pa.ChunkedArray] = {}

    def rows_of(name: str) -> pa.ChunkedArray | pa.Array:
        """The pieces' rows of a column, piece after piece (not yet sorted), one chunk."""
        if name not in gathered:
            chunks: list[pa.Array] = []
            for p in pieces:
                col = p.batch.table.column(name)
                chunks.extend((col if p.idx is None else col.take(p.idx)).chunks)
            gathered[name] = _single(pa.chunked_array(chunks, FILE_SCHEMA.field(name).type))
        return gathered[name]

    def const(name: str) -> Any:
        vals = [p.batch.consts.get(name, KeyError) for p in pieces]
        return vals[0] if vals[0] is not KeyError and all(v == vals[0] for v in vals[1:]) else KeyError

    order = order_of([dict_codes(rows_of(k)) for k, _ in SORT_KEYS if const(k) is KeyError])
    single = pieces[0] if len(pieces) == 1 else None
    g = None  # for a single piece: its batch's rows in file order
    if single is not None and single.idx is not None:
        g = single.idx if order is None else single.idx[order]
    elif single is not None:
        g = order
    out = []
    for f in FILE_SCHEMA:
        c = const(f.name)
        if f.name == "source_loc" and any(p.batch.loc for p in pieces):
            out.append(_locs(pieces, order))
        elif c is not KeyError:
            out.append(_constant(f, c, pieces))
        elif single is not None:
            col = single.batch.table.column(f.name)
            out.append(_single(col if g is None else col.take(g)))
        else:
            col = rows_of(f.name)
            out.append(_single(col if order is None else col.take(order)))
    return pa.Table.from_arrays(out, schema=FILE_SCHEMA)


class PartWriter:
    """Buffers the rows of each fidelity; writes them as sorted row groups of about ROW_GROUP rows.

    Each fidelity has its own temp file (opened by `open_file`, on this thread) and at most
    one write in flight; writes of different fidelities run on a pool of two threads, while
    this thread reads and normalizes the next batch.
    """

    def __init__(self, open_file: Callable[[str], os.PathLike[str]], threads: int | None = None,
                 filesystem: Any = None):
        self.open_file = open_file
        self.filesystem = filesystem  # a pyarrow filesystem (a bucket); None: local files
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.buf: dict[str, list[_Piece]] = {}
        self.buffered: dict[str, int] = {}
        self.pending: dict[str, Future[None]] = {}
        self.rows = 0
        self.rows_of: dict[str, int] = {}  # fidelity -> rows written to its file
        self.pool = ThreadPoolExecutor(max(1, min(2, threads or os.cpu_count() or 1)), "xfid-part")

    def add(self, table: pa.Table) -> None:
        """Take one normalized batch (SCHEMA, optionally with a lazy source_loc)."""
        if table.num_rows == 0:
            return
        lazy = lazy_loc(table)
        if lazy is not None and "source_loc" in table.column_names:
            table = table.drop_columns(["source_loc"])
        batch = _Batch(table, lazy, _constants(table, lazy is not None))
        for fid, idx in split_fidelities(table):
            piece = _Piece(batch, idx)
            self.buf.setdefault(fid, []).append(piece)
            self.buffered[fid] = self.buffered.get(fid, 0) + len(piece)
            if self.buffered[fid] >= ROW_GROUP:
                self._flush(fid)

    def _flush(self, fid: str) -> None:
        pieces = self.buf.pop(fid, [])
        self.buffered.pop(fid, None)
        if not pieces:
            return
        prev = self.pending.pop(fid, None)
        if prev is not None:
            prev.result()  # one writer per file: one write at a time
        w = self.writers.get(fid)
        if w is None:
            try:
                where = self.open_file(fid)
                if self.filesystem is not None:
                    w = pq.ParquetWriter(str(where), FILE_SCHEMA, filesystem=self.filesystem, **WRITE_OPTIONS)
                else:
                    w = pq.ParquetWriter(where, FILE_SCHEMA, **WRITE_OPTIONS)
                self.writers[fid] = w
            except OSError as e:
                raise WriteFailed() from e
        self.pending[fid] = self.pool.submit(_write, w, pieces)
        n = sum(len(p) for p in pieces)
        self.rows += n
        self.rows_of[fid] = self.rows_of.get(fid, 0) + n

    def finish(self) -> None:
        """Write what is buffered and wait for every write; the writers stay open."""
        for fid in list(self.buf):
            self._flush(fid)
        for fid in list(self.pending):
            self.pending.pop(fid).result()

    def close(self, metadata: Callable[[str], dict[str, str]] | None = None) -> None:
        """Close the files (after finish()); a failure to close is a WriteFailed.

        Args:
            metadata: the key-value metadata of each fidelity's file, written into its footer.
        """
        try:
            for fid in list(self.writers):
                w = self.writers.pop(fid)
                if metadata is not None:
                    w.add_key_value_metadata(metadata(fid))
                w.close()
        except OSError as e:
            raise WriteFailed() from e
        finally:
            self.pool.shutdown()

    def abort(self) -> None:
        """Wait for writes in flight (ignoring their errors) and close everything."""
        for f in self.pending.values():
            f.cancel()
        self.pool.shutdown(wait=True)
        for w in self.writers.values():
            with contextlib.suppress(OSError, pa.ArrowException):
                w.close()
        self.writers.clear()


def _write(w: pq.ParquetWriter, pieces: Sequence[_Piece]) -> None:
    part = assemble(pieces)
    try:
        w.write_table(part, row_group_size=ROW_GROUP)
    except OSError as e:
        raise WriteFailed() from e
