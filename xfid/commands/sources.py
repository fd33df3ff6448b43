"""`xfid sources`: the ingested sources (the manifest)."""

from __future__ import annotations

import json

import click

from xfid.app import App
from xfid.commands import options
from xfid.textsafe import echo  # paths come from users' folders: no raw control characters


@click.command("sources")
@options.output_format("table", "json")
@click.pass_obj
def cli(app: App, fmt) -> None:
    """List ingested sources (the manifest): path, adapter, rows, hash, time."""
    rows = app.api.sources()
    if fmt == "json":
        for r in rows:
            r["options"] = json.loads(r["options"])
            r["summary"] = json.loads(r["summary"])
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        echo("no sources ingested yet")
        return
    echo(f"{'source_id':<12}  {'adapter':<13}  {'rows':>9}  {'ingested_at':<20}  path")
    for r in rows:
        echo(f"{r['source_id'][:12]:<12}  {r['adapter']:<13}  {r['rows']:>9}  {r['ingested_at']:<20}  {r['path']}")
