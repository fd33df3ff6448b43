"""The demo's PDF read as a reader sees it: at most 12 pages, no text outside the page's content
box, no identifier broken inside a token, no Python repr in the text, an attachment beside it.

Positions come from the PDF itself (poppler's `pdftotext -bbox`) and from WeasyPrint's layout of
the same HTML (the line boxes of every block), not from looking at pages.
"""

from __future__ import annotations

import csv
import html as htmllib
import re
import subprocess
from pathlib import Path

import pytest

from tests.demo_run import run_demo
from tests.servers import need_tool

MM = 72 / 25.4
MAX_PAGES = 12
SLACK = 0.75  # pt: anti-aliasing and glyph side bearings
BREAKS = "/·="



@pytest.fixture(autouse=True, scope="module")
def _pdftotext():
    """poppler's pdftotext reads the positions: fails under CI when missing, skipped elsewhere."""
    need_tool("pdftotext", "poppler-utils")


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    return run_demo(tmp_path_factory)


@pytest.fixture(scope="module")
def demo(demo_run):
    return demo_run.cwd / "reports" / "xfid-demo.pdf"


def _pdf_html(d) -> str:
    """The HTML the demo's PDF was rendered from, rebuilt from its store (same data, same template)."""
    import xfid
    from xfid.report.assemble import build_report_data
    from xfid.report.period import resolve_period
    from xfid.report.render import render_html

    m = d.line(r"report --since (\S+) --until (\S+)")
    api = xfid.open_store(d.store)
    data = build_report_data(api.backend(), api.config, resolve_period(None, m.group(1), m.group(2)))
    return render_html(data, bound_tol=data.bound_tolerance, numbers_file="xfid-demo-numbers.csv")


def _margins() -> tuple[float, float, float, float]:
    """@page margins of report.css (top, right, bottom, left) in pt."""
    css = (Path(__file__).parent.parent / "xfid/report/templates/report.css").read_text(encoding="utf-8")
    m = re.search(r"@page\s*\{[^}]*?margin:\s*([\d.]+)mm\s+([\d.]+)mm\s+([\d.]+)mm\s+([\d.]+)mm", css)
    assert m, "report.css: no @page margin"
    top, right, bottom, left = (float(x) * MM for x in m.groups())
    return top, right, bottom, left


def _pages(pdf: Path) -> list[tuple[float, float, list[tuple[float, float, float, float, str]]]]:
    """(width, height, words (xMin, yMin, xMax, yMax, text)) of every page, by pdftotext -bbox."""
    out = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    pages = []
    for m in re.finditer(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', out, re.S):
        words = [(float(a), float(b), float(c), float(d), htmllib.unescape(t)) for a, b, c, d, t in re.findall(
            r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>', m.group(3))]
        pages.append((float(m.group(1)), float(m.group(2)), words))
    return pages


def test_demo_pdf_is_short_and_names_its_attachment(demo):
    pages = _pages(demo)
    assert 1 <= len(pages) <= MAX_PAGES
    info = subprocess.run(["pdfinfo", str(demo)], capture_output=True, text=True, check=True).stdout
    assert int(re.search(r"Pages:\s+(\d+)", info).group(1)) == len(pages)
    numbers = demo.with_name("xfid-demo-numbers.csv")
    text = subprocess.run(["pdftotext", str(demo), "-"], capture_output=True, text=True, check=True).stdout
    assert numbers.name in text.split("\f")[0]  # page 1 says where the rest is
    rows = list(csv.DictReader(numbers.read_text(encoding="utf-8").splitlines()))
    sections = {r["section"] for r in rows}
    assert {"counts", "issue-active", "pair", "pair-row", "source", "unmatched-op", "fidelity-coverage"} <= sections
    # every value of an aligned key traces to a file (and, where the adapter records one, a row)
    keyed = [r for r in rows if r["section"] == "pair-row" and r["field"].endswith("_value") and r["value"]]
    assert keyed and all(r["source_path"] for r in keyed)
    assert sum(1 for r in keyed if r["source_loc"]) > len(keyed) // 2


def test_no_text_outside_the_content_box(demo):
    top, right, bottom, left = _margins()
    running = {"xfid", "discrepancy", "report", "·", "generated", "UTC", "page", "of", "–"}
    bad = []
    for n, (w, h, words) in enumerate(_pages(demo), start=1):
        for x0, y0, x1, y1, t in words:
            if x0 < left - SLACK or x1 > w - right + SLACK:
                bad.append((n, "x", round(x0, 1), round(x1, 1), t))
            elif (y0 < top - SLACK or y1 > h - bottom + SLACK) and not (t in running or re.fullmatch(r"[\d:\-]+", t)):
                bad.append((n, "y", round(y0, 1), round(y1, 1), t))  # the margin bands: the running header/footer only
    assert not bad, f"text outside the content box (page, axis, from, to, word): {bad[:20]}"


def overlapping_words(words: list[tuple[float, float, float, float, str]]) -> list[tuple[str, str, float]]:
    """Pairs of words whose boxes overlap (by more than half a pt across and half the smaller
    height down): text drawn over text, as a too-narrow table column does."""
    ws = sorted((w for w in words if w[2] > w[0] and w[3] > w[1]), key=lambda w: w[0])
    bad = []
    for i, a in enumerate(ws):
        for b in ws[i + 1:]:
            if b[0] >= a[2]:
                break  # sorted by left edge: no later word starts inside `a`
            ix, iy = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
            if ix > 0.5 and iy > 0.5 * min(a[3] - a[1], b[3] - b[1]):
                bad.append((a[4], b[4], round(ix, 1)))
    return bad


def test_no_text_drawn_over_text(demo):
    bad = [(n, o) for n, (_w, _h, words) in enumerate(_pages(demo), start=1) for o in overlapping_words(words)]
    assert not bad, f"words drawn over each other (page, (word, word, overlap pt)): {bad[:20]}"


def test_the_overlap_check_sees_text_over_text():
    assert overlapping_words([(10, 10, 40, 18, "3.44e+10"), (38, 10, 60, 18, "FLOP6.95e+10")])
    assert not overlapping_words([(10, 10, 40, 18, "a"), (40.2, 10, 60, 18, "b"), (10, 19, 40, 27, "c")])


def test_no_python_repr_in_the_text(demo):
    text = subprocess.run(["pdftotext", str(demo), "-"], capture_output=True, text=True, check=True).stdout
    for bad in ("['", "{'", "': "):
        assert bad not in text, bad
    words = set(re.findall(r"\S+", text))
    assert not words & {"None", "nan", "NaN", "unknown"}, words & {"None", "nan", "NaN", "unknown"}


def _line_text(line) -> str:
    from weasyprint.formatting_structure import boxes

    return "".join(b.text for b in line.descendants() if isinstance(b, boxes.TextBox)).strip()


def _broken(block) -> list[tuple[str, str]]:
    """Consecutive lines of one block whose break falls inside a token: not at a space, and not
    after `/`, `·` or `=`."""
    from weasyprint.formatting_structure import boxes

    lines = [_line_text(c) for c in block.children if isinstance(c, boxes.LineBox)]
    lines = [x for x in lines if x]
    if len(lines) < 2 or block.element is None:
        return []
    source = re.sub(r"\s+", " ", "".join(block.element.itertext())).strip()
    out, pos, spans = [], 0, []
    for x in lines:
        at = source.find(x, pos)
        if at < 0:
            return []  # generated content (::before, counters): not the element's text
        spans.append((at, at + len(x)))
        pos = at + len(x)
    for (_, end), (start, _), a, b in zip(spans, spans[1:], lines, lines[1:], strict=False):
        if " " not in source[end:start] and a[-1] not in BREAKS:
            out.append((a, b))
    return out


def test_no_identifier_broken_inside_a_token(demo_run):
    from xfid.report.render import DataOnlyFetcher, weasyprint

    html = _pdf_html(demo_run)
    doc = weasyprint().HTML(string=html, base_url=None, url_fetcher=DataOnlyFetcher.make()).render()
    bad = []
    for n, page in enumerate(doc.pages, start=1):
        for box in page._page_box.descendants():
            if hasattr(box, "children") and any(type(c).__name__ == "LineBox" for c in getattr(box, "children", [])):
                bad += [(n, a, b) for a, b in _broken(box)]
    assert not bad, f"lines broken inside a token (page, line, next line): {bad[:10]}"


def test_the_token_check_sees_a_break_inside_a_token():
    """The check above is not vacuous: a narrow cell that may break anywhere is caught, one whose
    identifier goes through the report's ident() filter is not."""
    from xfid.report.render import _css, ident, weasyprint

    name = "llama3-8b/decode/bs8/ctx2048/bf16_attention_kernel_long_name"
    html = (f"<style>{_css()}</style><table style='width:30mm'><tr><td style='overflow-wrap:anywhere'>{name}</td></tr>"
            f"<tr><td>{ident('llama3-8b/decode/bs8/ctx2048/bf16 · attn.qkv_proj · k=4096')}</td></tr></table>")
    found = []
    for page in weasyprint().HTML(string=html).render().pages:
        for box in page._page_box.descendants():
            if any(type(c).__name__ == "LineBox" for c in getattr(box, "children", [])):
                found += _broken(box)
    assert found and all("attenti" in a or "kernel" in a for a, _ in found), found
