"""Benchmark `xfid correlate` against a straightforward pandas pivot and DuckDB SQL.

Builds a synthetic store (4 fidelities, ~200 workloads x 500 ops x 6 metrics at 10M records,
some keys missing in some fidelities, older runs as history, duplicate observations) with
the Store API, then runs each engine in its own subprocess (so peak RSS is separate) and
prints wall time, peak RSS and the ratios.

The common job: for each fidelity and key the latest run (runs ordered by their latest
timestamp), median of duplicates; align the six default pairs; per row relative error, log
ratio, within 10%; aggregates per (target, pair, metric, stat) and per (target, workload,
pair, metric, stat): n, MAPE, median APE, bias, log RMSE, Pearson on logs, Spearman,
fraction within. pandas and DuckDB compute exactly that and nothing more (their `rows` count
only aligned rows with positive values). xfid is timed on that job ("xfid same job": Kendall
and bootstrap off, fingerprints only for discrepancies, no source_loc) and on everything it
does by default ("xfid full": plus Kendall tau, bootstrap CIs, fingerprints of every row,
source_loc of both numbers of every row). Even "same job" does more than the baselines: it
also keeps a row for every candidate key without a reference (missing_reference, so its
`rows` count is larger), applies the tolerance rules and the roofline bound semantics per
row (kind, severity, efficiency, notes), checks configurations for mismatches, carries run,
source_path and config of both numbers per row, and returns the sorted discrepancies and the
op-map coverage. The comparison counts of all three agree.

Each run is a fresh subprocess; with --repeat N every engine runs N times, the order rotated
each round (the first process after the store build meets colder memory on this VM), and the
medians and their ratios are printed.

Peak RSS is each child's VmHWM. xfid's fingerprint helper process (large jobs) is not in it:
getrusage's children peak counts the parent's pages it was forked with, so it says nothing; the
helper's own peak was measured apart (docs/scale.md). Its CPU time is counted in the child's. Today's figures and what they mean: docs/engine.md, "Performance"
(10M records, quiet 2-core VM: xfid 4.92 s, pandas 11.80 s, DuckDB 10.37 s).

    python benchmarks/correlate.py                 # 1M records
    python benchmarks/correlate.py --ten-million   # 1M and 10M records
    python benchmarks/correlate.py --records 10000000 --repeat 3
    git archive HEAD~3 | tar -x -C /tmp/before   # then, before and after in the same rounds:
    python benchmarks/correlate.py --records 4000000 --repeat 3 --tree before=/tmp/before
    python benchmarks/correlate.py --records 10000000 --engines xfid-full --stages   # CPU per step

Each child reports wall time and CPU time (user + system of the whole process, every thread)
of the job alone (imports and interpreter start excluded); on a shared machine CPU time is the
steadier figure, and ratios are of medians from the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

METRICS = (("latency", "s"), ("cycles", "cycles"), ("bytes", "B"), ("flops", "FLOP"), ("energy", "J"),
           ("utilization", "ratio"))
FIDS = (("roofline", 1.0), ("archmodel", 0.9), ("rtl", 0.35), ("measured", 0.7))
PAIRS = (("roofline", "archmodel"), ("archmodel", "rtl"), ("archmodel", "measured"),
         ("roofline", "measured"), ("rtl", "measured"), ("roofline", "rtl"))
OPS = 500
HISTORY_RUNS = 3


def _dict(values: list[str], codes: np.ndarray) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(values, pa.string()))


def build_store(root: Path, n_records: int, seed: int = 0) -> dict:
    """Write a synthetic store of about n_records records; returns its shape."""
    from xfid.schema import SCHEMA
    from xfid.store import PreparedSource, Store

    rng = np.random.default_rng(seed)
    per_entry = HISTORY_RUNS + 1 + 2 * 0.35  # older runs + the latest (35% have 3 duplicates)
    workloads = max(2, round(n_records / (per_entry * sum(c for _, c in FIDS) * OPS * len(METRICS))))
    wn = [f"model{w % 7}/decode/bs{1 << (w % 6)}/ctx{1024 * (1 + w // 42)}/w{w:03d}" for w in range(workloads)]
    on = [f"layer{o // 10}.op{o % 10}" for o in range(OPS)]
    mn = [m for m, _ in METRICS]
    un = sorted({u for _, u in METRICS})
    unit_of = np.array([un.index(u) for _, u in METRICS])
    truth = np.exp(rng.normal(-9, 2, (workloads, OPS, len(METRICS))))
    store = Store(root)
    preps = []
    total = 0
    for fi, (fid, cover) in enumerate(FIDS):
        keys = np.flatnonzero(rng.random(truth.size) < cover)
        w, o, m = np.unravel_index(keys, truth.shape)
        # models are a few percent off (5% of keys badly); roofline time-like numbers are bounds
        model_err = np.exp(rng.normal(0.01 * fi, 0.04, len(keys)) + np.where(rng.random(len(keys)) < 0.05, 0.5, 0.0))
        if fid == "roofline":
            model_err = np.where(m < 2, 0.7, model_err)  # latency, cycles: 70% of the truth
        base = truth.ravel()[keys] * model_err
        dups = np.where(rng.random(len(keys)) < 0.35, 3, 1)
        reps = HISTORY_RUNS + dups
        idx = np.repeat(np.arange(len(keys)), reps)
        first = np.repeat(np.cumsum(reps) - reps, reps)
        run = np.minimum(np.arange(len(idx)) - first, HISTORY_RUNS)  # 0..2 history, 3 = latest
        value = base[idx] * np.exp(rng.normal(0, 0.03, len(idx))) * np.where(run < HISTORY_RUNS, 1.3, 1.0)
        n = len(idx)
        runs = [f"{fid}-run{r}" for r in range(HISTORY_RUNS + 1)]
        ts = (np.datetime64("2026-11-01T00:00:00", "us") + (run * 86400 + fi * 3600) * 1_000_000).astype("datetime64[us]")
        loc = pa.compute.binary_join_element_wise(pa.scalar("line"), pa.array(np.arange(2, n + 2)).cast(pa.string()), " ")
        cfg = [json.dumps({"precision": "bf16", "tool": f"{fid}-sim 1.{r}"}, sort_keys=True) for r in range(HISTORY_RUNS + 1)]
        table = pa.table({
            "fidelity": _dict([fid], np.zeros(n)), "target": _dict(["h100-sxm"], np.zeros(n)),
            "workload": _dict(wn, w[idx]), "op": _dict(on, o[idx]), "metric": _dict(mn, m[idx]),
            "stat": _dict(["value"], np.zeros(n)), "value": value, "unit": _dict(un, unit_of[m[idx]]),
            "n_samples": pa.nulls(n, pa.int64()), "source": _dict(["xfid-records"], np.zeros(n)),
            "source_id": pa.array([f"bench-{fid}"] * n), "source_path": pa.array([f"bench/{fid}.csv"] * n),
            "source_loc": loc, "run": _dict(runs, run).cast(pa.string()),
            "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")), "hardware": pa.nulls(n, pa.string()),
            "software": pa.nulls(n, pa.string()), "config": _dict(cfg, run).cast(pa.string()),
            "null_reason": pa.nulls(n, pa.string()), "flags": pa.nulls(n, pa.string()),
        }).cast(SCHEMA)
        prep = PreparedSource(f"bench-{fid}-{n_records}", f"bench/{fid}.csv", "xfid-records", {}, f"bench-{fid}")
        step = 1 << 21
        store.write_temp(prep, (table.slice(i, step) for i in range(0, n, step)))
        preps.append(prep)
        total += n
    store.commit(preps)
    store.close()
    return {"records": total, "workloads": workloads, "ops": OPS, "metrics": len(METRICS)}


def run_xfid(store_dir: str, full: bool) -> dict:
    from xfid.config import load_config
    from xfid.engine import correlate
    from xfid.store import Store

    cfg = load_config(None)
    t, sys0 = _clock(), os.times().system
    c = correlate(Store(store_dir), cfg, kendall=full, bootstrap=full, fingerprints="all" if full else "discrepancies",
                  provenance=full)
    wall, cpu = _since(t)
    return {"wall_s": wall, "cpu_s": cpu, "sys_s": os.times().system - sys0, "rows": len(c.rows),
            "comparisons": len(c.comparisons), "discrepancies": len(c.discrepancies)}


def run_stages(store_dir: str) -> dict:
    """The full default step by step (xfid.engine.pipeline: select -> align -> aggregate ->
    finish), wall and CPU time of each; the aggregates on this thread (pipeline.THREADS = 1), so
    each step's CPU time is its own. `fingerprints` is the part of `align` spent hashing."""
    from xfid.config import load_config
    from xfid.engine import pipeline, rows
    from xfid.engine.request import Request
    from xfid.engine.result import begin, finish
    from xfid.store import Store

    pipeline.THREADS = 1
    spent = {"fingerprints": (0.0, 0.0)}
    plain = rows.fingerprint_many

    def timed(*a):
        t = _clock()
        try:
            return plain(*a)
        finally:
            w, c = _since(t)
            spent["fingerprints"] = (spent["fingerprints"][0] + w, spent["fingerprints"][1] + c)

    rows.fingerprint_many = timed
    store, cfg = Store(store_dir), load_config(None)
    req = Request.of(kendall=True, bootstrap=True, fingerprints="all", provenance=True)
    with pipeline.small_pages():  # as correlate() runs them
        t0 = t = _clock()
        start = begin(cfg, req)
        sel = pipeline.select(store, cfg, req, start)
        spent["select"], t = _since(t), _clock()
        aligned = pipeline.align(sel)
        spent["align"], t = _since(t), _clock()
        comps = pipeline.aggregate(aligned)
        spent["aggregate"], t = _since(t), _clock()
        c = finish(store, cfg, req, start, aligned, comps)
        spent["finish"] = _since(t)
        wall, cpu = _since(t0)
    out = {"wall_s": wall, "cpu_s": cpu, "rows": len(c.rows), "comparisons": len(c.comparisons),
           "discrepancies": len(c.discrepancies)}
    for k, (w, cp) in spent.items():
        out[f"{k}_wall_s"], out[f"{k}_cpu_s"] = w, cp
    return out


STAGES = ("select", "align", "fingerprints", "aggregate", "finish")


def _clock() -> tuple[float, float]:
    """(wall, CPU) now; CPU is the whole process's (every thread) plus that of its finished child
    processes (xfid's fingerprint helper), steadier than wall time on a shared machine and the
    measure of the work done."""
    t = os.times()
    return time.perf_counter(), t.user + t.system + t.children_user + t.children_system


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def _files(store_dir: str) -> list[str]:
    return sorted(str(p) for p in Path(store_dir, "records").glob("fidelity=*/part-*.parquet"))


def run_pandas(store_dir: str) -> dict:
    import pandas as pd
    import pyarrow.dataset as ds

    t = _clock()
    keys = ["target", "workload", "op", "metric", "stat"]
    df = ds.dataset(_files(store_dir), format="parquet", partitioning="hive").to_table(
        columns=["fidelity", *keys, "value", "run", "timestamp"]).to_pandas()
    run_ts = df.groupby(["fidelity", "run"], observed=True)["timestamp"].max().rename("run_ts")
    df = df.join(run_ts, on=["fidelity", "run"])
    latest = df.groupby(["fidelity", *keys], observed=True)["run_ts"].transform("max")
    df = df[df["run_ts"] == latest]
    wide = df.groupby([*keys, "fidelity"], observed=True)["value"].median().unstack("fidelity")
    rows, comps = [], []
    for c, r in PAIRS:
        sub = wide[[c, r]].dropna().reset_index()
        sub = sub[(sub[c] > 0) & (sub[r] > 0)]
        sub["rel"] = (sub[c] - sub[r]) / sub[r]
        sub["ape"] = sub["rel"].abs()
        sub["lr"] = np.log(sub[c] / sub[r])
        sub["lx"], sub["ly"] = np.log(sub[c]), np.log(sub[r])
        sub["within"] = sub["ape"] <= 0.10
        rows.append(sub)
        for level in (["target", "metric", "stat"], ["target", "workload", "metric", "stat"]):
            g = sub.groupby(level, observed=True)
            a = g.agg(n=("ape", "size"), mape=("ape", "mean"), median_ape=("ape", "median"),
                      mlr=("lr", "mean"), within=("within", "mean"))
            a["bias"] = np.exp(a.pop("mlr"))
            a["log_rmse"] = np.sqrt((sub["lr"] ** 2).groupby([sub[k] for k in level], observed=True).mean())
            a["pearson_log"] = g[["lx", "ly"]].corr().xs("lx", level=-1)["ly"]
            ranks = g[["lx", "ly"]].rank()
            ranks[level] = sub[level]
            a["spearman"] = ranks.groupby(level, observed=True)[["lx", "ly"]].corr().xs("lx", level=-1)["ly"]
            comps.append(a.assign(candidate=c, reference=r))
    out = pd.concat(comps)
    wall, cpu = _since(t)
    return {"wall_s": wall, "cpu_s": cpu, "rows": int(sum(len(x) for x in rows)), "comparisons": len(out)}


def run_duckdb(store_dir: str) -> dict:
    import duckdb

    t = _clock()
    con = duckdb.connect()
    files = ", ".join(f"'{f}'" for f in _files(store_dir))
    pairs = ", ".join(f"('{c}', '{r}')" for c, r in PAIRS)
    con.execute(f"""
        CREATE TEMP TABLE e AS
        WITH r AS (SELECT fidelity, target, workload, op, metric, stat, value, run, timestamp
                   FROM read_parquet([{files}], hive_partitioning = true)),
        runs AS (SELECT fidelity, run, max(timestamp) AS run_ts FROM r GROUP BY ALL),
        j AS (SELECT r.*, runs.run_ts FROM r JOIN runs USING (fidelity, run)),
        -- latest run per key by GROUP BY + join (a window over all records was ~1.3x slower)
        best AS (SELECT fidelity, target, workload, op, metric, stat, max(run_ts) AS mx FROM j GROUP BY ALL),
        sel AS (SELECT j.fidelity, j.target, j.workload, j.op, j.metric, j.stat, median(j.value) AS v
                FROM j JOIN best USING (fidelity, target, workload, op, metric, stat)
                WHERE j.run_ts = best.mx GROUP BY ALL),
        p AS (SELECT * FROM (VALUES {pairs}) p(c, rf))
        SELECT p.c, p.rf, a.target, a.workload, a.op, a.metric, a.stat, a.v AS cv, b.v AS rv,
               (a.v - b.v) / b.v AS rel, ln(a.v / b.v) AS lr, ln(a.v) AS lx, ln(b.v) AS ly
        FROM p JOIN sel a ON a.fidelity = p.c
        JOIN sel b ON b.fidelity = p.rf AND a.target = b.target AND a.workload = b.workload
             AND a.op = b.op AND a.metric = b.metric AND a.stat = b.stat
        WHERE a.v > 0 AND b.v > 0
    """)
    n_rows = con.execute("SELECT count(*) FROM e").fetchone()[0]
    comps = 0
    for level in ("c, rf, target, metric, stat", "c, rf, target, workload, metric, stat"):
        df = con.execute(f"""
            WITH rk AS (SELECT *, rank() OVER (PARTITION BY {level} ORDER BY lx) AS rx,
                               rank() OVER (PARTITION BY {level} ORDER BY ly) AS ry FROM e)
            SELECT {level}, count(*) AS n, avg(abs(rel)) AS mape, median(abs(rel)) AS median_ape,
                   exp(avg(lr)) AS bias, sqrt(avg(lr * lr)) AS log_rmse, corr(lx, ly) AS pearson_log,
                   corr(rx, ry) AS spearman, avg(CASE WHEN abs(rel) <= 0.10 THEN 1.0 ELSE 0.0 END) AS within
            FROM rk GROUP BY ALL""").df()
        comps += len(df)
    wall, cpu = _since(t)
    return {"wall_s": wall, "cpu_s": cpu, "rows": int(n_rows), "comparisons": comps}


def child(engine: str, store_dir: str) -> None:
    fn = {"xfid-full": lambda s: run_xfid(s, True), "xfid": lambda s: run_xfid(s, False),
          "xfid-stages": run_stages, "pandas": run_pandas, "duckdb": run_duckdb}[engine]
    out = fn(store_dir)
    out["peak_rss_mb"] = _peak_rss_mb()
    print(json.dumps(out))


def _peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM (ru_maxrss carries over the parent's peak across
    fork+exec, and the parent holds the freshly built store)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _once(engine: str, store: Path, trees: dict[str, str] | None = None) -> dict | None:
    """One run of `engine` in a fresh process; "xfid@NAME" runs xfid from the tree `trees[NAME]`."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    name, _, tree = engine.partition("@")
    if tree:
        env["PYTHONPATH"] = os.pathsep.join([(trees or {})[tree], env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, __file__, "--child", name, str(store)], capture_output=True, text=True,
                       env=env)
    if p.returncode:
        print(f"  {engine}: failed\n{p.stderr[-2000:]}")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def _kernel(r: dict) -> str:
    """The part of an xfid run's CPU time spent in the kernel (page faults, memory compaction), if measured."""
    return f"  (kernel {r['sys_s']:.2f} s of the CPU)" if "sys_s" in r else ""


def measure(n: int, workdir: Path, engines: list[str], repeat: int = 1, trees: dict[str, str] | None = None) -> None:
    """Run every engine `repeat` times, each run in its own subprocess, rotating the order each
    round (the first process after the store build meets colder memory), and print medians."""
    store = workdir / f"store-{n}"
    t = time.perf_counter()
    shape = build_store(store, n)
    print(f"\n{shape['records']:,} records ({shape['workloads']} workloads x {shape['ops']} ops x "
          f"{shape['metrics']} metrics, 4 fidelities); store built in {time.perf_counter() - t:.1f} s")
    runs: dict[str, list[dict]] = {e: [] for e in engines}
    for i in range(repeat):
        k = i % len(engines)
        for e in engines[k:] + engines[:k]:
            r = _once(e, store, trees)
            if r is not None:
                runs[e].append(r)
                print(f"    round {i + 1}: {e:<16} {r['wall_s']:7.2f} s  CPU {r['cpu_s']:7.2f} s  "
                      f"peak RSS {r['peak_rss_mb']:7.0f} MB" + _kernel(r))
    res = {}
    for e, rs in runs.items():
        if not rs:
            continue
        res[e] = r = {**rs[-1], **{k: float(np.median([x[k] for x in rs])) for k in ("wall_s", "cpu_s", "peak_rss_mb")}}
        if all("sys_s" in x for x in rs):
            r["sys_s"] = float(np.median([x["sys_s"] for x in rs]))
        print(f"  {e:<16} median of {len(rs)}: {r['wall_s']:7.2f} s  CPU {r['cpu_s']:7.2f} s  "
              f"peak RSS {r['peak_rss_mb']:7.0f} MB  rows {r['rows']:,}  comparisons {r['comparisons']:,}" + _kernel(r))
        if e.partition("@")[0] == "xfid-stages":
            print("    " + ", ".join(f"{k} {np.median([x[f'{k}_cpu_s'] for x in rs]):.2f}" for k in STAGES)
                  + " s CPU (medians; fingerprints is within align; one thread)")
    for x in (e for e in res if e.partition("@")[0] in ("xfid", "xfid-full")):  # also xfid@TREE
        for e in ("pandas", "duckdb"):
            if e in res:
                full = x.partition("@")[0] == "xfid-full"
                print(f"  {x} / {e} (the same job{', xfid doing its full default' if full else ''}): "
                      f"wall {res[x]['wall_s'] / res[e]['wall_s']:.2f}, CPU {res[x]['cpu_s'] / res[e]['cpu_s']:.2f}")
    for e in res:
        base, _, tree = e.partition("@")
        if tree and base in res:
            print(f"  {base} / {e}: wall {res[base]['wall_s'] / res[e]['wall_s']:.2f}, "
                  f"CPU {res[base]['cpu_s'] / res[e]['cpu_s']:.2f}")
    if "xfid" in res and "xfid-full" in res:
        print(f"  xfid full (kendall, bootstrap, all fingerprints) costs {res['xfid-full']['wall_s'] / res['xfid']['wall_s']:.1f}x the same job")
    shutil.rmtree(store, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, metavar=("ENGINE", "STORE"), help=argparse.SUPPRESS)
    ap.add_argument("--ten-million", action="store_true", help="also run 10M records (takes minutes)")
    ap.add_argument("--records", type=int, nargs="*", help="record counts to run (default 1M)")
    ap.add_argument("--engines", default="xfid,xfid-full,pandas,duckdb")
    ap.add_argument("--stages", action="store_true",
                    help="also run the full default step by step on one thread and print each step's CPU time")
    ap.add_argument("--repeat", type=int, default=1, help="runs per engine (median reported), order rotated")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="another xfid source tree (e.g. a `git archive` of the commit before a change): "
                         "xfid@NAME and xfid-full@NAME (those of the xfid jobs in --engines, else both) "
                         "run it, in the same rounds")
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    trees = dict(t.split("=", 1) for t in args.tree)
    engines = args.engines.split(",")
    # each tree runs the xfid jobs listed (both if none is), once each: xfid@NAME may also be listed
    jobs = [e for e in ("xfid", "xfid-full") if e in engines] or ["xfid", "xfid-full"]
    engines += [f"{e}@{name}" for name in trees for e in jobs if f"{e}@{name}" not in engines]
    if args.stages:  # step by step for each xfid that runs its full default
        engines += [e.replace("xfid-full", "xfid-stages") for e in engines if e.partition("@")[0] == "xfid-full"]
    sizes = args.records or [1_000_000] + ([10_000_000] if args.ten_million else [])
    with tempfile.TemporaryDirectory(prefix="xfid-bench-") as d:
        for n in sizes:
            measure(n, Path(d), engines, args.repeat, trees)


if __name__ == "__main__":
    main()
