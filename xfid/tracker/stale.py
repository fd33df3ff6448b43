"""Silence is a signal: keys and sources that reported in the last checks and stopped.

xfid compares each key's latest record, so a measurement that stops does not leave the check: its
old number stays, and silently ages. What stops is its run moving on. So, over comparable checks
(made with the same selection: targets, run, as-of; a check of one target never makes the others
stale), with a source being a (fidelity, target) pair and a run's age the check it first
appeared in:

- a **key** reports in a check when it has a row with both values (any kind but
  missing_reference) and each side's run is its source's newest run in that check;
- a **source** reports when it has values in the check (else it stopped: "no values"; when the
  sources on the other side of all its rows stopped with it, both are listed and the line says
  the rows cannot tell which side stopped: xfid aligns only keys both fidelities have); a source
  that brought a new run in each of the last checks also stops when it brings none while other
  sources still do ("no new run": not a check re-run on old data).

At a check C an item is **stale** when it does not report in C, reported in each of the
`[tracker] stale_after` (default 2) comparable checks up to the last one it reported in, and that
one is at most `[tracker] stale_window` (default 10) comparable checks back (silent longer, it is
gone and no longer listed). Only the last stale_after + stale_window comparable checks are read.

Stale items are listed (check summary, text and JSON; the report: `stale_now`), never filed.
Read from the saved rows of the checks (xfid.tracker.checkfiles); nothing else is stored.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xfid.engine.schema import FINGERPRINT_FIELDS
from xfid.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from xfid.config import Config
    from xfid.tracker import Tracker

STALE_AFTER = 2
STALE_WINDOW = 10
KEY_FIELDS = FINGERPRINT_FIELDS
"""What a seen key is of: the fields its fingerprint hashes."""


@dataclass(frozen=True)
class StaleSettings:
    """`[tracker] stale_after` and `stale_window` (integers >= 1, checked by xfid.config)."""

    after: int = STALE_AFTER
    window: int = STALE_WINDOW

    @classmethod
    def from_config(cls, config: Config) -> StaleSettings:
        sec = config.section("tracker")
        out = cls(sec.get("stale_after", STALE_AFTER), sec.get("stale_window", STALE_WINDOW))
        for name, v in (("stale_after", out.after), ("stale_window", out.window)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{config.path or 'bundled xfid.toml'}: [tracker] {name} must be an integer >= 1, "
                                  f"got {v!r}")
        return out


@dataclass
class Seen:
    """What one check held: per source (fidelity, target) the runs with a value; per key its key
    fields and each side's (source, run), None for a side without a value."""

    runs: dict[tuple[str, str], set[str]]
    keys: dict[str, tuple[dict[str, Any], tuple[str, str], str, tuple[str, str] | None, str | None]]
    partners: dict[tuple[str, str], set[tuple[str, str]]] = field(default_factory=dict)


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _seen_of(tracker: Tracker, check_id: int) -> Seen:
    """`seen` of a saved check's rows, read a chunk at a time (only the columns it looks at)."""
    out = Seen({}, {})
    for chunk in tracker.check_row_chunks(check_id, columns=SEEN_COLUMNS):
        add_seen(out, chunk)
    return out


SEEN_COLUMNS = ("fingerprint", "kind", *KEY_FIELDS, "candidate_value", "reference_value", "candidate_run",
                "reference_run")
"""The row columns `seen` reads."""


def seen(rows: pd.DataFrame | None) -> Seen:
    """The sources, runs and keys with a value in a check's rows."""
    return add_seen(Seen({}, {}), rows)


def add_seen(out: Seen, rows: pd.DataFrame | None) -> Seen:
    """`out` with what `rows` hold added (a check's rows chunk by chunk, in order, give `seen` of
    them all); returns `out`."""
    if rows is None or not len(rows) or "fingerprint" not in rows.columns:
        return out
    cols = [c for c in SEEN_COLUMNS if c in rows.columns]
    for r in rows[cols].to_dict("records"):
        t = str(r.get("target"))
        cand = (str(r.get("candidate")), t)
        ref = (str(r.get("reference")), t)
        has_c = _finite(r.get("candidate_value"))
        has_r = str(r.get("kind")) != "missing_reference" and _finite(r.get("reference_value"))
        crun, rrun = str(r.get("candidate_run")), str(r.get("reference_run"))
        if has_c:
            out.runs.setdefault(cand, set()).add(crun)
        if has_r:
            out.runs.setdefault(ref, set()).add(rrun)
        if has_c and has_r:
            out.partners.setdefault(cand, set()).add(ref)
            out.partners.setdefault(ref, set()).add(cand)
        fp = r.get("fingerprint")
        if has_c and isinstance(fp, str) and fp and fp not in out.keys:
            out.keys[fp] = ({k: None if r.get(k) is None else str(r.get(k)) for k in KEY_FIELDS}, cand, crun,
                            ref if has_r else None, rrun if has_r else None)
    return out


def scope(check: dict[str, Any]) -> str:
    """The selection a check was made with: its targets, run and as-of (comparable checks share it)."""
    s = check.get("settings") or {}
    t = s.get("targets")
    return json.dumps({"targets": sorted(t) if isinstance(t, list) else t, "run": s.get("run"),
                       "as_of": s.get("as_of")}, sort_keys=True, default=str)


class History:
    """A run of comparable checks, oldest first: which runs are each source's newest at each one.

    A run's age is the check it first appeared in (within the checks read); a source's newest
    runs at a check are those of its runs there that appeared last (several when they came
    together)."""

    def __init__(self, checks: list[Seen]):
        self.checks = checks
        first: dict[tuple[tuple[str, str], str], int] = {}
        for i, c in enumerate(checks):
            for src, runs in c.runs.items():
                for run in runs:
                    first.setdefault((src, run), i)
        self.first = first
        self.newest: list[dict[tuple[str, str], set[str]]] = []
        for c in checks:
            top = {}
            for src, runs in c.runs.items():
                last = max(first[(src, r)] for r in runs)
                top[src] = {r for r in runs if first[(src, r)] == last}
            self.newest.append(top)

    def current(self, i: int, fp: str) -> bool:
        """The key has both values at check i, each from its source's newest run there."""
        k = self.checks[i].keys.get(fp)
        if k is None or k[3] is None:
            return False
        return k[2] in self.newest[i].get(k[1], set()) and k[4] in self.newest[i].get(k[3], set())

    def new_run(self, i: int, src: tuple[str, str]) -> bool:
        """The source brought a run at check i that no earlier check read held (never at the first)."""
        return i > 0 and any(self.first[(src, r)] == i for r in self.checks[i].runs.get(src, ()))

    def why(self, fp: str) -> str:
        """Why the key does not report at the last check: absent, or the side stuck on an old run."""
        n = len(self.checks) - 1
        k = self.checks[n].keys.get(fp)
        if k is None:
            return "no row"
        if k[3] is None:
            return "no reference value"
        parts = []
        for side, src, run in (("candidate", k[1], k[2]), ("reference", k[3], k[4])):
            top = self.newest[n].get(src, set())
            if run not in top:
                parts.append(f"{side} {src[0]} still run {run}, newest {', '.join(sorted(top))}")
        return "; ".join(parts)


def may_look(tracker: Tracker, settings: StaleSettings) -> bool:
    """Whether `find` at the check about to be recorded may look at its rows: only when at least
    `settings.after` checks (of any selection) are recorded before it; with fewer comparable ones
    it returns before reading any check's rows. (Were one recorded meanwhile, `find` given no
    rows reads the check's own file: the result is the same.)"""
    return len(tracker.checks()) >= settings.after


def find(tracker: Tracker, check_id: int | None = None, settings: StaleSettings | None = None,
         rows: pd.DataFrame | None = None, current: Seen | None = None) -> dict[str, Any]:
    """The stale keys and sources at one check (default: the latest), as
    {"check_id", "stale_after", "stale_window", "keys": [...], "sources": [...]}.

    Each key: fingerprint, target, workload, op, metric, stat, candidate, reference, why (no row;
    no reference value; or which side is stuck on which run), last_check and last_time (the last
    check it reported in) and silent_checks (comparable checks since, this one included). Each
    source: fidelity, target, why ("no values", or "no new run"), last_check, last_time,
    silent_checks.

    `rows`: the check's rows when the caller holds them (not read again); `current`: what they
    hold (`seen`, or `add_seen` chunk by chunk), given instead.
    """
    settings = settings or StaleSettings()
    checks = sorted(tracker.checks(), key=lambda c: c["id"])
    out: dict[str, Any] = {"check_id": check_id, "stale_after": settings.after,
                           "stale_window": settings.window, "keys": [], "sources": []}
    cur = (next((c for c in checks if c["id"] == check_id), None) if check_id is not None
           else (checks[-1] if checks else None))
    if cur is None:
        return out
    out["check_id"] = cur["id"]
    want = scope(cur)
    prev = [c for c in checks if c["id"] < cur["id"] and scope(c) == want][-(settings.after + settings.window):]
    if len(prev) < settings.after:
        return out
    seq = [*prev, cur]
    latest = current if current is not None else seen(rows) if rows is not None else _seen_of(tracker, cur["id"])
    h = History([*(_seen_of(tracker, c["id"]) for c in prev), latest])
    n = len(prev)
    fps = {fp for c in h.checks[:-1] for fp in c.keys}
    for fp in sorted(fps):
        when = _stopped(lambda i, fp=fp: h.current(i, fp), n, settings)
        if when is not None:
            info = next(c.keys[fp][0] for c in reversed(h.checks) if fp in c.keys)
            out["keys"].append({"fingerprint": fp, **info, "why": h.why(fp), **_when(seq, when)})
    out["keys"].sort(key=lambda k: tuple(str(k.get(f)) for f in KEY_FIELDS))
    srcs = sorted({s for c in h.checks[:-1] for s in c.runs})
    for src in srcs:
        when = _stopped(lambda i, src=src: src in h.checks[i].runs, n, settings)
        why = "no values"
        if when is None and src in h.checks[n].runs:  # still there: did it stop bringing new runs?
            j = _stopped(lambda i, src=src: h.new_run(i, src), n, settings, first=1)
            if j is not None and any(h.new_run(i, o) for i in range(j + 1, n + 1) for o in h.checks[i].runs
                                     if o != src):  # while others still did (not a check re-run on old data)
                when, why = j, "no new run"
        if when is not None and why == "no values":
            with_ = sorted(h.checks[when].partners.get(src, set()))
            if with_ and not any(o in h.checks[n].runs for o in with_):
                why += (f"; nor has {', '.join(f'{f} on {t}' for f, t in with_)}, the other side of all its rows "
                        "(the rows cannot tell which side stopped)")
        if when is not None:
            out["sources"].append({"fidelity": src[0], "target": src[1], "why": why, **_when(seq, when)})
    return out


def _stopped(reports: Any, n: int, settings: StaleSettings, first: int = 0) -> int | None:
    """The index of the last check (before n) an item reported in, when it does not report at n,
    reported in each of the `after` checks up to that one (from index `first`), and that one is at
    most `window` checks back; else None."""
    if reports(n):
        return None
    j = next((i for i in range(n - 1, -1, -1) if reports(i)), None)
    if j is None or n - j > settings.window or j - settings.after + 1 < first:
        return None
    return j if all(reports(i) for i in range(j - settings.after + 1, j + 1)) else None


def _when(seq: list[dict[str, Any]], j: int) -> dict[str, Any]:
    return {"last_check": seq[j]["id"], "last_time": seq[j]["time"], "silent_checks": len(seq) - 1 - j}


def summary_text(stale: dict[str, Any] | None, limit: int = 6) -> list[str]:
    """The lines `xfid check` prints on stale keys and sources (none when nothing is stale)."""
    from xfid.textsafe import terminal

    if not stale or not (stale.get("keys") or stale.get("sources")):
        return []
    n = stale["stale_after"]
    lines = [f"  stale (reported in {n} check(s) in a row, silent since; not filed): "
             f"{len(stale['keys'])} key(s), {len(stale['sources'])} source(s)"]
    for s in stale["sources"][:limit]:
        lines.append(terminal(f"    source {s['fidelity']} on {s['target']}: {s['why']}, last reported in check "
                              f"{s['last_check']}"))
    if len(stale["sources"]) > limit:
        lines.append(f"    ... (+{len(stale['sources']) - limit} more sources)")
    for k in stale["keys"][:limit]:
        lines.append(terminal(f"    key {k['target']}/{k['workload']}/{k['op'] or '(end-to-end)'} {k['metric']}/{k['stat']} "
                              f"{k['candidate']}->{k['reference']}: {k['why']}, last reported in check {k['last_check']}"))
    if len(stale["keys"]) > limit:
        lines.append(f"    ... (+{len(stale['keys']) - limit} more keys)")
    return lines


def stale_now(store: Any, config: Config, check_id: int | None = None) -> dict[str, Any]:
    """For the report: `find()` on a store's tracker with the config's settings (latest check by default)."""
    from xfid.tracker import Tracker

    return find(Tracker(store), check_id, StaleSettings.from_config(config))
