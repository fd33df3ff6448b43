"""`xfid export`: records in the normalized schema as JSON lines, CSV or Parquet."""

from __future__ import annotations

import click

from xfid.app import App
from xfid.commands import options


@click.command("export")
@options.output_format("jsonl", "csv", "parquet")
@options.output("File to write (default stdout; parquet needs -o).")
@options.targets
@click.option("--workload", multiple=True, help="Only these workloads (repeatable).")
@click.option("--metric", multiple=True, help="Only these metrics (repeatable).")
@click.option("--fidelity", multiple=True, help="Only these fidelities (repeatable).")
@click.pass_obj
def cli(app: App, fmt, output, targets, workload, metric, fidelity) -> None:
    """Export records in the normalized schema.

    In CSV, a text cell that starts with =, +, -, @, a tab or a carriage return gets a leading
    ' so that a spreadsheet shows it as text instead of running it as a formula (numbers are
    never changed; JSON lines and Parquet keep every value as it was).
    """
    if fmt == "parquet" and not output:
        raise click.UsageError("--format parquet needs -o FILE (Parquet is binary; it does not go to a terminal)")
    app.api.export(fmt, output, target=targets, workload=workload, metric=metric, fidelity=fidelity)
