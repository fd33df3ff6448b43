"""Triage due dates: an open or reopened issue is due `[tracker] triage_days` working days after
it needed triage; `issues list --overdue` shows what is past it; acknowledging triages it."""

from __future__ import annotations

import json
from datetime import date

import pytest

from tests.test_engine_helpers import rec, write_csv
from xfid.tracker.due import add_working_days, annotate


@pytest.mark.parametrize("start,days,due", [
    (date(2026, 12, 2), 3, date(2026, 12, 7)),   # Wednesday + 3 working days: Monday
    (date(2026, 12, 4), 1, date(2026, 12, 7)),   # Friday + 1: Monday
    (date(2026, 12, 5), 1, date(2026, 12, 7)),   # Saturday + 1: Monday
    (date(2026, 12, 2), 0, date(2026, 12, 2)),
    (date(2026, 12, 2), 10, date(2026, 12, 16)),
])
def test_working_days(start, days, due):
    assert add_working_days(start, days) == due


def test_only_untriaged_states_are_due():
    today = date(2026, 12, 10)
    o = annotate({"state": "open", "first_seen": "2026-12-02T09:00:00Z"}, 3, today)
    assert (o["triage_by"], o["overdue"]) == ("2026-12-07", True)
    r = annotate({"state": "reopened", "first_seen": "2026-10-01T00:00:00Z", "updated_at": "2026-12-09T10:00:00Z"},
                 3, today)
    assert (r["triage_by"], r["overdue"]) == ("2026-12-14", False)  # counted from the reopening
    for state in ("acknowledged", "waived", "resolved"):
        a = annotate({"state": state, "first_seen": "2026-01-01T00:00:00Z"}, 3, today)
        assert (a["triage_by"], a["overdue"]) == (None, False)


def test_overdue_on_the_command_line(xfid_cli, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_csv(d / "m.csv", [rec("measured", "a", 1.0), rec("measured", "b", 1.0)])
    write_csv(d / "r.csv", [rec("archmodel", "a", 2.0), rec("archmodel", "b", 3.0)])
    assert xfid_cli("ingest", "--adapter", "xfid-records", d).exit_code == 0
    assert xfid_cli("check").exit_code in (0, 1)
    listed = json.loads(xfid_cli("issues", "list", "--format", "json").output)
    assert len(listed) == 2 and all(i["triage_by"] and not i["overdue"] for i in listed)  # filed today
    cfg = tmp_path / "xfid.toml"
    cfg.write_text("[tracker]\ntriage_days = 0\n")  # due the day it was filed: overdue from tomorrow
    assert xfid_cli("--config", cfg, "issues", "list", "--overdue").output.count("XF-") == 0
    # the same store seen a week later: both overdue until one is acknowledged
    import xfid.api

    real = xfid.api.XfidStore._due

    def a_week_later(self, issue):
        from datetime import UTC, datetime, timedelta

        from xfid.tracker.due import annotate as ann

        return ann(issue, 3, (datetime.now(UTC) + timedelta(days=7)).date())

    xfid.api.XfidStore._due = a_week_later
    try:
        over = xfid_cli("issues", "list", "--overdue", "--format", "json")
        assert [i["id"] for i in json.loads(over.output)] == ["XF-1", "XF-2"]
        assert xfid_cli("issues", "ack", "XF-1", "--owner", "ann").exit_code == 0
        over = json.loads(xfid_cli("issues", "list", "--overdue", "--format", "json").output)
        assert [i["id"] for i in over] == ["XF-2"]
        assert "(overdue)" in xfid_cli("issues", "show", "XF-2").output
    finally:
        xfid.api.XfidStore._due = real
    bad = tmp_path / "bad.toml"
    bad.write_text("[tracker]\ntriage_days = -1\n")
    r = xfid_cli("--config", bad, "issues", "list")
    assert r.exit_code == 2 and "triage_days" in r.output


def test_an_issue_clean_once_of_two_is_listed_as_resolving(xfid_cli, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_csv(d / "m.csv", [rec("measured", "a", 1.0)])
    write_csv(d / "r.csv", [rec("archmodel", "a", 2.0)])
    assert xfid_cli("ingest", "--adapter", "xfid-records", d).exit_code == 0
    assert xfid_cli("check").exit_code in (0, 1)
    write_csv(tmp_path / "fix.csv", [rec("archmodel", "a", 1.01, run="r2")])
    assert xfid_cli("ingest", "--adapter", "xfid-records", tmp_path / "fix.csv").exit_code == 0
    first = xfid_cli("check")
    assert "resolving (clean, not yet in enough consecutive checks): XF-1 1/2" in first.output, first.output
    assert json.loads(xfid_cli("issues", "show", "XF-1", "--format", "json").output)["state"] == "open"
    second = json.loads(xfid_cli("check", "--format", "json").output)
    assert second["resolved"] == ["XF-1"] and second["resolving"] == []
