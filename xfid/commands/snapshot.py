"""`xfid snapshot`: write the current correlation as a baseline for `xfid compare`."""

from __future__ import annotations

import click

from xfid.app import App
from xfid.commands import options


@click.command("snapshot")
@options.output("Baseline file to write: .json (diffable, default) or .parquet.", required=True)
@options.selection
@click.option("--label", help="A label stored in the snapshot (e.g. a commit id).")
@options.engine
@click.pass_obj
def cli(app: App, output, targets, runs, as_of, label, engine) -> None:
    """Write a compact, diffable baseline: per key the values, errors and kind; per pair the aggregates."""
    snap = app.api.snapshot(output, targets, runs, as_of, label, engine=engine)
    bad = sum(1 for k in snap["keys"].values() if k["kind"] not in ("ok", "missing_reference"))
    click.echo(f"wrote {output}: {len(snap['keys'])} keys ({bad} discrepancies), {len(snap['comparisons'])} pair aggregates")
