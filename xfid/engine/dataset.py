"""The discrepancies as a Parquet dataset (`xfid correlate -o DIR.parquet`, `correlate(out=...)`).

A folder whose name ends in `.parquet`, laid out the same by both engines:

* `part-*.parquet`: the discrepancy rows, the columns and Arrow types of DATASET_SCHEMA (the
  rows' contract columns, then `efficiency`, `factor`, `scope`: the fields of a discrepancy in
  the json and csv outputs). Spark's executors write their parts themselves; the local engine
  writes its frame from this process. The rows are NOT in the order the json output lists
  them (severity, then fingerprint): sort on read when that order matters (`ORDER`). The local
  engine's parts hold its discrepancy frame's order; Spark's parts hold whatever each writer
  held, or, when the request asks for it (`Request.out_ordered`: `check`'s scratch dataset),
  read one after the other in name order, the order of its collected rows (pair, then key:
  spark/output.PART_ORDER), which `check` reads them back in (xfid.tracker.chunks.dataset_source).
* `_correlation.json`: the rest of the result as `--format json` prints it (settings, counts,
  comparisons, coverage), with an empty `discrepancies` list.
* `_xfid.json`: what marks the folder as one xfid wrote (format, version, row count, columns);
  only a folder holding it is ever replaced by a later `-o` of the same name.

Readers that skip names starting with `_` or `.` (pyarrow.dataset, Spark, DuckDB, pandas'
`read_parquet`) read the parts only: `pyarrow.dataset.dataset(DIR)` gives the rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from xfid.engine.schema import ROW_EXTRA_FIELDS, ROW_FIELDS, arrow_schema
from xfid.errors import XfidError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow.dataset as ds

    from xfid.engine.contract import Correlation

SUFFIX = ".parquet"
MARKER = "_xfid.json"
SUMMARY = "_correlation.json"
FORMAT = "xfid-discrepancies"
VERSION = 1
DATASET_SCHEMA = arrow_schema((*ROW_FIELDS, *ROW_EXTRA_FIELDS))
COLUMNS = tuple(DATASET_SCHEMA.names)
ORDER = ("unordered: sort by severity (descending, nulls last), then fingerprint for the json output's order")
PART_ROWS = 500_000
"""Rows per part file when the local engine writes the dataset."""


def is_dataset_path(path: str | None) -> bool:
    """Whether `-o path` names a Parquet dataset (a name ending in .parquet)."""
    return bool(path) and str(path).rstrip("/").lower().endswith(SUFFIX)


def is_ours(folder: Path) -> bool:
    """Whether `folder` is a dataset xfid wrote (its marker file says so)."""
    try:
        doc = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == FORMAT


def write_frame(frame: pd.DataFrame, folder: str | Path) -> int:
    """Write the discrepancy frame (the local engine's) as parts into the new folder `folder`;
    returns the row count. The folder is created here (it must not exist)."""
    import pyarrow.parquet as pq

    out = Path(folder)
    out.mkdir()
    n = len(frame)
    for i, start in enumerate(range(0, max(n, 1), PART_ROWS)):
        table = to_arrow(frame.iloc[start:start + PART_ROWS])
        pq.write_table(table, out / f"part-{i:05d}.parquet", compression="zstd")
    return n


def to_arrow(frame: pd.DataFrame) -> pa.Table:
    """A frame of rows as a table of DATASET_SCHEMA (categories as their strings, nulls kept)."""
    import pandas as pd

    cols = []
    for f in DATASET_SCHEMA:
        s = frame[f.name]
        if isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype(object).where(s.notna(), None)
        cols.append(pa.array(s, type=f.type, from_pandas=True))
    return pa.Table.from_arrays(cols, schema=DATASET_SCHEMA)


def finish(folder: str | Path, corr: Correlation, name: str) -> int:
    """Add the summary and the marker to a filled dataset folder (`name`: the folder it is
    renamed to, as the user named it); sets `corr.settings["output"]`; returns the row count."""
    from dataclasses import replace

    from xfid.engine.output import render_pieces

    out = Path(folder)
    rows = dataset(out, check=False).count_rows()
    engine = str(corr.settings.get("engine") or "local")
    corr.settings["output"] = {"dataset": name, "format": FORMAT, "rows": rows}
    rest = replace(corr, discrepancies=corr.discrepancies.iloc[:0])  # the rows are the parts
    with open(out / SUMMARY, "w", encoding="utf-8") as f:
        for piece in render_pieces(rest, "json"):
            f.write(piece)
    doc = {"format": FORMAT, "version": VERSION, "rows": rows, "engine": engine, "columns": list(COLUMNS),
           "order": ORDER}
    (out / MARKER).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return rows


def dataset(folder: str | Path, *, check: bool = True) -> ds.Dataset:
    """The dataset's parts as a pyarrow Dataset of DATASET_SCHEMA.

    Raises:
        XfidError: `folder` is not a dataset xfid wrote (with `check`).
    """
    import pyarrow.dataset as pads

    p = _ours(folder) if check else Path(folder)
    return pads.dataset(p, format="parquet", schema=DATASET_SCHEMA)


def read_frame(folder: str | Path) -> pd.DataFrame:
    """All rows of a dataset as one frame, in the json output's order (severity descending, nulls
    last, then fingerprint): for tests and small results."""
    frame = dataset(folder).to_table().to_pandas()
    return sort_rows(frame)


def sort_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows by severity (descending, NaN last), then fingerprint (nulls last), then key: one
    order whatever order they were written in."""
    keys = ["severity", "fingerprint", "candidate", "reference", "target", "workload", "op", "metric", "stat"]
    return frame.sort_values(keys, ascending=[False, *[True] * (len(keys) - 1)], na_position="last",
                             kind="stable").reset_index(drop=True)


def summary(folder: str | Path) -> dict[str, Any]:
    """The marker of a dataset (format, version, rows, engine, columns, order)."""
    doc: dict[str, Any] = json.loads((_ours(folder) / MARKER).read_text(encoding="utf-8"))
    return doc


def _ours(folder: str | Path) -> Path:
    """`folder` as a Path, if it is a dataset xfid wrote; else XfidError."""
    p = Path(folder)
    if not is_ours(p):
        raise XfidError(f"{p} is not a discrepancy dataset written by xfid (no {MARKER} in it)")
    return p
