"""Random sequences of checks and actions: the tracker's invariants hold after every step."""

from __future__ import annotations

import tempfile
from datetime import UTC, date, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_tracker_helpers import corr, row
from xfid.errors import TrackerError
from xfid.store import Store
from xfid.tracker import ACTIVE, STATES, Tracker

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
OPS = ("a", "b", "c")
# per key what a check sees: 0 absent, 1 clean, 2 over tolerance
check_step = st.tuples(st.just("check"), st.tuples(*[st.sampled_from((0, 1, 2))] * len(OPS)))
action_step = st.tuples(st.sampled_from(("ack", "resolve", "reopen", "waive", "note")),
                        st.integers(1, len(OPS)))
steps = st.lists(st.one_of(check_step, action_step), min_size=1, max_size=14)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_invariants_over_random_sequences(seq):
    with tempfile.TemporaryDirectory() as d, Store(d) as s:
        tr = Tracker(s)
        fp_by_op = {op: row(1.0, op=op)["fingerprint"] for op in OPS}
        done = 0  # successful manual actions
        for n, (what, arg) in enumerate(seq):
            now = T0 + timedelta(hours=n)
            if what == "check":
                rows = [row({1: 1.01, 2: 1.5}[v], op=op) for op, v in zip(OPS, arg, strict=True) if v]
                before = {i["fingerprint"]: i["state"] for i in tr.issues(now=now)}
                summ = tr.record_check(corr(*rows), actor="ci", now=now)
                after = {i["fingerprint"]: i["state"] for i in tr.issues(now=now)}
                for op, v in zip(OPS, arg, strict=True):
                    fp = fp_by_op[op]
                    if v == 2:  # seen beyond tolerance: filed and not resolved
                        assert after[fp] in (*ACTIVE, "waived")
                        if before.get(fp) == "resolved":
                            assert after[fp] == "reopened"
                    elif v == 1 and fp in before:  # clean with K = 1: resolved
                        assert after[fp] == "resolved"
                    elif fp in before:  # absent: untouched
                        assert after[fp] == before[fp]
                assert summ.total_open == sum(1 for st_ in after.values() if st_ in ACTIVE)
            else:
                iid = f"XF-{arg}"
                kw = {"ack": {"owner": "o"}, "note": {"note": "n"},
                      "waive": {"reason": "r", "until": date(2026, 12, 31)}}.get(what, {})
                try:
                    tr.transition(iid, what, actor="u", now=now, **kw)
                    done += 1
                except TrackerError:
                    pass
        issues = tr.issues(now=T0)
        assert [i["id"] for i in issues] == [f"XF-{k}" for k in range(1, len(issues) + 1)]
        manual = 0
        for i in issues:
            assert i["state"] in STATES
            d_ = tr.issue(i["id"], now=T0)
            assert d_["history"][0]["action"] == "detected"
            assert d_["history"][-1]["to_state"] == i["state"]  # the state is its history's last word
            for a, b in zip(d_["history"], d_["history"][1:], strict=False):
                assert b["from_state"] == a["to_state"]  # no gap, no lost transition
            manual += sum(1 for h in d_["history"] if h["actor"] == "u")
        assert manual == done
