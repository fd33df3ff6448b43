"""Render ReportData to one self-contained HTML file and to PDF (WeasyPrint, data: URIs only)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from xfid.config import DEFAULT_BOUND_TOLERANCE, DEFAULT_REL_TOLERANCE
from xfid.errors import ReportError
from xfid.outfile import write_output
from xfid.report.data import (
    FACTOR_LEGEND,
    ReportData,
    age_days,
    is_missing,
    issue_factor,
    issue_rank,
    shorten,
)
from xfid.report.headline import KIND_SHORT, MIN_KEYS, RANGE_DASH, headline, issue_key
from xfid.report.plots import TIME_UNITS
from xfid.report.views import UNRECORDED_NOTE

REGISTER_ROWS = 40
"""Most active issues the PDF lists (worst first); all of them are in the attachment."""
RESOLVED_ROWS = 20
BREAK_AFTER = re.compile(r"(?<=[/·= ])")
"""Where an identifier may wrap: after `/`, `·`, `=` or a space; never inside a token."""


def fmt_num(v: Any, digits: int = 3) -> str:
    """A number with `digits` significant digits; '—' for missing."""
    if is_missing(v) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return "—"
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    if -3 <= mag < 6:
        return f"{v:.{max(0, digits - 1 - mag)}f}"
    return f"{v:.{digits - 1}e}"


def clip(text: Any, n: int = 400) -> str:
    """Long provenance strings cut to `n` characters (the full text: `xfid sources --format json`)."""
    t = str(text)
    return t if len(t) <= n else f"{t[:n]}… ({len(t)} characters in all)"


def fmt_qty(v: Any, unit: str = "") -> str:
    """A value with its unit; seconds scaled to ms/µs/ns."""
    if is_missing(v):
        return "—"
    if unit == "s" and isinstance(v, (int, float)) and v != 0:
        for scale, name in TIME_UNITS:
            if abs(v) >= scale:
                return f"{fmt_num(v / scale)} {name}"
        return f"{fmt_num(v / 1e-9)} ns"
    return f"{fmt_num(v)} {unit}".strip()


def fmt_pct(v: Any, signed: bool = False) -> str:
    """A fraction as percent."""
    if is_missing(v) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return "—"
    return f"{v * 100:+.1f}%" if signed else f"{v * 100:.1f}%"


def fmt_ci(ci: Any) -> str:
    """[low, high] fractions as a percent range."""
    if not ci:
        return "n<3"
    return f"{ci[0] * 100:.1f}{RANGE_DASH}{ci[1] * 100:.1f}%"


def ident(text: Any) -> Any:
    """An identifier as HTML that wraps only after `/`, `·`, `=` or a space: each piece escaped
    and unbreakable (`white-space: nowrap`), a <wbr> between pieces."""
    import markupsafe

    pieces = [x for x in BREAK_AFTER.split(str(text)) if x]
    return markupsafe.Markup("<wbr>".join(f'<span class="t">{markupsafe.escape(x)}</span>' for x in pieces))


def plain(v: Any) -> str:
    """A value as a reader writes it: a list joined with commas, a dict as `k: v`, no Python repr."""
    if is_missing(v):
        return "—"
    if isinstance(v, (list, tuple, set)):
        return ", ".join(plain(x) for x in v) or "—"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {plain(x)}" for k, x in v.items()) or "—"
    if isinstance(v, float):
        return fmt_num(v)
    return str(v)


def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("xfid.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=fmt_num, qty=fmt_qty, pct=fmt_pct, ci=fmt_ci, short=shorten, clip=clip, ident=ident,
                       plain=plain, kind=lambda k: KIND_SHORT.get(str(k), str(k)))
    return env


def _css() -> str:
    from importlib import resources

    return resources.files("xfid.report").joinpath("templates/report.css").read_text(encoding="utf-8")


MIN_PLOT = MIN_KEYS


def _needs_plots(p: Any, active: set[str]) -> bool:
    """A pair worth its plots in the PDF: enough keys, and an active discrepancy or a worse trend."""
    if p.n < MIN_PLOT:
        return False
    fps = set(map(str, p.rows["fingerprint"])) if p.rows is not None and "fingerprint" in p.rows else set()
    return bool(fps & active) or p.trend_word == "worse"


def pdf_figures(p: Any, limit: int, seed: int, bound_tol: float) -> dict[str, Any]:
    """The figures a pair's PDF section shows: parity, error distribution, the trend (from two
    checks on). The heatmap is left to the HTML report (xfid.report.plots.pair_figures has all)."""
    from xfid.report import plots

    outliers: list[dict[str, Any]] = []
    par, notes = plots.parity(p, limit, seed, bound_tol, outliers)
    return {"parity": par, "cdf": plots.error_cdf(p), "trend": plots.trend(p), "outliers": outliers, "notes": notes}


def render_html(data: ReportData, bound_tol: float = DEFAULT_BOUND_TOLERANCE,
                numbers_file: str = "report-numbers.csv") -> str:
    """The short report (the PDF's HTML) as one string, figures inline as SVG data: URIs.

    What does not fit a ten-minute read is in the attachment `numbers_file` (attach.numbers_csv),
    which the text names: every number with its file and row, the sources' provenance, the keys
    of every pair, unmatched raw ops.
    """
    import markupsafe


    for i in [*data.open_issues, *data.resolved_issues]:
        i.setdefault("age", age_days(i.get("first_seen"), data.generated_at))
        i.setdefault("factor", issue_factor(i))
    active = {str(i.get("fingerprint")) for i in data.open_issues if i.get("fingerprint")}
    big = [p for p in data.pairs if p.n >= MIN_PLOT]
    plotted = [p for p in big if _needs_plots(p, active)]
    figs = [pdf_figures(p, data.max_points, data.seed, bound_tol) for p in plotted]
    xf_ids = {str(i["fingerprint"]): str(i["id"]) for i in [*data.open_issues, *data.resolved_issues]
              if i.get("fingerprint") and i.get("id")}
    anchors = {id(p): k + 1 for k, p in enumerate(plotted)}
    register = sorted(data.open_issues, key=issue_rank)[:REGISTER_ROWS]
    tmpl = _env().get_template("report.html.j2")
    return tmpl.render(d=data, plotted=plotted, big_pairs=big, small_pairs=[p for p in data.pairs if p.n < MIN_PLOT],
                       min_plot=MIN_PLOT, figs=figs, notes=list(data.notes), bound_tol=bound_tol,
                       default_tol=DEFAULT_REL_TOLERANCE, css=markupsafe.Markup(_css()), xf_ids=xf_ids,
                       anchor=lambda p: anchors.get(id(p)), factor_legend=FACTOR_LEGEND,
                       headline=headline(data, fmt_qty), register=register,
                       resolved=data.resolved_issues[:RESOLVED_ROWS], key=issue_key, numbers_file=numbers_file,
                       unrecorded_note=UNRECORDED_NOTE, dash=RANGE_DASH)


def weasyprint():
    """Import WeasyPrint, silencing its import-time notice about the optional HarfBuzz-Subset library."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="HarfBuzz-Subset", category=DeprecationWarning)
        import weasyprint as wp
        import weasyprint.urls
    return wp


class DataOnlyFetcher:
    """Factory for a WeasyPrint URLFetcher that serves only data: URIs and records every request."""

    @staticmethod
    def make(record: list[str] | None = None):
        """A URLFetcher (allowed_protocols={'data'}) that appends each requested URL to `record`."""
        class _Fetcher(weasyprint().urls.URLFetcher):
            def fetch(self, url, headers=None):
                if record is not None:
                    record.append(url)
                return super().fetch(url, headers)

        return _Fetcher(allowed_protocols={"data"}, timeout=1)


def render_pdf(html: str, record: list[str] | None = None) -> tuple[bytes, int]:
    """PDF bytes and page count. Only data: URIs are ever fetched; file:// and http(s) are refused."""
    import logging

    HTML = weasyprint().HTML
    log = logging.getLogger("weasyprint")
    old = log.level
    log.setLevel(logging.ERROR)  # refused URLs are expected; font-subsetting chatter is noise
    try:
        doc = HTML(string=html, base_url=None, url_fetcher=DataOnlyFetcher.make(record)).render()
        return doc.write_pdf(), len(doc.pages)
    finally:
        log.setLevel(old)


def write_atomic(path: Path, data: bytes) -> None:
    """Write by `xfid.outfile` (atomic over a regular file; a missing folder is an error)."""
    write_output(path, data, error=ReportError)
