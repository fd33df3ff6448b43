"""nvidia-smi adapter: per-GPU samples, units in header and values, sentinels, log energy, bad input."""

from __future__ import annotations

import json

import pytest

from xfid.adapters import detect
from xfid.adapters.nvidia_smi import NvidiaSmiAdapter

DIR = "measured/nvidia-smi"


def rows(xfid_cli, path, *args):
    return xfid_cli.ingest_export(path, *args)[0]


def pick(recs, metric, stat="value", op="gpu0", loc=None):
    hits = [r for r in recs if r["metric"] == metric and r["stat"] == stat and r["op"] == op
            and (loc is None or r["source_loc"].startswith(loc))]
    assert len(hits) == 1, (metric, stat, op, loc, hits)
    return hits[0]


def test_units_in_values(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "h100x2_power_1s.csv")
    assert {r["target"] for r in recs} == {"h100-sxm"} and {r["op"] for r in recs} == {"gpu0", "gpu1"}
    p = pick(recs, "power", loc="line 2,")
    assert p["value"] == 312.45 and p["unit"] == "W" and p["source_loc"] == "line 2, power.draw [W]"
    assert p["timestamp"] == "2026-03-01T00:00:00Z" and p["hardware"] == "NVIDIA H100 80GB HBM3"
    assert p["software"] == "nvidia-smi (driver 550.54.15)" and p["run"] == "example-nvsmi-2026-03-01"
    cfg = json.loads(p["config"])
    assert cfg == {"driver_version": "550.54.15", "gpu_index": 0, "name": "NVIDIA H100 80GB HBM3",
                   "pci_bus_id": "00000000:18:00.0", "power_limit_w": 700.0, "pstate": "P0",
                   "tool": "nvidia-smi --query-gpu", "memory_total_mib": 81559.0}
    assert pick(recs, "clock", loc="line 2,")["value"] == 1.755e9
    assert pick(recs, "nvidia_smi:clocks.current.memory", loc="line 2,")["value"] == 2.619e9
    assert pick(recs, "utilization", loc="line 4,")["value"] == pytest.approx(0.88)
    assert pick(recs, "memory_used", loc="line 2,")["value"] == 75023 * 1024**2
    assert pick(recs, "temperature", loc="line 3,", op="gpu1")["value"] == 59
    na = pick(recs, "power", op="gpu1", loc="line 9,")
    assert na["value"] is None and na["null_reason"] == "[N/A] in file"
    ns = pick(recs, "nvidia_smi:utilization.memory", loc="line 10,")
    assert ns["value"] is None and ns["null_reason"] == "[Not Supported] in file"


def test_log_energy_and_power_summaries(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "h100x2_power_1s.csv")
    e0 = pick(recs, "energy")
    # trapezoid over 1 s steps of 312.45, 498.10, 601.37, 655.02, 640.88, 402.51 W
    assert e0["value"] == pytest.approx((312.45 + 402.51) / 2 + 498.10 + 601.37 + 655.02 + 640.88)
    assert e0["n_samples"] == 6 and e0["source_loc"] == "line 2..line 12: trapezoid of power.draw over 5.000 s"
    # gpu1 lost its 4th sample ([N/A]): the trapezoid spans the gap
    e1 = pick(recs, "energy", op="gpu1")
    assert e1["n_samples"] == 5
    assert e1["value"] == pytest.approx((305.90 + 487.66) / 2 + (487.66 + 598.04) / 2 + 2 * (598.04 + 638.12) / 2
                                        + (638.12 + 399.75) / 2)
    assert pick(recs, "power", "max")["value"] == 655.02
    assert pick(recs, "power", "mean", op="gpu1")["value"] == pytest.approx((305.90 + 487.66 + 598.04 + 638.12
                                                                              + 399.75) / 5)


def test_nounits_and_unknown_error(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "h200_nounits_500ms.csv")
    assert {r["target"] for r in recs} == {"h200-sxm"}
    assert pick(recs, "power", loc="line 3,")["value"] == 120.05
    assert pick(recs, "power", loc="line 3,")["timestamp"] == "2026-03-02T14:05:00.500000Z"
    assert pick(recs, "clock", loc="line 2,")["value"] == 345e6
    bad = pick(recs, "power", loc="line 7,")
    assert bad["value"] is None and bad["null_reason"] == "[Unknown Error] in file"
    assert json.loads(pick(recs, "energy")["config"])["csv_nounits"] is True
    assert pick(recs, "energy")["n_samples"] == 7


def test_utc_offset_option(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "h200_nounits_500ms.csv", "--option", "utc_offset=+02:00")
    assert pick(recs, "power", loc="line 2,")["timestamp"] == "2026-03-02T12:05:00Z"


def test_sniff(fixtures):
    assert detect(fixtures / DIR / "h100x2_power_1s.csv") is NvidiaSmiAdapter
    assert detect(fixtures / DIR / "h200_nounits_500ms.csv") is NvidiaSmiAdapter


GOOD = ("timestamp, index, power.draw [W], utilization.gpu [%]\n"
        "2026/03/01 00:00:00.000, 0, 100.00 W, 5 %\n")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (GOOD + "2026/03/01 00:00:01.000, 0, 101.0", "line 3: expected 4 fields like the header, got 3"),
        ("timestamp, index, power.draw (W)\n2026/03/01 00:00:00.000, 0, 1\n",
         "line 1: header field 3 'power.draw (W)' is not an nvidia-smi query field"),
        ("index, power.draw [W]\n0, 100.00 W\n", "line 1: header has no 'timestamp' field"),
        (GOOD + "2026/03/01 00:00:01.000, 0, 101.00 W, 5 %, 7\n", "line 3: expected 4 fields like the header, got 5"),
        (GOOD + "2026/03/01 00:00:01.000, 0, lots W, 5 %\n", "line 3, power.draw [W]: 'lots W' is not a number"),
        (GOOD + "2026/03/01 00:00:01.000, 0, 101.00 mW, 5 %\n",
         "line 3, power.draw [W]: value '101.00 mW' has unit 'mW' but the header says [W]"),
        (GOOD + "01/03/2026 00:00:01, 0, 101.00 W, 5 %\n", "line 3, timestamp: '01/03/2026 00:00:01' is not a time"),
        ("timestamp, index, power.draw [W]\n", "no samples after the header"),
        ('{"request_throughput": 1.0, "completed": 3}', "line 1: header field 1"),
    ],
)
def test_bad_input(xfid_cli, tmp_path, snapshot, fixtures, content, message):
    assert xfid_cli("ingest", fixtures / DIR / "h200_nounits_500ms.csv").exit_code == 0
    f = tmp_path / "bad.csv"
    f.write_text(content)
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "nvidia-smi", "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


def test_bad_utc_offset(xfid_cli, fixtures):
    r = xfid_cli("ingest", fixtures / DIR / "h200_nounits_500ms.csv", "--option", "utc_offset=CET")
    assert r.exit_code == 2 and "option utc_offset: 'CET' is not an offset like +02:00" in r.output


def test_real_8xh100_query_nounits(xfid_cli, fixtures):
    # VirtualClient's monitor query on an idle 8xH100 (driver 535.161.07, --format=csv,nounits)
    recs = rows(xfid_cli, fixtures / DIR / "query-gpu-8xH100.csv")
    assert {r["op"] for r in recs} == {f"gpu{i}" for i in range(8)}
    p = pick(recs, "power", loc="line 2,")  # power.draw.instant is the sample; .average kept beside it
    assert p["value"] == 70.68 and p["unit"] == "W" and p["source_loc"] == "line 2, power.draw.instant [W]"
    assert pick(recs, "nvidia_smi:power.draw.average", loc="line 2,")["value"] == 70.89
    assert pick(recs, "power", op="gpu1", loc="line 3,")["value"] == 72.05
    assert pick(recs, "clock", loc="line 2,")["value"] == 345e6
    assert pick(recs, "memory_used", loc="line 2,")["value"] == 0
    assert pick(recs, "temperature", loc="line 2,")["value"] == 26
    hbm = pick(recs, "nvidia_smi:temperature.memory", loc="line 2,")
    assert hbm["value"] == 35 and hbm["unit"] == "C"
    assert p["hardware"] == "NVIDIA H100 80GB HBM3" and p["software"] == "nvidia-smi (driver 535.161.07)"
    assert p["timestamp"] == "2024-03-15T13:57:59.791000Z"


def test_real_4xt4_without_index_or_power(xfid_cli, fixtures):
    # an older VirtualClient query (Jan 2023, driver 510.108.03): no index, no power fields
    recs = rows(xfid_cli, fixtures / DIR / "query-gpu-4xT4.csv")
    assert {r["op"] for r in recs} == {f"gpu@0000000{i}:00:00.0" for i in range(1, 5)}
    t = pick(recs, "temperature", op="gpu@00000001:00:00.0", loc="line 2,")
    assert t["value"] == 48 and t["unit"] == "C"
    assert pick(recs, "memory_used", op="gpu@00000001:00:00.0")["value"] == 257 * 2**20
    assert "gpu_index" not in json.loads(t["config"]) and t["target"] == "t4"
    assert not [r for r in recs if r["metric"] in ("power", "energy")]


def test_fields_not_read_are_listed(xfid_cli, fixtures):
    _, out = xfid_cli.ingest_export(fixtures / DIR / "query-gpu-8xH100.csv")
    line = next(ln for ln in out.splitlines() if "keys not read (skipped)" in ln)
    assert "column pcie.link.gen.max" in line and "column ecc.errors.corrected.volatile.dram" in line
    assert "temperature.memory" not in line and "power.draw" not in line
