"""`xfid serve` in a real browser: Debian's chromium driven by Playwright (no browser download),
against a real server process on 127.0.0.1 over the demo store and over a team store on PostgreSQL.

Sign in with a token, filter the issues list, open an issue, acknowledge it, and see the
acknowledgement in `xfid issues show` with the token's name as actor; a reader token cannot act;
no request leaves 127.0.0.1; no console error. Screenshots go to env XFID_SCREENSHOTS (default: the
test's temporary folder), never into the repository. Under CI=true a missing browser fails.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.demo_run import copy_demo
from tests.servers import pg_server, unavailable  # noqa: F401
from tests.serving import child_env, make_store, running_server, token, xfid

pytestmark = pytest.mark.slow


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        unavailable("Debian's chromium", "not installed (apt-get install chromium; .ci/run installs it)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("Playwright", "the python package is not installed (pip install -e '.[dev]')")
    return str(path)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory) -> Path:
    """The demo's store (a copy of the run's one demo: tests/demo_run.py)."""
    chromium()
    return copy_demo(tmp_path_factory).store


def shots(tmp_path: Path, name: str) -> Path:
    d = Path(os.environ.get("XFID_SCREENSHOTS") or tmp_path) / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def triage(url: str, writer: str, reader: str, out: Path, issue_filter: dict[str, str]) -> str:
    """Drive the browser through a lead's triage; returns the acknowledged issue's id."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    hosts: set[str] = set()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: hosts.add(urlsplit(r.url).hostname or r.url))
            page.goto(url + "/")
            assert "/login" in page.url
            page.fill("#token", writer)
            page.click("#signin")
            page.wait_for_selector("h1:has-text('Overview')")
            page.screenshot(path=str(out / "overview.png"), full_page=True)
            page.goto(url + "/issues")
            for field, value in issue_filter.items():
                page.select_option(f"#f-{field}", value)
            page.click("#f-go")
            page.wait_for_selector("#issues")
            page.screenshot(path=str(out / "issues-filtered.png"), full_page=True)
            ids = page.locator("#issues tr td:first-child a").all_inner_texts()
            assert ids, "the filtered list is empty"
            iid = ids[0]
            page.click(f"#issues a:text-is('{iid}')")
            page.wait_for_selector(f"h1:has-text('{iid}')")
            page.fill("#ack-owner", "alice")
            page.fill("#ack-note", "taking it")
            page.click("#ack-go")
            page.wait_for_selector("#flash")
            assert page.inner_text("#state") == "acknowledged"
            assert "writer-b" in page.inner_text("#history")
            page.screenshot(path=str(out / "issue-acknowledged.png"), full_page=True)
            page.goto(url + "/checks")
            page.screenshot(path=str(out / "checks.png"), full_page=True)
            page.context.clear_cookies()
            page.goto(url + "/login")
            page.fill("#token", reader)
            page.click("#signin")
            page.wait_for_selector("h1:has-text('Overview')")
            page.goto(url + f"/issues/{iid}")
            assert page.locator("#readonly").count() == 1 and page.locator("#form-ack").count() == 0
            page.screenshot(path=str(out / "issue-as-reader.png"), full_page=True)
        finally:
            browser.close()
    assert hosts == {"127.0.0.1"}, hosts
    assert errors == []
    return iid


def acted_in_cli(env: dict[str, str], store: Path, iid: str) -> None:
    d = json.loads(xfid(env, store, "issues", "show", iid, "--format", "json").stdout)
    last = d["history"][-1]
    assert (d["state"], d["owner"], last["actor"], last["note"]) == ("acknowledged", "alice", "writer-b", "taking it")


def reader_cannot_act(url: str, reader: str, iid: str) -> None:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"{url}/api/issues/{iid}/resolve", data=b"{}", method="POST",
                                 headers={"Authorization": f"Bearer {reader}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    e.value.close()
    assert e.value.code == 403


def test_browser_demo_store(demo_store, tmp_path):
    env = child_env()
    env.pop("XFID_DATABASE_URL", None)
    writer, reader = token(demo_store, "writer-b", "writer"), token(demo_store, "reader-b", "reader")
    with running_server(env, demo_store) as url:
        iid = triage(url, writer, reader, shots(tmp_path, "demo"), {"state": "open", "target": "h100-sxm"})
        reader_cannot_act(url, reader, iid)
    acted_in_cli(env, demo_store, iid)


def test_browser_team_store(tmp_path, pg_server, monkeypatch):  # noqa: F811
    chromium()
    url_db = pg_server.database()
    monkeypatch.setenv("XFID_DATABASE_URL", url_db)
    store = tmp_path / "store"
    make_store(store, tmp_path / "in")
    writer, reader = token(store, "writer-b", "writer"), token(store, "reader-b", "reader")
    env = child_env(XFID_DATABASE_URL=url_db)
    with running_server(env, store) as url:
        iid = triage(url, writer, reader, shots(tmp_path, "team"), {"kind": "over_tolerance"})
        reader_cannot_act(url, reader, iid)
    acted_in_cli(env, store, iid)
