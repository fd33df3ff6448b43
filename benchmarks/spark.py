"""Benchmark the local engine against `--engine spark` on this machine.

Builds a synthetic store with `benchmarks/correlate.py`'s generator (4 fidelities, ~200
workloads per 10M records x 500 ops x 6 metrics, older runs, duplicates), then runs the default
`correlate()` (Kendall tau, bootstrap CIs, every fingerprint, source_loc) once per engine, each
in its own subprocess:

* local: `xfid.engine.correlate`;
* spark: `xfid.engine.spark.correlate` with `--master` (default local[2]);
* spark-parquet (`--engines local,spark,spark-parquet`): the same with the discrepancies written
  to a Parquet dataset by the executors (`-o DIR.parquet`, `correlate(out=...)`), in the work dir,
  removed after; its driver peak RSS against spark's is the point.

Printed per engine: wall time, the Python driver's peak RSS (VmHWM), for Spark the JVM's peak
RSS (in local mode the JVM is driver and executors in one process) and the peak of the summed
RSS of the executors' Python workers (sampled every 0.2 s), and the shuffle bytes written (from
Spark's status REST API); then spark / local wall time. The local engine refuses a selection
that will not fit in memory: that run is reported as refused, with its error.

    python benchmarks/spark.py --records 10000000
    python benchmarks/spark.py --records 10000000 --memory auto --partitions 0   # xfid's local-mode sizing
    python benchmarks/spark.py --records 100000000 --engines spark --workdir /var/tmp/xfid-bench --keep
    python benchmarks/spark.py --records 1000000 --engines spark --memory auto --partitions 0 \\
        --conf spark.shuffle.compress=false --conf spark.driver.extraJavaOptions=-XX:+UseParallelGC

`--conf KEY=VALUE` (repeatable) passes a Spark setting to the Spark runs as a user's `[engine.spark]
conf` would (it wins over xfid's defaults); JVM options given as `spark.driver.extraJavaOptions`
keep xfid's log4j option in front (the JVM logs errors only, as in xfid's own sessions).
`--results FILE` appends each run's figures as one JSON line (with `--label` and the settings).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _kb(v: str | None) -> int:
    return int(v.split()[0]) if v else 0


def _children(pid: int) -> list[int]:
    """Every descendant of pid (from /proc/*/stat)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads), from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


THREAD_KINDS = (("JIT", ("C1 CompilerThre", "C2 CompilerThre", "Sweeper thread")),
                ("GC", ("GC Thread", "G1 ", "VM Thread")))
"""The JVM's long-lived service threads by what they do, from their names (/proc's 15-character
`comm`). The rest (task threads, scheduler, planning, codegen, Py4J, listeners) is the JVM's
total less these: task threads come and go between samples, the process's total keeps them."""


def _thread_kind(name: str) -> str:
    return next((kind for kind, prefixes in THREAD_KINDS if name.startswith(prefixes)), "other")


def _thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """Per thread of a process: (kind, user + system CPU seconds)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            text = Path(f"/proc/{pid}/task/{t}/stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[int(t)] = (_thread_kind(name), (int(fields[11]) + int(fields[12])) / TICK)
    return out


class Sampler:
    """Peak RSS of the JVM (its own VmHWM) and of the summed Python workers under it, and the CPU
    time each used (per process the last sample, summed: the executors' Python is not in Spark's
    executorCpuTime); the JVM's CPU also per kind of thread (JIT compilers, GC, task threads,
    the rest), each thread's last sample (a thread that ends between samples loses < 0.2 s)."""

    def __init__(self) -> None:
        self.jvm_kb = 0
        self.workers_kb = 0
        self.cpu: dict[int, tuple[str, float]] = {}
        self.threads: dict[tuple[int, int], tuple[str, float]] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            total = 0
            for c in _children(me):
                st = _status(c)
                name = st.get("Name", "").strip()
                if name == "java":
                    self.jvm_kb = max(self.jvm_kb, _kb(st.get("VmHWM")))
                    for tid, v in _thread_cpu(c).items():
                        self.threads[(c, tid)] = v
                elif name.startswith("python"):
                    total += _kb(st.get("VmRSS"))
                if name == "java" or name.startswith("python"):
                    self.cpu[c] = ("java" if name == "java" else "python", _cpu_s(c))
            self.workers_kb = max(self.workers_kb, total)
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._t.join()

    def jvm_threads_s(self) -> dict[str, float]:
        """The JVM's CPU seconds per kind of thread (THREAD_KINDS), and the rest ("other")."""
        out = {kind: sum(t for k, t in self.threads.values() if k == kind) for kind, _ in THREAD_KINDS}
        out["other"] = self.cpu_s("java") - sum(out.values())
        return {k: round(v, 1) for k, v in out.items()}

    def cpu_s(self, kind: str) -> float:
        """CPU seconds of the sampled processes of one kind ("java" or "python")."""
        return sum(t for k, t in self.cpu.values() if k == kind)


def _stages(spark) -> list[dict] | None:
    """Every completed stage of this application (Spark's status REST API)."""
    url = spark.sparkContext.uiWebUrl
    if not url:
        return None
    app = spark.sparkContext.applicationId
    try:
        with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/stages?status=complete", timeout=30) as r:
            return json.load(r)
    except OSError:
        return None


def _where(name: str) -> str:
    """A stage's name as `action at file:line` with the file's name only."""
    action, _, place = name.partition(" at ")
    return f"{action} at {Path(place).name}" if place else name[:40]


def _stage_lines(stages: list[dict]) -> list[str]:
    """Per stage: tasks, summed executor run time and CPU time (the steadier figure on a loaded
    machine), input/shuffle records and bytes (the per-partition costs)."""
    out = []
    for s in sorted(stages, key=lambda s: s["stageId"]):
        out.append(f"    stage {s['stageId']:>3} {s['numTasks']:>4} tasks  run {s['executorRunTime'] / 1000:8.1f} s  "
                   f"cpu {s.get('executorCpuTime', 0) / 1e9:8.1f} s  "
                   f"in {s.get('inputRecords', 0):>11,} rec {s.get('inputBytes', 0) / 1e6:8.1f} MB  "
                   f"shuffle read {s.get('shuffleReadRecords', 0):>11,} rec {s.get('shuffleReadBytes', 0) / 1e6:8.1f} MB  "
                   f"write {s.get('shuffleWriteRecords', 0):>11,} rec {s.get('shuffleWriteBytes', 0) / 1e6:8.1f} MB  "
                   f"peak exec mem {s.get('peakExecutionMemory', 0) / 1e6:7.1f} MB  {_where(s['name'])}")
    return out


def _java_options(given: str) -> str:
    """JVM options with xfid's log4j option in front (as session.py sets it when nobody does)."""
    log = Path(__file__).resolve().parent.parent / "xfid" / "engine" / "spark" / "log4j2.properties"
    if "log4j2.configurationFile" in given or not log.exists():
        return given
    return f"-Dlog4j2.configurationFile={log.as_uri()} {given}".strip()


def child(engine: str, store_dir: str, master: str, memory: str, partitions: int,
          extra: dict[str, str] | None = None) -> None:
    from xfid.config import load_config
    from xfid.errors import XfidError
    from xfid.store import Store

    cfg = load_config(None)
    out: dict = {"engine": engine}
    if engine == "local":
        from xfid.engine.engines import correlate_with

        t = time.perf_counter()
        try:  # as the command line runs it: refused before reading when the store will not fit
            c = correlate_with(Store(store_dir), cfg, "local")
        except XfidError as e:
            out.update(refused=str(e), wall_s=time.perf_counter() - t)
            c = None
    else:
        from xfid.engine.request import Request
        from xfid.engine.spark import correlate
        from xfid.engine.spark.session import spark_session

        t = time.perf_counter()
        sampler = Sampler()
        conf = {"spark.ui.enabled": "true", "spark.executor.processTreeMetrics.enabled": "true"}
        if memory != "auto":
            conf["spark.driver.memory"] = memory
        if partitions:
            conf["spark.sql.shuffle.partitions"] = str(partitions)
        conf.update(extra or {})
        if "spark.driver.extraJavaOptions" in conf:
            conf["spark.driver.extraJavaOptions"] = _java_options(conf["spark.driver.extraJavaOptions"])
        store = Store(store_dir)  # "auto" / 0: sized from the machine and the store's record count
        spark = spark_session(None, master, conf, records=sum(int(n or 0) for n in store.counts().values()))
        out["settings"] = {k: spark.conf.get(k) for k in ("spark.driver.memory", "spark.sql.shuffle.partitions")}
        out["conf"] = extra or {}
        out["session_s"] = time.perf_counter() - t
        dest = Path(store_dir).parent / f"out-{os.getpid()}.parquet"
        req = Request.of(out=str(dest)) if engine == "spark-parquet" else None
        try:
            c = correlate(store, cfg, req, spark=spark)
            if req is not None:
                from xfid.engine.dataset import dataset

                out["dataset_rows"] = dataset(dest, check=False).count_rows()
                out["dataset_mb"] = sum(f.stat().st_size for f in dest.rglob("*.parquet")) / 1e6
        finally:
            shutil.rmtree(dest, ignore_errors=True)
        out["wall_s"] = time.perf_counter() - t
        stages = _stages(spark)
        out["shuffle_bytes"] = None if stages is None else sum(int(s.get("shuffleWriteBytes", 0)) for s in stages)
        out["stages"] = [] if stages is None else _stage_lines(stages)
        out["stages_run_s"] = None if stages is None else sum(s["executorRunTime"] for s in stages) / 1000
        out["stages_cpu_s"] = None if stages is None else sum(s.get("executorCpuTime", 0) for s in stages) / 1e9
        sampler.stop()
        out["jvm_peak_rss_mb"] = sampler.jvm_kb / 1024
        out["workers_peak_rss_mb"] = sampler.workers_kb / 1024
        out["jvm_cpu_s"], out["workers_cpu_s"] = sampler.cpu_s("java"), sampler.cpu_s("python")
        out["jvm_threads_s"] = sampler.jvm_threads_s()
        out["rows_aligned"] = c.settings["spark"]["rows"]
    if c is not None:
        if engine == "local":
            out["wall_s"] = time.perf_counter() - t
            out["cpu_s"] = time.process_time()
            out["rows_aligned"] = len(c.rows)
        out.update(discrepancies=out.get("dataset_rows", len(c.discrepancies)), comparisons=len(c.comparisons),
                   discrepancy_fingerprints=sorted(c.discrepancies["fingerprint"].astype(str))[:5])
    out["driver_peak_rss_mb"] = _kb(_status(os.getpid()).get("VmHWM")) / 1024
    print(json.dumps(out))


def _once(engine: str, store: Path, args: argparse.Namespace) -> dict | None:
    cmd = [sys.executable, __file__, "--child", engine, str(store), "--master", args.master, "--memory",
           args.memory, "--partitions", str(args.partitions)]
    for kv in args.conf:
        cmd += ["--conf", kv]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    if p.returncode:
        said = [ln for ln in p.stderr.splitlines() if any(w in ln for w in ("Error", "Exception", "Caused by"))]
        print(f"  {engine}: failed (exit {p.returncode})\n" + "\n".join(said[:12]) + f"\n{p.stderr[-1500:]}")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(n: int, workdir: Path, args: argparse.Namespace) -> None:
    from correlate import build_store

    store = workdir / f"store-{n}"
    if not (store / "xfid.db").exists():
        t = time.perf_counter()
        shape = build_store(store, n)
        print(f"\n{shape['records']:,} records ({shape['workloads']} workloads x {shape['ops']} ops x "
              f"{shape['metrics']} metrics, 4 fidelities); store built in {time.perf_counter() - t:.1f} s", flush=True)
    else:
        print(f"\nstore {store} (reused)", flush=True)
    size = sum(f.stat().st_size for f in (store / "records").rglob("*.parquet"))
    print(f"  parquet on disk: {size / 1e9:.2f} GB; load average before: {_load()}", flush=True)
    res = {}
    for e in args.engines.split(","):
        r = _once(e, store, args)
        if r is None:
            continue
        res[e] = r
        line = f"  {e:<6} {r['wall_s']:8.1f} s  driver peak RSS {r['driver_peak_rss_mb']:7.0f} MB"
        if "cpu_s" in r:
            line += f"  CPU {r['cpu_s']:.1f} s"
        if "refused" in r:
            line += f"  refused: {r['refused']}"
        if e.startswith("spark"):
            sb = r.get("shuffle_bytes")
            line += (f"  JVM (driver+executors) peak RSS {r['jvm_peak_rss_mb']:7.0f} MB  executor Python workers "
                     f"peak RSS {r['workers_peak_rss_mb']:7.0f} MB  shuffle written "
                     f"{'n/a' if sb is None else f'{sb / 1e9:.2f} GB'}  CPU: JVM {r['jvm_cpu_s']:.1f} s, Python "
                     f"workers {r['workers_cpu_s']:.1f} s; stages: run {r['stages_run_s'] or 0:.1f} s, "
                     f"executor CPU {r['stages_cpu_s'] or 0:.1f} s; JVM threads {r.get('jvm_threads_s')}  (session start {r['session_s']:.1f} s; "
                     f"{r.get('settings')}; --conf {r.get('conf') or 'none'})")
        if "rows_aligned" in r:
            line += f"  rows {r['rows_aligned']:,} discrepancies {r['discrepancies']:,} comparisons {r['comparisons']:,}"
        print(line + f"  load after: {_load()}", flush=True)
        if args.results:
            with open(args.results, "a") as f:
                f.write(json.dumps({"label": args.label, "records": n, "load_after": _load(),
                                    **{k: v for k, v in r.items() if k != "stages"}}) + "\n")
        for st in r.get("stages", []):
            print(st, flush=True)
    if "local" in res and "spark" in res and "refused" not in res["local"]:
        lo, sp = res["local"], res["spark"]
        print(f"  spark / local wall time: {sp['wall_s'] / lo['wall_s']:.2f}; same discrepancies and comparisons "
              f"counts: {lo['discrepancies'] == sp['discrepancies'] and lo['comparisons'] == sp['comparisons']}")
    if "spark" in res and "spark-parquet" in res:
        a, b = res["spark"], res["spark-parquet"]
        print(f"  spark-parquet / spark: driver peak RSS {b['driver_peak_rss_mb'] / a['driver_peak_rss_mb']:.2f}, "
              f"wall {b['wall_s'] / a['wall_s']:.2f}; dataset {b.get('dataset_mb', 0):.1f} MB, same discrepancies "
              f"count: {a['discrepancies'] == b['discrepancies']}")
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, metavar=("ENGINE", "STORE"), help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, nargs="*", help="record counts (default 10M and 100M)")
    ap.add_argument("--engines", default="local,spark")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--memory", default="6g", help="spark.driver.memory (in local mode: the executors' heap too); "
                    "auto: what xfid sizes from the machine and the store")
    ap.add_argument("--partitions", type=int, default=32, help="spark.sql.shuffle.partitions (0: sized by xfid)")
    ap.add_argument("--workdir", help="where the stores are built (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the stores (reused by the next run in --workdir)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the Spark runs, as a user's [engine.spark] conf (repeatable)")
    ap.add_argument("--results", help="append each run's figures to this file, one JSON line a run")
    ap.add_argument("--label", default="", help="a name for this run's settings in --results")
    args = ap.parse_args()
    bad = [kv for kv in args.conf if "=" not in kv or not kv.split("=", 1)[0].strip()]
    if bad:
        ap.error(f"--conf takes KEY=VALUE, got {bad[0]!r}")
    extra = {k.strip(): v for k, v in (kv.split("=", 1) for kv in args.conf)}
    if args.child:
        child(*args.child, args.master, args.memory, args.partitions, extra)
        return
    sizes = args.records or [10_000_000, 100_000_000]
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
        for n in sizes:
            measure(n, Path(args.workdir), args)
        return
    with tempfile.TemporaryDirectory(prefix="xfid-bench-spark-") as d:
        for n in sizes:
            measure(n, Path(d), args)


if __name__ == "__main__":
    main()
