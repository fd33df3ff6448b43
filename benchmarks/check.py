"""Benchmark `xfid check` (a store's first check, local engine) against another source tree.

Builds the synthetic store of benchmarks/correlate.py (duplicates in a third of the keys, so the
check bootstraps noise intervals for them), then runs `xfid --store STORE check --format json`
on a fresh copy of it, each run its own process, this tree and every `--tree NAME=DIR` in the
same rounds (order rotated), and prints the medians of wall time, CPU time and peak RSS, their
ratios to the first tree given, and whether every run printed the same summary (timestamps
aside: the same issues filed from the same rows).

    git worktree add --detach /tmp/before HEAD~3
    python benchmarks/check.py --records 1000000 --repeat 3 --tree before=/tmp/before
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


def child(store: str) -> None:
    """One check in this process: wall and CPU time of the command, peak RSS, the output's hash."""
    import contextlib
    import io

    from xfid.cli import main

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
                      "hash": hashlib.sha256(text.encode()).hexdigest()[:16]}))


def run(tree: str | None, store: Path, work: Path) -> dict:
    copy = work / "run" / "store"  # the same path for every run: the outputs compare
    shutil.rmtree(copy.parent, ignore_errors=True)
    shutil.copytree(store, copy)
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, __file__, "--child", str(copy)], capture_output=True, text=True, env=env,
                       cwd=work)
    if p.returncode:
        raise SystemExit(f"the check failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="another xfid source tree, run in the same rounds (the first is the baseline)")
    ap.add_argument("--workdir", help="where the store is built and kept (default: a temporary directory)")
    args = ap.parse_args()
    from correlate import build_store

    trees: dict[str, str | None] = {name: str(Path(d).resolve()) for name, d in (t.split("=", 1) for t in args.tree)}
    trees["this tree"] = None
    work = Path(args.workdir or tempfile.mkdtemp(prefix="xfid-bench-check-"))
    store = work / f"store-{args.records}"
    if not store.exists():
        shape = build_store(store, args.records)
        print(f"store built: {shape}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    got: dict[str, list[dict]] = {name: [] for name in trees}
    names = list(trees)
    for r in range(args.repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            res = run(trees[name], store, work)
            got[name].append(res)
            print(f"  round {r + 1}: {name:<12} {res['wall_s']:7.2f} s  CPU {res['cpu_s']:7.2f} s  "
                  f"peak RSS {res['rss_mb']:6.0f} MB  {res['new']} new issues of {res['rows']:,} rows  "
                  f"output {res['hash']}")
    med = {n: {k: statistics.median(x[k] for x in v) for k in ("wall_s", "cpu_s", "rss_mb")} for n, v in got.items()}
    base = names[0]
    for n in names:
        m = med[n]
        ratio = "" if n == base else "  ratio to {}: wall {:.2f}, CPU {:.2f}, RSS {:.2f}".format(
            base, m["wall_s"] / med[base]["wall_s"], m["cpu_s"] / med[base]["cpu_s"], m["rss_mb"] / med[base]["rss_mb"])
        print(f"  {n:<12} median of {args.repeat}: {m['wall_s']:7.2f} s  CPU {m['cpu_s']:7.2f} s  "
              f"peak RSS {m['rss_mb']:6.0f} MB{ratio}")
    print(f"  the same output in every run: {len({x['hash'] for v in got.values() for x in v}) == 1}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
