"""Baseline snapshots for `xfid compare`: a compact, diffable JSON (or Parquet) of one correlation."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from xfid.engine.contract import DISCREPANCY_KINDS, Correlation
from xfid.engine.jsonout import clean
from xfid.engine.schema import (
    COMPARISON_FIELDS,
    ROW_EXTRA_FIELDS,
    ROW_FIELDS,
    SNAPSHOT_AGG_FIELDS,
    SNAPSHOT_KEY_FIELDS,
    Field,
)
from xfid.errors import XfidError
from xfid.outfile import open_output
from xfid.schema import is_valid_fidelity

FORMAT_VERSION = 1
KEY_FIELDS = SNAPSHOT_KEY_FIELDS
"""A key's fields (xfid.engine.schema)."""
AGG_FIELDS = SNAPSHOT_AGG_FIELDS
"""A comparison's fields. A snapshot written before bounds were aggregated as bounds lacks the
last six (read as null: such a comparison is an estimate, its bound statistics unknown)."""


class SnapshotError(XfidError):
    """An unreadable or incompatible baseline."""


def make_snapshot(corr: Correlation, *, label: str | None = None) -> dict[str, Any]:
    """Per fingerprint the values, errors and kind; per pair the target-level aggregates."""
    keys: dict[str, dict[str, Any]] = {}
    rows = corr.rows
    if len(rows):
        rows = rows[rows["kind"] != "missing_reference"] if "kind" in rows else rows
        for rec in rows.to_dict("records"):
            keys[str(rec["fingerprint"])] = {k: clean(rec.get(k)) for k in KEY_FIELDS}
    comps = []
    c = corr.comparisons
    if len(c):
        c = c[c["workload"].isna()]
        for rec in c.to_dict("records"):
            comps.append({k: clean(rec.get(k)) for k in AGG_FIELDS})
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
        try:
            snap = json.loads(raw)
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise SnapshotError(f"{p}: the xfid snapshot metadata is not JSON: {e}") from None
        if not isinstance(snap, dict) or "fingerprint" not in t.column_names:
            raise SnapshotError(f"{p}: not an xfid snapshot (its metadata is not an object, or it has no "
                                "fingerprint column); write one with `xfid snapshot`")
        snap["keys"] = {r.pop("fingerprint"): r for r in t.to_pylist()}
    else:
        try:
            snap = json.loads(p.read_text(encoding="utf-8-sig"))
        except (UnicodeDecodeError, ValueError) as e:
            raise SnapshotError(f"{p}: not a JSON snapshot: {e}") from None
        except RecursionError:
            raise SnapshotError(f"{p}: not a JSON snapshot: nested too deeply") from None
    if not isinstance(snap, dict) or "xfid_snapshot" not in snap:
        raise SnapshotError(f"{p}: not an xfid snapshot (no 'xfid_snapshot' key); write one with `xfid snapshot`")
    version = snap["xfid_snapshot"]
    if type(version) is not int or version != FORMAT_VERSION:
        raise SnapshotError(f"{p}: snapshot format {_shown(version)} is not supported (this xfid reads {FORMAT_VERSION})")
    if not isinstance(snap.get("keys"), dict) or not isinstance(snap.get("comparisons"), list):
        raise SnapshotError(f"{p}: snapshot lacks 'keys' or 'comparisons'")
    validate(snap, str(p))
    return snap


TEXT, NUMBER, POSITIVE, COUNT, FLAG = "text", "a number", "a positive number", "a whole number >= 0", "true or false"
NONNEG, FIDELITY = "a number >= 0", "a fidelity (roofline, archmodel, rtl, measured or a derived one)"
BY_TYPE = {pa.string(): TEXT, pa.float64(): NUMBER, pa.int64(): COUNT, pa.bool_(): FLAG}
"""What a snapshot field may hold, by its Arrow type in xfid.engine.schema."""
NARROWER = {"candidate": FIDELITY, "reference": FIDELITY, "tolerance": NONNEG, "bias": POSITIVE}
"""Fields whose values lie in a narrower range than their type allows (a rule, not a field list)."""


def _types(fields: tuple[str, ...], declared: tuple[Field, ...]) -> dict[str, str]:
    """Per snapshot field, in order, what it may hold: from its declaration in the schema."""
    types = {f.name: f.type for f in declared}
    return {name: NARROWER.get(name, BY_TYPE[types[name]]) for name in fields}


KEY_TYPES = _types(KEY_FIELDS, (*ROW_FIELDS, *ROW_EXTRA_FIELDS))
"""What each field of a snapshot key may hold (or null, unless it is in KEY_REQUIRED)."""
KEY_REQUIRED = ("target", "metric", "candidate", "reference", "kind")
AGG_TYPES = _types(AGG_FIELDS, COMPARISON_FIELDS)
"""What each field of a snapshot comparison may hold (or null, unless it is in AGG_REQUIRED)."""
AGG_REQUIRED = ("target", "candidate", "reference", "metric")
SOURCE_TYPES = {"path": TEXT, "adapter": TEXT, "content_hash": TEXT}
"""What each field of a snapshot's `sources` entry may hold (or null)."""
KINDS = ("ok", *DISCREPANCY_KINDS)
SHOWN = 40
"""Characters of a bad value quoted in an error."""


def _shown(v: Any) -> str:
    """A short, escaped rendering of an untrusted value for an error message."""
    text = json.dumps(v, default=repr)  # ASCII: control and bidi characters come out as \u escapes
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def _fits(v: Any, want: str) -> bool:
    if want == TEXT:
        return isinstance(v, str)
    if want == FIDELITY:
        return isinstance(v, str) and is_valid_fidelity(v)
    if want == FLAG:
        return isinstance(v, bool)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        x = float(v)  # an integer of 400 digits does not fit a float: not a number here
    except OverflowError:
        return False
    if not math.isfinite(x):
        return False
    if want == COUNT:
        return x.is_integer() and x >= 0
    return x > 0 if want == POSITIVE else x >= 0 if want == NONNEG else True


def _fields(where: str, rec: Any, types: dict[str, str], required: tuple[str, ...]) -> None:
    if not isinstance(rec, dict):
        raise SnapshotError(f"{where}: expected an object, got {_shown(rec)}")
    for name in required:
        if rec.get(name) is None:
            raise SnapshotError(f"{where}.{name}: missing (every {where.split('[', 1)[0]} entry needs "
                                f"{', '.join(required)})")
    for name, want in types.items():
        v = rec.get(name)
        if v is not None and not _fits(v, want):
            raise SnapshotError(f"{where}.{name}: expected {want}, got {_shown(v)}")


def validate(snap: dict[str, Any], where: str) -> None:
    """Check every field `compare_snapshots` reads; the error names the file and the key path.

    Raises:
        SnapshotError: e.g. `base.json: comparisons[3].mape: expected a number, got "x"`.
    """
    fix = f" (the file is damaged or was edited: write it again with `xfid snapshot -o {where}`)"
    try:
        for name in ("label", "created", "config_hash"):
            if snap.get(name) is not None and not isinstance(snap[name], str):
                raise SnapshotError(f"{where}: {name}: expected text, got {_shown(snap[name])}")
        sources = snap.get("sources", [])
        if not isinstance(sources, list) or not all(isinstance(x, dict) for x in sources):
            raise SnapshotError(f"{where}: sources: expected a list of objects, got {_shown(sources)}")
        for i, x in enumerate(sources):
            _fields(f"{where}: sources[{i}]", x, SOURCE_TYPES, ())
        for fp, k in snap["keys"].items():
            at = f"{where}: keys[{_shown(fp)}]"
            _fields(at, k, KEY_TYPES, KEY_REQUIRED)
            if k["kind"] not in KINDS:
                raise SnapshotError(f"{at}.kind: expected one of {', '.join(KINDS)}, got {_shown(k['kind'])}")
        for i, c in enumerate(snap["comparisons"]):
            _fields(f"{where}: comparisons[{i}]", c, AGG_TYPES, AGG_REQUIRED)
    except SnapshotError as e:
        raise SnapshotError(f"{e}{fix}") from None
