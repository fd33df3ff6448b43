"""ncu adapter: long `--csv` and `--page raw` layouts, units, n/a, provenance, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfid.adapters import detect, sniff_all
from xfid.adapters.ncu import NcuAdapter

NCU = Path(__file__).resolve().parent.parent / "fixtures/measured/ncu"
CUT = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
AMP = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn"
ELT = ("void at::native::(anonymous namespace)::elementwise_kernel<128, 2, void at::native::gpu_kernel_impl"
       "<at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::"
       "MulFunctor<float>>>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)")
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
CTX = ("--target", "h100-sxm", "--workload", "w")


def rows(xfid_cli, path, *args):
    return xfid_cli.ingest_export(path, *args)


def pick(recs, op, metric, line=None):
    hits = [r for r in recs if r["op"] == op and r["metric"] == metric and (line is None or r["source_loc"] == line)]
    assert len(hits) == 1, (op, metric, hits)
    return hits[0]


def long_row(kid, name, section, metric, unit, value):
    return (f'"{kid}","1","python3","127.0.0.1","{name}","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0",'
            f'"{section}","{metric}","{unit}","{value}"')


def test_long_layout_fields_and_units(xfid_cli):
    recs, out = rows(xfid_cli, NCU / "h100_decode_long.csv")
    assert {r["target"] for r in recs} == {"h100-sxm"} and {r["fidelity"] for r in recs} == {"measured"}
    assert {r["workload"] for r in recs} == {"llama3-8b/decode/bs8/ctx2048/bf16"}
    assert len(recs) == 66 and {r["stat"] for r in recs} == {"value"}
    lat = pick(recs, CUT, "latency", "line 13")
    assert lat["value"] == pytest.approx(694.56e-6) and lat["unit"] == "s" and lat["n_samples"] is None
    assert lat["hardware"] == "device 0, CC 9.0" and lat["software"] == "ncu --csv"
    assert json.loads(lat["config"]) == {"device": "0", "cc": "9.0", "block_size": "(128, 1, 1)",
                                         "grid_size": "(16, 32, 1)"}
    assert pick(recs, CUT, "latency", "line 70")["value"] == pytest.approx(695.49e-6)  # second launch
    assert pick(recs, CUT, "cycles", "line 10")["value"] == 1215342
    assert pick(recs, CUT, "utilization", "line 17")["value"] == pytest.approx(0.8893)
    b = pick(recs, CUT, "bytes", "line 27")
    assert b["value"] == pytest.approx(213.91e6) and b["unit"] == "B" and json.loads(b["config"])["memory"] == "dram"
    assert pick(recs, AMP, "latency")["value"] == pytest.approx(1.21e-3)
    assert pick(recs, AMP, "bytes")["value"] == pytest.approx(1.02e9)
    l2 = pick(recs, AMP, "ncu:l2_cache_throughput")
    assert l2["value"] is None and l2["null_reason"] == "n/a in file"
    assert pick(recs, ELT, "latency")["value"] == pytest.approx(4832e-9)
    assert pick(recs, ELT, "bytes")["value"] == pytest.approx(12_582_910)
    util = pick(recs, ELT, "utilization")
    assert util["value"] is None and util["null_reason"] == "n/a in file"
    assert pick(recs, CUT, "ncu:threads", "line 25")["value"] == 65536
    assert pick(recs, CUT, "ncu:shared_memory_configuration_size")["value"] == pytest.approx(233_470)
    f = pick(recs, CUT, "ncu:dram_frequency", "line 8")
    assert f["value"] == pytest.approx(2.62e9) and f["unit"] == "Hz"
    assert pick(recs, CUT, "ncu:gpc__cycles_elapsed.avg", "line 28")["value"] == pytest.approx(1_214_977.38)
    assert "null values: 2 (n/a in file)" in out
    assert "skipped line 18: rule 'SOLBottleneck' (advice, not a measurement)" in out


def test_raw_page_units_row_display_name_and_dram_sum(xfid_cli):
    recs, out = rows(xfid_cli, NCU / "h100_prefill_raw.csv")
    assert len(recs) == 30 and {r["workload"] for r in recs} == {"llama3-8b/prefill/bs1/ctx2048/bf16"}
    lat = pick(recs, AMP, "latency")
    assert lat["value"] == pytest.approx(5297.66e-6) and lat["source_loc"] == "line 5"
    assert lat["hardware"] == "NVIDIA H100 80GB HBM3 (device 0, CC 9.0)" and lat["software"] == "ncu --csv --page raw"
    assert pick(recs, AMP, "cycles")["value"] == 9_271_040
    b = pick(recs, AMP, "bytes")
    assert b["value"] == pytest.approx((1834.22 + 96.47) * 1e6) and b["source_loc"] == "line 5"
    assert json.loads(b["config"])["derived"] == "dram__bytes_read.sum + dram__bytes_write.sum"
    assert pick(recs, AMP, "ncu:dram__bytes_read.sum")["value"] == pytest.approx(1834.22e6)
    assert pick(recs, AMP, "ncu:gpc__cycles_elapsed.avg.per_second")["value"] == pytest.approx(1.75e9)
    assert pick(recs, ELT, "ncu:launch__grid_size")["value"] == 16384
    fa = [r for r in recs if r["op"].startswith("void flash_fwd_kernel<") and r["metric"] == "utilization"]
    assert fa[0]["value"] is None and fa[0]["null_reason"] == "n/a in file" and fa[0]["source_loc"] == "line 6"
    assert "device__attribute_display_name" not in out  # used for `hardware`, not skipped


def test_old_version_without_device_columns(xfid_cli):
    recs, _ = rows(xfid_cli, NCU / "a100_ncu2020_long.csv")
    assert {r["target"] for r in recs} == {"a100-sxm"} and len(recs) == 16
    sg = pick(recs, "ampere_sgemm_128x64_nn", "latency")
    assert sg["value"] == pytest.approx(292.42e-6) and sg["hardware"] is None
    assert sg["config"] is None and sg["software"] == "ncu --csv"
    assert pick(recs, "ampere_sgemm_128x64_nn", "utilization")["value"] == pytest.approx(0.8177)  # "SM [%]"
    assert pick(recs, "ampere_sgemm_128x64_nn", "cycles")["value"] == 412_339
    assert pick(recs, "ampere_sgemm_128x64_nn", "ncu:sm_frequency")["value"] == pytest.approx(1.41e9)  # cycle/usecond
    fill = [r for r in recs if r["op"].startswith("void at::native::vectorized_elementwise_kernel<4,")]
    assert len(fill) == 8 and {r["op"] for r in fill} == {
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
        "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"}


def test_directory_ingest_with_sidecar(xfid_cli):
    r = xfid_cli("ingest", NCU)
    assert r.exit_code == 0, r.output
    assert "739 new rows from 5 file(s)" in r.output


def test_real_ncu_2025_trailing_comma_rows(xfid_cli):
    # superbench's cublaslt_ncu.log: metric rows carry 16 fields (15 + a trailing comma) under a
    # 20-column header, rule rows all 20; base units hz, ns, byte, cycle, %
    recs, out = rows(xfid_cli, NCU / "cublaslt_ncu.log")
    op = "cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_1x1x1_0_tnn_align4_1sm_bias_f16_relu_aux_scalemax"
    assert {r["op"] for r in recs} == {op} and len(recs) == 42
    lat = pick(recs, op, "latency")
    assert lat["value"] == pytest.approx(406240e-9, rel=1e-15) and lat["unit"] == "s" and lat["source_loc"] == "line 10"
    assert pick(recs, op, "cycles")["value"] == 508757
    assert pick(recs, op, "utilization")["value"] == pytest.approx(0.2359, rel=1e-15)
    f = pick(recs, op, "ncu:dram_frequency")
    assert f["value"] == 3995313115.40 and f["unit"] == "Hz" and f["source_loc"] == "line 5"
    assert pick(recs, op, "ncu:shared_memory_configuration_size")["value"] == 233472
    assert pick(recs, op, "ncu:registers_per_thread")["value"] == 168
    assert pick(recs, op, "ncu:achieved_occupancy")["value"] == pytest.approx(0.1553, rel=1e-15)
    cfg = json.loads(lat["config"])
    assert cfg == {"block_size": "(384, 1, 1)", "cc": "10.0", "device": "0", "grid_size": "(9, 32, 1)"}
    assert "skipped line 15: rule 'SOLBottleneck' (advice, not a measurement)" in out


def test_real_ncu_2020_kernel_time_column_and_program_output(xfid_cli):
    # XPlacer's nsight_bfs_graph4096.log (LLNL Lassen, V100, April 2020): the 12-column header with
    # "Kernel Time" and no Block/Grid/Device/CC, after 13 lines of program output and two ==PROF== lines;
    # 13 launches of two kernels, 52 rows each; units nsecond, cycle/second, byte/second, inst, warp, block
    recs, out = rows(xfid_cli, NCU / "nsight_bfs_graph4096.log")
    assert len(recs) == 585 and {r["op"] for r in recs} == {"Kernel", "Kernel2"}
    assert {r["target"] for r in recs} == {"v100-sxm2"} and {r["workload"] for r in recs} == {"rodinia-bfs/graph4096"}
    assert len([r for r in recs if r["metric"] == "latency"]) == 13
    lat = pick(recs, "Kernel2", "latency", "line 22")  # "Duration","nsecond","4672"
    assert lat["value"] == pytest.approx(4672e-9, rel=1e-15) and lat["unit"] == "s"
    assert lat["hardware"] is None and lat["config"] is None and lat["software"] == "ncu --csv"
    assert pick(recs, "Kernel", "latency", "line 74")["value"] == pytest.approx(10048e-9, rel=1e-15)  # ID 1
    assert pick(recs, "Kernel2", "latency", "line 646")["value"] == pytest.approx(4224e-9, rel=1e-15)  # ID 12
    assert pick(recs, "Kernel2", "cycles", "line 19")["value"] == 4760
    assert pick(recs, "Kernel2", "utilization", "line 25")["value"] == pytest.approx(0.0018, rel=1e-15)  # "SM [%]"
    f = pick(recs, "Kernel2", "ncu:memory_frequency", "line 17")  # cycle/second
    assert f["value"] == 681506849.32 and f["unit"] == "Hz"
    bw = pick(recs, "Kernel2", "ncu:memory_throughput", "line 32")  # byte/second
    assert bw["value"] == 5986301369.86 and bw["unit"] == "B/s"
    assert pick(recs, "Kernel2", "ncu:l2_hit_rate", "line 35")["value"] == pytest.approx(0.8391, rel=1e-15)
    assert pick(recs, "Kernel2", "ncu:achieved_occupancy", "line 66")["value"] == pytest.approx(0.2301, rel=1e-15)
    assert pick(recs, "Kernel2", "ncu:block_size", "line 53")["value"] == 512  # empty unit
    assert "skipped line 27: Executed Ipc Active: unit 'inst/cycle' is not one xfid converts" in out
    assert "skipped line 57: Dynamic Shared Memory Per Block: unit 'byte/block' is not one xfid converts" in out


@pytest.mark.parametrize(("row", "message"), [
    # a 2025 metric row cut before its value: 14 fields + trailing comma
    ('"0","1","p","h","k","1","7","(1, 1, 1)","(1, 1, 1)","0","10.0","S","Duration","ns",',
     "line 3: expected 20 fields, got 15"),
    # a field missing in the middle: read by position it would be shifted, so it is refused
    ('"0","1","p","h","k","1","7","(1, 1, 1)","(1, 1, 1)","0","10.0","S","Duration","406240","","","",""',
     "line 3: expected 20 fields, got 18"),
    ('"0","1","p","h","k","1","7","(1, 1, 1)","(1, 1, 1)","0","10.0","S","Duration","ns","406240","x",',
     "line 3: expected 20 fields, got 17"),
])
def test_ncu_2025_short_rows_that_lack_a_field(xfid_cli, tmp_path, row, message):
    head = HEADER + ',"Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"'
    good = '"0","1","p","h","k","1","7","(1, 1, 1)","(1, 1, 1)","0","10.0","S","Elapsed Cycles","cycle","5",'
    f = tmp_path / "short.csv"
    f.write_text(f"{head}\n{good}\n{row}\n")
    r = xfid_cli("ingest", f, *CTX)
    assert r.exit_code == 2 and message in r.output, r.output


@pytest.mark.parametrize("name", ["h100_decode_long.csv", "h100_prefill_raw.csv", "a100_ncu2020_long.csv",
                                  "cublaslt_ncu.log", "nsight_bfs_graph4096.log"])
def test_sniff_only_ncu(name):
    assert sniff_all(NCU / name) == ["ncu"]
    assert detect(NCU / name) is NcuAdapter


def test_sniff_rejects_other_csvs():
    assert not NcuAdapter.sniff(Path("x.csv"), b"Time (%),Total Time (ns),Instances,Avg (ns),Name\n")
    assert not NcuAdapter.sniff(Path("x.csv"), b'"ID","Name","Value"\n')


def test_raw_metric_wins_over_details_name_and_read_write_sum(xfid_cli, tmp_path):
    f = tmp_path / "mix.csv"
    f.write_text("\n".join([
        HEADER,
        long_row(0, "k", "GPU Speed Of Light Throughput", "Duration", "usecond", "10.00"),
        long_row(0, "k", "Command line profiler metrics", "gpu__time_duration.sum", "nsecond", "10,016"),
        long_row(0, "k", "Command line profiler metrics", "dram__bytes_read.sum", "Kbyte", "1.50"),
        long_row(0, "k", "Command line profiler metrics", "dram__bytes_write.sum", "byte", "500"),
    ]) + "\n")
    recs, out = rows(xfid_cli, f, *CTX)
    assert pick(recs, "k", "latency")["value"] == pytest.approx(10016e-9)
    assert pick(recs, "k", "latency")["source_loc"] == "line 3"
    b = pick(recs, "k", "bytes")
    assert b["value"] == 2000 and b["source_loc"] == "line 4 + line 5"
    assert "skipped line 2: 'Duration' repeats gpu__time_duration.sum (line 3)" in out


def test_target_and_workload_come_from_context(xfid_cli, tmp_path):
    f = tmp_path / "k.csv"
    f.write_bytes((NCU / "h100_prefill_raw.csv").read_bytes())
    r = xfid_cli("ingest", f)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}: no target: Nsight Compute CSVs do not name")


def _cut_mid_row(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:30]) + '","'.join(lines[30].split('","')[:5]) + '"'  # cut after the 5th field


BAD = [
    ("truncated", lambda t: _cut_mid_row(t), "line 31: expected 20 fields, got 5 (every row needs one field per "
     "header column; the file may be truncated)"),
    ("cut in a quoted name", lambda t: t[: t.index('"127.0.0.1","ampere_fp16') + 30],
     "line 29: the file ends inside a quoted field (truncated?)"),
    ("preamble only", lambda t: "".join(t.splitlines(keepends=True)[:6]),
     "line 6: the file ends before the Nsight Compute CSV header (truncated?)"),
    ("header only", lambda t: "".join(t.splitlines(keepends=True)[:7]), "line 7: no metric rows after the header"),
    ("wrong header", lambda t: t.replace('"Metric Unit",', '"Unit",', 1), "line 7: the header has 'Metric Name' but no 'Metric Unit' column"),
    ("field count", lambda t: t.replace('"Elapsed Cycles","cycle",', '"Elapsed Cycles",', 1), "line 10: expected 20 fields, got 19"),
    ("non-numeric", lambda t: t.replace('"694.56"', '"fast"', 1), "line 13: Duration value 'fast' is not a number"),
    ("wrong unit", lambda t: t.replace('"Duration","usecond"', '"Duration","cycle"', 1),
     "line 13: unit 'cycle' (cycles) does not belong to metric 'latency'"),
    ("empty file", lambda t: "", "the file is empty"),
]


@pytest.mark.parametrize(("case", "edit", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_ncu_input(xfid_cli, tmp_path, snapshot, case, edit, message):
    assert xfid_cli("ingest", NCU / "a100_ncu2020_long.csv").exit_code == 0
    f = tmp_path / "bad.csv"
    f.write_text(edit((NCU / "h100_decode_long.csv").read_text()))
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "ncu", *CTX)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}"), r.output
    assert message in r.output, r.output
    assert snapshot(xfid_cli.store) == before


@pytest.mark.parametrize(("other", "message"), [
    ("nsys/h100_decode_kern_sum.csv", "line 3: not a Nsight Compute CSV header: 'Time (%),Total Time (ns),Instances,"),
    ("vllm/h100_llama3-8b_decode_bs8.json", "line 1: not a Nsight Compute CSV header: '{'"),
])
def test_other_format_with_explicit_adapter(xfid_cli, snapshot, other, message):
    f = NCU.parent / other
    assert xfid_cli("ingest", NCU / "a100_ncu2020_long.csv").exit_code == 0
    before = snapshot(xfid_cli.store)
    r = xfid_cli("ingest", f, "--adapter", "ncu", *CTX)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {f}, {message}"), r.output
    assert "ncu --csv" in r.output  # the fix names the export command
    assert snapshot(xfid_cli.store) == before


def test_raw_page_without_units_row(xfid_cli, tmp_path):
    lines = (NCU / "h100_prefill_raw.csv").read_text().splitlines(keepends=True)
    f = tmp_path / "raw.csv"
    f.write_text("".join(lines[:3] + lines[4:]))
    r = xfid_cli("ingest", f, "--adapter", "ncu", *CTX)
    assert r.exit_code == 2 and "line 4: expected the units row of `--page raw` (empty ID), got ID '0'" in r.output


def test_dram_part_with_a_non_byte_unit(xfid_cli, tmp_path):
    f = tmp_path / "mix.csv"
    f.write_text("\n".join([
        HEADER,
        long_row(0, "k", "Command line profiler metrics", "dram__bytes_read.sum", "%", "1.50"),
        long_row(0, "k", "Command line profiler metrics", "dram__bytes_write.sum", "byte", "500"),
    ]) + "\n")
    r = xfid_cli("ingest", f, "--adapter", "ncu", *CTX)
    assert r.exit_code == 2 and f"Error: {f}, line 2: dram__bytes_read.sum: unit '%' (ratio) does not belong" in r.output
