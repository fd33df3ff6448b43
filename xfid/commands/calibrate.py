"""`xfid calibrate`: fit a model's efficiency factors on a target and report transfer error."""

from __future__ import annotations

import json

import click

from xfid.app import App
from xfid.commands import options
from xfid.commands.correlate import write_output
from xfid.textsafe import terminal


def _pct(v) -> str:
    return "—" if v is None or v != v else f"{100 * v:.1f}%"


def spread_text(spread) -> str:
    """The reference's run-to-run spread, said next to the model error (never an error below it alone)."""
    if spread is None:
        return "measurement spread: unknown (every key was measured once)"
    return (f"measurement spread {_pct(spread['median'])} (median relative std of {spread['keys']} keys measured "
            "more than once): a model error below it cannot be told from run-to-run noise")


def render_text(res, spread=None) -> str:
    """Terminal text: summary, factors, cross-validated error by op class, limiter and size."""
    # imported here, not at the top: `xfid --help` imports no tracker (nor pandas)
    from xfid.tracker.stack import window_text

    s = res.summary
    lines = [f"calibration {s['candidate']} -> {s['reference']} on {s['target']}: {s['n']} numbers, "
             f"{s['n_workloads']} workload(s)",
             f"cross-validation: {s['cv_method']}",
             f"MAPE before {_pct(s['mape_before'])}, after {_pct(s['mape_after'])}", spread_text(spread),
             terminal(window_text(s.get("stack"), s["reference"])), "",
             f"{'op_class':<24} {'limiter':<12} {'factor':>8} {'n':>5}"]
    for r in res.factors.itertuples():
        lines.append(f"{r.op_class:<24} {r.limiter:<12} {r.factor:>8.3f} {r.n:>5}")
    lines += ["", f"{'by':<9} {'group':<24} {'n':>5} {'before':>8} {'after':>8}"]
    for r in res.cv.itertuples():
        lines.append(f"{r.group_by:<9} {r.group!s:<24} {r.n:>5} {_pct(r.mape_before):>8} {_pct(r.mape_after):>8}")
    return "\n".join(lines) + "\n"


def render_json(res, spread=None) -> str:
    from xfid.engine.output import records

    doc = {"summary": res.summary, "measurement_spread": spread,
           "factors": records(res.factors, ("op_class", "limiter", "factor", "n")),
           "cv": records(res.cv, ("group_by", "group", "n", "mape_before", "mape_after")),
           "predictions": res.predictions.num_rows}
    return json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n"


@click.command("calibrate")
@click.option("--candidate", required=True, help="Model fidelity to calibrate, e.g. roofline.")
@click.option("--reference", required=True, help="Fidelity to fit against, e.g. measured.")
@click.option("--target", required=True, help="Hardware target the fit is made on, e.g. h100-sxm.")
@click.option("--label", help="Fidelity label of the calibrated numbers (default CANDIDATE-cal).")
@options.runs
@options.as_of
@click.option("--write-back", is_flag=True, help="Ingest the calibrated predictions as a new fidelity label.")
@options.output_format("table", "json")
@options.output()
@options.engine
@click.pass_obj
def cli(app: App, candidate, reference, target, label, runs, as_of, write_back, fmt, output, engine) -> None:
    """Fit model efficiency factors and report transfer error.

    Factors are geometric means of reference/candidate per op class and limiter; the error
    before and after is cross-validated leave-one-workload-out (leave-one-op-out when there is
    a single workload), broken down by op class, limiter and size.
    """
    res = app.api.calibrate(candidate, reference, target, label=label, engine=engine,
                            request=options.request(runs=runs, as_of=as_of))
    spread = app.api.reference_spread(reference, target)
    write_output(render_json(res, spread) if fmt == "json" else render_text(res, spread), output)
    if write_back:
        rep = app.api.write_back(res)
        f = rep.files[0]
        msg = "already ingested" if f.already else f"{f.rows} rows"
        click.echo(f"wrote back {res.summary['label']} predictions: {msg} ({f.path})", err=True)
