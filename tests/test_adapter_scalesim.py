"""scalesim adapter: the real SCALE-Sim v2 golden compute report, the bandwidth report, bad files."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import FIXTURES, store_snapshot
from xfid.adapters import sniff_all

DIR = FIXTURES / "models" / "scalesim"


def _records(xfid_cli, *paths):
    r = xfid_cli("ingest", *paths)
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in xfid_cli("export").output.splitlines()]


def test_sniff_is_specific():
    assert sniff_all(DIR / "COMPUTE_REPORT.csv") == ["scalesim"]
    assert sniff_all(DIR / "example_3layer" / "BANDWIDTH_REPORT.csv") == ["scalesim"]
    for d in ("v2_golden_trace", "v3_golden_trace_calc", "v3_sparsity"):
        for f in sorted((DIR / d).glob("*.csv")):
            assert sniff_all(f) == ["scalesim"], f


def test_real_v2_detailed_access_report(xfid_cli):
    recs = _records(xfid_cli, DIR / "v2_golden_trace")
    by = {(r["metric"], r["software"]): r for r in recs}
    detail = "SCALE-Sim (DETAILED_ACCESS_REPORT)"  # the columns do not tell v2 from v3
    assert by[("scalesim:sram_ifmap_start_cycle", detail)]["value"] == 33.0
    assert by[("scalesim:sram_ifmap_stop_cycle", detail)]["value"] == 112176.0
    assert by[("scalesim:sram_ifmap_start_cycle", detail)]["unit"] == "cycles"
    reads = by[("scalesim:sram_ifmap_reads", detail)]
    assert reads["value"] == 3294225 and reads["unit"] == "count"
    assert json.loads(reads["config"]) == {"unit_in_file": "words"}
    assert by[("scalesim:dram_ifmap_start_cycle", detail)]["value"] == -3243.0  # prefetch before cycle 0
    assert by[("scalesim:dram_ofmap_writes", detail)]["value"] == 3484831
    assert reads["source_loc"] == "line 2, column 'SRAM IFMAP Reads'" and reads["op"] == "layer0"
    assert len([r for r in recs if r["software"] == detail]) == 18
    bw = by[("scalesim:avg_ofmap_dram_bw", "SCALE-Sim (BANDWIDTH_REPORT)")]
    assert bw["value"] == 31.243441697000126
    assert by[("cycles", "SCALE-Sim v2 (COMPUTE_REPORT)")]["value"] == 112283


def test_real_v3_reports(xfid_cli):
    recs = _records(xfid_cli, DIR / "v3_golden_trace_calc")
    by = {r["metric"]: r for r in recs if r["software"] == "SCALE-Sim v3 (COMPUTE_REPORT)"}
    assert by["scalesim:total_cycles_incl_prefetch"]["value"] == 116210
    assert by["scalesim:total_cycles_incl_prefetch"]["unit"] == "cycles"
    assert by["cycles"]["value"] == 112283 and by["stall_cycles"]["value"] == 0
    assert by["scalesim:compute_util"]["value"] == pytest.approx(0.9078000992063485)
    stop = [r for r in recs if r["metric"] == "scalesim:dram_ofmap_stop_cycle"]
    assert [r["value"] for r in stop] == [112935.0]


def test_real_v3_sparsity_reports(xfid_cli):
    recs = _records(xfid_cli, DIR / "v3_sparsity")
    sparse = {r["metric"]: r for r in recs if r["software"] == "SCALE-Sim v3 (SPARSE_REPORT)"}
    assert set(sparse) == {"scalesim:original_filter_storage", "scalesim:new_storage_filter_metadata",
                           "scalesim:filter_metadata_storage", "scalesim:avg_filter_metadata_sram_bw"}
    assert sparse["scalesim:original_filter_storage"]["value"] == 34848
    assert sparse["scalesim:new_storage_filter_metadata"]["value"] == 18768.0
    assert json.loads(sparse["scalesim:filter_metadata_storage"]["config"]) == {
        "unit_in_file": "words", "sparsity_representation": "ellpack_block"}
    bw = json.loads(sparse["scalesim:avg_filter_metadata_sram_bw"]["config"])
    assert bw == {"unit_in_file": "words/cycle", "sparsity_representation": "ellpack_block"}
    meta = [r for r in recs if r["metric"] == "scalesim:avg_filter_metadata_sram_bw"
            and r["software"] == "SCALE-Sim v3 (BANDWIDTH_REPORT)"]
    assert [r["value"] for r in meta] == [0.006346687822292741]
    stall = [r["value"] for r in recs if r["metric"] == "stall_cycles"]
    assert stall == [167136]


def test_real_golden_compute_report(xfid_cli):
    recs = _records(xfid_cli, DIR / "COMPUTE_REPORT.csv")
    by = {r["metric"]: r for r in recs}
    assert set(by) == {"cycles", "stall_cycles", "utilization", "scalesim:mapping_efficiency",
                       "scalesim:compute_util"}
    assert by["cycles"]["value"] == 112283 and by["cycles"]["unit"] == "cycles"
    assert by["stall_cycles"]["value"] == 0
    assert by["utilization"]["value"] == pytest.approx(0.9168309650614964) and by["utilization"]["unit"] == "ratio"
    assert by["scalesim:mapping_efficiency"]["value"] == pytest.approx(0.9453125)
    assert by["scalesim:compute_util"]["value"] == pytest.approx(0.9078000992063485)
    r = by["cycles"]
    assert (r["fidelity"], r["target"], r["workload"], r["op"]) == ("archmodel", "t100-a0", "scalesim-golden", "layer0")
    assert r["source_loc"] == "line 2, column 'Total Cycles'"


def test_example_reports(xfid_cli):
    recs = _records(xfid_cli, DIR / "example_3layer")
    cyc = {r["op"]: r["value"] for r in recs if r["metric"] == "cycles"}
    assert cyc == {"layer0": 37951, "layer1": 149503, "layer2": 18690}
    stall = {r["op"]: r["value"] for r in recs if r["metric"] == "stall_cycles"}
    assert stall["layer1"] == 1024
    bw = [r for r in recs if r["metric"] == "scalesim:avg_ifmap_dram_bw"]
    assert [r["value"] for r in sorted(bw, key=lambda r: r["op"])] == [14.224, 15.5, 8.0]
    assert json.loads(bw[0]["config"]) == {"unit_in_file": "words/cycle"}
    assert {r["run"] for r in recs} == {"scalesim-example"}


@pytest.mark.parametrize("body,message", [
    ("LayerID, Total Cycles, Stall Cycles, Overall Util %, Mapping Efficiency %, Compute Util %,\n"
     "0, 112283, 0, 91.6,\n", "line 2: expected 6 fields, got 4"),
    ("LayerID, Total Cycles, Stall Cycles, Overall Util %, Mapping Efficiency %, Compute Util %,\n"
     "0, 112283, 0, 91.6, 94.5, 90.7,\n1, lots, 0, 91.6, 94.5, 90.7,\n",
     "line 3, column 'Total Cycles': not a number: 'lots'"),
    ("LayerID, Total Cycles, Stall Cycles, Overall Util %, Mapping Efficiency %, Compute Util %,\n",
     "no layer rows after the header"),
])
def test_malformed(xfid_cli, tmp_path, body, message):
    shutil.copy(DIR / "COMPUTE_REPORT.csv", tmp_path / "good.csv")
    assert xfid_cli("ingest", "--target", "t100-a0", "--workload", "w", tmp_path / "good.csv").exit_code == 0
    snap = store_snapshot(xfid_cli.store)
    bad = tmp_path / "COMPUTE_REPORT.csv"
    bad.write_text(body)
    r = xfid_cli("ingest", "--target", "t100-a0", "--workload", "w", bad)
    assert r.exit_code == 2
    assert r.output.startswith(f"Error: {bad}") and message in r.output, r.output
    assert store_snapshot(xfid_cli.store) == snap
