"""One key's series across recorded checks (from the tracker's saved check rows)."""

from __future__ import annotations

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

