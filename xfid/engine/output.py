"""Render a Correlation as JSON, markdown, a terminal table or CSV (shared by compare and report)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd

from xfid.engine.contract import COMPARISON_COLUMNS, COVERAGE_COLUMNS, Correlation
from xfid.engine.jsonout import clean, json_chunks
from xfid.textsafe import csv_safe_frame, terminal

DISCREPANCY_FIELDS = (
    "fingerprint", "target", "workload", "op", "metric", "stat", "candidate", "reference",
    "candidate_value", "reference_value", "unit", "rel_error", "log_ratio", "tolerance", "tolerance_abs",
    "kind", "factor", "severity", "efficiency", "scope", "candidate_n", "reference_n", "candidate_run", "reference_run",
    "candidate_source_path", "candidate_source_loc", "reference_source_path", "reference_source_loc", "note",
)
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


def to_dict(corr: Correlation, discrepancies: bool = True) -> dict[str, Any]:
    """The JSON document: comparisons, discrepancies, coverage, settings, sources, config_hash
    (without `discrepancies`, that key holds None, in its place)."""
    return {
        "comparisons": records(corr.comparisons, COMPARISON_COLUMNS),
        "discrepancies": records(corr.discrepancies, DISCREPANCY_FIELDS) if discrepancies else None,
        "coverage": records(corr.coverage, (*COVERAGE_COLUMNS, "has_rules")),
        "settings": json.loads(json.dumps(corr.settings, default=str)),
        "sources": corr.sources,
        "config_hash": corr.config_hash,
    }


def json_pieces(corr: Correlation) -> Iterator[str]:
    """to_json(corr) in pieces, the discrepancies streamed (bounded memory on huge stores)."""
    return json_chunks(to_dict(corr, discrepancies=False), corr.discrepancies, DISCREPANCY_FIELDS)


def to_json(corr: Correlation) -> str:
    """The JSON document (json.dumps(to_dict(corr), indent=2) + newline, byte for byte)."""
    return "".join(json_pieces(corr))


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


def comparison_rows(corr: Correlation, workloads: bool = False, arrow: str = "->") -> list[list[str]]:
    df = corr.comparisons
    df = df[df["workload"].notna()] if workloads else df[df["workload"].isna()]
    out = []
    for r in records(df, COMPARISON_COLUMNS):
        out.append([r["target"], *( [r["workload"]] if workloads else []), f"{r['candidate']}{arrow}{r['reference']}",
                    r["metric"], r["stat"], str(r["n"]), pct(r["mape"]), ci(r["mape_ci"], True),
                    num(r["bias"]), ci(r["bias_ci"], False), num(r["spearman"]), num(r["kendall"]),
                    pct(r["within_tolerance"])])
    return out


COMP_HEAD = ["target", "pair", "metric", "stat", "n", "MAPE", "MAPE 95% CI", "bias", "bias 95% CI",
             "spearman", "kendall", "within"]
DISC_HEAD = ["severity", "kind", "target", "workload", "op", "metric", "pair", "candidate", "reference",
             "error"]


def discrepancy_rows(corr: Correlation, limit: int | None = None, arrow: str = "->") -> list[list[str]]:
    out = []
    for r in records(corr.discrepancies.head(limit) if limit else corr.discrepancies, DISCREPANCY_FIELDS):
        out.append([f"{clean(r['severity']) or 0:.1f}", r["kind"], r["target"], r["workload"], r["op"] or "(end-to-end)",
                    f"{r['metric']}/{r['stat']}", f"{r['candidate']}{arrow}{r['reference']}",
                    num(r["candidate_value"], 4), num(r["reference_value"], 4), pct(r["rel_error"])])
    return out


def to_markdown(corr: Correlation, limit: int = 50) -> str:
    """Markdown: target-level comparisons, then the most severe discrepancies, then coverage gaps."""
    def table(head: list[str], rows: list[list[str]]) -> str:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
        return "\n".join(lines)

    parts = ["# xfid correlation", "", "## Comparisons", "", table(COMP_HEAD, comparison_rows(corr, arrow=" → ")), ""]
    n = len(corr.discrepancies)
    parts += [f"## Discrepancies ({n})", ""]
    parts += [table(DISC_HEAD, discrepancy_rows(corr, limit, arrow=" → ")) if n else "None.", ""]
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


def to_table(corr: Correlation, limit: int = 20) -> str:
    """A terminal summary: comparisons per target and pair, the worst discrepancies, counts."""
    lines = ["comparisons (target level; MAPE and bias with bootstrap 95% CIs)"]
    rows = comparison_rows(corr)
    lines.append(_plain(COMP_HEAD, rows) if rows else "  none: no two fidelities share a key")
    n = len(corr.discrepancies)
    lines += ["", f"discrepancies: {n}" + (f" (worst {limit} shown)" if n > limit else "")]
    if n:
        lines.append(_plain(DISC_HEAD, discrepancy_rows(corr, limit)))
    from xfid.counts import keys_without_reference, unmatched_ops

    miss, gaps = keys_without_reference(corr.rows), len(unmatched_ops(corr.coverage))
    lines += ["", f"keys without a reference: {miss}; raw ops no op map matched: {gaps}"]
    return "\n".join(lines) + "\n"


def render_pieces(corr: Correlation, fmt: str) -> Iterator[str]:
    """render(corr, fmt) in pieces (JSON streamed; the other formats in one piece)."""
    if fmt == "json":
        return json_pieces(corr)
    if fmt == "csv":
        return csv_pieces(corr)
    return iter([render(corr, fmt)])


def csv_pieces(corr: Correlation, chunk: int = 200_000) -> Iterator[str]:
    """to_csv(corr) in pieces of `chunk` rows (the same text; bounded memory)."""
    rows = corr.rows
    if len(rows) <= chunk:
        yield to_csv(corr)
        return
    for a in range(0, len(rows), chunk):
        yield csv_safe_frame(rows.iloc[a:a + chunk]).to_csv(index=False, header=a == 0, float_format=CSV_FLOAT)


def render(corr: Correlation, fmt: str) -> str:
    """One of FORMATS."""
    return {"json": to_json, "markdown": to_markdown, "csv": to_csv, "table": to_table}[fmt](corr)
