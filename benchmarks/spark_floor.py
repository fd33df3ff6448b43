"""What any Spark job over a store costs on this machine, against the local engine's whole job.

The floor is the least a Spark `correlate` must do: start a session (local mode, xfid's sizing),
scan the key and value columns of the committed parts, and shuffle them once by key into an
aggregate. The real job does more (the selection's shuffle, the alignment, the aggregates), so
`floor / local` is a lower bound of `spark / local` here: when it is near a goal, the goal is out
of reach on this machine whatever the engine's plan.

    python benchmarks/spark_floor.py --store DIR --repeat 3      # a store benchmarks/spark.py kept

Each run is its own process; local and floor alternate; medians of wall time are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def child(kind: str, store_dir: str, master: str) -> None:
    from xfid.store import Store

    store = Store(store_dir)
    t0 = time.perf_counter()
    out: dict = {"kind": kind}
    if kind == "local":
        from xfid.config import load_config
        from xfid.engine.engines import correlate_with

        c = correlate_with(store, load_config(None), "local")
        out["rows"] = len(c.rows)
    else:
        from pyspark.sql import functions as F

        from xfid.engine.spark.select import committed_parts, spark_path
        from xfid.engine.spark.session import quiet, spark_session

        with quiet():
            spark = spark_session(None, master, {}, records=sum(int(n or 0) for n in store.counts().values()))
            out["session_s"] = time.perf_counter() - t0
            files = [spark_path(store, p) for p in committed_parts(store)]
            df = spark.read.parquet(*files).select("target", "workload", "op", "metric", "stat", "value")
            t1 = time.perf_counter()
            out["records"] = df.count()
            out["scan_s"] = time.perf_counter() - t1
            t2 = time.perf_counter()
            out["keys"] = (df.groupBy("target", "workload", "op", "metric", "stat")
                           .agg(F.count("*").alias("n"), F.max("value").alias("m")).count())
            out["shuffle_s"] = time.perf_counter() - t2
    out["wall_s"] = time.perf_counter() - t0
    print(json.dumps(out))


def _run(kind: str, store: str, master: str) -> dict:
    p = subprocess.run([sys.executable, __file__, "--child", kind, store, "--master", master],
                       capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{kind} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--store", help="a store (e.g. one benchmarks/spark.py --keep built)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.master)
        return
    if not args.store:
        ap.error("--store is required")
    runs: dict[str, list[dict]] = {"local": [], "floor": []}
    for i in range(args.repeat):
        for kind in (("local", "floor") if i % 2 == 0 else ("floor", "local")):
            r = _run(kind, args.store, args.master)
            runs[kind].append(r)
            load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
            extra = "" if kind == "local" else (f"  (session {r['session_s']:.1f} s, scan {r['scan_s']:.1f} s, "
                                                f"one shuffle + aggregate {r['shuffle_s']:.1f} s; "
                                                f"{r['records']:,} records, {r['keys']:,} keys)")
            print(f"  round {i + 1}: {kind:<5} {r['wall_s']:7.1f} s{extra}  load {load}", flush=True)
    lo = statistics.median(r["wall_s"] for r in runs["local"])
    fl = statistics.median(r["wall_s"] for r in runs["floor"])
    print(f"  medians: local {lo:.1f} s, Spark floor {fl:.1f} s; floor / local {fl / lo:.2f} "
          "(a lower bound of spark / local on this machine)")


if __name__ == "__main__":
    main()
