"""What the API and the pages both need: filtered issues, actions, checks, compare, overview data.

Each function is one or two `XfidStore` calls and the shaping of their result; no SQL here.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from xfid.errors import XfidError
from xfid.serve.tokens import Identity

SEARCHED = ("id", "fingerprint", "target", "workload", "op", "metric", "stat", "candidate", "reference", "owner",
            "kind", "state")
ACTIONS = {"ack": ("owner", "note"), "resolve": ("note",), "reopen": ("note",),
           "waive": ("reason", "until", "max_error", "note"), "note": ("note",),
           "invalid": ("reason", "note"), "duplicate": ("of", "note"), "downstream": ("of", "note")}
CHECK_SUMMARY = ("id", "time", "actor", "label", "config_hash", "counts", "n_rows")


def _number(text: Any, what: str) -> float | None:
    if text in (None, ""):
        return None
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise XfidError(f"{what} {text!r}: not a number (e.g. 1.5)") from None
    if not math.isfinite(v) or v < 0:
        raise XfidError(f"{what} {text!r}: must be a number >= 0")
    return v


def issue_rows(api: Any, query: Any) -> list[dict[str, Any]]:
    """`xfid issues list --format json`'s rows for the query's state, target (repeatable), kind and
    severity_min; `q` keeps those whose id, key, pair, owner, kind or state contains it (any case)."""
    targets = [t for t in query.getlist("target") if t]
    rows = api.issue_list(query.get("state") or None, target=targets or None, kind=query.get("kind") or None,
                          severity_min=_number(query.get("severity_min"), "severity_min"))
    q = (query.get("q") or "").strip().casefold()
    if q:
        rows = [r for r in rows if any(q in str(r.get(k) or "").casefold() for k in SEARCHED)]
    return rows


def _fields(action: str, data: dict[str, Any]) -> dict[str, Any]:
    """An action's form or JSON fields, checked against the CLI's and converted."""
    if action not in ACTIONS:
        raise XfidError(f"unknown action {action!r}; actions: {', '.join(ACTIONS)}")
    unknown = sorted(set(data) - set(ACTIONS[action]))
    if unknown:
        raise XfidError(f"{action}: unknown field {unknown[0]!r}; fields: {', '.join(ACTIONS[action])}")
    kw = {k: (str(v).strip() or None) if k != "max_error" and v is not None else v for k, v in data.items()}
    if "max_error" in kw:
        kw["max_error"] = _number(kw["max_error"], "max_error")
    return kw


def summaries(api: Any, check: Any) -> list[dict[str, Any]]:
    """`xfid issues summaries --format json` for `check` (a query value; empty: the latest check)."""
    if check in (None, ""):
        return api.summaries()
    try:
        cid = int(str(check))
    except ValueError:
        raise XfidError(f"check {check!r}: not a check number (see /checks)") from None
    return api.summaries(cid)


def act_summary(api: Any, summary_id: str, action: str, who: Identity, data: dict[str, Any]) -> dict[str, Any]:
    """One manual action on every issue of a summary, with the CLI's fields; the actor is the token's name."""
    return api.act_summary(summary_id, action, actor=who.name, **_fields(action, data))


def act(api: Any, issue_id: str, action: str, who: Identity, data: dict[str, Any]) -> dict[str, Any]:
    """One manual action with the CLI's fields; the actor is the token's name."""
    return api.act(issue_id, action, actor=who.name, **_fields(action, data))


def check(api: Any, who: Identity, data: dict[str, Any]) -> dict[str, Any]:
    """`xfid check` with the JSON body's target/run/as_of/label/resolve_after; the summary as a dict."""
    allowed = {"target", "run", "as_of", "label", "resolve_after"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise XfidError(f"check: unknown field {unknown[0]!r}; fields: {', '.join(sorted(allowed))}")
    s = api.check(_strings(data.get("target")) or None, _strings(data.get("run")) or None, data.get("as_of"),
                  actor=who.name, label=data.get("label"), resolve_after=data.get("resolve_after"))
    return s.to_dict()


def _strings(v: Any) -> list[str]:
    return [] if v is None else [v] if isinstance(v, str) else [str(x) for x in v]


def compare(api: Any, data: dict[str, Any]) -> dict[str, Any]:
    """`xfid compare` on the server: the baseline is `baseline` (a snapshot) or the latest under `against`;
    returns the formatted report (`format`: text, markdown, json, junit) and the exit code."""
    from xfid.api import compare as compare_with
    from xfid.drift.drift_format import FORMATTERS

    fmt = data.get("format", "text")
    if fmt not in FORMATTERS:
        raise XfidError(f"compare: unknown format {fmt!r}; formats: {', '.join(FORMATTERS)}")
    if data.get("against"):
        base = api.labelled_snapshot(str(data["against"]))
    elif isinstance(data.get("baseline"), dict):
        base = data["baseline"]
    else:
        raise XfidError("compare needs `against` (a snapshot label) or `baseline` (a snapshot object)")
    rep = compare_with(base, api, fail_on=data.get("fail_on", "new,regression,bound,drift"),
                       targets=_strings(data.get("target")) or None, run=_strings(data.get("run")) or None,
                       as_of=data.get("as_of"))
    return {"text": FORMATTERS[fmt](rep), "exit_code": rep.exit_code}


def snapshot(api: Any, who: Identity, data: dict[str, Any]) -> dict[str, Any]:
    """`xfid snapshot --label L` on the server: the current correlation kept under the label."""
    return api.record_snapshot(str(data.get("label") or ""), actor=who.name, targets=_strings(data.get("target")) or None,
                               run=_strings(data.get("run")) or None, as_of=data.get("as_of"))


def check_list(api: Any) -> list[dict[str, Any]]:
    """Every check, newest first: id, time, actor, label, config hash, counts, aligned rows."""
    return [{k: c.get(k) for k in CHECK_SUMMARY} for c in reversed(api.tracker.checks())]


def check_rows(api: Any, check_id: int, query: Any) -> dict[str, Any]:
    """One page of a check's saved rows (`limit`, default 200, at most 5,000; `offset`)."""
    frame = api.tracker.check_rows(int(check_id))
    limit = min(int(_number(query.get("limit"), "limit") or 200), 5000)
    offset = int(_number(query.get("offset"), "offset") or 0)
    page = frame.iloc[offset:offset + limit]
    records = page.astype(object).where(page.notna(), None).to_dict("records")
    return {"check": int(check_id), "total": len(frame), "offset": offset, "rows": records}


def overview(api: Any, now: datetime | None = None) -> dict[str, Any]:
    """The overview page's numbers: open issues by severity band, target and pair; the transitions
    of the last check and of the last 7 days; each pair's share of keys within tolerance per check."""
    now = now or datetime.now(UTC)
    from xfid import counts

    open_rows = counts.active(api.issue_list())  # the active ones (xfid.counts): the key stays "open"
    bands = Counter(_band(r.get("severity")) for r in open_rows)
    checks = api.tracker.checks()
    last = checks[-1] if checks else None
    since_last = api.tracker.events(since=_parse(last["time"])) if last else []
    week = api.tracker.events(since=now - timedelta(days=7))
    return {"open": len(open_rows),
            "by_band": [(b, bands.get(b, 0)) for b in BANDS],
            "by_target": Counter(str(r["target"]) for r in open_rows).most_common(),
            "by_pair": Counter(f"{r['candidate']}->{r['reference']}" for r in open_rows).most_common(),
            "last_check": last, "since_last": _by_action(since_last), "week": _by_action(week),
            "health": health(checks)}


BANDS = ("severity >= 10", "3 - 10", "1 - 3", "< 1")


def _band(s: float | None) -> str:
    if s is None or s < 1:
        return BANDS[3]
    return BANDS[0] if s >= 10 else BANDS[1] if s >= 3 else BANDS[2]


def _parse(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _by_action(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return Counter(f"{e['action']} -> {e['to_state']}" for e in events).most_common()


def health(checks: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """Per pair (candidate->reference): (check id, the mean of its aggregates' within_tolerance share;
    a bound's share is of its rows that hold the bound, 1 - violations / n)."""
    out: dict[str, list[tuple[int, float]]] = {}
    for c in checks:
        per: dict[str, list[float]] = {}
        for agg in c.get("comparisons") or []:
            w = agg.get("within_tolerance")
            if agg.get("compared_as") == "bound" and isinstance(agg.get("violations"), int) and agg.get("n"):
                w = 1 - agg["violations"] / agg["n"]
            if isinstance(w, (int, float)) and math.isfinite(w):
                per.setdefault(f"{agg['candidate']}->{agg['reference']}", []).append(float(w))
        for pair, values in per.items():
            out.setdefault(pair, []).append((int(c["id"]), sum(values) / len(values)))
    return dict(sorted(out.items()))
