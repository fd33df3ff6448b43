"""Links from an issue to the team's bug tracker: http(s) URLs only, stored, shown, never fetched."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from xfid.errors import TrackerError
from xfid.serve import catalog
from xfid.sqlbackend import Database
from xfid.store import write_tx
from xfid.tracker.lifecycle import parse_id

MAX_URL = 2000


def check_url(url: str) -> str:
    """`url` if it is an absolute http(s) URL with a host and no spaces or control characters.

    Raises:
        TrackerError: anything else (javascript:, data:, relative, over 2,000 characters...).
    """
    u = url.strip()
    parts = urlsplit(u)
    if (parts.scheme not in ("http", "https") or not parts.hostname or len(u) > MAX_URL
            or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in u)):
        raise TrackerError(f"link {url[:100]!r}: only an absolute http:// or https:// URL with a host "
                           f"(at most {MAX_URL} characters, no spaces) can be linked, e.g. https://bugs.example.com/123")
    return u


def add(conn: Database, issue_id: str, url: str, actor: str) -> dict[str, Any]:
    """Link `url` to the issue (the caller checked the issue exists); returns the link."""
    u = check_url(url)
    num = parse_id(issue_id)
    catalog.setup(conn)
    t = catalog.now_stamp()
    with write_tx(conn):
        conn.execute("INSERT INTO issue_links (issue_num, url, actor, time) VALUES (?,?,?,?)", (num, u, actor, t))
    return {"id": issue_id, "url": u, "actor": actor, "time": t}


def listing(conn: Database, issue_id: str) -> list[dict[str, Any]]:
    catalog.setup(conn)
    return catalog.rows(conn, "SELECT url, actor, time FROM issue_links WHERE issue_num=? ORDER BY id",
                        (parse_id(issue_id),))
