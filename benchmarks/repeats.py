"""Benchmark the check's repeats lookup (`noise.repeats_of`): its build time, and the memory it
holds and peaks at under tracemalloc, for this tree and every `--tree NAME=DIR` (another xfid
source tree, e.g. a worktree of an earlier commit), each run in its own process, the order
rotated each round; medians, their ratios to the first tree given, and whether every tree
answered the same for the rows with repeats (a hash of each row's lookup, a row at a time).

The store is benchmarks/correlate.py's synthetic one (a third of its keys with 3 duplicates);
the rows are the local engine's correlation of it, as `xfid check` looks them up.

    git worktree add --detach /tmp/before HEAD~3
    python benchmarks/repeats.py --records 1000000 --repeat 3 --tree before=/tmp/before --workdir /tmp/w
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def child(tree: str, store: str) -> None:
    sys.path.insert(0, tree)
    import gc
    import hashlib
    import tracemalloc

    import numpy as np

    from xfid.config import load_config
    from xfid.engine import correlate
    from xfid.store import Store
    from xfid.tracker import noise

    assert Path(noise.__file__).resolve().is_relative_to(Path(tree).resolve()), noise.__file__
    cfg, st = load_config(None), Store(store)
    rows = correlate(st, cfg).rows
    targets, runs = noise.repeats_needed(rows)
    gc.collect()
    t = time.perf_counter()
    look = noise.repeats_of(st, cfg, targets, runs)
    wall = time.perf_counter() - t
    del look
    gc.collect()
    tracemalloc.start()
    look = noise.repeats_of(st, cfg, targets, runs)
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    many = (rows["candidate_n"].fillna(0) > 1) | (rows["reference_n"].fillna(0) > 1)
    need = rows[many & rows["kind"].astype(str).isin(["ok", "over_tolerance"])]  # the rows a check looks up
    h = hashlib.sha256()
    for r in need.to_dict("records"):
        got = look(r)
        h.update(repr(got).encode() if not isinstance(got, tuple) else
                 b"|".join(np.asarray(v, np.float64).tobytes() for v in got))
    print(json.dumps({"wall_s": wall, "held_mb": held / 1e6, "peak_mb": peak / 1e6, "rows": len(need),
                      "hash": h.hexdigest()[:16]}))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="another xfid source tree, run in the same rounds")
    ap.add_argument("--workdir", help="where the store is built and kept (default: a temporary directory)")
    a = ap.parse_args()
    from correlate import build_store

    work = Path(a.workdir or tempfile.mkdtemp(prefix="xfid-bench-repeats-"))
    store = work / f"store-{a.records}"
    if not store.exists():
        print(f"store built: {build_store(store, a.records)}")
    trees = {name: str(Path(d).resolve()) for name, d in (t.split("=", 1) for t in a.tree)}
    trees["this tree"] = str(Path(__file__).resolve().parent.parent)
    names = list(trees)
    got: dict[str, list[dict]] = {n: [] for n in names}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for r in range(a.repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            out = subprocess.run([sys.executable, __file__, "--child", trees[name], str(store)],
                                 capture_output=True, text=True, check=True).stdout
            res = json.loads(out.strip().splitlines()[-1])
            got[name].append(res)
            print(f"  round {r + 1}: {name:<10} build {res['wall_s']:6.2f} s  held {res['held_mb']:7.1f} MB  "
                  f"peak {res['peak_mb']:7.1f} MB  {res['rows']:,} rows looked up  {res['hash']}")
    base = names[0]
    med = {n: {k: statistics.median(x[k] for x in v) for k in ("wall_s", "held_mb", "peak_mb")} for n, v in got.items()}
    for n in names:
        m, b = med[n], med[base]
        ratio = "" if n == base else (f"  ratio to {base}: build {m['wall_s'] / b['wall_s']:.2f}, held "
                                      f"{m['held_mb'] / b['held_mb']:.2f}, peak {m['peak_mb'] / b['peak_mb']:.2f}")
        print(f"  {n:<10} median of {a.repeat}: build {m['wall_s']:6.2f} s  held {m['held_mb']:7.1f} MB  "
              f"peak {m['peak_mb']:7.1f} MB{ratio}")
    print(f"  the same answers in every run: {len({x['hash'] for v in got.values() for x in v}) == 1}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
