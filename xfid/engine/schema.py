"""The one declaration of the engine's output fields: rows, comparisons, statistics, counts.

Every field is named here once with its Arrow type; the contract's column tuples
(xfid.engine.contract), the rows' extra columns, Spark's DDL schemas (xfid.engine.spark.groups),
the snapshot fields (xfid.drift.snapshot) and both engines' frames are derived from or checked
against these lists (tests/test_engine_contract.py fails without Java when an engine does not
produce a declared field). Adding a statistic: compute it in xfid.engine.stats.grouped_stats and
declare it in STAT_FIELDS (the comparisons' fields are derived from it). Each row field also
declares where its values come from (`Source`); both engines' row builders (xfid.engine.rows,
xfid.engine.spark.groups) build every field from that, and name none themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import pyarrow as pa


class Source(NamedTuple):
    """Where a row field's values come from: the aligner's PairRows (xfid.engine.pairrows) and the
    selection (xfid.engine.selection.Selected). Both engines' row builders read this, not the
    field's name: each only knows how to build each kind of source (the local engine as numpy
    arrays and pandas Categoricals over the store's codes, Spark as Arrow arrays of one group).

    kind  NUMBER       the PairRows array `name`, as it is;
          CODE         the PairRows array `name` of codes into a list of texts
                       (xfid.engine.pairrows.code_texts names the list of each);
          ENTRY        the selection's dimension `name` (its code) of the row's candidate entry;
          FIDELITY     the pair's fidelity on `side`;
          COUNT        the selection's n of the entry on `side` (null where the reference is missing);
          TEXT         the entry text `name` (a records column) of the entry on `side`;
          FINGERPRINT  the row's identity hash (xfid.engine.fingerprints)."""

    kind: str
    name: str = ""
    side: str = ""


NUMBER, CODE, ENTRY, FIDELITY, COUNT, TEXT, FINGERPRINT = (
    "number", "code", "entry", "fidelity", "count", "text", "fingerprint")
CANDIDATE, REFERENCE = SIDES = ("candidate", "reference")
"""The two sides of a row (Pair.candidate, Pair.reference); the reference may be missing."""


class Field(NamedTuple):
    """One output field: its name, Arrow type, and for a text field of the rows whether it
    repeats few values (a category: the local engine builds it as one, Spark collects it as one);
    a row field says where its values come from (`source`).
    A statistic also says whose it is (`role`: ESTIMATE or BOUND, "" for every group's) and, when
    the comparisons show it as another type than grouped_stats computes it, that type (`shown`)."""

    name: str
    type: pa.DataType
    category: bool = False
    role: str = ""
    shown: pa.DataType | None = None
    source: Source | None = None


S, F, I64, B = pa.string(), pa.float64(), pa.int64(), pa.bool_()
FLOATS = pa.list_(F)
"""A [low, high] interval."""


def _row(name: str, type: pa.DataType, source: Source, category: bool = False) -> Field:
    return Field(name, type, category, source=source)


C, R = SIDES
ROW_FIELDS: tuple[Field, ...] = (
    _row("fingerprint", S, Source(FINGERPRINT)),
    _row("target", S, Source(ENTRY, "target"), True), _row("workload", S, Source(ENTRY, "workload"), True),
    _row("op", S, Source(ENTRY, "op"), True), _row("metric", S, Source(CODE, "metric"), True),
    _row("stat", S, Source(ENTRY, "stat"), True),
    _row("candidate", S, Source(FIDELITY, side=C), True), _row("reference", S, Source(FIDELITY, side=R), True),
    _row("candidate_value", F, Source(NUMBER, "cand_value")), _row("reference_value", F, Source(NUMBER, "ref_value")),
    _row("unit", S, Source(CODE, "unit"), True),
    _row("rel_error", F, Source(NUMBER, "rel")), _row("log_ratio", F, Source(NUMBER, "log_ratio")),
    _row("tolerance", F, Source(NUMBER, "tol")), _row("tolerance_abs", F, Source(NUMBER, "tol_abs")),
    _row("within", B, Source(NUMBER, "within")), _row("kind", S, Source(CODE, "kind")),
    _row("severity", F, Source(NUMBER, "severity")),
    _row("candidate_n", I64, Source(COUNT, side=C)), _row("reference_n", I64, Source(COUNT, side=R)),
    _row("candidate_run", S, Source(TEXT, "run", C), True), _row("reference_run", S, Source(TEXT, "run", R), True),
    _row("candidate_source_path", S, Source(TEXT, "source_path", C), True),
    _row("candidate_source_loc", S, Source(TEXT, "source_loc", C)),
    _row("reference_source_path", S, Source(TEXT, "source_path", R), True),
    _row("reference_source_loc", S, Source(TEXT, "source_loc", R)),
    _row("candidate_config", S, Source(TEXT, "config", C), True),
    _row("reference_config", S, Source(TEXT, "config", R), True),
    _row("note", S, Source(CODE, "note")),
)
"""One row per aligned (candidate fidelity, reference fidelity, key): the contract's columns."""

ROW_EXTRA_FIELDS: tuple[Field, ...] = (_row("efficiency", F, Source(NUMBER, "efficiency")),
                                        _row("factor", F, Source(NUMBER, "factor")), _row("scope", S, Source(CODE, "scope")))
"""Added row columns: achieved fraction of a roofline bound (bound/ref for times, ref/bound for
rates); how far off the row is (|rel_error| / tolerance, the kind is its own column: `severity`
is only the sort key that ranks the kinds); what the candidate number is per (xfid.scope)."""

GROUP_FIELDS: tuple[Field, ...] = (Field("target", S), Field("workload", S), Field("candidate", S),
                                   Field("reference", S), Field("metric", S), Field("stat", S))
"""What an aggregate is of (workload None: the target level)."""

TARGET_GROUP_FIELDS = tuple(f.name for f in GROUP_FIELDS if f.name != "workload")
"""What a target-level aggregate is of (GROUP_FIELDS less the workload), in that order."""

ESTIMATE, BOUND = "estimate", "bound"
"""A statistic's role: the estimate's (how far a number is from its reference) or the bound's
(violations, and the fraction of the bound achieved)."""
CI_LOW, CI_HIGH = "_ci_low", "_ci_high"
"""A statistic named X_ci_low / X_ci_high is one end of the interval X_ci the comparisons show."""


def _stat(name: str, role: str = "", shown: pa.DataType | None = None) -> Field:
    return Field(name, F, role=role, shown=shown)


STAT_FIELDS: tuple[Field, ...] = (
    Field("n", I64), _stat("mape", ESTIMATE), _stat("median_ape", ESTIMATE), _stat("bias", ESTIMATE),
    _stat("log_rmse", ESTIMATE), _stat("pearson_log"), _stat("spearman"), _stat("kendall"),
    _stat("within_tolerance", ESTIMATE),
    _stat("mape_ci_low", ESTIMATE), _stat("mape_ci_high", ESTIMATE), _stat("bias_ci_low", ESTIMATE),
    _stat("bias_ci_high", ESTIMATE),
    _stat("violations", BOUND, shown=I64), _stat("violation_worst", BOUND), _stat("achieved_median", BOUND),
    _stat("achieved_q1", BOUND), _stat("achieved_q3", BOUND), _stat("achieved_ci_low", BOUND),
    _stat("achieved_ci_high", BOUND),
)
"""What xfid.engine.stats.grouped_stats computes per group (besides its `bound` flag), in the order
Spark carries them and the comparisons show them; the *_ci_low/high pairs become the comparisons'
intervals. Adding a statistic: compute it in grouped_stats and add it here (the comparisons'
fields, the estimate/bound lists, Spark's schemas and the contract's columns follow)."""

ESTIMATE_STATS = tuple(f.name for f in STAT_FIELDS if f.role == ESTIMATE)
"""The statistics of an estimate: how far a number is from its reference. A bound group has none
(a bound is not an estimate of the reference: its distance from it is no error)."""
BOUND_STATS = tuple(f.name for f in STAT_FIELDS if f.role == BOUND)
"""The statistics of a bound: violations, and the fraction of the bound achieved (row
`efficiency`: bound / measured for a time-like metric, measured / bound for a rate; <= 1 while
the bound holds). An estimate group has none of them (NaN)."""

BOUND_FLAG = Field("bound", B)
"""grouped_stats' flag: the group is a bound (its rows have an achieved fraction)."""

CI_FIELDS = {f.name[:-len(CI_LOW)] + "_ci": (f.name, f.name[:-len(CI_LOW)] + CI_HIGH)
             for f in STAT_FIELDS if f.name.endswith(CI_LOW)}
"""Each comparison interval and the two statistics it packs."""

COMPARED_AS_FIELD = Field("compared_as", S)
"""Whether a comparison is of an estimate or of a bound (xfid.engine.contract)."""
VIOLATION_IDS = Field("violation_ids", pa.list_(S))
"""The fingerprints of a bound comparison's violations, worst first."""


def _comparison_fields() -> tuple[Field, ...]:
    """GROUP_FIELDS, then STAT_FIELDS as the comparisons show them: each interval's two ends as
    one [low, high] field, `compared_as` before the bound statistics, `violation_ids` last."""
    out = list(GROUP_FIELDS)
    for f in STAT_FIELDS:
        if f.role == BOUND and COMPARED_AS_FIELD not in out:
            out.append(COMPARED_AS_FIELD)
        if f.name.endswith(CI_HIGH):
            continue
        if f.name.endswith(CI_LOW):
            out.append(Field(f.name[:-len(CI_LOW)] + "_ci", FLOATS))
        else:
            out.append(Field(f.name, f.shown or f.type))
    return (*out, VIOLATION_IDS)


COMPARISON_FIELDS: tuple[Field, ...] = _comparison_fields()
"""One row per (target, pair, metric, stat) with workload None, and one per (target, workload,
pair, metric, stat): see xfid.engine.contract for what each means."""

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

SNAPSHOT_AGG_FIELDS = ("target", "candidate", "reference", "metric", "stat", "n", "mape", "median_ape", "bias",
                       "log_rmse", "spearman", "kendall", "within_tolerance", "compared_as", "violations",
                       "violation_worst", "achieved_median", "achieved_q1", "achieved_q3")
"""The comparison fields a snapshot keeps per target-level aggregate (in this order)."""


KEY_FIELDS = ("target", "workload", "op", "metric", "stat")
"""What one number is of (each fidelity has one per key); a row is one key of one pair (SIDES)."""
FINGERPRINT_FIELDS = (*KEY_FIELDS, *SIDES)
"""What a row's fingerprint hashes, in this order (xfid.engine.fingerprints; Spark's sha2)."""
SNAPSHOT_KEY_FIELDS = (*FINGERPRINT_FIELDS, "candidate_value", "reference_value", "unit", "rel_error", "log_ratio",
                       "tolerance", "kind", "within")
"""The row fields a baseline snapshot keeps per fingerprint (xfid.drift.snapshot; in this order)."""
ROW_ORDER = ("target", "metric", "stat", "workload", "op")
"""The key fields in the order both engines sort a pair's rows by (after the pair)."""


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


def row_field(kind: str, name: str = "", side: str = "") -> str:
    """The name of the row field (ROW_FIELDS, ROW_EXTRA_FIELDS) built from Source(kind, name, side)."""
    src = Source(kind, name, side)
    found = [f.name for f in (*ROW_FIELDS, *ROW_EXTRA_FIELDS) if f.source == src]
    if len(found) != 1:
        raise KeyError(f"{len(found)} row fields come from {src}")
    return found[0]


STATS_INPUT = tuple(row_field(*s) for s in ((NUMBER, "rel"), (NUMBER, "log_ratio"), (NUMBER, "cand_value"),
                                           (NUMBER, "ref_value"), (NUMBER, "within"), (NUMBER, "efficiency"),
                                           (CODE, "kind")))
"""The row fields xfid.engine.stats' grouped statistics read of a group's rows (besides its key)."""
SIDE_VALUES = (row_field(NUMBER, "cand_value"), row_field(NUMBER, "ref_value"))
"""Each side's number (SIDES' order)."""
SHOWN_NUMBERS = (row_field(NUMBER, "rel"), row_field(NUMBER, "efficiency"), row_field(NUMBER, "tol"),
                 row_field(NUMBER, "factor"))
"""The numbers of a row a report lists beside its two values (xfid.report.attach), in that order."""
NULLABLE_TEXT = names(f for f in (*ROW_FIELDS, *ROW_EXTRA_FIELDS) if f.type == S and not f.category)
"""The row fields of text that are not categories: a missing one is None in a rows frame."""


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
    if sorted(ROW_ORDER) != sorted(KEY_FIELDS) or not set(KEY_FIELDS) <= rows:
        missing.append(f"ROW_ORDER {ROW_ORDER} / KEY_FIELDS {KEY_FIELDS}")
    if missing:
        raise AssertionError(f"xfid.engine.schema names undeclared fields: {missing}")


_check_subsets()
