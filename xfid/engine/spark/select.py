"""Selection on Spark: the committed parts the catalog lists -> one entry per (fidelity, key).

The same rules as `xfid.engine.selection.select`, written as Spark SQL over the records:
runs ranked per fidelity (on the driver, from one row per run), the latest run that has the
key, the median of its duplicates (NaN ignored; the provenance of the record at the lower
median, ties in the order of the records), raw ops that op maps merge summed or by median.
What comes to the driver: one row per (fidelity, run), one per (source, raw op) for the op maps
and the coverage table, and the counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from xfid.config import Config
from xfid.engine.contract import COVERAGE_COLUMNS
from xfid.engine.opmap import COVERAGE_EXTRA, map_name
from xfid.engine.schema import Field, ddl
from xfid.engine.selection import ADDITIVE, check_fidelity
from xfid.errors import StoreError
from xfid.schema import FLAG_NO_REFERENCE
from xfid.schema import SCHEMA as RECORD_SCHEMA
from xfid.store import Store

ENTRY_KEY = ("fidelity", "target", "workload", "op", "metric", "stat")
"""What an entry is of: a fidelity and a key (record columns, xfid.schema.SCHEMA)."""
ENTRY_PROV = ("unit", "run", "source", "source_path", "source_loc", "config")
"""The chosen record's columns an entry carries (its provenance; record columns)."""


def record_field(name: str) -> Field:
    """A record column (xfid.schema.SCHEMA) as a Field of its plain type (a dictionary as its values)."""
    t = RECORD_SCHEMA.field(name).type
    return Field(name, t.value_type if pa.types.is_dictionary(t) else t)


ENTRY_FIELDS = (*map(record_field, ENTRY_KEY), Field("value", pa.float64()), Field("ref_value", pa.float64()),
                Field("n", pa.int64()), Field("flagged", pa.bool_()), Field("note", pa.string()),
                *map(record_field, ENTRY_PROV))
"""One selected entry per fidelity and key (xfid.engine.spark.select -> the alignment UDF): its
median value, the median of the records that may serve as a reference, the count, whether any
record is flagged, the note of merged raw ops, and the provenance."""
ENTRY_SCHEMA = ddl(ENTRY_FIELDS)
KEY, PROV = ENTRY_KEY, ENTRY_PROV
READ = (*KEY, "value", *PROV, "timestamp", "flags")
"""The record columns the selection reads."""


@dataclass
class SparkSelection:
    """The entries (a Spark DataFrame, one row per fidelity and key) and what the driver holds."""

    entries: Any  # pyspark DataFrame: KEY, value, ref_value, n, flagged, note, PROV
    fidelities: list[str]
    targets: list[str]
    coverage: Any  # pandas DataFrame, as the local engine's
    counts: dict[str, Any]
    persisted: Any = None  # what to unpersist when done


def committed_parts(store: Store) -> list[Path]:
    """The parts the catalog lists as committed (footers checked against the catalog's row counts).

    Raises:
        StoreError: a listed part is missing or its footer disagrees with the catalog.
    """
    files = store.part_files()
    if files:
        store.dataset()  # a listed part missing, or a footer that disagrees with the catalog: StoreError
    return files


SCHEMES = {"s3": "s3a", "gcs": "gs"}
"""pyarrow filesystem type -> the Hadoop filesystem scheme Spark reads it through."""


def spark_path(store: Store, path: Any) -> str:
    """Where Spark reads a part (or the records base): the local path, or s3a:// / gs:// for a bucket."""
    if store.fs is None:
        return str(path)
    kind = getattr(store.fs, "type_name", "")
    if kind not in SCHEMES:
        raise StoreError(f"{store.location.label}: Spark cannot read records on a {kind!r} filesystem")
    return f"{SCHEMES[kind]}://{str(path).lstrip('/')}"


def _rel(path: Path, store: Store) -> str:
    """`fidelity=F/part-....parquet`: how a part is matched with the path Spark reports."""
    return "/".join(path.relative_to(store.records).parts[-2:])


def read_records(spark: Any, store: Store, files: Sequence[Path], *, targets: Sequence[str] | None,
                 as_of: datetime | None, source_loc: bool) -> Any:
    """The records of exactly `files` (no listing, no glob), with each record's position in the
    local engine's order (`file_index`, `row_index`) and the fidelity from its partition."""
    from pyspark.sql import functions as F

    if not files:
        return None
    cols = [c for c in READ if c != "fidelity" and (source_loc or c != "source_loc")]
    df = (spark.read.option("basePath", spark_path(store, store.records))
          .parquet(*[spark_path(store, f) for f in files])
          .select(*cols, "fidelity", F.col("_metadata.file_path").alias("_file"),
                  F.col("_metadata.row_index").alias("row_index")))
    if not source_loc:
        df = df.withColumn("source_loc", F.lit(None).cast("string"))
    if targets:
        df = df.filter(F.col("target").isin(list(targets)))
    if as_of is not None:
        df = df.filter(F.unix_micros("timestamp") <= F.lit(_micros(as_of)))
    return df


def with_file_index(spark: Any, df: Any, store: Store, files: Sequence[Path]) -> Any:
    """`file_index`: each record's part in catalog order (with `row_index`, the local engine's
    record order, which breaks ties between equal duplicates)."""
    from pyspark.sql import functions as F

    index = spark.createDataFrame([(_rel(f, store), i) for i, f in enumerate(files)], "rel string, file_index long")
    return (df.withColumn("rel", F.substring_index("_file", "/", -2))
            .join(F.broadcast(index), "rel").drop("rel", "_file"))


def _micros(t: datetime) -> int:

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    d = t - epoch
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


def run_ranks(rows: list[tuple[str, str, int]], preferred: Mapping[str, str] | None) -> list[tuple[str, str, int]]:
    """(fidelity, run, rank) from (fidelity, run, latest timestamp): a --run choice first, then
    the timestamp, then the name (the highest rank is the run a key takes)."""
    out = []
    for fid in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == fid]
        want = None if not preferred else preferred.get(fid, preferred.get("*"))
        mine.sort(key=lambda r: (int(want is not None and r[1] == want), r[2], r[1]))
        out += [(fid, r[1], i) for i, r in enumerate(mine)]
    return out


def coverage_and_map(rows: list[tuple[Any, str, int]], config: Config) -> tuple[Any, list[tuple[str, str, str]]]:
    """The coverage table (as the local engine builds it) and the (source, raw op, op) renames,
    from the record count per (source, raw op)."""
    import pandas as pd

    rules = config.op_maps
    counts: dict[tuple[str, str], int] = {}
    for src, raw, n in rows:
        k = ("" if src is None else str(src), "" if raw is None else str(raw))
        counts[k] = counts.get(k, 0) + int(n)
    cov, renames = [], []
    for (name, raw), n in sorted(counts.items()):
        if raw == "":
            continue
        has_rules = any(r.applies_to(name) for r in rules)
        op, rule = map_name(raw, name, rules) if has_rules else (raw, -1)
        if rule >= 0:
            renames.append((name, raw, op))
        cov.append((name, raw, op, rule >= 0, n, has_rules, rule))
    coverage = pd.DataFrame(cov, columns=[*COVERAGE_COLUMNS, *COVERAGE_EXTRA])
    coverage = coverage.sort_values(["source", "matched", "raw_op"], kind="stable").reset_index(drop=True)
    return coverage, renames


def _flag_expr(col: Any) -> Any:
    """True where a record's flags name a no-reference flag (comma-separated, spaces ignored)."""
    from pyspark.sql import functions as F

    parts = F.transform(F.split(F.coalesce(col, F.lit("")), ","), lambda x: F.trim(x))
    return F.exists(parts, lambda x: x.isin(list(FLAG_NO_REFERENCE)))


def select_spark(spark: Any, store: Store, config: Config, *, targets: Sequence[str] | None = None,
                 as_of: datetime | None = None, runs: Mapping[str, str] | None = None,
                 source_loc: bool = True) -> SparkSelection:
    """Per fidelity and key the number that represents it (see the module docstring)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    files = committed_parts(store)
    df = read_records(spark, store, files, targets=targets, as_of=as_of, source_loc=source_loc)
    if df is None:
        return _empty(spark, config)
    nan = F.lit(float("nan"))
    df = df.select(
        *[c for c in READ if c not in ("value", "timestamp", "flags")], "_file", "row_index",
        F.coalesce(F.col("run"), F.lit("")).alias("run_key"),
        F.coalesce(F.unix_micros("timestamp"), F.lit(0)).alias("ts"),
        F.when(F.col("value").isNull(), nan).otherwise(F.col("value")).alias("value"),
        _flag_expr(F.col("flags")).alias("flagged"),
    ).withColumn("vnan", F.isnan("value")).withColumnRenamed("op", "raw_op")
    # the driver's share: one row per (fidelity, run) and per (source, raw op)
    per_run = df.groupBy("fidelity", "run_key").agg(F.max("ts"), F.count(F.lit(1)), F.sum(F.col("vnan").cast("long")),
                                                F.sum(F.col("flagged").cast("long"))).collect()
    run_rows = [(r[0], r[1], int(r[2])) for r in per_run]
    if not run_rows:
        return _empty(spark, config)
    for fid in sorted({r[0] for r in run_rows}):
        check_fidelity(fid)
    ops = [(r[0], r[1], int(r[2])) for r in df.groupBy("source", "raw_op").count().collect()]
    coverage, renames = coverage_and_map(ops, config)
    ranks = spark.createDataFrame(run_ranks(run_rows, runs), "fidelity string, run_key string, rank int")
    df = with_file_index(spark, df, store, files).join(F.broadcast(ranks), ["fidelity", "run_key"])
    if renames:
        ren = spark.createDataFrame(renames, "source string, raw_op string, op string")
        df = df.join(F.broadcast(ren), ["source", "raw_op"], "left").withColumn(
            "op", F.coalesce(F.col("op"), F.col("raw_op")))
    else:
        df = df.withColumn("op", F.col("raw_op"))
    # the latest run that has the key (a --run choice first): the highest rank per key, joined
    # back by hash on the key (no sort of the records); the records are shuffled once, by key (and
    # the best-rank aggregate's partial results once), and the aggregates per (key, raw op) and per
    # key below reuse that partitioning. `>=` (the same as
    # `==` here: no rank is above the best) keeps the rank out of the join keys, which would
    # otherwise repartition by (rank, key) and cost two more shuffles
    best = df.groupBy(*KEY).agg(F.max("rank").alias("best"))
    chosen = df.join(best.hint("shuffle_hash"), list(KEY)).filter(F.col("rank") >= F.col("best"))
    every = _entries(_raw_entries(chosen)).persist(StorageLevel.MEMORY_AND_DISK)
    per_target = every.groupBy("target").agg(F.sum(F.isnan("value").cast("long")), F.sum("records"),
                                             F.sum((~F.isnan("value")).cast("long"))).collect()
    n = sum(int(r[3]) for r in per_run)
    chosen_n = sum(int(r[2] or 0) for r in per_target)
    counts = {"records": n, "history_records": n - chosen_n, "null_records": sum(int(r[4] or 0) for r in per_run),
              "null_keys": sum(int(r[1] or 0) for r in per_target),
              "flagged_records": sum(int(r[5] or 0) for r in per_run)}
    fids = sorted({r[0] for r in run_rows})
    entries = every.filter(~F.isnan("value")).drop("records")
    return SparkSelection(entries, fids, sorted(r[0] for r in per_target), coverage, counts, every)


def _raw_entries(chosen: Any) -> Any:
    """One row per (fidelity, key, raw op) of the chosen run: median of its records (NaN
    ignored) and of its records that may serve as a reference, count, the record at the lower
    median (ties in record order), any flagged.

    One hash aggregate per group, no sort of the records: a group's records (a handful: the
    duplicates of one run) are collected and sorted within the group by (NaN, value, part,
    row), the local engine's stable order; the records that may serve as a reference are that
    array filtered, so in the same order."""
    from pyspark.sql import functions as F

    unusable = F.col("vnan") | F.col("flagged")
    prov = F.struct(*[F.col(c) for c in PROV])
    rec = F.struct(F.col("vnan").alias("vnan"), F.col("value").alias("value"), F.col("file_index").alias("f"),
                   F.col("row_index").alias("r"), unusable.alias("bad"), prov.alias("prov"))
    g = chosen.groupBy(*KEY, "raw_op").agg(
        F.count(F.lit(1)).alias("size"), F.sum((~F.col("vnan")).cast("int")).alias("c"),
        F.sum((~unusable).cast("int")).alias("c2"), F.max(F.col("flagged")).alias("flagged"),
        F.array_sort(F.collect_list(rec)).alias("recs"))
    good = F.filter("recs", lambda x: ~x["bad"])

    def at(arr: Any, i: Any) -> Any:  # arr[i], 0-based
        return F.element_at(arr, (i + 1).cast("int"))

    lo, hi = F.floor(F.greatest(F.col("c") - 1, F.lit(0)) / 2), F.least(F.floor(F.col("c") / 2), F.col("size") - 1)
    lo2, hi2 = F.floor(F.greatest(F.col("c2") - 1, F.lit(0)) / 2), F.floor(F.col("c2") / 2)
    nan = F.lit(float("nan"))
    return g.select(
        *KEY, "raw_op", "flagged", at(F.col("recs"), lo)["prov"].alias("prov"),
        F.when(F.col("c") > 0, (at(F.col("recs"), lo)["value"] + at(F.col("recs"), hi)["value"]) / 2)
        .otherwise(nan).alias("value"),
        F.when(F.col("c2") > 0, (at(good, lo2)["value"] + at(good, hi2)["value"]) / 2).otherwise(nan)
        .alias("ref_value"),
        F.when(F.col("size") == 1, F.lit(1)).otherwise(F.col("c")).alias("n"), F.col("size").alias("records"),
    )


def _entries(raw: Any) -> Any:
    """One row per (fidelity, key): raw ops that op maps turned into one op combined (summed for
    ADDITIVE metrics, else the median), the provenance of the first raw op by name."""
    from pyspark.sql import functions as F

    nan = F.lit(float("nan"))
    additive = F.col("metric").isin(sorted(ADDITIVE))
    vals = F.array_sort(F.collect_list(F.when(~F.isnan("value"), F.col("value"))))
    oks = F.array_sort(F.collect_list("ref_value"))
    g = raw.groupBy(*KEY).agg(
        F.count(F.lit(1)).alias("k"), F.first(additive).alias("additive"),
        F.sum(F.when(F.isnan("value"), 0.0).otherwise(F.col("value"))).alias("vsum"),
        F.sum("ref_value").alias("osum"),  # NaN propagates, as np.sum does
        F.max((~F.isnan("value")).cast("int")).alias("anyval"),
        vals.alias("vals"), oks.alias("oks"),
        F.sum("n").alias("n"), F.sum("records").alias("records"), F.max("flagged").alias("flagged"),
        F.min_by("prov", "raw_op").alias("prov"), F.min_by("value", "raw_op").alias("v1"),
        F.min_by("ref_value", "raw_op").alias("o1"),
        F.array_sort(F.collect_list("raw_op")).alias("names"),
    )

    def med(a: Any) -> Any:  # the median of a sorted array (the mean of the two middle values)
        n = F.size(a)
        return (F.element_at(a, F.floor((n - 1) / 2).cast("int") + 1)
                + F.element_at(a, F.floor(n / 2).cast("int") + 1)) / 2

    oks_nan = F.exists(F.col("oks"), lambda x: F.isnan(x))
    merged_v = F.when(F.col("anyval") == 0, nan).when(F.col("additive"), F.col("vsum")).otherwise(med(F.col("vals")))
    merged_o = F.when(F.col("additive"), F.col("osum")).when(oks_nan, nan).otherwise(med(F.col("oks")))
    shown = F.array_join(F.slice("names", 1, 3), ", ")
    note = F.concat(F.when(F.col("additive"), F.lit("sum")).otherwise(F.lit("median")), F.lit(" of "),
                    F.col("k").cast("string"), F.lit(" raw ops: "), shown,
                    F.when(F.col("k") > 3, F.concat(F.lit(", ... ("), F.col("k").cast("string"), F.lit(" in all)")))
                    .otherwise(F.lit("")))
    one = F.col("k") == 1
    return g.select(
        *KEY,
        F.when(one, F.col("v1")).otherwise(merged_v).alias("value"),
        F.when(one, F.col("o1")).otherwise(merged_o).alias("ref_value"),
        F.col("n").cast("long").alias("n"), "flagged", "records",
        F.when(one, F.lit(None).cast("string")).otherwise(note).alias("note"),
        *[F.col(f"prov.{c}").alias(c) for c in PROV],
    )


def _empty(spark: Any, config: Config) -> SparkSelection:
    coverage, _ = coverage_and_map([], config)
    counts = {"records": 0, "history_records": 0, "null_records": 0, "null_keys": 0, "flagged_records": 0}
    return SparkSelection(spark.createDataFrame([], ENTRY_SCHEMA), [], [], coverage, counts)
