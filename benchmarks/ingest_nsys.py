"""Benchmark: ingest a 2M-row `nsys stats cuda_gpu_trace` CSV vs a bare `pyarrow.csv.read_csv`.

Usage: python benchmarks/ingest_nsys.py [--rows 2000000] [--runs 3]

Each phase runs in its own subprocess (so the baseline and xfid never share a peak RSS); the
figures are medians over the runs. Goal: xfid within 2x of the bare read, peak RSS under 1 GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAMES = [
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn",
    "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, "
    "Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t>>, false, false, false, false, true, true, false, false>"
    "(Flash_fwd_params)",
    "void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(c10::BFloat16 *, const c10::BFloat16 *, "
    "const c10::BFloat16 *, float, int, int)",
    "void at::native::(anonymous namespace)::elementwise_kernel<128, 2, void at::native::gpu_kernel_impl<"
    "at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::"
    "MulFunctor<float>>>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "[CUDA memcpy Host-to-Device]",
]
PREAMBLE = ("Generating SQLite file /tmp/bench.sqlite from /tmp/bench.nsys-rep\n"
            "Processing [/tmp/bench.sqlite] with [/opt/nvidia/nsight-systems/2024.5.1/host-linux-x64/"
            "reports/cuda_gpu_trace.py]... \n")


def generate(path: Path, rows: int, seed: int = 1) -> None:
    """Write a `cuda_gpu_trace` CSV of `rows` launches: five kernels and a memcpy every 50th row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv

    rng = np.random.default_rng(seed)
    kind = np.arange(rows) % (len(NAMES) - 1)
    memcpy = np.arange(rows) % 50 == 49  # one memcpy (with Bytes/Throughput) per 50 rows
    kind[memcpy] = len(NAMES) - 1
    dur = (rng.integers(2_000, 120_000, rows)).astype(np.int64)
    start = 1_061_203_114 + np.cumsum(dur + 2_000)

    def grid(values):
        a = np.asarray(values, dtype=np.int64)[kind]
        return pa.array(a, mask=memcpy)

    name = pa.DictionaryArray.from_arrays(pa.array(kind.astype(np.int32)), pa.array(NAMES)).cast(pa.string())
    table = pa.table({
        "Start (ns)": start, "Duration (ns)": dur, "CorrId": np.arange(rows) + 1120,
        "GrdX": grid([132, 16, 8, 1024, 16, 0]), "GrdY": grid([1, 32, 1, 1, 32, 0]), "GrdZ": grid([1, 8, 1, 1, 1, 0]),
        "BlkX": grid([256, 128, 1024, 128, 128, 0]), "BlkY": grid([1, 1, 1, 1, 1, 0]), "BlkZ": grid([1, 1, 1, 1, 1, 0]),
        "Reg/Trd": grid([232, 255, 26, 20, 230, 0]),
        "StcSMem (MB)": pa.array(np.zeros(rows), mask=memcpy), "DymSMem (MB)": pa.array(np.full(rows, 0.197), mask=memcpy),
        "Bytes (MB)": pa.array(np.full(rows, 16.777), mask=~memcpy),
        "Throughput (MB/s)": pa.array(16.777e6 / dur, mask=~memcpy),
        "SrcMemKd": pa.array(np.where(memcpy, "Pageable", "")), "DstMemKd": pa.array(np.where(memcpy, "Device", "")),
        "Device": pa.array(["NVIDIA H100 80GB HBM3 (0)"] * rows), "Ctx": np.ones(rows, dtype=np.int64),
        "GreenCtx": pa.nulls(rows, pa.int64()), "Strm": np.full(rows, 7), "Name": name,
    })
    with open(path, "wb") as f:
        f.write(PREAMBLE.encode())
        f.write((",".join(table.column_names) + "\n").encode())  # nsys writes the header unquoted
        pcsv.write_csv(table, f, pcsv.WriteOptions(include_header=False, quoting_style="needed", batch_size=1 << 16))


def phase(kind: str, path: Path, block_mb: float | None = None) -> dict[str, float]:
    """One measured phase, in this (child) process: seconds and peak RSS."""
    if kind == "pyarrow":
        import pyarrow.csv as pcsv

        t0 = time.perf_counter()
        table = pcsv.read_csv(path, read_options=pcsv.ReadOptions(skip_rows=PREAMBLE.count("\n")))
        secs = time.perf_counter() - t0
        rows = table.num_rows
    else:
        from xfid.adapters import nvcsv
        from xfid.ingest import IngestOptions, ingest
        from xfid.store import Store

        if block_mb:
            nvcsv.BLOCK_BYTES = int(block_mb * (1 << 20))

        with tempfile.TemporaryDirectory() as d, Store(Path(d) / "store") as store:
            opts = IngestOptions(adapter="nsys", target="h100-sxm", workload="llama3-8b/decode/bs8/ctx2048/bf16")
            t0 = time.perf_counter()
            report = ingest(store, [path], opts)
            secs = time.perf_counter() - t0
            rows = report.rows
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"seconds": secs, "rss_mb": ru.ru_maxrss / 1024, "rows": rows, "cpu_s": ru.ru_utime + ru.ru_stime}


def run_child(kind: str, path: Path, block_mb: float | None) -> dict[str, float]:
    extra = ["--block-mb", str(block_mb)] if block_mb else []
    out = subprocess.run([sys.executable, __file__, "--phase", kind, str(path), *extra], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--block-mb", type=float, help="pyarrow CSV block size for xfid (default: the adapter's)")
    ap.add_argument("--phase", choices=["pyarrow", "xfid"], help=argparse.SUPPRESS)
    ap.add_argument("path", nargs="?", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.phase:
        print(json.dumps(phase(a.phase, Path(a.path), a.block_mb)))
        return
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cuda_gpu_trace.csv"
        t0 = time.perf_counter()
        generate(path, a.rows)
        print(f"generated {a.rows:,} rows, {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s")
        res: dict[str, list[dict[str, float]]] = {"pyarrow": [], "xfid": []}
        for i in range(a.runs):
            for kind in res:
                r = run_child(kind, path, a.block_mb)
                res[kind].append(r)
                print(f"  run {i + 1} {kind:<8} {r['seconds']:.2f} s  (process CPU {r['cpu_s']:.1f} s)  peak RSS {r['rss_mb']:.0f} MB  ({int(r['rows']):,} rows)")
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("seconds", "rss_mb", "cpu_s")} for k, v in res.items()}
    base, ours = med["pyarrow"], med["xfid"]
    ratio = ours["seconds"] / base["seconds"]
    print(f"pyarrow.csv.read_csv : {base['seconds']:.2f} s  {a.rows / base['seconds'] / 1e6:.2f} M rows/s  "
          f"peak RSS {base['rss_mb']:.0f} MB")
    print(f"xfid ingest (nsys)   : {ours['seconds']:.2f} s  {a.rows / ours['seconds'] / 1e6:.2f} M input rows/s  "
          f"peak RSS {ours['rss_mb']:.0f} MB")
    print(f"process CPU (user+sys, incl. imports): pyarrow {base['cpu_s']:.1f} s, xfid {ours['cpu_s']:.1f} s "
          f"({ours['cpu_s'] / base['cpu_s']:.2f}x)")
    print(f"ratio xfid / pyarrow : {ratio:.2f}x  (goal <= 2x: {'met' if ratio <= 2 else 'NOT met'}; "
          f"RSS goal < 1024 MB: {'met' if ours['rss_mb'] < 1024 else 'NOT met'})  median of {a.runs}")


if __name__ == "__main__":
    main()
