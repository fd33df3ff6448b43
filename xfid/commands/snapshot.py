"""`xfid snapshot`: write the current correlation as a baseline for `xfid compare`."""

from __future__ import annotations

import click

from xfid.app import App
from xfid.commands import options


@click.command("snapshot")
@options.output("Baseline file to write: .json (diffable, default) or .parquet.")
@options.selection
@click.option("--label", help="Record the snapshot in the store under this label (a branch such as main), for "
                               "`xfid compare --against LABEL`; the label is also kept in the snapshot.")
@options.engine
@click.pass_obj
def cli(app: App, output, targets, runs, as_of, label, engine) -> None:
    """Write a compact, diffable baseline: per key the values, errors and kind; per pair the aggregates.

    -o FILE writes it to a file; --label LABEL records it in the store under the label (a branch
    such as main), which `xfid compare --against LABEL` compares with; give either or both.
    """
    if not output and not label:
        raise click.UsageError("say where the snapshot goes: -o FILE, --label LABEL (recorded in the store), or both")
    if label:
        from xfid.serve.labels import check_label

        check_label(label)  # before the correlation: a bad label costs nothing
    snap = app.api.snapshot(output, label=label, engine=engine, request=options.request(targets, runs, as_of))
    bad = sum(1 for k in snap["keys"].values() if k["kind"] not in ("ok", "missing_reference"))
    counts = f"{len(snap['keys'])} keys ({bad} discrepancies), {len(snap['comparisons'])} pair aggregates"
    if output:
        click.echo(f"wrote {output}: {counts}")
    if label:
        rec = app.api.record_snapshot(label, snap)
        click.echo(f"recorded snapshot {rec['id']} under {label!r} by {rec['actor']}: {counts}")
