"""Text, CSV and JSON forms of checks and issues for `xfid check` and `xfid issues`."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from xfid.textsafe import csv_cell, terminal
from xfid.tracker.recording import CheckSummary
from xfid.tracker.stack import summary_text as stack_lines
from xfid.tracker.stale import summary_text as stale_lines
from xfid.tracker.tracker import ISSUE_KEYS

MAX_IDS = 12


def clean(v: Any) -> str:
    """A value for the terminal: None as '-', control and bidi characters made visible."""
    if v is None:
        return "-"
    return terminal(v)


def num(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v * 100:+.1f}%" if pct else f"{v:.6g}"


def factor(d: dict[str, Any]) -> str:
    """How far off an issue or observation is, `2.5x` (|error| / tolerance; a bound violation's
    against the bound tolerance) - not the ranked severity, which adds 1000 or 100 for the kind
    to sort by (xfid.report.data.issue_factor)."""
    from xfid.report.data import issue_factor

    f = issue_factor(d)
    return "-" if f is None else f"{f:.3g}x"


def _ids(ids: list[str]) -> str:
    if len(ids) <= MAX_IDS:
        return ", ".join(ids)
    return ", ".join(ids[:MAX_IDS]) + f", ... (+{len(ids) - MAX_IDS} more)"


def check_text(s: CheckSummary) -> str:
    """The summary `xfid check` prints."""
    lines = [f"check {s.check_id} at {s.time}: {s.rows} aligned rows"]
    for name, ids in (("new", s.new), ("reopened", s.reopened), ("resolved", s.resolved),
                      ("still open", s.still_open), ("waived", s.waived)):
        lines.append(f"  {name:<11}{len(ids):>5}" + (f"  {_ids(ids)}" if ids else ""))
    if s.uncertain:
        lines.append(f"  uncertain: {s.uncertain} key(s) whose interval straddles the tolerance; "
                     f"{len(s.pending)} not filed yet (filed after [tracker] confirm_after checks in a row)")
    if s.resolving:
        lines.append(f"  resolving (clean, not yet in enough consecutive checks): {', '.join(s.resolving)}")
    if s.held:
        lines.append(f"  held (within tolerance, inside the hysteresis margin: not counted clean): {_ids(s.held)}")
    if s.triaged:
        lines.append(f"  triaged (invalid, duplicate or downstream; still beyond tolerance, kept as triaged): "
                     f"{_ids(s.triaged)}")
    lines += stack_lines(s.stack_changed) + stale_lines(s.stale)
    if s.evidence_removed:
        lines.append(f"  evidence removed (a removed source held all of it; resolved, saying so): "
                     f"{_ids(s.evidence_removed)}")
    if s.evidence_reduced:
        lines.append(f"  evidence reduced (a removed source held some; judged on the rest): {_ids(s.evidence_reduced)}")
    if s.unwaived:
        lines.append(f"  waiver ended (expired or error beyond its bound): {_ids(s.unwaived)}")
    if len(s.new) + len(s.reopened) > 1:
        lines.append(f"  grouped by probable cause: xfid issues summaries --check {s.check_id}")
    lines.append(f"  missing reference: {s.missing_reference} key(s) (counted, not filed)")
    lines.append(f"  active issues now: {s.total_open} (open, acknowledged or reopened)")
    return "\n".join(lines)


def issues_json(issues: list[dict[str, Any]] | dict[str, Any]) -> str:
    """A list of issues (`issues list`) or one issue with its history (`issues show`) as JSON."""
    return json.dumps(issues, indent=2, default=str)


def issues_csv(issues: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    keys = list(issues[0]) if issues else list(ISSUE_KEYS)
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    for i in issues:
        row = {k: i.get(k) for k in keys}  # a text cell is never a spreadsheet formula:
        w.writerow({k: "" if v is None else csv_cell(v) if isinstance(v, str) else v for k, v in row.items()})
    return buf.getvalue()


def issues_table(issues: list[dict[str, Any]]) -> str:
    """One line per issue: id, state, kind, factor (|error| / tolerance), key, pair, error, owner, last seen."""
    if not issues:
        return "no issues"
    head = ("id", "state", "kind", "factor", "target", "workload", "op", "metric/stat", "pair",
            "rel_error", "owner", "last_seen")
    rows = [head]
    for i in issues:
        rows.append((i["id"], i["state"], i["kind"], factor(i), clean(i["target"]),
                     clean(i["workload"]), clean(i["op"]) if i["op"] else '""',
                     f"{clean(i['metric'])}/{clean(i['stat'])}",
                     f"{clean(i['candidate'])}->{clean(i['reference'])}", num(i["rel_error"], pct=True),
                     clean(i["owner"]), i["last_seen"]))
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    out = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(out) + f"\n{len(issues)} issue(s)"


def issue_text(d: dict[str, Any]) -> str:
    """`xfid issues show`: the issue, its waiver, its history and every observation with provenance."""
    unit = clean(d.get("unit"))
    out = [f"{d['id']}  {d['state']}  {d['kind']}  factor {factor(d)} (|error| / tolerance)",
           f"  fingerprint {d['fingerprint']}",
           f"  key   target={clean(d['target'])} workload={clean(d['workload'])} op={clean(d['op'])!s} "
           f"metric={clean(d['metric'])} stat={clean(d['stat'])}",
           f"  pair  {clean(d['candidate'])} (candidate) -> {clean(d['reference'])} (reference)",
           f"  latest candidate {num(d['candidate_value'])} {unit}, reference {num(d['reference_value'])} {unit}, "
           f"rel_error {num(d['rel_error'], pct=True)} (tolerance {num(d.get('tolerance'))})",
           f"  owner {clean(d['owner'])}; first seen {d['first_seen']}; last seen {d['last_seen']}"
           + (f"; triage by {d['triage_by']}{' (overdue)' if d.get('overdue') else ''}" if d.get("triage_by") else "")]
    if d["state"] == "waived":
        bound = d.get("waiver_max_error")
        out.append(f"  waived until {d['waiver_until']}: {clean(d['waiver_reason'])}"
                   + (f" (back to open if |rel_error| > {bound:.4g})" if bound is not None else ""))
    if d["state"] == "invalid":
        out.append(f"  invalid: {clean(d.get('triage_reason'))} (its rows are left out of the statistics)")
    elif d["state"] in ("duplicate", "downstream") and d.get("related_to"):
        out.append(f"  {d['state']} of {clean(d['related_to'])}")
    if d.get("summary"):
        out.append(f"  summary {clean(d['summary']['id'])}: {clean(d['summary']['cause'])}")
    if d.get("moves"):
        from xfid.drift.history import describe_move

        for m in d["moves"]:
            out.append(f"  check {m['check_id']}: error {num(m['error'][0], pct=True)} -> {num(m['error'][1], pct=True)}, "
                       + clean(describe_move(m)))
    for e in d.get("stack_changed") or []:
        out.append(f"  check {e['check_id']}: stack changed ({'held, not filed' if e['held'] else clean(e['kind'])}) — "
                   + clean(e["text"]))
    for link in d.get("links") or []:
        out.append(f"  link  {clean(link['url'])}  (by {clean(link['actor'])}, {link['time']})")
    out.append(f"history ({len(d['history'])}):")
    for h in d["history"]:
        extra = [f"{k}={clean(h[k])}" for k in ("owner", "reason", "until", "max_error", "related")
                 if h.get(k) is not None]
        if h.get("check_id") is not None:
            extra.append(f"check {h['check_id']}")
        note = f"  \"{clean(h['note'])}\"" if h.get("note") else ""
        out.append(f"  {h['time']}  {clean(h['actor'])}  {h['action']}: {h['from_state'] or '-'} -> "
                   f"{h['to_state']}" + (f"  [{', '.join(extra)}]" if extra else "") + note)
    out.append(f"observations ({len(d['observations'])}):")
    for o in d["observations"]:
        label = f" ({clean(o['check_label'])})" if o.get("check_label") else ""
        out.append(f"  check {o['check_id']}{label} {o['time']}  {o['kind']}  candidate {num(o['candidate_value'])} "
                   f"reference {num(o['reference_value'])} {clean(o['unit'])}  rel_error "
                   f"{num(o['rel_error'], pct=True)}  tolerance {num(o['tolerance'])}  factor {factor(o)}")
        for side in ("candidate", "reference"):
            out.append(f"    {side}: {clean(o[f'{side}_source_path'])} @ {clean(o[f'{side}_source_loc'])}"
                       f"  run {clean(o[f'{side}_run'])}  n {clean(o[f'{side}_n'])}  config {clean(o[f'{side}_config'])}")
        if o.get("note"):
            out.append(f"    note: {clean(o['note'])}")
    return "\n".join(out)


def summaries_table(summaries: list[dict[str, Any]], check: int | None = None) -> str:
    """`xfid issues summaries`: one line per summary: id, issues, share of the cause's rows, cause, the ids."""
    if not summaries:
        return f"check {check} filed no issues" if check else "no summaries (the latest check filed no issues)"
    head = ("summary", "issues", "share", "cause", "ids")
    rows = [head]
    for s in summaries:
        share = "-" if s.get("share") is None else f"{s['n_issues']}/{s['rows_with_cause']}"
        rows.append((s["id"], str(s["n_issues"]), share, clean(s["cause"]["text"]), _ids(s["issues"])))
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    out = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    filed = sum(s["n_issues"] for s in summaries)
    return "\n".join(out) + (f"\ncheck {summaries[0]['check_id']}: {filed} issue(s) filed, {len(summaries)} "
                             "summary(ies); share = the cause's filed issues / the check's rows with that cause")


def summary_action_text(d: dict[str, Any]) -> str:
    """What an action on a whole summary did: the issues changed, and those skipped with why."""
    changed = d["changed"]
    states = sorted({i["state"] for i in changed})
    lines = [f"{d['summary']}: {d['action']} on {len(changed)} issue(s) -> {', '.join(states)}: "
             f"{_ids([i['id'] for i in changed])}"]
    for x in d["skipped"]:
        lines.append(f"  skipped {x['id']} ({clean(x['why'])})")
    return "\n".join(lines)
