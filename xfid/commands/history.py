"""`xfid history KEY`: one key's error series across checks, with change points."""

from __future__ import annotations

import json

import click

from xfid.app import App
from xfid.commands import options
from xfid.commands.validate import ALPHA
from xfid.textsafe import echo


@click.command("history")
@click.argument("key")
@options.output_format("table", "json")
@click.option("--alpha", type=ALPHA, default=0.01, show_default=True, help="Significance of a change point.")
@click.pass_obj
def cli(app: App, key, fmt, alpha) -> None:
    """Show KEY's relative error at every recorded check (KEY: an issue id XF-N or a fingerprint).

    Change points are found by binary segmentation with Welch's t-test (docs/drift.md), so a
    slow drift across many small changes shows up even when no single check moved much.
    """
    h = app.api.history(key, alpha)
    series, cps = h.series, h.change_points
    if fmt == "json":
        click.echo(json.dumps(h.to_dict(), indent=2, default=str))
        return
    if not series:
        echo(f"{key}: no checks recorded it yet")
        return
    first = series[0]
    echo(f"{key}: {first['target']} {first['workload']} {first['op'] or '(e2e)'} {first['metric']} "
         f"{first['stat']} {first['candidate']}->{first['reference']}")
    starts = {c.index for c in cps}
    echo(f"{'check':>6}  {'time':<20}  {'candidate':>12}  {'reference':>12}  {'error':>8}  kind")
    for i, p in enumerate(series):
        mark = "  <- change point" if i in starts else ""
        err = "n/a" if p["rel_error"] is None else f"{p['rel_error'] * 100:+.1f}%"
        echo(f"{p['check_id']:>6}  {str(p['time'])[:19]:<20}  {_g(p['candidate_value']):>12}  "
             f"{_g(p['reference_value']):>12}  {err:>8}  {p['kind']}{mark}")
    for c in cps:
        echo(f"change point at check #{series[c.index]['check_id']}: mean error "
             f"{c.before_mean * 100:+.1f}% -> {c.after_mean * 100:+.1f}% (p={c.p_value:.2g})")


def _g(v) -> str:
    return "n/a" if v is None else f"{v:.6g}"
