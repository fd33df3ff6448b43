"""Tracker: the state machine (every state x action), check sequences, identity, checks storage."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from tests.test_tracker_helpers import corr, row
from xfid.errors import TrackerError
from xfid.store import Store
from xfid.tracker import STATES, Tracker

pytestmark = pytest.mark.usefixtures("catalog")  # each test on SQLite and on PostgreSQL (tests/servers.py)

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

# Written out by hand (not derived from xfid.tracker.ACTIONS): None = refused.
EXPECTED = {
    ("open", "ack"): "acknowledged", ("open", "resolve"): "resolved", ("open", "reopen"): None,
    ("open", "waive"): "waived", ("open", "note"): "open",
    ("acknowledged", "ack"): "acknowledged", ("acknowledged", "resolve"): "resolved",
    ("acknowledged", "reopen"): None, ("acknowledged", "waive"): "waived", ("acknowledged", "note"): "acknowledged",
    ("resolved", "ack"): None, ("resolved", "resolve"): None, ("resolved", "reopen"): "reopened",
    ("resolved", "waive"): None, ("resolved", "note"): "resolved",
    ("reopened", "ack"): "acknowledged", ("reopened", "resolve"): "resolved", ("reopened", "reopen"): None,
    ("reopened", "waive"): "waived", ("reopened", "note"): "reopened",
    ("waived", "ack"): None, ("waived", "resolve"): "resolved", ("waived", "reopen"): "reopened",
    ("waived", "waive"): "waived", ("waived", "note"): "waived",
}
VERDICTS = ("invalid", "duplicate", "downstream")
for _s in ("invalid", "duplicate", "downstream"):  # only a person moves a verdict on: reopen or another verdict
    EXPECTED.update({(_s, "ack"): None, (_s, "resolve"): None, (_s, "reopen"): "reopened", (_s, "waive"): None,
                     (_s, "note"): _s})
for _s in ("open", "acknowledged", "resolved", "reopened", "waived", *VERDICTS):
    EXPECTED.update({(_s, v): v for v in VERDICTS})  # a verdict applies from every state
ALLOWED_FROM = {"open": "ack, resolve, waive, note", "acknowledged": "ack, resolve, waive, note",
                "resolved": "reopen, note", "reopened": "ack, resolve, waive, note",
                "waived": "resolve, reopen, waive, note", "invalid": "reopen, note",
                "duplicate": "reopen, note", "downstream": "reopen, note"}
ALLOWED_FROM = {k: v + ", invalid, duplicate, downstream" for k, v in ALLOWED_FROM.items()}
ARGS = {"ack": {"owner": "dana"}, "resolve": {}, "reopen": {}, "note": {"note": "looked at it"},
        "waive": {"reason": "known DMA model gap", "until": date(2026, 12, 31), "max_error": 0.5},
        "invalid": {"reason": "the RTL run r8 used a debug build"}, "duplicate": {"of": "XF-2"},
        "downstream": {"of": "XF-2"}}
BAD = row(1.25)   # +25% against a 10% tolerance
GOOD = row(1.02)  # the same key, within tolerance
OTHER = row(1.0, op="layer0.mlp.up_proj")  # a different key, clean


@pytest.fixture
def tracker(tmp_path):
    with Store(tmp_path / "store") as s:
        yield Tracker(s)


def put_in(tr: Tracker, state: str) -> str:
    """One issue XF-1 brought into `state` through real checks and actions (XF-2: another issue, open)."""
    s = tr.record_check(corr(BAD, row(1.5, op="layer0.attn.o_proj")), actor="ci", now=T0)
    iid = s.new[0]
    if state == "acknowledged":
        tr.transition(iid, "ack", actor="lead", owner="dana", now=T0)
    elif state in ("resolved", "reopened"):
        tr.transition(iid, "resolve", actor="lead", now=T0)
        if state == "reopened":
            assert tr.record_check(corr(BAD), actor="ci", now=T0 + timedelta(hours=1)).reopened == [iid]
    elif state == "waived":
        tr.transition(iid, "waive", actor="lead", reason="r", until=date(2026, 12, 20), now=T0)
    elif state in VERDICTS:
        tr.transition(iid, state, actor="lead", now=T0,
                      **({"reason": "the run was broken"} if state == "invalid" else {"of": "XF-2"}))
    assert tr.issue(iid, now=T0)["state"] == state
    return iid


@pytest.mark.parametrize(("state", "action"), sorted(EXPECTED))
def test_every_state_times_every_action(tracker, state, action):
    iid = put_in(tracker, state)
    before = tracker.issue(iid, now=T0)
    want = EXPECTED[(state, action)]
    if want is None:
        with pytest.raises(TrackerError) as e:
            tracker.transition(iid, action, actor="bob", now=T0, **ARGS[action])
        assert str(e.value) == f"XF-1 is {state}: cannot {action} it; allowed from {state}: {ALLOWED_FROM[state]}"
        assert tracker.issue(iid, now=T0) == before  # nothing changed, not even history
        return
    out = tracker.transition(iid, action, actor="bob", now=T0, **ARGS[action])
    assert out["state"] == want
    after = tracker.issue(iid, now=T0)
    last = after["history"][-1]
    assert (last["action"], last["from_state"], last["to_state"], last["actor"]) == (action, state, want, "bob")
    assert len(after["history"]) == len(before["history"]) + 1
    if action == "ack":
        assert after["owner"] == "dana"
    if action == "waive":
        assert (after["waiver_until"], after["waiver_max_error"]) == ("2026-12-31", 0.5)
    elif want == "waived":
        assert (after["waiver_until"], after["waiver_reason"]) == ("2026-12-20", "r")  # a note keeps it
    elif state == "waived":
        assert after["waiver_until"] is None  # leaving waived ends the waiver


# state before a check x what the check sees for the key -> state after (hand-written)
AUTO = {
    ("open", "present"): "open", ("open", "clean"): "resolved", ("open", "absent"): "open",
    ("acknowledged", "present"): "acknowledged", ("acknowledged", "clean"): "resolved",
    ("acknowledged", "absent"): "acknowledged",
    ("resolved", "present"): "reopened", ("resolved", "clean"): "resolved", ("resolved", "absent"): "resolved",
    ("reopened", "present"): "reopened", ("reopened", "clean"): "resolved", ("reopened", "absent"): "reopened",
    ("waived", "present"): "waived", ("waived", "clean"): "resolved", ("waived", "absent"): "waived",
    # a verdict stands whatever a check sees: neither reopened nor resolved
    ("invalid", "present"): "invalid", ("invalid", "clean"): "invalid", ("invalid", "absent"): "invalid",
    ("duplicate", "present"): "duplicate", ("duplicate", "clean"): "duplicate", ("duplicate", "absent"): "duplicate",
    ("downstream", "present"): "downstream", ("downstream", "clean"): "downstream",
    ("downstream", "absent"): "downstream",
}


@pytest.mark.parametrize(("state", "seen"), sorted(AUTO))
def test_every_state_times_every_check_outcome(tracker, state, seen):
    iid = put_in(tracker, state)
    rows = {"present": [BAD, OTHER], "clean": [GOOD, OTHER], "absent": [OTHER]}[seen]
    s = tracker.record_check(corr(*rows), actor="ci", now=T0 + timedelta(days=1))
    assert tracker.issue(iid, now=T0 + timedelta(days=1))["state"] == AUTO[(state, seen)]
    bucket = {"open": "still_open", "acknowledged": "still_open", "reopened": "still_open",
              "waived": "waived", "resolved": "reopened", "invalid": "triaged", "duplicate": "triaged",
              "downstream": "triaged"}[state] if seen == "present" else None
    if bucket:
        assert getattr(s, bucket) == [iid]
    assert s.resolved == ([iid] if AUTO[(state, seen)] == "resolved" and state != "resolved" else [])


def test_sequence_new_still_open_fixed_resolved_regresses_reopened(tracker):
    t = [T0 + timedelta(days=i) for i in range(6)]
    s1 = tracker.record_check(corr(BAD, OTHER, row(1.0, None, op="x")), actor="ci", now=t[0], label="w1")
    assert (s1.new, s1.still_open, s1.total_open, s1.missing_reference) == (["XF-1"], [], 1, 1)
    s2 = tracker.record_check(corr(row(1.3), OTHER), actor="ci", now=t[1])
    assert (s2.new, s2.still_open) == ([], ["XF-1"])
    s3 = tracker.record_check(corr(GOOD, OTHER), actor="ci", now=t[2])
    assert (s3.resolved, s3.total_open) == (["XF-1"], 0)
    s4 = tracker.record_check(corr(GOOD), actor="ci", now=t[3])
    assert (s4.resolved, s4.new) == ([], [])
    s5 = tracker.record_check(corr(row(0.7)), actor="ci", now=t[4])
    assert (s5.reopened, s5.new, s5.total_open) == (["XF-1"], [], 1)
    d = tracker.issue("XF-1", now=t[4])
    assert d["state"] == "reopened" and d["rel_error"] == pytest.approx(-0.3)
    assert [(h["action"], h["to_state"]) for h in d["history"]] == [
        ("detected", "open"), ("auto_resolved", "resolved"), ("recurred", "reopened")]
    assert [o["check_id"] for o in d["observations"]] == [1, 2, 5]
    assert [o["candidate_value"] for o in d["observations"]] == [1.25, 1.3, 0.7]
    o = d["observations"][0]
    assert (o["candidate_source_path"], o["candidate_source_loc"], o["reference_source_loc"],
            o["check_label"]) == ("fixtures/records/archmodel.csv", "line 4", "line 9", "w1")
    assert d["first_seen"] == "2026-12-01T09:00:00Z" and d["last_seen"] == "2026-12-05T09:00:00Z"
    counts = [c["counts"] for c in tracker.checks()]
    assert [(c["new"], c["reopened"], c["resolved"], c["still_open"], c["total_open"]) for c in counts] == [
        (1, 0, 0, 0, 1), (0, 0, 0, 1, 1), (0, 0, 1, 0, 0), (0, 0, 0, 0, 0), (0, 1, 0, 0, 1)]


def test_k_consecutive_clean_checks_resolve(tracker):
    t = iter(T0 + timedelta(hours=i) for i in range(10))
    tracker.record_check(corr(BAD), actor="ci", now=next(t))
    assert tracker.record_check(corr(GOOD), actor="ci", now=next(t), clean_checks_to_resolve=3).resolved == []
    tracker.record_check(corr(OTHER), actor="ci", now=next(t), clean_checks_to_resolve=3)  # absent: not clean
    assert tracker.record_check(corr(GOOD), actor="ci", now=next(t), clean_checks_to_resolve=3).resolved == []
    tracker.record_check(corr(BAD), actor="ci", now=next(t), clean_checks_to_resolve=3)  # back: streak reset
    for _ in range(2):
        assert tracker.record_check(corr(GOOD), actor="ci", now=next(t), clean_checks_to_resolve=3).resolved == []
    assert tracker.record_check(corr(GOOD), actor="ci", now=next(t), clean_checks_to_resolve=3).resolved == ["XF-1"]
    with pytest.raises(TrackerError, match="integer >= 1, got 0"):
        tracker.record_check(corr(GOOD), actor="ci", now=next(t), clean_checks_to_resolve=0)


def test_waiver_expires_at_check_and_on_read(tracker):
    tracker.record_check(corr(BAD, row(2.0, op="b")), actor="ci", now=T0)
    tracker.transition("XF-1", "waive", actor="lead", reason="known", until="2026-12-03", now=T0)
    tracker.transition("XF-2", "waive", actor="lead", reason="known", until="2026-12-03", now=T0)
    s = tracker.record_check(corr(BAD), actor="ci", now=datetime(2026, 12, 3, 23, 59, tzinfo=UTC))
    assert s.waived == ["XF-1"]  # the expiry day itself is still covered
    s = tracker.record_check(corr(BAD), actor="ci", now=datetime(2026, 12, 4, 0, 1, tzinfo=UTC))
    assert (s.waived, s.still_open, s.unwaived) == ([], ["XF-1"], ["XF-1", "XF-2"])
    h = tracker.issue("XF-1")["history"][-1]
    assert (h["action"], h["time"], h["actor"], h["check_id"]) == ("waiver_expired", "2026-12-04T00:00:00Z", "ci", 3)
    tracker.transition("XF-2", "waive", actor="lead", reason="again", until="2026-12-05", now=T0)
    # read after the expiry: the read itself sends it back to open
    assert [i["id"] for i in tracker.issues(state="waived", now=datetime(2026, 12, 5, tzinfo=UTC))] == ["XF-2"]
    assert [i["id"] for i in tracker.issues(state="waived", now=datetime(2026, 12, 6, tzinfo=UTC))] == []
    assert tracker.issue("XF-2")["state"] == "open"


def test_waiver_max_error(tracker):
    tracker.record_check(corr(BAD), actor="ci", now=T0)
    tracker.transition("XF-1", "waive", actor="lead", reason="known", until="2026-12-31", max_error=0.3, now=T0)
    assert tracker.record_check(corr(row(1.28)), actor="ci", now=T0).waived == ["XF-1"]  # 0.28 <= 0.3
    s = tracker.record_check(corr(row(0.6)), actor="ci", now=T0)  # |-0.4| > 0.3
    assert (s.waived, s.still_open, s.unwaived) == ([], ["XF-1"], ["XF-1"])
    h = tracker.issue("XF-1", now=T0)["history"][-1]
    assert (h["action"], h["to_state"], h["note"]) == ("waiver_exceeded", "open",
                                                       "|rel_error| 0.4 > waiver bound 0.3 in check 3")


def test_ids_are_never_reused_and_fingerprints_stable(tracker):
    s = tracker.record_check(corr(BAD, row(3.0, op="b"), row(1.0, 2.0, op="c", kind="bound_violation")),
                             actor="ci", now=T0)
    assert s.new == ["XF-1", "XF-2", "XF-3"]
    tracker.conn.execute("DELETE FROM transitions WHERE issue_num=3")
    tracker.conn.execute("DELETE FROM observations WHERE issue_num=3")
    tracker.conn.execute("DELETE FROM issues WHERE num=3")
    s = tracker.record_check(corr(row(5.0, op="d"), BAD), actor="ci", now=T0)
    assert (s.new, s.still_open) == (["XF-4"], ["XF-1"])
    by = {i["id"]: i for i in tracker.issues()}
    assert by["XF-1"]["fingerprint"] == BAD["fingerprint"]
    assert tracker.issues(severity_min=30) == [by["XF-4"]]  # |4.0| / 0.1 = 40; XF-2 has 20
    assert [i["id"] for i in tracker.issues(kind="over_tolerance", target="t100-a0")] == ["XF-1", "XF-2", "XF-4"]


def test_missing_reference_and_ok_rows_file_nothing(tracker):
    s = tracker.record_check(corr(row(1.0, None), GOOD, row(1.0, op="y")), actor="ci", now=T0)
    assert (s.new, s.missing_reference, s.rows) == ([], 1, 3)
    assert tracker.issues() == []


def test_check_rows_saved_and_listed(tracker):
    c = corr(BAD, OTHER)
    tracker.record_check(c, actor="ci", now=T0, label="nightly")
    got = tracker.check_rows(1)
    assert list(got["fingerprint"]) == list(c.rows["fingerprint"])
    assert list(got["candidate_value"]) == [1.25, 1.0]
    (ck,) = tracker.checks()
    assert (ck["id"], ck["actor"], ck["label"], ck["config_hash"], ck["time"]) == (
        1, "ci", "nightly", "cfg0123456789abc", "2026-12-01T09:00:00Z")
    assert ck["sources"] == [{"source_id": "a1b2", "path": "fixtures/records/rtl.csv",
                              "adapter": "xfid-records", "content_hash": "sha256:feed"}]
    assert len(ck["comparisons"]) == 1 and ck["comparisons"][0]["workload"] is None
    assert ck["comparisons"][0]["mape_ci"] == [0.05, 0.2]
    assert tracker.checks(since=T0 + timedelta(seconds=1)) == []
    assert len(tracker.checks(since=T0, until=T0 + timedelta(seconds=1))) == 1
    with pytest.raises(TrackerError, match="unknown check 7; checks run from 1 to 1"):
        tracker.check_rows(7)


def test_a_check_file_no_check_names_is_a_catalog_mismatch_never_swept(tracker):
    """A `check-N` file is renamed into place only after its COMMIT: one the database does not
    know is a sign of an older database, not garbage (tests/test_checkfiles_integrity.py)."""
    from xfid.store import CatalogMismatch

    d = tracker.store.root / "checks"
    tracker.record_check(corr(BAD), actor="ci", now=T0)
    (d / "check-99.parquet").write_bytes(b"rows of a check this database does not know")
    with pytest.raises(CatalogMismatch, match=r"older than the check files.*--rebuild-catalog"):
        tracker.record_check(corr(BAD), actor="ci", now=T0)
    assert sorted(p.name for p in d.iterdir()) == ["check-1.parquet", "check-99.parquet"]


def test_failed_check_leaves_nothing(tracker, monkeypatch):
    from xfid.tracker import checkfiles

    tracker.record_check(corr(BAD), actor="ci", now=T0)

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(checkfiles, "stage", boom)
    with pytest.raises(OSError):
        tracker.record_check(corr(BAD, row(2.0, op="z")), actor="ci", now=T0)
    assert [c["id"] for c in tracker.checks()] == [1]
    assert [i["id"] for i in tracker.issues()] == ["XF-1"]
    assert sorted(p.name for p in (tracker.store.root / "checks").iterdir()) == ["check-1.parquet"]


def test_events_in_a_period(tracker):
    tracker.record_check(corr(BAD), actor="ci", now=T0)
    tracker.transition("XF-1", "ack", actor="lead", owner="dana", note="mine", now=T0 + timedelta(days=2))
    tracker.record_check(corr(GOOD), actor="ci", now=T0 + timedelta(days=3))
    ev = tracker.events(since=T0 + timedelta(days=1))
    assert [(e["id"], e["from_state"], e["to_state"], e["actor"], e["kind"], e["action"]) for e in ev] == [
        ("XF-1", "open", "acknowledged", "lead", "over_tolerance", "ack"),
        ("XF-1", "acknowledged", "resolved", "ci", "over_tolerance", "auto_resolved")]
    assert ev[0]["note"] == "mine" and ev[0]["fingerprint"] == BAD["fingerprint"]


@pytest.mark.parametrize(("call", "msg"), [
    (("XF-9", "ack", {"owner": "x"}), "unknown issue XF-9; the tracker has 1 issue(s) between XF-1 and XF-1"),
    (("bogus", "ack", {"owner": "x"}), "bad issue id 'bogus'; issue ids look like XF-12"),
    (("XF-1", "close", {}), "unknown action 'close'; actions: ack, resolve, reopen, waive, note"),
    (("XF-1", "ack", {}), "acknowledging XF-1 needs an owner (owner NAME)"),
    (("XF-1", "waive", {"reason": "r", "until": "2026-13-01"}), "until: bad date '2026-13-01'; use YYYY-MM-DD"),
    (("XF-1", "waive", {"reason": "r", "until": "2026-11-30"}),
     "until 2026-11-30 is in the past (today is 2026-12-01); give today or a later date"),
    (("XF-1", "waive", {"until": "2026-12-30"}), "waiving XF-1 needs a reason"),
    (("XF-1", "waive", {"reason": "r", "until": "2026-12-30", "max_error": -1.0}), "max_error must be"),
    (("XF-1", "note", {}), "a note on XF-1 needs text"),
])
def test_bad_transitions_change_nothing(tracker, call, msg):
    tracker.record_check(corr(BAD), actor="ci", now=T0)
    before = tracker.issue("XF-1", now=T0)
    iid, action, kw = call
    with pytest.raises(TrackerError) as e:
        tracker.transition(iid, action, actor="bob", now=T0, **kw)
    assert str(e.value).startswith(msg)
    assert tracker.issue("XF-1", now=T0) == before


def test_read_filters_refuse_unknown_values(tracker):
    with pytest.raises(TrackerError, match="unknown state 'closed'; states: " + ", ".join(STATES)):
        tracker.issues(state="closed")
    with pytest.raises(TrackerError, match="unknown issue XF-1: the tracker has no issues yet"):
        tracker.issue("xf-1")


def test_rows_without_fingerprint_are_refused(tracker):
    c = corr(BAD)
    c.rows.loc[0, "fingerprint"] = None
    c.discrepancies = c.rows
    with pytest.raises(TrackerError, match=r"correlation row 0 \(t100-a0, .*\) has no fingerprint"):
        tracker.record_check(c, actor="ci", now=T0)
    assert tracker.checks() == []


def test_each_check_keeps_its_op_map_coverage(tracker):
    import pandas as pd

    c = corr(BAD)
    c.coverage = pd.DataFrame([
        {"source": "nsys", "raw_op": "ampere_fp16_s16816gemm", "op": "attn.qkv_proj", "matched": True, "records": 4,
         "has_rules": True, "rule": 2},
        {"source": "nsys", "raw_op": "void at::native::elementwise", "op": "void at::native::elementwise",
         "matched": False, "records": 9, "has_rules": True, "rule": -1}])
    first = tracker.record_check(c, actor="ci", now=T0)
    empty = tracker.record_check(corr(BAD), actor="ci", now=T0)
    got = tracker.check_coverage(first.check_id)
    pd.testing.assert_frame_equal(got, c.coverage, check_dtype=False)
    assert tracker.check_coverage(empty.check_id).empty
    assert list(tracker.check_coverage(empty.check_id).columns) == ["source", "raw_op", "op", "matched", "records"]
    with pytest.raises(TrackerError, match="unknown check 9; checks run from 1 to 2"):
        tracker.check_coverage(9)
