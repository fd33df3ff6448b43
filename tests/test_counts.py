"""Counts agree everywhere: each is defined once (xfid.counts) and the demo, the CLI, the API and
the report show the same number; `open` is a state, `active` the group open+acknowledged+reopened."""

from __future__ import annotations

import re
from datetime import date

import pandas as pd
import pytest

import xfid
from tests.conftest import FIXTURES
from tests.demo_run import Demo, run_demo
from tests.demo_run import xfid as run
from xfid import counts
from xfid.errors import TrackerError

CONFIG = FIXTURES / "demo" / "xfid.toml"
INPUTS = [FIXTURES / "records" / "archmodel.csv", FIXTURES / "records" / "measured.csv",
          FIXTURES / "demo" / "t100_block_model.csv"]


# --- the definitions ------------------------------------------------------------------------
def test_unmatched_ops_are_the_names_a_sources_own_rules_missed():
    cov = pd.DataFrame([
        {"source": "ncu", "raw_op": "sm90_gemm", "op": "gemm", "matched": True, "records": 9, "has_rules": True},
        {"source": "ncu", "raw_op": "weird_kernel", "op": "weird_kernel", "matched": False, "records": 2,
         "has_rules": True},
        {"source": "ncu", "raw_op": "other", "op": "other", "matched": False, "records": 5, "has_rules": True},
        {"source": "csv", "raw_op": "attn", "op": "attn", "matched": False, "records": 40, "has_rules": False}])
    got = counts.unmatched_ops(cov)
    assert list(got["raw_op"]) == ["other", "weird_kernel"]  # most records first; a rule-less source is no gap
    assert counts.unmatched_ops(None).empty and counts.unmatched_ops(cov.iloc[:0]).empty
    assert len(counts.unmatched_ops(cov.drop(columns="has_rules"))) == 3  # no has_rules: every unmatched name


def test_active_is_open_acknowledged_reopened_and_nothing_else():
    states = ["open", "acknowledged", "reopened", "resolved", "waived"]
    assert [counts.is_active(s) for s in states] == [True, True, True, False, False]
    assert counts.active([{"state": s} for s in states]) == [{"state": "open"}, {"state": "acknowledged"},
                                                            {"state": "reopened"}]


@pytest.fixture
def store(tmp_path):
    s = xfid.open_store(tmp_path / "s", config=CONFIG)
    s.ingest(INPUTS)
    s.ingest(FIXTURES / "rtl" / "probe_output", adapter="cocotb")
    yield s
    s.close()


def test_open_is_a_state_and_active_the_group_in_api_cli_and_report(store, tmp_path, xfid_cli):
    assert store.check(actor="ci").new == ["XF-1", "XF-2"]
    store.act("XF-1", "ack", owner="dana", actor="ci")
    assert list(store.issues(state="open")["id"]) == ["XF-2"]
    assert list(store.issues(state="active")["id"]) == ["XF-1", "XF-2"]
    assert [i["id"] for i in store.issue_list("active", target="t100-a0")] == ["XF-1", "XF-2"]
    with pytest.raises(TrackerError, match=r"unknown state 'live'; .*or active \(open, acknowledged, reopened\)"):
        store.issues(state="live")
    rep = store.report(date.today().isoformat(), tmp_path / "r.html", html=True)
    assert (rep.active_issues, rep.open_issues) == (2, 1)
    html = rep.path.read_text(encoding="utf-8")
    assert "Discrepancy register — 2 active" in html and 'data-count="active">2</td>' in html
    store.close()
    xfid_cli.store = store.path
    r = xfid_cli("--config", CONFIG, "issues", "list", "--state", "active")
    assert r.exit_code == 0 and r.stdout.splitlines()[-1] == "2 issue(s)", r.output
    r = xfid_cli("--config", CONFIG, "issues", "list", "--state", "open")
    assert r.stdout.splitlines()[-1] == "1 issue(s)", r.output


# --- the demo's store: the same number in every place ---------------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Demo:
    return run_demo(tmp_path_factory)


def _int(pattern: str, text: str) -> int:
    m = re.search(pattern, text, re.M)
    assert m, f"{pattern!r} not in:\n{text[:3000]}"
    return int(m.group(1))


@pytest.fixture(scope="module")
def everywhere(demo) -> dict[str, dict[str, int]]:
    """{count: {where: value}} for the demo's store: the demo's text, the CLI, the API, the report HTML."""
    html = re.sub(r'<span class="t">|</span>|<wbr>', "", (demo.cwd / "reports" / "xfid-demo.html").read_text(encoding="utf-8"))
    import csv

    attached = list(csv.DictReader((demo.cwd / "reports" / "xfid-demo-numbers.csv").read_text(encoding="utf-8").splitlines()))
    pre = ["xfid", "--store", str(demo.store)]
    summary = run(demo.cwd, [*pre, "summary"]).stdout
    correlate = run(demo.cwd, [*pre, "correlate"]).stdout
    listed = run(demo.cwd, [*pre, "issues", "list", "--state", "active"]).stdout
    with xfid.open_store(demo.store, config=CONFIG) as s:
        api = {"sources": s.summary()["sources"], "unmatched": len(counts.unmatched_ops(s.correlate().coverage)),
               "active": len(s.issues(state="active"))}
    return {
        "sources": {"demo": _int(r"ingest: .*?; (\d+) sources in the store", demo.out),
                    "cli": _int(r"records from (\d+) sources", summary), "api": api["sources"],
                    "report": _int(r"Sources — provenance of every source \((\d+)\)", html),
                    "attachment": sum(1 for r in attached if r["section"] == "source")},
        "unmatched": {"demo": _int(r"(\d+) raw ops no op map matched", demo.out),
                      "cli": _int(r"raw ops no op map matched: (\d+)", correlate), "api": api["unmatched"],
                      "report": _int(r"Unmatched raw ops \((\d+)\)", html),
                      "attachment": sum(1 for r in attached if r["section"] == "unmatched-op")},
        "active": {"demo": _int(r"reopened, .*? (\d+) active issues", demo.out), "cli": _int(r"^(\d+) issue\(s\)", listed),
                   "api": api["active"], "report": _int(r"Discrepancy register — (\d+) active", html),
                   "report counts": _int(r'data-count="active">(\d+)<', html)},
    }


@pytest.mark.parametrize("name", ["sources", "unmatched", "active"])
def test_the_demo_store_shows_one_number_per_count(everywhere, name):
    seen = everywhere[name]
    assert len(set(seen.values())) == 1, seen


def test_the_demo_store_counts_are_the_store_contents(everywhere, demo):
    with xfid.open_store(demo.store, config=CONFIG) as s:
        assert everywhere["sources"]["api"] == len(s.sources()) > 100
        assert everywhere["active"]["api"] == len([i for i in s.issue_list() if i["state"] in counts.ACTIVE]) == 13
    assert everywhere["unmatched"]["cli"] > 0  # the demo has raw op names its op maps miss
