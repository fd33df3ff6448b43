"""The one declaration of the engine's output fields: rows, comparisons, statistics, counts.

Every field is named here once with its Arrow type; the contract's column tuples
(xfid.engine.contract), the rows' extra columns, Spark's DDL schemas (xfid.engine.spark.groups),
the snapshot fields (xfid.drift.snapshot) and both engines' frames are derived from or checked
against these lists (tests/test_engine_contract.py fails without Java when an engine does not
produce a declared field). Adding a statistic: compute it in xfid.engine.stats.grouped_stats and
declare it in STAT_FIELDS (and in COMPARISON_FIELDS when the comparisons show it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import pyarrow as pa


class Field(NamedTuple):
    """One output field: its name, Arrow type, and for a text field of the rows whether it
    repeats few values (a category: the local engine builds it as one, Spark collects it as one)."""

    name: str
    type: pa.DataType
    category: bool = False


S, F, I64, B = pa.string(), pa.float64(), pa.int64(), pa.bool_()
FLOATS = pa.list_(F)
"""A [low, high] interval."""

ROW_FIELDS: tuple[Field, ...] = (
    Field("fingerprint", S),
    Field("target", S, True), Field("workload", S, True), Field("op", S, True), Field("metric", S, True),
    Field("stat", S, True), Field("candidate", S, True), Field("reference", S, True),
    Field("candidate_value", F), Field("reference_value", F), Field("unit", S, True),
    Field("rel_error", F), Field("log_ratio", F), Field("tolerance", F), Field("tolerance_abs", F),
    Field("within", B), Field("kind", S), Field("severity", F),
    Field("candidate_n", I64), Field("reference_n", I64),
    Field("candidate_run", S, True), Field("reference_run", S, True),
    Field("candidate_source_path", S, True), Field("candidate_source_loc", S),
    Field("reference_source_path", S, True), Field("reference_source_loc", S),
    Field("candidate_config", S, True), Field("reference_config", S, True), Field("note", S),
)
"""One row per aligned (candidate fidelity, reference fidelity, key): the contract's columns."""

ROW_EXTRA_FIELDS: tuple[Field, ...] = (Field("efficiency", F), Field("factor", F), Field("scope", S))
"""Added row columns: achieved fraction of a roofline bound (bound/ref for times, ref/bound for
rates); how far off the row is (|rel_error| / tolerance, the kind is its own column: `severity`
is only the sort key that ranks the kinds); what the candidate number is per (xfid.scope)."""

GROUP_FIELDS: tuple[Field, ...] = (Field("target", S), Field("workload", S), Field("candidate", S),
                                   Field("reference", S), Field("metric", S), Field("stat", S))
"""What an aggregate is of (workload None: the target level)."""

STAT_FIELDS: tuple[Field, ...] = (
    Field("n", I64), Field("mape", F), Field("median_ape", F), Field("bias", F), Field("log_rmse", F),
    Field("pearson_log", F), Field("spearman", F), Field("kendall", F), Field("within_tolerance", F),
    Field("mape_ci_low", F), Field("mape_ci_high", F), Field("bias_ci_low", F), Field("bias_ci_high", F),
    Field("violations", F), Field("violation_worst", F), Field("achieved_median", F), Field("achieved_q1", F),
    Field("achieved_q3", F), Field("achieved_ci_low", F), Field("achieved_ci_high", F),
)
"""What xfid.engine.stats.grouped_stats computes per group (besides its `bound` flag), in the order
Spark carries them; the *_ci_low/high pairs become the comparisons' intervals."""

BOUND_FLAG = Field("bound", B)
"""grouped_stats' flag: the group is a bound (its rows have an achieved fraction)."""

COMPARISON_FIELDS: tuple[Field, ...] = (
    *GROUP_FIELDS,
    Field("n", I64), Field("mape", F), Field("median_ape", F), Field("bias", F), Field("log_rmse", F),
    Field("pearson_log", F), Field("spearman", F), Field("kendall", F), Field("within_tolerance", F),
    Field("mape_ci", FLOATS), Field("bias_ci", FLOATS),
    Field("compared_as", S), Field("violations", I64), Field("violation_worst", F),
    Field("achieved_median", F), Field("achieved_q1", F), Field("achieved_q3", F), Field("achieved_ci", FLOATS),
    Field("violation_ids", pa.list_(S)),
)
"""One row per (target, pair, metric, stat) with workload None, and one per (target, workload,
pair, metric, stat): see xfid.engine.contract for what each means."""

CI_FIELDS = {"mape_ci": ("mape_ci_low", "mape_ci_high"), "bias_ci": ("bias_ci_low", "bias_ci_high"),
             "achieved_ci": ("achieved_ci_low", "achieved_ci_high")}
"""Each comparison interval and the two statistics it packs."""

COUNT_FIELDS: tuple[Field, ...] = tuple(Field(k, I64) for k in (
    "candidate_keys", "outside_reference_workloads", "value_stat_fallback", "reference_only_keys", "aligned",
    "missing_reference", "flagged_reference", "not_comparable", "derived"))
"""Per pair, what its alignment counted (`settings.pairs[i]`)."""

COVERAGE_FIELDS: tuple[Field, ...] = (Field("source", S), Field("raw_op", S), Field("op", S), Field("matched", B),
                                      Field("records", I64))
"""Which raw op names the op maps matched, per source adapter."""

DISCREPANCY_JSON_FIELDS = (
    "fingerprint", "target", "workload", "op", "metric", "stat", "candidate", "reference",
    "candidate_value", "reference_value", "unit", "rel_error", "log_ratio", "tolerance", "tolerance_abs",
    "kind", "factor", "severity", "efficiency", "scope", "candidate_n", "reference_n", "candidate_run", "reference_run",
    "candidate_source_path", "candidate_source_loc", "reference_source_path", "reference_source_loc", "note",
)
"""The row fields of a discrepancy in `--format json`, in the order it prints them."""

SNAPSHOT_KEY_FIELDS = ("target", "workload", "op", "metric", "stat", "candidate", "reference", "candidate_value",
                       "reference_value", "unit", "rel_error", "log_ratio", "tolerance", "kind", "within")
"""The row fields a baseline snapshot keeps per fingerprint (xfid.drift.snapshot; in this order)."""
SNAPSHOT_AGG_FIELDS = ("target", "candidate", "reference", "metric", "stat", "n", "mape", "median_ape", "bias",
                       "log_rmse", "spearman", "kendall", "within_tolerance", "compared_as", "violations",
                       "violation_worst", "achieved_median", "achieved_q1", "achieved_q3")
"""The comparison fields a snapshot keeps per target-level aggregate (in this order)."""


def names(fields: Iterable[Field]) -> tuple[str, ...]:
    """The names of `fields`, in order."""
    return tuple(f.name for f in fields)


def packed(stats: Iterable[str]) -> tuple[str, ...]:
    """Statistic names as the comparisons show them: each *_ci_low/high pair as its interval."""
    out: list[str] = []
    for s in stats:
        name = next((ci for ci, pair in CI_FIELDS.items() if s in pair), s)
        if name not in out:
            out.append(name)
    return tuple(out)


def arrow_schema(fields: Iterable[Field]) -> pa.Schema:
    """The Arrow schema of `fields`."""
    return pa.schema([(f.name, f.type) for f in fields])


SPARK_TYPES = {pa.string(): "string", pa.float64(): "double", pa.int32(): "int", pa.int64(): "long",
               pa.bool_(): "boolean"}
"""Arrow type -> Spark SQL type name, for the types the Spark engine's frames carry."""


def ddl(fields: Iterable[Field]) -> str:
    """A Spark DDL schema string ("name type, ...") of `fields` (flat types only)."""
    return ", ".join(f"{f.name} {SPARK_TYPES[f.type]}" for f in fields)


def _check_subsets() -> None:
    rows, comps = set(names(ROW_FIELDS)), set(names(COMPARISON_FIELDS))
    stats = set(names(STAT_FIELDS))
    rows |= set(names(ROW_EXTRA_FIELDS))
    missing = ([n for n in (*SNAPSHOT_KEY_FIELDS, *DISCREPANCY_JSON_FIELDS) if n not in rows] + [n for n in SNAPSHOT_AGG_FIELDS if n not in comps]
               + [n for pair in CI_FIELDS.values() for n in pair if n not in stats] + [n for n in CI_FIELDS
                                                                                        if n not in comps])
    if missing:
        raise AssertionError(f"xfid.engine.schema names undeclared fields: {missing}")


_check_subsets()
