"""Page 1 of the report: a few sentences built from the data, and the compact tables beside them.

Pure functions of ReportData; the template escapes every string they return (names are untrusted).
"""

from __future__ import annotations

import math
import re
from typing import Any

from xfid.report.data import PairSection, ReportData, is_missing

MIN_KEYS = 3
"""A pair with fewer aligned keys has no CI, no plot, no rank correlation: it leaves the PDF."""
KIND_WORDS = {"bound_violation": "a bound violation", "over_tolerance": "over tolerance",
              "config_mismatch": "a config mismatch", "missing_reference": "a missing reference"}
KIND_SHORT = {"bound_violation": "bound violation", "over_tolerance": "over tolerance",
              "config_mismatch": "config mismatch", "missing_reference": "missing reference"}


RANGE_DASH = "–\u2060"  # a word joiner after the dash: a range never wraps inside


def _range(values: list[float]) -> str:
    """`a–b` of fractions as percent (one value: itself; none: —)."""
    if not values:
        return "—"
    return _pct(values[0]) if len(values) == 1 else f"{_pct(min(values))}{RANGE_DASH}{_pct(max(values))}"


def _pct(v: float | None) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v * 100:.1f}%"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def issue_key(i: dict[str, Any]) -> str:
    """target · workload · op · metric/stat, as every table writes a key."""
    return f"{i.get('target')} · {i.get('workload')} · {i.get('op') or '(end-to-end)'} · {i.get('metric')}/{i.get('stat')}"


def _counts_sentence(d: ReportData) -> str:
    c, p = d.counts, d.prev_counts
    parts = [f"{c.get('new', 0)} new", f"{c.get('reopened', 0)} reopened", f"{c.get('resolved', 0)} resolved"]
    active, before = c.get("active", 0), p.get("active", 0)
    change = "the same as" if active == before else (f"{active - before:+d} against")
    return (f"This period: {', '.join(parts[:2])} and {parts[2]} {'issue' if c.get('resolved', 0) == 1 else 'issues'}; "
            f"{active} active now, {change} the previous period ({before}).")


def _change_sentences(pairs: list[PairSection]) -> list[str]:
    worse = [p for p in pairs if p.trend_word == "worse"]
    better = [p for p in pairs if p.trend_word == "better"]
    if not worse and not better:
        fresh = sum(1 for p in pairs if p.trend_word == "new")
        if fresh == len(pairs):
            return [f"No earlier check to compare with: all {_plural(len(pairs), 'pair')} are new in this check."]
        return ["No pair got better or worse since the previous check."]
    out = []
    for word, group in (("Worse", worse), ("Better", better)):
        if group:
            shown = "; ".join(f"{p.target} {p.candidate} → {p.reference} {p.metric} ({change_text(p)})" for p in group[:4])
            more = f" and {len(group) - 4} more" if len(group) > 4 else ""
            out.append(f"{word} since the previous check: {shown}{more}.")
    return out


def change_text(p: PairSection) -> str:
    """What moved in a pair since the previous check: violations of a bound, MAPE of an estimate."""
    if p.is_bound:
        return f"violations {p.prev_violations} → {p.violations}"
    return f"MAPE {_pct(p.prev_mape)} → {_pct(p.mape)}"


def _worst_sentence(d: ReportData, qty: Any) -> str:
    worst = d.worst
    if not worst:
        return "No active discrepancy."
    i = worst[0]
    unit = str(i.get("unit") or "")
    err = i.get("rel_error")
    err_s = "—" if is_missing(err) else f"{err * 100:+.1f}%"
    f = i.get("factor")
    factor = f", {f:.3g}× its tolerance" if isinstance(f, (int, float)) and math.isfinite(f) else ""
    return (f"Worst active discrepancy: {i.get('id')}, {KIND_WORDS.get(str(i.get('kind')), str(i.get('kind')))} on "
            f"{issue_key(i)}: {i.get('candidate')} {qty(i.get('candidate_value'), unit)} against {i.get('reference')} "
            f"{qty(i.get('reference_value'), unit)} ({err_s}{factor}).")


def _health_sentences(pairs: list[PairSection]) -> list[str]:
    """One sentence per candidate → reference fidelity pair, over its targets and metrics."""
    groups: dict[tuple[str, str, bool], list[PairSection]] = {}
    for p in pairs:
        groups.setdefault((p.candidate, p.reference, p.is_bound), []).append(p)
    out = []
    for (cand, ref, bound), ps in groups.items():
        keys = sum(p.n for p in ps)
        targets = sorted({p.target for p in ps})
        where = f"{', '.join(targets[:3])}{' …' if len(targets) > 3 else ''}"
        if bound:
            viol = sum(p.violations or 0 for p in ps)
            ach = [p.achieved_median for p in ps if p.achieved_median is not None]
            span = _range(ach)
            out.append(f"{cand} → {ref} (a bound; {where}): {_plural(viol, 'violation')} in {keys} keys, "
                       f"median achieved fraction {span}.")
        else:
            within = [(p.within_tolerance, p.n) for p in ps if p.within_tolerance is not None]
            w = sum(a * n for a, n in within) / sum(n for _, n in within) if within else None
            mapes = [p.mape for p in ps if p.mape is not None]
            span = _range(mapes)
            out.append(f"{cand} → {ref} (an estimate; {where}): MAPE {span} over {_plural(len(ps), 'metric')}, "
                       f"{_pct(w)} of {keys} keys within tolerance.")
    return out


def headline(d: ReportData, qty: Any) -> list[str]:
    """The page-1 sentences: counts, what changed, the worst open discrepancy, each pair's health
    (pairs with at least MIN_KEYS keys; the smaller ones are in the attachment)."""
    big = [p for p in d.pairs if p.n >= MIN_KEYS]
    from xfid.report.triage import sentences

    return [_counts_sentence(d), *_change_sentences(big), _worst_sentence(d, qty), *sentences(d.triage),
            *_health_sentences(big)]


_BUCKET = re.compile(r"^1e(-?\d+)")


def bucket_order(label: str) -> tuple[int, float, str]:
    """Sort key of a size bucket: `1e7-1e8 FLOP` before `1e12-1e13 FLOP` (numbers, not text);
    anything else (unknown) last."""
    m = _BUCKET.match(str(label))
    return (0, float(m.group(1)), str(label)) if m else (1, math.inf, str(label))
