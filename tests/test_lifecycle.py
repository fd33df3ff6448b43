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
             "auto_resolved": "resolved"},
    "acknowledged": {"ack": "acknowledged", "resolve": "resolved", "waive": "waived", "note": "acknowledged",
                     "auto_resolved": "resolved"},
    "resolved": {"reopen": "reopened", "note": "resolved", "recurred": "reopened"},
    "reopened": {"ack": "acknowledged", "resolve": "resolved", "waive": "waived", "note": "reopened",
                 "auto_resolved": "resolved"},
    "waived": {"resolve": "resolved", "reopen": "reopened", "waive": "waived", "note": "waived",
               "auto_resolved": "resolved", "waiver_expired": "open", "waiver_exceeded": "open"},
}
ALL_EVENTS = ("ack", "resolve", "reopen", "waive", "note",
              "detected", "recurred", "auto_resolved", "waiver_expired", "waiver_exceeded")


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
    assert str(e.value.for_issue("XF-3")) == "XF-3 is resolved: cannot ack it; allowed from resolved: reopen, note"


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
])
def test_row_changes(state, event, new, want):
    assert apply(state, event) == new
    assert row_changes(state, event, new) == want
