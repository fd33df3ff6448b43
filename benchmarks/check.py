"""Benchmark `xfid check` (a store's first check, local engine) against another source tree.

Builds the synthetic store of benchmarks/correlate.py (duplicates in a third of the keys, so the
check bootstraps noise intervals for them), then runs `xfid --store STORE check --format json`
on a fresh copy of it, each run its own process, this tree and every `--tree NAME=DIR` in the
same rounds (order rotated), and prints the medians of wall time, CPU time and peak RSS, their
ratios to the first tree given, and whether every run printed the same summary (timestamps
aside: the same issues filed from the same rows).

    git worktree add --detach /tmp/before HEAD~3
    python benchmarks/check.py --records 1000000 --repeat 3 --tree before=/tmp/before

With `--checks N` each run checks its copy N times in a row (each check its own process), as a
CI gate checks a store that did not change since its last check: the figures are given per check
(1 = the first check of the store, 2 = the one after it, ...).

With `--database URL` (a PostgreSQL server whose role may CREATE DATABASE) the check runs on a
team store: the store is copied once (`xfid store copy`) into a database and records folder
under the workdir, and each run checks a fresh database made from it (CREATE DATABASE ...
TEMPLATE) with a fresh checks folder; the run also counts the statements the client sent
(`execute` calls plus the rows of `executemany`, which psycopg pipelines) and its calls.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")


def count_statements() -> dict[str, int]:
    """Count what psycopg's cursors are asked to send (in this process, from now on)."""
    import psycopg

    seen = {"statements": 0, "calls": 0}
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def one(self, query, params=None, **kw):  # type: ignore[no-untyped-def]
        seen["statements"] += 1
        seen["calls"] += 1
        return execute(self, query, params, **kw)

    def many(self, query, params_seq, **kw):  # type: ignore[no-untyped-def]
        rows = list(params_seq)
        seen["statements"] += len(rows)
        seen["calls"] += 1
        return executemany(self, query, rows, **kw)

    psycopg.Cursor.execute, psycopg.Cursor.executemany = one, many  # type: ignore[method-assign]
    return seen


def child(store: str) -> None:
    """One check in this process: wall and CPU time of the command, peak RSS, the output's hash."""
    import contextlib
    import io

    from xfid.cli import main

    sent = count_statements() if os.environ.get("XFID_DATABASE_URL") else {}
    out = io.StringIO()
    t, c = time.perf_counter(), os.times()
    with contextlib.redirect_stdout(out):
        try:
            main(["--store", store, "check", "--format", "json"])
        except SystemExit as e:
            if e.code:
                raise
    c2 = os.times()
    text = STAMP.sub("T", out.getvalue())
    summary = json.loads(text)
    print(json.dumps({"wall_s": time.perf_counter() - t, "cpu_s": c2.user + c2.system - c.user - c.system,
                      "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "new": len(summary.get("new") or []), "rows": summary.get("rows"),
                      "hash": hashlib.sha256(text.encode()).hexdigest()[:16], **sent}))


def _admin(database: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(database, autocommit=True) as c:
        c.execute(sql)


def _db_url(database: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    u = urlsplit(database)
    return urlunsplit((u.scheme, u.netloc, f"/{name}", u.query, ""))


def team_store(store: Path, work: Path, database: str) -> None:
    """The store copied once into the database `xfid_bench_check_base` and `work/team/records`."""
    if (work / "team" / "copied").exists():
        return
    shutil.rmtree(work / "team", ignore_errors=True)
    _admin(database, 'DROP DATABASE IF EXISTS "xfid_bench_check_base" WITH (FORCE)')
    _admin(database, 'CREATE DATABASE "xfid_bench_check_base"')
    env = {k: v for k, v in os.environ.items() if k not in ("XFID_DATABASE_URL", "XFID_RECORDS_URL")}
    p = subprocess.run([sys.executable, "-m", "xfid.cli", "--store", str(store), "store", "copy", "--to-database",
                        _db_url(database, "xfid_bench_check_base"), "--to-records", str(work / "team" / "records")],
                       capture_output=True, text=True, env=env)
    if p.returncode:
        raise SystemExit(f"the store copy failed:\n{p.stderr[-3000:]}")
    (work / "team" / "copied").write_text("")
    print("team store copied into the database xfid_bench_check_base")


def run(tree: str | None, store: Path, work: Path, database: str | None = None, checks: int = 1) -> list[dict]:
    copy = work / "run" / "store"  # the same path for every run: the outputs compare
    shutil.rmtree(copy.parent, ignore_errors=True)
    env = dict(os.environ)
    if database:
        _admin(database, 'DROP DATABASE IF EXISTS "xfid_bench_check_run" WITH (FORCE)')
        _admin(database, 'CREATE DATABASE "xfid_bench_check_run" TEMPLATE "xfid_bench_check_base"')
        shutil.rmtree(work / "team" / "checks", ignore_errors=True)
        copy.mkdir(parents=True)
        env.update(XFID_DATABASE_URL=_db_url(database, "xfid_bench_check_run"),
                   XFID_RECORDS_URL=str(work / "team" / "records"))
    else:
        shutil.copytree(store, copy)
    if tree:
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")])
    out = []
    for _ in range(checks):
        p = subprocess.run([sys.executable, __file__, "--child", str(copy)], capture_output=True, text=True, env=env,
                           cwd=work)
        if p.returncode:
            raise SystemExit(f"the check failed:\n{p.stderr[-3000:]}")
        out.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="another xfid source tree, run in the same rounds (the first is the baseline)")
    ap.add_argument("--checks", type=int, default=1, help="checks in a row on each run's copy (default 1)")
    ap.add_argument("--workdir", help="where the store is built and kept (default: a temporary directory)")
    ap.add_argument("--database", metavar="URL",
                    help="check a team store on this PostgreSQL server (a role that may CREATE DATABASE)")
    args = ap.parse_args()
    from correlate import build_store

    trees: dict[str, str | None] = {name: str(Path(d).resolve()) for name, d in (t.split("=", 1) for t in args.tree)}
    trees["this tree"] = None
    work = Path(args.workdir or tempfile.mkdtemp(prefix="xfid-bench-check-"))
    store = work / f"store-{args.records}"
    if not store.exists():
        shape = build_store(store, args.records)
        print(f"store built: {shape}")
    if args.database:
        team_store(store, work, args.database)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    got: dict[tuple[str, int], list[dict]] = {(name, k): [] for name in trees for k in range(1, args.checks + 1)}
    names = list(trees)
    for r in range(args.repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            for k, res in enumerate(run(trees[name], store, work, args.database, args.checks), 1):
                got[name, k].append(res)
                sent = f"  {res['statements']:,} statements in {res['calls']:,} calls" if "calls" in res else ""
                print(f"  round {r + 1}: {name:<12} check {k}  {res['wall_s']:7.2f} s  CPU {res['cpu_s']:7.2f} s  "
                      f"peak RSS {res['rss_mb']:6.0f} MB  {res['new']} new issues of {res['rows']:,} rows  "
                      f"output {res['hash']}{sent}")
    med = {key: {m: statistics.median(x[m] for x in v) for m in ("wall_s", "cpu_s", "rss_mb")} for key, v in got.items()}
    base = names[0]
    for k in range(1, args.checks + 1):
        for n in names:
            m, b = med[n, k], med[base, k]
            ratio = "" if n == base else "  ratio to {}: wall {:.2f}, CPU {:.2f}, RSS {:.2f}".format(
                base, m["wall_s"] / b["wall_s"], m["cpu_s"] / b["cpu_s"], m["rss_mb"] / b["rss_mb"])
            print(f"  {n:<12} check {k} median of {args.repeat}: {m['wall_s']:7.2f} s  CPU {m['cpu_s']:7.2f} s  "
                  f"peak RSS {m['rss_mb']:6.0f} MB{ratio}")
        same = len({x["hash"] for n in names for x in got[n, k]}) == 1
        print(f"  check {k}: the same output in every run: {same}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
