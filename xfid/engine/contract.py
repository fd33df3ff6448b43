"""The correlation result every consumer (tracker, report, compare) reads: columns and shape.

`xfid.engine.correlate(...)` returns a `Correlation`. Its DataFrames have exactly these
columns (errors are fractions, never percent). Consumers must only rely on what is listed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from xfid.engine.schema import (
    BOUND,
    BOUND_STATS,
    COMPARISON_FIELDS,
    COVERAGE_FIELDS,
    ESTIMATE,
    ESTIMATE_STATS,
    ROW_FIELDS,
    names,
    packed,
)

# One row per aligned (candidate fidelity, reference fidelity, key); the fields and their types
# are declared once, in xfid.engine.schema.
ROW_COLUMNS = names(ROW_FIELDS)
# kind: "ok" | "over_tolerance" | "bound_violation" | "config_mismatch" | "missing_reference"

# Aggregates: one row per (target, pair, metric, stat) with workload = None, and one per
# (target, workload, pair, metric, stat).
COMPARISON_COLUMNS = names(COMPARISON_FIELDS)
# mape_ci / bias_ci: [low, high] lists (seeded bootstrap 95%), or None when n < 3.
# compared_as: "estimate" (the candidate estimates the reference: mape .. bias_ci are set) or
# "bound" (a bound pair's bound metric, e.g. roofline latency: mape, median_ape, bias, log_rmse,
# within_tolerance, mape_ci and bias_ci are None, and these are set instead):
#   violations       rows whose reference is beyond the bound (kind bound_violation), of n checked
#   violation_worst  the largest achieved fraction among them (> 1), None without violations
#   achieved_*       the fraction of the bound achieved per row (the row's `efficiency`: bound /
#                    measured for time-like metrics, measured / bound for rates; <= 1 while the
#                    bound holds): median, quartiles q1 / q3, and achieved_ci the 95% CI of the
#                    median ([low, high]: seeded bootstrap, order statistics above
#                    bootstrap_exact_max_n), None when n < 3.
#   violation_ids    the fingerprints of the violations, worst first ([] without; None for an
#                    estimate). `--format json` names them by the tracker's XF id where it has one.
COMPARED_AS = (ESTIMATE, BOUND)
ESTIMATE_COLUMNS = packed(ESTIMATE_STATS)
BOUND_COLUMNS = (*packed(BOUND_STATS), "violation_ids")

# The subset of rows that are discrepancies (kind != "ok"), same columns as ROW_COLUMNS.
DISCREPANCY_KINDS = ("bound_violation", "config_mismatch", "over_tolerance", "missing_reference")

# Coverage: which raw op names the op maps matched, per source adapter.
COVERAGE_COLUMNS = names(COVERAGE_FIELDS)


@dataclass
class Correlation:
    rows: pd.DataFrame
    comparisons: pd.DataFrame
    discrepancies: pd.DataFrame
    coverage: pd.DataFrame
    sources: list[dict[str, Any]] = field(default_factory=list)  # source_id, path, adapter, content_hash
    config_hash: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  # run/as_of selection, clocks used, ...
