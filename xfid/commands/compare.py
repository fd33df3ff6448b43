"""`xfid compare`: the CI gate. Exit 0: no drift; 1: drift; 2: usage or input error."""

from __future__ import annotations

import sys

import click

from xfid.app import App


@click.command("compare")
@click.option("--baseline", required=True, type=click.Path(dir_okay=False), help="Snapshot from `xfid snapshot`.")
@click.option("--current", type=click.Path(dir_okay=False), help="Compare this snapshot instead of the store.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json", "junit"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report here as well as deciding the exit code.")
@click.option("--fail-on", default="new,regression,bound,drift", show_default=True,
              help="Comma list of new, regression, bound, drift, or any.")
@click.option("--target", multiple=True, help="Only these targets (repeatable).")
@click.pass_obj
def cli(app: App, baseline, current, fmt, output, fail_on, target) -> None:
    """Compare the current correlation (or --current snapshot) with a baseline snapshot.

    Reports new discrepancies, resolved ones, per-key error changes beyond `[drift] error_abs`
    (default 5 percentage points), aggregate MAPE/bias drift, a fidelity's own values changing
    (default 5%), and bound violations. Thresholds live under [drift] in xfid.toml.
    """
    from xfid.drift.drift import Thresholds, compare_snapshots, parse_fail_on
    from xfid.drift.drift_format import FORMATTERS
    from xfid.drift.snapshot import make_snapshot, read_snapshot

    fails = parse_fail_on(fail_on)
    base = read_snapshot(baseline)
    th = Thresholds.from_config(app.config.section("drift"))
    if current:
        cur = read_snapshot(current)
    else:
        from xfid.commands.snapshot import correlate_now

        cur = make_snapshot(correlate_now(app, target))
    if target:
        base = {**base, "keys": {k: v for k, v in base["keys"].items() if v["target"] in target},
                "comparisons": [c for c in base["comparisons"] if c["target"] in target]}
        cur = {**cur, "keys": {k: v for k, v in cur["keys"].items() if v["target"] in target},
               "comparisons": [c for c in cur["comparisons"] if c["target"] in target]}
    rep = compare_snapshots(base, cur, th, fails)
    text = FORMATTERS[fmt](rep)
    if output:
        from pathlib import Path

        Path(output).write_text(text, encoding="utf-8")
    click.echo(text, nl=False)
    sys.exit(rep.exit_code)
