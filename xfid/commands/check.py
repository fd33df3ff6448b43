"""`xfid check`: correlate the store and update the discrepancy tracker."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from typing import Any

import click

from xfid.app import App, actor
from xfid.errors import ConfigError, TrackerError


def resolve_after(section: dict[str, Any], override: int | None, where: str) -> int:
    """K for auto-resolve: --resolve-after, else `[tracker] resolve_after`, else 1.

    Raises:
        ConfigError: a value that is not an integer >= 1.
    """
    if override is not None:
        if override < 1:
            raise TrackerError(f"--resolve-after must be an integer >= 1, got {override}")
        return override
    k = section.get("resolve_after", 1)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"{where}: [tracker] resolve_after must be an integer >= 1, got {k!r}")
    return k


def _engine() -> Callable[..., Any]:
    """`xfid.engine.correlate`, looked up when called (a test may stand another in its place)."""
    import xfid.engine

    return xfid.engine.correlate


def parse_as_of(text: str | None) -> datetime | None:
    """--as-of: a date (meaning through the end of that day, UTC) or an ISO date-time (naive = UTC).

    Raises:
        TrackerError: anything else, with the accepted forms.
    """
    if text is None:
        return None
    t = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", t):
            return datetime.combine(date.fromisoformat(t), time.max, tzinfo=UTC)
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise TrackerError(f"--as-of: bad date {text!r}; use YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][+HH:MM]") from None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


@click.command("check")
@click.option("--target", multiple=True, help="Only these targets (repeatable).")
@click.option("--run", help="Use this run instead of the latest one per fidelity and key.")
@click.option("--as-of", "as_of", metavar="DATE", help="Use the numbers as they were at this date/time.")
@click.option("--actor", "actor_opt", metavar="NAME", help="Who runs the check (default: env XFID_ACTOR, else the login name).")
@click.option("--label", help="A label kept with the check (a commit, 'nightly', ...).")
@click.option("--resolve-after", "resolve_after_opt", type=int, metavar="K",
              help="Consecutive clean checks that resolve an issue (default [tracker] resolve_after, else 1).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_obj
def cli(app: App, target, run, as_of, actor_opt, label, resolve_after_opt, fmt) -> None:
    """Correlate the store and file, reopen and resolve tracked discrepancies.

    Over-tolerance, bound-violation and config-mismatch rows file issues (XF-N); missing
    references are counted only. Prints new / reopened / resolved / still open counts.
    """
    correlate = _engine()
    from xfid.tracker import Tracker
    from xfid.tracker.render import check_text

    as_of_dt = parse_as_of(as_of)
    config = app.config
    k = resolve_after(config.section("tracker"), resolve_after_opt,
                      str(config.path or "bundled xfid.toml"))
    store = app.store(create=False)
    tracker = Tracker(store)
    corr = correlate(store, config, run=run, as_of=as_of_dt, targets=list(target) or None)
    summary = tracker.record_check(corr, actor=actor(actor_opt), label=label, clean_checks_to_resolve=k)
    if fmt == "json":
        click.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        click.echo(check_text(summary))
