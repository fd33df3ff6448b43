"""`xfid check` on a team store: 100k rows, 5k discrepancies, catalog and tracker on SQLite vs PostgreSQL.

Two fidelities (archmodel vs measured) of 50k keys each, 5k of them 30% off (over the default
tolerance): the first check files 5k issues, 5k observations and 5k transitions in one
transaction. Each measurement is a fresh store (the same data ingested, untimed) and a timed
check in its own process; SQLite and PostgreSQL alternate; medians and the median of the
per-pair ratios are printed.

    python benchmarks/team_check.py --database postgresql://USER@HOST/DB [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import catalog_env  # benchmarks/ingest.py: a fresh catalog database per measurement

KEYS = 50_000
OFF = 5_000
CHILD = r"""
import json, sys, time
from xfid.api import open_store
store, files = sys.argv[1], sys.argv[2:]
with open_store(store) as s:
    s.ingest(files)
    s.correlate()  # warm: imports and first read are not the figure
t0 = time.perf_counter()
with open_store(store) as s:
    summary = s.check(actor="bench")
print(json.dumps({"s": time.perf_counter() - t0, "new": len(summary.new), "rows": summary.rows}))
"""


def make_data(d: Path) -> list[Path]:
    head = "fidelity,target,workload,op,metric,stat,value,unit,run\n"
    ref = d / "measured.csv"
    cand = d / "archmodel.csv"
    ref.write_text(head + "".join(f"measured,h100-sxm,w{i % 50},op{i},latency,value,{1 + i % 97},us,m1\n"
                                  for i in range(KEYS)))
    cand.write_text(head + "".join(
        f"archmodel,h100-sxm,w{i % 50},op{i},latency,value,{(1 + i % 97) * (1.3 if i < OFF else 1.0)},us,a1\n"
        for i in range(KEYS)))
    return [ref, cand]


def once(files: list[Path], database: str | None) -> dict:
    with catalog_env(database, "xfid_check") as env, tempfile.TemporaryDirectory() as out:
        p = subprocess.run([sys.executable, "-c", CHILD, str(Path(out) / "store"), *map(str, files)],
                           capture_output=True, text=True, env=env)
        if p.returncode:
            raise SystemExit(p.stderr[-2000:])
        return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--database", metavar="URL", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        files = make_data(Path(d))
        sq, pg = [], []
        for i in range(a.repeat):
            for which in (("sqlite", "pg") if i % 2 == 0 else ("pg", "sqlite")):
                r = once(files, a.database if which == "pg" else None)
                assert r["new"] == OFF and r["rows"] >= 2 * KEYS // 2, r
                (sq if which == "sqlite" else pg).append(r["s"])
        ratio = statistics.median(p / s for p, s in zip(pg, sq, strict=True))
        print(f"check of {2 * KEYS:,} rows, {OFF:,} new issues: SQLite {statistics.median(sq):.2f} s "
              f"({', '.join(f'{x:.2f}' for x in sq)}), PostgreSQL {statistics.median(pg):.2f} s "
              f"({', '.join(f'{x:.2f}' for x in pg)}), ratio {ratio:.2f} (median of {a.repeat} pairs)")


if __name__ == "__main__":
    main()
