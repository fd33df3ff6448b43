"""The text summary `xfid ingest` prints."""

from __future__ import annotations

from xfid.ingest import IngestReport
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
