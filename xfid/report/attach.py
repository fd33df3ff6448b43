"""The report's machine-readable attachment: every number it shows, one CSV row each, with the
file and row it comes from; and what the short PDF leaves out (provenance of every source,
config strings, unmatched raw ops, pairs with fewer than MIN_KEYS keys, coverage).

The PDF names this file; `report.pdf` → `report-numbers.csv` beside it.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xfid.engine.schema import KEY_FIELDS, NUMBER, SHOWN_NUMBERS, row_field
from xfid.report.data import PairSection, ReportData, is_missing
from xfid.textsafe import csv_cell

COLUMNS = ("section", "item", "field", "value", "unit", *KEY_FIELDS, "fidelity", "source_path", "source_loc", "note")
PAIR_FIELDS = tuple(f.name for f in dataclasses.fields(PairSection) if f.type in ("int", "int | None", "float | None"))
"""A pair section's numbers (its statistics, the previous check's and the tolerance), in its order."""
PAIR_INTERVALS = tuple(f.name for f in dataclasses.fields(PairSection) if f.type == "list[float] | None")
"""A pair section's [low, high] intervals."""

ISSUE_NUMBERS = (*(f for f in SHOWN_NUMBERS if f != row_field(NUMBER, "efficiency")), "age")
"""What the CSV lists of an issue beside its two values: a row's shown numbers less the achieved
fraction, and the issue's age."""


def numbers_path(report: Path) -> Path:
    """`report.pdf` → `report-numbers.csv`, in the same folder."""
    return report.with_name(f"{report.stem}-numbers.csv")


def _v(v: Any) -> Any:
    if is_missing(v):
        return ""
    if isinstance(v, (list, tuple)):
        return "; ".join(map(str, v))
    if isinstance(v, float) and not math.isfinite(v):
        return ""
    return v


def _row(section: str, item: str, field: str, value: Any, **kw: Any) -> dict[str, Any]:
    return {"section": section, "item": item, "field": field, "value": _v(value), **{k: _v(x) for k, x in kw.items()}}


def _check(d: ReportData) -> str:
    return f"check #{d.check_id}" if d.check_id is not None else "correlation at report time"


def _key(p: PairSection) -> dict[str, str]:
    """The key fields a pair section has (the target, metric and stat)."""
    return {k: getattr(p, k) for k in KEY_FIELDS if hasattr(p, k)}


def _pairs(d: ReportData) -> Iterator[dict[str, Any]]:
    """Each pair's aggregates (computed from its rows, listed next), then each row's two values."""
    for p in d.pairs:
        item = f"{p.candidate}→{p.reference}"
        src = f"{_check(d)}: the rows of section pair-row with this item, target, metric and stat"
        for f in PAIR_FIELDS:
            v = getattr(p, f)
            if v is not None:
                yield _row("pair", item, f, v, unit=p.unit if f == "tolerance" else "", **_key(p), fidelity=item,
                           source_path=src, note=p.compared_as)
        for f in PAIR_INTERVALS:
            ci = getattr(p, f)
            if ci:
                yield _row("pair", item, f"{f}_low", ci[0], **_key(p), source_path=src, note="seeded bootstrap 95%")
                yield _row("pair", item, f"{f}_high", ci[1], **_key(p), source_path=src, note="seeded bootstrap 95%")
        yield from _pair_rows(p, item)


def _pair_rows(p: PairSection, item: str) -> Iterator[dict[str, Any]]:
    if p.rows is None or not len(p.rows):
        return
    cols = set(p.rows.columns)
    for r in p.rows.to_dict("records"):
        base = {**{k: r.get(k) for k in KEY_FIELDS}, **_key(p), "unit": p.unit, "note": r.get("kind")}
        for side in ("candidate", "reference"):
            yield _row("pair-row", item, f"{side}_value", r.get(f"{side}_value"), **base, fidelity=getattr(p, side),
                       source_path=r.get(f"{side}_source_path"), source_loc=r.get(f"{side}_source_loc"))
        for f in SHOWN_NUMBERS:
            if f in cols and not is_missing(r.get(f)):
                yield _row("pair-row", item, f, r.get(f), **{**base, "unit": ""}, fidelity=item,
                           source_path="derived from candidate_value and reference_value above")


def _issues(d: ReportData) -> Iterator[dict[str, Any]]:
    """Each issue's numbers; its values' files and rows from the check row with its fingerprint."""
    by_fp: dict[str, dict[str, Any]] = {}
    for p in d.pairs:
        if p.rows is not None and len(p.rows) and "fingerprint" in p.rows:
            by_fp.update({str(r["fingerprint"]): r for r in p.rows.to_dict("records")})
    for section, issues in (("issue-active", d.open_issues), ("issue-resolved", d.resolved_issues)):
        for i in issues:
            r = by_fp.get(str(i.get("fingerprint")), {})
            key = {k: i.get(k) for k in KEY_FIELDS}
            for side in ("candidate", "reference"):
                yield _row(section, str(i.get("id")), f"{side}_value", i.get(f"{side}_value"), unit=i.get("unit"),
                           **key, fidelity=i.get(side), source_path=r.get(f"{side}_source_path", "tracker"),
                           source_loc=r.get(f"{side}_source_loc", "the issue's last observation"),
                           note=f"{i.get('kind')} · {i.get('state')}")
            for f in ISSUE_NUMBERS:
                if not is_missing(i.get(f)):
                    yield _row(section, str(i.get("id")), f, i.get(f), **key,
                               source_path="tracker" if f != "factor" else "tracker (severity less its kind's rank)",
                               note=f"{i.get('kind')} · {i.get('state')}")


def _counts(d: ReportData) -> Iterator[dict[str, Any]]:
    src = "tracker: the counts of the checks in the period"
    for k, v in d.counts.items():
        yield _row("counts", d.period.label, k, v, source_path=src)
    for k, v in d.prev_counts.items():
        yield _row("counts", d.period.previous().label, k, v, source_path=src)


def _competitive(d: ReportData) -> Iterator[dict[str, Any]]:
    for c in d.competitives:
        for r in c.get("rows", []):
            cells = [(c["ours"], r.get("ours")), *r.get("by_target", {}).items()]
            for target, cell in cells:
                if cell:
                    yield _row("competitive", r["label"], "value", cell["value"], target=target, workload=r["workload"],
                               metric=r["metric"], stat=cell["stat"], fidelity=cell["fidelity"],
                               source_path=cell.get("source_path"), source_loc=cell.get("source_loc"),
                               note="derived" if cell.get("derived") else "")
            if r.get("advantage") is not None:
                yield _row("competitive", r["label"], "advantage", r["advantage"], target=c["ours"],
                           workload=r["workload"], metric=r["metric"], source_path="derived from the values above")


def _calibration(d: ReportData) -> Iterator[dict[str, Any]]:
    for cal in d.calibration:
        item = f"{cal['candidate']}→{cal['reference']}"
        src = f"fitted on the {_check(d)} rows of pair {item} on {cal['target']} (section pair-row)"
        if cal.get("error"):
            yield _row("calibration", item, "error", "", target=cal["target"], note=cal["error"])
            continue
        for k, v in (cal.get("summary") or {}).items():
            yield _row("calibration", item, k, v, target=cal["target"], source_path=src)
        for f in cal.get("factors") or []:
            yield _row("calibration-factor", item, "factor", f.get("factor"), target=cal["target"],
                       op=f.get("op_class"), source_path=src, note=f"limiter {f.get('limiter')}; n {f.get('n')}")
        for v in cal.get("cv") or []:
            for k in ("mape_before", "mape_after", "n"):
                yield _row("calibration-cv", item, k, v.get(k), target=cal["target"], source_path=src,
                           note=f"{v.get('group_by')} = {v.get('group')}")


def _capability(d: ReportData) -> Iterator[dict[str, Any]]:
    for r in d.capability_rows:
        ev = r.get("evidence") or []
        paths = " + ".join(str(e.get("source_path", "")) for e in ev)
        locs = " + ".join(str(e.get("source_loc", "")) for e in ev)
        for f in ("of_bound", "of_peak", "n"):
            if r.get(f) is not None:
                yield _row("capability", r["op_class"], f, r[f], target=r["target"], op=r["op_class"],
                           source_path=paths, source_loc=locs,
                           note=f"{r['precision']} · {r['size']} · {r['limiter']} · {r['verdict']} · {r['caveats']}")
        if r.get("ci"):
            yield _row("capability", r["op_class"], "of_bound_ci", r["ci"], target=r["target"], op=r["op_class"],
                       source_path=paths, source_loc=locs, note="seeded bootstrap 95%")


def _coverage(d: ReportData) -> Iterator[dict[str, Any]]:
    cov = d.coverage or {}
    for u in cov.get("unmatched", []):
        yield _row("unmatched-op", str(u.get("raw_op")), "records", u.get("records"), source_path=u.get("source"),
                   note="no op map of this source matched the raw op name")
    for f in cov.get("fidelities", []):
        yield _row("fidelity-coverage", f["workload"], "fidelities present", len(f["have"]), target=f["target"],
                   workload=f["workload"], source_path="the store's records of this target and workload",
                   note=f"present: {', '.join(f['have'])}; missing: {', '.join(f['missing'])}")


def _sources(d: ReportData) -> Iterator[dict[str, Any]]:
    for s in d.sources:
        yield _row("source", str(s.get("source_id")), "rows", s.get("rows"), source_path=s.get("path"),
                   note=f"adapter {s.get('adapter')}; sha256 {s.get('content_hash')}; ingested {s.get('ingested_at')}; "
                        f"hardware: {'; '.join(s.get('hardware', []))}; software: {'; '.join(s.get('software', []))}; "
                        f"config: {' · '.join(s.get('config', []))}")


def numbers(d: ReportData) -> list[dict[str, Any]]:
    """Every number the report shows, one dict per number (COLUMNS), sections in page order."""
    rows: list[dict[str, Any]] = []
    for part in (_counts, _issues, _pairs, _competitive, _calibration, _capability, _coverage, _sources):
        rows.extend(part(d))
    return rows


def numbers_csv(d: ReportData) -> bytes:
    """The attachment as UTF-8 CSV; text cells that a spreadsheet would run as a formula get a `'`."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in numbers(d):
        w.writerow({k: csv_cell(v) if isinstance(v, str) else v for k, v in r.items()})
    return buf.getvalue().encode("utf-8")
