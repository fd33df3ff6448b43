"""Capability profiles: the real LLMCompass sweeps, seeded synthetic interference and transfer, output shapes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import xfid
import xfid.profile.render
from tests.test_engine_helpers import write_csv
from xfid.profile.classes import op_class, size_bucket
from xfid.profile.stats import caveats, relative_spread, summarize

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "fixtures" / "measured" / "llmcompass"
A100_PEAK_FP16 = 312e12


def _store(tmp_path: Path, rows: list[dict] | None = None, paths: list[Path] | None = None) -> xfid.XfidStore:
    s = xfid.open_store(tmp_path / "store")
    items = list(paths or [])
    if rows:
        items.append(write_csv(tmp_path / "records.csv", rows))
    s.ingest(items, adapter=None if paths else "xfid-records")
    return s


def _rec(op: str, value: float, *, run: str = "r1", workload: str = "w1", target: str = "h100-sxm",
         fidelity: str = "measured", metric: str = "latency", unit: str = "s", config: dict | None = None,
         ts: str = "2026-11-01T00:00:00Z", **extra) -> dict:
    r = {"fidelity": fidelity, "target": target, "workload": workload, "op": op, "metric": metric, "stat": "value",
         "value": repr(float(value)), "unit": unit, "run": run, "timestamp": ts, **extra}
    if config:
        r["config"] = config
    return r


def _sweep_rows(path: Path) -> list[tuple[int, int, int, float, int]]:
    """(m, n, k, seconds, line) of an LLMCompass sweep, parsed here independently of the adapter."""
    out = []
    for line_no, line in enumerate(path.read_text().splitlines(), 1):
        m, n, k, t, _ = (x.strip() for x in line.split(","))
        out.append((int(m), int(n), int(k), float(t.removesuffix("ms")) / 1e3, line_no))
    return out


@pytest.fixture(scope="module")
def sweep_store(tmp_path_factory) -> xfid.XfidStore:
    tmp = tmp_path_factory.mktemp("sweep")
    return _store(tmp, paths=[SWEEP])


def _target(prof, name: str) -> dict:
    return next(t for t in prof.to_dict()["targets"] if t["target"] == name)


def test_op_classes_and_buckets():
    assert op_class("gemm[m=64,n=12288,k=12288]") == "gemm"
    assert op_class("attn.sdpa") == "attention"
    assert op_class("layer3.mlp.down_proj") == "gemm" and op_class("attn.qkv_proj") == "gemm"
    assert op_class("void flash_fwd_kernel<Flash_fwd_kernel_traits<128>>") == "attention"
    assert op_class("void at::native::vectorized_elementwise_kernel<4>") == "elementwise"
    assert op_class("allreduce") == "communication" and op_class("") == "end-to-end"
    assert op_class("mystery_op") == "other"
    assert size_bucket(2 * 8192 * 64 * 64, None) == "1e7-1e8 FLOP"
    assert size_bucket(1e12, None) == "1e12-1e13 FLOP"
    assert size_bucket(None, 4096) == "1e3-1e4 B" and size_bucket(None, None) == "unknown"


def test_summary_statistics_and_caveats():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert (s["median"], s["q1"], s["q3"]) == (2.5, 1.75, 3.25)
    assert s["ci"][0] <= s["median"] <= s["ci"][1]
    assert summarize([1.0, 2.0, 3.0, 4.0]) == s  # fixed seed
    assert caveats(4, s) == ["n < 5", "CI wider than ±20%"]
    assert caveats(1, summarize([0.5])) == ["n < 5", "no CI (n < 2)"]
    assert caveats(6, summarize([0.9, 0.91, 0.9, 0.92, 0.9, 0.91])) == []
    assert relative_spread([1.0, 1.1]) == pytest.approx(np.std([1.0, 1.1], ddof=1) / 1.05)


def test_a100_large_gemms_fraction_of_312_tflops(sweep_store):
    rows = _sweep_rows(SWEEP / "matmul_A100.csv")
    large = [(2 * m * n * k / t / A100_PEAK_FP16, line) for m, n, k, t, line in rows if 1e12 <= 2 * m * n * k < 1e13]
    assert len(large) == 6
    t = _target(sweep_store.profile("a100-sxm"), "a100-sxm")
    c = next(c for c in t["classes"] if c["size_bucket"] == "1e12-1e13 FLOP")
    assert (c["op_class"], c["precision"], c["limiter"], c["n"]) == ("gemm", "fp16", "compute", 6)
    expected = float(np.median([f for f, _ in large]))
    assert c["fraction_of_peak"]["median"] == pytest.approx(expected, rel=1e-9)
    assert 0.85 < expected < 0.95  # about 283 of 312 TFLOP/s
    # compute-limited: the bound is flops / peak, so the fraction of bound is the same number
    assert c["fraction_of_bound"]["median"] == pytest.approx(expected, rel=1e-9)
    lo, hi = c["fraction_of_bound"]["ci"]
    assert lo <= expected <= hi and c["caveats"] == []
    assert c["peak"] == {"kind": "peak_flops.fp16", "value": A100_PEAK_FP16, "unit": "FLOP/s"}
    lines = sorted(int(re.match(r"line (\d+)", e["source_loc"]).group(1)) for e in c["evidence"]
                   if e["role"] == "measured")
    assert lines == sorted(line for _, line in large)
    assert all(e["source_path"].endswith("matmul_A100.csv") for e in c["evidence"] if e["role"] == "measured")


def test_a100_small_gemms_memory_or_latency_limited(sweep_store):
    t = _target(sweep_store.profile("a100-sxm"), "a100-sxm")
    small = [c for c in t["classes"] if c["size_bucket"] in ("1e7-1e8 FLOP", "1e8-1e9 FLOP")]
    assert small and all(c["limiter"] == "memory" for c in small)
    for c in small:
        assert c["fraction_of_bound"]["median"] < 0.1
        assert "latency" in c["limits"]["verdict"]
        assert "n < 5" in c["caveats"]
    # 8192x64x64 by hand: bytes 2*(MK+KN+MN), bound bytes/mem_bw, fraction = bound / measured
    m, n, k, secs, _ = next(r for r in _sweep_rows(SWEEP / "matmul_A100.csv") if r[:3] == (8192, 64, 64))
    bound = 2 * (m * k + k * n + m * n) / 2.039e12
    c = next(c for c in small if c["size_bucket"] == "1e7-1e8 FLOP")
    assert c["fraction_of_bound"]["median"] == pytest.approx(bound / secs, rel=1e-9)


def test_side_by_side_table_and_markdown(sweep_store, tmp_path):
    from click.testing import CliRunner

    from xfid.cli import cli

    r = CliRunner().invoke(cli, ["--store", str(sweep_store.path), "profile", "a100-sxm", "mi210"])
    assert r.exit_code == 0, r.output
    gemm = r.output.split("== gemm ==")[1].split("==")[0]
    assert "a100-sxm" in gemm and "mi210" in gemm and "1e12-1e13 FLOP" in gemm
    assert "== transfer" in r.output and "== conditions: mi210 ==" in r.output
    assert "matmul_MI210.csv line 1, field 4" in r.output  # records behind the numbers
    md = CliRunner().invoke(cli, ["--store", str(sweep_store.path), "profile", "a100-sxm", "--format", "markdown"])
    assert md.exit_code == 0 and "## gemm" in md.output
    assert re.search(r"^\| C\d+ \| a100-sxm \| fp16 \| 1e12-1e13 FLOP \| compute \| 6 \|", md.output, re.M)
    assert "n &lt; 5" in md.output  # caveats printed, escaped for markdown


def test_json_shape(sweep_store):
    from click.testing import CliRunner

    from xfid.cli import cli

    r = CliRunner().invoke(cli, ["--store", str(sweep_store.path), "profile", "a100-sxm", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert list(doc) == ["targets"]
    t = doc["targets"][0]
    assert {"target", "classes", "transfer", "interference", "conditions"} <= set(t)
    c = t["classes"][0]
    assert {"op_class", "precision", "size_bucket", "limiter", "n", "fraction_of_bound", "fraction_of_peak",
            "caveats", "evidence"} <= set(c)
    for k in ("fraction_of_bound", "fraction_of_peak"):
        assert {"median", "q1", "q3", "ci"} <= set(c[k])
    assert all({"source_path", "source_loc"} <= set(e) for e in c["evidence"])
    tr = t["transfer"][0]
    assert {"op_class", "n", "error_before", "error_after", "tolerance", "measurement_spread", "transfers",
            "verdict", "caveats", "evidence"} <= set(tr)
    assert {"hardware", "software", "power_and_clocks", "configuration", "excluded", "data_sheet"} <= set(t["conditions"])


def test_interference_slowdown_known_answer(tmp_path):
    rng = np.random.default_rng(7)
    ops = ["gemm[m=4096,n=4096,k=4096]", "gemm[m=2048,n=4096,k=4096]", "gemm[m=1024,n=4096,k=4096]"]
    rows, iso = [], {}
    for i, op in enumerate(ops):
        base = 1e-3 * (i + 1)
        vals = base * (1 + 0.02 * rng.standard_normal(5))
        iso[op] = float(np.median(vals))
        rows += [_rec(op, v, run=f"iso{j}") for j, v in enumerate(vals)]
    noise = 0.05 * rng.standard_normal((len(ops), 4))
    expected = []
    for i, op in enumerate(ops):
        for j in range(4):
            slow = 1.5 * (1 + noise[i, j])
            expected.append(slow)
            rows.append(_rec(op, iso[op] * slow, run=f"co{j}", config={"interference": "stream-triad"}))
    rows.append(_rec("gemm[m=512,n=512,k=512]", 1e-5, run="co9", config={"interference": "stream-triad"}))
    t = _target(_store(tmp_path, rows).profile("h100-sxm"), "h100-sxm")
    (entry,) = t["interference"]
    assert (entry["op_class"], entry["co_runner"], entry["n"]) == ("gemm", "stream-triad", 12)
    assert entry["slowdown"]["median"] == pytest.approx(float(np.median(expected)), rel=1e-9)
    lo, hi = entry["slowdown"]["ci"]
    assert lo <= entry["slowdown"]["median"] <= hi and lo > 1.3 and hi < 1.7  # 5% noise, 12 runs
    assert "1 run(s) with this co-runner have no isolated run of the same key" in entry["caveats"]
    assert {e["role"] for e in entry["evidence"]} == {"interfered", "isolated"}
    # runs with a co-runner are not capability: the classes count isolated runs only
    assert sum(c["n"] for c in t["classes"]) == 15
    assert t["conditions"]["interfered"] == 13


def test_transfer_known_answer(tmp_path):
    rows = []
    effs = {"w1": 0.5, "w2": 0.25, "w3": 0.125}
    for w, eff in effs.items():
        for i, op in enumerate(["gemm[m=64,n=64,k=64]", "gemm[m=128,n=64,k=64]", "gemm[m=256,n=64,k=64]"]):
            b = 1e-5 * (i + 1)
            rows.append(_rec(op, b, workload=w, fidelity="roofline", config={"limiter": "compute"}))
            rows.append(_rec(op, b / 0.8, workload=w))
        rows.append(_rec("attn.sdpa", 1e-4, workload=w, fidelity="roofline", config={"limiter": "memory"}))
        rows.append(_rec("attn.sdpa", 1e-4 / eff, workload=w))
    t = _target(_store(tmp_path, rows).profile("h100-sxm"), "h100-sxm")
    tr = {r["op_class"]: r for r in t["transfer"]}
    assert tr["gemm"]["error_after"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert tr["gemm"]["error_before"]["mean"] == pytest.approx(0.2)
    assert tr["gemm"]["transfers"] is True and tr["gemm"]["cv_method"] == "leave-one-workload-out"
    # leave one workload out: the factor is the geometric mean of the other two workloads' 1/eff
    inv = {w: 1 / e for w, e in effs.items()}
    ape = []
    for w in effs:
        rest = [v for x, v in inv.items() if x != w]
        ape.append(abs(np.sqrt(rest[0] * rest[1]) - inv[w]) / inv[w])
    a = tr["attention"]
    assert a["error_after"]["mean"] == pytest.approx(float(np.mean(ape)))
    assert a["error_before"]["mean"] == pytest.approx(float(np.mean([1 - e for e in effs.values()])))
    assert a["transfers"] is False and a["verdict"].startswith("stops transferring")
    assert "n < 5" in a["caveats"]


def test_measurement_spread_next_to_model_error(tmp_path):
    rows = []
    for w in ("w1", "w2"):
        for i, op in enumerate(["gemm[m=64,n=64,k=64]", "gemm[m=128,n=64,k=64]", "gemm[m=256,n=64,k=64]"]):
            b = 1e-5 * (i + 1)
            rows.append(_rec(op, b, workload=w, fidelity="roofline", config={"limiter": "compute"}))
            rows.append(_rec(op, b / 0.5, workload=w, run="r1"))
            rows.append(_rec(op, b / 0.5 * 1.1, workload=w, run="r2", ts="2026-11-02T00:00:00Z"))
    s = _store(tmp_path, rows)
    (g,) = _target(s.profile("h100-sxm"), "h100-sxm")["transfer"]
    want = np.std([1.0, 1.1], ddof=1) / 1.05
    assert g["measurement_spread"]["median"] == pytest.approx(want)
    assert g["measurement_spread"]["keys"] == 6
    assert g["transfers"] is True and "within the run-to-run spread" in g["verdict"]
    from click.testing import CliRunner

    from xfid.cli import cli

    r = CliRunner().invoke(cli, ["--store", str(s.path), "calibrate", "--candidate", "roofline", "--reference",
                                 "measured", "--target", "h100-sxm"])
    assert r.exit_code == 0, r.output
    assert f"measurement spread {100 * want:.1f}%" in r.output
    r = CliRunner().invoke(cli, ["--store", str(s.path), "calibrate", "--candidate", "roofline", "--reference",
                                 "measured", "--target", "h100-sxm", "--format", "json"])
    assert json.loads(r.output)["measurement_spread"]["median"] == pytest.approx(want)


def test_ncu_counters_flag_neither_bound(tmp_path):
    small, big = "gemm[m=8192,n=64,k=64]", "gemm[m=8192,n=8192,k=8192]"  # memory- and compute-bound on h100
    rows = [_rec(small, 3e-5), _rec(small, 0.20, metric="ncu:dram_throughput", unit="ratio"),
            _rec(small, 0.30, metric="utilization", unit="ratio"),
            _rec(big, 1.5e-3), _rec(big, 0.92, metric="utilization", unit="ratio"),
            _rec(big, 0.25, metric="ncu:dram_throughput", unit="ratio")]
    t = _target(_store(tmp_path, rows).profile("h100-sxm"), "h100-sxm")
    by = {c["limiter"]: c["limits"] for c in t["classes"]}
    assert by["memory"]["verdict"].startswith("neither bound: latency or occupancy limited")
    assert by["memory"]["agrees"] is False and by["memory"]["ncu"]["dram_throughput"] == pytest.approx(0.2)
    assert by["compute"]["verdict"].startswith("ncu agrees: compute-bound") and by["compute"]["agrees"] is True


def test_excluded_runs_and_rtl_fallback(tmp_path):
    s = _store(tmp_path, paths=[ROOT / "fixtures" / "records", ROOT / "fixtures" / "measured" / "mlperf"])
    p = s.profile(["h100-sxm", "t100-a0"])
    h = _target(p, "h100-sxm")
    why = [e["why"] for e in h["conditions"]["excluded"]]
    assert any(w.startswith("flagged invalid: Reduce target QPS") for w in why)  # the INVALID MLPerf run
    t = _target(p, "t100-a0")
    assert t["fidelity"] == "rtl" and any("invented" in c for c in t["caveats"])
    assert any(e["why"] == "flagged failed_test" for e in t["conditions"]["excluded"])


def test_html_escapes_untrusted_names(tmp_path):
    from click.testing import CliRunner

    from xfid.cli import cli

    evil = "<script>alert(1)</script>"
    rows = [_rec("gemm[m=4096,n=4096,k=4096]", 1e-3, hardware=f"{evil}GPU"), _rec(f"{evil}op", 1e-3)]
    s = _store(tmp_path, rows)
    out = tmp_path / "profile.html"
    r = CliRunner().invoke(cli, ["--store", str(s.path), "profile", "h100-sxm", "-o", str(out)])
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert not re.search(r"""(src|href)=["']?(https?:|file:|//)""", html)


def test_pdf_fetches_nothing(sweep_store, tmp_path):
    from xfid.profile.render import to_html
    from xfid.report.render import render_pdf

    fetched: list[str] = []
    pdf, pages = render_pdf(to_html(sweep_store.profile("a100-sxm"), "now"), record=fetched)
    assert pdf.startswith(b"%PDF") and pages >= 1
    assert all(u.startswith("data:") for u in fetched)


def test_bad_target_and_no_target(sweep_store):
    from click.testing import CliRunner

    from xfid.cli import cli

    r = CliRunner().invoke(cli, ["--store", str(sweep_store.path), "profile", "a100-sxn"])
    assert r.exit_code == 2
    assert r.output.startswith("Error: unknown target 'a100-sxn'; did you mean a100-sxm")
    assert CliRunner().invoke(cli, ["--store", str(sweep_store.path), "profile"]).exit_code == 2


def test_interference_tags_from_meta_and_sidecar(tmp_path):
    from click.testing import CliRunner

    from xfid.cli import cli

    ops = [f"gemm[m={m},n=4096,k=4096]" for m in (1024, 2048, 4096)]
    src = tmp_path / "in"
    src.mkdir()
    write_csv(src / "isolated.csv", [_rec(op, 1e-3 * (i + 1)) for i, op in enumerate(ops)])
    write_csv(src / "with_copy.csv", [_rec(op, 2e-3 * (i + 1), run="co") for i, op in enumerate(ops)])
    (src / "xfid-source.toml").write_text('[files."with_copy.csv"]\nmeta = { interference = "h2d-copy" }\n')
    nccl = tmp_path / "nccl.csv"
    write_csv(nccl, [_rec(op, 3e-3 * (i + 1), run="nc") for i, op in enumerate(ops)])
    run = CliRunner()
    store = str(tmp_path / "store")
    assert run.invoke(cli, ["--store", store, "ingest", str(src)]).exit_code == 0
    r = run.invoke(cli, ["--store", store, "ingest", str(nccl), "--meta", "interference=nccl-allreduce"])
    assert r.exit_code == 0, r.output
    r = run.invoke(cli, ["--store", store, "profile", "h100-sxm", "--format", "json"])
    got = {e["co_runner"]: e for e in json.loads(r.output)["targets"][0]["interference"]}
    assert got["h2d-copy"]["slowdown"]["median"] == pytest.approx(2.0)
    assert got["nccl-allreduce"]["slowdown"]["median"] == pytest.approx(3.0)
    assert got["h2d-copy"]["n"] == 3 and "n < 5" in got["h2d-copy"]["caveats"]
    table = run.invoke(cli, ["--store", store, "profile", "h100-sxm"]).output
    assert re.search(r"h100-sxm\s+gemm\s+nccl-allreduce\s+3\s+3×", table)


def test_weekly_report_has_capability_section(sweep_store):
    from xfid.report.assemble import build_report_data
    from xfid.report.period import resolve_period
    from xfid.report.render import render_html

    data = build_report_data(sweep_store.backend(), sweep_store.config, resolve_period(None, None, None))
    html = render_html(data, bound_tol=data.bound_tolerance)
    section = html.split('<section id="capability">')[1].split("</section>")[0]
    assert "a100-sxm" in section and "mi210" in section and ">gemm<" in section
    assert "Records behind each class" not in section  # the short form: the profile has the records
    rows = [r for r in data.capability_rows if (r["target"], r["op_class"], r["precision"]) == ("a100-sxm", "gemm", "fp16")]
    sizes = [r["size"] for r in rows if r["limiter"] == "compute"]
    assert "1e12-1e13 FLOP" in sizes and sizes == sorted(sizes, key=lambda x: float(x.split("-")[0][2:]))  # numeric
    assert section.index("1e9-1e10 FLOP") < section.index("1e12-1e13 FLOP")


def test_conditions_power_and_clocks_from_nvidia_smi(tmp_path):
    s = _store(tmp_path, paths=[ROOT / "fixtures" / "measured" / "nvidia-smi", ROOT / "fixtures" / "records"])
    c = _target(s.profile("h100-sxm"), "h100-sxm")["conditions"]
    pc = {e["name"]: e["values"] for e in c["power_and_clocks"]}
    assert pc["power_limit_w"][0]["value"] == "700.0"
    assert pc["power"][0]["value"].startswith("median ") and "h100x2_power_1s.csv" in pc["power"][0]["value"]
    assert c["hardware"] == [{"value": "NVIDIA H100 80GB HBM3", "n": 14}]


def test_real_ncu_counters_without_a_bound(tmp_path):
    s = _store(tmp_path, paths=[ROOT / "fixtures" / "measured" / "ncu"])
    t = _target(s.profile("h100-sxm"), "h100-sxm")
    assert t["classes"] == []  # raw kernel names: no op map, no bound
    rows = [r for r in t["counters_without_bound"] if r["evidence"][0]["source_path"].endswith("h100_decode_long.csv")]
    by = {r["op"].split("<")[0].split("(")[0]: r for r in rows}
    gemm = by["ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn"]
    assert gemm["op_class"] == "gemm" and gemm["verdict"].startswith("compute-bound by ncu")
    assert gemm["counters"]["sm_throughput"] == pytest.approx(0.9147)  # the file's SM [%] 91.47
    elem = next(r for r in rows if r["op_class"] == "elementwise")
    assert elem["verdict"].startswith("memory-bound by ncu (dram throughput 84%")
    table = xfid.profile.render.to_table(s.profile("h100-sxm"))
    assert "== Nsight Compute counters of kernels without a roofline bound ==" in table


def test_ncu_one_counter_only_is_not_called_neither_bound(tmp_path):
    op = "gemm[m=8192,n=64,k=64]"
    rows = [_rec(op, 3e-5), _rec(op, 0.10, metric="utilization", unit="ratio")]
    t = _target(_store(tmp_path, rows).profile("h100-sxm"), "h100-sxm")
    (c,) = t["classes"]
    assert "no DRAM throughput to tell more" in c["limits"]["verdict"] and c["limits"]["agrees"] is False


def test_output_files_and_their_errors(sweep_store, tmp_path):
    from click.testing import CliRunner

    from xfid.cli import cli

    base = ["--store", str(sweep_store.path), "profile", "a100-sxm"]
    md = tmp_path / "profile.md"
    r = CliRunner().invoke(cli, [*base, "--format", "markdown", "-o", str(md)])
    assert r.exit_code == 0 and md.read_text().startswith("# Capability profile: a100-sxm")
    missing = tmp_path / "no-such-dir" / "profile.pdf"
    r = CliRunner().invoke(cli, [*base, "-o", str(missing)])
    assert r.exit_code == 2 and r.output.startswith(f"Error: cannot write {missing}: folder")
    assert not missing.parent.exists()


def test_transfer_across_targets_known_answer(tmp_path):
    rows = []
    for target, eff in (("h100-sxm", 0.5), ("mi300x", 0.25)):
        for i in range(6):
            op = f"gemm[m={1024 * (i + 1)},n=4096,k=4096]"
            b = 1e-4 * (i + 1)
            rows.append(_rec(op, b, target=target, fidelity="roofline", config={"limiter": "compute"}))
            rows.append(_rec(op, b / eff, target=target))
    p = _store(tmp_path, rows).profile(["h100-sxm", "mi300x"])
    (h,) = _target(p, "h100-sxm")["transfer_across"]
    (m,) = _target(p, "mi300x")["transfer_across"]
    # h100's factor is 2 (measured = 2x bound): on mi300x (4x) it predicts 2b for 4b, 50% off; the other way 100%
    assert (m["calibrated_on"], m["op_class"], m["n"]) == ("h100-sxm", "gemm", 6)
    assert m["error_after"]["mean"] == pytest.approx(0.5) and m["transfers"] is False
    assert h["error_after"]["mean"] == pytest.approx(1.0) and h["factors"] == ["gemm/compute"]
    assert m["verdict"] == "stops transferring: error after calibration on h100-sxm 50.0% > tolerance 10%"
    assert "== transfer across targets" in xfid.profile.render.to_table(p)


def test_zero_bound_and_zero_time_are_listed_not_divided(tmp_path):
    rows = [_rec("gemm[m=64,n=64,k=64]", 0.0, fidelity="roofline", config={"limiter": "compute"}),
            _rec("gemm[m=64,n=64,k=64]", 1e-5), _rec("gemm[m=128,n=64,k=64]", 0.0)]
    t = _target(_store(tmp_path, rows).profile(["h100-sxm"]), "h100-sxm")
    why = sorted(u["why"] for u in t["conditions"]["unbounded"])
    assert why == ["not a positive time", "the bound is not a positive time"]
    assert t["classes"] == [] and json.loads(xfid.profile.Profile([t]).to_json())
