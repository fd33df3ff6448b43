"""The tracker's SQLite tables (versioned migrations) and value conversions for them."""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

MIGRATIONS: list[str] = [
    """
    CREATE TABLE tracker_seq (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
    INSERT INTO tracker_seq VALUES ('issue', 0);
    CREATE TABLE issues (
        num INTEGER PRIMARY KEY,
        fingerprint TEXT NOT NULL UNIQUE,
        state TEXT NOT NULL,
        kind TEXT NOT NULL,
        severity REAL,
        target TEXT, workload TEXT, op TEXT, metric TEXT, stat TEXT,
        candidate TEXT, reference TEXT,
        candidate_value REAL, reference_value REAL, unit TEXT,
        rel_error REAL, tolerance REAL,
        owner TEXT,
        waiver_reason TEXT, waiver_until TEXT, waiver_max_error REAL,
        clean_streak INTEGER NOT NULL DEFAULT 0,
        first_seen TEXT NOT NULL, last_seen TEXT NOT NULL,
        first_check INTEGER, last_check INTEGER,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX issues_state ON issues(state);
    CREATE TABLE checks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        time TEXT NOT NULL,
        actor TEXT NOT NULL,
        label TEXT,
        config_hash TEXT NOT NULL,
        sources TEXT NOT NULL,
        counts TEXT NOT NULL,
        comparisons TEXT NOT NULL,
        settings TEXT NOT NULL,
        rows_file TEXT,
        n_rows INTEGER NOT NULL
    );
    CREATE INDEX checks_time ON checks(time);
    CREATE TABLE observations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        issue_num INTEGER NOT NULL REFERENCES issues(num),
        check_id INTEGER NOT NULL REFERENCES checks(id),
        time TEXT NOT NULL,
        kind TEXT NOT NULL, severity REAL,
        candidate_value REAL, reference_value REAL, unit TEXT,
        rel_error REAL, log_ratio REAL, tolerance REAL, tolerance_abs REAL,
        candidate_n INTEGER, reference_n INTEGER,
        candidate_run TEXT, reference_run TEXT,
        candidate_source_path TEXT, candidate_source_loc TEXT,
        reference_source_path TEXT, reference_source_loc TEXT,
        candidate_config TEXT, reference_config TEXT,
        note TEXT
    );
    CREATE INDEX observations_issue ON observations(issue_num);
    CREATE TABLE transitions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        issue_num INTEGER NOT NULL REFERENCES issues(num),
        check_id INTEGER REFERENCES checks(id),
        time TEXT NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        from_state TEXT,
        to_state TEXT NOT NULL,
        note TEXT, owner TEXT, reason TEXT, until TEXT, max_error REAL
    );
    CREATE INDEX transitions_issue ON transitions(issue_num);
    CREATE INDEX transitions_time ON transitions(time);
    """,
]

OBSERVATION_FIELDS = (
    "kind", "severity", "candidate_value", "reference_value", "unit", "rel_error", "log_ratio",
    "tolerance", "tolerance_abs", "candidate_n", "reference_n", "candidate_run", "reference_run",
    "candidate_source_path", "candidate_source_loc", "reference_source_path", "reference_source_loc",
    "candidate_config", "reference_config", "note",
)
INTEGER_FIELDS = ("candidate_n", "reference_n")
FLOAT_FIELDS = ("severity", "candidate_value", "reference_value", "rel_error", "log_ratio",
                "tolerance", "tolerance_abs")


def plain(v: Any) -> Any:
    """A value as JSON/SQLite takes it: numpy scalars unwrapped, NaN/NA -> None, arrays -> lists."""
    if v is None:
        return None
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (str, int, float, bool)):
        return v
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
        if isinstance(v, pd.Timestamp):
            return v.isoformat()
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    return str(v)


def as_float(v: Any) -> float | None:
    v = plain(v)
    if v is None or isinstance(v, (list, dict)):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def as_int(v: Any) -> int | None:
    f = as_float(v)
    return None if f is None or math.isinf(f) else int(f)


def as_text(v: Any) -> str | None:
    v = plain(v)
    if v is None:
        return None
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def observation_values(row: dict[str, Any]) -> list[Any]:
    """OBSERVATION_FIELDS of one correlation row, converted for SQLite."""
    out = []
    for f in OBSERVATION_FIELDS:
        v = row.get(f)
        out.append(as_float(v) if f in FLOAT_FIELDS else as_int(v) if f in INTEGER_FIELDS else as_text(v))
    return out


def dumps(v: Any) -> str:
    return json.dumps(plain(v), sort_keys=True)


def row_dict(r: sqlite3.Row | None) -> dict[str, Any] | None:
    return None if r is None else dict(r)
