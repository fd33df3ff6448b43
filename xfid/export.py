"""Export records from the store in the normalized schema (JSON lines, CSV, Parquet)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from xfid.errors import XfidError
from xfid.outfile import guard, open_output
from xfid.store import Store
from xfid.textsafe import csv_safe_table


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
    """Write the filtered records; returns the row count. Files are written by `xfid.outfile`.

    CSV text cells that a spreadsheet would read as a formula (a leading `=`, `+`, `-`, `@`,
    tab or carriage return) get a leading `'`; numeric columns are never changed.
    """
    if output is not None:
        guard(output)  # before reading: an output into the store (or an empty name) is refused first
    table = store.read({k: list(v) for k, v in filters.items() if v})
    if fmt == "parquet" and output is None:
        raise XfidError("{fmt} parquet needs {output} FILE (Parquet is binary; it does not go to a terminal)",
                        params=("fmt", "output"))
    if output is None:
        if fmt == "csv":
            sys.stdout.flush()
            pcsv.write_csv(csv_safe_table(plain(table)), sys.stdout.buffer)
        else:
            write_jsonl(table, sys.stdout)
        return table.num_rows
    with open_output(output, text=fmt == "jsonl") as f:
        if fmt == "parquet":
            pq.write_table(table, f, compression="zstd")
        elif fmt == "csv":
            pcsv.write_csv(csv_safe_table(plain(table)), f)
        else:
            write_jsonl(table, f)
    return table.num_rows
