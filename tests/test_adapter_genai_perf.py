"""genai-perf adapter: JSON metric objects and telemetry, the sectioned CSV, tokens/J, bad input."""

from __future__ import annotations

import json

import pytest

from xfid.adapters import detect
from xfid.adapters.genai_perf import GenaiPerfAdapter

DIR = "measured/genai-perf"
JSON = "h100_llama3-8b_c8_genai_perf.json"
CSV = "h200x2_llama3-70b_c64_genai_perf.csv"


def rows(xfid_cli, path, *args):
    return xfid_cli.ingest_export(path, *args)[0]


def pick(recs, metric, stat="value", op=""):
    hits = [r for r in recs if r["metric"] == metric and r["stat"] == stat and r["op"] == op]
    assert len(hits) == 1, (metric, stat, op, hits)
    return hits[0]


def test_json_metrics(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / JSON)
    ttft = pick(recs, "ttft", "mean")
    assert ttft["value"] == pytest.approx(0.09844) and ttft["unit"] == "s"
    assert ttft["source_loc"] == "$.time_to_first_token.avg" and ttft["run"] == "example-genai-perf-c8"
    assert pick(recs, "ttft", "p1")["value"] == pytest.approx(0.0442)
    assert pick(recs, "ttft", "p99")["value"] == pytest.approx(0.2519)
    assert pick(recs, "ttft", "std")["value"] == pytest.approx(0.03715)
    assert pick(recs, "itl", "p50")["value"] == pytest.approx(0.008)
    assert pick(recs, "e2e_latency", "max")["value"] == pytest.approx(2.8019)
    assert pick(recs, "throughput_tokens", "mean")["value"] == 947.11
    assert pick(recs, "throughput_requests", "mean")["value"] == 3.7142
    assert pick(recs, "requests_completed")["value"] == 200
    assert pick(recs, "genai_perf:time_to_second_token", "mean")["value"] == pytest.approx(0.00891)
    assert pick(recs, "genai_perf:output_token_throughput_per_user", "p90")["value"] == 134.6
    assert pick(recs, "output_tokens", "mean")["value"] == 255.0
    cfg = json.loads(ttft["config"])
    assert cfg["model_names"] == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert cfg["endpoint.type"] == "chat" and cfg["perf_analyzer.stimulus.concurrency"] == 8
    assert cfg["input.synthetic_tokens.mean"] == 550


def test_json_telemetry_energy_and_tokens_per_joule(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / JSON)
    p = pick(recs, "power", "mean", op="gpu0")
    assert p["value"] == 512.36 and p["source_loc"] == "$.telemetry_stats.gpu_power_usage.gpu0.avg"
    assert pick(recs, "power", "p99", op="gpu0")["value"] == 684.5
    assert pick(recs, "utilization", "mean", op="gpu0")["value"] == pytest.approx(0.814)
    assert pick(recs, "memory_used", "max", op="gpu0")["value"] == pytest.approx(76.95e9)
    assert pick(recs, "genai_perf:gpu_power_limit", "mean", op="gpu0")["value"] == 700.0
    e = pick(recs, "energy", op="gpu0")
    assert e["value"] == pytest.approx((1.86431 - 1.80125) * 1e6) and e["unit"] == "J"
    assert e["source_loc"] == "$.telemetry_stats.energy_consumption.gpu0: max - min"
    tpj = pick(recs, "tokens_per_joule")
    assert tpj["value"] == pytest.approx(947.11 / 512.36)


def test_csv_sections(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / CSV)
    assert {r["target"] for r in recs} == {"h200-sxm"}
    ttft = pick(recs, "ttft", "mean")
    assert ttft["value"] == pytest.approx(1.21248) and ttft["source_loc"] == "line 2, Time To First Token (ms), avg"
    assert pick(recs, "ttft", "max")["value"] == pytest.approx(2.95461)
    assert pick(recs, "e2e_latency", "p25")["value"] == pytest.approx(13.48071)
    assert pick(recs, "input_tokens", "mean")["value"] == 2048.0
    assert pick(recs, "throughput_tokens", "mean")["value"] == 2205.87
    assert pick(recs, "throughput_requests", "mean")["value"] == 4.32
    assert pick(recs, "requests_completed")["value"] == 512
    assert pick(recs, "power", "mean", op="gpu1")["value"] == 598.04
    assert pick(recs, "utilization", "p50", op="gpu0")["value"] == pytest.approx(0.96)
    assert pick(recs, "energy", op="gpu1")["value"] == pytest.approx((3.0459 - 2.9638) * 1e6)
    assert pick(recs, "tokens_per_joule")["value"] == pytest.approx(2205.87 / (601.22 + 598.04))


def test_sniff(fixtures):
    assert detect(fixtures / DIR / JSON) is GenaiPerfAdapter
    assert detect(fixtures / DIR / CSV) is GenaiPerfAdapter


CSV_HEAD = "Metric,avg,min,max,p99\n"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("t.csv", CSV_HEAD + "Time To First Token (ms),1.0,0.5,2.0,1.9\nRequest Latency (ms),3.0,2",
         "line 3: expected 5 fields like the header, got 3"),
        ("t.csv", "Metric,average,min\nTime To First Token (ms),1,2\n", "line 1: unknown column 'average'"),
        ("t.csv", CSV_HEAD + "Time To First Token (ms),1.0,0.5,2.0,1.9,7\n", "line 2: expected 5 fields"),
        ("t.csv", CSV_HEAD + "Time To First Token (ms),fast,0.5,2.0,1.9\n", "line 2, avg: 'fast' is not a number"),
        ("t.csv", CSV_HEAD + "Time To First Token,1.0,0.5,2.0,1.9\n", "line 2: metric label 'Time To First Token'"),
        ("t.csv", "Time To First Token (ms),1.0\n", "line 1: expected a 'Metric,...' header row"),
        ("t.json", '{"time_to_first_token": {"unit": "ms", "avg": "x"}}', "$.time_to_first_token.avg: 'avg' must be"),
        ("t.json", '{"time_to_first_token": {"avg": 1.0}}', "$.time_to_first_token: metric object has no 'unit'"),
        ("t.json", '{"time_to_first_token": {"unit": "ms", "av', "not valid JSON"),
        ("t.csv", "timestamp, index, power.draw [W]\n2026/03/01 00:00:00.000, 0, 1 W\n",
         "line 1: expected a 'Metric,...' header row"),
    ],
)
def test_bad_input(xfid_cli, tmp_path, snapshot, fixtures, name, content, message):
    assert xfid_cli("ingest", fixtures / DIR / CSV).exit_code == 0
    f = tmp_path / name
    f.write_text(content)
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "genai-perf", "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}") and message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


# --- real files (fixtures/measured/genai-perf/README.md gives their origin) -------------------
DOCS = "cloudai-docs_ai-dynamo_genai_perf.csv"
ISSUE = "perf-analyzer-issue393_c144_genai_perf.csv"


def test_real_csv_current_labels(xfid_cli, fixtures):
    """`Output Token Throughput (per sec)` is tokens/s; `1,146.31` is 1146.31; two tables."""
    recs, out = xfid_cli.ingest_export(fixtures / DIR / DOCS)
    assert "warning: line" not in out  # no adapter warning (the target warning is about the name)
    tput = pick(recs, "throughput_tokens", "mean")
    assert tput["value"] == 261.25 and tput["unit"] == "tokens/s"
    assert tput["source_loc"] == "line 10, Output Token Throughput (per sec), avg"
    rps = pick(recs, "throughput_requests", "mean")
    assert rps["value"] == 1.5 and rps["unit"] == "requests/s"
    n = pick(recs, "requests_completed")
    assert n["value"] == 40 and n["source_loc"] == "line 12, Request Count (count), avg"
    ttft = pick(recs, "ttft", "mean")
    assert ttft["value"] == pytest.approx(1.14631, rel=1e-15) and ttft["unit"] == "s"
    assert pick(recs, "ttft", "max")["value"] == pytest.approx(3.48523, rel=1e-15)
    assert pick(recs, "ttft", "p50")["value"] == pytest.approx(0.64007, rel=1e-15)
    assert pick(recs, "e2e_latency", "p99")["value"] == pytest.approx(9.43613, rel=1e-15)
    assert pick(recs, "itl", "p25")["value"] == pytest.approx(0.02904, rel=1e-15)
    t2 = pick(recs, "genai_perf:time_to_second_token", "min")  # a row xfid has no metric for
    assert t2["value"] == 0.0 and t2["unit"] == "s"
    assert pick(recs, "genai_perf:time_to_second_token", "p99")["value"] == pytest.approx(0.09612, rel=1e-15)
    assert pick(recs, "input_tokens", "mean")["value"] == 3000.05
    assert pick(recs, "output_tokens", "p75")["value"] == 177.0
    assert {r["target"] for r in recs} == {"unknown-gpu"} and {r["run"] for r in recs} == {"cloudai-docs-ai-dynamo"}
    assert len(recs) == 6 * 9 + 3


def test_real_csv_from_an_issue_thread(xfid_cli, fixtures):
    recs = rows(xfid_cli, fixtures / DIR / ISSUE)
    assert pick(recs, "ttft", "mean")["value"] == pytest.approx(32.6884, rel=1e-15)
    assert pick(recs, "ttft", "max")["value"] == pytest.approx(69.42764, rel=1e-15)
    assert pick(recs, "e2e_latency", "max")["value"] == pytest.approx(102.84843, rel=1e-15)
    assert pick(recs, "e2e_latency", "p90")["value"] == pytest.approx(93.74016, rel=1e-15)
    assert pick(recs, "input_tokens", "max")["value"] == 4001.0
    assert pick(recs, "throughput_tokens", "mean")["value"] == 410.43
    assert pick(recs, "throughput_requests", "mean")["value"] == 1.7
    assert pick(recs, "requests_completed")["value"] == 353


def test_real_csvs_sniffed(fixtures):
    assert detect(fixtures / DIR / DOCS) is GenaiPerfAdapter
    assert detect(fixtures / DIR / ISSUE) is GenaiPerfAdapter


def test_csv_rows_without_unit_and_unknown_rows(xfid_cli, tmp_path):
    """Older versions write `Output Sequence Length` and `Request Count` without a unit; CRLF rows."""
    f = tmp_path / "profile_export_genai_perf.csv"
    f.write_bytes(b"Metric,avg,min,max,p99\r\nTime To First Token (ns),2,1,3,3\r\n"
                  b"Output Sequence Length,4.5,3,6,6\r\nNum Input Token,3.5,3,4,4\r\n"
                  b"Time To Third Token (ms),1.5,1,2,2\r\n\r\nMetric,Value\r\n"
                  b"Output Token Throughput (per sec),\"1,900.00\"\r\nRequest Count,50.00\r\n")
    recs = rows(xfid_cli, f, "--target", "h100-sxm", "--workload", "w")
    assert pick(recs, "ttft", "mean")["value"] == pytest.approx(2e-9)
    assert pick(recs, "output_tokens", "max")["value"] == 6.0 and pick(recs, "output_tokens", "max")["unit"] == "tokens"
    assert pick(recs, "input_tokens", "mean")["value"] == 3.5
    assert pick(recs, "genai_perf:time_to_third_token", "p99")["value"] == pytest.approx(0.002)
    assert pick(recs, "throughput_tokens", "mean")["value"] == 1900.0
    assert pick(recs, "requests_completed")["value"] == 50


def test_json_keys_that_are_not_metrics_are_listed(xfid_cli, tmp_path):
    f = tmp_path / "profile_export_genai_perf.json"
    f.write_text(json.dumps({"genai_perf_version": "0.0.12", "status": {"ok": True},
                             "time_to_first_token": {"unit": "ms", "avg": 10.0, "p50": 9.0, "count": 3},
                             "request_throughput": {"unit": "per sec", "avg": 2.0}}))
    recs, out = xfid_cli.ingest_export(f, "--target", "h100-sxm", "--workload", "w")
    assert "keys not read (skipped): $.genai_perf_version, $.status, $.time_to_first_token.count" in out
    assert pick(recs, "ttft", "p50")["value"] == pytest.approx(0.009)
    assert pick(recs, "throughput_requests", "mean")["value"] == 2.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (CSV_HEAD + "Output Token Throughput (ms),1,1,1,1\n", "unit 'ms' (time) does not belong to metric 'throughput_tokens'"),
        (CSV_HEAD + "Inter Token Latency,1,1,1,1\n", "metric label 'Inter Token Latency' has no '(unit)'"),
    ],
)
def test_units_that_contradict_the_metric_still_fail(xfid_cli, tmp_path, content, message):
    f = tmp_path / "t.csv"
    f.write_text(content)
    r = xfid_cli("ingest", f, "--adapter", "genai-perf", "--target", "h100-sxm", "--workload", "w")
    assert r.exit_code == 2 and message in r.output, r.output


EGHAM_JSON = "egham7_c10_v0.0.15_genai_perf.json"
EGHAM_CSV = "egham7_c10_v0.0.15_genai_perf.csv"


def test_real_json_export(xfid_cli, fixtures):
    """genai-perf 0.0.15, non-streaming (TTFT = request latency, no ITL), no telemetry."""
    recs, out = xfid_cli.ingest_export(fixtures / DIR / EGHAM_JSON)
    assert "keys not read" not in out
    e2e = pick(recs, "e2e_latency", "mean")
    assert e2e["value"] == pytest.approx(9.611462467961537, rel=1e-15) and e2e["source_loc"] == "$.request_latency.avg"
    assert pick(recs, "e2e_latency", "p90")["value"] == pytest.approx(18.477152846999998, rel=1e-15)
    assert pick(recs, "e2e_latency", "std")["value"] == pytest.approx(5.002431460878968, rel=1e-15)
    assert pick(recs, "ttft", "min")["value"] == pytest.approx(3.3573297319999997, rel=1e-15)
    assert pick(recs, "throughput_requests", "mean")["value"] == 0.9143702288467201
    assert pick(recs, "throughput_tokens", "mean")["value"] == 408.8289965516585
    assert pick(recs, "requests_completed")["value"] == 26
    assert pick(recs, "output_tokens", "p5")["value"] == 187.25
    assert pick(recs, "input_tokens", "std")["value"] == 0.0
    assert not [r for r in recs if r["metric"] in ("itl", "power", "tokens_per_joule")]
    cfg = json.loads(e2e["config"])
    assert cfg["endpoint.type"] == "chat" and cfg["perf_analyzer.stimulus.concurrency"] == 10
    assert cfg["input.synthetic_tokens.mean"] == 550 and cfg["input.extra.max_tokens"] == 150


def test_real_csv_of_the_same_run_agrees_with_its_json(xfid_cli, fixtures):
    """The CSV (CRLF, two decimals, thousands separators) rounds the JSON's numbers."""
    csv_recs = rows(xfid_cli, fixtures / DIR / EGHAM_CSV)
    json_recs = [r for r in rows(xfid_cli, fixtures / DIR / EGHAM_JSON) if r["run"] == "egham7-medium-c10"]
    assert pick(csv_recs, "e2e_latency", "max")["value"] == pytest.approx(19.11876, rel=1e-15)
    assert pick(csv_recs, "requests_completed")["value"] == 26
    assert pick(csv_recs, "throughput_requests", "mean")["value"] == 0.91
    for metric, stat in [("e2e_latency", "mean"), ("e2e_latency", "p1"), ("output_tokens", "p75"),
                         ("throughput_tokens", "mean")]:
        a, b = pick(csv_recs, metric, stat)["value"], pick(json_recs, metric, stat)["value"]
        assert a == pytest.approx(b, abs=0.005 * (1e-3 if metric == "e2e_latency" else 1)), (metric, stat)
    assert not [r for r in csv_recs if r["metric"] == "ttft"]  # non-streaming: the CSV has no TTFT row
