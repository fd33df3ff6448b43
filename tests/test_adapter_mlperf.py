"""mlperf adapter: every number of two real loadgen summaries (8xMI300X), the detail log, INVALID."""

from __future__ import annotations

import hashlib
import json

import pytest

from xfid.adapters import detect
from xfid.adapters.mlperf import MlperfAdapter
from xfid.schema import FLAG_NO_REFERENCE

DIR = "measured/mlperf"
OFFLINE = "mi300x_llama2-70b-99_offline_mlperf_log_summary.txt"
SERVER = "mi300x_llama2-70b-99.9_server_mlperf_log_summary.txt"
DETAIL = "h100x8_llama2-70b-99_server_INVALID_mlperf_log_detail.txt"
SERVER_V50 = "mi325x_llama2-70b-99.9_server_v5.0_mlperf_log_summary.txt"
PCTS = ("p50", "p90", "p95", "p97", "p99", "p99.9")


def rows(xfid_cli, path, *args):
    return xfid_cli.ingest_export(path, *args)[0]


def table(recs):
    out = {(r["metric"], r["stat"]): r["value"] for r in recs}
    assert len(out) == len(recs), "one record per (metric, stat)"
    return out


def ns(*vals):
    return [v * 1e-9 for v in vals]


def test_fixtures_are_the_real_files_byte_for_byte(fixtures):
    # sha256 of the files as published in mlcommons/inference (see fixtures/measured/mlperf/README.md)
    for name in (OFFLINE, SERVER, SERVER_V50):
        data = (fixtures / DIR / name).read_bytes()
        assert data.startswith(b"================================================\nMLPerf Results Summary\n")
        assert hashlib.sha256(data).hexdigest() == REAL_SHA256[name]


REAL_SHA256 = {
    OFFLINE: "d778ba07a43b8b69f86095ac1211b57e9270415eb0e66862f155ba985e02d118",
    SERVER: "36629989e5d7585fafd8153252094730dbf5b87accabbdd4d1e88a33090b586e",
    SERVER_V50: "978a9643253e18dd3210a7c047397170dcea7187892516b4d9cf8330a99fc233",
}


def test_real_v50_server_summary_8xmi325x(xfid_cli, fixtures):
    # the v5.0 results (loadgen 5.0.15): `TTFT/TPOT Early Stopping Result:` blocks and a
    # sample_concatenate_permutation WARNING in the parameters; tokens/s printed twice
    recs = rows(xfid_cli, fixtures / DIR / SERVER_V50)
    t = table(recs)
    assert len(recs) == 30 and {r["target"] for r in recs} == {"mi325x"}
    assert t[("throughput_samples", "mean")] == 103.83 and t[("throughput_tokens", "mean")] == 30724.51
    assert t[("mlperf:scheduled_samples_per_second", "mean")] == 104.31
    # exact: the correctly rounded doubles of the decimals in seconds
    assert [t[("e2e_latency", s)] for s in ("min", "max", "mean")] == [0.840725113, 175.333161942, 47.720313348]
    assert t[("e2e_latency", "p99.9")] == pytest.approx(169.463758105, rel=1e-15)
    assert t[("ttft", "mean")] == pytest.approx(1.060314084, rel=1e-15)
    assert t[("ttft", "p99")] == pytest.approx(1.936541021, rel=1e-15)
    assert t[("tpot", "p99")] == pytest.approx(0.199404544, rel=1e-15)
    tok = next(r for r in recs if r["metric"] == "throughput_tokens")
    assert tok["source_loc"] == "line 8: Completed tokens per second" and tok["flags"] is None
    cfg = json.loads(tok["config"])
    assert cfg["scenario"] == "Server" and cfg["result"] == "VALID" and cfg["system"] == "8xMI325X_2xEPYC_9575F"
    assert cfg["test_parameters"]["target_qps"] == 104.2  # the WARNING lines among them are not parameters
    assert cfg["test_parameters"]["performance_sample_count"] == 24576


def test_real_offline_summary(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / OFFLINE)
    t = table(recs)
    assert t.pop(("throughput_samples", "mean")) == 92.1544
    assert t.pop(("throughput_tokens", "mean")) == 27803.9
    exp = dict(zip([("e2e_latency", s) for s in ("min", "max", "mean", *PCTS)],
                   ns(2641134983966, 2666829394561, 2653990953659, 2653473271079, 2666658923351, 2666744119966,
                      2666778260890, 2666812360394, 2666827686961), strict=True))
    assert t == pytest.approx(exp, rel=1e-15)
    r = recs[0]
    assert {x["target"] for x in recs} == {"mi300x"} and {x["workload"] for x in recs} == {"llama2-70b-99/offline"}
    assert {x["hardware"] for x in recs} == {"8xMI300X_2xEPYC_9575F"} and {x["flags"] for x in recs} == {None}
    cfg = json.loads(r["config"])
    assert (cfg["scenario"], cfg["mode"], cfg["sut_name"], cfg["result"]) == ("Offline", "PerformanceOnly", "PySUT",
                                                                               "VALID")
    assert cfg["checks"] == {"Min duration satisfied": "Yes", "Min queries satisfied": "Yes",
                             "Early stopping satisfied": "Yes"}
    p = cfg["test_parameters"]
    assert p["samples_per_query"] == 245520 and p["target_qps"] == 93 and p["ttft_latency_ns"] == 2000000000
    assert p["min_duration_ms"] == 2400000 and p["qsl_rng_seed"] == 1780908523862526354
    assert p["performance_sample_count"] == 24576 and len(p) == 20
    locs = {(x["metric"], x["stat"]): x["source_loc"] for x in recs}
    assert locs[("throughput_samples", "mean")] == "line 7: Samples per second"
    assert locs[("e2e_latency", "p99.9")] == "line 25: 99.90 percentile latency (ns)"


def test_real_server_summary(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / SERVER)
    t = table(recs)
    assert t.pop(("throughput_samples", "mean")) == 81.68
    assert t.pop(("throughput_tokens", "mean")) == 24593.77  # written twice in the file, kept once
    assert t.pop(("mlperf:scheduled_samples_per_second", "mean")) == 83.90
    stats = ("min", "max", "mean", *PCTS)
    exp = {}
    exp.update(zip([("e2e_latency", s) for s in stats],
                   ns(980187992, 165057127340, 43579602295, 38401775522, 77996405844, 95155568225, 107516926392,
                      136069232834, 159705402675), strict=True))
    exp.update(zip([("ttft", s) for s in stats],
                   ns(37578735, 3267024914, 918456323, 875073063, 1449459253, 1588066947, 1683899620, 1914647645,
                      2562462764), strict=True))
    exp.update(zip([("tpot", s) for s in stats],
                   ns(30262518, 3298049084, 144594078, 151044504, 163835875, 169650352, 175094669, 193380124,
                      283861040), strict=True))
    assert t == pytest.approx(exp, rel=1e-15)
    cfg = json.loads(recs[0]["config"])
    assert (cfg["scenario"], cfg["result"]) == ("Server", "VALID")
    assert cfg["checks"]["Performance constraints satisfied"] == "Yes"
    assert cfg["test_parameters"]["target_qps"] == 83.5 and cfg["test_parameters"]["min_query_count"] == 100
    assert {x["workload"] for x in recs} == {"llama2-70b-99.9/server"}
    assert {x["run"] for x in recs} == {"mlperf-v5.0-amd-8xmi300x"}


def test_detail_log_invalid_is_kept_and_flagged(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / DETAIL)
    t = table(recs)
    assert len(recs) == 30
    assert t[("throughput_samples", "mean")] == 14.2037
    assert t[("mlperf:scheduled_samples_per_second", "mean")] == 14.5118
    assert t[("throughput_tokens", "mean")] == 4175.93
    assert t[("e2e_latency", "p99.9")] == pytest.approx(95.512300417)
    assert t[("ttft", "p99")] == pytest.approx(4.611209034)
    assert t[("tpot", "p50")] == pytest.approx(0.098102334)
    assert t[("tpot", "mean")] == pytest.approx(0.104551872)
    assert {r["flags"] for r in recs} == {"invalid"} and "invalid" in FLAG_NO_REFERENCE
    r = next(x for x in recs if x["metric"] == "ttft" and x["stat"] == "p99")
    assert r["source_loc"] == "line 36: result_first_token_99.00_percentile_latency_ns"
    assert r["software"] == "mlperf loadgen 5.1.0 @ 2f8e2b1c4a" and r["timestamp"] == "2026-03-03T09:14:07Z"
    cfg = json.loads(r["config"])
    assert cfg["result"] == "INVALID" and cfg["invalid_reason"].startswith("Reduce target QPS")
    assert (cfg["scenario"], cfg["mode"], cfg["query_count"]) == ("Server", "PerformanceOnly", 9573)


def test_system_from_submission_path(xfid_cli, fixtures, tmp_path):
    d = tmp_path / "closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99/Offline/performance/run_1"
    d.mkdir(parents=True)
    (d / "mlperf_log_summary.txt").write_bytes((fixtures / DIR / OFFLINE).read_bytes())
    r = xfid_cli("ingest", d / "mlperf_log_summary.txt", "--target", "mi300x", "--workload", "llama2-70b-99/offline")
    assert r.exit_code == 0, r.output
    recs = [json.loads(x) for x in xfid_cli("export").output.splitlines()]
    assert {x["hardware"] for x in recs} == {"8xMI300X_2xEPYC_9575F"}


def test_sniff(fixtures):
    for name in (OFFLINE, SERVER, DETAIL):
        assert detect(fixtures / DIR / name) is MlperfAdapter


BANNER = "================================================\nMLPerf Results Summary\n" \
         "================================================\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (BANNER + "SUT name : PySUT\nScenario : Offline\nMode     : PerformanceOnly\nSamples per sec",
         "no 'Scenario' or 'Result is' line"),
        ("MLPerf Summary\nScenario : Offline\n", "line 1: not an MLPerf loadgen summary"),
        (BANNER + "Scenario : Offline\nSamples per second: fast\nResult is : VALID\n",
         "line 5: 'Samples per second' must be a number, got 'fast'"),
        (BANNER + "Scenario : Offline\nSamples per second: 1.0\nResult is : MAYBE\n",
         "line 6: 'Result is' must be VALID or INVALID, got 'MAYBE'"),
        (':::MLLOG {"key": "result_validity", "value": "VALID"}\n:::MLLOG {"key": "result_min_lat',
         "line 2: not valid JSON after ':::MLLOG'"),
        (':::MLLOG {"key": "result_validity", "value": "VALID"}\n:::MLLOG {"key": "result_min_latency_ns", '
         '"value": "x"}\n', "line 2: 'result_min_latency_ns' must be a number"),
        (':::MLLOG {"key": "result_validity", "value": "VALID"}\nresult_min_latency_ns 5\n',
         "line 2: expected a ':::MLLOG {...}' line"),
        (':::MLLOG {"key": "result_min_latency_ns", "value": 5}\n', "no result_validity event"),
        ('{"request_throughput": 1.0, "completed": 3}', "line 1: not an MLPerf loadgen summary"),
    ],
)
def test_bad_input(xfid_cli, tmp_path, snapshot, fixtures, content, message):
    assert xfid_cli("ingest", fixtures / DIR / OFFLINE).exit_code == 0
    f = tmp_path / "bad.txt"
    f.write_text(content)
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "mlperf", "--target", "mi300x", "--workload", "w")
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert snapshot(xfid_cli.store) == before
