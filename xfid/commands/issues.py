"""`xfid issues`: list, show and change the state of tracked discrepancies."""

from __future__ import annotations

from typing import Any

import click

from xfid.app import App
from xfid.commands import options
from xfid.commands.validate import NON_NEGATIVE

STATES = ("open", "acknowledged", "resolved", "reopened", "waived")  # xfid.tracker.STATES, kept light
KINDS = ("over_tolerance", "bound_violation", "config_mismatch")


@click.group("issues")
def cli() -> None:
    """List, show and change tracked discrepancies (XF-N).

    States: open -> acknowledged -> resolved; resolved -> reopened when it recurs;
    waived with a reason and an expiry date. Active: open, acknowledged or reopened (someone
    still has to act). See docs/tracker.md.
    """


@cli.command("list")
@click.option("--state", type=click.Choice([*STATES, "active"]),
              help="Only issues in this state; active: open, acknowledged or reopened.")
@options.targets
@click.option("--kind", type=click.Choice(KINDS), help="Only issues of this discrepancy kind.")
@click.option("--severity-min", type=NON_NEGATIVE, metavar="X", help="Only issues with severity >= X (|error|/tolerance).")
@click.option("--overdue", is_flag=True,
              help="Only issues past their triage-by date (open or reopened for more than [tracker] triage_days "
                   "working days, default 3).")
@options.output_format("table", "json", "csv")
@click.pass_obj
def list_cmd(app: App, state, targets, kind, severity_min, overdue, fmt) -> None:
    """List issues, ordered by id."""
    from xfid.tracker import render

    rows = app.api.issue_list(state, target=targets, kind=kind, severity_min=severity_min)
    if overdue:
        rows = [r for r in rows if r.get("overdue")]
    text = {"json": render.issues_json, "csv": render.issues_csv, "table": render.issues_table}[fmt](rows)
    click.echo(text, nl=fmt != "csv")


@cli.command("show")
@click.argument("issue_id", metavar="XF-N")
@options.output_format("text", "json")
@click.pass_obj
def show_cmd(app: App, issue_id, fmt) -> None:
    """Show one issue: history, every observation, and both numbers' provenance."""
    from xfid.tracker import render

    d = app.api.issue(issue_id)
    d["links"] = app.api.links(d["id"])
    click.echo(render.issues_json(d) if fmt == "json" else render.issue_text(d))


@cli.command("link")
@click.argument("issue_id", metavar="XF-N")
@click.argument("url")
@options.actor
@click.pass_obj
def link_cmd(app: App, issue_id, url, actor_opt) -> None:
    """Link an issue to the team's bug tracker (an http:// or https:// URL; shown, never fetched)."""
    d = app.api.link(issue_id, url, actor=actor_opt)
    click.echo(f"{d['id']}: linked {d['url']}")


def _change(app: App, issue_id: str, action: str, actor_opt: str | None, **kw: Any) -> None:
    d = app.api.act(issue_id, action, actor=actor_opt, **kw)
    extra = f" (owner {d['owner']})" if action == "ack" else ""
    if action == "waive":
        extra = f" until {d['waiver_until']}"
    click.echo(f"{d['id']}: {d['state']}{extra}" if action != "note" else f"{d['id']}: note added")


@cli.command("ack")
@click.argument("issue_id", metavar="XF-N")
@click.option("--owner", required=True, help="Who owns the fix.")
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def ack_cmd(app: App, issue_id, owner, note, actor_opt) -> None:
    """Acknowledge an issue and give it an owner."""
    _change(app, issue_id, "ack", actor_opt, owner=owner, note=note)


@cli.command("resolve")
@click.argument("issue_id", metavar="XF-N")
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def resolve_cmd(app: App, issue_id, note, actor_opt) -> None:
    """Mark an issue resolved (the next check reopens it if it is still there)."""
    _change(app, issue_id, "resolve", actor_opt, note=note)


@cli.command("reopen")
@click.argument("issue_id", metavar="XF-N")
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def reopen_cmd(app: App, issue_id, note, actor_opt) -> None:
    """Reopen a resolved or waived issue."""
    _change(app, issue_id, "reopen", actor_opt, note=note)


@cli.command("waive")
@click.argument("issue_id", metavar="XF-N")
@click.option("--reason", required=True, help="Why this discrepancy is accepted for now.")
@click.option("--until", required=True, metavar="YYYY-MM-DD", help="Expiry date (inclusive); back to open after it.")
@click.option("--max-error", type=NON_NEGATIVE, metavar="X", help="Back to open when |rel_error| exceeds X (e.g. 0.25).")
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def waive_cmd(app: App, issue_id, reason, until, max_error, note, actor_opt) -> None:
    """Waive an issue until a date, optionally only while |error| stays below a bound."""
    _change(app, issue_id, "waive", actor_opt, reason=reason, until=until, max_error=max_error, note=note)


@cli.command("note")
@click.argument("issue_id", metavar="XF-N")
@click.option("--note", required=True, help="Free text kept in the history.")
@options.actor
@click.pass_obj
def note_cmd(app: App, issue_id, note, actor_opt) -> None:
    """Add a note to an issue's history (its state does not change)."""
    _change(app, issue_id, "note", actor_opt, note=note)
