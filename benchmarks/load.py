"""Load: 16 concurrent writers × 100 operations (ingests and tracker state changes) on one store.

Each writer is its own process; half of its operations ingest a new small xfid-records file,
half add a note to a tracked issue (a tracker transition under BEGIN IMMEDIATE). Afterwards
the store must hold exactly every row once, every source once, every transition once, and
no writer may have seen a "database is locked" error. Prints operations/s.

With `--database postgresql://USER@HOST/DB` the same load runs a second time against a team
store (catalog and tracker in a new database created on that server, dropped afterwards; the
records in a shared directory) and its figure is printed beside the SQLite one.

    python benchmarks/load.py [--writers 16] [--ops 100] [--database URL]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROWS_PER_FILE = 20
HEADER = "fidelity,target,workload,op,metric,stat,value,unit,run\n"


def seed_issues(store_path: Path, database: str | None, n: int = 8) -> list[str]:
    import pandas as pd

    from xfid.engine.contract import COMPARISON_COLUMNS, ROW_COLUMNS, Correlation
    from xfid.engine.fingerprints import fingerprint
    from xfid.store import Store
    from xfid.tracker import Tracker

    rows = []
    for i in range(n):
        r = {c: None for c in ROW_COLUMNS}
        r.update(target="h100-sxm", workload="w", op=f"op{i}", metric="latency", stat="value", candidate="archmodel",
                 reference="measured", candidate_value=1.5, reference_value=1.0, unit="s", rel_error=0.5,
                 log_ratio=0.405, tolerance=0.1, tolerance_abs=0.0, within=False, kind="over_tolerance", severity=5.0,
                 fingerprint=fingerprint("h100-sxm", "w", f"op{i}", "latency", "value", "archmodel", "measured"))
        rows.append(r)
    corr = Correlation(rows=pd.DataFrame(rows), comparisons=pd.DataFrame(columns=list(COMPARISON_COLUMNS)),
                       discrepancies=pd.DataFrame(rows), coverage=pd.DataFrame())
    with Store(store_path, database=database) as s:
        Tracker(s).record_check(corr, actor="seed")
        return [i["id"] for i in Tracker(s).issues()]


def writer(wid: int, store_path: str, work: str, ops: int, ids: list[str], q, database: str | None = None) -> None:
    from xfid.ingest import IngestOptions, ingest
    from xfid.store import Store
    from xfid.tracker import Tracker

    errors: list[str] = []
    done = {"ingest": 0, "note": 0}
    with Store(store_path, database=database) as s:
        tr = Tracker(s)
        for i in range(ops):
            try:
                if i % 2 == 0:
                    f = Path(work) / f"w{wid}-{i}.csv"
                    f.write_text(HEADER + "".join(f"measured,h100-sxm,w{wid},op{j},latency,value,{wid}.{i}{j},us,r{i}\n"
                                                  for j in range(ROWS_PER_FILE)))
                    ingest(s, [f], IngestOptions())
                    done["ingest"] += 1
                else:
                    tr.transition(ids[(wid + i) % len(ids)], "note", actor=f"writer{wid}", note=f"w{wid} op{i}")
                    done["note"] += 1
            except sqlite3.OperationalError as e:
                errors.append(f"{type(e).__name__}: {e}")
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}")
    q.put((wid, done, errors))


def run(writers: int, ops: int, database: str | None) -> tuple[float, bool]:
    """One load on a new store; (ops/s, everything accounted for)."""
    from xfid.sqlbackend import mask

    label = f"PostgreSQL {mask(database)}" if database else "SQLite"
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "store"
        work = Path(d) / "files"
        work.mkdir()
        ids = seed_issues(store, database)
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=writer, args=(w, str(store), str(work), ops, ids, q, database))
                 for w in range(writers)]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        results = [q.get() for _ in procs]
        for p in procs:
            p.join()
        dt = time.perf_counter() - t0
        from xfid.store import Store

        with Store(store, database=database) as s:
            rows = s.read(columns=["value"]).num_rows
            sources = len(s.sources())
            notes = s.conn.execute("SELECT COUNT(*) FROM transitions WHERE action='note'").fetchone()[0]
            integrity = s.conn.execute("PRAGMA integrity_check").fetchone()[0] if database is None else "ok"
        ingests = sum(r[1]["ingest"] for r in results)
        note_ops = sum(r[1]["note"] for r in results)
        errors = [e for r in results for e in r[2]]
        want_rows = ingests * ROWS_PER_FILE
        rate = (ingests + note_ops) / dt
        print(f"{label}: writers {writers} x ops {ops}: {ingests} ingests + {note_ops} state changes in {dt:.1f} s "
              f"= {rate:.1f} ops/s ({ingests / dt:.1f} ingests/s)")
        print(f"  rows {rows} (expected {want_rows}), sources {sources} (expected {ingests}), "
              f"notes {notes} (expected {note_ops}), errors {len(errors)}, integrity {integrity}")
        for e in errors[:5]:
            print("  error:", mask(e))
        ok = rows == want_rows and sources == ingests and notes == note_ops and not errors and integrity == "ok"
        print("  OK: nothing lost, nothing duplicated, no lock errors" if ok else "  FAILED")
        return rate, ok


def fresh_database(url: str) -> tuple[str, str]:
    """A new database on the server of `url` (the role needs CREATEDB); (its URL, its name)."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"xfid_load_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    u = urlsplit(url)
    return urlunsplit((u.scheme, u.netloc, f"/{name}", u.query, "")), name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--ops", type=int, default=100)
    ap.add_argument("--database", metavar="URL", help="also run against a PostgreSQL catalog on this server")
    a = ap.parse_args()
    sqlite_rate, ok = run(a.writers, a.ops, None)
    if a.database:
        import psycopg

        url, name = fresh_database(a.database)
        try:
            pg_rate, pg_ok = run(a.writers, a.ops, url)
        finally:
            with psycopg.connect(a.database, autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        print(f"ops/s: SQLite {sqlite_rate:.1f}, PostgreSQL {pg_rate:.1f} ({pg_rate / sqlite_rate:.2f}x)")
        ok = ok and pg_ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
