"""The HTML report to work in (xfid.report.web), read as text: every table and anchor is there, the
page is self-contained under a hash-based Content-Security-Policy, hostile names stay literal.
The same page driven in a real browser: tests/test_report_browser.py."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from xfid.report.synthetic import HOSTILE, synthetic_report
from xfid.report.web import anchor_id, content_security_policy, plain, render_web

EVIL = ("<img src=x onerror=alert(1)>", r"$\alpha$", "evil\u202etxt.csv")
"""Hostile workload names on top of synthetic's HOSTILE: an HTML handler, mathtext, a bidi override."""


def hostile_data():
    """The synthetic report with hostile names, three of them given to issues and to pair keys."""
    data = synthetic_report(n_issues=40, n_workloads=8, seed=3, hostile=True)
    for i, name in enumerate(EVIL):
        data.open_issues[i]["workload"] = name
        data.pairs[0].rows.loc[data.pairs[0].rows.index[i], "workload"] = name
    data.pairs[0].rows["note"] = ["" if k else EVIL[0] + " " + HOSTILE[1] for k in range(len(data.pairs[0].rows))]
    return data


@pytest.fixture(scope="module")
def page():
    data = hostile_data()
    return data, render_web(data)


def _block(html: str, name: str) -> str:
    return html.split(f'<script type="application/json" id="{name}">')[1].split("</script>")[0]


def _provenance(html: str) -> dict[str, list[list[str]]]:
    """The page's provenance data block: row id -> [label, value] lines."""
    return json.loads(_block(html, "provenance"))


def _inline(html: str, tag: str) -> str:
    blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, re.S)
    assert len(blocks) == 1, f"{len(blocks)} <{tag}> blocks"
    return blocks[0]


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_csp_allows_only_the_inline_style_and_script_by_hash(page):
    _, html = page
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert csp, "no CSP meta"
    policy = csp.group(1).replace("&#39;", "'")
    assert html.index("Content-Security-Policy") < html.index("<style>") < html.index("<script>")
    assert policy.startswith("default-src 'none';") and "unsafe" not in policy
    assert f"style-src {_sha(_inline(html, 'style'))};" in policy
    assert f"script-src {_sha(_inline(html, 'script'))};" in policy
    assert "img-src data:;" in policy and "connect-src" not in policy  # fetch/XHR fall to default-src 'none'
    assert policy == content_security_policy(_inline(html, "style"), _inline(html, "script"))


def test_self_contained_no_inline_attribute_the_csp_would_block(page):
    _, html = page
    assert not re.search(r'\b(?:src|href)="(?!data:|#)', html)  # nothing fetched, links only inside the page
    assert not re.search(r"\sstyle=", html)  # a style attribute needs 'unsafe-hashes': there is none
    markup = re.sub(r'<script type="application/json" id="[a-z]+">.*?</script>', "", html, flags=re.S)
    assert not re.search(r"\son[a-z]+=", markup.replace("onerror=alert(1)&gt;", ""))  # no inline handler
    assert html.count("<img ") == 16 and html.count("<script") == 3  # the script and two JSON data blocks
    assert html.count('<script type="application/json" id="provenance">') == 1
    assert html.count('<script type="application/json" id="keys">') == 1


def test_script_never_parses_data_as_html():
    from importlib import resources

    js = resources.files("xfid.report").joinpath("templates/report_web.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function(",
                 "setAttribute(\"style\"", "fetch(", "XMLHttpRequest"):
        assert sink not in js, sink
    assert "textContent" in js


def test_hostile_names_are_escaped_text(page):
    _, html = page
    html = html.replace("<wbr>", "")  # the page's own line-break marks after each / in a name
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "</style><script>alert(1)" not in html and "&lt;/style&gt;&lt;script&gt;alert(1)" in html
    assert r"$\alpha$" in html and "{{ 7*7 }}" in html
    assert "\u202e" not in html and r"evil\u202etxt.csv" in html  # the override shown, not obeyed
    for name in ("provenance", "keys"):
        block = _block(html, name)
        assert "<" not in block and ">" not in block and "\\u003cimg src=x" in block  # no tag can end it
        assert "\u202e" not in json.loads(block).__repr__()


def test_every_table_row_and_anchor_is_there(page):
    data, html = page
    for i in [*data.open_issues, *data.resolved_issues]:
        assert html.count(f'id="{i["id"]}"') == 1, i["id"]
    tables = json.loads(_block(html, "keys"))  # the key tables' rows, written by the script
    assert list(tables) == [f"t-keys-{k + 1}" for k in range(len(data.pairs))]
    for k, p in enumerate(data.pairs):
        assert f'<table class="data keys" id="t-keys-{k + 1}">' in html
        rows = tables[f"t-keys-{k + 1}"]["rows"]
        assert [r[0] for r in rows] == [f"key-{fp}" for fp in p.rows["fingerprint"]]  # every key, not a sample
        assert [float(r[4][2][0]) for r in rows] == pytest.approx(list(p.rows["candidate_value"]), rel=1e-8)
    assert sum(len(t["rows"]) for t in tables.values()) == 160
    reg = html.split('id="t-register"')[1].split("</table>")[0]
    assert reg.count("<tr id=") == len(data.open_issues) == 40
    assert reg.count("<details>") == 40  # the provenance of each row, collapsed
    prov = _provenance(html)
    for src in data.sources:
        row = html.split(f'<tr id="src-{src["source_id"][:16]}">')[1].split("</tr>")[0]
        assert src["path"] in row.replace("<wbr>", "") and "<details>" in row
        assert dict(prov[f'src-{src["source_id"][:16]}'])["config"] == ", ".join(src["config"])
    first = data.pairs[0].rows.iloc[0]
    lines = dict(prov[f"key-{first['fingerprint']}"])
    assert lines["note"] == EVIL[0] + " " + HOSTILE[1] and lines["fingerprint"] == first["fingerprint"]
    assert 'data-count="active">40</td>' in html
    assert html.count('class="tfilter"') == html.count('<table class="data') > 10
    assert 'id="search"' in html


def test_numeric_cells_carry_their_raw_value(page):
    data, html = page
    i = next(i for i in data.open_issues if i["id"] == "XF-1")
    row = html.split('<tr id="XF-1"')[1].split("</tr>")[0]
    assert f'data-v="{float(i["rel_error"]):.9g}"' in row and "+90.0%" in row


def test_anchor_ids_are_unique_and_plain():
    taken: set[str] = set()
    ids = [anchor_id("key-", x, taken) for x in ("ab", "ab", '"><script>', "ab")]
    assert ids == ["key-ab", "key-ab-2", "key-___script_", "key-ab-3"]
    assert plain(["a", "b"]) == "a, b" and plain({"b": 1, "a": [2]}) == '{"a": [2], "b": 1}'
