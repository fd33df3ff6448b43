"""Text summaries printed by `xfid ingest` and `xfid summary`."""

from __future__ import annotations

from collections import Counter

import pyarrow.compute as pc

from xfid.ingest import IngestReport
from xfid.store import Store
from xfid.textsafe import echo


def print_ingest(report: IngestReport) -> None:
    new = [f for f in report.files if not f.already]
    old = [f for f in report.files if f.already]
    for f in new:
        echo(f"ingested {f.path}  [{f.adapter}]  {f.rows} rows")
        if f.metrics:
            echo("  metrics: " + ", ".join(f"{m} {n}" for m, n in sorted(f.metrics.items())))
        for reason, n in sorted(f.nulls.items()):
            echo(f"  null values: {n} ({reason})")
        for w in f.warnings:
            echo(f"  warning: {w}")
        for loc, why in f.skipped_rows[:5]:
            echo(f"  skipped {loc}: {why}")
        if len(f.skipped_rows) > 5:
            echo(f"  ... {len(f.skipped_rows) - 5} more rows skipped")
        if f.skipped_keys:
            keys = ", ".join(k if n == 1 else f"{k} (x{n})" for k, n in list(f.skipped_keys.items())[:20])
            more = f", and {len(f.skipped_keys) - 20} more" if len(f.skipped_keys) > 20 else ""
            echo(f"  keys not read (skipped): {keys}{more}")
    for f in old:
        echo(f"already ingested {f.path}  [{f.adapter}]  (same bytes, adapter and context: no new rows)")
    docs = [p for p, why in report.skipped if why == "not a data file"]
    other = [(p, why) for p, why in report.skipped if why != "not a data file"]
    for path, why in other[:20]:
        echo(f"skipped {path}: {why}")
    if len(other) > 20:
        echo(f"skipped {len(other) - 20} more files")
    if docs:
        echo(f"skipped {len(docs)} README/xfid-source.toml file(s)")
    echo(f"{report.rows} new rows from {len(new)} file(s); {len(old)} already ingested; {len(report.skipped)} skipped")


def print_store_summary(store: Store) -> None:
    t = store.read(columns=["fidelity", "target", "metric", "value"])
    echo(f"store {store.root}: {t.num_rows} records from {len(store.sources())} sources")
    if t.num_rows == 0:
        return
    by = Counter()
    for r in t.group_by(["fidelity", "target"]).aggregate([([], "count_all")]).to_pylist():
        by[(r["fidelity"], r["target"])] = r["count_all"]
    echo(f"  {'fidelity':<12} {'target':<14} {'records':>9}")
    for (fid, tgt), n in sorted(by.items()):
        echo(f"  {fid:<12} {tgt:<14} {n:>9}")
    metrics = sorted(pc.value_counts(t.column("metric")).to_pylist(), key=lambda r: -r["counts"])
    shown = ", ".join(f"{r['values']} {r['counts']}" for r in metrics[:20])
    more = f", and {len(metrics) - 20} more (xfid export --metric NAME)" if len(metrics) > 20 else ""
    echo(f"  {len(metrics)} metrics, most records first: {shown}{more}")
