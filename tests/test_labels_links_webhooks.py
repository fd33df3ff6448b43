"""The CI and triage pieces of the team service on the command line: snapshots recorded under a
label and `compare --against`, links from an issue to a bug tracker, and webhooks after a check
(a real receiver on 127.0.0.1). On both catalogs where the store is involved."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.servers import catalog, free_port  # noqa: F401 - the fixture
from tests.test_engine_helpers import rec, write_csv
from xfid.config import load_config
from xfid.errors import ConfigError


@pytest.fixture
def filed(xfid_cli, tmp_path, catalog):  # noqa: F811
    d = tmp_path / "in"
    d.mkdir()
    write_csv(d / "m.csv", [rec("measured", "a", 1.0), rec("measured", "b", 1.0)])
    write_csv(d / "r.csv", [rec("archmodel", "a", 1.01), rec("archmodel", "b", 1.5)])
    assert (r := xfid_cli("ingest", "--adapter", "xfid-records", d)).exit_code == 0, r.output
    return xfid_cli, d


def test_snapshot_label_then_compare_against(filed, tmp_path):
    cli, d = filed
    r = cli("snapshot", "--label", "main")
    assert r.exit_code == 0 and "recorded snapshot 1 under 'main'" in r.output, r.output
    ok = cli("compare", "--against", "main")
    assert ok.exit_code == 0 and "no drift" in ok.output, ok.output
    write_csv(d / "r2.csv", [rec("archmodel", "b", 3.0, run="r2")])  # the branch makes b 3x off
    assert cli("ingest", "--adapter", "xfid-records", d / "r2.csv").exit_code == 0
    drift = cli("compare", "--against", "main", "--format", "json")
    assert drift.exit_code == 1, drift.output
    assert json.loads(drift.output)["exit_code"] == 1
    # a newer snapshot under the same label replaces it for --against; other labels are apart
    assert cli("snapshot", "--label", "main", "-o", tmp_path / "b.json").exit_code == 0
    assert cli("compare", "--against", "main").exit_code == 0
    assert cli("compare", "--baseline", tmp_path / "b.json").exit_code == 0


@pytest.mark.parametrize("args,words", [
    (("compare",), "a baseline is needed"),
    (("compare", "--against", "main", "--baseline", "x.json"), "give one baseline"),
    (("compare", "--against", "nope"), "no snapshot recorded under the label 'nope'"),
    (("snapshot",), "say where the snapshot goes"),
    (("snapshot", "--label", "has space"), "snapshot label 'has space'"),
])
def test_label_usage_errors(filed, args, words):
    cli, _ = filed
    r = cli(*args)
    assert r.exit_code == 2 and words in r.output and "Traceback" not in r.output, r.output


def test_issue_links(filed):
    cli, _ = filed
    assert cli("check").exit_code in (0, 1)
    iid = json.loads(cli("issues", "list", "--format", "json").output)[0]["id"]
    r = cli("issues", "link", iid, "https://bugs.example.com/T-1", "--actor", "lead")
    assert r.exit_code == 0 and f"{iid}: linked https://bugs.example.com/T-1" in r.output
    for bad in ("javascript:alert(1)", "file:///etc/passwd", "/relative", "https://x.example.com/a b"):
        b = cli("issues", "link", iid, bad)
        assert b.exit_code == 2 and "only an absolute http" in b.output, b.output
    show = cli("issues", "show", iid)
    assert "link  https://bugs.example.com/T-1  (by lead," in show.output
    doc = json.loads(cli("issues", "show", iid, "--format", "json").output)
    assert [(x["url"], x["actor"]) for x in doc["links"]] == [("https://bugs.example.com/T-1", "lead")]
    assert cli("issues", "link", "XF-99", "https://x.example.com").exit_code == 2


# --- webhooks ---------------------------------------------------------------------------------

class Receiver:
    """An HTTP receiver on 127.0.0.1: answers each POST with the next status of `plan` (then 200),
    or sleeps `delay` s first; keeps every body."""

    def __init__(self, plan=(), delay: float = 0.0):
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        self.plan = list(plan)
        self.delay = delay
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                outer.bodies.append(json.loads(self.rfile.read(n)))
                outer.paths.append(self.path)
                if outer.delay:
                    time.sleep(outer.delay)
                code = outer.plan.pop(0) if outer.plan else 200
                self.send_response(code)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook/SECRET-PATH-TOKEN") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(*a, **k):
        r = Receiver(*a, **k)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def _config(tmp_path, *hooks: str) -> str:
    p = tmp_path / "xfid.toml"
    p.write_text("".join(f"[[notify.webhook]]\n{h}\n" for h in hooks))
    return str(p)


def test_a_check_that_files_issues_calls_json_and_slack_hooks(filed, tmp_path, receiver):
    cli, _ = filed
    a, b = receiver(), receiver()
    cfg = _config(tmp_path, f'url = "{a.url()}"', f'url = "{b.url()}"\nformat = "slack"')
    r = cli("--config", cfg, "check", "--actor", "ci", "--label", "pr-7")
    assert r.exit_code in (0, 1) and "warning" not in r.output, r.output
    (body,) = a.bodies
    assert body["event"] == "xfid.check" and body["check_id"] == 1 and body["actor"] == "ci"
    assert body["label"] == "pr-7" and body["new"] == ["XF-1"] and body["counts"]["new"] == 1
    (slack,) = b.bodies
    assert set(slack) == {"text"} and "xfid check #1" in slack["text"] and "1 new (XF-1)" in slack["text"]
    again = cli("--config", cfg, "check")  # nothing new or reopened: no call
    assert again.exit_code in (0, 1) and len(a.bodies) == 1 and len(b.bodies) == 1


def test_a_failing_receiver_is_retried_then_warned_about_and_never_blocks(filed, tmp_path, receiver):
    cli, _ = filed
    flaky = receiver(plan=[500, 503])  # two failures, then 200: delivered on the third attempt
    cfg = _config(tmp_path, f'url = "{flaky.url()}"\nretries = 2\ntimeout_s = 2')
    r = cli("--config", cfg, "check")
    assert r.exit_code in (0, 1) and "warning" not in r.output, r.output
    assert len(flaky.bodies) == 3


def test_a_slow_or_dead_receiver_is_a_warning_and_the_check_is_recorded(filed, tmp_path, receiver):
    cli, _ = filed
    slow = receiver(delay=3.0)
    dead = f"http://127.0.0.1:{free_port()}/hook/SECRET-PATH-TOKEN"
    cfg = _config(tmp_path, f'url = "{slow.url()}"\ntimeout_s = 0.5\nretries = 1', f'url = "{dead}"\nretries = 0')
    t0 = time.monotonic()
    r = cli("--config", cfg, "check")
    took = time.monotonic() - t0
    assert r.exit_code in (0, 1), r.output
    assert r.output.count("warning: webhook http://127.0.0.1:") == 2 and "recorded all the same" in r.output
    assert "SECRET-PATH-TOKEN" not in r.output  # a webhook's path is its secret
    assert took < 15
    assert json.loads(cli("--config", cfg, "issues", "list", "--format", "json").stdout)[0]["id"] == "XF-1"


@pytest.mark.parametrize("body,words", [
    ('url = "ftp://x.example.com"', "url must be an http"),
    ('url = "https://x.example.com"\nformat = "teams"', "format must be one of"),
    ('url = "https://x.example.com"\ntimeout_s = 0', "timeout_s must be"),
    ('url = "https://x.example.com"\nretries = 99', "retries must be"),
    ('url = "https://x.example.com"\nsecret = 1', "unknown key 'secret'"),
])
def test_webhook_config_is_validated(tmp_path, body, words):
    with pytest.raises(ConfigError, match=words):
        load_config(_config(tmp_path, body))
