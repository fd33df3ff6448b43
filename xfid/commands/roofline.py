"""`xfid roofline`: roofline/limiter bounds for LLM workloads, GEMM shapes or T100 RTL blocks."""

from __future__ import annotations

import json
from typing import Any

import click

from xfid.app import App
from xfid.commands import options


def _si(x: float, unit: str = "") -> str:
    for f, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= f:
            return f"{x / f:.3g} {p}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def _time(s: float) -> str:
    for f, u in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if s >= f:
            return f"{s / f:.4g} {u}"
    return f"{s / 1e-9:.4g} ns"


def _table(records: list[dict[str, Any]]) -> list[str]:
    ops: dict[str, dict[str, Any]] = {}
    totals = []
    for r in records:
        if r["op"] == "":
            totals.append(r)
            continue
        ops.setdefault(r["op"], {"cfg": json.loads(r["config"] or "{}")})[r["metric"]] = r["value"]
    lines = []
    if any("cycles" in v for v in ops.values()):
        energy = any("energy" in v for v in ops.values())
        lines.append(f"{'op':<34} {'cycles':>12}" + (f" {'energy':>10}" if energy else "") + "  params")
        for op, v in ops.items():
            params = ",".join(f"{k}={x}" for k, x in v["cfg"].get("params", {}).items())
            lines.append(f"{op:<34} {int(v['cycles']):>12}"
                         + (f" {_joules(v['energy']) if 'energy' in v else '-':>10}" if energy else "") + f"  {params}")
        return lines
    w = max([len(o) for o in ops] + [2])
    energy = any("energy" in v for v in ops.values())
    lines.append(f"{'op':<{w}} {'count':>5} {'flops':>11} {'bytes':>10} {'intensity':>10} {'time':>11}"
                 + (f" {'energy':>10}" if energy else "") + "  limiter")
    for op, v in ops.items():
        c = v["cfg"]
        lines.append(f"{op:<{w}} {c.get('count', 1):>5} {_si(v['flops']):>11} {_si(v['bytes'], 'B'):>10} "
                     f"{c.get('intensity', 0):>10.3g} {_time(v['latency']):>11}"
                     + (f" {_joules(v['energy']) if 'energy' in v else '-':>10}" if energy else "")
                     + f"  {c.get('limiter', '')}")
    for r in totals:
        val = _time(r["value"]) if r["unit"] == "s" else _joules(r["value"]) if r["unit"] == "J" \
            else f"{r['value']:.6g} {r['unit']}"
        lines.append(f"{r['metric']} ({'at the bound' if r['metric'] == 'power' else 'bound'}): {val}")
    return lines


def _joules(j: float) -> str:
    for f, u in ((1.0, "J"), (1e-3, "mJ"), (1e-6, "uJ"), (1e-9, "nJ")):
        if abs(j) >= f:
            return f"{j / f:.4g} {u}"
    return f"{j / 1e-12:.4g} pJ"


@click.command("roofline")
@click.option("--target", required=True, help="Target from xfid.toml (e.g. h100-sxm, t100-a0).")
@click.option("--workload", help="MODEL/PHASE/bsB/ctxC/PRECISION[/tpN] (LLM mode), or the workload id of a "
              "GEMM sweep (default gemm-sweep).")
@click.option("--model-config", type=click.Path(dir_okay=False), help="Hugging Face config.json for a model "
              "that is not built in (llama3-8b, llama3-70b, mixtral-8x7b).")
@click.option("--gemm", "gemms", multiple=True, metavar="M,N,K", help="GEMM shape (repeatable).")
@click.option("--gemm-file", type=click.Path(dir_okay=False), help="CSV whose rows start with M,N,K.")
@click.option("--precision", default="fp16", show_default=True, help="GEMM mode precision.")
@click.option("--placement", metavar="CLASS=LEVEL,...", help="Memory level of weights, kv (KV cache) and act "
              "(activations), e.g. weights=hbm,kv=cxl; classes not named are placed by capacity.")
@click.option("--block", help="T100 RTL block: gemm_tile, dma or omvm.")
@click.option("--param", "params", multiple=True, metavar="K=V", help="Block parameter override (repeatable).")
@click.option("--shape", "shapes", multiple=True, help="Block shape: gemm_tile M,N,K; dma BYTES; omvm VECTORS.")
@options.output("Write xfid-records (.csv/.jsonl/.parquet).")
@click.option("--ingest", "do_ingest", is_flag=True, help="Ingest the bounds into the store (idempotent).")
@click.option("--run", help="Run label for ingested bounds.")
@options.output_format("table", "json", "csv")
@click.pass_obj
def cli(app: App, target, workload, model_config, gemms, gemm_file, precision, placement, block, params, shapes,
        output, do_ingest, run, fmt) -> None:
    """Compute roofline/limiter bounds.

    LLM mode: --workload llama3-8b/decode/bs8/ctx2048/bf16. GEMM mode: --gemm M,N,K or
    --gemm-file FILE. Block mode: --block gemm_tile --shape M,N,K [--param ROWS=8].
    Every number is a lower bound (latency, energy) or upper bound (throughput, tokens/J), fidelity
    `roofline`; a target with an [energy] table also gets energy, J/token, tokens/J and the power
    at the bound. --placement weights=hbm,kv=cxl puts data in the target's [memory] levels.
    """
    from xfid.models.output import csv_text

    if block and (gemms or gemm_file):
        raise click.UsageError("use one mode: --workload (LLM), --gemm/--gemm-file, or --block")
    modeless = not (block or gemms or gemm_file or workload)
    if (block and placement) or modeless:  # said in the order the bounds are computed: target, placement, mode
        from xfid.models.memory import parse_placement

        app.config.target(target)
        if parse_placement(placement) and block:
            raise click.UsageError("--placement is for --workload (and act=LEVEL for GEMMs), not --block")
        if modeless:
            raise click.UsageError("give --workload MODEL/PHASE/bsB/ctxC/PRECISION, --gemm M,N,K, --gemm-file FILE "
                                   "or --block NAME --shape ...")
    bounds = app.api.roofline(target, workload=workload, model_config=model_config, gemms=gemms, gemm_file=gemm_file,
                              precision=precision, placement=placement, block=block,
                              params=options.parse_kv(params, "--param") if block else None, shapes=shapes,
                              output=output, ingest=do_ingest, run=run)
    records = bounds.records
    if bounds.ingested is not None:
        f = bounds.ingested.files[0]
        state = "already ingested (same bounds)" if f.already else f"ingested {f.rows} records"
        click.echo(f"{state} into {app.store_path}", err=True)
    if fmt == "json":
        click.echo(json.dumps(records, indent=2))
    elif fmt == "csv":
        click.echo(csv_text(records), nl=False)
    else:
        click.echo(f"target {bounds.target}  workload {records[0]['workload']}  fidelity roofline")
        for line in _table(records):
            click.echo(line)
