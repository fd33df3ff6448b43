"""The triage tables (migration component "triage"): uncertain streaks and issue links.

`triage_pending`: per fingerprint, how many checks in a row saw it uncertain-or-worse (an
uncertain key is filed once the streak reaches `[tracker] confirm_after`).
`triage_links`: an issue marked `invalid` (with its reason), `duplicate` (of another issue) or
`downstream` (caused by another issue); one row per issue, the latest triage.
"""

from __future__ import annotations

from typing import Any

from xfid.sqlbackend import Database
from xfid.store import migrate

MIGRATIONS: list[str] = [
    """
    CREATE TABLE triage_pending (fingerprint TEXT PRIMARY KEY, streak INTEGER NOT NULL, last_check INTEGER);
    CREATE TABLE triage_links (
        issue_num INTEGER PRIMARY KEY REFERENCES issues(num),
        relation TEXT NOT NULL,
        other_num INTEGER,
        reason TEXT,
        time TEXT NOT NULL
    );
    """,
]


def setup(conn: Database) -> None:
    """Create or upgrade the triage tables (after the tracker's: a link names an issue)."""
    migrate(conn, "triage", MIGRATIONS)


def pending(conn: Database) -> dict[str, int]:
    return {r[0]: int(r[1]) for r in conn.execute("SELECT fingerprint, streak FROM triage_pending WHERE streak > 0")}


def set_pending(conn: Database, streaks: dict[str, int], check_id: int) -> None:
    """Replace the streaks by `streaks` (fingerprints absent from it are no longer pending: streak 0).

    UPDATE and upsert only, no DELETE: a writer role of docs/team.md may not delete tracker rows."""
    conn.execute("UPDATE triage_pending SET streak = 0, last_check = ? WHERE streak > 0", (check_id,))
    for fp, n in sorted(streaks.items()):
        conn.execute("INSERT INTO triage_pending (fingerprint, streak, last_check) VALUES (?,?,?) "
                     "ON CONFLICT (fingerprint) DO UPDATE SET streak = excluded.streak, "
                     "last_check = excluded.last_check", (fp, n, check_id))


def set_link(conn: Database, num: int, relation: str | None, other: int | None, reason: str | None,
             time: str) -> None:
    """Record (or, with relation None, clear) an issue's triage link."""
    conn.execute("DELETE FROM triage_links WHERE issue_num=?", (num,))
    if relation is not None:
        conn.execute("INSERT INTO triage_links (issue_num, relation, other_num, reason, time) VALUES (?,?,?,?,?)",
                     (num, relation, other, reason, time))


def links(conn: Database) -> dict[int, dict[str, Any]]:
    return {int(r["issue_num"]): dict(r) for r in conn.execute("SELECT * FROM triage_links")}


def link(conn: Database, num: int) -> dict[str, Any] | None:
    r = conn.execute("SELECT * FROM triage_links WHERE issue_num=?", (num,)).fetchone()
    return None if r is None else dict(r)
