"""`xfid report`: render the weekly discrepancy report as PDF (default) or one HTML file."""

from __future__ import annotations

from pathlib import Path

import click

from xfid.app import App


def default_output(label: str, html: bool) -> Path:
    """reports/xfid-<period>.pdf|html (a range label `a..b` becomes `a_b`)."""
    return Path("reports") / f"xfid-{label.replace('..', '_')}.{'html' if html else 'pdf'}"


@click.command("report")
@click.option("--week", metavar="YYYY-Www", help="ISO week, e.g. 2026-W48 (Monday to Sunday, UTC).")
@click.option("--since", metavar="DATE", help="First day (YYYY-MM-DD, inclusive).")
@click.option("--until", metavar="DATE", help="Last day (YYYY-MM-DD, inclusive; default today).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="File to write (default reports/xfid-<period>.pdf).")
@click.option("--html", "as_html", is_flag=True, help="Write the same report as one self-contained HTML file.")
@click.option("--target", "targets", multiple=True, help="Only these targets (repeatable).")
@click.option("--max-points", type=click.IntRange(100, 1_000_000), default=5000, show_default=True,
              help="Most points drawn per plot (a seeded sample; tables stay complete).")
@click.pass_obj
def cli(app: App, week, since, until, output, as_html, targets, max_points) -> None:
    """Render the discrepancy report for one period (default: the last complete ISO week).

    Summary, per-pair plots, the discrepancy register, the competitive view, calibration,
    coverage, methodology and source provenance. Only data: URIs are embedded; nothing is fetched.
    """
    from xfid.report.assemble import build_report_data
    from xfid.report.period import resolve_period
    from xfid.report.render import render_html, render_pdf, write_atomic

    period = resolve_period(week, since, until)
    data = build_report_data(app.store(create=False), app.config, period, list(targets), max_points=max_points)
    out = Path(output) if output else default_output(period.label, as_html)
    if not output:
        out.parent.mkdir(exist_ok=True)  # the default reports/ folder; a folder named by -o must exist
    bound_tol = float(app.config.settings.get("bound_tolerance", 0.02))
    html = render_html(data, bound_tol=bound_tol)
    if as_html:
        write_atomic(out, html.encode("utf-8"))
        click.echo(f"wrote {out} (HTML, {len(data.open_issues)} open issues, {len(data.pairs)} pairs)")
        return
    pdf, pages = render_pdf(html)
    write_atomic(out, pdf)
    click.echo(f"wrote {out} ({pages} pages, {len(data.open_issues)} open issues, {len(data.pairs)} pairs)")
