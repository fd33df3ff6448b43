"""`xfid ingest`: files or directories into the store, all or nothing."""

from __future__ import annotations

import json
import sys

import click

from xfid import textsafe
from xfid.app import App, interactive
from xfid.commands import options


@click.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--adapter", default="auto", show_default=True, help="Adapter name (see `xfid adapters`); auto sniffs.")
@click.option("--fidelity", help="Fidelity for files that do not say (roofline, archmodel, rtl, measured).")
@click.option("--target", help="Hardware target, e.g. h100-sxm, for files that do not say.")
@click.option("--workload", help="Canonical workload id, e.g. llama3-8b/decode/bs8/ctx2048/bf16.")
@click.option("--run", help="Run/label/commit that produced these numbers.")
@click.option("--meta", multiple=True, metavar="K=V", help="Extra measurement conditions, merged into config.")
@click.option("--option", "adapter_options", multiple=True, metavar="K=V", help="Adapter-specific option.")
@options.output_format("text", "json")
@click.pass_obj
def cli(app: App, paths, adapter, fidelity, target, workload, run, meta, adapter_options, fmt) -> None:
    """Ingest files (or directories) into the store.

    Each file's adapter is sniffed unless --adapter is given; flags and an xfid-source.toml
    beside the files supply what a file does not carry. All files go in at once or not at all;
    re-ingesting the same bytes with the same context is a no-op.
    """
    from xfid.commands.validate import warn_unknown_target

    kw = {"adapter": adapter, "target": target, "workload": workload, "run": run, "fidelity": fidelity,
          "meta": options.parse_kv(meta, "--meta"), "options": options.parse_kv(adapter_options, "--option")}
    if not app.server:  # the server's ingest warns for its own store
        warn_unknown_target(app.config, target, app.store(), paths=paths)
    if interactive() and fmt == "text":  # a progress bar on a terminal, none in CI logs
        with click.progressbar(length=1, label="ingesting", file=textsafe.raw(sys.stderr),
                               item_show_func=lambda p: str(p)[-50:] if p else "") as bar:
            def progress(path, i, total):
                bar.length = total
                bar.update(1 if i else 0, path)

            report = app.api.ingest(paths, progress=progress, **kw)
            bar.update(1)
    else:
        report = app.api.ingest(paths, **kw)
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        return
    from xfid.commands.summary import print_ingest

    print_ingest(report)
