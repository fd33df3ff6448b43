"""`xfid issues`: list, show and change the state of tracked discrepancies."""

from __future__ import annotations

from typing import Any

import click

from xfid.app import App
from xfid.commands import options
from xfid.commands.validate import NON_NEGATIVE

STATES = ("open", "acknowledged", "resolved", "reopened", "waived", "invalid", "duplicate",
          "downstream")  # xfid.tracker.STATES, kept light
KINDS = ("over_tolerance", "bound_violation", "config_mismatch")


SUMMARY = click.option("--summary", metavar="S-C-N",
                       help="Apply the action to every issue of this summary (see `xfid issues summaries`); "
                            "issues whose state does not take it are skipped and listed.")


@click.group("issues")
def cli() -> None:
    """List, show and change tracked discrepancies (XF-N).

    States: open -> acknowledged -> resolved; resolved -> reopened when it recurs;
    waived with a reason and an expiry date; triage verdicts invalid (the data is wrong: its
    key leaves the statistics), duplicate of XF-N, downstream of XF-N (a check keeps them;
    reopen undoes them). Active: open, acknowledged or reopened (someone still has to act).
    See docs/tracker.md.
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


def _change(app: App, issue_id: str | None, action: str, actor_opt: str | None, summary: str | None = None,
            **kw: Any) -> None:
    """One issue's action, or (with --summary) the same action on every issue of a summary."""
    if (issue_id is None) == (summary is None):
        raise click.UsageError(f"give one issue (XF-N) or --summary S-C-N to {action}, not "
                               + ("both" if issue_id else "neither"))
    if summary is not None:
        from xfid.tracker import render

        click.echo(render.summary_action_text(app.api.act_summary(summary, action, actor=actor_opt, **kw)))
        return
    assert issue_id is not None
    d = app.api.act(issue_id, action, actor=actor_opt, **kw)
    extra = f" (owner {d['owner']})" if action == "ack" else ""
    if action == "waive":
        extra = f" until {d['waiver_until']}"
    elif action in ("duplicate", "downstream"):
        extra = f" of {d['related_to']}"
    click.echo(f"{d['id']}: {d['state']}{extra}" if action != "note" else f"{d['id']}: note added")


@cli.command("ack")
@click.argument("issue_id", metavar="[XF-N]", required=False)
@SUMMARY
@click.option("--owner", required=True, help="Who owns the fix.")
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def ack_cmd(app: App, issue_id, owner, note, summary, actor_opt) -> None:
    """Acknowledge an issue and give it an owner."""
    _change(app, issue_id, "ack", actor_opt, summary=summary, owner=owner, note=note)


@cli.command("resolve")
@click.argument("issue_id", metavar="[XF-N]", required=False)
@SUMMARY
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def resolve_cmd(app: App, issue_id, note, summary, actor_opt) -> None:
    """Mark an issue resolved (the next check reopens it if it is still there)."""
    _change(app, issue_id, "resolve", actor_opt, summary=summary, note=note)


@cli.command("reopen")
@click.argument("issue_id", metavar="[XF-N]", required=False)
@SUMMARY
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def reopen_cmd(app: App, issue_id, note, summary, actor_opt) -> None:
    """Reopen a resolved, waived, invalid, duplicate or downstream issue."""
    _change(app, issue_id, "reopen", actor_opt, summary=summary, note=note)


@cli.command("waive")
@click.argument("issue_id", metavar="[XF-N]", required=False)
@SUMMARY
@click.option("--reason", required=True, help="Why this discrepancy is accepted for now.")
@click.option("--until", required=True, metavar="YYYY-MM-DD", help="Expiry date (inclusive); back to open after it.")
@click.option("--max-error", type=NON_NEGATIVE, metavar="X", help="Back to open when |rel_error| exceeds X (e.g. 0.25).")
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def waive_cmd(app: App, issue_id, reason, until, max_error, note, summary, actor_opt) -> None:
    """Waive an issue until a date, optionally only while |error| stays below a bound."""
    _change(app, issue_id, "waive", actor_opt, summary=summary, reason=reason, until=until, max_error=max_error, note=note)


@cli.command("note")
@click.argument("issue_id", metavar="[XF-N]", required=False)
@SUMMARY
@click.option("--note", required=True, help="Free text kept in the history.")
@options.actor
@click.pass_obj
def note_cmd(app: App, issue_id, note, summary, actor_opt) -> None:
    """Add a note to an issue's history (its state does not change)."""
    _change(app, issue_id, "note", actor_opt, summary=summary, note=note)


@cli.command("invalid")
@click.argument("issue_id", metavar="[XF-N]", required=False)
@SUMMARY
@click.option("--reason", required=True, help="What is wrong with the data (kept with the issue and in its history).")
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def invalid_cmd(app: App, issue_id, reason, note, summary, actor_opt) -> None:
    """Mark an issue invalid: its data is wrong. Its key's rows leave the statistics (MAPE, bias,
    ...) of later checks until the issue is reopened; a check never reopens it."""
    _change(app, issue_id, "invalid", actor_opt, summary=summary, reason=reason, note=note)


@cli.command("duplicate")
@click.argument("issue_id", metavar="[XF-N]", required=False)
@SUMMARY
@click.option("--of", "of", required=True, metavar="XF-M", help="The issue this one duplicates (another, existing one).")
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def duplicate_cmd(app: App, issue_id, of, note, summary, actor_opt) -> None:
    """Mark an issue a duplicate of another (no cycles); a check never reopens it."""
    _change(app, issue_id, "duplicate", actor_opt, summary=summary, of=of, note=note)


@cli.command("downstream")
@click.argument("issue_id", metavar="[XF-N]", required=False)
@SUMMARY
@click.option("--of", "of", required=True, metavar="XF-M", help="The issue that causes this one.")
@click.option("--note", help="Free text kept in the history.")
@options.actor
@click.pass_obj
def downstream_cmd(app: App, issue_id, of, note, summary, actor_opt) -> None:
    """Mark an issue downstream of (caused by) another (no cycles); a check never reopens it."""
    _change(app, issue_id, "downstream", actor_opt, summary=summary, of=of, note=note)


@cli.command("summaries")
@click.option("--check", "check", type=click.IntRange(min=1), metavar="N",
              help="The check whose filings to group (default: the latest check).")
@options.output_format("table", "json")
@click.pass_obj
def summaries_cmd(app: App, check, fmt) -> None:
    """What a check filed, grouped by probable common cause: the same run or source file, the
    same target and workload, the same op class, the same software stack (docs/tracker.md).
    Act on a whole summary with `xfid issues ack --summary S-C-N --owner NAME` (and the other actions)."""
    from xfid.tracker import render

    rows = app.api.summaries(check)
    click.echo(render.issues_json(rows) if fmt == "json" else render.summaries_table(rows, check))
