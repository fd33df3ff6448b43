"""The serve component's tables in the catalog: the server secret, tokens, issue links, snapshots.

One SQL text serves SQLite and PostgreSQL (`xfid.sqlbackend`); the tables are created by
versioned migrations of the component "serve" (append to MIGRATIONS, never edit one).
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from xfid.sqlbackend import Database
from xfid.store import migrate, write_tx

MIGRATIONS: list[str] = [
    """
    CREATE TABLE serve_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE serve_tokens (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        digest TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        created_by TEXT NOT NULL
    );
    CREATE TABLE issue_links (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        issue_num INTEGER NOT NULL,
        url TEXT NOT NULL,
        actor TEXT NOT NULL,
        time TEXT NOT NULL
    );
    CREATE INDEX issue_links_issue ON issue_links(issue_num);
    CREATE TABLE labelled_snapshots (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        label TEXT NOT NULL,
        time TEXT NOT NULL,
        actor TEXT NOT NULL,
        snapshot TEXT NOT NULL
    );
    CREATE INDEX labelled_snapshots_label ON labelled_snapshots(label);
    """,
]


def setup(conn: Database) -> None:
    """Create or upgrade the serve tables (once per connection is enough; cheap when current)."""
    migrate(conn, "serve", MIGRATIONS)


def now_stamp(now: datetime | None = None) -> str:
    from xfid.tracker.lifecycle import stamp, utc

    return stamp(utc(now))


def secret(conn: Database) -> bytes:
    """The server secret (HMAC key of token digests and session cookies), made once per catalog,
    so every server over one team store accepts the same tokens and sessions."""
    row = conn.execute("SELECT value FROM serve_settings WHERE name='secret'").fetchone()
    if row is None:
        with write_tx(conn):
            conn.execute("INSERT INTO serve_settings (name, value) VALUES ('secret', ?) ON CONFLICT (name) DO NOTHING",
                         (secrets.token_hex(32),))
        row = conn.execute("SELECT value FROM serve_settings WHERE name='secret'").fetchone()
    return bytes.fromhex(row[0])


def rows(conn: Database, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    return [dict(zip(r.keys(), tuple(r), strict=True)) for r in conn.execute(sql, params).fetchall()]
