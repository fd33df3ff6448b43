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
    recs = _records(xfid_cli, STATS)
    by = {r["metric"]: r for r in recs}
    assert by["cycles"]["value"] == 4096 and by["cycles"]["source_loc"].startswith("line ")
    assert by["utilization"]["value"] == 1.0
    assert by["macs"]["value"] == 65536
    # the topology total (472730.24 pJ) is used: Summary Stats rounds it to 0.47 uJ
    assert by["energy"]["value"] == pytest.approx(472730.24e-12) and by["energy"]["unit"] == "J"
    assert by["timeloop:energy_per_compute"]["value"] == 7.21e-12
    assert by["area"]["value"] is None and "area not modelled" in by["area"]["null_reason"]
    assert {r["op"] for r in recs} == {"gemm[m=64,n=32,k=32]"}  # from [options] op in the sidecar
    assert {(r["fidelity"], r["target"], r["workload"]) for r in recs} == {("archmodel", "t100-a0", "gemm-sweep")}


def test_newer_layout(xfid_cli, tmp_path):
    f = tmp_path / "timeloop-model.stats.txt"
    f.write_text(NEW_LAYOUT)
    recs = _records(xfid_cli, f, args=("--target", "t100-a0", "--workload", "conv1d"))
    by = {r["metric"]: r["value"] for r in recs}
    assert by == {"utilization": 1.0, "cycles": 1536, "energy": 5066.30e-12, "area": 12.5, "macs": 1536,
                  "timeloop:energy_per_compute": 3.30e-12, "timeloop:energy_per_algorithmic_compute": 3.30e-12}
    assert {r["op"] for r in recs} == {""}


def _by_metric(xfid_cli, folder):
    return {r["metric"]: r for r in _records(xfid_cli, DIR / folder)}


def test_real_2020_topology_energy_beats_rounded_summary(xfid_cli):
    # Summary Stats says `Energy: 0.00 uJ`; the topology total is 100.85 pJ; pJ/MACC Total 2.10 x 48
    by = _by_metric(xfid_cli, "2020_conv1d_1level")
    e = by["energy"]
    assert e["value"] == 100.85e-12 and e["unit"] == "J" and e["source_loc"] == "line 180"
    assert json.loads(e["config"]) == {"energy_from": "Total topology energy", "rounding_bound_j": 5e-15}
    assert by["macs"]["value"] == 48 and by["cycles"]["value"] == 48
    assert by["timeloop:energy_per_compute"]["value"] == 2.10e-12
    assert json.loads(by["timeloop:energy_per_compute"]["config"]) == {"unit_in_file": "pJ/MACC"}


def test_real_2022_sparseloop_algorithmic_and_actual_computes(xfid_cli):
    by = _by_metric(xfid_cli, "2022_sparseloop_sudu_gating")
    assert by["energy"]["value"] == 13.75e-12 and by["energy"]["source_loc"] == "line 235"
    assert by["macs"]["value"] == 16 and by["timeloop:actual_computes"]["value"] == 4
    assert by["timeloop:energy_per_compute"]["value"] == 3.44e-12
    assert by["timeloop:energy_per_algorithmic_compute"]["value"] == 0.86e-12
    assert by["utilization"]["value"] == 0.25


def test_real_2024_fj_per_compute_times_computes(xfid_cli):
    # no topology total in the 2024 layout; `Energy: 0.00 uJ` would be 0 J
    by = _by_metric(xfid_cli, "2024_sparseloop_sudu")
    e = by["energy"]
    assert e["value"] == 53865.84e-15  # 13466.46 fJ/Compute x 4 actual computes, exact decimal product
    assert e["source_loc"] == "lines 221, 225"
    assert json.loads(e["config"])["energy_from"] == "fJ/Compute Total x Actual Computes"
    assert by["macs"]["value"] == 16 and by["timeloop:actual_computes"]["value"] == 4
    assert by["timeloop:energy_per_compute"]["value"] == 13466.46e-15
    assert by["timeloop:energy_per_algorithmic_compute"]["value"] == 3366.62e-15
    assert by["utilization"]["value"] == 0.25 and by["cycles"]["value"] == 16
    dense = _by_metric(xfid_cli, "2024_conv1d_1level")
    assert dense["energy"]["value"] == 115513.92e-15 and dense["macs"]["value"] == 48  # 2406.54 x 48


def test_real_2024_large_design_agrees_with_summary(xfid_cli):
    by = _by_metric(xfid_cli, "2024_eyeriss_like")
    assert by["energy"]["value"] == 59280154214.4e-15  # 5469.65 fJ x 10838016; Summary: 59.28 uJ
    assert by["energy"]["value"] == pytest.approx(59.28e-6, abs=0.005e-6)
    assert by["cycles"]["value"] == 86016 and by["utilization"]["value"] == 0.75


def test_rounded_to_zero_energy_is_never_zero(xfid_cli, tmp_path):
    f = tmp_path / "timeloop-model.stats.txt"
    f.write_text("Summary Stats\n-------------\nUtilization: 1.00\nCycles: 16\nEnergy: 0.00 uJ\n")
    recs = _records(xfid_cli, f, args=("--target", "t100-a0", "--workload", "w"))
    e = next(r for r in recs if r["metric"] == "energy")
    assert e["value"] is None and "display-rounded" in e["null_reason"] and e["source_loc"] == "line 5"


@pytest.mark.parametrize("text,message", [
    ("Buffer and Arithmetic Levels\n----\n=== MAC ===\n", "no `Summary Stats` section"),
    ("Summary Stats\n-------------\nUtilization: 0.50\nCycles: many\n", "line 4: cannot read 'Cycles'"),
    ("Summary Stats\n-------------\nUtilization: 0.50\n", "has no `Cycles:` line"),
])
def test_malformed(xfid_cli, tmp_path, text, message):
    _records(xfid_cli, STATS)
    snap = store_snapshot(xfid_cli.store)
    f = tmp_path / "timeloop-mapper.stats.txt"
    f.write_text(text)
    r = xfid_cli("ingest", "--target", "t100-a0", "--workload", "w", f)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert store_snapshot(xfid_cli.store) == snap
