"""`correlate()` on Apache Spark: the local engine's semantics, computed on the cluster.

The stages and where they run:

* selection (`select.py`): Spark SQL over exactly the committed parts the catalog lists;
* alignment (`groups.align_group`): one Arrow UDF call per (target, workload) on the executors,
  running the local engine's `Aligner` on that group's entries and returning each row's numbers,
  codes and short texts (not its provenance); the fingerprints of the rows that come back in
  Spark SQL (`sha2` of the same bytes as `xfid.engine.fingerprints.fingerprint`), and their
  provenance joined back from the entries (`provenance.with_provenance`);
* aggregates (`groups.stats_group`): one call per (target, pair, metric, stat), running the
  local engine's `grouped_stats` (Kendall tau-b, the seeded bootstrap) on that group's rows.

What comes back to the driver is bounded: the discrepancies, the rows of the fingerprints
asked for (`track`: the tracker's open issues, so auto-resolve sees them clean), the
comparisons, the coverage table, per-pair and selection counts. `Correlation.rows` holds those
rows only; `settings["spark"]["rows"]` says how many rows the cluster aligned.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from xfid.config import Config
from xfid.engine.aggregate import pack_comparisons
from xfid.engine.contract import ROW_COLUMNS, Correlation
from xfid.engine.pairrows import KINDS
from xfid.engine.pairs import check_conversions, resolve_pairs
from xfid.engine.request import Request
from xfid.engine.result import Aligned, Selection, Start, begin, finish
from xfid.engine.rows import ROW_EXTRA
from xfid.engine.schema import (
    FINGERPRINT_FIELDS,
    KEY_FIELDS,
    NULLABLE_TEXT,
    ROW_FIELDS,
    ROW_ORDER,
    STATS_INPUT,
)
from xfid.engine.scopes import SCOPE_NAMES
from xfid.engine.spark.groups import (
    ALIGN_INPUT,
    ALIGNED_SCHEMA,
    COUNT_KEYS,
    STATS_GROUP,
    STATS_SCHEMA,
    AlignContext,
    StatsContext,
    align_group,
    stats_arrow,
)
from xfid.engine.spark.output import is_discrepancy, write_discrepancies
from xfid.engine.spark.provenance import with_provenance
from xfid.engine.spark.select import select_spark
from xfid.engine.spark.session import SparkSettings, quiet
from xfid.engine.spark.sizing import is_oom, oom_advice, oom_cause
from xfid.errors import EngineError, XfidError
from xfid.store import Store
from xfid.sysmem import available_memory

CATEGORICAL = tuple(f.name for f in ROW_FIELDS if f.category)
"""The row fields collected as categories (few distinct values among millions of rows)."""


def correlate(store: Store, config: Config, request: Request | None = None, *,
              settings: SparkSettings | None = None, spark: Any = None, **fields: Any) -> Correlation:
    """`xfid.engine.correlate` on Spark (same request, same result contract).

    Args:
        request: what to correlate (or a Request of `fields`); its `track` (fingerprints whose
            rows come back whatever their kind: the tracker's open issues) and `keep` (rows
            whose columns hold one of the given values: the rows a calibration fits) name the
            rows that come back besides the discrepancies.
        settings: the Spark master and conf (default: `[engine.spark]`, env XFID_SPARK_MASTER).
        spark: an existing SparkSession to use instead (short for SparkSettings(session=...)).

    Returns:
        A Correlation whose rows are the discrepancies and the tracked rows (see the module docstring).

    Raises:
        EngineError: pyspark is not installed; ConfigError: a bad pair, run, date or target.
    """
    req = request if request is not None else Request.of(**fields)
    opts = settings or SparkSettings()
    if spark is not None:
        opts = replace(opts, session=spark)
    start = begin(config, req)
    records = store_records(store)
    with quiet():
        session = opts.spark(config, records)
        master = str(session.sparkContext.master)
        conf = _conf(session)  # read now: an out-of-memory error can end the JVM
        try:
            return _correlate(session, store, config, start, req)
        except XfidError:
            raise
        except Exception as e:  # a failed Spark job: its cause in one line, not a JVM stack trace
            if not _from_spark(e):
                raise
            raise spark_error(e, master, conf, records) from None


def spark_error(e: BaseException, master: str, conf: dict[str, str], records: int,
                available: int | None = None) -> EngineError:
    """The EngineError for a failed Spark job: its cause in one line; when memory ran out, the
    setting to raise and a value that would fit (xfid.engine.spark.sizing.oom_advice)."""
    text = str(e)
    if is_oom(text):
        avail = available if available is not None else available_memory()
        return EngineError(f"Spark ({master}) ran out of memory ({oom_cause(text)}): "
                           f"{oom_advice(master, conf, records, avail)}")
    return EngineError(f"Spark ({master}) failed: {_cause(e)}")


def store_records(store: Store) -> int:
    """The store's record count, from the catalog (what sizes a local session)."""
    return sum(int(n or 0) for n in store.counts().values())


def _conf(session: Any) -> dict[str, str]:
    """The memory and partition settings of a session (those the advice on memory reads)."""
    out: dict[str, str] = {}
    for k in ("spark.driver.memory", "spark.executor.memory", "spark.sql.shuffle.partitions"):
        v = session.conf.get(k, None)
        if v is not None:
            out[k] = str(v)
    return out


def _from_spark(e: BaseException) -> bool:
    mod = type(e).__module__
    return mod.startswith(("pyspark", "py4j"))


def _cause(e: BaseException) -> str:
    """What went wrong, from a Spark error: the message of its first exception line (a JVM trace
    says it before the stack), else its first line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    msgs = [ln.split("Exception: ", 1)[1] for ln in lines if "Exception: " in ln]
    said = next((m for m in msgs if not m.startswith("Exception thrown in awaitResult")), None)
    said = (said or (lines[0] if lines else type(e).__name__))[:500]
    if "maxResultSize" in said:
        said += " (raise spark.driver.maxResultSize in [engine.spark] conf, or narrow the job to fewer targets)"
    return said


def _correlate(spark: Any, store: Store, config: Config, start: Start, req: Request) -> Correlation:
    """The Spark engine's steps: select -> align -> aggregate -> finish (xfid.engine.engines.Engine)."""
    selected = select(spark, store, config, req, start)
    try:
        aligned = align(selected)
        comparisons = aggregate(aligned)
    finally:
        selected.release()
    return finish(store, config, req, start, aligned, comparisons)


@dataclass
class SparkSelected:
    """The Spark selection (xfid.engine.spark.select) and its pairs; `aligned`, once align ran,
    the persisted rows and counts DataFrame the aggregates read too."""

    spark: Any
    config: Config
    sel: Any
    pairs: list[Any]
    req: Request
    settings: dict[str, Any]
    aligned: Any = None

    def release(self) -> None:
        """Unpersist what the steps persisted."""
        if self.aligned is not None:
            self.aligned.unpersist()
        if self.sel.persisted is not None:
            self.sel.persisted.unpersist()


@dataclass
class SparkAligned(Aligned):
    """Aligned rows brought back, plus the cluster's selection to aggregate."""

    selected: SparkSelected | None = None


def select(spark: Any, store: Store, config: Config, req: Request, start: Start) -> SparkSelected:
    """The entries in Spark SQL (xfid.engine.spark.select) and the pairs (conversions checked)."""
    sel = select_spark(spark, store, config, targets=list(req.targets) or None, runs=start.runs,
                       source_loc=req.provenance, as_of=start.as_of_datetime)
    pair_list = resolve_pairs(config, req.pairs, sel.fidelities)
    check_conversions(pair_list)
    return SparkSelected(spark, config, sel, pair_list, req, start.settings)


def align(s: SparkSelected) -> SparkAligned:
    """Align per (target, workload) on the executors; bring back the discrepancies, the tracked
    fingerprints' rows and the `keep` rows, and every pair's counts."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    spark, sel, pair_list, req = s.spark, s.sel, s.pairs, s.req
    track = sorted(set(req.track))
    ctx = AlignContext(s.config, s.settings, pair_list, sel.fidelities)
    rows = sel.entries.select(*ALIGN_INPUT).groupBy("target", "workload").applyInArrow(_bound(align_group, ctx),
                                                                                      ALIGNED_SCHEMA)
    s.aligned = aligned = rows.persist(StorageLevel.MEMORY_AND_DISK)
    counts = _pair_counts(aligned.filter(F.col("counts").isNotNull()).select("pair_index", "counts").collect())
    rows = aligned.filter(F.col("counts").isNull()).drop("counts")
    joined = any(c not in rows.columns for c in req.keep)
    if joined:  # a row is kept by its provenance: joined for every row first
        rows = with_provenance(rows, sel.entries)
    wanted = is_discrepancy(req.include_missing)
    violations = None
    if req.out:  # the executors write the discrepancies (spark/output.py): only tracked and kept rows come back
        written = rows.withColumn("fingerprint", fingerprint_column())
        violations = write_discrepancies(written if joined else with_provenance(written, sel.entries), req)
        wanted = F.lit(False)
    if track:  # every row's fingerprint, to find the tracked ones
        rows = rows.withColumn("fingerprint", fingerprint_column())
        tdf = spark.createDataFrame([(fp,) for fp in track], "fingerprint string").withColumn("_t", F.lit(True))
        rows = rows.join(F.broadcast(tdf), "fingerprint", "left")
        wanted = wanted | F.col("_t").isNotNull()
    if req.keep:
        also = F.lit(True)
        for col, values in req.keep.items():
            also = also & F.col(col).isin([str(v) for v in values])
        wanted = wanted | also
    rows = rows.filter(wanted).drop("_t")
    if not track:  # the fingerprints of the rows that come back only
        rows = rows.withColumn("fingerprint", fingerprint_column())
    if not joined:
        rows = with_provenance(rows, sel.entries)
    back = _local_rows(_collect_chunks(rows))
    if req.fingerprints != "all" and len(back):
        clean = back["kind"].isin(["ok", "missing_reference"]).to_numpy()
        back["fingerprint"] = np.where(clean, None, back["fingerprint"].to_numpy(dtype=object))
    aligned_pairs = {i: counts.get(i, dict.fromkeys(COUNT_KEYS, 0)) for i, p in enumerate(pair_list)
                     if p.candidate in sel.fidelities and p.reference in sel.fidelities}
    total = sum(c["aligned"] + c["missing_reference"] for c in aligned_pairs.values())
    extra = {"engine": "spark",
             "spark": {"master": spark.sparkContext.master, "rows": total, "rows_returned": len(back),
                       "tracked": len(track), "rows_kept": "tracked fingerprints (the discrepancies written to "
                       "Parquet)" if req.out else "discrepancies and tracked fingerprints"}}
    return SparkAligned(Selection(sel.targets, sel.counts, sel.coverage), pair_list, aligned_pairs, back, extra,
                        violations=violations, selected=s)


def fingerprint_column() -> Any:
    """A row's fingerprint in Spark SQL: the first 16 hex digits of the SHA-256 of its key fields
    joined by U+001F, in UTF-8 (the same bytes as xfid.engine.fingerprints.fingerprint)."""
    from pyspark.sql import functions as F

    return F.substring(F.sha2(F.concat_ws("\x1f", *[F.col(c) for c in FINGERPRINT_FIELDS]), 256), 1, 16)


def aggregate(a: SparkAligned) -> pd.DataFrame:
    """The comparisons: grouped_stats per (target, pair, metric, stat) on the executors."""
    from pyspark.sql import functions as F

    s = a.selected
    assert s is not None and s.aligned is not None
    finite = lambda c: F.col(c).isNotNull() & ~F.isnan(c) & (F.abs(F.col(c)) < float("inf"))  # noqa: E731
    kind = F.col("kind")
    usable = (s.aligned.filter(F.col("counts").isNull() & (kind != "missing_reference") & finite("rel_error")
                               & finite("log_ratio"))
              .select(*STATS_GROUP, *(k for k in KEY_FIELDS if k not in STATS_GROUP), *STATS_INPUT))
    sctx = StatsContext.of(s.settings, s.req.kendall, s.req.bootstrap, s.pairs)
    stats = usable.groupBy(*STATS_GROUP).applyInArrow(_bound(stats_arrow, sctx), STATS_SCHEMA).toPandas()
    a.selected = None
    return pack_comparisons(stats)


def _bound(fn: Any, ctx: Any) -> Any:
    """`fn` with its context bound, as a plain function of one Arrow table."""
    import pyarrow as pa

    def run(table: pa.Table) -> pa.Table:
        return fn(table, ctx)

    return run


def _pair_counts(rows: list[Any]) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for r in rows:
        acc = out.setdefault(int(r[0]), dict.fromkeys(COUNT_KEYS, 0))
        for k, v in json.loads(r[1]).items():
            acc[k] += int(v)
    return out


CHUNK_ROWS = 500_000
"""About how many rows one collect brings to the driver at a time (whole partitions)."""


def _collect_chunks(df: Any, chunk_rows: int | None = None) -> list[pd.DataFrame]:
    """The rows of `df` on the driver as pandas frames of about `chunk_rows` rows each.

    One collect of millions of rows would hold them twice on the driver (Arrow batches, then the
    frame) and all at once in the driver JVM; a chunk of partitions at a time keeps both at one
    chunk. Repeated strings become categories (one str per distinct value in a chunk: millions of
    discrepancies share few targets, ops, runs, paths and configs)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    tagged = df.withColumn("_part", F.spark_partition_id()).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        sizes = sorted((int(r[0]), int(r[1])) for r in tagged.groupBy("_part").count().collect())
        frames = []
        for ids in _chunks(sizes, chunk_rows or CHUNK_ROWS):
            table = tagged.filter(F.col("_part").isin(ids)).drop("_part").toArrow()
            frames.append(table.to_pandas(strings_to_categorical=True))
            del table
        return frames  # none when no row comes back (_local_rows builds the empty frame)
    finally:
        tagged.unpersist()


def _chunks(sizes: Sequence[tuple[int, int]], chunk_rows: int) -> list[list[int]]:
    """Consecutive partition ids grouped so that a group holds about `chunk_rows` rows (a
    partition larger than that is a group of its own)."""
    out: list[list[int]] = []
    n = 0
    for pid, rows in sizes:
        if not out or n + rows > chunk_rows:
            out.append([])
            n = 0
        out[-1].append(pid)
        n += rows
    return out


def _column(frames: list[pd.DataFrame], name: str) -> pd.Series:
    """Column `name` of the chunks as one Series, removed from the chunks as it is built (the
    driver holds a column twice at most, never the whole result)."""
    pieces = [f.pop(name) for f in frames]
    if all(isinstance(p.dtype, pd.CategoricalDtype) for p in pieces):
        return pd.Series(union_categoricals([p.array for p in pieces]), name=name)
    return pd.concat([p.astype(object) if isinstance(p.dtype, pd.CategoricalDtype) else p for p in pieces],
                     ignore_index=True)


def _local_rows(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The collected chunks as one frame in the local engine's order (pair, then key) and
    dtypes; the chunks are emptied as it goes."""
    cols = [*ROW_COLUMNS, *ROW_EXTRA]
    if not sum(len(f) for f in frames):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols}).assign(
            kind=pd.Categorical([], categories=list(KINDS)))
    built: dict[str, pd.Series] = {}
    for c in CATEGORICAL:  # categories sorted (their codes then sort as the strings do), as object
        col = _column(frames, c)
        col = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
        built[c] = col.cat.set_categories(pd.Index(sorted(str(x) for x in col.cat.categories), dtype=object))
    keys = [_column(frames, "pair_index").to_numpy(),
            *(built[c].cat.codes.to_numpy() for c in ROW_ORDER)]
    idx = np.lexsort(keys[::-1])  # pair, then key
    del keys
    out: dict[str, Any] = {}
    for c in cols:
        col = built.pop(c) if c in built else _column(frames, c)
        out[c] = col.take(idx).reset_index(drop=True)
        del col
    for c in NULLABLE_TEXT:
        out[c] = out[c].astype(object).where(out[c].notna(), None)
    out["kind"] = pd.Categorical(out["kind"].astype(object), categories=list(KINDS))
    out["scope"] = pd.Categorical(out["scope"].astype(object), categories=SCOPE_NAMES)
    out["reference_n"] = out["reference_n"].astype("Int64")
    out["candidate_n"] = out["candidate_n"].astype(np.int64)
    out["within"] = out["within"].astype(bool)
    return pd.DataFrame(out)
