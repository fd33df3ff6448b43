"""The HTML report in a real browser: Debian's chromium driven by Playwright (no browser download).

The page (hostile workload names among the rest, see tests/test_report_web.py) is opened from a
file: sorting a numeric column orders its rows by value both ways, a table's filter box and the
search box hide what does not match, every issue and key has its anchor, nothing is requested
but the file itself, the Content-Security-Policy reports no violation, no console error, and the
hostile names show as text (no dialog). Screenshots go to env XFID_SCREENSHOTS (default: the
test's temporary folder). Under CI=true a missing browser fails (tests/servers.unavailable).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.test_report_web import EVIL, hostile_data
from tests.test_serve_browser import chromium
from xfid.report.web import render_web

pytestmark = pytest.mark.slow

WATCH = """
window.__csp = [];
document.addEventListener("securitypolicyviolation",
  function (e) { window.__csp.push(e.violatedDirective + " " + e.blockedURI); });
"""
"""Installed before the page's own script: records every CSP violation the page raises."""


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    """The hostile report opened in chromium; yields (data, page, events) and checks the events
    (requests, console errors, dialogs, CSP violations) once the module's tests are done."""
    from playwright.sync_api import sync_playwright

    exe = chromium()
    data = hostile_data()
    d = tmp_path_factory.mktemp("web")
    path = d / "report.html"
    path.write_text(render_web(data), encoding="utf-8")
    url = path.as_uri()
    events: dict[str, list[str]] = {"requests": [], "routed": [], "errors": [], "dialogs": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: events["errors"].append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: events["errors"].append(str(e)))
            page.on("request", lambda r: events["requests"].append(r.url))
            page.on("dialog", lambda dlg: (events["dialogs"].append(dlg.message), dlg.dismiss()))

            def route(r):
                events["routed"].append(r.request.url)
                return r.continue_() if r.request.url == url else r.abort()

            page.route("**", route)
            page.add_init_script(WATCH)
            page.goto(url)
            page.wait_for_load_state("load")
            page.screenshot(path=str(shots(d) / "report-top.png"))
            yield data, page, events, url
            events["csp"] = page.evaluate("window.__csp")
        finally:
            browser.close()
    assert events["requests"] == [url], events["requests"]  # nothing but the file, of any kind
    assert set(events["routed"]) <= {url}, events["routed"]
    assert events["csp"] == [], events["csp"]
    assert events["errors"] == [], events["errors"]
    assert events["dialogs"] == [], events["dialogs"]


def shots(tmp: Path) -> Path:
    out = Path(os.environ.get("XFID_SCREENSHOTS") or tmp)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _column(page, table: str, header: str) -> list[str]:
    """The data-v (sort value) of one column's visible cells, top to bottom."""
    return page.evaluate("""([table, header]) => {
        const t = document.getElementById(table);
        const col = Array.from(t.tHead.rows[0].cells).findIndex(h => h.textContent.trim() === header);
        if (col < 0) { throw new Error("no column " + header); }
        return Array.from(t.tBodies[0].rows).filter(r => !r.hidden)
            .map(r => r.cells[col].getAttribute("data-v") ?? r.cells[col].textContent.trim());
    }""", [table, header])


def _click_header(page, table: str, header: str) -> None:
    page.locator(f"#{table} thead th", has_text=header).first.click()


def _visible(page, table: str) -> list[str]:
    return page.evaluate("""(table) => Array.from(document.getElementById(table).tBodies[0].rows)
        .filter(r => !r.hidden).map(r => r.textContent)""", table)


def test_sorting_a_numeric_column_orders_by_value_both_ways(opened):
    data, page, _, _ = opened
    _click_header(page, "t-register", "error")
    up = _column(page, "t-register", "error")
    nums = [float(v) for v in up if v != ""]
    assert len(nums) == len(data.open_issues) == 40
    assert nums == sorted(nums) and nums != sorted(nums, key=str)  # by value, not as text
    assert nums[0] < 0 < nums[-1]
    assert page.locator("#t-register thead th", has_text="error").first.get_attribute("aria-sort") == "ascending"
    _click_header(page, "t-register", "error")
    down = [float(v) for v in _column(page, "t-register", "error") if v != ""]
    assert down == sorted(nums, reverse=True)
    # a text column with numbers inside sorts numerically: XF-2 before XF-10
    _click_header(page, "t-register", "id")
    ids = _column(page, "t-register", "id")
    assert ids == sorted(ids, key=lambda s: int(s.split("-")[1]))
    page.screenshot(path=str(shots(Path(page.url[7:]).parent) / "report-sorted.png"))
    # a key table (its rows written by the script from the JSON block) sorts the same way
    _click_header(page, "t-keys-1", "candidate")
    keys = [float(v) for v in _column(page, "t-keys-1", "candidate") if v != ""]
    assert len(keys) == len(data.pairs[0].rows) and keys == sorted(keys) and keys != sorted(keys, key=str)
    _click_header(page, "t-keys-1", "candidate")
    assert [float(v) for v in _column(page, "t-keys-1", "candidate") if v != ""] == sorted(keys, reverse=True)


def test_a_tables_filter_hides_rows_that_do_not_match(opened):
    data, page, _, _ = opened
    want = data.open_issues[5]["workload"]
    box = page.locator('input.tfilter[data-table="t-register"]')
    box.fill(want)
    shown = _visible(page, "t-register")
    expected = sum(1 for i in data.open_issues if want.lower() in str(i["workload"]).lower())
    assert 0 < len(shown) == expected < len(data.open_issues)
    assert all(want.lower() in r.lower() for r in shown)
    assert page.locator('span.tcount[data-table="t-register"]').inner_text() == f"{expected} of 40 rows"
    assert len(_visible(page, "t-resolved")) == len(data.resolved_issues)  # other tables untouched
    box.fill("")
    assert len(_visible(page, "t-register")) == 40


def test_the_search_box_filters_every_table(opened):
    _, page, _, _ = opened
    page.fill("#search", EVIL[1])  # $\alpha$: an issue's workload and a key's
    assert _visible(page, "t-register") and all(EVIL[1] in r for r in _visible(page, "t-register"))
    assert [r for r in _visible(page, "t-keys-1") if EVIL[1] in r] == _visible(page, "t-keys-1") != []
    assert _visible(page, "t-keys-2") == []
    total = page.evaluate("""() => Array.from(document.querySelectorAll("table.data tbody tr"))
        .filter(r => !r.hidden).length""")
    assert page.inner_text("#search-count") == f"{total} matching rows"
    page.fill("#search", "")
    assert len(_visible(page, "t-register")) == 40 and page.inner_text("#search-count") == ""


def test_every_issue_and_key_has_an_anchor_and_links_reach_them(opened):
    data, page, _, _ = opened
    ids = page.evaluate("() => Array.from(document.querySelectorAll('[id]')).map(e => e.id)")
    assert len(ids) == len(set(ids))
    for i in [*data.open_issues, *data.resolved_issues]:
        assert i["id"] in ids
    for p in data.pairs:
        for fp in p.rows["fingerprint"]:
            assert f"key-{fp}" in ids
    fp = data.pairs[1].rows["fingerprint"].iloc[3]
    page.goto(f"{page.url.split('#')[0]}#key-{fp}")  # a link to a key, opened from outside
    assert page.evaluate("() => document.querySelector(':target').id") == f"key-{fp}"
    assert page.evaluate("() => document.querySelector(':target').getBoundingClientRect().top > 0")
    page.locator('#t-worst a[href="#XF-36"]').click()
    assert page.evaluate("() => location.hash") == "#XF-36"
    assert page.evaluate("() => document.querySelector(':target').id") == "XF-36"
    prov = page.locator("#XF-36 details")
    assert not prov.evaluate("d => d.open")
    prov.locator("summary").click()
    assert prov.evaluate("d => d.open") and "fingerprint" in prov.inner_text()


def test_hostile_names_show_as_text(opened):
    _, page, events, _ = opened
    body = page.inner_text("body")
    assert EVIL[0] in body and '<img src="file:///etc/passwd">' in body and "</style><script>alert(1)</script>" in body
    assert EVIL[1] in body and r"evil\u202etxt.csv" in body and "\u202e" not in body  # the override shown
    assert page.locator('img[src="x"]').count() == 0 and page.locator("img:not([src^='data:'])").count() == 0
    assert page.evaluate("() => Array.from(document.scripts).map(s => s.type)") == ["application/json"] * 2 + [""]
    # a provenance line is written as text when its row opens (the note holds hostile markup)
    key = page.locator("#t-keys-1 tbody tr", has_text=EVIL[0]).first
    assert key.locator("dl").count() == 0
    key.locator("details summary").click()
    assert EVIL[0] in key.locator("dl").inner_text() and "</style><script>alert(1)</script>" in key.inner_text()
    assert page.locator('img[src="x"]').count() == 0 and page.evaluate("() => document.scripts.length") == 3
    assert events["dialogs"] == []
    # the hash-allowed stylesheet applied (a blocked one would leave the header unstyled)
    assert page.locator("#t-register thead th").first.evaluate("h => getComputedStyle(h).cursor") == "pointer"
