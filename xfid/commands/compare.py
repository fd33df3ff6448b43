"""`xfid compare`: the CI gate. Exit 0: no drift; 1: drift; 2: usage or input error."""

from __future__ import annotations

import sys

import click

from xfid.app import App
from xfid.commands import options


@click.command("compare")
@click.option("--baseline", type=click.Path(dir_okay=False), help="Snapshot file from `xfid snapshot -o`.")
@click.option("--against", metavar="LABEL",
              help="Compare with the newest snapshot recorded in the store under LABEL (`xfid snapshot --label`), "
                   "e.g. main: a pull request gated against its base branch without a committed file.")
@click.option("--current", type=click.Path(dir_okay=False), help="Compare this snapshot instead of the store.")
@options.output_format("text", "markdown", "json", "junit")
@options.output("Write the report here as well as deciding the exit code.")
@click.option("--fail-on", default="new,regression,bound,drift", show_default=True,
              help="Comma list of new, regression, bound, drift, or any.")
@options.selection
@click.pass_obj
def cli(app: App, baseline, against, current, fmt, output, fail_on, targets, runs, as_of) -> None:
    """Compare with a baseline snapshot; exit 1 on fidelity drift (the CI gate).

    The store's current correlation (or a --current snapshot) is compared with the baseline:
    a --baseline file, or --against LABEL, the newest snapshot recorded under that label.

    Reports new discrepancies, resolved ones, per-key error changes beyond `[drift] error_abs`
    (default 5 percentage points), aggregate MAPE/bias drift, a fidelity's own values changing
    (default 5%), and bound violations. Thresholds live under [drift] in xfid.toml.
    --run and --as-of choose the store's numbers; they do not apply to a --current snapshot.
    """
    from xfid.api import compare
    from xfid.drift.drift_format import FORMATTERS

    if bool(baseline) == bool(against):
        raise click.UsageError("give one baseline: --baseline FILE or --against LABEL" if baseline else
                               "a baseline is needed: --baseline FILE (from `xfid snapshot -o`) or --against LABEL "
                               "(from `xfid snapshot --label`)")
    req = options.request(targets, runs, as_of)
    if app.server:
        if current:
            raise click.UsageError("--current compares two files here; with --server the server's store is compared")
        text, code = app.api.compare(baseline, against=against, fmt=fmt, fail_on=fail_on, request=req)
        _emit(text, output)
        sys.exit(code)
    if against:
        baseline = app.api.labelled_snapshot(against)
    if current and (runs or as_of):
        raise click.UsageError("--run/--as-of choose the store's numbers; with --current there are none to choose")
    rep = compare(baseline, current or app.api, config=app.config, fail_on=fail_on, request=req)
    _emit(FORMATTERS[fmt](rep), output)
    sys.exit(rep.exit_code)


def _emit(text: str, output: str | None) -> None:
    if output:
        from xfid.outfile import write_output

        write_output(output, text)
    click.echo(text, nl=False)
