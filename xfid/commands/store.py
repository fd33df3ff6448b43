"""`xfid store copy`: move a local store to the team store (PostgreSQL catalog, shared records)."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from xfid.app import App
from xfid.commands import options


@click.group("store")
def cli() -> None:
    """Manage where the store lives: copy it to a team store (docs/team.md)."""


@cli.command("copy")
@click.option("--to-database", "database", required=True, metavar="URL",
              help="The team catalog: postgresql://USER@HOST[:PORT]/DBNAME (password from PGPASSWORD or ~/.pgpass).")
@click.option("--to-records", "records", metavar="URL",
              help="Where the parts go: a directory, file:///PATH or s3://BUCKET/PREFIX (default: where they are).")
@options.output_format("table", "json")
@click.pass_obj
def copy(app: App, database: str, records: str | None, fmt: str) -> None:
    """Copy this store's manifest, sources, parts, check rows and whole tracker history into a team store.

    Everything that can refuse the copy is checked before anything is written, and everything
    is registered in one transaction: a refused or failed copy leaves the team store as it was.
    Counts and checksums are compared on both sides afterwards; running it again copies only
    what is missing.
    """
    rep = app.api.copy_to(database, records)
    if fmt == "json":
        click.echo(json.dumps(asdict(rep), indent=2))
        return
    click.echo(f"copied {rep.source['store']} (database {rep.source['database']}) to database "
               f"{rep.destination['database']}, records {rep.destination['records']}")
    click.echo(f"  sources: {rep.sources_copied} copied, {rep.sources_present} already there; "
               f"parts: {rep.parts_copied} copied, {rep.parts_verified} verified (SHA-256)")
    click.echo(f"  check rows: {rep.checks_copied} copied, {rep.checks_verified} verified (SHA-256)")
    click.echo("  tracker: " + ("copied" if rep.tracker_copied else "already there, identical"))
    click.echo("  verified rows: " + ", ".join(f"{t} {n}" for t, n in rep.counts.items()))
