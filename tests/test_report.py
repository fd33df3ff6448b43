"""Report data and HTML: periods, counts, sections, tables, hostile names (no PDF render here)."""

from __future__ import annotations

import base64
import re
from datetime import date

import pandas as pd
import pytest

from xfid.errors import ReportError
from xfid.report.data import count_issues, op_class, sample_rows, shorten
from xfid.report.period import iso_week, resolve_period
from xfid.report.render import fmt_qty, render_html
from xfid.report.synthetic import HOSTILE, synthetic_report
from xfid.report.views import competitive_view, fidelity_coverage


@pytest.fixture(scope="module")
def hostile():
    data = synthetic_report(n_issues=40, n_workloads=8, seed=3, hostile=True)
    return data, render_html(data)


def _svgs(html: str) -> list[str]:
    return [base64.b64decode(u).decode("utf-8")
            for u in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)]


# --- periods -------------------------------------------------------------------------
def test_iso_week_is_monday_to_sunday():
    p = iso_week("2026-W48")
    assert (p.start, p.end, p.label) == (date(2026, 11, 23), date(2026, 11, 29), "2026-W48")
    assert p.since.isoformat() == "2026-11-23T00:00:00+00:00"
    assert p.until.isoformat() == "2026-11-30T00:00:00+00:00"
    prev = p.previous()
    assert (prev.start, prev.end, prev.label) == (date(2026, 11, 16), date(2026, 11, 22), "2026-W47")


def test_iso_week_year_boundaries():
    assert iso_week("2026-W01").start == date(2025, 12, 29)  # ISO week 1 holds the first Thursday
    assert iso_week("2026W53").end == date(2027, 1, 3)       # 2026 has 53 ISO weeks
    assert iso_week("2027-W01").previous().label == "2026-W53"


@pytest.mark.parametrize("bad, msg", [
    ("2026-48", "is not an ISO week; use the form 2026-W48"),
    ("2025-W53", "ISO year 2025 has weeks 1..52"),
    ("2026-W00", "ISO year 2026 has weeks 1..53"),
])
def test_bad_week(bad, msg):
    with pytest.raises(ReportError, match=re.escape(msg)):
        iso_week(bad)


def test_resolve_period_ranges():
    p = resolve_period(None, "2026-11-01", "2026-11-10")
    assert (p.days, p.label) == (10, "2026-11-01..2026-11-10")
    assert (p.previous().start, p.previous().end) == (date(2026, 10, 22), date(2026, 10, 31))
    assert resolve_period(None, None, None, today=date(2026, 12, 1)).label == "2026-W48"
    assert resolve_period(None, None, "2026-11-29").start == date(2026, 11, 23)
    with pytest.raises(ReportError, match="after until"):
        resolve_period(None, "2026-11-10", "2026-11-01")
    with pytest.raises(ReportError, match="not both"):
        resolve_period("2026-W48", "2026-11-01", None)
    with pytest.raises(ReportError, match=r"since '11/01/2026' is not a date; use YYYY-MM-DD"):
        resolve_period(None, "11/01/2026", None)


# --- pure helpers ----------------------------------------------------------------------
def test_helpers():
    assert op_class("layer3.attn.qkv_proj") == "attn.qkv_proj"
    assert op_class("gemm_tile[m=128,n=128,k=256]") == "gemm_tile"
    assert op_class("") == "(end-to-end)"
    long = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)"
    s = shorten(long)
    assert len(s) == 44 and "…" in s and s.startswith("void cutlass::") and s.endswith("(Params)")
    assert fmt_qty(2.5e-5, "s") == "25.0 µs" and fmt_qty(None, "s") == "—" and fmt_qty(3.0, "cycles") == "3.00 cycles"
    checks = [{"time": "2026-11-24", "counts": {"new": 3, "reopened": 1, "resolved": 2, "total_open": 9, "waived": 1}},
              {"time": "2026-11-27", "counts": {"new": 1, "reopened": 0, "resolved": 4, "total_open": 6, "waived": 2}}]
    assert count_issues(checks) == {"active": 6, "new": 4, "reopened": 1, "resolved": 6, "waived": 2}
    assert count_issues([]) == {"active": 0, "new": 0, "reopened": 0, "resolved": 0, "waived": 0}


def test_sample_keeps_discrepancies_and_is_seeded():
    rows = pd.DataFrame({"kind": ["ok"] * 9000 + ["over_tolerance"] * 100, "v": range(9100)})
    a, b = sample_rows(rows, 5000, 1), sample_rows(rows, 5000, 1)
    assert len(a) == 5000 and (a["kind"] != "ok").sum() == 100
    assert list(a["v"]) == list(b["v"])


def test_competitive_view_picks_highest_fidelity_and_derives_tokens_per_watt():
    ts = pd.Timestamp("2026-11-25", tz="UTC")
    w = "llama3-8b/decode/bs8/ctx2048/bf16"
    recs = pd.DataFrame([
        ("roofline", "t100-a0", w, "", "throughput_tokens", "value", 5000.0),
        ("archmodel", "t100-a0", w, "", "throughput_tokens", "value", 3000.0),
        ("archmodel", "t100-a0", w, "", "ttft", "mean", 0.040),
        ("measured", "h100-sxm", w, "", "throughput_tokens", "mean", 2000.0),
        ("measured", "h100-sxm", w, "", "power", "mean", 500.0),
        ("measured", "h100-sxm", w, "", "ttft", "median", 0.050),
        ("archmodel", "h100-sxm", w, "", "throughput_tokens", "value", 9999.0),  # not measured: ignored
        ("measured", "h200-sxm", "other/workload", "", "throughput_tokens", "mean", 1.0),  # no shared workload
        ("measured", "h100-sxm", w, "", "itl", "mean", float("nan")),  # missing is missing: no cell
    ], columns=["fidelity", "target", "workload", "op", "metric", "stat", "value"]).assign(unit="", timestamp=ts)
    v = competitive_view(recs, "t100-a0", invented=True, note="made up")
    assert v["competitors"] == ["h100-sxm"] and v["invented"]
    by = {r["metric"]: r for r in v["rows"]}
    assert by["throughput_tokens"]["ours"] == {"value": 3000.0, "fidelity": "archmodel", "stat": "value", "derived": False,
                                               "source_path": "", "source_loc": ""}
    assert by["throughput_tokens"]["by_target"]["h100-sxm"]["value"] == 2000.0
    assert by["throughput_tokens"]["advantage"] == pytest.approx(1.5)
    assert by["tokens_per_joule"]["by_target"]["h100-sxm"]["value"] == pytest.approx(4.0)
    assert by["tokens_per_joule"]["by_target"]["h100-sxm"]["derived"] is True
    assert by["ttft"]["advantage"] == pytest.approx(1.25)  # lower is better: 0.050 / 0.040
    assert "itl" not in by
    cov = fidelity_coverage(recs)
    assert {"target": "t100-a0", "workload": w, "have": ["roofline", "archmodel"], "missing": ["rtl", "measured"]} in cov


# --- the HTML behind the PDF ------------------------------------------------------------
def test_summary_counts_worst_and_pairs(hostile):
    data, html = hostile
    for k, v in data.counts.items():
        assert f'data-count="{k}">{v}</td>' in html
    assert [i["id"] for i in data.worst] == ["XF-36", "XF-1", "XF-23", "XF-4", "XF-11"]
    assert all(i["kind"] == "bound_violation" for i in data.worst[:3])
    worst = html.split('<table class="worst fixed">')[1].split("</table>")[0]
    assert worst.count("<tr class=") == 5
    pairs = html.split('<table class="pairs estimates">')[1].split("</table>")[0]
    assert pairs.count("<tr><td>") == 4
    assert "roofline → archmodel" in pairs and "archmodel → rtl" in pairs
    p = data.pairs[0]
    assert (p.candidate, p.reference, p.n) == ("roofline", "archmodel", 40)
    assert p.trend_word == "better" and len(p.trend) == 6


def test_page_one_headline_is_built_from_the_data(hostile):
    data, html = hostile
    summary = html.split('<section id="summary">')[1].split("</section>")[0]
    assert "The period in one look" in summary and "Pairs' health" in summary
    head = summary.split('<ul class="headline">')[1].split("</ul>")[0]
    c = data.counts
    assert (f"This period: {c['new']} new, {c['reopened']} reopened and {c['resolved']} resolved issues; "
            f"{c['active']} active now") in head
    assert "Worst active discrepancy: XF-36, a bound violation on" in head
    assert "Better since the previous check:" in head  # the synthetic pairs' MAPE falls check by check
    assert "roofline → archmodel (an estimate; t100-a0)" in head
    assert "<script" not in head  # hostile names in the sentences are escaped
    for word in ("register", "Worst five"):  # the lists come after page 1
        assert word not in summary


def test_sections_and_register(hostile):
    data, html = hostile
    for sid in ("summary", "issues", "competitive", "calibration", "methodology"):
        assert f'id="{sid}"' in html
    active = {i["fingerprint"] for i in data.open_issues}
    with_issues = [p for p in data.pairs if p.n >= 3 and (set(p.rows["fingerprint"]) & active or p.trend_word == "worse")]
    assert html.count('<section class="pair') == len(with_issues) == 4
    reg = html.split("Discrepancy register")[1].split("Resolved this period")[0]
    assert reg.count("<tr class=\"kind-") == len(data.open_issues) == 40
    for i in data.open_issues:
        assert f"<td>{i['id']} · {i['state']}</td>" in reg
    xf1 = reg.split("<td>XF-1 · open</td>")[1].split("</tr>")[0]
    assert xf1.startswith('<td class="kind">bound violation</td><td class="n">5.40×</td>')  # kind and factor apart
    assert xf1.endswith("· 2026-11-22 (9 d) · arch-team</td>")  # first seen, age on 2026-12-01, owner
    assert "+90.0% / 50.0%" in xf1
    assert "Resolved this period — 4" in html
    assert "t100-a0 is an invented example target" in html
    assert '<span class="t">report-numbers.csv</span>' in html  # where the rest went, unbreakable
    assert "thead { display: table-header-group; }" in html  # repeated table headers in the PDF
    assert "counter(pages)" in html and "string(run-title)" in html
    assert html.count("<img ") == 12  # parity, CDF, trend per pair with an issue (the heatmap: HTML report)
    assert not re.search(r'src="(?!data:)', html)  # self-contained: no external resource


def test_register_is_capped_in_the_pdf_and_complete_in_the_attachment():
    import csv
    import io

    from xfid.report.attach import numbers_csv
    from xfid.report.render import REGISTER_ROWS

    data = synthetic_report(n_issues=REGISTER_ROWS + 15, n_workloads=8, seed=3)
    html = re.sub(r'<span class="t">|</span>|<wbr>', "", render_html(data, numbers_file="w49-numbers.csv"))
    reg = html.split("Discrepancy register")[1].split("Resolved this period")[0]
    assert reg.count('<tr class="kind-') == REGISTER_ROWS
    assert f"the {REGISTER_ROWS} worst are listed, all {REGISTER_ROWS + 15} are in w49-numbers.csv" in reg
    rows = list(csv.DictReader(io.StringIO(numbers_csv(data).decode())))
    ids = {r["item"] for r in rows if r["section"] == "issue-active"}
    assert ids == {i["id"] for i in data.open_issues}
    pair_rows = [r for r in rows if r["section"] == "pair-row" and r["field"] == "candidate_value"]
    assert len(pair_rows) == sum(len(p.rows) for p in data.pairs)
    assert {r["section"] for r in rows} >= {"counts", "pair", "competitive", "calibration", "source", "unmatched-op"}


def test_no_python_repr_and_numeric_size_order(hostile):
    from xfid.report.headline import bucket_order
    from xfid.report.render import plain

    assert plain(["llama3-8b/decode", "gemm-sweep"]) == "llama3-8b/decode, gemm-sweep"
    assert plain({"a": 1, "b": None}) == "a: 1; b: —"
    assert sorted(["1e12-1e13 FLOP", "unknown", "1e7-1e8 FLOP", "1e13-1e14 FLOP"], key=bucket_order) == [
        "1e7-1e8 FLOP", "1e12-1e13 FLOP", "1e13-1e14 FLOP", "unknown"]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", hostile[1], flags=re.S)
    for c in cells:
        text = re.sub(r"<[^>]+>", "", c)
        assert "['" not in text and "{'" not in text and text.strip() not in ("None", "nan"), text


def test_hostile_names_stay_literal_in_html(hostile):
    _, marked = hostile
    html = re.sub(r'<span class="t">|</span>|<wbr>', "", marked)  # the break points ident() puts in names
    assert '<img src="file:' not in html
    assert "</style><script>" not in html and "<script" not in html
    assert "&lt;img src=&#34;file:///etc/passwd&#34;&gt;" in html
    assert "&lt;/style&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "{{ 7*7 }}" in html  # not evaluated by Jinja
    assert r"$\frac{1}{0}$" in html


def test_hostile_names_stay_literal_in_svg(hostile):
    from xfid.report.plots import pair_figures

    data, html = hostile  # the PDF draws the pairs with issues; the HTML report every pair's figures
    figs = [pair_figures(p, data.max_points, data.seed, 0.02) for p in data.pairs]
    svgs = _svgs(html) + _svgs(" ".join(f'src="{f[k]}"' for f in figs for k in ("parity", "cdf", "heatmap", "trend")
                                        if isinstance(f.get(k), str)))
    heat = [s for s in svgs if "MAPE by workload" in s]
    assert len(heat) == 4
    text = "".join(heat)
    assert r"$\frac{1}{0}$" in text  # parse_math=False: no mathtext rendering
    assert "&lt;img src=&quot;file:///etc/passwd&quot;&gt;" in text or "&lt;img src=\"file:///etc/passwd\"&gt;" in text
    for s in svgs:
        assert "<script" not in s and "<img" not in s and "file:///" not in s.split("&lt;img")[0]
        assert "xlink:href=\"file:" not in s and "href=\"http" not in s.replace('href="http://www.w3.org', "")


def test_parity_numbers_only_discrepancies_and_notes_sampling():
    from xfid.report.plots import parity

    data = synthetic_report(n_issues=40, n_workloads=8, seed=3)
    p = data.pairs[0]
    outliers: list[dict] = []
    _, notes = parity(p, 20, 0, 0.02, outliers)
    bad = p.rows[p.rows["kind"] != "ok"]
    assert len(bad) == 3 and [o["n"] for o in outliers] == [1, 2, 3]  # only discrepancies are numbered
    assert {o["workload"] for o in outliers} <= set(bad["workload"])
    assert notes == ["parity plot shows a seeded sample of 20 of 40 points"]
    html = render_html(data)
    assert f"parity plot shows a seeded sample of {min(len(p.rows), 5000)}" not in html  # default cap not hit
    assert len(HOSTILE) == 4
