"""`xfid doctor`: check the store; `--repair` fixes what can be fixed without touching good data."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import click

from xfid.app import App


@click.command("doctor")
@click.option("--repair", is_flag=True,
              help="Quarantine broken sources (and drop them from the manifest), stale temps and orphan check "
                   "files; finish committed renames. Nothing is deleted: see quarantine/NOTES.txt.")
@click.option("--rebuild-catalog", "rebuild", is_flag=True,
              help="Rebuild the manifest from the provenance in the parts (when xfid.db is missing, empty, "
                   "another store's or older than the parts); the old xfid.db is kept in a backup folder. "
                   "Run it with no other xfid using the store.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_obj
def cli(app: App, repair, rebuild, fmt) -> None:
    """Check the store: the SQLite database, the catalog against the part files, every Parquet
    part (row counts, checksums), temps and check files.

    Exit 0 when the store is healthy (or was repaired), 1 when problems remain.
    """
    if rebuild:
        if repair:
            raise click.UsageError("--rebuild-catalog and --repair are separate steps: rebuild first")
        _rebuild(app, fmt)
        return
    rep = app.api.doctor(repair=repair)
    if fmt == "json":
        click.echo(json.dumps({**asdict(rep), "ok": rep.ok}, indent=2))
    else:
        click.echo(f"store {rep.store}: {rep.parts_checked} parts, {rep.rows_checked} rows checked")
        if rep.removed:
            n = sum(int(r["rows"]) for r in rep.removed)
            click.echo(f"  {len(rep.removed)} removed source(s), {n} rows: kept in the store, read by no one "
                       "(`xfid sources --all` says who removed them, when and why)")
        for p in rep.problems:
            state = "repaired" if p.repaired else ("--repair: " + p.repair if p.repair else "")
            click.echo(f"  {p.kind}: {p.path}: {p.detail}" + (f" [{state}]" if state else ""))
        if rep.ok:
            click.echo("healthy" if not rep.problems else "repaired")
        elif not repair and any(p.repair for p in rep.problems):
            click.echo("problems found; run `xfid doctor --repair` to fix what can be fixed")
        else:
            click.echo("problems found that --repair does not fix; each line says what to do")
    sys.exit(0 if rep.ok else 1)


def _rebuild(app: App, fmt: str) -> None:
    from xfid.store import DB_NAME

    rep = app.api.rebuild_catalog()
    if fmt == "json":
        click.echo(json.dumps(asdict(rep), indent=2))
        return
    click.echo(f"store {rep.store}: catalog rebuilt from {rep.parts} parts: {rep.sources} sources, {rep.rows} rows "
               f"(store id {rep.store_id[:12]})")
    if rep.backup:
        click.echo(f"  moved into {rep.backup}: {', '.join(rep.moved)}")
    if DB_NAME in rep.moved:
        click.echo("  tracker history kept (the previous database was an older copy of this store)" if rep.tracker_kept
                   else "  the tracker starts empty: the previous database was another store's or unreadable")
    elif "checks/" in rep.moved:
        click.echo("  the tracker starts empty: there was no database")
    if rep.legacy_parts:
        click.echo(f"  {rep.legacy_parts} parts from before provenance footers: sources rebuilt from their rows "
                   "(their options and content hash were not recorded)")
    for f in rep.renamed:
        click.echo(f"  finished the rename of committed part {f}")
    for q in rep.quarantined:
        click.echo(f"  quarantined {q}")
