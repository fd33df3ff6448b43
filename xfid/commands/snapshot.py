"""`xfid snapshot`: write the current correlation as a baseline for `xfid compare`."""

from __future__ import annotations

import click

from xfid.app import App


def correlate_now(app: App, target: tuple[str, ...] = (), run: str | None = None, as_of: str | None = None):
    """The current correlation of the store (what snapshot, compare and demo read)."""
    from xfid.engine import correlate

    kwargs = {"run": run, "as_of": as_of, "targets": list(target) or None}
    return correlate(app.store(create=False), app.config, **{k: v for k, v in kwargs.items() if v is not None})


@click.command("snapshot")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Baseline file to write: .json (diffable, default) or .parquet.")
@click.option("--target", multiple=True, help="Only these targets (repeatable).")
@click.option("--run", help="Use this run instead of the latest per key.")
@click.option("--as-of", "as_of", metavar="DATE", help="Use the runs as they were at this date/time.")
@click.option("--label", help="A label stored in the snapshot (e.g. a commit id).")
@click.pass_obj
def cli(app: App, output, target, run, as_of, label) -> None:
    """Write a compact, diffable baseline: per key the values, errors and kind; per pair the aggregates."""
    from xfid.drift.snapshot import make_snapshot, write_snapshot

    corr = correlate_now(app, target, run, as_of)
    snap = make_snapshot(corr, label=label)
    write_snapshot(snap, output)
    bad = sum(1 for k in snap["keys"].values() if k["kind"] not in ("ok", "missing_reference"))
    click.echo(f"wrote {output}: {len(snap['keys'])} keys ({bad} discrepancies), {len(snap['comparisons'])} pair aggregates")
