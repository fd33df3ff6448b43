"""Series across recorded checks: one key's error (from the saved check rows) and each pair's
MAPE (from the checks' comparisons), each with its change points."""

from __future__ import annotations

import math
from typing import Any

from xfid.engine.jsonout import clean
from xfid.engine.schema import (
    CODE,
    KEY_FIELDS,
    NUMBER,
    SIDE_VALUES,
    SIDES,
    TARGET_GROUP_FIELDS,
    TEXT,
    row_field,
)
from xfid.errors import TrackerError
from xfid.schema import STACK_HINTS
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
        out.append(series_point(chk, fp, hit.iloc[0].to_dict()))
    if not out and not key.upper().startswith("XF-") and len(key) != 16:
        raise TrackerError(f"{key!r} is neither an issue id (XF-N) nor a 16-digit fingerprint")
    return out



def series_point(chk: dict[str, Any], fp: str, r: dict[str, Any]) -> dict[str, Any]:
    """One check's point of a key's series: the key, both values, the error and each side's run,
    source and config (what `moves` compares)."""
    return {"check_id": chk["id"], "time": chk["time"], "fingerprint": fp,
            **{k: clean(r.get(k)) for k in POINT_COLUMNS}}


SIDE_COLUMNS = (*(row_field(TEXT, entry, side) for entry in ("run", "source_path", "config") for side in SIDES),
                "rel_error_low", "rel_error_high", "stack_changed")
"""What a series point keeps of each side, to say which side moved (`moves`)."""
POINT_COLUMNS = (*KEY_FIELDS, *SIDES, *SIDE_VALUES, row_field(NUMBER, "rel"), row_field(CODE, "kind"), *SIDE_COLUMNS)
"""The row columns a series point keeps, in its order."""
MIN_CHANGE = 0.05
"""A key's error moving by more than this (absolute, 5 percentage points, as `[drift] error_abs`) is a move."""
VALUE_EPS = 1e-9
"""A value whose relative change is below this did not move."""


def moves(series: list[dict[str, Any]], min_change: float = MIN_CHANGE) -> list[dict[str, Any]]:
    """Where a key's error changed between consecutive checks beyond its noise, which side moved.

    A step is a move when |error change| > `min_change` and, when both checks carry an interval
    for the error (repeats), the intervals do not overlap. For each move: the check, the errors
    before and after, `side` ("candidate", "reference" or "both": whose value changed by more
    than VALUE_EPS relative), and per changed side its value, run, source and config keys before
    and after — so a change caused by new measurements never reads as a model regression.
    """
    out = []
    for i in range(1, len(series)):
        a, b = series[i - 1], series[i]
        ea, eb = a.get("rel_error"), b.get("rel_error")
        if not _finite(ea) or not _finite(eb) or abs(eb - ea) <= min_change:
            continue
        if all(_finite(p.get(k)) for p in (a, b) for k in ("rel_error_low", "rel_error_high")) and \
                a["rel_error_low"] <= b["rel_error_high"] and b["rel_error_low"] <= a["rel_error_high"]:
            continue  # within the noise of the two checks
        sides = {}
        for side in SIDES:
            va, vb = a.get(f"{side}_value"), b.get(f"{side}_value")
            changed = not (_finite(va) and _finite(vb)) or abs(vb - va) > VALUE_EPS * max(abs(va), abs(vb), 1e-300)
            if changed:
                sides[side] = {"fidelity": b.get(side), "value": [va, vb],
                               "run": [a.get(f"{side}_run"), b.get(f"{side}_run")],
                               "source": [a.get(f"{side}_source_path"), b.get(f"{side}_source_path")],
                               "config": config_changes(a.get(f"{side}_config"), b.get(f"{side}_config"))}
        side = "both" if len(sides) == 2 else next(iter(sides), "neither")
        out.append({"index": i, "check_id": b["check_id"], "error": [ea, eb], "side": side, "sides": sides})
    return out


def config_changes(before: Any, after: Any, limit: int = 8) -> dict[str, list[Any]]:
    """The config keys whose values differ (stack keys first), as {key: [before, after]}."""
    a, b = _config(before), _config(after)
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    keys.sort(key=lambda k: (not any(h in k.lower() for h in STACK_HINTS), k))
    return {k: [a.get(k), b.get(k)] for k in keys[:limit]}


def describe_move(m: dict[str, Any]) -> str:
    """One line: 'moved: reference — measured run r7 -> r8, vllm_version 0.8.5 -> 0.11.0'."""
    parts = []
    for side, d in m["sides"].items():
        what = [f"{d['fidelity']} run {d['run'][0]} -> {d['run'][1]}" if d["run"][0] != d["run"][1]
                else f"{d['fidelity']} value {_g(d['value'][0])} -> {_g(d['value'][1])} (same run {d['run'][1]})"]
        what += [f"{k} {_shown(v[0])} -> {_shown(v[1])}" for k, v in list(d["config"].items())[:3]]
        parts.append((f"{side}: " if m["side"] == "both" else "") + ", ".join(what))
    if not parts:
        return "moved: neither value changed (the tolerance or the alignment did)"
    return f"moved: {m['side']} — " + "; ".join(parts)


def _shown(v: Any) -> str:
    """A config value as a reader sees it: a key the side's config did not have is "(unset)"."""
    return "(unset)" if v is None else str(v)


def _config(v: Any) -> dict[str, Any]:
    import json

    if isinstance(v, dict):
        d = v
    elif isinstance(v, str) and v.strip().startswith("{"):
        try:
            d = json.loads(v)
        except ValueError:
            return {}
    else:
        return {}
    return {str(k): x for k, x in d.items() if not isinstance(x, (dict, list))} if isinstance(d, dict) else {}


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _g(v: Any) -> str:
    return f"{v:.6g}" if _finite(v) else "n/a"


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
            key = tuple(str(agg.get(k, "")) for k in TARGET_GROUP_FIELDS)
            by.setdefault(key, []).append({"check_id": chk["id"], "time": chk["time"], "mape": float(mape),
                                           "n": agg.get("n")})
    out = []
    for key, series in sorted(by.items()):
        cps = series_change_points([p["mape"] for p in series], alpha)
        out.append({**dict(zip(TARGET_GROUP_FIELDS, key, strict=True)),
                    "series": series, "change_points": [c.to_dict() for c in cps]})
    return out
