"""The `xfid` command line: a thin click layer over the library; one place maps errors to exit 2."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from xfid import __version__
from xfid.app import App, interactive
from xfid.errors import XfidError
from xfid.textsafe import terminal

# name -> (module, one-line help). Modules are imported only when the command runs.
LAZY: dict[str, tuple[str, str]] = {
    "demo": ("xfid.commands.demo", "Run the whole flow on the bundled example data."),
    "roofline": ("xfid.commands.roofline", "Compute roofline/limiter bounds for workloads, GEMMs or RTL blocks."),
    "rtl": ("xfid.commands.rtl", "Run T100 RTL blocks under cocotb and inspect Verilog."),
    "correlate": ("xfid.commands.correlate", "Align fidelities and report errors and discrepancies."),
    "calibrate": ("xfid.commands.calibrate", "Fit model efficiency factors and report transfer error."),
    "check": ("xfid.commands.check", "Correlate and update the discrepancy tracker."),
    "issues": ("xfid.commands.issues", "List, show and change tracked discrepancies."),
    "report": ("xfid.commands.report", "Render the weekly PDF/HTML discrepancy report."),
    "snapshot": ("xfid.commands.snapshot", "Write a baseline snapshot for `xfid compare`."),
    "compare": ("xfid.commands.compare", "Compare against a baseline; exit 1 on fidelity drift (CI gate)."),
    "history": ("xfid.commands.history", "Show one key's error series and change points."),
    "doctor": ("xfid.commands.doctor", "Check the store and repair what can be repaired."),
}


class UserError(click.ClickException):
    """An XfidError as click shows it: `Error: ...` on stderr, exit 2."""

    exit_code = 2


class LazyGroup(click.Group):
    """A group whose heavier subcommands live in their own modules, imported on use.

    It is also the one place that turns the library's `XfidError` into `Error: ...` + exit 2.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except XfidError as e:
            raise UserError(terminal(str(e))) from None  # names and excerpts from files: escaped
        except KeyboardInterrupt:
            raise click.exceptions.Abort() from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        from importlib.util import find_spec

        lazy = [n for n, (mod, _) in LAZY.items() if find_spec(mod) is not None]
        return sorted({*super().list_commands(ctx), *lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None or name not in LAZY:
            return cmd
        try:
            mod = importlib.import_module(LAZY[name][0])
        except ModuleNotFoundError as e:
            if e.name == LAZY[name][0]:
                return None
            raise
        return mod.cli

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY:
                rows.append((name, LAZY[name][1]))
            else:
                cmd = super().get_command(ctx, name)
                if cmd is not None and not cmd.hidden:
                    rows.append((name, cmd.get_short_help_str(80)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="xfid")
@click.option("--store", "store_opt", metavar="DIR", envvar="XFID_STORE",
              help="Store directory (default .xfid/, or [store].path in xfid.toml; env XFID_STORE).")
@click.option("--config", "config_opt", metavar="FILE", envvar="XFID_CONFIG",
              help="xfid.toml to use (default ./xfid.toml, else the bundled targets).")
@click.pass_context
def cli(ctx: click.Context, store_opt: str | None, config_opt: str | None) -> None:
    """xfid: multi-fidelity correlation and discrepancy tracker for accelerator performance numbers.

    Ingest roofline, architecture-model, RTL and measured numbers into one store, correlate
    them, track every discrepancy, render reports and gate CI on fidelity drift.
    """
    app = App(store_opt, config_opt)
    ctx.obj = app
    ctx.call_on_close(app.close)


def parse_kv(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    """`k=v` pairs from a repeated option; a clear error on a pair without '='."""
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k.strip():
            raise click.UsageError(f"{flag} expects KEY=VALUE, got {p!r}")
        out[k.strip()] = v.strip()
    return out


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--adapter", default="auto", show_default=True, help="Adapter name (see `xfid adapters`); auto sniffs.")
@click.option("--fidelity", help="Fidelity for files that do not say (roofline, archmodel, rtl, measured).")
@click.option("--target", help="Hardware target, e.g. h100-sxm, for files that do not say.")
@click.option("--workload", help="Canonical workload id, e.g. llama3-8b/decode/bs8/ctx2048/bf16.")
@click.option("--run", help="Run/label/commit that produced these numbers.")
@click.option("--meta", multiple=True, metavar="K=V", help="Extra measurement conditions, merged into config.")
@click.option("--option", "adapter_options", multiple=True, metavar="K=V", help="Adapter-specific option.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_obj
def ingest(app: App, paths, adapter, fidelity, target, workload, run, meta, adapter_options, fmt) -> None:
    """Ingest files (or directories) into the store.

    Each file's adapter is sniffed unless --adapter is given; flags and an xfid-source.toml
    beside the files supply what a file does not carry. All files go in at once or not at all;
    re-ingesting the same bytes with the same context is a no-op.
    """
    from xfid.ingest import IngestOptions
    from xfid.ingest import ingest as do_ingest

    opts = IngestOptions(adapter=adapter, fidelity=fidelity, target=target, workload=workload, run=run,
                         meta=parse_kv(meta, "--meta"), options=parse_kv(adapter_options, "--option"))
    store = app.store()
    from xfid.commands.validate import warn_unknown_target

    warn_unknown_target(app.config, target, store)
    if interactive() and fmt == "text":  # a progress bar on a terminal, none in CI logs
        with click.progressbar(length=1, label="ingesting", file=sys.stderr,
                               item_show_func=lambda p: str(p)[-50:] if p else "") as bar:
            def progress(path, i, total):
                bar.length = total
                bar.update(1 if i else 0, path)

            report = do_ingest(store, paths, opts, progress=progress)
            bar.update(1)
    else:
        report = do_ingest(store, paths, opts)
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        return
    from xfid.commands.summary import print_ingest

    print_ingest(report)


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet"]), default="jsonl", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="File to write (default stdout; parquet needs -o).")
@click.option("--target", multiple=True, help="Only these targets (repeatable).")
@click.option("--workload", multiple=True, help="Only these workloads (repeatable).")
@click.option("--metric", multiple=True, help="Only these metrics (repeatable).")
@click.option("--fidelity", multiple=True, help="Only these fidelities (repeatable).")
@click.pass_obj
def export(app: App, fmt, output, target, workload, metric, fidelity) -> None:
    """Export records in the normalized schema."""
    from xfid.export import export_records

    if fmt == "parquet" and not output:
        raise click.UsageError("--format parquet needs -o FILE (Parquet is binary; it does not go to a terminal)")
    export_records(app.store(create=False), fmt, output,
                   {"target": target, "workload": workload, "metric": metric, "fidelity": fidelity})


@cli.command("adapters")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def adapters_cmd(fmt) -> None:
    """List the adapters: name, fidelity, formats."""
    from xfid.adapters import all_adapters

    rows = [{"name": n, "fidelity": c.fidelity or "(from file)", "formats": c.formats} for n, c in all_adapters().items()]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    w = max(len(r["name"]) for r in rows)
    click.echo(f"{'adapter':<{w}}  {'fidelity':<12}  formats")
    for r in rows:
        click.echo(f"{r['name']:<{w}}  {r['fidelity']:<12}  {r['formats']}")


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_obj
def sources(app: App, fmt) -> None:
    """List ingested sources (the manifest): path, adapter, rows, hash, time."""
    rows = app.store(create=False).sources()
    if fmt == "json":
        for r in rows:
            r["options"] = json.loads(r["options"])
            r["summary"] = json.loads(r["summary"])
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no sources ingested yet")
        return
    click.echo(f"{'source_id':<12}  {'adapter':<13}  {'rows':>9}  {'ingested_at':<20}  path")
    for r in rows:
        click.echo(f"{r['source_id'][:12]:<12}  {r['adapter']:<13}  {r['rows']:>9}  {r['ingested_at']:<20}  {r['path']}")


@cli.command()
@click.pass_obj
def summary(app: App) -> None:
    """Summarize the store: rows per fidelity, target and metric."""
    from xfid.commands.summary import print_store_summary

    print_store_summary(app.store(create=False))


def main(argv: list[str] | None = None) -> None:
    """Entry point for the console script and `python -m xfid`."""
    try:
        cli.main(args=argv, prog_name="xfid")
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
