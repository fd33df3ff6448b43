"""Benchmark `xfid check`'s noise intervals: the batched `noise.intervals` against the plain
per-key `noise.interval` (the definition it is pinned to bit for bit), on one and two threads,
in one process and the same rounds; medians of wall and CPU time, their ratios, and whether
every run gave the plain numbers.

Synthetic keys: a third with 3 repeats (`--repeats N`) on both sides, a third on the candidate's
only, a third on the reference's only (as a 1M-record store's duplicates give), and `--long` keys
with 1,000 repeats on one side (a kernel timed a thousand times in one run).

With `--tree NAME=DIR` (another xfid source tree, e.g. a worktree of an earlier commit) the batched
intervals on two threads also run with that tree's xfid, each run in its own process, in the same
rounds; the figures of this tree's run in a process of its own are given beside them.

    python benchmarks/intervals.py                  # 20,000 keys, 10 long ones, 3 rounds
    python benchmarks/intervals.py --keys 126350    # a 1M store's rows with repeats
    python benchmarks/intervals.py --repeats 5 --tree before=/tmp/before
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

if sys.argv[1:2] == ["--child"]:  # run with another tree's xfid: it comes first on the path
    sys.path.insert(0, sys.argv[2])
from xfid.tracker import noise


def keys(n: int, long: int, seed: int = 1, repeats: int = 3) -> list[tuple[np.ndarray, np.ndarray, float, str]]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        c = rng.lognormal(0, 0.05, 1 if k % 3 == 1 else repeats)
        r = rng.lognormal(0, 0.05, 1 if k % 3 == 2 else repeats)
        out.append((c, r, float(rng.normal(0, 0.1)), f"{rng.integers(0, 2**62):016x}"))
    for _ in range(long):
        out.append((rng.lognormal(0, 0.1, 1000), rng.lognormal(0, 0.1, 3), 0.01, f"{rng.integers(0, 2**62):016x}"))
    return out


def timed(f) -> tuple[float, float, object]:
    t, c = time.perf_counter(), time.process_time()
    out = f()
    return time.perf_counter() - t, time.process_time() - c, out


def child(tree: str, n: int, long: int, repeats: int, out: str) -> None:
    """The batched intervals on two threads with `tree`'s xfid: prints wall, CPU and the numbers'
    hash, and writes the numbers to `out` (.npy)."""
    import hashlib

    assert Path(noise.__file__).resolve().is_relative_to(Path(tree).resolve()), noise.__file__
    items = keys(n, long, repeats=repeats)
    noise.THREADS = 2
    with np.errstate(divide="ignore", invalid="ignore"):
        wall, cpu, got = timed(lambda: noise.intervals(items))
    np.save(out, np.array(got))
    print(json.dumps({"wall": wall, "cpu": cpu, "hash": hashlib.sha256(np.array(got).tobytes()).hexdigest()}))


def in_process(tree: str, a: argparse.Namespace) -> tuple[float, float, str, np.ndarray]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        npy = str(Path(d, "got.npy"))
        out = subprocess.run([sys.executable, __file__, "--child", tree, str(a.keys), str(a.long), str(a.repeats),
                              npy], capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        return r["wall"], r["cpu"], r["hash"], np.load(npy)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], *(int(x) for x in sys.argv[3:6]), sys.argv[6])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--long", type=int, default=10, help="keys with 1,000 repeats on one side")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of a side with repeats (default 3)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="another xfid source tree: its batched intervals (2 threads) in the same rounds")
    a = ap.parse_args()
    items = keys(a.keys, a.long, repeats=a.repeats)
    print(f"{len(items):,} keys ({a.long} with 1,000 repeats, the others {a.repeats} or 1 a side); "
          f"load average {os.getloadavg()[0]:.2f}")
    trees = {"this tree": str(Path(__file__).resolve().parent.parent),
             **{name: d for name, d in (t.split("=", 1) for t in a.tree)}}
    procs: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    hashes: set[str] = set()
    numbers: dict[str, np.ndarray] = {}
    plain_run = lambda: [noise.interval(c, r, rel, fingerprint=fp) for c, r, rel, fp in items]  # noqa: E731
    want = None
    runs: dict[str, list[tuple[float, float]]] = {"plain interval()": [], "intervals, 1 thread": [],
                                                   "intervals, 2 threads": []}
    same = True
    with np.errstate(divide="ignore", invalid="ignore"):
        for rnd in range(a.repeat):
            order = list(runs)[rnd % 3:] + list(runs)[:rnd % 3]
            for name in order:
                if name.startswith("plain"):
                    wall, cpu, got = timed(plain_run)
                    want = got if want is None else want
                else:
                    noise.THREADS = 1 if "1 thread" in name else 2
                    wall, cpu, got = timed(lambda: noise.intervals(items))
                runs[name].append((wall, cpu))
                if want is not None and got != want:
                    same = False
                print(f"  round {rnd + 1}: {name:22s} {wall:7.2f} s  CPU {cpu:7.2f} s")
            if a.tree:
                names = list(trees)[rnd % len(trees):] + list(trees)[:rnd % len(trees)]
                for name in names:
                    wall, cpu, h, numbers[name] = in_process(trees[name], a)
                    procs[name].append((wall, cpu))
                    hashes.add(h)
                    print(f"  round {rnd + 1}: {name + ', own process':22s} {wall:7.2f} s  CPU {cpu:7.2f} s")
    base = None
    for name, vals in runs.items():
        wall, cpu = statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals)
        base = base or (wall, cpu)
        print(f"  {name:22s} median of {len(vals)}: {wall:7.2f} s  CPU {cpu:7.2f} s  "
              f"ratio to plain: wall {wall / base[0]:.3f}, CPU {cpu / base[1]:.3f}")
    print(f"  the plain numbers in every run: {same}")
    if a.tree:
        mine = procs["this tree"]
        mw, mc = statistics.median(v[0] for v in mine), statistics.median(v[1] for v in mine)
        for name, vals in procs.items():
            wall, cpu = statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals)
            print(f"  {name + ', own process':22s} median of {len(vals)}: {wall:7.2f} s  CPU {cpu:7.2f} s  "
                  f"this tree / it: wall {mw / wall:.3f}, CPU {mc / cpu:.3f}")
        print(f"  every tree gave the same numbers: {len(hashes) == 1}")
        for name, got in numbers.items():
            if name != "this tree":
                here = numbers["this tree"]
                differ = ~np.all((got == here) | (np.isnan(got) & np.isnan(here)), axis=1)
                gap = np.nanmax(np.abs(got - here)[differ]) if differ.any() else 0.0
                print(f"  {name}: {int(differ.sum()):,} of {len(here):,} keys' intervals differ from this tree's "
                      f"(largest difference {gap:.4g})")


if __name__ == "__main__":
    main()
