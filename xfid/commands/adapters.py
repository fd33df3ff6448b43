"""`xfid adapters`: the registered adapters."""

from __future__ import annotations

import json

import click

from xfid.commands import options


@click.command("adapters")
@options.output_format("table", "json")
def cli(fmt) -> None:
    """List the adapters: name, fidelity, formats."""
    from xfid.api import adapters

    rows = [{**r, "fidelity": r["fidelity"] or "(from file)"} for r in adapters()]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    w = max(len(r["name"]) for r in rows)
    click.echo(f"{'adapter':<{w}}  {'fidelity':<12}  formats")
    for r in rows:
        click.echo(f"{r['name']:<{w}}  {r['fidelity']:<12}  {r['formats']}")
