"""The tracker's SQL: tables (versioned migrations), every statement, and value conversions.

Nothing else in xfid.tracker writes SQL. One SQL text serves both backends (xfid.sqlbackend:
`?` placeholders, portable upserts, `RETURNING`); the DDL is translated for PostgreSQL there.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from xfid.sqlbackend import Database
from xfid.store import migrate

if TYPE_CHECKING:
    import pandas as pd

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
    # the op-map coverage table each check saw (JSON records), read by the report
    """
    ALTER TABLE checks ADD COLUMN coverage TEXT;
    """,
    # the sha256 of each check's rows file: doctor and readers tell an overwritten file from the check's rows
    """
    ALTER TABLE checks ADD COLUMN rows_sha256 TEXT;
    """,
    # triage verdicts (xfid.tracker.lifecycle.TRIAGED): an invalid issue's reason, the issue a
    # duplicate or downstream one names (also kept on its history row)
    """
    ALTER TABLE issues ADD COLUMN triage_reason TEXT;
    ALTER TABLE issues ADD COLUMN related_to INTEGER;
    ALTER TABLE transitions ADD COLUMN related INTEGER;
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
    import pandas as pd

    if v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
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


def column_values(frame: pd.DataFrame, field: str) -> list[Any]:
    """One column of a frame of correlation rows converted as `observation_values` converts each
    value (as_float, as_int or as_text by OBSERVATION_FIELDS' types; KEY_COLUMNS and other fields as
    text); a column the frame lacks gives None. Numeric columns are converted as arrays: the per-value
    conversions were most of the time a check spent filing many issues."""
    if field not in frame.columns:
        return [None] * len(frame)
    col = frame[field]
    if field in FLOAT_FIELDS or field in INTEGER_FIELDS:
        from pandas.api.types import is_numeric_dtype

        if not is_numeric_dtype(col.dtype):
            values = col.tolist()
            return [as_float(v) for v in values] if field in FLOAT_FIELDS else [as_int(v) for v in values]
        import numpy as np

        a = col.to_numpy(dtype=np.float64, na_value=np.nan)
        if field in FLOAT_FIELDS:
            return [None if x != x else x for x in a.tolist()]
        return [None if x != x or math.isinf(x) else int(x) for x in a.tolist()]
    return [v if type(v) is str else as_text(v) for v in col.tolist()]


def observation_rows(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """`observation_values` of every row of a frame, as tuples (converted column by column)."""
    return list(zip(*(column_values(frame, f) for f in OBSERVATION_FIELDS), strict=True)) if len(frame) else []


def dumps(v: Any) -> str:
    return json.dumps(plain(v), sort_keys=True)


KEY_COLUMNS = ("target", "workload", "op", "metric", "stat", "candidate", "reference")
LATEST_COLUMNS = ("kind", "severity", "candidate_value", "reference_value", "unit", "rel_error", "tolerance")
ISSUE_COLUMNS = frozenset((
    "state", *KEY_COLUMNS, *LATEST_COLUMNS, "owner", "waiver_reason", "waiver_until", "waiver_max_error",
    "triage_reason", "related_to", "clean_streak", "first_seen", "last_seen", "first_check", "last_check", "updated_at"))
TRANSITION_EXTRA = ("note", "owner", "reason", "until", "max_error", "related")
HISTORY_COLUMNS = ("time", "actor", "action", "from_state", "to_state", *TRANSITION_EXTRA, "check_id")
CHECK_COLUMNS = ("id", "time", "actor", "label", "config_hash", "rows_file", "n_rows")
CHECK_JSON = ("sources", "counts", "comparisons", "settings")


def setup(conn: Database) -> None:
    """Create or upgrade the tracker tables."""
    migrate(conn, "tracker", MIGRATIONS)


# --- issues ------------------------------------------------------------------------------
def next_issue_number(conn: Database) -> int:
    """The next XF-N number (never reused, even after a deleted issue). Inside a write transaction.

    The counter row is read once per transaction; later numbers of the same transaction are
    counted on from it (the write lock is held: no other writer can move it meanwhile), so
    PostgreSQL's pipeline does not wait for the server once per new issue.
    """
    return next_issue_numbers(conn, 1)[0]


def next_issue_numbers(conn: Database, n: int) -> list[int]:
    """`n` calls of next_issue_number at once: the next `n` numbers, in order, with one statement."""
    if n <= 0:
        return []
    last = conn.tx_values.get("issue_seq")
    if last is None:
        top = int(conn.execute("UPDATE tracker_seq SET value = value + ? WHERE name='issue' RETURNING value",
                               (n,)).fetchone()[0])
    else:
        top = int(last) + n
        conn.defer("UPDATE tracker_seq SET value = ? WHERE name='issue'", (top,), rank=0)
    conn.tx_values["issue_seq"] = top
    return list(range(top - n + 1, top + 1))


def _by_columns(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    """Rows grouped by their columns (in the order each set first came), each group in order."""
    out: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for values in rows:
        out.setdefault(tuple(values), []).append(values)
    return out


def insert_issues(conn: Database, rows: Sequence[dict[str, Any]]) -> None:
    """insert_issue for many rows: one statement per set of columns, rows in order."""
    for cols, group in _by_columns(rows).items():
        _check_columns(dict.fromkeys(cols), {"num", "fingerprint"})
        conn.defer_many(_issue_insert(cols), [[v[c] for c in cols] for v in group], rank=1)


def update_issues(conn: Database, updates: Sequence[tuple[int, dict[str, Any]]]) -> None:
    """update_issue for many issues (each at most once): one statement per set of columns."""
    groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for num, values in updates:
        if values:
            groups.setdefault(tuple(values), []).append((*values.values(), num))
    for cols, rows in groups.items():
        _check_columns(dict.fromkeys(cols), set())
        conn.defer_many(_issue_update(cols), rows, rank=1)


def _issue_insert(cols: Sequence[str]) -> str:
    return f"INSERT INTO issues ({', '.join(cols)}) VALUES ({','.join('?' * len(cols))})"


def _issue_update(cols: Sequence[str]) -> str:
    return f"UPDATE issues SET {', '.join(f'{c}=?' for c in cols)} WHERE num=?"


def insert_issue(conn: Database, values: dict[str, Any]) -> None:
    _check_columns(values, {"num", "fingerprint"})
    cols = list(values)
    conn.defer(_issue_insert(cols), [values[c] for c in cols], rank=1)  # before the transitions and observations naming it


def update_issue(conn: Database, num: int, values: dict[str, Any]) -> None:
    if not values:
        return
    _check_columns(values, set())
    conn.execute(_issue_update(list(values)), (*values.values(), num))


def _check_columns(values: dict[str, Any], extra: set[str]) -> None:
    bad = set(values) - ISSUE_COLUMNS - extra
    if bad:  # column names are put into the statement: only the table's own are allowed
        raise ValueError(f"not issue columns: {sorted(bad)}")


def issue_row(conn: Database, num: int) -> dict[str, Any] | None:
    r = conn.execute("SELECT * FROM issues WHERE num=?", (num,)).fetchone()
    return None if r is None else dict(r)


def issues_by_fingerprint(conn: Database) -> dict[str, dict[str, Any]]:
    return {r["fingerprint"]: dict(r) for r in conn.execute("SELECT * FROM issues")}


def select_issues(conn: Database, equal: dict[str, Any], severity_min: float | None) -> list[dict[str, Any]]:
    """Issues ordered by number where each given column equals its value (None: any)."""
    q, args = "SELECT * FROM issues WHERE 1=1", list[Any]()
    for col, v in equal.items():
        if col not in ISSUE_COLUMNS:
            raise ValueError(f"not an issue column: {col!r}")
        if v is not None:
            q += f" AND {col}=?"
            args.append(v)
    if severity_min is not None:
        q += " AND severity >= ?"
        args.append(float(severity_min))
    return [dict(r) for r in conn.execute(q + " ORDER BY num", args)]


def count_in_states(conn: Database, states: Sequence[str]) -> int:
    return int(conn.execute(f"SELECT COUNT(*) FROM issues WHERE state IN ({','.join('?' * len(states))})",
                            tuple(states)).fetchone()[0])


def number_range(conn: Database) -> tuple[int | None, int | None, int]:
    """(lowest, highest, count) of the issue numbers."""
    r = conn.execute("SELECT MIN(num), MAX(num), COUNT(*) FROM issues").fetchone()
    return r[0], r[1], int(r[2])


def related_to(conn: Database, num: int) -> int | None:
    """The issue a duplicate or downstream issue names (None: none, or no such issue)."""
    r = conn.execute("SELECT related_to FROM issues WHERE num=?", (num,)).fetchone()
    return None if r is None or r[0] is None else int(r[0])


def last_action(conn: Database, num: int) -> str | None:
    """The action of an issue's latest history row (None: no history yet)."""
    r = conn.execute("SELECT action FROM transitions WHERE issue_num=? ORDER BY id DESC LIMIT 1", (num,)).fetchone()
    return None if r is None else str(r[0])


def invalid_keys(conn: Database) -> list[tuple[str, ...]]:
    """The keys (KEY_COLUMNS) of the issues marked invalid, in issue order."""
    return [tuple(r[c] or "" for c in KEY_COLUMNS)
            for r in conn.execute(f"SELECT {', '.join(KEY_COLUMNS)} FROM issues WHERE state='invalid' ORDER BY num")]


def waivers_due(conn: Database, today: str) -> list[dict[str, Any]]:
    """Waived issues whose expiry date is before `today` (YYYY-MM-DD)."""
    return [dict(r) for r in conn.execute(
        "SELECT * FROM issues WHERE state='waived' AND waiver_until < ? ORDER BY num", (today,))]


def any_waiver_due(conn: Database, today: str) -> bool:
    return conn.execute("SELECT 1 FROM issues WHERE state='waived' AND waiver_until < ? LIMIT 1",
                        (today,)).fetchone() is not None


# --- transitions and observations -------------------------------------------------------
TRANSITION_INSERT = ("INSERT INTO transitions (issue_num, check_id, time, actor, action, from_state, to_state,"
                     f" {', '.join(TRANSITION_EXTRA)}) VALUES ({','.join('?' * (7 + len(TRANSITION_EXTRA)))})")


def insert_transition(conn: Database, num: int, check_id: int | None, time: str, actor: str,
                      action: str, from_state: str | None, to_state: str, extra: dict[str, Any]) -> None:
    conn.defer(TRANSITION_INSERT,
               (num, check_id, time, actor, action, from_state, to_state, *(extra.get(k) for k in TRANSITION_EXTRA)),
               rank=2)


def insert_transitions(conn: Database, rows: Sequence[tuple[Any, ...]]) -> None:
    """insert_transition for many rows, in order: (num, check_id, time, actor, action, from_state,
    to_state, extra)."""
    conn.defer_many(TRANSITION_INSERT, [(*r[:7], *(r[7].get(k) for k in TRANSITION_EXTRA)) for r in rows], rank=2)


def last_actions(conn: Database, nums: Iterable[int]) -> dict[int, str]:
    """last_action of many issues: {num: action} for those with history."""
    wanted = sorted({int(n) for n in nums})
    out: dict[int, str] = {}
    for i in range(0, len(wanted), 500):
        part = wanted[i:i + 500]
        marks = ",".join("?" * len(part))
        out.update((int(r[0]), str(r[1])) for r in conn.execute(
            "SELECT t.issue_num, t.action FROM transitions t JOIN (SELECT issue_num, MAX(id) AS id FROM transitions"
            f" WHERE issue_num IN ({marks}) GROUP BY issue_num) m ON m.id = t.id", part))
    return out


def history(conn: Database, num: int) -> list[dict[str, Any]]:
    """An issue's transitions, oldest first; `related` as its XF-N (duplicate, downstream)."""
    out = []
    for r in conn.execute("SELECT * FROM transitions WHERE issue_num=? ORDER BY id", (num,)):
        h = {k: r[k] for k in HISTORY_COLUMNS}
        h["related"] = None if h["related"] is None else f"XF-{int(h['related'])}"
        out.append(h)
    return out


OBSERVATION_INSERT = (f"INSERT INTO observations (issue_num, check_id, time, {', '.join(OBSERVATION_FIELDS)})"
                      f" VALUES ({','.join('?' * (3 + len(OBSERVATION_FIELDS)))})")


def insert_observation(conn: Database, num: int, check_id: int, time: str, row: dict[str, Any]) -> None:
    conn.defer(OBSERVATION_INSERT, (num, check_id, time, *observation_values(row)), rank=2)


def insert_observations(conn: Database, rows: Sequence[tuple[Any, ...]]) -> None:
    """insert_observation for many rows, in order: (num, check_id, time, *observation values)."""
    conn.defer_many(OBSERVATION_INSERT, rows, rank=2)


def observations(conn: Database, num: int) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT o.*, c.label AS check_label FROM observations o JOIN checks c ON c.id = o.check_id"
                        " WHERE o.issue_num=? ORDER BY o.id", (num,))
    return [{k: v for k, v in dict(r).items() if k not in ("id", "issue_num")} for r in rows]


def transitions_between(conn: Database, since: str | None, until: str | None) -> list[dict[str, Any]]:
    """Transitions with since <= time < until joined with their issue's key, oldest first."""
    q, args = _window("SELECT t.*, i.fingerprint, i.kind, i.target, i.workload, i.op, i.metric, i.stat,"
                      " i.candidate, i.reference FROM transitions t JOIN issues i ON i.num = t.issue_num"
                      " WHERE 1=1", "t.time", since, until)
    return [dict(r) for r in conn.execute(q + " ORDER BY t.id", args)]


# --- checks -------------------------------------------------------------------------------
def insert_check(conn: Database, time: str, actor: str, label: str | None, config_hash: str,
                 sources: Any, comparisons: Any, settings: Any, coverage: Any, n_rows: int) -> int:
    row = conn.execute(
        "INSERT INTO checks (time, actor, label, config_hash, sources, counts, comparisons, settings,"
        " rows_file, n_rows, coverage) VALUES (?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
        (time, actor, label, config_hash, dumps(sources), "{}", dumps(comparisons), dumps(settings), None,
         n_rows, None if coverage is None else dumps(coverage))).fetchone()
    return int(row[0])


def finish_check(conn: Database, check_id: int, counts: dict[str, int], rows_file: str,
                 rows_sha256: str | None = None) -> None:
    conn.execute("UPDATE checks SET counts=?, rows_file=?, rows_sha256=? WHERE id=?",
                 (dumps(counts), rows_file, rows_sha256, check_id))


def saved_rows(conn: Database, check_id: int | None = None) -> list[tuple[int, str | None, int | None, str | None]]:
    """(id, rows_file, n_rows, rows_sha256) of each check (or one), by id; rows_sha256 None for a
    check recorded before it was kept, or a database whose tracker is not migrated yet."""
    where, args = ("WHERE id=?", (int(check_id),)) if check_id is not None else ("", ())
    out = []
    for r in conn.execute(f"SELECT * FROM checks {where} ORDER BY id", args):
        d = dict(r)
        out.append((int(d["id"]), d.get("rows_file"), d.get("n_rows"), d.get("rows_sha256")))
    return out


def select_checks(conn: Database, since: str | None, until: str | None) -> list[dict[str, Any]]:
    """Checks with since <= time < until, oldest first; JSON columns decoded (coverage left out)."""
    q, args = _window("SELECT * FROM checks WHERE 1=1", "time", since, until)
    out = []
    for r in conn.execute(q + " ORDER BY id", args):
        d = {k: r[k] for k in CHECK_COLUMNS}
        for k in CHECK_JSON:
            d[k] = json.loads(r[k])
        out.append(d)
    return out


def check_field(conn: Database, check_id: int, column: str) -> tuple[bool, Any]:
    """(the check exists, its `column`: rows_file or coverage)."""
    if column not in ("rows_file", "coverage"):
        raise ValueError(f"not a check column: {column!r}")
    r = conn.execute(f"SELECT {column} FROM checks WHERE id=?", (int(check_id),)).fetchone()
    return (False, None) if r is None else (True, r[0])


def last_check_id(conn: Database) -> int | None:
    return conn.execute("SELECT MAX(id) FROM checks").fetchone()[0]


def rows_files(conn: Database) -> set[str]:
    """The saved-rows file names of every committed check."""
    return {r[0] for r in conn.execute("SELECT rows_file FROM checks WHERE rows_file IS NOT NULL")}


def _window(query: str, column: str, since: str | None, until: str | None) -> tuple[str, list[Any]]:
    """`query` narrowed to since <= column < until (either bound optional), with its arguments."""
    args: list[Any] = []
    if since is not None:
        query += f" AND {column} >= ?"
        args.append(since)
    if until is not None:
        query += f" AND {column} < ?"
        args.append(until)
    return query, args
