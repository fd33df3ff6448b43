"""Issue 29, power files: dcgm-exporter /metrics dumps, nvidia-smi logs without an index field,
and energy over a window from held (-lms) samples and from counter readings of several dumps."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta

import numpy as np
import pytest

from xfid.adapters import detect
from xfid.adapters.nvidia_smi import interleaved_gpus
from xfid.scope import scope_of

DUMPS = "measured/dcgm-exporter"
NVSMI = "measured/nvidia-smi"
T0 = datetime(2026, 3, 1, 12, 0, 0)
CTX = ("--target", "h100-sxm", "--workload", "w/serve", "--run", "r1")


def pick(recs, metric, op="gpu0", stat="value", loc=None):
    hits = [r for r in recs if r["metric"] == metric and r["op"] == op and r["stat"] == stat
            and (loc is None or r["source_loc"].startswith(loc))]
    assert len(hits) == 1, (metric, op, stat, loc, len(hits))
    return hits[0]


def export(xfid_cli):
    return [json.loads(x) for x in xfid_cli("export").output.splitlines()]


def ts(t: datetime) -> str:
    return t.strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def vllm(path, end, duration, tokens=6000):
    path.write_text(json.dumps({
        "date": end.strftime("%Y%m%d-%H%M%S"), "endpoint_type": "openai", "backend": "vllm", "duration": duration,
        "completed": 10, "failed": 0, "total_input_tokens": 100, "total_output_tokens": tokens,
        "request_throughput": 10 / duration, "output_throughput": tokens / duration, "median_ttft_ms": 5.0}))
    return path


def derived(recs):
    return {r["metric"]: r for r in recs if r["source"] == "derived-energy"}


# --- dcgm-exporter ------------------------------------------------------------------------------
def test_dump_values_units_and_one_sample_note(xfid_cli, fixtures):
    path = fixtures / DUMPS / "t4_serve_metrics.txt"
    assert detect(path).name == "dcgm-exporter"
    recs, out = xfid_cli.ingest_export(path)
    assert "[dcgm-exporter]  23 rows" in out
    assert "one sample: the dump has no time" in out and "2 hosts in one dump" in out
    op = "424773df46e0/gpu0"  # line 12: DCGM_FI_DEV_POWER_USAGE{...} 8.969000
    p = pick(recs, "power", op)
    assert (p["value"], p["unit"], p["source_loc"]) == (8.969, "W", "line 12, DCGM_FI_DEV_POWER_USAGE")
    assert p["hardware"] == "Tesla T4" and p["software"] == "dcgm-exporter (driver 460.106.00)"
    assert p["flags"] == "no_sample_time" and p["target"] == "t4" and p["run"] == "datadog-dcgm-serve"
    cfg = json.loads(p["config"])
    assert cfg["uuid"] == "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e" and cfg["hostname"] == "424773df46e0"
    # line 15: the since-boot counter 128996013 mJ -> J, a counter reading
    e = pick(recs, "dcgm:total_energy", op)
    assert (e["value"], e["unit"]) == (128996.013, "J")
    assert scope_of("dcgm-exporter", "dcgm:total_energy", "value", True, "J", e["config"]) == "counter"
    assert pick(recs, "clock", op)["value"] == 300e6 and pick(recs, "dcgm:mem_clock", op)["value"] == 405e6
    assert (pick(recs, "temperature", op)["value"], pick(recs, "temperature", op)["unit"]) == (25.0, "C")
    assert pick(recs, "dcgm:fb_free", op)["value"] == 15109 * 1024**2
    assert (pick(recs, "utilization", op)["value"], pick(recs, "utilization", op)["unit"]) == (0.0, "ratio")
    replay = pick(recs, "dcgm:pcie_replay_counter", op)
    assert json.loads(replay["config"])["scope"] == "counter"
    assert scope_of("dcgm-exporter", "dcgm:pcie_replay_counter", "value", True, "count", replay["config"]) == "counter"
    assert scope_of("dcgm-exporter", "dcgm:fb_free", "value", True, "B", pick(recs, "dcgm:fb_free", op)["config"]) \
        in ("sample", "level")
    other = "551bdf382151/gpu0"  # the second sandbox in the same file (another T4, another UUID)
    assert pick(recs, "dcgm:power_mgmt_limit", other)["value"] == 70.0
    assert (pick(recs, "dcgm:fb_used_percent", other)["value"], pick(recs, "dcgm:fb_used_percent", other)["unit"]) \
        == (8e-06, "ratio")
    assert pick(recs, "dcgm:slowdown_temp", other)["value"] == 93.0
    assert json.loads(pick(recs, "dcgm:pstate", other)["config"])["uuid"] == "GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5"


def test_profiling_ratio_despite_percent_help_and_unlabelled_series(xfid_cli, fixtures):
    recs, out = xfid_cli.ingest_export(fixtures / DUMPS / "datadog_fixture_metrics.txt")
    assert "3 hosts in one dump" in out
    # the last line: help says "(in %)", the value 0.000003 is DCGM's 0-1 ratio
    d = pick(recs, "dcgm:dram_active", "ip-11111/gpu0")
    assert (d["value"], d["unit"], d["hardware"]) == (3e-06, "ratio", "NVIDIA A10G")
    cfg = json.loads(d["config"])
    assert (cfg["pod"], cfg["namespace"], cfg["container"]) == ("ray-1111111", "ray-llm", "ray-worker")
    assert d["software"] == "dcgm-exporter (driver 550.144.03)"
    # 14 series of dummy values without labels are tied to no GPU: skipped, and said so
    assert "[dcgm-exporter]  24 rows" in out
    assert "skipped line 77, DCGM_FI_DEV_FAN_SPEED: no gpu label: the series is not tied to a GPU" in out
    assert "... 9 more rows skipped" in out  # 5 shown + 9 = the 14 unlabelled series (lines 74..113)
    assert not [r for r in recs if r["metric"] == "dcgm:fan_speed"]


def test_timestamp_option_places_the_sample(xfid_cli, fixtures):
    recs, out = xfid_cli.ingest_export(fixtures / DUMPS / "t4_serve_metrics.txt", "--option",
                                       "timestamp=2026-03-01T12:00:00+02:00")
    p = pick(recs, "power", "424773df46e0/gpu0")
    assert p["timestamp"] == "2026-03-01T10:00:00Z" and p["flags"] is None
    assert "one sample" not in out


@pytest.mark.parametrize(("text", "opt", "message"), [
    ("t4", "timestamp=yesterday", "option timestamp: 'yesterday' is not an ISO 8601 time"),
    ("twice", None, "one scrape per file"),
    ('DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-1" 61.5\n', None, "bad label set"),
    ('DCGM_FI_DEV_POWER_USAGE{gpu="0"} sixty\n', None, "'sixty' is not a number"),
    ("# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n", None,
     "no samples"),
])
def test_bad_dumps_are_refused_cleanly(xfid_cli, fixtures, tmp_path, text, opt, message):
    real = (fixtures / DUMPS / "t4_serve_metrics.txt").read_text()
    body = {"t4": real, "twice": real + "\n" + real}.get(text, text)
    path = tmp_path / "dump.txt"
    path.write_text(body)
    r = xfid_cli("ingest", path, "--adapter", "dcgm-exporter", "--target", "t4", "--workload", "w",
                 *(["--option", opt] if opt else []))
    assert r.exit_code == 2 and "Error:" in r.output and message in r.output, r.output
    assert "Traceback" not in r.output


def _dump(path, energy_mj: int, watts: float, host: str = "node1", uuid: str = "GPU-a") -> None:
    path.write_text("# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
                    f'DCGM_FI_DEV_POWER_USAGE{{gpu="0",UUID="{uuid}",modelName="NVIDIA H100 80GB HBM3",'
                    f'Hostname="{host}"}} {watts:.6f}\n'
                    "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n"
                    "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
                    f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="0",UUID="{uuid}",modelName="NVIDIA H100 80GB HBM3",'
                    f'Hostname="{host}"}} {energy_mj}\n')


def test_dumps_at_several_times_make_a_series_energy_is_a_difference(xfid_cli, tmp_path):
    # benchmark window [T0, T0+60 s]; dumps at T0-10 s, T0+30 s, T0+70 s. The counter rises
    # 4000 J over the first 40 s (100 W) and 12000 J over the next 40 s (300 W); linearly
    # interpolated, it reads C+1000 J at T0 and C+13000 J at T0+60 s: 12000 J over the window.
    c0 = 251_885_217_371  # mJ since boot, as large as real counters are
    readings = [(-10, c0, 100.0), (30, c0 + 4_000_000, 100.0), (70, c0 + 16_000_000, 300.0)]
    assert xfid_cli("ingest", vllm(tmp_path / "result.json", T0 + timedelta(seconds=60), 60.0), *CTX).exit_code == 0
    outs = []
    for k, (dt, mj, w) in enumerate(readings):
        _dump(tmp_path / f"dump{k}.txt", mj, w)
        r = xfid_cli("ingest", tmp_path / f"dump{k}.txt", *CTX, "--option",
                     f"timestamp={(T0 + timedelta(seconds=dt)).isoformat()}Z")
        assert r.exit_code == 0, r.output
        outs.append(r.output)
    assert "does not span the window" in outs[0] and "does not span the window" in outs[1]
    d = derived(export(xfid_cli))
    assert d["energy"]["value"] == pytest.approx(12000.0, rel=1e-12)
    assert d["power"]["value"] == pytest.approx(200.0, rel=1e-12)
    assert d["tokens_per_joule"]["value"] == pytest.approx(6000 / 12000.0, rel=1e-12)
    cfg = json.loads(d["energy"]["config"])
    assert cfg["method"].startswith("difference of DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION readings")
    assert cfg["gpus"] == {"gpu0": {"readings": 3, "energy_j": 12000.0}} and cfg["host"] == "node1"
    # a sum of the readings (or of the per-dump power samples) is nowhere
    assert all(r["value"] < 1e6 for r in d.values())


def test_untimed_dump_in_a_run_is_named_not_used(xfid_cli, tmp_path):
    assert xfid_cli("ingest", vllm(tmp_path / "result.json", T0 + timedelta(seconds=60), 60.0), *CTX).exit_code == 0
    _dump(tmp_path / "dump.txt", 1_000_000, 100.0)
    r = xfid_cli("ingest", tmp_path / "dump.txt", *CTX)
    assert r.exit_code == 0 and "has no wall-clock times" in r.output and "--option timestamp" in r.output
    assert not derived(export(xfid_cli))


# --- nvidia-smi without an index ----------------------------------------------------------------
def _trapezoid_by_hand(path, col="power.draw [W]"):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, skipinitialspace=True))
    t = [datetime.strptime(r["timestamp"], "%Y/%m/%d %H:%M:%S.%f").timestamp() for r in rows]
    w = [float(r[col].split()[0]) for r in rows]
    return sum((t[i + 1] - t[i]) * (w[i] + w[i + 1]) / 2 for i in range(len(t) - 1)), t, w


def test_real_single_gpu_log_without_index_is_gpu0(xfid_cli, fixtures):
    path = fixtures / NVSMI / "rtx4090_noindex_1s.csv"
    assert detect(path).name == "nvidia-smi"
    recs, out = xfid_cli.ingest_export(path)
    assert "no index, pci.bus_id or uuid field: every row is read as one GPU's sample, op gpu0" in out
    assert {r["op"] for r in recs} == {"gpu0"}
    # line 2: 2026/01/03 15:36:53.507, NVIDIA GeForce RTX 4090, 1 %, 2 %, 1129 MiB, 33.09 W
    p = pick(recs, "power", loc="line 2,")
    assert (p["value"], p["unit"], p["timestamp"]) == (33.09, "W", "2026-01-03T15:36:53.507000Z")
    assert p["hardware"] == "NVIDIA GeForce RTX 4090" and p["target"] == "rtx4090"
    assert json.loads(p["config"])["gpu_index_from"].startswith("assumed")
    assert pick(recs, "utilization", loc="line 2,")["value"] == pytest.approx(0.01)
    assert pick(recs, "nvidia_smi:utilization.memory", loc="line 2,")["value"] == pytest.approx(0.02)
    assert pick(recs, "memory_used", loc="line 2,")["value"] == 1129 * 1024**2
    # line 2620 (the last row)
    assert pick(recs, "power", loc="line 2620,")["value"] == 34.15
    e = pick(recs, "energy")
    hand, t, _ = _trapezoid_by_hand(path)
    assert e["n_samples"] == 2619 and e["value"] == pytest.approx(hand, rel=1e-12)
    assert e["source_loc"] == f"line 2..line 2620: trapezoid of power.draw over {t[-1] - t[0]:.3f} s"


def test_real_lms10_log_keeps_held_samples_and_integrates_each_reading_once(xfid_cli, fixtures):
    path = fixtures / NVSMI / "gtx1650_noindex_lms10.csv"
    recs, out = xfid_cli.ingest_export(path)
    assert "no index field and one uuid (GPU-eced1bd8-b3e7-abfc-0555-6f654cee60a5)" in out
    assert "gpu0: 80 power samples hold 10 distinct readings" in out
    assert len([r for r in recs if r["metric"] == "power" and r["stat"] == "value"]) == 80  # every sample kept
    assert json.loads(pick(recs, "power", loc="line 2,")["config"])["uuid"] == "GPU-eced1bd8-b3e7-abfc-0555-6f654cee60a5"
    assert pick(recs, "power", loc="line 2,")["value"] == 19.46 and pick(recs, "power", loc="line 81,")["value"] == 18.86
    hand, t, w = _trapezoid_by_hand(path)
    e = pick(recs, "energy")["value"]
    assert e == pytest.approx(hand, rel=1e-12)
    # the same energy from the 10 driver readings as steps (each value held from its first
    # print to the next reading's): within half a sample step of every change of value
    t, w = np.array(t), np.array(w)
    first = np.r_[0, np.flatnonzero(w[1:] != w[:-1]) + 1]
    edges = np.r_[t[first], t[-1]]
    steps = float(np.sum(w[first] * np.diff(edges)))
    tol = float(np.sum(np.abs(np.diff(w[first])) * np.diff(t)[first[1:] - 1]) / 2)
    assert abs(e - steps) <= tol + 1e-9 and tol < 0.02  # J, of 18.169 J over 0.918 s: 0.1 %
    assert e == pytest.approx(18.16934972643852, rel=1e-12)


def test_gpu_index_option(xfid_cli, fixtures):
    recs, out = xfid_cli.ingest_export(fixtures / NVSMI / "rtx4090_noindex_1s.csv", "--option", "gpu_index=3")
    assert {r["op"] for r in recs} == {"gpu3"} and "op gpu3" in out and "pass --option gpu_index" not in out
    r = xfid_cli("ingest", fixtures / NVSMI / "gtx1650_noindex_lms10.csv", "--option", "gpu_index=x")
    assert r.exit_code == 2 and "option gpu_index: 'x' is not a GPU index" in r.output


def _log(path, rows, header="timestamp, power.draw [W]"):
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


@pytest.mark.parametrize(("kind", "k"), [("same-time", 8), ("ms-apart", 4), ("real-h100x2", 2)])
def test_interleaved_gpus_without_index_are_refused(xfid_cli, fixtures, tmp_path, kind, k):
    if kind == "real-h100x2":  # the 2-GPU fixture with its index and pci.bus_id columns taken out
        lines = (fixtures / NVSMI / "h100x2_power_1s.csv").read_text().splitlines()
        rows = [", ".join(c for i, c in enumerate(x.split(", ")) if i not in (1, 3)) for x in lines]
        path = _log(tmp_path / "log.csv", rows[1:], rows[0])
    else:
        rows = []
        for s in range(5):
            for g in range(k):
                dt = s + (0 if kind == "same-time" else g * 0.002)
                rows.append(f"{ts(T0 + timedelta(seconds=dt))}, {100 + 10 * g:.2f} W")
        path = _log(tmp_path / "log.csv", rows)
    r = xfid_cli("ingest", path, "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and f"the rows look like {k} GPUs printed in turn" in r.output, r.output
    assert "query the index" in r.output and "Traceback" not in r.output


def test_alternating_gpu_models_without_index_are_refused(xfid_cli, tmp_path):
    rows = [f"{ts(T0 + timedelta(seconds=i * 0.5))}, {'NVIDIA A100' if i % 2 else 'NVIDIA H100'}, 100.00 W"
            for i in range(6)]
    r = xfid_cli("ingest", _log(tmp_path / "log.csv", rows, "timestamp, name, power.draw [W]"),
                 "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and "line 3, name: the rows name 2 GPU models" in r.output, r.output


def test_several_uuids_name_the_gpus(xfid_cli, tmp_path):
    rows = [f"{ts(T0 + timedelta(seconds=s))}, GPU-{g}, {100 + i:.2f} W" for s in range(3) for i, g in enumerate("ab")]
    recs, out = xfid_cli.ingest_export(_log(tmp_path / "log.csv", rows, "timestamp, uuid, power.draw [W]"),
                                       "--target", "h100-sxm", "--workload", "w")
    assert {r["op"] for r in recs} == {"gpu@GPU-a", "gpu@GPU-b"} and "GPUs are named by uuid" in out


def test_round_robin_rule_on_single_gpu_times():
    rng = np.random.default_rng(29)
    jitter = np.cumsum(0.011 + rng.uniform(0, 0.003, 500))  # -lms 10 with jitter
    gaps = np.cumsum(np.where(rng.uniform(size=300) < 0.05, 3.9, 1.002))  # -l 1 with stalls
    assert interleaved_gpus(jitter) is None and interleaved_gpus(gaps) is None
    rr = np.repeat(np.arange(20.0), 3) + np.tile([0, 0.001, 0.003], 20)
    assert interleaved_gpus(rr) == 3


# --- energy over a window from held -lms samples --------------------------------------------------
def _held_log(path, start, seconds, lms, steps_w, update_s=0.1):
    """A single-GPU -lms log of a step power: the driver's reading changes every update_s."""
    n = round(seconds * 1000 / lms)
    rows = []
    for i in range(n + 1):
        t = i * lms / 1000
        rows.append(f"{ts(start + timedelta(seconds=t))}, {steps_w[min(int(t / update_s + 1e-9), len(steps_w) - 1)]:.2f} W")
    return _log(path, rows)


def _window(xfid_cli, tmp_path, log, end, duration):
    assert xfid_cli("ingest", vllm(tmp_path / "result.json", end, duration), *CTX).exit_code == 0
    r = xfid_cli("ingest", log, *CTX)
    assert r.exit_code == 0, r.output
    return derived(export(xfid_cli))["energy"]["value"], r.output


def test_window_energy_of_an_lms50_log_equals_the_underlying_steps(xfid_cli, tmp_path):
    rng = np.random.default_rng(7)
    steps = np.round(rng.uniform(100, 400, 200), 2)  # 20 s of 100 ms driver readings
    log = _held_log(tmp_path / "lms50.csv", T0 - timedelta(seconds=5), 20.0, 50, steps)
    e, out = _window(xfid_cli, tmp_path, log, T0 + timedelta(seconds=10), 10.0)  # window [T0, T0+10 s]
    assert "power samples hold 200 distinct readings" in out  # 401 samples, each reading printed twice
    # the integral of the steps over [5 s, 15 s] of the log: readings 50..149, 0.1 s each
    exact = float(np.sum(steps[50:150]) * 0.1)
    # stated tolerance: half a sample step (25 ms) times each change of value inside the window
    tol = float(np.sum(np.abs(np.diff(steps[49:151]))) * 0.05 / 2)
    assert abs(e - exact) <= tol, (e, exact, tol)
    assert abs(e - exact) < 0.01 * exact  # and a double-counted log would be ~2x


@pytest.mark.parametrize("lms", [50, 100])
def test_constant_power_lms_log_equals_the_1s_log(xfid_cli, tmp_path, lms):
    fast = _held_log(tmp_path / "fast.csv", T0 - timedelta(seconds=5), 20.0, lms, [250.0] * 200)
    e_fast, _ = _window(xfid_cli, tmp_path, fast, T0 + timedelta(seconds=10), 10.0)
    other = type(xfid_cli)(tmp_path / "store2", tmp_path)
    (tmp_path / "slow").mkdir()
    slow = _held_log(tmp_path / "slow" / "slow.csv", T0 - timedelta(seconds=5), 20.0, 1000, [250.0] * 200)
    e_slow, _ = _window(other, tmp_path / "slow", slow, T0 + timedelta(seconds=10), 10.0)
    assert e_fast == pytest.approx(2500.0, rel=1e-12) and e_slow == pytest.approx(2500.0, rel=1e-12)


def test_a_gpu_shared_by_pods_is_kept_once(xfid_cli, tmp_path):
    line = 'DCGM_FI_DEV_POWER_USAGE{{gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",pod="{}"}} {}\n'
    path = tmp_path / "dump.txt"
    path.write_text(line.format("p1", "61.5") + line.format("p2", "61.5"))
    recs, out = xfid_cli.ingest_export(path, "--target", "h100-sxm", "--workload", "w")
    assert [r["value"] for r in recs] == [61.5] and json.loads(recs[0]["config"])["pod"] == "p1"
    assert "the same GPU series as line 1, for another pod (a shared GPU): kept once" in out


def test_dumps_of_a_run_ingested_together(xfid_cli, tmp_path):
    tmp_path = tmp_path / "run"  # (the store lives in the test's own tmp_path)
    tmp_path.mkdir()
    vllm(tmp_path / "result.json", T0 + timedelta(seconds=60), 60.0)
    side = ['target = "h100-sxm"', 'workload = "w/serve"', 'run = "r1"']
    for k, (dt, mj) in enumerate([(-5, 10_000_000), (65, 10_000_000 + 70 * 150_000)]):  # 150 W throughout
        _dump(tmp_path / f"dump{k}.txt", mj, 150.0)
        side.append(f'[files."dump{k}.txt"]\noptions = {{ timestamp = "{(T0 + timedelta(seconds=dt)).isoformat()}Z" }}')
    (tmp_path / "xfid-source.toml").write_text("\n".join(side) + "\n")
    r = xfid_cli("ingest", tmp_path)
    assert r.exit_code == 0 and "[derived-energy]  4 rows" in r.output, r.output
    d = derived(export(xfid_cli))
    assert d["energy"]["value"] == pytest.approx(150.0 * 60, rel=1e-12)
    assert json.loads(d["energy"]["config"])["gpus"] == {"gpu0": {"readings": 2, "energy_j": 9000.0}}
    again = xfid_cli("ingest", tmp_path)
    assert again.exit_code == 0 and "0 new rows" in again.output, again.output


def test_dumps_of_two_hosts_are_two_series_not_one(xfid_cli, tmp_path):
    # node1 and node2 both export a gpu0; their counters differ by far (one series would go
    # down): each host's dumps give its own energy, like one power log each
    assert xfid_cli("ingest", vllm(tmp_path / "result.json", T0 + timedelta(seconds=60), 60.0), *CTX).exit_code == 0
    for host, uuid, c0, watts in (("node1", "GPU-a", 5_000_000_000, 100.0), ("node2", "GPU-b", 9_000_000, 300.0)):
        for k, dt in enumerate((0, 60, 90)):  # the third dump changes nothing already derived
            path = tmp_path / f"{host}-{k}.txt"
            _dump(path, c0 + int(watts * dt * 1000), watts, host, uuid)
            r = xfid_cli("ingest", path, *CTX, "--option", f"timestamp={(T0 + timedelta(seconds=dt)).isoformat()}Z")
            assert r.exit_code == 0, r.output
    rows = [r for r in export(xfid_cli) if r["source"] == "derived-energy" and r["metric"] == "energy"]
    assert len(rows) == 2  # one per host: no second estimate from the later dumps
    energies = {json.loads(r["config"])["host"]: (r["value"], json.loads(r["config"])["gpus"]) for r in rows}
    assert energies == {"node1": (pytest.approx(6000.0, rel=1e-12), {"gpu0": {"readings": 2, "energy_j": 6000.0}}),
                        "node2": (pytest.approx(18000.0, rel=1e-12), {"gpu0": {"readings": 2, "energy_j": 18000.0}})}


def test_curl_i_dump_takes_the_http_date(xfid_cli, fixtures, tmp_path):
    real = (fixtures / DUMPS / "t4_serve_metrics.txt").read_text()
    path = tmp_path / "dump.txt"
    path.write_text("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                    "Date: Sun, 01 Mar 2026 12:00:05 GMT\r\nTransfer-Encoding: chunked\r\n\r\n" + real)
    assert detect(path).name == "dcgm-exporter"
    recs, out = xfid_cli.ingest_export(path, "--target", "t4", "--workload", "w")
    p = pick(recs, "power", "424773df46e0/gpu0")
    assert p["timestamp"] == "2026-03-01T12:00:05Z" and p["flags"] is None
    assert p["source_loc"] == "line 17, DCGM_FI_DEV_POWER_USAGE"  # the file's own line numbers
    assert json.loads(p["config"])["time_base"] == "HTTP Date header (curl -i)"
    assert "is the HTTP Date header (line 3)" in out and "one sample" not in out
    path.write_text("HTTP/1.1 200 OK\r\nDate: yesterday\r\n\r\n" + real)
    r = xfid_cli("ingest", path, "--target", "t4", "--workload", "w")
    assert r.exit_code == 2 and "line 2: HTTP Date header 'yesterday' is not a date" in r.output, r.output
