"""Helpers for the engine tests: xfid-records CSV files in tmp dirs, ingested into a store."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from xfid.config import _bundled, build_config
from xfid.ingest import IngestOptions, ingest
from xfid.store import Store

COLUMNS = ("fidelity", "target", "workload", "op", "metric", "stat", "value", "unit", "run", "timestamp",
           "config", "flags", "null_reason", "n_samples")


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Write an xfid-records CSV (only the columns the rows use, in schema order)."""
    cols = [c for c in COLUMNS if any(c in r for r in rows)]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            out = []
            for c in cols:
                v = r.get(c, "")
                if c == "config" and isinstance(v, dict):
                    v = json.dumps(v, sort_keys=True, separators=(",", ":"))
                out.append("" if v is None else v)
            w.writerow(out)
    return path


def rec(fidelity: str, op: str, value: float | None, *, metric: str = "latency", unit: str = "s",
        target: str = "h100-sxm", workload: str = "w1", stat: str = "value", run: str = "r1",
        timestamp: str = "2026-11-01T00:00:00Z", **extra: Any) -> dict[str, Any]:
    return {"fidelity": fidelity, "target": target, "workload": workload, "op": op, "metric": metric,
            "stat": stat, "value": "" if value is None else repr(float(value)), "unit": unit, "run": run,
            "timestamp": timestamp, **extra}


def make_store(tmp: Path, files: dict[str, list[dict[str, Any]]], name: str = "store") -> Store:
    """A store holding one ingested CSV per entry of `files` (file name -> rows)."""
    d = tmp / f"{name}-in"
    d.mkdir(exist_ok=True)
    store = Store(tmp / name)
    paths = [write_csv(d / fn, rows) for fn, rows in files.items()]
    ingest(store, paths, IngestOptions(adapter="xfid-records"))
    return store


def config(user: dict[str, Any] | None = None):
    """The bundled config overlaid with `user` (a parsed xfid.toml dict)."""
    return build_config(_bundled(), user or {}, None)
