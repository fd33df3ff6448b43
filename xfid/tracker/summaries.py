"""Summaries: what one check filed, grouped by probable common cause (like Perfherder's alert summaries).

A lead triages a summary, not forty issues. The issues a check filed (new or reopened at it)
are grouped greedily: among the causes the filed issues share, take the one shared by the most
issues not yet grouped, if it is shared by at least `min_issues` of them and those issues are at
least `min_share` of every comparable row of the check with that cause (a cause every row has,
such as the one model run behind all candidates, explains nothing); repeat. Ties go to the
cause kind listed first in CAUSES, then the higher share, then the reference side, then the text. Issues left over are
one summary each. Summary ids are `S-<check>-<n>`, numbered by size (largest first), then by
the lowest issue number: the same check and settings always give the same ids (the rows a check
saw and its filings are kept unchanged). See docs/tracker.md.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from xfid.errors import ConfigError, TrackerError
from xfid.sqlbackend import Database

MIN_ISSUES = 2
"""Default `[tracker] summary_min_issues`: the fewest issues a shared cause groups."""
MIN_SHARE = 0.5
"""Default `[tracker] summary_min_share`: the filed issues with a cause must be at least this share
of the check's comparable rows with that cause."""
CAUSES = ("run", "source", "workload", "op_class", "config")
"""Cause kinds, most specific first (the order breaks ties): the same measurement or model run
(one side's fidelity and run), the same source file, the same target and workload, the same op
class (of the same pair), the same software stack on one side (its config's stack keys)."""
SIDES = ("reference", "candidate")
FILING_ACTIONS = ("detected", "recurred")
"""The transitions that make an issue one a check filed: new, or reopened by it."""

_ID = re.compile(r"^\s*S-([0-9]{1,18})-([0-9]{1,9})\s*$", re.IGNORECASE | re.ASCII)
Cause = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True)
class SummarySettings:
    """The grouping thresholds (`[tracker] summary_min_issues`, `summary_min_share`)."""

    min_issues: int = MIN_ISSUES
    min_share: float = MIN_SHARE

    @classmethod
    def from_config(cls, section: Mapping[str, Any], where: str) -> SummarySettings:
        """Read and check the two keys.

        Raises:
            ConfigError: a value of the wrong type or out of range, naming the key and the file.
        """
        n = section.get("summary_min_issues", MIN_ISSUES)
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ConfigError(f"{where}: [tracker] summary_min_issues must be an integer >= 2, got {n!r}")
        s = section.get("summary_min_share", MIN_SHARE)
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 < s <= 1:
            raise ConfigError(f"{where}: [tracker] summary_min_share must be a number in (0, 1], got {s!r}")
        return cls(n, float(s))


def parse_id(summary_id: str) -> tuple[int, int]:
    """`S-3-1` -> (3, 1).

    Raises:
        TrackerError: anything else, with the expected form.
    """
    m = _ID.match(str(summary_id))
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise TrackerError(f"bad summary id {summary_id!r}; summary ids look like S-3-1 (check 3, summary 1: "
                           "see `xfid issues summaries`)")
    return int(m.group(1)), int(m.group(2))


def _text(v: Any) -> str | None:
    return None if v is None or (isinstance(v, float) and v != v) else str(v)


def op_class(op: str | None) -> str:
    """The op without its shape and layer (`layer3.attn.qkv_proj` -> `attn.qkv_proj`), as calibration groups ops."""
    from xfid.engine.calibration import op_class as cal_class

    return cal_class(op or "")


def stack_of(config: Any) -> tuple[tuple[str, str], ...]:
    """The software-stack keys of a side's config (versions, driver, CUDA, model, precision...), sorted."""
    from xfid.schema import STACK_HINTS

    if isinstance(config, str) and config.strip().startswith("{"):
        try:
            config = json.loads(config)
        except ValueError:
            return ()
    if not isinstance(config, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in config.items()
                        if not isinstance(v, (dict, list)) and any(h in str(k).lower() for h in STACK_HINTS)))


def causes_of(row: Mapping[str, Any]) -> list[Cause]:
    """Every cause one row (a filed issue's observation, or any row of the check) could share."""
    out: list[Cause] = []
    for side in SIDES:
        run = _text(row.get(f"{side}_run"))
        if run:
            out.append(("run", (side, _text(row.get(side)), run)))
    for side in SIDES:
        path = _text(row.get(f"{side}_source_path"))
        if path:
            out.append(("source", (side, _text(row.get(side)), path)))
    out.append(("workload", (_text(row.get("target")), _text(row.get("workload")))))
    out.append(("op_class", (_text(row.get("candidate")), _text(row.get("reference")), op_class(_text(row.get("op"))))))
    for side in SIDES:
        stack = stack_of(row.get(f"{side}_config"))
        if stack:
            out.append(("config", (side, _text(row.get(side)), stack)))
    return out


COUNT_COLUMNS = ("target", "workload", "op", "candidate", "reference",
                 *(f"{s}_{c}" for s in SIDES for c in ("run", "source_path", "config")))


def count_causes(rows: Any) -> dict[Cause, int]:
    """How many comparable rows (not missing_reference) of a check have each cause. `rows`: the
    check's rows frame; counted per distinct combination of the columns the causes read, not per
    row (a check has millions of rows and few combinations)."""
    import pandas as pd

    if rows is None or not len(rows):
        return {}
    df = rows[rows["kind"].astype("string") != "missing_reference"] if "kind" in rows.columns else rows
    cols = [c for c in COUNT_COLUMNS if c in df.columns]
    if not len(df) or not cols:
        return {}
    sizes = df[cols].groupby(cols, observed=True, dropna=False, sort=False).size()
    counts: dict[Cause, int] = {}
    for combo, n in sizes.items():
        values = combo if isinstance(combo, tuple) else (combo,)
        row = {c: (None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v)
               for c, v in zip(cols, values, strict=True)}
        for cause in causes_of(row):
            counts[cause] = counts.get(cause, 0) + int(n)
    return counts


def describe(cause: Cause, members: list[Mapping[str, Any]]) -> str:
    """The cause in words, e.g. `reference run rtl-r8 (rtl), from rtl-r8.csv`."""
    kind, v = cause
    if kind == "run":
        paths = sorted({str(m.get(f"{v[0]}_source_path")) for m in members if m.get(f"{v[0]}_source_path")})
        return (f"{v[0]} run {v[2]} ({v[1]})"
                + (f", from {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''}" if paths else ""))
    if kind == "source":
        return f"{v[0]} source file {v[2]} ({v[1]})"
    if kind == "workload":
        return f"target {v[0]}, workload {v[1]}"
    if kind == "op_class":
        return f"op class {v[2]} ({v[0]}->{v[1]})"
    if kind == "config":
        return f"{v[0]} ({v[1]}) measured with " + ", ".join(f"{k}={x}" for k, x in v[2])
    m = members[0]
    return (f"no common cause: {m.get('target')} {m.get('workload')} {m.get('op') or '(end-to-end)'} "
            f"{m.get('metric')}/{m.get('stat')} {m.get('candidate')}->{m.get('reference')}")


def _cause_dict(cause: Cause) -> dict[str, Any]:
    kind, v = cause
    if kind in ("run", "source"):
        return {"kind": kind, "side": v[0], "fidelity": v[1], kind if kind == "run" else "path": v[2]}
    if kind == "workload":
        return {"kind": kind, "target": v[0], "workload": v[1]}
    if kind == "op_class":
        return {"kind": kind, "candidate": v[0], "reference": v[1], "op_class": v[2]}
    if kind == "config":
        return {"kind": kind, "side": v[0], "fidelity": v[1], "stack": dict(v[2])}
    return {"kind": kind}


def group(check_id: int, filed: Iterable[Mapping[str, Any]], counts: Mapping[Cause, int],
          settings: SummarySettings = SummarySettings()) -> list[dict[str, Any]]:
    """The summaries of one check. Pure.

    Args:
        filed: one row per issue the check filed: `id` (XF-N), `num`, the key, both sides'
            run, source path and config (its observation at the check).
        counts: count_causes() of the check's rows (the denominators of the shares).
    """
    issues = sorted(filed, key=lambda r: int(r["num"]))
    of = {int(r["num"]): set(causes_of(r)) for r in issues}
    tally: dict[Cause, set[int]] = {}
    for n, cs in of.items():
        for c in cs:
            tally.setdefault(c, set()).add(n)

    def rank(c: Cause) -> tuple[Any, ...] | None:
        """The cause's sort key now (smallest first), or None once it no longer qualifies
        (its issues only go down, so it never qualifies again)."""
        k = len(tally[c])
        total = max(counts.get(c, 0), k)
        if k < settings.min_issues or k / total < settings.min_share:
            return None
        side = SIDES.index(c[1][0]) if c[0] in ("run", "source", "config") else 0  # measured side first
        return (-k, CAUSES.index(c[0]), -k / total, side, repr(c[1]))

    # the best cause each round, by a heap whose stale entries are re-ranked when they come up
    heap = [(r, c) for c in tally if (r := rank(c)) is not None]
    heapq.heapify(heap)
    groups: list[tuple[Cause, list[int]]] = []
    left = set(of)
    while heap:
        key, c = heapq.heappop(heap)
        now = rank(c)
        if now is None:
            continue
        if now != key:
            heapq.heappush(heap, (now, c))
            continue
        members = sorted(tally[c])
        groups.append((c, members))
        for n in members:
            left.discard(n)
            for c2 in of[n]:
                tally[c2].discard(n)
    groups += [(("single", (n,)), [n]) for n in sorted(left)]
    groups.sort(key=lambda g: (-len(g[1]), g[1][0]))
    by_num = {int(r["num"]): r for r in issues}
    out = []
    for i, (cause, nums) in enumerate(groups, 1):
        members = [by_num[n] for n in nums]
        total = max(counts.get(cause, 0), len(nums)) if cause[0] != "single" else None
        out.append({"id": f"S-{check_id}-{i}", "check_id": check_id,
                    "cause": {**_cause_dict(cause), "text": describe(cause, members)},
                    "issues": [f"XF-{n}" for n in nums], "n_issues": len(nums),
                    "rows_with_cause": total, "share": None if total is None else len(nums) / total})
    return out


# --- the database side ---------------------------------------------------------------------
_OBS = ("candidate_run", "reference_run", "candidate_source_path", "reference_source_path",
        "candidate_config", "reference_config", "kind", "rel_error")
_KEY = ("target", "workload", "op", "metric", "stat", "candidate", "reference")


def filed_rows(conn: Database, check_id: int) -> list[dict[str, Any]]:
    """One row per issue check `check_id` filed (new or reopened at it): its key and its observation there."""
    q = (f"SELECT DISTINCT i.num, {', '.join('i.' + c for c in _KEY)}, {', '.join('o.' + c for c in _OBS)}"
         " FROM transitions t JOIN issues i ON i.num = t.issue_num"
         " JOIN observations o ON o.issue_num = t.issue_num AND o.check_id = t.check_id"
         f" WHERE t.check_id = ? AND t.action IN ({','.join('?' * len(FILING_ACTIONS))}) ORDER BY i.num")
    out = []
    for r in conn.execute(q, (int(check_id), *FILING_ACTIONS)):
        d = dict(r)
        d["id"] = f"XF-{int(d['num'])}"
        out.append(d)
    return out


def last_filing_check(conn: Database, num: int) -> int | None:
    """The latest check that filed (or reopened) issue `num`: the one whose summary it belongs to."""
    r = conn.execute(f"SELECT MAX(check_id) FROM transitions WHERE issue_num = ? AND check_id IS NOT NULL"
                     f" AND action IN ({','.join('?' * len(FILING_ACTIONS))})", (int(num), *FILING_ACTIONS)).fetchone()
    return None if r is None or r[0] is None else int(r[0])
