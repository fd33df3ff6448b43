"""`xfid issues ...` and `xfid check` through the CLI: outputs, actors, bad input changes nothing."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, date, datetime, timedelta

import pytest

from tests.conftest import store_snapshot
from tests.test_tracker_helpers import corr, row
from xfid.store import Store
from xfid.tracker import Tracker

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
BAD = row(1.25)
BOUND = row(0.8, 1.0, op="gemm_tile[m=128,n=128,k=256]", metric="cycles", stat="value", candidate="roofline",
            kind="bound_violation")
LATER = (date.today() + timedelta(days=30)).isoformat()


@pytest.fixture
def seeded(xfid_cli):
    """A store with XF-1 (over_tolerance) and XF-2 (bound_violation) from one check."""
    with Store(xfid_cli.store) as s:
        Tracker(s).record_check(corr(BAD, BOUND, row(1.0, op="fine")), actor="ci", now=T0, label="nightly")
    return xfid_cli


def test_list_json_keys_and_values(seeded):
    r = seeded("issues", "list", "--format", "json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert [i["id"] for i in got] == ["XF-1", "XF-2"]
    assert list(got[0])[:18] == ["id", "fingerprint", "state", "kind", "severity", "target", "workload", "op",
                                 "metric", "stat", "candidate", "reference", "candidate_value",
                                 "reference_value", "rel_error", "owner", "first_seen", "last_seen"]
    assert {k: got[1][k] for k in ("state", "kind", "candidate", "reference", "candidate_value", "rel_error")} == {
        "state": "open", "kind": "bound_violation", "candidate": "roofline", "reference": "rtl",
        "candidate_value": 0.8, "rel_error": pytest.approx(-0.2)}
    assert got[1]["severity"] == pytest.approx(1002.0)
    r = seeded("issues", "list", "--format", "json", "--kind", "bound_violation", "--severity-min", "1000")
    assert [i["id"] for i in json.loads(r.output)] == ["XF-2"]
    assert json.loads(seeded("issues", "list", "--format", "json", "--target", "h100-sxm").output) == []


def test_list_table_and_csv(seeded):
    r = seeded("issues", "list")
    lines = r.output.splitlines()
    assert lines[0].split() == ["id", "state", "kind", "factor", "target", "workload", "op", "metric/stat",
                                "pair", "rel_error", "owner", "last_seen"]
    assert lines[1].split() == ["XF-1", "open", "over_tolerance", "2.5x", "t100-a0",
                                "llama3-8b/decode/bs8/ctx2048/bf16", "layer0.attn.qkv_proj", "latency/value",
                                "archmodel->rtl", "+25.0%", "-", "2026-11-30T09:00:00Z"]
    assert lines[-1] == "2 issue(s)"
    rows = list(csv.DictReader(io.StringIO(seeded("issues", "list", "--format", "csv").output)))
    assert [(x["id"], x["kind"], x["owner"]) for x in rows] == [("XF-1", "over_tolerance", ""),
                                                                 ("XF-2", "bound_violation", "")]


def test_show_text_has_history_observations_and_provenance(seeded):
    r = seeded("issues", "show", "xf-1")
    assert r.exit_code == 0, r.output
    out = r.output
    assert out.startswith("XF-1  open  over_tolerance  factor 2.5x (|error| / tolerance)\n")
    assert "  2026-11-30T09:00:00Z  ci  detected: - -> open  [check 1]  \"first seen in check 1\"" in out
    assert "  check 1 (nightly) 2026-11-30T09:00:00Z  over_tolerance  candidate 1.25 reference 1 s" in out
    assert "    candidate: fixtures/records/archmodel.csv @ line 4  run model-v7  n 1" in out
    assert "    reference: fixtures/records/rtl.csv @ line 9  run rtl-abc123  n 3" in out
    d = json.loads(seeded("issues", "show", "XF-1", "--format", "json").output)
    assert [h["action"] for h in d["history"]] == ["detected"]
    assert d["observations"][0]["reference_source_path"] == "fixtures/records/rtl.csv"


def test_lifecycle_through_the_cli_with_actors(seeded):
    r = seeded("issues", "ack", "XF-1", "--owner", "dana", "--note", "DMA model", "--actor", "lead")
    assert (r.exit_code, r.output) == (0, "XF-1: acknowledged (owner dana)\n")
    r = seeded("issues", "waive", "XF-1", "--reason", "known gap", "--until", LATER, "--max-error", "0.5",
               env={"XFID_ACTOR": "env-actor"})
    assert (r.exit_code, r.output) == (0, f"XF-1: waived until {LATER}\n")
    assert seeded("issues", "note", "XF-1", "--note", "tracking in JIRA-12").output == "XF-1: note added\n"
    assert seeded("issues", "reopen", "XF-1").output == "XF-1: reopened\n"
    assert seeded("issues", "resolve", "XF-1", "--note", "fixed").output == "XF-1: resolved\n"
    d = json.loads(seeded("issues", "show", "XF-1", "--format", "json").output)
    assert [(h["action"], h["to_state"]) for h in d["history"]] == [
        ("detected", "open"), ("ack", "acknowledged"), ("waive", "waived"), ("note", "waived"),
        ("reopen", "reopened"), ("resolve", "resolved")]
    assert [h["actor"] for h in d["history"][1:3]] == ["lead", "env-actor"]
    assert (d["history"][2]["reason"], d["history"][2]["until"], d["history"][2]["max_error"]) == (
        "known gap", LATER, 0.5)
    assert json.loads(seeded("issues", "list", "--format", "json", "--state", "resolved").output)[0]["owner"] == "dana"


YESTERDAY = (date.today() - timedelta(days=1)).isoformat()


@pytest.mark.parametrize(("args", "error"), [
    (("show", "XF-7"), "Error: unknown issue XF-7; the tracker has 2 issue(s) between XF-1 and XF-2 "
                       "(see `xfid issues list`)"),
    (("ack", "XF-9", "--owner", "x"), "Error: unknown issue XF-9; the tracker has 2 issue(s) between XF-1 and XF-2"),
    (("ack", "12b", "--owner", "x"), "Error: bad issue id '12b'; issue ids look like XF-12 (see `xfid issues list`)"),
    (("reopen", "XF-1"), "Error: XF-1 is open: cannot reopen it; allowed from open: ack, resolve, waive, note"),
    (("waive", "XF-1", "--reason", "r", "--until", "31/12/2026"),
     "Error: --until: bad date '31/12/2026'; use YYYY-MM-DD, e.g. 2026-12-31"),
    (("waive", "XF-1", "--reason", "r", "--until", YESTERDAY),
     f"Error: --until {YESTERDAY} is in the past (today is {date.today().isoformat()}); give today or a later date"),
    (("waive", "XF-1", "--reason", " ", "--until", LATER), "Error: waiving XF-1 needs a reason (--reason TEXT)"),
    (("ack", "XF-1", "--owner", ""), "Error: acknowledging XF-1 needs an owner (--owner NAME)"),
])
def test_bad_input_is_an_error_and_changes_nothing(seeded, args, error):
    before = store_snapshot(seeded.store)
    r = seeded("issues", *args)
    assert r.exit_code == 2
    assert r.output.strip().splitlines()[-1].startswith(error), r.output
    assert store_snapshot(seeded.store) == before


def test_click_level_usage_errors(seeded):
    r = seeded("issues", "list", "--state", "closed")
    assert r.exit_code == 2 and "'closed' is not one of 'open', 'acknowledged', 'resolved', 'reopened', 'waived'" in r.output
    r = seeded("issues", "ack", "XF-1")
    assert r.exit_code == 2 and "Missing option '--owner'" in r.output


def test_no_store_is_an_error(xfid_cli):
    r = xfid_cli("issues", "list")
    assert r.exit_code == 2 and r.output.startswith(f"Error: no store at {xfid_cli.store}")


def _fake_engine(monkeypatch, results):
    import xfid.engine.pipeline

    calls = []

    def correlate(store, config, request):
        calls.append({"runs": request.runs, "as_of": request.as_of, "targets": request.targets})
        return results.pop(0)

    # the local engine's entry point, which `correlate_with` calls for --engine local
    monkeypatch.setattr(xfid.engine.pipeline, "correlate", correlate)
    return calls


def test_check_command_with_a_stand_in_engine(xfid_cli, monkeypatch, tmp_path):
    """The CLI wiring of `xfid check` (the real engine is exercised in the end-to-end test below)."""
    Store(xfid_cli.store).close()
    calls = _fake_engine(monkeypatch, [corr(BAD, BOUND, row(1.0, None, op="m")), corr(row(1.01), BOUND),
                                       corr(row(1.01), BOUND)])
    cfg = tmp_path / "xfid.toml"
    cfg.write_text("[tracker]\nresolve_after = 2\n")
    r = xfid_cli("--config", cfg, "check", "--target", "t100-a0", "--run", "r7", "--label", "ci#1")
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[1:] == [
        "  new            2  XF-1, XF-2", "  reopened       0", "  resolved       0", "  still open     0",
        "  waived         0", "  grouped by probable cause: xfid issues summaries --check 1",
        "  missing reference: 1 key(s) (counted, not filed)", "  active issues now: 2 (open, acknowledged or reopened)"]
    assert calls == [{"runs": ("r7",), "as_of": None, "targets": ("t100-a0",)}]
    assert json.loads(xfid_cli("--config", cfg, "check", "--format", "json").output)["counts"]["resolved"] == 0
    d = json.loads(xfid_cli("--config", cfg, "check", "--format", "json", "--actor", "nightly").output)
    assert (d["check_id"], d["resolved"], d["still_open"], d["counts"]["total_open"]) == (3, ["XF-1"], ["XF-2"], 1)
    assert json.loads(xfid_cli("issues", "show", "XF-1", "--format", "json").output)["history"][-1]["actor"] == "nightly"


def test_check_bad_resolve_after(xfid_cli, monkeypatch, tmp_path):
    Store(xfid_cli.store).close()
    _fake_engine(monkeypatch, [corr(BAD)])
    cfg = tmp_path / "xfid.toml"
    cfg.write_text("[tracker]\nresolve_after = 0\n")
    r = xfid_cli("--config", cfg, "check")
    assert (r.exit_code, r.output) == (2, f"Error: {cfg}: [tracker] resolve_after must be an integer >= 1, got 0\n")


def test_check_as_of_goes_to_the_engine_and_a_bad_date_is_an_error(xfid_cli, monkeypatch):
    Store(xfid_cli.store).close()
    calls = _fake_engine(monkeypatch, [corr(BAD), corr(BAD)])
    assert xfid_cli("check", "--as-of", "2026-11-15").exit_code == 0
    assert xfid_cli("check", "--as-of", "2026-11-15T12:30", "--run", "a", "--run", "rtl=b").exit_code == 0
    assert [(c["as_of"], c["runs"]) for c in calls] == [("2026-11-15", None), ("2026-11-15T12:30", ("a", "rtl=b"))]
    monkeypatch.undo()  # the real engine parses --as-of, the same way for every command
    before = store_snapshot(xfid_cli.store)
    r = xfid_cli("check", "--as-of", "last week")
    assert (r.exit_code, r.output) == (2, "Error: --as-of expects a date like 2026-11-30 or an ISO date-time, "
                                          "got 'last week'\n")
    assert store_snapshot(xfid_cli.store) == before


@pytest.mark.parametrize("cmd", [("check",), ("issues",), ("issues", "list"), ("issues", "show"), ("issues", "ack"),
                                 ("issues", "resolve"), ("issues", "reopen"), ("issues", "waive"), ("issues", "note")])
def test_every_command_has_help(xfid_cli, cmd):
    r = xfid_cli(*cmd, "--help")
    assert r.exit_code == 0 and r.output.startswith(f"Usage: cli {' '.join(cmd)}")
    # --actor where the command acts on the tracker; reading commands do not take it
    assert ("--actor" in r.output) == (cmd[-1] not in ("issues", "list", "show"))
