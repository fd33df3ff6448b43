"""`xfid summary`: what the store holds, per fidelity, target and metric."""

from __future__ import annotations

import click

from xfid.app import App
from xfid.textsafe import echo


@click.command("summary")
@click.pass_obj
def cli(app: App) -> None:
    """Summarize the store: rows per fidelity, target and metric."""
    s = app.api.summary()
    backend = app.api.backend()
    if backend.team:  # the folder is only this machine's working directory: name where the store is
        where = backend.describe()
        echo(f"team store (catalog {where['database']}, records {where['records']}): "
             f"{s['records']} records from {s['sources']} sources")
    else:
        echo(f"store {s['store']}: {s['records']} records from {s['sources']} sources")
    if not s["records"]:
        return
    echo(f"  {'fidelity':<12} {'target':<14} {'records':>9}")
    for (fid, tgt), n in s["by_fidelity_target"].items():
        echo(f"  {fid:<12} {tgt:<14} {n:>9}")
    metrics = s["metrics"]
    shown = ", ".join(f"{m} {n}" for m, n in metrics[:20])
    more = f", and {len(metrics) - 20} more (xfid export --metric NAME)" if len(metrics) > 20 else ""
    echo(f"  {len(metrics)} metrics, most records first: {shown}{more}")
