"""The pure state machine: apply() over every state x every event, and what a transition does to the row."""

from __future__ import annotations

import pytest

from xfid.errors import TrackerError
from xfid.tracker import EVENTS, STATES, TransitionRefused, apply
from xfid.tracker.lifecycle import NEW, row_changes

# Written out by hand (not derived from the tables): state before -> {event: state after}; absent = refused.
EXPECTED: dict[str, dict[str, str]] = {
    NEW: {"detected": "open"},
    "open": {"ack": "acknowledged", "resolve": "resolved", "waive": "waived", "note": "open",
             "auto_resolved": "resolved", "evidence_removed": "resolved", "evidence_reduced": "open"},
    "acknowledged": {"ack": "acknowledged", "resolve": "resolved", "waive": "waived", "note": "acknowledged",
                     "auto_resolved": "resolved", "evidence_removed": "resolved",
                     "evidence_reduced": "acknowledged"},
    "resolved": {"reopen": "reopened", "note": "resolved", "recurred": "reopened"},
    "reopened": {"ack": "acknowledged", "resolve": "resolved", "waive": "waived", "note": "reopened",
                 "auto_resolved": "resolved", "evidence_removed": "resolved", "evidence_reduced": "reopened"},
    "waived": {"resolve": "resolved", "reopen": "reopened", "waive": "waived", "note": "waived",
               "auto_resolved": "resolved", "waiver_expired": "open", "waiver_exceeded": "open",
               "evidence_removed": "resolved", "evidence_reduced": "waived"},
    # triage verdicts: only a person moves them on; a check that sees the key again says so (still_seen)
    "invalid": {"reopen": "reopened", "note": "invalid", "still_seen": "invalid"},
    "duplicate": {"reopen": "reopened", "note": "duplicate", "still_seen": "duplicate"},
    "downstream": {"reopen": "reopened", "note": "downstream", "still_seen": "downstream"},
}
VERDICTS = ("invalid", "duplicate", "downstream")
for _state in EXPECTED:  # a verdict applies from every filed state (it can correct another verdict)
    if _state != NEW:
        EXPECTED[_state].update({v: v for v in VERDICTS})
ALL_EVENTS = ("ack", "resolve", "reopen", "waive", "note", "invalid", "duplicate", "downstream",
              "detected", "recurred", "auto_resolved", "waiver_expired", "waiver_exceeded",
              "evidence_removed", "evidence_reduced", "still_seen")


def test_the_tables_name_exactly_these_states_and_events():
    assert tuple(EVENTS) == ALL_EVENTS
    assert set(EXPECTED) == {NEW, *STATES}


@pytest.mark.parametrize("event", ALL_EVENTS)
@pytest.mark.parametrize("state", [NEW, *STATES])
def test_apply_every_state_times_every_event(state, event):
    want = EXPECTED[state].get(event)
    if want is None:
        with pytest.raises(TransitionRefused) as e:
            apply(state, event)
        assert (e.value.state, e.value.event) == (state, event)
        assert e.value.allowed == [x for x in ALL_EVENTS if x in EXPECTED[state]]
        assert event in str(e.value) and ", ".join(e.value.allowed) in str(e.value)
    else:
        assert apply(state, event) == want


def test_none_is_a_not_yet_filed_issue():
    assert apply(None, "detected") == "open"
    with pytest.raises(TransitionRefused, match="not filed yet"):
        apply(None, "ack")


def test_unknown_event_lists_the_actions():
    with pytest.raises(TrackerError, match=r"unknown action 'close'; actions: ack, resolve, reopen, waive, note"):
        apply("open", "close")


def test_refusal_worded_for_one_issue_lists_manual_actions_only():
    with pytest.raises(TransitionRefused) as e:
        apply("resolved", "ack")
    assert str(e.value.for_issue("XF-3")) == ("XF-3 is resolved: cannot ack it; allowed from resolved: reopen, note, "
                                              "invalid, duplicate, downstream")


@pytest.mark.parametrize(("state", "event", "new", "want"), [
    ("waived", "resolve", "resolved",
     {"waiver_reason": None, "waiver_until": None, "waiver_max_error": None, "clean_streak": 0}),
    ("waived", "note", "waived", {}),                      # a note keeps the waiver and the streak
    ("waived", "waive", "waived", {}),                     # the writer sets the new waiver
    ("open", "ack", "acknowledged",
     {"waiver_reason": None, "waiver_until": None, "waiver_max_error": None, "clean_streak": 0}),
    ("acknowledged", "ack", "acknowledged",                # no state change: the streak stays
     {"waiver_reason": None, "waiver_until": None, "waiver_max_error": None}),
    ("waived", "waiver_expired", "open",                   # automatic: the streak stays
     {"waiver_reason": None, "waiver_until": None, "waiver_max_error": None}),
    ("invalid", "reopen", "reopened",                      # leaving a verdict ends its reason and link
     {"waiver_reason": None, "waiver_until": None, "waiver_max_error": None, "triage_reason": None,
      "related_to": None, "clean_streak": 0}),
    ("duplicate", "still_seen", "duplicate",               # a check keeps the verdict
     {"waiver_reason": None, "waiver_until": None, "waiver_max_error": None}),
])
def test_row_changes(state, event, new, want):
    assert apply(state, event) == new
    assert row_changes(state, event, new) == want


def test_only_the_transition_writer_sets_a_state_and_each_change_has_its_history_row(tmp_path, monkeypatch):
    """Every write of an issue's state comes from transitions.write, with the history row beside it."""
    import inspect
    from datetime import UTC, date, datetime, timedelta

    from tests.test_tracker_helpers import corr, row
    from xfid.store import Store
    from xfid.tracker import Tracker, db

    writers: list[str] = []
    for name in ("update_issue", "insert_issue"):
        real = getattr(db, name)

        def spy(conn, *args, _real=real):
            values = args[-1]
            if "state" in values:
                caller = inspect.stack()[1]
                writers.append(f"{caller.frame.f_globals['__name__']}.{caller.function}")
            return _real(conn, *args)

        monkeypatch.setattr(db, name, spy)
    t0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
    bad, good = row(1.25), row(1.02)
    with Store(tmp_path / "s") as s:
        tr = Tracker(s)

        def states() -> list[str]:
            return [i["state"] for i in tr.issues(now=t0)]

        steps = [
            lambda: tr.record_check(corr(bad), actor="ci", now=t0),                          # detected
            lambda: tr.transition("XF-1", "ack", actor="a", owner="dana", now=t0),           # ack
            lambda: tr.transition("XF-1", "resolve", actor="a", now=t0),                     # resolve
            lambda: tr.record_check(corr(bad), actor="ci", now=t0),                          # recurred
            lambda: tr.transition("XF-1", "waive", actor="a", reason="r", until=date(2026, 12, 2),
                                  max_error=0.5, now=t0),                                     # waive
            lambda: tr.record_check(corr(row(2.0)), actor="ci", now=t0),                     # waiver_exceeded
            lambda: tr.transition("XF-1", "waive", actor="a", reason="r", until=date(2026, 12, 2), now=t0),
            lambda: tr.record_check(corr(bad), actor="ci", now=t0 + timedelta(days=2)),      # waiver_expired
            lambda: tr.record_check(corr(good), actor="ci", now=t0 + timedelta(days=2)),     # auto_resolved
            lambda: tr.transition("XF-1", "reopen", actor="a", now=t0 + timedelta(days=2)),  # reopen
        ]
        changes = 0
        for step in steps:
            before = states()
            step()
            changes += sum(1 for x, y in zip(before, states(), strict=False) if x != y) + len(states()) - len(before)
        history = tr.issue("XF-1", now=t0)["history"]
    assert set(writers) == {"xfid.tracker.transitions.write"}
    assert [h["action"] for h in history] == ["detected", "ack", "resolve", "recurred", "waive", "waiver_exceeded",
                                              "waive", "waiver_expired", "auto_resolved", "reopen"]
    assert changes == sum(1 for h in history if h["from_state"] != h["to_state"])


def test_the_writer_needs_a_transaction_and_a_refusal_writes_nothing(tmp_path):
    from datetime import UTC, datetime

    from tests.test_tracker_helpers import corr, row
    from xfid.store import Store, write_tx
    from xfid.tracker import Tracker, db, transitions

    now = datetime(2026, 12, 1, tzinfo=UTC)
    with Store(tmp_path / "s") as s:
        tr = Tracker(s)
        tr.record_check(corr(row(1.25)), actor="ci", now=now)
        issue = db.issue_row(tr.conn, 1)
        with pytest.raises(RuntimeError, match="inside a write transaction"):
            transitions.write(tr.conn, issue, "ack", actor="a", now=now, owner="x")
        with pytest.raises(TransitionRefused), write_tx(tr.conn):
            transitions.write(tr.conn, issue, "recurred", actor="a", now=now)
        assert db.issue_row(tr.conn, 1) == issue and len(db.history(tr.conn, 1)) == 1
