"""Each count a user reads, defined once; the CLI, the API, the report and the demo all call these.

Two numbers that claim to be the same count and differ cost the reader's trust in every other
number, so no caller counts these itself (docs/tracker.md, "Counts"):

* `sources(store)`: the sources in the store's manifest — one per ingested file, or per set of
  records xfid computed itself (a roofline plan, a calibration write-back). What `xfid summary`
  prints, `store.summary()["sources"]` and the report's provenance appendix list.
* `active(issues)` / `ACTIVE`: issues someone still has to act on — in state `open`,
  `acknowledged` or `reopened`. `open` is one state of the three; the group is called *active*
  (`store.issues(state="active")`, `xfid issues list --state active`). A check's `total_open`
  is this count at the check.
* `unmatched_ops(coverage)`: the raw op names of a source that has op-map rules which none of
  those rules matched (a coverage gap). Raw names of a source with no rule at all are its op
  names by design, not a gap, and are not counted.
* `keys_without_reference(rows)`: aligned keys of kind `missing_reference`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from xfid.tracker.lifecycle import ACTIVE

if TYPE_CHECKING:
    import pandas as pd

    from xfid.store import Store

ACTIVE_WORD = "active"
"""The name of the group of states in ACTIVE (accepted as a state filter)."""

__all__ = ["ACTIVE", "ACTIVE_WORD", "active", "is_active", "keys_without_reference", "sources", "unmatched_ops"]


def sources(store: Store) -> int:
    """Sources in the manifest (every ingested file and every computed set of records)."""
    return len(store.sources())


def is_active(state: Any) -> bool:
    """Whether an issue in `state` counts as active (open, acknowledged or reopened)."""
    return str(state) in ACTIVE


def active(issues: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The active issues among `issues` (dicts with a `state`), in their order."""
    return [i for i in issues if is_active(i.get("state"))]


def unmatched_ops(coverage: pd.DataFrame | None) -> pd.DataFrame:
    """Coverage rows of raw ops that the op maps of their source did not match, most records first.

    A coverage table without `has_rules` (none is written so today) counts every unmatched name."""
    import pandas as pd

    if coverage is None or coverage.empty:
        return pd.DataFrame(columns=list(coverage.columns) if coverage is not None else ["source", "raw_op"])
    gap = ~coverage["matched"].astype(bool)
    if "has_rules" in coverage.columns:
        gap &= coverage["has_rules"].astype(bool)
    return coverage[gap].sort_values("records", ascending=False, kind="stable")


def keys_without_reference(rows: pd.DataFrame | None) -> int:
    """Aligned keys with no reference value (kind `missing_reference`)."""
    if rows is None or not len(rows) or "kind" not in rows.columns:
        return 0
    return int((rows["kind"] == "missing_reference").sum())
