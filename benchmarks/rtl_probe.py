"""Benchmark: the rtl_hooks probe's overhead on the dma block, against bare cocotb testbenches.

Run: `python benchmarks/rtl_probe.py [--rounds 41] [--ops 30]` (short ops, ~190 cycles), or
`python benchmarks/rtl_probe.py --param BYTES_PER_CYCLE=1 --sizes 4096` (long ops, ~4100
cycles). The script builds the dma block (cached under build/rtl), then runs this same file
as a cocotb test module. In one simulation it times, per round and in turn, the same sweep
of DMA transfers waited for in three ways:

  timer   the bare baseline: start, one `Timer` of the op's known length, no probe;
  edge    start, one `RisingEdge(dut.done)`, no probe (how the example testbenches wait);
  probe   `edge` inside `rtl_hooks.probe(...)` with two counters; the sweep's timing ends
          after `rtl_hooks.flush()`, so encoding and writing its JSON lines is counted too.

Rounds are short and the order of the three rotates each round, so load from other
processes hits all three alike; every figure is a median over rounds of a ratio or
difference taken within the round (paired), with the interquartile range beside it.
The overhead is probe/edge - 1: the same block and sweep with and without the probe.

Per op the probe costs a few microseconds against a few hundred of simulation, so under
load the paired difference above is noisy. Each round therefore also times the probe alone:

  tight   `--tight` ops of `with rtl_hooks.probe(...): pass` (same two counters, real
          handles, no await) and one flush: the probe's own cost per op (entry, exit,
          encoding, writing), with the simulator idle. Its minimum over rounds is the
          figure least disturbed by other processes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SIZES = tuple(int(x) for x in os.environ.get("BENCH_SIZES", "256,1024,4096").split(","))
CLOCK_NS = 10


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


try:  # the cocotb side: only defines tests when imported by the simulator
    import cocotb
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles, RisingEdge, Timer
except ImportError:  # pragma: no cover - cocotb is an xfid dependency
    cocotb = None

if cocotb is not None:

    async def _start(dut, nbytes: int) -> None:
        dut.src_beat.value, dut.dst_beat.value, dut.length.value, dut.salt.value = 0, 0, nbytes, 1
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0

    async def _sweep(dut, mode: str, ops: int, known: dict[int, int]) -> tuple[float, int]:
        import rtl_hooks

        cyc0 = int(dut.cycle_count.value)
        t0 = time.perf_counter()
        for i in range(ops):
            n = SIZES[i % len(SIZES)]
            if mode == "timer":
                await _start(dut, n)
                await Timer(known[n] * CLOCK_NS, unit="ns")
            elif mode == "edge":
                await _start(dut, n)
                await RisingEdge(dut.done)
            else:
                with rtl_hooks.probe(dut, op=f"dma[bytes={n}]",
                                     counters={"bytes": dut.bytes_moved, "stall_cycles": dut.stall_cycles}):
                    await _start(dut, n)
                    await RisingEdge(dut.done)
        if mode == "probe":
            rtl_hooks.flush()  # the deferred encoding and writing belongs to the probe's cost
        wall = time.perf_counter() - t0
        return wall, (int(dut.cycle_count.value) - cyc0) % (1 << 32)

    def _tight(dut, ops: int) -> float:
        """Seconds per op of the probe alone: entry and exit around nothing, then one flush."""
        import rtl_hooks

        counters = {"bytes": dut.bytes_moved, "stall_cycles": dut.stall_cycles}
        t0 = time.perf_counter()
        for i in range(ops):
            with rtl_hooks.probe(dut, op=f"dma[bytes={SIZES[i % len(SIZES)]}]", counters=counters):
                pass
        rtl_hooks.flush()
        return (time.perf_counter() - t0) / ops

    @cocotb.test()
    async def bench_probe_overhead(dut):
        """Time the three ways of waiting, interleaved per round."""
        rounds, ops, tight = _env_int("BENCH_ROUNDS", 41), _env_int("BENCH_OPS", 30), _env_int("BENCH_TIGHT", 300)
        cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
        dut.rst_n.value = 0
        dut.start.value = 0
        await ClockCycles(dut.clk, 2)
        dut.rst_n.value = 1
        await RisingEdge(dut.clk)
        known = {}
        for n in SIZES:  # each op's length, for the Timer baseline (+1 cycle for the start edge)
            c0 = int(dut.cycle_count.value)
            await _start(dut, n)
            await RisingEdge(dut.done)
            known[n] = int(dut.cycle_count.value) - c0 + 1
        order = ["timer", "edge", "probe"]
        for mode in order:  # warm-up
            await _sweep(dut, mode, max(ops // 4, 1), known)
        _tight(dut, max(tight // 4, 1))
        res: dict[str, list[tuple[float, int]]] = {m: [] for m in order}
        alone: list[float] = []
        for i in range(rounds):
            for mode in order[i % 3:] + order[:i % 3]:  # rotate who goes first
                res[mode].append(await _sweep(dut, mode, ops, known))
            alone.append(_tight(dut, tight))
        Path(os.environ["BENCH_OUT"]).write_text(json.dumps({"sweeps": res, "tight": alone}))


def main(argv: list[str] | None = None) -> None:
    """Build, run the cocotb benchmark in one simulation, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--ops", type=int, default=30, help="ops per sweep")
    ap.add_argument("--tight", type=int, default=300, help="ops per round of the probe alone (no await)")
    ap.add_argument("--sizes", default="256,1024,4096", help="DMA transfer sizes in bytes, cycled through")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="dma parameter override")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    from rtl_hooks.runner import run_block

    with tempfile.TemporaryDirectory() as tmp:
        bench_out = Path(tmp) / "bench.json"
        t0 = time.perf_counter()
        params = dict(p.split("=", 1) for p in args.param)
        res = run_block("dma", params, out=Path(tmp) / "probe.jsonl", build_root=root / "build" / "rtl",
                        test_module="rtl_probe", tests_dir=Path(__file__).resolve().parent,
                        extra_env={"BENCH_OUT": str(bench_out), "BENCH_ROUNDS": str(args.rounds),
                                   "BENCH_SIZES": args.sizes, "BENCH_TIGHT": str(args.tight),
                                   "BENCH_OPS": str(args.ops)})
        total = time.perf_counter() - t0
        if res.failed or not bench_out.is_file():
            sys.exit(f"benchmark simulation failed; see {res.build_dir / 'sim.log'}")
        got = json.loads(bench_out.read_text())
        data, alone_us = got["sweeps"], [s * 1e6 for s in got["tight"]]
        n_records = res.records
    rate = {m: [c / w for w, c in v] for m, v in data.items()}
    wall = {m: [w for w, _ in v] for m, v in data.items()}
    ratios = [p / e - 1 for p, e in zip(wall["probe"], wall["edge"], strict=True)]
    per_op_us = [(p - e) / args.ops * 1e6 for p, e in zip(wall["probe"], wall["edge"], strict=True)]
    vs_timer = [p / t for p, t in zip(rate["probe"], rate["timer"], strict=True)]
    edge_vs_timer = [e / t for e, t in zip(rate["edge"], rate["timer"], strict=True)]
    cyc = data["probe"][0][1]
    print(f"dma block ({' '.join(f'{k}={v}' for k, v in res.params.items())}), sizes {args.sizes} B")
    print(f"simulator {res.simulator}, {args.rounds} rounds x {args.ops} ops "
          f"({cyc} simulated cycles per sweep, {cyc / args.ops:.0f} per op), "
          f"run {'rebuilt' if res.rebuilt else 'cached'} in {total:.1f} s")
    print(f"{'wait style':<34} {'median cycles/s':>16} {'min..max':>22}")
    names = {"timer": "bare: one Timer per op", "edge": "bare: RisingEdge(done) per op",
             "probe": "probe + RisingEdge(done) per op"}
    for m in ("timer", "edge", "probe"):
        r = rate[m]
        print(f"{names[m]:<34} {statistics.median(r):>16,.0f} {min(r):>10,.0f}..{max(r):<10,.0f}")
    print(f"probe overhead vs edge (per-round, paired): median {statistics.median(ratios):+.1%} "
          f"(IQR {_q(ratios, 1):+.1%}..{_q(ratios, 3):+.1%})")
    print(f"probe cost per op (per-round, paired): median {statistics.median(per_op_us):.1f} us "
          f"(IQR {_q(per_op_us, 1):.1f}..{_q(per_op_us, 3):.1f}); "
          f"bare op: {statistics.median(wall['edge']) / args.ops * 1e6:.0f} us")
    print(f"probe cycles/s vs the bare Timer testbench (per-round): median {statistics.median(vs_timer):.2f}x "
          f"(bare edge vs Timer: {statistics.median(edge_vs_timer):.2f}x)")
    print(f"probe alone per op (enter+exit+encode+write, no await, {args.tight} ops x {args.rounds} rounds): "
          f"median {statistics.median(alone_us):.2f} us (IQR {_q(alone_us, 1):.2f}..{_q(alone_us, 3):.2f}), "
          f"min {min(alone_us):.2f} us")
    print(f"probe records written: {n_records}")


def _q(xs: list[float], k: int) -> float:
    """The k-th quartile (1 or 3) of xs."""
    return statistics.quantiles(xs, n=4)[k - 1]

if __name__ == "__main__":
    main()
