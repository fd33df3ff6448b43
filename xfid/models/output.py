"""Roofline records out: xfid-records files (CSV / JSON lines / Parquet, atomic) and ingest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from xfid.errors import XfidError
from xfid.outfile import open_output, write_output

COLUMNS = ("fidelity", "target", "workload", "op", "metric", "stat", "value", "unit", "config")
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}


def records_table(records: list[dict[str, Any]]) -> pa.Table:
    """The records as a plain (string/float) Arrow table in xfid-records column order."""
    cols = {c: [r.get(c) for r in records] for c in COLUMNS}
    types = {c: pa.float64() if c == "value" else pa.string() for c in COLUMNS}
    return pa.table({c: pa.array(v, types[c]) for c, v in cols.items()})


def csv_text(records: list[dict[str, Any]]) -> str:
    """xfid-records CSV, deterministic bytes (so re-ingesting the same bounds is a no-op)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in records:
        w.writerow([repr(float(r["value"])) if c == "value" else (r.get(c) or "") for c in COLUMNS])
    return buf.getvalue()


def jsonl_text(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps({c: r.get(c) for c in COLUMNS}, sort_keys=False) + "\n" for r in records)


def write_records(records: list[dict[str, Any]], path: str | Path, *, store_file: bool = False) -> Path:
    """Write records to `path` by `xfid.outfile`; the format follows the extension (`store_file`:
    the store's own `generated/` copy, not a user's output).

    Raises:
        XfidError: an unknown extension or a missing folder.
    """
    dest = Path(path)
    fmt = FORMATS.get(dest.suffix.lower())
    if fmt is None:
        raise XfidError(f"cannot write {dest}: unknown extension {dest.suffix!r}; use .csv, .jsonl or .parquet")
    if fmt == "parquet":
        import pyarrow.parquet as pq

        table = records_table(records)
        with open_output(dest, store_file=store_file) as f:
            pq.write_table(table, f, compression="zstd")
    else:
        write_output(dest, csv_text(records) if fmt == "csv" else jsonl_text(records), store_file=store_file)
    return dest


def ingest_records(store: Any, records: list[dict[str, Any]], path: str | Path | None, run: str | None,
                   name: str) -> Any:
    """Ingest the records through `xfid.ingest.ingest` with the xfid-records adapter.

    Without `path` the records are kept as `<store>/generated/<name>` (deterministic bytes:
    the same bounds are recognised as already ingested), so the file every number came from
    still exists after the command.
    """
    from xfid.ingest import IngestOptions, ingest

    opts = IngestOptions(adapter="xfid-records", run=run)
    if path is None:
        gen = Path(store.root) / "generated"
        gen.mkdir(parents=True, exist_ok=True)
        path = write_records(records, gen / name, store_file=True)
    return ingest(store, [path], opts)
