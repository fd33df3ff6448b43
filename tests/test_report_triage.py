"""The report's triage part (xfid.report.triage): which side moved, summaries, overdue, from real checks."""

from __future__ import annotations

import csv
import re
from datetime import date

from xfid.report.triage import overdue, sentences

HEADER = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"


def _this_week() -> list[str]:
    from datetime import UTC, datetime, timedelta

    today = datetime.now(UTC).date()
    return ["--since", (today - timedelta(days=6)).isoformat(), "--until", today.isoformat()]


def _ingest(xfid_cli, tmp_path, name, rows, meta=None):
    f = tmp_path / name
    f.write_text(HEADER + "".join(rows))
    args = [a for k, v in (meta or {}).items() for a in ("--meta", f"{k}={v}")]
    assert xfid_cli("ingest", f, *args).exit_code == 0


def test_report_says_which_side_moved_and_groups_the_run(xfid_cli, tmp_path):
    """Three keys; the measured reference is re-run on a new stack and every error jumps: the
    report (PDF text and HTML page) says the reference moved, with the runs and the stack, and
    its summary groups the three issues under that run."""
    ops = ("gemm", "attn", "norm")
    _ingest(xfid_cli, tmp_path, "m1.csv", [f"measured,h100-sxm,w,{o},latency,value,100,us,r7,2026-11-01T00:00:00Z\n"
                                           for o in ops], {"vllm_version": "0.8.5"})
    _ingest(xfid_cli, tmp_path, "a1.csv", [f"archmodel,h100-sxm,w,{o},latency,value,102,us,model-v1,"
                                           "2026-11-01T00:00:00Z\n" for o in ops])
    assert xfid_cli("check").exit_code in (0, 1)
    _ingest(xfid_cli, tmp_path, "m2.csv", [f"measured,h100-sxm,w,{o},latency,value,80,us,r8,2026-11-02T00:00:00Z\n"
                                           for o in ops], {"vllm_version": "0.11.0"})
    assert xfid_cli("check").exit_code in (0, 1)
    out = tmp_path / "r.pdf"
    r = xfid_cli("report", *_this_week(), "-o", out)
    assert r.exit_code == 0, r.output
    import subprocess

    from tests.servers import need_tool

    text = subprocess.run([need_tool("pdftotext", "poppler-utils"), "-layout", str(out), "-"], capture_output=True, text=True, check=True).stdout
    flat = re.sub(r"\s+", " ", text)
    assert "Which side moved" in flat
    assert "moved: reference — measured run r7 -> r8, vllm_version 0.8.5 -> 0.11.0" in flat
    assert "reference run r8 (measured)" in flat  # the summary's cause
    html = tmp_path / "r.html"
    assert xfid_cli("report", *_this_week(), "--html", "-o", html).exit_code == 0
    page = re.sub(r'<span class="t">|</span>|<wbr>', "", html.read_text(encoding="utf-8"))
    assert 'id="triage"' in page and "moved: reference — measured run r7 -&gt; r8" in page
    assert re.search(r'<tr id="S-2-1">', page) and "The period in one look" in page
    rows = list(csv.DictReader((tmp_path / "r-numbers.csv").read_text(encoding="utf-8").splitlines()))
    assert rows  # the attachment is still written beside it


def test_overdue_and_sentences():
    issues = [{"id": "XF-1", "state": "open", "first_seen": "2026-11-02T00:00:00Z"},  # Monday: due Thursday 11-05
              {"id": "XF-2", "state": "open", "first_seen": "2026-11-20T00:00:00Z"},
              {"id": "XF-3", "state": "acknowledged", "first_seen": "2026-10-01T00:00:00Z"}]  # triaged already

    class Config:
        def section(self, name):
            return {"triage_days": 3}

    late = overdue(issues, Config(), date(2026, 11, 23))
    assert [(i["id"], i["triage_by"]) for i in late] == [("XF-1", "2026-11-05")]
    assert sentences({}) == []
    said = sentences({"overdue": late, "stack": "6 keys measured on vllm_version 0.11.0",
                      "stale": {"keys": [{}], "sources": []},
                      "summaries": [{"id": "S-4-1", "n_issues": 40, "cause": {"kind": "run", "text": "reference run r8"}}]})
    assert said[0].startswith("1 summaries of what the latest check filed; the largest, S-4-1, groups 40 issues")
    assert "1 active issue(s) past their triage-by date (XF-1; the oldest was due 2026-11-05)." in said
    assert "Stack changed: 6 keys measured on vllm_version 0.11.0." in said
    assert "Stopped reporting (stale, not filed): 0 source(s), 1 key(s)." in said
