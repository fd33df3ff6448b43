"""Series across recorded checks: one key's error (from the saved check rows) and each pair's
MAPE (from the checks' comparisons), each with its change points."""

from __future__ import annotations

import math
from typing import Any

from xfid.engine.jsonout import clean
from xfid.errors import TrackerError
from xfid.store import Store


def key_history(store: Store, key: str) -> list[dict[str, Any]]:
    """[{check_id, time, candidate_value, reference_value, rel_error, kind, target, ...}] oldest first.

    Args:
        key: an issue id (`XF-12`) or a fingerprint (16 hex digits).

    Raises:
        TrackerError: an unknown issue id.
    """
    from xfid.tracker import Tracker

    tr = Tracker(store)
    fp = key
    if key.upper().startswith("XF-"):
        fp = tr.issue(key)["fingerprint"]
    out = []
    for chk in sorted(tr.checks(), key=lambda c: c["id"]):
        rows = tr.check_rows(chk["id"])
        if rows is None or not len(rows) or "fingerprint" not in rows:
            continue
        hit = rows[rows["fingerprint"] == fp]
        if not len(hit):
            continue
        r = hit.iloc[0].to_dict()
        out.append({"check_id": chk["id"], "time": chk["time"], "fingerprint": fp,
                    **{k: clean(r.get(k)) for k in ("target", "workload", "op", "metric", "stat", "candidate", "reference",
                                                  "candidate_value", "reference_value", "rel_error", "kind")}})
    if not out and not key.upper().startswith("XF-") and len(key) != 16:
        raise TrackerError(f"{key!r} is neither an issue id (XF-N) nor a 16-digit fingerprint")
    return out



def series_change_points(values: list[float | None], alpha: float | None = None) -> list[Any]:
    """Change points of a series that may hold gaps (None, NaN: a check without the value):
    found on the values present, with indices mapped back to positions in `values`."""
    from xfid.drift.changepoint import ALPHA, ChangePoint, change_points

    present = [i for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    cps = change_points([float(values[i]) for i in present], alpha=ALPHA if alpha is None else alpha)
    return [ChangePoint(present[c.index], c.before_mean, c.after_mean, c.p_value, c.q) for c in cps]


def pair_history(store: Store, alpha: float | None = None) -> list[dict[str, Any]]:
    """Each comparison (target, candidate, reference, metric, stat) that has a MAPE: its value
    at every recorded check, oldest first, and the change points of that series."""
    from xfid.tracker import Tracker

    by: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for chk in sorted(Tracker(store).checks(), key=lambda c: c["id"]):
        for agg in chk.get("comparisons") or []:
            mape = agg.get("mape")
            if not isinstance(mape, (int, float)) or not math.isfinite(mape):
                continue
            key = tuple(str(agg.get(k, "")) for k in ("target", "candidate", "reference", "metric", "stat"))
            by.setdefault(key, []).append({"check_id": chk["id"], "time": chk["time"], "mape": float(mape),
                                           "n": agg.get("n")})
    out = []
    for key, series in sorted(by.items()):
        cps = series_change_points([p["mape"] for p in series], alpha)
        out.append({**dict(zip(("target", "candidate", "reference", "metric", "stat"), key, strict=True)),
                    "series": series, "change_points": [c.to_dict() for c in cps]})
    return out
