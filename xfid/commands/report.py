"""`xfid report`: render the weekly discrepancy report as PDF (default) or one HTML file."""

from __future__ import annotations

import click

from xfid.app import App
from xfid.commands import options


@click.command("report")
@click.argument("period", required=False, metavar="[PERIOD]")
@click.option("--week", metavar="YYYY-Www", help="ISO week, e.g. 2026-W48 (Monday to Sunday, UTC).")
@click.option("--since", metavar="DATE", help="First day (YYYY-MM-DD, inclusive).")
@click.option("--until", metavar="DATE", help="Last day (YYYY-MM-DD, inclusive; default today).")
@options.output("File to write (default reports/xfid-<period>.pdf).")
@click.option("--html", "as_html", is_flag=True, help="Write one self-contained HTML file to work in instead: every table and key, "
              "sortable and filterable, with each number's provenance (nothing fetched; a strict CSP).")
@options.targets
@click.option("--max-points", type=click.IntRange(100, 1_000_000), default=5000, show_default=True,
              help="Most points drawn per plot (a seeded sample; tables stay complete).")
@click.pass_obj
def cli(app: App, period, week, since, until, output, as_html, targets, max_points) -> None:
    """Render the discrepancy report for one period (default: the last complete ISO week).

    PERIOD is what the Python API's `report()` takes: an ISO week (2026-W49), a range of days
    (2026-11-23..2026-11-29) or one day (2026-11-23); or give --week, or --since/--until.

    Page 1: the period in a few sentences, the issue counts and each pair's health; then the
    worst and all active issues, plots of the pairs that need action, the competitive view,
    calibration and capability. Every number, with the file and row it comes from, and what the
    short report leaves out (provenance, unmatched ops, small pairs) go to REPORT-numbers.csv
    beside it. Only data: URIs are embedded; nothing is fetched.
    """
    from xfid.errors import ReportError
    from xfid.report.period import resolve_period

    if period is not None and (week or since or until):
        raise ReportError("give the period either as {period} or as {week} or {since}/{until}, not both",
                          params=("period", "week", "since", "until"))
    res = app.api.report(period if period is not None else resolve_period(week, since, until), output, as_html, targets=targets, max_points=max_points)
    what = "HTML" if res.html else f"{res.pages} pages"
    numbers = (f" and its numbers, each with its file and row, to {res.numbers}" if res.numbers
               else " (no numbers attachment beside a device)")
    click.echo(f"wrote {res.path} ({what}, {res.active_issues} active issues, {res.pairs} pairs){numbers}")
