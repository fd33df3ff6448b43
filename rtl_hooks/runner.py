"""Build and run a T100 block's cocotb testbench on cocotb_tools.runner (a tool: it imports xfid)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtl_hooks.inspect import get_module, resolve_params
from rtl_hooks.probe import ENV_BLOCK, ENV_CLOCK_NS, ENV_OUT, ENV_PARAMS, ENV_SOURCES, ENV_TARGET
from rtl_hooks.simulators import SIMULATORS, Simulator, find_simulator
from xfid.errors import RTLError

__all__ = ["SIMULATORS", "RunResult", "Simulator", "build_key", "find_block", "find_simulator", "fixtures_dir",
           "run_block", "sha256_file"]

BUILD_STAMP = ".xfid-build-ok"
RUNS = "runs"
"""A build dir's folder of runs: each run's results.xml, sim.log and default probe file in its own folder."""
RUN_KEEP_S = 24 * 3600
"""A run folder older than this is removed when a later run of the same build starts."""


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass
class RunResult:
    """Where a run's outputs are and what it ran."""

    block: str
    simulator: str
    params: dict[str, int]
    build_dir: Path
    out: Path
    results_xml: Path
    tests: int = 0
    failed: int = 0
    records: int = 0
    rebuilt: bool = False
    sources: dict[str, str] = field(default_factory=dict)


def fixtures_dir() -> Path:
    """The bundled example blocks: `fixtures/rtl` beside the installed package."""
    return Path(__file__).resolve().parent.parent / "fixtures" / "rtl"


def find_block(block: str | Path) -> Path:
    """A block directory: a path to one, or a name under fixtures/rtl.

    Raises:
        RTLError: neither exists; the message lists the bundled blocks.
    """
    p = Path(block)
    if p.is_dir() and (p / "hdl").is_dir():
        return p.resolve()
    cand = fixtures_dir() / str(block)
    if cand.is_dir() and (cand / "hdl").is_dir():
        return cand
    known = sorted(d.name for d in fixtures_dir().glob("*") if (d / "hdl").is_dir())
    raise RTLError(f"unknown RTL block {str(block)!r}; bundled blocks: {', '.join(known) or 'none'} "
                   "(or pass a path to a directory with hdl/ and tests/)")


@contextlib.contextmanager
def _environment(path_dirs: list[str], env: Mapping[str, str], sys_path: list[str]) -> Iterator[None]:
    """PATH first entries, env vars and sys.path entries for the runner, restored afterwards.

    cocotb's runner copies os.environ and sets PYTHONPATH from sys.path, so this is how values
    reach the simulator. PYTEST_CURRENT_TEST is hidden so a failed cocotb test is data to record,
    not a sys.exit.
    """
    saved = dict(os.environ)
    saved_path = list(sys.path)
    try:
        os.environ["PATH"] = os.pathsep.join([*path_dirs, os.environ.get("PATH", "")])
        os.environ.pop("PYTEST_CURRENT_TEST", None)
        os.environ.update(env)
        sys.path[:0] = [p for p in sys_path if p not in sys.path]
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        sys.path[:] = saved_path


@contextlib.contextmanager
def _locked(build_dir: Path) -> Iterator[None]:
    """One build or simulation at a time per build dir (the build and its stamp are shared)."""
    import fcntl

    with open(build_dir / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_key(sources: dict[str, str], params: Mapping[str, int], sim: Simulator, top: str) -> str:
    """The cache key of a build: source hashes, parameters, simulator and version, toplevel."""
    blob = json.dumps({"src": sources, "p": dict(params), "sim": sim.name, "v": sim.version, "top": top},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_block(block: str | Path, params: Mapping[str, str | int] | None = None, *, sim: str | None = None,
              out: str | Path | None = None, build_root: str | Path | None = None, seed: int | None = None,
              target: str | None = None, testcase: str | None = None, clock_ns: float = 10.0,
              test_module: str | None = None, tests_dir: str | Path | None = None,
              extra_env: Mapping[str, str] | None = None) -> RunResult:
    """Build (cached) and run a block's cocotb testbench; the probe writes JSON lines to `out`.

    Args:
        block: a name under fixtures/rtl, or a block directory (hdl/*.v, tests/test_<name>.py).
        params: Verilog parameter overrides (names exactly as in the top module).
        sim: a name in rtl_hooks.simulators.SIMULATORS (verilator, icarus); default the first found.
        out: the probe's JSON-lines file (replaced); default xfid_rtl.jsonl in the run's folder.
        build_root: where build dirs go (default ./build/rtl); one per (sources, parameters, simulator).
            Each run writes its results.xml and sim.log (and the default probe file) to its own
            folder <build dir>/runs/<UTC time>-<pid>-<random>, so runs of one build at the same
            time (two users, parallel tests) never read each other's files; run folders older
            than a day are removed when a later run starts.
        seed: cocotb's random seed.
        target: the target recorded by the probe (the adapter's default is t100-a0).
        testcase: run only tests whose names end with this.
        clock_ns: the testbench clock period, for probes without an RTL cycle counter.
        test_module, tests_dir: another cocotb test module (and its folder) to run instead of
            the block's tests/test_<block>.py (benchmarks use this).
        extra_env: more environment variables for the testbench.

    Raises:
        RTLError: unknown block/parameter/simulator, no top module, a build that fails (with
            the log's error lines), or a simulation that leaves no results.xml.
    """
    bdir = find_block(block)
    name = bdir.name
    hdl = sorted([*bdir.joinpath("hdl").glob("*.v"), *bdir.joinpath("hdl").glob("*.sv")])
    if not hdl:
        raise RTLError(f"{bdir / 'hdl'}: no Verilog sources (*.v, *.sv)")
    top_file = next((f for f in hdl if f.stem == name), None)
    if top_file is None:
        raise RTLError(f"{bdir / 'hdl'}: no {name}.v holding the top module {name!r} (name the file after the block)")
    mod = get_module(top_file, name)
    resolved = resolve_params(mod, dict(params or {}))
    tests = Path(tests_dir).resolve() if tests_dir else bdir / "tests"
    module = test_module or f"test_{name}"
    test_file = tests / f"{module}.py"
    if not test_file.is_file():
        raise RTLError(f"{test_file}: no cocotb testbench for block {name!r}")
    simulator = find_simulator(sim)
    sources = {str(f.relative_to(bdir)): sha256_file(f) for f in hdl}
    root = Path(build_root) if build_root else Path.cwd() / "build" / "rtl"
    build_dir = (root / build_key(sources, resolved, simulator, name)).resolve()
    run_dir = _new_run_dir(build_dir)
    out_path = Path(out).resolve() if out else run_dir / "xfid_rtl.jsonl"
    results = run_dir / "results.xml"
    sim_log = run_dir / "sim.log"
    env = {ENV_OUT: str(out_path), ENV_BLOCK: name, ENV_PARAMS: json.dumps(resolved),
           ENV_SOURCES: json.dumps(sources), ENV_CLOCK_NS: str(clock_ns)}
    if target:
        env[ENV_TARGET] = target
    env.update(extra_env or {})
    from cocotb_tools.runner import get_runner

    result = RunResult(name, simulator.name, resolved, build_dir, out_path, results, sources=sources)
    with _locked(build_dir), _environment(simulator.path_dirs, env, [str(tests), str(Path(__file__).resolve().parent.parent)]):
        runner = get_runner(simulator.name)
        if not simulator.reuse_build or not (build_dir / BUILD_STAMP).exists():
            _build(runner, simulator, hdl, name, resolved, build_dir)
            result.rebuilt = True
        _prune_runs(build_dir, keep=run_dir)
        out_path.unlink(missing_ok=True)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        # a failing simulator is a sys.exit or RuntimeError in cocotb's runner; results.xml (if any)
        # says what happened, else the error below quotes sim.log
        with contextlib.suppress(SystemExit, RuntimeError):
            runner.test(test_module=module, hdl_toplevel=name, hdl_toplevel_lang="verilog", build_dir=build_dir,
                        test_dir=run_dir, results_xml=str(results), seed=seed, testcase=testcase,
                        parameters=resolved, log_file=sim_log)
    if not results.is_file():
        raise RTLError(f"simulation of {name} left no results.xml; see {sim_log}:\n" + _tail(sim_log))
    from xfid.adapters.cocotb import read_results

    cases = read_results(results)
    result.tests = len(cases)
    result.failed = sum(1 for c in cases if c.status in ("failed", "error"))
    result.records = sum(1 for line in out_path.read_text().splitlines() if line.strip()) if out_path.is_file() else 0
    return result


def _new_run_dir(build_dir: Path) -> Path:
    """A new, empty folder for one run under <build dir>/runs (created with the build dir)."""
    import secrets
    import time

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    runs = build_dir / RUNS
    runs.mkdir(parents=True, exist_ok=True)
    while True:
        d = runs / f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}"
        with contextlib.suppress(FileExistsError):
            d.mkdir()
            return d


def _prune_runs(build_dir: Path, keep: Path) -> None:
    """Remove the run folders older than RUN_KEEP_S (not `keep`); one that cannot be removed stays."""
    import shutil
    import time

    cutoff = time.time() - RUN_KEEP_S
    for d in (build_dir / RUNS).iterdir():
        with contextlib.suppress(OSError):
            if d != keep and d.is_dir() and not d.is_symlink() and d.stat().st_mtime < cutoff:
                shutil.rmtree(d)


def _build(runner: Any, sim: Simulator, hdl: list[Path], top: str, params: Mapping[str, int],
           build_dir: Path) -> None:
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / "build.log"
    try:
        runner.build(sources=hdl, hdl_toplevel=top, parameters=dict(params), build_dir=build_dir,
                     build_args=list(sim.build_args), timescale=sim.timescale, log_file=log, always=True)
    except (RuntimeError, subprocess.CalledProcessError, SystemExit) as e:
        raise RTLError(f"building {top} failed ({e}); see {log}:\n{_tail(log)}") from None
    (build_dir / BUILD_STAMP).write_text(json.dumps(dict(params)))


def _tail(log: Path, n: int = 15) -> str:
    if not log.is_file():
        return "(no log)"
    lines = log.read_text(errors="replace").splitlines()
    errs = [ln for ln in lines if "%Error" in ln or "error" in ln.lower()]
    return "\n".join((errs or lines)[-n:])
