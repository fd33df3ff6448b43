"""nsys adapter: kernel summaries, per-launch traces (streamed), exact lines, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from xfid.adapters import detect, nvcsv, sniff_all
from xfid.adapters.base import ReadContext
from xfid.adapters.nsys import NsysAdapter

NSYS = Path(__file__).resolve().parent.parent / "fixtures/measured/nsys"
CUT = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
AMP = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn"
HTOD = "[CUDA memcpy Host-to-Device]"
CTX = ("--target", "h100-sxm", "--workload", "w")
TRACE_HEADER = ("Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),"
                "Bytes (MB),Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name")


def rows(xfid_cli, path, *args):
    return xfid_cli.ingest_export(path, *args)


def pick(recs, op, metric, stat="value", line=None):
    hits = [r for r in recs if r["op"] == op and r["metric"] == metric and r["stat"] == stat
            and (line is None or r["source_loc"] == line)]
    assert len(hits) == 1, (op, metric, stat, hits)
    return hits[0]


def test_kern_sum_stats_with_instances(xfid_cli):
    recs, _ = rows(xfid_cli, NSYS / "h100_decode_kern_sum.csv")
    assert len(recs) == 35 and {r["target"] for r in recs} == {"h100-sxm"}
    assert {r["stat"] for r in recs if r["metric"] == "latency"} == {"sum", "mean", "median", "min", "max", "std"}
    mean = pick(recs, CUT, "latency", "mean")
    assert mean["value"] == pytest.approx(694612.8e-9) and mean["unit"] == "s"
    assert mean["n_samples"] == 512 and mean["source_loc"] == "line 4" and mean["hardware"] is None
    assert mean["config"] is None and mean["software"] == "nsys 2024.5.1 stats cuda_gpu_kern_sum"
    assert pick(recs, CUT, "latency", "median")["value"] == pytest.approx(694560e-9)
    assert pick(recs, CUT, "latency", "min")["value"] == pytest.approx(692544e-9)
    assert pick(recs, CUT, "latency", "max")["value"] == pytest.approx(701216e-9)
    assert pick(recs, CUT, "latency", "std")["value"] == pytest.approx(1220.4e-9)
    assert pick(recs, CUT, "latency", "sum")["value"] == pytest.approx(0.355641754)
    share = pick(recs, CUT, "nsys:time_fraction")
    assert share["value"] == pytest.approx(0.489) and share["unit"] == "ratio" and share["n_samples"] is None
    assert pick(recs, AMP, "latency", "mean")["n_samples"] == 2560
    elt = [r for r in recs if r["op"].startswith("void at::native::(anonymous namespace)::elementwise_kernel<128, 2,")]
    assert len(elt) == 7 and elt[0]["op"].endswith("::[lambda(int) (instance 1)]>(int, T3)")


def test_gpukernsum_2022_grid_and_block(xfid_cli):
    recs, _ = rows(xfid_cli, NSYS / "a100_gpukernsum_2022.4.csv")
    assert {r["target"] for r in recs} == {"a100-sxm"} and len(recs) == 28
    big = pick(recs, AMP, "latency", "mean", "line 4")
    small = pick(recs, AMP, "latency", "mean", "line 5")
    assert big["value"] == pytest.approx(118240.1e-9) and small["value"] == pytest.approx(61233.7e-9)
    assert json.loads(big["config"]) == {"grid": "132,1,1", "block": "256,1,1"}
    assert big["software"] == "nsys 2022.4.2 stats gpukernsum"
    assert json.loads(small["config"])["grid"] == "66,1,1"


def test_gpu_trace_one_latency_per_launch(xfid_cli):
    recs, out = rows(xfid_cli, NSYS / "h100_decode_gpu_trace.csv")
    assert sum(r["metric"] == "latency" for r in recs) == 15
    assert {r["stat"] for r in recs} == {"value"} and {r["n_samples"] for r in recs} == {None}
    h2d = pick(recs, HTOD, "latency")
    assert h2d["value"] == pytest.approx(1312448e-9) and h2d["source_loc"] == "line 4"
    assert h2d["hardware"] == "NVIDIA H100 80GB HBM3 (0)" and h2d["software"] == "nsys 2024.5.1 stats cuda_gpu_trace"
    assert json.loads(h2d["config"]) == {"src_mem": "Pageable", "dst_mem": "Device"}
    assert pick(recs, HTOD, "bytes")["value"] == pytest.approx(16.777e6)
    bw = pick(recs, HTOD, "bandwidth")
    assert bw["value"] == pytest.approx(12783.104e6) and bw["unit"] == "B/s" and bw["source_loc"] == "line 4"
    assert json.loads(pick(recs, "[CUDA memset]", "bytes")["config"]) == {"dst_mem": "Device"}
    amp = pick(recs, AMP, "latency", line="line 7")
    assert amp["value"] == pytest.approx(117661e-9)
    assert json.loads(amp["config"]) == {"grid": "132,1,1", "block": "256,1,1"}
    assert json.loads(pick(recs, AMP, "latency", line="line 15")["config"])["green_ctx"] == "2"
    assert "metrics: bandwidth 3, bytes 3, latency 15" in out


def test_old_gputrace_without_greenctx_mbps(xfid_cli):
    recs, _ = rows(xfid_cli, NSYS / "a100_gputrace_2022.4.csv")
    assert {r["target"] for r in recs} == {"a100-sxm"}
    assert pick(recs, HTOD, "bandwidth")["value"] == pytest.approx(12783.104e6)
    rms = [r for r in recs if r["op"].startswith("void vllm::rms_norm_kernel") and r["source_loc"] == "line 6"]
    assert rms[0]["value"] == pytest.approx(3174e-9) and rms[0]["hardware"] == "NVIDIA A100-SXM4-80GB (0)"
    assert json.loads(rms[0]["config"]) == {"grid": "8,1,1", "block": "1024,1,1"}
    assert rms[0]["software"] == "nsys 2022.4.2 stats gputrace"
    assert all("green_ctx" not in (r["config"] or "") for r in recs)


def test_directory_ingest_with_sidecar(xfid_cli):
    r = xfid_cli("ingest", NSYS)
    assert r.exit_code == 0, r.output
    assert "411 new rows from 12 file(s)" in r.output


def test_cuda_api_sum_call_times(xfid_cli):
    recs, _ = rows(xfid_cli, NSYS / "h100_decode_cuda_api_sum.csv")
    assert len(recs) == 42 and {r["software"] for r in recs} == {"nsys 2024.5.1 stats cuda_api_sum"}
    sync = pick(recs, "cudaStreamSynchronize", "latency", "mean")
    assert sync["value"] == pytest.approx(521450.8e-9, rel=1e-15) and sync["unit"] == "s"
    assert sync["n_samples"] == 2310 and sync["source_loc"] == "line 3"
    assert pick(recs, "cudaLaunchKernel", "latency", "sum")["value"] == pytest.approx(0.418880230, rel=1e-15)
    assert pick(recs, "cudaLaunchKernel", "latency", "median")["n_samples"] == 41472
    assert pick(recs, "cudaMalloc", "latency", "max")["value"] == pytest.approx(38301772e-9, rel=1e-15)
    assert pick(recs, "cudaGraphLaunch", "nsys:time_fraction")["value"] == pytest.approx(0.098, rel=1e-15)


def test_nvtx_and_memory_summaries(xfid_cli):
    recs, _ = rows(xfid_cli, NSYS / "h100_decode_nvtx_sum.csv")
    step = pick(recs, ":decode_step", "latency", "mean")
    assert step["value"] == pytest.approx(0.230150418, rel=1e-15) and step["n_samples"] == 8
    assert json.loads(step["config"]) == {"range_style": "PushPop"}
    assert step["software"] == "nsys stats nvtx_sum"  # from the file name: no preamble
    assert json.loads(pick(recs, "warmup", "latency", "sum")["config"]) == {"range_style": "StartEnd"}
    recs, _ = rows(xfid_cli, NSYS / "h100_decode_cuda_gpu_mem_time_sum.csv")
    assert pick(recs, HTOD, "latency", "mean")["value"] == pytest.approx(39142.5e-9, rel=1e-15)
    recs, _ = rows(xfid_cli, NSYS / "h100_decode_cuda_gpu_mem_size_sum.csv")
    size = [r for r in recs if r["software"] == "nsys stats cuda_gpu_mem_size_sum"]
    assert len(size) == 12 and {r["metric"] for r in size} == {"bytes"}  # no Time (%) column
    total = pick(size, HTOD, "bytes", "sum")
    assert total["value"] == pytest.approx(6291.456e6, rel=1e-15) and total["unit"] == "B"
    assert total["n_samples"] == 1536


def test_trace_columns_not_read_are_listed(xfid_cli):
    _, out = rows(xfid_cli, NSYS / "h100_decode_gpu_trace.csv")
    assert ("keys not read (skipped): column Start (ns), column CorrId, column Reg/Trd, column StcSMem (MB), "
            "column DymSMem (MB), column Ctx, column Strm") in out


def test_console_banner_names_the_report(xfid_cli, tmp_path):
    # `nsys stats -q --report cuda_api_sum --format csv r.nsys-rep > f` on the console prints a banner
    f = tmp_path / "api.csv"
    f.write_text("\n ** CUDA API Summary (cuda_api_sum):\n\n"
                 "Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
                 "95.5,88330,1,88330.0,88330.0,88330,88330,0.0,cudaLaunchKernel\n")
    recs, _ = rows(xfid_cli, f, *CTX)
    k = pick(recs, "cudaLaunchKernel", "latency", "sum")
    assert k["value"] == 88330e-9 and k["software"] == "nsys stats cuda_api_sum" and k["source_loc"] == "line 5"


def test_report_skipped_by_nsys_after_a_notice(xfid_cli, tmp_path):
    # what `nsys stats` writes when the report has no data: an indented NOTICE continuation,
    # a Processing line and SKIPPED (no header): the error quotes the tool, not the NOTICE
    f = tmp_path / "run_cuda_api_sum.csv"
    f.write_text("\nNOTICE: Existing SQLite export found: r.sqlite\n"
                 "        It is assumed file was previously exported from: r.nsys-rep\n"
                 "        Consider using --force-export=true if needed.\n\n"
                 "Processing [r.sqlite] with [/opt/nsight-systems/2025.1.1/host-linux-armv8/reports/cuda_api_sum.py]... \n"
                 "SKIPPED: r.sqlite does not contain CUDA trace data.\n\n")
    r = xfid_cli("ingest", f, "--adapter", "nsys", *CTX)
    assert r.exit_code == 2, r.output
    assert ("line 7: the file ends before the nsys stats CSV header (the tool says 'SKIPPED: r.sqlite does not "
            "contain CUDA trace data.')") in r.output


def _trace_file(path: Path, n: int, blank_every: int = 0) -> dict[int, int]:
    """A trace whose Duration encodes the physical line; returns {line: duration}."""
    lines = ["Generating SQLite file r.sqlite from r.nsys-rep", TRACE_HEADER]
    want = {}
    for i in range(n):
        if blank_every and i % blank_every == blank_every - 1:
            lines.append("")
        line = len(lines) + 1
        want[line] = line * 10
        lines.append(f"{i},{line * 10},{i},1,1,1,128,1,1,20,0.000,0.000,,,,,GPU (0),1,,7,\"k<{i % 3}, 2>(int)\"")
    path.write_text("\n".join(lines) + "\n\n")
    return want


def test_trace_streams_batches_with_exact_lines(tmp_path, monkeypatch):
    f = tmp_path / "t.csv"
    want = _trace_file(f, 5000, blank_every=997)
    monkeypatch.setattr(nvcsv, "BLOCK_BYTES", 16 << 10)
    ctx = ReadContext(path=f, target="h100-sxm", workload="w")
    tables = [t for t in NsysAdapter().read(ctx) if isinstance(t, pa.Table)]
    assert len(tables) > 10  # streamed, never one table
    got = {}
    for t in tables:
        for loc, v in zip(t.column("source_loc").to_pylist(), t.column("value").to_pylist(), strict=True):
            got[int(loc.split()[1])] = v
    assert got == want
    assert set(tables[0].column("op").to_pylist()) == {"k<0, 2>(int)", "k<1, 2>(int)", "k<2, 2>(int)"}


@pytest.mark.parametrize("name", sorted(p.name for p in NSYS.glob("*.csv")))
def test_sniff_only_nsys(name):
    assert sniff_all(NSYS / name) == ["nsys"]
    assert detect(NSYS / name) is NsysAdapter


def test_sniff_summaries_not_ncu():
    assert NsysAdapter.sniff(Path("x.csv"), b"Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Name\n")
    assert NsysAdapter.sniff(Path("x.csv"), b"Time (%),Total Time (ns),Instances,Avg (ns),Style,Range\n")
    assert NsysAdapter.sniff(Path("x.csv"), b"Total (MB),Count,Avg (MB),Operation\n")
    assert not NsysAdapter.sniff(Path("x.csv"), b"Time (%),Total Time (ns),Avg (ns),Name\n")  # no count column
    assert not NsysAdapter.sniff(Path("x.csv"), b'"ID","Process ID","Process Name","Host Name","Kernel Name"\n')


def _lines(text: str, n: int) -> str:
    return "".join(text.splitlines(keepends=True)[:n])


TRACE_BAD = [
    ("truncated", lambda t: _lines(t, 9) + t.splitlines(keepends=True)[9][:40],
     "line 10: expected 21 fields, got 11 (every row needs one field per header column; the file may be truncated)"),
    ("cut in a quoted name", lambda t: t[: t.index('"void flash_fwd') + 30],
     "line 8: the file ends inside a quoted field (truncated?)"),
    ("preamble only", lambda t: _lines(t, 2), "line 2: the file ends before the nsys stats CSV header (truncated?)"),
    ("header only", lambda t: _lines(t, 3), "line 3: no trace rows after the header (truncated?)"),
    ("wrong header", lambda t: t.replace("Start (ns),Duration (ns),CorrId", "Begin (ns),Duration (ns),CorrId", 1),
     "line 3: not a nsys stats CSV header: 'Begin (ns),Duration (ns),CorrId"),
    ("field count", lambda t: t.replace(",Pageable,Device,", ",Pageable,Device,extra,", 1),
     "line 4: expected 21 fields, got 22"),
    ("non-numeric", lambda t: t.replace("1062528277,117661,", "1062528277,117k61,", 1),
     "line 7: 'Duration (ns)' value '117k61' is not a number"),
    ("second report", lambda t: t + "Processing [r.sqlite] with [/opt/nvidia/reports/cuda_gpu_kern_sum.py]... \n",
     "line 19: expected 21 fields, got 1 (one report per file: write them with `nsys stats -f csv -o PREFIX`)"),
    ("skipped report", lambda t: _lines(t, 2) + "SKIPPED: /tmp/nsys/decode_bs8.sqlite does not contain CUDA kernel data.\n",
     "the file ends before the nsys stats CSV header (the tool says 'SKIPPED: /tmp/nsys/decode_bs8.sqlite does not"),
]
SUM_BAD = [
    ("truncated", lambda t: _lines(t, 5) + t.splitlines(keepends=True)[5][:20], "line 6: expected 9 fields, got 4"),
    ("cut in a quoted name", lambda t: t[: t.index('"ampere') + 10], "line 5: the file ends inside a quoted field"),
    ("field count", lambda t: t.replace("5.9,42882253,1024,", "5.9,42882253,", 1), "line 6: expected 9 fields, got 8"),
    ("non-numeric", lambda t: t.replace(",118213.4,", ",fast,", 1), "line 5: 'Avg (ns)' value 'fast' is not a number"),
    ("instances", lambda t: t.replace("41.6,302626304,2560,", "41.6,302626304,25.5,", 1),
     "line 5: 'Instances' must be a whole number, got '25.5'"),
    ("time unit", lambda t: t.replace("Total Time (ns)", "Total Time (MB)", 1),
     "line 3: 'Total Time' unit 'MB' is not a time unit"),
]


@pytest.mark.parametrize(("fixture", "case", "edit", "message"),
                         [("h100_decode_gpu_trace.csv", *b) for b in TRACE_BAD]
                         + [("h100_decode_kern_sum.csv", *b) for b in SUM_BAD],
                         ids=[f"trace-{b[0]}" for b in TRACE_BAD] + [f"sum-{b[0]}" for b in SUM_BAD])
def test_bad_nsys_input(xfid_cli, tmp_path, snapshot, fixture, case, edit, message):
    assert xfid_cli("ingest", NSYS / "a100_gputrace_2022.4.csv").exit_code == 0
    f = tmp_path / "bad.csv"
    f.write_text(edit((NSYS / fixture).read_text()))
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "nsys", *CTX)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}"), r.output
    assert message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


@pytest.mark.parametrize(("other", "message"), [
    ("ncu/h100_decode_long.csv", 'line 7: not a nsys stats CSV header: \'"ID","Process ID"'),
    ("vllm/h100_llama3-8b_decode_bs8.json", "line 1: not a nsys stats CSV header: '{'"),
])
def test_other_format_with_explicit_adapter(xfid_cli, snapshot, other, message):
    assert xfid_cli("ingest", NSYS / "a100_gputrace_2022.4.csv").exit_code == 0
    f = NSYS.parent / other
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "nsys", *CTX)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}, {message}"), r.output
    assert snapshot(xfid_cli.store) == before


def test_target_required(xfid_cli, tmp_path):
    f = tmp_path / "t.csv"
    f.write_bytes((NSYS / "h100_decode_gpu_trace.csv").read_bytes())
    r = xfid_cli("ingest", f)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}: no target: Nsight Systems CSVs do not name")


def test_real_kern_sum_rtx4090_nsys_2024_6_2(xfid_cli):
    # Public files (see the README): two `nsys stats --report cuda_gpu_kern_sum --format csv` runs of
    # nsys 2024.6.2 on an RTX 4090, header and rows only. Values read by hand from the files.
    recs, _ = rows(xfid_cli, NSYS / "rtx4090_dotllm_prefill476_cuda_gpu_kern_sum_2024.6.2.csv")
    assert len(recs) == 15 * 7 and {r["target"] for r in recs} == {"rtx4090"}
    assert {r["workload"] for r in recs} == {"llama3.1-8b-q4km/prefill/476tok"}
    fa = "flash_attention_prefill_f16"
    total = pick(recs, fa, "latency", "sum")
    assert total["value"] == 0.099385786 and total["unit"] == "s" and total["source_loc"] == "line 2"
    assert total["n_samples"] == 32 and total["software"] == "nsys stats cuda_gpu_kern_sum"
    assert pick(recs, fa, "latency", "mean")["value"] == pytest.approx(3105805.8e-9)
    assert pick(recs, fa, "latency", "max")["value"] == pytest.approx(3777790e-9)
    assert pick(recs, fa, "nsys:time_fraction")["value"] == pytest.approx(0.501)
    gemv = pick(recs, "quantized_gemv_q6_k", "latency", "std")
    assert gemv["value"] == 0.0 and gemv["n_samples"] == 1 and gemv["source_loc"] == "line 7"

    recs, _ = rows(xfid_cli, NSYS / "rtx4090_dotllm_prefill2091_cuda_gpu_kern_sum_2024.6.2.csv")
    recs = [r for r in recs if r["workload"] == "llama3.1-8b-q4km/prefill/2091tok"]
    assert len(recs) == 13 * 7
    assert pick(recs, fa, "latency", "sum")["value"] == 1.707204307
    gemm = pick(recs, "ampere_fp16_s1688gemm_fp16_128x64_sliced1x2_ldg8_f2f_tn", "latency", "median")
    assert gemm["value"] == pytest.approx(444281.0e-9) and gemm["n_samples"] == 224 and gemm["source_loc"] == "line 3"


def test_real_cuda_api_sum_hpc_sdk_25_11(xfid_cli):
    # Public files (see the README): `nsys stats --report cuda_api_sum --format csv` stdout of the
    # nsys in NVIDIA HPC SDK 25.11, two blank lines after the rows. Values read by hand.
    recs, _ = rows(xfid_cli, NSYS / "cc80_rosenna_embedded_cuda_api_sum_hpcsdk25.11.csv")
    assert len(recs) == 2 * 7 and {r["target"] for r in recs} == {"unknown-gpu-sm80"}
    launch = pick(recs, "cudaLaunchKernel", "latency", "sum")
    assert launch["value"] == 0.00008833 and launch["n_samples"] == 1 and launch["source_loc"] == "line 2"
    assert pick(recs, "cuKernelGetName", "latency", "max")["value"] == 0.000004115
    assert pick(recs, "cudaLaunchKernel", "nsys:time_fraction")["value"] == pytest.approx(0.955)

    recs, _ = rows(xfid_cli, NSYS / "cc80_rosenna_file_loaded_cuda_api_sum_hpcsdk25.11.csv")
    recs = [r for r in recs if r["workload"] == "rosenna/gemm_big/infer_batch/file_loaded"]
    assert len(recs) == 2 * 7
    assert pick(recs, "cudaLaunchKernel", "latency", "mean")["value"] == 0.000127214
    assert pick(recs, "cuKernelGetName", "latency", "sum")["source_loc"] == "line 3"
