"""The config each check was checked with (migration component "check_config").

`check_configs`: per check, the hash of the effective config (`Config.hash()`, the same value
as `checks.config_hash`), where it came from (`file`: an xfid.toml; `bundled`: the bundled
config alone; `unsaved`: a Config built in code, whose text xfid never saw), the path of the
xfid.toml as it was given (absolute) and its text as read. A store knows from it which config its
numbers were judged by; a later command without `--config` uses the config of the last check
(xfid.storeconfig), and one run with another config is warned about.
"""

from __future__ import annotations

from dataclasses import dataclass

from xfid.sqlbackend import Database
from xfid.store import migrate

MIGRATIONS: list[str] = [
    """
    CREATE TABLE check_configs (check_id INTEGER PRIMARY KEY REFERENCES checks(id), config_hash TEXT NOT NULL,
                                origin TEXT NOT NULL, path TEXT, content TEXT);
    """,
]


@dataclass(frozen=True)
class RecordedConfig:
    """The config of one recorded check. `known` is False when only its hash is known: a check
    recorded before checks kept their config, or one judged by an unsaved Config."""

    check_id: int
    config_hash: str
    path: str | None
    content: str | None
    known: bool = True

    @property
    def where(self) -> str:
        """How the config is named to a reader: its path, or the bundled config."""
        return self.path or "the bundled config (no xfid.toml)"


def setup(conn: Database) -> None:
    """Create or upgrade the table (after the tracker's: a row names a check)."""
    migrate(conn, "check_config", MIGRATIONS)


def insert(conn: Database, check_id: int, config_hash: str, path: str | None, content: str | None) -> None:
    """Record the config of check `check_id` (inside the check's write transaction): an xfid.toml
    (path and text), the bundled config (neither), or an unsaved Config (a path-less text-less
    config whose hash is not the bundled one's: the caller passes path None, content None)."""
    origin = "file" if content is not None else "bundled" if config_hash == _bundled_hash() else "unsaved"
    conn.execute("INSERT INTO check_configs (check_id, config_hash, origin, path, content) VALUES (?,?,?,?,?)",
                 (int(check_id), config_hash, origin, path, content))


def _bundled_hash() -> str:
    from xfid.config import config_from_text

    return config_from_text(None, None).hash()


def last(conn: Database) -> RecordedConfig | None:
    """The config of the store's last check; None when no check was recorded (or no tracker yet)."""
    tables = conn.tables()
    if "checks" not in tables:
        return None
    row = conn.execute("SELECT id, config_hash FROM checks WHERE rows_file IS NOT NULL "
                       "ORDER BY id DESC LIMIT 1").fetchone()
    if row is None:
        return None
    cid, chash = int(row[0]), str(row[1] or "")
    if "check_configs" in tables:
        r = conn.execute("SELECT config_hash, origin, path, content FROM check_configs WHERE check_id=?",
                         (cid,)).fetchone()
        if r is not None:
            return RecordedConfig(cid, str(r[0]), r[2], r[3], known=r[1] != "unsaved")
    return RecordedConfig(cid, chash, None, None, known=False)
