"""Spark's discrepancies written by the executors (`correlate(out=...)`, `-o DIR.parquet`).

Instead of collecting the discrepancy rows to the driver (engine._collect_chunks), each task
writes its own rows as Parquet parts into the request's folder (xfid.engine.dataset's layout and
DATASET_SCHEMA; the API renames the folder into place and adds the marker). What still comes back
to the driver: the counts, the comparisons, the coverage, the tracked and kept rows, and of each
bound violation the seven fields that name it in its aggregate's `violation_ids`.

The folder is a file:// URI of the path as this process resolves it: on a cluster every
executor must see that path (a shared file system mounted at the same place).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from xfid.engine.dataset import DATASET_SCHEMA
from xfid.engine.schema import GROUP_FIELDS, ROW_ORDER, SPARK_TYPES, names

PART_ORDER = ("pair_index", *ROW_ORDER)
"""The order of the rows in the parts, read part by part in name order: the collected path's
(engine._local_rows: pair, then key; strings by code point, nulls first), which `check` reads
them in (xfid.tracker.chunks.dataset_source)."""

VIOLATION_COLUMNS = (*names(GROUP_FIELDS), "fingerprint", "kind", "severity", "factor")
"""What `with_violation_ids` reads of a bound violation (xfid.engine.aggregate): the aggregate it
belongs to, its fingerprint, and what orders it (severity, as the discrepancies are; factor)."""


def is_discrepancy(include_missing: bool) -> Any:
    """The Spark condition of a discrepancy row (xfid.engine.rows.discrepancies' filter)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    return (kind != "ok") if include_missing else ((kind != "ok") & (kind != "missing_reference"))


def write_discrepancies(rows: Any, req: Any) -> pd.DataFrame:
    """Write the discrepancies among `rows` (Spark's aligned rows with their fingerprints) into
    the new folder `req.out` from the executors (sorted by PART_ORDER when `req.out_ordered`); returns the bound violations' naming fields,
    in the order the local engine lists its discrepancies (severity descending, then fingerprint).

    With `req.fingerprints != "all"` a missing_reference row's fingerprint is null, as in the rows
    that come back (engine.align)."""
    from pyspark.sql import functions as F

    disc = rows.filter(is_discrepancy(req.include_missing))
    if req.fingerprints != "all":
        disc = disc.withColumn("fingerprint", F.when(F.col("kind").isin("ok", "missing_reference"),
                                                     F.lit(None).cast("string")).otherwise(F.col("fingerprint")))
    cols = [F.col(f.name).cast(SPARK_TYPES[f.type]).alias(f.name) for f in DATASET_SCHEMA]
    if req.out_ordered:  # a range sort: the parts in name order hold the rows in the collected order
        disc = disc.orderBy(*PART_ORDER)
    uri = f"file://{Path(req.out).resolve()}"  # the path as given (a test writes under "out dir %20 é")
    disc.select(*cols).write.option("compression", "zstd").mode("errorifexists").parquet(uri)
    # the bound violations are discrepancies: read from the parts just written (a few columns of
    # the discrepancies), not by another pass over every aligned row
    written = rows.sparkSession.read.parquet(uri)
    found = written.filter(F.col("kind") == "bound_violation").select(*VIOLATION_COLUMNS).toArrow()
    return found.to_pandas().sort_values(["severity", "fingerprint"], ascending=[False, True], na_position="last",
                         kind="stable").reset_index(drop=True)
