"""Baseline snapshots for `xfid compare`: a compact, diffable JSON (or Parquet) of one correlation."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from xfid.engine.contract import Correlation
from xfid.errors import XfidError
from xfid.outfile import open_output

FORMAT_VERSION = 1
KEY_FIELDS = ("target", "workload", "op", "metric", "stat", "candidate", "reference", "candidate_value",
              "reference_value", "unit", "rel_error", "log_ratio", "tolerance", "kind", "within")
AGG_FIELDS = ("target", "candidate", "reference", "metric", "stat", "n", "mape", "median_ape", "bias",
              "log_rmse", "spearman", "kendall", "within_tolerance")


class SnapshotError(XfidError):
    """An unreadable or incompatible baseline."""


def _clean(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def make_snapshot(corr: Correlation, *, label: str | None = None) -> dict[str, Any]:
    """Per fingerprint the values, errors and kind; per pair the target-level aggregates."""
    keys: dict[str, dict[str, Any]] = {}
    rows = corr.rows
    if len(rows):
        rows = rows[rows["kind"] != "missing_reference"] if "kind" in rows else rows
        for rec in rows.to_dict("records"):
            keys[str(rec["fingerprint"])] = {k: _clean(rec.get(k)) for k in KEY_FIELDS}
    comps = []
    c = corr.comparisons
    if len(c):
        c = c[c["workload"].isna()]
        for rec in c.to_dict("records"):
            comps.append({k: _clean(rec.get(k)) for k in AGG_FIELDS})
    comps.sort(key=lambda r: (r["target"], r["candidate"], r["reference"], r["metric"], r["stat"]))
    return {
        "xfid_snapshot": FORMAT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "label": label,
        "config_hash": corr.config_hash,
        "sources": sorted(({k: s.get(k) for k in ("path", "adapter", "content_hash")} for s in corr.sources),
                          key=lambda s: (s["path"] or "", s["adapter"] or "")),
        "keys": dict(sorted(keys.items())),
        "comparisons": comps,
    }


def write_snapshot(snap: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write by `xfid.outfile`; `.parquet` writes the keys as a table with the rest in its metadata."""
    dest = Path(path)
    if dest.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [{"fingerprint": fp, **v} for fp, v in snap["keys"].items()]
        table = pa.Table.from_pylist(rows) if rows else pa.table({"fingerprint": pa.array([], pa.string())})
        meta = {k: v for k, v in snap.items() if k != "keys"}
        table = table.replace_schema_metadata({"xfid_snapshot": json.dumps(meta, sort_keys=True)})
        with open_output(dest) as f:
            pq.write_table(table, f)
    else:
        with open_output(dest, text=True) as f:
            json.dump(snap, f, indent=1, sort_keys=False)
            f.write("\n")
    return dest


def read_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a snapshot written by `write_snapshot`.

    Raises:
        SnapshotError: missing, unreadable, or not an xfid snapshot of a known version.
    """
    p = Path(path)
    if not p.is_file():
        raise SnapshotError(f"baseline {p} does not exist (write one with `xfid snapshot -o {p}`)")
    if p.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            t = pq.read_table(p)
        except (OSError, pa.ArrowInvalid) as e:
            raise SnapshotError(f"{p}: not a readable Parquet snapshot: {e}") from None
        raw = (t.schema.metadata or {}).get(b"xfid_snapshot")
        if raw is None:
            raise SnapshotError(f"{p}: Parquet file without xfid snapshot metadata")
        snap = json.loads(raw)
        snap["keys"] = {r.pop("fingerprint"): r for r in t.to_pylist()}
    else:
        try:
            snap = json.loads(p.read_text(encoding="utf-8-sig"))
        except (UnicodeDecodeError, ValueError) as e:
            raise SnapshotError(f"{p}: not a JSON snapshot: {e}") from None
    if not isinstance(snap, dict) or "xfid_snapshot" not in snap:
        raise SnapshotError(f"{p}: not an xfid snapshot (no 'xfid_snapshot' key); write one with `xfid snapshot`")
    if snap["xfid_snapshot"] != FORMAT_VERSION:
        raise SnapshotError(f"{p}: snapshot format {snap['xfid_snapshot']!r} is not supported (this xfid reads {FORMAT_VERSION})")
    if not isinstance(snap.get("keys"), dict) or not isinstance(snap.get("comparisons"), list):
        raise SnapshotError(f"{p}: snapshot lacks 'keys' or 'comparisons'")
    for fp, k in snap["keys"].items():
        missing = [f for f in ("target", "metric", "candidate", "reference", "kind") if f not in k]
        if missing:
            raise SnapshotError(f"{p}: key {fp} lacks {', '.join(missing)}")
    return snap
