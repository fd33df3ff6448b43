"""What any Spark job over a store costs on this machine, against the local engine's whole job.

The floor is the least a Spark `correlate` must do: start a session (local mode, xfid's sizing),
scan the key and value columns of the committed parts, and shuffle them once by key into an
aggregate. The real job does more (the selection's shuffle, the alignment, the aggregates), so
`floor / local` is a lower bound of `spark / local` here: when it is near a goal, the goal is out
of reach on this machine whatever the engine's plan.

    python benchmarks/spark_floor.py --store DIR --repeat 3      # a store benchmarks/spark.py kept
    python benchmarks/spark_floor.py --store DIR --repeat 2 --before-conf spark.io.compression.codec=lz4

Each run is its own process; local and floor alternate; medians of wall time are printed, and the
floor's JVM CPU seconds (the steadier figure on a shared machine). `--conf KEY=VALUE` (repeatable)
gives the floor a Spark setting as a user's conf would (JVM options keep xfid's log4j option in
front, as in benchmarks/spark.py); `--before-conf KEY=VALUE` (repeatable)
adds a third run to each round, "before": the floor with those settings instead (e.g. Spark's own
values of what xfid's local-mode defaults change), so both floors are measured in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _jvm_cpu_s() -> float:
    """User + system CPU seconds of this process's java children (the local session's JVM)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for d in os.listdir("/proc"):
        try:
            text = Path(f"/proc/{d}/stat").read_text() if d.isdigit() else ""
        except OSError:
            continue
        if not text or "(java)" not in text:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid():
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def child(kind: str, store_dir: str, master: str, conf: dict[str, str]) -> None:
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
        from xfid.engine.spark.session import LOG4J, quiet, spark_session

        given = conf.get("spark.driver.extraJavaOptions")
        if given is not None and "log4j2.configurationFile" not in given:  # JVM options: keep xfid's logging
            conf = {**conf, "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J.as_uri()} {given}"}

        jvm = {"cpu": 0.0}
        done = threading.Event()

        def sample() -> None:  # the JVM's CPU, read until the job ends (the JVM outlives this child's print)
            while not done.wait(0.2):
                jvm["cpu"] = max(jvm["cpu"], _jvm_cpu_s())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        with quiet():
            spark = spark_session(None, master, conf, records=sum(int(n or 0) for n in store.counts().values()))
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
        done.set()
        sampler.join()
        out["jvm_cpu_s"] = max(jvm["cpu"], _jvm_cpu_s())
    out["wall_s"] = time.perf_counter() - t0
    print(json.dumps(out))


def _run(kind: str, store: str, master: str, conf: list[str]) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, store, "--master", master]
    for kv in conf:
        cmd += ["--conf", kv]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{kind} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--store", help="a store (e.g. one benchmarks/spark.py --keep built)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the floor, as a user's conf (repeatable)")
    ap.add_argument("--before-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="also run the floor with these settings instead, as 'before' (repeatable)")
    args = ap.parse_args()
    for kv in args.conf + args.before_conf:
        if "=" not in kv or not kv.split("=", 1)[0].strip():
            ap.error(f"--conf and --before-conf take KEY=VALUE, got {kv!r}")
    if args.child:
        child(args.child[0], args.child[1], args.master,
              {k.strip(): v for k, v in (kv.split("=", 1) for kv in args.conf)})
        return
    if not args.store:
        ap.error("--store is required")
    kinds = ["local", "floor"] + (["before"] if args.before_conf else [])
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    for i in range(args.repeat):
        for kind in kinds[i % len(kinds):] + kinds[:i % len(kinds)]:  # the order rotates each round
            conf = args.before_conf if kind == "before" else args.conf
            r = _run("local" if kind == "local" else "floor", args.store, args.master, conf)
            runs[kind].append(r)
            load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
            extra = "" if kind == "local" else (f"  (session {r['session_s']:.1f} s, scan {r['scan_s']:.1f} s, "
                                                f"one shuffle + aggregate {r['shuffle_s']:.1f} s; JVM CPU "
                                                f"{r['jvm_cpu_s']:.1f} s; {r['records']:,} records, "
                                                f"{r['keys']:,} keys)")
            print(f"  round {i + 1}: {kind:<6} {r['wall_s']:7.1f} s{extra}  load {load}", flush=True)
    lo = statistics.median(r["wall_s"] for r in runs["local"])
    for kind in kinds[1:]:
        fl = statistics.median(r["wall_s"] for r in runs[kind])
        cpu = statistics.median(r["jvm_cpu_s"] for r in runs[kind])
        name = "Spark floor" if kind == "floor" else "Spark floor before"
        print(f"  medians: local {lo:.1f} s, {name} {fl:.1f} s (JVM CPU {cpu:.1f} s); floor / local {fl / lo:.2f} "
              "(a lower bound of spark / local on this machine)")


if __name__ == "__main__":
    main()
