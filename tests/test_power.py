"""Power/energy: the trapezoid, windowed energy over a benchmark, tokens/J, warnings, idempotence."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import pytest

from xfid.power import MIN_SAMPLES, derive, trapezoid
from xfid.store import Store

ENERGY = "measured/energy"


def export(xfid_cli):
    return [json.loads(x) for x in xfid_cli("export").output.splitlines()]


def derived(recs):
    out = {r["metric"]: r for r in recs if r["source"] == "derived-energy"}
    assert len(out) == len([r for r in recs if r["source"] == "derived-energy"])
    return out


def nvsmi(path, start, watts, step_s=1.0, gpus=1):
    lines = ["timestamp, index, power.draw [W]"]
    for i, w in enumerate(watts):
        ts = (start + timedelta(seconds=i * step_s)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        lines += [f"{ts}, {g}, {w + g:.2f} W" for g in range(gpus)]
    path.write_text("\n".join(lines) + "\n")
    return path


def vllm(path, end, duration, tokens=6000):
    path.write_text(json.dumps({
        "date": end.strftime("%Y%m%d-%H%M%S"), "endpoint_type": "openai", "backend": "vllm", "duration": duration,
        "completed": 10, "failed": 0, "total_input_tokens": 100, "total_output_tokens": tokens,
        "request_throughput": 10 / duration, "output_throughput": tokens / duration, "median_ttft_ms": 5.0}))
    return path


T0 = datetime(2026, 3, 1, 12, 0, 0)
CTX = ("--target", "h100-sxm", "--workload", "w/serve", "--run", "r1")


def test_trapezoid():
    assert trapezoid([0, 1, 3], [10, 20, 20]) == 15 + 40
    assert trapezoid([5], [100]) == 0.0


def test_fixture_pair_end_to_end(xfid_cli, fixtures):
    r = xfid_cli("ingest", fixtures / ENERGY)
    assert r.exit_code == 0, r.output
    assert "[derived-energy]  4 rows" in r.output
    d = derived(export(xfid_cli))
    # independent check: the samples of the CSV inside [12:00:30, 12:01:30] (they fall on the edges)
    lines = (fixtures / ENERGY / "h100_nvsmi_power_1s.csv").read_text().splitlines()[1:]
    w = [float(x.split(", ")[3].split()[0]) for x in lines if "12:00:30" <= x[11:19] <= "12:01:30"]
    assert len(w) == 61
    energy = float(np.sum((np.array(w[1:]) + np.array(w[:-1])) / 2))
    assert d["energy"]["value"] == pytest.approx(energy, rel=1e-12)
    assert d["energy"]["value"] == pytest.approx(38138.16)
    assert d["power"]["stat"] == "mean" and d["power"]["value"] == pytest.approx(energy / 60)
    assert d["tokens_per_joule"]["value"] == pytest.approx(61440 / energy)
    assert d["energy_per_token"]["value"] == pytest.approx(energy / 61440)
    e = d["energy"]
    assert (e["target"], e["workload"], e["op"], e["run"]) == ("h100-sxm", "llama3-8b/serve/in2048/out256/bf16", "",
                                                               "example-energy-2026-03-01")
    assert e["n_samples"] == 61 and e["unit"] == "J" and e["hardware"] == "NVIDIA H100 80GB HBM3"
    assert e["source_loc"] == "window 2026-03-01T12:00:30Z..2026-03-01T12:01:30Z; gpu0 61 samples"
    assert e["source_path"] == (f"{fixtures / ENERGY / 'h100_vllm_serve_result.json'} + "
                                f"{fixtures / ENERGY / 'h100_nvsmi_power_1s.csv'}")
    cfg = json.loads(e["config"])
    assert cfg["window_start"] == "2026-03-01T12:00:30Z" and cfg["window_end"] == "2026-03-01T12:01:30Z"
    assert cfg["window_s"] == 60.0 and cfg["covered_s"] == 60.0 and cfg["n_samples"] == 61
    assert cfg["gpus"] == {"gpu0": {"samples": 61, "energy_j": pytest.approx(energy, abs=1e-6)}}
    ids = {x["source"]: x["source_id"] for x in export(xfid_cli)}
    assert cfg["benchmark_source_id"] == ids["vllm"] and cfg["power_source_id"] == ids["nvidia-smi"]


def test_reingest_is_a_noop(xfid_cli, fixtures, snapshot):
    assert xfid_cli("ingest", fixtures / ENERGY).exit_code == 0
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", fixtures / ENERGY)
    assert r.exit_code == 0 and "0 new rows" in r.output
    assert snapshot(xfid_cli.store) == before


@pytest.mark.parametrize("power_first", [True, False])
def test_separate_ingests_pair_up(xfid_cli, tmp_path, power_first):
    p = nvsmi(tmp_path / "p.csv", T0, [100.0] * 21)
    b = vllm(tmp_path / "b.json", T0 + timedelta(seconds=15), 10.0)
    first, second = (p, b) if power_first else (b, p)
    assert xfid_cli("ingest", first, *CTX).exit_code == 0
    assert not derived(export(xfid_cli))
    r = xfid_cli("ingest", second, *CTX)
    assert r.exit_code == 0 and "[derived-energy]" in r.output, r.output
    d = derived(export(xfid_cli))
    assert d["energy"]["value"] == pytest.approx(1000.0) and d["energy"]["n_samples"] == 11
    assert d["tokens_per_joule"]["value"] == pytest.approx(6.0)


def test_window_edges_interpolated_and_gpus_summed(xfid_cli, tmp_path):
    # a linear ramp 100 W + 10 W/s, sampled every 2 s on two GPUs (gpu1 = gpu0 + 1 W)
    watts = [100.0 + 10 * 2 * i for i in range(16)]
    nvsmi(tmp_path / "p.csv", T0, watts, step_s=2.0, gpus=2)
    # the window [3 s, 23 s] falls between samples; the integral of a ramp is exact under trapezoids
    vllm(tmp_path / "b.json", T0 + timedelta(seconds=23), 20.0, tokens=1000)
    r = xfid_cli("ingest", tmp_path, *CTX)
    assert r.exit_code == 0, r.output
    d = derived(export(xfid_cli))
    one = 100 * 20 + 10 * (23**2 - 3**2) / 2
    assert d["energy"]["value"] == pytest.approx(2 * one + 20.0)
    assert d["energy"]["n_samples"] == 20  # 10 samples (4 s ... 22 s) per GPU
    cfg = json.loads(d["energy"]["config"])
    assert set(cfg["gpus"]) == {"gpu0", "gpu1"} and cfg["gpus"]["gpu1"]["samples"] == 10


def test_too_few_samples_warns_and_derives_nothing(xfid_cli, tmp_path):
    nvsmi(tmp_path / "p.csv", T0, [100.0] * 3, step_s=5.0)  # 0 s, 5 s, 10 s
    vllm(tmp_path / "b.json", T0 + timedelta(seconds=8), 6.0)  # window [2, 8]: one sample
    r = xfid_cli("ingest", tmp_path, *CTX)
    assert r.exit_code == 0, r.output
    assert f"only 1 gpu0 power sample(s) in the window 2026-03-01T12:00:02Z..2026-03-01T12:00:08Z (need >= " \
           f"{MIN_SAMPLES}); no energy derived" in r.output
    assert not derived(export(xfid_cli))


def test_window_not_covered_warns(xfid_cli, tmp_path):
    nvsmi(tmp_path / "p.csv", T0, [100.0] * 11)  # 0 ... 10 s
    vllm(tmp_path / "b.json", T0 + timedelta(seconds=30), 25.0)  # window [5, 30]
    r = xfid_cli("ingest", tmp_path, *CTX)
    assert r.exit_code == 0 and "the gpu0 log covers only 5.0 s of the 25.0 s window" in r.output, r.output
    assert not derived(export(xfid_cli))


def test_different_runs_do_not_pair(xfid_cli, tmp_path):
    p = nvsmi(tmp_path / "p.csv", T0, [100.0] * 21)
    b = vllm(tmp_path / "b.json", T0 + timedelta(seconds=15), 10.0)
    assert xfid_cli("ingest", p, "--target", "h100-sxm", "--workload", "w", "--run", "a").exit_code == 0
    assert xfid_cli("ingest", b, "--target", "h100-sxm", "--workload", "w", "--run", "b").exit_code == 0
    assert not derived(export(xfid_cli))


def test_dcgm_with_start_pairs_and_relative_does_not(xfid_cli, tmp_path):
    rows = ["#Entity   POWER", "ID        W"] + [f"GPU 0     {200.0 + i:.3f}" for i in range(21)]
    (tmp_path / "d.txt").write_text("\n".join(rows) + "\n")
    vllm(tmp_path / "b.json", T0 + timedelta(seconds=15), 10.0, tokens=2105)
    r = xfid_cli("ingest", tmp_path / "d.txt", tmp_path / "b.json", *CTX)
    assert r.exit_code == 0 and "[derived-energy]" not in r.output
    assert "has no wall-clock times" in r.output and "pass --option start=ISO-TIME" in r.output, r.output
    r = xfid_cli("ingest", tmp_path / "d.txt", *CTX, "--option", "start=2026-03-01T12:00:00Z")
    assert r.exit_code == 0 and "[derived-energy]" in r.output, r.output
    d = derived(export(xfid_cli))
    assert d["energy"]["value"] == pytest.approx(10 * 210.0)  # a ramp 205..215 W over [5 s, 15 s]
    assert d["tokens_per_joule"]["value"] == pytest.approx(2105 / 2100)


def test_derive_on_store_records(xfid_cli, fixtures):
    assert xfid_cli("ingest", fixtures / ENERGY).exit_code == 0
    with Store(xfid_cli.store) as s:
        out = derive(s.read())
    assert len(out) == 1 and out[0].warning is None
    assert out[0].rows["metric"] == ["energy", "power", "tokens_per_joule", "energy_per_token"]
    assert out[0].rows["value"][0] == pytest.approx(38138.16)


def test_failed_ingest_writes_no_derived_records(xfid_cli, tmp_path, snapshot, fixtures):
    assert xfid_cli("ingest", fixtures / "measured/nvidia-smi/h200_nounits_500ms.csv").exit_code == 0
    nvsmi(tmp_path / "p.csv", T0, [100.0] * 21)
    vllm(tmp_path / "b.json", T0 + timedelta(seconds=15), 10.0)
    (tmp_path / "z.csv").write_text("timestamp, index, power.draw [W]\n2026/03/01 12:00:00.000, 0\n")
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", tmp_path / "p.csv", tmp_path / "b.json", tmp_path / "z.csv", *CTX)
    assert r.exit_code == 2 and "z.csv, line 2: expected 3 fields" in r.output, r.output
    assert snapshot(xfid_cli.store) == before
