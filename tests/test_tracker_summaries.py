"""Summaries: a check's filings grouped by probable common cause; actions on a whole summary; the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.test_tracker_helpers import corr, row
from xfid.errors import TrackerError
from xfid.store import Store
from xfid.tracker import Tracker
from xfid.tracker.summaries import SummarySettings, causes_of, group

pytestmark = pytest.mark.usefixtures("catalog")  # each test on SQLite and on PostgreSQL (tests/servers.py)

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def measured(cand: float, op: str, run: str, **key: str) -> dict:
    """A row whose reference was measured in `run` (from that run's own file)."""
    r = row(cand, op=op, **key)
    r["reference_run"], r["reference_source_path"] = run, f"measurements/{run}.csv"
    return r


def bad_run_check() -> list[dict]:
    """40 keys re-measured by one bad RTL run (all +30%), 60 clean keys from the good run, and two
    unrelated issues: one from the good run, one in another workload."""
    rows = [measured(1.3, f"layer{i}.mlp.up_proj", "rtl-r8") for i in range(40)]
    rows += [measured(1.01, f"layer{i}.attn.qkv_proj", "rtl-r7") for i in range(60)]
    rows.append(measured(1.5, "layer0.attn.o_proj", "rtl-r7"))
    rows.append(measured(0.6, "lm_head", "rtl-r7", workload="llama3-8b/prefill/bs1/ctx512/bf16"))
    return rows


@pytest.fixture
def tracker(tmp_path):
    with Store(tmp_path / "store") as s:
        yield Tracker(s)


def test_forty_issues_from_one_bad_run_make_one_summary_naming_it(tracker):
    s = tracker.record_check(corr(*bad_run_check()), actor="ci", now=T0)
    assert len(s.new) == 42
    got = tracker.summaries()
    assert [(x["id"], x["n_issues"]) for x in got] == [("S-1-1", 40), ("S-1-2", 1), ("S-1-3", 1)]
    top = got[0]
    assert top["cause"]["kind"] == "run"
    assert (top["cause"]["side"], top["cause"]["fidelity"], top["cause"]["run"]) == ("reference", "rtl", "rtl-r8")
    assert top["cause"]["text"] == "reference run rtl-r8 (rtl), from measurements/rtl-r8.csv"
    assert top["issues"] == [f"XF-{n}" for n in range(1, 41)]
    assert (top["rows_with_cause"], top["share"]) == (40, 1.0)
    assert {x["cause"]["kind"] for x in got[1:]} == {"single"}  # nothing the two others share explains them
    assert got[1]["issues"] == ["XF-41"] and got[1]["cause"]["text"].startswith("no common cause: t100-a0")
    assert tracker.summaries(1) == got  # the same check always gives the same ids
    assert tracker.summary("s-1-1") == top
    assert tracker.summary_of("XF-7")["id"] == "S-1-1" and tracker.summary_of("XF-42")["id"] == "S-1-3"


def test_a_cause_every_row_has_explains_nothing(tracker):
    """All 102 rows share the candidate run and the workload; 42 filed of 102 is below the share."""
    tracker.record_check(corr(*bad_run_check()), actor="ci", now=T0)
    kinds = {x["cause"]["kind"] for x in tracker.summaries()}
    assert "workload" not in kinds and not any(x["cause"].get("side") == "candidate" for x in tracker.summaries())
    # with a share threshold of 0.4 the candidate run (42/102) would group all of them
    loose = tracker.summaries(settings=SummarySettings(min_issues=2, min_share=0.4))
    assert [x["n_issues"] for x in loose] == [42]


def test_a_later_check_groups_only_what_it_filed(tracker):
    tracker.record_check(corr(*bad_run_check()), actor="ci", now=T0)
    rows = bad_run_check()
    rows[40] = measured(1.4, "layer0.attn.qkv_proj", "rtl-r7")  # one new issue
    s2 = tracker.record_check(corr(*rows), actor="ci", now=T0 + timedelta(days=1))
    assert s2.new == ["XF-43"]
    assert [(x["id"], x["issues"]) for x in tracker.summaries()] == [("S-2-1", ["XF-43"])]
    assert tracker.summaries(1)[0]["n_issues"] == 40
    with pytest.raises(TrackerError, match=r"unknown check 9; checks run from 1 to 2"):
        tracker.summaries(9)
    with pytest.raises(TrackerError, match=r"unknown summary S-2-2; check 2 has summaries S-2-1 to S-2-1"):
        tracker.summary("S-2-2")
    with pytest.raises(TrackerError, match=r"bad summary id 'S2'; summary ids look like S-3-1"):
        tracker.summary("S2")


def test_grouping_is_by_cause_priority_then_size():
    """Pure: a workload shared by three issues beats an op class shared by two; ids by size."""

    def issue(num, op, workload, run):
        r = measured(1.3, op, run, workload=workload)  # each from its own model run and file
        return {**r, "num": num, "id": f"XF-{num}", "candidate_run": f"m{num}",
                "candidate_source_path": f"model/m{num}.csv", "candidate_config": None}
    filed = [issue(1, "a.gemm", "w1", "r1"), issue(2, "b.gemm", "w1", "r2"), issue(3, "c.x", "w1", "r3"),
             issue(4, "d.y", "w2", "r4"), issue(5, "d.y", "w3", "r5")]
    counts = {c: 1 for f in filed for c in causes_of(f)}
    for f in filed:  # each cause's rows are its filed issues (shares of 1.0)
        for c in causes_of(f):
            counts[c] = sum(c in causes_of(g) for g in filed)
    got = group(7, filed, counts)
    assert [(g["id"], g["cause"]["kind"], g["issues"]) for g in got] == [
        ("S-7-1", "workload", ["XF-1", "XF-2", "XF-3"]), ("S-7-2", "op_class", ["XF-4", "XF-5"])]


def test_an_action_on_a_whole_summary(tracker):
    tracker.record_check(corr(*bad_run_check()), actor="ci", now=T0)
    tracker.transition("XF-3", "resolve", actor="lead", now=T0)
    before = tracker.issue("XF-3", now=T0)
    with pytest.raises(TrackerError, match=r"acknowledging S-1-1 needs an owner"):
        tracker.summary_transition("S-1-1", "ack", actor="lead", now=T0)
    out = tracker.summary_transition("S-1-1", "ack", actor="lead", owner="dana", now=T0)
    assert out["summary"] == "S-1-1" and len(out["changed"]) == 39
    assert {(i["state"], i["owner"]) for i in out["changed"]} == {("acknowledged", "dana")}
    assert out["skipped"] == [{"id": "XF-3", "state": "resolved", "why": "a resolved issue cannot take 'ack'"}]
    assert tracker.issue("XF-3", now=T0) == before
    assert tracker.issue("XF-40", now=T0)["history"][-1]["action"] == "ack"
    # downstream of one of its own issues: that one is the root, the others point at it
    out = tracker.summary_transition("S-1-1", "downstream", actor="lead", of="XF-1", now=T0)
    assert len(out["changed"]) == 39 and {i["related_to"] for i in out["changed"]} == {"XF-1"}
    assert out["skipped"][0] == {"id": "XF-1", "state": "acknowledged", "why": "the issue it is downstream of"}
    with pytest.raises(TrackerError, match=r"no issue of S-1-2 can take 'waive'"):
        tracker.transition("XF-41", "resolve", actor="lead", now=T0)
        tracker.summary_transition("S-1-2", "waive", actor="lead", reason="r", until="2026-12-20", now=T0)


def test_cli_summaries_and_summary_actions(xfid_cli):
    with Store(xfid_cli.store) as s:
        Tracker(s).record_check(corr(*bad_run_check()), actor="ci", now=T0)
    r = xfid_cli("issues", "summaries")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == ["summary", "issues", "share", "cause", "ids"]
    assert lines[1].split()[:3] == ["S-1-1", "40", "40/40"]
    assert "  reference run rtl-r8 (rtl), from measurements/rtl-r8.csv  " in lines[1]
    assert lines[1].endswith("XF-12, ... (+28 more)")
    assert lines[-1].startswith("check 1: 42 issue(s) filed, 3 summary(ies)")
    d = json.loads(xfid_cli("issues", "summaries", "--check", "1", "--format", "json").output)
    assert [(x["id"], x["cause"]["kind"], len(x["issues"])) for x in d] == [
        ("S-1-1", "run", 40), ("S-1-2", "single", 1), ("S-1-3", "single", 1)]
    r = xfid_cli("issues", "ack", "--summary", "S-1-1", "--owner", "dana")
    assert r.exit_code == 0, r.output
    assert r.output.startswith("S-1-1: ack on 40 issue(s) -> acknowledged: XF-1, XF-2,")
    r = xfid_cli("issues", "invalid", "--summary", "S-1-1", "--reason", "rtl-r8 ran a debug build")
    assert r.exit_code == 0 and "invalid on 40 issue(s) -> invalid" in r.output
    r = xfid_cli("issues", "ack", "XF-1", "--summary", "S-1-1", "--owner", "dana")
    assert r.exit_code == 2 and "give one issue (XF-N) or --summary S-C-N to ack, not both" in r.output
    r = xfid_cli("issues", "ack", "--owner", "dana")
    assert r.exit_code == 2 and "not neither" in r.output
    r = xfid_cli("issues", "resolve", "--summary", "S-1-9")
    assert r.exit_code == 2 and "Error: unknown summary S-1-9; check 1 has summaries S-1-1 to S-1-3" in r.output
    show = xfid_cli("issues", "show", "XF-5").output
    assert "  summary S-1-1: reference run rtl-r8 (rtl), from measurements/rtl-r8.csv" in show
    assert json.loads(xfid_cli("issues", "show", "XF-5", "--format", "json").output)["summary"]["id"] == "S-1-1"


def test_real_engine_forty_keys_from_one_bad_measurement_run(xfid_cli, tmp_path):
    """Ingest + check: RTL run r7 measured 60 GEMM tiles, run r8 re-measured 40 of them 30% too
    fast; the model is right. One summary of 40 names run r8 and its file."""
    head = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"

    def line(fid, i, v, run, ts):
        return f'{fid},t100-a0,gemm-sweep,"gemm_tile[m={64 * (i + 1)},n=128,k=256]",cycles,value,{v},cycles,{run},{ts}\n'

    files = {"rtl-r7.csv": [line("rtl", i, 1000 + i, "rtl-r7", "2026-11-01T00:00:00Z") for i in range(60)],
             "rtl-r8.csv": [line("rtl", i, round((1000 + i) * 0.7), "rtl-r8", "2026-11-20T00:00:00Z") for i in range(40)],
             "arch.csv": [line("archmodel", i, 1000 + i, "model-v1", "2026-11-01T00:00:00Z") for i in range(60)]}
    for name, lines in files.items():
        (tmp_path / name).write_text(head + "".join(lines))
    assert xfid_cli("ingest", *(tmp_path / n for n in files)).exit_code == 0
    r = xfid_cli("check", "--format", "json", "--actor", "ci")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.output)["new"]) == 40
    got = json.loads(xfid_cli("issues", "summaries", "--format", "json").output)
    assert len(got) == 1 and got[0]["n_issues"] == 40 and got[0]["share"] == 1.0
    assert (got[0]["cause"]["kind"], got[0]["cause"]["run"], got[0]["cause"]["fidelity"]) == ("run", "rtl-r8", "rtl")
    assert got[0]["cause"]["text"].startswith("reference run rtl-r8 (rtl), from ")
    assert got[0]["cause"]["text"].endswith("rtl-r8.csv")


@pytest.mark.parametrize(("section", "message"), [
    ({"summary_min_issues": 1}, r"x.toml: \[tracker\] summary_min_issues must be an integer >= 2, got 1"),
    ({"summary_min_issues": True}, r"summary_min_issues must be an integer >= 2, got True"),
    ({"summary_min_share": 0}, r"x.toml: \[tracker\] summary_min_share must be a number in \(0, 1\], got 0"),
    ({"summary_min_share": 1.5}, r"summary_min_share must be a number in \(0, 1\], got 1.5"),
])
def test_summary_settings_are_checked(section, message):
    from xfid.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        SummarySettings.from_config(section, "x.toml")
    assert SummarySettings.from_config({}, "x.toml") == SummarySettings(2, 0.5)
    assert SummarySettings.from_config({"summary_min_issues": 3, "summary_min_share": 1}, "x") == SummarySettings(3, 1.0)


def _plain_group(filed, counts, s):
    """The rule of docs/tracker.md as plain loops: recount every cause each round, take the best."""
    from xfid.tracker.summaries import CAUSES, SIDES

    of = {r["num"]: set(causes_of(r)) for r in filed}
    left, groups = set(of), []
    while True:
        best = None
        for c in {c for n in left for c in of[n]}:
            members = sorted(n for n in left if c in of[n])
            k, total = len(members), max(counts.get(c, 0), len(members))
            if k < s.min_issues or k / total < s.min_share:
                continue
            side = SIDES.index(c[1][0]) if c[0] in ("run", "source", "config") else 0
            key = (-k, CAUSES.index(c[0]), -k / total, side, repr(c[1]))
            if best is None or key < best[0]:
                best = (key, c, members)
        if best is None:
            break
        groups.append((best[1][0], [f"XF-{n}" for n in best[2]]))
        left -= set(best[2])
    groups += [("single", [f"XF-{n}"]) for n in sorted(left)]
    groups.sort(key=lambda g: (-len(g[1]), int(g[1][0][3:])))
    return groups


@pytest.mark.parametrize("seed", range(12))
def test_grouping_equals_the_plain_rule_on_seeded_filings(seed):
    import random

    rnd = random.Random(seed)
    filed = []
    for n in range(1, rnd.randint(5, 60)):
        r = measured(1.3, f"layer{rnd.randint(0, 3)}.{rnd.choice(['mlp.up', 'attn.qkv', 'lm_head'])}",
                     rnd.choice(["r1", "r2", "r3", "r4"]), workload=rnd.choice(["w1", "w2", "w3"]))
        r.update(num=n, id=f"XF-{n}", candidate_run=rnd.choice(["m1", "m2"]), candidate_config=rnd.choice(
            [None, '{"vllm_version": "0.8.5"}', '{"vllm_version": "0.11.0"}']))
        filed.append(r)
    counts: dict = {}
    for r in filed:
        for c in causes_of(r):
            counts[c] = counts.get(c, 0) + rnd.randint(1, 3)  # each cause's rows: its filings and some more
    for s in (SummarySettings(), SummarySettings(3, 0.3), SummarySettings(2, 0.9)):
        got = group(1, filed, counts, s)
        assert [(g["cause"]["kind"], g["issues"]) for g in got] == _plain_group(filed, counts, s)
        assert sorted(i for g in got for i in g["issues"]) == sorted(r["id"] for r in filed)  # each issue once
