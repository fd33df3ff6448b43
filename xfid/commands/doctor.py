"""`xfid doctor`: check the store; `--repair` fixes what can be fixed without touching good data."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import click

from xfid.app import App


@click.command("doctor")
@click.option("--repair", is_flag=True, help="Delete orphans and stale temp files; quarantine and drop broken sources.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_obj
def cli(app: App, repair, fmt) -> None:
    """Check the store: the SQLite database, every Parquet part (checksums, row counts), orphans.

    Exit 0 when the store is healthy (or was repaired), 1 when problems remain.
    """
    from xfid.doctor import examine

    rep = examine(app.store_path, repair=repair)
    if fmt == "json":
        click.echo(json.dumps({**asdict(rep), "ok": rep.ok}, indent=2))
    else:
        click.echo(f"store {rep.store}: {rep.parts_checked} parts, {rep.rows_checked} rows checked")
        for p in rep.problems:
            state = "repaired" if p.repaired else ("fix: " + p.repair if p.repair else "")
            click.echo(f"  {p.kind}: {p.path}: {p.detail} [{state}]")
        if rep.ok:
            click.echo("healthy" if not rep.problems else "repaired")
        elif not repair:
            click.echo("problems found; run `xfid doctor --repair` to fix what can be fixed")
    sys.exit(0 if rep.ok else 1)
