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
    """
    from xfid.api import open_store
    from xfid.demo import DEMO_CONFIG, run_demo

    store = app.api if (app.config_opt or Path("xfid.toml").is_file()) else open_store(app.store_path, DEMO_CONFIG)
    t0 = time.perf_counter()
    steps = iter(range(1, 99))

    def progress(label: str) -> None:
        click.echo(f"[{next(steps)}/7] {label} ...", err=True)

    with store:
        res = run_demo(store, Path(out_dir), progress=progress)
    c = res.check
    click.echo("")
    click.echo(f"xfid demo finished in {time.perf_counter() - t0:.1f} s (store {res.store})")
    for line in res.rtl:
        click.echo(f"  RTL {line}")
    click.echo(f"  ingest: {res.new_rows} new rows, {res.already} sources already in the store")
    click.echo(f"  check #{c.get('check_id')}: {len(c.get('new', []))} new, {len(c.get('reopened', []))} reopened, "
               f"{len(c.get('resolved', []))} resolved, {c.get('total_open', 0)} open issues "
               f"({c.get('rows', 0)} aligned keys, {c.get('comparisons', 0)} pair aggregates)")
    click.echo(f"  report: {res.report_pdf} ({c.get('pages', '?')} pages) and {res.report_html}")
    cmp = res.compare
    if cmp.get("baseline"):
        verdict = f"DRIFT ({cmp['failing']} failing findings)" if cmp["drift"] else "no drift"
        counts = ", ".join(f"{k} {v}" for k, v in cmp["counts"].items() if v)
        click.echo(f"  compare vs {cmp['baseline']}: {verdict}{' (' + counts + ')' if counts else ''}")
    from xfid.textsafe import echo

    for n in res.notes:  # target names, workloads and error excerpts come from ingested files
        echo(f"  note: {n}")
    click.echo("next: `xfid issues list`, `xfid issues show XF-1`, `xfid correlate`, "
               f"open {res.report_pdf}")
