"""The rows' provenance (run, source path and location, config of each side), joined back in
Spark SQL from the entries for the rows that come back only.

The alignment UDF (`groups.align_group`) returns a row's numbers, codes and short texts, and
which entries it was aligned from (`groups.ENTRY_REFS`); the long texts each row would repeat
from its two entries (`groups.PROVENANCE_FIELDS`) stay with the entries (persisted by the
selection, one row per fidelity and key). A row's candidate entry is the entry of (candidate,
target, workload, op, candidate_entry_metric or metric, stat); its reference entry that of
(reference, target, workload, op, reference_entry_metric or metric, reference_entry_stat or
stat), none when `reference_n` is null (no reference entry was matched).
"""

from __future__ import annotations

from typing import Any

from xfid.engine.schema import names
from xfid.engine.spark.groups import ENTRY_REFS, JOINED, ROW_FIELDS_SPARK, SIDES
from xfid.engine.spark.select import ENTRY_KEY

LOOKUP = ("target", "workload", "op")
"""The entry key fields a row holds as they are (the same for both of its entries)."""


def with_provenance(rows: Any, entries: Any) -> Any:
    """`rows` (the alignment's rows, counts rows left out) with PROVENANCE_FIELDS, in the
    columns of ROW_FIELDS_SPARK but `counts` (plus any other columns `rows` has, at the end).

    Two left joins with the entries on their whole key: the entries come partitioned by that key
    from the selection's aggregate; only `rows` moves (and is the hashed side)."""
    from pyspark.sql import functions as F

    cand_metric, ref_metric, ref_stat = (F.col(f.name) for f in ENTRY_REFS)
    keys = {
        SIDES[0]: (F.col("candidate"), F.coalesce(cand_metric, F.col("metric")), F.col("stat")),
        SIDES[1]: (F.when(F.col("reference_n").isNotNull(), F.col("reference")),
                   F.coalesce(ref_metric, F.col("metric")), F.coalesce(ref_stat, F.col("stat"))),
    }
    out = rows
    for side in SIDES:
        fid, metric, stat = keys[side]
        k = [f"_{side}_{c}" for c in ENTRY_KEY]
        picked = entries.select(*[F.col(c).alias(a) for c, a in zip(ENTRY_KEY, k, strict=True)],
                                *[F.col(p).alias(f"{side}_{p}") for p in JOINED])
        by = dict(zip(ENTRY_KEY, k, strict=True))
        mine = {"fidelity": fid, "metric": metric, "stat": stat, **{c: F.col(c) for c in LOOKUP}}
        out = out.select("*", *[mine[c].alias(f"_row{by[c]}") for c in ENTRY_KEY])
        cond = [F.col(f"_row{by[c]}") == F.col(by[c]) for c in ENTRY_KEY]
        # the rows (few) are hashed, the entries (many, already partitioned by their key) stream
        # by: no sort of the entries for a sort-merge join
        out = out.hint("shuffle_hash").join(picked, cond, "left").drop(*k, *[f"_row{x}" for x in k])
    wanted = [n for n in names(ROW_FIELDS_SPARK) if n != "counts"]
    rest = [c for c in out.columns if c not in wanted and c not in names(ENTRY_REFS)]
    return out.select(*wanted, *rest)
