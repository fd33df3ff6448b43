"""`xfid serve` figures: the issues API with many issues, concurrent uploads, the overview page.

1. `GET /api/issues` with `--issues` (10,000) open issues: p50 and p95 over `--repeat` requests,
   on the SQLite catalog and (with PostgreSQL available) on a team store's catalog.
2. 16 concurrent `POST /api/ingest` of `--rows` (100,000) rows each (through `xfid --server`'s
   client), against 16 concurrent `xfid ingest` processes on the store directly: wall times and
   their ratio, same files, same machine, fresh stores.
3. The overview page (`GET /`) of a store with `--checks` (100) recorded checks: the median.

Every figure is measured here, in this run; the machine is noisy, so medians are quoted.

    python benchmarks/serve.py                     # SQLite, and PostgreSQL if Debian's server is installed
    python benchmarks/serve.py --issues 2000 --rows 20000 --checks 20   # a quick run
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.serving import child_env, running_server, token  # noqa: E402 - the test helpers start real servers

HEAD = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"


def _records(path: Path, fidelity: str, n: int, value, run: str, workload: str = "w") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        f.write(HEAD)
        for i in range(n):
            f.write(f"{fidelity},t100-a0,{workload},op{i},cycles,value,{value(i)},cycles,{run},2026-11-01T00:00:00Z\n")
    return path


def _get(url: str, tok: str) -> float:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {tok}"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        r.read()
    return time.perf_counter() - t0


def _xfid(env: dict[str, str], store: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "xfid", "--store", str(store), *args], env=env, check=True,
                   capture_output=True, timeout=3600)


def issues_api(work: Path, env: dict[str, str], n: int, repeat: int, label: str) -> None:
    store = work / f"issues-{label}"
    ref = _records(work / f"in-{label}" / "rtl.csv", "rtl", n, lambda i: 1000, "r")
    cand = _records(work / f"in-{label}" / "arch.csv", "archmodel", n, lambda i: 1500, "a")
    _xfid(env, store, "ingest", str(ref), str(cand))
    _xfid(env, store, "check", "--actor", "bench")
    tok = token_env(env, store, "bench-reader", "reader")
    with running_server(env, store) as url:
        _get(url + "/api/issues", tok)  # warm
        times = sorted(_get(url + "/api/issues", tok) for _ in range(repeat))
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    print(f"GET /api/issues, {n:,} issues, {label}: p50 {statistics.median(times) * 1e3:.0f} ms, "
          f"p95 {p95 * 1e3:.0f} ms ({repeat} requests)", flush=True)


def token_env(env: dict[str, str], store: Path, name: str, role: str) -> str:
    old = os.environ.get("XFID_DATABASE_URL")
    try:
        if env.get("XFID_DATABASE_URL"):
            os.environ["XFID_DATABASE_URL"] = env["XFID_DATABASE_URL"]
        return token(store, name, role)
    finally:
        if old is None:
            os.environ.pop("XFID_DATABASE_URL", None)
        else:
            os.environ["XFID_DATABASE_URL"] = old


def uploads(work: Path, env: dict[str, str], rows: int, clients: int = 16) -> None:
    files = [_records(work / "up" / f"c{i}" / f"arch{i}.csv", "archmodel", rows, lambda j: 1000 + j, f"c{i}",
                      workload=f"w{i}") for i in range(clients)]
    # directly: 16 `xfid ingest` processes on one store
    direct = work / "direct"
    _xfid(env, direct, "ingest", str(_records(work / "seed.csv", "rtl", 10, lambda i: 1, "s")))
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "xfid", "--store", str(direct), "ingest", str(f)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for f in files]
    for p in procs:
        _, err = p.communicate(timeout=3600)
        assert p.returncode == 0, err
    t_direct = time.perf_counter() - t0
    # through the server: 16 clients uploading at once
    served = work / "served"
    _xfid(env, served, "ingest", str(work / "seed.csv"))
    tok = token(served, "bench-writer", "writer")
    from xfid.client import RemoteStore

    with running_server(env, served) as url:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            got = list(pool.map(lambda f: RemoteStore(url, tok).ingest([f]).rows, files))
        t_server = time.perf_counter() - t0
    assert got == [rows] * clients, got
    print(f"{clients} concurrent ingests of {rows:,} rows each: direct (xfid ingest processes) {t_direct:.1f} s, "
          f"through the server {t_server:.1f} s, ratio {t_server / t_direct:.2f}", flush=True)


def overview(work: Path, env: dict[str, str], checks: int, repeat: int) -> None:
    store = work / "checks"
    ref = _records(work / "ov" / "rtl.csv", "rtl", 200, lambda i: 1000, "r")
    _xfid(env, store, "ingest", str(ref))
    for c in range(checks):  # each check sees a model run of its own: errors move, issues come and go
        arch = _records(work / "ov" / f"arch{c}.csv", "archmodel", 200, lambda i, c=c: 1000 * (1 + ((i + c) % 7) * 0.04),
                        f"a{c}")
        _xfid(env, store, "ingest", str(arch))
        _xfid(env, store, "check", "--actor", "bench")
    tok = token(store, "bench-reader", "reader")
    with running_server(env, store) as url:
        _get(url + "/", tok)
        times = [_get(url + "/", tok) for _ in range(repeat)]
    print(f"overview page, {checks} checks: median {statistics.median(times) * 1e3:.0f} ms "
          f"(min {min(times) * 1e3:.0f}, max {max(times) * 1e3:.0f}; {repeat} requests)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--issues", type=int, default=10_000)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--checks", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--no-postgresql", action="store_true")
    a = ap.parse_args()
    env = child_env()
    env.pop("XFID_DATABASE_URL", None)
    with tempfile.TemporaryDirectory(prefix="xfid-bench-serve-") as d:
        work = Path(d)
        issues_api(work, env, a.issues, a.repeat, "SQLite")
        if not a.no_postgresql:
            from tests.servers import remove_pg, start_pg

            srv, why = start_pg()
            if srv is None:
                print(f"PostgreSQL: not measured ({why})")
            else:
                try:
                    issues_api(work, {**env, "XFID_DATABASE_URL": srv.database()}, a.issues, a.repeat, "PostgreSQL")
                finally:
                    with contextlib.suppress(Exception):
                        remove_pg(srv)
        uploads(work, env, a.rows)
        overview(work, env, a.checks, max(5, a.repeat // 4))


if __name__ == "__main__":
    main()
