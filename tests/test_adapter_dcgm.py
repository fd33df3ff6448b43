"""dcgm adapter: dmon columns and units row, sentinels, repeated headers, MIG, timing, bad input."""

from __future__ import annotations

import itertools
import json

import pytest

from xfid.adapters import detect
from xfid.adapters.dcgm import DcgmAdapter

DIR = "measured/dcgm"


def rows(xfid_cli, path, *args):
    return xfid_cli.ingest_export(path, *args)[0]


def pick(recs, metric, stat="value", op="gpu0", loc=None):
    hits = [r for r in recs if r["metric"] == metric and r["stat"] == stat and r["op"] == op
            and (loc is None or r["source_loc"].startswith(loc))]
    assert len(hits) == 1, (metric, stat, op, loc, hits)
    return hits[0]


GPU0_W = [98.31, 412.77, 655.40, 671.02, 668.93, 660.15, 402.88, 101.20]


def test_fields_units_and_timing(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "h100x2_dmon_1s.txt")
    p = pick(recs, "power", loc="line 3,")
    assert p["value"] == 98.31 and p["unit"] == "W" and p["source_loc"] == "line 3, POWER (sample 0, t=0.000 s)"
    assert p["timestamp"] == "2026-03-01T00:00:00Z" and p["flags"] is None and p["software"] == "dcgmi dmon"
    cfg = json.loads(p["config"])
    assert cfg["fields"] == {"POWER": 155, "TOTEC": 156, "SMCLK": 100, "SMACT": 1002, "TENSO": 1004, "DRAMA": 1005}
    assert cfg["interval_ms"] == 1000 and cfg["time_base"].startswith("start option 2026-03-01T00:00:00+00:00")
    # after the repeated header (lines 13-14) the sample count goes on
    late = pick(recs, "power", loc="line 15,")
    assert late["value"] == 660.15 and late["timestamp"] == "2026-03-01T00:00:05Z"
    assert pick(recs, "clock", loc="line 5,")["value"] == 1.98e9
    assert pick(recs, "dcgm:sm_active", loc="line 9,")["value"] == 0.951
    assert pick(recs, "dcgm:tensor_active", loc="line 9,")["value"] == 0.462
    assert pick(recs, "dcgm:dram_active", loc="line 9,")["value"] == 0.618
    assert not [r for r in recs if r["metric"] == "dcgm:total_energy"]  # the raw counter is not a sample


def test_sentinels_are_null_with_reason(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "h100x2_dmon_1s.txt")
    p = pick(recs, "power", op="gpu1", loc="line 12,")
    assert p["value"] is None and p["null_reason"] == "DCGM blank sentinel 140737488355328"
    d = pick(recs, "dcgm:dram_active", op="gpu1", loc="line 8,")
    assert d["value"] is None and d["null_reason"] == "DCGM blank sentinel 9223372036854775792"


def test_energy_trapezoid_and_totec(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "h100x2_dmon_1s.txt")
    e = pick(recs, "energy")
    assert e["value"] == pytest.approx(sum((a + b) / 2 for a, b in itertools.pairwise(GPU0_W)))
    assert e["n_samples"] == 8 and e["source_loc"] == "line 3..line 19: trapezoid of POWER over 7.000 s"
    t = pick(recs, "dcgm:totec_energy")
    assert t["value"] == pytest.approx((915916583 - 912345678) / 1000) and t["unit"] == "J"
    assert t["source_loc"] == "line 3..line 19: TOTEC last - first"
    assert pick(recs, "power", "mean")["value"] == pytest.approx(sum(GPU0_W) / 8)
    assert pick(recs, "power", "mean", op="gpu1")["n_samples"] == 7


def test_mig_entities_and_relative_time(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / "a100_mig_dmon_500ms.txt")
    assert {r["op"] for r in recs} == {"gpu0", "gpu-i1", "gpu-i2"}
    na = pick(recs, "power", op="gpu-i1", loc="line 7,")
    assert na["value"] is None and na["null_reason"] == "N/A in file"
    assert na["source_loc"] == "line 7, POWER (sample 1, t=0.500 s)"
    assert {r["flags"] for r in recs} == {"relative_time"}
    assert pick(recs, "memory_used", op="gpu-i2", loc="line 5,")["value"] == 9712e6
    assert pick(recs, "energy")["value"] == pytest.approx(0.5 * ((210.44 + 388.10) / 2 + (388.10 + 391.67) / 2
                                                                  + (391.67 + 205.30) / 2))


def test_sniff(fixtures):
    assert detect(fixtures / DIR / "h100x2_dmon_1s.txt") is DcgmAdapter
    assert detect(fixtures / DIR / "a100_mig_dmon_500ms.txt") is DcgmAdapter


HEAD = "#Entity   POWER    SMACT\nID        W\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (HEAD + "GPU 0     120.5    0.5\nGPU 0     121.5", "line 4: expected an entity (2 tokens) and 2 values, got 3"),
        ("Entity POWER\nGPU 0 12\n", "line 1: expected the '#Entity ...' header first"),
        (HEAD + "GPU 0     120.5    0.5\n#Entity   POWER    TENSO\n", "line 4: header '#Entity   POWER    TENSO' differs"),
        (HEAD + "GPU 0     120.5    0.5   7\n", "line 3: expected an entity (2 tokens) and 2 values, got 5"),
        (HEAD + "GPU 0     hot      0.5\n", "line 3, POWER: 'hot' is not a number"),
        (HEAD + "GPU x     120.5    0.5\n", "line 3: entity GPU 'x' is not like 'GPU 0'"),
        (HEAD, "no samples after the header"),
        ("timestamp, index, power.draw [W]\n2026/03/01 00:00:00.000, 0, 1 W\n", "line 1: expected the '#Entity"),
    ],
)
def test_bad_input(xfid_cli, tmp_path, snapshot, fixtures, content, message):
    assert xfid_cli("ingest", fixtures / DIR / "a100_mig_dmon_500ms.txt").exit_code == 0
    f = tmp_path / "bad.txt"
    f.write_text(content)
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "dcgm", "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


@pytest.mark.parametrize(("opt", "message"), [("interval_ms=fast", "option interval_ms: 'fast' is not a number"),
                                              ("interval_ms=0", "must be > 0"),
                                              ("start=monday", "option start: 'monday' is not an ISO 8601 time")])
def test_bad_options(xfid_cli, fixtures, opt, message):
    r = xfid_cli("ingest", fixtures / DIR / "a100_mig_dmon_500ms.txt", "--option", opt)
    assert r.exit_code == 2 and message in r.output, r.output


# `dcgmi dmon -e 155,1002,1004` as current DCGM prints it: a bare `ID` line under the header
# when the first columns have no unit, `N/A` for the first sample of every field (the
# profiling module is still warming up), GPUs interleaved sample by sample
BARE_ID = """#Entity   SMACT        TENSO        POWER
ID
GPU 0     N/A          N/A          N/A
GPU 1     N/A          N/A          N/A
GPU 0     0.912        0.521        612.400
GPU 1     0.004        0.000        71.200
GPU 0     0.905        0.518        615.100
GPU 1     0.003        0.000        70.900
"""


def test_bare_id_line_na_first_samples_interleaved_gpus(xfid_cli, tmp_path):
    f = tmp_path / "dmon.txt"
    f.write_text(BARE_ID)
    recs = rows(xfid_cli, f, "--target", "h100-sxm", "--workload", "w", "--option", "interval_ms=1000")
    first = pick(recs, "dcgm:sm_active", loc="line 3,")
    assert first["value"] is None and first["null_reason"] == "N/A in file"
    assert first["source_loc"] == "line 3, SMACT (sample 0, t=0.000 s)"
    assert pick(recs, "dcgm:sm_active", op="gpu1", loc="line 6,")["value"] == 0.004
    p = pick(recs, "power", op="gpu1", loc="line 8,")
    assert p["value"] == 70.9 and p["unit"] == "W" and p["source_loc"] == "line 8, POWER (sample 2, t=2.000 s)"
    # no unit row to read: POWER falls back to W; the energy integrates the two real samples
    assert pick(recs, "energy")["value"] == pytest.approx((612.4 + 615.1) / 2)
    assert pick(recs, "power", "mean", op="gpu1")["n_samples"] == 2
    assert pick(recs, "dcgm:tensor_active", op="gpu0", loc="line 7,")["value"] == 0.518


def test_real_dmon_with_bare_id_line(xfid_cli, fixtures):
    # microsoft/VirtualClient's `dcgmi dmon -e 1001,1004,1005 -c 15` example: `ID` alone (padded
    # with spaces) under the header, no units anywhere, no timestamps
    recs = rows(xfid_cli, fixtures / DIR / "DCGMIDmonResults.txt")
    assert len(recs) == 45 and {r["op"] for r in recs} == {"gpu0"}
    assert {r["metric"] for r in recs} == {"dcgm:gr_engine_active", "dcgm:tensor_active", "dcgm:dram_active"}
    g = pick(recs, "dcgm:gr_engine_active", loc="line 5,")
    assert g["value"] == 0.998 and g["unit"] == "ratio" and g["source_loc"] == "line 5, GRACT (sample 2, t=2.000 s)"
    assert pick(recs, "dcgm:tensor_active", loc="line 5,")["value"] == 0.885
    assert pick(recs, "dcgm:dram_active", loc="line 7,")["value"] == 0.306
    assert pick(recs, "dcgm:dram_active", loc="line 17,")["value"] == 0.0
    assert {r["flags"] for r in recs} == {"relative_time"}


def test_real_two_gpu_dmon_with_units_row_and_repeated_headers(xfid_cli, fixtures):
    # ITU HPC course example (ehsanyousefzadehasl/Monitoring_GPUs_on_HPC): `dcgmi dmon -e
    # 155,156,200,201,203,204,1001,...,1012` at the default 1 s, 2 GPUs interleaved (GPU 1 first),
    # `#Entity`/`ID` 15 times (lines 1, 33, 63, ...), units `W`, `mJ` and a cut-short `KB/`
    recs = rows(xfid_cli, fixtures / DIR / "dcgmi-log.out")
    assert len(recs) == 7114 and {r["op"] for r in recs} == {"gpu0", "gpu1"}
    assert {r["flags"] for r in recs} == {"relative_time"}
    p = pick(recs, "power", loc="line 8,")
    assert p["value"] == 56.167 and p["unit"] == "W" and p["source_loc"] == "line 8, POWER (sample 2, t=2.000 s)"
    assert pick(recs, "power", op="gpu1", loc="line 3,")["value"] == 26.81
    # after the header repeated on lines 33-34 the samples go on counting
    late = pick(recs, "power", op="gpu1", loc="line 35,")
    assert late["value"] == 27.481 and late["source_loc"] == "line 35, POWER (sample 15, t=15.000 s)"
    assert pick(recs, "dcgm:gr_engine_active", loc="line 8,")["value"] == 0.454
    assert pick(recs, "dcgm:sm_active", loc="line 8,")["value"] == 0.901
    assert pick(recs, "dcgm:sm_occupancy", loc="line 8,")["value"] == 0.899
    assert pick(recs, "utilization", loc="line 8,")["value"] == 1.0  # GPUTL 100 (%)
    assert pick(recs, "dcgm:pcie_tx_bytes", loc="line 8,")["value"] == 119309320
    # TXTPT/RXTPT (fields 200/201) print `KB/` under the header and N/A in every row
    t = pick(recs, "dcgm:pcie_tx_throughput", loc="line 8,")
    assert t["value"] is None and t["null_reason"] == "N/A in file" and t["unit"] == "B/s"
    assert len([r for r in recs if r["null_reason"] == "N/A in file"]) == 836  # 2 fields x 418 rows
    cfg = json.loads(p["config"])
    assert cfg["fields"]["TXTPT"] == 200 and cfg["fields"]["RXTPT"] == 201 and len(cfg["fields"]) == 18
    # per GPU: 209 samples; mean/max read from the POWER column; trapezoid at 1 s vs TOTEC delta
    m = pick(recs, "power", "mean")
    assert m["n_samples"] == 209 and m["value"] == pytest.approx(57.3348373206)
    assert pick(recs, "power", "max")["value"] == 58.913
    assert pick(recs, "power", "mean", op="gpu1")["value"] == pytest.approx(27.4966746411)
    e = pick(recs, "energy")
    assert e["value"] == pytest.approx(11940.067) and e["source_loc"] == "line 4..line 448: trapezoid of POWER over 208.000 s"
    tot = pick(recs, "dcgm:totec_energy")
    assert tot["value"] == pytest.approx((22363265303 - 22351345411) / 1000) and tot["unit"] == "J"
    assert pick(recs, "dcgm:totec_energy", op="gpu1")["value"] == pytest.approx((20854090102 - 20848390074) / 1000)
    assert e["value"] == pytest.approx(tot["value"], rel=0.002)  # the two estimates agree within 0.2 %
    assert detect(fixtures / DIR / "dcgmi-log.out") is DcgmAdapter


@pytest.mark.parametrize(("printed", "unit", "value"), [("KB/", "B/s", 2000.0), ("KB/s", "B/s", 2000.0),
                                                         ("MB/s", "B/s", 2e6)])
def test_cut_short_unit_is_the_fields_unit(xfid_cli, tmp_path, printed, unit, value):
    f = tmp_path / "dmon.txt"
    f.write_text(f"#Entity   TXTPT          POWER\nID         {printed:<15}W\nGPU 0     2              50.0\n")
    recs = rows(xfid_cli, f, "--target", "h100-sxm", "--workload", "w")
    t = pick(recs, "dcgm:pcie_tx_throughput")
    assert t["unit"] == unit and t["value"] == value
