"""`xfid sources`: the ingested sources (the manifest); `xfid sources remove`: take one back out."""

from __future__ import annotations

import json

import click

from xfid.app import App
from xfid.commands import options
from xfid.textsafe import echo  # paths come from users' folders: no raw control characters


@click.group("sources", invoke_without_command=True)
@options.output_format("table", "json")
@click.option("--all", "show_all", is_flag=True,
              help="Also list the removed sources, with who removed them, when and why.")
@click.pass_context
def cli(ctx: click.Context, fmt: str, show_all: bool) -> None:
    """List ingested sources (the manifest): path, adapter, rows, hash, time.

    `xfid sources remove SOURCE_ID|PATH` takes a wrongly ingested source back out.
    """
    if ctx.invoked_subcommand is not None:
        return
    app: App = ctx.obj
    rows = app.api.sources(removed=show_all)
    if fmt == "json":
        for r in rows:
            r["options"] = json.loads(r["options"])
            r["summary"] = json.loads(r["summary"])
        click.echo(json.dumps(rows, indent=2))
        return
    live = [r for r in rows if "removed_at" not in r]
    gone = [r for r in rows if "removed_at" in r]
    if not rows:
        echo("no sources ingested yet")
        return
    if live:
        echo(f"{'source_id':<12}  {'adapter':<13}  {'rows':>9}  {'ingested_at':<20}  path")
    for r in live:
        echo(f"{r['source_id'][:12]:<12}  {r['adapter']:<13}  {r['rows']:>9}  {r['ingested_at']:<20}  {r['path']}")
    if gone:
        echo(f"{'' if not live else chr(10)}removed ({len(gone)}):")
        echo(f"{'source_id':<12}  {'adapter':<13}  {'rows':>9}  {'removed_at':<20}  {'by':<12}  path: reason")
        for r in gone:
            why = r["reason"] or "(no reason given)"
            if r["cause"]:
                why += f"; {r['cause']}"
            echo(f"{r['source_id'][:12]:<12}  {r['adapter']:<13}  {r['rows']:>9}  {r['removed_at']:<20}  "
                 f"{r['actor']:<12}  {r['path']}: {why}")


@cli.command("remove")
@click.argument("source", metavar="SOURCE_ID|PATH")
@click.option("--reason", metavar="TEXT", help="Why it is removed (kept with the removal).")
@options.actor
@options.output_format("text", "json")
@click.pass_obj
def remove(app: App, source: str, reason: str | None, actor_opt: str | None, fmt: str) -> None:
    """Take a source back out: its records leave every later read (correlate, check, export,
    report, profile), all at once; who removed it, when and why stay in `xfid sources --all`.

    SOURCE_ID may be a unique prefix of at least 6 characters; PATH is the file as it was
    ingested. Sources derived from it (a run's energy) go with it. Nothing is deleted: the
    file can be ingested again. The next `xfid check` re-evaluates the issues whose evidence
    came from it, and says so in their history.
    """
    done = app.api.remove_source(source, reason=reason, actor=actor_opt)
    if fmt == "json":
        click.echo(json.dumps([d.to_dict() for d in done], indent=2))
        return
    first, *rest = done
    why = f": {first.reason}" if first.reason else ""
    echo(f"removed source {first.source_id[:12]} ({first.adapter}, {first.rows} rows, {first.path}) by "
         f"{first.actor} at {first.removed_at}{why}")
    for d in rest:
        echo(f"  also removed {d.source_id[:12]} ({d.adapter}, {d.rows} rows, {d.path}): {d.cause}")
    echo("the next `xfid check` re-evaluates the issues that depended on it; `xfid sources --all` lists removals")
