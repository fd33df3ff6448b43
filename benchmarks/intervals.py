"""Benchmark `xfid check`'s noise intervals: the batched `noise.intervals` against the plain
per-key `noise.interval` (the definition it is pinned to bit for bit), on one and two threads,
in one process and the same rounds; medians of wall and CPU time, their ratios, and whether
every run gave the plain numbers.

Synthetic keys: a third with 3 repeats on both sides, a third on the candidate's only, a third
on the reference's only (as a 1M-record store's duplicates give), and `--long` keys with 1,000
repeats on one side (a kernel timed a thousand times in one run).

    python benchmarks/intervals.py                  # 20,000 keys, 10 long ones, 3 rounds
    python benchmarks/intervals.py --keys 126350    # a 1M store's rows with repeats
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from xfid.tracker import noise


def keys(n: int, long: int, seed: int = 1) -> list[tuple[np.ndarray, np.ndarray, float, str]]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        c = rng.lognormal(0, 0.05, 1 if k % 3 == 1 else 3)
        r = rng.lognormal(0, 0.05, 1 if k % 3 == 2 else 3)
        out.append((c, r, float(rng.normal(0, 0.1)), f"{rng.integers(0, 2**62):016x}"))
    for _ in range(long):
        out.append((rng.lognormal(0, 0.1, 1000), rng.lognormal(0, 0.1, 3), 0.01, f"{rng.integers(0, 2**62):016x}"))
    return out


def timed(f) -> tuple[float, float, object]:
    t, c = time.perf_counter(), time.process_time()
    out = f()
    return time.perf_counter() - t, time.process_time() - c, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--long", type=int, default=10, help="keys with 1,000 repeats on one side")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    items = keys(a.keys, a.long)
    print(f"{len(items):,} keys ({a.long} with 1,000 repeats); load average {os.getloadavg()[0]:.2f}")
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
    base = None
    for name, vals in runs.items():
        wall, cpu = statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals)
        base = base or (wall, cpu)
        print(f"  {name:22s} median of {len(vals)}: {wall:7.2f} s  CPU {cpu:7.2f} s  "
              f"ratio to plain: wall {wall / base[0]:.3f}, CPU {cpu / base[1]:.3f}")
    print(f"  the plain numbers in every run: {same}")


if __name__ == "__main__":
    main()
