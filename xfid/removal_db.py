"""The removal tables (migration component "removal"): removed sources and their parts.

Only SQL here, and nothing of xfid.store: the store reads `removed_parts` to know every part
file that is its own (xfid.removal moves the rows; see there).
"""

from __future__ import annotations

from typing import Any

from xfid.errors import StoreError
from xfid.sqlbackend import Database, migrate

COMPONENT = "removal"
MIGRATIONS: list[str] = [
    """
    CREATE TABLE removed_sources (
        removal_id INTEGER PRIMARY KEY AUTOINCREMENT,
        source_id TEXT NOT NULL,
        path TEXT NOT NULL,
        adapter TEXT NOT NULL,
        options TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        rows INTEGER NOT NULL,
        ingested_at TEXT NOT NULL,
        summary TEXT NOT NULL,
        removed_at TEXT NOT NULL,
        actor TEXT NOT NULL,
        reason TEXT,
        cause TEXT,
        after_check INTEGER,
        evaluated_check INTEGER
    );
    CREATE INDEX removed_sources_source ON removed_sources(source_id);
    CREATE TABLE removed_parts (
        file TEXT PRIMARY KEY,
        removal_id INTEGER NOT NULL REFERENCES removed_sources(removal_id),
        source_id TEXT NOT NULL,
        fidelity TEXT NOT NULL,
        rows INTEGER NOT NULL
    );
    CREATE INDEX removed_parts_removal ON removed_parts(removal_id);
    """,
]
"""`after_check`: the last check before the removal; `evaluated_check`: the first check after it
(which re-evaluated the issues that depended on the source; NULL until then)."""


def setup(conn: Database) -> None:
    """Create or upgrade the removal tables (when a writable store opens, and before a removal;
    readers of a store from before them cope without them)."""
    migrate(conn, COMPONENT, MIGRATIONS)


def setup_on_open(conn: Database) -> bool:
    """setup() when a writable store opens; whether the tables are there. A team store's role
    that may not create tables (docs/team.md) opens the store all the same; its first removal
    then says what is missing."""
    try:
        setup(conn)
    except StoreError:
        return has_tables(conn)
    return True


def has_tables(conn: Database) -> bool:
    return "removed_parts" in conn.tables()


def removed_files(conn: Database) -> set[str]:
    """The part files (relative to the records) of every removed source: still the store's own."""
    return {r[0] for r in conn.execute("SELECT file FROM removed_parts")}


def removals(conn: Database) -> list[dict[str, Any]]:
    """Every removal, oldest first, with the removed source's manifest row ([] before the first)."""
    if not has_tables(conn):
        return []
    return [dict(r) for r in conn.execute("SELECT * FROM removed_sources ORDER BY removal_id")]


__all__ = ["COMPONENT", "MIGRATIONS", "has_tables", "removals", "removed_files", "setup", "setup_on_open"]
