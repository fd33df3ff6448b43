"""The JSON API of `xfid serve` in-process (Starlette's TestClient), on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed (pip install 'xfid[serve]')")
from starlette.testclient import TestClient

import xfid
from tests.servers import catalog, pg_server  # noqa: F401
from tests.serving import HOSTILE, make_store, records_csv, token
from xfid.serve.app import make_app


@pytest.fixture
def served(tmp_path: Path, catalog):  # noqa: F811
    store = tmp_path / "store"
    make_store(store, tmp_path / "in")
    toks = {r: token(store, f"{r}-1", r) for r in ("reader", "writer", "admin")}
    client = TestClient(make_app(str(store)), base_url="http://127.0.0.1")
    return store, client, toks


def bearer(t: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {t}"}


def test_tokens_roles_and_actor(served, xfid_cli):
    store, c, t = served
    r = c.get("/api/issues")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer" and "Bearer TOKEN" in r.json()["error"]
    assert c.get("/api/issues", headers=bearer("xfid_nope")).status_code == 401
    rows = c.get("/api/issues", headers=bearer(t["reader"])).json()
    assert [r["id"] for r in rows] == ["XF-1", "XF-2"]
    with xfid.open_store(store) as api:  # the same rows and columns as `xfid issues list --format json`
        assert rows == json.loads(json.dumps(api.issue_list(), default=str))
    r = c.post("/api/issues/XF-1/ack", headers=bearer(t["reader"]), json={"owner": "alice"})
    assert r.status_code == 403 and "reader" in r.json()["error"]
    r = c.post("/api/issues/XF-1/ack", headers=bearer(t["writer"]), json={"owner": "alice", "note": "mine"})
    assert r.status_code == 200 and r.json()["state"] == "acknowledged"
    with xfid.open_store(store) as api:
        last = api.issue("XF-1")["history"][-1]
    assert (last["actor"], last["action"], last["owner"], last["note"]) == ("writer-1", "ack", "alice", "mine")
    # the CLI's message and a 4xx for a refused transition and an unknown issue
    r = c.post("/api/issues/XF-1/reopen", headers=bearer(t["writer"]), json={})
    assert r.status_code == 400 and "reopen" in r.json()["error"]
    r = c.get("/api/issues/XF-99", headers=bearer(t["reader"]))
    assert r.status_code == 404 and r.json()["error"].startswith("unknown issue XF-99")
    assert c.post("/api/issues/XF-1/ack", headers=bearer(t["writer"]), json={"owner": "a", "bogus": 1}).status_code == 400
    # admins manage tokens; writers may not
    assert c.get("/api/tokens", headers=bearer(t["writer"])).status_code == 403
    names = [x["name"] for x in c.get("/api/tokens", headers=bearer(t["admin"])).json()]
    assert names == ["admin-1", "reader-1", "writer-1"]
    assert c.delete("/api/tokens/reader-1", headers=bearer(t["admin"])).status_code == 200
    assert c.get("/api/issues", headers=bearer(t["reader"])).status_code == 401  # revoked


def test_tokens_stored_as_digests_only(served):
    store, _c, t = served
    with xfid.open_store(store) as api:
        conn = api.backend().conn
        dump = json.dumps([list(r) for r in conn.execute("SELECT * FROM serve_tokens").fetchall()])
    assert all(tok not in dump and tok[5:] not in dump for tok in t.values())


def test_filters_search_history_checks(served):
    _store, c, t = served
    h = bearer(t["reader"])
    rows = c.get("/api/issues", headers=h).json()
    hostile = next(r["id"] for r in rows if r["workload"] == HOSTILE)
    assert [r["id"] for r in c.get("/api/issues?q=ONERROR", headers=h).json()] == [hostile]
    assert [r["id"] for r in c.get("/api/issues?severity_min=3", headers=h).json()] == [hostile]  # 40% / 10%
    assert [r["id"] for r in c.get("/api/issues?q=gemm-sweep&target=t100-a0", headers=h).json()] != [hostile]
    assert c.get("/api/issues?state=nope", headers=h).status_code == 400
    assert c.get("/api/issues?severity_min=x", headers=h).status_code == 400
    checks = c.get("/api/checks", headers=h).json()
    assert [(x["id"], x["actor"], x["counts"]["new"]) for x in checks] == [(1, "setup", 2)]
    rows = c.get("/api/checks/1/rows?limit=2", headers=h).json()
    assert rows["total"] >= 4 and len(rows["rows"]) == 2
    hist = c.get("/api/keys/XF-2", headers=h).json()
    assert [p["check_id"] for p in hist["series"]] == [1] and hist["series"][0]["rel_error"] == pytest.approx(0.25)


def test_ingest_check_all_or_nothing_and_cap(served, tmp_path):
    store, c, t = served
    w = bearer(t["writer"])
    good = records_csv("archmodel", "model-v2", (1010, 2010), stamp="2026-11-08T00:00:00Z")
    r = c.post("/api/ingest", headers=w, files=[("file", ("arch2.csv", good, "text/csv"))],
               data={"adapter": "xfid-records"})
    assert r.status_code == 200, r.text
    assert r.json()["rows"] == 2 and "/uploads/" in r.json()["files"][0]["path"]
    before = xfid.open_store(store).summary()["records"]
    r = c.post("/api/ingest", headers=w, files=[("file", ("a.csv", good.replace("2010", "2020"), "text/csv")),
                                                ("file", ("b.csv", "fidelity,nonsense\n1,2\n", "text/csv"))],
               data={"adapter": "xfid-records"})
    assert r.status_code == 400 and "b.csv" in r.json()["error"]
    with xfid.open_store(store) as api:
        assert api.summary()["records"] == before  # all or nothing
    assert len(list((store / "uploads").iterdir())) == 1  # the failed upload's folder is gone
    r = c.post("/api/ingest", headers=w, files=[("file", ("../evil.csv", good, "text/csv"))])
    assert r.status_code == 400 and "upload file name" in r.json()["error"]
    assert c.post("/api/ingest", headers=bearer(t["reader"]), files=[("file", ("x.csv", good, "text/csv"))]).status_code == 403
    small = TestClient(make_app(str(store), max_upload=1000), base_url="http://127.0.0.1")
    r = small.post("/api/ingest", headers=w, files=[("file", ("big.csv", good * 20, "text/csv"))])
    assert r.status_code == 413 and "limit of 1,000 bytes" in r.json()["error"]
    # model-v2 is within tolerance: XF-2 resolves after resolve_after (default 2) clean checks
    r = c.post("/api/check", headers=w, json={"label": "nightly"})
    assert r.status_code == 200 and r.json()["resolved"] == []
    r = c.post("/api/check", headers=w, json={"label": "nightly"})
    assert r.status_code == 200 and r.json()["resolved"] == ["XF-2"]
    with xfid.open_store(store) as api:
        ch = api.tracker.checks()[-1]
    assert (ch["actor"], ch["label"]) == ("writer-1", "nightly")


def test_snapshot_label_and_compare_against(served):
    _store, c, t = served
    w = bearer(t["writer"])
    r = c.post("/api/snapshots", headers=w, json={"label": "main"})
    assert r.status_code == 200 and r.json()["label"] == "main" and r.json()["discrepancies"] == 2
    r = c.post("/api/compare", headers=bearer(t["reader"]), json={"against": "main"})
    assert r.status_code == 200 and r.json()["exit_code"] == 0
    r = c.post("/api/compare", headers=w, json={"against": "feature"})
    assert r.status_code == 400 and "no snapshot recorded under the label 'feature'" in r.json()["error"]


def test_pages_escape_hostile_names_and_need_csrf(served):
    _store, c, t = served
    r = c.get("/issues", headers=bearer(t["reader"]))
    assert r.status_code == 200
    assert "<img src=x" not in r.text and "<script>alert" not in r.text and "\u202e" not in r.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in r.text and "\\u202e" in r.text
    assert "default-src 'none'" in r.headers["content-security-policy"]
    page = c.get("/issues/XF-2", headers=bearer(t["reader"]))
    assert "may read only" in page.text and "form-ack" not in page.text
    assert c.get("/", follow_redirects=False).headers["location"].startswith("/login")
    # a cookie session: sign in, then a form without the CSRF value is refused
    login = c.get("/login")
    nonce = login.text.split('name="nonce" value="')[1].split('"')[0]
    r = c.post("/login", data={"nonce": nonce, "token": t["writer"], "next": "/issues"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/issues"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert c.post("/issues/XF-1/act", data={"action": "ack", "owner": "x"}).status_code == 403
    page = c.get("/issues/XF-1")
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    r = c.post("/issues/XF-1/act", data={"action": "ack", "owner": "bob", "csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303
    r = c.post("/issues/XF-1/link", data={"url": "javascript:alert(1)", "csrf": csrf})
    assert r.status_code == 400 and "http://" in r.text
    c.post("/issues/XF-1/link", data={"url": "https://bugs.example.com/1?a=<b>", "csrf": csrf})
    page = c.get("/issues/XF-1").text
    assert 'href="https://bugs.example.com/1?a=&lt;b&gt;"' in page and "bob" in page


def test_report_download(served):
    _store, c, t = served
    h = bearer(t["reader"])
    r = c.get("/report/download?period=2026-10-01..2027-01-31&format=html", headers=h)
    assert r.status_code == 200 and r.headers["content-disposition"].startswith("attachment")
    assert "XF-1" in r.text
    r = c.get("/report/download?period=garbage", headers=h)
    assert r.status_code == 400


def test_report_download_as_pdf(served):
    _store, c, t = served
    r = c.get("/report/download?period=2026-10-01..2027-01-31&format=pdf", headers=bearer(t["reader"]))
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/pdf")
    assert r.headers["content-disposition"].startswith("attachment") and ".pdf" in r.headers["content-disposition"]
    assert r.content.startswith(b"%PDF-") and r.content.rstrip().endswith(b"%%EOF") and len(r.content) > 10_000


@pytest.mark.slow
def test_lost_database_is_503_without_password(tmp_path, own_pg_server, monkeypatch):
    from tests.servers import PG_PASSWORD

    url = own_pg_server.database()
    monkeypatch.setenv("XFID_DATABASE_URL", url)
    store = tmp_path / "store"
    make_store(store, tmp_path / "in")
    tok = token(store, "w", "writer")
    c = TestClient(make_app(str(store)), base_url="http://127.0.0.1")
    assert c.get("/api/issues", headers=bearer(tok)).status_code == 200
    own_pg_server.stop("immediate")
    for path in ("/api/issues", "/issues"):
        r = c.get(path, headers=bearer(tok))
        assert r.status_code == 503, r.text
        assert PG_PASSWORD not in r.text and PG_PASSWORD not in str(r.headers)
        assert "PostgreSQL" in r.text


def test_plot_axis_names_the_checks_plotted():
    import re

    from xfid.serve import svg

    one = str(svg.lines({"a": [(1, 0.5)]}, y_label="share", y_min=0, y_max=1))
    assert re.findall(r">check \d+</text>", one) == [">check 1</text>"]  # not "check 0 ... check 2"
    two = str(svg.lines({"a": [(3, 0.5), (9, 0.7)]}, y_label="share"))
    assert re.findall(r">check \d+</text>", two) == [">check 3</text>", ">check 9</text>"]


def test_summaries_api_and_pages(served):
    store, c, t = served
    h = bearer(t["reader"])
    rows = c.get("/api/summaries", headers=h).json()
    with xfid.open_store(store) as api:  # the same as `xfid issues summaries --format json`
        assert rows == json.loads(json.dumps(api.summaries(), default=str))
    assert [(s["id"], s["issues"]) for s in rows] == [("S-1-1", ["XF-1", "XF-2"])]
    assert c.get("/api/summaries?check=1", headers=h).json() == rows
    assert c.get("/api/summaries/S-1-1", headers=h).json() == rows[0]
    assert c.get("/api/summaries?check=x", headers=h).status_code == 400
    r = c.get("/api/summaries/S-1-5", headers=h)
    assert r.status_code == 404 and r.json()["error"].startswith("unknown summary S-1-5")
    assert c.post("/api/summaries/S-1-1/ack", headers=h, json={"owner": "a"}).status_code == 403
    r = c.post("/api/summaries/S-1-1/ack", headers=bearer(t["writer"]), json={"owner": "alice"})
    assert r.status_code == 200, r.text
    assert [(i["id"], i["state"], i["owner"]) for i in r.json()["changed"]] == [
        ("XF-1", "acknowledged", "alice"), ("XF-2", "acknowledged", "alice")]
    r = c.post("/api/summaries/S-1-1/duplicate", headers=bearer(t["writer"]), json={"of": "XF-1"})
    assert r.status_code == 200 and r.json()["skipped"][0]["id"] == "XF-1"
    assert c.get("/api/issues/XF-2", headers=h).json()["related_to"] == "XF-1"
    page = c.get("/summaries", headers=h)
    assert page.status_code == 200 and 'id="S-1-1"' in page.text and 'href="/issues/XF-2"' in page.text
    assert "<img src=x" not in page.text
    issue = c.get("/issues/XF-2", headers=h).text
    assert 'href="/summaries?check=1#S-1-1"' in issue and 'href="/issues/XF-1"' in issue
    r = c.post("/api/issues/XF-1/invalid", headers=bearer(t["writer"]), json={"reason": "debug <b>build</b>"})
    assert r.status_code == 200 and r.json()["state"] == "invalid"
    page = c.get("/issues/XF-1", headers=h).text
    assert "debug &lt;b&gt;build&lt;/b&gt; (its rows are left out of the statistics)" in page


def test_summary_form_acts_on_every_issue(served):
    _store, c, t = served
    login = c.get("/login")
    nonce = login.text.split('name="nonce" value="')[1].split('"')[0]
    c.post("/login", data={"nonce": nonce, "token": t["writer"], "next": "/summaries"}, follow_redirects=False)
    page = c.get("/summaries")
    assert 'action="/summaries/S-1-1/act"' in page.text
    assert c.post("/summaries/S-1-1/act", data={"action": "ack", "owner": "x"}).status_code == 403  # no CSRF
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    r = c.post("/summaries/S-1-1/act", data={"action": "invalid", "reason": "bad run", "csrf": csrf},
               follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/summaries?check=1&done=invalid+S-1-1"
    assert {i["state"] for i in c.get("/api/issues", headers=bearer(t["reader"])).json()} == {"invalid"}
    hist = c.get("/api/issues/XF-2", headers=bearer(t["reader"])).json()["history"][-1]
    assert (hist["action"], hist["actor"], hist["reason"]) == ("invalid", "writer-1", "bad run")
