"""The HTML report to work in: every table of ReportData, sortable and filterable in the browser.

The PDF is a short read; this page holds everything the report data has (every key of every
pair, the provenance of each number collapsed under its row, every source's recorded config).
It stays one self-contained file: the stylesheet and script next to the template are inlined,
figures are data: URIs, and a Content-Security-Policy meta allows nothing else — the inline
style and script by their sha256 hash (computed here, from the exact text inlined), images only
as data:. Every value goes through Jinja autoescape and `textsafe.terminal` (control and bidi
characters made visible); each row's provenance lines are one JSON data block (Jinja's `tojson`,
which escapes <, > and &) that the script shows when the row's <details> opens. The script reads
and writes text only through `textContent`, never markup.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import pandas as pd

from xfid.config import DEFAULT_BOUND_TOLERANCE
from xfid.report.data import (
    FACTOR_LEGEND,
    PairSection,
    ReportData,
    age_days,
    is_missing,
    issue_factor,
    long_names,
)
from xfid.textsafe import terminal

PROVENANCE = ("source_path", "source_loc", "run", "n", "config")
"""The per-side columns of a correlation row that say where its number came from."""
TEMPLATE = "report_web.html.j2"
MIN_PLOT = 3  # as the PDF: a pair with fewer keys gets no plots (its keys are still listed)


@cache
def _asset(name: str) -> str:
    """A file next to the template (report_web.css / .js), read once per process."""
    from importlib import resources

    return resources.files("xfid.report").joinpath(f"templates/{name}").read_text(encoding="utf-8")


def csp_hash(text: str) -> str:
    """The CSP source expression allowing exactly this inline <style>/<script> text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(css: str, js: str) -> str:
    """Nothing may load: no fetch, no frame, no form target; only the two inline blocks (by hash)
    and data: images (the figures) run or show."""
    return (f"default-src 'none'; img-src data:; style-src {csp_hash(css)}; script-src {csp_hash(js)}; "
            "base-uri 'none'; form-action 'none'")


def _finalize(v: Any) -> Any:
    """Every printed string with control and bidi characters made visible (as the server does);
    Markup (the inlined CSS/JS) is a str subclass and passes as it is."""
    if type(v) is str and not (v.isascii() and v.isprintable()):  # printable ASCII: nothing to show
        return terminal(v)
    return v


@cache
def _env():
    """The report's Jinja environment (autoescape, its number filters) with `_finalize` added."""
    from xfid.report.render import _env as report_env

    return report_env().overlay(finalize=_finalize)  # the report's filters; its environment untouched


def sort_value(v: Any) -> str:
    """What a numeric cell sorts by (its `data-v`): the raw number, '' when missing."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or is_missing(v) or not math.isfinite(v):
        return ""
    return f"{float(v):.9g}"  # nine digits: the order of any two values a reader can tell apart


def breakable(v: Any) -> Any:
    """A long identifier (workload, op, path) escaped, with a line-break chance (<wbr>) after each
    `/` and `,`, so a narrow column breaks it between its parts, never inside one."""
    import markupsafe

    text = str(markupsafe.escape(terminal(str(v))))  # escaped first: the marks are the only markup added
    return markupsafe.Markup(text.replace("/", "/<wbr>").replace(",", ",<wbr>"))


def plain(v: Any) -> Any:
    """A provenance value as a reader writes it: a list joined, a mapping as JSON (never a Python repr)."""
    if isinstance(v, (list, tuple)):
        return ", ".join(str(plain(x)) for x in v)
    if isinstance(v, dict):
        import json

        return json.dumps(v, default=str, sort_keys=True)
    return v


def anchor_id(prefix: str, text: Any, taken: set[str]) -> str:
    """A unique HTML id from untrusted text: only [A-Za-z0-9_-] kept, a counter on a clash."""
    base = prefix + re.sub(r"[^A-Za-z0-9_-]", "_", str(text))[:80]
    out, k = base, 2
    while out in taken:
        out, k = f"{base}-{k}", k + 1
    taken.add(out)
    return out


def _blank(v: Any) -> bool:
    """None, NaN, pandas' NA or an empty string: nothing to show."""
    return v is None or v is pd.NA or v == "" if not isinstance(v, float) else math.isnan(v)


def _clean(v: Any) -> Any:
    return None if _blank(v) else v


PROVENANCE_LABELS = {**{f"{side}_{col}": f"{side} {col.replace('_', ' ')}" for side in ("candidate", "reference")
                        for col in PROVENANCE},
                     **{col: col.replace("_", " ") for col in ("fingerprint", "note", "scope", "noise", "rel_error_low",
                                                               "rel_error_high")}}
"""Row column -> its label under the row, in the order shown."""


def provenance(row: dict[str, Any]) -> list[tuple[str, Any]]:
    """(label, value) lines of where one aligned key's two numbers came from."""
    return [(label, plain(v)) for col, label in PROVENANCE_LABELS.items()
            if not _blank(v := row.get(col))]


SHOWN = ("workload", "op", "candidate_value", "reference_value", "efficiency", "rel_error", "tolerance", "kind",
         "factor", "fingerprint", "note", "scope", "noise", "rel_error_low", "rel_error_high",
         *(f"{side}_{col}" for side in ("candidate", "reference") for col in PROVENANCE))
"""The columns of a pair's rows the page shows (a column the rows lack is left out)."""


def records(rows: Any) -> list[dict[str, Any]]:
    """The shown columns of a rows frame as dicts (column lists zipped: ~10x faster than to_dict)."""
    if rows is None or not len(rows):
        return []
    cols = [c for c in SHOWN if c in rows.columns]
    return [dict(zip(cols, vals, strict=True)) for vals in zip(*(rows[c].tolist() for c in cols), strict=True)]


def key_cells(r: dict[str, Any], p: PairSection) -> list[Any]:
    """One key's cells as the page's script writes them (see KEY_COLUMNS): a text, or [sort
    value, text] for a number; formatted here by the PDF's formatters, control and bidi
    characters made visible."""
    from xfid.report.render import fmt_num, fmt_pct, fmt_qty

    g = r.get

    def n(col: str, text: str) -> list[str]:
        return [sort_value(g(col)), terminal(text)]

    cells = [terminal(str(g("workload") or "")), terminal(str(g("op") or "(end-to-end)")),
             n("candidate_value", fmt_qty(g("candidate_value"), p.unit)),
             n("reference_value", fmt_qty(g("reference_value"), p.unit))]
    if p.is_bound:
        cells.append(n("efficiency", fmt_pct(g("efficiency"))))
    else:
        cells += [n("rel_error", fmt_pct(g("rel_error"), True)), n("tolerance", fmt_pct(g("tolerance")))]
    return [*cells, terminal(str(g("kind") or "")), n("factor", fmt_num(g("factor")))]


def key_columns(p: PairSection) -> list[str]:
    """The class of each cell key_cells gives (key: a name that may break at / and ,; n: a number)."""
    return ["key", "key", "n", "n", "n", *([] if p.is_bound else ["n"]), "kind", "n"]


def issue_cells(i: dict[str, Any], anchor: str, link: str | None, n_prov: int) -> dict[str, Any]:
    """One issue's row: anchor, the key it links to, and its cell texts and sort values in the
    order the template writes them (formatted here, as key_cells, for the 1,000-issue benchmark)."""
    from xfid.report.render import fmt_num, fmt_pct, fmt_qty

    g, unit = i.get, i.get("unit", "")
    age = g("age")
    cells = (g("id"), g("state"), g("kind"), sort_value(g("factor")), fmt_num(g("factor")), g("target"),
             breakable(g("workload") or ""), breakable(g("op") or "(end-to-end)"), f"{g('metric')}/{g('stat')}",
             sort_value(g("candidate_value")), f"{fmt_qty(g('candidate_value'), unit)} {g('candidate')}",
             sort_value(g("reference_value")), f"{fmt_qty(g('reference_value'), unit)} {g('reference')}",
             sort_value(g("rel_error")), fmt_pct(g("rel_error"), True), sort_value(g("tolerance")),
             fmt_pct(g("tolerance")), (g("first_seen") or "—")[:10], sort_value(age),
             "—" if age is None else str(age), g("owner") or "—")
    return {"id": anchor, "link": link, "kind": g("kind"), "c": cells, "nprov": n_prov}


def key_rows(pairs: list[PairSection], xf_ids: dict[str, str], taken: set[str]) -> tuple[dict[int, list[dict[str, Any]]],
                                                                                            dict[str, str]]:
    """Each pair's aligned keys (anchor, values, provenance), and fingerprint -> key anchor."""
    by_pair: dict[int, list[dict[str, Any]]] = {}
    key_of: dict[str, str] = {}
    for k, p in enumerate(pairs):
        rows = records(p.rows)
        out = []
        for r in rows:
            fp = _clean(r.get("fingerprint"))
            aid = anchor_id("key-", fp if fp else f"{k}-{len(out)}", taken)
            if fp:
                key_of.setdefault(str(fp), aid)
            out.append({"id": aid, "r": r, "kind": re.sub(r"[^A-Za-z0-9_-]", "_", str(r.get("kind") or "")),
                        "cells": key_cells(r, p), "xf": xf_ids.get(str(fp)) if fp else None, "prov": provenance(r)})
        by_pair[k] = out
    return by_pair, key_of


def issue_provenance(issue: dict[str, Any], rows_by_fp: dict[str, dict[str, Any]]) -> list[tuple[str, Any]]:
    """An issue's tracker fields and, from its key's row in the shown check, its numbers' sources."""
    out = [(k.replace("_", " "), plain(issue[k])) for k in ("fingerprint", "severity", "last_seen", "first_check", "last_check",
                                                       "clean_streak", "updated_at", "waiver_reason", "waiver_until",
                                                       "waiver_max_error") if _clean(issue.get(k)) is not None]
    row = rows_by_fp.get(str(issue.get("fingerprint")))
    return out + [x for x in provenance(row) if x[0] != "fingerprint"] if row else out


def source_provenance(s: dict[str, Any]) -> list[tuple[str, Any]]:
    """A source's manifest fields the table does not show: id, checksum, config, options, summary."""
    out = [("source id", s.get("source_id")), ("sha256", s.get("content_hash"))]
    out += [(k, plain(s[k])) for k in ("config", "options", "summary") if s.get(k)]
    return [(k, v) for k, v in out if not _blank(v)]


class Provenance:
    """Every row's provenance lines by the row's id: written once as a JSON data block (Jinja's
    `tojson`, safe inside <script>) that the page's script shows, by textContent, when a row's
    <details> opens. Rendering them as markup cost most of the 4,000-key benchmark's time."""

    def __init__(self) -> None:
        self.rows: dict[str, list[list[str]]] = {}

    def add(self, row_id: str, lines: list[tuple[str, Any]]) -> int:
        """Record one row's lines; returns how many (the <summary> says it)."""
        if lines:
            self.rows[row_id] = [[terminal(k), terminal(v if isinstance(v, str) else plain(v) if isinstance(
                v, (list, tuple, dict)) else str(v))] for k, v in lines]
        return len(lines)


def web_context(data: ReportData, bound_tol: float) -> dict[str, Any]:
    """What report_web.html.j2 reads (the figures are drawn here, by the PDF's plot code)."""
    from xfid.report.plots import pair_figures

    issues = [*data.open_issues, *data.resolved_issues]
    for i in issues:
        i.setdefault("age", age_days(i.get("first_seen"), data.generated_at))
        i.setdefault("factor", issue_factor(i))
    xf_ids = {str(i["fingerprint"]): str(i["id"]) for i in issues if i.get("fingerprint") and i.get("id")}
    taken: set[str] = set()
    issue_ids = {id(i): anchor_id("", i.get("id") or i.get("fingerprint") or "issue", taken) for i in issues}
    pair_ids = [anchor_id("pair-", k + 1, taken) for k in range(len(data.pairs))]
    keys, key_of = key_rows(data.pairs, xf_ids, taken)
    rows_by_fp = {str(kr["r"]["fingerprint"]): kr["r"] for rows in keys.values() for kr in rows
                  if _clean(kr["r"].get("fingerprint"))}
    prov = Provenance()
    key_tables = {}  # table id -> its rows, written by the page's script (KEYS below)
    for k, rows in keys.items():
        key_tables[f"t-keys-{k + 1}"] = {"cols": key_columns(data.pairs[k]), "rows": [
            [kr["id"], kr["kind"], kr["xf"] or "", prov.add(kr["id"], kr.pop("prov")), kr["cells"]] for kr in rows]}
    rows_of = {id(i): issue_cells(i, issue_ids[id(i)], key_of.get(str(i.get("fingerprint") or "")),
                                  prov.add(issue_ids[id(i)], issue_provenance(i, rows_by_fp))) for i in issues}
    source_ids = {id(s): anchor_id("src-", (s.get("source_id") or "")[:16], taken) for s in data.sources}
    source_n = {id(s): prov.add(source_ids[id(s)], source_provenance(s)) for s in data.sources}
    check_ids = {id(c): anchor_id("check-", c.get("id", ""), taken) for c in data.checks}
    check_n = {id(c): prov.add(check_ids[id(c)], list((c.get("settings") or {}).items())) for c in data.checks}
    figs = [pair_figures(p, data.max_points, data.seed, bound_tol) if p.n >= MIN_PLOT else None for p in data.pairs]
    return {"d": data, "figs": figs, "keys": keys, "key_of": key_of, "pair_ids": pair_ids, "xf_ids": xf_ids,
            "issue_id": lambda i: issue_ids[id(i)], "issue_row": lambda i: rows_of[id(i)],
            "source_id": lambda s: source_ids[id(s)], "source_n": lambda s: source_n[id(s)],
            "check_id": lambda c: check_ids[id(c)], "check_n": lambda c: check_n[id(c)], "provenance": prov.rows,
            "key_tables": key_tables,
            "names": long_names(data), "bound_tol": bound_tol, "factor_legend": FACTOR_LEGEND, "min_plot": MIN_PLOT,
            "sortv": sort_value, "brk": breakable, "headline": _headline(data)}


def _headline(data: ReportData) -> list[str]:
    """The PDF's page-1 sentences (xfid.report.headline), the same on the page to work in."""
    from xfid.report.headline import headline
    from xfid.report.render import fmt_qty

    return headline(data, fmt_qty)


def render_web(data: ReportData, bound_tol: float = DEFAULT_BOUND_TOLERANCE) -> str:
    """The HTML report as one self-contained string (inline CSS/JS under a hash-based CSP)."""
    import markupsafe

    css, js = _asset("report_web.css") + scale_css(), _asset("report_web.js")
    with _no_cycle_collection():
        return _env().get_template(TEMPLATE).render(**web_context(data, bound_tol), css=markupsafe.Markup(css),
                                                    js=markupsafe.Markup(js), csp=content_security_policy(css, js))


def scale_css() -> str:
    """One class per bin of each colour scale (`hb-rel_error-2`): the sparse heatmap's table takes
    the plots' colours without inline styles, which the page's CSP does not allow."""
    from xfid.report.plots import COLOUR_SCALES

    lines = [f".hb-{name}-{k} {{ background: {c}; }}" for name, sc in COLOUR_SCALES.items()
             for k, c in enumerate(sc.colours())]
    return "\n" + "\n".join([*lines, ".hb-dark { color: #fff; }"]) + "\n"


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused (and then resumed, if it ran before). The page builds
    some 100,000 small lists, dicts and strings, none of them in a cycle (reference counting frees
    them); the collector scanned them again and again, half of the 1,000-issue page's table time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
