"""The triage tables (migration component "triage"): uncertain streaks.

`triage_pending`: per fingerprint, how many checks in a row saw it uncertain-or-worse (an
uncertain key is filed once the streak reaches `[tracker] confirm_after`).
"""

from __future__ import annotations

from xfid.sqlbackend import Database
from xfid.store import migrate

MIGRATIONS: list[str] = [
    """
    CREATE TABLE triage_pending (fingerprint TEXT PRIMARY KEY, streak INTEGER NOT NULL, last_check INTEGER);
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
    if streaks:  # one statement for all (on PostgreSQL pipelined, not a round trip each)
        conn.executemany("INSERT INTO triage_pending (fingerprint, streak, last_check) VALUES (?,?,?) "
                         "ON CONFLICT (fingerprint) DO UPDATE SET streak = excluded.streak, "
                         "last_check = excluded.last_check", [(fp, n, check_id) for fp, n in sorted(streaks.items())])

