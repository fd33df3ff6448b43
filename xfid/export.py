"""Export records from the store in the normalized schema (JSON lines, CSV, Parquet)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from xfid.errors import XfidError
from xfid.store import Store


def plain(table: pa.Table) -> pa.Table:
    """Dictionary columns decoded to strings (for CSV/JSON writers)."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.Table.from_arrays(cols, names=table.column_names)


def write_jsonl(table: pa.Table, out) -> None:
    names = table.column_names
    for batch in plain(table).to_batches(max_chunksize=65536):
        cols = [batch.column(i).to_pylist() for i in range(len(names))]
        for row in zip(*cols, strict=True):
            rec = {k: (v.isoformat().replace("+00:00", "Z") if hasattr(v, "isoformat") else v)
                   for k, v in zip(names, row, strict=True)}
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")


def export_records(store: Store, fmt: str, output: str | None, filters: Mapping[str, Sequence[str]]) -> int:
    """Write the filtered records; returns the row count. Files are written atomically."""
    table = store.read({k: list(v) for k, v in filters.items() if v})
    if fmt == "parquet" and not output:
        raise XfidError("--format parquet needs -o FILE (Parquet is binary; it does not go to a terminal)")
    if not output:
        if fmt == "csv":
            sys.stdout.flush()
            pcsv.write_csv(plain(table), sys.stdout.buffer)
        else:
            write_jsonl(table, sys.stdout)
        return table.num_rows
    dest = Path(output)
    if dest.parent and not dest.parent.exists():
        raise XfidError(f"cannot write {dest}: folder {dest.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".xfid-export-", dir=dest.parent or ".")
    os.close(fd)
    try:
        if fmt == "parquet":
            pq.write_table(table, tmp, compression="zstd")
        elif fmt == "csv":
            pcsv.write_csv(plain(table), tmp)
        else:
            with open(tmp, "w", encoding="utf-8") as f:
                write_jsonl(table, f)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return table.num_rows
