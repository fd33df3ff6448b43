"""Render a Correlation as JSON, markdown, a terminal table or CSV (shared by compare and report)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

from xfid.engine.contract import COMPARISON_COLUMNS, COVERAGE_COLUMNS, Correlation
from xfid.engine.jsonout import clean, json_chunks
from xfid.engine.schema import DISCREPANCY_JSON_FIELDS
from xfid.textsafe import csv_safe_frame, terminal

DISCREPANCY_FIELDS = DISCREPANCY_JSON_FIELDS
"""Discrepancy keys in JSON (errors as fractions)."""
FORMATS = ("table", "json", "markdown", "csv")
CSV_FLOAT = "%.10g"
"""How the CSV writes floats (whole or in pieces)."""


def records(df: pd.DataFrame, columns: Sequence[str]) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-safe dicts with exactly `columns` (missing ones -> None)."""
    cols = [c for c in columns if c in df.columns]
    data = {c: df[c].astype(object).tolist() for c in cols}
    n = len(df)
    return [{c: clean(data[c][i]) if c in data else None for c in columns} for i in range(n)]


def comparison_records(corr: Correlation, ids: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The comparisons as JSON objects (COMPARISON_COLUMNS), a bound aggregate's `violation_ids`
    by XF id where the tracker has one (see named)."""
    out = records(corr.comparisons, COMPARISON_COLUMNS)
    for r in out:
        if r.get("violation_ids") is not None:
            r["violation_ids"] = named(r["violation_ids"], ids)
    return out


def to_dict(corr: Correlation, discrepancies: bool = True, ids: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The JSON document: comparisons, discrepancies, coverage, settings, sources, config_hash
    (without `discrepancies`, that key holds None, in its place). `ids` maps fingerprints to the
    tracker's XF ids (see comparison_records)."""
    return {
        "comparisons": comparison_records(corr, ids),
        "discrepancies": records(corr.discrepancies, DISCREPANCY_FIELDS) if discrepancies else None,
        "coverage": records(corr.coverage, (*COVERAGE_COLUMNS, "has_rules")),
        "settings": json.loads(json.dumps(corr.settings, default=str)),
        "sources": corr.sources,
        "config_hash": corr.config_hash,
    }


def json_pieces(corr: Correlation, ids: Mapping[str, str] | None = None) -> Iterator[str]:
    """to_json(corr) in pieces, the discrepancies streamed (bounded memory on huge stores)."""
    return json_chunks(to_dict(corr, discrepancies=False, ids=ids), corr.discrepancies, DISCREPANCY_FIELDS)


def to_json(corr: Correlation, ids: Mapping[str, str] | None = None) -> str:
    """The JSON document (json.dumps(to_dict(corr), indent=2) + newline, byte for byte)."""
    return "".join(json_pieces(corr, ids))


def to_csv(corr: Correlation) -> str:
    """The aligned rows (one per key and pair), every contract column."""
    return csv_safe_frame(corr.rows).to_csv(index=False, float_format=CSV_FLOAT)


def pct(v: Any) -> str:
    v = clean(v)
    return "—" if v is None else f"{100 * v:.1f}%"


def num(v: Any, digits: int = 3) -> str:
    v = clean(v)
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) < 1e5 else f"{v:.4g}"
    return str(v)


def ci(v: Any, as_pct: bool) -> str:
    v = clean(v)
    if not v:
        return "—"
    return f"[{pct(v[0])}, {pct(v[1])}]" if as_pct else f"[{num(v[0])}, {num(v[1])}]"


def md_escape(text: Any) -> str:
    """Untrusted text for a markdown table cell (also safe when the markdown becomes HTML)."""
    s = "" if text is None else terminal(text)
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("\\", "\\\\"), ("|", "\\|"),
                 ("`", "\\`"), ("*", "\\*"), ("_", "\\_"), ("[", "\\["), ("]", "\\]")):
        s = s.replace(a, b)
    return s.replace("\r", " ").replace("\n", " ")


def named(fingerprints: Any, ids: Mapping[str, str] | None) -> list[str]:
    """A bound aggregate's `violation_ids` (fingerprints) by the tracker's XF id where `ids`
    (fingerprint -> id) has one, else the fingerprint (a row the tracker has not filed)."""
    return [(ids or {}).get(str(fp)) or str(fp) for fp in (fingerprints or [])]


def _level(corr: Correlation, workloads: bool, compared_as: str) -> list[dict[str, Any]]:
    df = corr.comparisons
    df = df[df["workload"].notna()] if workloads else df[df["workload"].isna()]
    if "compared_as" in df.columns:
        df = df[df["compared_as"].fillna("estimate") == compared_as]
    elif compared_as == "bound":
        df = df.iloc[:0]
    return records(df, COMPARISON_COLUMNS)


def comparison_rows(corr: Correlation, workloads: bool = False, arrow: str = "->") -> list[list[str]]:
    """The estimate aggregates (MAPE, bias and their CIs), one table row each (COMP_HEAD)."""
    out = []
    for r in _level(corr, workloads, "estimate"):
        out.append([r["target"], *( [r["workload"]] if workloads else []), f"{r['candidate']}{arrow}{r['reference']}",
                    r["metric"], r["stat"], str(r["n"]), pct(r["mape"]), ci(r["mape_ci"], True),
                    num(r["bias"]), ci(r["bias_ci"], False), num(r["spearman"]), num(r["kendall"]),
                    pct(r["within_tolerance"])])
    return out


def iqr(r: Mapping[str, Any]) -> str:
    """The achieved fraction's quartiles as text ("—" when unknown)."""
    q1, q3 = clean(r.get("achieved_q1")), clean(r.get("achieved_q3"))
    return "—" if q1 is None or q3 is None else f"{pct(q1)}–{pct(q3)}"


def violated(r: Mapping[str, Any], names: list[str], shown: int = 3) -> str:
    """Violations of one bound aggregate: "0", or the count, the worst and the first ids."""
    k = clean(r.get("violations"))
    if not k:
        return "0" if k == 0 else "—"
    more = f" +{len(names) - shown}" if len(names) > shown else ""
    return f"{k} (worst {pct(r.get('violation_worst'))}: {', '.join(names[:shown])}{more})"


def bound_rows(corr: Correlation, workloads: bool = False, arrow: str = "->",
               ids: Mapping[str, str] | None = None) -> list[list[str]]:
    """The bound aggregates (rows checked, violations, the achieved fraction of the bound), one
    table row each (BOUND_HEAD)."""
    out = []
    for r in _level(corr, workloads, "bound"):
        out.append([r["target"], *( [r["workload"]] if workloads else []), f"{r['candidate']}{arrow}{r['reference']}",
                    r["metric"], r["stat"], str(r["n"]), violated(r, named(r.get("violation_ids"), ids)),
                    pct(r["achieved_median"]), iqr(r), ci(r["achieved_ci"], True), num(r["spearman"])])
    return out


COMP_HEAD = ["target", "pair", "metric", "stat", "n", "MAPE", "MAPE 95% CI", "bias", "bias 95% CI",
             "spearman", "kendall", "within"]
BOUND_HEAD = ["target", "pair", "metric", "stat", "checked", "violations", "achieved (median)", "IQR",
              "achieved 95% CI", "spearman"]
BOUND_LEGEND = ("achieved = the fraction of the bound reached (bound / measured for times and energies, "
                "measured / bound for rates): <= 100% while the bound holds; a violation is a reference "
                "beyond the bound by more than bound_tolerance (worst: its achieved fraction)")
DISC_HEAD = ["kind", "factor", "target", "workload", "op", "metric", "pair", "candidate", "reference",
             "error"]
DISC_LEGEND = ("factor = |error| / tolerance (a bound violation: / bound_tolerance); sorted by kind (bound "
               "violations, then config mismatches, then the rest), then factor. JSON `severity` is that "
               "sort key: 1000 + factor for a bound violation, 100 + factor for a config mismatch")


def discrepancy_rows(corr: Correlation, limit: int | None = None, arrow: str = "->") -> list[list[str]]:
    out = []
    for r in records(corr.discrepancies.head(limit) if limit else corr.discrepancies, DISCREPANCY_FIELDS):
        out.append([r["kind"], num(r["factor"]), r["target"], r["workload"], r["op"] or "(end-to-end)",
                    f"{r['metric']}/{r['stat']}", f"{r['candidate']}{arrow}{r['reference']}",
                    num(r["candidate_value"], 4), num(r["reference_value"], 4), pct(r["rel_error"])])
    return out


def to_markdown(corr: Correlation, limit: int = 50, ids: Mapping[str, str] | None = None) -> str:
    """Markdown: target-level estimates and bounds, then the worst discrepancies, then coverage gaps."""
    def table(head: list[str], rows: list[list[str]]) -> str:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
        return "\n".join(lines)

    parts = ["# xfid correlation", "", "## Estimates (MAPE, bias)", "",
             table(COMP_HEAD, comparison_rows(corr, arrow=" → ")), ""]
    bounds = bound_rows(corr, arrow=" → ", ids=ids)
    if bounds:
        parts += ["## Bounds (violations, achieved fraction of the bound)", "", table(BOUND_HEAD, bounds), "",
                  md_escape(BOUND_LEGEND), ""]
    n = len(corr.discrepancies)
    parts += [f"## Discrepancies ({n})", ""]
    parts += [table(DISC_HEAD, discrepancy_rows(corr, limit, arrow=" → ")) + "\n\n" + md_escape(DISC_LEGEND)
              if n else "None.", ""]
    if n > limit:
        parts += [f"{n - limit} more not shown (use --format json).", ""]
    from xfid.counts import unmatched_ops

    gaps = unmatched_ops(corr.coverage).sort_values(["source", "raw_op"], kind="stable")
    if len(gaps):
        parts += ["## Raw ops no op map matched", "",
                  table(["source", "raw op", "records"], [[r.source, r.raw_op, str(r.records)] for r in gaps.itertuples()]), ""]
    return "\n".join(parts)


def _plain(head: list[str], rows: list[list[str]]) -> str:
    rows = [[terminal(x) for x in r] for r in rows]  # names from files: no control or bidi characters raw
    w = [max(len(x) for x in col) for col in zip(head, *rows, strict=False)] if rows else [len(h) for h in head]
    fmt = "  ".join(f"{{:<{x}}}" for x in w)
    return "\n".join([fmt.format(*head), *(fmt.format(*r) for r in rows)])


def to_table(corr: Correlation, limit: int = 20, ids: Mapping[str, str] | None = None) -> str:
    """A terminal summary: estimates and bounds per target and pair, the worst discrepancies, counts."""
    lines = ["estimates (target level; MAPE and bias with bootstrap 95% CIs)"]
    rows = comparison_rows(corr)
    bounds = bound_rows(corr, ids=ids)
    lines.append(_plain(COMP_HEAD, rows) if rows else
                 "  none" if bounds else "  none: no two fidelities share a key")
    if bounds:
        lines += ["", "bounds (target level; rows checked, violations, achieved fraction of the bound)",
                  _plain(BOUND_HEAD, bounds), f"  {BOUND_LEGEND}"]
    n = len(corr.discrepancies)
    lines += ["", f"discrepancies: {n}" + (f" (worst {limit} shown)" if n > limit else "")]
    if n:
        lines += [_plain(DISC_HEAD, discrepancy_rows(corr, limit)), f"  {DISC_LEGEND}"]
    from xfid.counts import keys_without_reference, unmatched_ops

    miss, gaps = keys_without_reference(corr.rows), len(unmatched_ops(corr.coverage))
    lines += ["", f"keys without a reference: {miss}; raw ops no op map matched: {gaps}"]
    return "\n".join(lines) + "\n"


def render_pieces(corr: Correlation, fmt: str, ids: Mapping[str, str] | None = None) -> Iterator[str]:
    """render(corr, fmt) in pieces (JSON streamed; the other formats in one piece)."""
    if fmt == "json":
        return json_pieces(corr, ids)
    if fmt == "csv":
        return csv_pieces(corr)
    return iter([render(corr, fmt, ids)])


def csv_pieces(corr: Correlation, chunk: int = 200_000) -> Iterator[str]:
    """to_csv(corr) in pieces of `chunk` rows (the same text; bounded memory)."""
    rows = corr.rows
    if len(rows) <= chunk:
        yield to_csv(corr)
        return
    for a in range(0, len(rows), chunk):
        yield csv_safe_frame(rows.iloc[a:a + chunk]).to_csv(index=False, header=a == 0, float_format=CSV_FLOAT)


def render(corr: Correlation, fmt: str, ids: Mapping[str, str] | None = None) -> str:
    """One of FORMATS; `ids` (fingerprint -> XF id) names the bound violations by their issues."""
    if fmt == "csv":
        return to_csv(corr)
    return {"json": to_json, "markdown": to_markdown, "table": to_table}[fmt](corr, ids=ids)
