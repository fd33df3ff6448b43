"""`xfid correlate`: align the fidelities in the store and print errors and discrepancies."""

from __future__ import annotations

from collections.abc import Iterable

import click

from xfid.app import App
from xfid.commands import options

FORMATS = ("table", "json", "markdown", "csv")


def write_output(text: str | Iterable[str], output: str | None) -> None:
    """Print, or write `output` by `xfid.outfile`; `text` may come in pieces."""
    from xfid.outfile import open_output

    pieces = [text] if isinstance(text, str) else text
    if not output:
        for piece in pieces:
            click.echo(piece, nl=False)
        return
    with open_output(output, text=True) as f:
        for piece in pieces:
            f.write(piece)
    click.echo(f"wrote {output}", err=True)


def guarded_output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`-o`: a file as every command's (xfid.outfile.guard), or a name ending in .parquet: the
    folder of a Parquet dataset of the discrepancies, checked before anything runs (not in a
    store, not an existing file or folder xfid did not write as such a dataset)."""
    from xfid.engine.dataset import is_dataset_path

    if value is None or not is_dataset_path(value):
        return options.guarded_output(ctx, param, value)
    from xfid.engine.dataset import is_ours
    from xfid.outfile import check_folder_output

    check_folder_output(value, ours=is_ours, what="a discrepancy dataset written by xfid", flag="-o")
    return value


@click.command("correlate")
@options.output_format(*FORMATS)
@click.option("-o", "--output", type=click.Path(), metavar="FILE|DIR.parquet", callback=guarded_output,
              help="Write to FILE instead of stdout; a name ending in .parquet is a folder that gets the "
                   "discrepancies as a Parquet dataset (with --engine spark the executors write it; the "
                   "comparisons and counts go to DIR.parquet/_correlation.json).")
@options.targets
@click.option("--pair", "pairs", multiple=True, metavar="CAND:REF",
              help="Compare only these pairs (repeatable): roofline:measured, or 'roofline->measured' in quotes "
                   "(unquoted, the shell takes the '>' as a redirection).")
@options.runs
@options.as_of
@click.option("--include-missing", is_flag=True, help="List keys without a reference among the discrepancies.")
@options.engine
@click.pass_obj
def cli(app: App, fmt, output, targets, pairs, runs, as_of, include_missing, engine) -> None:
    """Align fidelities and report errors and discrepancies.

    For every fidelity and key the latest run that has the key is used; each candidate
    fidelity is compared with each higher one (roofline < archmodel < rtl < measured) or per [[compare]].
    Errors are relative: (candidate - reference) / reference.
    """
    from xfid.engine.dataset import is_dataset_path
    from xfid.engine.output import render_pieces

    if output and is_dataset_path(output):
        ctx = click.get_current_context()
        if ctx.get_parameter_source("fmt") is not click.core.ParameterSource.DEFAULT:
            raise click.UsageError(f"-o {output} writes a Parquet dataset of the discrepancies; --format {fmt} "
                                   "does not apply to it (leave --format out, or name a file that does not end "
                                   "in .parquet)")
        req = options.request(targets, runs, as_of, pairs=pairs, include_missing=include_missing,
                              fingerprints="discrepancies")
        corr = app.api.correlate(request=req, engine=engine, out=output)
        n = corr.settings["output"]["rows"]
        click.echo(f"wrote {output}: {n:,} discrepancies (Parquet; comparisons and counts in "
                   f"{output.rstrip('/')}/_correlation.json)", err=True)
        return
    # only the CSV lists every aligned row: the other formats show the discrepancies' fingerprints
    req = options.request(targets, runs, as_of, pairs=pairs, include_missing=include_missing,
                          fingerprints="all" if fmt == "csv" else "discrepancies")
    corr = app.api.correlate(request=req, engine=engine)
    write_output(render_pieces(corr, fmt, tracked_ids(app) if fmt != "csv" else None), output)


def tracked_ids(app: App) -> dict[str, str]:
    """fingerprint -> XF id of the store's tracked issues (empty when the store has no tracker
    yet): bound violations are named by their issues where these exist."""
    from xfid.errors import XfidError

    try:
        return {str(r["fingerprint"]): str(r["id"]) for r in app.api.issue_list()}
    except XfidError:
        return {}
