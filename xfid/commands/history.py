"""`xfid history KEY` / `xfid history --pairs`: a key's error, or each pair's MAPE, across checks,
with change points (E-divisive means)."""

from __future__ import annotations

import json

import click

from xfid.app import App
from xfid.commands import options
from xfid.commands.validate import ALPHA
from xfid.drift import changepoint
from xfid.textsafe import echo


@click.command("history")
@click.argument("key", required=False)
@click.option("--pairs", is_flag=True, help="Each comparison's MAPE at every check instead of one key's error.")
@options.output_format("table", "json")
@click.option("--alpha", type=ALPHA, default=changepoint.ALPHA, show_default=True,
              help="Significance of a change point (permutation test).")
@click.pass_obj
def cli(app: App, key, pairs, fmt, alpha) -> None:
    """Show KEY's relative error at every recorded check (KEY: an issue id XF-N or a fingerprint),
    or with --pairs each comparison's MAPE at every check.

    Change points are found by E-divisive means (an energy statistic with a seeded permutation
    test; docs/drift.md), so a change of level or of spread shows, and a slow drift across many
    small changes shows up even when no single check moved much.
    """
    if pairs == bool(key):
        raise click.UsageError("give a KEY (XF-N or a fingerprint) or --pairs, not both" if key else
                               "give a KEY (XF-N or a fingerprint), or --pairs for every pair's MAPE")
    if pairs:
        _pairs(app.api.pair_history(alpha), fmt)
        return
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
    from xfid.drift.history import describe_move

    for m in h.moves:
        echo(f"check #{m['check_id']}: error {m['error'][0] * 100:+.1f}% -> {m['error'][1] * 100:+.1f}%, "
             + describe_move(m))
    for c in cps:
        echo(f"change point at check #{series[c.index]['check_id']}: mean error "
             f"{c.before_mean * 100:+.1f}% -> {c.after_mean * 100:+.1f}% (p={c.p_value:.2g})")


def _g(v) -> str:
    return "n/a" if v is None else f"{v:.6g}"


def _pairs(hist: list[dict], fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(hist, indent=2, default=str))
        return
    if not hist:
        echo("no recorded check has a pair with a MAPE yet")
        return
    for h in hist:
        s = h["series"]
        last = s[-1]
        echo(f"{h['target']} {h['candidate']}->{h['reference']} {h['metric']} {h['stat']}: MAPE "
             f"{last['mape'] * 100:.1f}% at check #{last['check_id']} ({len(s)} check(s))")
        for c in h["change_points"]:
            echo(f"  change point at check #{s[c['index']]['check_id']}: mean MAPE {c['before_mean'] * 100:.1f}% -> "
                 f"{c['after_mean'] * 100:.1f}% (p={c['p_value']:.2g})")
