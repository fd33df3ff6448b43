"""`xfid report` end to end: a real store and tracker, HTML and one PDF render, errors, fetch safety."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from xfid.engine.contract import COMPARISON_COLUMNS, COVERAGE_COLUMNS, ROW_COLUMNS, Correlation
from xfid.engine.fingerprints import fingerprint

W1 = "llama3-8b/decode/bs8/ctx2048/bf16"
W2 = '<img src="file:///etc/passwd">'
RECORDS = f"""fidelity,target,workload,op,metric,stat,value,unit,run,hardware,software,config
archmodel,t100-a0,{W1},,throughput_tokens,value,2400,tokens/s,m1,t100-a0 model,archsim 0.3,"{{""clock_hz"":1e9}}"
archmodel,t100-a0,{W1},,ttft,mean,0.045,s,m1,t100-a0 model,archsim 0.3,
roofline,t100-a0,{W1},,throughput_tokens,value,3100,tokens/s,r1,,,
measured,h100-sxm,{W1},,throughput_tokens,mean,1900,tokens/s,v1,H100 SXM 80GB,vllm 0.6.3,"{{""power_cap_w"":700}}"
measured,h100-sxm,{W1},,ttft,mean,0.060,s,v1,H100 SXM 80GB,vllm 0.6.3,
measured,h100-sxm,{W1},,power,mean,600,W,v1,H100 SXM 80GB,vllm 0.6.3,
"""


def _corr(errors: dict[str, float]) -> Correlation:
    rows = []
    for i, (op, err) in enumerate(errors.items()):
        w = W2 if i == 0 else W1
        ref = 1e-4 * (i + 1)
        cand = ref * (1 + err)
        kind = "ok" if abs(err) <= 0.1 else "over_tolerance"
        row = dict.fromkeys(ROW_COLUMNS)
        row.update(fingerprint=fingerprint("t100-a0", w, op, "latency", "mean", "archmodel", "rtl"),
                   target="t100-a0", workload=w, op=op, metric="latency", stat="mean", candidate="archmodel",
                   reference="rtl", candidate_value=cand, reference_value=ref, unit="s", rel_error=err,
                   log_ratio=0.0, tolerance=0.1, tolerance_abs=0.0, within=kind == "ok", kind=kind,
                   severity=abs(err) / 0.1, note="")
        rows.append(row)
    df = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    ape = df["rel_error"].abs()
    comp = dict.fromkeys(COMPARISON_COLUMNS)
    comp.update(target="t100-a0", workload=None, candidate="archmodel", reference="rtl", metric="latency",
                stat="mean", n=len(df), mape=float(ape.mean()), median_ape=float(ape.median()), bias=1.1,
                spearman=0.9, kendall=0.8, within_tolerance=float((ape <= 0.1).mean()), mape_ci=None)
    return Correlation(rows=df, comparisons=pd.DataFrame([comp], columns=list(COMPARISON_COLUMNS)),
                       discrepancies=df[df["kind"] != "ok"], coverage=pd.DataFrame(columns=list(COVERAGE_COLUMNS)))


@pytest.fixture
def tracked(xfid_cli, tmp_path):
    """A store with records ingested and two recorded checks (W47 and W48)."""
    csv = tmp_path / "records.csv"
    csv.write_text(RECORDS, encoding="utf-8")
    r = xfid_cli("ingest", csv)
    assert r.exit_code == 0, r.output
    from xfid.store import Store
    from xfid.tracker import Tracker

    with Store(xfid_cli.store) as store:
        tr = Tracker(store)
        ops = ["layer0.attn.qkv_proj", "layer1.mlp.up_proj", "layer2.attn.o_proj"]
        tr.record_check(_corr(dict(zip(ops, (0.5, 0.3, 0.02), strict=True))), actor="ci",
                        now=datetime(2026, 11, 18, 9, tzinfo=UTC), label="w47")
        tr.record_check(_corr(dict(zip(ops, (0.6, 0.05, 0.02), strict=True))), actor="ci",
                        now=datetime(2026, 11, 25, 9, tzinfo=UTC), label="w48")
    return xfid_cli


def test_report_html_from_real_tracker(tracked, tmp_path):
    out = tmp_path / "r.html"
    r = tracked("report", "--week", "2026-W48", "--html", "-o", out)
    assert r.exit_code == 0, r.output
    numbers = tmp_path / "r-numbers.csv"
    assert r.output.strip() == (f"wrote {out} (HTML, 1 active issues, 1 pairs) and its numbers, each with its file "
                                f"and row, to {numbers}")
    html = out.read_text(encoding="utf-8")
    assert 'data-count="active">1</td>' in html and 'data-count="resolved">1</td>' in html
    assert 'data-count="new">0</td>' in html
    register = html.split('id="t-register"')[1].split("</table>")[0]
    assert '<tr id="XF-1" class="kind-' in register and "<td>open</td>" in register
    assert "Resolved this period — 1" in html and '<tr id="XF-2"' in html.split('id="t-resolved"')[1]
    pairs = html.split('id="t-estimates"')[1].split("</table>")[0]
    assert "archmodel → rtl" in pairs and ">22.3%<" in pairs
    assert '<td class="trend-better">better</td>' in pairs and ">27.3%<" in pairs  # the previous check's MAPE
    # competitive view: archmodel projection vs measured H100; tokens/s/W derived from power
    comp = html.split('id="competitive"')[1].split("</section>")[0]
    assert "t100-a0 is an invented example target" in comp
    assert ">2400 archmodel/value<" in comp
    assert ">3.17 measured/derived<" in comp
    # provenance appendix: hardware/software/config per source
    assert "H100 SXM 80GB" in html and "vllm 0.6.3" in html and "records.csv" in html
    # provenance of every source (hardware/software/config) and every number: the attachment
    import csv

    rows = list(csv.DictReader(numbers.read_text(encoding="utf-8").splitlines()))
    src = " ".join(r["note"] + " " + r["source_path"] for r in rows if r["section"] == "source")
    assert "H100 SXM 80GB" in src and "vllm 0.6.3" in src and "records.csv" in src and "power_cap_w" in src
    tput = [r for r in rows if r["section"] == "competitive" and r["field"] == "value"
            and r["target"] == "t100-a0" and r["metric"] == "throughput_tokens"]
    assert [(r["value"], Path(r["source_path"]).name) for r in tput] == [("2400.0", "records.csv")]
    assert '<img src="file:' not in html and "&lt;img src=&#34;file:///etc/passwd&#34;&gt;" in html
    assert not list(tmp_path.glob(".tmp-*"))


def test_report_pdf_render(tracked, tmp_path):
    out = tmp_path / "reports" / "w48.pdf"
    out.parent.mkdir()  # -o never creates a folder
    r = tracked("report", "--week", "2026-W48", "-o", out)
    assert r.exit_code == 0, r.output
    m = re.fullmatch(r"wrote (.+) \((\d+) pages, 1 active issues, 1 pairs\) and its numbers, each with its file and "
                     r"row, to (.+-numbers\.csv)", r.output.strip())
    assert m and int(m.group(2)) >= 1 and Path(m.group(3)) == out.with_name("w48-numbers.csv")
    data = out.read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    assert not list(out.parent.glob(".tmp-*"))


@pytest.mark.parametrize("args, msg", [
    (["--week", "2026-48"], "Error: --week '2026-48' is not an ISO week; use the form 2026-W48"),
    (["--week", "2025-W53"], "Error: --week '2025-W53': ISO year 2025 has weeks 1..52"),
    (["--week", "2026-W48", "--since", "2026-11-01"], "Error: give either --week or --since/--until, not both"),
    (["--since", "2026-13-01"], "Error: --since '2026-13-01' is not a date; use YYYY-MM-DD"),
    (["--week", "2026-W48", "--target", "nope"], "Error: unknown target 'nope'"),
])
def test_report_usage_errors(tracked, args, msg):
    r = tracked("report", *args)
    assert r.exit_code == 2
    assert msg in r.output
    assert "Traceback" not in r.output


def test_report_empty_store(xfid_cli, tmp_path):
    (tmp_path / "store").mkdir()
    from xfid.store import Store

    Store(tmp_path / "store").close()
    r = xfid_cli("report", "--week", "2026-W48", "--html", "-o", tmp_path / "x.html")
    assert r.exit_code == 2
    assert "is empty; ingest files with `xfid ingest` and run `xfid check`" in r.output


def test_report_default_output_name():
    from xfid.api import default_output

    assert default_output("2026-W48", False) == Path("reports/xfid-2026-W48.pdf")
    assert default_output("2026-11-01..2026-11-07", True) == Path("reports/xfid-2026-11-01_2026-11-07.html")


def test_fetcher_allows_only_data_uris(tmp_path):
    """WeasyPrint must never read a local file: a file:// stylesheet that would change the page size
    is requested (recorded) but refused, and data: images still load."""
    from xfid.report.render import DataOnlyFetcher, weasyprint

    HTML = weasyprint().HTML

    css = tmp_path / "evil.css"
    css.write_text("@page { size: 100mm 100mm }", encoding="utf-8")
    png = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
           "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
    seen: list[str] = []
    html = (f'<link rel="stylesheet" href="{css.as_uri()}"><img src="{css.as_uri()}">'
            f'<img src="http://127.0.0.1:9/x.png"><img src="{png}"><p>x</p>')
    doc = HTML(string=html, url_fetcher=DataOnlyFetcher.make(seen)).render()
    assert css.as_uri() in seen and "http://127.0.0.1:9/x.png" in seen and png in seen
    assert round(doc.pages[0].width) == 794  # A4 at 96 dpi: the file:// stylesheet was not applied
    with pytest.raises(ValueError, match="disallowed protocol"):
        DataOnlyFetcher.make().fetch(css.as_uri())


def test_report_without_checks_correlates_live(xfid_cli, tmp_path):
    """No `xfid check` yet: the report correlates at render time and says so."""
    csv = tmp_path / "records.csv"
    csv.write_text(RECORDS, encoding="utf-8")
    assert xfid_cli("ingest", csv).exit_code == 0
    out = tmp_path / "live.html"
    r = xfid_cli("report", "--week", "2026-W48", "--html", "-o", out)
    assert r.exit_code == 0, r.output
    numbers = tmp_path / "live-numbers.csv"
    assert r.output.strip() == (f"wrote {out} (HTML, 0 active issues, 1 pairs) and its numbers, each with its file "
                                f"and row, to {numbers}")
    html = re.sub(r'<span class="t">|</span>|<wbr>', "", out.read_text(encoding="utf-8"))  # ident()'s break points
    assert "no `xfid check` has been recorded: numbers come from a correlation run at report time" in html
    # a roofline throughput is an upper bound: shown as a bound, the achieved fraction 2400 / 3100
    pairs = html.split('id="t-bounds"')[1].split("</table>")[0]
    assert "roofline → archmodel" in pairs and "throughput_tokens/value" in pairs
    assert ">77.4%<" in pairs and 'data-v="0">0<' in pairs  # achieved, violations
    assert ">29.2%<" not in pairs and "×<" not in pairs  # no MAPE, no bias for a bound
    # and in the attachment beside it
    import csv as csvmod

    rows = list(csvmod.DictReader(numbers.read_text(encoding="utf-8").splitlines()))
    pair = {r["field"]: r for r in rows if r["section"] == "pair" and r["item"] == "roofline→archmodel"}
    assert pair["achieved_median"]["value"] == "0.7741935483870968" and pair["violations"]["value"] == "0"
    assert pair["n"]["note"] == "bound" and "mape" not in pair and "bias" not in pair  # no MAPE, no bias for a bound
    keyed = [r for r in rows if r["section"] == "pair-row" and r["field"].endswith("_value")]
    assert sorted(r["value"] for r in keyed) == ["2400.0", "3100.0"] and all(r["source_path"] for r in keyed)


def test_report_reads_what_the_check_recorded_and_correlates_nothing(tmp_path, monkeypatch):
    """Pairs, coverage, bound tolerance and calibration come from the latest check: no engine run."""
    import xfid
    import xfid.engine
    import xfid.engine.pipeline
    from tests.conftest import FIXTURES
    from xfid import counts
    from xfid.report.assemble import build_report_data
    from xfid.report.period import resolve_period
    from xfid.report.views import unmatched_ops

    store = xfid.open_store(tmp_path / "s", config=FIXTURES / "demo" / "xfid.toml")
    store.ingest([FIXTURES / "records" / "archmodel.csv", FIXTURES / "records" / "measured.csv"])
    live = store.correlate()
    fitted = store.calibrate("archmodel", "measured", "h100-sxm")
    check = store.check(correlation=live, actor="ci")

    def no_engine(*a, **k):
        raise AssertionError("the report ran the engine")

    monkeypatch.setattr(xfid.engine, "correlate", no_engine)
    monkeypatch.setattr(xfid.engine.pipeline, "correlate", no_engine)
    period = resolve_period(None, None, datetime.now(UTC).date().isoformat())
    data = build_report_data(store.backend(), store.config, period)
    assert data.checks[-1]["id"] == check.check_id
    assert data.coverage["unmatched"] == unmatched_ops(live.coverage, limit=None)[0]
    assert data.coverage["unmatched_total"] == len(counts.unmatched_ops(live.coverage))  # one definition
    assert len(store.tracker.check_coverage(check.check_id)) == len(live.coverage) > 0  # read from the check
    assert data.bound_tolerance == live.settings["bound_tolerance"]
    (cal,) = data.calibration
    assert (cal["candidate"], cal["reference"], cal["target"]) == ("archmodel", "measured", "h100-sxm")
    assert cal["summary"]["n"] == fitted.summary["n"] == 6
    assert cal["summary"]["mape_after"] == pytest.approx(fitted.summary["mape_after"], rel=1e-12)
    assert [f["factor"] for f in cal["factors"]] == pytest.approx(fitted.factors["factor"].tolist(), rel=1e-12)
    # a check recorded before checks kept the coverage: the report says so instead of guessing
    store.tracker.conn.execute("UPDATE checks SET coverage = NULL")
    data = build_report_data(store.backend(), store.config, period)
    assert data.coverage["unmatched"] == [] and any("recorded before checks kept it" in c for c in data.caveats)
    store.close()
