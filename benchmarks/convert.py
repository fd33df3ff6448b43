"""Unit conversion benchmark: exact `xfid.convert.scale` vs a plain multiply by the float factor.

Converts N values from ms to s three ways (short decimals such as tools print, whole numbers,
full-precision doubles) and prints the median time of each against `x * 1e-3` on the same
array, and how many plain products differ from the correctly rounded decimal.

    python benchmarks/convert.py             # 1M values
    python benchmarks/convert.py --n 10000000

Measured 2026-12-01 on the 2-core dev VM with other jobs running (load average 8.8), 1M values:

    values             scale s  x*1e-3 s  ratio  plain wrong (of 10k)
    short decimals      0.0116    0.0005   21.5                  2752
    whole numbers       0.0032    0.0005    6.0                  1360
    full precision      0.0359    0.0006   61.2                  2163

A 1M-row ingest takes 0.5-2 s, so the exact conversion costs at most a few per cent of it;
an A/B of whole ingests (benchmarks/ingest.py's child, old and new code alternating, 1M rows
with every latency in ms) showed no difference beyond the run-to-run spread. "plain wrong"
counts products `x * 1e-3` that differ from the correctly rounded decimal: even whole
numbers (x * 1e-3 is not x / 1000).
"""

from __future__ import annotations

import argparse
import statistics
import time
from decimal import Decimal

import numpy as np

from xfid.convert import scale


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    data = {
        "short decimals": np.round(rng.lognormal(3, 2, a.n), 3),
        "whole numbers": np.floor(rng.lognormal(12, 2, a.n)),
        "full precision": rng.lognormal(3, 2, a.n),
    }
    print(f"{'values':<16} {'scale s':>9} {'x*1e-3 s':>9} {'ratio':>6} {'plain wrong (of 10k)':>21}")
    for name, x in data.items():
        exact = _median(lambda x=x: scale(x, 1.0, -3), a.repeat)
        plain = _median(lambda x=x: x * 1e-3, a.repeat)
        sample = x[:10_000]
        wrong = sum(float(Decimal(repr(float(v))) / 1000) != v * 1e-3 for v in sample)
        print(f"{name:<16} {exact:>9.4f} {plain:>9.4f} {exact / plain:>6.1f} {wrong:>21}", flush=True)


if __name__ == "__main__":
    main()
