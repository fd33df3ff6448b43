"""`xfid check`: correlate the store and update the discrepancy tracker."""

from __future__ import annotations

import json

import click

from xfid.app import App
from xfid.commands import options


@click.command("check")
@options.selection
@options.actor
@click.option("--label", help="A label kept with the check (a commit, 'nightly', ...).")
@click.option("--resolve-after", "resolve_after", type=int, metavar="K",
              help="Consecutive clean checks that resolve an issue (default [tracker] resolve_after, else 2).")
@options.output_format("text", "json")
@options.engine
@click.pass_obj
def cli(app: App, targets, runs, as_of, actor_opt, label, resolve_after, fmt, engine) -> None:
    """Correlate the store and file, reopen and resolve tracked discrepancies.

    Over-tolerance, bound-violation and config-mismatch rows file issues (XF-N); missing
    references are counted only. Prints new / reopened / resolved / still open counts.
    """
    from xfid.tracker.render import check_text

    summary = app.api.check(request=options.request(targets, runs, as_of), actor=actor_opt, label=label,
                            resolve_after=resolve_after, engine=engine)
    click.echo(json.dumps(summary.to_dict(), indent=2) if fmt == "json" else check_text(summary))
