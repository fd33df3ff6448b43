"""timeloop adapter: Summary Stats of timeloop-mapper.stats.txt (old and new layouts), bad files."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, store_snapshot
from xfid.adapters import sniff_all

DIR = FIXTURES / "models" / "timeloop"
STATS = DIR / "timeloop-mapper.stats.txt"

NEW_LAYOUT = """Buffer and Arithmetic Levels
----------------------------
Level 0
-------
=== MAC ===

    STATS
    -----
    Cycles               : 1536

Total topology energy: 5066.30 pJ
Max topology cycles: 1536

Summary Stats
-------------
GFLOPs (@1GHz): 2.00
Utilization: 100.00%
Cycles: 1536
Energy: 0.01 uJ
EDP(J*cycle): 7.78e-03
Area: 12.50 mm^2

Algorithmic Computes = 1536
Computes = 1536
pJ/Algorithm-Compute
    MAC                                           = 0.56
    Total                                         = 3.30
pJ/Compute
    MAC                                           = 0.56
    Total                                         = 3.30
"""


def _records(xfid_cli, *paths, args=()):
    r = xfid_cli("ingest", *args, *paths)
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in xfid_cli("export").output.splitlines()]


def test_sniff():
    assert sniff_all(STATS) == ["timeloop"]


def test_fixture_summary_stats(xfid_cli):
    recs = _records(xfid_cli, DIR)
    by = {r["metric"]: r for r in recs}
    assert by["cycles"]["value"] == 4096 and by["cycles"]["source_loc"].startswith("line ")
    assert by["utilization"]["value"] == 1.0
    assert by["macs"]["value"] == 65536
    # the topology total (472730.24 pJ) is used: Summary Stats rounds it to 0.47 uJ
    assert by["energy"]["value"] == pytest.approx(472730.24e-12) and by["energy"]["unit"] == "J"
    assert by["timeloop:energy_per_mac"]["value"] == pytest.approx(7.21e-12)
    assert by["area"]["value"] is None and "area not modelled" in by["area"]["null_reason"]
    assert {r["op"] for r in recs} == {"gemm[m=64,n=32,k=32]"}  # from [options] op in the sidecar
    assert {(r["fidelity"], r["target"], r["workload"]) for r in recs} == {("archmodel", "t100-a0", "gemm-sweep")}


def test_newer_layout(xfid_cli, tmp_path):
    f = tmp_path / "timeloop-model.stats.txt"
    f.write_text(NEW_LAYOUT)
    recs = _records(xfid_cli, f, args=("--target", "t100-a0", "--workload", "conv1d"))
    by = {r["metric"]: r["value"] for r in recs}
    assert by == {"utilization": 1.0, "cycles": 1536, "energy": pytest.approx(5066.30e-12),
                  "area": 12.5, "macs": 1536, "timeloop:energy_per_mac": pytest.approx(3.30e-12)}
    assert {r["op"] for r in recs} == {""}


@pytest.mark.parametrize("text,message", [
    ("Buffer and Arithmetic Levels\n----\n=== MAC ===\n", "no `Summary Stats` section"),
    ("Summary Stats\n-------------\nUtilization: 0.50\nCycles: many\n", "line 4: cannot read 'Cycles'"),
    ("Summary Stats\n-------------\nUtilization: 0.50\n", "has no `Cycles:` line"),
])
def test_malformed(xfid_cli, tmp_path, text, message):
    _records(xfid_cli, DIR)
    snap = store_snapshot(xfid_cli.store)
    f = tmp_path / "timeloop-mapper.stats.txt"
    f.write_text(text)
    r = xfid_cli("ingest", "--target", "t100-a0", "--workload", "w", f)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert store_snapshot(xfid_cli.store) == snap
