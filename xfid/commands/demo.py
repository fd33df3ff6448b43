"""`xfid demo`: the README's first command — the whole flow on the bundled example data."""

from __future__ import annotations

import time
from pathlib import Path

import click

from xfid.app import App
from xfid.commands import options


@click.command("demo")
@click.option("--out", "out_dir", default="reports", show_default=True, type=click.Path(file_okay=False),
              callback=options.guarded_output,
              help="Where the PDF and HTML report go.")
@click.pass_obj
def cli(app: App, out_dir) -> None:
    """Run the whole flow on the bundled example data.

    Simulate the T100 RTL blocks, compute roofline bounds, ingest the model and measured
    fixtures, correlate, update the tracker, render the report and compare against the
    committed baseline. Running it again adds nothing to the store and files no new issue.

    Uses ./xfid.toml or --config when given, else fixtures/demo/xfid.toml over the bundled targets.
    The store records that config with its check, so the next commands printed at the end, run
    from the same directory, use it too and show the same numbers.
    """
    from xfid.api import open_store
    from xfid.demo import DEMO_CONFIG, run_demo
    from xfid.report.attach import numbers_path

    own = bool(app.config_opt or Path("xfid.toml").is_file())
    store = app.api if own else open_store(app.store_opt, DEMO_CONFIG)
    t0 = time.perf_counter()
    steps = iter(range(1, 99))

    def progress(label: str) -> None:
        click.echo(f"[{next(steps)}/8] {label} ...", err=True)

    with store:
        res = run_demo(store, Path(out_dir), progress=progress)
    c = res.check
    click.echo("")
    click.echo(f"xfid demo finished in {time.perf_counter() - t0:.1f} s (store {res.store})")
    for line in res.rtl:
        click.echo(f"  RTL {line}")
    click.echo(f"  ingest: {res.new_rows} new rows; {res.sources} sources in the store "
               f"({res.sources - res.sources_before} new, {res.sources_before} already there)")
    f = res.first_check
    if f:
        click.echo(f"  check #{f.get('check_id')}: {len(f.get('new', []))} new, {len(f.get('resolved', []))} resolved, "
                   f"{f.get('total_open', 0)} active issues; then the H100 decode ops re-measured on a newer vLLM:")
    click.echo(f"  check #{c.get('check_id')}: {len(c.get('new', []))} new, {len(c.get('reopened', []))} reopened, "
               f"{len(c.get('resolved', []))} resolved, {c.get('total_open', 0)} active issues "
               f"(open, acknowledged or reopened; {c.get('rows', 0)} aligned keys, "
               f"{c.get('comparisons', 0)} pair aggregates, {c.get('unmatched_ops', 0)} raw ops no op map matched)")
    numbers = numbers_path(res.report_pdf) if res.report_pdf else None
    click.echo(f"  report: {res.report_pdf} ({c.get('pages', '?')} pages) and {res.report_html}; every number, "
               f"with its file and row: {numbers}")
    cmp = res.compare
    if cmp.get("baseline"):
        verdict = f"DRIFT ({cmp['failing']} failing findings)" if cmp["drift"] else "no drift"
        counts = ", ".join(f"{k} {v}" for k, v in cmp["counts"].items() if v)
        click.echo(f"  compare vs {cmp['baseline']}: {verdict}{' (' + counts + ')' if counts else ''}")
    from xfid.textsafe import echo

    for n in res.notes:  # target names, workloads and error excerpts come from ingested files
        echo(f"  note: {n}")
    config = None if own else DEMO_CONFIG
    echo("next (from this directory; they reproduce the numbers above"
         + (f" with the store's config, {_shown(DEMO_CONFIG)}" if config else "") + "):")
    for cmd in next_commands(res, app.store_opt, app.config_opt):
        echo(f"  {cmd}")
    echo(f"  open {_shown(res.report_pdf)}" if res.report_pdf else "")


def _shown(path: Path | str | None) -> str:
    """A path as the user types it from here: relative below the working directory, else absolute."""
    p = Path(str(path)).absolute()
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return str(p)


def next_commands(res, store_opt: str | None, config_opt: str | None) -> list[str]:
    """The commands that show the demo's numbers again: the same store, config, baseline and period.

    The store is named when the demo was given one; the config only when given (--config):
    without it, the commands use the config the store's last check recorded (xfid.storeconfig)."""
    import shlex

    from xfid.demo import BASELINE

    pre = ["xfid"] + (["--store", str(store_opt)] if store_opt else []) + (["--config", config_opt] if config_opt else [])
    since, until = res.period
    first = next(iter([*res.check.get("new", []), *res.check.get("still_open", [])]), None)
    cmds = [["issues", "list", "--state", "active"], *([["issues", "show", first]] if first else []),
            ["correlate"], ["compare", "--baseline", _shown(BASELINE)]]
    if since:
        cmds.append(["report", "--since", since, "--until", until])
    return [shlex.join(pre + c) for c in cmds]
