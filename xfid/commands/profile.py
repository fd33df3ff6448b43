"""`xfid profile`: what each target achieves against its bounds, what limits it, how far the model transfers."""

from __future__ import annotations

from pathlib import Path

import click

from xfid.app import App
from xfid.commands import options
from xfid.commands.correlate import write_output


@click.command("profile")
@click.argument("targets", nargs=-1, required=True, metavar="TARGET...")
@options.output_format("table", "json", "markdown")
@options.output("Write to FILE: .pdf or .html renders the profile document; any other name gets what --format says "
                "(table, json or markdown).")
@click.pass_obj
def cli(app: App, targets, fmt, output) -> None:
    """Capability profile of one or more targets, side by side.

    Per op class x precision x size bucket (decades of FLOPs) x limiter: the achieved fraction of
    the roofline bound and of the data-sheet peak (n, median, IQR, seeded bootstrap 95% CI), what
    limits the class (with Nsight Compute counters where ingested), the roofline's cross-validated
    error before and after calibration, slowdowns of runs tagged `--meta interference=NAME`, and
    the conditions (hardware, software, power and clocks, excluded runs). Every number names the
    records behind it.
    """
    from xfid.profile.render import to_markdown, to_table, write_document

    prof = app.api.profile(list(targets))
    if output and Path(output).suffix.lower() in (".pdf", ".html"):
        path, pages = write_document(prof, output)
        click.echo(f"wrote {path} ({'HTML' if pages is None else f'{pages} pages'})", err=True)
        return
    text = prof.to_json() if fmt == "json" else to_markdown(prof) if fmt == "markdown" else to_table(prof)
    write_output(text, output)
