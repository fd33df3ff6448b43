"""`xfid token`: create, list and revoke the API tokens of `xfid serve` (kept in the catalog)."""

from __future__ import annotations

import json

import click

from xfid.app import App
from xfid.commands import options
from xfid.textsafe import echo


@click.group("token")
def cli() -> None:
    """Create, list and revoke the tokens `xfid serve` accepts (roles: reader, writer, admin).

    Readers read; writers also ingest, check and act on issues; admins also manage tokens.
    Tokens live hashed in the store's catalog, so every server over one team store shares them.
    """


@cli.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(["reader", "writer", "admin"]), required=True,
              help="What the token may do.")
@options.actor
@click.pass_obj
def create_cmd(app: App, name, role, actor_opt) -> None:
    """Create a token NAME and print it (only the token, once: store it now)."""
    from xfid.api import who_acts
    from xfid.serve import tokens

    store = app.store(create=True)
    store.require_writable("create a token")
    click.echo(tokens.create(store.conn, name, role, who_acts(actor_opt)))


@cli.command("list")
@options.output_format("table", "json")
@click.pass_obj
def list_cmd(app: App, fmt) -> None:
    """List the tokens: name, role, when and by whom created (never the token)."""
    from xfid.serve import tokens

    rows = tokens.listing(app.store(create=False).conn)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        echo("no tokens (create one: xfid token create NAME --role reader|writer|admin)")
        return
    echo(f"{'name':<24}  {'role':<7}  {'created':<20}  by")
    for r in rows:
        echo(f"{r['name']:<24}  {r['role']:<7}  {r['created_at']:<20}  {r['created_by']}")


@cli.command("revoke")
@click.argument("name")
@click.pass_obj
def revoke_cmd(app: App, name) -> None:
    """Revoke the token NAME (its browser sessions end too)."""
    from xfid.serve import tokens

    store = app.store(create=False)
    store.require_writable("revoke a token")
    tokens.revoke(store.conn, name)
    echo(f"token {name} revoked")
