"""Triage verdicts (invalid, duplicate, downstream): arguments, cycles, what a later check does, the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.test_tracker_helpers import corr, row
from xfid.errors import TrackerError
from xfid.store import Store
from xfid.tracker import Tracker

pytestmark = pytest.mark.usefixtures("catalog")  # each test on SQLite and on PostgreSQL (tests/servers.py)

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
A, B, C = row(1.25), row(1.4, op="layer0.attn.o_proj"), row(0.7, op="layer0.mlp.up_proj")


@pytest.fixture
def tracker(tmp_path):
    with Store(tmp_path / "store") as s:
        tr = Tracker(s)
        assert tr.record_check(corr(A, B, C), actor="ci", now=T0).new == ["XF-1", "XF-2", "XF-3"]
        yield tr


def test_invalid_needs_a_reason_and_keeps_it(tracker):
    for bad in (None, "  "):
        with pytest.raises(TrackerError, match=r"marking XF-1 invalid needs a reason: .*\(reason TEXT\)"):
            tracker.transition("XF-1", "invalid", actor="lead", reason=bad, now=T0)
    assert tracker.issue("XF-1", now=T0)["state"] == "open"
    d = tracker.transition("XF-1", "invalid", actor="lead", reason=" RTL run r8 used a debug build ", now=T0)
    assert (d["state"], d["triage_reason"], d["related_to"]) == ("invalid", "RTL run r8 used a debug build", None)
    h = tracker.issue("XF-1", now=T0)["history"][-1]
    assert (h["action"], h["from_state"], h["to_state"], h["reason"], h["related"]) == (
        "invalid", "open", "invalid", "RTL run r8 used a debug build", None)


def test_duplicate_and_downstream_name_an_existing_other_issue(tracker):
    with pytest.raises(TrackerError, match=r"needs the issue it is duplicate of \(of XF-N\)"):
        tracker.transition("XF-2", "duplicate", actor="lead", now=T0)
    with pytest.raises(TrackerError, match=r"XF-2 cannot be downstream of itself"):
        tracker.transition("XF-2", "downstream", actor="lead", of="xf-2", now=T0)
    with pytest.raises(TrackerError, match=r"of XF-9: unknown issue XF-9; the tracker has 3 issue"):
        tracker.transition("XF-2", "duplicate", actor="lead", of="XF-9", now=T0)
    with pytest.raises(TrackerError, match=r"bad issue id 'one'"):
        tracker.transition("XF-2", "duplicate", actor="lead", of="one", now=T0)
    d = tracker.transition("XF-2", "duplicate", actor="lead", of="1", now=T0)
    assert (d["state"], d["related_to"]) == ("duplicate", "XF-1")
    d = tracker.transition("XF-3", "downstream", actor="lead", of="XF-2", now=T0)
    assert (d["state"], d["related_to"]) == ("downstream", "XF-2")
    assert tracker.issue("XF-3", now=T0)["history"][-1]["related"] == "XF-2"


def test_no_cycles_through_duplicate_or_downstream_links(tracker):
    tracker.transition("XF-2", "duplicate", actor="lead", of="XF-1", now=T0)
    tracker.transition("XF-3", "downstream", actor="lead", of="XF-2", now=T0)
    before = tracker.issue("XF-1", now=T0)
    with pytest.raises(TrackerError, match=r"of XF-3 would make a cycle: XF-1 -> XF-3 -> XF-2 -> XF-1"):
        tracker.transition("XF-1", "downstream", actor="lead", of="XF-3", now=T0)
    assert tracker.issue("XF-1", now=T0) == before  # nothing written
    # once XF-2 is reopened its link is gone, and the same verdict is no cycle any more
    tracker.transition("XF-2", "reopen", actor="lead", now=T0)
    assert tracker.issue("XF-2", now=T0)["related_to"] is None
    assert tracker.transition("XF-1", "downstream", actor="lead", of="XF-3", now=T0)["related_to"] == "XF-3"


@pytest.mark.parametrize("verdict", ["invalid", "duplicate", "downstream"])
def test_a_later_check_keeps_the_verdict_and_says_so_once(tracker, verdict):
    kw = {"reason": "bad run"} if verdict == "invalid" else {"of": "XF-2"}
    tracker.transition("XF-1", verdict, actor="lead", now=T0, **kw)
    t1, t2, t3 = (T0 + timedelta(days=i) for i in (1, 2, 3))
    s1 = tracker.record_check(corr(row(1.3), B, C), actor="ci", now=t1)
    assert (s1.new, s1.reopened, s1.still_open, s1.triaged) == ([], [], ["XF-2", "XF-3"], ["XF-1"])
    s2 = tracker.record_check(corr(row(1.35), B, C), actor="ci", now=t2)
    assert s2.triaged == ["XF-1"] and s2.counts()["triaged"] == 1
    s3 = tracker.record_check(corr(row(1.0), B, C), actor="ci", now=t3)  # clean: not resolved either
    assert (s3.resolved, s3.triaged) == ([], [])
    d = tracker.issue("XF-1", now=t3)
    assert d["state"] == verdict
    seen = [h for h in d["history"] if h["action"] == "still_seen"]
    assert len(seen) == 1  # said once per verdict, not at every check
    assert (seen[0]["from_state"], seen[0]["to_state"], seen[0]["check_id"]) == (verdict, verdict, 2)
    assert f"stays {verdict}" in seen[0]["note"] and "(not reopened)" in seen[0]["note"]
    assert [o["check_id"] for o in d["observations"]] == [1, 2, 3]  # the observations go on
    assert d["rel_error"] == pytest.approx(0.35)
    # a new verdict after a reopen is said again at its first check
    tracker.transition("XF-1", "reopen", actor="lead", now=t3)
    tracker.transition("XF-1", verdict, actor="lead", now=t3, **kw)
    tracker.record_check(corr(row(1.3), B, C), actor="ci", now=t3 + timedelta(hours=1))
    assert [h["action"] for h in tracker.issue("XF-1", now=t3)["history"]].count("still_seen") == 2


def test_cli_verdict_actions(xfid_cli):
    with Store(xfid_cli.store) as s:
        Tracker(s).record_check(corr(A, B, C), actor="ci", now=T0)
    r = xfid_cli("issues", "invalid", "XF-1", "--reason", "the RTL run r8 used a debug build")
    assert (r.exit_code, r.output) == (0, "XF-1: invalid\n")
    r = xfid_cli("issues", "duplicate", "XF-2", "--of", "XF-1")
    assert (r.exit_code, r.output) == (0, "XF-2: duplicate of XF-1\n")
    r = xfid_cli("issues", "downstream", "XF-3", "--of", "XF-3")
    assert r.exit_code == 2 and "Error: XF-3 cannot be downstream of itself; give another issue (--of XF-N)" in r.output
    r = xfid_cli("issues", "downstream", "XF-1", "--of", "XF-2")
    assert r.exit_code == 2 and "--of XF-2 would make a cycle: XF-1 -> XF-2 -> XF-1" in r.output
    assert "Traceback" not in r.output
    r = xfid_cli("issues", "invalid", "XF-3")
    assert r.exit_code == 2 and "--reason" in r.output
    out = xfid_cli("issues", "show", "XF-1").output
    assert "  invalid: the RTL run r8 used a debug build (its rows are left out of the statistics)" in out
    assert "invalid: open -> invalid  [reason=the RTL run r8 used a debug build]" in out
    assert "  duplicate of XF-1" in xfid_cli("issues", "show", "XF-2").output
    listed = json.loads(xfid_cli("issues", "list", "--state", "duplicate", "--format", "json").output)
    assert [(i["id"], i["related_to"]) for i in listed] == [("XF-2", "XF-1")]
    r = xfid_cli("issues", "reopen", "XF-2")
    assert (r.exit_code, r.output) == (0, "XF-2: reopened\n")


HEAD = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"


def _records(path, fidelity: str, run: str, values: dict[str, float]):
    path.write_text(HEAD + "".join(f'{fidelity},t100-a0,gemm-sweep,"{op}",cycles,value,{v},cycles,{run},'
                                   f"2026-11-01T00:00:00Z\n" for op, v in values.items()))
    return path


def _mape(xfid_cli, check_id: int) -> tuple[float, int, list]:
    with Store(xfid_cli.store) as s:
        c = Tracker(s).checks()[check_id - 1]
    top = [x for x in c["comparisons"] if (x["candidate"], x["reference"], x["metric"]) == ("archmodel", "rtl", "cycles")]
    assert len(top) == 1
    return top[0]["mape"], top[0]["n"], c["settings"].get("excluded_keys")


def test_an_invalid_key_leaves_the_pair_statistics_until_reopened(xfid_cli, tmp_path):
    """The real engine: marking the worst key invalid lowers the pair's MAPE; reopening brings it back."""
    ops = {f"gemm_tile[m={m},n=128,k=256]": v for m, v in ((128, 1000), (256, 2000), (512, 4000))}
    rtl = _records(tmp_path / "rtl.csv", "rtl", "rtl-a", ops)
    arch = _records(tmp_path / "arch.csv", "archmodel", "model-v1",
                    dict(zip(ops, (1500, 2020, 4040), strict=True)))  # +50%, +1%, +1%
    assert xfid_cli("ingest", rtl, arch).exit_code == 0
    r = xfid_cli("check", "--format", "json", "--actor", "ci")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["new"] == ["XF-1"]
    mape1, n1, ex1 = _mape(xfid_cli, 1)
    assert (mape1, n1, ex1) == (pytest.approx((0.5 + 0.01 + 0.01) / 3), 3, None)
    assert xfid_cli("issues", "invalid", "XF-1", "--reason", "tile 128 ran with a debug clock").exit_code == 0
    r = xfid_cli("check", "--format", "json", "--actor", "ci")
    assert r.exit_code == 0, r.output
    s2 = json.loads(r.output)
    assert (s2["new"], s2["reopened"], s2["triaged"]) == ([], [], ["XF-1"])  # seen again, kept invalid
    mape2, n2, ex2 = _mape(xfid_cli, 2)
    assert (mape2, n2) == (pytest.approx(0.01), 2)
    assert ex2 == [["t100-a0", "gemm-sweep", "gemm_tile[m=128,n=128,k=256]", "cycles", "value", "archmodel", "rtl"]]
    assert xfid_cli("issues", "reopen", "XF-1").exit_code == 0
    assert xfid_cli("check", "--format", "json", "--actor", "ci").exit_code == 0
    mape3, n3, ex3 = _mape(xfid_cli, 3)
    assert (mape3, n3, ex3) == (pytest.approx(mape1), 3, None)
