"""One output path: whatever a command prints goes through `textsafe.stream_safe`, so a hostile
name taken from an ingested file (an OSC title sequence, a bidi override, C1 controls) never
reaches the terminal raw — in every command and format, including the ones that format their
own text (calibrate, compare's text/Markdown/JUnit, issues' echo and CSV)."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from tests.test_engine_helpers import rec, write_csv
from xfid.textsafe import SafeStream, stream_safe

ESC = "\x1b"
EVIL = f"qkv{ESC}]0;owned\x07\u202etxt\x85\x9b2J"
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")


def assert_clean(text: str) -> None:
    hit = RAW.search(text)
    assert hit is None, f"raw {hit.group()!r} at {hit.start()}: {text[max(0, hit.start() - 40):hit.start() + 40]!r}"


def test_stream_safe_escapes_as_json_escapes_and_keeps_crlf():
    assert stream_safe("a\tb\r\nc\n") == "a\tb\r\nc\n"
    assert stream_safe(f"x{ESC}[2J\rover\x85\u202e") == "x\\u001b[2J\\u000dover\\u0085\\u202e"
    doc = json.dumps({"op": EVIL}, ensure_ascii=False)
    assert json.loads(stream_safe(doc)) == {"op": EVIL}  # valid JSON, the same value


def test_safe_stream_passes_bytes_and_delegates():
    out = io.StringIO()
    s = SafeStream(out)
    assert s.write(f"{ESC}x") == 2 and out.getvalue() == "\\u001bx"
    assert s.getvalue() == out.getvalue()  # anything else is the wrapped stream's


@pytest.fixture
def hostile(xfid_cli, tmp_path):
    """A store whose op, workload and run names carry escapes, with a check that filed issues."""
    d = tmp_path / "in"
    d.mkdir()
    rows_m = [rec("measured", EVIL, 1.0, workload=EVIL, run=EVIL), rec("measured", "plain", 1.0)]
    rows_r = [rec("roofline", EVIL, 0.5, workload=EVIL), rec("roofline", "plain", 0.9)]
    rows_a = [rec("archmodel", EVIL, 3.0, workload=EVIL), rec("archmodel", "plain", 1.0)]
    write_csv(d / "m.csv", rows_m)
    write_csv(d / "r.csv", rows_r)
    write_csv(d / "a.csv", rows_a)
    assert (r := xfid_cli("ingest", "--adapter", "xfid-records", d)).exit_code == 0, r.output
    assert (r := xfid_cli("check")).exit_code in (0, 1), r.output
    return xfid_cli


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_calibrate_output_is_clean(hostile, fmt):
    r = hostile("calibrate", "--candidate", "roofline", "--reference", "measured", "--target", "h100-sxm",
                "--format", fmt)
    assert r.exit_code == 0, r.output
    assert_clean(r.output)
    if fmt == "json":
        json.loads(r.output[: r.output.rindex("}") + 1])


@pytest.mark.parametrize("fmt", ["text", "markdown", "junit", "json"])
def test_compare_output_is_clean_in_every_format(hostile, tmp_path, fmt):
    base = tmp_path / "base.json"
    assert (r := hostile("snapshot", "-o", base)).exit_code == 0, r.output
    write_csv(tmp_path / "in" / "a2.csv", [rec("archmodel", EVIL, 9.0, workload=EVIL, run="r2")])
    assert hostile("ingest", "--adapter", "xfid-records", tmp_path / "in" / "a2.csv").exit_code == 0
    r = hostile("compare", "--baseline", base, "--format", fmt, "--fail-on", "any")
    assert r.exit_code in (0, 1), r.output
    assert_clean(r.output)
    assert "qkv" in r.output  # the name is shown, escaped, not dropped


def test_issues_outputs_and_echoes_are_clean(hostile):
    lst = hostile("issues", "list", "--format", "json")
    assert lst.exit_code == 0, lst.output
    ids = [i["id"] for i in json.loads(lst.output)]
    assert ids, "the hostile store should have filed issues"
    owner = f"ann{ESC}]0;pwn\x07\u202e"
    ack = hostile("issues", "ack", ids[0], "--owner", owner)
    assert ack.exit_code == 0, ack.output
    assert_clean(ack.output)
    for fmt in ("table", "csv", "json"):
        r = hostile("issues", "list", "--format", fmt)
        assert r.exit_code == 0, r.output
        assert_clean(r.output)
    rows = list(csv.DictReader(io.StringIO(hostile("issues", "list", "--format", "csv").output)))
    assert any("ann" in (row.get("owner") or "") for row in rows)
    show = hostile("issues", "show", ids[0])
    assert show.exit_code == 0 and "ann" in show.output
    assert_clean(show.output)


@pytest.mark.parametrize("args", [("correlate", "--format", "markdown"), ("correlate", "--format", "json"),
                                  ("sources",), ("summary",), ("history", "--help")])
def test_other_commands_are_clean(hostile, args):
    r = hostile(*args)
    assert r.exit_code == 0, r.output
    assert_clean(r.output)
